//! The bank command queues ([`CmdQueues`]): per-queue rings of entries with
//! write and row-hit masks, and the bit helpers they use.

use super::lanes::simd;
use super::txn_queue::{NO_IDS, Txn, Waiting};
use super::{MAX_COMMAND_QUEUE, MAX_QUEUES};

/// The bank command queues: per queue a ring of entries (address, row, the
/// requests waiting for a read) in arrival order, with masks, by position in
/// the queue, of its writes and of its entries that hit the bank's open row.
/// Taking the first entry moves nothing; taking a later one shifts the
/// entries behind it. A slot holds its entry's address with bit 0 set for a
/// write ([`WRITE_TAG`]), or [`EMPTY`], so finding a queued read or write of
/// an address is one comparison per slot.
#[derive(Clone)]
pub(super) struct CmdQueues {
    /// Fixed-size arrays of [`CQ_SLOTS`], so that a slot index masked to
    /// their size needs no bounds check.
    addr: Box<[u64; CQ_SLOTS]>,
    row: Box<[u32; CQ_SLOTS]>,
    pub(super) ids: Box<[Waiting; CQ_SLOTS]>,
    /// Ring slots per queue (a power of two, at least the queue size), as a
    /// shift, and its mask.
    shift: u32,
    ring: usize,
    head: [u8; MAX_QUEUES],
    len: [u8; MAX_QUEUES],
    pub(super) wr: [u64; MAX_QUEUES],
    pub(super) hit: [u64; MAX_QUEUES],
}

/// Bit 0 of a queued write's address (addresses are 64 B aligned).
pub(super) const WRITE_TAG: u64 = 1;

/// Command-queue slots: every queue's ring at its largest.
const CQ_SLOTS: usize = MAX_QUEUES * MAX_COMMAND_QUEUE as usize;

/// A boxed fixed-size array of `x`, built on the heap.
fn boxed_array<T: Clone, const N: usize>(x: T) -> Box<[T; N]> {
    vec![x; N]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("the vector has N elements"))
}

/// A free command-queue slot.
const EMPTY: u64 = u64::MAX;

impl CmdQueues {
    pub(super) fn new(queues: usize, cap: usize) -> Self {
        let ring = cap.next_power_of_two();
        debug_assert!(queues * ring <= CQ_SLOTS);
        CmdQueues {
            addr: boxed_array(EMPTY),
            row: boxed_array(0),
            ids: boxed_array(NO_IDS),
            shift: ring.trailing_zeros(),
            ring: ring - 1,
            head: [0; MAX_QUEUES],
            len: [0; MAX_QUEUES],
            wr: [0; MAX_QUEUES],
            hit: [0; MAX_QUEUES],
        }
    }

    /// Where entry `i` of queue `q` is kept.
    #[inline(always)]
    fn slot(&self, q: usize, i: usize) -> usize {
        // (The mask changes nothing: queues x ring slots fit.)
        ((q << self.shift) | ((self.head[q] as usize + i) & self.ring)) & (CQ_SLOTS - 1)
    }

    #[inline(always)]
    pub(super) fn len(&self, q: usize) -> usize {
        self.len[q] as usize
    }

    #[inline(always)]
    pub(super) fn row(&self, q: usize, i: usize) -> u32 {
        self.row[self.slot(q, i)]
    }

    /// The address of entry `i` (without the write tag).
    #[inline(always)]
    pub(super) fn addr(&self, q: usize, i: usize) -> u64 {
        self.addr[self.slot(q, i)] & !WRITE_TAG
    }

    /// The slot of queue `q` holding `key` (an address, tagged for a write).
    #[inline(always)]
    pub(super) fn find(&self, q: usize, key: u64) -> Option<usize> {
        let base = (q << self.shift) & (CQ_SLOTS - 1);
        let m = if self.ring == 7 {
            // The usual 8-entry queue: two vector comparisons.
            let b = base & (CQ_SLOTS - 8);
            let eight: &[u64; 8] = self.addr[b..b + 8].try_into().expect("8 slots");
            simd::equal8(eight, key) as u64
        } else {
            equal_mask(&self.addr[base..base + self.ring + 1], key)
        };
        if m == 0 {
            None
        } else {
            Some(base + m.trailing_zeros() as usize)
        }
    }

