//! Stable LSD radix sort of `(u32 key, u32 value)` pairs, the sort behind both
//! gradient coalescing (argsort of src, Alg. 1) and Tensor Casting (sort-by-key
//! of (src, dst), Alg. 2).
//!
//! Keys are row ids below a known `num_rows`, so only `ceil(log2(num_rows))`
//! key bits are sorted: a 1M-row table needs 20 bits, two 10-bit passes,
//! instead of four 8-bit passes over the whole word. Each pass is parallel:
//! per-chunk histograms, an exclusive prefix over (digit, chunk), then every
//! chunk scatters into its own disjoint output slots. A stable sort has one
//! answer, so the result does not depend on the chunking or the thread count.

use nmpsim_traces::batch::rows_below;
use rayon::prelude::*;

use crate::error::KernelError;
use crate::shared::SharedMut;

/// Widest digit; 2^11 counters per chunk stay in L1.
const MAX_DIGIT_BITS: u32 = 11;
/// Below this many pairs a comparison sort beats setting up passes.
const SMALL_N: usize = 256;
/// Below this many pairs a pass runs on one chunk (no rayon overhead).
const PARALLEL_N: usize = 1 << 16;

/// Digit width of the CUDA backend's LSD radix sort (8 bits a pass).
pub const GPU_DIGIT_BITS: u32 = 8;

/// Passes of the CUDA backend's radix sort for keys below `num_rows`.
pub fn gpu_passes(num_rows: u64) -> u32 {
    key_bits(num_rows).div_ceil(GPU_DIGIT_BITS)
}

/// Number of key bits needed for keys below `num_rows`. Keys are `u32`, so
/// at most 32 whatever `num_rows` (a count past 2^32 adds no key).
pub fn key_bits(num_rows: u64) -> u32 {
    if num_rows <= 1 {
        0
    } else {
        (64 - (num_rows - 1).leading_zeros()).min(32)
    }
}

/// `(passes, digit_bits)` for `bits` key bits: the fewest passes of at most
/// `MAX_DIGIT_BITS` (11), with the bits spread evenly over them.
pub fn plan(bits: u32) -> (u32, u32) {
    if bits == 0 {
        return (0, 0);
    }
    let passes = bits.div_ceil(MAX_DIGIT_BITS);
    (passes, bits.div_ceil(passes))
}

/// Checks that every key is below `num_rows` (the range check of [`sort_pairs`]).
pub(crate) fn check_keys(keys: &[u32], num_rows: u64) -> Result<(), KernelError> {
    // (The vectorised range check first; the search only names an offender.)
    if !rows_below(keys, num_rows)
        && let Some((i, &k)) = keys
            .iter()
            .enumerate()
            .find(|&(_, &k)| k as u64 >= num_rows)
    {
        return Err(KernelError::IndexOutOfRange {
            arg: "keys",
            position: i,
            value: k as u64,
            bound: num_rows,
        });
    }
    Ok(())
}

/// Sorts `(keys[i], values[i])` by key, stably; every key must be below `num_rows`.
/// Returns `(sorted_keys, values_in_sorted_order)`.
pub fn sort_pairs(
    keys: &[u32],
    values: &[u32],
    num_rows: u64,
) -> Result<(Vec<u32>, Vec<u32>), KernelError> {
    if keys.len() != values.len() {
        return Err(KernelError::shape(
            "values",
            values.len(),
            format!("keys.len() = {}", keys.len()),
        ));
    }
    check_keys(keys, num_rows)?;
    // Key in the high half so one u64 move carries the pair.
    let mut packed: Vec<u64> = keys
        .iter()
        .zip(values)
        .map(|(&k, &v)| ((k as u64) << 32) | v as u64)
        .collect();
    sort_packed(&mut packed, key_bits(num_rows));
    let (sorted_keys, sorted_values) = if packed.len() < PARALLEL_N {
        // A small batch (one lookup per bag, say) is unpacked on this
        // thread: splitting it over the pool costs more than the work.
        let (mut k, mut v) = (vec![0u32; packed.len()], vec![0u32; packed.len()]);
        for ((k, v), &p) in k.iter_mut().zip(&mut v).zip(&packed) {
            (*k, *v) = ((p >> 32) as u32, p as u32);
        }
        (k, v)
    } else {
        (
            packed.par_iter().map(|&p| (p >> 32) as u32).collect(),
            packed.par_iter().map(|&p| p as u32).collect(),
        )
    };
    Ok((sorted_keys, sorted_values))
}

