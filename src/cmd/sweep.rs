//! `nmpsim sweep`: run a design-space sweep from a TOML spec, one child process
//! of this binary per run, and `nmpsim sweep merge` to join shard outputs.
//! What a sweep is (spec, expansion, hashes, shards, the results table) lives
//! in `nmpsim-experiments`; this module starts processes and writes files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, CommandFactory, Subcommand};
use nmpsim_experiments::layout::{
    self, RESULTS_CSV, RUN_CONFIG, RUN_STATUS, RUN_STDERR, RUN_STDOUT, RUNS_DIR, SPEC_COPY,
    SWEEP_INFO,
};
use nmpsim_experiments::{
    Adopt, CONFIRM_ABOVE_RUNS, CommandSchema, Resume, Row, Run, RunConfig, RunStatus, Shard, Spec,
    SpecError, Status, SweepInfo, check_runs, check_spec, expand, plan_hash, results_csv,
};
use serde::Serialize;

use crate::rundir::{self, write_atomic};

const EXAMPLES: &str = "Examples:
  # (from the top of the source tree, which holds experiments/specs/)
  nmpsim sweep experiments/specs/dram-ddr4-speed.toml --dry-run
  nmpsim sweep experiments/specs/dram-ddr4-speed.toml            # writes runs/sweep-dram-ddr4-speed/
  nmpsim sweep experiments/specs/nmp-ranks.toml --jobs 1 --out runs/ranks   # --jobs 1: clean timings
  nmpsim sweep big.toml --yes --shard 2/8 --out runs/big/shard-2   # big.toml: a spec of yours
  nmpsim sweep merge runs/big runs/big/shard-*                     # once shards 1 to 8 have run
  nmpsim sweep experiments/specs/nmp-ranks.toml --plot-x ranks \
      --plot-y phases.0.report.effective_bandwidth_gbps --plot-log-x   # + SVG/PNG beside results.csv

Re-running the same command resumes: finished runs (same resolved config hash)
are kept, the others run. Exit status: 0 all runs completed, 1 some failed
(or the --plot-x plot could not be drawn), 2 the spec or arguments were rejected (nothing ran). Spec format, layout and
Slurm arrays: docs/sweeps.md.";

/// `nmpsim sweep`: run a sweep, or merge shard directories.
#[derive(Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = EXAMPLES
)]
pub struct SweepCommand {
    #[command(subcommand)]
    sub: Option<SweepSub>,
    #[command(flatten)]
    run: SweepArgs,
}

#[derive(Subcommand, Debug)]
enum SweepSub {
    /// Join shard directories of one sweep into OUT, with the results.csv an unsharded run gives.
    #[command(
        after_help = "Examples:\n  # (after `nmpsim sweep SPEC --shard K/N --out runs/big/shard-K` for each K)\n  nmpsim sweep merge runs/big runs/big/shard-1 runs/big/shard-2 runs/big/shard-3\n  nmpsim sweep merge runs/big runs/big/shard-*      # exit 1 if runs are missing"
    )]
    Merge(MergeArgs),
}

#[derive(Args, Debug)]
struct SweepArgs {
    /// The sweep spec (TOML: command, [base], [axes], [[zip]], [repeat]).
    #[arg(value_name = "SPEC", required = true)]
    spec: Option<PathBuf>,
    /// Sweep directory [default: runs/sweep-<spec name>, plus -shard-I-of-N when sharded].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Runs at once [default: CPUs]. Runs may use threads themselves; --jobs 1 gives clean timings.
    #[arg(long, short, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// List the runs and an estimate of their cost; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Start a sweep of more than 64 runs.
    #[arg(long, short)]
    yes: bool,
    /// Run only shard I of N (runs whose index modulo N is I-1).
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// Print a summary JSON on stdout (with --dry-run: the run list).
    #[arg(long)]
    json: bool,
    /// No progress bar or per-run messages.
    #[arg(long, short)]
    quiet: bool,
    /// After the sweep, plot results.csv with this column on the x axis (as `nmpsim plot`).
    #[arg(long, value_name = "COLUMN", requires = "plot_y")]
    plot_x: Option<String>,
    /// Column on the plot's y axis; repeat for several.
    #[arg(long, value_name = "COLUMN", requires = "plot_x")]
    plot_y: Vec<String>,
    /// Column whose values split the plot into series; repeat to combine.
    #[arg(long, value_name = "COLUMN", requires = "plot_x")]
    plot_group: Vec<String>,
    /// Logarithmic x axis for the plot.
    #[arg(long, requires = "plot_x")]
    plot_log_x: bool,
}

#[derive(Args, Debug)]
struct MergeArgs {
    /// Directory to write the merged sweep into (not one of the shards).
    #[arg(value_name = "OUT")]
    out: PathBuf,
    /// Shard directories of the same sweep (the same runs, metrics and columns; others are refused).
    #[arg(value_name = "DIR", required = true)]
    dirs: Vec<PathBuf>,
    /// Print a summary JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(c: SweepCommand) -> Result<ExitCode> {
    match c.sub {
        Some(SweepSub::Merge(m)) => merge(m),
        None => sweep(c.run),
    }
}

/// Runs the sweep of `spec` into `out` as `nmpsim sweep SPEC --out OUT --yes`
/// would (`nmpsim reproduce` runs its embedded specs this way).
pub(crate) fn run_spec(
    spec: &Path,
    out: &Path,
    jobs: Option<u32>,
    quiet: bool,
) -> Result<ExitCode> {
    sweep(SweepArgs {
        spec: Some(spec.to_path_buf()),
        out: Some(out.to_path_buf()),
        jobs,
        dry_run: false,
        yes: true,
        shard: None,
        json: false,
        quiet,
        plot_x: None,
        plot_y: Vec::new(),
        plot_group: Vec::new(),
        plot_log_x: false,
    })
}

