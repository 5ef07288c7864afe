//! Forward gather-reduce (`EmbeddingBag`) and its dual, the gradient expand.

use std::sync::atomic::{AtomicBool, Ordering};

use nmpsim_traces::TableBatch;
use nmpsim_traces::batch::rows_below;
use rayon::prelude::*;

use crate::error::{KernelError, check_batch, check_batch_shape, check_dim, check_grad_out};
use crate::pooling::{Pooling, lookup_scale};
use crate::table::{EmbeddingTable, resize_for_overwrite};
use crate::traffic::{Traffic, expand_traffic, gather_reduce_traffic};
use crate::vecops::{add_into, add_scaled_into, prefetch_distance, prefetch_row};

/// Bags per rayon task in the expand: big enough to amortise scheduling,
/// small enough to balance a 2048-bag batch over many cores.
const BAGS_PER_TASK: usize = 16;
/// Lookups per rayon task in the forward gather-reduce (whole bags each).
const LOOKUPS_PER_TASK: usize = 4096;
/// A table up to this size may sit in cache, where a forward of a few thousand
/// lookups costs less than handing a second task to the pool; a larger one's
/// rows come from DRAM.
const CACHED_TABLE_BYTES: usize = 1 << 20;
/// Lookups per task at least, where a batch is split for the threads' sake.
const MIN_LOOKUPS_PER_TASK: usize = 256;

/// Bags per forward task: about [`LOOKUPS_PER_TASK`] lookups' worth, at least
/// one. The lookups of a table over [`CACHED_TABLE_BYTES`] are also split
/// into at least `threads` tasks (of [`MIN_LOOKUPS_PER_TASK`] or more): they
/// wait on DRAM, and a small batch of them (2048 one-lookup bags, Criteo's)
/// in one task leaves the other threads idle. Measured on Criteo-Kaggle
/// batches of 2048 (26 tables, dim 16, sum pooling, forwards back to back in
/// a 2-thread pool, the code before and after alternated in one process, 600
/// repetitions, median of the per-pair ratios; 2-vCPU AMD EPYC), four runs:
/// 1.13-1.18x faster on the profile's Zipf rows, 1.05-1.14x on uniform rows.
fn bags_per_task(lookups: usize, bags: usize, table_bytes: usize, threads: usize) -> usize {
    let per_bag = lookups.div_ceil(bags.max(1)).max(1);
    let mut per_task = LOOKUPS_PER_TASK;
    if table_bytes > CACHED_TABLE_BYTES {
        per_task = per_task.min(lookups.div_ceil(threads.max(1)).max(MIN_LOOKUPS_PER_TASK));
    }
    (per_task / per_bag).clamp(1, bags.max(1))
}

/// The bags of one forward task: `offsets` are theirs (one more than bags),
/// indexing the whole batch's `idx` and `weights`.
///
/// Whoever builds one guarantees what the unchecked reads of
/// [`Bags::reduce_fixed`] rely on: `offsets` non-decreasing and at most
/// `idx.len()`, `weights` (if any) as long as `idx`, and every index of these
/// bags' lookups (`idx[offsets[0]..offsets[last]]`) a row inside `data`.
struct Bags<'a> {
    data: &'a [f32],
    idx: &'a [u32],
    weights: Option<&'a [f32]>,
    offsets: &'a [u32],
    mean: bool,
}

