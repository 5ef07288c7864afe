//! The executor: a sweep's runs, `jobs` at a time, each a child process
//! recorded in its run directory, and the results table written from them.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::child::{self, Inflight};
use super::dir::{self, write_atomic, write_json, write_results};
use super::{IoContext, Launcher, Plan, SweepError};
use crate::expand::{Run, plan_hash};
use crate::layout::{
    self, Adopt, RUN_CONFIG, RUN_STATUS, RUN_STDERR, RUN_STDOUT, RUNS_DIR, RunConfig, RunStatus,
    SPEC_COPY, SWEEP_INFO, Status, SweepInfo,
};
use crate::results::{Row, UnmatchedPattern, unmatched_metric_patterns};
use crate::schema::CommandSchema;
use crate::shard::Shard;
use crate::spec::Spec;

/// Where and how a sweep runs.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The sweep directory ([`dir::default_out`] gives the usual one).
    pub out: PathBuf,
    /// Runs at once.
    pub jobs: usize,
    /// The runs to run: all, or one shard.
    pub shard: Shard,
}

/// What a sweep tells its caller as it goes. Every method has a default that
/// does nothing.
pub trait Monitor {
    /// Something the user may want to know that changes nothing: a run whose
    /// input file changed runs again, the directory held another spec.
    fn note(&mut self, _message: &str) {}
    /// The directory is set up and locked, and the runs start.
    fn started(&mut self, _s: &Started<'_>) {}
    /// A run ended: `row` is its result, `None` when it was not recorded
    /// (interrupted, or the sweep is stopping).
    fn finished(&mut self, _run: &Run, _row: Option<&Row>) {}
}

/// The sweep as its runs start.
pub struct Started<'a> {
    pub plan: &'a Plan,
    pub options: &'a SweepOptions,
    /// The runs of the shard.
    pub selected: usize,
    /// Of those, finished earlier and reused.
    pub reused: usize,
    /// The runs to run now.
    pub to_run: usize,
    /// Runs at once: `jobs`, or fewer when fewer runs are left.
    pub at_once: usize,
}

/// The summary of a sweep (its `--json` output).
#[derive(Debug, Clone, Serialize)]
pub struct SweepSummary {
    pub spec: String,
    pub sweep_dir: String,
    pub shard: String,
    pub runs: usize,
    /// Runs already completed, reused (the summary line's "reused").
    pub skipped: usize,
    pub completed: usize,
    pub failed: usize,
    pub results_csv: String,
    pub wall_s: f64,
}

/// How a sweep ended.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    pub summary: SweepSummary,
    /// `results.csv`: every finished run of the spec in the directory.
    pub results: PathBuf,
    /// The rows of [`results`](Self::results), in index order.
    pub rows: Vec<Row>,
    /// Runs of the shard with no result (interrupted, or removed).
    pub missing: usize,
    /// `metrics` patterns that keep no column of any completed run.
    pub unmatched: Vec<UnmatchedPattern>,
}

impl SweepOutcome {
    /// Every run of the shard completed.
    pub fn all_completed(&self) -> bool {
        self.summary.failed == 0 && self.missing == 0
    }
}