/// A spec file checked against the CLI and expanded.
struct Plan {
    spec: Spec,
    text: String,
    schema: CommandSchema,
    runs: Vec<Run>,
}

fn load_plan(path: &Path) -> Result<Plan> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read spec {}", path.display()))?;
    let file = path.display().to_string();
    // Shape errors and command errors are reported together, so one edit of
    // the spec can fix them all.
    let (spec, mut errors) = Spec::parse_partial(&text, &file);
    let Some(spec) = spec else {
        bail!("{errors}");
    };
    let schema = if spec.command.first().map(String::as_str) == Some("sweep") {
        Err("a sweep cannot run `sweep` (expected a command such as dram, nmp run, train)".into())
    } else if spec.command.is_empty() {
        Err(String::new())
    } else {
        CommandSchema::resolve(&crate::Cli::command(), &spec.command)
    };
    let schema = match schema {
        Ok(s) => Some(s),
        Err(e) => {
            if !e.is_empty() {
                errors.0.push(SpecError::new(
                    &file,
                    Some(spec.command_line),
                    Some("command"),
                    e,
                ));
            }
            None
        }
    };
    if let Some(schema) = &schema
        && let Err(e) = check_spec(&spec, schema)
    {
        errors.0.extend(e.0);
    }
    errors.into_result().map_err(|e| anyhow!("{e}"))?;
    let Some(schema) = schema else {
        bail!("{file}: missing `command = \"...\"`");
    };
    let count = nmpsim_experiments::expand::run_count(&spec);
    if count > nmpsim_experiments::expand::MAX_RUNS {
        bail!(
            "{file}: the spec expands to {count} runs (the product of its axes', zips' and seeds' lengths), more than the {} a sweep may have; split it into several sweeps",
            nmpsim_experiments::expand::MAX_RUNS
        );
    }
    let runs = expand(&spec);
    check_runs(&spec, &schema, &runs).map_err(|e| anyhow!("{e}"))?;
    Ok(Plan {
        spec,
        text,
        schema,
        runs,
    })
}

/// Directories beside `out` named `<out>-shard-I-of-N`, in name order: where
/// the shards of a sweep into `out` go by default.
fn shard_dirs(out: &Path) -> Vec<PathBuf> {
    let Some(name) = out.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!("{name}{SHARD_DIR}");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&parent)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name().to_string_lossy().starts_with(&prefix)
                        && e.file_type().is_ok_and(|t| t.is_dir())
                })
                .map(|e| parent.join(e.file_name()))
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// What a shard's default directory adds to the whole sweep's, before `I-of-N`.
const SHARD_DIR: &str = "-shard-";

fn default_out(spec: &Path, shard: Shard) -> PathBuf {
    let stem = spec
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "spec".into());
    let name = if shard.is_all() {
        format!("sweep-{stem}")
    } else {
        format!("sweep-{stem}{SHARD_DIR}{}-of-{}", shard.index, shard.count)
    };
    PathBuf::from("runs").join(name)
}

#[derive(Serialize)]
struct DryRunEntry {
    index: usize,
    hash: String,
    dir: String,
    finished: Option<&'static str>,
    params: BTreeMap<String, String>,
    argv: Vec<String>,
}

#[derive(Serialize)]
struct DryRun {
    spec: String,
    command: String,
    sweep_dir: String,
    shard: String,
    runs_total: usize,
    runs_selected: usize,
    runs_to_run: usize,
    mean_wall_s: Option<f64>,
    estimated_run_s: Option<f64>,
    runs: Vec<DryRunEntry>,
}

#[derive(Serialize)]
struct Summary {
    spec: String,
    sweep_dir: String,
    shard: String,
    runs: usize,
    /// Runs already completed, reused (the summary line's "reused").
    skipped: usize,
    completed: usize,
    failed: usize,
    results_csv: String,
    wall_s: f64,
}

