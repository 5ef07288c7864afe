//! The engine's relative times and its wake-up: conversion to absolute
//! cycles, re-basing, raising the gate lanes of a bank group or rank
//! ([`Gate`]), setting a queue's candidate times, and recomputing every
//! queue's `ready` time.

use super::lanes::{GROUP_LANES, V8};
use super::{INF, MAX_VECS, NativeEngine, W};

/// The three kinds of gate lanes.
#[derive(Clone, Copy)]
pub(super) enum Gate {
    Act,
    Rd,
    Wr,
}

impl NativeEngine {
    /// A relative time as an absolute cycle (`u64::MAX` for [`INF`]).
    #[inline(always)]
    pub(super) fn absolute(&self, t: i32) -> u64 {
        if t == INF {
            u64::MAX
        } else {
            self.base + t as u64
        }
    }

    /// A relative time as the cycle to wake up at, without a branch:
    /// [`INF`] gives `base + i32::MAX`, past the next refresh (which every
    /// wake-up is bounded by), so it never decides one; were it ever reached,
    /// the controller would run an idle cycle, which changes nothing.
    #[inline(always)]
    pub(super) fn wake_at(&self, t: i32) -> u64 {
        self.base + t as u64
    }

    /// Re-bases every relative time on `now`. Times already past become 0,
    /// which no comparison with the present or the future can tell apart.
    #[cold]
    pub(super) fn rebase(&mut self, now: u64) {
        let d = (now - self.base) as i64;
        let f = |x: i32| {
            if x == INF {
                INF
            } else {
                (x as i64 - d).max(0) as i32
            }
        };
        let l = &mut *self.lanes;
        for arr in [
            &mut l.e_act,
            &mut l.e_pre,
            &mut l.e_rd,
            &mut l.e_wr,
            &mut l.g_act,
            &mut l.g_rd,
            &mut l.g_wr,
            &mut l.ready,
        ] {
            for v in arr.iter_mut() {
                for x in v.0.iter_mut() {
                    *x = f(*x);
                }
            }
        }
        for b in self.banks.iter_mut() {
            b.act = f(b.act);
            b.pre = f(b.pre);
            b.rd = f(b.rd);
            b.wr = f(b.wr);
        }
        for r in self.ranks.iter_mut() {
            r.next_ref = f(r.next_ref);
            for x in r.faw.iter_mut() {
                *x = f(*x);
            }
        }
        self.base = now;
    }

    #[inline(always)]
    fn gate_lanes(&mut self, which: Gate) -> &mut [V8; MAX_VECS] {
        match which {
            Gate::Act => &mut self.lanes.g_act,
            Gate::Rd => &mut self.lanes.g_rd,
            Gate::Wr => &mut self.lanes.g_wr,
        }
    }

    /// Raises `which` lanes of bank group `g` to at least `at`.
    #[inline(always)]
    pub(super) fn raise_group(&mut self, which: Gate, g: usize, at: i32) {
        let i = g / 2;
        let v = self.gate_lanes(which);
        v[i] = v[i].max(GROUP_LANES[g & 1].and(V8::splat(at)));
    }

    /// Raises `which` lanes of rank `r` to at least `at`.
    #[inline(always)]
    pub(super) fn raise_rank(&mut self, which: Gate, r: usize, at: i32) {
        let two = self.vecs_per_rank == 2;
        let v = self.gate_lanes(which);
        let at = V8::splat(at);
        if two {
            v[2 * r] = v[2 * r].max(at);
            v[2 * r + 1] = v[2 * r + 1].max(at);
        } else {
            v[r] = v[r].max(at);
        }
    }

    /// Recomputes `ready` of every lane vector (all of them: a data-dependent
    /// choice of vectors costs more in mispredicted branches than it saves);
    /// returns the earliest of the queues outside the rank being refreshed.
    #[inline(always)]
    pub(super) fn recompute(&mut self) -> i32 {
        let l = &mut *self.lanes;
        let n = self.vecs;
        let mut least = V8::splat(INF);
        for v in 0..n {
            let a = l.e_act[v].max(l.g_act[v]);
            let r = l.e_rd[v].max(l.g_rd[v]);
            let w = l.e_wr[v].max(l.g_wr[v]);
            let ready = a.min(l.e_pre[v]).min(r.min(w));
            l.ready[v] = ready;
            // Times are at least 0, so OR-ing in INF gives INF.
            least = least.min(ready.or(l.dead[v]));
        }
        least.least()
    }

    /// The queues with a command that can issue at `now` (`ready` current).
    #[inline]
    pub(super) fn ready_mask(&self, now: i32) -> u64 {
        let mut m = 0u64;
        for (v, ready) in self.lanes.ready[..self.vecs].iter().enumerate() {
            m |= (ready.at_most(now) as u64) << (v * W);
        }
        m
    }

    /// Sets queue `q`'s candidate times (bank part, [`INF`] for none).
    #[inline(always)]
    pub(super) fn set_lanes(&mut self, q: usize, a: i32, p: i32, d: i32, w: i32) {
        let l = &mut *self.lanes;
        let (v, i) = (q / W, q % W);
        l.e_act[v] = l.e_act[v].with_lane(i, a);
        l.e_pre[v] = l.e_pre[v].with_lane(i, p);
        l.e_rd[v] = l.e_rd[v].with_lane(i, d);
        l.e_wr[v] = l.e_wr[v].with_lane(i, w);
    }

    /// Sets queue `q`'s `ready` lane alone (only its lanes changed).
    #[inline(always)]
    pub(super) fn set_ready(&mut self, q: usize, t: i32) {
        let (v, i) = (q / W, q % W);
        self.lanes.ready[v] = self.lanes.ready[v].with_lane(i, t);
    }
}
