//! Backend-equivalence checking: every primitive of a [`Backend`] against the
//! scalar f64 [`ReferenceBackend`] on generated traces.
//!
//! [`Backend`] (in [`crate::backend`], re-exported here) is the seam for further
//! implementations (a CUDA backend next to [`CpuBackend`]): one trait, every
//! primitive, and one [`run_check`] that holds each of them to the same
//! reference with the same tolerances.

use nmpsim_traces::{BagSize, Distribution, TableBatch, TableSpec, generate_table_batch};
use rayon::iter::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator};
use serde::{Deserialize, Serialize};

use crate::coalesce::Coalesced;
use crate::error::KernelError;
use crate::gather::Expanded;
use crate::optimizer::{Optimizer, OptimizerState};
use crate::pooling::Pooling;
use crate::table::{EmbeddingTable, SplitMix64, fill_uniform};
use crate::traffic::Traffic;

pub use crate::backend::{Backend, CpuBackend, ReferenceBackend};

/// What `nmpsim kernels check` runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckConfig {
    pub tables: usize,
    pub batch_size: usize,
    /// Lookups per bag (fixed).
    pub bag_size: u32,
    pub rows: u64,
    pub dim: usize,
    pub distribution: Distribution,
    pub pooling: Pooling,
    pub seed: u64,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            tables: 4,
            batch_size: 1024,
            bag_size: 20,
            rows: 100_000,
            dim: 64,
            distribution: Distribution::Zipf {
                alpha: 1.05,
                scatter: true,
            },
            pooling: Pooling::Sum,
            seed: 1,
        }
    }
}

/// One primitive's verdict for one backend, worst over all tables.
#[derive(Debug, Clone, Serialize)]
pub struct PrimitiveCheck {
    pub primitive: String,
    /// Worst over rows of `max_k |x_k - ref_k| / max_k |ref_k|` (row-wise
    /// relative error); infinite (JSON `null`) on a structural mismatch.
    pub worst_rel_err: f64,
    pub tolerance: f64,
    pub ok: bool,
    /// The first failure's explanation, if any.
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BackendCheck {
    pub backend: String,
    pub primitives: Vec<PrimitiveCheck>,
    pub ok: bool,
}

/// Analytic traffic of each primitive, summed over the tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TrafficBreakdown {
    pub lookups: u64,
    pub unique_rows: u64,
    pub gather_reduce: Traffic,
    pub expand: Traffic,
    pub coalesce_sort: Traffic,
    pub coalesce_accumulate: Traffic,
    pub tensor_cast: Traffic,
    pub casted_gather_reduce: Traffic,
    /// One scatter step with SGD (the check runs two; each moves these bytes).
    pub scatter_sgd: Traffic,
    /// One scatter step with Adagrad.
    pub scatter_adagrad: Traffic,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub config: CheckConfig,
    /// Every backend's verdicts, and `cpu-tt`'s: the TT primitives
    /// (`crate::tt`) against an f64 reference, on TT tables of rank
    /// [`crate::tt::check::CHECK_RANK`] over the same batches.
    pub backends: Vec<BackendCheck>,
    pub traffic: TrafficBreakdown,
    pub ok: bool,
    /// Why the TT primitives were not checked (a dimension with no TT
    /// split), if they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tt_skipped: Option<String>,
}

/// Tolerance of accumulated results (f32 sums vs f64 sums of up to a few
/// thousand terms for a hot Zipf row).
pub const SUM_TOLERANCE: f64 = 1e-4;
/// Tolerance of one optimizer step (a handful of f32 roundings per element).
pub const STEP_TOLERANCE: f64 = 1e-5;

/// Row-wise relative error of `got` against `want` (`dim`-wide rows):
/// `max_k |got_k - want_k| / max(max_k |want_k|, 1% of the array's largest |want|)`.
/// Row-wise, so a cold row is not hidden behind a hot one; floored at 1% of
/// the array's scale, so a row whose terms cancel to about zero does not turn
/// ordinary f32 rounding into a huge relative error.
pub fn row_rel_err(got: &[f32], want: &[f32], dim: usize) -> f64 {
    row_rel_err_scaled(got, want, want, dim)
}

/// The bound on the rounding error of an f32 sum of `n` terms, in any order,
/// relative to the sum of their absolute values: `gamma_n = n u / (1 - n u)`
/// with `u = 2^-24` (Higham, Accuracy and Stability of Numerical
/// Algorithms, 2002, eq. 4.4). Infinite where `n u >= 1`.
pub fn f32_sum_error_bound(n: usize) -> f64 {
    let nu = n as f64 * f64::from(f32::EPSILON) / 2.0;
    if nu >= 1.0 {
        f64::INFINITY
    } else {
        nu / (1.0 - nu)
    }
}

/// [`row_rel_err`] of an accumulated result whose elements are f32 sums of
/// at most `n` terms each: element `k` is first allowed
/// [`f32_sum_error_bound`]`(n) * abs_sum[k]` of difference, where `abs_sum`
/// is the same result computed on the terms' absolute values (their
/// magnitude, which bounds any order's rounding). Only what exceeds that is
/// measured against the row's scale. For the few terms of a bag this changes
/// nothing; for a row looked up hundreds of thousands of times, f32 rounding
/// of a correct sum no longer reads as a mismatch.
pub fn sum_rel_err(got: &[f32], want: &[f32], abs_sum: &[f32], n: usize, dim: usize) -> f64 {
    if abs_sum.len() != want.len() {
        return f64::INFINITY;
    }
    let gamma = f32_sum_error_bound(n);
    row_err(got, want, want, dim, |k| gamma * (abs_sum[k] as f64).abs())
}