/// Runs the runs of `plan` that `options` select and have not completed in
/// its directory, and writes `results.csv`.
///
/// A run that fails is a result (status `failed`, its error in the table),
/// not an error: errors are about the sweep directory (it is refused, locked,
/// or cannot be written), and stop the sweep with the runs under way, which
/// then run again next time.
pub fn run(
    plan: &Plan,
    options: &SweepOptions,
    launcher: &dyn Launcher,
    monitor: &mut dyn Monitor,
) -> Result<SweepOutcome, SweepError> {
    let out = &options.out;
    let total = plan.runs.len();
    let selected = plan.selected(options.shard);

    dir::check(out)?;
    fs::create_dir_all(out.join(RUNS_DIR))
        .io(|| format!("cannot create sweep directory {}", out.display()))?;
    // Held until the sweep ends: what is finished is read, and runs are
    // moved and started, by this sweep alone.
    let _lock = dir::lock(out)?;
    // A finished run is found in its own directory or, after a spec edit
    // gave its config another index, in the directory of its earlier index
    // (found by its hash), which a sweep then moves to the new name.
    let layout::Resume { state, adopt } = layout::resume(out, &plan.runs, &selected);
    // Runs that finished, but on an input file that has changed since.
    for (r, st) in selected.iter().zip(&state) {
        if st.is_some() {
            continue;
        }
        if let Some(p) = layout::changed_input(&layout::run_dir(out, r, total)) {
            monitor.note(&format!(
                "note: run {} ran on an earlier {}; it runs again",
                r.index,
                p.display()
            ));
        }
    }
    for Adopt { index, from, to } in &adopt {
        // (A directory under the new name holds no finished run: an attempt
        // that was killed.)
        if to.exists() {
            fs::remove_dir_all(to).io(|| format!("cannot replace {}", to.display()))?;
        }
        fs::rename(from, to)
            .io(|| format!("cannot move {} to {}", from.display(), to.display()))?;
        // run.json describes the run as the edited spec has it: its new index
        // and directory (the command's own files name where it ran).
        let mut config = run_config(&plan.schema, &plan.runs[*index], to);
        config.moved_from = Some(from.display().to_string());
        write_json(&to.join(RUN_CONFIG), &config)?;
    }
    let info = SweepInfo {
        spec: plan.path.display().to_string(),
        command: plan.spec.command_str(),
        plan_hash: plan_hash(&plan.runs),
        runs_total: total,
        shard: options.shard.to_string(),
    };
    if let Some(n) = note_changes(out, &info, &plan.runs) {
        monitor.note(&n);
    }
    write_atomic(&out.join(SPEC_COPY), plan.text.as_bytes())?;
    write_json(&out.join(SWEEP_INFO), &info)?;

    let todo: Vec<&Run> = selected
        .iter()
        .zip(&state)
        .filter(|(_, s)| !matches!(s.as_ref().map(|s| s.status), Some(Status::Completed)))
        .map(|(r, _)| *r)
        .collect();
    let skipped = selected.len() - todo.len();
    let started = Instant::now();
    // The table holds every run of the spec finished in this directory, also
    // those of other shards run into it.
    let mut rows: BTreeMap<usize, Row> = plan
        .runs
        .iter()
        .filter_map(|r| {
            Some((
                r.index,
                layout::load_row(&layout::run_dir(out, r, total), r)?,
            ))
        })
        .collect();
    // (No more workers than runs to run; none when nothing is left.)
    let workers = options.jobs.max(1).min(todo.len());
    monitor.started(&Started {
        plan,
        options,
        selected: selected.len(),
        reused: skipped,
        to_run: todo.len(),
        at_once: if todo.is_empty() {
            options.jobs
        } else {
            workers
        },
    });

    let next = AtomicUsize::new(0);
    let inflight = Inflight::default();
    let (tx, rx) = mpsc::channel::<(usize, Result<(), SweepError>)>();
    std::thread::scope(|s| -> Result<(), SweepError> {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, todo, inflight) = (&next, &todo, &inflight);
            s.spawn(move || {
                while !inflight.stopping() {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(run) = todo.get(i) else { break };
                    let rd = layout::run_dir(out, run, total);
                    let res = execute(launcher, &plan.schema, run, &rd, inflight);
                    if tx.send((run.index, res)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut last_write = Instant::now();
        for (index, res) in rx {
            let run = &plan.runs[index];
            let rd = layout::run_dir(out, run, total);
            if let Err(e) = res {
                // Fatal (the sweep cannot record runs): start no other run,
                // stop those under way (they count as not run, and run
                // again next time), and keep the table of what finished.
                inflight.stop_all();
                let _ = write_results(out, &plan.spec, rows.values());
                return Err(SweepError::Run {
                    index,
                    dir: rd,
                    source: Box::new(e),
                });
            }
            let row = layout::load_row(&rd, run);
            monitor.finished(run, row.as_ref());
            if let Some(row) = row {
                rows.insert(index, row);
            }
            if last_write.elapsed() > Duration::from_secs(5) {
                write_results(out, &plan.spec, rows.values())?;
                last_write = Instant::now();
            }
        }
        Ok(())
    })?;

    // The final table is read back from the run directories, so it is the
    // same whether runs finished now, earlier, or in another order.
    let all_rows = finished_rows(out, &plan.runs);
    let results = write_results(out, &plan.spec, all_rows.iter())?;
    let unmatched =
        unmatched_metric_patterns(&plan.spec.param_columns(), &all_rows, &plan.spec.metrics);
    let mine: Vec<&Row> = all_rows
        .iter()
        .filter(|r| options.shard.selects(r.index))
        .collect();
    let failed = mine
        .iter()
        .filter(|r| r.status == Status::Failed.as_str())
        .count();
    let summary = SweepSummary {
        spec: plan.path.display().to_string(),
        sweep_dir: out.display().to_string(),
        shard: options.shard.to_string(),
        runs: selected.len(),
        skipped,
        completed: mine.len() - failed,
        failed,
        results_csv: results.display().to_string(),
        wall_s: started.elapsed().as_secs_f64(),
    };
    Ok(SweepOutcome {
        summary,
        results,
        missing: selected.len() - mine.len(),
        rows: all_rows,
        unmatched,
    })
}

/// The rows of the runs finished in the sweep directory `out`, in index order.
fn finished_rows(out: &Path, runs: &[Run]) -> Vec<Row> {
    let total = runs.len();
    runs.iter()
        .filter_map(|r| layout::load_row(&layout::run_dir(out, r, total), r))
        .collect()
}

/// For a process that a signal is ending while it runs a sweep into `out`:
/// writes `results.csv` of the runs finished so far (the same sweep runs the
/// others), after which no other write of it starts. Returns how many runs
/// it holds, and its path.
pub fn record_interrupted(
    out: &Path,
    spec: &Spec,
    runs: &[Run],
) -> Result<(usize, PathBuf), SweepError> {
    let rows = finished_rows(out, runs);
    let path = dir::write_results_last(out, spec, rows.iter())?;
    Ok((rows.len(), path))
}

/// When the directory held a different spec: a note of it, with how many
/// run directories no longer belong to the sweep (they are left in place,
/// unused).
fn note_changes(out: &Path, info: &SweepInfo, runs: &[Run]) -> Option<String> {
    let old = dir::read_info(&out.join(SWEEP_INFO)).ok()?;
    if old.plan_hash == info.plan_hash {
        return None;
    }
    let expected: HashSet<String> = runs.iter().map(|r| r.dir_name(runs.len())).collect();
    let stale = fs::read_dir(out.join(RUNS_DIR))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| !expected.contains(&e.file_name().to_string_lossy().into_owned()))
                .count()
        })
        .unwrap_or(0);
    Some(format!(
        "note: {} was swept with a different spec; runs whose config is unchanged are reused, {stale} run directories of the old spec are left in place and ignored",
        out.display()
    ))
}

