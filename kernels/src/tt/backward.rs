//! The TT backward with EL-Rec's in-advance aggregation (Sec. III-B): the
//! batch's gradient summed per unique row first (Tensor Casting's casted
//! gather-reduce gives exactly that), then the chain rule (Eq. 6) once per
//! unique row, its prefix product and the two first cores' gradients once
//! per distinct prefix; and the update in the same call: the touched core
//! slices updated from their sparse gradients once reduced, with no dense
//! core-gradient buffer (its traffic counted as EL-Rec's fused kernel's:
//! the gradients never written out and read back). [`tt_core_grads_per_lookup`] is the plain backward
//! (TT-Rec's: the chain rule per lookup, its products through a GEMM
//! library), for comparison.

use nmpsim_traces::TableBatch;
use rayon::prelude::*;
use serde::Serialize;

use super::forward::{TtCost, prefix_products};
use super::matmul::{gemm, mm_nt_acc, mm_tn};
use super::shape::{CORES, TtShape};
use super::table::TtTable;
use crate::optimizer::update_row;
use crate::{KernelError, Optimizer, Pooling, Traffic};

/// Gradients of the touched core slices: per core, the slice indices
/// (ascending) and their gradients, one slice after another.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TtGrads {
    pub slices: [Vec<u32>; CORES],
    pub grads: [Vec<f32>; CORES],
}

impl TtGrads {
    /// Slice `i` of core `k`'s gradient, if it was touched.
    pub fn slice(&self, table: &TtTable, k: usize, i: u32) -> Option<&[f32]> {
        let n = table.shape.slice_len(k);
        let at = self.slices[k].binary_search(&i).ok()?;
        Some(&self.grads[k][at * n..(at + 1) * n])
    }
}

/// An optimizer's state over a TT table's cores: one value per core value
/// (Adagrad's and RMSprop's accumulators), or none (SGD).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TtState {
    pub values: [Vec<f32>; CORES],
}

impl TtState {
    /// Fresh state of `optimizer` for `table`, or why it is not defined on
    /// TT cores (row-wise Adagrad: a core slice is no table row).
    pub fn new(optimizer: &Optimizer, table: &TtTable) -> Result<Self, KernelError> {
        optimizer.validate()?;
        let len = |k: usize| table.shape.core_len(k);
        let values = match *optimizer {
            Optimizer::Sgd { .. } => [Vec::new(), Vec::new(), Vec::new()],
            Optimizer::Adagrad {
                initial_accumulator,
                ..
            } => [0, 1, 2].map(|k| vec![initial_accumulator; len(k)]),
            Optimizer::RmsProp { .. } => [0, 1, 2].map(|k| vec![0.0; len(k)]),
            Optimizer::RowWiseAdagrad { .. } => {
                return Err(KernelError::invalid(
                    "optimizer",
                    "row-wise Adagrad is not defined on TT cores (its state is one value per table row, and a TT table has no stored rows); use sgd, adagrad or rms-prop",
                ));
            }
        };
        Ok(TtState { values })
    }
}

/// One prefix group's share of the gradients: `(i1, dA)`, `(i2, dB)`, and
/// per row `(i3, dC)`.
type GroupGrads = ((u32, Vec<f32>), (u32, Vec<f32>), Vec<(u32, Vec<f32>)>);

/// The accumulated slices as [`TtGrads`].
fn collect(acc: [std::collections::BTreeMap<u32, Vec<f32>>; CORES]) -> TtGrads {
    let mut grads = TtGrads::default();
    for ((slices, out), acc) in grads.slices.iter_mut().zip(&mut grads.grads).zip(acc) {
        for (i, g) in acc {
            slices.push(i);
            out.extend(g);
        }
    }
    grads
}

/// Adds `g` into `acc`'s slice `i` (created at zero).
fn add_into(acc: &mut std::collections::BTreeMap<u32, Vec<f32>>, i: u32, g: &[f32]) {
    let a = acc.entry(i).or_insert_with(|| vec![0.0; g.len()]);
    a.iter_mut().zip(g).for_each(|(a, g)| *a += *g);
}

/// The runs `[a, b)` of `rows` (unique, ascending) that share a prefix
/// `(i1, i2)`: the rows are ascending, so each prefix's rows are adjacent.
pub(crate) fn prefix_groups(s: &TtShape, rows: &[u32]) -> Vec<(usize, usize)> {
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for (u, &r) in rows.iter().enumerate() {
        match groups.last_mut() {
            Some((_, end)) if s.prefix(rows[*end - 1]) == s.prefix(r) => *end = u + 1,
            _ => groups.push((u, u + 1)),
        }
    }
    groups
}