/// [`row_rel_err`] with each row's scale (and the 1% floor) taken over both
/// `want` and `terms`, the values it was computed from. For an update
/// `after = before - step`, `terms` is `before`: when the two nearly cancel,
/// f32 rounding is relative to them, not to the small result.
pub fn row_rel_err_scaled(got: &[f32], want: &[f32], terms: &[f32], dim: usize) -> f64 {
    row_err(got, want, terms, dim, |_| 0.0)
}

/// Roundings of a row-wise Adagrad accumulator besides its f32 sum over the
/// row: each square, the division by `dim`, and the two steps' additions to the
/// accumulator (the check runs two steps).
const ROW_WISE_ACCUMULATOR_ROUNDINGS: usize = 4;

/// Row-wise relative error of two steps of row-wise Adagrad against the
/// reference: weights (`got_w` against `want_w`, scaled by `before_w` as in
/// [`row_rel_err_scaled`]) and the one accumulator per row (`got_a` against
/// `want_a`), the larger of the two.
///
/// The accumulator adds `mean_k(g_k^2)`, an f32 sum over the row's `dim`
/// squares (as FBGEMM computes it), where the reference sums in f64. Its terms
/// are non-negative, so its relative rounding is at most
/// `gamma = `[`f32_sum_error_bound`]`(dim + 4)` in any order (the squares, the
/// division and the accumulator's additions are the 4 more roundings): each
/// accumulator first loses `gamma * want_a`. The step `lr / (sqrt(a) + eps)`
/// inherits half of that (the square root) plus a few roundings, within
/// `gamma` again for `dim >= 4`: each weight first loses `gamma` times its
/// update, `|want_w - before_w|`. Only what exceeds that counts. For a few
/// tens of elements per row this changes nothing; for a row of 65536 it is the
/// rounding f32 itself allows the sum.
pub fn row_wise_adagrad_err(
    got_w: &[f32],
    want_w: &[f32],
    before_w: &[f32],
    got_a: &[f32],
    want_a: &[f32],
    dim: usize,
) -> f64 {
    if before_w.len() != want_w.len() {
        return f64::INFINITY;
    }
    let gamma = f32_sum_error_bound(dim.saturating_add(ROW_WISE_ACCUMULATOR_ROUNDINGS));
    let w = row_err(got_w, want_w, before_w, dim, |k| {
        gamma * (want_w[k] as f64 - before_w[k] as f64).abs()
    });
    let a = row_err(got_a, want_a, want_a, 1, |k| {
        gamma * (want_a[k] as f64).abs()
    });
    w.max(a)
}

/// [`row_rel_err_scaled`] where element `k`'s difference first loses
/// `slack(k)` (what [`sum_rel_err`] allows a sum's rounding).
fn row_err(
    got: &[f32],
    want: &[f32],
    terms: &[f32],
    dim: usize,
    slack: impl Fn(usize) -> f64,
) -> f64 {
    if got.len() != want.len() || terms.len() != want.len() || dim == 0 {
        return f64::INFINITY;
    }
    if got.iter().zip(want).any(|(a, b)| a.is_nan() != b.is_nan()) {
        return f64::INFINITY;
    }
    let largest = |v: &[f32]| v.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs()));
    let global = largest(want).max(largest(terms));
    let floor = (0.01 * global).max(f32::MIN_POSITIVE as f64);
    let mut worst = 0.0f64;
    let rows = got.chunks(dim).zip(want.chunks(dim)).zip(terms.chunks(dim));
    for (r, ((g, w), t)) in rows.enumerate() {
        let scale = largest(w).max(largest(t));
        let diff = g
            .iter()
            .zip(w)
            .enumerate()
            .fold(0.0f64, |m, (i, (&a, &b))| {
                if a.is_nan() {
                    m
                } else {
                    m.max((a as f64 - b as f64).abs() - slack(r * dim + i))
                }
            });
        worst = worst.max(diff / scale.max(floor));
    }
    worst
}

/// The per-table inputs of a check: batch, table and output gradient.
pub struct CheckInput {
    pub batch: TableBatch,
    pub table: EmbeddingTable,
    pub grad_out: Vec<f32>,
}

/// Seeds of each table's inputs: (batch, table values, output gradient).
struct InputSeeds(SplitMix64);

impl InputSeeds {
    fn new(config: &CheckConfig) -> Self {
        InputSeeds(SplitMix64::new(config.seed))
    }

    fn next_table(&mut self) -> [u64; 3] {
        [self.0.next_u64(), self.0.next_u64(), self.0.next_u64()]
    }
}

/// Checks `config` and returns the spec every table's batch is drawn from.
fn table_spec(config: &CheckConfig) -> Result<TableSpec, KernelError> {
    crate::error::check_dim(config.dim)?;
    if config.tables == 0 {
        return Err(KernelError::invalid("tables", "0; expected at least 1"));
    }
    Ok(TableSpec {
        rows: config.rows,
        distribution: config.distribution.clone(),
        bag_size: BagSize::Fixed {
            size: config.bag_size,
        },
        weighted: config.pooling == Pooling::WeightedSum,
    })
}