    /// Appends a transaction; `hit`: it hits the open row.
    #[inline(always)]
    pub(super) fn push(&mut self, q: usize, txn: &Txn, hit: bool) {
        let n = self.len(q);
        let s = self.slot(q, n);
        self.addr[s] = txn.addr | txn.write as u64;
        self.row[s] = txn.row;
        self.ids[s] = txn.ids;
        self.wr[q] |= (txn.write as u64) << n;
        self.hit[q] |= (hit as u64) << n;
        self.len[q] = (n + 1) as u8;
    }

    /// Takes entry `i` out; returns its address, whether it is a write, and
    /// the requests waiting for it.
    #[inline(always)]
    pub(super) fn take(&mut self, q: usize, i: usize) -> (u64, bool, Waiting) {
        let n = self.len(q);
        let s = self.slot(q, i);
        let (addr, ids) = (self.addr[s], self.ids[s]);
        if i == 0 {
            self.addr[s] = EMPTY;
            self.head[q] = ((self.head[q] as usize + 1) & self.ring) as u8;
        } else {
            for k in i..n - 1 {
                let (to, from) = (self.slot(q, k), self.slot(q, k + 1));
                self.addr[to] = self.addr[from];
                self.row[to] = self.row[from];
                self.ids[to] = self.ids[from];
            }
            let last = self.slot(q, n - 1);
            self.addr[last] = EMPTY;
        }
        self.len[q] = (n - 1) as u8;
        self.wr[q] = remove_bit(self.wr[q], i);
        self.hit[q] = remove_bit(self.hit[q], i);
        (addr & !WRITE_TAG, addr & WRITE_TAG != 0, ids)
    }

    /// Takes the last entry out (undoes [`push`](Self::push)); returns its
    /// address, row and waiting requests.
    pub(super) fn pop_back(&mut self, q: usize) -> (u64, u32, Waiting) {
        let n = self.len(q);
        debug_assert!(n > 0);
        let s = self.slot(q, n - 1);
        let taken = (self.addr[s] & !WRITE_TAG, self.row[s], self.ids[s]);
        self.addr[s] = EMPTY;
        self.len[q] = (n - 1) as u8;
        self.wr[q] &= !(1u64 << (n - 1));
        self.hit[q] &= !(1u64 << (n - 1));
        taken
    }

    /// Sets the hit mask of queue `q` for a newly opened `row`.
    /// Compares every slot of the ring (a fixed count, so no branch
    /// depends on the queue's length) and turns slot order into queue order.
    #[inline]
    pub(super) fn open(&mut self, q: usize, row: u32) {
        let n = self.len(q);
        let base = (q << self.shift) & (CQ_SLOTS - 1);
        let by_slot = if self.ring == 7 {
            let b = base & (CQ_SLOTS - 8);
            let eight: &[u32; 8] = self.row[b..b + 8].try_into().expect("8 slots");
            simd::equal8_u32(eight, row) as u64
        } else {
            equal_mask(&self.row[base..base + self.ring + 1], row)
        };
        // Slot `head + i` holds entry `i`: rotate right by `head` within the
        // ring, then keep the queue's `n` entries.
        let slots = self.ring as u32 + 1;
        let h = self.head[q] as u32;
        let ring_bits = if slots == 64 {
            u64::MAX
        } else {
            (1u64 << slots) - 1
        };
        let rotated = ((by_slot >> h) | (by_slot << ((slots - h) % 64))) & ring_bits;
        let mine = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        self.hit[q] = rotated & mine;
    }
}

/// Bit `s` set where `slots[s] == key`, for a ring of other than 8 slots.
/// Out of line: inlined, the vectorised loop's constants stayed live (and
/// were set up on every call) in the controller's loop, which the usual
/// 8-slot ring never needs.
#[cold]
#[inline(never)]
fn equal_mask<T: PartialEq + Copy>(slots: &[T], key: T) -> u64 {
    let mut m = 0u64;
    for (s, &a) in slots.iter().enumerate() {
        m |= ((a == key) as u64) << s;
    }
    m
}

/// Removes bit `i` of `m`, moving the bits above it down by one.
#[inline(always)]
pub(super) fn remove_bit(m: u64, i: usize) -> u64 {
    let low = (1u64 << i) - 1;
    (m & low) | ((m >> 1) & !low)
}