impl Bags<'_> {
    #[inline(always)]
    fn reduce(&self, out: &mut [f32], dim: usize) {
        match dim {
            16 => self.reduce_fixed::<16>(out),
            32 => self.reduce_fixed::<32>(out),
            64 => self.reduce_fixed::<64>(out),
            128 => self.reduce_fixed::<128>(out),
            _ => self.reduce_any(out, dim),
        }
    }

    /// [`Bags::reduce`] compiled for AVX-512: a 64-wide row is four 512-bit
    /// adds instead of eight 256-bit ones. The same element-wise f32
    /// operations in the same order (no FMA: LLVM never contracts without
    /// fast-math), so the same bits.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce_avx512(&self, out: &mut [f32], dim: usize) {
        self.reduce(out, dim)
    }

    /// Rows of `D` values: a fixed-size accumulator the compiler keeps in
    /// vector registers across the bag, and rows read as `[f32; D]`, so no
    /// per-lookup loop bound or accumulator load/store. Each element still
    /// adds its rows in lookup order (the multiply of a weighted row rounded
    /// before the add), so results equal [`Bags::reduce_any`]'s bit for bit.
    #[inline(always)]
    fn reduce_fixed<const D: usize>(&self, out: &mut [f32]) {
        let (data, idx) = (self.data, self.idx);
        let ahead = prefetch_distance(D);
        // The loops below read rows and indices without bounds checks: a
        // check per lookup costs the random-read loop about a tenth of its
        // speed (more instructions per row, fewer rows in flight).
        debug_assert!(self.offsets.windows(2).all(|w| w[0] <= w[1]));
        debug_assert!(self.offsets.last().is_none_or(|&e| e as usize <= idx.len()));
        let row = |i: usize| -> &[f32; D] {
            // SAFETY: `i` is one of this task's lookups, so `i < idx.len()`
            // (offsets checked non-decreasing and ending at `idx.len()`), and
            // its index is below the table's rows (the task checked its
            // lookups with `rows_below` before building `Bags`), whose
            // `rows * D` values `check_table` found in `data`; so the row lies
            // inside `data`. `[f32; D]` has `f32`'s alignment.
            unsafe {
                let r = *idx.get_unchecked(i) as usize;
                &*data.as_ptr().add(r * D).cast::<[f32; D]>()
            }
        };
        let ahead_row = |i: usize| -> usize {
            // SAFETY: called only with `i < idx.len()`.
            unsafe { *idx.get_unchecked(i) as usize * D }
        };
        for (b, acc) in out.chunks_exact_mut(D).enumerate() {
            let (s, e) = (self.offsets[b] as usize, self.offsets[b + 1] as usize);
            let mut local = [0.0f32; D];
            match self.weights {
                None => {
                    for i in s..e {
                        if i + ahead < idx.len() {
                            prefetch_row(data, ahead_row(i + ahead), D);
                        }
                        let x = row(i);
                        for k in 0..D {
                            local[k] += x[k];
                        }
                    }
                }
                Some(w) => {
                    debug_assert_eq!(w.len(), idx.len());
                    for i in s..e {
                        if i + ahead < idx.len() {
                            prefetch_row(data, ahead_row(i + ahead), D);
                        }
                        // SAFETY: `w` has one weight per index (`check_batch`).
                        let (x, wi) = (row(i), unsafe { *w.get_unchecked(i) });
                        for k in 0..D {
                            local[k] += wi * x[k];
                        }
                    }
                }
            }
            if self.mean && e > s {
                let len = (e - s) as f32;
                local.iter_mut().for_each(|a| *a /= len);
            }
            acc.copy_from_slice(&local);
        }
    }

    /// Any row length: the same sums, accumulated in the output row.
    #[inline(always)]
    fn reduce_any(&self, out: &mut [f32], dim: usize) {
        let (data, idx) = (self.data, self.idx);
        let ahead = prefetch_distance(dim);
        let row = |i: usize| {
            let r = idx[i] as usize;
            &data[r * dim..(r + 1) * dim]
        };
        for (b, acc) in out.chunks_exact_mut(dim).enumerate() {
            let (s, e) = (self.offsets[b] as usize, self.offsets[b + 1] as usize);
            acc.fill(0.0);
            for i in s..e {
                if i + ahead < idx.len() {
                    prefetch_row(data, idx[i + ahead] as usize * dim, dim);
                }
                match self.weights {
                    Some(w) => add_scaled_into(acc, row(i), w[i]),
                    None => add_into(acc, row(i)),
                }
            }
            if self.mean && e > s {
                let len = (e - s) as f32;
                acc.iter_mut().for_each(|a| *a /= len);
            }
        }
    }
}

/// Gradients expanded to one row per lookup (the input of [`crate::coalesce`](fn@crate::coalesce)).
#[derive(Debug, Clone, PartialEq)]
pub struct Expanded {
    /// Table row of every lookup (the batch's indices).
    pub src: Vec<u32>,
    pub dim: usize,
    /// `src.len() x dim`, row `i` is the gradient for lookup `i`.
    pub grads: Vec<f32>,
}

