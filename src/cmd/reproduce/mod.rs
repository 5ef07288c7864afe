//! `nmpsim reproduce`: the Tensor Casting paper's figures and tables, one
//! command each. What each item runs and how it reads the runs is
//! `nmpsim_reproduce`; this module runs the item's embedded sweeps
//! (exactly as `nmpsim sweep` runs a spec file, so they resume), then writes the
//! item's CSV, plots and markdown report.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use nmpsim_experiments::plot::write_chart;
use nmpsim_reproduce::{
    self as reproduce, Inputs, Item, Outcome, PowerModel, Size, items, load_sweep, markdown,
};
use nmpsim_sim::DramConfig;
use serde::Serialize;

use crate::rundir::{self, write_atomic};

mod files;

use files::{
    check_out_dir, describe_sweep, print_item, write_failed_item, write_item, write_report,
};

const EXAMPLES: &str = "Examples:
  nmpsim reproduce fig6                  # quick (the default): minutes on 2 cores
  nmpsim reproduce table1 fig6 fig5b
  nmpsim reproduce all                   # every item, quick sizes -> runs/reproduce-quick/
  nmpsim reproduce all --full --engine native   # the paper's sizes: ~55 min, >10 GB of memory
  nmpsim reproduce --list
  nmpsim reproduce fig4 fig12 fig13 --host dgx1   # also with the paper's host modelled

Each item writes <OUT>/<item>/<item>.csv, <item>-*.svg/.png and <item>.md (the
paper's value beside ours, qualitative checks, and where every number comes
from: measured, simulated or modelled); <OUT>/REPORT.md joins the items run so
far. The runs are sweeps under <OUT>/sweeps/ (see docs/sweeps.md): running the
command again reuses every finished run. Items: docs/reproducing.md.";

/// `nmpsim reproduce`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct ReproduceArgs {
    /// Items to reproduce (fig5b, fig6, table1, fig4, fig12 ... fig17, link, scars-table1,
    /// fae-hot, scars-growth, cdlrm-window) or `all`.
    #[arg(value_name = "ITEM", required_unless_present = "list")]
    items: Vec<String>,
    /// Small sizes that finish in minutes on a 2-core machine (the default).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The paper's sizes (batch 2048, 1M-row tables): about 55 minutes with --engine native, every training iteration simulated (on dramsim3 the pool simulations take 17-26x as long, docs/performance.md), and over 10 GB of memory for RM2's tables.
    #[arg(long)]
    full: bool,
    /// Output directory [default: runs/reproduce-quick or runs/reproduce-full].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// DRAM engine of the simulated pool in `nmp run` and `train` runs
    /// (dramsim3, ramulator, native) [default: each command's own, dramsim3].
    #[arg(long, value_name = "ENGINE")]
    engine: Option<String>,
    /// Also run every training item with its CPU primitives on this modelled host (a preset
    /// of `nmpsim host presets`, or a host file): the item's report gets a second table and
    /// its checks again, labelled with the host, beside the measured ones and the paper's.
    #[arg(long, value_name = "NAME|FILE")]
    host: Option<String>,
    /// Runs at once [default: CPUs; runs whose CPU times are measured (training) or that need much memory (--full's kernels traffic), always one at a time].
    #[arg(long, short, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// List the items and the sweeps each runs (those of --full with it); run nothing.
    #[arg(long, conflicts_with_all = ["items", "engine", "jobs", "out"])]
    list: bool,
    /// Print a summary JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bars or per-run messages (an item that fails or is
    /// incomplete is still reported).
    #[arg(long, short)]
    quiet: bool,
}

/// In a reproduction's output directory: what tells it from a directory
/// that is not one (see [`check_out_dir`]).
const MARK: &str = ".nmpsim-reproduce";
/// How `REPORT.md` begins.
const REPORT_TITLE: &str = "# Tensor Casting, reproduced by nmpsim";

#[derive(Serialize)]
struct ItemSummary {
    item: String,
    title: String,
    status: String,
    error: Option<String>,
    checks: usize,
    checks_holding: usize,
    files: Vec<String>,
    claims: Vec<ClaimSummary>,
}

