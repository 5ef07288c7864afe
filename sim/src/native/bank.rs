//! Bank and rank state ([`Bank`], [`Rank`]) and the commands that change it:
//! ACTIVATE, PRECHARGE, READ and WRITE, issued from a bank queue.

use crate::jedec::Command;

use super::candidates::Kind;
use super::times::Gate;
use super::txn_queue::Waiting;
use super::{CLOSED, NIL, NativeEngine};

#[derive(Clone, Copy, Debug)]
pub(super) struct Bank {
    pub(super) open_row: u32,
    /// Column commands since the activation.
    pub(super) hits: u32,
    /// The bank's own earliest ACTIVATE, PRECHARGE, READ and WRITE.
    pub(super) act: i32,
    pub(super) pre: i32,
    pub(super) rd: i32,
    pub(super) wr: i32,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Rank {
    /// Earliest REF: tRP after the last precharge, tRFC after the last REF.
    pub(super) next_ref: i32,
    /// tFAW: release times (ACT + tFAW) of the last four ACTs, a ring.
    pub(super) faw: [i32; 4],
    faw_next: usize,
    pub(super) open_banks: u32,
    pub(super) active_since: u64,
    pub(super) active_cycles: u64,
}

impl NativeEngine {
    #[inline(always)]
    fn activate(&mut self, now: u64, q: usize, row: u32) {
        let nr = (now - self.base) as i32;
        let d = self.d;
        let (act_l, act_s, faw) = (nr + d.act_to_act_l, nr + d.act_to_act_s, nr + d.faw);
        let r = self.rank_of(q);
        let b = &mut self.banks[q];
        debug_assert_eq!(b.open_row, CLOSED);
        b.open_row = row;
        b.hits = 0;
        b.act = b.act.max(nr + d.act_to_act);
        b.rd = b.rd.max(nr + d.act_to_rd);
        b.wr = b.wr.max(nr + d.act_to_wr);
        b.pre = b.pre.max(nr + d.act_to_pre);
        self.raise_group(Gate::Act, q / 4, act_l);
        let rk = &mut self.ranks[r];
        rk.faw[rk.faw_next] = faw;
        rk.faw_next = (rk.faw_next + 1) & 3;
        let gate = act_s.max(rk.faw[rk.faw_next]);
        if rk.open_banks == 0 {
            rk.active_since = now;
        }
        rk.open_banks += 1;
        self.raise_rank(Gate::Act, r, gate);
        self.counts.activates += 1;
        self.cq.open(q, row);
        self.refresh_open(q);
        self.log_cmd(now, q, Command::Act);
    }

    #[inline(always)]
    pub(super) fn precharge(&mut self, now: u64, q: usize) {
        let nr = (now - self.base) as i32;
        let trp = nr + self.d.pre_to_act;
        let r = self.rank_of(q);
        let b = &mut self.banks[q];
        debug_assert_ne!(b.open_row, CLOSED);
        b.open_row = CLOSED;
        b.hits = 0;
        b.act = b.act.max(trp);
        self.cq.hit[q] = 0;
        let rk = &mut self.ranks[r];
        rk.next_ref = rk.next_ref.max(trp);
        rk.open_banks -= 1;
        if rk.open_banks == 0 {
            rk.active_cycles += now - rk.active_since;
        }
        self.counts.precharges += 1;
        self.refresh_closed(q);
        self.log_cmd(now, q, Command::Pre);
    }

