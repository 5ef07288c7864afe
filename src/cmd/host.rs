//! `nmpsim host`: the modelled host CPUs (`nmpsim_dlrm::host`): their
//! presets, a host in full or as a file, and the model's time of a CPU
//! primitive on one.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use nmpsim_dlrm::host::{self, HostConfig};
use serde::Serialize;

use crate::rundir;

#[derive(Subcommand)]
pub enum HostCommand {
    /// The host presets, one line each.
    #[command(after_help = "Examples:\n  \
        nmpsim host presets\n  \
        nmpsim host presets --json")]
    Presets(JsonArg),
    /// One host in full: a preset or a host file (.toml).
    #[command(after_help = "Examples:\n  \
        nmpsim host show dgx1\n  \
        nmpsim host show dgx1 --toml > my-host.toml   # a host file to edit\n  \
        nmpsim host show my-host.toml --json")]
    Show(ShowArgs),
    /// The model's time of a CPU gather-reduce and scatter on a host
    /// (docs/host.md): modelled, not measured.
    #[command(after_help = "Examples:\n  \
        nmpsim host estimate dgx1 --lookups 163840 --bags 2048 --dim 64\n  \
        nmpsim host estimate spr-2s --lookups 163840 --bags 2048 --unique 120000 --channels 4\n  \
        nmpsim host estimate dgx1 --lookups 163840 --bags 2048 --llc-hit 0.3 --cores 8 --json")]
    Estimate(EstimateArgs),
}

#[derive(Args)]
pub struct JsonArg {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ShowArgs {
    /// A preset (`nmpsim host presets`) or a host file (.toml).
    host: String,
    /// Print JSON.
    #[arg(long, conflicts_with = "toml")]
    json: bool,
    /// Print the host as a host file.
    #[arg(long)]
    toml: bool,
}

#[derive(Args)]
pub struct EstimateArgs {
    /// A preset (`nmpsim host presets`) or a host file (.toml).
    host: String,
    /// Lookups of the gather-reduce (one table).
    #[arg(long, value_parser = crate::cmd::positive_arg::<usize>)]
    lookups: usize,
    /// Bags of the gather-reduce.
    #[arg(long, value_parser = crate::cmd::positive_arg::<usize>)]
    bags: usize,
    /// Values a row.
    #[arg(long, default_value_t = 64, value_parser = crate::cmd::positive_arg::<usize>)]
    dim: usize,
    /// Unique rows the scatter updates (default: as many as the lookups).
    #[arg(long)]
    unique: Option<usize>,
    /// Optimizer state values a row (0 SGD, 1 row-wise Adagrad, dim Adagrad).
    #[arg(long, default_value_t = 0)]
    state: usize,
    /// Share of the row reads the last-level cache serves, in [0, 1].
    #[arg(long, default_value_t = 0.0)]
    llc_hit: f64,
    /// Cores the primitive runs on (default: all the host's).
    #[arg(long, value_parser = crate::cmd::positive_arg::<u32>)]
    cores: Option<u32>,
    /// Memory channels a socket, in place of the host's.
    #[arg(long, value_parser = crate::cmd::positive_arg::<u32>)]
    channels: Option<u32>,
    /// DDR transfer rate, MT/s, in place of the host's.
    #[arg(long, value_parser = crate::cmd::positive_arg::<u32>)]
    ddr_mts: Option<u32>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(c: HostCommand) -> Result<ExitCode> {
    match c {
        HostCommand::Presets(a) => presets(a),
        HostCommand::Show(a) => show(a),
        HostCommand::Estimate(a) => estimate(a),
    }
}

#[derive(Serialize)]
struct PresetLine {
    name: String,
    cores: u32,
    peak_gbps: f64,
    llc_mib: f64,
    description: String,
}

fn presets(a: JsonArg) -> Result<ExitCode> {
    let lines: Vec<PresetLine> = HostConfig::NAMES
        .iter()
        .map(|n| {
            let h = HostConfig::preset(n).expect("a preset");
            PresetLine {
                name: h.name.clone(),
                cores: h.cores(),
                peak_gbps: h.peak_gbps(),
                llc_mib: h.sockets as f64 * h.llc_mib_per_socket,
                description: h.description.clone(),
            }
        })
        .collect();
    if a.json {
        outln!("{}", rundir::results_json("host presets", &lines)?)?;
    } else {
        for l in &lines {
            outln!(
                "{:<8} {:>4} cores  {:>6.1} GB/s peak  {:>5.0} MiB LLC  {}",
                l.name,
                l.cores,
                l.peak_gbps,
                l.llc_mib,
                l.description
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show(a: ShowArgs) -> Result<ExitCode> {
    let h = HostConfig::named_or_file(&a.host)?;
    if a.toml {
        outln!("{}", h.to_toml().trim_end())?;
    } else if a.json {
        outln!("{}", rundir::results_json("host show", &h)?)?;
    } else {
        outln!("{} ({})", h.name, h.description)?;
        outln!(
            "  {} sockets x {} cores at {} GHz; {} DDR channels a socket at {} MT/s: {:.1} GB/s peak",
            h.sockets,
            h.cores_per_socket,
            h.clock_ghz,
            h.channels_per_socket,
            h.ddr_mts,
            h.peak_gbps()
        )?;
        outln!(
            "  last-level cache {} MiB a socket; {} ns a line from DRAM, {} fills in flight a core",
            h.llc_mib_per_socket,
            h.memory_latency_ns,
            h.misses_per_core
        )?;
        outln!(
            "  efficiencies: stream {}, random {}, sort {} ({})",
            h.efficiency.stream,
            h.efficiency.random,
            h.efficiency.sort,
            h.calibration
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct Estimate {
    host: HostConfig,
    cores: u32,
    peak_gbps: f64,
    gather_reduce_ms: f64,
    scatter_ms: f64,
    source: &'static str,
}

fn estimate(a: EstimateArgs) -> Result<ExitCode> {
    if !(0.0..=1.0).contains(&a.llc_hit) {
        anyhow::bail!("--llc-hit {}: expected a share in [0, 1]", a.llc_hit);
    }
    let mut h = HostConfig::named_or_file(&a.host)?;
    if let Some(c) = a.channels {
        h.channels_per_socket = c;
    }
    if let Some(m) = a.ddr_mts {
        h.ddr_mts = m;
    }
    let cores = a.cores.unwrap_or(h.cores());
    if cores > h.cores() {
        anyhow::bail!("--cores {cores}: host {} has {}", h.name, h.cores());
    }
    let g = host::gather_reduce_work(a.lookups, a.bags, a.dim, false, a.llc_hit);
    let s = host::scatter_work(a.unique.unwrap_or(a.lookups), a.dim, a.state, a.llc_hit);
    let e = Estimate {
        cores,
        peak_gbps: h.peak_gbps(),
        gather_reduce_ms: h.primitive_ns(&g, cores) / 1e6,
        scatter_ms: h.primitive_ns(&s, cores) / 1e6,
        source: "modelled",
        host: h,
    };
    if a.json {
        outln!("{}", rundir::results_json("host estimate", &e)?)?;
    } else {
        outln!(
            "host {} on {} cores, {:.1} GB/s peak ({}):",
            e.host.name,
            e.cores,
            e.peak_gbps,
            e.host.calibration
        )?;
        outln!(
            "  gather-reduce {:.3} ms (model)   scatter {:.3} ms (model)",
            e.gather_reduce_ms,
            e.scatter_ms
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