/// The core gradients of the batch, aggregated in advance: `grad_out` is
/// `B x dim`, the pooled rows' gradient.
pub fn tt_core_grads(
    table: &TtTable,
    batch: &TableBatch,
    grad_out: &[f32],
    pooling: Pooling,
) -> Result<(TtGrads, TtCost), KernelError> {
    crate::gather::check_lookups(batch, pooling, table.shape.rows)?;
    let s = table.shape;
    let dim = s.dim;
    crate::error::check_grad_out(grad_out, batch.batch_size(), dim)?;
    // In-advance aggregation: one gradient per unique row.
    let (casted, t_cast) = crate::tensor_cast(batch, pooling)?;
    let (coal, t_agg) = crate::casted_gather_reduce(&casted, grad_out, dim)?;
    let [n1, n2, n3] = s.dim_factors;
    let (r1, r2) = (s.ranks[1], s.ranks[2]);
    let pr = s.prefix_rows();
    let groups = prefix_groups(&s, &coal.rows);
    let keys: Vec<u64> = groups
        .iter()
        .map(|&(a, _)| s.prefix(coal.rows[a]))
        .collect();
    let prods = prefix_products(table, &keys);
    let per: Vec<GroupGrads> = groups
        .par_iter()
        .enumerate()
        .map(|(g, &(a, b))| {
            let p = &prods[g * pr * r2..(g + 1) * pr * r2];
            let [i1, i2, _] = s.split(coal.rows[a]);
            let mut d_p = vec![0.0f32; pr * r2];
            let mut d_c = Vec::with_capacity(b - a);
            for u in a..b {
                let row = coal.rows[u];
                let gu = &coal.grads[u * dim..(u + 1) * dim];
                let c3 = table.slice(2, s.split(row)[2]);
                // dP += G C3^T: (n1 n2 x n3)(n3 x R).
                mm_nt_acc(pr, n3, r2, gu, c3, &mut d_p);
                // dC3 = P^T G: (R x n1 n2)(n1 n2 x n3).
                let mut dc = vec![0.0f32; r2 * n3];
                mm_tn(r2, pr, n3, p, gu, &mut dc);
                d_c.push((s.split(row)[2], dc));
            }
            let (a_s, b_s) = (table.slice(0, i1), table.slice(1, i2));
            // dA = dP' B^T: (n1 x n2 R)(n2 R x R1); dB = A^T dP': (R1 x n1)(n1 x n2 R).
            let mut da = vec![0.0f32; n1 * r1];
            mm_nt_acc(n1, n2 * r2, r1, &d_p, b_s, &mut da);
            let mut db = vec![0.0f32; r1 * n2 * r2];
            mm_tn(r1, n1, n2 * r2, a_s, &d_p, &mut db);
            ((i1, da), (i2, db), d_c)
        })
        .collect();
    // Reduced in prefix order: the same sums whatever the thread count.
    let mut acc: [std::collections::BTreeMap<u32, Vec<f32>>; CORES] = Default::default();
    for ((i1, da), (i2, db), d_c) in &per {
        add_into(&mut acc[0], *i1, da);
        add_into(&mut acc[1], *i2, db);
        for (i3, dc) in d_c {
            add_into(&mut acc[2], *i3, dc);
        }
    }
    let grads = collect(acc);
    let (u, np) = (coal.rows.len() as u64, groups.len() as u64);
    let flops = t_agg_flops(batch, dim, pooling)
        + np * s.prefix_flops()
        + u * 2 * (2 * pr * n3 * r2) as u64
        + np * 2 * (2 * n1 * n2 * r2 * r1) as u64;
    let slice_bytes = |k: usize| s.slice_len(k) as u64 * 4;
    let touched: u64 = (0..CORES)
        .map(|k| grads.slices[k].len() as u64 * slice_bytes(k))
        .sum();
    // Reads: the slices of each prefix and row, the unique rows' gradients;
    // writes: the touched slices' gradients.
    let traffic = t_cast
        + t_agg
        + Traffic::new(
            np * (slice_bytes(0) + slice_bytes(1)) + u * (slice_bytes(2) + dim as u64 * 4),
            touched,
        );
    Ok((
        grads,
        TtCost {
            traffic,
            flops,
            prefixes: np,
        },
    ))
}

/// The aggregation's additions (and scalings).
fn t_agg_flops(batch: &TableBatch, dim: usize, pooling: Pooling) -> u64 {
    let per = if pooling == Pooling::Sum { 1 } else { 2 };
    batch.num_lookups() as u64 * dim as u64 * per
}

