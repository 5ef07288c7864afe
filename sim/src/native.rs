//! A native DDR4 engine, written in Rust: one channel of `ranks` DDR4 ranks
//! behind an open-page FR-FCFS controller modelled on DRAMsim3's.
//!
//! # Model
//!
//! - **Timing table.** Every command-to-command constraint is derived once from
//!   the preset's [`Timing`](crate::config::Timing) ([`TimingTable`]): tRCD,
//!   CL/CWL, tRP, tRAS, tRC, tCCD_S/L, tRRD_S/L, tFAW, tWTR_S/L, tWR, tRTP, the
//!   read/write bus turnarounds, tRTRS between ranks, tRFC and tREFI. The
//!   constraints are kept as "earliest next command" registers at three levels
//!   (bank, bank group, rank) plus what a rank imposes on the other ranks, so
//!   issuing a command updates a handful of registers, never every bank.
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
//! which its first command could issue as things stand (`ready_at`): the
//! earliest of its candidates (ACTIVATE for a closed bank; else PRECHARGE,
//! its first READ, its first WRITE), each the later of a bank, a bank-group
//! and a rank-level time. A command changes a handful of those registers and
//! marks the ranks it affects; their queues' times are then recomputed in one
//! branch-free pass (four AVX2 vectors for a 16-bank rank). The controller
//! runs only at the earliest of those times, the next refresh, and cycles
//! where a transaction can move or the write-drain state can change; other
//! cycles cost one comparison in [`DramEngine::tick`], and
//! [`DramEngine::tick_until_done`] jumps over them. A request that arrives at
//! a cycle where nothing else happens only triggers the transaction move, at
//! the end of the cycle. The results are those of running the controller at
//! every cycle ([`NativeEngine::every_cycle`], tested). What a queue's entries
//! offer against its open row is cached (`Head`) until the entries, the row
//! or its hit count change. Queues, maps and lists are allocated up front (or
//! grow once to their high-water mark): nothing is allocated per request.
//!
//! # Command log
//!
//! [`NativeEngine::with_command_log`] records every command (cycle, rank,
//! flat bank, command) for [`crate::jedec::Checker`]. Off by default; when off
//! it costs one predictable branch per command.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::config::DramConfig;
use crate::energy::CommandCounts;
use crate::engine::{DramEngine, EngineKind, EngineReport};
use crate::jedec::{Command, CommandRecord};
use crate::request::{BURST_BYTES, IntHash};
use crate::{Completion, Request, RequestId, SimError};

/// Command-to-command delays in cycles, derived once from a preset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimingTable {
    /// CL + BL/2: READ to data returned.
    pub read_delay: u64,
    pub burst: u64,
    pub rd_to_rd_l: u64,
    pub rd_to_rd_s: u64,
    /// READ to READ in another rank: BL/2 + tRTRS.
    pub rd_to_rd_o: u64,
    /// READ to WRITE in the same rank: CL + BL/2 - CWL + tRTRS.
    pub rd_to_wr: u64,
    pub rd_to_wr_o: u64,
    pub rd_to_pre: u64,
    /// WRITE to READ, same bank group: CWL + BL/2 + tWTR_L.
    pub wr_to_rd_l: u64,
    pub wr_to_rd_s: u64,
    pub wr_to_rd_o: u64,
    pub wr_to_wr_l: u64,
    pub wr_to_wr_s: u64,
    /// WRITE to WRITE in another rank: BL/2 + tRTRS (DRAMsim3 uses BL/2 alone,
    /// which breaks tRTRS; we do not).
    pub wr_to_wr_o: u64,
    /// WRITE to PRECHARGE: CWL + BL/2 + tWR.
    pub wr_to_pre: u64,
    pub pre_to_act: u64,
    pub act_to_act: u64,
    pub act_to_act_l: u64,
    pub act_to_act_s: u64,
    pub act_to_pre: u64,
    pub act_to_rw: u64,
    pub faw: u64,
    pub ref_to_act: u64,
    pub refi: u64,
}

impl TimingTable {
    pub fn of(config: &DramConfig) -> Self {
        let t = &config.timing;
        let bl = config.burst_cycles() as i64;
        let (cl, cwl) = (t.cl as i64, t.cwl as i64);
        // The checker's read-to-write turnaround uses a 2-cycle gap; never less.
        let rtrs = t.trtrs.max(2) as i64;
        let read_delay = cl + bl;
        let write_delay = cwl + bl;
        let one_group = config.org.bankgroups == 1;
        let pick = |l: u32, s: u32| if one_group { s } else { l } as i64;
        let c = |x: i64| x.max(0) as u64;
        TimingTable {
            read_delay: c(read_delay),
            burst: c(bl),
            rd_to_rd_l: c(bl.max(pick(t.tccd_l, t.tccd_s))),
            rd_to_rd_s: c(bl.max(t.tccd_s as i64)),
            rd_to_rd_o: c(bl + rtrs),
            rd_to_wr: c(cl + bl - cwl + rtrs),
            rd_to_wr_o: c(read_delay + bl + rtrs - write_delay),
            rd_to_pre: c(t.trtp as i64),
            wr_to_rd_l: c(write_delay + pick(t.twtr_l, t.twtr_s)),
            wr_to_rd_s: c(write_delay + t.twtr_s as i64),
            wr_to_rd_o: c(write_delay + bl + rtrs - read_delay),
            wr_to_wr_l: c(bl.max(pick(t.tccd_l, t.tccd_s))),
            wr_to_wr_s: c(bl.max(t.tccd_s as i64)),
            wr_to_wr_o: c(bl + rtrs),
            wr_to_pre: c(cwl + bl + t.twr as i64),
            pre_to_act: c(t.trp as i64),
            act_to_act: c(t.trc as i64),
            act_to_act_l: c(pick(t.trrd_l, t.trrd_s)),
            act_to_act_s: c(t.trrd_s as i64),
            act_to_pre: c(t.tras as i64),
            act_to_rw: c(t.trcd as i64),
            faw: c(t.tfaw as i64),
            ref_to_act: c(t.trfc as i64),
            refi: c(t.trefi as i64),
        }
    }
}

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
const NIL: u32 = u32::MAX;
/// OR-ed into a candidate time: the queue has no such candidate.
const NO: i64 = i64::MAX;
/// The most bank queues in a channel (4 ranks of 16 banks).
const MAX_QUEUES: usize = 64;

