//! The native engine against the references and the JEDEC checker.
//!
//! - Validation: on a fixed set of streams (sequential, random, strided,
//!   read/write mixes, embedding traces of uniform and Zipf profiles; DDR4-2400
//!   and 3200; x4, x8, x16) bandwidth and mean read latency agree with
//!   `dramsim3` within 3%, and with `ramulator` within the two references' own
//!   disagreement (plus the 3% allowed against `dramsim3`). The table of errors
//!   is printed (`-- --nocapture`).
//! - Every command log replays through the independent checker
//!   ([`nmpsim_sim::jedec::Checker`]) without a violation, and a planted one is
//!   caught.
//! - Identical input gives identical results; every request completes exactly
//!   once; skipping idle cycles changes nothing.
//! - Cycle for cycle against `dramsim3`, beyond the validation set: equal on
//!   reads, and on writes equal but for the two documented departures (the
//!   writes DRAMsim3 leaves unissued at the end, tRTRS between write bursts of
//!   different ranks).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

mod common;

use common::{assert_no_violation, few_lines, mixed_streams, planted_trcd};
use nmpsim_sim::jedec::{Checker, Command, CommandRecord};
use nmpsim_sim::native::NativeEngine;
use nmpsim_sim::source::{EmbeddingPhase, EmbeddingRequests, StreamKind, StreamSpec, synthetic};
use nmpsim_sim::{
    Access, AddressMapping, Completion, Coord, DramConfig, DramEngine, DramStats, EngineKind,
    MemOp, Request, RunOptions, simulate, simulate_native,
};
use nmpsim_traces::{
    BagSize, Distribution, GenSpec, Generator, TableSpec, TraceHeader, TraceWriter,
};

fn preset(name: &str) -> DramConfig {
    DramConfig::preset(name).unwrap()
}

/// Where a case's requests come from.
#[derive(Clone, Debug)]
enum Stream {
    Synthetic {
        kind: StreamKind,
        write_fraction: f64,
    },
    Embedding {
        zipf_alpha: Option<f64>,
        phase: EmbeddingPhase,
    },
}

#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    preset: &'static str,
    stream: Stream,
    requests: u64,
}

fn syn(kind: StreamKind, write_fraction: f64) -> Stream {
    Stream::Synthetic {
        kind,
        write_fraction,
    }
}

/// The validation set run in CI.
fn validation_set() -> Vec<Case> {
    let n = 12_000;
    let c = |name, preset, stream| Case {
        name,
        preset,
        stream,
        requests: n,
    };
    vec![
        c("seq-rd", "DDR4-3200-x8", syn(StreamKind::Sequential, 0.0)),
        c("rand-rd", "DDR4-3200-x8", syn(StreamKind::Random, 0.0)),
        c("seq-rd", "DDR4-2400-x8", syn(StreamKind::Sequential, 0.0)),
        c("rand-rd", "DDR4-2400-x8", syn(StreamKind::Random, 0.0)),
        c(
            "stride-8K",
            "DDR4-3200-x4",
            syn(StreamKind::Strided { stride_bytes: 8192 }, 0.0),
        ),
        c(
            "stride-256",
            "DDR4-2400-x16",
            syn(StreamKind::Strided { stride_bytes: 256 }, 0.0),
        ),
        c("rand-30w", "DDR4-2400-x16", syn(StreamKind::Random, 0.3)),
        c("seq-50w", "DDR4-3200-x16", syn(StreamKind::Sequential, 0.5)),
        c("rand-50w", "DDR4-2400-x4", syn(StreamKind::Random, 0.5)),
        c(
            "emb-uniform",
            "DDR4-3200-x8",
            Stream::Embedding {
                zipf_alpha: None,
                phase: EmbeddingPhase::Forward,
            },
        ),
        c(
            "emb-zipf",
            "DDR4-2400-x8",
            Stream::Embedding {
                zipf_alpha: Some(1.05),
                phase: EmbeddingPhase::Forward,
            },
        ),
        c(
            "emb-zipf-upd",
            "DDR4-3200-x4",
            Stream::Embedding {
                zipf_alpha: Some(1.05),
                phase: EmbeddingPhase::Both,
            },
        ),
    ]
}

/// A fresh directory: tests run in parallel, so each call gets its own.
fn temp_dir(tag: &str) -> PathBuf {
    tempfile::Builder::new()
        .prefix(&format!("nmpsim-native-{tag}-"))
        .tempdir()
        .unwrap()
        .keep()
}

/// Writes a generated embedding trace (4 tables of 200,000 rows, 20 lookups
/// per bag, batches of 128) and returns its path.
fn embedding_trace(dir: &Path, zipf_alpha: Option<f64>) -> PathBuf {
    let distribution = match zipf_alpha {
        None => Distribution::Uniform,
        Some(alpha) => Distribution::Zipf {
            alpha,
            scatter: true,
        },
    };
    let spec = GenSpec {
        tables: vec![
            TableSpec {
                rows: 200_000,
                distribution,
                bag_size: BagSize::Fixed { size: 20 },
                weighted: false,
            };
            4
        ],
        batch_size: 128,
        seed: 5,
    };
    let path = dir.join(format!(
        "emb-{}.nmpt",
        zipf_alpha.map_or("uniform".to_string(), |a| format!("zipf{a}"))
    ));
    let mut w = TraceWriter::create(&path, TraceHeader::for_spec(&spec, "native test")).unwrap();
    let mut g = Generator::new(spec).unwrap();
    for _ in 0..8 {
        w.write_batch(&g.next_batch()).unwrap();
    }
    w.finish().unwrap();
    path
}

/// The requests of a case, in order.
fn requests(case: &Case, cfg: &DramConfig, dir: &Path) -> Vec<MemOp> {
    match &case.stream {
        Stream::Synthetic {
            kind,
            write_fraction,
        } => {
            let spec = StreamSpec {
                write_fraction: *write_fraction,
                seed: 7,
                ..StreamSpec::new(*kind, case.requests)
            };
            synthetic(&spec, cfg.capacity_bytes()).unwrap().collect()
        }
        Stream::Embedding { zipf_alpha, phase } => {
            let path = embedding_trace(dir, *zipf_alpha);
            // 64 f32 per row: 256 B, four 64 B requests.
            EmbeddingRequests::open(&path, 64, 0, *phase, cfg.capacity_bytes(), None)
                .unwrap()
                .take(case.requests as usize)
                .collect::<Result<_, _>>()
                .unwrap()
        }
    }
}

fn run(engine: EngineKind, cfg: &DramConfig, ops: &[MemOp]) -> DramStats {
    simulate(
        engine,
        cfg,
        ops.iter().copied().map(Ok),
        &RunOptions::default(),
        None,
    )
    .unwrap()
}

