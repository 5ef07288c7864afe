//! Row arithmetic shared by the kernels. Plain zipped loops: with the row
//! length known at run time LLVM still vectorises them (checked in the
//! benches), and keeping one definition guarantees every kernel rounds the
//! same way, which the bit-identity of casted and coalesced gradients needs.

/// How many lookups ahead the gather loops prefetch; enough to cover DRAM
/// latency at a few ns per 256 B row, few enough not to evict useful lines.
pub(crate) const PREFETCH_AHEAD: usize = 8;

#[inline(always)]
pub(crate) fn add_into(acc: &mut [f32], row: &[f32]) {
    for (a, x) in acc.iter_mut().zip(row) {
        *a += *x;
    }
}

/// `acc += scale * row`, the multiply rounded before the add (no FMA), exactly
/// as `expand` then `coalesce` would do it in two steps.
#[inline(always)]
pub(crate) fn add_scaled_into(acc: &mut [f32], row: &[f32], scale: f32) {
    for (a, x) in acc.iter_mut().zip(row) {
        *a += scale * *x;
    }
}

/// Cache lines the forward gather asks for ahead of use, per thread (16
/// lookups of 256-byte rows), fetched into L2 (`T1`): the L2 tracks far more
/// outstanding misses than the L1's few fill buffers, and hot rows already in
/// cache stay where they are. Chosen on the benchmark machine (2-vCPU Xeon
/// with AVX-512) by the dim-64 loop run on four RM1-like batches with the
/// variants interleaved in one process, 16 passes each (medians, ms, Zipf
/// 1.05 / uniform): L2, 16 rows ahead 17.5 / 27.5; L2, 8 ahead 23.8 / 27.9;
/// L1, 12 ahead 19.2 / 30.1. No prefetch at all was about 1.5x slower in an
/// earlier, noisier comparison (whole binaries alternated).
const LINES_IN_FLIGHT: usize = 64;

/// Lookups ahead to prefetch rows of `dim` f32 values: [`LINES_IN_FLIGHT`]
/// lines' worth, at least 4 and at most 64 lookups (narrow rows need many
/// lookups in flight, wide rows few).
#[inline(always)]
pub(crate) fn prefetch_distance(dim: usize) -> usize {
    let lines = (dim * 4).div_ceil(64).max(1);
    (LINES_IN_FLIGHT / lines).clamp(4, 64)
}

/// Hints the L2 cache to fetch the `dim` values at `data[start..]` (every
/// line) soon. Only a hint: it never faults (the address is not checked
/// against `data`, a prefetch past its end is harmless) and does nothing off
/// x86-64.
#[inline(always)]
pub(crate) fn prefetch_row(data: &[f32], start: usize, dim: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        let p = data.as_ptr().wrapping_add(start) as *const i8;
        let mut off = 0;
        while off < dim * 4 {
            // SAFETY: prefetch has no architectural effect and cannot fault.
            #[allow(unused_unsafe)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(off))
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, start, dim);
}

/// Hints the cache to fetch `row` (all its lines) soon. Only a hint: it never
/// faults and does nothing off x86-64.
#[inline(always)]
pub(crate) fn prefetch(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = row.as_ptr() as *const i8;
        let bytes = std::mem::size_of_val(row);
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetch has no architectural effect and cannot fault;
            // the address is inside `row` anyway. SSE is baseline on x86-64.
            #[allow(unused_unsafe)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off))
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}