/// Per-queue registers, one array per field so that the compiler vectorises
/// the loops over the queues. Entries beyond the channel's queues stay
/// [`NO`] (never ready).
#[derive(Clone)]
struct Lanes {
    /// The bank's part of the earliest cycle of each candidate command
    /// (ACTIVATE, PRECHARGE, READ, WRITE).
    act: [i64; MAX_QUEUES],
    pre: [i64; MAX_QUEUES],
    rd: [i64; MAX_QUEUES],
    wr: [i64; MAX_QUEUES],
    /// [`NO`] where the queue has no such candidate (from its head analysis
    /// and its bank's state), else 0; OR-ed into the candidate time.
    no_act: [i64; MAX_QUEUES],
    no_pre: [i64; MAX_QUEUES],
    no_rd: [i64; MAX_QUEUES],
    no_wr: [i64; MAX_QUEUES],
    /// The earliest cycle at which one of the queue's commands can issue, as
    /// things stand ([`NO`]: none can). Exact, and current for every rank
    /// not marked dirty.
    ready_at: [i64; MAX_QUEUES],
    /// Per bank group: its part of the ACTIVATE, READ and WRITE times.
    group_act: [i64; MAX_QUEUES],
    group_rd: [i64; MAX_QUEUES],
    group_wr: [i64; MAX_QUEUES],
}

#[derive(Clone, Copy, Debug)]
struct Bank {
    open_row: u32,
    /// Column commands since the activation.
    hits: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct Rank {
    next_act: u64,
    next_rd: u64,
    next_wr: u64,
    /// Earliest REF: tRP after the last precharge, tRFC after the last REF.
    next_ref: u64,
    /// What this rank's last column commands impose on the other ranks.
    others_rd: u64,
    others_wr: u64,
    /// tFAW: release times (ACT + tFAW) of the last four ACTs, a ring.
    faw: [u64; 4],
    faw_next: usize,
    open_banks: u32,
    active_since: u64,
    active_cycles: u64,
}

/// A transaction, and the column command it becomes in a bank queue.
#[derive(Clone, Copy, Debug)]
struct Txn {
    addr: u64,
    row: u32,
    queue: u16,
    write: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Act,
    Pre,
    Rd,
    Wr,
}

/// What a bank queue's entries offer against the open row, in queue order:
/// the first READ and the first WRITE that may issue (`NONE_IDX` for none),
/// and whether the head may close the row. Depends only on the entries, the
/// open row and whether the row has had its share of hits, so it is kept until
/// one of those changes.
#[derive(Clone, Copy, Debug)]
struct Head {
    rd: u8,
    wr: u8,
    pre: bool,
}

const NONE_IDX: u8 = u8::MAX;

/// A list of request ids waiting for one READ, in a shared node pool.
#[derive(Clone, Copy, Debug)]
struct IdList {
    head: u32,
    tail: u32,
}

impl Lanes {
    /// Recomputes `ready_at` of queues `base..base + n`, in bank groups of
    /// `per_group`, under the rank-level parts `ga`, `gr`, `gw` of the
    /// ACTIVATE, READ and WRITE times; returns their minimum. Branch-free:
    /// with 4 banks per group, each group is one 4-lane vector.
    #[inline(always)]
    fn recompute(
        &mut self,
        base: usize,
        n: usize,
        per_group: usize,
        ga: i64,
        gr: i64,
        gw: i64,
    ) -> i64 {
        let mut least = NO;
        for g in base / per_group..(base + n) / per_group {
            let xa = self.group_act[g].max(ga);
            let xr = self.group_rd[g].max(gr);
            let xw = self.group_wr[g].max(gw);
            let span = g * per_group..(g + 1) * per_group;
            let act = &self.act[span.clone()];
            let pre = &self.pre[span.clone()][..per_group];
            let rd = &self.rd[span.clone()][..per_group];
            let wr = &self.wr[span.clone()][..per_group];
            let no_act = &self.no_act[span.clone()][..per_group];
            let no_pre = &self.no_pre[span.clone()][..per_group];
            let no_rd = &self.no_rd[span.clone()][..per_group];
            let no_wr = &self.no_wr[span.clone()][..per_group];
            let out = &mut self.ready_at[span][..per_group];
            for i in 0..act.len() {
                let a = act[i].max(xa) | no_act[i];
                let p = pre[i] | no_pre[i];
                let d = rd[i].max(xr) | no_rd[i];
                let w = wr[i].max(xw) | no_wr[i];
                let t = a.min(p).min(d.min(w));
                out[i] = t;
                least = least.min(t);
            }
        }
        least
    }

