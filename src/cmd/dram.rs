//! `nmpsim dram …`: run DDR4 DRAM engines on synthetic streams, address traces
//! or embedding traces, list presets, print generated engine configs, and
//! measure engine speed. The work is in `nmpsim-sim`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use nmpsim_sim::run::{BoxedSource, RequestSource, RunResults, TimingCheck, run_engine};
use nmpsim_sim::source::{EmbeddingPhase, StreamKind, StreamSpec, synthetic};
use nmpsim_sim::{
    AddressMapping, DramConfig, EngineKind, EventEnergy, RunOptions, SimError, preset_names,
    simulate,
};
use serde::Serialize;

use crate::rundir::{self, RunDir};

const EXAMPLES: &str = "Examples:
  nmpsim dram --engine dramsim3 --preset DDR4-3200-x8 --stream random --requests 100000
  nmpsim dram --engine both --preset DDR4-2400-x8 --stream sequential --requests 200000
  nmpsim dram --engine ramulator --stream strided:4096 --write-fraction 0.3 --json
  printf '0x0 R\\n0x40 W\\n0x1000 R\\n' > addrs.txt     # an address trace of your own (see --trace)
  nmpsim dram --trace addrs.txt --preset DDR4-2400-x16-2R --out runs/my-trace
  nmpsim dram --embedding-trace kaggle.nmpt --dim 16 --phase both
  nmpsim dram --engine native,ramulator --preset DDR4-3200-x8-2R --write-fraction 0.3 --check-timing
  nmpsim dram presets
  nmpsim dram config --engine ramulator --preset DDR4-3200-x8
  nmpsim dram bench --requests 1000000";

/// `nmpsim dram`: runs a simulation, or one of the subcommands.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, after_help = EXAMPLES)]
pub struct DramCommand {
    #[command(subcommand)]
    sub: Option<DramSub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum DramSub {
    /// List the DDR4 presets with their capacity, peak and activation-bound bandwidth (every rank's, at most the peak).
    #[command(after_help = "Examples:\n  nmpsim dram presets\n  nmpsim dram presets --json")]
    Presets {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the configuration file generated for an engine.
    #[command(
        after_help = "Examples:\n  nmpsim dram config --engine dramsim3 --preset DDR4-2400-x16 > ddr4.ini\n  nmpsim dram config --engine ramulator --preset DDR4-3200-x8-2R\n  nmpsim dram config --engine native   # the JEDEC timing table in cycles"
    )]
    Config {
        /// Engine: dramsim3 (its .ini), ramulator (its config) or native (the
        /// timing table it derives).
        #[arg(long, default_value = "dramsim3", value_name = "ENGINE")]
        engine: String,
        /// DDR4 preset (see `nmpsim dram presets`).
        #[arg(long, default_value = "DDR4-3200-x8", value_name = "PRESET", value_parser = crate::cmd::preset_arg)]
        preset: String,
    },
    /// Engine speed: simulated requests and cycles per second on random and sequential reads.
    #[command(
        after_help = "Examples:\n  nmpsim dram bench\n  nmpsim dram bench --requests 1000000 --preset DDR4-3200-x8 --json\n  nmpsim dram bench --engines native,dramsim3 --requests 10000000 --repeat 3"
    )]
    Bench(BenchArgs),
}