fn sweep(a: SweepArgs) -> Result<ExitCode> {
    let spec_path = a
        .spec
        .clone()
        .ok_or_else(|| anyhow!("missing SPEC (see `nmpsim sweep --help`)"))?;
    let plan = load_plan(&spec_path)?;
    let shard = a.shard.unwrap_or(Shard::ALL);
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out(&spec_path, shard));
    let total = plan.runs.len();
    let selected: Vec<&Run> = plan
        .runs
        .iter()
        .filter(|r| shard.selects(r.index))
        .collect();
    let jobs = a.jobs.map(|j| j as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });

    // A finished run is found in its own directory or, after a spec edit
    // gave its config another index, in the directory of its earlier index
    // (found by its hash), which a sweep then moves to the new name.
    if a.dry_run {
        let Resume { state, .. } = layout::resume(&out, &plan.runs, &selected);
        return dry_run(&a, &plan, &selected, &state, &out, shard, jobs);
    }
    if selected.len() > CONFIRM_ABOVE_RUNS && !a.yes {
        bail!(
            "this sweep has {} runs, more than {CONFIRM_ABOVE_RUNS}: pass --yes to start it (or --dry-run to list the runs and their estimated cost first)",
            selected.len()
        );
    }

    check_sweep_dir(&out)?;
    fs::create_dir_all(out.join(RUNS_DIR))
        .with_context(|| format!("cannot create sweep directory {}", out.display()))?;
    // Held until the sweep ends: what is finished is read, and runs are
    // moved and started, by this sweep alone.
    let _lock = lock_dir(&out)?;
    let Resume { state, adopt } = layout::resume(&out, &plan.runs, &selected);
    // Runs that finished, but on an input file that has changed since.
    for (r, st) in selected.iter().zip(&state) {
        if st.is_some() {
            continue;
        }
        if let Some(p) = layout::changed_input(&layout::run_dir(&out, r, total))
            && !a.quiet
        {
            eprintln!(
                "note: run {} ran on an earlier {}; it runs again",
                r.index,
                p.display()
            );
        }
    }
    for Adopt { index, from, to } in &adopt {
        // (A directory under the new name holds no finished run: an attempt
        // that was killed.)
        if to.exists() {
            fs::remove_dir_all(to).with_context(|| format!("cannot replace {}", to.display()))?;
        }
        fs::rename(from, to)
            .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))?;
        // run.json describes the run as the edited spec has it: its new index
        // and directory (the command's own files name where it ran).
        let mut config = run_config(&plan.schema, &plan.runs[*index], to);
        config.moved_from = Some(from.display().to_string());
        write_atomic(
            &to.join(RUN_CONFIG),
            serde_json::to_string_pretty(&config)?.as_bytes(),
        )?;
    }
    let info = SweepInfo {
        spec: spec_path.display().to_string(),
        command: plan.spec.command_str(),
        plan_hash: plan_hash(&plan.runs),
        runs_total: total,
        shard: shard.to_string(),
    };
    note_changes(&out, &info, &plan.runs, a.quiet);
    write_atomic(&out.join(SPEC_COPY), plan.text.as_bytes())?;
    write_atomic(
        &out.join(SWEEP_INFO),
        serde_json::to_string_pretty(&info)?.as_bytes(),
    )?;

    let todo: Vec<&Run> = selected
        .iter()
        .zip(&state)
        .filter(|(_, s)| !matches!(s.as_ref().map(|s| s.status), Some(Status::Completed)))
        .map(|(r, _)| *r)
        .collect();
    let skipped = selected.len() - todo.len();
    let exe = std::env::current_exe().context("cannot find the nmpsim binary to run")?;
    let started = Instant::now();
    let mut rows: BTreeMap<usize, Row> = BTreeMap::new();
    // The table holds every run of the spec finished in this directory, also
    // those of other shards run into it.
    for r in &plan.runs {
        if let Some(row) = layout::load_row(&layout::run_dir(&out, r, total), r) {
            rows.insert(r.index, row);
        }
    }
    if !a.quiet {
        eprintln!(
            "sweep {}: {} of `nmpsim {}`{} in {} ({} finished, {} to run, {} at a time)",
            spec_path.display(),
            crate::cmd::plural(selected.len(), "run", "runs"),
            plan.spec.command_str(),
            if shard.is_all() {
                String::new()
            } else {
                format!(" (shard {shard} of {total})")
            },
            out.display(),
            skipped,
            todo.len(),
            if todo.is_empty() {
                jobs
            } else {
                jobs.min(todo.len())
            }
        );
    }

    // Ended by SIGINT or SIGTERM: results.csv holds the runs finished so far
    // (the unfinished ones are run by the same command again).
    {
        let (out, spec, runs, quiet) = (out.clone(), plan.spec.clone(), plan.runs.clone(), a.quiet);
        crate::signals::before_exit(move || {
            // Never released: the process ends after this write, and the
            // sweep's own writes wait until then.
            let one = RESULTS_WRITE.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::forget(one);
            let rows: Vec<Row> = runs
                .iter()
                .filter_map(|r| layout::load_row(&layout::run_dir(&out, r, total), r))
                .collect();
            let written = write_results_unlocked(&out, &spec, rows.iter());
            match written {
                Ok(p) if !quiet => eprintln!(
                    "sweep: interrupted; {} finished runs in {}; the same command runs the others",
                    rows.len(),
                    p.display()
                ),
                Ok(_) => {}
                Err(e) => eprintln!("sweep: interrupted; cannot write results.csv: {e:#}"),
            }
        });
    }
    let pb = rundir::progress(todo.len() as u64, "sweep", a.quiet || a.json);
    let next = AtomicUsize::new(0);
    let inflight = Inflight::default();
    let (tx, rx) = mpsc::channel::<(usize, Result<()>)>();
    std::thread::scope(|s| -> Result<()> {
        for _ in 0..jobs.min(todo.len()) {
            let tx = tx.clone();
            let next = &next;
            let todo = &todo;
            let plan = &plan;
            let out = &out;
            let exe = &exe;
            let inflight = &inflight;
            s.spawn(move || {
                loop {
                    if inflight.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(run) = todo.get(i) else { break };
                    let rd = layout::run_dir(out, run, total);
                    let res = execute(exe, &plan.schema, run, &rd, inflight);
                    if tx.send((run.index, res)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut last_write = Instant::now();
        for (index, res) in rx {
            pb.inc(1);
            let run = &plan.runs[index];
            let rd = layout::run_dir(&out, run, total);
            if let Err(e) = res {
                // Fatal (the sweep cannot record runs): start no other run,
                // stop those under way (they count as not run, and run
                // again next time), and keep the table of what finished.
                inflight.stop_all();
                let _ = write_results(&out, &plan.spec, rows.values());
                return Err(e).with_context(|| {
                    format!(
                        "run {index} in {} (the sweep stopped, and the runs under way with it; the same command runs them again)",
                        rd.display()
                    )
                });
            }
            if let Some(row) = layout::load_row(&rd, run) {
                if row.status == Status::Failed.as_str() && !a.quiet {
                    let what = run.describe();
                    let msg = format!(
                        "run {index}{} failed: {}",
                        if what.is_empty() {
                            String::new()
                        } else {
                            format!(" ({what})")
                        },
                        if row.error.is_empty() {
                            "no message"
                        } else {
                            &row.error
                        }
                    );
                    pb.suspend(|| eprintln!("{msg}"));
                }
                rows.insert(index, row);
            }
            if last_write.elapsed() > Duration::from_secs(5) {
                write_results(&out, &plan.spec, rows.values())?;
                last_write = Instant::now();
            }
        }
        Ok(())
    })?;
    pb.finish_and_clear();

    // The final table is read back from the run directories, so it is the
    // same whether runs finished now, earlier, or in another order.
    let all_rows: Vec<Row> = plan
        .runs
        .iter()
        .filter_map(|r| layout::load_row(&layout::run_dir(&out, r, total), r))
        .collect();
    let csv_path = write_results(&out, &plan.spec, all_rows.iter())?;
    // A misspelt `metrics` pattern keeps no column: say so (also with
    // --quiet), since results.csv just lacks the columns.
    for u in nmpsim_experiments::unmatched_metric_patterns(
        &plan.spec.param_columns(),
        &all_rows,
        &plan.spec.metrics,
    ) {
        eprintln!(
            "warning: {}: metrics pattern `{}` matches no metric of any completed run, so results.csv has no column for it{}",
            spec_path.display(),
            u.pattern,
            if u.near.is_empty() {
                String::new()
            } else {
                format!(" (did you mean {}?)", u.near.join(" or "))
            }
        );
    }
    let mut plot_failed = false;
    if let Some(x) = &a.plot_x {
        // results.csv is written whatever happens here: a plot that cannot be
        // drawn (a misspelt column) is reported, and the exit status says so,
        // after the summary.
        match plot_results(&csv_path, x, &a.plot_y, &a.plot_group, a.plot_log_x) {
            Ok(files) if !a.quiet => {
                for f in files {
                    eprintln!("plot: {}", f.display());
                }
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("sweep: cannot plot {}: {e:#}", csv_path.display());
                plot_failed = true;
            }
        }
    }
    let rows: Vec<&Row> = all_rows.iter().filter(|r| shard.selects(r.index)).collect();
    let failed = rows
        .iter()
        .filter(|r| r.status == Status::Failed.as_str())
        .count();
    let completed = rows.len() - failed;
    let summary = Summary {
        spec: spec_path.display().to_string(),
        sweep_dir: out.display().to_string(),
        shard: shard.to_string(),
        runs: selected.len(),
        skipped,
        completed,
        failed,
        results_csv: csv_path.display().to_string(),
        wall_s: started.elapsed().as_secs_f64(),
    };
    if !a.quiet {
        eprintln!(
            "sweep: {}: {} completed ({} reused), {} failed, in {:.1} s -> {}",
            crate::cmd::plural(summary.runs, "run", "runs"),
            completed,
            skipped,
            failed,
            summary.wall_s,
            csv_path.display()
        );
        if failed > 0 {
            eprintln!(
                "  failed runs have status `failed` and their error in results.csv; re-running the command retries them"
            );
        }
    }
    let missing = selected.len() - rows.len();
    if missing > 0 {
        // (Said even with --quiet: it is why the exit status is 1.)
        eprintln!(
            "sweep: {missing} runs have no result (interrupted or removed?); re-running the command runs them"
        );
    }
    if a.json {
        outln!("{}", rundir::results_json("sweep", &summary)?)?;
    }
    Ok(if failed > 0 || missing > 0 || plot_failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `nmpsim plot` on the sweep's results.csv, with its default file names.
fn plot_results(
    csv: &Path,
    x: &str,
    ys: &[String],
    group: &[String],
    log_x: bool,
) -> Result<Vec<PathBuf>> {
    let opts = nmpsim_experiments::plot::CsvChartOptions {
        log_x,
        ..Default::default()
    };
    let size = nmpsim_experiments::plot::DEFAULT_SIZE;
    Ok(crate::cmd::plot::draw(csv, x, ys, group, &opts, None, size)?.0)
}

/// Says when the directory held a different spec, and how many run
/// directories no longer belong to it (they are left in place, unused).
fn note_changes(out: &Path, info: &SweepInfo, runs: &[Run], quiet: bool) {
    if quiet {
        return;
    }
    let old: Option<SweepInfo> = fs::read(out.join(SWEEP_INFO))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(old) = old
        && old.plan_hash != info.plan_hash
    {
        let expected: std::collections::HashSet<String> =
            runs.iter().map(|r| r.dir_name(runs.len())).collect();
        let stale = fs::read_dir(out.join(RUNS_DIR))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| !expected.contains(&e.file_name().to_string_lossy().into_owned()))
                    .count()
            })
            .unwrap_or(0);
        eprintln!(
            "note: {} was swept with a different spec; runs whose config is unchanged are reused, {stale} run directories of the old spec are left in place and ignored",
            out.display()
        );
    }
}

/// The lock file of a sweep directory: [`lock_dir`].
const LOCK: &str = "sweep.lock";

/// Refuses a sweep directory `dir` that exists but is no sweep's (no
/// `sweep.json`) while it holds something a sweep writes, or is a command's
/// run directory: a sweep would write over it.
fn check_sweep_dir(dir: &Path) -> Result<()> {
    let info = dir.join(SWEEP_INFO);
    if info.is_file() {
        // A sweep's own, not a file of that name that someone else wrote.
        let ours = fs::read(&info)
            .ok()
            .and_then(|b| serde_json::from_slice::<SweepInfo>(&b).ok())
            .is_some();
        if !ours {
            bail!(
                "{} is not an nmpsim sweep's (it does not hold a sweep's spec, command, plan hash, run count and shard), so {} is no sweep directory; name a new directory, or an earlier sweep's, for --out",
                info.display(),
                dir.display()
            );
        }
        return Ok(());
    }
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        bail!(
            "{} is not a directory; --out names the sweep's directory",
            dir.display()
        );
    }
    // (An empty runs/ is what a sweep killed before its first write leaves.)
    let runs_empty = fs::read_dir(dir.join(RUNS_DIR)).is_ok_and(|mut d| d.next().is_none());
    for name in ["config.json", RESULTS_CSV, SPEC_COPY, RUNS_DIR] {
        if dir.join(name).exists() && !(name == RUNS_DIR && runs_empty) {
            bail!(
                "{} holds {name} but is no sweep directory (no {SWEEP_INFO}); name a new directory, or an earlier sweep's, for --out",
                dir.display()
            );
        }
    }
    Ok(())
}

/// Takes the lock of the sweep directory `dir` (an exclusive lock on its
/// `sweep.lock`, released when the returned file is dropped or the process
/// ends), or fails at once if another sweep (or merge) holds it.
fn lock_dir(dir: &Path) -> Result<fs::File> {
    let path = dir.join(LOCK);
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    if !crate::rundir::try_lock(&f).with_context(|| format!("cannot lock {}", path.display()))? {
        bail!(
            "{} is in use by another sweep (lock {})",
            dir.display(),
            path.display()
        );
    }
    Ok(f)
}

/// Held while results.csv is written: the sweep and its SIGINT / SIGTERM
/// clean-up (another thread) never write it at once.
static RESULTS_WRITE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn write_results<'a>(
    out: &Path,
    spec: &Spec,
    rows: impl Iterator<Item = &'a Row>,
) -> Result<PathBuf> {
    let _one = RESULTS_WRITE.lock().unwrap_or_else(|e| e.into_inner());
    write_results_unlocked(out, spec, rows)
}

/// [`write_results`] by a caller that holds `RESULTS_WRITE`.
fn write_results_unlocked<'a>(
    out: &Path,
    spec: &Spec,
    rows: impl Iterator<Item = &'a Row>,
) -> Result<PathBuf> {
    let rows: Vec<Row> = rows.cloned().collect();
    let path = out.join(RESULTS_CSV);
    write_atomic(
        &path,
        results_csv(&spec.param_columns(), &rows, &spec.metrics).as_bytes(),
    )?;
    Ok(path)
}

