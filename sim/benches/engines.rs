//! Requests per second of the engines on 64 B read streams.
//!
//! `cargo bench -p nmpsim-sim --bench engines` measures, in one run, every
//! engine on 10M random and 10M sequential 64 B reads (DDR4-3200-x8, one
//! rank), driven like [`nmpsim_sim::simulate`] drives them: at most 32
//! requests in flight, at most one new request per cycle, and while no
//! request can be offered the engine runs until something completes
//! ([`DramEngine::tick_until_done`]). It then prints the native engine's
//! speed-up over DRAMsim3 for each stream.
//!
//! The native engine is sampled by criterion (10 runs per stream). The
//! reference engines take about a minute per 10M-request run, so they are
//! timed over `NMPSIM_BENCH_REFERENCE_RUNS` runs (default 1) in the same
//! process.
//!
//! Environment: `NMPSIM_BENCH_REQUESTS` (default 10,000,000) sets the stream
//! length; `NMPSIM_BENCH_ENGINES` (default `native,dramsim3`) the engines, e.g.
//! `native,dramsim3,ramulator`; `NMPSIM_BENCH_SIMULATE=1` also times one run
//! of each engine through [`nmpsim_sim::simulate`] (the runner the command
//! line uses, which also keeps the latency histogram and checks every
//! completion against its request).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};

#[path = "../tests/common/mod.rs"]
mod common;
use nmpsim_sim::native::NativeEngine;
use nmpsim_sim::source::{StreamKind, StreamSpec, synthetic};
use nmpsim_sim::{
    Completion, DramConfig, DramEngine, EngineKind, Request, RunOptions, create_engine,
    on_fresh_thread, simulate,
};

const WINDOW: usize = 32;

/// Runs `n` reads of `kind` through a fresh engine; returns the cycles
/// simulated (so the work cannot be optimised away). The native engine is
/// driven through its own type, as `simulate` drives it; the references
/// through the trait object.
fn drive(kind: EngineKind, cfg: &DramConfig, stream: StreamKind, n: u64) -> u64 {
    let dir = common::process_dir(&format!("nmpsim-bench-{}", kind.name()));
    let cycles = on_fresh_thread(|| {
        if kind == EngineKind::Native {
            run(&mut NativeEngine::new(cfg).unwrap(), cfg, stream, n)
        } else {
            run(
                create_engine(kind, cfg, &dir).unwrap().as_mut(),
                cfg,
                stream,
                n,
            )
        }
    });
    std::fs::remove_dir_all(&dir).ok();
    cycles
}

/// The driving loop of [`drive`].
fn run<E: DramEngine + ?Sized>(e: &mut E, cfg: &DramConfig, stream: StreamKind, n: u64) -> u64 {
    let spec = StreamSpec {
        seed: 1,
        ..StreamSpec::new(stream, n)
    };
    let mut src = synthetic(&spec, cfg.capacity_bytes()).unwrap();
    let mut done: Vec<Completion> = Vec::with_capacity(64);
    let mut next = src.next();
    let mut id = 0u64;
    let mut in_flight = 0usize;
    let mut completed = 0u64;
    while completed < n || e.draining() {
        if let Some(op) = next.filter(|_| in_flight < WINDOW) {
            let req = Request {
                id,
                addr: op.addr,
                access: op.access,
            };
            if e.try_send(req).unwrap() {
                id += 1;
                in_flight += 1;
                next = src.next();
            }
            e.tick(&mut done);
        } else if in_flight > 0 {
            let limit = e.cycle() + 1_000_000;
            e.tick_until_done(limit, &mut done);
        } else {
            e.tick(&mut done);
        }
        in_flight -= done.len();
        completed += done.len() as u64;
        done.clear();
    }
    let c = e.cycle();
    e.finish().unwrap();
    c
}

