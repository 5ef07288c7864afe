//! `nmpsim dram bench`: the engines' speed on the same streams, round by
//! round, with ratios and medians.

use super::*;
use crate::rundir::{Column, fields};

/// The streams `nmpsim dram bench` measures, in order.
pub(super) const BENCH_STREAMS: [StreamKind; 2] = [StreamKind::Random, StreamKind::Sequential];

/// The median of `v` (the mean of the middle two for an even count); `None`
/// for none.
pub(super) fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The native engine's speed over each reference engine's, per stream, for
/// the rows of one bench (empty unless native and a reference both ran).
/// Each ratio compares two runs of the same round; with several rounds, each
/// round's ratios and their medians.
pub(super) fn bench_ratios(rows: &[BenchRow], rounds: u32) -> String {
    let rate = |engine: EngineKind, stream: &str, round: u32| {
        rows.iter()
            .find(|r| r.engine == engine && r.stream == stream && r.round == round)
            .map(|r| r.sim_requests_per_s)
    };
    let ratio = |reference: EngineKind, stream: &str, round: u32| {
        Some(rate(EngineKind::Native, stream, round)? / rate(reference, stream, round)?)
    };
    let mut out = String::new();
    for reference in [EngineKind::Dramsim3, EngineKind::Ramulator] {
        let line = |round: Option<u32>| -> Vec<String> {
            BENCH_STREAMS
                .iter()
                .filter_map(|kind| {
                    let stream = kind.to_string();
                    let x = match round {
                        Some(r) => ratio(reference, &stream, r)?,
                        None => {
                            let each: Vec<f64> = (1..=rounds)
                                .filter_map(|r| ratio(reference, &stream, r))
                                .collect();
                            median(&each)?
                        }
                    };
                    Some(format!("{stream} {x:.1}x"))
                })
                .collect()
        };
        let name = reference.name();
        if rounds == 1 {
            let parts = line(Some(1));
            if !parts.is_empty() {
                out.push_str(&format!(
                    "native / {name}: {} (requests/s, this run)\n",
                    parts.join(", ")
                ));
            }
            continue;
        }
        for round in 1..=rounds {
            let parts = line(Some(round));
            if !parts.is_empty() {
                out.push_str(&format!(
                    "native / {name}, round {round}: {}\n",
                    parts.join(", ")
                ));
            }
        }
        let parts = line(None);
        if !parts.is_empty() {
            out.push_str(&format!(
                "native / {name}, median of {rounds} rounds: {} (requests/s, each round's ratio)\n",
                parts.join(", ")
            ));
        }
    }
    out
}

#[derive(Serialize)]
pub(super) struct BenchRow {
    /// The round (1 to `--repeat`) that measured this row.
    pub(super) round: u32,
    pub(super) engine: EngineKind,
    pub(super) stream: String,
    pub(super) requests: u64,
    pub(super) cycles: u64,
    pub(super) wall_s: f64,
    pub(super) sim_requests_per_s: f64,
    pub(super) sim_cycles_per_s: f64,
    pub(super) bandwidth_gbps: f64,
}

