//! A native DDR4 engine, written in Rust: one channel of `ranks` DDR4 ranks
//! behind an open-page FR-FCFS controller modelled on DRAMsim3's.
//!
//! # Model
//!
//! - **Timing table.** Every command-to-command constraint is derived once from
//!   the preset's [`Timing`](crate::config::Timing) ([`TimingTable`]): tRCD,
//!   CL/CWL, tRP, tRAS, tRC, tCCD_S/L, tRRD_S/L, tFAW, tWTR_S/L, tWR, tRTP, the
//!   read/write bus turnarounds, tRTRS between ranks, tRFC and tREFI. The
//!   constraints are kept as "earliest next command" registers per bank and
//!   per bank group and rank, so issuing a command updates a handful of
//!   registers, never every bank.
//! - **Bank state machines**: closed, or open on one row with a count of the
//!   column commands served since the activation.
//! - **Controller** (DRAMsim3's policy, so that the two agree): a read queue
//!   and a write buffer of `transaction_queue` entries each; reads to an
//!   address already queued are merged, reads to an address with a queued write
//!   are served from the write buffer, and writes are posted (they complete one
//!   cycle after they are accepted). One transaction per cycle moves into a
//!   per-bank command queue of `command_queue` entries. Writes are drained in
//!   bursts: when the buffer is full, or holds more than 8 writes while every
//!   command queue is empty (and, unlike DRAMsim3, when the front end has
//!   nothing left in flight, so every write reaches the DRAM). One command per
//!   cycle is picked round-robin over the bank queues, each queue first-ready
//!   in arrival order (row hits may bypass a miss at its head; a row is closed
//!   for a miss only when no queued request hits it or after 4 hits). Reads
//!   complete CL + BL/2 after their READ.
//! - **Refresh**: rank-level all-bank refresh, staggered over the ranks, one
//!   every tREFI per rank; a rank due for refresh stops serving its queues,
//!   precharges its open banks and refreshes as soon as tRP allows.
//! - **Address mapping**: [`DramConfig::decode`], the same as the references.
//!
//! # Speed
//!
//! The engine is event-driven. Every bank queue knows the exact cycle at
//! which its first command could issue as things stand (`ready`): the
//! earliest of its candidates (ACTIVATE for a closed bank; else PRECHARGE,
//! its first READ, its first WRITE), each the later of the bank's own time
//! and a gate time that holds the bank group's and the rank's part. Times are
//! 32-bit cycle counts from a base the engine moves forward now and then, so
//! eight queues (two bank groups) fit one AVX2 vector: a command raises the
//! gate lanes of its group and rank with one vector `max` each, and the
//! queues' `ready` times are recomputed with a dozen vector instructions per
//! eight queues. The controller runs only at the earliest of those times, the
//! next refresh, and cycles where a transaction can move or the write-drain
//! state can change; other cycles cost one comparison in
//! [`DramEngine::tick`], and [`DramEngine::tick_until_done`] jumps over them.
//! A request that arrives at a cycle where nothing else happens only triggers
//! the transaction move, at the end of the cycle. The results are those of
//! running the controller at every cycle ([`NativeEngine::every_cycle`],
//! tested). A bank queue keeps the masks of its writes and of its entries that
//! hit the open row, so finding its first READ and WRITE is a bit scan. A read
//! or write waiting for its bank queue is found by scanning that bank's own
//! list in the transaction queue and its command ring (no hash tables).
//! Nothing is allocated per request.
//!
//! # Command log
//!
//! [`NativeEngine::with_command_log`] records every command (cycle, rank,
//! flat bank, command) for [`crate::jedec::Checker`]. Off by default; when off
//! it costs one predictable branch per command.

use std::collections::VecDeque;

use crate::config::DramConfig;
use crate::energy::CommandCounts;
use crate::engine::{DramEngine, EngineKind, EngineReport};
use crate::jedec::{Command, CommandRecord};
use crate::request::BURST_BYTES;
pub use crate::timing::TimingTable;
use crate::{Completion, Request, RequestId, SimError};

/// The native engine's configuration for `config`, as text: the derived
/// timing table and the controller's settings (what `nmpsim dram config
/// --engine native` prints).
pub fn describe(config: &DramConfig) -> String {
    use std::fmt::Write as _;
    let t = TimingTable::of(config);
    let mut s = String::new();
    let _ = writeln!(s, "# native engine, preset {}", config.name);
    let _ = writeln!(
        s,
        "ranks = {}\nbankgroups = {}\nbanks_per_group = {}\nrows = {}\nbursts_per_row = {}\ntck_ns = {}",
        config.ranks,
        config.org.bankgroups,
        config.org.banks_per_group,
        config.org.rows,
        config.org.bursts_per_row(),
        config.timing.tck_ns
    );
    let _ = writeln!(
        s,
        "address_mapping = {}\nrow_policy = open page, FR-FCFS, row closed after {ROW_HIT_LIMIT} hits when a miss waits\nread_queue = {}\nwrite_buffer = {}\nbank_command_queue = {}\nwrite_drain = when full, or above {WRITE_DRAIN_LOW} with idle command queues\nrefresh = all-bank, staggered over ranks, every {} cycles per rank",
        config.mapping.name(),
        config.transaction_queue,
        config.transaction_queue,
        config.command_queue,
        t.refi
    );
    let _ = writeln!(s, "# command-to-command delays in cycles");
    let _ = writeln!(s, "{t:#?}");
    s
}

/// Rows are u32; this one means "no row open".
const CLOSED: u32 = u32::MAX;
/// Column commands after which a row is closed for a waiting miss even if
/// more queued requests would hit it (DRAMsim3's limit).
const ROW_HIT_LIMIT: u32 = 4;
/// Writes in the buffer above which it drains when the command queues are idle.
const WRITE_DRAIN_LOW: usize = 8;
/// A time that never comes: a candidate command the queue does not have.
const INF: i32 = i32::MAX;
/// The most bank queues in a channel (4 ranks of 16 banks).
const MAX_QUEUES: usize = 64;
/// The most entries of a bank command queue (entry sets are 64-bit masks).
const MAX_COMMAND_QUEUE: u32 = 64;
/// Queues per lane vector: two bank groups of four banks.
const W: usize = 8;
const MAX_VECS: usize = MAX_QUEUES / W;
/// Entry index meaning "none".
const NONE: u8 = u8::MAX;
const NIL: u32 = u32::MAX;
/// Times are kept as `i32` cycles after `base`; once the clock is this far
/// past `base`, everything is re-based on the current cycle.
const REBASE_AFTER: u64 = 1 << 30;

