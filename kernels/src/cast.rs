//! Tensor Casting (the paper's Algorithm 2) and the casted gradient
//! gather-reduce it enables (Algorithm 3), which replaces expand + coalesce.
//!
//! Casting needs only the index arrays, so it can run during the forward
//! pass; the casted gather-reduce then reads each output gradient row once
//! per lookup and writes each coalesced row once, with no expanded tensor.

use nmpsim_traces::TableBatch;
use nmpsim_traces::batch::{rows_below, strictly_ascending};

use crate::coalesce::{Coalesced, accumulate_segments, rows_per_task, segment_starts};
use crate::error::{KernelError, check_batch, check_dim, check_grad_out};
use crate::gather::check_pooling;
use crate::pooling::{Pooling, lookup_scale};
use crate::radix::sort_pairs;
use crate::table::resize_for_overwrite;
use crate::traffic::{Traffic, casted_gather_reduce_traffic, tensor_cast_traffic};
use crate::vecops::{PREFETCH_AHEAD, add_into, add_scaled_into, prefetch};

/// The casted (src, dst) index arrays of one table's batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Casted {
    /// Bag (output-gradient row) of every lookup, in src-sorted order: the
    /// sorted `dst` of Alg. 2 line 4.
    pub casted_src: Vec<u32>,
    /// Coalesced-gradient slot of every lookup: cumulative sum of the scan
    /// flags minus one (Alg. 2 lines 5-9). Non-decreasing, steps of 0 or 1.
    pub casted_dst: Vec<u32>,
    /// Table row of every slot, ascending (the sorted src at each flag).
    pub unique_rows: Vec<u32>,
    /// Per-lookup factor in sorted order for mean / weighted-sum pooling.
    pub scale: Option<Vec<f32>>,
    /// Number of bags `B`, the row count of the gradient this casts.
    pub num_bags: usize,
}

/// Algorithm 2. Sum and mean pooling sort-by-key `(src, dst)` exactly as the
/// paper does; weighted sum sorts `(src, position)` instead so that each
/// lookup's weight can follow it, then reads `dst` through the position —
/// the same permutation, since the sort is stable and `dst` is monotone.
pub fn tensor_cast(batch: &TableBatch, pooling: Pooling) -> Result<(Casted, Traffic), KernelError> {
    check_batch(batch)?;
    check_pooling(batch, pooling)?;
    let n = batch.num_lookups();
    let dst = batch.dst();
    let (sorted_src, casted_src, scale) = match (pooling, batch.weights.as_deref()) {
        (Pooling::WeightedSum, Some(w)) => {
            let positions: Vec<u32> = (0..n as u32).collect();
            let (sorted_src, pos) = sort_pairs(&batch.indices, &positions, batch.num_rows)?;
            let casted_src = pos.iter().map(|&p| dst[p as usize]).collect();
            let scale = pos.iter().map(|&p| w[p as usize]).collect();
            (sorted_src, casted_src, Some(scale))
        }
        _ => {
            let (sorted_src, casted_src) = sort_pairs(&batch.indices, &dst, batch.num_rows)?;
            let scale = (pooling == Pooling::Mean).then(|| {
                casted_src
                    .iter()
                    .map(|&b: &u32| {
                        let len = batch.offsets[b as usize + 1] - batch.offsets[b as usize];
                        lookup_scale(Pooling::Mean, len, None)
                    })
                    .collect()
            });
            (sorted_src, casted_src, scale)
        }
    };
    Ok(Casted::of_batch(
        batch,
        casted_src,
        scale,
        scan(&sorted_src),
    ))
}

/// Scan: flags the first lookup of every run of equal src, and the
/// cumulative sum of the flags minus one numbers the runs (one pass).
/// Returns the slot of every lookup and the row of every slot.
fn scan(sorted_src: &[u32]) -> (Vec<u32>, Vec<u32>) {
    // Branch-free: every lookup writes its run's row to the run's slot.
    let n = sorted_src.len();
    let mut casted_dst = vec![0u32; n];
    let mut unique_rows = vec![0u32; n];
    let mut slot = 0usize;
    for i in 0..n {
        slot += usize::from(i > 0 && sorted_src[i] != sorted_src[i - 1]);
        casted_dst[i] = slot as u32;
        unique_rows[slot] = sorted_src[i];
    }
    unique_rows.truncate(if n == 0 { 0 } else { slot + 1 });
    (casted_dst, unique_rows)
}