/// Applies `grads` to the touched slices of `table` with `optimizer`
/// (element-wise, as the kernels' scatter does to rows).
pub fn tt_update(
    table: &mut TtTable,
    state: &mut TtState,
    grads: &TtGrads,
    optimizer: &Optimizer,
) -> Result<TtCost, KernelError> {
    optimizer.validate()?;
    let stateful = !matches!(optimizer, Optimizer::Sgd { .. });
    let mut elems = 0u64;
    for k in 0..CORES {
        let n = table.shape.slice_len(k);
        if stateful && state.values[k].len() != table.cores[k].len() {
            return Err(KernelError::shape(
                "state",
                state.values[k].len(),
                format!("core {k}'s {} values", table.cores[k].len()),
            ));
        }
        for (j, &i) in grads.slices[k].iter().enumerate() {
            let at = i as usize * n..(i as usize + 1) * n;
            let w = &mut table.cores[k][at.clone()];
            let a: &mut [f32] = if stateful {
                &mut state.values[k][at]
            } else {
                &mut []
            };
            update_row(optimizer, w, a, &grads.grads[k][j * n..(j + 1) * n]);
            elems += n as u64;
        }
    }
    // Reads: the slices, their gradients (and state); writes: the slices
    // (and state).
    let st = stateful as u64;
    Ok(TtCost {
        traffic: Traffic::new(elems * 4 * (2 + st), elems * 4 * (1 + st)),
        flops: elems * if stateful { 6 } else { 2 },
        prefixes: 0,
    })
}

/// The backward with the update fused into it: the touched core slices
/// updated with `optimizer` as soon as their gradients are reduced.
pub fn tt_backward_update(
    table: &mut TtTable,
    state: &mut TtState,
    batch: &TableBatch,
    grad_out: &[f32],
    pooling: Pooling,
    optimizer: &Optimizer,
) -> Result<TtCost, KernelError> {
    let (grads, cost) = tt_core_grads(table, batch, grad_out, pooling)?;
    let update = tt_update(table, state, &grads, optimizer)?;
    // (Fused: the gradients go from the reduction to the update, never
    // written out and read back.)
    let touched: u64 = (0..CORES).map(|k| grads.grads[k].len() as u64 * 4).sum();
    let mut total = cost + update;
    total.traffic.read_bytes -= touched;
    total.traffic.write_bytes -= touched;
    Ok(total)
}

/// The plain TT backward: the chain rule of Eq. 6 for every lookup, no
/// aggregation and no reuse (TT-Rec's), summed per slice in lookup order.
pub fn tt_core_grads_per_lookup(
    table: &TtTable,
    batch: &TableBatch,
    grad_out: &[f32],
    pooling: Pooling,
) -> Result<TtGrads, KernelError> {
    crate::gather::check_lookups(batch, pooling, table.shape.rows)?;
    let s = table.shape;
    let dim = s.dim;
    crate::error::check_grad_out(grad_out, batch.batch_size(), dim)?;
    let [n1, n2, n3] = s.dim_factors;
    let (r1, r2) = (s.ranks[1], s.ranks[2]);
    let pr = s.prefix_rows();
    let mut acc: [std::collections::BTreeMap<u32, Vec<f32>>; CORES] = Default::default();
    let weights = batch.weights.as_deref();
    let mut p = vec![0.0f32; pr * r2];
    for b in 0..batch.batch_size() {
        let (lo, hi) = (batch.offsets[b] as usize, batch.offsets[b + 1] as usize);
        for i in lo..hi {
            let row = batch.indices[i];
            let f = crate::pooling::lookup_scale(pooling, (hi - lo) as u32, weights.map(|w| w[i]));
            let g: Vec<f32> = grad_out[b * dim..(b + 1) * dim]
                .iter()
                .map(|x| f * x)
                .collect();
            let [i1, i2, i3] = s.split(row);
            table.prefix_into(row, &mut p);
            let mut dc = vec![0.0f32; r2 * n3];
            gemm(r2, pr, n3, &p, true, &g, false, 0.0, &mut dc);
            let mut d_p = vec![0.0f32; pr * r2];
            gemm(
                pr,
                n3,
                r2,
                &g,
                false,
                table.slice(2, i3),
                true,
                0.0,
                &mut d_p,
            );
            let mut da = vec![0.0f32; n1 * r1];
            gemm(
                n1,
                n2 * r2,
                r1,
                &d_p,
                false,
                table.slice(1, i2),
                true,
                0.0,
                &mut da,
            );
            let mut db = vec![0.0f32; r1 * n2 * r2];
            gemm(
                r1,
                n1,
                n2 * r2,
                table.slice(0, i1),
                true,
                &d_p,
                false,
                0.0,
                &mut db,
            );
            add_into(&mut acc[0], i1, &da);
            add_into(&mut acc[1], i2, &db);
            add_into(&mut acc[2], i3, &dc);
        }
    }
    let grads = collect(acc);
    Ok(grads)
}