impl Expanded {
    /// No lookups yet: a buffer for [`expand_into`] to fill.
    pub fn empty(dim: usize) -> Self {
        Expanded {
            src: Vec::new(),
            dim,
            grads: Vec::new(),
        }
    }
}

pub(crate) fn check_table(table: &EmbeddingTable) -> Result<(), KernelError> {
    check_dim(table.dim)?;
    let want = (table.rows as u128) * table.dim as u128;
    if table.data.len() as u128 != want {
        return Err(KernelError::shape(
            "table.data",
            table.data.len(),
            format!("rows x dim = {want}"),
        ));
    }
    Ok(())
}

pub(crate) fn check_pooling(batch: &TableBatch, pooling: Pooling) -> Result<(), KernelError> {
    if pooling == Pooling::WeightedSum && batch.weights.is_none() {
        return Err(KernelError::invalid(
            "batch.weights",
            "weighted-sum pooling needs per-index weights; the batch has none",
        ));
    }
    Ok(())
}

/// Every rule a gather-reduce's inputs must meet, shared by all backends.
pub(crate) fn check_gather_inputs(
    table: &EmbeddingTable,
    batch: &TableBatch,
    pooling: Pooling,
) -> Result<(), KernelError> {
    check_table(table)?;
    check_lookups(batch, pooling, table.rows)
}

/// The batch and pooling rules, and that the batch indexes a table of `rows`
/// rows (for tables checked elsewhere, e.g. resident on a device).
pub(crate) fn check_lookups(
    batch: &TableBatch,
    pooling: Pooling,
    rows: u64,
) -> Result<(), KernelError> {
    check_batch(batch)?;
    check_lookups_shape(batch, pooling, rows)
}

/// [`check_lookups`] but for the indices themselves, which the caller checks
/// against `rows` before reading them.
fn check_lookups_shape(batch: &TableBatch, pooling: Pooling, rows: u64) -> Result<(), KernelError> {
    check_batch_shape(batch)?;
    check_pooling(batch, pooling)?;
    if batch.num_rows != rows {
        return Err(KernelError::shape(
            "batch.num_rows",
            batch.num_rows,
            format!("the table's {rows} rows"),
        ));
    }
    Ok(())
}

/// Every rule an expand's inputs must meet, shared by all backends.
pub(crate) fn check_expand_inputs(
    grad_out: &[f32],
    dim: usize,
    batch: &TableBatch,
    pooling: Pooling,
) -> Result<(), KernelError> {
    check_dim(dim)?;
    check_batch(batch)?;
    check_pooling(batch, pooling)?;
    check_grad_out(grad_out, batch.batch_size(), dim)
}

/// Forward pooling: output row `b` combines the table rows of bag `b`
/// (`B x dim`, row-major). An empty bag gives zeros.
pub fn gather_reduce(
    table: &EmbeddingTable,
    batch: &TableBatch,
    pooling: Pooling,
) -> Result<(Vec<f32>, Traffic), KernelError> {
    let mut out = Vec::new();
    let traffic = gather_reduce_into(table, batch, pooling, &mut out)?;
    Ok((out, traffic))
}