    /// [`recompute`](Self::recompute) of the 16 queues from `base` in 4
    /// groups of 4, one AVX2 vector per group.
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    #[target_feature(enable = "avx2")]
    #[inline]
    fn recompute16(&mut self, base: usize, ga: i64, gr: i64, gw: i64) -> i64 {
        use std::arch::x86_64::*;
        assert!(base + 16 <= MAX_QUEUES);
        // Signed 64-bit max and min (AVX2 has only the compare).
        #[target_feature(enable = "avx2")]
        #[inline]
        fn max(a: __m256i, b: __m256i) -> __m256i {
            _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b))
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        fn min(a: __m256i, b: __m256i) -> __m256i {
            _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b))
        }
        #[target_feature(enable = "avx2")]
        #[inline]
        fn load(v: &[i64; MAX_QUEUES], q: usize) -> __m256i {
            let four = &v[q..q + 4];
            // SAFETY: `four` is 32 bytes; unaligned loads are allowed.
            unsafe { _mm256_loadu_si256(four.as_ptr() as *const __m256i) }
        }
        let mut least = _mm256_set1_epi64x(NO);
        for k in 0..4 {
            let (q, g) = (base + 4 * k, base / 4 + k);
            let xa = _mm256_set1_epi64x(self.group_act[g].max(ga));
            let xr = _mm256_set1_epi64x(self.group_rd[g].max(gr));
            let xw = _mm256_set1_epi64x(self.group_wr[g].max(gw));
            let a = _mm256_or_si256(max(load(&self.act, q), xa), load(&self.no_act, q));
            let p = _mm256_or_si256(load(&self.pre, q), load(&self.no_pre, q));
            let d = _mm256_or_si256(max(load(&self.rd, q), xr), load(&self.no_rd, q));
            let w = _mm256_or_si256(max(load(&self.wr, q), xw), load(&self.no_wr, q));
            let t = min(min(a, p), min(d, w));
            let out = &mut self.ready_at[q..q + 4];
            // SAFETY: `out` is 32 bytes; unaligned stores are allowed.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, t) };
            least = min(least, t);
        }
        let mut lanes = [0i64; 4];
        // SAFETY: `lanes` is 32 bytes.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, least) };
        lanes[0].min(lanes[1]).min(lanes[2].min(lanes[3]))
    }

    /// The queues among the first `N` whose `ready_at` is at most `now`.
    #[inline(always)]
    fn ready_mask<const N: usize>(&self, now: i64) -> u64 {
        let mut m = 0u64;
        for (q, &t) in self.ready_at[..N].iter().enumerate() {
            m |= ((t <= now) as u64) << q;
        }
        m
    }
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

/// The native DDR4 engine; see the [module documentation](self).
pub struct NativeEngine {
    config: DramConfig,
    t: TimingTable,
    map: Mapping,
    banks_per_rank: usize,
    banks_per_group: usize,
    /// log2 of `banks_per_rank` and `banks_per_group`.
    rank_shift: u32,
    group_shift: u32,
    queues: usize,
    txn_cap: usize,
    cmd_cap: usize,

    cycle: u64,
    /// The controller runs at this cycle or later; earlier cycles are idle.
    wake: u64,

    read_q: Vec<Txn>,
    write_q: Vec<Txn>,
    pending_rd: HashMap<u64, IdList, IntHash>,
    pending_wr: HashSet<u64, IntHash>,
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
    unissued_writes: usize,

    cmdq: Vec<Vec<Txn>>,
    /// Per queue: its [`Head`] analysis, kept while the queue is non-empty
    /// and its bank open.
    head: Vec<Head>,
    /// Writes in each bank queue.
    queued_writes: Vec<u8>,
    nonempty: u64,
    /// Bank queues that are full.
    full: u64,
    /// Transactions waiting in the read queue / write buffer per bank queue,
    /// and the bank queues with any.
    read_waiting: Vec<u8>,
    write_waiting: Vec<u8>,
    read_targets: u64,
    write_targets: u64,
    /// Per-queue candidate times and masks, laid out for vector code.
    lanes: Lanes,
    /// Per rank: the rank-level part of each kind's earliest cycle (for READ
    /// and WRITE including what the other ranks impose).
    gate_act: Vec<i64>,
    gate_rd: Vec<i64>,
    gate_wr: Vec<i64>,
    /// Per rank: the least `ready_at` of its queues.
    rank_min: Vec<i64>,
    /// Ranks whose `ready_at` and `rank_min` wait to be recomputed.
    dirty: u32,
    /// The rank being refreshed, if any.
    ref_rank: usize,
    queue_idx: usize,

    banks: Vec<Bank>,
    ranks: Vec<Rank>,

    refresh_interval: u64,
    next_refresh: u64,
    next_refresh_rank: u32,
    refresh_q: VecDeque<u32>,
    /// Bank-queue mask of the rank being refreshed.
    ref_mask: u64,

    /// Completion cycle and id, in completion order: posted writes and reads
    /// served from the write buffer (1 cycle), and reads (CL + BL/2 after READ).
    quick_done: VecDeque<(u64, RequestId)>,
    read_done: VecDeque<(u64, RequestId)>,
    /// The earlier of the two queues' first completion cycles (`u64::MAX`
    /// when both are empty).
    next_done: u64,