    #[inline(always)]
    fn column(&mut self, now: u64, q: usize, write: bool) {
        let nr = (now - self.base) as i32;
        let r = self.rank_of(q);
        let b = &mut self.banks[q];
        debug_assert_ne!(b.open_row, CLOSED);
        self.counts.row_hits += (b.hits != 0) as u64;
        b.hits += 1;
        self.counts.read_cmds += !write as u64;
        self.counts.write_cmds += write as u64;
        let [to_pre, to_rd_l, to_wr_l, to_rd_s, to_wr_s, to_rd_o, to_wr_o] =
            self.d.col[write as usize];
        b.pre = b.pre.max(nr + to_pre);
        self.raise_group(Gate::Rd, q / 4, nr + to_rd_l);
        self.raise_group(Gate::Wr, q / 4, nr + to_wr_l);
        self.raise_rank(Gate::Rd, r, nr + to_rd_s);
        self.raise_rank(Gate::Wr, r, nr + to_wr_s);
        if self.ranks.len() > 1 {
            // What this rank's column command imposes on the other ranks.
            for o in 0..self.ranks.len() {
                if o != r {
                    self.raise_rank(Gate::Rd, o, nr + to_rd_o);
                    self.raise_rank(Gate::Wr, o, nr + to_wr_o);
                }
            }
        }
        self.log_cmd(now, q, if write { Command::Wr } else { Command::Rd });
    }

    /// Takes entry `i` out of bank queue `q`; returns its address, whether it
    /// is a write, and the requests waiting for it.
    #[inline(always)]
    fn take_entry(&mut self, q: usize, i: usize) -> (u64, bool, Waiting) {
        let n = self.cq.len(q);
        let taken = self.cq.take(q, i);
        self.full &= !(1u64 << q);
        // (Without a branch: whether the queue empties is hard to predict.)
        self.nonempty &= !(((n == 1) as u64) << q);
        taken
    }

    /// Issues the command picked from queue `q` at `now`.
    #[inline(always)]
    fn issue_from_queue(&mut self, now: u64, q: usize, i: usize, kind: Kind) {
        match kind {
            Kind::Act => {
                let row = self.cq.row(q, i);
                self.activate(now, q, row);
            }
            Kind::Pre => {
                self.counts.row_conflicts = self.counts.row_conflicts.map(|c| c + 1);
                self.precharge(now, q);
            }
            Kind::Rd | Kind::Wr => {
                let (_, write, w) = self.take_entry(q, i);
                self.column(now, q, write);
                self.refresh_open(q);
                if write {
                    self.unissued_writes -= 1;
                } else {
                    let done_at = now + self.t.read_delay;
                    self.next_done = self.next_done.min(done_at);
                    self.read_done.push(done_at, w.first);
                    let mut n = w.more;
                    while n != NIL {
                        let (id, next) = self.id_nodes[n as usize];
                        self.read_done.push(done_at, id);
                        self.id_nodes[n as usize].1 = self.id_free;
                        self.id_free = n;
                        n = next;
                    }
                }
            }
        }
    }

    /// Issues the command of queue `q` that is ready at `now`; returns
    /// whether it was a column command (READ or WRITE).
    #[inline(always)]
    pub(super) fn issue(&mut self, now: u64, q: usize) -> bool {
        let nr = (now - self.base) as i32;
        let (i, kind) = self.pick(q, nr);
        self.issue_from_queue(now, q, i, kind);
        self.queue_idx = q;
        matches!(kind, Kind::Rd | Kind::Wr)
    }

    /// The second command of a cycle on separate row and column buses, after
    /// a first (`column`: whether it was a READ or WRITE), as DRAMsim3's HBM
    /// controller picks it: the round robin goes on from the first command's
    /// queue to the next queue with a ready command, outside the rank being
    /// refreshed, and moves to it; its command issues if it is of the other
    /// kind.
    /// (Out of line: DDR4's step never calls it.)
    #[inline(never)]
    pub(super) fn second_command(&mut self, now: u64, column: bool) {
        self.recompute();
        let nr = (now - self.base) as i32;
        let cand = self.ready_mask(nr) & !self.ref_mask;
        if cand == 0 {
            return;
        }
        let q = self.next_in_turn(cand);
        let (i, kind) = self.pick(q, nr);
        self.queue_idx = q;
        if matches!(kind, Kind::Rd | Kind::Wr) != column {
            self.issue_from_queue(now, q, i, kind);
        }
    }
}
