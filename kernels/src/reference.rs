//! Scalar reference kernels: naive loops, f64 accumulation in a fixed order,
//! written to be obviously right rather than fast. The equivalence tests and
//! `nmpsim kernels check` hold every fast backend to these.
//!
//! Each function validates with the same checks as the fast kernel and returns
//! the same analytic [`Traffic`] (traffic belongs to the algorithm, not to an
//! implementation).

// Index loops spell the formulas out element by element, which is the point here.
#![allow(clippy::needless_range_loop)]

use nmpsim_traces::TableBatch;

use crate::cast::Casted;
use crate::coalesce::{CoalesceTraffic, Coalesced};
use crate::error::{KernelError, check_batch, check_dim, check_grad_out};
use crate::gather::{Expanded, check_pooling};
use crate::optimizer::{Optimizer, OptimizerState, check_scatter};
use crate::pooling::{Pooling, lookup_scale};
use crate::table::EmbeddingTable;
use crate::traffic::{self, Traffic};

/// Per-lookup factor as the fast kernels compute it (an f32), so that the
/// reference differs from them only in accumulation precision.
fn scale_of(batch: &TableBatch, pooling: Pooling, bag: usize, i: usize) -> f32 {
    let len = batch.offsets[bag + 1] - batch.offsets[bag];
    lookup_scale(pooling, len, batch.weights.as_ref().map(|w| w[i]))
}

pub fn gather_reduce(
    table: &EmbeddingTable,
    batch: &TableBatch,
    pooling: Pooling,
) -> Result<(Vec<f32>, Traffic), KernelError> {
    crate::gather::check_gather_inputs(table, batch, pooling)?;
    let dim = table.dim;
    let mut out = vec![0.0f32; batch.batch_size() * dim];
    for b in 0..batch.batch_size() {
        let (s, e) = (batch.offsets[b] as usize, batch.offsets[b + 1] as usize);
        for k in 0..dim {
            let mut acc = 0.0f64;
            for i in s..e {
                let w = if pooling == Pooling::WeightedSum {
                    scale_of(batch, pooling, b, i) as f64
                } else {
                    1.0
                };
                acc += w * table.data[batch.indices[i] as usize * dim + k] as f64;
            }
            if pooling == Pooling::Mean && e > s {
                acc /= (e - s) as f64;
            }
            out[b * dim + k] = acc as f32;
        }
    }
    let t = traffic::gather_reduce_traffic(
        batch.num_lookups(),
        batch.batch_size(),
        dim,
        pooling == Pooling::WeightedSum,
    );
    Ok((out, t))
}

pub fn expand(
    grad_out: &[f32],
    dim: usize,
    batch: &TableBatch,
    pooling: Pooling,
) -> Result<(Expanded, Traffic), KernelError> {
    crate::gather::check_expand_inputs(grad_out, dim, batch, pooling)?;
    let mut grads = Vec::with_capacity(batch.num_lookups() * dim);
    for b in 0..batch.batch_size() {
        for i in batch.offsets[b] as usize..batch.offsets[b + 1] as usize {
            let s = scale_of(batch, pooling, b, i);
            grads.extend((0..dim).map(|k| s * grad_out[b * dim + k]));
        }
    }
    let t = traffic::expand_traffic(batch.num_lookups(), dim, pooling == Pooling::WeightedSum);
    Ok((
        Expanded {
            src: batch.indices.clone(),
            dim,
            grads,
        },
        t,
    ))
}

/// Sums expanded gradients per row with a map, in f64, in lookup order.
pub fn coalesce(
    expanded: &Expanded,
    num_rows: u64,
) -> Result<(Coalesced, CoalesceTraffic), KernelError> {
    let dim = expanded.dim;
    check_dim(dim)?;
    let n = expanded.src.len();
    if expanded.grads.len() != n * dim {
        return Err(KernelError::shape(
            "expanded.grads",
            expanded.grads.len(),
            format!("src.len() x dim = {n} x {dim}"),
        ));
    }
    let mut sums: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for (i, &r) in expanded.src.iter().enumerate() {
        if r as u64 >= num_rows {
            return Err(KernelError::IndexOutOfRange {
                arg: "keys",
                position: i,
                value: r as u64,
                bound: num_rows,
            });
        }
        let acc = sums.entry(r).or_insert_with(|| vec![0.0; dim]);
        for k in 0..dim {
            acc[k] += expanded.grads[i * dim + k] as f64;
        }
    }
    let rows: Vec<u32> = sums.keys().copied().collect();
    let grads = sums
        .values()
        .flat_map(|v| v.iter().map(|&x| x as f32))
        .collect();
    let t = CoalesceTraffic {
        sort: traffic::sort_pairs_traffic(n, num_rows),
        accumulate: traffic::coalesce_accumulate_traffic(n, rows.len(), dim),
    };
    Ok((Coalesced { rows, dim, grads }, t))
}

/// Algorithm 2 with a comparison sort (`sort_by_key` is stable).
pub fn tensor_cast(batch: &TableBatch, pooling: Pooling) -> Result<(Casted, Traffic), KernelError> {
    check_batch(batch)?;
    check_pooling(batch, pooling)?;
    let n = batch.num_lookups();
    let dst = batch.dst();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| batch.indices[i]);
    let casted_src: Vec<u32> = order.iter().map(|&i| dst[i]).collect();
    let scale = pooling.scaled().then(|| {
        order
            .iter()
            .map(|&i| scale_of(batch, pooling, dst[i] as usize, i))
            .collect()
    });
    let mut casted_dst = Vec::with_capacity(n);
    let mut unique_rows: Vec<u32> = Vec::new();
    for &i in &order {
        let r = batch.indices[i];
        if unique_rows.last() != Some(&r) {
            unique_rows.push(r);
        }
        casted_dst.push(unique_rows.len() as u32 - 1);
    }
    Ok(Casted::of_batch(
        batch,
        casted_src,
        scale,
        (casted_dst, unique_rows),
    ))
}

