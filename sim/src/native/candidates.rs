//! Each bank queue's candidate commands: the analysis of its entries against
//! the open row ([`Head`]), the bank times of its ACTIVATE, PRECHARGE, READ
//! and WRITE, and the pick of the command to issue ([`Kind`]).

use super::lanes::lane;
use super::{CLOSED, INF, NONE, NativeEngine, ROW_HIT_LIMIT};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Act,
    Pre,
    Rd,
    Wr,
}

/// What a bank queue's entries offer against the open row, in queue order:
/// the first READ and the first WRITE that may issue ([`NONE`] for none),
/// and whether the head may close the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) rd: u8,
    pub(super) wr: u8,
    pub(super) pre: bool,
}

impl NativeEngine {
    /// Analyses queue `q`'s entries against its open row (see [`Head`]).
    #[inline(always)]
    fn analyse_head(&self, q: usize) -> Head {
        let hit = self.cq.hit[q];
        let writes = self.cq.wr[q];
        let reads_hit = hit & !writes;
        let rd = if reads_hit != 0 {
            reads_hit.trailing_zeros() as u8
        } else {
            NONE
        };
        let wc = hit & writes;
        let wr = if wc != 0 {
            self.first_unblocked_write(q, wc)
        } else {
            NONE
        };
        // Close the row for the head only when nothing queued hits it, or the
        // row has had its share of hits.
        let pre = hit & 1 == 0 && (self.banks[q].hits >= ROW_HIT_LIMIT || hit == 0);
        Head { rd, wr, pre }
    }

    /// The first of the hit writes `wc` of queue `q` that no earlier read of
    /// its address holds back ([`NONE`] if all are).
    #[inline(never)]
    fn first_unblocked_write(&self, q: usize, mut wc: u64) -> u8 {
        let n = self.cq.len(q);
        let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let reads = !self.cq.wr[q] & all;
        while wc != 0 {
            let i = wc.trailing_zeros() as usize;
            wc &= wc - 1;
            let addr = self.cq.addr(q, i);
            let mut before = reads & ((1u64 << i) - 1);
            let mut blocked = false;
            while before != 0 {
                let j = before.trailing_zeros() as usize;
                before &= before - 1;
                if self.cq.addr(q, j) == addr {
                    blocked = true;
                    break;
                }
            }
            if !blocked {
                return i as u8;
            }
        }
        NONE
    }

    /// Re-derives queue `q`'s candidates when its bank is closed: an
    /// ACTIVATE if anything waits.
    #[inline(always)]
    pub(super) fn refresh_closed(&mut self, q: usize) {
        let a = if self.nonempty >> q & 1 != 0 {
            self.banks[q].act
        } else {
            INF
        };
        self.set_lanes(q, a, INF, INF, INF);
    }

    /// Re-derives queue `q`'s candidates when its bank is open, from the
    /// head analysis (an empty queue has none).
    #[inline(always)]
    pub(super) fn refresh_open(&mut self, q: usize) {
        let b = self.banks[q];
        let h = self.analyse_head(q);
        self.head[q] = h;
        let pick = |has: bool, t: i32| if has { t } else { INF };
        // An empty queue's analysis finds no READ or WRITE, and a PRECHARGE
        // only for a head that is there.
        let nonempty = self.nonempty >> q & 1 != 0;
        let p = pick(nonempty && h.pre, b.pre);
        let d = pick(h.rd != NONE, b.rd);
        let w = pick(h.wr != NONE, b.wr);
        self.set_lanes(q, INF, p, d, w);
    }

    /// Re-derives which candidate commands queue `q` has and their bank
    /// times, after its entries or its bank's state changed.
    ///
    /// Without a branch on the bank's state (hard to predict): a closed
    /// bank's hit mask is empty, so its analysis finds no READ or WRITE, and
    /// its PRECHARGE and ACTIVATE are masked by the state.
    ///
    /// Returns the queue's new `ready`: what [`recompute`](Self::recompute)
    /// would give its lane, from the values just written.
    #[inline(always)]
    pub(super) fn refresh_head(&mut self, q: usize) -> i32 {
        let b = self.banks[q];
        let closed = b.open_row == CLOSED;
        debug_assert!(!closed || self.cq.hit[q] == 0);
        let h = self.analyse_head(q);
        self.head[q] = h;
        let pick = |has: bool, t: i32| if has { t } else { INF };
        let nonempty = self.nonempty >> q & 1 != 0;
        let a = pick(nonempty & closed, b.act);
        let p = pick(nonempty & h.pre & !closed, b.pre);
        let d = pick(h.rd != NONE, b.rd);
        let w = pick(h.wr != NONE, b.wr);
        self.set_lanes(q, a, p, d, w);
        let l = &*self.lanes;
        let a = a.max(lane(&l.g_act, q));
        let d = d.max(lane(&l.g_rd, q));
        let w = w.max(lane(&l.g_wr, q));
        a.min(p).min(d.min(w))
    }

    /// The command of queue `q` to issue at `now`, which its `ready` says
    /// there is: entry index and kind, the first ready in queue order.
    #[inline]
    pub(super) fn pick(&self, q: usize, now: i32) -> (usize, Kind) {
        let b = &self.banks[q];
        if b.open_row == CLOSED {
            return (0, Kind::Act);
        }
        let h = self.head[q];
        if h.pre && b.pre <= now {
            return (0, Kind::Pre);
        }
        let l = &*self.lanes;
        let mut pick = NONE;
        let mut kind = Kind::Rd;
        if h.rd != NONE && b.rd.max(lane(&l.g_rd, q)) <= now {
            pick = h.rd;
        }
        if h.wr != NONE && b.wr.max(lane(&l.g_wr, q)) <= now && h.wr < pick {
            pick = h.wr;
            kind = Kind::Wr;
        }
        debug_assert_ne!(pick, NONE, "queue {q} has no ready command at {now}");
        (pick as usize, kind)
    }
}