/// `run.json` of `run` in the run directory `rd`.
fn run_config(schema: &CommandSchema, run: &Run, rd: &Path) -> RunConfig {
    let mut argv = schema.argv(&run.config);
    argv.extend(schema.sweep_flags(&rd.display().to_string()));
    RunConfig {
        index: run.index,
        hash: run.hash.clone(),
        command: run.command.clone(),
        params: run.params.clone(),
        flags: run
            .config
            .iter()
            .map(|(k, v)| (k.clone(), v.render()))
            .collect(),
        argv,
        moved_from: None,
    }
}

/// The child processes of the runs under way, and whether the sweep stops:
/// a fatal error ends them (SIGTERM: a run ended so is not recorded, and
/// runs again) rather than waiting for them.
#[derive(Default)]
struct Inflight {
    stop: AtomicBool,
    pids: std::sync::Mutex<Vec<u32>>,
}

impl Inflight {
    fn pids(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.pids.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the sweep: no run starts, and those under way get SIGTERM.
    fn stop_all(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for &pid in self.pids().iter() {
            terminate(pid);
        }
    }
}

#[cfg(unix)]
fn terminate(pid: u32) {
    // SAFETY: a signal to a child this process started and has not reaped
    // (its pid leaves the list before `wait` returns it).
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
}

#[cfg(not(unix))]
fn terminate(_pid: u32) {}

/// Runs `cmd` to its end, its pid in `inflight` meanwhile; stdout and
/// stderr as `output()` gives them. `None` when the sweep is stopping: the
/// command did not start.
#[allow(clippy::type_complexity)]
fn run_child(
    cmd: &mut Process,
    inflight: &Inflight,
) -> std::io::Result<Option<(std::process::ExitStatus, Vec<u8>, Vec<u8>)>> {
    use std::io::Read;
    let mut child = {
        let mut pids = inflight.pids();
        if inflight.stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let child = cmd.spawn()?;
        pids.push(child.id());
        child
    };
    let pid = child.id();
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    // Both pipes are read at once, so that neither fills and stalls the child.
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut v);
        }
        v
    });
    let mut stdout = Vec::new();
    if let Some(o) = out.as_mut() {
        let _ = o.read_to_end(&mut stdout);
    }
    let stderr = err_reader.join().unwrap_or_default();
    // Wait without reaping, take the pid out of the list, then reap: a
    // SIGTERM from `stop_all` never reaches a recycled pid.
    #[cfg(unix)]
    {
        // SAFETY: siginfo_t is plain data, valid zeroed; waitid waits for our
        // own child, leaving it waitable (WNOWAIT) for `wait` below.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            );
        }
    }
    inflight.pids().retain(|&p| p != pid);
    let status = child.wait()?;
    Ok(Some((status, stdout, stderr)))
}

