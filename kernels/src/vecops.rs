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
