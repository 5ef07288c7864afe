//! Wall-clock timing of the CPU primitives on a trace, behind
//! `nmpsim kernels bench --backend cpu --trace FILE`, and the outputs a peer
//! (PyTorch, in `bench/peer/kernels.py`) compares its own against before its
//! times count.
//!
//! Inputs are seeded so another tool can rebuild them exactly:
//! - table `t` (rows from the trace, width `dim`) is
//!   [`EmbeddingTable::seeded`]`(rows, dim, seed + t)`: SplitMix64 from that
//!   seed, value `i` = `-b + 2b * u_i`, `b = sqrt(1 / rows)` rounded to f32,
//!   `u_i` the top 24 bits of the `i`-th output times 2^-24, all in f32;
//! - the output gradient of table `t` is [`fill_uniform`]`(-1, 1, seed +
//!   GRAD_SEED_OFFSET + t)` over `B x dim` values (the first `B x dim` of
//!   that stream for every batch size).
//!
//! Each repetition runs every primitive over every table of one batch (the
//! batches in turn), with output buffers reused as a trainer reuses them, and
//! each primitive is timed on its own. The backward and update primitives
//! chain: the scatters apply the coalesced gradients of the same repetition,
//! so the tables and the Adagrad state change from one repetition to the
//! next, as in training. Medians over the timed repetitions are reported,
//! with achieved bandwidth by the analytic [`Traffic`] (the paper's Fig. 6
//! accounting).
//!
//! With two batches or more, `row-read-bound` is timed after all those
//! repetitions, in repetitions of its own (the batches in turn, back to
//! back): the forward's code reading the rows of each batch's lookups,
//! regrouped into bags of [`READ_BOUND_BAG`] lookups, or fewer so that
//! every thread has one (no bag boundaries and almost no output). It is the
//! rate at which this machine reads those rows, the bound a forward can
//! approach. It runs apart
//! so that it changes nothing the other primitives find in the caches: in
//! the repetitions, each forward follows the previous repetition's scatters,
//! as a peer's forward follows its own.

use std::path::Path;
use std::time::Instant;

use nmpsim_traces::{Batch, TableBatch, npy};
use serde::Serialize;

use crate::cast::{Casted, casted_gather_reduce_into, tensor_cast};
use crate::coalesce::{Coalesced, coalesce_into};
use crate::error::KernelError;
use crate::gather::{Expanded, expand_into, gather_reduce_into};
use crate::optimizer::{Optimizer, OptimizerState, scatter_update};
use crate::pooling::Pooling;
use crate::table::{EmbeddingTable, fill_uniform};
use crate::traffic::Traffic;

/// Seed of table `t`'s output gradient: `seed + GRAD_SEED_OFFSET + t`.
pub const GRAD_SEED_OFFSET: u64 = 10_000;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct CpuBenchConfig {
    /// Embedding dimension (f32 per row) of every table.
    pub dim: usize,
    /// Timed repetitions (the median is reported).
    pub reps: usize,
    /// Untimed repetitions first.
    pub warmup: usize,
    /// Seed of the tables and output gradients (see the module docs).
    pub seed: u64,
    /// Learning rate of both optimizers.
    pub lr: f32,
    /// Adagrad's epsilon (initial accumulator 0, as PyTorch's default).
    pub eps: f32,
}

impl CpuBenchConfig {
    /// The SGD optimizer of the bench.
    pub fn sgd(&self) -> Optimizer {
        Optimizer::Sgd { lr: self.lr }
    }

    /// The Adagrad optimizer of the bench.
    pub fn adagrad(&self) -> Optimizer {
        Optimizer::Adagrad {
            lr: self.lr,
            eps: self.eps,
            initial_accumulator: 0.0,
        }
    }
}

/// One primitive's times over the timed repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct PrimitiveTiming {
    /// Stable name (see [`PRIMITIVES`]).
    pub primitive: &'static str,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Every timed repetition, in order.
    pub times_ms: Vec<f64>,
    /// Analytic bytes of one repetition (the median repetition's batch).
    pub bytes: u64,
    /// `bytes / median`.
    pub gbps: f64,
}

