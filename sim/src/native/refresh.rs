//! Refresh: the REF command, the rank due for refresh (its open banks
//! precharged, its queues left out while it waits), and the refresh part of
//! a controller cycle.

use crate::jedec::Command;

use super::lanes::V8;
use super::times::Gate;
use super::{CLOSED, INF, MAX_VECS, NativeEngine};

impl NativeEngine {
    fn refresh(&mut self, now: u64, r: usize) {
        let nr = (now - self.base) as i32;
        let done = nr + self.d.ref_to_act;
        let rk = &mut self.ranks[r];
        debug_assert_eq!(rk.open_banks, 0);
        rk.next_ref = done;
        self.raise_rank(Gate::Act, r, done);
        self.counts.refreshes += 1;
        self.log_cmd(now, r * self.banks_per_rank, Command::Ref);
    }

    /// For the rank due for refresh: a PRE of its first open bank that may
    /// close, or the REF itself, if either can issue at `now`; else the
    /// earliest cycle at which one could.
    fn refresh_step(&mut self, now: u64, r: usize) -> Result<(), u64> {
        let nr = (now - self.base) as i32;
        let first = r * self.banks_per_rank;
        let mut earliest = INF;
        for q in first..first + self.banks_per_rank {
            let b = &self.banks[q];
            if b.open_row != CLOSED {
                if b.pre <= nr {
                    self.precharge(now, q);
                    return Ok(());
                }
                earliest = earliest.min(b.pre);
            }
        }
        if self.ranks[r].open_banks != 0 {
            return Err(self.absolute(earliest));
        }
        let t = self.ranks[r].next_ref;
        if t > nr {
            return Err(self.absolute(t));
        }
        self.refresh(now, r);
        self.refresh_q.pop_front();
        self.refresh_at = if self.refresh_q.is_empty() {
            self.next_refresh
        } else {
            0
        };
        self.set_refreshing(None);
        Ok(())
    }

    fn rank_mask(&self, r: usize) -> u64 {
        let ones = if self.banks_per_rank == 64 {
            u64::MAX
        } else {
            (1u64 << self.banks_per_rank) - 1
        };
        ones << (r * self.banks_per_rank)
    }

    /// Marks rank `r` as the one being refreshed (its queues issue nothing
    /// and do not count for the wake-up), or none.
    fn set_refreshing(&mut self, r: Option<usize>) {
        self.lanes.dead = [V8::splat(0); MAX_VECS];
        match r {
            Some(r) => {
                self.ref_mask = self.rank_mask(r);
                let n = self.vecs_per_rank;
                for d in &mut self.lanes.dead[r * n..(r + 1) * n] {
                    *d = V8::splat(INF);
                }
            }
            None => {
                self.ref_mask = 0;
            }
        }
    }

    /// The refresh part of [`step`](Self::step), at a cycle where a refresh
    /// falls due or one is under way: returns whether a command issued and
    /// the earliest cycle the refresh needs the controller again.
    #[cold]
    #[inline(never)]
    pub(super) fn refresh_part(&mut self, now: u64) -> (bool, u64) {
        if now - self.base >= self.rebase_after {
            self.rebase(now);
        }
        if now == self.next_refresh {
            self.refresh_q.push_back(self.next_refresh_rank);
            self.refresh_at = 0;
            self.next_refresh_rank = (self.next_refresh_rank + 1) % self.config.ranks;
            self.next_refresh += self.refresh_interval;
        }
        let mut wake = self.next_refresh;
        let mut issued = false;
        if let Some(&r) = self.refresh_q.front() {
            self.set_refreshing(Some(r as usize));
            match self.refresh_step(now, r as usize) {
                Ok(()) => issued = true,
                Err(t) => wake = wake.min(t),
            }
        }
        (issued, wake)
    }
}
