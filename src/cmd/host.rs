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
    /// Measures every CPU primitive on this machine over a grid (RM1-RM4's
    /// lookups per bag, batches 256-4096, uniform and Zipf rows), fits the
    /// model's efficiencies, latency and call cost, reports the model's error
    /// on batch sizes held out of the fit, and installs the fitted host as
    /// `this` (runs/this-host.toml).
    #[command(after_help = "Examples:\n  \
        nmpsim host calibrate                        # about a minute at the default sizes\n  \
        nmpsim host calibrate --quick                # smaller table and fewer batches\n  \
        nmpsim host calibrate --out runs/cal --json\n  \
        nmpsim host calibrate --refit runs/cal --out runs/cal-refit   # the same points, this build's model\n  \
        nmpsim train --model rm1 --rows 100000 --mode tcast --iters 20 --host this")]
    Calibrate(CalibrateArgs),
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// Rows of the measured table (RM1-RM4's 1M).
    #[arg(long, value_parser = crate::cmd::positive_arg::<u64>)]
    rows: Option<u64>,
    /// Values a row.
    #[arg(long, default_value_t = 64, value_parser = crate::cmd::positive_arg::<usize>)]
    dim: usize,
    /// Rounds over the grid, 4096 / batch timed batches per point a round (2 to 8); a point's time is its batches' lower quartile (default 15; --quick 3).
    #[arg(long, value_parser = crate::cmd::positive_arg::<usize>)]
    reps: Option<usize>,
    /// Untimed batches of a point's shape before its timed ones each round, so that a timed batch follows its own shape as a training step follows the step before (0: none).
    #[arg(long, default_value_t = 1)]
    warm_batches: usize,
    /// Fewer batches per point and a smaller bandwidth pass: seconds.
    #[arg(long)]
    quick: bool,
    /// Leave runs/this-host.toml (the host `this`) as it is.
    #[arg(long)]
    no_install: bool,
    /// Fit an earlier calibration's points again (its run directory) with
    /// this build's model: the same batches drawn from its seeds, no kernel
    /// run, its measured times; so two models are compared on the same
    /// measurements. Installs nothing.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["rows", "reps", "quick", "warm_batches"])]
    refit: Option<std::path::PathBuf>,
    /// Run directory (default runs/host-calibrate-<time>-<pid>).
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
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

/// The host `--host NAME|FILE` names, with `--host-cores` (all sockets
/// together), `--host-channels` (a socket) and `--host-ddr-mts` in place of
/// its own; `None` without `--host`.
pub fn resolve(
    name: Option<&str>,
    cores: Option<u32>,
    channels: Option<u32>,
    ddr_mts: Option<u32>,
) -> Result<Option<HostConfig>> {
    let Some(name) = name else {
        return Ok(None);
    };
    let mut h =
        HostConfig::named_or_file(name).map_err(|e| anyhow::anyhow!("--host {name}: {e}"))?;
    if let Some(c) = cores {
        if c % h.sockets != 0 {
            anyhow::bail!(
                "--host-cores {c}: host {} has {} sockets; expected a multiple of them",
                h.name,
                h.sockets
            );
        }
        h.cores_per_socket = c / h.sockets;
    }
    if let Some(c) = channels {
        h.channels_per_socket = c;
    }
    if let Some(m) = ddr_mts {
        h.ddr_mts = m;
    }
    // A preset's efficiencies follow its cores, clock and peak: scaled again
    // from the reference for the ones given here.
    if HostConfig::NAMES.contains(&h.name.as_str()) && !name.ends_with(".toml") {
        h = h.scaled_from(
            &HostConfig::reference(),
            nmpsim_dlrm::host::REFERENCE_CALIBRATION_DIR,
        );
    }
    Ok(Some(h))
}