/// Generates the inputs of `config`, one per table, deterministically.
pub fn check_inputs(config: &CheckConfig) -> Result<Vec<CheckInput>, KernelError> {
    let spec = table_spec(config)?;
    let mut seeds = InputSeeds::new(config);
    (0..config.tables)
        .map(|t| {
            let [batch_seed, table_seed, grad_seed] = seeds.next_table();
            let batch = generate_table_batch(&spec, config.batch_size, batch_seed)
                .map_err(|e| KernelError::from(e).in_table(t))?;
            let table = EmbeddingTable::seeded(config.rows, config.dim, table_seed)
                .map_err(|e| e.in_table(t))?;
            let mut grad_out = vec![0.0f32; config.batch_size * config.dim];
            fill_uniform(&mut grad_out, -1.0, 1.0, grad_seed);
            Ok(CheckInput {
                batch,
                table,
                grad_out,
            })
        })
        .collect()
}

/// The analytic traffic of `config`'s workload, as [`run_check`] reports it
/// in [`CheckReport::traffic`], from each table's generated batch alone (its
/// lookups, bags and unique rows) and the rows and dim: no table, gradient
/// or kernel is built or run, so it costs one table's indices at a time,
/// whatever the table's size.
pub fn analytic_traffic(config: &CheckConfig) -> Result<TrafficBreakdown, KernelError> {
    use crate::traffic::{
        casted_gather_reduce_traffic, coalesce_accumulate_traffic, expand_traffic,
        gather_reduce_traffic, scatter_traffic, sort_pairs_traffic, tensor_cast_traffic,
    };
    let spec = table_spec(config)?;
    let (dim, pooling) = (config.dim, config.pooling);
    // Every count is at most a few times lookups x row bytes, summed over
    // the tables: refused where that could overflow u64.
    let lookups = config.tables as u128 * config.batch_size as u128 * config.bag_size as u128;
    if lookups * (dim as u128 + 16) * 16 > u128::from(u64::MAX) {
        return Err(KernelError::invalid(
            "dim",
            format!(
                "{dim}-wide rows for {lookups} lookups ({} tables x batch {} x bag {}): their byte counts overflow 64 bits",
                config.tables, config.batch_size, config.bag_size
            ),
        ));
    }
    let weighted = pooling == Pooling::WeightedSum;
    let mut seeds = InputSeeds::new(config);
    let batch_seeds: Vec<u64> = (0..config.tables).map(|_| seeds.next_table()[0]).collect();
    // Tables in parallel (each from its own seed); the counts are integers,
    // so their sum does not depend on the order they are added in.
    let per_table = batch_seeds
        .par_iter()
        .enumerate()
        .map(|(table, &batch_seed)| {
            let batch = generate_table_batch(&spec, config.batch_size, batch_seed)
                .map_err(|e| KernelError::from(e).in_table(table))?;
            let (n, bags, rows) = (batch.num_lookups(), batch.batch_size(), batch.num_rows);
            let unique = {
                let mut ids = batch.indices;
                ids.sort_unstable();
                ids.dedup();
                ids.len()
            };
            Ok(TrafficBreakdown {
                lookups: n as u64,
                unique_rows: unique as u64,
                gather_reduce: gather_reduce_traffic(n, bags, dim, weighted),
                expand: expand_traffic(n, dim, weighted),
                coalesce_sort: sort_pairs_traffic(n, rows),
                coalesce_accumulate: coalesce_accumulate_traffic(n, unique, dim),
                tensor_cast: tensor_cast_traffic(n, bags, unique, rows, pooling.scaled()),
                casted_gather_reduce: casted_gather_reduce_traffic(
                    n,
                    unique,
                    dim,
                    pooling.scaled(),
                ),
                scatter_sgd: scatter_traffic(unique, dim, 0),
                scatter_adagrad: scatter_traffic(unique, dim, dim),
            })
        })
        .collect::<Result<Vec<_>, KernelError>>()?;
    let mut t = TrafficBreakdown::default();
    for p in per_table {
        t.lookups += p.lookups;
        t.unique_rows += p.unique_rows;
        t.gather_reduce += p.gather_reduce;
        t.expand += p.expand;
        t.coalesce_sort += p.coalesce_sort;
        t.coalesce_accumulate += p.coalesce_accumulate;
        t.tensor_cast += p.tensor_cast;
        t.casted_gather_reduce += p.casted_gather_reduce;
        t.scatter_sgd += p.scatter_sgd;
        t.scatter_adagrad += p.scatter_adagrad;
    }
    Ok(t)
}

/// Accumulates one primitive's verdict over tables.
struct Verdicts(Vec<PrimitiveCheck>);

impl Verdicts {
    fn record(
        &mut self,
        primitive: &str,
        tolerance: f64,
        result: Result<f64, String>,
        table: usize,
    ) {
        let (err, detail) = match result {
            Ok(e) => (e, None),
            Err(d) => (f64::INFINITY, Some(d)),
        };
        let ok = err <= tolerance;
        let detail = detail
            .or_else(|| (!ok).then(|| format!("relative error {err:e} > tolerance {tolerance:e}")));
        let detail = detail.map(|d| format!("table {table}: {d}"));
        match self.0.iter_mut().find(|p| p.primitive == primitive) {
            Some(p) => {
                // The detail names the worst table.
                if !ok && (p.ok || err > p.worst_rel_err) {
                    p.detail = detail;
                }
                p.worst_rel_err = p.worst_rel_err.max(err);
                p.ok &= ok;
            }
            None => self.0.push(PrimitiveCheck {
                primitive: primitive.into(),
                worst_rel_err: err,
                tolerance,
                ok,
                detail,
            }),
        }
    }
}

