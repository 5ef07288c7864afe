//! Drives an engine with a request source and gathers [`DramStats`].

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::DramConfig;
use crate::energy::{CommandCounts, Energy, EventEnergy};
use crate::engine::{EngineKind, create_engine, on_fresh_thread};
use crate::request::BURST_BYTES;
use crate::{Access, Completion, MemOp, Request, RequestId, SimError};

/// How a run is driven.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Most requests in flight at once (the front end's outstanding-request
    /// limit, e.g. an NMP core's load queue). Both engines see the same limit.
    pub window: usize,
    /// Most requests offered per DRAM cycle.
    pub issue_per_cycle: usize,
    /// Where engine files go (configs, statistics, command traces). `None`: a
    /// temporary directory, removed afterwards.
    pub work_dir: Option<PathBuf>,
    /// Keep Ramulator's command traces (they can be large).
    pub keep_command_traces: bool,
    /// Give up if no request completes for this many cycles.
    pub stall_limit_cycles: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            window: 32,
            issue_per_cycle: 1,
            work_dir: None,
            keep_command_traces: false,
            stall_limit_cycles: 1_000_000,
        }
    }
}

/// Everything measured in one run. Names carry their units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DramStats {
    pub engine: EngineKind,
    pub preset: String,
    pub ranks: u32,
    pub tck_ns: f64,
    pub cycles: u64,
    pub sim_time_ns: f64,
    /// Read and write bursts the engine served: a source's 64 B request is
    /// one burst, or two on an HBM2 pseudo-channel (its 32 B bursts), and
    /// the read latencies are those of bursts.
    pub reads: u64,
    pub writes: u64,
    pub bytes: u64,
    /// The requests' bytes over the simulated time: what the front end got.
    /// Reads merged into a queued read of their address, and reads served
    /// from the write buffer, count here without using the data bus, so this
    /// can exceed the peak.
    pub bandwidth_gbps: f64,
    /// The data bus's bytes over the simulated time: a burst per READ and
    /// WRITE command issued.
    #[serde(default)]
    pub bus_bandwidth_gbps: f64,
    pub peak_bandwidth_gbps: f64,
    /// bus bandwidth / peak: the share of the time the data bus carried data.
    pub bus_utilisation: f64,
    /// Read latency statistics; `None` (null in JSON, empty in CSV) for a
    /// run with no reads.
    pub read_latency_mean_ns: Option<f64>,
    pub read_latency_p50_ns: Option<f64>,
    pub read_latency_p99_ns: Option<f64>,
    pub read_latency_max_ns: Option<f64>,
    pub row_hits: u64,
    pub row_misses: u64,
    pub row_conflicts: Option<u64>,
    /// Row hits over column commands; `None` for a run that issued none.
    pub row_hit_rate: Option<f64>,
    pub activations: u64,
    pub precharges: u64,
    pub read_cmds: u64,
    pub write_cmds: u64,
    pub refreshes: u64,
    pub active_rank_cycles: u64,
    pub precharged_rank_cycles: u64,
    /// Energy from the command counts with the shared IDD model.
    pub energy: Energy,
    /// The engine's own energy figures (DRAMsim3 only), converted to pJ.
    pub engine_energy: Option<Energy>,
    pub energy_per_bit_pj: f64,
    pub average_power_mw: f64,
    /// Host time of the run.
    pub wall_s: f64,
    pub sim_requests_per_s: f64,
    pub sim_cycles_per_s: f64,
}

/// Exact read-latency distribution in cycles: a count per latency. The
/// number of samples, their sum and the largest are derived from the counts
/// when asked for, so a sample costs one increment.
struct LatencyHist {
    counts: Vec<u64>,
}

impl Default for LatencyHist {
    fn default() -> Self {
        // Room for the usual latencies (a few hundred cycles) from the start.
        LatencyHist {
            counts: vec![0; 1024],
        }
    }
}

impl LatencyHist {
    #[inline]
    fn add(&mut self, c: u64) {
        self.add_n(c, 1);
    }