/// Stable sort of packed pairs by bits `32..32 + key_bits`.
fn sort_packed(buf: &mut Vec<u64>, key_bits: u32) {
    let n = buf.len();
    if key_bits == 0 || n < 2 {
        return;
    }
    if n < SMALL_N {
        // Every caller's values are non-decreasing in input order (positions,
        // or the bags of CSR lookups): then sorting whole pairs gives exactly
        // the stable order by key, and an unstable sort of plain u64 is about
        // twice as fast as a stable sort by key. Anything else sorts stably.
        if buf.windows(2).all(|w| (w[0] as u32) <= (w[1] as u32)) {
            buf.sort_unstable();
        } else {
            buf.sort_by_key(|p| p >> 32);
        }
        return;
    }
    let (passes, digit_bits) = plan(key_bits);
    let chunks = if n < PARALLEL_N {
        1
    } else {
        rayon::current_num_threads().max(1) * 4
    };
    let chunk_len = n.div_ceil(chunks);
    let mut tmp = vec![0u64; n];
    for pass in 0..passes {
        let shift = 32 + pass * digit_bits;
        scatter_pass(buf, &mut tmp, shift, digit_bits, chunk_len);
        std::mem::swap(buf, &mut tmp);
    }
}

fn scatter_pass(src: &[u64], dst: &mut [u64], shift: u32, digit_bits: u32, chunk_len: usize) {
    let radix = 1usize << digit_bits;
    let mask = (radix - 1) as u64;
    let digit = move |p: u64| ((p >> shift) & mask) as usize;
    // One chunk runs on this thread: handing even one task to the pool costs
    // a wake-up of a worker and a wait for it, a large part of a 2048-pair
    // sort (one lookup per bag, Criteo's tables).
    let one_chunk = chunk_len >= src.len();
    let hist = |c: &[u64]| {
        let mut h = vec![0usize; radix];
        for &p in c {
            h[digit(p)] += 1;
        }
        h
    };
    let hists: Vec<Vec<usize>> = if one_chunk {
        vec![hist(src)]
    } else {
        src.par_chunks(chunk_len).map(hist).collect()
    };
    // Start slot of (chunk c, digit d): all smaller digits of every chunk,
    // then digit d of earlier chunks. That order is what makes the pass stable.
    let mut starts = vec![vec![0usize; radix]; hists.len()];
    let mut run = 0;
    for d in 0..radix {
        for (c, h) in hists.iter().enumerate() {
            starts[c][d] = run;
            run += h[d];
        }
    }
    debug_assert_eq!(run, src.len());
    let out = SharedMut::new(dst);
    let scatter = |c: &[u64], mut next: Vec<usize>| {
        for &p in c {
            let d = digit(p);
            // SAFETY: `next[d]` walks the range the prefix sums reserved for
            // this chunk's digit-d pairs; the ranges of all (chunk, digit)
            // cells tile 0..n, so every write is in bounds and unshared.
            unsafe { out.at(next[d]).write(p) };
            next[d] += 1;
        }
    };
    if one_chunk {
        scatter(src, starts.pop().expect("one chunk"));
    } else {
        src.par_chunks(chunk_len)
            .zip(starts.into_par_iter())
            .for_each(|(c, next)| scatter(c, next));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmpsim_traces::threads::on_threads;
    use proptest::prelude::*;

    fn reference(keys: &[u32], values: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let mut v: Vec<(u32, u32)> = keys.iter().copied().zip(values.iter().copied()).collect();
        v.sort_by_key(|p| p.0);
        v.into_iter().unzip()
    }

    #[test]
    fn plans_few_even_passes() {
        assert_eq!(key_bits(1), 0);
        assert_eq!(key_bits(2), 1);
        assert_eq!(key_bits(1 << 20), 20);
        assert_eq!(key_bits((1 << 20) + 1), 21);
        assert_eq!(plan(20), (2, 10));
        assert_eq!(plan(11), (1, 11));
        assert_eq!(plan(32), (3, 11));
        // u32 keys: no more than 32 bits, however many rows are declared.
        for rows in [1u64 << 32, (1 << 40) + 1, 1 << 50, u64::MAX] {
            assert_eq!(key_bits(rows), 32, "{rows}");
        }
    }

    #[test]
    fn a_row_count_past_u32_keys_sorts_by_the_keys() {
        let keys: Vec<u32> = (0..5000u32).map(|i| (i * 7919) % 1000).collect();
        let values: Vec<u32> = (0..5000).collect();
        let mut want: Vec<(u32, u32)> = keys.iter().copied().zip(values.iter().copied()).collect();
        want.sort_by_key(|p| p.0);
        for rows in [1000u64, (1 << 40) + 1, u64::MAX] {
            let (k, v) = sort_pairs(&keys, &values, rows).unwrap();
            let got: Vec<(u32, u32)> = k.into_iter().zip(v).collect();
            assert_eq!(got, want, "{rows}");
        }
    }

    #[test]
    fn large_parallel_sort_is_stable_for_any_thread_count() {
        let n = 300_000;
        let mut rng = crate::table::SplitMix64::new(3);
        let keys: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 5000) as u32).collect();
        let values: Vec<u32> = (0..n as u32).collect();
        let want = reference(&keys, &values);
        for threads in [1, 2, 3] {
            let got = on_threads(threads, || sort_pairs(&keys, &values, 5000).unwrap());
            assert_eq!(got, want, "{threads} threads");
        }
    }

    #[test]
    fn refuses_out_of_range_keys_and_length_mismatch() {
        let e = sort_pairs(&[1, 7], &[0, 1], 7).unwrap_err().to_string();
        assert!(e.contains("`keys`[1] is 7"), "{e}");
        assert!(sort_pairs(&[1], &[0, 1], 7).is_err());
    }

    proptest! {
        #[test]
        fn matches_stable_sort_by_key(
            rows in 1u64..100_000,
            raw in proptest::collection::vec(any::<u32>(), 0..9000),
        ) {
            let keys: Vec<u32> = raw.iter().map(|&k| (k as u64 % rows) as u32).collect();
            let values: Vec<u32> = (0..keys.len() as u32).collect();
            prop_assert_eq!(sort_pairs(&keys, &values, rows).unwrap(), reference(&keys, &values));
        }

        /// Values in any order (the stable path) and non-decreasing with
        /// repeats (the bags of CSR lookups: the whole-pair path) sort as a
        /// stable sort by key does, on both sides of the small-input cutoff.
        #[test]
        fn any_values_sort_stably_by_key(
            rows in 1u64..2_000,
            pairs in proptest::collection::vec((any::<u32>(), 0u32..50), 0..6000),
            monotone in any::<bool>(),
        ) {
            let keys: Vec<u32> = pairs.iter().map(|&(k, _)| (k as u64 % rows) as u32).collect();
            let mut values: Vec<u32> = pairs.iter().map(|&(_, v)| v).collect();
            if monotone {
                values.sort_unstable();
            }
            prop_assert_eq!(sort_pairs(&keys, &values, rows).unwrap(), reference(&keys, &values));
        }
    }
}