/// [`gather_reduce`] into a reused buffer (see [`expand_into`] for why).
pub fn gather_reduce_into(
    table: &EmbeddingTable,
    batch: &TableBatch,
    pooling: Pooling,
    out: &mut Vec<f32>,
) -> Result<Traffic, KernelError> {
    // Everything but the indices' range, which each task checks for its own
    // lookups before reading their rows: the check then runs on every thread,
    // on indices about to be read anyway, not as a serial pass over the batch
    // first (about 5% of an RM1 forward).
    check_table(table)?;
    check_lookups_shape(batch, pooling, table.rows)?;
    let dim = table.dim;
    let bags = batch.batch_size();
    let idx = &batch.indices;
    let weights = match (pooling, batch.weights.as_deref()) {
        (Pooling::WeightedSum, Some(w)) => Some(w),
        _ => None,
    };
    let data = &table.data;
    // Every value is written below (each bag's row is overwritten).
    resize_for_overwrite(out, bags * dim);
    // Tasks of whole bags holding about LOOKUPS_PER_TASK lookups: a batch of
    // one-lookup bags (Criteo) is a few tasks, not thousands of tiny ones.
    let per_task = bags_per_task(
        idx.len(),
        bags,
        size_of_val(&data[..]),
        rayon::current_num_threads(),
    );
    let mean = pooling == Pooling::Mean;
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::is_x86_feature_detected!("avx512f");
    let out_of_range = AtomicBool::new(false);
    out.par_chunks_mut(dim * per_task)
        .enumerate()
        .for_each(|(task, chunk)| {
            let first = task * per_task;
            let offsets = &batch.offsets[first..=first + chunk.len() / dim];
            let (s, e) = (offsets[0] as usize, offsets[offsets.len() - 1] as usize);
            if !rows_below(&idx[s..e], table.rows) {
                out_of_range.store(true, Ordering::Relaxed);
                return;
            }
            // Bags::reduce reads only these lookups' rows: in range, as just checked.
            let bags = Bags {
                data,
                idx,
                weights,
                offsets,
                mean,
            };
            #[cfg(target_arch = "x86_64")]
            if avx512 {
                // SAFETY: the CPU has AVX-512F (checked before the tasks).
                unsafe { bags.reduce_avx512(chunk, dim) };
                return;
            }
            bags.reduce(chunk, dim);
        });
    if out_of_range.into_inner() {
        // Names the first index past the table (`out` holds no result).
        check_batch(batch)?;
        unreachable!("a task found an index past the table but the batch check did not");
    }
    Ok(gather_reduce_traffic(
        idx.len(),
        bags,
        dim,
        pooling == Pooling::WeightedSum,
    ))
}

/// Backward of gather-reduce before coalescing: lookup `i` of bag `b` gets
/// `scale_i * grad_out[b]` (scale 1 for sum, `1 / len` for mean, the weight
/// for weighted sum). `grad_out` is `B x dim`.
pub fn expand(
    grad_out: &[f32],
    dim: usize,
    batch: &TableBatch,
    pooling: Pooling,
) -> Result<(Expanded, Traffic), KernelError> {
    let mut out = Expanded::empty(dim);
    let traffic = expand_into(grad_out, dim, batch, pooling, &mut out)?;
    Ok((out, traffic))
}