#[derive(Serialize)]
struct ClaimSummary {
    /// The threshold's id (docs/reproducing.md, "Thresholds").
    id: String,
    claim: String,
    paper: String,
    /// The threshold: the paper's number with its tolerance.
    threshold: String,
    ours: String,
    holds: bool,
    /// `finding`, or `identity` for a check whose outcome the formulas fix.
    kind: String,
}

#[derive(Serialize)]
struct Summary {
    size: String,
    out: String,
    items: Vec<ItemSummary>,
    report: String,
    wall_s: f64,
}

fn selected(names: &[String]) -> Result<Vec<&'static Item>> {
    let mut out: Vec<&'static Item> = Vec::new();
    for n in names {
        if n.eq_ignore_ascii_case("all") {
            for it in items() {
                if !out.iter().any(|x| x.id == it.id) {
                    out.push(it);
                }
            }
            continue;
        }
        let Some(it) = reproduce::item(n) else {
            bail!(
                "unknown item `{n}`; expected one of: {}, all (see `nmpsim reproduce --list`)",
                items().iter().map(|i| i.id).collect::<Vec<_>>().join(", ")
            );
        };
        if !out.iter().any(|x| x.id == it.id) {
            out.push(it);
        }
    }
    Ok(out)
}

/// Rank powers from the pool's DRAM preset (the paper's Table I: DDR4-3200).
fn power_model() -> Result<PowerModel> {
    let preset = "DDR4-3200-x8";
    let cfg = DramConfig::preset(preset)?;
    let dev = cfg.org.devices_per_rank() as f64;
    let p = &cfg.power;
    Ok(PowerModel {
        cpu_active_w: 270.0,
        cpu_idle_w: 40.0,
        gpu_active_w: 300.0,
        gpu_idle_w: 40.0,
        ranks: 32,
        rank_idle_w: dev * p.vdd_v * p.idd2n_ma * 1e-3,
        sources: vec![
            "CPU busy 270 W: two Xeon E5-2698 v4 (the paper's DGX-1) at their 135 W TDP (Intel's data sheet)".into(),
            "CPU idle 40 W: 20 W a socket, an assumption (about 15% of TDP for an idle Broadwell-EP socket in package C-states), not a measurement".into(),
            "GPU busy 300 W: V100 SXM2 TDP (NVIDIA's data sheet)".into(),
            "GPU idle 40 W: an assumption (a V100 SXM2's usual idle reading in nvidia-smi), not a measurement".into(),
            format!(
                "pool between primitives: {preset}, {dev} devices x {} V x IDD2N {} mA a rank (the preset's data-sheet currents, as the engines' background energy uses)",
                p.vdd_v, p.idd2n_ma
            ),
        ],
    })
}