pub fn run(c: HostCommand) -> Result<ExitCode> {
    match c {
        HostCommand::Presets(a) => presets(a),
        HostCommand::Show(a) => show(a),
        HostCommand::Estimate(a) => estimate(a),
        HostCommand::Calibrate(a) => calibrate(a),
    }
}

/// An earlier calibration's run directory: its options, peak, points and
/// unfitted host (or this machine's, when it kept none, and a note saying so).
fn earlier_calibration(
    dir: &std::path::Path,
) -> Result<(
    nmpsim_dlrm::hostcal::CalibrationOptions,
    f64,
    Vec<nmpsim_dlrm::hostcal::EarlierPoint>,
    Option<HostConfig>,
)> {
    use nmpsim_dlrm::hostcal::{CalibrationOptions, EarlierPoint};
    let read = |name: &str| -> Result<serde_json::Value> {
        let p = dir.join(name);
        let text = std::fs::read_to_string(&p).map_err(|e| {
            anyhow::anyhow!(
                "--refit: {}: {e} (expected a `host calibrate` run directory)",
                p.display()
            )
        })?;
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("--refit: {}: not JSON: {e}", p.display()))
    };
    let bad = |file: &str, field: &str, what: &str| {
        anyhow::anyhow!(
            "--refit: {}: field `{field}`: {what}",
            dir.join(file).display()
        )
    };
    let config = read("config.json")?;
    if config["command"] != "host calibrate" {
        return Err(bad("config.json", "command", "expected \"host calibrate\""));
    }
    let o: CalibrationOptions = serde_json::from_value(config["config"].clone())
        .map_err(|e| bad("config.json", "config", &e.to_string()))?;
    let results = read("results.json")?;
    let c = &results["results"]["calibration"];
    let peak = c["peak_gbps"]
        .as_f64()
        .filter(|p| *p > 0.0)
        .ok_or_else(|| {
            bad(
                "results.json",
                "results.calibration.peak_gbps",
                "expected a positive number",
            )
        })?;
    let list = c["points"].as_array().ok_or_else(|| {
        bad(
            "results.json",
            "results.calibration.points",
            "expected an array",
        )
    })?;
    let mut points = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let field = |k: &str| format!("results.calibration.points[{i}].{k}");
        let num = |k: &str| {
            p[k].as_f64()
                .ok_or_else(|| bad("results.json", &field(k), "expected a number"))
        };
        points.push(EarlierPoint {
            primitive: serde_json::from_value(p["primitive"].clone())
                .map_err(|e| bad("results.json", &field("primitive"), &e.to_string()))?,
            lookups_per_bag: num("lookups_per_bag")? as u32,
            batch: num("batch")? as usize,
            distribution: p["distribution"]
                .as_str()
                .ok_or_else(|| bad("results.json", &field("distribution"), "expected a string"))?
                .to_string(),
            measured_ns: num("measured_ns")?,
            // (Kept from this build on; an earlier run's points have none.)
            times_ns: match &p["times_ns"] {
                serde_json::Value::Null => Vec::new(),
                v => serde_json::from_value(v.clone())
                    .map_err(|e| bad("results.json", &field("times_ns"), &e.to_string()))?,
            },
        });
    }
    let base = serde_json::from_value::<HostConfig>(c["base"].clone()).ok();
    Ok((o, peak, points, base))
}