/// [`expand`] into a reused buffer: a trainer calls this every step, and
/// reusing the `n x dim` allocation avoids faulting in fresh pages each time
/// (tens of MB per table, which costs as much as the kernel itself).
pub fn expand_into(
    grad_out: &[f32],
    dim: usize,
    batch: &TableBatch,
    pooling: Pooling,
    out: &mut Expanded,
) -> Result<Traffic, KernelError> {
    check_expand_inputs(grad_out, dim, batch, pooling)?;
    let bags = batch.batch_size();
    let n = batch.num_lookups();
    let weights = batch.weights.as_deref();
    let grads = &mut out.grads;
    // Every value is written below.
    resize_for_overwrite(grads, n * dim);
    // Each task owns the lookups of a run of bags: a contiguous block of rows.
    let mut pieces = Vec::with_capacity(bags.div_ceil(BAGS_PER_TASK));
    let mut rest: &mut [f32] = grads;
    for first in (0..bags).step_by(BAGS_PER_TASK) {
        let last = (first + BAGS_PER_TASK).min(bags);
        let len = (batch.offsets[last] - batch.offsets[first]) as usize * dim;
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(len);
        pieces.push((first, last, piece));
        rest = tail;
    }
    pieces.into_par_iter().for_each(|(first, last, piece)| {
        let base = batch.offsets[first] as usize;
        for bag in first..last {
            let g = &grad_out[bag * dim..(bag + 1) * dim];
            let (s, e) = (batch.offsets[bag] as usize, batch.offsets[bag + 1] as usize);
            for i in s..e {
                let out = &mut piece[(i - base) * dim..(i - base + 1) * dim];
                if pooling == Pooling::Sum {
                    out.copy_from_slice(g);
                } else {
                    let scale = lookup_scale(pooling, (e - s) as u32, weights.map(|w| w[i]));
                    out.iter_mut().zip(g).for_each(|(o, x)| *o = scale * *x);
                }
            }
        }
    });
    out.src.clear();
    out.src.extend_from_slice(&batch.indices);
    out.dim = dim;
    Ok(expand_traffic(n, dim, pooling == Pooling::WeightedSum))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fill_uniform;

    /// Forward tasks: about 4096 lookups of whole bags; a table past the
    /// cached size is also split among the threads, down to 256 lookups a task.
    #[test]
    fn forward_tasks_split_tables_that_miss_the_cache_among_the_threads() {
        let big = CACHED_TABLE_BYTES + 1;
        // RM1: 2048 bags of 80 lookups, 51 bags a task either way.
        assert_eq!(bags_per_task(163_840, 2048, 100 << 20, 2), 51);
        assert_eq!(bags_per_task(163_840, 2048, 1 << 10, 2), 51);
        // Criteo: 2048 one-lookup bags are one task of a cached table, one
        // per thread of a larger one, never under 256 lookups.
        assert_eq!(bags_per_task(2048, 2048, CACHED_TABLE_BYTES, 2), 2048);
        assert_eq!(bags_per_task(2048, 2048, big, 2), 1024);
        assert_eq!(bags_per_task(2048, 2048, big, 16), 256);
        assert_eq!(bags_per_task(2048, 2048, big, 1), 2048);
        // A bag is never split, and an empty batch is one task.
        assert_eq!(bags_per_task(3000, 2, big, 4), 1);
        assert_eq!(bags_per_task(0, 0, big, 2), 1);
    }

    /// Both compilations of the forward loop (the baseline build's and the
    /// AVX-512 one, where the CPU has it) give the scalar loop's bits, so
    /// the path a machine takes never changes a result.
    #[test]
    fn both_compilations_of_the_forward_give_the_same_bits() {
        let rows = 97usize;
        for dim in [8usize, 16, 24, 32, 64, 128] {
            let mut data = vec![0.0f32; rows * dim];
            fill_uniform(&mut data, -1.0, 1.0, dim as u64);
            let lens = [0usize, 1, 5, 80, 3, 0, 17];
            let mut offsets = vec![0u32];
            let mut idx = Vec::new();
            for (b, &l) in lens.iter().enumerate() {
                idx.extend((0..l).map(|i| ((b * 31 + i * 7) % rows) as u32));
                offsets.push(idx.len() as u32);
            }
            let mut w = vec![0.0f32; idx.len()];
            fill_uniform(&mut w, -2.0, 2.0, 5);
            for (weights, mean) in [(None, false), (None, true), (Some(&w[..]), false)] {
                let bags = Bags {
                    data: &data,
                    idx: &idx,
                    weights,
                    offsets: &offsets,
                    mean,
                };
                let mut want = vec![0.0f32; lens.len() * dim];
                for b in 0..lens.len() {
                    let (s, e) = (offsets[b] as usize, offsets[b + 1] as usize);
                    for k in 0..dim {
                        let mut acc = 0.0f32;
                        for i in s..e {
                            let x = data[idx[i] as usize * dim + k];
                            acc += weights.map_or(x, |w| w[i] * x);
                        }
                        if mean && e > s {
                            acc /= (e - s) as f32;
                        }
                        want[b * dim + k] = acc;
                    }
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let mut got = vec![f32::NAN; lens.len() * dim];
                bags.reduce(&mut got, dim);
                assert_eq!(bits(&got), bits(&want), "dim {dim} mean {mean}");
                #[cfg(target_arch = "x86_64")]
                if std::is_x86_feature_detected!("avx512f") {
                    let mut got = vec![f32::NAN; lens.len() * dim];
                    // SAFETY: checked just above.
                    unsafe { bags.reduce_avx512(&mut got, dim) };
                    assert_eq!(bits(&got), bits(&want), "avx512 dim {dim} mean {mean}");
                }
            }
        }
    }
}
