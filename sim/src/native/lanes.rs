//! Per-queue times as lane vectors: [`V8`] (eight `i32` lanes, two bank
//! groups of four banks) with its AVX2 operations and their lane-by-lane
//! fallback (`simd`), the bank-group lane masks, and [`Lanes`], every bank
//! queue's candidate, gate and `ready` times.

#[cfg(doc)]
use super::INF;
use super::{MAX_VECS, W};

/// Eight per-queue times: one lane vector (two bank groups of four banks).
/// With AVX2 (the project's default target) every operation is one or a few
/// vector instructions; other targets run the same operations lane by lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(32))]
pub(super) struct V8(pub(super) [i32; W]);

#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
pub(super) mod simd {
    //! SAFETY (every `unsafe` block here): this module is compiled only when
    //! the whole build targets AVX2 (the project's default,
    //! `.cargo/config.toml`), where any code may use AVX2 instructions, and
    //! `nmpsim` checks the CPU at start-up. `V8` and `__m256i` are both 32
    //! bytes of integer lanes, valid for every bit pattern. The two loads in
    //! `equal8` read the two halves of a 64-byte array.
    use super::{V8, W};
    use std::arch::x86_64::*;

    #[inline(always)]
    fn m(v: V8) -> __m256i {
        unsafe { std::mem::transmute::<V8, __m256i>(v) }
    }
    #[inline(always)]
    fn v(x: __m256i) -> V8 {
        unsafe { std::mem::transmute::<__m256i, V8>(x) }
    }
    #[inline(always)]
    pub(super) fn max(a: V8, b: V8) -> V8 {
        v(unsafe { _mm256_max_epi32(m(a), m(b)) })
    }
    #[inline(always)]
    pub(super) fn min(a: V8, b: V8) -> V8 {
        v(unsafe { _mm256_min_epi32(m(a), m(b)) })
    }
    #[inline(always)]
    pub(super) fn and(a: V8, b: V8) -> V8 {
        v(unsafe { _mm256_and_si256(m(a), m(b)) })
    }
    #[inline(always)]
    pub(super) fn or(a: V8, b: V8) -> V8 {
        v(unsafe { _mm256_or_si256(m(a), m(b)) })
    }
    #[inline(always)]
    pub(super) fn at_most(a: V8, x: i32) -> u32 {
        // x < i32::MAX: times stay far below it.
        unsafe {
            let gt = _mm256_cmpgt_epi32(_mm256_set1_epi32(x + 1), m(a));
            _mm256_movemask_ps(_mm256_castsi256_ps(gt)) as u32
        }
    }
    #[inline(always)]
    pub(super) fn least(a: V8) -> i32 {
        unsafe {
            let x = m(a);
            let x = _mm256_min_epi32(x, _mm256_permute2x128_si256::<1>(x, x));
            let x = _mm256_min_epi32(x, _mm256_shuffle_epi32::<0b01_00_11_10>(x));
            let x = _mm256_min_epi32(x, _mm256_shuffle_epi32::<0b10_11_00_01>(x));
            _mm256_cvtsi256_si32(x)
        }
    }
    /// Bit `s` set where `slots[s] == key`.
    #[inline(always)]
    pub(crate) fn equal8(slots: &[u64; 8], key: u64) -> u32 {
        unsafe {
            let k = _mm256_set1_epi64x(key as i64);
            let p = slots.as_ptr() as *const __m256i;
            let lo = _mm256_cmpeq_epi64(_mm256_loadu_si256(p), k);
            let hi = _mm256_cmpeq_epi64(_mm256_loadu_si256(p.add(1)), k);
            let lo = _mm256_movemask_pd(_mm256_castsi256_pd(lo)) as u32;
            let hi = _mm256_movemask_pd(_mm256_castsi256_pd(hi)) as u32;
            lo | hi << 4
        }
    }
    /// Bit `s` set where `rows[s] == key`.
    #[inline(always)]
    pub(crate) fn equal8_u32(rows: &[u32; 8], key: u32) -> u32 {
        unsafe {
            let k = _mm256_set1_epi32(key as i32);
            let x = _mm256_loadu_si256(rows.as_ptr() as *const __m256i);
            let e = _mm256_cmpeq_epi32(x, k);
            _mm256_movemask_ps(_mm256_castsi256_ps(e)) as u32
        }
    }
    #[inline(always)]
    pub(super) fn with_lane(a: V8, i: usize, x: i32) -> V8 {
        debug_assert!(i < W);
        v(unsafe {
            let lane = _mm256_cmpeq_epi32(
                _mm256_set1_epi32(i as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            );
            _mm256_blendv_epi8(m(a), _mm256_set1_epi32(x), lane)
        })
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
pub(super) mod simd {
    use super::{V8, W};

    #[inline(always)]
    fn zip(a: V8, b: V8, f: impl Fn(i32, i32) -> i32) -> V8 {
        let mut r = a;
        for i in 0..W {
            r.0[i] = f(a.0[i], b.0[i]);
        }
        r
    }
    #[inline(always)]
    pub(super) fn max(a: V8, b: V8) -> V8 {
        zip(a, b, i32::max)
    }
    #[inline(always)]
    pub(super) fn min(a: V8, b: V8) -> V8 {
        zip(a, b, i32::min)
    }
    #[inline(always)]
    pub(super) fn and(a: V8, b: V8) -> V8 {
        zip(a, b, |x, y| x & y)
    }
    #[inline(always)]
    pub(super) fn or(a: V8, b: V8) -> V8 {
        zip(a, b, |x, y| x | y)
    }
    #[inline(always)]
    pub(super) fn at_most(a: V8, x: i32) -> u32 {
        let mut m = 0u32;
        for i in 0..W {
            m |= ((a.0[i] <= x) as u32) << i;
        }
        m
    }
    #[inline(always)]
    pub(super) fn least(a: V8) -> i32 {
        a.0.iter().copied().min().unwrap_or(i32::MAX)
    }
    /// Bit `s` set where `slots[s] == key`.
    #[inline(always)]
    pub(crate) fn equal8(slots: &[u64; 8], key: u64) -> u32 {
        let mut m = 0u32;
        for (s, &a) in slots.iter().enumerate() {
            m |= ((a == key) as u32) << s;
        }
        m
    }
    /// Bit `s` set where `rows[s] == key`.
    #[inline(always)]
    pub(crate) fn equal8_u32(rows: &[u32; 8], key: u32) -> u32 {
        let mut m = 0u32;
        for (s, &r) in rows.iter().enumerate() {
            m |= ((r == key) as u32) << s;
        }
        m
    }
    #[inline(always)]
    pub(super) fn with_lane(mut a: V8, i: usize, x: i32) -> V8 {
        a.0[i] = x;
        a
    }
}

impl V8 {
    pub(super) const fn splat(x: i32) -> V8 {
        V8([x; W])
    }
    #[inline(always)]
    pub(super) fn max(self, o: V8) -> V8 {
        simd::max(self, o)
    }
    #[inline(always)]
    pub(super) fn min(self, o: V8) -> V8 {
        simd::min(self, o)
    }
    #[inline(always)]
    pub(super) fn and(self, o: V8) -> V8 {
        simd::and(self, o)
    }
    #[inline(always)]
    pub(super) fn or(self, o: V8) -> V8 {
        simd::or(self, o)
    }
    /// Bit `i` set where lane `i` is at most `x`.
    #[inline(always)]
    pub(super) fn at_most(self, x: i32) -> u32 {
        simd::at_most(self, x)
    }
    /// The least lane.
    #[inline(always)]
    pub(super) fn least(self) -> i32 {
        simd::least(self)
    }
    /// `self` with lane `i` replaced by `x`, as a whole-vector operation (a
    /// later vector load of the result then forwards from this store).
    #[inline(always)]
    pub(super) fn with_lane(self, i: usize, x: i32) -> V8 {
        simd::with_lane(self, i, x)
    }
}

/// Lane masks of the two bank groups in a vector.
pub(super) const GROUP_LANES: [V8; 2] = [
    V8([-1, -1, -1, -1, 0, 0, 0, 0]),
    V8([0, 0, 0, 0, -1, -1, -1, -1]),
];

/// Per-queue times, laid out as lane vectors. Every time is a cycle after
/// the engine's `base`, at least 0 (times already past are clamped there, which
/// changes no comparison with the present or the future) or [`INF`].
#[derive(Clone)]
pub(super) struct Lanes {
    /// The queue's bank part of each candidate command's earliest cycle
    /// (ACTIVATE, PRECHARGE, READ, WRITE), or [`INF`] where the queue has no
    /// such candidate.
    pub(super) e_act: [V8; MAX_VECS],
    pub(super) e_pre: [V8; MAX_VECS],
    pub(super) e_rd: [V8; MAX_VECS],
    pub(super) e_wr: [V8; MAX_VECS],
    /// The bank-group and rank part (what the other ranks impose included)
    /// of the ACTIVATE, READ and WRITE times. Only ever raised, so a command
    /// raises the lanes of its group and rank with one vector max each.
    pub(super) g_act: [V8; MAX_VECS],
    pub(super) g_rd: [V8; MAX_VECS],
    pub(super) g_wr: [V8; MAX_VECS],
    /// The earliest cycle at which one of the queue's commands can issue, as
    /// things stand: exact, recomputed after every change.
    pub(super) ready: [V8; MAX_VECS],
    /// [`INF`] in the lanes of the rank being refreshed, 0 elsewhere: OR-ed
    /// into `ready`, it leaves those queues out of the wake-up.
    pub(super) dead: [V8; MAX_VECS],
}

#[inline(always)]
pub(super) fn lane(v: &[V8; MAX_VECS], q: usize) -> i32 {
    v[q / W].0[q % W]
}
