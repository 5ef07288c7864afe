//! A dry run: the runs a sweep would run, and what they would cost, from the
//! times of the runs already finished.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Plan, dir, plural};
use crate::CONFIRM_ABOVE_RUNS;
use crate::layout::{self, RunStatus, Status};
use crate::shard::Shard;

/// One run of a dry run.
#[derive(Debug, Clone, Serialize)]
pub struct DryRunEntry {
    pub index: usize,
    pub hash: String,
    /// Its directory under `runs/`.
    pub dir: String,
    /// `completed` or `failed` when it finished earlier; `None`: to run.
    pub finished: Option<&'static str>,
    pub params: BTreeMap<String, String>,
    pub argv: Vec<String>,
}

/// What a sweep would do (its `--dry-run --json` output).
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    pub spec: String,
    pub command: String,
    pub sweep_dir: String,
    pub shard: String,
    pub runs_total: usize,
    pub runs_selected: usize,
    pub runs_to_run: usize,
    /// The mean wall time of the finished runs timed.
    pub mean_wall_s: Option<f64>,
    /// The run time of the runs to run, at that mean, one at a time.
    pub estimated_run_s: Option<f64>,
    pub runs: Vec<DryRunEntry>,
    /// Whether the dry run is of one shard, not the whole sweep.
    #[serde(skip)]
    pub sharded: bool,
    /// How many finished runs were timed.
    #[serde(skip)]
    pub timed: usize,
    /// The shard directories those were found in, when none were in the
    /// sweep directory itself.
    #[serde(skip)]
    pub timed_in: Vec<PathBuf>,
}

impl DryRun {
    /// The dry run of `plan`'s `shard` into the sweep directory `out`. Writes
    /// nothing.
    pub fn new(plan: &Plan, out: &Path, shard: Shard) -> DryRun {
        let total = plan.runs.len();
        let selected = plan.selected(shard);
        let state = layout::resume(out, &plan.runs, &selected).state;
        let mut timed: Vec<f64> = state.iter().flatten().map(|s| s.wall_s).collect();
        // Nothing timed here yet: the runs of this sweep's shards (in the
        // sibling directories `<OUT>-shard-I-of-N` that sharded runs write
        // by default) time it as well.
        let mut timed_in = Vec::new();
        if timed.is_empty() {
            let all: Vec<_> = plan.runs.iter().collect();
            for d in dir::shard_dirs(out) {
                let found: Vec<f64> = layout::resume(&d, &plan.runs, &all)
                    .state
                    .iter()
                    .flatten()
                    .map(|s| s.wall_s)
                    .collect();
                if !found.is_empty() {
                    timed.extend(found);
                    timed_in.push(d);
                }
            }
        }
        let done = state
            .iter()
            .filter(|s| matches!(s.as_ref().map(|s| s.status), Some(Status::Completed)))
            .count();
        let to_run = selected.len() - done;
        let mean = (!timed.is_empty()).then(|| timed.iter().sum::<f64>() / timed.len() as f64);
        let runs = selected
            .iter()
            .zip(&state)
            .map(|(r, s): (_, &Option<RunStatus>)| DryRunEntry {
                index: r.index,
                hash: r.hash.clone(),
                dir: r.dir_name(total),
                finished: s.as_ref().map(|s| s.status.as_str()),
                params: r.params.iter().cloned().collect(),
                argv: plan.schema.argv(&r.config),
            })
            .collect();
        DryRun {
            spec: plan.spec.file.clone(),
            command: plan.spec.command_str(),
            sweep_dir: out.display().to_string(),
            shard: shard.to_string(),
            runs_total: total,
            runs_selected: selected.len(),
            runs_to_run: to_run,
            mean_wall_s: mean,
            estimated_run_s: mean.map(|m| m * to_run as f64),
            runs,
            sharded: !shard.is_all(),
            timed: timed.len(),
            timed_in,
        }
    }

    /// The dry run as a table for a terminal: the flags every run shares,
    /// one line per run (index, hash, state, its own flags), and the
    /// estimated cost with `jobs` runs at once.
    pub fn text(&self, plan: &Plan, jobs: usize) -> String {
        let total = self.runs_total;
        let base_len = plan.spec.base.len();
        let path_len = plan.schema.path.len();
        let mut s = String::new();
        let shard = if self.sharded {
            format!(" (shard {}, of {total} in all)", self.shard)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "sweep {}: {} of `nmpsim {}`{shard} -> {}",
            self.spec,
            plural(self.runs_selected, "run", "runs"),
            self.command,
            self.sweep_dir
        );
        let base = plan
            .schema
            .argv(plan.runs.first().map_or(&[][..], |r| &r.config[..base_len]));
        let fixed = &base[path_len..];
        if !fixed.is_empty() {
            let _ = writeln!(s, "every run: {}", fixed.join(" "));
        }
        let width = total.saturating_sub(1).to_string().len().max(4);
        let _ = writeln!(s, "{:>width$}  {:<8}  {:<9}  flags", "run", "hash", "state");
        for e in &self.runs {
            let flags = plan.schema.argv(&plan.runs[e.index].config[base_len..]);
            let st = match e.finished {
                None => "to run",
                Some("completed") => "done",
                Some(other) => other,
            };
            let _ = writeln!(
                s,
                "{:0width$}  {}  {st:<9}  {}",
                e.index,
                &e.hash[..8],
                flags[path_len..].join(" ")
            );
        }
        let shards_note = if self.timed_in.is_empty() {
            String::new()
        } else {
            let dirs: Vec<String> = self
                .timed_in
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            format!(" in {}", dirs.join(", "))
        };
        let to_run = self.runs_to_run;
        let _ = match (self.mean_wall_s, self.estimated_run_s) {
            _ if to_run == 0 => writeln!(s, "estimated cost: nothing to run"),
            (Some(m), Some(e)) => writeln!(
                s,
                "estimated cost: {} to run x {m:.2} s mean (of {}{shards_note}) = {e:.1} s of run time, about {:.1} s with --jobs {jobs}",
                plural(to_run, "run", "runs"),
                plural(self.timed, "finished run", "finished runs"),
                e / jobs.min(to_run.max(1)) as f64
            ),
            _ => {
                let n = total.clamp(2, 10);
                writeln!(
                    s,
                    "estimated cost: unknown ({} to run; no finished runs to time yet, runs whose input files changed since not counted: run a part of the sweep first, e.g. --shard 1/{n}, about {} of its {total} runs, then --dry-run again)",
                    plural(to_run, "run", "runs"),
                    total.div_ceil(n)
                )
            }
        };
        if self.runs_selected > CONFIRM_ABOVE_RUNS {
            let _ = writeln!(
                s,
                "more than {CONFIRM_ABOVE_RUNS} runs: starting it needs --yes"
            );
        }
        s
    }
}