#[derive(Args, Debug, Clone)]
struct RunArgs {
    /// Engine: dramsim3, ramulator, native, a comma-separated list naming each engine once, both (the two references) or all (runs each and compares).
    #[arg(long, default_value = "dramsim3", value_name = "ENGINE")]
    engine: String,
    /// DDR4 preset (see `nmpsim dram presets`).
    #[arg(long, default_value = "DDR4-3200-x8", value_name = "PRESET", value_parser = crate::cmd::preset_arg)]
    preset: String,
    /// Address mapping override, most significant field first (e.g. ro-ra-ba-co-bg).
    #[arg(long, value_name = "FIELDS")]
    mapping: Option<String>,
    /// Synthetic stream: sequential, random or strided:BYTES.
    #[arg(long, value_name = "KIND", conflicts_with_all = ["trace", "embedding_trace"])]
    stream: Option<String>,
    /// Requests of a synthetic stream.
    #[arg(long, default_value_t = 100_000, value_name = "N",
          conflicts_with_all = ["trace", "embedding_trace"])]
    requests: u64,
    /// Fraction of writes in a synthetic stream.
    #[arg(long, default_value_t = 0.0, value_name = "F",
          conflicts_with_all = ["trace", "embedding_trace"])]
    write_fraction: f64,
    /// Seed of a synthetic stream.
    #[arg(long, default_value_t = 0, value_name = "S",
          conflicts_with_all = ["trace", "embedding_trace"])]
    seed: u64,
    /// Lowest address of a synthetic stream (or of the embedding tables); decimal or 0x hex.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "BYTES",
        value_parser = bytes_arg,
        conflicts_with = "trace"
    )]
    base: u64,
    /// Bytes a synthetic stream covers, decimal or 0x hex [default: capacity - base].
    #[arg(long, value_name = "BYTES", value_parser = bytes_arg, conflicts_with_all = ["trace", "embedding_trace"])]
    footprint: Option<u64>,
    /// Address trace file: one `ADDRESS R|W` per line (docs/dram-traces.md). A pipe (`/dev/stdin`) can be read by one engine only.
    #[arg(long, value_name = "FILE", conflicts_with = "embedding_trace")]
    trace: Option<PathBuf>,
    /// Embedding trace (.nmpt) whose lookups become 64 B row reads.
    #[arg(long, value_name = "FILE")]
    embedding_trace: Option<PathBuf>,
    /// Embedding dimension (f32 elements per row) for --embedding-trace [default: 64].
    #[arg(long, value_name = "D")]
    dim: Option<usize>,
    /// Embedding pass of --embedding-trace: forward (gather reads), update
    /// (read+write unique rows), both [default: forward].
    #[arg(long, value_name = "PHASE")]
    phase: Option<String>,
    /// Use only the first N batches of the embedding trace.
    #[arg(long, value_name = "N")]
    max_batches: Option<u64>,
    /// Most requests in flight at once (the front end's outstanding-request limit), 1 to 1048576.
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = crate::cmd::window_arg)]
    window: usize,
    /// Run directory [default: runs/dram-<time>-<pid>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Keep Ramulator's per-rank command traces in the run directory.
    #[arg(long)]
    keep_command_traces: bool,
    /// Replay each engine's commands through the independent JEDEC checker
    /// (docs/dram.md) and report every timing rule they break: native's
    /// command log against the preset's table, Ramulator's command traces
    /// against the table Ramulator was built with. DRAMsim3 exposes no
    /// command log and is not checked. Native's commands are checked as they
    /// issue, so any run length will do; Ramulator's traces are read whole
    /// (about 24 bytes a command in memory, some 3 commands per random read).
    #[arg(long)]
    check_timing: bool,
    /// Print the results object as JSON on stdout (no table).
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Requests per run.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    requests: u64,
    /// DDR4 preset (see `nmpsim dram presets`).
    #[arg(long, default_value = "DDR4-3200-x8", value_name = "PRESET", value_parser = crate::cmd::preset_arg)]
    preset: String,
    /// Engines to measure (comma-separated, each once).
    #[arg(long, default_value = "native,dramsim3,ramulator", value_name = "LIST")]
    engines: String,
    /// Measure every engine and stream this many times, the engines taking
    /// turns within each round, and report each round's ratios and their
    /// median (wall-clock speed drifts on a shared host).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Run directory [default: runs/dram-bench-<time>-<pid>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(c: DramCommand) -> Result<ExitCode> {
    match c.sub {
        Some(DramSub::Presets { json }) => presets(json),
        Some(DramSub::Config { engine, preset }) => {
            let cfg = DramConfig::preset(&preset)?;
            match engine.parse::<EngineKind>()? {
                EngineKind::Dramsim3 => out!("{}", cfg.dramsim3_ini("dramsim3"))?,
                EngineKind::Native => out!("{}", nmpsim_sim::native::describe(&cfg))?,
                EngineKind::Ramulator => {
                    out!("{}", cfg.ramulator_cfg("<run dir>/ramulator-"))?;
                    let d = cfg.ramulator_timing_differences();
                    if !d.is_empty() {
                        outln!(
                            "# Ramulator's built-in {} timing departs from JEDEC:",
                            cfg.ramulator_speed()
                        )?;
                        for (p, ours, theirs) in d {
                            outln!("#   {p}: JEDEC {ours} cycles, Ramulator {theirs}")?;
                        }
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(DramSub::Bench(b)) => bench(b),
        None => run_sim(c.run),
    }
}

fn engines_of(s: &str, flag: &str) -> Result<Vec<EngineKind>> {
    if s.eq_ignore_ascii_case("both") {
        // The two reference engines.
        return Ok(vec![EngineKind::Dramsim3, EngineKind::Ramulator]);
    }
    if s.eq_ignore_ascii_case("all") {
        return Ok(EngineKind::ALL.to_vec());
    }
    let kinds: Vec<EngineKind> = s
        .split(',')
        .map(|e| {
            let e = e.trim();
            if e.is_empty() {
                bail!("{flag} {s}: an empty engine name; separate the engines with single commas, with none at either end");
            }
            if ["all", "both"].iter().any(|w| e.eq_ignore_ascii_case(w)) {
                bail!("{flag} {s}: `{e}` stands alone; give it by itself, or list the engines");
            }
            e.parse::<EngineKind>().map_err(anyhow::Error::from)
        })
        .collect::<Result<_>>()?;
    for (i, k) in kinds.iter().enumerate() {
        if kinds[..i].contains(k) {
            bail!("{flag} {s}: {k} is named twice; name each engine once");
        }
    }
    Ok(kinds)
}

#[derive(Serialize)]
struct PresetRow {
    name: String,
    capacity_bytes: u64,
    ranks: u32,
    devices_per_rank: u32,
    tck_ns: f64,
    peak_bandwidth_gbps: f64,
    activation_bound_gbps: f64,
    row_bytes: u64,
    ramulator_speed: &'static str,
    ramulator_timing_differences: Vec<String>,
}

fn presets(json: bool) -> Result<ExitCode> {
    let rows: Vec<PresetRow> = preset_names()
        .iter()
        .map(|n| {
            let c = DramConfig::preset(n).expect("listed presets resolve");
            PresetRow {
                name: c.name.clone(),
                capacity_bytes: c.capacity_bytes(),
                ranks: c.ranks,
                devices_per_rank: c.org.devices_per_rank(),
                tck_ns: c.timing.tck_ns,
                peak_bandwidth_gbps: c.peak_bandwidth_gbps(),
                activation_bound_gbps: c.activation_bound_gbps(),
                row_bytes: c.org.rank_row_bytes(),
                ramulator_speed: c.ramulator_speed(),
                ramulator_timing_differences: c
                    .ramulator_timing_differences()
                    .iter()
                    .map(|(p, a, b)| format!("{p} {a}->{b}"))
                    .collect(),
            }
        })
        .collect();
    if json {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<18} {:>9} {:>7} {:>10} {:>14} {:>9}  Ramulator departs from JEDEC",
        "preset",
        "capacity",
        "devices",
        "peak GB/s",
        "act-bound GB/s",
        "row B"
    )?;
    for r in rows {
        outln!(
            "{:<18} {:>6} GiB {:>7} {:>10.1} {:>14.2} {:>9}  {}",
            r.name,
            r.capacity_bytes >> 30,
            r.devices_per_rank,
            r.peak_bandwidth_gbps,
            r.activation_bound_gbps,
            r.row_bytes,
            if r.ramulator_timing_differences.is_empty() {
                "-".to_string()
            } else {
                r.ramulator_timing_differences.join(", ")
            }
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Where the requests come from, from the flags.
fn source_of(a: &RunArgs) -> Result<RequestSource> {
    if let Some(p) = &a.trace {
        return Ok(RequestSource::AddressTrace { path: p.clone() });
    }
    if let Some(p) = &a.embedding_trace {
        let phase: EmbeddingPhase = a
            .phase
            .as_deref()
            .unwrap_or("forward")
            .parse()
            .map_err(flag_error)?;
        return Ok(RequestSource::EmbeddingTrace {
            path: p.clone(),
            dim: a.dim.unwrap_or(64),
            base: a.base,
            phase,
            max_batches: a.max_batches,
        });
    }
    let kind: StreamKind = a
        .stream
        .as_deref()
        .unwrap_or("random")
        .parse()
        .map_err(flag_error)?;
    Ok(RequestSource::Stream(StreamSpec {
        kind,
        requests: a.requests,
        write_fraction: a.write_fraction,
        seed: a.seed,
        base: a.base,
        footprint_bytes: a.footprint,
    }))
}

/// A source's parameter error, named by the flag that sets it
/// (`footprint_bytes` is `--footprint`); other errors as they are.
fn flag_error(e: SimError) -> anyhow::Error {
    if let SimError::Param { name, what } = &e {
        let flag = match name.as_str() {
            "footprint_bytes" => Some("--footprint"),
            "base" => Some("--base"),
            "write_fraction" => Some("--write-fraction"),
            "requests" => Some("--requests"),
            "stream" | "stride_bytes" => Some("--stream"),
            "dim" => Some("--dim"),
            "phase" => Some("--phase"),
            _ => None,
        };
        if let Some(flag) = flag {
            return anyhow::anyhow!("{flag}: {what}");
        }
    }
    e.into()
}

#[derive(Serialize)]
struct RunConfig<'a> {
    engines: Vec<EngineKind>,
    dram: &'a DramConfig,
    source: &'a RequestSource,
    options: &'a RunOptions,
    event_energy_pj: EventEnergy,
    ramulator_timing_differences: Vec<(&'static str, u32, u32)>,
}

fn run_sim(a: RunArgs) -> Result<ExitCode> {
    let engines = engines_of(&a.engine, "--engine")?;
    let mut cfg = DramConfig::preset(&a.preset)?;
    if let Some(m) = &a.mapping {
        cfg.mapping = AddressMapping::parse(m)?;
    }
    if a.window == 0 {
        bail!("invalid parameter `--window`: must be at least 1");
    }
    if a.embedding_trace.is_none() {
        // (Options of an embedding trace, which clap's `requires` does not
        // enforce beside this command's subcommands.)
        for (flag, given) in [
            ("--dim", a.dim.is_some()),
            ("--phase", a.phase.is_some()),
            ("--max-batches", a.max_batches.is_some()),
        ] {
            if given {
                bail!("{flag} applies to --embedding-trace only");
            }
        }
    }
    if a.max_batches == Some(0) {
        bail!("--max-batches 0: expected at least 1 batch of the embedding trace");
    }
    if a.keep_command_traces && !engines.contains(&EngineKind::Ramulator) && !a.quiet {
        eprintln!(
            "note: --keep-command-traces keeps Ramulator's command traces, and --engine {} does not run Ramulator",
            a.engine
        );
    }
    let source = source_of(&a)?;
    if let RequestSource::AddressTrace { path } = &source {
        if path.is_dir() {
            bail!(
                "--trace {}: is a directory; expected an address trace file",
                path.display()
            );
        }
        let meta =
            std::fs::metadata(path).with_context(|| format!("--trace {}", path.display()))?;
        if !meta.is_file() && engines.len() > 1 {
            bail!(
                "--trace {}: not a regular file (a pipe?), so it can be read only once, and each of the {} engines reads the whole trace; save it to a file first, or run one engine",
                path.display(),
                engines.len()
            );
        }
    }
    // Open once up front and read the first request, so that a missing or
    // empty input, or a bad first line, fails before anything is written.
    // The first engine goes on with that same stream (a pipe can be read
    // only once); the others open the source again.
    let (mut opened, first_len) = source.open(&cfg).map_err(flag_error)?;
    let mut first_source: Option<(BoxedSource, Option<u64>)> = match opened.next() {
        Some(Ok(op)) => Some((Box::new(std::iter::once(Ok(op)).chain(opened)), first_len)),
        Some(Err(e)) => return Err(e.into()),
        None => match &source {
            RequestSource::AddressTrace { path } => bail!(
                "{}: no requests (the trace is empty, or only blank and comment lines)",
                path.display()
            ),
            RequestSource::EmbeddingTrace { path, .. } => {
                bail!("{}: no lookups to replay", path.display())
            }
            RequestSource::Stream(_) => bail!("the synthetic stream has no requests"),
        },
    };
    let rd = RunDir::create(a.out.as_deref(), "dram")?;
    let mut owned: Vec<String> = EngineKind::ALL
        .iter()
        .flat_map(|e| {
            [
                format!("engine-{}/", e.name()),
                format!("jedec-{}.txt", e.name()),
            ]
        })
        .collect();
    owned.push("results.csv".into());
    rd.remove_earlier(&owned)?;
    let mut opts = RunOptions {
        window: a.window,
        keep_command_traces: a.keep_command_traces,
        ..RunOptions::default()
    };
    rd.write_config(
        "dram",
        &RunConfig {
            engines: engines.clone(),
            dram: &cfg,
            source: &source,
            options: &opts,
            event_energy_pj: EventEnergy::of(&cfg),
            ramulator_timing_differences: cfg.ramulator_timing_differences(),
        },
    )?;
    let mut runs = Vec::new();
    let mut timing_checks = Vec::new();
    for &engine in &engines {
        let (src, len) = match first_source.take() {
            Some(opened) => opened,
            None => source.open(&cfg).map_err(flag_error)?,
        };
        let work_dir = rd.path().join(format!("engine-{}", engine.name()));
        opts.work_dir = Some(work_dir.clone());
        let pb = match len {
            Some(n) => rundir::progress(n, engine.name(), a.quiet),
            None => spinner(engine.name(), a.quiet),
        };
        let tick = |n: u64| pb.set_position(n);
        let failed = || {
            format!(
                "{engine} run failed (run directory {})",
                rd.path().display()
            )
        };
        let (stats, check) = run_engine(engine, &cfg, src, &opts, a.check_timing, Some(&tick))
            .with_context(failed)?;
        if a.check_timing {
            timing_checks.push(match check {
                Some(c) => {
                    // Every violation, one a line, beside the results.
                    let file = (!c.violations.is_empty()).then(|| TimingCheck::file_name(engine));
                    if let Some(f) = &file {
                        let path = rd.path().join(f);
                        std::fs::write(&path, TimingCheck::violations_text(&c.violations))
                            .with_context(|| format!("writing {}", path.display()))?;
                    }
                    TimingCheck::of(engine, &c, file)
                }
                None => TimingCheck::unchecked(engine),
            });
        }
        pb.finish_and_clear();
        runs.push(stats);
    }
    let results = RunResults::of(runs, timing_checks);
    rd.write_results("dram", &results)?;
    let (header, rows) = results.stats_table();
    rd.write_csv("results.csv", &header, &rows)?;
    let summary = results.summary_text(&cfg, &source);
    rd.write_summary(&summary)?;
    rd.finish_and_print("dram", &results, &summary, a.json)?;
    Ok(ExitCode::SUCCESS)
}

fn spinner(what: &str, quiet: bool) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let pb = ProgressBar::new_spinner();
    if quiet {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} {spinner} {pos} requests {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(what.to_string());
    pb
}

/// The streams `nmpsim dram bench` measures, in order.
const BENCH_STREAMS: [StreamKind; 2] = [StreamKind::Random, StreamKind::Sequential];

/// The median of `v` (the mean of the middle two for an even count); `None`
/// for none.
fn median(v: &[f64]) -> Option<f64> {
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
fn bench_ratios(rows: &[BenchRow], rounds: u32) -> String {
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
struct BenchRow {
    /// The round (1 to `--repeat`) that measured this row.
    round: u32,
    engine: EngineKind,
    stream: String,
    requests: u64,
    cycles: u64,
    wall_s: f64,
    sim_requests_per_s: f64,
    sim_cycles_per_s: f64,
    bandwidth_gbps: f64,
}

fn bench(b: BenchArgs) -> Result<ExitCode> {
    let engines = engines_of(&b.engines, "--engines")?;
    let cfg = DramConfig::preset(&b.preset)?;
    // Bad sizes fail before the run directory exists.
    for kind in BENCH_STREAMS {
        synthetic(&StreamSpec::new(kind, b.requests), cfg.capacity_bytes()).map_err(flag_error)?;
    }
    let rd = RunDir::create(b.out.as_deref(), "dram-bench")?;
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
                let pb = rundir::progress(b.requests, &label, b.quiet);
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
    let csv: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.engine.to_string(),
                r.stream.clone(),
                r.requests.to_string(),
                r.cycles.to_string(),
                r.wall_s.to_string(),
                r.sim_requests_per_s.to_string(),
                r.sim_cycles_per_s.to_string(),
                r.round.to_string(),
            ]
        })
        .collect();
    rd.write_csv(
        "bench.csv",
        &[
            "engine",
            "stream",
            "requests",
            "cycles",
            "wall_s",
            "sim_requests_per_s",
            "sim_cycles_per_s",
            "round",
        ],
        &csv,
    )?;
    let round_col = |r: String| {
        if rounds > 1 {
            format!("{r:>5} ")
        } else {
            String::new()
        }
    };
    let mut text = format!(
        "{} reads of 64 B on {} (one engine instance per run, one thread{})\n{}{:<10} {:<11} {:>12} {:>9} {:>14} {:>14}\n",
        b.requests,
        cfg.name,
        if rounds > 1 {
            format!("; {rounds} rounds, the engines taking turns in each")
        } else {
            String::new()
        },
        round_col("round".into()),
        "engine",
        "stream",
        "cycles",
        "wall s",
        "requests/s",
        "cycles/s"
    );
    for r in &rows {
        text.push_str(&format!(
            "{}{:<10} {:<11} {:>12} {:>9.2} {:>14.0} {:>14.0}\n",
            round_col(r.round.to_string()),
            r.engine.name(),
            r.stream,
            r.cycles,
            r.wall_s,
            r.sim_requests_per_s,
            r.sim_cycles_per_s
        ));
    }
    if rounds > 1 {
        text.push_str(&format!("median of {rounds} rounds:\n"));
        for &engine in &engines {
            for kind in BENCH_STREAMS {
                let stream = kind.to_string();
                let each: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.engine == engine && r.stream == stream)
                    .map(|r| r.sim_requests_per_s)
                    .collect();
                if let Some(m) = median(&each) {
                    text.push_str(&format!(
                        "{:<10} {:<11} {:>14.0} requests/s\n",
                        engine.name(),
                        stream,
                        m
                    ));
                }
            }
        }
    }
    text.push_str(&bench_ratios(&rows, rounds));
    rd.write_summary(&text)?;
    rd.finish_and_print("dram bench", &rows, &text, b.json)?;
    Ok(ExitCode::SUCCESS)
}

/// clap's parser of a byte count or address: decimal, or hexadecimal after
/// `0x` (as errors print addresses, and as `strided:` and traces take them).
fn bytes_arg(s: &str) -> Result<u64, String> {
    nmpsim_sim::source::parse_u64(s).ok_or_else(|| {
        format!("expected a decimal or 0x-prefixed hexadecimal byte count, not `{s}`")
    })
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[40.0, 10.0, 30.0, 20.0]), Some(25.0));
        assert_eq!(median(&[7.5]), Some(7.5));
        assert_eq!(median(&[]), None);
    }
}