/// `run.json` of `run` in the run directory `rd`.
pub(crate) fn run_config(schema: &CommandSchema, run: &Run, rd: &Path) -> RunConfig {
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

/// Runs one child process and records it in `rd`. Errors are about the sweep
/// directory (cannot write); a failing run is a recorded result, not an error.
fn execute(
    launcher: &dyn Launcher,
    schema: &CommandSchema,
    run: &Run,
    rd: &Path,
    inflight: &Inflight,
) -> Result<(), SweepError> {
    fs::create_dir_all(rd).io(|| format!("cannot create {}", rd.display()))?;
    // A stale status (a failed earlier attempt) must not outlive this attempt
    // if it is interrupted.
    let _ = fs::remove_file(rd.join(RUN_STATUS));
    let config = run_config(schema, run, rd);
    write_json(&rd.join(RUN_CONFIG), &config)?;

    // The files the run's flags name, as the run finds them. Those it
    // rewrites are its outputs, not inputs: only those the run left as they
    // were are recorded (below).
    let before = layout::input_files(run);
    let t0 = Instant::now();
    let mut cmd = launcher.process(&config.argv);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    child::die_with_parent(&mut cmd);
    let (status, stdout, stderr) = match child::run(&mut cmd, inflight) {
        Ok(Some(e)) => (Some(e.status), e.stdout, e.stderr),
        // Not started: the sweep stops. Not run, as an interrupted run.
        Ok(None) => return Ok(()),
        Err(e) => (
            None,
            Vec::new(),
            format!("cannot start {}: {e}", cmd.get_program().to_string_lossy()).into_bytes(),
        ),
    };
    let wall_s = t0.elapsed().as_secs_f64();
    write_atomic(&rd.join(RUN_STDOUT), &stdout)?;
    write_atomic(&rd.join(RUN_STDERR), &stderr)?;
    // Ended by SIGINT or SIGTERM (Ctrl-C reaches every run of the sweep):
    // interrupted, not failed. No status, so it is run again, as a run
    // killed mid-way is.
    if status.is_some_and(child::interrupted) {
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
    write_json(&rd.join(RUN_STATUS), &status)
}
