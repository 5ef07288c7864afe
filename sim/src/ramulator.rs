//! Ramulator 1 (the modified version in the `ramulator_wrapper` crate) behind
//! [`DramEngine`].
//!
//! - Ramulator takes speed and organisation by name and uses its built-in
//!   timing table (see [`DramConfig::ramulator_timing_differences`]).
//! - Its only DDR4 address layout that spreads bank groups is RoBaRaCoCh;
//!   addresses are decoded with the preset's mapping and re-encoded into that
//!   layout, so both engines see the same (rank, bank group, bank, row, column)
//!   for every request.
//! - HBM (preset `HBM-1000`, its `HBM` standard): Ramulator builds a stack
//!   of eight channels and no other count; requests go to its channel 0,
//!   the channel the engine stands for, and the other seven stay idle.
//! - The wrapper returns read addresses only. Reads map back to ids through a
//!   FIFO per address. Ramulator's clock runs one cycle ahead of the
//!   engine's: a tick at cycle `c` advances it to `c + 1` and returns the
//!   reads done by then, so they complete at the next tick, `c + 1` (their
//!   latency is then Ramulator's own, and a command at Ramulator's cycle `t`
//!   is at the engine's `t`, as in the other engines). Writes are posted
//!   (they complete one cycle after acceptance, as in DRAMsim3); at most [`WRITE_QUEUE`] posted writes (the
//!   size of Ramulator's controller write queue) may be waiting for their WR
//!   command, and a run is not over until every write has been issued.
//! - Command counts, bank-open time and write issue come from Ramulator's
//!   per-rank command trace, read as it is written; row hits, misses and
//!   conflicts from its statistics file. Energy is computed from the counts
//!   with the shared IDD model ([`crate::energy`]).
//! - Ramulator keeps statistics in a per-thread list that its instances never
//!   leave, so one thread can host only one instance in its life.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use ramulator_wrapper::RamulatorWrapper;

use crate::config::{Coord, DramConfig};
use crate::energy::CommandCounts;
use crate::engine::{DramEngine, EngineKind, EngineReport, take_sent};
use crate::request::BURST_BYTES;
use crate::{Completion, Request, RequestId, SimError};