/// Runs one child process and records it in `rd`. Errors are about the sweep
/// directory (cannot write); a failing run is a recorded result, not an error.
fn execute(
    exe: &Path,
    schema: &CommandSchema,
    run: &Run,
    rd: &Path,
    inflight: &Inflight,
) -> Result<()> {
    fs::create_dir_all(rd).with_context(|| format!("cannot create {}", rd.display()))?;
    // A stale status (a failed earlier attempt) must not outlive this attempt
    // if it is interrupted.
    let _ = fs::remove_file(rd.join(RUN_STATUS));
    let config = run_config(schema, run, rd);
    let argv = config.argv.clone();
    write_atomic(
        &rd.join(RUN_CONFIG),
        serde_json::to_string_pretty(&config)?.as_bytes(),
    )?;

    // The files the run's flags name, as the run finds them. Those it
    // rewrites are its outputs, not inputs: only those the run left as they
    // were are recorded (below).
    let before = layout::input_files(run);
    let t0 = Instant::now();
    let mut cmd = Process::new(exe);
    cmd.args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    die_with_parent(&mut cmd);
    let (status, stdout, stderr) = match run_child(&mut cmd, inflight) {
        Ok(Some((status, stdout, stderr))) => (Some(status), stdout, stderr),
        // Not started: the sweep stops. Not run, as an interrupted run.
        Ok(None) => return Ok(()),
        Err(e) => (
            None,
            Vec::new(),
            format!("cannot start {}: {e}", exe.display()).into_bytes(),
        ),
    };
    let wall_s = t0.elapsed().as_secs_f64();
    write_atomic(&rd.join(RUN_STDOUT), &stdout)?;
    write_atomic(&rd.join(RUN_STDERR), &stderr)?;
    // Ended by SIGINT or SIGTERM (Ctrl-C reaches every run of the sweep):
    // interrupted, not failed. No status, so it is run again, as a run
    // killed mid-way is.
    if status.is_some_and(interrupted) {
        return Ok(());
    }

    let stderr_text = String::from_utf8_lossy(&stderr);
    let exit_code = status.and_then(|s| s.code());
    let ok = status.is_some_and(|s| s.success());
    let (st, error) = if !ok {
        let mut e = layout::error_line(&stderr_text);
        if e.is_empty() {
            e = match (exit_code, status) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("ended by a signal ({s})"),
                (None, None) => "did not start".to_string(),
            };
        }
        (Status::Failed, e)
    } else if schema.has("json") && serde_json::from_slice::<serde_json::Value>(&stdout).is_err() {
        (
            Status::Failed,
            "the command exited 0 but its stdout is not JSON".to_string(),
        )
    } else {
        (Status::Completed, String::new())
    };
    let after = layout::input_files(run);
    let inputs = before.into_iter().filter(|f| after.contains(f)).collect();
    let status = RunStatus {
        hash: run.hash.clone(),
        status: st,
        exit_code,
        error,
        wall_s,
        inputs,
    };
    write_atomic(
        &rd.join(RUN_STATUS),
        serde_json::to_string_pretty(&status)?.as_bytes(),
    )
}