/// What [`bench_cpu`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct CpuBenchReport {
    pub threads: usize,
    pub tables: usize,
    pub batches: usize,
    pub dim: usize,
    /// Lookups of all tables, summed over the batches.
    pub lookups: u64,
    /// Unique rows per table, summed over tables and batches.
    pub unique_rows: u64,
    pub primitives: Vec<PrimitiveTiming>,
}

/// The primitives timed, in report order. `expand+coalesce` is the baseline
/// backward (`expand` then `coalesce`), `cast+casted-gather-reduce` Tensor
/// Casting's (`tensor-cast` then `casted-gather-reduce`); their times are the
/// sums of their parts' in the same repetition. The weighted forward is
/// timed only when every table carries weights.
pub const PRIMITIVES: [&str; 12] = [
    "forward-sum",
    "forward-mean",
    "forward-weighted",
    "expand",
    "coalesce",
    "expand+coalesce",
    "tensor-cast",
    "casted-gather-reduce",
    "cast+casted-gather-reduce",
    "scatter-sgd",
    "scatter-adagrad",
    "row-read-bound",
];

/// The index of `row-read-bound` in [`PRIMITIVES`] (the last; timed apart).
const READ_BOUND: usize = 11;

/// Lookups per bag of `row-read-bound` (the forward's lookups per task).
pub const READ_BOUND_BAG: usize = 4096;

/// `batch`'s lookups regrouped into unweighted bags of [`READ_BOUND_BAG`]
/// lookups, or fewer where that leaves a thread without a bag (a table of
/// 2048 one-lookup bags is read by every thread, as its forward is).
fn regrouped(batch: &TableBatch, threads: usize) -> TableBatch {
    let n = batch.indices.len();
    let bag = READ_BOUND_BAG.min(n.div_ceil(threads.max(1))).max(1);
    let mut offsets: Vec<u32> = (0..n).step_by(bag).map(|o| o as u32).collect();
    offsets.push(n as u32);
    TableBatch {
        num_rows: batch.num_rows,
        offsets,
        indices: batch.indices.clone(),
        weights: None,
    }
}

/// The seeded tables of the bench, one per entry of `table_rows`.
pub fn seeded_tables(
    table_rows: &[u64],
    dim: usize,
    seed: u64,
) -> Result<Vec<EmbeddingTable>, KernelError> {
    table_rows
        .iter()
        .enumerate()
        .map(|(t, &rows)| seeded_table(t, rows, dim, seed))
        .collect()
}

/// The seeded table `t` (of `rows` rows).
fn seeded_table(t: usize, rows: u64, dim: usize, seed: u64) -> Result<EmbeddingTable, KernelError> {
    EmbeddingTable::seeded(rows, dim, seed.wrapping_add(t as u64))
}

/// The seeded output gradient of table `t` for `bags` bags.
pub fn seeded_grad_out(t: usize, bags: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut g = vec![0.0; bags * dim];
    fill_uniform(
        &mut g,
        -1.0,
        1.0,
        seed.wrapping_add(GRAD_SEED_OFFSET).wrapping_add(t as u64),
    );
    g
}

