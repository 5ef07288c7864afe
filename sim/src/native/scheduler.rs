//! The controller's cycle: moving transactions into the bank queues
//! (DRAMsim3's `ScheduleTransaction`, write drains included), the step that
//! issues a command and sets the next wake-up, a read moved at its arrival
//! ([`Direct`]), and the clock (`tick_once`, `run_until_done`).

#[cfg(doc)]
use crate::engine::DramEngine;

use super::cmd_queue::WRITE_TAG;
use super::lanes::lane;
use super::txn_queue::Txn;
use super::{DoneSink, NativeEngine, WRITE_DRAIN_LOW};

/// A read moved to its bank queue at arrival (see `NativeEngine::direct`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Direct {
    pub(super) cycle: u64,
    queue: usize,
    wake: u64,
}

impl NativeEngine {
    /// Whether a read of `addr` (in bank queue `q`) waits to issue.
    #[inline(always)]
    fn read_pending(&self, q: usize, addr: u64) -> bool {
        self.cq.find(q, addr).is_some() || self.read_q.find(q, addr).is_some()
    }

    /// Whether a write of `addr` (in bank queue `q`) waits to issue.
    #[inline(always)]
    pub(super) fn write_pending(&self, q: usize, addr: u64) -> bool {
        self.unissued_writes != 0
            && (self.cq.find(q, addr | WRITE_TAG).is_some() || self.write_q.find(q, addr).is_some())
    }

    /// Whether a write drain starts now: the buffer is full, or holds more
    /// than [`WRITE_DRAIN_LOW`] writes while every command queue is empty, or
    /// the front end has nothing left in flight.
    #[inline(always)]
    fn drain_starts(&self) -> bool {
        let n = self.write_q.len;
        self.write_draining == 0
            && n != 0
            && (n >= self.txn_cap || (n > WRITE_DRAIN_LOW && self.nonempty == 0) || self.flush)
    }

    /// The queue of `cand` (non-empty) whose turn it is: the first after the
    /// last to issue, round robin.
    #[inline(always)]
    pub(super) fn next_in_turn(&self, cand: u64) -> usize {
        let start = self.queue_idx + 1;
        let high = cand & u64::MAX.checked_shl(start as u32).unwrap_or(0);
        let pool = high | (cand & ((high == 0) as u64).wrapping_neg());
        pool.trailing_zeros() as usize
    }

    /// Moves at most one transaction into its bank queue (DRAMsim3's
    /// `ScheduleTransaction`). Returns the queue that received a command.
    #[inline(always)]
    fn schedule_transaction(&mut self) -> Option<(usize, i32)> {
        if self.write_q.len == 0 && self.write_draining == 0 {
            // No write waits (the usual case of a read stream): no drain can
            // start, and the read queue's oldest with room moves.
            let open = self.read_q.targets & !self.full;
            if open == 0 {
                return None;
            }
            let q = self.read_q.oldest(open);
            let txn = self.read_q.pop(q);
            return Some((q, self.enqueue(&txn)));
        }
        self.schedule_with_writes()
    }

    /// [`schedule_transaction`](Self::schedule_transaction) while writes
    /// wait or a drain is under way.
    #[inline(never)]
    fn schedule_with_writes(&mut self) -> Option<(usize, i32)> {
        if self.drain_starts() {
            self.write_draining = self.write_q.len as i64;
        }
        let writes = self.write_draining > 0;
        let fifo = if writes {
            &mut self.write_q
        } else {
            &mut self.read_q
        };
        let open = fifo.targets & !self.full;
        if open == 0 {
            if self.write_draining < 0 {
                self.write_draining = 0;
            }
            return None;
        }
        // The first transaction in arrival order whose bank queue has room.
        let q = fifo.oldest(open);
        let txn = if writes {
            let txn = self.write_q.front(q);
            if self.read_pending(q, txn.addr) {
                self.write_draining = -1;
                return None;
            }
            self.write_draining -= 1;
            self.write_q.pop(q)
        } else {
            self.read_q.pop(q)
        };
        Some((q, self.enqueue(&txn)))
    }

    /// Appends `txn` to its bank queue; returns the queue's new `ready`.
    #[inline(always)]
    pub(super) fn enqueue(&mut self, txn: &Txn) -> i32 {
        let q = txn.queue as usize;
        let n = self.cq.len(q);
        let hit = txn.row == self.banks[q].open_row;
        let reads_hit = self.cq.hit[q] & !self.cq.wr[q];
        self.cq.push(q, txn, hit);
        self.nonempty |= 1u64 << q;
        if n + 1 == self.cmd_cap {
            self.full |= 1u64 << q;
        }
        if (n != 0) & (!hit | (!txn.write & (reads_hit != 0))) {
            // Behind other entries, the new entry changes none of the
            // queue's candidates when it misses the open row, or is a read
            // hit behind an earlier one: not the ACTIVATE of a closed bank
            // (the queue was not empty), nor the open row's first READ or
            // WRITE (a write's blockers are reads before it), nor whether
            // the head may close the row (something already hits it).
            return lane(&self.lanes.ready, q);
        }
        self.refresh_head(q)
    }

    /// Whether [`schedule_transaction`](Self::schedule_transaction) would
    /// change anything if it ran now: move a transaction, or change the
    /// write-drain state. Cycles where it would not, and no command can
    /// issue, are skipped.
    #[inline]
    pub(super) fn transaction_work_possible(&self) -> bool {
        if self.write_q.len == 0 && self.write_draining == 0 {
            return self.read_q.targets & !self.full != 0;
        }
        // A stopped drain resets, or a drain starts, whether or not a write
        // can move yet.
        if self.write_draining < 0 || self.drain_starts() {
            return true;
        }
        let targets = if self.write_draining > 0 {
            self.write_q.targets
        } else {
            self.read_q.targets
        };
        targets & !self.full != 0
    }

