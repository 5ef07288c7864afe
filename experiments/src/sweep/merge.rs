//! `sweep merge`: the shard directories of one sweep joined into one sweep
//! directory, with the `results.csv` an unsharded sweep gives.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use super::dir::{self, write_atomic, write_json, write_results};
use super::{IoContext, SweepError};
use crate::expand::{expand, plan_hash};
use crate::layout::{
    self, RUN_STATUS, RUNS_DIR, RunStatus, SPEC_COPY, SWEEP_INFO, Status, SweepInfo,
};
use crate::shard::Shard;
use crate::spec::Spec;

/// The summary of a merge (its `--json` output).
#[derive(Debug, Clone, Serialize)]
pub struct MergeSummary {
    pub sweep_dir: String,
    pub sources: Vec<String>,
    /// The runs of the sweep.
    pub runs: usize,
    /// Of those, the runs with a result in the merged directory.
    pub merged: usize,
    /// The runs in no shard directory.
    pub missing: Vec<usize>,
    /// The shards of the sweep, when the DIRs are shards `i/N` of one `N`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<usize>,
    /// With `shards`: the missing runs by the shard that owns them, and
    /// whether that shard is among the DIRs.
    pub missing_by_shard: Vec<MissingShard>,
    pub failed: usize,
    /// The failed runs: their directory names and the first line of their
    /// error.
    pub failed_runs: Vec<FailedRun>,
    pub results_csv: String,
}

/// The runs of one shard that no DIR holds.
#[derive(Debug, Clone, Serialize)]
pub struct MissingShard {
    /// `i/N`.
    pub shard: String,
    pub runs: Vec<usize>,
    /// Whether the shard's directory is among the DIRs (then those of its
    /// runs did not finish there), or not at all.
    pub merged_dir: bool,
}

/// A failed run of the merged sweep.
#[derive(Debug, Clone, Serialize)]
pub struct FailedRun {
    pub run: String,
    pub error: String,
}

/// How a merge ended.
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    pub summary: MergeSummary,
    pub results: PathBuf,
    /// Status files in the shard directories that could not be used, each
    /// with why (for the runs that are missing).
    pub unusable: Vec<String>,
}

