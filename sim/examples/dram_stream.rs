//! Simulates a random read/write stream on one DDR4 rank with the native
//! engine and DRAMsim3, checks the native engine's commands against the
//! JEDEC rules, and prints the run's summary: the library side of
//! `nmpsim dram --engine native,dramsim3 --check-timing`.
//!
//! ```text
//! cargo run -p nmpsim-sim --example dram_stream [-- REQUESTS]
//! ```

use nmpsim_sim::run::{RequestSource, RunResults, TimingCheck, run_engine};
use nmpsim_sim::source::{StreamKind, StreamSpec};
use nmpsim_sim::{DramConfig, EngineKind, RunOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let requests = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 20_000,
    };
    let cfg = DramConfig::preset("DDR4-3200-x8")?;
    let source = RequestSource::Stream(StreamSpec {
        kind: StreamKind::Random,
        requests,
        write_fraction: 0.25,
        seed: 1,
        base: 0,
        footprint_bytes: None,
    });
    let opts = RunOptions {
        window: 32,
        ..RunOptions::default()
    };
    let mut runs = Vec::new();
    let mut checks = Vec::new();
    for engine in [EngineKind::Native, EngineKind::Dramsim3] {
        let (stream, _) = source.open(&cfg)?;
        let (stats, check) = run_engine(engine, &cfg, stream, &opts, true, None)?;
        checks.push(match &check {
            Some(c) => TimingCheck::of(engine, c, None),
            None => TimingCheck::unchecked(engine, &cfg),
        });
        runs.push(stats);
    }
    let results = RunResults::of(runs, checks);
    print!("{}", results.summary_text(&cfg, &source));
    if results.timing_checks[0].violations > 0 {
        return Err("the native engine broke a JEDEC rule".into());
    }
    Ok(())
}