/// A process that ended on SIGINT or SIGTERM, by the signal or, having
/// handled it, with 128 + the signal (nmpsim's 130 and 143).
fn interrupted(s: std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(s.code(), Some(130 | 143)) || matches!(s.signal(), Some(libc::SIGINT | libc::SIGTERM))
}

/// A run must not outlive the sweep: when the sweep is killed, its children
/// get SIGKILL too, so a resumed sweep never races an orphan for a directory.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Process) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The sweep may have died between fork and prctl.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Process) {}

fn dry_run(
    a: &SweepArgs,
    plan: &Plan,
    selected: &[&Run],
    state: &[Option<RunStatus>],
    out: &Path,
    shard: Shard,
    jobs: usize,
) -> Result<ExitCode> {
    let total = plan.runs.len();
    let mut timed: Vec<f64> = state.iter().flatten().map(|s| s.wall_s).collect();
    // Nothing timed here yet: the runs of this sweep's shards (in the
    // sibling directories `<OUT>-shard-I-of-N` that sharded runs write by
    // default) time it as well.
    let mut from_shards = Vec::new();
    if timed.is_empty() {
        let all: Vec<&Run> = plan.runs.iter().collect();
        for dir in shard_dirs(out) {
            let found: Vec<f64> = layout::resume(&dir, &plan.runs, &all)
                .state
                .iter()
                .flatten()
                .map(|s| s.wall_s)
                .collect();
            if !found.is_empty() {
                timed.extend(found);
                from_shards.push(dir);
            }
        }
    }
    let done = state
        .iter()
        .filter(|s| matches!(s.as_ref().map(|s| s.status), Some(Status::Completed)))
        .count();
    let to_run = selected.len() - done;
    let mean = (!timed.is_empty()).then(|| timed.iter().sum::<f64>() / timed.len() as f64);
    let estimate = mean.map(|m| m * to_run as f64);
    let base_len = plan.spec.base.len();

    if a.json {
        let runs = selected
            .iter()
            .zip(state)
            .map(|(r, s)| DryRunEntry {
                index: r.index,
                hash: r.hash.clone(),
                dir: r.dir_name(total),
                finished: s.as_ref().map(|s| s.status.as_str()),
                params: r.params.iter().cloned().collect(),
                argv: plan.schema.argv(&r.config),
            })
            .collect();
        let d = DryRun {
            spec: plan.spec.file.clone(),
            command: plan.spec.command_str(),
            sweep_dir: out.display().to_string(),
            shard: shard.to_string(),
            runs_total: total,
            runs_selected: selected.len(),
            runs_to_run: to_run,
            mean_wall_s: mean,
            estimated_run_s: estimate,
            runs,
        };
        outln!("{}", serde_json::to_string_pretty(&d)?)?;
        return Ok(ExitCode::SUCCESS);
    }

    let base = plan
        .schema
        .argv(plan.runs.first().map_or(&[][..], |r| &r.config[..base_len]));
    outln!(
        "sweep {}: {} of `nmpsim {}`{} -> {}",
        plan.spec.file,
        crate::cmd::plural(selected.len(), "run", "runs"),
        plan.spec.command_str(),
        if shard.is_all() {
            String::new()
        } else {
            format!(" (shard {shard}, of {total} in all)")
        },
        out.display()
    )?;
    let fixed = &base[plan.schema.path.len()..];
    if !fixed.is_empty() {
        outln!("every run: {}", fixed.join(" "))?;
    }
    let width = total.saturating_sub(1).to_string().len().max(4);
    outln!("{:>width$}  {:<8}  {:<9}  flags", "run", "hash", "state")?;
    for (r, s) in selected.iter().zip(state) {
        let flags = plan.schema.argv(&r.config[base_len..]);
        let st = s.as_ref().map_or("to run", |s| match s.status {
            Status::Completed => "done",
            Status::Failed => "failed",
        });
        outln!(
            "{:0width$}  {}  {:<9}  {}",
            r.index,
            &r.hash[..8],
            st,
            flags[plan.schema.path.len()..].join(" ")
        )?;
    }
    let shards_note = if from_shards.is_empty() {
        String::new()
    } else {
        format!(
            " in {}",
            from_shards
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match (mean, estimate) {
        _ if to_run == 0 => outln!("estimated cost: nothing to run")?,
        (Some(m), Some(e)) => outln!(
            "estimated cost: {} to run x {m:.2} s mean (of {}{shards_note}) = {e:.1} s of run time, about {:.1} s with --jobs {jobs}",
            crate::cmd::plural(to_run, "run", "runs"),
            crate::cmd::plural(timed.len(), "finished run", "finished runs"),
            e / jobs.min(to_run.max(1)) as f64
        )?,
        _ => {
            let n = total.clamp(2, 10);
            outln!(
                "estimated cost: unknown ({} to run; no finished runs to time yet, runs whose input files changed since not counted: run a part of the sweep first, e.g. --shard 1/{n}, about {} of its {total} runs, then --dry-run again)",
                crate::cmd::plural(to_run, "run", "runs"),
                total.div_ceil(n)
            )?
        }
    }
    if selected.len() > CONFIRM_ABOVE_RUNS {
        outln!("more than {CONFIRM_ABOVE_RUNS} runs: starting it needs --yes")?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct MergeSummary {
    sweep_dir: String,
    sources: Vec<String>,
    runs: usize,
    merged: usize,
    missing: Vec<usize>,
    failed: usize,
    results_csv: String,
}

fn merge(m: MergeArgs) -> Result<ExitCode> {
    let out_abs = absolute(&m.out);
    for d in &m.dirs {
        if absolute(d) == out_abs {
            bail!(
                "OUT ({}) is also a shard directory: merge into a new directory",
                m.out.display()
            );
        }
    }
    let mut infos = Vec::new();
    for d in &m.dirs {
        let path = d.join(SWEEP_INFO);
        let b = fs::read(&path).with_context(|| {
            format!("{} is not a sweep directory (no {SWEEP_INFO})", d.display())
        })?;
        let info: SweepInfo = serde_json::from_slice(&b)
            .with_context(|| format!("cannot parse {}", path.display()))?;
        infos.push(info);
    }
    let first = &infos[0];
    for (d, i) in m.dirs.iter().zip(&infos).skip(1) {
        if i.plan_hash != first.plan_hash {
            bail!(
                "{} holds a different sweep than {} (spec {} vs {}; plan {} vs {}): shards must come from the same spec",
                d.display(),
                m.dirs[0].display(),
                i.spec,
                first.spec,
                i.plan_hash,
                first.plan_hash
            );
        }
    }
    // The spec decides the table's columns beyond the plan: its `metrics`
    // filter and the names of its parameter columns. Sweeps that differ there
    // are refused, so the merge is the same in any order of the DIRs.
    let mut specs: Vec<(String, Spec)> = Vec::new();
    for d in &m.dirs {
        let spec_path = d.join(SPEC_COPY);
        let text = fs::read_to_string(&spec_path)
            .with_context(|| format!("cannot read {}", spec_path.display()))?;
        let spec =
            Spec::parse(&text, &spec_path.display().to_string()).map_err(|e| anyhow!("{e}"))?;
        specs.push((text, spec));
    }
    let columns = |s: &Spec| s.param_columns().join(", ");
    for (d, (_, s)) in m.dirs.iter().zip(&specs).skip(1) {
        let s0 = &specs[0].1;
        if s.metrics != s0.metrics {
            let show = |s: &Spec| {
                if s.metrics.is_empty() {
                    "none (every metric)".to_string()
                } else {
                    format!("{:?}", s.metrics)
                }
            };
            bail!(
                "{} and {} keep different metrics ({} vs {}): results.csv has one set of metric columns; give both specs (spec.toml in each) the same `metrics` and merge again",
                d.display(),
                m.dirs[0].display(),
                show(s),
                show(s0)
            );
        }
        if columns(s) != columns(s0) {
            bail!(
                "{} and {} name their parameter columns differently ({} vs {}): results.csv has one set of columns; sweep both with the same spec",
                d.display(),
                m.dirs[0].display(),
                columns(s),
                columns(s0)
            );
        }
    }
    // Specs that differ only in what leaves the table alone (comments, the
    // description, the spec's file name): OUT gets the spec.toml and sweep.json
    // of the DIR whose spec.toml sorts first.
    let pick = (0..specs.len())
        .min_by(|&a, &b| (&specs[a].0, &infos[a].spec).cmp(&(&specs[b].0, &infos[b].spec)))
        .expect("at least one DIR");
    let (text, spec) = specs.swap_remove(pick);
    let spec_path = m.dirs[pick].join(SPEC_COPY);
    let runs = expand(&spec);
    if plan_hash(&runs) != first.plan_hash {
        bail!(
            "{} does not expand to the runs recorded in {}",
            spec_path.display(),
            m.dirs[pick].join(SWEEP_INFO).display()
        );
    }
    let total = runs.len();
    // OUT may be this sweep's earlier merge (its runs are kept), not another's.
    let out_info = m.out.join(SWEEP_INFO);
    if out_info.exists() {
        let b =
            fs::read(&out_info).with_context(|| format!("cannot read {}", out_info.display()))?;
        let info: SweepInfo = serde_json::from_slice(&b)
            .with_context(|| format!("cannot parse {}", out_info.display()))?;
        if info.plan_hash != first.plan_hash {
            bail!(
                "OUT ({}) holds a different sweep (spec {}, plan {}) than the shards (spec {}, plan {}): merge into a new directory",
                m.out.display(),
                info.spec,
                info.plan_hash,
                first.spec,
                first.plan_hash
            );
        }
    }
    check_sweep_dir(&m.out)?;
    fs::create_dir_all(m.out.join(RUNS_DIR))
        .with_context(|| format!("cannot create {}", m.out.display()))?;
    let _lock = lock_dir(&m.out)?;
    // OUT is a sweep directory from the start, so that an interrupted merge
    // leaves one that the same merge, or the sweep itself, goes on with.
    write_atomic(&m.out.join(SPEC_COPY), text.as_bytes())?;
    let info = SweepInfo {
        shard: Shard::ALL.to_string(),
        ..infos[pick].clone()
    };
    write_atomic(
        &m.out.join(SWEEP_INFO),
        serde_json::to_string_pretty(&info)?.as_bytes(),
    )?;
    let out_shown = m.out.display().to_string();
    crate::signals::before_exit(move || {
        // After the run being copied lands whole; no other copy starts
        // before the process ends.
        std::mem::forget(copying());
        eprintln!(
            "sweep merge stopped: {out_shown} holds the runs merged so far, without results.csv; the same command merges the rest"
        );
    });
    let mut missing = Vec::new();
    // Status files that are there but could not be used, with why.
    let mut unusable = Vec::new();
    let mut rows = Vec::new();
    for r in &runs {
        let dst = layout::run_dir(&m.out, r, total);
        let Some(src) = layout::find_finished(&m.dirs, r, total) else {
            if let Some(row) = layout::load_row(&dst, r) {
                rows.push(row);
            } else {
                missing.push(r.index);
                for d in &m.dirs {
                    let p = layout::run_dir(d, r, total).join(RUN_STATUS);
                    if let Ok(b) = fs::read(&p) {
                        let why = match serde_json::from_slice::<RunStatus>(&b) {
                            Err(e) => format!("unreadable ({e})"),
                            Ok(st) if st.hash != r.hash => {
                                format!("for another configuration (hash {})", st.hash)
                            }
                            Ok(_) => continue,
                        };
                        unusable.push(format!("{}: {why}", p.display()));
                    }
                }
            }
            continue;
        };
        replace_dir(&src, &dst)?;
        if let Some(row) = layout::load_row(&dst, r) {
            rows.push(row);
        }
    }
    let csv = write_results(&m.out, &spec, rows.iter())?;
    let failed = rows
        .iter()
        .filter(|r| r.status == Status::Failed.as_str())
        .count();
    eprintln!(
        "merged {} of {total} runs from {} into {} ({failed} failed) -> {}",
        rows.len(),
        crate::cmd::plural(m.dirs.len(), "directory", "directories"),
        m.out.display(),
        csv.display()
    );
    if !missing.is_empty() {
        let shown: Vec<String> = missing.iter().take(20).map(|i| i.to_string()).collect();
        eprintln!(
            "warning: {} runs are in no shard directory (runs {}{}); results.csv lacks them",
            missing.len(),
            shown.join(", "),
            if missing.len() > 20 { ", ..." } else { "" }
        );
        for u in &unusable {
            eprintln!("warning: {u}");
        }
    }
    if m.json {
        let s = MergeSummary {
            sweep_dir: m.out.display().to_string(),
            sources: m.dirs.iter().map(|d| d.display().to_string()).collect(),
            runs: total,
            merged: rows.len(),
            missing: missing.clone(),
            failed,
            results_csv: csv.display().to_string(),
        };
        outln!("{}", rundir::results_json("sweep merge", &s)?)?;
    }
    Ok(if missing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn absolute(p: &Path) -> PathBuf {
    fs::canonicalize(p)
        .unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// Copies the run directory `src` over `dst`: into a temporary sibling first,
/// then renamed into place, so `dst` is never half-copied.
///
/// The copy holds [`COPYING`] from start to rename: a signal that ends
/// `sweep merge` waits for the run being copied to land whole, and no copy
/// starts after it.
fn replace_dir(src: &Path, dst: &Path) -> Result<()> {
    let name = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dst.with_file_name(format!(".{name}.tmp"));
    let _copying = copying();
    let _ = fs::remove_dir_all(&tmp);
    let placed = copy_tree(src, &tmp).and_then(|()| {
        if dst.exists() {
            fs::remove_dir_all(dst).with_context(|| format!("cannot replace {}", dst.display()))?;
        }
        fs::rename(&tmp, dst).with_context(|| format!("cannot move {} into place", dst.display()))
    });
    if placed.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    placed
}

/// Held while [`replace_dir`] copies a run; a signal that ends `sweep
/// merge` takes it and keeps it.
static COPYING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn copying() -> std::sync::MutexGuard<'static, ()> {
    COPYING.lock().unwrap_or_else(|e| e.into_inner())
}

fn copy_tree(src: &Path, dst: &Path) -> Result<()> {
    fs::create_dir_all(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    for e in fs::read_dir(src).with_context(|| format!("cannot read {}", src.display()))? {
        let e = e?;
        let from = e.path();
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&from, &to)?;
        } else {
            fs::copy(&from, &to)
                .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        }
    }
    Ok(())
}