    /// `n` samples of latency `c`.
    #[inline]
    fn add_n(&mut self, c: u64, n: u64) {
        let i = c as usize;
        if i >= self.counts.len() {
            self.grow(i);
        }
        self.counts[i] += n;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        self.counts.resize((i + 1).next_power_of_two(), 0);
    }

    /// The distribution of `(latency, reads)` pairs.
    fn from_counts(pairs: &[(u64, u64)]) -> Self {
        let mut h = LatencyHist::default();
        for &(c, n) in pairs {
            h.add_n(c, n);
        }
        h
    }

    fn n(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn sum(&self) -> u128 {
        self.counts
            .iter()
            .enumerate()
            .map(|(i, &c)| i as u128 * c as u128)
            .sum()
    }

    fn max(&self) -> u64 {
        self.counts.iter().rposition(|&c| c != 0).unwrap_or(0) as u64
    }

    fn mean(&self) -> f64 {
        let n = self.n();
        if n == 0 {
            return 0.0;
        }
        self.sum() as f64 / n as f64
    }

    /// Smallest latency with at least fraction `q` of samples at or below it.
    fn quantile(&self, q: f64) -> u64 {
        let n = self.n();
        if n == 0 {
            return 0;
        }
        let need = ((q * n as f64).ceil() as u64).max(1);
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= need {
                return i as u64;
            }
        }
        self.max()
    }
}

/// Runs `source` through a fresh engine of `kind` on its own thread.
/// `progress` is called now and then with the number of completed requests.
pub fn simulate<S>(
    kind: EngineKind,
    config: &DramConfig,
    source: S,
    opts: &RunOptions,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<DramStats, SimError>
where
    S: Iterator<Item = Result<MemOp, SimError>> + Send,
{
    check_options(opts)?;
    let (dir, temporary) = match &opts.work_dir {
        Some(d) => (d.clone(), false),
        None => (unique_temp_dir(kind), true),
    };
    // (Removed below when the run ends; by the signal handler if the process
    // ends first. A temporary directory is made and registered in one step,
    // so that a signal never leaves it behind.)
    let make = || std::fs::create_dir_all(&dir).map_err(|e| SimError::io(&dir, e));
    let registered = if temporary {
        let (made, registered) =
            nmpsim_traces::cleanup::make(&dir, nmpsim_traces::cleanup::Leftover::Dir, make);
        made?;
        Some(registered)
    } else {
        make()?;
        (!opts.keep_command_traces).then(|| {
            nmpsim_traces::cleanup::register(&dir, nmpsim_traces::cleanup::Leftover::CommandTraces)
        })
    };
    let result = on_fresh_thread(|| run_on_this_thread(kind, config, source, opts, progress, &dir));
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    } else if !opts.keep_command_traces {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "cmdtrace") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    drop(registered);
    result
}

fn unique_temp_dir(kind: EngineKind) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "nmpsim-{}-{}-{}-{}",
        kind.name(),
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fn run_on_this_thread<S>(
    kind: EngineKind,
    config: &DramConfig,
    source: S,
    opts: &RunOptions,
    progress: Option<&(dyn Fn(u64) + Sync)>,
    dir: &std::path::Path,
) -> Result<DramStats, SimError>
where
    S: Iterator<Item = Result<MemOp, SimError>>,
{
    let started = Instant::now();
    // The native engine is driven through its own type and loop, so that the
    // loop inlines its calls; the others through the trait object.
    let driven = if kind == EngineKind::Native {
        let mut engine = crate::native::NativeEngine::new(config)?;
        let front = Tally::default();
        drive(kind, &mut engine, front, config, source, opts, progress)?
    } else {
        let mut engine = create_engine(kind, config, dir)?;
        let front = Generic::new(opts.window);
        drive(kind, engine.as_mut(), front, config, source, opts, progress)
            .map_err(|e| with_disk_hint(e, dir))?
    };
    Ok(statistics(kind, config, driven, progress, started))
}

/// Below this many free bytes, a reference engine's output files may have
/// been cut short (the C++ engines do not report failed writes).
const LOW_DISK_BYTES: u64 = 4 << 20;