/// Algorithm 3 as written: one pass over the casted pairs, f64 accumulators.
pub fn casted_gather_reduce(
    casted: &Casted,
    grad_out: &[f32],
    dim: usize,
) -> Result<(Coalesced, Traffic), KernelError> {
    check_dim(dim)?;
    check_grad_out(grad_out, casted.num_bags, dim)?;
    // The fast kernel's own checks of Alg. 2's invariants (lengths, bags in
    // range, casted_dst from 0 in steps of 0 or 1 reaching every unique row).
    crate::cast::check_casted(casted)?;
    let n = casted.casted_src.len();
    let unique = casted.unique_rows.len();
    let mut acc = vec![0.0f64; unique * dim];
    for i in 0..n {
        let (b, u) = (casted.casted_src[i] as usize, casted.casted_dst[i] as usize);
        let s = casted.scale.as_ref().map_or(1.0, |s| s[i]);
        let g = &grad_out[b * dim..(b + 1) * dim];
        for (a, &x) in acc[u * dim..(u + 1) * dim].iter_mut().zip(g) {
            *a += (s * x) as f64;
        }
    }
    let t = traffic::casted_gather_reduce_traffic(n, unique, dim, casted.scale.is_some());
    Ok((
        Coalesced {
            rows: casted.unique_rows.clone(),
            dim,
            grads: acc.iter().map(|&x| x as f32).collect(),
        },
        t,
    ))
}

/// The optimizers' formulas element by element, in f64.
pub fn scatter_update(
    table: &mut EmbeddingTable,
    state: &mut OptimizerState,
    grads: &Coalesced,
    optimizer: &Optimizer,
) -> Result<Traffic, KernelError> {
    let (dim, per_row) = check_scatter(table, state, grads, optimizer)?;
    for (u, &r) in grads.rows.iter().enumerate() {
        let r = r as usize;
        let g = |k: usize| grads.grads[u * dim + k] as f64;
        match *optimizer {
            Optimizer::Sgd { lr } => {
                for k in 0..dim {
                    let w = &mut table.data[r * dim + k];
                    *w = (*w as f64 - lr as f64 * g(k)) as f32;
                }
            }
            Optimizer::Adagrad { lr, eps, .. } => {
                for k in 0..dim {
                    let a = state.values[r * dim + k] as f64 + g(k) * g(k);
                    state.values[r * dim + k] = a as f32;
                    let w = &mut table.data[r * dim + k];
                    *w = (*w as f64 - lr as f64 * g(k) / (a.sqrt() + eps as f64)) as f32;
                }
            }
            Optimizer::RowWiseAdagrad { lr, eps } => {
                let mean_sq = (0..dim).map(|k| g(k) * g(k)).sum::<f64>() / dim as f64;
                let a = state.values[r * per_row] as f64 + mean_sq;
                state.values[r * per_row] = a as f32;
                for k in 0..dim {
                    let w = &mut table.data[r * dim + k];
                    *w = (*w as f64 - lr as f64 * g(k) / (a.sqrt() + eps as f64)) as f32;
                }
            }
            Optimizer::RmsProp { lr, alpha, eps } => {
                let alpha = alpha as f64;
                for k in 0..dim {
                    let a = alpha * state.values[r * dim + k] as f64 + (1.0 - alpha) * g(k) * g(k);
                    state.values[r * dim + k] = a as f32;
                    let w = &mut table.data[r * dim + k];
                    *w = (*w as f64 - lr as f64 * g(k) / (eps as f64 + a).sqrt()) as f32;
                }
            }
        }
    }
    Ok(traffic::scatter_traffic(grads.rows.len(), dim, per_row))
}

#[cfg(test)]
mod tests {
    use crate::cast::Casted;

    #[test]
    fn the_casted_reference_refuses_what_the_fast_kernel_refuses() {
        let valid = Casted {
            casted_src: vec![0, 1, 0, 1],
            casted_dst: vec![0, 1, 1, 2],
            unique_rows: vec![1, 3, 5],
            scale: None,
            num_bags: 2,
        };
        let grad = vec![1.0f32; 2 * 4];
        assert!(super::casted_gather_reduce(&valid, &grad, 4).is_ok());
        let with = |f: fn(&mut Casted)| {
            let mut c = valid.clone();
            f(&mut c);
            c
        };
        let broken = [
            with(|c| c.casted_dst = vec![1, 0, 2, 2]),
            with(|c| c.unique_rows = vec![1, 3, 5, 9]),
            with(|c| c.casted_dst = vec![0, 0, 0, 0]),
            with(|c| c.casted_src = vec![2, 1, 0, 1]),
        ];
        for c in &broken {
            let fast = crate::cast::casted_gather_reduce(c, &grad, 4).map(|_| ());
            let reference = super::casted_gather_reduce(c, &grad, 4).map(|_| ());
            assert!(fast.is_err() && reference.is_err(), "{c:?}");
        }
        let e = super::casted_gather_reduce(&broken[3], &grad, 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2") && e.contains("bound 2"), "{e}");
    }
}
