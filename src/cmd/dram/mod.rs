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

mod bench;
mod simulate;

use bench::bench;
use simulate::{flag_error, run_sim};

const EXAMPLES: &str = "Examples:
  nmpsim dram --engine dramsim3 --preset DDR4-3200-x8 --stream random --requests 100000
  nmpsim dram --engine both --preset DDR4-2400-x8 --stream sequential --requests 200000
  nmpsim dram --engine ramulator --stream strided:4096 --write-fraction 0.3 --json
  printf '0x0 R\\n0x40 W\\n0x1000 R\\n' > addrs.txt     # an address trace of your own (see --trace)
  nmpsim dram --trace addrs.txt --preset DDR4-2400-x16-2R --out runs/my-trace
  nmpsim dram --embedding-trace kaggle.nmpt --dim 16 --phase both
  nmpsim dram --engine native,ramulator --preset DDR4-3200-x8-2R --write-fraction 0.3 --check-timing
  nmpsim dram --engine all --preset HBM-1000 --stream random   # HBM on all three engines
  nmpsim dram presets
  nmpsim dram config --engine ramulator --preset DDR4-3200-x8
  nmpsim dram --engine all --timing tRCD=24,tRP=24 --stream random --check-timing
  nmpsim dram --dram-config my-ddr4.toml --stream random   # a preset plus overrides (docs/dram.md)
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
    /// The DRAM standard of a configuration, as data: its commands, timings and
    /// constraint table, each rule's latency in cycles for the configuration.
    #[command(
        after_help = "Examples:\n  nmpsim dram standard\n  nmpsim dram standard --preset DDR4-2400-x16 --timing tRP=20   # tRC follows\n  nmpsim dram standard --dram-config my-ddr4.toml --json"
    )]
    Standard {
        #[command(flatten)]
        dram: crate::cmd::DramArgs,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Print the configuration file generated for an engine.
    #[command(
        after_help = "Examples:\n  nmpsim dram config --engine dramsim3 --preset DDR4-2400-x16 > ddr4.ini\n  nmpsim dram config --engine ramulator --preset DDR4-3200-x8-2R\n  nmpsim dram config --engine native   # the JEDEC timing table in cycles\n  nmpsim dram config --engine native --timing tRCD=24,tRP=24\n  nmpsim dram config --dram-config my-ddr4.toml"
    )]
    Config {
        /// Engine: dramsim3 (its .ini), ramulator (its config) or native (the
        /// timing table it derives).
        #[arg(long, default_value = "dramsim3", value_name = "ENGINE", value_parser = crate::cmd::engine_arg)]
        engine: EngineKind,
        #[command(flatten)]
        dram: crate::cmd::DramArgs,
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
    #[command(flatten)]
    dram: crate::cmd::DramArgs,
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
    /// Keep Ramulator's per-rank command traces in the run directory.
    #[arg(long)]
    keep_command_traces: bool,
    /// Replay each engine's commands through the independent JEDEC checker
    /// (docs/dram.md) and report every timing rule they break: native's
    /// command log against the configuration's table, Ramulator's command traces
    /// against the table Ramulator was built with. DRAMsim3 exposes no
    /// command log and is not checked, nor is Ramulator on HBM (its trace
    /// names a bank within its bank group only). Native's commands are checked as they
    /// issue, so any run length will do; Ramulator's traces are read whole
    /// (about 24 bytes a command in memory, some 3 commands per random read).
    #[arg(long)]
    check_timing: bool,
    #[command(flatten)]
    output: crate::cmd::RunOutputArgs,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Requests per run.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    requests: u64,
    #[command(flatten)]
    dram: crate::cmd::DramArgs,
    /// Engines to measure (comma-separated, each once).
    #[arg(long, default_value = "native,dramsim3,ramulator", value_name = "LIST")]
    engines: String,
    /// Measure every engine and stream this many times, the engines taking
    /// turns within each round, and report each round's ratios and their
    /// median (wall-clock speed drifts on a shared host).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    #[command(flatten)]
    output: crate::cmd::RunOutputArgs,
}