/// Free bytes (for an unprivileged user) of the file system holding `dir`.
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes the struct it is given; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// A reference engine's error, with a note when the file system holding
/// its files is (nearly) full: DRAMsim3's and Ramulator's files written
/// into a full disk end early, and read back as malformed.
fn with_disk_hint(mut e: SimError, dir: &std::path::Path) -> SimError {
    let Some(free) = free_bytes(dir).filter(|&f| f < LOW_DISK_BYTES) else {
        return e;
    };
    if let SimError::Engine { what, .. } | SimError::Parse { what, .. } = &mut e {
        what.push_str(&format!(
            " (the file system of {} has {free} bytes free: the engine's output was probably cut short by a full disk)",
            dir.display()
        ));
    }
    e
}

/// Runs `source` through `engine`, a native engine the caller made (with a
/// command log, say), on this thread, as [`simulate`] runs a fresh one: the
/// same front end, the same statistics, the same progress calls.
pub fn simulate_native<S>(
    engine: &mut crate::native::NativeEngine,
    source: S,
    opts: &RunOptions,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<DramStats, SimError>
where
    S: Iterator<Item = Result<MemOp, SimError>>,
{
    check_options(opts)?;
    let started = Instant::now();
    let config = crate::DramEngine::config(engine).clone();
    let front = Tally::default();
    let driven = drive(
        EngineKind::Native,
        engine,
        front,
        &config,
        source,
        opts,
        progress,
    )?;
    Ok(statistics(
        EngineKind::Native,
        &config,
        driven,
        progress,
        started,
    ))
}

/// The most requests a run may keep in flight ([`RunOptions::window`]).
pub const MAX_WINDOW: usize = 1 << 20;

fn check_options(opts: &RunOptions) -> Result<(), SimError> {
    if opts.window == 0 || opts.issue_per_cycle == 0 {
        return Err(SimError::param(
            "window / issue_per_cycle",
            "must be at least 1",
        ));
    }
    if opts.window > MAX_WINDOW {
        return Err(SimError::param(
            "window",
            format!("{}: at most {MAX_WINDOW} requests in flight", opts.window),
        ));
    }
    Ok(())
}

/// The statistics of a driven run that began at `started`.
fn statistics(
    kind: EngineKind,
    config: &DramConfig,
    driven: Driven,
    progress: Option<&(dyn Fn(u64) + Sync)>,
    started: Instant,
) -> DramStats {
    let (cycles, reads, writes, mut lat, report) = driven;
    if let Some(own) = report
        .read_latency_cycles
        .as_deref()
        .map(LatencyHist::from_counts)
    {
        // The engine's own latencies, when they are the same reads over the
        // same cycles (the mapping of completions to requests aside).
        if own.n() == lat.n() && own.sum() == lat.sum() {
            lat = own;
        }
    }
    if let Some(p) = progress {
        p(reads + writes);
    }
    let wall_s = started.elapsed().as_secs_f64();
    assemble(
        kind,
        config,
        cycles,
        reads,
        writes,
        &lat,
        report.counts,
        report.engine_energy,
        wall_s,
    )
}

/// The requests in flight, by id. The id of the `n`-th request sent is
/// `n * 2^k + slot` (`2^k` the window rounded up to a power of two), so ids
/// are unique over the run and a completion names its slot directly.
struct InFlight {
    /// Per slot: the id it holds (`u64::MAX` when free), the send cycle and
    /// the access.
    slots: Vec<(RequestId, u64, Access)>,
    free: Vec<u32>,
    shift: u32,
    len: usize,
}

impl InFlight {
    fn new(window: usize) -> Self {
        InFlight {
            slots: vec![(u64::MAX, 0, Access::Read); window],
            free: (0..window as u32).rev().collect(),
            shift: window.next_power_of_two().trailing_zeros(),
            len: 0,
        }
    }

    /// The id the `n`-th request gets if it is sent now.
    #[inline]
    fn next_id(&self, n: u64) -> RequestId {
        let slot = *self
            .free
            .last()
            .expect("the window bounds the requests in flight");
        (n << self.shift) | slot as u64
    }

    /// Takes the slot of [`next_id`](Self::next_id) for a request sent at `cycle`.
    #[inline]
    fn insert(&mut self, id: RequestId, cycle: u64, access: Access) {
        let slot = self
            .free
            .pop()
            .expect("the window bounds the requests in flight");
        self.slots[slot as usize] = (id, cycle, access);
        self.len += 1;
    }

    /// Frees the slot of `id`; returns its send cycle and access, or `None`
    /// for an id not in flight.
    #[inline]
    fn remove(&mut self, id: RequestId) -> Option<(u64, Access)> {
        let slot = (id & ((1u64 << self.shift) - 1)) as usize;
        let e = self.slots.get_mut(slot)?;
        if e.0 != id {
            return None;
        }
        e.0 = u64::MAX;
        self.free.push(slot as u32);
        self.len -= 1;
        Some((e.1, e.2))
    }
}

type Driven = (u64, u64, u64, LatencyHist, crate::engine::EngineReport);

/// How [`drive_with`] keeps its requests in flight and hears of their
/// completions: through the trait object's vector of completions and a table
/// of ids ([`Generic`]), or straight from the native engine ([`Tally`]).
trait Front<E: crate::DramEngine + ?Sized> {
    /// Requests sent and not completed yet.
    fn in_flight(&self) -> usize;
    /// The completions counted so far.
    fn counts(&self) -> &Counts;
    /// The completions counted, at the end.
    fn into_counts(self) -> Counts;
    /// Sends the `n`-th request at cycle `now`; whether the engine took it.
    fn send(&mut self, engine: &mut E, n: u64, now: u64, op: MemOp) -> Result<bool, SimError>;
    /// Runs the engine to its next completion (before `limit`), or one cycle.
    fn advance(&mut self, engine: &mut E, limit: Option<u64>);
    /// Accounts for the completions of the last [`advance`](Self::advance);
    /// whether there were any.
    fn settle(&mut self, kind: EngineKind) -> Result<bool, SimError>;
}

/// What a front end counts of the completions: reads, writes and the read
/// latencies.
#[derive(Default)]
struct Counts {
    reads: u64,
    writes: u64,
    lat: LatencyHist,
}

impl Counts {
    #[inline(always)]
    fn read(&mut self, latency: u64) {
        self.reads += 1;
        self.lat.add(latency);
    }

    /// Requests completed so far.
    fn completed(&self) -> u64 {
        self.reads + self.writes
    }
}

/// The front end for any engine: ids name a slot of a table of requests in
/// flight, and every completion's id is checked against it.
struct Generic {
    in_flight: InFlight,
    done: Vec<Completion>,
    counts: Counts,
}

impl Generic {
    /// A front end for at most `window` requests in flight.
    fn new(window: usize) -> Self {
        Generic {
            in_flight: InFlight::new(window),
            done: Vec::with_capacity(64),
            counts: Counts::default(),
        }
    }
}

impl<E: crate::DramEngine + ?Sized> Front<E> for Generic {
    fn in_flight(&self) -> usize {
        self.in_flight.len
    }

    fn counts(&self) -> &Counts {
        &self.counts
    }

    fn into_counts(self) -> Counts {
        self.counts
    }

    #[inline]
    fn send(&mut self, engine: &mut E, n: u64, now: u64, op: MemOp) -> Result<bool, SimError> {
        let req = Request {
            id: self.in_flight.next_id(n),
            addr: op.addr,
            access: op.access,
        };
        let taken = engine.try_send(req)?;
        if taken {
            self.in_flight.insert(req.id, now, op.access);
        }
        Ok(taken)
    }

    #[inline]
    fn advance(&mut self, engine: &mut E, limit: Option<u64>) {
        match limit {
            Some(limit) => engine.tick_until_done(limit, &mut self.done),
            None => engine.tick(&mut self.done),
        }
    }

    fn settle(&mut self, kind: EngineKind) -> Result<bool, SimError> {
        for c in &self.done {
            let Some((sent_at, access)) = self.in_flight.remove(c.id) else {
                return Err(SimError::Engine {
                    engine: kind.name(),
                    what: format!("request {} completed twice or was never sent", c.id),
                });
            };
            match access {
                Access::Read => self.counts.read(c.cycle.saturating_sub(sent_at)),
                Access::Write => self.counts.writes += 1,
            }
        }
        let some = !self.done.is_empty();
        self.done.clear();
        Ok(some)
    }
}

/// The native engine's front end: a request's id is its send cycle, doubled,
/// plus 1 for a write, so a completion carries all that is needed, and the
/// engine hands it straight to the counts and the latency histogram (no
/// table of requests in flight, no vector of completions).
#[derive(Default)]
struct Tally {
    in_flight: usize,
    /// Requests completed when [`Front::settle`] last looked.
    settled: u64,
    counts: Counts,
    /// A completion arrived with nothing in flight (an engine fault).
    extra: Option<RequestId>,
}

impl crate::native::DoneSink for Tally {
    #[inline(always)]
    fn complete(&mut self, id: RequestId, cycle: u64) {
        if self.in_flight == 0 {
            self.extra = Some(id);
            return;
        }
        self.in_flight -= 1;
        if id & 1 == 0 {
            self.counts.read(cycle.saturating_sub(id >> 1));
        } else {
            self.counts.writes += 1;
        }
    }
}

impl Front<crate::native::NativeEngine> for Tally {
    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn counts(&self) -> &Counts {
        &self.counts
    }

    fn into_counts(self) -> Counts {
        self.counts
    }

    #[inline(always)]
    fn send(
        &mut self,
        engine: &mut crate::native::NativeEngine,
        _n: u64,
        now: u64,
        op: MemOp,
    ) -> Result<bool, SimError> {
        use crate::DramEngine as _;
        let taken = engine.try_send(Request {
            id: now << 1 | op.access.is_write() as u64,
            addr: op.addr,
            access: op.access,
        })?;
        self.in_flight += taken as usize;
        Ok(taken)
    }

    #[inline(always)]
    fn advance(&mut self, engine: &mut crate::native::NativeEngine, limit: Option<u64>) {
        match limit {
            Some(limit) => engine.run_until_done(limit, self),
            None => {
                engine.tick_once(self);
            }
        }
    }

    #[inline(always)]
    fn settle(&mut self, _kind: EngineKind) -> Result<bool, SimError> {
        if let Some(id) = self.extra {
            return Err(SimError::Engine {
                engine: "native",
                what: format!("request {id} completed with no request in flight"),
            });
        }
        let completed = self.counts.completed();
        let some = completed != self.settled;
        self.settled = completed;
        Ok(some)
    }
}

/// [`drive_with`] on the bursts of `source`'s requests: each request as it
/// is where a burst is [`BURST_BYTES`], else split into the bursts it spans
/// ([`Bursts`]).
#[inline(always)]
fn drive<E, F, S>(
    kind: EngineKind,
    engine: &mut E,
    front: F,
    config: &DramConfig,
    source: S,
    opts: &RunOptions,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<Driven, SimError>
where
    E: crate::DramEngine + ?Sized,
    F: Front<E>,
    S: Iterator<Item = Result<MemOp, SimError>>,
{
    let burst = config.burst_bytes();
    if burst >= BURST_BYTES {
        drive_with(kind, engine, front, config, source, opts, progress)
    } else {
        let source = Bursts::new(source, burst);
        drive_with(kind, engine, front, config, source, opts, progress)
    }
}

/// A source's requests of [`BURST_BYTES`] as the smaller bursts of a
/// standard that has them (an HBM2 pseudo-channel's 32 B): a request at `a`
/// becomes bursts at `a`, `a + burst`, ... of the same access, in that
/// order, `a` first aligned down to [`BURST_BYTES`] as every engine aligns
/// a request. The engines count, time and log bursts; a request is served
/// when its last burst is.
struct Bursts<S> {
    source: S,
    burst: u64,
    /// The next burst of the request being split, and how many are left.
    next: MemOp,
    left: u64,
}

impl<S> Bursts<S> {
    fn new(source: S, burst: u64) -> Self {
        debug_assert!(burst > 0 && BURST_BYTES % burst == 0);
        Bursts {
            source,
            burst,
            next: MemOp::read(0),
            left: 0,
        }
    }
}

impl<S: Iterator<Item = Result<MemOp, SimError>>> Iterator for Bursts<S> {
    type Item = Result<MemOp, SimError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            let op = match self.source.next()? {
                Ok(op) => op,
                Err(e) => return Some(Err(e)),
            };
            self.next = MemOp {
                addr: op.addr & !(BURST_BYTES - 1),
                access: op.access,
            };
            self.left = BURST_BYTES / self.burst;
        }
        let op = self.next;
        self.next.addr += self.burst;
        self.left -= 1;
        Some(Ok(op))
    }
}