fn check_shapes(batches: &[Batch], table_rows: &[u64]) -> Result<(), KernelError> {
    if batches.is_empty() {
        return Err(KernelError::invalid("batches", "no batch to run"));
    }
    for (k, b) in batches.iter().enumerate() {
        if b.tables.len() != table_rows.len() {
            return Err(KernelError::invalid(
                "batches",
                format!(
                    "batch {k} has {} tables; expected {}",
                    b.tables.len(),
                    table_rows.len()
                ),
            ));
        }
        for (t, tb) in b.tables.iter().enumerate() {
            if tb.num_rows != table_rows[t] {
                return Err(KernelError::invalid(
                    "batches",
                    format!(
                        "batch {k} table {t} indexes {} rows; expected {}",
                        tb.num_rows, table_rows[t]
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Reused buffers of one table.
struct Scratch {
    forward: Vec<f32>,
    bound: Vec<f32>,
    expanded: Expanded,
    coalesced: Coalesced,
    casted_out: Coalesced,
    /// SGD keeps no values per row; its state only records the table's rows.
    sgd: OptimizerState,
    adagrad: OptimizerState,
}

/// Times every primitive over `batches` (see the module docs). `table_rows`
/// gives each table's rows; rayon's current pool sets the threads.
pub fn bench_cpu(
    batches: &[Batch],
    table_rows: &[u64],
    config: &CpuBenchConfig,
    mut progress: impl FnMut(usize, usize),
) -> Result<CpuBenchReport, KernelError> {
    check_shapes(batches, table_rows)?;
    let dim = config.dim;
    let mut tables = seeded_tables(table_rows, dim, config.seed)?;
    let max_bags = batches.iter().map(Batch::batch_size).max().unwrap_or(0);
    let grads: Vec<Vec<f32>> = (0..tables.len())
        .map(|t| seeded_grad_out(t, max_bags, dim, config.seed))
        .collect();
    let weighted = batches
        .iter()
        .all(|b| b.tables.iter().all(|t| t.weights.is_some()));
    let (sgd, adagrad) = (config.sgd(), config.adagrad());
    let mut scratch = table_rows
        .iter()
        .map(|&rows| {
            Ok(Scratch {
                forward: Vec::new(),
                bound: Vec::new(),
                expanded: Expanded::empty(dim),
                coalesced: Coalesced::empty(dim),
                casted_out: Coalesced::empty(dim),
                sgd: OptimizerState::new(&sgd, rows, dim)?,
                adagrad: OptimizerState::new(&adagrad, rows, dim)?,
            })
        })
        .collect::<Result<Vec<_>, KernelError>>()?;

    // The read bound's batches (see the module docs), where there are enough.
    let bound_batches: Option<Vec<Vec<TableBatch>>> = (batches.len() >= 2).then(|| {
        batches
            .iter()
            .map(|b| {
                let threads = rayon::current_num_threads();
                b.tables.iter().map(|t| regrouped(t, threads)).collect()
            })
            .collect()
    });
    let total = config.warmup + config.reps.max(1);
    // times[p][rep], bytes[p][rep]
    let mut times = vec![Vec::with_capacity(total); PRIMITIVES.len()];
    let mut bytes = vec![Vec::with_capacity(total); PRIMITIVES.len()];
    for rep in 0..total {
        let batch = &batches[rep % batches.len()];
        let bags = batch.batch_size();
        let mut rep_ms = [0.0f64; PRIMITIVES.len()];
        let mut rep_bytes = [0u64; PRIMITIVES.len()];
        let mut timed = |p: usize,
                         f: &mut dyn FnMut(usize) -> Result<Traffic, KernelError>|
         -> Result<(), KernelError> {
            let mut traffic = Traffic::default();
            let start = Instant::now();
            for t in 0..table_rows.len() {
                traffic += f(t)?;
            }
            rep_ms[p] = start.elapsed().as_secs_f64() * 1e3;
            rep_bytes[p] = traffic.total_bytes();
            Ok(())
        };
        let tb = |t: usize| -> &TableBatch { &batch.tables[t] };
        for (p, pooling) in [
            (0, Pooling::Sum),
            (1, Pooling::Mean),
            (2, Pooling::WeightedSum),
        ] {
            if pooling == Pooling::WeightedSum && !weighted {
                continue;
            }
            timed(p, &mut |t| {
                gather_reduce_into(&tables[t], tb(t), pooling, &mut scratch[t].forward)
            })?;
        }
        timed(3, &mut |t| {
            expand_into(
                &grads[t][..bags * dim],
                dim,
                tb(t),
                Pooling::Sum,
                &mut scratch[t].expanded,
            )
        })?;
        timed(4, &mut |t| {
            let s = &mut scratch[t];
            Ok(coalesce_into(&s.expanded, tables[t].rows, &mut s.coalesced)?.total())
        })?;
        let mut casts: Vec<Option<Casted>> = (0..table_rows.len()).map(|_| None).collect();
        timed(6, &mut |t| {
            let (c, traffic) = tensor_cast(tb(t), Pooling::Sum)?;
            casts[t] = Some(c);
            Ok(traffic)
        })?;
        timed(7, &mut |t| {
            let c = casts[t].as_ref().expect("cast above");
            casted_gather_reduce_into(c, &grads[t][..bags * dim], dim, &mut scratch[t].casted_out)
        })?;
        timed(9, &mut |t| {
            let s = &mut scratch[t];
            scatter_update(&mut tables[t], &mut s.sgd, &s.coalesced, &sgd)
        })?;
        timed(10, &mut |t| {
            let s = &mut scratch[t];
            scatter_update(&mut tables[t], &mut s.adagrad, &s.coalesced, &adagrad)
        })?;
        for (sum, parts) in [(5, [3, 4]), (8, [6, 7])] {
            rep_ms[sum] = rep_ms[parts[0]] + rep_ms[parts[1]];
            rep_bytes[sum] = rep_bytes[parts[0]] + rep_bytes[parts[1]];
        }
        if rep >= config.warmup {
            for p in 0..READ_BOUND {
                times[p].push(rep_ms[p]);
                bytes[p].push(rep_bytes[p]);
            }
        }
        progress(rep + 1, total);
    }
    // The read bound, apart (see the module docs).
    for (rep, bb) in bound_batches
        .iter()
        .flat_map(|bb| bb.iter().cycle().take(total).enumerate())
    {
        let mut traffic = Traffic::default();
        let start = Instant::now();
        for (t, tb) in bb.iter().enumerate() {
            traffic += gather_reduce_into(&tables[t], tb, Pooling::Sum, &mut scratch[t].bound)?;
        }
        if rep >= config.warmup {
            times[READ_BOUND].push(start.elapsed().as_secs_f64() * 1e3);
            bytes[READ_BOUND].push(traffic.total_bytes());
        }
    }

    let mut primitives = Vec::new();
    for (p, name) in PRIMITIVES.iter().enumerate() {
        if (p == 2 && !weighted) || (p == READ_BOUND && bound_batches.is_none()) {
            continue;
        }
        let ts = &times[p];
        let mut order: Vec<usize> = (0..ts.len()).collect();
        order.sort_by(|&a, &b| ts[a].total_cmp(&ts[b]));
        let mid = order[order.len() / 2];
        let median_ms = ts[mid];
        let b = bytes[p][mid];
        primitives.push(PrimitiveTiming {
            primitive: name,
            median_ms,
            min_ms: ts[order[0]],
            max_ms: ts[order[order.len() - 1]],
            times_ms: ts.clone(),
            bytes: b,
            gbps: b as f64 / (median_ms * 1e6),
        });
    }
    let unique_rows = batches
        .iter()
        .flat_map(|b| &b.tables)
        .map(|t| {
            let mut r = t.indices.clone();
            r.sort_unstable();
            r.dedup();
            r.len() as u64
        })
        .sum();
    Ok(CpuBenchReport {
        threads: rayon::current_num_threads(),
        tables: table_rows.len(),
        batches: batches.len(),
        dim,
        lookups: batches
            .iter()
            .flat_map(|b| &b.tables)
            .map(|t| t.indices.len() as u64)
            .sum(),
        unique_rows,
        primitives,
    })
}

/// The tables whose backward and updates [`dump_outputs`] writes: the first
/// and the largest (one table when they coincide).
pub fn dumped_tables(table_rows: &[u64]) -> Vec<usize> {
    let largest = (0..table_rows.len())
        .max_by_key(|&t| (table_rows[t], std::cmp::Reverse(t)))
        .unwrap_or(0);
    if largest == 0 {
        vec![0]
    } else {
        vec![0, largest]
    }
}

/// Writes what a peer checks its own results against, computed from fresh
/// seeded tables on `batch`, as `.npy` files in `dir` (created):
/// - `forward_{sum,mean}_tTTT.npy` (and `forward_weighted_tTTT.npy` for a
///   weighted batch): every table's pooled output, `B x dim`;
/// - for the tables of [`dumped_tables`], `coalesced_rows_tTTT.npy` (int64)
///   and `coalesced_grads_tTTT.npy` (sum pooling's coalesced gradient),
///   `sgd_rows_tTTT.npy` and `adagrad_rows_tTTT.npy`: those rows of the table
///   after one step of each optimizer from the fresh table.
///
/// Returns the files written.
pub fn dump_outputs(
    batch: &Batch,
    table_rows: &[u64],
    config: &CpuBenchConfig,
    dir: &Path,
) -> Result<Vec<String>, KernelError> {
    check_shapes(std::slice::from_ref(batch), table_rows)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| KernelError::invalid("dump", format!("{}: {e}", dir.display())))?;
    let dim = config.dim;
    let bags = batch.batch_size();
    let io = |e: nmpsim_traces::TraceError| KernelError::invalid("dump", e.to_string());
    let mut files = Vec::new();
    let write = |files: &mut Vec<String>,
                 name: String,
                 shape: &[usize],
                 v: &[f32]|
     -> Result<(), KernelError> {
        npy::write_f32(&dir.join(&name), shape, v).map_err(io)?;
        files.push(name);
        Ok(())
    };
    let dumped = dumped_tables(table_rows);
    for (t, tb) in batch.tables.iter().enumerate() {
        let table = seeded_table(t, table_rows[t], dim, config.seed)?;
        for (name, pooling) in [
            ("sum", Pooling::Sum),
            ("mean", Pooling::Mean),
            ("weighted", Pooling::WeightedSum),
        ] {
            if pooling == Pooling::WeightedSum && tb.weights.is_none() {
                continue;
            }
            let mut out = Vec::new();
            gather_reduce_into(&table, tb, pooling, &mut out)?;
            write(
                &mut files,
                format!("forward_{name}_t{t:03}.npy"),
                &[bags, dim],
                &out,
            )?;
        }
        if !dumped.contains(&t) {
            continue;
        }
        let g = seeded_grad_out(t, bags, dim, config.seed);
        let (e, _) = crate::gather::expand(&g, dim, tb, Pooling::Sum)?;
        let (c, _) = crate::coalesce::coalesce(&e, table.rows)?;
        let name = format!("coalesced_rows_t{t:03}.npy");
        npy::write_u32_as_i64(&dir.join(&name), &c.rows).map_err(io)?;
        files.push(name);
        write(
            &mut files,
            format!("coalesced_grads_t{t:03}.npy"),
            &[c.rows.len(), dim],
            &c.grads,
        )?;
        for (name, opt) in [("sgd", config.sgd()), ("adagrad", config.adagrad())] {
            let mut updated = table.clone();
            let mut state = OptimizerState::new(&opt, table.rows, dim)?;
            scatter_update(&mut updated, &mut state, &c, &opt)?;
            let rows: Vec<f32> = c
                .rows
                .iter()
                .flat_map(|&r| updated.row(r as u64).expect("coalesced rows are in range"))
                .copied()
                .collect();
            write(
                &mut files,
                format!("{name}_rows_t{t:03}.npy"),
                &[c.rows.len(), dim],
                &rows,
            )?;
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmpsim_traces::threads::on_threads;
    use nmpsim_traces::{BagSize, Distribution, TableSpec, generate_table_batch};

    fn batch(rows: &[u64], weighted: bool) -> Batch {
        Batch {
            tables: rows
                .iter()
                .enumerate()
                .map(|(t, &r)| {
                    let spec = TableSpec {
                        rows: r,
                        distribution: Distribution::Uniform,
                        bag_size: BagSize::Fixed { size: 4 },
                        weighted,
                    };
                    generate_table_batch(&spec, 16, t as u64).unwrap()
                })
                .collect(),
            dense: None,
            num_dense: 0,
            labels: None,
        }
    }

    fn config() -> CpuBenchConfig {
        CpuBenchConfig {
            dim: 8,
            reps: 3,
            warmup: 1,
            seed: 5,
            lr: 0.01,
            eps: 1e-8,
        }
    }

    #[test]
    fn every_primitive_is_timed_with_its_traffic() {
        let rows = [100, 50];
        let batches = [batch(&rows, true), batch(&rows, true)];
        let mut calls = 0;
        // One thread: the read bound's bags do not depend on the machine.
        let r = on_threads(1, || {
            bench_cpu(&batches, &rows, &config(), |_, _| calls += 1)
        })
        .unwrap();
        assert_eq!(calls, 4);
        let names: Vec<_> = r.primitives.iter().map(|p| p.primitive).collect();
        assert_eq!(names, PRIMITIVES);
        assert_eq!(PRIMITIVES[READ_BOUND], "row-read-bound");
        for p in &r.primitives {
            assert_eq!(p.times_ms.len(), 3, "{}", p.primitive);
            assert!(p.bytes > 0 && p.min_ms <= p.median_ms && p.median_ms <= p.max_ms);
        }
        let get = |n| r.primitives.iter().find(|p| p.primitive == n).unwrap();
        // The combined backwards add up their parts, repetition by repetition.
        for (sum, a, b) in [
            ("expand+coalesce", "expand", "coalesce"),
            (
                "cast+casted-gather-reduce",
                "tensor-cast",
                "casted-gather-reduce",
            ),
        ] {
            for k in 0..3 {
                let want = get(a).times_ms[k] + get(b).times_ms[k];
                assert!((get(sum).times_ms[k] - want).abs() < 1e-9);
            }
        }
        assert_eq!(r.lookups, 2 * 2 * 16 * 4);
        // The read bound reads the rows the forward reads: a batch of 16 bags
        // of 4 lookups is one bag to it, so the two differ by 15 bags'
        // offsets and output rows (dim 8, 4-byte words), per table.
        assert_eq!(
            get("forward-sum").bytes - get("row-read-bound").bytes,
            rows.len() as u64 * 15 * (4 + 8 * 4),
        );
        // With two threads each reads one bag of the bound's two.
        let r = on_threads(2, || bench_cpu(&batches, &rows, &config(), |_, _| ())).unwrap();
        let get = |n| r.primitives.iter().find(|p| p.primitive == n).unwrap();
        assert_eq!(
            get("forward-sum").bytes - get("row-read-bound").bytes,
            rows.len() as u64 * 14 * (4 + 8 * 4),
        );
        // Unweighted batches time no weighted forward, and one batch no
        // read bound.
        let plain = [batch(&rows, false)];
        let r = bench_cpu(&plain, &rows, &config(), |_, _| ()).unwrap();
        assert!(
            r.primitives
                .iter()
                .all(|p| p.primitive != "forward-weighted" && p.primitive != "row-read-bound")
        );
    }

    #[test]
    fn mismatched_tables_are_refused() {
        let b = [batch(&[100, 50], false)];
        let e = bench_cpu(&b, &[100, 51], &config(), |_, _| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("table 1") && e.contains("51"), "{e}");
        let e = bench_cpu(&[], &[100], &config(), |_, _| ()).unwrap_err();
        assert!(e.to_string().contains("no batch"));
    }

    #[test]
    fn the_dump_matches_the_kernels_on_fresh_tables() {
        let rows = [40, 300, 7];
        let b = batch(&rows, true);
        let dir = std::env::temp_dir().join(format!("nmpsim-bench-dump-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let c = config();
        let files = dump_outputs(&b, &rows, &c, &dir).unwrap();
        assert_eq!(dumped_tables(&rows), vec![0, 1]);
        assert!(files.contains(&"forward_weighted_t002.npy".to_string()));
        assert!(files.contains(&"adagrad_rows_t001.npy".to_string()));
        assert!(!files.iter().any(|f| f.starts_with("coalesced_rows_t002")));
        // Table 1's pooled sum, recomputed here by hand from its seeded rows.
        let table = EmbeddingTable::seeded(300, 8, 6).unwrap();
        let tb = &b.tables[1];
        let got = npy::read(&dir.join("forward_sum_t001.npy"))
            .unwrap()
            .as_f32()
            .unwrap();
        for bag in 0..tb.batch_size() {
            for k in 0..8 {
                let mut acc = 0.0f32;
                for &r in tb.bag(bag) {
                    acc += table.row(r as u64).unwrap()[k];
                }
                assert_eq!(got[bag * 8 + k], acc);
            }
        }
        // One SGD step moved exactly the coalesced rows by -lr * grad.
        let rows_t0 = npy::read(&dir.join("coalesced_rows_t000.npy"))
            .unwrap()
            .as_i64()
            .unwrap();
        let g = npy::read(&dir.join("coalesced_grads_t000.npy"))
            .unwrap()
            .as_f32()
            .unwrap();
        let sgd = npy::read(&dir.join("sgd_rows_t000.npy"))
            .unwrap()
            .as_f32()
            .unwrap();
        let t0 = EmbeddingTable::seeded(40, 8, 5).unwrap();
        for (u, &r) in rows_t0.iter().enumerate() {
            for k in 0..8 {
                let before = t0.row(r as u64).unwrap()[k];
                assert_eq!(sgd[u * 8 + k], before - 0.01 * g[u * 8 + k]);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