    /// One controller cycle at `now` (DRAMsim3's `Controller::ClockTick`),
    /// then sets `wake` to the next cycle at which anything can happen.
    #[inline(always)]
    fn step(&mut self, now: u64) {
        self.move_due = false;
        let (mut issued, mut wake) = (false, self.next_refresh);
        // Whether this cycle's command was a column command.
        let mut column = false;
        let refreshing = now >= self.refresh_at;
        if refreshing {
            (issued, wake) = self.refresh_part(now);
        }
        // Round-robin from the queue after the last to issue: the first with a
        // ready command issues it.
        if !issued {
            let cand = self.ready_mask((now - self.base) as i32) & !self.ref_mask;
            if cand != 0 {
                column = self.issue(now, self.next_in_turn(cand));
                issued = true;
            }
        }
        if issued && self.dual_command {
            self.second_command(now, column);
        }
        // (A REF that empties the refresh queue also ends the refreshing
        // rank's exclusion, in `refresh_step`.)
        self.schedule_transaction();
        // The next wake-up: the earliest cycle at which a queue can issue, as
        // things stand after this cycle's command and move.
        let least = self.recompute();
        wake = wake.min(self.wake_at(least));
        if issued && self.refresh_at == 0 {
            // The refreshing rank may go on precharging next cycle.
            wake = now + 1;
        }
        if self.every_cycle || self.transaction_work_possible() {
            wake = now + 1;
        }
        self.wake = wake.max(now + 1);
    }

    /// The end of a cycle at which no command can issue and no refresh is
    /// due, but requests arrived: the controller's transaction move alone.
    fn move_only(&mut self, now: u64) {
        self.move_due = false;
        let mut wake = self.wake;
        if let Some((q, t)) = self.schedule_transaction() {
            self.set_ready(q, t);
            wake = wake.min(self.wake_at(t));
        }
        if self.transaction_work_possible() {
            wake = now + 1;
        }
        self.wake = wake.max(now + 1);
    }

    /// Whether a read arriving at `now` for queue `q` may go straight to
    /// its bank queue: the controller issues nothing at this cycle, nothing
    /// else has arrived in it, and at the end of the cycle this read would be
    /// the one transaction to move: its queue has room, every other waiting
    /// read is for a full queue (which stays full until a command issues),
    /// and no write drain can start.
    #[inline(always)]
    pub(super) fn direct_possible(&self, now: u64, q: usize) -> bool {
        self.wake > now
            && !self.move_due
            && self.read_q.targets & !self.full == 0
            && self.write_q.len == 0
            && self.write_draining == 0
            && self.full >> q & 1 == 0
    }

    /// The end-of-cycle move of [`move_only`](Self::move_only), for the one
    /// read that arrived at `now`, done at its arrival.
    #[inline(always)]
    pub(super) fn move_direct(&mut self, now: u64, txn: Txn) {
        let q = txn.queue as usize;
        self.direct = Some(Direct {
            cycle: now,
            queue: q,
            wake: self.wake,
        });
        let t = self.enqueue(&txn);
        self.set_ready(q, t);
        // No other transaction waits and no drain can start, so the move
        // leaves no work for the next cycle.
        self.wake = self.wake.min(self.wake_at(t)).max(now + 1);
    }

    /// Puts a read moved at arrival back in the read queue, to move at the
    /// end of the cycle as usual, because something else happens in its
    /// cycle. It is the youngest transaction there, and the only one for its
    /// queue.
    #[cold]
    #[inline(never)]
    pub(super) fn undo_direct(&mut self) {
        let Some(d) = self.direct.take() else {
            return;
        };
        debug_assert_eq!(d.cycle, self.cycle);
        debug_assert_eq!(self.read_q.targets >> d.queue & 1, 0);
        let q = d.queue;
        let (addr, row, ids) = self.cq.pop_back(q);
        self.full &= !(1u64 << q);
        if self.cq.len(q) == 0 {
            self.nonempty &= !(1u64 << q);
        }
        let t = self.refresh_head(q);
        self.set_ready(q, t);
        self.wake = d.wake;
        self.read_q.push(Txn {
            addr,
            row,
            queue: q as u8,
            write: false,
            ids,
        });
        // What the read's arrival set: a transaction can move at the end of
        // the cycle.
        self.move_due = true;
    }

    /// One clock edge: what [`DramEngine::tick`] does, handing completions
    /// to any sink; whether any completed.
    #[inline(always)]
    pub(crate) fn tick_once<D: DoneSink>(&mut self, done: &mut D) -> bool {
        let now = self.cycle;
        let emitted = self.next_done <= now;
        if emitted {
            self.emit(now, done);
        }
        if now >= self.wake {
            self.step(now);
        } else if self.move_due {
            self.move_only(now);
        }
        self.cycle = now + 1;
        emitted
    }

    /// [`DramEngine::tick_until_done`], handing completions to any sink.
    #[inline(always)]
    pub(crate) fn run_until_done<D: DoneSink>(&mut self, limit: u64, done: &mut D) {
        if self.cycle >= limit {
            return;
        }
        // A request sent at this cycle: its transaction may move now.
        if self.move_due && self.tick_once(done) {
            return;
        }
        // The controller's cycles before the next completion, then that
        // completion's cycle. `wake` is never behind `cycle`.
        while self.wake < self.next_done.min(limit) {
            self.step(self.wake);
        }
        if self.next_done >= limit {
            self.cycle = self.cycle.max(limit);
            return;
        }
        let now = self.next_done;
        self.cycle = now;
        self.tick_once(done);
    }
}