/// Runs `source` through `engine` to the end, through `front`: the front end
/// of [`simulate`]. The native engine is driven through its own type with
/// the [`Tally`] front (completions going straight into the counts and the
/// latency histogram), any engine through [`Generic`]: the same calls in the
/// same order, so the same results.
#[inline(always)]
fn drive_with<E, F, S>(
    kind: EngineKind,
    engine: &mut E,
    mut front: F,
    config: &DramConfig,
    mut source: S,
    opts: &RunOptions,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<Driven, SimError>
where
    E: crate::DramEngine + ?Sized,
    F: Front<E>,
    S: Iterator<Item = Result<MemOp, SimError>>,
{
    let mut next: Option<MemOp> = None;
    let mut exhausted = false;
    let mut sent = 0u64;
    let mut last_progress_cycle = 0u64;
    let mut reported = 0u64;
    let capacity = config.capacity_bytes();
    let (window, per_cycle, stall) = (opts.window, opts.issue_per_cycle, opts.stall_limit_cycles);

    loop {
        if !exhausted && front.in_flight() < window {
            let now = engine.cycle();
            let mut issued = 0;
            loop {
                let op = match next.take() {
                    Some(op) => op,
                    None => match source.next() {
                        Some(op) => op?,
                        None => {
                            exhausted = true;
                            break;
                        }
                    },
                };
                if op.addr >= capacity {
                    config.check_addr(op.addr, &format!(" (request #{sent})"))?;
                }
                if !front.send(engine, sent, now, op)? {
                    next = Some(op);
                    break;
                }
                sent += 1;
                issued += 1;
                if issued == per_cycle || front.in_flight() == window {
                    break;
                }
            }
        }
        let in_flight = front.in_flight();
        if in_flight != 0 && (exhausted || in_flight >= window) {
            // Nothing can be sent before a request completes: let an
            // event-driven engine jump to that cycle (same results as
            // ticking every cycle; the stall check still fires).
            let limit = engine.cycle() + stall + 1;
            front.advance(engine, Some(limit));
        } else {
            front.advance(engine, None);
        }
        let completed_some = front.settle(kind)?;
        if completed_some {
            last_progress_cycle = engine.cycle();
            if let Some(p) = progress {
                let completed = front.counts().completed();
                if completed >= reported + 4096 {
                    reported = completed;
                    p(completed);
                }
            }
        }
        if exhausted && front.in_flight() == 0 && !engine.draining() {
            break;
        }
        // (An iteration that completed something has just made progress.)
        if !completed_some && engine.cycle() - last_progress_cycle > stall {
            return Err(SimError::Engine {
                engine: kind.name(),
                what: format!(
                    "no request completed for {stall} cycles ({} in flight, {} pending in the engine)",
                    front.in_flight(),
                    engine.pending()
                ),
            });
        }
    }
    if engine.pending() != 0 {
        return Err(SimError::Engine {
            engine: kind.name(),
            what: format!("{} requests still pending at the end", engine.pending()),
        });
    }
    let cycles = engine.cycle();
    let report = engine.finish()?;
    let Counts { reads, writes, lat } = front.into_counts();
    Ok((cycles, reads, writes, lat, report))
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    kind: EngineKind,
    config: &DramConfig,
    cycles: u64,
    reads: u64,
    writes: u64,
    lat: &LatencyHist,
    n: CommandCounts,
    engine_energy: Option<Energy>,
    wall_s: f64,
) -> DramStats {
    let tck = config.timing.tck_ns;
    let sim_time_ns = cycles as f64 * tck;
    // (Reads and writes count bursts: two a request on a pseudo-channel.)
    let bytes = (reads + writes) * config.burst_bytes();
    let bandwidth_gbps = if sim_time_ns > 0.0 {
        bytes as f64 / sim_time_ns
    } else {
        0.0
    };
    let bus_bandwidth_gbps = if sim_time_ns > 0.0 {
        ((n.read_cmds + n.write_cmds) * config.burst_bytes()) as f64 / sim_time_ns
    } else {
        0.0
    };
    let energy = EventEnergy::of(config).energy(&n);
    let accesses = n.row_hits + n.row_misses;
    DramStats {
        engine: kind,
        preset: config.name.clone(),
        ranks: config.ranks,
        tck_ns: tck,
        cycles,
        sim_time_ns,
        reads,
        writes,
        bytes,
        bandwidth_gbps,
        bus_bandwidth_gbps,
        peak_bandwidth_gbps: config.peak_bandwidth_gbps(),
        bus_utilisation: bus_bandwidth_gbps / config.peak_bandwidth_gbps(),
        read_latency_mean_ns: (reads > 0).then(|| lat.mean() * tck),
        read_latency_p50_ns: (reads > 0).then(|| lat.quantile(0.5) as f64 * tck),
        read_latency_p99_ns: (reads > 0).then(|| lat.quantile(0.99) as f64 * tck),
        read_latency_max_ns: (reads > 0).then(|| lat.max() as f64 * tck),
        row_hits: n.row_hits,
        row_misses: n.row_misses,
        row_conflicts: n.row_conflicts,
        row_hit_rate: (accesses > 0).then(|| n.row_hits as f64 / accesses as f64),
        activations: n.activates,
        precharges: n.precharges,
        read_cmds: n.read_cmds,
        write_cmds: n.write_cmds,
        refreshes: n.refreshes,
        active_rank_cycles: n.active_rank_cycles,
        precharged_rank_cycles: n.precharged_rank_cycles,
        energy_per_bit_pj: if bytes > 0 {
            energy.total_pj / (bytes as f64 * 8.0)
        } else {
            0.0
        },
        // pJ / ns = mW.
        average_power_mw: if sim_time_ns > 0.0 {
            energy.total_pj / sim_time_ns
        } else {
            0.0
        },
        energy,
        engine_energy,
        wall_s,
        sim_requests_per_s: if wall_s > 0.0 {
            (reads + writes) as f64 / wall_s
        } else {
            0.0
        },
        sim_cycles_per_s: if wall_s > 0.0 {
            cycles as f64 / wall_s
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_split_each_request_into_the_bursts_it_spans() {
        let ops = [MemOp::read(0x1234), MemOp::write(0x40), MemOp::read(0x7f)];
        let got: Vec<MemOp> = Bursts::new(ops.into_iter().map(Ok), 32)
            .map(Result::unwrap)
            .collect();
        let want = [
            MemOp::read(0x1200),
            MemOp::read(0x1220),
            MemOp::write(0x40),
            MemOp::write(0x60),
            MemOp::read(0x40),
            MemOp::read(0x60),
        ];
        assert_eq!(got, want);
        let four: Vec<u64> = Bursts::new([Ok(MemOp::read(64))].into_iter(), 16)
            .map(|op| op.unwrap().addr)
            .collect();
        assert_eq!(four, [64, 80, 96, 112]);
        // A source's error passes through, and the stream ends after it.
        let mut b = Bursts::new(
            [Ok(MemOp::read(0)), Err(SimError::param("x", "bad"))].into_iter(),
            32,
        );
        assert_eq!(b.next().unwrap().unwrap().addr, 0);
        assert_eq!(b.next().unwrap().unwrap().addr, 32);
        assert!(b.next().unwrap().is_err());
        assert!(b.next().is_none());
    }

    #[test]
    fn latency_quantiles_are_exact() {
        let mut h = LatencyHist::default();
        for c in 1..=100 {
            h.add(c);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!(h.quantile(1.0), 100);
        assert!((h.mean() - 50.5).abs() < 1e-12);
        assert_eq!(h.max(), 100);
        assert_eq!(h.n(), 100);
    }

    #[test]
    fn latency_histogram_grows_for_long_latencies() {
        let mut h = LatencyHist::default();
        assert_eq!((h.n(), h.max(), h.mean(), h.quantile(0.5)), (0, 0, 0.0, 0));
        for c in [3, 70_000, 5_000, 3] {
            h.add(c);
        }
        assert_eq!(h.n(), 4);
        assert_eq!(h.max(), 70_000);
        assert_eq!(h.quantile(0.5), 3);
        assert_eq!(h.quantile(0.75), 5_000);
        assert_eq!(h.quantile(1.0), 70_000);
        assert!((h.mean() - 75_006.0 / 4.0).abs() < 1e-9);
    }

    /// The native engine's fused loop gives what the generic loop gives
    /// through the trait object: cycles, counts, every latency and the
    /// command counts, over streams with writes, merges (small footprints),
    /// bursts of several requests per cycle and windows from 1 to 256.
    #[test]
    fn the_native_fused_loop_equals_the_generic_loop() {
        use crate::native::NativeEngine;
        use crate::source::{StreamKind, StreamSpec, synthetic};
        let presets = ["DDR4-3200-x8", "DDR4-2400-x16", "DDR4-2400-x8-2R"];
        let kinds = [
            StreamKind::Random,
            StreamKind::Sequential,
            StreamKind::Strided { stride_bytes: 4096 },
        ];
        let mut cases = 0;
        for (p, preset) in presets.iter().enumerate() {
            let cfg = DramConfig::preset(preset).unwrap();
            for (k, kind) in kinds.iter().enumerate() {
                for (window, per_cycle, writes, footprint) in [
                    (32, 1, 0.0, None),
                    (256, 4, 0.3, None),
                    (1, 1, 0.5, None),
                    (64, 2, 0.4, Some(64 * 64)),
                ] {
                    let mut spec = StreamSpec::new(*kind, 3000);
                    spec.write_fraction = writes;
                    spec.seed = (p * 10 + k) as u64;
                    spec.footprint_bytes = footprint;
                    let opts = RunOptions {
                        window,
                        issue_per_cycle: per_cycle,
                        ..RunOptions::default()
                    };
                    let cap = cfg.capacity_bytes();
                    let src = || synthetic(&spec, cap).unwrap().map(Ok);
                    let mut a = NativeEngine::new(&cfg).unwrap();
                    let (native, tally) = (EngineKind::Native, Tally::default());
                    let fused =
                        drive_with(native, &mut a, tally, &cfg, src(), &opts, None).unwrap();
                    let mut b: Box<dyn crate::DramEngine> =
                        Box::new(NativeEngine::new(&cfg).unwrap());
                    let front = Generic::new(opts.window);
                    let generic =
                        drive_with(native, b.as_mut(), front, &cfg, src(), &opts, None).unwrap();
                    let what = format!("{preset} {kind} window {window} x{per_cycle} w={writes}");
                    assert_eq!(fused.0, generic.0, "cycles, {what}");
                    assert_eq!(
                        (fused.1, fused.2),
                        (generic.1, generic.2),
                        "reads and writes, {what}"
                    );
                    assert_eq!(fused.3.counts, generic.3.counts, "latencies, {what}");
                    assert_eq!(fused.4, generic.4, "engine report, {what}");
                    assert!(fused.1 + fused.2 == 3000, "{what}");
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 36);
    }

    #[test]
    fn in_flight_slots_are_reused_and_ids_stay_unique() {
        let mut f = InFlight::new(3);
        let mut ids = Vec::new();
        for n in 0..3 {
            let id = f.next_id(n);
            f.insert(
                id,
                10 + n,
                if n == 1 { Access::Write } else { Access::Read },
            );
            ids.push(id);
        }
        assert_eq!(f.len, 3);
        assert_eq!(f.remove(ids[1]), Some((11, Access::Write)));
        assert_eq!(f.remove(ids[1]), None, "a second completion is refused");
        let again = f.next_id(3);
        assert!(!ids.contains(&again));
        f.insert(again, 20, Access::Read);
        assert_eq!(f.remove(again), Some((20, Access::Read)));
        assert_eq!(f.remove(ids[0]), Some((10, Access::Read)));
        assert_eq!(f.remove(12345), None);
        assert_eq!(f.len, 1);
    }
}