impl Casted {
    /// `batch`'s cast from the bag and the scale of every lookup in sorted
    /// order and the slots and rows of the scan, with the traffic of casting
    /// it (scaled where the cast carries a scale, as mean and weighted-sum
    /// pooling do).
    pub(crate) fn of_batch(
        batch: &TableBatch,
        casted_src: Vec<u32>,
        scale: Option<Vec<f32>>,
        (casted_dst, unique_rows): (Vec<u32>, Vec<u32>),
    ) -> (Casted, Traffic) {
        let traffic = tensor_cast_traffic(
            casted_src.len(),
            batch.batch_size(),
            unique_rows.len(),
            batch.num_rows,
            scale.is_some(),
        );
        let casted = Casted {
            casted_src,
            casted_dst,
            unique_rows,
            scale,
            num_bags: batch.batch_size(),
        };
        (casted, traffic)
    }
}

/// Checks a [`Casted`] against Alg. 2's invariants.
pub(crate) fn check_casted(c: &Casted) -> Result<(), KernelError> {
    let n = c.casted_src.len();
    if c.casted_dst.len() != n {
        return Err(KernelError::shape(
            "casted.casted_dst",
            c.casted_dst.len(),
            format!("casted_src.len() = {n}"),
        ));
    }
    if let Some(s) = &c.scale {
        if s.len() != n {
            return Err(KernelError::shape(
                "casted.scale",
                s.len(),
                format!("casted_src.len() = {n}"),
            ));
        }
    }
    // Branch-free passes first (they vectorise); the searches below only run
    // to name the first offender. A casted gather-reduce checks every call,
    // and on a 2048-lookup table the branchy loops alone took about a tenth
    // of cast + gather-reduce.
    let steps = c.casted_dst.first().is_none_or(|&d| d == 0)
        && c.casted_dst
            .windows(2)
            .fold(true, |ok, w| ok & (w[1].wrapping_sub(w[0]) <= 1));
    let unique = c.casted_dst.last().map_or(0, |&d| d as usize + 1);
    if rows_below(&c.casted_src, c.num_bags as u64)
        && steps
        && strictly_ascending(&c.unique_rows)
        && c.unique_rows.len() == unique
    {
        return Ok(());
    }
    if let Some((i, &b)) = c
        .casted_src
        .iter()
        .enumerate()
        .find(|&(_, &b)| b as usize >= c.num_bags)
    {
        return Err(KernelError::IndexOutOfRange {
            arg: "casted.casted_src",
            position: i,
            value: b as u64,
            bound: c.num_bags as u64,
        });
    }
    for (i, &d) in c.casted_dst.iter().enumerate() {
        let prev = if i == 0 {
            None
        } else {
            Some(c.casted_dst[i - 1])
        };
        let ok = match prev {
            None => d == 0,
            Some(p) => d == p || Some(d) == p.checked_add(1),
        };
        if !ok {
            return Err(KernelError::invalid(
                "casted.casted_dst",
                format!(
                    "casted_dst[{i}] = {d} after {prev:?}; expected 0 first, then steps of 0 or 1"
                ),
            ));
        }
    }
    let unique = c.casted_dst.last().map_or(0, |&d| d as usize + 1);
    if c.unique_rows.len() != unique {
        return Err(KernelError::shape(
            "casted.unique_rows",
            c.unique_rows.len(),
            format!("last casted_dst + 1 = {unique}"),
        ));
    }
    // The coalesced gradients' rows, as tensor casting gives them (and as
    // every backend and the scatter take them): strictly ascending.
    if let Some(i) = (1..c.unique_rows.len()).find(|&i| c.unique_rows[i] <= c.unique_rows[i - 1]) {
        return Err(KernelError::invalid(
            "casted.unique_rows",
            format!(
                "unique_rows[{i}] = {} after {}; expected strictly ascending",
                c.unique_rows[i],
                c.unique_rows[i - 1]
            ),
        ));
    }
    Ok(())
}

