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
//! The engine is event-driven: every bank queue keeps a lower bound on the
//! cycle at which it could issue its next command, and the controller only runs
//! on cycles where a queue, a refresh, a transaction move or a new request can
//! change something. Other cycles cost one comparison in [`DramEngine::tick`],
//! and [`DramEngine::tick_until_done`] jumps over them. What a queue's entries
//! offer against its open row is cached (`Head`) until the entries or the row
//! change, so evaluating a queue reads at most three candidate times rather
//! than walking its entries. Queues, maps and lists are allocated up front (or
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
/// Gate group of the empty queues.
const INACTIVE: usize = 16;

#[derive(Clone, Copy, Debug)]
struct Bank {
    open_row: u32,
    /// Column commands since the activation.
    hits: u32,
    next_act: u64,
    next_pre: u64,
    next_rd: u64,
    next_wr: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Group {
    next_act: u64,
    next_rd: u64,
    next_wr: u64,
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

/// The rank-level constraint shared by all candidate commands of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    None,
    Act,
    Rd,
    Wr,
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
    /// The cycle at which `try_send` last did the controller's transaction
    /// move itself (see there).
    moved_at: u64,
    unissued_writes: usize,

    cmdq: Vec<Vec<Txn>>,
    /// Per queue: its [`Head`] analysis, valid unless the queue's bit is set
    /// in `head_stale`.
    head: Vec<Head>,
    head_stale: u64,
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
    /// Per queue: no command of it can issue before this cycle, from its bank
    /// and bank group; the rank's share is `gate`.
    ready_lb: Vec<u64>,
    /// Per queue: which rank-level constraint every one of its candidate
    /// commands waits for as well (so a command elsewhere in the rank that
    /// delays them all needs no re-evaluation of the queue), as an index
    /// `rank * 4 + gate` into `gates`.
    gate: Vec<u8>,
    /// The rank-level part of each gate, kept current: `rank * 4 + gate`
    /// (index [`INACTIVE`]: empty queues).
    gates: [u64; 17],
    /// Queues by gate index, and the least `ready_lb` of each group: the
    /// next wake-up is the least of (group minimum, gate) over the groups.
    group_mask: [u64; 17],
    group_min: [u64; 17],
    /// The rank being refreshed, if any.
    ref_rank: usize,
    queue_idx: usize,

    banks: Vec<Bank>,
    groups: Vec<Group>,
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
            next_act: 0,
            next_pre: 0,
            next_rd: 0,
            next_wr: 0,
        };
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
            moved_at: u64::MAX,
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
            head_stale: u64::MAX,
            queued_writes: vec![0; queues],
            nonempty: 0,
            full: 0,
            read_waiting: vec![0; queues],
            write_waiting: vec![0; queues],
            read_targets: 0,
            write_targets: 0,
            ready_lb: vec![0; queues],
            gate: vec![INACTIVE as u8; queues],
            gates: [0; 17],
            group_mask: {
                let mut m = [0u64; 17];
                m[INACTIVE] = if queues == 64 {
                    u64::MAX
                } else {
                    (1u64 << queues) - 1
                };
                m
            },
            group_min: [u64::MAX; 17],
            ref_rank: usize::MAX,
            queue_idx: 0,
            banks: vec![bank; queues],
            groups: vec![Group::default(); config.ranks as usize * config.org.bankgroups as usize],
            ranks: vec![Rank::default(); config.ranks as usize],
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

    /// The rank-level part of the earliest issue time of `gate` commands in
    /// rank `r`.
    #[inline]
    fn gate_time(&self, r: usize, gate: Gate) -> u64 {
        let rk = &self.ranks[r];
        match gate {
            Gate::None => 0,
            Gate::Act => rk.next_act.max(rk.faw[rk.faw_next]),
            Gate::Rd => rk.next_rd.max(self.others(r).0),
            Gate::Wr => rk.next_wr.max(self.others(r).1),
        }
    }

    /// Recomputes the rank-level gate times after a command.
    fn update_gates(&mut self) {
        for r in 0..self.ranks.len() {
            self.gates[r * 4 + 1] = self.gate_time(r, Gate::Act);
            self.gates[r * 4 + 2] = self.gate_time(r, Gate::Rd);
            self.gates[r * 4 + 3] = self.gate_time(r, Gate::Wr);
        }
    }

