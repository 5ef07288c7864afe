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
//!
//! # Files
//!
//! This file holds [`NativeEngine`], its public API and its [`DramEngine`]
//! implementation; the rest is one part per file: `lanes.rs` (the lane
//! vectors of per-queue times and their SIMD operations), `times.rs`
//! (relative times, re-basing, the gates, the wake-up), `bank.rs` (bank and
//! rank state, ACTIVATE, PRECHARGE, READ, WRITE), `candidates.rs` (each bank
//! queue's candidate commands and the pick), `refresh.rs`, `scheduler.rs`
//! (transaction moves, the controller's cycle, the clock), `txn_queue.rs`
//! (read queue and write buffer), `cmd_queue.rs` (bank command queues),
//! `done_ring.rs` (completions), `mapping.rs` (address mapping), `delays.rs`,
//! `command_log.rs`, and the unit tests in `tests.rs`.

use std::collections::VecDeque;

use crate::config::DramConfig;
use crate::energy::CommandCounts;
use crate::engine::{DramEngine, EngineKind, EngineReport};
use crate::jedec::CommandRecord;
pub use crate::timing::TimingTable;
use crate::{Completion, Request, RequestId, SimError};

mod bank;
mod candidates;
mod cmd_queue;
mod command_log;
mod delays;
mod done_ring;
mod lanes;
mod mapping;
mod refresh;
mod scheduler;
mod times;
mod txn_queue;

use bank::{Bank, Rank};
use candidates::Head;
use cmd_queue::CmdQueues;
use command_log::CommandSink;
use delays::Delays;
use done_ring::DoneRing;
use lanes::{Lanes, V8};
use mapping::Mapping;
use scheduler::Direct;
use txn_queue::TxnQueue;

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

/// The native DDR4 engine; see the [module documentation](self).
pub struct NativeEngine {
    config: DramConfig,
    capacity: u64,
    /// Clears a byte address's offset within its burst.
    burst_mask: u64,
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
    /// A row and a column command may issue in one cycle
    /// ([`crate::standard::Standard::dual_command`]).
    dual_command: bool,
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
            burst_mask: !(config.burst_bytes() - 1),
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
            dual_command: config.standard().dual_command,
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
        let addr = req.addr & self.burst_mask;
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
            return Err(SimError::finished_twice("native"));
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
mod tests;
