//! Completions waiting for their cycle ([`DoneRing`]), and how the engine
//! hands those due to a [`DoneSink`].

use crate::RequestId;

use super::{DoneSink, NativeEngine};

/// Completion cycles and ids in completion order: a ring that grows (once,
/// to the most ever pending) when full.
#[derive(Clone)]
pub(super) struct DoneRing {
    slots: Vec<(u64, RequestId)>,
    head: usize,
    len: usize,
}

impl DoneRing {
    pub(super) fn new(cap: usize) -> Self {
        DoneRing {
            slots: vec![(u64::MAX, 0); cap.next_power_of_two().max(16)],
            head: 0,
            len: 0,
        }
    }

    /// The first cycle, `u64::MAX` when empty (free slots hold `u64::MAX`,
    /// so this needs no branch).
    #[inline(always)]
    pub(super) fn first_cycle(&self) -> u64 {
        self.slots[self.head].0
    }

    #[inline(always)]
    pub(super) fn push(&mut self, cycle: u64, id: RequestId) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let m = self.slots.len() - 1;
        self.slots[(self.head + self.len) & m] = (cycle, id);
        self.len += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.slots.len();
        let mut v = Vec::with_capacity(2 * n);
        for k in 0..self.len {
            v.push(self.slots[(self.head + k) & (n - 1)]);
        }
        v.resize(2 * n, (u64::MAX, 0));
        self.slots = v;
        self.head = 0;
    }

    /// Hands the entries due at `now` to `done`; returns how many.
    #[inline(always)]
    pub(super) fn drain_due<D: DoneSink>(&mut self, now: u64, done: &mut D) -> usize {
        let m = self.slots.len() - 1;
        let mut k = 0;
        while k < self.len {
            let s = &mut self.slots[(self.head + k) & m];
            if s.0 > now {
                break;
            }
            done.complete(s.1, now);
            s.0 = u64::MAX;
            k += 1;
        }
        self.head = (self.head + k) & m;
        self.len -= k;
        k
    }
}

impl NativeEngine {
    #[inline(always)]
    pub(super) fn emit<D: DoneSink>(&mut self, now: u64, done: &mut D) {
        let mut n = 0;
        if self.quick_done.first_cycle() <= now {
            n = self.quick_done.drain_due(now, done);
        }
        n += self.read_done.drain_due(now, done);
        self.pending -= n;
        self.next_done = self
            .quick_done
            .first_cycle()
            .min(self.read_done.first_cycle());
    }
}