fn exact<T: PartialEq>(what: &str, got: &T, want: &T) -> Result<f64, String> {
    if got == want {
        Ok(0.0)
    } else {
        Err(format!("{what} differ from the reference"))
    }
}

/// A backend's coalesced result (or its error) against the reference's: its
/// rows exactly, its sums of at most `n` terms with [`sum_rel_err`]
/// (`magnitude`: the reference's sums of the terms' absolute values).
fn coalesced_err<T>(
    got: &Result<(Coalesced, T), KernelError>,
    want: &Coalesced,
    magnitude: &Coalesced,
    n: usize,
) -> Result<f64, String> {
    let (got, _) = got.as_ref().map_err(|e| e.to_string())?;
    if got.rows != want.rows {
        return Err(format!(
            "unique rows differ ({} vs {} rows)",
            got.rows.len(),
            want.rows.len()
        ));
    }
    Ok(sum_rel_err(
        &got.grads,
        &want.grads,
        &magnitude.grads,
        n,
        want.dim,
    ))
}

/// Runs every primitive of every backend on `config`'s generated inputs and
/// compares it with [`ReferenceBackend`]. A backend error is a failed check,
/// not an error of this function, which fails only on a bad config.
pub fn run_check(
    config: &CheckConfig,
    backends: &[&dyn Backend],
) -> Result<CheckReport, KernelError> {
    let inputs = check_inputs(config)?;
    run_check_on(config, &inputs, backends)
}

