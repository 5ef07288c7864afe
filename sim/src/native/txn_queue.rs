//! The read queue and the write buffer ([`TxnQueue`] of [`Txn`]), and the
//! request ids waiting for one READ ([`Waiting`], with the engine's pool of
//! list nodes for merged requests).

use crate::RequestId;

use super::{MAX_QUEUES, NIL, NativeEngine};

/// A transaction waiting in the read queue or the write buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Txn {
    pub(super) addr: u64,
    pub(super) row: u32,
    pub(super) queue: u8,
    pub(super) write: bool,
    /// For a read, the requests waiting for it.
    pub(super) ids: Waiting,
}

/// No request waiting.
pub(super) const NO_IDS: Waiting = Waiting {
    first: 0,
    more: NIL,
    last: NIL,
};

/// The request ids waiting for one READ: the first inline, any others in a
/// shared node pool.
#[derive(Clone, Copy, Debug)]
pub(super) struct Waiting {
    pub(super) first: RequestId,
    pub(super) more: u32,
    last: u32,
}

/// The read queue or the write buffer: transactions in arrival order, kept
/// as one list per bank queue (a shared slab with links) so that the
/// controller's pick, the first transaction in arrival order whose bank queue
/// has room, looks only at the heads of the lists with room.
#[derive(Clone)]
pub(super) struct TxnQueue {
    pub(super) txns: Vec<Txn>,
    /// Arrival number of each slab entry.
    seq: Vec<u64>,
    next: Vec<u32>,
    free: u32,
    first: [u32; MAX_QUEUES],
    last: [u32; MAX_QUEUES],
    /// Bank queues with a waiting transaction.
    pub(super) targets: u64,
    pub(super) len: usize,
    arrivals: u64,
}

impl TxnQueue {
    pub(super) fn new(cap: usize) -> Self {
        TxnQueue {
            txns: vec![
                Txn {
                    addr: 0,
                    row: 0,
                    queue: 0,
                    write: false,
                    ids: NO_IDS,
                };
                cap
            ],
            seq: vec![0; cap],
            next: (1..=cap as u32)
                .map(|n| if n as usize == cap { NIL } else { n })
                .collect(),
            free: if cap == 0 { NIL } else { 0 },
            first: [NIL; MAX_QUEUES],
            last: [NIL; MAX_QUEUES],
            targets: 0,
            len: 0,
            arrivals: 0,
        }
    }

    #[inline(always)]
    pub(super) fn push(&mut self, txn: Txn) {
        let n = self.free;
        let i = n as usize;
        self.free = self.next[i];
        self.txns[i] = txn;
        self.seq[i] = self.arrivals;
        self.arrivals += 1;
        self.next[i] = NIL;
        let q = txn.queue as usize;
        if self.first[q] == NIL {
            self.first[q] = n;
            self.targets |= 1u64 << q;
        } else {
            self.next[self.last[q] as usize] = n;
        }
        self.last[q] = n;
        self.len += 1;
    }

    /// The bank queue, among `open`, whose first transaction arrived first.
    #[inline(always)]
    pub(super) fn oldest(&self, open: u64) -> usize {
        debug_assert!(open & !self.targets == 0 && open != 0);
        let mut m = open;
        let mut best = m.trailing_zeros() as usize;
        m &= m - 1;
        if m != 0 {
            let mut s = self.seq[self.first[best] as usize];
            while m != 0 {
                let q = m.trailing_zeros() as usize;
                m &= m - 1;
                let t = self.seq[self.first[q] as usize];
                if t < s {
                    s = t;
                    best = q;
                }
            }
        }
        best
    }

    /// The slab index of bank queue `q`'s transaction to `addr`, if any.
    #[inline(always)]
    pub(super) fn find(&self, q: usize, addr: u64) -> Option<usize> {
        let mut n = self.first[q];
        while n != NIL {
            let i = n as usize;
            if self.txns[i].addr == addr {
                return Some(i);
            }
            n = self.next[i];
        }
        None
    }

    #[inline(always)]
    pub(super) fn front(&self, q: usize) -> Txn {
        self.txns[self.first[q] as usize]
    }

    #[inline(always)]
    pub(super) fn pop(&mut self, q: usize) -> Txn {
        let n = self.first[q];
        let i = n as usize;
        let txn = self.txns[i];
        self.first[q] = self.next[i];
        if self.first[q] == NIL {
            self.targets &= !(1u64 << q);
        }
        self.next[i] = self.free;
        self.free = n;
        self.len -= 1;
        txn
    }
}

impl NativeEngine {
    /// Appends list node `node` to the requests waiting in `w`.
    pub(super) fn wait_also(w: &mut Waiting, nodes: &mut [(RequestId, u32)], node: u32) {
        if w.more == NIL {
            w.more = node;
        } else {
            nodes[w.last as usize].1 = node;
        }
        w.last = node;
    }

    pub(super) fn push_id(&mut self, id: RequestId) -> u32 {
        let node = (id, NIL);
        if self.id_free != NIL {
            let n = self.id_free;
            self.id_free = self.id_nodes[n as usize].1;
            self.id_nodes[n as usize] = node;
            n
        } else {
            self.id_nodes.push(node);
            (self.id_nodes.len() - 1) as u32
        }
    }
}