pub fn run(a: ReproduceArgs) -> Result<ExitCode> {
    let size = if a.full { Size::Full } else { Size::Quick };
    if a.list {
        let mut list = Vec::new();
        for it in items() {
            let sweeps: Vec<String> = (it.sweeps)(size)
                .iter()
                .map(|s| s.name.to_string())
                .collect();
            if !a.json {
                outln!("{:<7} {}", it.id, it.title)?;
                outln!("        paper: {}", it.paper)?;
                for def in (it.sweeps)(size) {
                    outln!("        sweep {}", describe_sweep(&def))?;
                }
            }
            let runs: Vec<String> = (it.sweeps)(size).iter().map(describe_sweep).collect();
            list.push(serde_json::json!({
                "id": it.id,
                "title": it.title,
                "paper": it.paper,
                "sweeps": sweeps,
                "runs": runs,
            }));
        }
        if a.json {
            let v = serde_json::json!({ "size": size.as_str(), "items": list });
            outln!("{}", serde_json::to_string_pretty(&v)?)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let chosen = selected(&a.items)?;
    // (One spelling per engine: it names the sweeps' directories.)
    // (Parsed here, not as the flags are read, so that `--list --engine X`
    // is refused as a conflict whatever X is.)
    let engine = match &a.engine {
        Some(e) => Some(crate::cmd::engine_arg(e).map_err(|m| anyhow::anyhow!("--engine: {m}"))?),
        None => None,
    }
    .map(|e| e.name().to_string());
    // (Checked before anything runs; its name tags the sweeps and checks.)
    let host = match &a.host {
        Some(h) => {
            let cfg = nmpsim_dlrm::host::HostConfig::named_or_file(h)
                .map_err(|e| anyhow::anyhow!("--host {h}: {e}"))?;
            let tag: String = cfg
                .name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            Some((h.clone(), tag))
        }
        None => None,
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(format!("reproduce-{}", size.as_str())));
    check_out_dir(&out)?;
    fs::create_dir_all(out.join("sweeps"))
        .with_context(|| format!("cannot create {}", out.display()))?;
    // Held to the end: two reproductions never write one directory at once.
    let _lock = rundir::lock_run_dir(&out)?;
    write_atomic(&out.join(MARK), b"")?;
    let power = power_model()?;
    let started = Instant::now();
    let mut ran: BTreeSet<String> = BTreeSet::new();
    let mut sweeps_ok = true;
    let mut summaries = Vec::new();
    let mut stdout_error = None;

    for it in &chosen {
        if !a.quiet {
            eprintln!("== {} ({})", it.title, it.id);
        }
        let mut sweeps = BTreeMap::new();
        let mut host_sweeps = BTreeMap::new();
        let mut defs: Vec<(reproduce::SweepDef, bool)> = Vec::new();
        for def in (it.sweeps)(size) {
            if let Some((h, _)) = &host
                && let Some(hd) = reproduce::with_host(def.clone(), h)
            {
                defs.push((
                    reproduce::SweepDef {
                        name: def.name,
                        toml: hd.toml,
                        max_jobs: hd.max_jobs,
                    },
                    true,
                ));
            }
            defs.push((def, false));
        }
        // (The measured runs first, as without --host.)
        defs.sort_by_key(|(_, on_host)| *on_host);
        for (def, on_host) in defs {
            let def = match &engine {
                Some(e) => reproduce::with_engine(def, e),
                None => def,
            };
            // Sweeps on another engine keep their own directory.
            let dir_name = match &engine {
                Some(e) if def.toml.contains("engine = ") => format!("{}-{e}", def.name),
                _ => def.name.to_string(),
            };
            let dir_name = match (&host, on_host) {
                (Some((_, tag)), true) => format!("{dir_name}-host-{tag}"),
                _ => dir_name,
            };
            let dir = out.join("sweeps").join(&dir_name);
            let spec_path = out.join("sweeps").join(format!("{dir_name}.toml"));
            if ran.insert(dir_name.clone()) {
                write_atomic(&spec_path, def.toml.as_bytes())?;
                let jobs = match (a.jobs, def.max_jobs) {
                    (Some(j), Some(m)) => Some(j.min(m)),
                    (j, m) => j.or(m),
                };
                let code = crate::cmd::sweep::run_spec(&spec_path, &dir, jobs, a.quiet)
                    .with_context(|| format!("sweep {} of {}", def.name, it.id))?;
                sweeps_ok &= code == ExitCode::SUCCESS;
            }
            let runs = load_sweep(&dir, &def.toml, &spec_path.display().to_string())
                .map_err(|e| anyhow::anyhow!("{}: {e}", spec_path.display()))?;
            if on_host {
                host_sweeps.insert(def.name.to_string(), runs);
            } else {
                sweeps.insert(def.name.to_string(), runs);
            }
        }
        // Runs that did not complete leave their rows out of the item's
        // table and plots: the item says so, and is not complete.
        let mut missing: Vec<String> = Vec::new();
        for (name, runs) in sweeps.iter().chain(&host_sweeps) {
            for r in runs.iter().filter(|r| !r.completed) {
                missing.push(format!("`{name}` run {}: {}", r.index, r.error));
            }
        }
        let inputs = Inputs {
            size,
            power: power.clone(),
            engine: engine.clone(),
            sweeps,
        };
        // With --host, the training items are analysed again on the host's
        // runs, and the two outcomes go in one report.
        let analysed = match (&host, host_sweeps.is_empty()) {
            (Some((_, tag)), false) => {
                let on_host = Inputs {
                    size,
                    power: power.clone(),
                    engine: engine.clone(),
                    sweeps: std::mem::take(&mut host_sweeps),
                };
                match ((it.analyse)(&inputs), (it.analyse)(&on_host)) {
                    (Ok(m), Ok(h)) => Ok(files::with_host_outcome(m, h, tag)?),
                    (Err(e), _) => Err(e),
                    (_, Err(e)) => Err(format!("on host {tag}: {e}")),
                }
            }
            _ => (it.analyse)(&inputs),
        };
        let s = match analysed {
            Ok(mut o) => {
                if !missing.is_empty() {
                    o.notes.insert(
                        0,
                        format!(
                            "**Incomplete**: {} run(s) did not complete, and their rows are missing from the table, the checks and the plots ({}). Re-running the same command runs them again.",
                            missing.len(),
                            missing.join("; ")
                        ),
                    );
                }
                let on_host = host
                    .as_ref()
                    .filter(|_| o.checks.iter().any(|c| c.id.contains("@host-")))
                    .map(|(h, _)| h.as_str());
                let mut s = write_item(&out, it, size, engine.as_deref(), on_host, &o)?;
                if !missing.is_empty() {
                    s.status = "incomplete".into();
                    s.error = Some(format!("{} run(s) did not complete", missing.len()));
                }
                s
            }
            Err(e) => {
                if !a.quiet {
                    eprintln!("{}: cannot analyse: {e}", it.id);
                }
                // The item's report says so, rather than an earlier run's
                // report standing in REPORT.md as this run's.
                write_failed_item(&out, it, size, engine.as_deref(), &e)?;
                ItemSummary {
                    item: it.id.into(),
                    title: it.title.into(),
                    status: "failed".into(),
                    error: Some(e),
                    checks: 0,
                    checks_holding: 0,
                    files: Vec::new(),
                    claims: Vec::new(),
                }
            }
        };
        // REPORT.md joins the items done so far: an interrupted run keeps
        // the reports of the items it finished.
        write_report(&out)?;
        // (An item that did not complete is reported even with -q. A stdout
        // that cannot be written ends no item: the error comes at the end.)
        if !a.json && (!a.quiet || s.status != "completed") && stdout_error.is_none() {
            stdout_error = print_item(&s).err();
        }
        summaries.push(s);
    }

    let report = write_report(&out)?;
    if let Some(e) = stdout_error {
        return Err(e.into());
    }
    let summary = Summary {
        size: size.as_str().into(),
        out: out.display().to_string(),
        items: summaries,
        report: report.display().to_string(),
        wall_s: started.elapsed().as_secs_f64(),
    };
    if a.json {
        outln!("{}", rundir::results_json("reproduce", &summary)?)?;
    } else {
        let held: usize = summary.items.iter().map(|i| i.checks_holding).sum();
        let total: usize = summary.items.iter().map(|i| i.checks).sum();
        let count = |st: &str| summary.items.iter().filter(|i| i.status == st).count();
        let not_done: Vec<String> = [
            ("failed", count("failed")),
            ("incomplete", count("incomplete")),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(st, n)| format!("{n} {st}"))
        .collect();
        let not_done = if not_done.is_empty() {
            String::new()
        } else {
            format!(" ({})", not_done.join(", "))
        };
        outln!(
            "{}{not_done}, {held} of {total} checks hold, in {:.0} s; report: {}",
            crate::cmd::plural(summary.items.len(), "item", "items"),
            summary.wall_s,
            report.display()
        )?;
    }
    let failed = summary.items.iter().any(|i| i.status != "completed");
    Ok(if failed || !sweeps_ok {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