/// [`run_check`] on given inputs.
pub fn run_check_on(
    config: &CheckConfig,
    inputs: &[CheckInput],
    backends: &[&dyn Backend],
) -> Result<CheckReport, KernelError> {
    let reference = ReferenceBackend;
    let (pooling, dim) = (config.pooling, config.dim);
    let mut verdicts: Vec<Verdicts> = backends.iter().map(|_| Verdicts(Vec::new())).collect();
    let mut traffic = TrafficBreakdown::default();
    for (t, input) in inputs.iter().enumerate() {
        let batch = &input.batch;
        let rows = batch.num_rows;
        let r = |e: KernelError| e.in_table(t);
        let (gr_ref, gr_t) = reference
            .gather_reduce(&input.table, batch, pooling)
            .map_err(r)?;
        let (ex_ref, ex_t) = reference
            .expand(&input.grad_out, dim, batch, pooling)
            .map_err(r)?;
        let (co_ref, co_t) = reference.coalesce(&ex_ref, rows).map_err(r)?;
        // The same sums over the terms' absolute values, and the most terms
        // in one sum: the scale of f32's rounding (`sum_rel_err`).
        let abs_table = EmbeddingTable {
            data: input.table.data.iter().map(|x| x.abs()).collect(),
            ..input.table.clone()
        };
        let (gr_mag, _) = reference
            .gather_reduce(&abs_table, batch, pooling)
            .map_err(r)?;
        let gr_terms = batch
            .offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
            + 2;
        let ex_abs = Expanded {
            grads: ex_ref.grads.iter().map(|x| x.abs()).collect(),
            ..ex_ref.clone()
        };
        let (co_mag, _) = reference.coalesce(&ex_abs, rows).map_err(r)?;
        let co_terms = {
            let mut counts = std::collections::HashMap::new();
            for &i in &batch.indices {
                *counts.entry(i).or_insert(0usize) += 1;
            }
            counts.values().copied().max().unwrap_or(0) + 2
        };
        let (ca_ref, ca_t) = reference.tensor_cast(batch, pooling).map_err(r)?;
        let (cg_ref, cg_t) = reference
            .casted_gather_reduce(&ca_ref, &input.grad_out, dim)
            .map_err(r)?;
        traffic.lookups += batch.num_lookups() as u64;
        traffic.unique_rows += co_ref.rows.len() as u64;
        traffic.gather_reduce += gr_t;
        traffic.expand += ex_t;
        traffic.coalesce_sort += co_t.sort;
        traffic.coalesce_accumulate += co_t.accumulate;
        traffic.tensor_cast += ca_t;
        traffic.casted_gather_reduce += cg_t;
        let mut scatter_ref = Vec::new();
        for opt in Optimizer::examples() {
            let mut table = input.table.clone();
            let mut state = OptimizerState::new(&opt, rows, dim).map_err(r)?;
            // Two steps, so that the second sees a non-trivial state; the
            // traffic reported is one step's (both move the same bytes).
            let mut st = None;
            for _ in 0..2 {
                let step = reference
                    .scatter_update(&mut table, &mut state, &co_ref, &opt)
                    .map_err(r)?;
                st.get_or_insert(step);
            }
            let st = st.unwrap_or_default();
            match opt {
                Optimizer::Sgd { .. } => traffic.scatter_sgd += st,
                Optimizer::Adagrad { .. } => traffic.scatter_adagrad += st,
                _ => {}
            }
            scatter_ref.push((opt, table, state));
        }

        for (backend, v) in backends.iter().zip(verdicts.iter_mut()) {
            let fail = |e: KernelError| e.to_string();
            let mut traffic_ok: Result<f64, String> = Ok(0.0);
            let mut same_traffic = |what: &str, got: Traffic, want: Traffic| {
                if got != want && traffic_ok.is_ok() {
                    traffic_ok = Err(format!("{what}: {got:?}, reference {want:?}"));
                }
            };
            let gr = backend.gather_reduce(&input.table, batch, pooling);
            if let Ok((_, tr)) = &gr {
                same_traffic("gather-reduce", *tr, gr_t);
            }
            v.record(
                "gather-reduce",
                SUM_TOLERANCE,
                gr.map_err(fail)
                    .map(|(o, _)| sum_rel_err(&o, &gr_ref, &gr_mag, gr_terms, dim)),
                t,
            );

            let ex = backend.expand(&input.grad_out, dim, batch, pooling);
            if let Ok((_, tr)) = &ex {
                same_traffic("expand", *tr, ex_t);
            }
            v.record(
                "expand",
                0.0,
                ex.as_ref().map_err(|e| e.to_string()).and_then(|(e, _)| {
                    exact("src", &e.src, &ex_ref.src)?;
                    Ok(row_rel_err(&e.grads, &ex_ref.grads, dim))
                }),
                t,
            );

            let co = match &ex {
                Ok((e, _)) => backend.coalesce(e, rows),
                Err(_) => backend.coalesce(&ex_ref, rows),
            };
            if let Ok((_, tr)) = &co {
                // (Each part: a sort and an accumulation that trade bytes
                // would give the same total.)
                same_traffic("coalesce (sort)", tr.sort, co_t.sort);
                same_traffic("coalesce (accumulate)", tr.accumulate, co_t.accumulate);
            }
            v.record(
                "coalesce",
                SUM_TOLERANCE,
                coalesced_err(&co, &co_ref, &co_mag, co_terms),
                t,
            );

            let ca = backend.tensor_cast(batch, pooling);
            if let Ok((_, tr)) = &ca {
                same_traffic("tensor-cast", *tr, ca_t);
            }
            v.record(
                "tensor-cast",
                0.0,
                ca.as_ref()
                    .map_err(|e| e.to_string())
                    .and_then(|(c, _)| exact("casted arrays", c, &ca_ref)),
                t,
            );

            let cg = backend.casted_gather_reduce(
                ca.as_ref().map_or(&ca_ref, |c| &c.0),
                &input.grad_out,
                dim,
            );
            if let Ok((_, tr)) = &cg {
                same_traffic("casted-gather-reduce", *tr, cg_t);
            }
            v.record(
                "casted-gather-reduce",
                SUM_TOLERANCE,
                coalesced_err(&cg, &cg_ref, &co_mag, co_terms),
                t,
            );

            // Tensor Casting only reorders who reads what: the casted result
            // must equal the backend's own expand + coalesce bit for bit.
            let agree = match (&cg, &co) {
                (Ok((a, _)), Ok((b, _))) => {
                    if a.rows != b.rows {
                        Err("casted and coalesced unique rows differ".to_string())
                    } else if a
                        .grads
                        .iter()
                        .zip(&b.grads)
                        .any(|(x, y)| x.to_bits() != y.to_bits())
                        || a.grads.len() != b.grads.len()
                    {
                        Err(format!(
                            "not bit-identical; relative difference {:e}",
                            row_rel_err(&a.grads, &b.grads, dim)
                        ))
                    } else {
                        Ok(0.0)
                    }
                }
                _ => Err("casted gather-reduce or coalesce failed".to_string()),
            };
            v.record("casted-vs-coalesce", 0.0, agree, t);

            for (opt, want_table, want_state) in &scatter_ref {
                let mut table = input.table.clone();
                let result = OptimizerState::new(opt, rows, dim).and_then(|mut state| {
                    for _ in 0..2 {
                        backend.scatter_update(&mut table, &mut state, &co_ref, opt)?;
                    }
                    Ok(state)
                });
                let err = result.map_err(fail).map(|state| match opt {
                    // Its accumulator is a sum over the row: f32's bound on it.
                    Optimizer::RowWiseAdagrad { .. } => row_wise_adagrad_err(
                        &table.data,
                        &want_table.data,
                        &input.table.data,
                        &state.values,
                        &want_state.values,
                        dim,
                    ),
                    _ => {
                        let w = row_rel_err_scaled(
                            &table.data,
                            &want_table.data,
                            &input.table.data,
                            dim,
                        );
                        let s = row_rel_err(
                            &state.values,
                            &want_state.values,
                            state.values_per_row.max(1),
                        );
                        w.max(s)
                    }
                });
                v.record(&format!("scatter-{}", opt.name()), STEP_TOLERANCE, err, t);
            }
            v.record("traffic", 0.0, traffic_ok, t);
        }
    }
    let all_backends = backends;
    let backends: Vec<BackendCheck> = backends
        .iter()
        .zip(verdicts)
        .map(|(b, v)| BackendCheck {
            backend: b.name().to_string(),
            ok: v.0.iter().all(|p| p.ok),
            primitives: v.0,
        })
        .collect();
    // The TT primitives, where the dimension splits: the CPU's (`cpu-tt`),
    // and those of every backend that has its own (`cuda-tt`).
    let mut backends = backends;
    let cpu = CpuBackend;
    let mut tt: Vec<(&dyn Backend, String)> = vec![(&cpu, "cpu-tt".into())];
    tt.extend(
        all_backends
            .iter()
            .filter(|b| b.runs_tt())
            .map(|b| (*b, format!("{}-tt", b.name()))),
    );
    let mut tt_skipped = None;
    for (b, name) in tt {
        match crate::tt::check::check_tt_on(b, inputs, dim, pooling, config.seed) {
            Ok(results) => {
                let mut v = Verdicts(Vec::new());
                let per = results.len() / inputs.len().max(1);
                for (i, (prim, r)) in results.into_iter().enumerate() {
                    v.record(prim, SUM_TOLERANCE, r, i / per.max(1));
                }
                backends.push(BackendCheck {
                    backend: name,
                    ok: v.0.iter().all(|p| p.ok),
                    primitives: v.0,
                });
            }
            // (A dimension with no TT split: the same for every backend.)
            Err(e) => {
                tt_skipped = Some(e.to_string());
                break;
            }
        }
    }
    let ok = backends.iter().all(|b| b.ok);
    Ok(CheckReport {
        config: config.clone(),
        backends,
        traffic,
        ok,
        tt_skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cast::Casted;
    use crate::coalesce::CoalesceTraffic;

    /// The check of the CPU backend on `config`, which must pass.
    fn cpu_passes(config: &CheckConfig) -> CheckReport {
        let report = run_check(config, &[&CpuBackend]).unwrap();
        assert!(report.ok, "{}: {:#?}", config.pooling, report.backends);
        report
    }

    #[test]
    fn cpu_backend_passes_a_small_check_for_every_pooling() {
        for pooling in Pooling::ALL {
            let config = CheckConfig {
                tables: 2,
                batch_size: 64,
                bag_size: 8,
                rows: 500,
                dim: 16,
                pooling,
                ..Default::default()
            };
            let report = cpu_passes(&config);
            assert_eq!(report.backends[0].primitives.len(), 11);
        }
    }

    /// A row looked up 204,800 times: f32's rounding of its correct sums
    /// is within the bound the check allows (it once read as a mismatch).
    #[test]
    fn a_very_hot_row_passes_within_f32_s_sum_bound() {
        for pooling in [Pooling::Sum, Pooling::Mean] {
            let config = CheckConfig {
                tables: 1,
                batch_size: 2048,
                bag_size: 100,
                rows: 1,
                dim: 16,
                pooling,
                ..Default::default()
            };
            cpu_passes(&config);
        }
    }

    #[test]
    fn sum_errors_beyond_the_bound_still_count() {
        let gamma = f32_sum_error_bound(100);
        assert!(gamma > 100.0 * 5.9e-8 && gamma < 100.0 * 6.0e-8, "{gamma}");
        assert_eq!(f32_sum_error_bound(1 << 25), f64::INFINITY);
        // Within the bound of a 100-term sum of magnitude 1000: nothing.
        let slack = (gamma * 1000.0) as f32;
        assert_eq!(
            sum_rel_err(&[10.0 + 0.5 * slack], &[10.0], &[1000.0], 100, 1),
            0.0
        );
        // Beyond it: the excess, against the row's scale.
        let e = sum_rel_err(&[10.0 + slack + 0.1], &[10.0], &[1000.0], 100, 1);
        assert!((e - 0.01).abs() < 1e-4, "{e}");
        // A NaN the reference lacks is a mismatch whatever the bound.
        assert_eq!(
            sum_rel_err(&[f32::NAN], &[1.0], &[1e30], 100, 1),
            f64::INFINITY
        );
    }

    /// The CPU backend with some of its results altered after the fact: a
    /// backend that gets a primitive slightly wrong, which must fail the
    /// check. `scatter_update` also gets the weights before the update.
    #[derive(Default)]
    struct Altered {
        name: &'static str,
        gather_reduce: Hook<(Vec<f32>, Traffic)>,
        coalesce: Hook<(Coalesced, CoalesceTraffic)>,
        tensor_cast: Hook<(Casted, Traffic)>,
        scatter_update: Option<ScatterHook>,
    }

    /// Alters a primitive's result.
    type Hook<T> = Option<fn(&mut T)>;

    /// Alters a scatter-update's result: the table, the weights before the
    /// update, the state, the gradients and the optimizer.
    type ScatterHook = Box<
        dyn Fn(&mut EmbeddingTable, &[f32], &mut OptimizerState, &Coalesced, &Optimizer) + Sync,
    >;

    impl Backend for Altered {
        fn name(&self) -> &str {
            self.name
        }
        fn gather_reduce(
            &self,
            t: &EmbeddingTable,
            b: &TableBatch,
            p: Pooling,
        ) -> Result<(Vec<f32>, Traffic), KernelError> {
            altered(CpuBackend.gather_reduce(t, b, p), self.gather_reduce)
        }
        fn expand(
            &self,
            g: &[f32],
            dim: usize,
            b: &TableBatch,
            p: Pooling,
        ) -> Result<(Expanded, Traffic), KernelError> {
            CpuBackend.expand(g, dim, b, p)
        }
        fn coalesce(
            &self,
            e: &Expanded,
            rows: u64,
        ) -> Result<(Coalesced, CoalesceTraffic), KernelError> {
            altered(CpuBackend.coalesce(e, rows), self.coalesce)
        }
        fn tensor_cast(
            &self,
            b: &TableBatch,
            p: Pooling,
        ) -> Result<(Casted, Traffic), KernelError> {
            altered(CpuBackend.tensor_cast(b, p), self.tensor_cast)
        }
        fn casted_gather_reduce(
            &self,
            c: &Casted,
            g: &[f32],
            dim: usize,
        ) -> Result<(Coalesced, Traffic), KernelError> {
            CpuBackend.casted_gather_reduce(c, g, dim)
        }
        fn scatter_update(
            &self,
            t: &mut EmbeddingTable,
            s: &mut OptimizerState,
            g: &Coalesced,
            o: &Optimizer,
        ) -> Result<Traffic, KernelError> {
            let before = t.data.clone();
            let tr = CpuBackend.scatter_update(t, s, g, o)?;
            if let Some(alter) = &self.scatter_update {
                alter(t, &before, s, g, o);
            }
            Ok(tr)
        }
    }

    /// `result` with `alter` applied to its value, where there are both.
    fn altered<T>(result: Result<T, KernelError>, alter: Hook<T>) -> Result<T, KernelError> {
        result.map(|mut r| {
            if let Some(alter) = alter {
                alter(&mut r);
            }
            r
        })
    }

    /// Gather-reduce slightly wrong, the traffic of coalesce's two parts
    /// traded (the same total), two casted lookups swapped and one updated
    /// value of every optimizer 0.1% off.
    fn broken() -> Altered {
        Altered {
            name: "broken",
            gather_reduce: Some(|(out, _)| out[3] += 1e-3),
            // Bytes moved from the sort to the accumulation: the same total.
            coalesce: Some(|(_, traffic)| {
                traffic.sort.read_bytes -= 8;
                traffic.accumulate.read_bytes += 8;
            }),
            tensor_cast: Some(|(casted, _)| casted.casted_src.swap(0, 1)),
            scatter_update: Some(Box::new(|table, _, _, grads, _| {
                // One updated value 0.1% off.
                if let Some(&row) = grads.rows.first() {
                    table.data[row as usize * table.dim] *= 1.001;
                }
            })),
        }
    }

    /// The primitives `b` failed.
    fn failed(b: &BackendCheck) -> Vec<&str> {
        b.primitives
            .iter()
            .filter(|p| !p.ok)
            .map(|p| p.primitive.as_str())
            .collect()
    }

    #[test]
    fn a_wrong_backend_fails() {
        let config = CheckConfig {
            tables: 1,
            batch_size: 32,
            bag_size: 4,
            rows: 50,
            dim: 8,
            ..Default::default()
        };
        let report = run_check(&config, &[&CpuBackend, &broken()]).unwrap();
        assert!(report.backends[0].ok);
        assert!(!report.ok);
        let failed = failed(&report.backends[1]);
        assert!(
            failed.contains(&"gather-reduce")
                && failed.contains(&"tensor-cast")
                && failed.contains(&"traffic"),
            "{failed:?}"
        );
        let traffic = report.backends[1]
            .primitives
            .iter()
            .find(|p| p.primitive == "traffic")
            .expect("a traffic verdict");
        assert!(
            format!("{traffic:?}").contains("coalesce (sort)"),
            "{traffic:?}"
        );
        for opt in ["sgd", "adagrad", "row-wise-adagrad", "rms-prop"] {
            assert!(
                failed.contains(&format!("scatter-{opt}").as_str()),
                "{failed:?}"
            );
        }
    }

    /// A 65536-wide row: the CPU kernel sums `mean(g^2)` over the row in f32,
    /// the reference in f64; the difference is within f32's bound on that sum
    /// (it once read as a mismatch of 1.1e-5).
    #[test]
    fn a_wide_row_wise_adagrad_row_passes_within_f32_s_sum_bound() {
        cpu_passes(&wide_row_config());
    }

    fn wide_row_config() -> CheckConfig {
        CheckConfig {
            tables: 1,
            batch_size: 3,
            bag_size: 2,
            rows: 5,
            dim: 65536,
            seed: 1,
            ..Default::default()
        }
    }

    /// The CPU backend, with row-wise Adagrad's accumulators scaled by
    /// `1 + acc` and every updated weight's step by `1 + step`.
    fn row_wise_off(acc: f32, step: f32) -> Altered {
        Altered {
            name: "row-wise-off",
            scatter_update: Some(Box::new(move |t, before, s, g, o| {
                if let Optimizer::RowWiseAdagrad { .. } = o {
                    for &row in &g.rows {
                        s.values[row as usize] *= 1.0 + acc;
                        let r = row as usize * t.dim..(row as usize + 1) * t.dim;
                        for (w, b) in t.data[r.clone()].iter_mut().zip(&before[r]) {
                            *w += (*w - b) * step;
                        }
                    }
                }
            })),
            ..Default::default()
        }
    }

    /// Errors beyond f32's bound on the row's sum still fail, in the
    /// accumulator or in the weights, and nothing else does.
    #[test]
    fn wide_row_wise_adagrad_errors_beyond_the_bound_still_count() {
        let config = wide_row_config();
        let inputs = check_inputs(&config).unwrap();
        let failed = |b: Altered| -> Vec<String> {
            let report = run_check_on(&config, &inputs, &[&b]).unwrap();
            failed(&report.backends[0])
                .into_iter()
                .map(String::from)
                .collect()
        };
        assert!(failed(row_wise_off(0.0, 0.0)).is_empty());
        // The bound on a 65540-term sum: 0.39%.
        let gamma = f32_sum_error_bound(65540);
        assert!(gamma > 3.9e-3 && gamma < 4.0e-3, "{gamma}");
        for off in [row_wise_off(0.01, 0.0), row_wise_off(0.0, 0.01)] {
            assert_eq!(failed(off), ["scatter-row-wise-adagrad"]);
        }
    }

    #[test]
    fn row_wise_adagrad_err_allows_the_sum_s_rounding_only() {
        let gamma = f32_sum_error_bound(100 + ROW_WISE_ACCUMULATOR_ROUNDINGS);
        let (before, want) = ([1.0f32; 100], [0.9f32; 100]);
        // The accumulator within its bound, the weights exact: nothing.
        let a = 2.0 * (1.0 - 0.5 * gamma) as f32;
        assert_eq!(
            row_wise_adagrad_err(&want, &want, &before, &[a], &[2.0], 100),
            0.0
        );
        // The accumulator beyond it: the excess.
        let e = row_wise_adagrad_err(&want, &want, &before, &[2.02], &[2.0], 100);
        assert!((e - (0.01 - gamma)).abs() < 1e-6, "{e}");
        // A weight within gamma of its update (0.1): nothing; beyond it counts.
        let mut got = want;
        got[7] = 0.9 - (0.05 * gamma) as f32;
        assert_eq!(
            row_wise_adagrad_err(&got, &want, &before, &[2.0], &[2.0], 100),
            0.0
        );
        got[7] = 0.9 - 1e-3;
        let e = row_wise_adagrad_err(&got, &want, &before, &[2.0], &[2.0], 100);
        assert!(e > 9e-4 - 0.1 * gamma - 1e-7 && e < 1e-3, "{e}");
        assert_eq!(
            row_wise_adagrad_err(&got, &want, &before[..99], &[2.0], &[2.0], 100),
            f64::INFINITY
        );
    }

    #[test]
    fn an_update_that_cancels_is_judged_against_its_terms() {
        // after = before - step, with before and step nearly equal: f32
        // rounding of the terms is large next to the result, small next to
        // the terms.
        let (before, want, got) = ([0.731_f32], [1.2e-7_f32], [1.9e-7_f32]);
        assert!(row_rel_err(&got, &want, 1) > 0.5);
        assert!(row_rel_err_scaled(&got, &want, &before, 1) < 1e-6);
        // A real error stays one.
        assert!(row_rel_err_scaled(&[0.001], &want, &before, 1) > 1e-3);
        assert_eq!(
            row_rel_err_scaled(&got, &want, &[0.7, 0.1], 1),
            f64::INFINITY
        );
    }

    #[test]
    fn scatter_traffic_is_one_steps() {
        let config = CheckConfig {
            tables: 1,
            batch_size: 64,
            bag_size: 4,
            rows: 1000,
            dim: 16,
            ..Default::default()
        };
        let t = run_check(&config, &[]).unwrap().traffic;
        let unique = t.unique_rows as usize;
        assert_eq!(
            t.scatter_sgd,
            crate::traffic::scatter_traffic(unique, 16, 0)
        );
        assert_eq!(
            t.scatter_adagrad,
            crate::traffic::scatter_traffic(unique, 16, 16)
        );
    }

    /// The analytic traffic, from the batches alone, is exactly what a check
    /// (which runs the reference on real tables) reports.
    #[test]
    fn analytic_traffic_equals_the_check_s() {
        let mut configs = vec![];
        for pooling in Pooling::ALL {
            for distribution in [
                Distribution::Uniform,
                Distribution::Zipf {
                    alpha: 1.05,
                    scatter: true,
                },
                Distribution::DlrmRandom,
            ] {
                configs.push(CheckConfig {
                    tables: 3,
                    batch_size: 96,
                    bag_size: 7,
                    rows: 3000,
                    dim: 24,
                    distribution,
                    pooling,
                    seed: 11,
                });
            }
        }
        // A table one radix pass cannot sort, and a hot one-row table.
        configs.push(CheckConfig {
            rows: 5_000_000,
            dim: 4,
            tables: 1,
            batch_size: 64,
            bag_size: 3,
            ..Default::default()
        });
        configs.push(CheckConfig {
            rows: 1,
            tables: 2,
            batch_size: 16,
            bag_size: 5,
            dim: 8,
            ..Default::default()
        });
        for c in configs {
            let want = run_check(&c, &[]).unwrap().traffic;
            let got = analytic_traffic(&c).unwrap();
            assert_eq!(got, want, "{c:?}");
            assert!(got.unique_rows > 0 && got.lookups > 0);
        }
        let e = analytic_traffic(&CheckConfig {
            dim: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("dim"), "{e}");
        let e = analytic_traffic(&CheckConfig {
            dim: 1 << 50,
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            e.to_string().contains("`dim`") && e.to_string().contains("overflow 64 bits"),
            "{e}"
        );
    }

    #[test]
    fn bad_config_is_an_error() {
        let e = run_check(
            &CheckConfig {
                dim: 0,
                ..Default::default()
            },
            &[&CpuBackend],
        )
        .unwrap_err();
        assert!(e.to_string().contains("dim"), "{e}");
    }
}