thread_local! {
    static USED_ON_THIS_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Entries of the write queue of the wrapper's Ramulator controller; it
/// drains writes when the read queue is empty or the write queue is 80% full.
pub const WRITE_QUEUE: u64 = 512;

/// How often (in cycles) the command traces are read while running.
const POLL_CYCLES: u64 = 16;

/// Where Ramulator writes rank `rank`'s command trace in `work_dir` (one
/// channel): the JEDEC checker reads it from there.
pub fn command_trace_path(work_dir: &std::path::Path, rank: u32) -> std::path::PathBuf {
    work_dir.join(format!("ramulator-chan-0-rank-{rank}.cmdtrace"))
}

/// Incremental reader of one rank's command trace.
struct RankTrace {
    path: PathBuf,
    reader: Option<BufReader<File>>,
    partial: String,
    line_no: u64,
    /// Open banks by the trace's bank number (a DDR4 trace numbers every
    /// bank of a rank; an HBM trace a bank within its group, so up to four
    /// open banks share a number; a PRE closes one of them, as Ramulator
    /// precharges open banks only).
    open: [u8; 32],
    open_banks: u32,
    open_since: u64,
    active_cycles: u64,
}

#[derive(Default)]
struct TraceCounts {
    activates: u64,
    precharges: u64,
    read_cmds: u64,
    write_cmds: u64,
    refreshes: u64,
}

impl RankTrace {
    fn new(path: PathBuf) -> Self {
        RankTrace {
            path,
            reader: None,
            partial: String::new(),
            line_no: 0,
            open: [0; 32],
            open_banks: 0,
            open_since: 0,
            active_cycles: 0,
        }
    }

    /// `open_banks` open banks from `clk` on.
    fn set_open(&mut self, open_banks: u32, clk: u64) {
        if self.open_banks == 0 && open_banks != 0 {
            self.open_since = clk;
        } else if self.open_banks != 0 && open_banks == 0 {
            self.active_cycles += clk.saturating_sub(self.open_since);
        }
        self.open_banks = open_banks;
    }

    /// An activation of `bank` at `clk`.
    fn activate(&mut self, bank: u32, clk: u64, n: &mut TraceCounts) {
        n.activates += 1;
        self.open[bank as usize] = self.open[bank as usize].saturating_add(1);
        self.set_open(self.open_banks + 1, clk);
    }

    /// A precharge of `bank` at `clk`.
    fn precharge(&mut self, bank: u32, clk: u64, n: &mut TraceCounts) {
        n.precharges += 1;
        if self.open[bank as usize] > 0 {
            self.open[bank as usize] -= 1;
            self.set_open(self.open_banks - 1, clk);
        }
    }

    /// Every bank closed at `clk` (PREA, REF).
    fn close_all(&mut self, clk: u64) {
        self.open = [0; 32];
        self.set_open(0, clk);
    }

    /// Reads every complete line written so far.
    fn poll(&mut self, n: &mut TraceCounts) -> Result<(), SimError> {
        if self.reader.is_none() {
            match File::open(&self.path) {
                Ok(f) => self.reader = Some(BufReader::new(f)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(SimError::io(&self.path, e)),
            }
        }
        loop {
            let reader = self.reader.as_mut().expect("opened above");
            let got = reader
                .read_line(&mut self.partial)
                .map_err(|e| SimError::io(&self.path, e))?;
            if got == 0 || !self.partial.ends_with('\n') {
                return Ok(());
            }
            self.line_no += 1;
            let line = std::mem::take(&mut self.partial);
            self.apply(line.trim_end(), n)?;
        }
    }

    fn apply(&mut self, line: &str, n: &mut TraceCounts) -> Result<(), SimError> {
        let bad = || SimError::parse(&self.path, self.line_no, format!("unexpected `{line}`"));
        let mut it = line.split(',');
        let clk: u64 = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let cmd = it.next().ok_or_else(bad)?;
        let bank = || -> Result<u32, SimError> {
            let b: u32 = line
                .split(',')
                .nth(2)
                .and_then(|s| s.parse().ok())
                .ok_or_else(bad)?;
            if b >= 32 {
                return Err(bad());
            }
            Ok(b)
        };
        match cmd {
            "ACT" => self.activate(bank()?, clk, n),
            "PRE" => self.precharge(bank()?, clk, n),
            "PREA" => {
                n.precharges += 1;
                self.close_all(clk);
            }
            "RD" => n.read_cmds += 1,
            "WR" => n.write_cmds += 1,
            "RDA" | "WRA" => {
                if cmd == "RDA" {
                    n.read_cmds += 1;
                } else {
                    n.write_cmds += 1;
                }
                self.precharge(bank()?, clk, n);
            }
            "REF" => {
                n.refreshes += 1;
                self.close_all(clk);
            }
            // Power-down and self-refresh commands are not issued by the
            // open-row controller; anything else is a format change.
            _ => return Err(bad()),
        }
        Ok(())
    }
}

pub struct RamulatorEngine {
    sim: Option<RamulatorWrapper>,
    /// The link through which Ramulator writes its command traces when the
    /// work directory's path cannot go into its configuration (removed
    /// after `sim`, which is dropped first).
    _prefix_link: Option<PrefixLink>,
    config: DramConfig,
    stats_path: PathBuf,
    traces: Vec<RankTrace>,
    counts: TraceCounts,
    reads: HashMap<u64, VecDeque<RequestId>>,
    /// Writes accepted at this cycle, and at the one before (complete at
    /// the next tick).
    posted: Vec<RequestId>,
    posted_due: Vec<RequestId>,
    /// Reads Ramulator returned at the last tick (complete at this one).
    returned: Vec<RequestId>,
    pending_reads: usize,
    writes_sent: u64,
    cycle: u64,
    /// Not Send: the instance is tied to its thread's statistics list.
    _thread_bound: PhantomData<*const ()>,
}

/// Whether `s` can be a value in Ramulator's configuration: it splits each
/// line at spaces, tabs and `=`, and the file at line ends.
fn config_safe(s: &str) -> bool {
    !s.contains([' ', '\t', '=', '\n', '\r'])
}

/// A symbolic link to a work directory, in a directory whose path Ramulator's
/// configuration can hold; removed when dropped.
struct PrefixLink {
    path: PathBuf,
    /// Removed by the signal handler if the process ends while it lives.
    _registered: nmpsim_traces::cleanup::Registered,
}

impl PrefixLink {
    fn to(work_dir: &Path) -> Result<Self, SimError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let target = std::fs::canonicalize(work_dir).map_err(|e| SimError::io(work_dir, e))?;
        let name = format!(
            "nmpsim-ramulator-link-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let tmp = std::env::temp_dir();
        let dirs = [tmp.as_path(), Path::new("/tmp")];
        let Some(parent) = dirs
            .iter()
            .find(|d| d.to_str().is_some_and(config_safe) && d.is_dir())
        else {
            return Err(SimError::Engine {
                engine: "ramulator",
                what: format!(
                    "its configuration cannot name {} (Ramulator splits at spaces, tabs and `=`), \
                     and no temporary directory without them is there to link it from; \
                     use a work directory (--out) or TMPDIR without them",
                    work_dir.display()
                ),
            });
        };
        let link = parent.join(name);
        let _ = std::fs::remove_file(&link);
        let (made, registered) =
            nmpsim_traces::cleanup::make(&link, nmpsim_traces::cleanup::Leftover::File, || {
                std::os::unix::fs::symlink(&target, &link)
            });
        made.map_err(|e| SimError::io(&link, e))?;
        Ok(PrefixLink {
            path: link,
            _registered: registered,
        })
    }
}

impl Drop for PrefixLink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl RamulatorEngine {
    pub fn new(config: &DramConfig, work_dir: &Path) -> Result<Self, SimError> {
        if USED_ON_THIS_THREAD.with(|u| u.replace(true)) {
            return Err(SimError::Engine {
                engine: "ramulator",
                what: "a thread can host only one Ramulator instance in its life (Ramulator keeps \
                       statistics in a per-thread list); create each on a fresh thread, e.g. with \
                       nmpsim_sim::on_fresh_thread"
                    .into(),
            });
        }
        let utf8 = |p: &Path| -> Result<String, SimError> {
            p.to_str()
                .map(str::to_string)
                .ok_or_else(|| SimError::Engine {
                    engine: "ramulator",
                    what: format!("path {} is not valid UTF-8", p.display()),
                })
        };
        // Ramulator's configuration splits lines at spaces, tabs and `=`: a
        // work directory whose path holds one is reached through a link
        // whose path does not.
        let dir = utf8(work_dir)?;
        let (prefix_dir, link) = if config_safe(&dir) {
            (dir, None)
        } else {
            let link = PrefixLink::to(work_dir)?;
            (utf8(&link.path)?, Some(link))
        };
        let prefix = format!("{prefix_dir}/ramulator-");
        let cfg_path = work_dir.join("ramulator.cfg");
        // (The standard's own refusal, HBM2's, comes first.)
        let cfg_text = config.ramulator_cfg(&prefix)?;
        if config.burst_bytes() != BURST_BYTES {
            return Err(SimError::Engine {
                engine: "ramulator",
                what: format!(
                    "{} moves {} B per burst; Ramulator 1's requests are {BURST_BYTES} B (a DDR4 channel of 64 bits with BL8, an HBM channel of 128 bits with BL4); run it on dramsim3 or native",
                    config.name,
                    config.burst_bytes()
                ),
            });
        }
        std::fs::write(&cfg_path, cfg_text).map_err(|e| SimError::io(&cfg_path, e))?;
        let stats_path = work_dir.join("ramulator.stats");
        let traces: Vec<RankTrace> = (0..config.ranks)
            .map(|r| RankTrace::new(command_trace_path(work_dir, r)))
            .collect();
        let sim = RamulatorWrapper::new(&utf8(&cfg_path)?, &utf8(&stats_path)?);
        // Ramulator opens every rank's trace as it starts: one missing now
        // would read as a rank that never issued a command.
        for t in &traces {
            if !t.path.exists() {
                return Err(SimError::Engine {
                    engine: "ramulator",
                    what: format!(
                        "Ramulator did not create its command trace {}",
                        t.path.display()
                    ),
                });
            }
        }
        Ok(RamulatorEngine {
            sim: Some(sim),
            _prefix_link: link,
            config: config.clone(),
            stats_path,
            traces,
            counts: TraceCounts::default(),
            reads: HashMap::new(),
            posted: Vec::new(),
            posted_due: Vec::new(),
            returned: Vec::new(),
            pending_reads: 0,
            writes_sent: 0,
            cycle: 0,
            _thread_bound: PhantomData,
        })
    }

    /// Re-encodes an address into Ramulator's RoBaRaCoCh layout, in its
    /// channel 0 (of [`crate::standard::Standard::ramulator_channels`]).
    fn native_addr(&self, addr: u64) -> u64 {
        let c: Coord = self.config.decode(addr);
        let o = &self.config.org;
        let col_bits = o.bursts_per_row().trailing_zeros();
        let ra_bits = self.config.ranks.trailing_zeros();
        let bg_bits = o.bankgroups.trailing_zeros();
        let ba_bits = o.banks_per_group.trailing_zeros();
        let mut a = c.row;
        a = (a << ba_bits) | c.bank;
        a = (a << bg_bits) | c.bankgroup;
        a = (a << ra_bits) | c.rank;
        a = (a << col_bits) | c.column;
        let ch_bits = self.config.standard().ramulator_channels.trailing_zeros();
        (a << ch_bits) * BURST_BYTES
    }

    fn poll_traces(&mut self) -> Result<(), SimError> {
        for t in &mut self.traces {
            t.poll(&mut self.counts)?;
        }
        Ok(())
    }

    fn unissued_writes(&self) -> u64 {
        self.writes_sent.saturating_sub(self.counts.write_cmds)
    }

    fn parse_stats(&self) -> Result<(u64, u64, u64), SimError> {
        let text = std::fs::read_to_string(&self.stats_path)
            .map_err(|e| SimError::io(&self.stats_path, e))?;
        let find = |name: &str| -> Result<u64, SimError> {
            text.lines()
                .find_map(|l| {
                    let mut it = l.split_whitespace();
                    (it.next() == Some(name)).then(|| it.next()?.parse::<f64>().ok())?
                })
                .map(|v| v.round() as u64)
                .ok_or_else(|| SimError::Engine {
                    engine: "ramulator",
                    what: format!("{}: missing statistic `{name}`", self.stats_path.display()),
                })
        };
        Ok((
            find("ramulator.row_hits_channel_0_core")?,
            find("ramulator.row_misses_channel_0_core")?,
            find("ramulator.row_conflicts_channel_0_core")?,
        ))
    }
}

impl DramEngine for RamulatorEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Ramulator
    }

    fn config(&self) -> &DramConfig {
        &self.config
    }

    fn try_send(&mut self, req: Request) -> Result<bool, SimError> {
        self.config.check_addr(req.addr, "")?;
        let native = self.native_addr(req.addr);
        let w = req.access.is_write();
        if w && self.unissued_writes() >= WRITE_QUEUE {
            self.poll_traces()?;
            if self.unissued_writes() >= WRITE_QUEUE {
                return Ok(false);
            }
        }
        let sim = self.sim.as_mut().expect("engine already finished");
        if !sim.available(native, w) {
            return Ok(false);
        }
        sim.send(native, w);
        if w {
            self.writes_sent += 1;
            self.posted.push(req.id);
        } else {
            self.reads.entry(native).or_default().push_back(req.id);
            self.pending_reads += 1;
        }
        Ok(true)
    }

    fn tick(&mut self, done: &mut Vec<Completion>) {
        let cycle = self.cycle;
        let n = self.returned.len();
        done.extend(self.returned.drain(..).map(|id| Completion { id, cycle }));
        self.pending_reads -= n;
        done.extend(self.posted_due.drain(..).map(|id| Completion { id, cycle }));
        std::mem::swap(&mut self.posted, &mut self.posted_due);
        let sim = self.sim.as_mut().expect("engine already finished");
        sim.cycle();
        while sim.ret_available() {
            let addr = sim.pop();
            let id = take_sent(
                &mut self.reads,
                addr,
                (
                    "Ramulator returned a read that was never sent",
                    "Ramulator returned more reads than were sent",
                ),
            );
            self.returned.push(id);
        }
        self.cycle += 1;
        if self.cycle % POLL_CYCLES == 0 {
            // A trace that cannot be read now is reported by `finish`.
            let _ = self.poll_traces();
        }
    }

    fn cycle(&self) -> u64 {
        self.cycle
    }

    fn pending(&self) -> usize {
        self.pending_reads + self.posted.len() + self.posted_due.len()
    }

    fn draining(&mut self) -> bool {
        let _ = self.poll_traces();
        self.unissued_writes() > 0
    }

    fn finish(&mut self) -> Result<EngineReport, SimError> {
        // Dropping the wrapper writes the statistics file and closes the traces.
        drop(
            self.sim
                .take()
                .ok_or_else(|| SimError::finished_twice("ramulator"))?,
        );
        self.poll_traces()?;
        let end = self.cycle;
        let mut active = 0;
        for t in &mut self.traces {
            if !t.partial.is_empty() {
                return Err(SimError::parse(
                    &t.path,
                    t.line_no + 1,
                    format!("truncated line `{}`", t.partial),
                ));
            }
            t.set_open(0, end.max(t.open_since));
            active += t.active_cycles;
        }
        let (hits, misses, conflicts) = self.parse_stats()?;
        let c = &self.counts;
        let counts = CommandCounts {
            activates: c.activates,
            precharges: c.precharges,
            read_cmds: c.read_cmds,
            write_cmds: c.write_cmds,
            refreshes: c.refreshes,
            row_hits: hits,
            row_misses: misses + conflicts,
            row_conflicts: Some(conflicts),
            active_rank_cycles: active,
            precharged_rank_cycles: (end * self.config.ranks as u64).saturating_sub(active),
            self_refresh_rank_cycles: 0,
        };
        Ok(EngineReport {
            counts,
            engine_energy: None,
            read_latency_cycles: None,
        })
    }
}