/// Merges the shard directories `dirs` of one sweep into `out`: each
/// finished run is copied whole (a run finished in several is taken from the
/// first that has it), and `results.csv` is written from them. `out` may be
/// an earlier merge of the same sweep, whose runs are kept.
///
/// `ready` is called once `out` is a sweep directory (its spec and
/// `sweep.json` written) and runs are about to be copied: from then on, a
/// merge that stops leaves a directory the same merge goes on with.
pub fn merge(
    out: &Path,
    dirs: &[PathBuf],
    ready: &mut dyn FnMut(),
) -> Result<MergeOutcome, SweepError> {
    let refuse = |m: String| Err(SweepError::Refused(m));
    let Some(first_dir) = dirs.first() else {
        return refuse("no shard directories to merge".into());
    };
    let out_abs = absolute(out);
    for d in dirs {
        if absolute(d) == out_abs {
            return refuse(format!(
                "OUT ({}) is also a shard directory: merge into a new directory",
                out.display()
            ));
        }
    }
    let mut infos = Vec::new();
    for d in dirs {
        let path = d.join(SWEEP_INFO);
        if !path.exists() {
            return refuse(format!(
                "{} is not a sweep directory (no {SWEEP_INFO})",
                d.display()
            ));
        }
        infos.push(dir::read_info(&path)?);
    }
    let first = &infos[0];
    for (d, i) in dirs.iter().zip(&infos).skip(1) {
        if i.plan_hash != first.plan_hash {
            return refuse(format!(
                "{} holds a different sweep than {} (spec {} vs {}; plan {} vs {}): shards must come from the same spec",
                d.display(),
                first_dir.display(),
                i.spec,
                first.spec,
                i.plan_hash,
                first.plan_hash
            ));
        }
    }
    // The spec decides the table's columns beyond the plan: its `metrics`
    // filter and the names of its parameter columns. Sweeps that differ there
    // are refused, so the merge is the same in any order of the DIRs.
    let mut specs: Vec<(String, Spec)> = Vec::new();
    for d in dirs {
        let spec_path = d.join(SPEC_COPY);
        let text =
            fs::read_to_string(&spec_path).io(|| format!("cannot read {}", spec_path.display()))?;
        let spec = Spec::parse(&text, &spec_path.display().to_string())?;
        specs.push((text, spec));
    }
    let columns = |s: &Spec| s.param_columns().join(", ");
    for (d, (_, s)) in dirs.iter().zip(&specs).skip(1) {
        let s0 = &specs[0].1;
        if s.metrics != s0.metrics {
            let show = |s: &Spec| {
                if s.metrics.is_empty() {
                    "none (every metric)".to_string()
                } else {
                    format!("{:?}", s.metrics)
                }
            };
            return refuse(format!(
                "{} and {} keep different metrics ({} vs {}): results.csv has one set of metric columns; give both specs (spec.toml in each) the same `metrics` and merge again",
                d.display(),
                first_dir.display(),
                show(s),
                show(s0)
            ));
        }
        if columns(s) != columns(s0) {
            return refuse(format!(
                "{} and {} name their parameter columns differently ({} vs {}): results.csv has one set of columns; sweep both with the same spec",
                d.display(),
                first_dir.display(),
                columns(s),
                columns(s0)
            ));
        }
    }
    // Specs that differ only in what leaves the table alone (comments, the
    // description, the spec's file name): OUT gets the spec.toml and
    // sweep.json of the DIR whose spec.toml sorts first.
    let pick = (0..specs.len())
        .min_by(|&a, &b| (&specs[a].0, &infos[a].spec).cmp(&(&specs[b].0, &infos[b].spec)))
        .expect("at least one DIR");
    let (text, spec) = specs.swap_remove(pick);
    let runs = expand(&spec);
    if plan_hash(&runs) != first.plan_hash {
        return refuse(format!(
            "{} does not expand to the runs recorded in {}",
            dirs[pick].join(SPEC_COPY).display(),
            dirs[pick].join(SWEEP_INFO).display()
        ));
    }
    let total = runs.len();
    // OUT may be this sweep's earlier merge (its runs are kept), not another's.
    let out_info = out.join(SWEEP_INFO);
    if out_info.exists() {
        let info = dir::read_info(&out_info)?;
        if info.plan_hash != first.plan_hash {
            return refuse(format!(
                "OUT ({}) holds a different sweep (spec {}, plan {}) than the shards (spec {}, plan {}): merge into a new directory",
                out.display(),
                info.spec,
                info.plan_hash,
                first.spec,
                first.plan_hash
            ));
        }
    }
    dir::check(out)?;
    fs::create_dir_all(out.join(RUNS_DIR)).io(|| format!("cannot create {}", out.display()))?;
    let _lock = dir::lock(out)?;
    // OUT is a sweep directory from the start, so that an interrupted merge
    // leaves one that the same merge, or the sweep itself, goes on with.
    write_atomic(&out.join(SPEC_COPY), text.as_bytes())?;
    let info = SweepInfo {
        shard: Shard::ALL.to_string(),
        ..infos[pick].clone()
    };
    write_json(&out.join(SWEEP_INFO), &info)?;
    ready();
    let mut missing = Vec::new();
    let mut unusable = Vec::new();
    let mut rows = Vec::new();
    for r in &runs {
        let dst = layout::run_dir(out, r, total);
        let Some(src) = layout::find_finished(dirs, r, total) else {
            if let Some(row) = layout::load_row(&dst, r) {
                rows.push(row);
            } else {
                missing.push(r.index);
                for d in dirs {
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
    let results = write_results(out, &spec, rows.iter())?;
    let failed_runs: Vec<FailedRun> = rows
        .iter()
        .filter(|r| r.status == Status::Failed.as_str())
        .map(|r| FailedRun {
            run: r.run.clone(),
            error: r.error.lines().next().unwrap_or("").to_string(),
        })
        .collect();
    // The DIRs' shards: when all are shards of one count, each missing run's
    // owner is known (`Shard::selects`).
    let parsed: Vec<Option<Shard>> = infos.iter().map(|i| i.shard.parse().ok()).collect();
    let shards = match parsed.first() {
        Some(Some(first))
            if first.count > 1
                && parsed
                    .iter()
                    .all(|s| s.map(|s| s.count) == Some(first.count)) =>
        {
            Some(first.count)
        }
        _ => None,
    };
    let mut missing_by_shard: Vec<MissingShard> = Vec::new();
    if let Some(n) = shards {
        for i in 1..=n {
            let sh = Shard { index: i, count: n };
            let runs: Vec<usize> = missing.iter().copied().filter(|&r| sh.selects(r)).collect();
            if !runs.is_empty() {
                missing_by_shard.push(MissingShard {
                    shard: sh.to_string(),
                    runs,
                    merged_dir: parsed.contains(&Some(sh)),
                });
            }
        }
    }
    Ok(MergeOutcome {
        summary: MergeSummary {
            sweep_dir: out.display().to_string(),
            sources: dirs.iter().map(|d| d.display().to_string()).collect(),
            runs: total,
            merged: rows.len(),
            missing,
            shards,
            missing_by_shard,
            failed: failed_runs.len(),
            failed_runs,
            results_csv: results.display().to_string(),
        },
        results,
        unusable,
    })
}

fn absolute(p: &Path) -> PathBuf {
    fs::canonicalize(p)
        .unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// Copies the run directory `src` over `dst`: into a temporary sibling first,
/// then renamed into place, so `dst` is never half-copied.
///
/// The copy holds [`COPYING`] from start to rename: a signal that ends a
/// merge waits for the run being copied to land whole ([`stop_copying`]).
fn replace_dir(src: &Path, dst: &Path) -> Result<(), SweepError> {
    let name = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dst.with_file_name(format!(".{name}.tmp"));
    let _copying = copying();
    let _ = fs::remove_dir_all(&tmp);
    let placed = copy_tree(src, &tmp).and_then(|()| {
        if dst.exists() {
            fs::remove_dir_all(dst).io(|| format!("cannot replace {}", dst.display()))?;
        }
        fs::rename(&tmp, dst).io(|| format!("cannot move {} into place", dst.display()))
    });
    if placed.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    placed
}

/// Held while [`replace_dir`] copies a run.
static COPYING: Mutex<()> = Mutex::new(());

fn copying() -> MutexGuard<'static, ()> {
    COPYING.lock().unwrap_or_else(|e| e.into_inner())
}

/// For a process that a signal is ending while it merges: waits for the run
/// being copied to land whole, and starts no other copy.
pub fn stop_copying() {
    std::mem::forget(copying());
}

fn copy_tree(src: &Path, dst: &Path) -> Result<(), SweepError> {
    fs::create_dir_all(dst).io(|| format!("cannot create {}", dst.display()))?;
    for e in fs::read_dir(src).io(|| format!("cannot read {}", src.display()))? {
        let e = e.io(|| format!("cannot read {}", src.display()))?;
        let from = e.path();
        let to = dst.join(e.file_name());
        let is_dir = e
            .file_type()
            .io(|| format!("cannot read {}", from.display()))?
            .is_dir();
        if is_dir {
            copy_tree(&from, &to)?;
        } else {
            fs::copy(&from, &to)
                .io(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        }
    }
    Ok(())
}
