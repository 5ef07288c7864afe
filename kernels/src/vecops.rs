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
    prefetch_at(data.as_ptr().wrapping_add(start), dim);
}

/// Hints the L2 cache to fetch the `values` f32 at `p` (every line) soon.
/// Only a hint: any address will do (it never faults); nothing off x86-64.
#[inline(always)]
pub(crate) fn prefetch_at(p: *const f32, values: usize) {
    #[cfg(target_arch = "x86_64")]
    prefetch_lines::<{ core::arch::x86_64::_MM_HINT_T1 }>(p, values * 4);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, values);
}

/// Hints the L1 cache to fetch `row` (all its lines) soon. Only a hint: it
/// never faults and does nothing off x86-64.
#[inline(always)]
pub(crate) fn prefetch(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    prefetch_lines::<{ core::arch::x86_64::_MM_HINT_T0 }>(row.as_ptr(), size_of_val(row));
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// Prefetches every 64-byte line of the `bytes` at `p` with `HINT`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_lines<const HINT: i32>(p: *const f32, bytes: usize) {
    let p = p as *const i8;
    let mut off = 0;
    while off < bytes {
        // SAFETY: prefetch has no architectural effect and cannot fault, at
        // any address. SSE is baseline on x86-64.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_mm_prefetch::<HINT>(p.wrapping_add(off))
        };
        off += 64;
    }
}
