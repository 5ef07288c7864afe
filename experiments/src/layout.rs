//! The files of a sweep directory:
//!
//! ```text
//! SWEEP/
//!   sweep.json            what was swept: spec file, plan hash, run count, shard
//!   spec.toml             a copy of the spec
//!   results.csv           one row per finished run (see crate::results)
//!   runs/NNNN-HASH8/
//!     run.json            resolved config: index, hash, flags, argv
//!     stdout.json         the command's JSON output (its metrics)
//!     stderr.log          the command's stderr
//!     status.json         written last: hash, status, exit code, error, wall_s
//!     ...                 the command's own run directory files
//! ```
//!
//! A run is finished when its `status.json` exists and holds the hash of the
//! run's resolved config; only then is it reused on resume or merged.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::expand::Run;
use crate::results::{Row, flatten_metrics};

pub const RUNS_DIR: &str = "runs";
pub const RUN_CONFIG: &str = "run.json";
pub const RUN_STDOUT: &str = "stdout.json";
pub const RUN_STDERR: &str = "stderr.log";
pub const RUN_STATUS: &str = "status.json";
pub const SWEEP_INFO: &str = "sweep.json";
pub const SPEC_COPY: &str = "spec.toml";
pub const RESULTS_CSV: &str = "results.csv";

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Completed,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
        }
    }
}

/// `status.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    pub hash: String,
    pub status: Status,
    /// The process's exit code (`None` when a signal ended it).
    pub exit_code: Option<i32>,
    /// Why it failed: the last non-empty line of its stderr.
    pub error: String,
    pub wall_s: f64,
}

/// `run.json`: the resolved configuration of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub index: usize,
    pub hash: String,
    pub command: Vec<String>,
    /// The swept values: (column, value), in column order.
    pub params: Vec<(String, String)>,
    /// Every flag and its value as passed, in spec order.
    pub flags: Vec<(String, String)>,
    /// The complete argument vector after the program name.
    pub argv: Vec<String>,
}

/// `sweep.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepInfo {
    /// The spec file as named on the command line.
    pub spec: String,
    pub command: String,
    /// [`crate::plan_hash`] of the run list; shards of one sweep share it.
    pub plan_hash: String,
    pub runs_total: usize,
    /// `i/N`, `1/1` for a whole sweep.
    pub shard: String,
}

/// `runs/<dir name>` under `sweep_dir`.
pub fn run_dir(sweep_dir: &Path, run: &Run, total: usize) -> PathBuf {
    sweep_dir.join(RUNS_DIR).join(run.dir_name(total))
}

/// The run's `status.json`, when present, readable and for this run's config.
pub fn finished(run_dir: &Path, run: &Run) -> Option<RunStatus> {
    let text = fs::read(run_dir.join(RUN_STATUS)).ok()?;
    let st: RunStatus = serde_json::from_slice(&text).ok()?;
    (st.hash == run.hash).then_some(st)
}

/// The `results.csv` row of a finished run, read back from its directory.
pub fn load_row(run_dir: &Path, run: &Run) -> Option<Row> {
    let st = finished(run_dir, run)?;
    let metrics = fs::read(run_dir.join(RUN_STDOUT))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .map(|v| flatten_metrics(&v))
        .unwrap_or_default();
    Some(Row {
        index: run.index,
        run: run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        params: run.params.iter().map(|(_, v)| v.clone()).collect(),
        status: st.status.as_str().to_string(),
        error: st.error,
        wall_s: Some(st.wall_s),
        metrics,
    })
}

/// Among sweep directories (shards), the one holding `run` finished, preferring
/// a completed run over a failed one.
pub fn find_finished(sweep_dirs: &[PathBuf], run: &Run, total: usize) -> Option<PathBuf> {
    let mut failed = None;
    for d in sweep_dirs {
        let rd = run_dir(d, run, total);
        match finished(&rd, run).map(|s| s.status) {
            Some(Status::Completed) => return Some(rd),
            Some(Status::Failed) if failed.is_none() => failed = Some(rd),
            _ => {}
        }
    }
    failed
}

/// The last non-empty line of a process's stderr: its error, for the table.
pub fn last_line(stderr: &str) -> String {
    stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::expand;
    use crate::spec::Spec;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nmpsim-exp-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("temp dir");
        d
    }

    fn write_status(dir: &Path, hash: &str, status: Status) {
        fs::create_dir_all(dir).expect("run dir");
        let st = RunStatus {
            hash: hash.into(),
            status,
            exit_code: Some(0),
            error: String::new(),
            wall_s: 0.5,
        };
        fs::write(dir.join(RUN_STATUS), serde_json::to_vec(&st).expect("json")).expect("write");
    }

    #[test]
    fn a_run_is_finished_only_with_its_own_hash() {
        let d = temp("finished");
        let runs = expand(
            &Spec::parse("command = \"dram\"\n[axes]\nrequests = [1, 2]\n", "t").expect("ok"),
        );
        let rd = run_dir(&d, &runs[0], 2);
        assert!(finished(&rd, &runs[0]).is_none());
        write_status(&rd, &runs[1].hash, Status::Completed);
        assert!(
            finished(&rd, &runs[0]).is_none(),
            "a foreign hash is not a result"
        );
        write_status(&rd, &runs[0].hash, Status::Completed);
        fs::write(
            rd.join(RUN_STDOUT),
            r#"{"command":"dram","results":{"runs":[{"cycles":7}]}}"#,
        )
        .expect("write");
        let row = load_row(&rd, &runs[0]).expect("finished");
        assert_eq!(row.params, vec!["1"]);
        assert_eq!(
            row.metrics,
            vec![("runs.0.cycles".to_string(), "7".to_string())]
        );
        assert_eq!(row.run, runs[0].dir_name(2));
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn merge_prefers_completed_runs() {
        let a = temp("merge-a");
        let b = temp("merge-b");
        let runs = expand(
            &Spec::parse("command = \"dram\"\n[axes]\nrequests = [1, 2]\n", "t").expect("ok"),
        );
        write_status(&run_dir(&a, &runs[0], 2), &runs[0].hash, Status::Failed);
        write_status(&run_dir(&b, &runs[0], 2), &runs[0].hash, Status::Completed);
        let dirs = vec![a.clone(), b.clone()];
        assert_eq!(
            find_finished(&dirs, &runs[0], 2),
            Some(run_dir(&b, &runs[0], 2))
        );
        assert_eq!(find_finished(&dirs, &runs[1], 2), None);
        assert_eq!(
            find_finished(&dirs[..1], &runs[0], 2),
            Some(run_dir(&a, &runs[0], 2))
        );
        fs::remove_dir_all(&a).ok();
        fs::remove_dir_all(&b).ok();
    }

    #[test]
    fn error_is_the_last_non_empty_line() {
        assert_eq!(
            last_line("warn\nerror: no preset 'X'\n\n"),
            "error: no preset 'X'"
        );
        assert_eq!(last_line(""), "");
    }
}
