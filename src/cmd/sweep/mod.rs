//! `nmpsim sweep`: run a design-space sweep from a TOML spec, one child process
//! of this binary per run, and `nmpsim sweep merge` to join shard outputs.
//! The sweep itself (plan, executor, lock, resumption, merge) is
//! `nmpsim_experiments::sweep`; this module maps flags to it and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, CommandFactory, Subcommand};
use nmpsim_experiments::sweep::{
    self, DryRun, Launcher, Monitor, Plan, Program, Started, SweepOptions, dir::default_out,
};
use nmpsim_experiments::{CONFIRM_ABOVE_RUNS, Row, Run, Shard, Status};

use crate::rundir;

mod terminal;

use terminal::{Nmpsim, Terminal};

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
        None => run_sweep(c.run),
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
    run_sweep(SweepArgs {
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

fn run_sweep(a: SweepArgs) -> Result<ExitCode> {
    let spec_path = a
        .spec
        .clone()
        .ok_or_else(|| anyhow::anyhow!("missing SPEC (see `nmpsim sweep --help`)"))?;
    let exe = std::env::current_exe().context("cannot find the nmpsim binary to run")?;
    let launcher = Nmpsim(Program {
        exe,
        cli: crate::Cli::command(),
    });
    let plan = Plan::load(&spec_path, &launcher)?;
    let shard = a.shard.unwrap_or(Shard::ALL);
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out(&spec_path, shard));
    let jobs = a.jobs.map(|j| j as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if a.dry_run {
        let d = DryRun::new(&plan, &out, shard);
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&d)?)?;
        } else {
            out!("{}", d.text(&plan, jobs))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let selected = plan.selected(shard).len();
    if selected > CONFIRM_ABOVE_RUNS && !a.yes {
        bail!(
            "this sweep has {selected} runs, more than {CONFIRM_ABOVE_RUNS}: pass --yes to start it (or --dry-run to list the runs and their estimated cost first)"
        );
    }

    let options = SweepOptions { out, jobs, shard };
    let mut monitor = Terminal {
        quiet: a.quiet,
        pb: rundir::progress(0, "sweep", a.quiet || a.json),
    };
    let outcome = sweep::run(&plan, &options, &launcher, &mut monitor)?;
    monitor.pb.finish_and_clear();
    if outcome.missing > 0 {
        // Runs ended without a result: their processes were killed. If by
        // a signal to the whole group (Ctrl-C, a batch system's cancel),
        // ours is on its way: the sweep then ends as interrupted (130, 143)
        // with its results.csv written, not with 1.
        crate::signals::settle(std::time::Duration::from_secs(2));
    }
    // A misspelt `metrics` pattern keeps no column: say so (also with
    // --quiet), since results.csv just lacks the columns.
    for u in &outcome.unmatched {
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
        match plot_results(&outcome.results, x, &a.plot_y, &a.plot_group, a.plot_log_x) {
            Ok(files) if !a.quiet => {
                for f in files {
                    eprintln!("plot: {}", f.display());
                }
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("sweep: cannot plot {}: {e:#}", outcome.results.display());
                plot_failed = true;
            }
        }
    }
    let s = &outcome.summary;
    if !a.quiet {
        eprintln!(
            "sweep: {}: {} completed ({} reused), {} failed, in {:.1} s -> {}",
            crate::cmd::plural(s.runs, "run", "runs"),
            s.completed,
            s.skipped,
            s.failed,
            s.wall_s,
            outcome.results.display()
        );
        if s.failed > 0 {
            eprintln!(
                "  failed runs have status `failed` and their error in results.csv; re-running the command retries them"
            );
        }
    }
    if outcome.missing > 0 {
        // (Said even with --quiet: it is why the exit status is 1.)
        eprintln!(
            "sweep: {} runs have no result (interrupted or removed?); re-running the command runs them",
            outcome.missing
        );
    }
    if a.json {
        outln!("{}", rundir::results_json("sweep", s)?)?;
    }
    Ok(if !outcome.all_completed() || plot_failed {
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

/// Runs `runs` (0-based) as the run numbers a user reads, at most 20.
fn run_list(runs: &[usize]) -> String {
    let shown: Vec<String> = runs.iter().take(20).map(|i| i.to_string()).collect();
    format!(
        "{}{}",
        shown.join(", "),
        if runs.len() > 20 { ", ..." } else { "" }
    )
}

/// What `sweep merge` says when runs are missing: how many, which, the
/// shards that own them and what to do.
fn missing_message(s: &sweep::merge::MergeSummary) -> String {
    let n = s.missing.len();
    let mut m = format!(
        "error: the merge is incomplete: {} of {} {} in no shard directory, and results.csv lacks {}",
        crate::cmd::plural(n, "run", "runs"),
        s.runs,
        if n == 1 { "is" } else { "are" },
        if n == 1 { "it" } else { "them" }
    );
    if s.missing_by_shard.is_empty() {
        m.push_str(&format!(
            " ({} {})",
            if n == 1 { "run" } else { "runs" },
            run_list(&s.missing)
        ));
        m.push_str(".\n  Run the sweep (or its missing shards) again into a DIR and merge again.");
        return m;
    }
    m.push(':');
    let mut to_run = Vec::new();
    for g in &s.missing_by_shard {
        m.push_str(&format!(
            "\n  shard {}: {} {} ({})",
            g.shard,
            if g.runs.len() == 1 { "run" } else { "runs" },
            run_list(&g.runs),
            if g.merged_dir {
                "its directory is merged, and these did not finish in it"
            } else {
                "none of the DIRs is this shard's: it never ran, or its directory was not given"
            }
        ));
        to_run.push(g.shard.clone());
    }
    m.push_str(&format!(
        "\n  Re-run {} {} (`nmpsim sweep SPEC --shard I/N --out DIR` resumes a shard's DIR; for experiments/slurm/sweep-array.sh, submit the same command again) and merge again.",
        if to_run.len() == 1 { "shard" } else { "shards" },
        to_run.join(", ")
    ));
    m
}

fn merge(m: MergeArgs) -> Result<ExitCode> {
    let out_shown = m.out.display().to_string();
    let outcome = sweep::merge(&m.out, &m.dirs, &mut || {
        let out_shown = out_shown.clone();
        crate::signals::before_exit(move || {
            // After the run being copied lands whole; no other copy starts
            // before the process ends.
            sweep::merge::stop_copying();
            eprintln!(
                "sweep merge stopped: {out_shown} holds the runs merged so far, without results.csv; the same command merges the rest"
            );
        });
    })?;
    let s = &outcome.summary;
    eprintln!(
        "merged {} of {} runs from {} into {} ({} failed) -> {}",
        s.merged,
        s.runs,
        crate::cmd::plural(m.dirs.len(), "directory", "directories"),
        m.out.display(),
        s.failed,
        outcome.results.display()
    );
    if !s.failed_runs.is_empty() {
        eprintln!(
            "{} failed (status `failed`, the error in results.csv):",
            crate::cmd::plural(s.failed_runs.len(), "run", "runs")
        );
        for f in s.failed_runs.iter().take(20) {
            eprintln!("  {}: {}", f.run, f.error);
        }
        if s.failed_runs.len() > 20 {
            eprintln!("  ... and {} more", s.failed_runs.len() - 20);
        }
    }
    if !s.missing.is_empty() {
        eprintln!("{}", missing_message(s));
        for u in &outcome.unusable {
            eprintln!("  {u}");
        }
    }
    if m.json {
        outln!("{}", rundir::results_json("sweep merge", s)?)?;
    }
    Ok(if s.missing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
