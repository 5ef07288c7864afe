//! Analytic memory traffic: the bytes a processor must load and store to run a
//! primitive, derived from the algorithm (the method of the paper's Fig. 6),
//! never measured. See `docs/kernels.md` for every formula.

use serde::Serialize;
use std::ops::{Add, AddAssign};

/// Bytes one primitive reads from and writes to memory.
#[derive(Serialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traffic {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl Traffic {
    pub fn new(read_bytes: u64, write_bytes: u64) -> Self {
        Traffic {
            read_bytes,
            write_bytes,
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes
    }
}

impl Add for Traffic {
    type Output = Traffic;
    fn add(self, o: Traffic) -> Traffic {
        Traffic {
            read_bytes: self.read_bytes + o.read_bytes,
            write_bytes: self.write_bytes + o.write_bytes,
        }
    }
}

impl AddAssign for Traffic {
    fn add_assign(&mut self, o: Traffic) {
        *self = *self + o;
    }
}

/// Bytes of one stored index (`u32`) or weight / scale (`f32`).
pub(crate) const WORD_BYTES: u64 = 4;

/// Bytes of one `dim`-wide f32 row.
pub(crate) fn row_bytes(dim: usize) -> u64 {
    dim as u64 * 4
}

/// Gather-reduce: read `n` rows, the indices, `B + 1` offsets and (weighted)
/// `n` weights; write `B` pooled rows.
pub fn gather_reduce_traffic(n: usize, bags: usize, dim: usize, weighted: bool) -> Traffic {
    let (n, b, d) = (n as u64, bags as u64, row_bytes(dim));
    let idx = n * WORD_BYTES + (b + 1) * WORD_BYTES + if weighted { n * WORD_BYTES } else { 0 };
    gather_reduce_row_traffic(n as usize, dim) + Traffic::new(idx, b * d)
}

/// The table rows of [`gather_reduce_traffic`]: a row read per lookup. (On
/// the NMP pool, what its DRAM moves: the indices come and the pooled rows
/// go over its link.)
pub fn gather_reduce_row_traffic(n: usize, dim: usize) -> Traffic {
    Traffic::new(n as u64 * row_bytes(dim), 0)
}

/// Expand (index-select of the output gradient by `dst`): read `n` gradient
/// rows and the `n` dst ids (plus `n` weights when weighted); write `n`
/// expanded rows.
pub fn expand_traffic(n: usize, dim: usize, weighted: bool) -> Traffic {
    let (n, d) = (n as u64, row_bytes(dim));
    let idx = n * WORD_BYTES + if weighted { n * WORD_BYTES } else { 0 };
    Traffic::new(n * d + idx, n * d)
}

/// Number of LSD radix passes needed to sort keys below `num_rows` with the
/// digit width [`crate::radix`] uses.
pub fn radix_passes(num_rows: u64) -> u32 {
    crate::radix::plan(crate::radix::key_bits(num_rows)).0
}

/// Bytes of `passes` radix passes over `n` (key, value) pairs, as
/// [`sort_pairs_traffic`] counts each: the keys read for the histogram, the
/// pairs read and written. (What a sort with a narrower digit moves beyond
/// this crate's radix plan.)
pub fn radix_pass_bytes(n: usize, passes: u32) -> u64 {
    n as u64 * passes as u64 * (WORD_BYTES + 2 * 2 * WORD_BYTES)
}

/// Stable radix sort of `n` (key, value) pairs: each pass reads and writes
/// both arrays; a histogram pass reads the keys once more per pass.
pub fn sort_pairs_traffic(n: usize, num_rows: u64) -> Traffic {
    let (n, p) = (n as u64, radix_passes(num_rows) as u64);
    // Packing into the sort buffer reads both inputs and writes them once;
    // each pass then reads keys for the histogram, reads pairs, writes pairs.
    let pair = 2 * WORD_BYTES;
    Traffic::new(
        n * pair + p * n * (WORD_BYTES + pair),
        n * pair + p * n * pair,
    )
}

/// Coalesce accumulate step (Alg. 1 step B, what Fig. 6's "Coalesce" bar
/// counts): read `n` expanded rows and the `n` sorted (src, position) pairs;
/// write `U` coalesced rows and `U` row ids.
pub fn coalesce_accumulate_traffic(n: usize, unique: usize, dim: usize) -> Traffic {
    let (n, u, d) = (n as u64, unique as u64, row_bytes(dim));
    Traffic::new(n * d + n * 2 * WORD_BYTES, u * d + u * WORD_BYTES)
}

/// Tensor Casting (Alg. 2): the sort-by-key of (src, dst), then a scan that
/// reads sorted src and writes flags, then the cumulative sum that reads the
/// flags and writes casted dst (and unique row ids); index arrays only.
/// Mean / weighted pooling also reads the per-lookup scale source and writes
/// the permuted scale.
pub fn tensor_cast_traffic(
    n: usize,
    bags: usize,
    unique: usize,
    num_rows: u64,
    scaled: bool,
) -> Traffic {
    let (n64, u) = (n as u64, unique as u64);
    let dst = Traffic::new((bags as u64 + 1) * WORD_BYTES, n64 * WORD_BYTES);
    let scan = Traffic::new(n64 * WORD_BYTES, n64 * WORD_BYTES);
    let cumsum = Traffic::new(n64 * WORD_BYTES, n64 * WORD_BYTES + u * WORD_BYTES);
    let scale = if scaled {
        Traffic::new(n64 * WORD_BYTES, n64 * WORD_BYTES)
    } else {
        Traffic::default()
    };
    dst + sort_pairs_traffic(n, num_rows) + scan + cumsum + scale
}

/// Casted gather-reduce (Alg. 3): read `n` gradient rows and the casted
/// (src, dst) arrays (plus `n` scales when present); write `U` rows and `U` row ids.
pub fn casted_gather_reduce_traffic(n: usize, unique: usize, dim: usize, scaled: bool) -> Traffic {
    let (n64, u) = (n as u64, unique as u64);
    let idx = n64 * 2 * WORD_BYTES + if scaled { n64 * WORD_BYTES } else { 0 };
    casted_gather_reduce_row_traffic(n, unique, dim) + Traffic::new(idx, u * WORD_BYTES)
}

/// The gradient rows of [`casted_gather_reduce_traffic`]: a row read per
/// lookup, a coalesced row written per unique row (on the NMP pool, what its
/// DRAM moves; the casted arrays come over its link).
pub fn casted_gather_reduce_row_traffic(n: usize, unique: usize, dim: usize) -> Traffic {
    let d = row_bytes(dim);
    Traffic::new(n as u64 * d, unique as u64 * d)
}

/// Scatter with an optimizer: read `U` row ids, `U` gradient rows, `U` weight
/// rows and the optimizer state of those rows; write the weights and state back.
pub fn scatter_traffic(unique: usize, dim: usize, state_values_per_row: usize) -> Traffic {
    scatter_row_traffic(unique, dim, state_values_per_row)
        + Traffic::new(unique as u64 * WORD_BYTES, 0)
}

/// The rows of [`scatter_traffic`], its row ids left out: per unique row, the
/// gradient, weight and state rows read, the weight and state rows written.
pub fn scatter_row_traffic(unique: usize, dim: usize, state_values_per_row: usize) -> Traffic {
    let (u, d) = (unique as u64, row_bytes(dim));
    let s = u * state_values_per_row as u64 * WORD_BYTES;
    Traffic::new(2 * u * d + s, u * d + s)
}