fn calibrate(a: CalibrateArgs) -> Result<ExitCode> {
    use nmpsim_dlrm::hostcal::{self, CalibrationOptions};
    let d = CalibrationOptions::default();
    let earlier = a.refit.as_deref().map(earlier_calibration).transpose()?;
    let o = match &earlier {
        Some((o, ..)) => o.clone(),
        None => CalibrationOptions {
            rows: a.rows.unwrap_or(d.rows),
            dim: a.dim,
            reps: a.reps.unwrap_or(if a.quick { 3 } else { d.reps }),
            warm_batches: a.warm_batches,
            peak_bytes: if a.quick { 256 << 20 } else { d.peak_bytes },
            ..d
        },
    };
    let rd = rundir::RunDir::create(a.out.as_deref(), "host calibrate")?;
    rd.remove_earlier(&["calibration.csv", "errors.csv", "host.toml"])?;
    rd.write_config("host calibrate", &o)?;
    let quiet = a.quiet || a.json;
    let pb = rundir::progress(0, "calibrate", quiet);
    let mut tick = |done: usize, total: usize| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
    };
    let mut refit_note = None;
    let c = match earlier {
        None => hostcal::calibrate(&o, &mut tick)?,
        Some((o, peak, points, base)) => {
            let dir = a.refit.as_deref().unwrap_or(std::path::Path::new("?"));
            let base = match base {
                Some(b) => {
                    refit_note = Some(format!(
                        "refit of {}: its measured times and its unfitted host, this build's model",
                        dir.display()
                    ));
                    b
                }
                None => {
                    refit_note = Some(format!(
                        "refit of {}: its measured times, this build's model, and this machine's cores and cache (the run kept no unfitted host)",
                        dir.display()
                    ));
                    hostcal::this_host_unfitted(peak)
                }
            };
            hostcal::refit(&o, peak, base, &points, &mut tick)?
        }
    };
    pb.finish_and_clear();
    let no_install = a.no_install || a.refit.is_some();
    let rows: Vec<Vec<String>> = c
        .points
        .iter()
        .map(|p| {
            vec![
                p.point.primitive.as_str().to_string(),
                p.point.lookups_per_bag.to_string(),
                p.point.batch.to_string(),
                p.point.distribution.clone(),
                if p.point.held_out { "held-out" } else { "fit" }.to_string(),
                format!("{:.4}", p.point.measured_ns / 1e6),
                format!("{:.4}", p.model_ns / 1e6),
                format!("{:.4}", p.error),
                p.point
                    .split_half
                    .map_or(String::new(), |v| format!("{v:.4}")),
            ]
        })
        .collect();
    rd.write_csv(
        "calibration.csv",
        &[
            "primitive",
            "lookups_per_bag",
            "batch",
            "distribution",
            "set",
            "measured_ms",
            "model_ms",
            "error",
            "split_half",
        ],
        &rows,
    )?;
    let erows: Vec<Vec<String>> = c
        .errors
        .iter()
        .map(|e| {
            vec![
                e.primitive.as_str().to_string(),
                format!("{:.4}", e.fit_mean_abs_error),
                format!("{:.4}", e.held_out_mean_abs_error),
                format!("{:.4}", e.held_out_max_abs_error),
                e.held_out_points.to_string(),
                e.held_out_max_split_half
                    .map_or(String::new(), |v| format!("{v:.4}")),
            ]
        })
        .collect();
    rd.write_csv(
        "errors.csv",
        &[
            "primitive",
            "fit_mean_abs_error",
            "held_out_mean_abs_error",
            "held_out_max_abs_error",
            "held_out_points",
            "held_out_max_split_half",
        ],
        &erows,
    )?;
    let toml = c.host.to_toml();
    rd.write_file("host.toml", toml.as_bytes())?;
    let installed = if no_install {
        None
    } else {
        let path = HostConfig::this_path();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        rundir::write_atomic(&path, toml.as_bytes())?;
        Some(path.display().to_string())
    };
    let mut text = String::new();
    use std::fmt::Write as _;
    let h = &c.host;
    if let Some(n) = &refit_note {
        let _ = writeln!(text, "{n}");
    }
    let _ = writeln!(text, "host `this`: {}", h.description);
    let _ = writeln!(
        text,
        "fitted: efficiencies stream {:.3}, random {:.3}, sort {:.3}; latency {:.2} ns ({} fills a core); {:.1} us a kernel call, {:.1} ns a core an output row",
        h.efficiency.stream,
        h.efficiency.random,
        h.efficiency.sort,
        h.memory_latency_ns,
        h.misses_per_core,
        h.call_overhead_us,
        h.item_ns
    );
    let _ = writeln!(
        text,
        "points: {} ({} of them held out: batches {:?}); measured in {:.1} s, fitted in {:.1} s\n",
        c.points.len(),
        c.points.iter().filter(|p| p.point.held_out).count(),
        o.held_out_batches,
        c.measure_wall_s,
        c.fit_wall_s
    );
    let mut t = nmpsim_traces::TextTable::new([
        "primitive",
        "fit mean |err|",
        "held-out mean |err|",
        "held-out max |err|",
        "within 15%",
        "held-out max split-half",
    ])
    .left(&[0]);
    for e in &c.errors {
        t.row([
            e.primitive.as_str().to_string(),
            format!("{:.1}%", e.fit_mean_abs_error * 100.0),
            format!("{:.1}%", e.held_out_mean_abs_error * 100.0),
            format!("{:.1}%", e.held_out_max_abs_error * 100.0),
            if e.held_out_max_abs_error <= 0.15 {
                "yes"
            } else {
                "no"
            }
            .to_string(),
            e.held_out_max_split_half
                .map_or("-".into(), |v| format!("{:.1}%", v * 100.0)),
        ]);
    }
    let _ = write!(text, "{}", t.render());
    let _ = writeln!(
        text,
        "\n(error: model over measured, less 1; split-half: the lower quartiles of a point's alternate batches apart, over its time, this machine's own repeatability; per point in calibration.csv)"
    );
    match &installed {
        Some(p) => {
            let _ = writeln!(text, "installed as host `this`: {p}");
        }
        None => {
            let why = if a.refit.is_some() {
                "--refit"
            } else {
                "--no-install"
            };
            let _ = writeln!(text, "not installed ({why}); the host file is host.toml");
        }
    }
    #[derive(Serialize)]
    struct Out<'a> {
        calibration: &'a hostcal::Calibration,
        installed: Option<String>,
    }
    let out = Out {
        calibration: &c,
        installed,
    };
    rd.write_results("host calibrate", &out)?;
    rd.finish_and_print("host calibrate", &out, &text, a.json)?;
    Ok(ExitCode::SUCCESS)
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
    // The presets, the calibrated machine they scale from, and this machine
    // once `nmpsim host calibrate` has fitted it.
    let mut hosts: Vec<HostConfig> = HostConfig::NAMES
        .iter()
        .map(|n| HostConfig::preset(n))
        .collect::<Result<_, _>>()?;
    hosts.push(HostConfig::reference());
    if HostConfig::this_path().is_file() {
        hosts.push(HostConfig::this()?);
    }
    let lines: Vec<PresetLine> = hosts
        .into_iter()
        .map(|h| PresetLine {
            name: h.name.clone(),
            cores: h.cores(),
            peak_gbps: h.peak_gbps(),
            llc_mib: h.sockets as f64 * h.llc_mib_per_socket,
            description: h.description.clone(),
        })
        .collect();
    if a.json {
        outln!("{}", rundir::results_json("host presets", &lines)?)?;
    } else {
        for l in &lines {
            outln!(
                "{:<9} {:>4} cores  {:>6.1} GB/s peak  {:>6.1} MiB LLC  {}",
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
            "  efficiencies: stream {:.4}, random {:.4}, sort {:.4}; factors on the memory time: expand-coalesce {:.4}, casted-gather-reduce {:.4}, scatter {:.4}",
            h.efficiency.stream,
            h.efficiency.random,
            h.efficiency.sort,
            h.factor.expand_coalesce,
            h.factor.casted_gather_reduce,
            h.factor.scatter
        )?;
        outln!(
            "  {} us a kernel call, {} ns a core an output row",
            h.call_overhead_us,
            h.item_ns
        )?;
        outln!("  ({})", h.calibration)?;
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
    let h = resolve(Some(&a.host), None, a.channels, a.ddr_mts)?.expect("a host was named");
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