/// The single-task casted gather-reduce for rows of `D` values: each run of
/// equal `casted_dst` (one slot) is summed in a `[f32; D]` accumulator kept in
/// registers and stored once. The slot adds its lookups in the same order,
/// starting from zero, with the same f32 operations as the general loop, so
/// the bits are the same; every slot has at least one lookup
/// ([`check_casted`]: steps of 0 or 1 from 0 to `unique - 1`), so every row of
/// `grads` is written.
#[inline(always)]
fn walk_runs<const D: usize>(
    grads: &mut [f32],
    dst: &[u32],
    src: &[u32],
    grad_out: &[f32],
    scale: Option<&[f32]>,
) {
    let row = |i: usize| -> &[f32; D] {
        let b = src[i] as usize;
        grad_out[b * D..b * D + D].try_into().expect("D values")
    };
    let mut i = 0;
    while i < dst.len() {
        let d = dst[i] as usize;
        let mut local = [0.0f32; D];
        while i < dst.len() && dst[i] as usize == d {
            if i + PREFETCH_AHEAD < src.len() {
                prefetch(row(i + PREFETCH_AHEAD));
            }
            let x = row(i);
            match scale {
                Some(sc) => {
                    let w = sc[i];
                    for k in 0..D {
                        local[k] += w * x[k];
                    }
                }
                None => {
                    for k in 0..D {
                        local[k] += x[k];
                    }
                }
            }
            i += 1;
        }
        grads[d * D..d * D + D].copy_from_slice(&local);
    }
}

/// Algorithm 3: `coal[casted_dst[i]] += scale[i] * grad_out[casted_src[i]]`.
/// Each slot adds its lookups in sorted (= stable, original) order, the same
/// order and the same f32 operations as expand + coalesce, so the two agree
/// bit for bit.
pub fn casted_gather_reduce(
    casted: &Casted,
    grad_out: &[f32],
    dim: usize,
) -> Result<(Coalesced, Traffic), KernelError> {
    let mut out = Coalesced::empty(dim);
    let traffic = casted_gather_reduce_into(casted, grad_out, dim, &mut out)?;
    Ok((out, traffic))
}

/// [`casted_gather_reduce`] into a reused buffer (see [`crate::gather::expand_into`] for why).
pub fn casted_gather_reduce_into(
    casted: &Casted,
    grad_out: &[f32],
    dim: usize,
    out: &mut Coalesced,
) -> Result<Traffic, KernelError> {
    check_dim(dim)?;
    check_grad_out(grad_out, casted.num_bags, dim)?;
    check_casted(casted)?;
    let unique = casted.unique_rows.len();
    let src = &casted.casted_src;
    let scale = casted.scale.as_deref();
    let row = |i: usize| {
        let b = src[i] as usize;
        &grad_out[b * dim..(b + 1) * dim]
    };
    let add = |acc: &mut [f32], i: usize| {
        if i + PREFETCH_AHEAD < src.len() {
            prefetch(row(i + PREFETCH_AHEAD));
        }
        match scale {
            Some(sc) => add_scaled_into(acc, row(i), sc[i]),
            None => add_into(acc, row(i)),
        }
    };
    let grads = &mut out.grads;
    resize_for_overwrite(grads, unique * dim);
    let per_task = rows_per_task(src.len(), unique);
    if per_task >= unique {
        // One task (a batch of few lookups): walk the lookups in order, each
        // adding into its slot. `casted_dst` is non-decreasing, so every slot
        // adds its lookups in the same order as the segments below do, and
        // no segment starts are needed.
        let dst = &casted.casted_dst;
        match dim {
            16 => walk_runs::<16>(grads, dst, src, grad_out, scale),
            32 => walk_runs::<32>(grads, dst, src, grad_out, scale),
            64 => walk_runs::<64>(grads, dst, src, grad_out, scale),
            128 => walk_runs::<128>(grads, dst, src, grad_out, scale),
            _ => {
                grads.fill(0.0);
                for (i, &d) in dst.iter().enumerate() {
                    let d = d as usize;
                    add(&mut grads[d * dim..(d + 1) * dim], i);
                }
            }
        }
    } else {
        // Zeroed row by row in the tasks, as in `coalesce_into`.
        accumulate_segments(
            grads,
            &segment_starts(&casted.casted_dst),
            dim,
            per_task,
            add,
        );
    }
    out.rows.clear();
    out.rows.extend_from_slice(&casted.unique_rows);
    out.dim = dim;
    Ok(casted_gather_reduce_traffic(
        src.len(),
        unique,
        dim,
        scale.is_some(),
    ))
}