/// Eight per-queue times: one lane vector (two bank groups of four banks).
/// With AVX2 (the project's default target) every operation is one or a few
/// vector instructions; other targets run the same operations lane by lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(32))]
struct V8([i32; W]);

#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
mod simd {
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
    pub(super) fn equal8(slots: &[u64; 8], key: u64) -> u32 {
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
    pub(super) fn equal8_u32(rows: &[u32; 8], key: u32) -> u32 {
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
mod simd {
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
    pub(super) fn equal8(slots: &[u64; 8], key: u64) -> u32 {
        let mut m = 0u32;
        for (s, &a) in slots.iter().enumerate() {
            m |= ((a == key) as u32) << s;
        }
        m
    }
    /// Bit `s` set where `rows[s] == key`.
    #[inline(always)]
    pub(super) fn equal8_u32(rows: &[u32; 8], key: u32) -> u32 {
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
    const fn splat(x: i32) -> V8 {
        V8([x; W])
    }
    #[inline(always)]
    fn max(self, o: V8) -> V8 {
        simd::max(self, o)
    }
    #[inline(always)]
    fn min(self, o: V8) -> V8 {
        simd::min(self, o)
    }
    #[inline(always)]
    fn and(self, o: V8) -> V8 {
        simd::and(self, o)
    }
    #[inline(always)]
    fn or(self, o: V8) -> V8 {
        simd::or(self, o)
    }
    /// Bit `i` set where lane `i` is at most `x`.
    #[inline(always)]
    fn at_most(self, x: i32) -> u32 {
        simd::at_most(self, x)
    }
    /// The least lane.
    #[inline(always)]
    fn least(self) -> i32 {
        simd::least(self)
    }
    /// `self` with lane `i` replaced by `x`, as a whole-vector operation (a
    /// later vector load of the result then forwards from this store).
    #[inline(always)]
    fn with_lane(self, i: usize, x: i32) -> V8 {
        simd::with_lane(self, i, x)
    }
}

/// Lane masks of the two bank groups in a vector.
const GROUP_LANES: [V8; 2] = [
    V8([-1, -1, -1, -1, 0, 0, 0, 0]),
    V8([0, 0, 0, 0, -1, -1, -1, -1]),
];

/// Per-queue times, laid out as lane vectors. Every time is a cycle after
/// the engine's `base`, at least 0 (times already past are clamped there, which
/// changes no comparison with the present or the future) or [`INF`].
#[derive(Clone)]
struct Lanes {
    /// The queue's bank part of each candidate command's earliest cycle
    /// (ACTIVATE, PRECHARGE, READ, WRITE), or [`INF`] where the queue has no
    /// such candidate.
    e_act: [V8; MAX_VECS],
    e_pre: [V8; MAX_VECS],
    e_rd: [V8; MAX_VECS],
    e_wr: [V8; MAX_VECS],
    /// The bank-group and rank part (what the other ranks impose included)
    /// of the ACTIVATE, READ and WRITE times. Only ever raised, so a command
    /// raises the lanes of its group and rank with one vector max each.
    g_act: [V8; MAX_VECS],
    g_rd: [V8; MAX_VECS],
    g_wr: [V8; MAX_VECS],
    /// The earliest cycle at which one of the queue's commands can issue, as
    /// things stand: exact, recomputed after every change.
    ready: [V8; MAX_VECS],
    /// [`INF`] in the lanes of the rank being refreshed, 0 elsewhere: OR-ed
    /// into `ready`, it leaves those queues out of the wake-up.
    dead: [V8; MAX_VECS],
}

#[inline(always)]
fn lane(v: &[V8; MAX_VECS], q: usize) -> i32 {
    v[q / W].0[q % W]
}

#[derive(Clone, Copy, Debug)]
struct Bank {
    open_row: u32,
    /// Column commands since the activation.
    hits: u32,
    /// The bank's own earliest ACTIVATE, PRECHARGE, READ and WRITE.
    act: i32,
    pre: i32,
    rd: i32,
    wr: i32,
}

#[derive(Clone, Copy, Debug, Default)]
struct Rank {
    /// Earliest REF: tRP after the last precharge, tRFC after the last REF.
    next_ref: i32,
    /// tFAW: release times (ACT + tFAW) of the last four ACTs, a ring.
    faw: [i32; 4],
    faw_next: usize,
    open_banks: u32,
    active_since: u64,
    active_cycles: u64,
}

/// A transaction waiting in the read queue or the write buffer.
#[derive(Clone, Copy, Debug)]
struct Txn {
    addr: u64,
    row: u32,
    queue: u8,
    write: bool,
    /// For a read, the requests waiting for it.
    ids: Waiting,
}

/// No request waiting.
const NO_IDS: Waiting = Waiting {
    first: 0,
    more: NIL,
    last: NIL,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Act,
    Pre,
    Rd,
    Wr,
}

/// What a bank queue's entries offer against the open row, in queue order:
/// the first READ and the first WRITE that may issue ([`NONE`] for none),
/// and whether the head may close the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    rd: u8,
    wr: u8,
    pre: bool,
}

/// The request ids waiting for one READ: the first inline, any others in a
/// shared node pool.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    first: RequestId,
    more: u32,
    last: u32,
}

/// The read queue or the write buffer: transactions in arrival order, kept
/// as one list per bank queue (a shared slab with links) so that the
/// controller's pick, the first transaction in arrival order whose bank queue
/// has room, looks only at the heads of the lists with room.
#[derive(Clone)]
struct TxnQueue {
    txns: Vec<Txn>,
    /// Arrival number of each slab entry.
    seq: Vec<u64>,
    next: Vec<u32>,
    free: u32,
    first: [u32; MAX_QUEUES],
    last: [u32; MAX_QUEUES],
    /// Bank queues with a waiting transaction.
    targets: u64,
    len: usize,
    arrivals: u64,
}

impl TxnQueue {
    fn new(cap: usize) -> Self {
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
    fn push(&mut self, txn: Txn) {
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
    fn oldest(&self, open: u64) -> usize {
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
    fn find(&self, q: usize, addr: u64) -> Option<usize> {
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
    fn front(&self, q: usize) -> Txn {
        self.txns[self.first[q] as usize]
    }

    #[inline(always)]
    fn pop(&mut self, q: usize) -> Txn {
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

/// Completion cycles and ids in completion order: a ring that grows (once,
/// to the most ever pending) when full.
#[derive(Clone)]
struct DoneRing {
    slots: Vec<(u64, RequestId)>,
    head: usize,
    len: usize,
}

impl DoneRing {
    fn new(cap: usize) -> Self {
        DoneRing {
            slots: vec![(u64::MAX, 0); cap.next_power_of_two().max(16)],
            head: 0,
            len: 0,
        }
    }

    /// The first cycle, `u64::MAX` when empty (free slots hold `u64::MAX`,
    /// so this needs no branch).
    #[inline(always)]
    fn first_cycle(&self) -> u64 {
        self.slots[self.head].0
    }

    #[inline(always)]
    fn push(&mut self, cycle: u64, id: RequestId) {
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
    fn drain_due<D: DoneSink>(&mut self, now: u64, done: &mut D) -> usize {
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

/// The bank command queues: per queue a ring of entries (address, row, the
/// requests waiting for a read) in arrival order, with masks, by position in
/// the queue, of its writes and of its entries that hit the bank's open row.
/// Taking the first entry moves nothing; taking a later one shifts the
/// entries behind it. A slot holds its entry's address with bit 0 set for a
/// write ([`WRITE_TAG`]), or [`EMPTY`], so finding a queued read or write of
/// an address is one comparison per slot.
#[derive(Clone)]
struct CmdQueues {
    /// Fixed-size arrays of [`CQ_SLOTS`], so that a slot index masked to
    /// their size needs no bounds check.
    addr: Box<[u64; CQ_SLOTS]>,
    row: Box<[u32; CQ_SLOTS]>,
    ids: Box<[Waiting; CQ_SLOTS]>,
    /// Ring slots per queue (a power of two, at least the queue size), as a
    /// shift, and its mask.
    shift: u32,
    ring: usize,
    head: [u8; MAX_QUEUES],
    len: [u8; MAX_QUEUES],
    wr: [u64; MAX_QUEUES],
    hit: [u64; MAX_QUEUES],
}

/// Bit 0 of a queued write's address (addresses are 64 B aligned).
const WRITE_TAG: u64 = 1;
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
    fn new(queues: usize, cap: usize) -> Self {
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
    fn len(&self, q: usize) -> usize {
        self.len[q] as usize
    }

    #[inline(always)]
    fn row(&self, q: usize, i: usize) -> u32 {
        self.row[self.slot(q, i)]
    }

    /// The address of entry `i` (without the write tag).
    #[inline(always)]
    fn addr(&self, q: usize, i: usize) -> u64 {
        self.addr[self.slot(q, i)] & !WRITE_TAG
    }

    /// The slot of queue `q` holding `key` (an address, tagged for a write).
    #[inline(always)]
    fn find(&self, q: usize, key: u64) -> Option<usize> {
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
    fn push(&mut self, q: usize, txn: &Txn, hit: bool) {
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
    fn take(&mut self, q: usize, i: usize) -> (u64, bool, Waiting) {
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
    fn pop_back(&mut self, q: usize) -> (u64, u32, Waiting) {
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
    fn open(&mut self, q: usize, row: u32) {
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
fn remove_bit(m: u64, i: usize) -> u64 {
    let low = (1u64 << i) - 1;
    (m & low) | ((m >> 1) & !low)
}

/// Bit positions of the address fields (in 64 B units).
#[derive(Clone, Copy, Debug)]
struct FieldPos {
    shift: u32,
    mask: u64,
}

#[derive(Clone, Copy, Debug)]
struct Mapping {
    rank: FieldPos,
    bankgroup: FieldPos,
    bank: FieldPos,
    row: FieldPos,
}

impl Mapping {
    fn of(c: &DramConfig) -> Self {
        use crate::config::Field;
        let mut pos = [FieldPos { shift: 0, mask: 0 }; 5];
        let mut shift = 0;
        for f in c.mapping.msb_to_lsb.iter().rev() {
            let bits = c.field_bits(*f);
            let i = match f {
                Field::Rank => 0,
                Field::Bankgroup => 1,
                Field::Bank => 2,
                Field::Row => 3,
                Field::Column => 4,
            };
            pos[i] = FieldPos {
                shift,
                mask: (1u64 << bits) - 1,
            };
            shift += bits;
        }
        Mapping {
            rank: pos[0],
            bankgroup: pos[1],
            bank: pos[2],
            row: pos[3],
        }
    }
}

/// The delays of [`TimingTable`] the commands add to the current cycle, as
/// `i32` (the engine's time unit).
#[derive(Clone, Copy, Debug)]
struct Delays {
    act_to_act: i32,
    act_to_rw: i32,
    act_to_pre: i32,
    act_to_act_l: i32,
    act_to_act_s: i32,
    faw: i32,
    pre_to_act: i32,
    ref_to_act: i32,
    /// Per column command (0 READ, 1 WRITE): to PRECHARGE, to READ and
    /// WRITE in the bank group, in the rank, and in the other ranks.
    col: [[i32; 7]; 2],
}

impl Delays {
    fn of(t: &TimingTable) -> Self {
        let c = |x: u64| x as i32;
        Delays {
            act_to_act: c(t.act_to_act),
            act_to_rw: c(t.act_to_rw),
            act_to_pre: c(t.act_to_pre),
            act_to_act_l: c(t.act_to_act_l),
            act_to_act_s: c(t.act_to_act_s),
            faw: c(t.faw),
            pre_to_act: c(t.pre_to_act),
            ref_to_act: c(t.ref_to_act),
            col: [
                [
                    c(t.rd_to_pre),
                    c(t.rd_to_rd_l),
                    c(t.rd_to_wr),
                    c(t.rd_to_rd_s),
                    c(t.rd_to_wr),
                    c(t.rd_to_rd_o),
                    c(t.rd_to_wr_o),
                ],
                [
                    c(t.wr_to_pre),
                    c(t.wr_to_rd_l),
                    c(t.wr_to_wr_l),
                    c(t.wr_to_rd_s),
                    c(t.wr_to_wr_s),
                    c(t.wr_to_rd_o),
                    c(t.wr_to_wr_o),
                ],
            ],
        }
    }
}

/// Where [`NativeEngine::with_command_sink`] hands the log.
type CommandSink = Box<dyn FnMut(&[CommandRecord]) + Send>;

/// The native DDR4 engine; see the [module documentation](self).
pub struct NativeEngine {
    config: DramConfig,
    capacity: u64,
    t: TimingTable,
    d: Delays,
    map: Mapping,
    banks_per_rank: usize,
    /// log2 of `banks_per_rank`.
    rank_shift: u32,
    /// Lane vectors per rank (1 or 2) and in the channel.
    vecs_per_rank: usize,
    vecs: usize,
    txn_cap: usize,
    cmd_cap: usize,

    cycle: u64,
    /// Times in [`Lanes`], [`Bank`] and [`Rank`] count cycles from here.
    base: u64,
    rebase_after: u64,
    /// The controller runs at this cycle or later; earlier cycles are idle.
    wake: u64,

    read_q: TxnQueue,
    write_q: TxnQueue,
    /// Requests merged into an earlier read of their address, beyond the
    /// first: list nodes (id, next).
    id_nodes: Vec<(RequestId, u32)>,
    id_free: u32,
    /// Positive: writes left to drain; zero: serving reads; negative: a drain
    /// stopped on a read-after-write dependency (DRAMsim3's states).
    write_draining: i64,
    /// The front end has nothing left in flight: drain every write.
    flush: bool,
    /// A request arrived at a cycle where the controller does nothing else:
    /// it still moves a transaction at the end of the cycle ([`Self::move_only`]).
    move_due: bool,
    /// A read that arrived at this cycle, with nothing else to move, went
    /// straight to its bank queue (what the end of the cycle would have
    /// done); the wake-up before it. Undone if anything else happens in its
    /// cycle ([`Self::undo_direct`]).
    direct: Option<Direct>,
    unissued_writes: usize,

    cq: CmdQueues,
    head: [Head; MAX_QUEUES],
    nonempty: u64,
    /// Bank queues that are full.
    full: u64,
    lanes: Box<Lanes>,
    /// The queues of the rank being refreshed, if any.
    ref_mask: u64,
    queue_idx: usize,

    banks: [Bank; MAX_QUEUES],
    ranks: Vec<Rank>,

    refresh_interval: u64,
    next_refresh: u64,
    next_refresh_rank: u32,
    refresh_q: VecDeque<u32>,
    /// The controller must look at refresh from this cycle on: the next
    /// refresh, or 0 while one is due or under way.
    refresh_at: u64,

    /// Completion cycle and id, in completion order: posted writes and reads
    /// served from the write buffer (1 cycle), and reads (CL + BL/2 after READ).
    quick_done: DoneRing,
    read_done: DoneRing,
    /// The earlier of the two queues' first completion cycles (`u64::MAX`
    /// when both are empty).
    next_done: u64,

    pending: usize,
    counts: CommandCounts,
    log: Option<Vec<CommandRecord>>,
    /// Where the log goes once it holds `log_flush_at` commands (and at the
    /// end of the run), if anywhere: see [`NativeEngine::with_command_sink`].
    log_sink: Option<CommandSink>,
    log_flush_at: usize,
    /// Run the controller at every cycle (see [`NativeEngine::every_cycle`]).
    every_cycle: bool,
    finished: bool,
}

impl NativeEngine {
    pub fn new(config: &DramConfig) -> Result<Self, SimError> {
        let bad = |what: String| SimError::Engine {
            engine: "native",
            what,
        };
        let org = &config.org;
        if org.banks_per_group != 4 || !(org.bankgroups == 2 || org.bankgroups == 4) {
            return Err(bad(format!(
                "{} bank groups of {} banks; the native engine models DDR4's 2 or 4 bank groups of 4 banks",
                org.bankgroups, org.banks_per_group
            )));
        }
        if config.ranks == 0 || config.ranks > 4 {
            return Err(bad(format!(
                "{} ranks in the channel; the native engine handles 1 to 4",
                config.ranks
            )));
        }
        let banks_per_rank = org.banks() as usize;
        let queues = banks_per_rank * config.ranks as usize;
        if config.transaction_queue == 0 || config.command_queue == 0 {
            return Err(bad("queue sizes must be at least 1".into()));
        }
        if config.command_queue > MAX_COMMAND_QUEUE || config.transaction_queue > 1 << 16 {
            return Err(bad(format!(
                "transaction queue {} and bank command queue {}; the native engine handles up to {} and {MAX_COMMAND_QUEUE}",
                config.transaction_queue,
                config.command_queue,
                1 << 16
            )));
        }
        if org.rows >= u32::MAX as u64 {
            return Err(bad(format!("{} rows per bank", org.rows)));
        }
        let t = TimingTable::of(config);
        let longest = [t.refi, t.ref_to_act, t.act_to_act, t.wr_to_pre, t.faw]
            .into_iter()
            .max()
            .unwrap_or(0);
        if longest > 1 << 24 {
            return Err(bad(format!("a delay of {longest} cycles")));
        }
        let txn_cap = config.transaction_queue as usize;
        let cmd_cap = config.command_queue as usize;
        let refresh_interval = (t.refi / config.ranks as u64).max(1);
        let bank = Bank {
            open_row: CLOSED,
            hits: 0,
            act: 0,
            pre: 0,
            rd: 0,
            wr: 0,
        };
        let nranks = config.ranks as usize;
        let vecs = queues / W;
        // Requests the engine can hold before its completion rings grow.
        let window = 4 * txn_cap + queues * cmd_cap;
        let no = [V8::splat(INF); MAX_VECS];
        let zero = [V8::splat(0); MAX_VECS];
        Ok(NativeEngine {
            capacity: config.capacity_bytes(),
            d: Delays::of(&t),
            t,
            map: Mapping::of(config),
            banks_per_rank,
            rank_shift: banks_per_rank.trailing_zeros(),
            vecs_per_rank: banks_per_rank / W,
            vecs,
            txn_cap,
            cmd_cap,
            cycle: 0,
            base: 0,
            rebase_after: REBASE_AFTER,
            wake: 0,
            read_q: TxnQueue::new(txn_cap),
            write_q: TxnQueue::new(txn_cap),
            id_nodes: Vec::with_capacity(window),
            id_free: NIL,
            write_draining: 0,
            flush: false,
            move_due: false,
            direct: None,
            unissued_writes: 0,
            cq: CmdQueues::new(queues, cmd_cap),
            head: [Head {
                rd: NONE,
                wr: NONE,
                pre: false,
            }; MAX_QUEUES],
            nonempty: 0,
            full: 0,
            lanes: Box::new(Lanes {
                e_act: no,
                e_pre: no,
                e_rd: no,
                e_wr: no,
                g_act: zero,
                g_rd: zero,
                g_wr: zero,
                ready: no,
                dead: zero,
            }),
            ref_mask: 0,
            queue_idx: 0,
            banks: [bank; MAX_QUEUES],
            ranks: vec![Rank::default(); nranks],
            refresh_interval,
            next_refresh: refresh_interval,
            next_refresh_rank: 0,
            refresh_q: VecDeque::with_capacity(8),
            refresh_at: refresh_interval,
            quick_done: DoneRing::new(window),
            read_done: DoneRing::new(window),
            next_done: u64::MAX,
            pending: 0,
            counts: CommandCounts {
                row_conflicts: Some(0),
                ..CommandCounts::default()
            },
            log: None,
            log_sink: None,
            log_flush_at: usize::MAX,
            every_cycle: false,
            finished: false,
            config: config.clone(),
        })
    }

    /// An engine that records every command it issues; see
    /// [`command_log`](Self::command_log).
    pub fn with_command_log(config: &DramConfig) -> Result<Self, SimError> {
        let mut e = Self::new(config)?;
        e.log = Some(Vec::new());
        Ok(e)
    }

    /// An engine that hands the commands it issues to `sink`, in issue
    /// order, `every` at a time and the rest when the run finishes, so that a
    /// long run's log need not be held whole (e.g. to feed a
    /// [`Replay`](crate::jedec::Replay) of the JEDEC checker as it goes).
    /// [`command_log`](Self::command_log) holds only what is not handed on
    /// yet.
    pub fn with_command_sink(
        config: &DramConfig,
        every: usize,
        sink: impl FnMut(&[CommandRecord]) + Send + 'static,
    ) -> Result<Self, SimError> {
        let every = every.max(1);
        let mut e = Self::new(config)?;
        e.log = Some(Vec::with_capacity(every));
        e.log_sink = Some(Box::new(sink));
        e.log_flush_at = every;
        Ok(e)
    }

    /// Hands the log to the sink, if there is one, and empties it.
    #[cold]
    #[inline(never)]
    fn flush_log(&mut self) {
        if let (Some(log), Some(sink)) = (self.log.as_mut(), self.log_sink.as_mut()) {
            sink(log);
            log.clear();
        }
    }

    /// The same engine, made to run its controller at every cycle instead of
    /// only at the cycles where something can happen. The results are the
    /// same, only slower: this is the reference the event-driven schedule is
    /// tested against.
    pub fn every_cycle(mut self) -> Self {
        self.every_cycle = true;
        self.wake = self.wake.min(self.cycle);
        self
    }

    /// The same engine, re-basing its internal times every `cycles` cycles
    /// instead of every 2^30. Results do not depend on it; tests use a short
    /// interval to exercise the re-basing.
    #[doc(hidden)]
    pub fn rebase_every(mut self, cycles: u64) -> Self {
        self.rebase_after = cycles.clamp(1, REBASE_AFTER);
        self
    }

    /// The same engine, with DRAMsim3's gap between write bursts of different
    /// ranks (BL/2) instead of BL/2 + tRTRS. That breaks tRTRS, and the
    /// checker says so: it is not a model to use, but the one difference from
    /// DRAMsim3 that multi-rank write traffic exposes, so that tests can take
    /// it away and compare the rest cycle for cycle. Call before any request.
    #[doc(hidden)]
    pub fn dramsim3_write_rank_switch(mut self) -> Self {
        assert_eq!(
            self.cycle, 0,
            "set the write rank switch before any request"
        );
        self.t.wr_to_wr_o = self.t.burst;
        self.d = Delays::of(&self.t);
        self
    }

    /// The commands issued so far, in issue order (empty unless the engine was
    /// made by [`with_command_log`](Self::with_command_log)).
    pub fn command_log(&self) -> &[CommandRecord] {
        self.log.as_deref().unwrap_or(&[])
    }

    /// Takes the recorded commands out of the engine.
    pub fn take_command_log(&mut self) -> Vec<CommandRecord> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The timing table the engine runs with.
    pub fn timing_table(&self) -> &TimingTable {
        &self.t
    }

    #[inline]
    fn decode(&self, addr: u64) -> Txn {
        let a = addr / BURST_BYTES;
        let f = |p: FieldPos| (a >> p.shift) & p.mask;
        let rank = f(self.map.rank) as usize;
        let bg = f(self.map.bankgroup) as usize;
        let bank = f(self.map.bank) as usize;
        Txn {
            addr,
            row: f(self.map.row) as u32,
            queue: (rank * self.banks_per_rank + bg * 4 + bank) as u8,
            write: false,
            ids: NO_IDS,
        }
    }

    #[inline(always)]
    fn rank_of(&self, q: usize) -> usize {
        q >> self.rank_shift
    }

    /// A relative time as an absolute cycle (`u64::MAX` for [`INF`]).
    #[inline(always)]
    fn absolute(&self, t: i32) -> u64 {
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
    fn wake_at(&self, t: i32) -> u64 {
        self.base + t as u64
    }

    /// Re-bases every relative time on `now`. Times already past become 0,
    /// which no comparison with the present or the future can tell apart.
    #[cold]
    fn rebase(&mut self, now: u64) {
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
    fn raise_group(&mut self, which: Gate, g: usize, at: i32) {
        let i = g / 2;
        let v = self.gate_lanes(which);
        v[i] = v[i].max(GROUP_LANES[g & 1].and(V8::splat(at)));
    }

    /// Raises `which` lanes of rank `r` to at least `at`.
    #[inline(always)]
    fn raise_rank(&mut self, which: Gate, r: usize, at: i32) {
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
    fn recompute(&mut self) -> i32 {
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
    fn ready_mask(&self, now: i32) -> u64 {
        let mut m = 0u64;
        for (v, ready) in self.lanes.ready[..self.vecs].iter().enumerate() {
            m |= (ready.at_most(now) as u64) << (v * W);
        }
        m
    }

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

    /// Sets queue `q`'s candidate times (bank part, [`INF`] for none).
    #[inline(always)]
    fn set_lanes(&mut self, q: usize, a: i32, p: i32, d: i32, w: i32) {
        let l = &mut *self.lanes;
        let (v, i) = (q / W, q % W);
        l.e_act[v] = l.e_act[v].with_lane(i, a);
        l.e_pre[v] = l.e_pre[v].with_lane(i, p);
        l.e_rd[v] = l.e_rd[v].with_lane(i, d);
        l.e_wr[v] = l.e_wr[v].with_lane(i, w);
    }

    /// Re-derives queue `q`'s candidates when its bank is closed: an
    /// ACTIVATE if anything waits.
    #[inline(always)]
    fn refresh_closed(&mut self, q: usize) {
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
    fn refresh_open(&mut self, q: usize) {
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
    fn refresh_head(&mut self, q: usize) -> i32 {
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
    fn pick(&self, q: usize, now: i32) -> (usize, Kind) {
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

    #[inline(always)]
    fn log_cmd(&mut self, cycle: u64, q: usize, command: Command) {
        if self.log.is_some() {
            self.log_push(cycle, q, command);
        }
    }

    #[cold]
    #[inline(never)]
    fn log_push(&mut self, cycle: u64, q: usize, command: Command) {
        if let Some(log) = self.log.as_mut() {
            log.push(CommandRecord {
                cycle,
                rank: (q / self.banks_per_rank) as u32,
                command,
                bank: (q % self.banks_per_rank) as u32,
            });
            if log.len() >= self.log_flush_at {
                self.flush_log();
            }
        }
    }

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
        b.rd = b.rd.max(nr + d.act_to_rw);
        b.wr = b.wr.max(nr + d.act_to_rw);
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
    fn precharge(&mut self, now: u64, q: usize) {
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

    /// Whether a read of `addr` (in bank queue `q`) waits to issue.
    #[inline(always)]
    fn read_pending(&self, q: usize, addr: u64) -> bool {
        self.cq.find(q, addr).is_some() || self.read_q.find(q, addr).is_some()
    }

    /// Whether a write of `addr` (in bank queue `q`) waits to issue.
    #[inline(always)]
    fn write_pending(&self, q: usize, addr: u64) -> bool {
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
    fn enqueue(&mut self, txn: &Txn) -> i32 {
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

    /// Sets queue `q`'s `ready` lane alone (only its lanes changed).
    #[inline(always)]
    fn set_ready(&mut self, q: usize, t: i32) {
        let (v, i) = (q / W, q % W);
        self.lanes.ready[v] = self.lanes.ready[v].with_lane(i, t);
    }

    /// Whether [`schedule_transaction`](Self::schedule_transaction) would
    /// change anything if it ran now: move a transaction, or change the
    /// write-drain state. Cycles where it would not, and no command can
    /// issue, are skipped.
    #[inline]
    fn transaction_work_possible(&self) -> bool {
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
    fn refresh_part(&mut self, now: u64) -> (bool, u64) {
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

    /// Issues the command of queue `q` that is ready at `now`.
    #[inline(always)]
    fn issue(&mut self, now: u64, q: usize) {
        let nr = (now - self.base) as i32;
        let (i, kind) = self.pick(q, nr);
        self.issue_from_queue(now, q, i, kind);
        self.queue_idx = q;
    }

    /// One controller cycle at `now` (DRAMsim3's `Controller::ClockTick`),
    /// then sets `wake` to the next cycle at which anything can happen.
    #[inline(always)]
    fn step(&mut self, now: u64) {
        self.move_due = false;
        let (mut issued, mut wake) = (false, self.next_refresh);
        let refreshing = now >= self.refresh_at;
        if refreshing {
            (issued, wake) = self.refresh_part(now);
        }
        // Round-robin from the queue after the last to issue: the first with a
        // ready command issues it.
        if !issued {
            let cand = self.ready_mask((now - self.base) as i32) & !self.ref_mask;
            if cand != 0 {
                let start = self.queue_idx + 1;
                let high = cand & u64::MAX.checked_shl(start as u32).unwrap_or(0);
                let pool = high | (cand & ((high == 0) as u64).wrapping_neg());
                let q = pool.trailing_zeros() as usize;
                self.issue(now, q);
                issued = true;
            }
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
    fn direct_possible(&self, now: u64, q: usize) -> bool {
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
    fn move_direct(&mut self, now: u64, txn: Txn) {
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
    fn undo_direct(&mut self) {
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

    #[inline(always)]
    fn emit<D: DoneSink>(&mut self, now: u64, done: &mut D) {
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

    /// Appends list node `node` to the requests waiting in `w`.
    fn wait_also(w: &mut Waiting, nodes: &mut [(RequestId, u32)], node: u32) {
        if w.more == NIL {
            w.more = node;
        } else {
            nodes[w.last as usize].1 = node;
        }
        w.last = node;
    }

    fn push_id(&mut self, id: RequestId) -> u32 {
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
}

impl NativeEngine {
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

/// Where the engine hands completed requests: the trait's vector, or a
/// runner that needs only each request's latency
/// ([`crate::runner`]'s fused loop for this engine).
pub(crate) trait DoneSink {
    fn complete(&mut self, id: RequestId, cycle: u64);
}

impl DoneSink for Vec<Completion> {
    #[inline(always)]
    fn complete(&mut self, id: RequestId, cycle: u64) {
        self.push(Completion { id, cycle });
    }
}

/// A read moved to its bank queue at arrival (see `NativeEngine::direct`).
#[derive(Clone, Copy, Debug)]
struct Direct {
    cycle: u64,
    queue: usize,
    wake: u64,
}

/// The three kinds of gate lanes.
#[derive(Clone, Copy)]
enum Gate {
    Act,
    Rd,
    Wr,
}

impl DramEngine for NativeEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Native
    }

    fn config(&self) -> &DramConfig {
        &self.config
    }

    #[inline(always)]
    fn try_send(&mut self, req: Request) -> Result<bool, SimError> {
        if req.addr >= self.capacity {
            self.config.check_addr(req.addr, "")?;
        }
        let addr = req.addr & !(BURST_BYTES - 1);
        let now = self.cycle;
        if self.direct.is_some_and(|d| d.cycle == now) {
            self.undo_direct();
        }
        let mut txn = self.decode(addr);
        let q = txn.queue as usize;
        if req.access.is_write() {
            if self.write_q.len >= self.txn_cap {
                return Ok(false);
            }
            if !self.write_pending(q, addr) {
                txn.write = true;
                self.write_q.push(txn);
                self.unissued_writes += 1;
            }
            self.quick_done.push(now + 1, req.id);
            self.next_done = self.next_done.min(now + 1);
        } else {
            if self.read_q.len >= self.txn_cap {
                return Ok(false);
            }
            if self.write_pending(q, addr) {
                // Served from the write buffer.
                self.quick_done.push(now + 1, req.id);
                self.next_done = self.next_done.min(now + 1);
            } else if let Some(s) = self.cq.find(q, addr) {
                let node = self.push_id(req.id);
                Self::wait_also(&mut self.cq.ids[s], &mut self.id_nodes, node);
            } else if let Some(i) = self.read_q.find(q, addr) {
                let node = self.push_id(req.id);
                Self::wait_also(&mut self.read_q.txns[i].ids, &mut self.id_nodes, node);
            } else {
                txn.ids.first = req.id;
                if self.direct_possible(now, q) {
                    self.move_direct(now, txn);
                    self.pending += 1;
                    return Ok(true);
                }
                self.read_q.push(txn);
            }
        }
        self.pending += 1;
        if self.wake > now && self.transaction_work_possible() {
            // The controller moves a transaction at the end of this cycle,
            // once every request sent in it has arrived. (When it can move
            // none and the write-drain state cannot change, that end of cycle
            // changes nothing and is skipped.)
            self.move_due = true;
        }
        Ok(true)
    }

    #[inline]
    fn tick(&mut self, done: &mut Vec<Completion>) {
        self.tick_once(done);
    }

    fn tick_until_done(&mut self, limit: u64, done: &mut Vec<Completion>) {
        self.run_until_done(limit, done);
    }

    fn cycle(&self) -> u64 {
        self.cycle
    }

    fn pending(&self) -> usize {
        self.pending
    }

    fn draining(&mut self) -> bool {
        let left = self.unissued_writes > 0;
        if left && !self.flush && self.direct.is_some_and(|d| d.cycle == self.cycle) {
            // The controller runs at this cycle after all: the read moves
            // after its command, as usual.
            self.undo_direct();
        }
        if left && !self.flush {
            self.flush = true;
            self.wake = self.wake.min(self.cycle);
        }
        left
    }

    fn finish(&mut self) -> Result<EngineReport, SimError> {
        if self.finished {
            return Err(SimError::Engine {
                engine: "native",
                what: "finish called twice".into(),
            });
        }
        self.finished = true;
        self.flush_log();
        let mut n = self.counts.clone();
        let end = self.cycle;
        n.active_rank_cycles = self
            .ranks
            .iter()
            .map(|r| {
                r.active_cycles
                    + if r.open_banks > 0 {
                        end - r.active_since
                    } else {
                        0
                    }
            })
            .sum();
        n.precharged_rank_cycles = end * self.ranks.len() as u64 - n.active_rank_cycles;
        n.row_misses = (n.read_cmds + n.write_cmds).saturating_sub(n.row_hits);
        Ok(EngineReport {
            counts: n,
            engine_energy: None,
            read_latency_cycles: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_table_of_ddr4_3200() {
        let c = DramConfig::preset("DDR4-3200-x8").unwrap();
        let t = TimingTable::of(&c);
        assert_eq!(t.read_delay, 26);
        assert_eq!(t.rd_to_rd_l, 8);
        assert_eq!(t.rd_to_rd_s, 4);
        assert_eq!(t.rd_to_wr, 22 + 4 - 16 + 2);
        assert_eq!(t.wr_to_rd_l, 16 + 4 + 12);
        assert_eq!(t.wr_to_pre, 16 + 4 + 24);
        assert_eq!(t.wr_to_wr_o, 6);
        assert_eq!(t.faw, 34);
    }

    #[test]
    fn queue_sizes_beyond_its_masks_are_refused() {
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        c.command_queue = 65;
        let e = NativeEngine::new(&c).err().expect("refused").to_string();
        assert!(e.contains("bank command queue 65"), "{e}");
        c.command_queue = 64;
        c.transaction_queue = 1 << 16;
        assert!(NativeEngine::new(&c).is_ok());
        c.transaction_queue = (1 << 16) + 1;
        assert!(NativeEngine::new(&c).is_err());
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        c.org.banks_per_group = 2;
        let e = NativeEngine::new(&c).err().expect("refused").to_string();
        assert!(e.contains("2 or 4 bank groups of 4 banks"), "{e}");
    }

    fn txn(addr: u64, queue: u8, write: bool) -> Txn {
        Txn {
            addr,
            row: (addr >> 20) as u32,
            queue,
            write,
            ids: NO_IDS,
        }
    }

    /// A small random generator for the test below.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn entries_that_change_nothing_leave_the_candidates_exact() {
        // `enqueue` skips the queue's re-analysis for an entry behind others
        // that misses the open row or is a read hit behind an earlier read
        // hit. Whatever it skipped, the head analysis, the lanes and `ready`
        // must be what a full re-analysis gives. Queue states are built entry
        // by entry with the full re-analysis, from three rows and three
        // columns, so that hits, misses and reads ahead of writes to their
        // address all occur.
        let cfg = DramConfig::preset("DDR4-3200-x8").unwrap();
        let mut rng = Lcg(7);
        let (mut skipped, mut analysed) = (0, 0);
        for _ in 0..20_000 {
            let mut e = NativeEngine::new(&cfg).unwrap();
            let q = rng.next(16) as usize;
            let b = &mut e.banks[q];
            b.open_row = if rng.next(3) == 0 {
                CLOSED
            } else {
                rng.next(3) as u32
            };
            b.hits = rng.next(6) as u32;
            (b.act, b.pre, b.rd, b.wr) = (
                rng.next(40) as i32,
                rng.next(40) as i32,
                rng.next(40) as i32,
                rng.next(40) as i32,
            );
            for g in [&mut e.lanes.g_act, &mut e.lanes.g_rd, &mut e.lanes.g_wr] {
                g[q / W].0[q % W] = rng.next(40) as i32;
            }
            let entry = |rng: &mut Lcg| {
                let row = rng.next(3) as u32;
                Txn {
                    addr: (row as u64) << 20 | rng.next(3) << 6,
                    row,
                    queue: q as u8,
                    write: rng.next(3) == 0,
                    ids: NO_IDS,
                }
            };
            let n = rng.next(e.cmd_cap as u64) as usize;
            for _ in 0..n {
                let t = entry(&mut rng);
                let hit = t.row == e.banks[q].open_row;
                e.cq.push(q, &t, hit);
                e.nonempty |= 1 << q;
                let r = e.refresh_head(q);
                e.set_ready(q, r);
            }
            let t = entry(&mut rng);
            let hit = t.row == e.banks[q].open_row;
            let reads_hit = e.cq.hit[q] & !e.cq.wr[q];
            if n != 0 && (!hit || (!t.write && reads_hit != 0)) {
                skipped += 1;
            } else {
                analysed += 1;
            }
            let ready = e.enqueue(&t);
            e.set_ready(q, ready);
            let head = e.head[q];
            let l = &*e.lanes;
            let lanes =
                |l: &Lanes| [&l.e_act, &l.e_pre, &l.e_rd, &l.e_wr, &l.ready].map(|v| lane(v, q));
            let before = lanes(l);
            let full = e.refresh_head(q);
            assert_eq!(ready, full, "ready after {n} entries");
            assert_eq!(head, e.head[q], "head analysis after {n} entries");
            e.set_ready(q, full);
            assert_eq!(before, lanes(&e.lanes), "lanes after {n} entries");
        }
        // Both paths were taken often.
        assert!(skipped > 2_000 && analysed > 2_000, "{skipped} {analysed}");
    }

    #[test]
    fn remove_bit_closes_the_gap() {
        assert_eq!(remove_bit(0b1011_0110, 0), 0b101_1011);
        assert_eq!(remove_bit(0b1011_0110, 2), 0b101_1010);
        assert_eq!(remove_bit(0b1011_0110, 7), 0b011_0110);
        assert_eq!(remove_bit(u64::MAX, 63), u64::MAX >> 1);
    }

    #[test]
    fn command_queues_keep_arrival_order_across_the_ring() {
        let mut cq = CmdQueues::new(2, 6); // rings of 8 slots
        let addr = |k: u64| k * 64;
        // Wrap the ring of queue 1: push and take from the head a few times.
        for k in 0..5 {
            cq.push(1, &txn(addr(k), 1, false), false);
            assert_eq!(cq.take(1, 0).0, addr(k));
        }
        for k in 10..16 {
            cq.push(1, &txn(addr(k), 1, k % 2 == 0), k % 3 == 0);
        }
        assert_eq!(cq.len(1), 6);
        assert_eq!(cq.wr[1], 0b01_0101);
        assert_eq!(cq.hit[1], 0b10_0100);
        // A write is found only under its tag, a read only untagged.
        assert!(cq.find(1, addr(10) | WRITE_TAG).is_some());
        assert!(cq.find(1, addr(10)).is_none());
        assert!(cq.find(1, addr(11)).is_some());
        assert!(cq.find(0, addr(11)).is_none());
        // Taking from the middle shifts the later entries forward.
        let (a, w, _) = cq.take(1, 2);
        assert_eq!((a, w), (addr(12), true));
        let order: Vec<u64> = (0..cq.len(1)).map(|i| cq.addr(1, i)).collect();
        assert_eq!(order, [10, 11, 13, 14, 15].map(addr));
        assert_eq!(cq.wr[1], 0b0_1001);
        assert_eq!(cq.hit[1], 0b1_0000);
        assert!(
            cq.find(1, addr(12) | WRITE_TAG).is_none(),
            "a taken slot is empty"
        );
        cq.open(1, (addr(14) >> 20) as u32);
        assert_eq!(cq.hit[1], 0b1_1111, "every entry is in row 0");
    }

    #[test]
    fn row_hit_masks_follow_the_ring_and_pop_back_undoes_push() {
        // The hit mask of a newly opened row is computed over the ring's
        // slots and rotated into queue order: check it against the entries
        // one by one, for every ring size the engine takes (the 8-slot ring
        // has a vector path) and every position of the head.
        for cap in [1usize, 2, 3, 6, 8, 16, 33, 64] {
            let mut cq = CmdQueues::new(2, cap);
            let slots = cap.next_power_of_two();
            for turn in 0..slots {
                for n in [0, 1, cap / 2, cap] {
                    let rows: Vec<u64> = (0..n as u64).map(|k| (k * 7 + turn as u64) % 3).collect();
                    for (k, &row) in rows.iter().enumerate() {
                        cq.push(1, &txn(row << 20 | (k as u64) << 6, 1, k % 2 == 1), false);
                    }
                    for row in 0..4u32 {
                        cq.open(1, row);
                        let want =
                            (0..n).fold(0u64, |m, i| m | ((cq.row(1, i) == row) as u64) << i);
                        assert_eq!(
                            cq.hit[1], want,
                            "ring of {slots}, head {turn}, {n} entries, row {row}"
                        );
                    }
                    // Undo the pushes from the back: masks and length return.
                    for k in (0..n).rev() {
                        let wr_before = cq.wr[1];
                        let (addr, row, _) = cq.pop_back(1);
                        assert_eq!(addr, rows[k] << 20 | (k as u64) << 6);
                        assert_eq!(row as u64, rows[k]);
                        assert_eq!(cq.len(1), k);
                        assert_eq!(cq.wr[1], wr_before & !(1u64 << k));
                        assert_eq!(cq.hit[1] >> k, 0);
                    }
                    assert!(cq.find(1, rows.first().map_or(1, |r| r << 20)).is_none());
                }
                // Move the head on by one.
                cq.push(1, &txn(0, 1, false), false);
                cq.take(1, 0);
            }
        }
    }

    #[test]
    fn transaction_lists_give_the_oldest_with_room() {
        let mut tq = TxnQueue::new(8);
        for (k, q) in [3u8, 5, 3, 7, 5].into_iter().enumerate() {
            tq.push(txn(k as u64 * 64, q, false));
        }
        assert_eq!(tq.len, 5);
        assert_eq!(tq.targets, 1 << 3 | 1 << 5 | 1 << 7);
        assert_eq!(tq.oldest(tq.targets), 3);
        assert_eq!(tq.oldest(1 << 5 | 1 << 7), 5);
        assert_eq!(tq.oldest(1 << 7), 7);
        assert_eq!(tq.find(5, 4 * 64), Some(4));
        assert_eq!(tq.find(3, 4 * 64), None);
        assert_eq!(tq.pop(3).addr, 0);
        assert_eq!(
            tq.oldest(tq.targets),
            5,
            "bank 5's head arrived before bank 3's"
        );
        assert_eq!(tq.pop(5).addr, 64);
        assert_eq!(tq.pop(3).addr, 128);
        assert_eq!(tq.targets, 1 << 5 | 1 << 7);
        // Freed slots are reused.
        for k in 0..5 {
            tq.push(txn(1000 + k * 64, 1, false));
        }
        assert_eq!(tq.len, 7);
        assert_eq!(tq.oldest(1 << 1 | 1 << 5), 5);
    }

    #[test]
    fn completion_rings_grow_in_order() {
        let mut r = DoneRing::new(16);
        let mut done = Vec::new();
        for k in 0..10 {
            r.push(k, k);
        }
        assert_eq!(r.drain_due(3, &mut done), 4);
        for k in 10..40 {
            r.push(k, k);
        }
        assert_eq!(r.first_cycle(), 4);
        assert_eq!(r.drain_due(100, &mut done), 36);
        assert_eq!(r.first_cycle(), u64::MAX);
        let ids: Vec<u64> = done.iter().map(|c| c.id).collect();
        assert_eq!(ids, (0..40).collect::<Vec<_>>());
        assert!(done[..4].iter().all(|c| c.cycle == 3));
    }

    #[test]
    fn fast_decode_equals_the_config() {
        for name in ["DDR4-3200-x8", "DDR4-2400-x16-2R", "DDR4-2400-x4-4R"] {
            let c = DramConfig::preset(name).unwrap();
            let e = NativeEngine::new(&c).unwrap();
            let mut x = 99u64;
            for _ in 0..1000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                let addr = ((x >> 7) % c.capacity_bytes()) & !63;
                let d = c.decode(addr);
                let t = e.decode(addr);
                let q = (d.rank * c.org.banks() as u64
                    + d.bankgroup * c.org.banks_per_group as u64
                    + d.bank) as u8;
                assert_eq!((t.row as u64, t.queue), (d.row, q), "{name} {addr:#x}");
            }
        }
    }
}