pub fn run(c: DramCommand) -> Result<ExitCode> {
    match c.sub {
        Some(DramSub::Presets { json }) => presets(json),
        Some(DramSub::Standard { dram, json }) => standard(&dram, json),
        Some(DramSub::Config { engine, dram }) => {
            let cfg = dram.config()?;
            match engine {
                EngineKind::Dramsim3 => out!("{}", cfg.dramsim3_ini("dramsim3"))?,
                EngineKind::Native => out!("{}", nmpsim_sim::native::describe(&cfg))?,
                EngineKind::Ramulator => {
                    out!("{}", cfg.ramulator_cfg("<run dir>/ramulator-")?)?;
                    let d = cfg.ramulator_timing_differences();
                    if !d.is_empty() {
                        outln!(
                            "# Ramulator's built-in {} timing departs from JEDEC:",
                            cfg.ramulator_speed().unwrap_or("?")
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
    burst_bytes: u64,
    ramulator_speed: Option<&'static str>,
    ramulator_timing_differences: Vec<String>,
}

#[derive(Serialize)]
struct StandardListing {
    standard: &'static str,
    source: &'static str,
    configuration: String,
    commands: Vec<&'static str>,
    timings: Vec<TimingRow>,
    derived: Vec<String>,
    constraints: Vec<ConstraintListing>,
    refresh_gap: String,
    presets: Vec<String>,
}

#[derive(Serialize)]
struct TimingRow {
    name: &'static str,
    meaning: &'static str,
    cycles: u32,
}

#[derive(Serialize)]
struct ConstraintListing {
    rule: String,
    level: &'static str,
    sibling: bool,
    window: u32,
    preceding: Vec<&'static str>,
    following: Vec<&'static str>,
    latency: String,
    cycles: u64,
    /// Added by the configuration, not the standard's own.
    added: bool,
}

/// `dram standard`: the configuration's standard and its evaluated rules.
fn standard(dram: &crate::cmd::DramArgs, json: bool) -> Result<ExitCode> {
    let cfg = dram.config()?;
    let s = cfg.standard();
    // The rules are the standard's rows, then the configuration's.
    let own = s.rows().count();
    let latencies = s
        .rows()
        .map(|r| r.latency.to_string())
        .chain(cfg.constraints.iter().map(|c| c.latency.clone()));
    let names = |v: &[nmpsim_sim::jedec::Command]| v.iter().map(|c| c.name()).collect::<Vec<_>>();
    let listing = StandardListing {
        standard: s.name,
        source: s.source,
        configuration: cfg.name.clone(),
        commands: s.commands.iter().map(|c| c.name()).collect(),
        timings: s
            .timings
            .iter()
            .map(|t| TimingRow {
                name: t.name,
                meaning: t.meaning,
                cycles: cfg.timing[t.name],
            })
            .collect(),
        derived: s
            .derived
            .iter()
            .map(|(n, e)| format!("{n} = {e}"))
            .collect(),
        constraints: cfg
            .rules()
            .iter()
            .zip(latencies)
            .enumerate()
            .map(|(i, (r, latency))| ConstraintListing {
                rule: r.rule.clone(),
                level: r.level.name(),
                sibling: r.sibling,
                window: r.window,
                preceding: names(&r.preceding),
                following: names(&r.following),
                latency,
                cycles: r.cycles,
                added: i >= own,
            })
            .collect(),
        refresh_gap: format!("{} = {} cycles", s.refresh_gap, cfg.refresh_gap()),
        presets: (s.preset_names)(),
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&listing)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} ({}), evaluated for {} (tCK {} ns)",
        listing.standard,
        listing.source,
        listing.configuration,
        cfg.timing.tck_ns
    )?;
    outln!("commands: {}", listing.commands.join(" "))?;
    let mut t = nmpsim_traces::TextTable::new(["timing", "cycles", "meaning"]).left(&[0, 2]);
    for r in &listing.timings {
        t.row([
            r.name.to_string(),
            r.cycles.to_string(),
            r.meaning.to_string(),
        ]);
    }
    outln!("\n{}", t.render().trim_end())?;
    if !listing.derived.is_empty() {
        outln!("derived: {}", listing.derived.join(", "))?;
    }
    let mut t = nmpsim_traces::TextTable::new([
        "rule",
        "level",
        "preceding",
        "following",
        "latency",
        "cycles",
    ])
    .left(&[0, 1, 2, 3, 4]);
    for c in &listing.constraints {
        let mut level = c.level.to_string();
        if c.sibling {
            level += " (another)";
        }
        let mut preceding = c.preceding.join(" ");
        if c.window > 1 {
            preceding = format!("{preceding} ({}th last)", c.window);
        }
        let mut rule = c.rule.clone();
        if c.added {
            rule += " +";
        }
        t.row([
            rule,
            level,
            preceding,
            c.following.join(" "),
            c.latency.clone(),
            c.cycles.to_string(),
        ]);
    }
    outln!(
        "\nconstraints: after PRECEDING at a node of LEVEL, FOLLOWING at the same node (another, for `(another)`) waits LATENCY\n{}",
        t.render().trim_end()
    )?;
    if listing.constraints.iter().any(|c| c.added) {
        outln!("(+ added by the configuration)")?;
    }
    outln!(
        "refresh: at most {} between refreshes of a rank",
        listing.refresh_gap
    )?;
    outln!("presets: {}", listing.presets.join(", "))?;
    Ok(ExitCode::SUCCESS)
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
                burst_bytes: c.burst_bytes(),
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
    let mut t = nmpsim_traces::TextTable::new([
        "preset",
        "capacity",
        "devices",
        "peak GB/s",
        "act-bound GB/s",
        "row B",
        "burst B",
        "Ramulator departs from JEDEC",
    ])
    .left(&[0, 7]);
    for r in rows {
        t.row([
            r.name.to_string(),
            if r.capacity_bytes >= 1 << 30 {
                format!("{} GiB", r.capacity_bytes >> 30)
            } else {
                format!("{} MiB", r.capacity_bytes >> 20)
            },
            r.devices_per_rank.to_string(),
            format!("{:.1}", r.peak_bandwidth_gbps),
            format!("{:.2}", r.activation_bound_gbps),
            r.row_bytes.to_string(),
            r.burst_bytes.to_string(),
            if r.ramulator_timing_differences.is_empty() {
                "-".to_string()
            } else {
                r.ramulator_timing_differences.join(", ")
            },
        ]);
    }
    outln!("{}", t.render().trim_end())?;
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
    use super::bench::median;

    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[40.0, 10.0, 30.0, 20.0]), Some(25.0));
        assert_eq!(median(&[7.5]), Some(7.5));
        assert_eq!(median(&[]), None);
    }
}