/// Relative difference of `a` from the reference `r`.
fn rel(a: f64, r: f64) -> f64 {
    (a - r).abs() / r
}

struct Row {
    case: String,
    ds3: DramStats,
    nat: DramStats,
    ram: DramStats,
}

impl Row {
    fn errors(&self) -> [f64; 6] {
        let (d, n, r) = (&self.ds3, &self.nat, &self.ram);
        [
            rel(n.bandwidth_gbps, d.bandwidth_gbps),
            rel(lat(n.read_latency_mean_ns), lat(d.read_latency_mean_ns)),
            rel(n.bandwidth_gbps, r.bandwidth_gbps),
            rel(lat(n.read_latency_mean_ns), lat(r.read_latency_mean_ns)),
            rel(d.bandwidth_gbps, r.bandwidth_gbps),
            rel(lat(d.read_latency_mean_ns), lat(r.read_latency_mean_ns)),
        ]
    }
}

/// A read latency statistic of a run that has reads (every validation case
/// does); -1 where it has none, so that two runs without reads compare equal.
fn lat(x: Option<f64>) -> f64 {
    x.unwrap_or(-1.0)
}

fn print_table(rows: &[Row]) {
    eprintln!(
        "\n{:<28} | {:>23} | {:>23} | {:>13} | {:>13} | {:>13}",
        "case",
        "bandwidth GB/s",
        "mean read latency ns",
        "nat vs ds3 %",
        "nat vs ram %",
        "ds3 vs ram %"
    );
    eprintln!(
        "{:<28} | {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6}",
        "", "ds3", "native", "ram", "ds3", "native", "ram", "bw", "lat", "bw", "lat", "bw", "lat"
    );
    for row in rows {
        let e = row.errors();
        eprintln!(
            "{:<28} | {:>7.3} {:>7.3} {:>7.3} | {:>7.1} {:>7.1} {:>7.1} | {:>6.2} {:>6.2} | {:>6.2} {:>6.2} | {:>6.2} {:>6.2}",
            row.case,
            row.ds3.bandwidth_gbps,
            row.nat.bandwidth_gbps,
            row.ram.bandwidth_gbps,
            lat(row.ds3.read_latency_mean_ns),
            lat(row.nat.read_latency_mean_ns),
            lat(row.ram.read_latency_mean_ns),
            e[0] * 100.0,
            e[1] * 100.0,
            e[2] * 100.0,
            e[3] * 100.0,
            e[4] * 100.0,
            e[5] * 100.0,
        );
    }
}

/// Tolerance against DRAMsim3, the reference the native controller follows.
const DS3_TOL: f64 = 0.03;

