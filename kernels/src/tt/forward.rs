//! The TT gather-reduce (forward), with EL-Rec's batch-level reuse (Sec.
//! III-A, Algorithm 1's idea): the prefix product `C1[i1] C2[i2]` of each
//! distinct prefix `(i1, i2)` in the batch is computed once into the reuse
//! buffer, and each lookup then takes one small product with its last core
//! slice. Without reuse every lookup computes its own prefix product (the
//! plain TT lookup, TT-Rec's). Both compute each row with the same products
//! in the same order, so they agree bit for bit.

use nmpsim_traces::TableBatch;
use rayon::prelude::*;
use serde::Serialize;

use super::shape::TtShape;
use super::table::TtTable;
use crate::pooling::lookup_scale;
use crate::{KernelError, Pooling, Traffic};

/// What a TT primitive costs: its memory traffic, in the same accounting as
/// the other kernels (`docs/kernels.md`), and its floating-point operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TtCost {
    pub traffic: Traffic,
    pub flops: u64,
    /// Prefix products computed (the reuse buffer's entries).
    pub prefixes: u64,
}

impl std::ops::Add for TtCost {
    type Output = TtCost;
    fn add(self, o: TtCost) -> TtCost {
        TtCost {
            traffic: self.traffic + o.traffic,
            flops: self.flops + o.flops,
            prefixes: self.prefixes + o.prefixes,
        }
    }
}

/// Bags a task of the forward pools.
const BAGS_PER_TASK: usize = 64;
/// Prefix products a task computes.
const PREFIXES_PER_TASK: usize = 16;

/// The reuse buffer's key of `row`: its prefix `(i1, i2)` as `i2 m_1 + i1`,
/// so that sorted keys group the prefixes of one middle-core slice (the
/// large one, `R x n_2 x R`), computed one after another while it is in
/// cache.
#[inline]
fn reuse_key(shape: &TtShape, row: u32) -> u64 {
    let [i1, i2, _] = shape.split(row);
    i2 as u64 * shape.row_factors[0] + i1 as u64
}

/// The prefix `(i1, i2)` of reuse key `key`.
#[inline]
pub(crate) fn key_prefix(shape: &TtShape, key: u64) -> (u32, u32) {
    let m1 = shape.row_factors[0];
    ((key % m1) as u32, (key / m1) as u32)
}

/// The distinct prefix keys of `indices` (ascending) and each lookup's slot
/// in them.
pub(crate) fn prefixes(shape: &TtShape, indices: &[u32]) -> (Vec<u64>, Vec<u32>) {
    let mut keys: Vec<u64> = indices.iter().map(|&r| reuse_key(shape, r)).collect();
    keys.sort_unstable();
    keys.dedup();
    let slots = indices
        .iter()
        .map(|&r| keys.binary_search(&reuse_key(shape, r)).expect("a key") as u32)
        .collect();
    (keys, slots)
}

/// The prefix products of the prefixes `(i1, i2)` of `rows`, one after
/// another.
pub(crate) fn prefix_products_of(table: &TtTable, rows: &[u32]) -> Vec<f32> {
    let p = table.shape.prefix_rows() * table.shape.ranks[2];
    let mut buf = vec![0.0f32; rows.len() * p];
    buf.par_chunks_mut(p * PREFIXES_PER_TASK)
        .zip(rows.par_chunks(PREFIXES_PER_TASK))
        .for_each(|(out, rows)| {
            for (o, &r) in out.chunks_exact_mut(p).zip(rows) {
                table.prefix_into(r, o);
            }
        });
    buf
}

/// A row with the prefix of reuse key `key`.
fn row_of_key(shape: &TtShape, key: u64) -> u32 {
    let (i1, i2) = key_prefix(shape, key);
    let [_, m2, m3] = shape.row_factors;
    ((i1 as u64 * m2 + i2 as u64) * m3) as u32
}