/// Seconds per run of `simulate` (the runner the CLI uses) on the stream.
fn via_simulate(kind: EngineKind, cfg: &DramConfig, stream: StreamKind, n: u64) -> f64 {
    let spec = StreamSpec {
        seed: 1,
        ..StreamSpec::new(stream, n)
    };
    let src = synthetic(&spec, cfg.capacity_bytes()).unwrap().map(Ok);
    let t = Instant::now();
    let s = simulate(kind, cfg, src, &RunOptions::default(), None).unwrap();
    assert_eq!(s.reads, n);
    t.elapsed().as_secs_f64()
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(default)
}

fn main() {
    let n = env_u64("NMPSIM_BENCH_REQUESTS", 10_000_000);
    let reference_runs = env_u64("NMPSIM_BENCH_REFERENCE_RUNS", 1).max(1);
    let engines: Vec<EngineKind> = std::env::var("NMPSIM_BENCH_ENGINES")
        .unwrap_or_else(|_| "native,dramsim3".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let with_simulate = std::env::var("NMPSIM_BENCH_SIMULATE").is_ok_and(|v| v == "1");
    let cfg = DramConfig::preset("DDR4-3200-x8").unwrap();
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    // Mean seconds per run, by (stream, engine, through simulate).
    let mut means: HashMap<(&str, EngineKind, bool), f64> = HashMap::new();
    for (sname, stream) in [
        ("random", StreamKind::Random),
        ("sequential", StreamKind::Sequential),
    ] {
        let mut g = c.benchmark_group(format!("{sname}-64B-reads"));
        g.sampling_mode(SamplingMode::Flat);
        g.throughput(Throughput::Elements(n));
        for &kind in &engines {
            if kind == EngineKind::Native {
                // The fast engine: ten criterion samples.
                let mut total = Duration::ZERO;
                let mut runs = 0u64;
                g.bench_function(format!("{}/{n}", kind.name()), |b| {
                    b.iter_custom(|iters| {
                        let t = Instant::now();
                        for _ in 0..iters {
                            std::hint::black_box(drive(kind, &cfg, stream, n));
                        }
                        let d = t.elapsed();
                        total += d;
                        runs += iters;
                        d
                    })
                });
                means.insert(
                    (sname, kind, false),
                    total.as_secs_f64() / runs.max(1) as f64,
                );
            } else {
                // The references take minutes per run at 10M requests: time
                // `reference_runs` runs (default 1) in this same process.
                let mut total = 0.0;
                for _ in 0..reference_runs {
                    let t = Instant::now();
                    std::hint::black_box(drive(kind, &cfg, stream, n));
                    total += t.elapsed().as_secs_f64();
                }
                let mean = total / reference_runs as f64;
                eprintln!(
                    "{sname}-64B-reads/{}/{n}: {mean:.2} s per run, {:.4e} req/s ({reference_runs} timed run(s))",
                    kind.name(),
                    n as f64 / mean
                );
                means.insert((sname, kind, false), mean);
            }
            if with_simulate {
                let mean = via_simulate(kind, &cfg, stream, n);
                eprintln!(
                    "{sname}-64B-reads/{}/{n} through simulate: {mean:.2} s, {:.4e} req/s",
                    kind.name(),
                    n as f64 / mean
                );
                means.insert((sname, kind, true), mean);
            }
        }
        g.finish();
    }
    eprintln!("\nrequests per second ({n} 64 B reads, DDR4-3200-x8, window {WINDOW}):");
    for sim in [false, true] {
        if sim && !with_simulate {
            continue;
        }
        for sname in ["random", "sequential"] {
            let rate = |k| means.get(&(sname, k, sim)).map(|s| n as f64 / s);
            let mut line = format!("  {sname:<10}{}", if sim { " (simulate)" } else { "" });
            for &k in &engines {
                if let Some(r) = rate(k) {
                    line += &format!("  {}: {:.3e} req/s", k.name(), r);
                }
            }
            if let (Some(a), Some(b)) = (rate(EngineKind::Native), rate(EngineKind::Dramsim3)) {
                line += &format!("  native / dramsim3 = {:.1}x", a / b);
            }
            eprintln!("{line}");
        }
    }
}