    /// Sets queue `q`'s lower bound and gate, keeping the groups' minima.
    #[inline]
    fn set_lb(&mut self, q: usize, lb: u64, gate: Gate) {
        let bit = 1u64 << q;
        let gi = if self.nonempty & bit == 0 {
            INACTIVE
        } else {
            self.rank_of(q) * 4
                + match gate {
                    Gate::None => 0,
                    Gate::Act => 1,
                    Gate::Rd => 2,
                    Gate::Wr => 3,
                }
        };
        let (old_gi, old) = (self.gate[q] as usize, self.ready_lb[q]);
        self.ready_lb[q] = lb;
        self.gate[q] = gi as u8;
        if old_gi != gi {
            self.group_mask[old_gi] &= !bit;
            self.group_mask[gi] |= bit;
            if old <= self.group_min[old_gi] {
                self.recompute_group_min(old_gi);
            }
            self.group_min[gi] = self.group_min[gi].min(lb);
        } else if lb < self.group_min[gi] {
            self.group_min[gi] = lb;
        } else if lb > old && old <= self.group_min[gi] {
            self.recompute_group_min(gi);
        }
    }

    fn recompute_group_min(&mut self, gi: usize) {
        if gi == INACTIVE {
            // Never read: empty queues wait for nothing.
            return;
        }
        let mut m = self.group_mask[gi];
        let mut v = u64::MAX;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            v = v.min(self.ready_lb[q]);
        }
        self.group_min[gi] = v;
    }

    /// A lower bound on the cycle at which queue `q` can issue.
    #[inline]
    fn queue_lb(&self, q: usize) -> u64 {
        self.ready_lb[q].max(self.gates[self.gate[q] as usize])
    }

    /// Re-evaluates queue `q` at `now`: its first ready command, or else
    /// records its lower bound and gate.
    #[inline]
    fn evaluate(&mut self, q: usize, now: u64) -> Option<(usize, Kind)> {
        match self.first_ready(q, now) {
            Ok(pick) => Some(pick),
            Err((t, gate)) => {
                self.set_lb(q, t, gate);
                None
            }
        }
    }

    #[inline]
    fn act_ready(&self, q: usize) -> u64 {
        let r = &self.ranks[self.rank_of(q)];
        self.banks[q]
            .next_act
            .max(self.groups[self.group_of(q)].next_act)
            .max(r.next_act)
            .max(r.faw[r.faw_next])
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

    /// The first command of queue `q` that can issue at `now`, in queue order
    /// (entry index and kind), or else the earliest cycle at which one could
    /// and the rank-level constraint all its candidates share.
    #[inline]
    fn first_ready(&mut self, q: usize, now: u64) -> Result<(usize, Kind), (u64, Gate)> {
        let bank = &self.banks[q];
        if bank.open_row == CLOSED {
            let t = self.act_ready(q);
            return if t <= now {
                Ok((0, Kind::Act))
            } else {
                Err((t, Gate::Act))
            };
        }
        let bit = 1u64 << q;
        if self.head_stale & bit != 0 {
            self.head[q] = self.analyse_head(q);
            self.head_stale &= !bit;
        }
        let h = self.head[q];
        let bank = &self.banks[q];
        if h.pre && bank.next_pre <= now {
            return Ok((0, Kind::Pre));
        }
        let r = self.rank_of(q);
        let g = &self.groups[self.group_of(q)];
        let rk = &self.ranks[r];
        let mut best = if h.pre { bank.next_pre } else { u64::MAX };
        let mut pick = NONE_IDX;
        let mut kind = Kind::Rd;
        if h.rd != NONE_IDX {
            let o_rd = self.others(r).0;
            let rd_t = bank.next_rd.max(g.next_rd).max(rk.next_rd).max(o_rd);
            if rd_t <= now {
                pick = h.rd;
            }
            best = best.min(rd_t);
        }
        if h.wr != NONE_IDX {
            let o_wr = self.others(r).1;
            let wr_t = bank.next_wr.max(g.next_wr).max(rk.next_wr).max(o_wr);
            if wr_t <= now && h.wr < pick {
                pick = h.wr;
                kind = Kind::Wr;
            }
            best = best.min(wr_t);
        }
        if pick != NONE_IDX {
            return Ok((pick as usize, kind));
        }
        let gate = match (h.rd != NONE_IDX, h.wr != NONE_IDX, h.pre) {
            (true, false, false) => Gate::Rd,
            (false, true, false) => Gate::Wr,
            _ => Gate::None,
        };
        Err((best, gate))
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
        self.head_stale |= 1u64 << q;
        let b = &mut self.banks[q];
        debug_assert_eq!(b.open_row, CLOSED);
        b.open_row = row;
        b.hits = 0;
        b.next_act = b.next_act.max(now + t.act_to_act);
        b.next_rd = b.next_rd.max(now + t.act_to_rw);
        b.next_wr = b.next_wr.max(now + t.act_to_rw);
        b.next_pre = b.next_pre.max(now + t.act_to_pre);
        let grp = &mut self.groups[g];
        grp.next_act = grp.next_act.max(now + t.act_to_act_l);
        let rk = &mut self.ranks[r];
        rk.next_act = rk.next_act.max(now + t.act_to_act_s);
        rk.faw[rk.faw_next] = now + t.faw;
        rk.faw_next = (rk.faw_next + 1) & 3;
        if rk.open_banks == 0 {
            rk.active_since = now;
        }
        rk.open_banks += 1;
        self.counts.activates += 1;
        self.update_gates();
        self.log_cmd(now, q, Command::Act);
    }

    fn precharge(&mut self, now: u64, q: usize) {
        let t = &self.t;
        let r = self.rank_of(q);
        self.head_stale |= 1u64 << q;
        let b = &mut self.banks[q];
        debug_assert_ne!(b.open_row, CLOSED);
        b.open_row = CLOSED;
        b.hits = 0;
        b.next_act = b.next_act.max(now + t.pre_to_act);
        let rk = &mut self.ranks[r];
        rk.next_ref = rk.next_ref.max(now + t.pre_to_act);
        rk.open_banks -= 1;
        if rk.open_banks == 0 {
            rk.active_cycles += now - rk.active_since;
        }
        self.counts.precharges += 1;
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
        let grp = &mut self.groups[g];
        let rk = &mut self.ranks[r];
        if write {
            b.next_pre = b.next_pre.max(now + t.wr_to_pre);
            grp.next_rd = grp.next_rd.max(now + t.wr_to_rd_l);
            grp.next_wr = grp.next_wr.max(now + t.wr_to_wr_l);
            rk.next_rd = rk.next_rd.max(now + t.wr_to_rd_s);
            rk.next_wr = rk.next_wr.max(now + t.wr_to_wr_s);
            rk.others_rd = rk.others_rd.max(now + t.wr_to_rd_o);
            rk.others_wr = rk.others_wr.max(now + t.wr_to_wr_o);
            self.counts.write_cmds += 1;
            self.log_cmd(now, q, Command::Wr);
        } else {
            b.next_pre = b.next_pre.max(now + t.rd_to_pre);
            grp.next_rd = grp.next_rd.max(now + t.rd_to_rd_l);
            grp.next_wr = grp.next_wr.max(now + t.rd_to_wr);
            rk.next_rd = rk.next_rd.max(now + t.rd_to_rd_s);
            rk.next_wr = rk.next_wr.max(now + t.rd_to_wr);
            rk.others_rd = rk.others_rd.max(now + t.rd_to_rd_o);
            rk.others_wr = rk.others_wr.max(now + t.rd_to_wr_o);
            self.counts.read_cmds += 1;
            self.log_cmd(now, q, Command::Rd);
        }
        self.update_gates();
    }

    fn refresh(&mut self, now: u64, r: usize) {
        let t = &self.t;
        let rk = &mut self.ranks[r];
        debug_assert_eq!(rk.open_banks, 0);
        rk.next_act = rk.next_act.max(now + t.ref_to_act);
        rk.next_ref = now + t.ref_to_act;
        self.counts.refreshes += 1;
        self.update_gates();
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
                self.head_stale |= 1u64 << q;
                self.queued_writes[q] -= e.write as u8;
                self.full &= !(1u64 << q);
                if self.cmdq[q].is_empty() {
                    self.nonempty &= !(1u64 << q);
                }
                self.column(now, q, e.write);
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
        if self.nonempty & (1u64 << q) != 0 {
            if self.evaluate(q, now).is_some() {
                self.set_lb(q, now + 1, Gate::None);
            }
        } else {
            self.set_lb(q, u64::MAX, Gate::None);
        }
    }

    /// For the rank due for refresh: a PRE of its first open bank that may
    /// close, or the REF itself, if either can issue at `now`; else the
    /// earliest cycle at which one could.
    fn refresh_step(&mut self, now: u64, r: usize) -> Result<(), u64> {
        let base = r * self.banks_per_rank;
        let mut earliest = u64::MAX;
        for q in base..base + self.banks_per_rank {
            let b = &self.banks[q];
            if b.open_row != CLOSED {
                if b.next_pre <= now {
                    self.precharge(now, q);
                    self.set_lb(q, 0, Gate::None);
                    return Ok(());
                }
                earliest = earliest.min(b.next_pre);
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
        for q in base..base + self.banks_per_rank {
            self.set_lb(q, 0, Gate::None);
        }
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
                self.head_stale |= 1u64 << q;
                self.queued_writes[q] += txn.write as u8;
                self.nonempty |= 1u64 << q;
                if self.cmdq[q].len() == self.cmd_cap {
                    self.full |= 1u64 << q;
                }
                return Some(q);
            }
        }
        if self.write_draining < 0 {
            self.write_draining = 0;
        }
        None
    }

    /// Whether the transaction side may change state at the next cycle.
    fn transaction_work_possible(&self) -> bool {
        if self.write_draining < 0 {
            return true;
        }
        let n = self.write_q.len();
        let writes = self.write_draining > 0
            || n >= self.txn_cap
            || (n > WRITE_DRAIN_LOW && self.nonempty == 0)
            || (self.flush && n > 0);
        let targets = if writes {
            self.write_targets
        } else {
            self.read_targets
        };
        targets & !self.full != 0
    }

    /// One controller cycle at `now` (DRAMsim3's `Controller::ClockTick`),
    /// then sets `wake` to the next cycle at which anything can happen.
    fn step(&mut self, now: u64) {
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
        // ready command issues it. Queues whose lower bound is in the future
        // are passed over without a look.
        if !issued {
            let n = self.queues;
            // Without branches: which groups pass is as random as the
            // addresses. (An empty group's minimum is `u64::MAX`.)
            let mut cand = 0u64;
            for gi in 0..4 * self.ranks.len() {
                let ok =
                    (gi / 4 != self.ref_rank) & (self.group_min[gi].max(self.gates[gi]) <= now);
                cand |= self.group_mask[gi] & 0u64.wrapping_sub(ok as u64);
            }
            let start = if self.queue_idx + 1 == n {
                0
            } else {
                self.queue_idx + 1
            };
            let high = cand & (u64::MAX << start);
            let low = cand & !(u64::MAX << start);
            'scan: for mut m in [high, low] {
                while m != 0 {
                    let q = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if self.queue_lb(q) > now {
                        continue;
                    }
                    if let Some((i, kind)) = self.evaluate(q, now) {
                        self.issue_from_queue(now, q, i, kind);
                        self.queue_idx = q;
                        issued = true;
                        break 'scan;
                    }
                }
            }
        }
        if let Some(q) = self.schedule_transaction() {
            if self.evaluate(q, now).is_some() {
                self.set_lb(q, now, Gate::None);
            }
        }
        // The next wake-up: the earliest lower bound, with the rank-level
        // constraints as they are after this cycle's command.
        if self.ref_mask != 0 && self.refresh_q.is_empty() {
            self.ref_mask = 0;
            self.ref_rank = usize::MAX;
        }
        for gi in 0..4 * self.ranks.len() {
            let t = self.group_min[gi].max(self.gates[gi]);
            wake = wake.min(if gi / 4 != self.ref_rank { t } else { u64::MAX });
        }
        if issued && !self.refresh_q.is_empty() {
            // The refreshing rank may go on precharging next cycle.
            wake = now + 1;
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
            // Nothing else can happen at this cycle: no command is ready and
            // no refresh is due. What the controller would still do is move a
            // transaction into its bank queue; do it here, once per cycle.
            if self.moved_at != now {
                self.moved_at = now;
                let mut wake = self.wake;
                if let Some(q) = self.schedule_transaction() {
                    if self.evaluate(q, now).is_some() {
                        self.set_lb(q, now + 1, Gate::None);
                    }
                    wake = wake.min(self.queue_lb(q));
                }
                if self.transaction_work_possible() {
                    wake = now + 1;
                }
                self.wake = wake.max(now + 1);
            } else if self.transaction_work_possible() {
                self.wake = self.wake.min(now + 1);
            }
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
        }
        self.cycle = now + 1;
    }

    fn tick_until_done(&mut self, limit: u64, done: &mut Vec<Completion>) {
        while self.cycle < limit {
            let next = self.wake.min(self.next_done);
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