/// The prefix products of prefix numbers `keys` (`row / m_3`), one after
/// another.
pub(crate) fn prefix_products(table: &TtTable, keys: &[u64]) -> Vec<f32> {
    let m3 = table.shape.row_factors[2];
    let rows: Vec<u32> = keys.iter().map(|&k| (k * m3) as u32).collect();
    prefix_products_of(table, &rows)
}

/// Forward pooling over a TT table: output row `b` combines the rows of bag
/// `b` (`B x dim`), as [`crate::gather_reduce`] does over a dense table;
/// with `reuse`, each distinct prefix product once.
pub fn tt_gather_reduce(
    table: &TtTable,
    batch: &TableBatch,
    pooling: Pooling,
    reuse: bool,
) -> Result<(Vec<f32>, TtCost), KernelError> {
    crate::gather::check_lookups(batch, pooling, table.shape.rows)?;
    let s = &table.shape;
    let (dim, bags, n) = (s.dim, batch.batch_size(), batch.num_lookups());
    let p = s.prefix_rows() * s.ranks[2];
    let (keys, slots, buf) = if reuse {
        let (keys, slots) = prefixes(&table.shape, &batch.indices);
        let rows: Vec<u32> = keys.iter().map(|&k| row_of_key(&table.shape, k)).collect();
        let buf = prefix_products_of(table, &rows);
        (keys, slots, buf)
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };
    let weights = batch.weights.as_deref();
    let mut out = vec![0.0f32; bags * dim];
    out.par_chunks_mut(dim * BAGS_PER_TASK)
        .enumerate()
        .for_each(|(task, out)| {
            let mut own = vec![0.0f32; if reuse { 0 } else { p }];
            let mut row = vec![0.0f32; dim];
            for (j, o) in out.chunks_exact_mut(dim).enumerate() {
                let b = task * BAGS_PER_TASK + j;
                let (lo, hi) = (batch.offsets[b] as usize, batch.offsets[b + 1] as usize);
                for i in lo..hi {
                    let r = batch.indices[i];
                    let prefix = if reuse {
                        &buf[slots[i] as usize * p..(slots[i] as usize + 1) * p]
                    } else {
                        table.prefix_into(r, &mut own);
                        &own[..]
                    };
                    table.last_into(r, prefix, 0.0, &mut row);
                    let f = lookup_scale(pooling, (hi - lo) as u32, weights.map(|w| w[i]));
                    if f == 1.0 {
                        o.iter_mut().zip(&row).for_each(|(a, x)| *a += *x);
                    } else {
                        o.iter_mut().zip(&row).for_each(|(a, x)| *a += f * *x);
                    }
                }
            }
        });
    let computed = if reuse { keys.len() } else { n } as u64;
    let scaled = if pooling == Pooling::Sum { 1 } else { 2 };
    let flops = computed * s.prefix_flops() + n as u64 * (s.last_flops() + scaled * dim as u64);
    Ok((out, forward_cost(table, batch, computed, reuse, flops)))
}

/// The forward's traffic: the indices and offsets (and weights) read; per
/// prefix product its two core slices read, and with reuse it is written to
/// the buffer and read back per lookup; per lookup its last core slice; the
/// pooled rows written.
fn forward_cost(
    table: &TtTable,
    batch: &TableBatch,
    computed: u64,
    reuse: bool,
    flops: u64,
) -> TtCost {
    let s = &table.shape;
    let n = batch.num_lookups() as u64;
    let bags = batch.batch_size() as u64;
    let w = if batch.weights.is_some() { n * 4 } else { 0 };
    let p = (s.prefix_rows() * s.ranks[2]) as u64 * 4;
    let slices = |k: usize| s.slice_len(k) as u64 * 4;
    let mut read = n * 4 + (bags + 1) * 4 + w + computed * (slices(0) + slices(1)) + n * slices(2);
    let mut write = bags * s.dim as u64 * 4;
    if reuse {
        write += computed * p;
        read += n * p;
    }
    TtCost {
        traffic: Traffic::new(read, write),
        flops,
        prefixes: computed,
    }
}