fn validate(cases: &[Case]) {
    let dir = temp_dir("validate");
    let mut rows = Vec::new();
    for case in cases {
        let cfg = preset(case.preset);
        let ops = requests(case, &cfg, &dir);
        assert!(!ops.is_empty());
        let row = Row {
            case: format!("{} {}", case.preset, case.name),
            ds3: run(EngineKind::Dramsim3, &cfg, &ops),
            nat: run(EngineKind::Native, &cfg, &ops),
            ram: run(EngineKind::Ramulator, &cfg, &ops),
        };
        assert_eq!(row.nat.reads + row.nat.writes, ops.len() as u64);
        rows.push(row);
    }
    std::fs::remove_dir_all(&dir).ok();
    print_table(&rows);
    let mut failures = Vec::new();
    for row in &rows {
        let [bw_d, lat_d, bw_r, lat_r, bw_dr, lat_dr] = row.errors();
        if bw_d > DS3_TOL {
            failures.push(format!(
                "{}: bandwidth {:.2}% off dramsim3",
                row.case,
                bw_d * 100.0
            ));
        }
        if lat_d > DS3_TOL {
            failures.push(format!(
                "{}: latency {:.2}% off dramsim3",
                row.case,
                lat_d * 100.0
            ));
        }
        // Against Ramulator: no further off than the references are from each
        // other, give or take what is allowed against DRAMsim3.
        if bw_r > bw_dr + DS3_TOL {
            failures.push(format!(
                "{}: bandwidth {:.2}% off ramulator (references differ by {:.2}%)",
                row.case,
                bw_r * 100.0,
                bw_dr * 100.0
            ));
        }
        if lat_r > lat_dr + DS3_TOL {
            failures.push(format!(
                "{}: latency {:.2}% off ramulator (references differ by {:.2}%)",
                row.case,
                lat_r * 100.0,
                lat_dr * 100.0
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn native_agrees_with_the_references() {
    validate(&validation_set());
}

/// The same set at 20x the length (run with `-- --ignored`).
#[test]
#[ignore]
fn native_agrees_with_the_references_on_long_runs() {
    let cases: Vec<Case> = validation_set()
        .into_iter()
        .map(|c| Case {
            requests: c.requests * 20,
            ..c
        })
        .collect();
    validate(&cases);
}

/// Drives a native engine directly, like `simulate` (a window of 32, one
/// request per cycle), and returns completions in order, the command log and
/// the report. With `skip`, waits with `tick_until_done` whenever no request
/// can be offered.
fn drive(cfg: &DramConfig, ops: &[MemOp], skip: bool, log: bool) -> Run {
    let e = if log {
        NativeEngine::with_command_log(cfg).unwrap()
    } else {
        NativeEngine::new(cfg).unwrap()
    };
    drive_engine(e, ops, 32, 1, skip, 0)
}

/// What a run gives: completions in order, the command log, the report.
type Run = (
    Vec<Completion>,
    Vec<CommandRecord>,
    nmpsim_sim::EngineReport,
);

/// [`drive`] with a given engine, window and requests offered per cycle.
/// With a `gap`, the first half of `ops` runs to the end, then `gap` idle
/// cycles pass (waited with `tick_until_done`), then the second half runs.
fn drive_engine(
    mut e: NativeEngine,
    ops: &[MemOp],
    window: usize,
    per_cycle: usize,
    skip: bool,
    gap: u64,
) -> Run {
    let mut f = Front::default();
    let half = if gap > 0 { ops.len() / 2 } else { ops.len() };
    let mut gapped = gap == 0;
    loop {
        if !gapped && f.next == half && f.in_flight == 0 && !e.draining() {
            gapped = true;
            let until = e.cycle() + gap;
            while e.cycle() < until {
                e.tick_until_done(until, &mut f.done);
            }
            assert!(f.done.is_empty(), "nothing completes in an idle gap");
        }
        let stop = if gapped { ops.len() } else { half };
        let offered = f.offer(&mut e, &ops[..stop], window, per_cycle);
        if skip && !offered && f.in_flight > 0 {
            let limit = e.cycle() + 10_000_000;
            e.tick_until_done(limit, &mut f.done);
        } else {
            e.tick(&mut f.done);
        }
        if f.settle(&mut e, ops) {
            return f.finish(e);
        }
    }
}

/// A test front end: the next request to offer, the requests in flight,
/// this cycle's completions and all completions so far.
#[derive(Default)]
struct Front {
    next: usize,
    in_flight: usize,
    done: Vec<Completion>,
    all: Vec<Completion>,
}

impl Front {
    /// Offers up to `n` of `ops` from `next` on in the current cycle, within
    /// `window` requests in flight; returns whether any was offered
    /// (accepted or not). Request ids are 1000 + the index.
    fn offer(&mut self, e: &mut NativeEngine, ops: &[MemOp], window: usize, n: usize) -> bool {
        let mut offered = false;
        for _ in 0..n {
            if self.next == ops.len() || self.in_flight == window {
                break;
            }
            offered = true;
            let req = Request {
                id: 1000 + self.next as u64,
                addr: ops[self.next].addr,
                access: ops[self.next].access,
            };
            if !e.try_send(req).unwrap() {
                break;
            }
            self.next += 1;
            self.in_flight += 1;
        }
        offered
    }

    /// Takes the cycle's completions; returns whether the run is over (all
    /// of `ops` sent and completed, and no write left to drain).
    fn settle(&mut self, e: &mut NativeEngine, ops: &[MemOp]) -> bool {
        self.in_flight -= self.done.len();
        self.all.append(&mut self.done);
        assert!(e.cycle() < 1 << 40, "no progress");
        self.next == ops.len() && self.in_flight == 0 && !e.draining()
    }

    fn finish(self, mut e: NativeEngine) -> Run {
        assert_eq!(e.pending(), 0);
        let report = e.finish().unwrap();
        (self.all, e.take_command_log(), report)
    }
}

fn mixed_ops(
    cfg: &DramConfig,
    kind: StreamKind,
    n: u64,
    write_fraction: f64,
    seed: u64,
) -> Vec<MemOp> {
    let spec = StreamSpec {
        write_fraction,
        seed,
        ..StreamSpec::new(kind, n)
    };
    synthetic(&spec, cfg.capacity_bytes()).unwrap().collect()
}

fn check_log(cfg: &DramConfig, log: &[CommandRecord], what: &str) {
    let v = Checker::for_config(cfg).check(log);
    assert_no_violation(&v, log.len(), what);
}

#[test]
fn command_logs_break_no_jedec_rule() {
    for (name, kind, wf) in mixed_streams().into_iter().chain([
        (
            "DDR4-2400-x16",
            StreamKind::Strided { stride_bytes: 192 },
            0.2,
        ),
        ("DDR4-3200-x8-2R", StreamKind::Random, 0.5),
        ("DDR4-2400-x8-4R", StreamKind::Sequential, 0.3),
        (
            "DDR4-3200-x16-2R",
            StreamKind::Strided { stride_bytes: 8256 },
            0.4,
        ),
    ]) {
        let cfg = preset(name);
        let ops = mixed_ops(&cfg, kind, 30_000, wf, 3);
        let (_, log, report) = drive(&cfg, &ops, true, true);
        let count = |c: Command| log.iter().filter(|r| r.command == c).count() as u64;
        assert_eq!(count(Command::Act), report.counts.activates, "{name}");
        assert_eq!(count(Command::Rd), report.counts.read_cmds, "{name}");
        assert_eq!(count(Command::Wr), report.counts.write_cmds, "{name}");
        assert!(count(Command::Ref) > 0, "{name}: run too short to refresh");
        check_log(&cfg, &log, name);
        eprintln!("{name} {kind:?} {wf}: {} commands, no violation", log.len());

        // Plant violations: a RD moved to one cycle after its bank's ACT
        // (tRCD), and an ACT moved into the tRFC after a REF.
        let checker = Checker::for_config(&cfg);
        assert!(
            checker
                .check(&planted_trcd(&log))
                .iter()
                .any(|x| x.rule == "tRCD"),
            "{name}: planted tRCD violation not caught"
        );
        let r = log.iter().position(|r| r.command == Command::Ref).unwrap();
        let a = r + log[r..]
            .iter()
            .position(|x| x.command == Command::Act && x.rank == log[r].rank)
            .unwrap();
        let mut planted = log.clone();
        planted[a].cycle = log[r].cycle + 1;
        planted.sort_by_key(|r| r.cycle);
        assert!(
            checker.check(&planted).iter().any(|x| x.rule == "tRFC"),
            "{name}: planted tRFC violation not caught"
        );
    }
}

/// A command sink gets the log a block at a time, and the blocks, joined,
/// are the whole log, the last of them handed on when the run finishes.
#[test]
fn a_command_sink_gets_the_whole_log_in_blocks() {
    let cfg = preset("DDR4-3200-x8-2R");
    let ops = mixed_ops(&cfg, StreamKind::Random, 20_000, 0.3, 5);
    let opts = RunOptions::default();
    let mut whole = NativeEngine::with_command_log(&cfg).unwrap();
    let a = simulate_native(&mut whole, ops.iter().copied().map(Ok), &opts, None).unwrap();
    let whole = whole.take_command_log();
    let blocks = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Vec<CommandRecord>>::new()));
    let sink = blocks.clone();
    let mut e = NativeEngine::with_command_sink(&cfg, 1000, move |part| {
        sink.lock().unwrap().push(part.to_vec())
    })
    .unwrap();
    let b = simulate_native(&mut e, ops.iter().copied().map(Ok), &opts, None).unwrap();
    assert!(
        e.command_log().is_empty(),
        "the rest was handed on at the end"
    );
    drop(e);
    assert_eq!((a.cycles, a.activations), (b.cycles, b.activations));
    let blocks = std::mem::take(&mut *blocks.lock().unwrap());
    assert!(blocks.len() > 10, "{} blocks", blocks.len());
    let (last, full) = blocks.split_last().unwrap();
    assert!(full.iter().all(|b| b.len() == 1000));
    assert!(!last.is_empty() && last.len() <= 1000);
    assert_eq!(blocks.concat(), whole);
}

#[test]
fn identical_input_gives_identical_results() {
    let cfg = preset("DDR4-3200-x8");
    let ops = mixed_ops(&cfg, StreamKind::Random, 20_000, 0.3, 9);
    let a = run(EngineKind::Native, &cfg, &ops);
    let b = run(EngineKind::Native, &cfg, &ops);
    let strip = |s: &DramStats| {
        let mut s = s.clone();
        s.wall_s = 0.0;
        s.sim_requests_per_s = 0.0;
        s.sim_cycles_per_s = 0.0;
        serde_json::to_string(&s).unwrap()
    };
    assert_eq!(strip(&a), strip(&b));
    let (ca, la, _) = drive(&cfg, &ops, false, true);
    let (cb, lb, _) = drive(&cfg, &ops, false, true);
    assert!(ca == cb && la == lb, "two runs differ");
}

#[test]
fn skipping_idle_cycles_changes_nothing() {
    for name in ["DDR4-3200-x8", "DDR4-2400-x4-2R"] {
        let cfg = preset(name);
        for (kind, wf) in [(StreamKind::Random, 0.2), (StreamKind::Sequential, 0.5)] {
            let ops = mixed_ops(&cfg, kind, 20_000, wf, 4);
            let a = drive(&cfg, &ops, false, true);
            let b = drive(&cfg, &ops, true, true);
            assert_same_run(&format!("{name} {kind:?}"), &a, &b);
        }
    }
}

#[test]
fn skipping_idle_cycles_equals_running_every_cycle() {
    // The engine runs its controller only at cycles where something can
    // happen; the reference runs it at every cycle. Where a skipped cycle
    // could matter: several requests arriving in one cycle (the transaction
    // move must see all of them; a small window keeps the read queue empty,
    // so the first read of a cycle goes straight to its bank queue and the
    // second puts it back), write drains starting while no write can move
    // yet.
    let mut cases = 0;
    for name in [
        "DDR4-3200-x8",
        "DDR4-2400-x4",
        "DDR4-2400-x16-2R",
        "DDR4-3200-x8-4R",
    ] {
        let cfg = preset(name);
        for (kind, wf) in [
            (StreamKind::Random, 0.0),
            (StreamKind::Random, 0.3),
            (StreamKind::Random, 0.9),
            (StreamKind::Sequential, 0.5),
            (StreamKind::Strided { stride_bytes: 8192 }, 0.1),
        ] {
            let ops = mixed_ops(&cfg, kind, 6_000, wf, 11);
            for (window, per_cycle) in [(32, 1), (256, 4), (8, 2)] {
                let event = NativeEngine::with_command_log(&cfg).unwrap();
                let every = NativeEngine::with_command_log(&cfg).unwrap().every_cycle();
                let a = drive_engine(event, &ops, window, per_cycle, true, 0);
                let b = drive_engine(every, &ops, window, per_cycle, false, 0);
                let what = format!("{name} {kind:?} writes {wf} window {window}/{per_cycle}");
                assert_same_run(&what, &a, &b);
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 60);
}

/// Drives `e` with bursts: every `period` cycles, up to `burst` requests
/// arrive in the same cycle (fewer when the window is full); between bursts
/// the engine skips ahead.
fn drive_bursts(
    mut e: NativeEngine,
    ops: &[MemOp],
    window: usize,
    burst: usize,
    period: u64,
) -> Run {
    let mut f = Front::default();
    loop {
        f.offer(&mut e, ops, window, burst);
        let until = (e.cycle() / period + 1) * period;
        while e.cycle() < until {
            e.tick_until_done(until, &mut f.done);
        }
        if f.settle(&mut e, ops) {
            return f.finish(e);
        }
    }
}

#[test]
fn requests_arriving_together_equal_running_every_cycle() {
    // A read that arrives while nothing else waits to move goes straight to
    // its bank queue; a second request in the same cycle puts it back, so
    // that the end of the cycle moves the older one only, as the controller
    // does. Bursts of arrivals against the every-cycle reference check both.
    for name in ["DDR4-3200-x8", "DDR4-2400-x16-2R"] {
        let cfg = preset(name);
        for (kind, wf) in [
            (StreamKind::Random, 0.0),
            (StreamKind::Random, 0.2),
            (StreamKind::Sequential, 0.0),
        ] {
            let ops = mixed_ops(&cfg, kind, 4_000, wf, 5);
            for (burst, period) in [(2, 7), (3, 40)] {
                let event = NativeEngine::with_command_log(&cfg).unwrap();
                let every = NativeEngine::with_command_log(&cfg).unwrap().every_cycle();
                let a = drive_bursts(event, &ops, 16, burst, period);
                let b = drive_bursts(every, &ops, 16, burst, period);
                let what = format!("{name} {kind:?} writes {wf} bursts of {burst} every {period}");
                assert_same_run(&what, &a, &b);
            }
        }
    }
}

#[test]
fn draining_in_an_arrival_cycle_equals_running_every_cycle() {
    // Nine posted writes to two open rows start a write drain. Once the
    // buffer is empty, both rows are open and the WRITEs wait for tRCD, a
    // read to a third bank arrives (straight to its bank queue: nothing
    // else waits to move and no command issues in its cycle) and the front
    // end says, in the same cycle, that it has nothing more in flight. The
    // controller then runs in that cycle, and the read's ACTIVATE must not
    // issue before the read has moved at the end of it.
    let cfg = preset("DDR4-3200-x8");
    let at = |bankgroup: u64, column: u64| {
        cfg.encode(Coord {
            rank: 0,
            bankgroup,
            bank: 0,
            row: 5,
            column,
        })
    };
    let run = |mut e: NativeEngine| -> Run {
        let mut done = Vec::new();
        let mut all = Vec::new();
        for k in 0..9u64 {
            let req = Request {
                id: k,
                addr: at(k % 2, k),
                access: Access::Write,
            };
            assert!(e.try_send(req).unwrap());
            e.tick(&mut done);
        }
        for _ in 0..12 {
            e.tick(&mut done);
        }
        let read = Request {
            id: 100,
            addr: at(2, 0),
            access: Access::Read,
        };
        assert!(e.try_send(read).unwrap());
        assert!(e.draining(), "the writes are still to issue");
        while e.pending() != 0 || e.draining() {
            e.tick(&mut done);
            all.append(&mut done);
            assert!(e.cycle() < 100_000, "no progress");
        }
        let report = e.finish().unwrap();
        (all, e.take_command_log(), report)
    };
    let a = run(NativeEngine::with_command_log(&cfg).unwrap());
    let b = run(NativeEngine::with_command_log(&cfg).unwrap().every_cycle());
    assert!(a.0.iter().any(|c| c.id == 100), "the read completes");
    assert_same_run("drain called in the read's cycle", &a, &b);
}

/// Asserts that two runs gave the same command log, completions and report.
fn assert_same_run(what: &str, a: &Run, b: &Run) {
    let (la, lb) = (&a.1, &b.1);
    let first = la.iter().zip(lb).position(|(x, y)| x != y);
    assert!(
        la.len() == lb.len() && first.is_none(),
        "{what}: command logs differ ({} vs {} commands, first difference at {first:?})",
        la.len(),
        lb.len()
    );
    assert!(a.0 == b.0, "{what}: completions differ");
    assert_eq!(a.2, b.2, "{what}");
}

#[test]
fn rebasing_the_clock_changes_nothing() {
    // The engine keeps its times as 32-bit counts from a base it moves
    // forward every 2^30 cycles. Re-basing every few hundred cycles must give
    // the same results, and so must a run that crosses 2^31 cycles (over two
    // idle seconds of DRAM time, with every refresh in them).
    for name in ["DDR4-3200-x8", "DDR4-2400-x16-2R", "DDR4-3200-x4-4R"] {
        let cfg = preset(name);
        for (kind, wf) in [(StreamKind::Random, 0.3), (StreamKind::Sequential, 0.2)] {
            let ops = mixed_ops(&cfg, kind, 4_000, wf, 21);
            let what = format!("{name} {kind:?}");
            let plain = NativeEngine::with_command_log(&cfg).unwrap();
            let often = NativeEngine::with_command_log(&cfg)
                .unwrap()
                .rebase_every(337);
            let a = drive_engine(plain, &ops, 32, 1, true, 3 << 30);
            let b = drive_engine(often, &ops, 32, 1, true, 3 << 30);
            assert!(
                a.1.last().unwrap().cycle > 3 << 30,
                "{what}: the run crosses 2^31 cycles"
            );
            assert_same_run(&what, &a, &b);
            check_log(&cfg, &a.1, &what);
            let ra = &a.2;
            // The refreshes of the idle gap: one per tREFI per rank.
            let t = nmpsim_sim::native::TimingTable::of(&cfg);
            let expected = (3u64 << 30) / t.refi * cfg.ranks as u64;
            assert!(
                ra.counts.refreshes >= expected,
                "{what}: {} refreshes, expected at least {expected}",
                ra.counts.refreshes
            );
        }
    }
}

#[test]
fn every_request_completes_exactly_once() {
    let cfg = preset("DDR4-3200-x8-2R");
    // Few lines: reads merge, reads hit queued writes, writes merge.
    let mut ops = few_lines(5000, |i| i % 7 == 3);
    // And many distinct ones.
    ops.extend(mixed_ops(&cfg, StreamKind::Random, 20_000, 0.4, 2));
    let (done, log, report) = drive(&cfg, &ops, true, true);
    assert_eq!(done.len(), ops.len());
    let ids: HashSet<u64> = done.iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), ops.len(), "an id completed twice");
    assert!(
        ids.iter()
            .all(|&id| (1000..1000 + ops.len() as u64).contains(&id))
    );
    // Completions come in cycle order.
    assert!(done.windows(2).all(|w| w[0].cycle <= w[1].cycle));
    // Every write reached the DRAM or was merged into a queued one.
    let writes = ops.iter().filter(|o| o.access.is_write()).count() as u64;
    assert!(report.counts.write_cmds <= writes && report.counts.write_cmds > 0);
    check_log(&cfg, &log, "exactly-once stream");
}

#[test]
fn hand_countable_stream_counts() {
    // One open row, then a new row per request in one bank: ACTs, hits and
    // the active cycles can be counted by hand.
    let cfg = preset("DDR4-3200-x8");
    let n = 50u64;
    let mut ops = Vec::new();
    for col in 0..n {
        ops.push(MemOp::read(cfg.encode(nmpsim_sim::Coord {
            column: col,
            ..Default::default()
        })));
    }
    for row in 1..=n {
        ops.push(MemOp::read(cfg.encode(nmpsim_sim::Coord {
            row,
            ..Default::default()
        })));
    }
    let (_, log, report) = drive(&cfg, &ops, true, true);
    let c = &report.counts;
    assert_eq!(c.activates, 1 + n);
    assert_eq!(c.read_cmds, 2 * n);
    assert_eq!(c.row_hits, n - 1);
    assert_eq!(c.precharges, n);
    assert_eq!(c.refreshes, 0);
    // Between the first ACT and the last PRE... the rank is idle only for tRP
    // after each PRE, and before the first ACT.
    let first_act = log[0].cycle;
    let closed = n * cfg.timing["tRP"] as u64 + first_act;
    let cycles = c.active_rank_cycles + c.precharged_rank_cycles;
    assert_eq!(c.precharged_rank_cycles, closed);
    assert!(cycles > closed);
    check_log(&cfg, &log, "hand-countable");
}

// Cycle for cycle against DRAMsim3.
//
// The native controller follows DRAMsim3's, so beyond the 3% of the
// validation set the two should agree exactly, except where the native engine
// departs on purpose (docs/dram.md): it drains every buffered write before
// the run ends (DRAMsim3 leaves what is still in its write buffer and command
// queues unissued), and it keeps tRTRS between write bursts of different
// ranks. These tests hold it to that.

/// One synthetic stream through both engines.
#[derive(Clone, Debug)]
struct Pair {
    preset: &'static str,
    mapping: Option<&'static str>,
    kind: StreamKind,
    write_fraction: f64,
    window: usize,
    per_cycle: usize,
    requests: u64,
    seed: u64,
}

/// DRAMsim3's and the native engine's statistics, and the native command
/// log. With `rank_switch`, the native engine uses DRAMsim3's write-to-write
/// gap between ranks.
fn run_pair(p: &Pair, rank_switch: bool) -> (DramStats, DramStats, Vec<CommandRecord>) {
    let mut cfg = preset(p.preset);
    if let Some(m) = p.mapping {
        cfg.mapping = AddressMapping::parse(m).unwrap();
    }
    let spec = StreamSpec {
        write_fraction: p.write_fraction,
        seed: p.seed,
        ..StreamSpec::new(p.kind, p.requests)
    };
    let ops: Vec<MemOp> = synthetic(&spec, cfg.capacity_bytes()).unwrap().collect();
    let opts = RunOptions {
        window: p.window,
        issue_per_cycle: p.per_cycle,
        ..RunOptions::default()
    };
    let ds3 = simulate(
        EngineKind::Dramsim3,
        &cfg,
        ops.iter().copied().map(Ok),
        &opts,
        None,
    )
    .unwrap();
    let mut e = NativeEngine::with_command_log(&cfg).unwrap();
    if rank_switch {
        e = e.dramsim3_write_rank_switch();
    }
    let nat = simulate_native(&mut e, ops.iter().copied().map(Ok), &opts, None).unwrap();
    (ds3, nat, e.take_command_log())
}

/// The fields of two runs that differ, by name.
fn differing(d: &DramStats, n: &DramStats, reads_only: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut cmp = |name: &str, a: f64, b: f64| {
        if a != b {
            out.push(format!("{name}: dramsim3 {a}, native {b}"));
        }
    };
    cmp("reads", d.reads as f64, n.reads as f64);
    cmp("writes", d.writes as f64, n.writes as f64);
    cmp("read_cmds", d.read_cmds as f64, n.read_cmds as f64);
    cmp(
        "read latency mean",
        lat(d.read_latency_mean_ns),
        lat(n.read_latency_mean_ns),
    );
    cmp(
        "read latency p50",
        lat(d.read_latency_p50_ns),
        lat(n.read_latency_p50_ns),
    );
    cmp(
        "read latency p99",
        lat(d.read_latency_p99_ns),
        lat(n.read_latency_p99_ns),
    );
    cmp(
        "read latency max",
        lat(d.read_latency_max_ns),
        lat(n.read_latency_max_ns),
    );
    if reads_only {
        return out;
    }
    cmp("cycles", d.cycles as f64, n.cycles as f64);
    cmp("activations", d.activations as f64, n.activations as f64);
    cmp("precharges", d.precharges as f64, n.precharges as f64);
    cmp("write_cmds", d.write_cmds as f64, n.write_cmds as f64);
    cmp("refreshes", d.refreshes as f64, n.refreshes as f64);
    cmp("row_hits", d.row_hits as f64, n.row_hits as f64);
    cmp("row_misses", d.row_misses as f64, n.row_misses as f64);
    cmp(
        "active_rank_cycles",
        d.active_rank_cycles as f64,
        n.active_rank_cycles as f64,
    );
    cmp(
        "precharged_rank_cycles",
        d.precharged_rank_cycles as f64,
        n.precharged_rank_cycles as f64,
    );
    cmp("energy", d.energy.total_pj, n.energy.total_pj);
    out
}

/// Checks one pair against the rules above; returns what breaks them.
fn check_pair(p: &Pair) -> Vec<String> {
    let cfg = preset(p.preset);
    let multi_rank_writes = cfg.ranks > 1 && p.write_fraction > 0.0;
    let (ds3, nat, log) = run_pair(p, multi_rank_writes);
    let mut bad = Vec::new();
    if p.write_fraction == 0.0 {
        // Reads alone: everything, to the cycle.
        bad.extend(differing(&ds3, &nat, false));
    } else {
        // With writes: every read the same; the native engine has issued
        // at least DRAMsim3's writes, and what it issued beyond them (the
        // writes DRAMsim3 leaves in its buffer and command queues) fits there.
        bad.extend(differing(&ds3, &nat, true));
        let left = cfg.transaction_queue as u64
            + cfg.command_queue as u64 * (cfg.org.banks() * cfg.ranks) as u64;
        if nat.write_cmds < ds3.write_cmds || nat.write_cmds - ds3.write_cmds > left {
            bad.push(format!(
                "WRITEs: dramsim3 {}, native {} (at most {left} may be left at the end)",
                ds3.write_cmds, nat.write_cmds
            ));
        }
        if nat.cycles < ds3.cycles {
            bad.push(format!(
                "cycles: native {} ends before dramsim3 {}",
                nat.cycles, ds3.cycles
            ));
        }
    }
    if multi_rank_writes {
        // With DRAMsim3's write rank switch, the one rule broken is tRTRS
        // between write bursts of different ranks.
        let v = Checker::for_config(&cfg).check(&log);
        bad.extend(
            v.iter()
                .filter(|x| !x.is_write_to_write_rank_switch())
                .take(3)
                .map(|x| format!("checker: {x}")),
        );
    }
    bad.into_iter().map(|b| format!("{p:?}: {b}")).collect()
}

fn pair(preset: &'static str, kind: StreamKind, write_fraction: f64, window: usize) -> Pair {
    Pair {
        preset,
        mapping: None,
        kind,
        write_fraction,
        window,
        per_cycle: 1,
        requests: 4_000,
        seed: 11,
    }
}

#[test]
fn native_equals_dramsim3_cycle_for_cycle_but_for_its_two_departures() {
    use StreamKind::{Random, Sequential, Strided};
    let s = |b| Strided { stride_bytes: b };
    let mut cases = vec![
        // Reads: to the cycle, on every organisation, rank count, window and
        // mapping below.
        pair("DDR4-3200-x8-2R", Random, 0.0, 32),
        pair("DDR4-2400-x4-4R", Random, 0.0, 128),
        pair("DDR4-3200-x16-4R", s(8192), 0.0, 64),
        pair("DDR4-2400-x16-2R", Sequential, 0.0, 256),
        pair("DDR4-3200-x4", s(256), 0.0, 1),
        pair("DDR4-2400-x8-2R", Sequential, 0.0, 8),
        Pair {
            mapping: Some("ro-bg-ba-ra-co"),
            ..pair("DDR4-3200-x8-4R", Random, 0.0, 32)
        },
        Pair {
            mapping: Some("ra-ro-co-ba-bg"),
            per_cycle: 4,
            ..pair("DDR4-2400-x16-2R", s(4096), 0.0, 64)
        },
        Pair {
            per_cycle: 2,
            ..pair("DDR4-3200-x8", Random, 0.0, 256)
        },
        // Writes on one rank: the same reads; only the end differs.
        pair("DDR4-3200-x8", Random, 1.0, 16),
        pair("DDR4-2400-x4", Sequential, 0.3, 128),
        pair("DDR4-3200-x16", s(512), 0.5, 8),
        // (Small windows leave the command queues idle, where the write
        // buffer drains at more than 8 writes.)
        pair("DDR4-2400-x8", Sequential, 0.5, 4),
        pair("DDR4-2400-x16", Random, 0.3, 1),
        // Writes on several ranks, with DRAMsim3's write rank switch.
        pair("DDR4-3200-x4-4R", s(4096), 0.3, 32),
        pair("DDR4-2400-x4-2R", Random, 0.5, 256),
        pair("DDR4-2400-x8-2R", Sequential, 0.3, 32),
        // HBM2 (legacy channel): its split tRCD, BL4 on a 128-bit bus.
        pair("HBM2-2000", Random, 0.0, 32),
        pair("HBM2-2000", Sequential, 0.0, 256),
        pair("HBM2-2000", s(2048), 0.0, 64),
        Pair {
            mapping: Some("ro-bg-ba-ra-co"),
            per_cycle: 2,
            ..pair("HBM2-2000", Random, 0.0, 128)
        },
        pair("HBM2-2000", Random, 0.3, 32),
        pair("HBM2-2000", Sequential, 0.5, 128),
        pair("HBM2-2000", s(4096), 1.0, 8),
        // HBM2 pseudo-channels: 32 B bursts, two a request (the runner
        // splits them for both engines).
        pair("HBM2-2000-PC", Random, 0.0, 32),
        pair("HBM2-2000-PC", Sequential, 0.0, 256),
        pair("HBM2-2000-PC", s(1024), 0.0, 64),
        Pair {
            mapping: Some("ro-ra-ba-co-bg"),
            per_cycle: 2,
            ..pair("HBM2-2000-PC", Random, 0.0, 128)
        },
        pair("HBM2-2000-PC", Random, 0.3, 32),
        pair("HBM2-2000-PC", Sequential, 0.5, 16),
        // HBM (JESD235, the channel Ramulator has too): tCCD_L of 3 cycles
        // against BL/2 of 2, tRCDWR under tRCDRD.
        pair("HBM-1000", Random, 0.0, 32),
        pair("HBM-1000", Sequential, 0.0, 256),
        pair("HBM-1000", s(2048), 0.0, 64),
        pair("HBM-1000", Random, 0.3, 32),
        pair("HBM-1000", Sequential, 0.5, 128),
    ];
    for c in &mut cases {
        if c.write_fraction > 0.0 {
            c.requests = 10_000;
        }
    }
    let bad: Vec<String> = cases.iter().flat_map(check_pair).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn without_the_rank_switch_multi_rank_writes_differ() {
    // The control for the test above: the write rank switch is what it takes
    // away, and it matters (the default engine keeps tRTRS and is slower).
    let p = pair("DDR4-2400-x4-2R", StreamKind::Random, 0.5, 256);
    let p = Pair {
        requests: 10_000,
        ..p
    };
    let (ds3, nat, log) = run_pair(&p, false);
    assert!(!differing(&ds3, &nat, true).is_empty());
    assert!(nat.cycles > ds3.cycles);
    check_log(&preset(p.preset), &log, "default engine, two ranks, writes");
    let (_, _, log) = run_pair(&p, true);
    assert!(
        !Checker::for_config(&preset(p.preset))
            .check(&log)
            .is_empty()
    );
}

/// Random configurations, many more (run with `-- --ignored`): 300 draws
/// from seed 2026, or `NMPSIM_DRAWS` draws from `NMPSIM_SEED`.
#[test]
#[ignore]
fn native_equals_dramsim3_on_random_configurations() {
    let env = |name: &str, default: u64| {
        std::env::var(name).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: expected a whole number"))
        })
    };
    let (draws, seed) = (env("NMPSIM_DRAWS", 300), env("NMPSIM_SEED", 2026));
    let presets = nmpsim_sim::preset_names();
    let fields = ["ro", "ra", "ba", "bg", "co"];
    let mut rng = nmpsim_traces::rng::Rng::new(seed);
    let mut bad = Vec::new();
    for _ in 0..draws {
        let mut pick = |n: usize| rng.below(n as u64) as usize;
        let name: &'static str = presets[pick(presets.len())].clone().leak();
        let kind = match pick(3) {
            0 => StreamKind::Random,
            1 => StreamKind::Sequential,
            _ => StreamKind::Strided {
                stride_bytes: [128, 256, 512, 4096, 8192, 65536][pick(6)],
            },
        };
        let mapping = if pick(2) == 0 {
            let mut f = fields.to_vec();
            for i in (1..f.len()).rev() {
                f.swap(i, pick(i + 1));
            }
            Some(&*f.join("-").leak())
        } else {
            None
        };
        let p = Pair {
            preset: name,
            mapping,
            kind,
            write_fraction: [0.0, 0.0, 0.0, 0.1, 0.3, 0.5, 1.0][pick(7)],
            window: [1, 2, 4, 8, 16, 32, 32, 64, 128, 256][pick(10)],
            per_cycle: [1, 1, 1, 2, 4][pick(5)],
            requests: [3_000, 10_000, 30_000][pick(3)],
            seed: pick(1000) as u64,
        };
        bad.extend(check_pair(&p));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Reads of one address that DRAMsim3 serves with different READs (a read
/// sent after the READ of an earlier one issued waits for a READ of its
/// own) keep their own latencies, on every mapping: DRAMsim3's completions
/// name only the address, and a read sent one cycle before a completion of
/// its address is not the one completing unless a write of it was waiting.
#[test]
fn reads_of_one_address_get_dramsim3s_latencies() {
    let line = |n: usize, access| {
        vec![
            MemOp {
                addr: 0x1000,
                access
            };
            n
        ]
    };
    for (preset_name, mapping) in [
        ("DDR4-2400-x8", None),
        ("DDR4-3200-x8", None),
        ("DDR4-3200-x8", Some("ro-ra-ba-bg-co")),
    ] {
        let mut cfg = preset(preset_name);
        if let Some(m) = mapping {
            cfg.mapping = AddressMapping::parse(m).unwrap();
        }
        let mut streams: Vec<(String, Vec<MemOp>)> =
            vec![("one line, reads".into(), line(1000, Access::Read))];
        for (seed, writes, footprint) in [
            (0, 0.0, 2048),
            (1, 0.0, 8192),
            (2, 0.5, 8192),
            (3, 0.2, 4096),
        ] {
            let spec = StreamSpec {
                write_fraction: writes,
                seed,
                footprint_bytes: Some(footprint),
                ..StreamSpec::new(StreamKind::Random, 4000)
            };
            streams.push((
                format!("random, {writes} writes over {footprint} B"),
                synthetic(&spec, cfg.capacity_bytes()).unwrap().collect(),
            ));
        }
        for (name, ops) in &streams {
            for per_cycle in [1, 2] {
                let opts = RunOptions {
                    issue_per_cycle: per_cycle,
                    ..RunOptions::default()
                };
                let go =
                    |kind| simulate(kind, &cfg, ops.iter().copied().map(Ok), &opts, None).unwrap();
                let (d, n) = (go(EngineKind::Dramsim3), go(EngineKind::Native));
                // (Every read statistic; with writes, the two departures
                // change the run's length and command counts.)
                let reads_only = ops.iter().all(|o| o.access == Access::Read);
                if reads_only {
                    assert_eq!(differing(&d, &n, false), Vec::<String>::new(), "{name}");
                }
                assert_eq!(
                    differing(&d, &n, true),
                    Vec::<String>::new(),
                    "{preset_name} {mapping:?}: {name}, {per_cycle} a cycle"
                );
            }
        }
    }
}

/// Where DRAMsim3's address-only completions cannot tell two reads apart (a
/// write of their line issued between the old read's READ and the young
/// read's arrival), the latency statistics still are DRAMsim3's own: they
/// come from its per-read latency histogram.
#[test]
fn dramsim3s_latency_statistics_are_its_own() {
    let cfg = preset("DDR4-3200-x4");
    let spec = StreamSpec {
        write_fraction: 0.9,
        seed: 691,
        footprint_bytes: Some(1024),
        ..StreamSpec::new(StreamKind::Random, 5000)
    };
    let ops: Vec<MemOp> = synthetic(&spec, cfg.capacity_bytes()).unwrap().collect();
    let opts = RunOptions {
        window: 8,
        ..RunOptions::default()
    };
    let go = |kind| simulate(kind, &cfg, ops.iter().copied().map(Ok), &opts, None).unwrap();
    let (d, n) = (go(EngineKind::Dramsim3), go(EngineKind::Native));
    assert_eq!(d.read_latency_max_ns, Some(68.125));
    assert_eq!(differing(&d, &n, true), Vec::<String>::new());
}

/// A read served from the write buffer overtakes older reads of its address;
/// DRAMsim3 names only the address of what completes, and its latencies go to
/// the right requests all the same (every read's latency equal to native's).
#[test]
fn reads_served_from_the_write_buffer_keep_their_own_latency() {
    let cfg = preset("DDR4-2400-x8");
    let a = 0x10_0000;
    let op = |access| MemOp { addr: a, access };
    let ops = [op(Access::Read), op(Access::Write), op(Access::Read)];
    let opts = RunOptions::default();
    let go = |kind| simulate(kind, &cfg, ops.iter().copied().map(Ok), &opts, None).unwrap();
    let (d, n) = (go(EngineKind::Dramsim3), go(EngineKind::Native));
    // The first read opens the row (tRCD + CL + BL/2 + 1 = 37 cycles); the
    // second, sent after the write, comes from the write buffer (1 cycle).
    let ns = |cycles: f64| cycles * cfg.timing.tck_ns;
    assert_eq!(n.read_latency_p50_ns, Some(ns(1.0)));
    assert_eq!(n.read_latency_max_ns, Some(ns(37.0)));
    assert_eq!(differing(&d, &n, true), Vec::<String>::new());
    // The same on streams that hit a few addresses hard, several requests a cycle.
    let mut cfg = preset("DDR4-3200-x8");
    cfg.mapping = AddressMapping::parse("ro-ra-ba-bg-co").unwrap();
    for (seed, per_cycle) in [(0, 1), (1, 1), (2, 2), (3, 4)] {
        let spec = StreamSpec {
            write_fraction: 0.5,
            seed,
            footprint_bytes: Some(8192),
            ..StreamSpec::new(StreamKind::Random, 4000)
        };
        let ops: Vec<MemOp> = synthetic(&spec, cfg.capacity_bytes()).unwrap().collect();
        let opts = RunOptions {
            issue_per_cycle: per_cycle,
            ..RunOptions::default()
        };
        let go = |kind| simulate(kind, &cfg, ops.iter().copied().map(Ok), &opts, None).unwrap();
        let (d, n) = (go(EngineKind::Dramsim3), go(EngineKind::Native));
        assert_eq!(
            differing(&d, &n, true),
            Vec::<String>::new(),
            "seed {seed}, {per_cycle} a cycle"
        );
    }
}

/// HBM2's command logs break no rule of its table: its split activation
/// delay, and its two command buses, over which some cycles carry a row
/// command and a column command together and none carries two of a kind.
/// Planted violations are caught: a READ one cycle after its ACT (tRCDRD),
/// and a second row command in a cycle that has one (the row bus).
///
/// On a pseudo-channel (`HBM2-2000-PC`) the same, with each 64 B request
/// given to the engine as its two 32 B bursts, as the runner gives them.
#[test]
fn hbm2_command_logs_use_both_buses_and_break_no_rule() {
    let column = |c: Command| matches!(c, Command::Rd | Command::Wr | Command::Rda | Command::Wra);
    for (name, kind, wf) in [
        ("HBM2-2000", StreamKind::Random, 0.0),
        ("HBM2-2000", StreamKind::Random, 0.3),
        ("HBM2-2000", StreamKind::Sequential, 0.5),
        ("HBM2-2000", StreamKind::Strided { stride_bytes: 2048 }, 0.2),
        ("HBM-1000", StreamKind::Random, 0.3),
        ("HBM-1000", StreamKind::Sequential, 0.5),
        ("HBM2-2000-PC", StreamKind::Random, 0.0),
        ("HBM2-2000-PC", StreamKind::Random, 0.3),
        ("HBM2-2000-PC", StreamKind::Sequential, 0.5),
        (
            "HBM2-2000-PC",
            StreamKind::Strided { stride_bytes: 1024 },
            0.2,
        ),
    ] {
        let cfg = preset(name);
        let what = format!("{name} {kind:?} {wf}");
        let burst = cfg.burst_bytes();
        let ops: Vec<MemOp> = mixed_ops(&cfg, kind, 30_000, wf, 3)
            .into_iter()
            .flat_map(|op| {
                (0..64 / burst).map(move |k| MemOp {
                    addr: (op.addr & !63) + k * burst,
                    access: op.access,
                })
            })
            .collect();
        let (_, log, report) = drive(&cfg, &ops, true, true);
        let count = |c: Command| log.iter().filter(|r| r.command == c).count() as u64;
        assert_eq!(count(Command::Act), report.counts.activates, "{what}");
        assert!(count(Command::Ref) > 0, "{what}: run too short to refresh");
        check_log(&cfg, &log, &what);
        let mut dual = 0;
        for w in log.windows(2) {
            if w[0].cycle == w[1].cycle {
                dual += 1;
                assert_ne!(
                    column(w[0].command),
                    column(w[1].command),
                    "{what}: two commands of a kind at cycle {}",
                    w[0].cycle
                );
            }
        }
        assert!(dual > 0, "{what}: no cycle used both buses");
        eprintln!(
            "{what}: {} commands, {dual} cycles with two, no violation",
            log.len()
        );
        let checker = Checker::for_config(&cfg);
        assert!(
            checker
                .check(&planted_trcd(&log))
                .iter()
                .any(|x| x.rule == "tRCDRD"),
            "{what}: planted tRCDRD violation not caught"
        );
        // A PRECHARGE moved into the cycle of the row command before it.
        let rows: Vec<usize> = (0..log.len())
            .filter(|&i| !column(log[i].command))
            .collect();
        let k = rows
            .windows(2)
            .find(|w| log[w[1]].command == Command::Pre && log[w[0]].cycle < log[w[1]].cycle)
            .expect("a PRECHARGE after another row command");
        let mut planted = log.clone();
        planted[k[1]].cycle = log[k[0]].cycle;
        planted.sort_by_key(|r| r.cycle);
        assert!(
            checker.check(&planted).iter().any(|x| x.rule == "row bus"),
            "{what}: planted row-bus violation not caught"
        );
    }
}