pub(super) fn bench(b: BenchArgs) -> Result<ExitCode> {
    let engines = engines_of(&b.engines, "--engines")?;
    let cfg = b.dram.config()?;
    // Bad sizes fail before the run directory exists.
    for kind in BENCH_STREAMS {
        synthetic(&StreamSpec::new(kind, b.requests), cfg.capacity_bytes()).map_err(flag_error)?;
    }
    let rd = RunDir::create(b.output.out.as_deref(), "dram-bench")?;
    let mut owned: Vec<String> = EngineKind::ALL
        .iter()
        .flat_map(|e| BENCH_STREAMS.map(|k| format!("engine-{}-{k}/", e.name())))
        .collect();
    owned.push("bench.csv".into());
    rd.remove_earlier(&owned)?;
    rd.write_config(
        "dram bench",
        &serde_json::json!({
            "requests": b.requests,
            "repeat": b.repeat,
            // (Every round's streams, as `nmpsim dram --stream random|sequential`
            // with its defaults give them.)
            "streams": BENCH_STREAMS
                .iter()
                .map(|k| StreamSpec::new(*k, b.requests))
                .collect::<Vec<_>>(),
            "dram": &cfg,
            "engines": &engines
        }),
    )?;
    let rounds = b.repeat;
    let mut rows = Vec::new();
    for round in 1..=rounds {
        for &engine in &engines {
            for kind in BENCH_STREAMS {
                let spec = StreamSpec::new(kind, b.requests);
                let src = synthetic(&spec, cfg.capacity_bytes())?.map(Ok);
                let label = if rounds == 1 {
                    format!("{engine} {kind}")
                } else {
                    format!("round {round}/{rounds}: {engine} {kind}")
                };
                let pb = rundir::progress(b.requests, &label, b.output.quiet);
                let tick = |n: u64| pb.set_position(n);
                let opts = RunOptions {
                    work_dir: Some(rd.path().join(format!("engine-{}-{kind}", engine.name()))),
                    ..RunOptions::default()
                };
                let s = simulate(engine, &cfg, src, &opts, Some(&tick))?;
                pb.finish_and_clear();
                rows.push(BenchRow {
                    round,
                    engine,
                    stream: kind.to_string(),
                    requests: b.requests,
                    cycles: s.cycles,
                    wall_s: s.wall_s,
                    sim_requests_per_s: s.sim_requests_per_s,
                    sim_cycles_per_s: s.sim_cycles_per_s,
                    bandwidth_gbps: s.bandwidth_gbps,
                });
            }
        }
    }
    rd.write_results("dram bench", &rows)?;
    let columns: [Column<&BenchRow>; 8] = fields![
        engine,
        stream,
        requests,
        cycles,
        wall_s,
        sim_requests_per_s,
        sim_cycles_per_s,
        round,
    ];
    rd.write_table("bench.csv", &columns, &rows)?;
    let mut text = format!(
        "{} reads of 64 B on {} (one engine instance per run, one thread{})\n",
        b.requests,
        cfg.name,
        if rounds > 1 {
            format!("; {rounds} rounds, the engines taking turns in each")
        } else {
            String::new()
        },
    );
    // (A round column when more than one round ran.)
    let round = usize::from(rounds > 1);
    let header = [
        "round",
        "engine",
        "stream",
        "cycles",
        "wall s",
        "requests/s",
        "cycles/s",
    ];
    let mut t = nmpsim_traces::TextTable::new(&header[1 - round..]).left(&[round, round + 1]);
    for r in &rows {
        let cells = [
            r.round.to_string(),
            r.engine.name().to_string(),
            r.stream.clone(),
            r.cycles.to_string(),
            format!("{:.2}", r.wall_s),
            format!("{:.0}", r.sim_requests_per_s),
            format!("{:.0}", r.sim_cycles_per_s),
        ];
        t.row(cells.into_iter().skip(1 - round));
    }
    text.push_str(&t.render());
    if rounds > 1 {
        text.push_str(&format!("median of {rounds} rounds:\n"));
        let mut m = nmpsim_traces::TextTable::new(["engine", "stream", "requests/s"]).left(&[0, 1]);
        for &engine in &engines {
            for kind in BENCH_STREAMS {
                let stream = kind.to_string();
                let each: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.engine == engine && r.stream == stream)
                    .map(|r| r.sim_requests_per_s)
                    .collect();
                if let Some(med) = median(&each) {
                    m.row([engine.name().to_string(), stream, format!("{med:.0}")]);
                }
            }
        }
        text.push_str(&m.render());
    }
    text.push_str(&bench_ratios(&rows, rounds));
    rd.finish_and_print("dram bench", &rows, &text, b.output.json)?;
    Ok(ExitCode::SUCCESS)
}
