//! Gradient coalescing (the paper's Algorithm 1): a stable argsort of the
//! expanded gradients' src ids, then one accumulation per unique row.

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{KernelError, check_dim};
use crate::gather::Expanded;
use crate::radix::sort_pairs;
use crate::table::resize_for_overwrite;
use crate::traffic::{Traffic, coalesce_accumulate_traffic, sort_pairs_traffic};
use crate::vecops::{PREFETCH_AHEAD, add_into, prefetch};

/// Unique rows per rayon task in the accumulate loops, at least.
pub(crate) const ROWS_PER_TASK: usize = 64;
/// Lookups per rayon task in the accumulate loops, about: a table whose
/// batch has few lookups (one per bag) is a task or two, not dozens.
const LOOKUPS_PER_TASK: usize = 4096;

/// Unique rows per accumulate task for `lookups` lookups into `unique` rows:
/// [`ROWS_PER_TASK`], or more where rows have few lookups each.
pub(crate) fn rows_per_task(lookups: usize, unique: usize) -> usize {
    let per_task = (LOOKUPS_PER_TASK as u128 * unique as u128 / lookups.max(1) as u128) as usize;
    per_task.max(ROWS_PER_TASK)
}

/// One gradient per touched table row, the input of [`crate::scatter_update`].
#[derive(Debug, Clone, PartialEq)]
pub struct Coalesced {
    /// Touched rows, strictly ascending.
    pub rows: Vec<u32>,
    pub dim: usize,
    /// `rows.len() x dim`; row `u` is the summed gradient of table row `rows[u]`.
    pub grads: Vec<f32>,
}

impl Coalesced {
    /// No rows yet: a buffer for [`coalesce_into`] (or a casted
    /// gather-reduce) to fill.
    pub fn empty(dim: usize) -> Self {
        Coalesced {
            rows: Vec::new(),
            dim,
            grads: Vec::new(),
        }
    }
}

/// Coalesce traffic, split as the paper's Fig. 4 splits its time: the
/// argsort, and the accumulation that Fig. 6's "Coalesce" bar counts.
#[derive(Serialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoalesceTraffic {
    pub sort: Traffic,
    pub accumulate: Traffic,
}

impl CoalesceTraffic {
    pub fn total(&self) -> Traffic {
        self.sort + self.accumulate
    }
}

/// Start of every run of equal values in the sorted `keys`, plus `keys.len()`.
pub(crate) fn segment_starts(sorted: &[u32]) -> Vec<u32> {
    let mut starts = Vec::new();
    for (j, &k) in sorted.iter().enumerate() {
        if j == 0 || k != sorted[j - 1] {
            starts.push(j as u32);
        }
    }
    starts.push(sorted.len() as u32);
    starts
}

/// Algorithm 1: sums the expanded gradients of every table row. Each output
/// row adds its lookups in their original order (the argsort is stable), so
/// the result is the same for any thread count.
pub fn coalesce(
    expanded: &Expanded,
    num_rows: u64,
) -> Result<(Coalesced, CoalesceTraffic), KernelError> {
    let mut out = Coalesced::empty(expanded.dim);
    let traffic = coalesce_into(expanded, num_rows, &mut out)?;
    Ok((out, traffic))
}

/// [`coalesce`] into a reused buffer (see [`crate::gather::expand_into`] for why).
/// The rules an expanded gradient must meet before it is coalesced, shared by
/// all backends: a valid `dim`, at most 2^32 - 1 lookups, `src.len() x dim`
/// gradient values.
pub(crate) fn check_expanded(expanded: &Expanded) -> Result<(), KernelError> {
    let dim = expanded.dim;
    check_dim(dim)?;
    let n = expanded.src.len();
    if n > u32::MAX as usize {
        return Err(KernelError::invalid(
            "expanded.src",
            "more than 2^32 - 1 lookups",
        ));
    }
    if expanded.grads.len() != n * dim {
        return Err(KernelError::shape(
            "expanded.grads",
            expanded.grads.len(),
            format!("src.len() x dim = {n} x {dim}"),
        ));
    }
    Ok(())
}

pub fn coalesce_into(
    expanded: &Expanded,
    num_rows: u64,
    out: &mut Coalesced,
) -> Result<CoalesceTraffic, KernelError> {
    check_expanded(expanded)?;
    let (dim, n) = (expanded.dim, expanded.src.len());
    // Step A: argsort (radix sort of (src, position) pairs).
    let positions: Vec<u32> = (0..n as u32).collect();
    let (sorted_src, sorted_pos) = sort_pairs(&expanded.src, &positions, num_rows)?;
    // Step B: accumulate each run of equal src.
    let starts = segment_starts(&sorted_src);
    let unique = starts.len() - 1;
    out.rows.clear();
    out.rows
        .extend(starts[..unique].iter().map(|&s| sorted_src[s as usize]));
    out.dim = dim;
    let grads = &mut out.grads;
    // Every row is zeroed by its task right before it accumulates, while it
    // is in cache, instead of in a separate pass over the whole buffer.
    resize_for_overwrite(grads, unique * dim);
    let g = &expanded.grads;
    accumulate_segments(grads, &starts, dim, rows_per_task(n, unique), |acc, j| {
        if j + PREFETCH_AHEAD < n {
            let p = sorted_pos[j + PREFETCH_AHEAD] as usize;
            prefetch(&g[p * dim..(p + 1) * dim]);
        }
        let p = sorted_pos[j] as usize;
        add_into(acc, &g[p * dim..(p + 1) * dim]);
    });
    Ok(CoalesceTraffic {
        sort: sort_pairs_traffic(n, num_rows),
        accumulate: coalesce_accumulate_traffic(n, unique, dim),
    })
}

/// Row `u` of `grads` (zeroed here) adds `add(row, i)` for every lookup `i`
/// of its segment `starts[u]..starts[u + 1]`, in order; rows in parallel,
/// `per_task` rows a task.
pub(crate) fn accumulate_segments(
    grads: &mut [f32],
    starts: &[u32],
    dim: usize,
    per_task: usize,
    add: impl Fn(&mut [f32], usize) + Sync,
) {
    grads
        .par_chunks_mut(dim)
        .enumerate()
        .with_min_len(per_task)
        .for_each(|(u, acc)| {
            let (s, e) = (starts[u] as usize, starts[u + 1] as usize);
            acc.fill(0.0);
            for i in s..e {
                add(acc, i);
            }
        });
}