    pending: usize,
    counts: CommandCounts,
    log: Option<Vec<CommandRecord>>,
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
        let banks_per_rank = config.org.banks() as usize;
        let queues = banks_per_rank * config.ranks as usize;
        if queues == 0 || queues > 64 || config.ranks > 4 {
            return Err(bad(format!(
                "{queues} banks in the channel; the native engine handles 1 to 64"
            )));
        }
        if !config.org.bankgroups.is_power_of_two() || !config.org.banks_per_group.is_power_of_two()
        {
            return Err(bad(format!(
                "{} bank groups of {} banks; the native engine needs powers of two",
                config.org.bankgroups, config.org.banks_per_group
            )));
        }
        if config.transaction_queue == 0 || config.command_queue == 0 {
            return Err(bad("queue sizes must be at least 1".into()));
        }
        if config.transaction_queue > 255 || config.command_queue > 254 {
            return Err(bad(format!(
                "transaction queue {} and bank command queue {}; the native engine handles up to 255 and 254",
                config.transaction_queue, config.command_queue
            )));
        }
        if config.org.rows > u32::MAX as u64 {
            return Err(bad(format!("{} rows per bank", config.org.rows)));
        }
        let t = TimingTable::of(config);
        let txn_cap = config.transaction_queue as usize;
        let cmd_cap = config.command_queue as usize;
        let refresh_interval = (t.refi / config.ranks as u64).max(1);
        let bank = Bank {
            open_row: CLOSED,
            hits: 0,
        };
        let nranks = config.ranks as usize;
        let window = 4 * txn_cap + queues * cmd_cap;
        Ok(NativeEngine {
            t,
            map: Mapping::of(config),
            banks_per_rank,
            banks_per_group: config.org.banks_per_group as usize,
            rank_shift: banks_per_rank.trailing_zeros(),
            group_shift: config.org.banks_per_group.trailing_zeros(),
            queues,
            txn_cap,
            cmd_cap,
            cycle: 0,
            wake: 0,
            read_q: Vec::with_capacity(txn_cap),
            write_q: Vec::with_capacity(txn_cap),
            pending_rd: HashMap::with_capacity_and_hasher(window, IntHash::default()),
            pending_wr: HashSet::with_capacity_and_hasher(window, IntHash::default()),
            id_nodes: Vec::with_capacity(window),
            id_free: NIL,
            write_draining: 0,
            flush: false,
            move_due: false,
            unissued_writes: 0,
            cmdq: (0..queues).map(|_| Vec::with_capacity(cmd_cap)).collect(),
            head: vec![
                Head {
                    rd: NONE_IDX,
                    wr: NONE_IDX,
                    pre: false,
                };
                queues
            ],
            queued_writes: vec![0; queues],
            nonempty: 0,
            full: 0,
            read_waiting: vec![0; queues],
            write_waiting: vec![0; queues],
            read_targets: 0,
            write_targets: 0,
            lanes: Lanes {
                act: [0; MAX_QUEUES],
                pre: [0; MAX_QUEUES],
                rd: [0; MAX_QUEUES],
                wr: [0; MAX_QUEUES],
                no_act: [NO; MAX_QUEUES],
                no_pre: [NO; MAX_QUEUES],
                no_rd: [NO; MAX_QUEUES],
                no_wr: [NO; MAX_QUEUES],
                ready_at: [NO; MAX_QUEUES],
                group_act: [0; MAX_QUEUES],
                group_rd: [0; MAX_QUEUES],
                group_wr: [0; MAX_QUEUES],
            },
            gate_act: vec![0; nranks],
            gate_rd: vec![0; nranks],
            gate_wr: vec![0; nranks],
            rank_min: vec![NO; nranks],
            dirty: 0,
            ref_rank: usize::MAX,
            queue_idx: 0,
            banks: vec![bank; queues],
            ranks: vec![Rank::default(); nranks],
            refresh_interval,
            next_refresh: refresh_interval,
            next_refresh_rank: 0,
            refresh_q: VecDeque::with_capacity(8),
            ref_mask: 0,
            quick_done: VecDeque::with_capacity(window),
            read_done: VecDeque::with_capacity(window),
            next_done: u64::MAX,
            pending: 0,
            counts: CommandCounts {
                row_conflicts: Some(0),
                ..CommandCounts::default()
            },
            log: None,
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

    /// The same engine, made to run its controller at every cycle instead of
    /// only at the cycles where something can happen. The results are the
    /// same, only slower: this is the reference the event-driven schedule is
    /// tested against.
    pub fn every_cycle(mut self) -> Self {
        self.every_cycle = true;
        self.wake = self.wake.min(self.cycle);
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

    fn decode(&self, addr: u64) -> Txn {
        let a = addr / BURST_BYTES;
        let f = |p: FieldPos| (a >> p.shift) & p.mask;
        let rank = f(self.map.rank) as usize;
        let bg = f(self.map.bankgroup) as usize;
        let bank = f(self.map.bank) as usize;
        Txn {
            addr,
            row: f(self.map.row) as u32,
            queue: (rank * self.banks_per_rank + bg * self.banks_per_group + bank) as u16,
            write: false,
        }
    }

    #[inline]
    fn rank_of(&self, q: usize) -> usize {
        q >> self.rank_shift
    }

    #[inline]
    fn group_of(&self, q: usize) -> usize {
        q >> self.group_shift
    }

    /// What the other ranks impose on a column command of rank `r`.
    #[inline]
    fn others(&self, r: usize) -> (u64, u64) {
        let (mut rd, mut wr) = (0, 0);
        if self.ranks.len() > 1 {
            for (i, x) in self.ranks.iter().enumerate() {
                if i != r {
                    rd = rd.max(x.others_rd);
                    wr = wr.max(x.others_wr);
                }
            }
        }
        (rd, wr)
    }

    /// Recomputes the rank-level parts of the candidate times after a
    /// command, and marks the ranks whose queues they change.
    fn update_gates(&mut self, dirty: u32) {
        for r in 0..self.ranks.len() {
            let (o_rd, o_wr) = self.others(r);
            let rk = &self.ranks[r];
            self.gate_act[r] = rk.next_act.max(rk.faw[rk.faw_next]) as i64;
            self.gate_rd[r] = rk.next_rd.max(o_rd) as i64;
            self.gate_wr[r] = rk.next_wr.max(o_wr) as i64;
        }
        self.dirty |= dirty;
    }

    /// Recomputes `ready_at` of every queue of rank `r`, and its minimum.
    fn recompute_rank(&mut self, r: usize) {
        let (ga, gr, gw) = (self.gate_act[r], self.gate_rd[r], self.gate_wr[r]);
        // The usual 16 banks in groups of 4 get a copy with known lengths.
        self.rank_min[r] = if self.banks_per_rank == 16 && self.banks_per_group == 4 {
            // SAFETY: compiled only when the whole build targets AVX2 (the
            // project's default, `.cargo/config.toml`), where any code may
            // use it already; `nmpsim` checks the CPU at start-up.
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
            let least = unsafe { self.lanes.recompute16(r * 16, ga, gr, gw) };
            #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
            let least = self.lanes.recompute(r * 16, 16, 4, ga, gr, gw);
            least
        } else {
            let n = self.banks_per_rank;
            self.lanes
                .recompute(r * n, n, self.banks_per_group, ga, gr, gw)
        };
    }

    /// Brings `ready_at` of the dirty ranks up to date.
    #[inline]
    fn recompute_dirty(&mut self) {
        while self.dirty != 0 {
            let r = self.dirty.trailing_zeros() as usize;
            self.dirty &= self.dirty - 1;
            self.recompute_rank(r);
        }
    }

    /// The queues with a command that can issue at `now` (`ready_at` current).
    #[inline]
    fn ready_mask(&self, now: u64) -> u64 {
        if self.queues <= 16 {
            self.lanes.ready_mask::<16>(now as i64)
        } else {
            self.lanes.ready_mask::<MAX_QUEUES>(now as i64)
        }
    }

    /// Analyses queue `q`'s entries against its open row (see [`Head`]).
    fn analyse_head(&self, q: usize) -> Head {
        let entries = &self.cmdq[q];
        let bank = &self.banks[q];
        let open = bank.open_row;
        let (mut rd, mut wr, mut hit) = (NONE_IDX, NONE_IDX, false);
        let writes = self.queued_writes[q] != 0;
        for (i, e) in entries.iter().enumerate() {
            if e.row != open {
                continue;
            }
            if rd != NONE_IDX && (wr != NONE_IDX || !writes) {
                // Nothing further can change the analysis.
                break;
            }
            hit = true;
            if e.write {
                // A write waits for an earlier read of its address.
                if wr == NONE_IDX && !entries[..i].iter().any(|p| !p.write && p.addr == e.addr) {
                    wr = i as u8;
                }
            } else if rd == NONE_IDX {
                rd = i as u8;
            }
        }
        // Close the row for the head only when nothing queued hits it, or the
        // row has had its share of hits.
        let pre =
            entries.first().is_some_and(|h| h.row != open) && (bank.hits >= ROW_HIT_LIMIT || !hit);
        Head { rd, wr, pre }
    }

    /// Re-derives which candidate commands queue `q` has, after its entries
    /// or its bank's state changed, and marks its rank.
    fn refresh_head(&mut self, q: usize) {
        let (a, p, d, w) = if self.nonempty & (1u64 << q) == 0 {
            (NO, NO, NO, NO)
        } else if self.banks[q].open_row == CLOSED {
            (0, NO, NO, NO)
        } else {
            let h = self.analyse_head(q);
            self.head[q] = h;
            let no = |x: bool| if x { 0 } else { NO };
            (NO, no(h.pre), no(h.rd != NONE_IDX), no(h.wr != NONE_IDX))
        };
        self.lanes.no_act[q] = a;
        self.lanes.no_pre[q] = p;
        self.lanes.no_rd[q] = d;
        self.lanes.no_wr[q] = w;
        self.dirty |= 1 << self.rank_of(q);
    }

    /// The command of queue `q` to issue at `now`, which its `ready_at` says
    /// there is: entry index and kind, the first ready in queue order.
    #[inline]
    fn pick(&self, q: usize, now: u64) -> (usize, Kind) {
        if self.banks[q].open_row == CLOSED {
            return (0, Kind::Act);
        }
        let now = now as i64;
        let h = self.head[q];
        if h.pre && self.lanes.pre[q] <= now {
            return (0, Kind::Pre);
        }
        let (r, g, l) = (self.rank_of(q), self.group_of(q), &self.lanes);
        let mut pick = NONE_IDX;
        let mut kind = Kind::Rd;
        if h.rd != NONE_IDX && l.rd[q].max(l.group_rd[g]).max(self.gate_rd[r]) <= now {
            pick = h.rd;
        }
        let wr_t = l.wr[q].max(l.group_wr[g]).max(self.gate_wr[r]);
        if h.wr != NONE_IDX && wr_t <= now && h.wr < pick {
            pick = h.wr;
            kind = Kind::Wr;
        }
        debug_assert_ne!(pick, NONE_IDX, "queue {q} has no ready command at {now}");
        (pick as usize, kind)
    }

    fn log_cmd(&mut self, cycle: u64, q: usize, command: Command) {
        if let Some(log) = self.log.as_mut() {
            log.push(CommandRecord {
                cycle,
                rank: (q / self.banks_per_rank) as u32,
                command,
                bank: (q % self.banks_per_rank) as u32,
            });
        }
    }

    fn activate(&mut self, now: u64, q: usize, row: u32) {
        let t = &self.t;
        let (r, g) = (self.rank_of(q), self.group_of(q));
        let b = &mut self.banks[q];
        debug_assert_eq!(b.open_row, CLOSED);
        b.open_row = row;
        b.hits = 0;
        let at = |d: u64| (now + d) as i64;
        self.lanes.act[q] = self.lanes.act[q].max(at(t.act_to_act));
        self.lanes.rd[q] = self.lanes.rd[q].max(at(t.act_to_rw));
        self.lanes.wr[q] = self.lanes.wr[q].max(at(t.act_to_rw));
        self.lanes.pre[q] = self.lanes.pre[q].max(at(t.act_to_pre));
        self.lanes.group_act[g] = self.lanes.group_act[g].max(at(t.act_to_act_l));
        let rk = &mut self.ranks[r];
        rk.next_act = rk.next_act.max(now + t.act_to_act_s);
        rk.faw[rk.faw_next] = now + t.faw;
        rk.faw_next = (rk.faw_next + 1) & 3;
        if rk.open_banks == 0 {
            rk.active_since = now;
        }
        rk.open_banks += 1;
        self.counts.activates += 1;
        self.update_gates(1 << r);
        self.refresh_head(q);
        self.log_cmd(now, q, Command::Act);
    }

    fn precharge(&mut self, now: u64, q: usize) {
        let t = &self.t;
        let r = self.rank_of(q);
        let b = &mut self.banks[q];
        debug_assert_ne!(b.open_row, CLOSED);
        b.open_row = CLOSED;
        b.hits = 0;
        self.lanes.act[q] = self.lanes.act[q].max((now + t.pre_to_act) as i64);
        let rk = &mut self.ranks[r];
        rk.next_ref = rk.next_ref.max(now + t.pre_to_act);
        rk.open_banks -= 1;
        if rk.open_banks == 0 {
            rk.active_cycles += now - rk.active_since;
        }
        self.counts.precharges += 1;
        self.refresh_head(q);
        self.log_cmd(now, q, Command::Pre);
    }

    fn column(&mut self, now: u64, q: usize, write: bool) {
        let t = &self.t;
        let (r, g) = (self.rank_of(q), self.group_of(q));
        let b = &mut self.banks[q];
        debug_assert_ne!(b.open_row, CLOSED);
        if b.hits != 0 {
            self.counts.row_hits += 1;
        }
        b.hits += 1;
        let rk = &mut self.ranks[r];
        let (to_pre, to_rd_l, to_wr_l, to_rd_s, to_wr_s, to_rd_o, to_wr_o) = if write {
            self.counts.write_cmds += 1;
            (
                t.wr_to_pre,
                t.wr_to_rd_l,
                t.wr_to_wr_l,
                t.wr_to_rd_s,
                t.wr_to_wr_s,
                t.wr_to_rd_o,
                t.wr_to_wr_o,
            )
        } else {
            self.counts.read_cmds += 1;
            (
                t.rd_to_pre,
                t.rd_to_rd_l,
                t.rd_to_wr,
                t.rd_to_rd_s,
                t.rd_to_wr,
                t.rd_to_rd_o,
                t.rd_to_wr_o,
            )
        };
        rk.next_rd = rk.next_rd.max(now + to_rd_s);
        rk.next_wr = rk.next_wr.max(now + to_wr_s);
        rk.others_rd = rk.others_rd.max(now + to_rd_o);
        rk.others_wr = rk.others_wr.max(now + to_wr_o);
        self.lanes.pre[q] = self.lanes.pre[q].max((now + to_pre) as i64);
        let gl = &mut self.lanes;
        gl.group_rd[g] = gl.group_rd[g].max((now + to_rd_l) as i64);
        gl.group_wr[g] = gl.group_wr[g].max((now + to_wr_l) as i64);
        // The other ranks' gates move too.
        self.update_gates(u32::MAX >> (32 - self.ranks.len()));
        self.log_cmd(now, q, if write { Command::Wr } else { Command::Rd });
    }

    fn refresh(&mut self, now: u64, r: usize) {
        let t = &self.t;
        let rk = &mut self.ranks[r];
        debug_assert_eq!(rk.open_banks, 0);
        rk.next_act = rk.next_act.max(now + t.ref_to_act);
        rk.next_ref = now + t.ref_to_act;
        self.counts.refreshes += 1;
        self.update_gates(1 << r);
        self.log_cmd(now, r * self.banks_per_rank, Command::Ref);
    }

    /// Issues the command picked from queue `q` at `now`.
    fn issue_from_queue(&mut self, now: u64, q: usize, i: usize, kind: Kind) {
        match kind {
            Kind::Act => {
                let row = self.cmdq[q][i].row;
                self.activate(now, q, row);
            }
            Kind::Pre => {
                self.counts.row_conflicts = self.counts.row_conflicts.map(|c| c + 1);
                self.precharge(now, q);
            }
            Kind::Rd | Kind::Wr => {
                let e = self.cmdq[q].remove(i);
                self.queued_writes[q] -= e.write as u8;
                self.full &= !(1u64 << q);
                if self.cmdq[q].is_empty() {
                    self.nonempty &= !(1u64 << q);
                }
                self.column(now, q, e.write);
                self.refresh_head(q);
                if e.write {
                    self.pending_wr.remove(&e.addr);
                    self.unissued_writes -= 1;
                } else {
                    let list = self
                        .pending_rd
                        .remove(&e.addr)
                        .expect("a queued read has waiting requests");
                    let done_at = now + self.t.read_delay;
                    let mut n = list.head;
                    while n != NIL {
                        let (id, next) = self.id_nodes[n as usize];
                        self.read_done.push_back((done_at, id));
                        self.next_done = self.next_done.min(done_at);
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
        let base = r * self.banks_per_rank;
        let mut earliest = u64::MAX;
        for q in base..base + self.banks_per_rank {
            if self.banks[q].open_row != CLOSED {
                let t = self.lanes.pre[q] as u64;
                if t <= now {
                    self.precharge(now, q);
                    return Ok(());
                }
                earliest = earliest.min(t);
            }
        }
        if self.ranks[r].open_banks != 0 {
            return Err(earliest);
        }
        let t = self.ranks[r].next_ref;
        if t > now {
            return Err(t);
        }
        self.refresh(now, r);
        self.refresh_q.pop_front();
        self.ref_mask = 0;
        self.ref_rank = usize::MAX;
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

    /// Moves at most one transaction into its bank queue (DRAMsim3's
    /// `ScheduleTransaction`). Returns the queue that received a command.
    fn schedule_transaction(&mut self) -> Option<usize> {
        if self.write_draining == 0 {
            let n = self.write_q.len();
            if n >= self.txn_cap
                || (n > WRITE_DRAIN_LOW && self.nonempty == 0)
                || (self.flush && n > 0)
            {
                self.write_draining = n as i64;
            }
        }
        let writes = self.write_draining > 0;
        let targets = if writes {
            self.write_targets
        } else {
            self.read_targets
        };
        if targets & !self.full == 0 {
            if self.write_draining < 0 {
                self.write_draining = 0;
            }
            return None;
        }
        let len = if writes {
            self.write_q.len()
        } else {
            self.read_q.len()
        };
        for i in 0..len {
            let txn = if writes {
                self.write_q[i]
            } else {
                self.read_q[i]
            };
            let q = txn.queue as usize;
            if self.cmdq[q].len() < self.cmd_cap {
                if txn.write {
                    if self.pending_rd.contains_key(&txn.addr) {
                        self.write_draining = -1;
                        return None;
                    }
                    self.write_draining -= 1;
                    self.write_q.remove(i);
                    self.write_waiting[q] -= 1;
                    if self.write_waiting[q] == 0 {
                        self.write_targets &= !(1u64 << q);
                    }
                } else {
                    self.read_q.remove(i);
                    self.read_waiting[q] -= 1;
                    if self.read_waiting[q] == 0 {
                        self.read_targets &= !(1u64 << q);
                    }
                }
                self.cmdq[q].push(txn);
                self.queued_writes[q] += txn.write as u8;
                self.nonempty |= 1u64 << q;
                if self.cmdq[q].len() == self.cmd_cap {
                    self.full |= 1u64 << q;
                }
                self.refresh_head(q);
                return Some(q);
            }
        }
        if self.write_draining < 0 {
            self.write_draining = 0;
        }
        None
    }

    /// Whether [`schedule_transaction`](Self::schedule_transaction) would
    /// change anything if it ran now: move a transaction, or change the
    /// write-drain state. Cycles where it would not, and no command can
    /// issue, are skipped.
    fn transaction_work_possible(&self) -> bool {
        if self.write_draining < 0 {
            return true;
        }
        let n = self.write_q.len();
        if self.write_draining == 0
            && (n >= self.txn_cap
                || (n > WRITE_DRAIN_LOW && self.nonempty == 0)
                || (self.flush && n > 0))
        {
            // A drain starts, whether or not a write can move yet.
            return true;
        }
        let targets = if self.write_draining > 0 {
            self.write_targets
        } else {
            self.read_targets
        };
        targets & !self.full != 0
    }

    /// One controller cycle at `now` (DRAMsim3's `Controller::ClockTick`),
    /// then sets `wake` to the next cycle at which anything can happen.
    fn step(&mut self, now: u64) {
        self.move_due = false;
        if now == self.next_refresh {
            self.refresh_q.push_back(self.next_refresh_rank);
            self.next_refresh_rank = (self.next_refresh_rank + 1) % self.config.ranks;
            self.next_refresh += self.refresh_interval;
        }
        let mut wake = self.next_refresh;
        let mut issued = false;
        if let Some(&r) = self.refresh_q.front() {
            self.ref_mask = self.rank_mask(r as usize);
            self.ref_rank = r as usize;
            match self.refresh_step(now, r as usize) {
                Ok(()) => issued = true,
                Err(t) => wake = wake.min(t),
            }
        }
        // Round-robin from the queue after the last to issue: the first with a
        // ready command issues it.
        if !issued {
            let cand = self.ready_mask(now) & !self.ref_mask;
            if cand != 0 {
                let start = if self.queue_idx + 1 == self.queues {
                    0
                } else {
                    self.queue_idx + 1
                };
                let high = cand & (u64::MAX << start);
                let q = if high != 0 { high } else { cand }.trailing_zeros() as usize;
                let (i, kind) = self.pick(q, now);
                self.issue_from_queue(now, q, i, kind);
                self.queue_idx = q;
                issued = true;
            }
        }
        self.schedule_transaction();
        // The next wake-up: the earliest cycle at which a queue can issue, as
        // things stand after this cycle's command and move.
        if self.ref_mask != 0 && self.refresh_q.is_empty() {
            self.ref_mask = 0;
            self.ref_rank = usize::MAX;
        }
        self.recompute_dirty();
        for (r, &t) in self.rank_min.iter().enumerate() {
            if r != self.ref_rank {
                wake = wake.min(t as u64);
            }
        }
        if issued && !self.refresh_q.is_empty() {
            // The refreshing rank may go on precharging next cycle.
            wake = now + 1;
        }
        if self.transaction_work_possible() {
            wake = now + 1;
        }
        self.wake = if self.every_cycle {
            now + 1
        } else {
            wake.max(now + 1)
        };
    }

    /// The end of a cycle at which no command can issue and no refresh is
    /// due, but requests arrived: the controller's transaction move alone.
    fn move_only(&mut self, now: u64) {
        self.move_due = false;
        let mut wake = self.wake;
        if let Some(q) = self.schedule_transaction() {
            self.recompute_dirty();
            wake = wake.min(self.lanes.ready_at[q] as u64);
        }
        if self.transaction_work_possible() {
            wake = now + 1;
        }
        self.wake = wake.max(now + 1);
    }

    #[inline]
    fn next_completion(&self) -> u64 {
        let a = self.quick_done.front().map_or(u64::MAX, |x| x.0);
        let b = self.read_done.front().map_or(u64::MAX, |x| x.0);
        a.min(b)
    }

    #[inline]
    fn emit(&mut self, now: u64, done: &mut Vec<Completion>) {
        while let Some(&(c, id)) = self.quick_done.front() {
            if c > now {
                break;
            }
            self.quick_done.pop_front();
            self.pending -= 1;
            done.push(Completion { id, cycle: now });
        }
        while let Some(&(c, id)) = self.read_done.front() {
            if c > now {
                break;
            }
            self.read_done.pop_front();
            self.pending -= 1;
            done.push(Completion { id, cycle: now });
        }
        self.next_done = self.next_completion();
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
}

impl DramEngine for NativeEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Native
    }

    fn config(&self) -> &DramConfig {
        &self.config
    }

    fn try_send(&mut self, req: Request) -> Result<bool, SimError> {
        self.config.check_addr(req.addr, "")?;
        let addr = req.addr & !(BURST_BYTES - 1);
        let now = self.cycle;
        if req.access.is_write() {
            if self.write_q.len() >= self.txn_cap {
                return Ok(false);
            }
            if self.pending_wr.insert(addr) {
                let mut txn = self.decode(addr);
                txn.write = true;
                self.write_q.push(txn);
                self.write_waiting[txn.queue as usize] += 1;
                self.write_targets |= 1u64 << txn.queue;
                self.unissued_writes += 1;
            }
            self.quick_done.push_back((now + 1, req.id));
            self.next_done = self.next_done.min(now + 1);
        } else {
            if self.read_q.len() >= self.txn_cap {
                return Ok(false);
            }
            if !self.pending_wr.is_empty() && self.pending_wr.contains(&addr) {
                self.quick_done.push_back((now + 1, req.id));
                self.next_done = self.next_done.min(now + 1);
            } else {
                let node = self.push_id(req.id);
                match self.pending_rd.entry(addr) {
                    std::collections::hash_map::Entry::Occupied(mut o) => {
                        let list = o.get_mut();
                        self.id_nodes[list.tail as usize].1 = node;
                        list.tail = node;
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(IdList {
                            head: node,
                            tail: node,
                        });
                        let txn = self.decode(addr);
                        self.read_q.push(txn);
                        self.read_waiting[txn.queue as usize] += 1;
                        self.read_targets |= 1u64 << txn.queue;
                    }
                }
            }
        }
        self.pending += 1;
        if self.wake > now {
            // The controller moves a transaction at the end of this cycle,
            // once every request sent in it has arrived.
            self.move_due = true;
        }
        Ok(true)
    }

    #[inline]
    fn tick(&mut self, done: &mut Vec<Completion>) {
        let now = self.cycle;
        if self.next_done <= now {
            self.emit(now, done);
        }
        if now >= self.wake {
            self.step(now);
        } else if self.move_due {
            self.move_only(now);
        }
        self.cycle = now + 1;
    }

    fn tick_until_done(&mut self, limit: u64, done: &mut Vec<Completion>) {
        while self.cycle < limit {
            let next = if self.move_due {
                self.cycle
            } else {
                self.wake.min(self.next_done)
            };
            if next > self.cycle {
                if next >= limit {
                    self.cycle = limit;
                    return;
                }
                self.cycle = next;
            }
            // One tick, as `tick` does; a due completion ends the wait.
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
            if emitted {
                return;
            }
        }
    }

    fn cycle(&self) -> u64 {
        self.cycle
    }

    fn pending(&self) -> usize {
        self.pending
    }

    fn draining(&mut self) -> bool {
        let left = self.unissued_writes > 0;
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
    fn queue_sizes_beyond_its_counters_are_refused() {
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        c.command_queue = 255;
        let e = NativeEngine::new(&c).err().expect("refused").to_string();
        assert!(e.contains("bank command queue 255"), "{e}");
        c.command_queue = 254;
        c.transaction_queue = 255;
        assert!(NativeEngine::new(&c).is_ok());
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
                    + d.bank) as u16;
                assert_eq!((t.row as u64, t.queue), (d.row, q), "{name} {addr:#x}");
            }
        }
    }
}
