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
//! run's resolved config (and, when it completed, its `stdout.json` is JSON);
//! only then is it reused on resume or merged.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::expand::Run;
use crate::results::{Row, flatten_metrics};
use crate::spec::Scalar;

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
    /// The input files the run read, as they were when it started
    /// ([`input_files`]): a run whose input has changed since runs again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputFile>,
}

/// A file a run's flag names, as it was: its size and modification time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFile {
    pub path: String,
    pub bytes: u64,
    /// Nanoseconds since the Unix epoch.
    pub modified_ns: u64,
}

impl InputFile {
    /// The file at `path` now, if it is a regular file.
    fn now(path: &str) -> Option<InputFile> {
        let m = fs::metadata(path).ok()?;
        if !m.is_file() {
            return None;
        }
        let modified_ns = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos() as u64;
        Some(InputFile {
            path: path.to_string(),
            bytes: m.len(),
            modified_ns,
        })
    }
}

/// The regular files the run's flag values name (paths as the sweep's
/// children see them: relative to the current directory), as they are now.
pub fn input_files(run: &Run) -> Vec<InputFile> {
    run.config
        .iter()
        .filter_map(|(_, v)| match v {
            Scalar::Str(s) => InputFile::now(s),
            _ => None,
        })
        .collect()
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
    /// The complete argument vector after the program name (its `--out` is
    /// this directory).
    pub argv: Vec<String>,
    /// When a spec edit gave the run's configuration another index, the
    /// directory it ran in (under its earlier name); the fields above are
    /// rewritten for the new index and directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
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

/// The run's `status.json`, when present, readable and for this run's config;
/// a completed run also needs output its metrics can be read from
/// ([`output_readable`]), else it counts as not finished and runs again.
///
/// A run whose input file (a flag's value naming a file: a trace, a data
/// set) has changed since it ran is not finished either ([`changed_input`]):
/// the config hash covers the name, not the contents.
pub fn finished(run_dir: &Path, run: &Run) -> Option<RunStatus> {
    let text = fs::read(run_dir.join(RUN_STATUS)).ok()?;
    let st: RunStatus = serde_json::from_slice(&text).ok()?;
    (st.hash == run.hash
        && (st.status != Status::Completed || output_readable(run_dir))
        && changed(&st).is_none())
    .then_some(st)
}

/// The first input file the run's `status.json` records that is there but
/// no longer as it was (another size or modification time), if any. (A
/// file since removed changes nothing: the run's results stand.)
pub fn changed_input(run_dir: &Path) -> Option<PathBuf> {
    let text = fs::read(run_dir.join(RUN_STATUS)).ok()?;
    let st: RunStatus = serde_json::from_slice(&text).ok()?;
    changed(&st)
}

fn changed(st: &RunStatus) -> Option<PathBuf> {
    st.inputs.iter().find_map(|f| {
        let now = InputFile::now(&f.path)?;
        (now != *f).then(|| PathBuf::from(&f.path))
    })
}

/// Whether a run's `stdout.json` is JSON, as the sweep requires of a run
/// passed `--json` (per its `run.json`; a run without a readable `run.json`
/// is held to it too). An empty or damaged file would give a row of blank
/// metrics.
pub fn output_readable(run_dir: &Path) -> bool {
    let json_wanted = fs::read(run_dir.join(RUN_CONFIG))
        .ok()
        .and_then(|b| serde_json::from_slice::<RunConfig>(&b).ok())
        .is_none_or(|c| c.argv.iter().any(|a| a == "--json"));
    !json_wanted
        || fs::read(run_dir.join(RUN_STDOUT))
            .ok()
            .is_some_and(|b| serde_json::from_slice::<serde_json::Value>(&b).is_ok())
}

/// The `results.csv` row of a finished run, read back from its directory.
pub fn load_row(run_dir: &Path, run: &Run) -> Option<Row> {
    let st = finished(run_dir, run)?;
    // A failed run's row has no metrics, even where its command printed
    // some before failing (`nmp run --check` whose check failed, `gpu
    // --json` without a GPU): they would be read, and plotted, as results.
    let metrics = match st.status {
        Status::Completed => fs::read(run_dir.join(RUN_STDOUT))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .map(|v| flatten_metrics(&v))
            .unwrap_or_default(),
        Status::Failed => Vec::new(),
    };
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

/// A finished run to move to its new directory name: a spec edit gave its
/// configuration another index.
#[derive(Debug, Clone, PartialEq)]
pub struct Adopt {
    /// The run's index in the edited spec.
    pub index: usize,
    pub from: PathBuf,
    pub to: PathBuf,
}

/// What a sweep into `sweep_dir` resumes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// For each selected run, in order: its finished status, if any.
    pub state: Vec<Option<RunStatus>>,
    /// Finished runs found under another name, to move to their own.
    pub adopt: Vec<Adopt>,
}

/// Finds the finished runs of `selected` (runs of the plan `runs`) in
/// `sweep_dir`: each in its own directory or, after a spec edit gave its
/// configuration another index, in a directory of the same config hash
/// (completed before failed, then by name). A directory that is already the
/// finished directory of a run of the plan is never taken for another, and
/// none is taken twice.
pub fn resume(sweep_dir: &Path, runs: &[Run], selected: &[&Run]) -> Resume {
    let total = runs.len();
    let mut taken: HashSet<PathBuf> = runs
        .iter()
        .filter_map(|r| {
            let d = run_dir(sweep_dir, r, total);
            finished(&d, r).map(|_| d)
        })
        .collect();
    let earlier = finished_by_hash(sweep_dir);
    let mut adopt = Vec::new();
    let state = selected
        .iter()
        .map(|r| {
            let own = run_dir(sweep_dir, r, total);
            if let Some(st) = finished(&own, r) {
                return Some(st);
            }
            for from in earlier.get(&r.hash).into_iter().flatten() {
                if taken.contains(from) {
                    continue;
                }
                let Some(st) = finished(from, r) else {
                    continue;
                };
                taken.insert(from.clone());
                adopt.push(Adopt {
                    index: r.index,
                    from: from.clone(),
                    to: own,
                });
                return Some(st);
            }
            None
        })
        .collect();
    Resume { state, adopt }
}

/// The run directories under `sweep_dir/runs` with a status, by config hash:
/// completed ones first, then by name.
fn finished_by_hash(sweep_dir: &Path) -> HashMap<String, Vec<PathBuf>> {
    let mut found: HashMap<String, Vec<(bool, PathBuf)>> = HashMap::new();
    let Ok(dirs) = fs::read_dir(sweep_dir.join(RUNS_DIR)) else {
        return HashMap::new();
    };
    for e in dirs.flatten() {
        let dir = e.path();
        let Some(st) = fs::read(dir.join(RUN_STATUS))
            .ok()
            .and_then(|b| serde_json::from_slice::<RunStatus>(&b).ok())
        else {
            continue;
        };
        found
            .entry(st.hash)
            .or_default()
            .push((st.status != Status::Completed, dir));
    }
    found
        .into_iter()
        .map(|(h, mut v)| {
            v.sort();
            (h, v.into_iter().map(|(_, d)| d).collect())
        })
        .collect()
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

/// The line of a failed run's stderr that says why: its last `error:` line,
/// else a panic's location and message, else its last non-empty line (a
/// backtrace note after the panic is not the reason).
pub fn error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(l) = lines.iter().rev().find(|l| l.starts_with("error:")) {
        return l.to_string();
    }
    if let Some(i) = lines.iter().rposition(|l| l.contains("panicked at")) {
        return match lines.get(i + 1) {
            Some(msg) if !msg.starts_with("note:") && !msg.starts_with("stack backtrace") => {
                format!("{} {msg}", lines[i])
            }
            _ => lines[i].to_string(),
        };
    }
    lines.last().unwrap_or(&"").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::expand;
    use crate::spec::Spec;

    fn temp(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("nmpsim-exp-{name}-"))
            .tempdir()
            .expect("temp dir")
    }

    fn write_status(dir: &Path, hash: &str, status: Status) {
        fs::create_dir_all(dir).expect("run dir");
        let st = RunStatus {
            hash: hash.into(),
            status,
            exit_code: Some(0),
            error: String::new(),
            wall_s: 0.5,
            inputs: Vec::new(),
        };
        fs::write(dir.join(RUN_STATUS), serde_json::to_vec(&st).expect("json")).expect("write");
        if status == Status::Completed {
            fs::write(dir.join(RUN_STDOUT), "{}").expect("write");
        }
    }

    #[test]
    fn a_run_is_finished_only_with_its_own_hash() {
        let d_tmp = temp("finished");
        let d = d_tmp.path();
        let runs = expand(
            &Spec::parse("command = \"dram\"\n[axes]\nrequests = [1, 2]\n", "t").expect("ok"),
        );
        let rd = run_dir(d, &runs[0], 2);
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
        // A completed run whose output cannot be read (empty, cut short) is
        // not finished: it runs again rather than give blank metrics.
        for bad in ["", "{\"command\":\"dram\",\"res"] {
            fs::write(rd.join(RUN_STDOUT), bad).expect("write");
            assert!(finished(&rd, &runs[0]).is_none(), "{bad:?}");
            assert!(load_row(&rd, &runs[0]).is_none(), "{bad:?}");
        }
        fs::remove_file(rd.join(RUN_STDOUT)).expect("remove");
        assert!(finished(&rd, &runs[0]).is_none(), "no stdout.json");
        // ... unless the run was not asked for JSON (a command without --json).
        let config = |argv: &[&str]| RunConfig {
            index: 0,
            hash: runs[0].hash.clone(),
            command: vec!["dram".into()],
            params: vec![],
            flags: vec![],
            argv: argv.iter().map(|a| a.to_string()).collect(),
            moved_from: None,
        };
        let write_config = |c: RunConfig| {
            fs::write(rd.join(RUN_CONFIG), serde_json::to_vec(&c).expect("json")).expect("write")
        };
        write_config(config(&["--requests=1", "--json"]));
        assert!(finished(&rd, &runs[0]).is_none());
        write_config(config(&["--requests=1"]));
        assert!(finished(&rd, &runs[0]).is_some());
        // A failed run is finished whatever its output (a resume retries it).
        write_config(config(&["--requests=1", "--json"]));
        write_status(&rd, &runs[0].hash, Status::Failed);
        assert!(finished(&rd, &runs[0]).is_some());
        // Its row has no metrics, even where it printed some before failing.
        fs::write(
            rd.join(RUN_STDOUT),
            r#"{"command":"dram","results":{"runs":[{"cycles":7}]}}"#,
        )
        .expect("write");
        let row = load_row(&rd, &runs[0]).expect("finished");
        assert_eq!((row.status.as_str(), row.metrics.len()), ("failed", 0));
    }

    #[test]
    fn merge_prefers_completed_runs() {
        let a_tmp = temp("merge-a");
        let a = a_tmp.path();
        let b_tmp = temp("merge-b");
        let b = b_tmp.path();
        let runs = expand(
            &Spec::parse("command = \"dram\"\n[axes]\nrequests = [1, 2]\n", "t").expect("ok"),
        );
        write_status(&run_dir(a, &runs[0], 2), &runs[0].hash, Status::Failed);
        write_status(&run_dir(b, &runs[0], 2), &runs[0].hash, Status::Completed);
        let dirs = vec![a.to_path_buf(), b.to_path_buf()];
        assert_eq!(
            find_finished(&dirs, &runs[0], 2),
            Some(run_dir(b, &runs[0], 2))
        );
        assert_eq!(find_finished(&dirs, &runs[1], 2), None);
        assert_eq!(
            find_finished(&dirs[..1], &runs[0], 2),
            Some(run_dir(a, &runs[0], 2))
        );
    }

    #[test]
    fn resume_adopts_a_moved_run_but_never_another_runs_directory() {
        let d_tmp = temp("resume");
        let d = d_tmp.path();
        let runs = expand(
            &Spec::parse("command = \"dram\"\n[axes]\nrequests = [1, 2]\n", "t").expect("ok"),
        );
        let all: Vec<&Run> = runs.iter().collect();
        // Run 1 finished earlier as run 0 of another spec (old name), run 0
        // is not finished.
        let old = d
            .join(RUNS_DIR)
            .join(format!("0000-{}", &runs[1].hash[..8]));
        write_status(&old, &runs[1].hash, Status::Completed);
        let r = resume(d, &runs, &all);
        assert_eq!(r.state[0], None);
        assert_eq!(
            r.state[1].as_ref().map(|s| s.status),
            Some(Status::Completed)
        );
        assert_eq!(
            r.adopt,
            vec![Adopt {
                index: 1,
                from: old.clone(),
                to: run_dir(d, &runs[1], 2)
            }]
        );

        // Two runs of one configuration (a spec check refuses them, this is
        // the last line of defence): the finished one keeps its directory,
        // the other is not finished and adopts nothing.
        let d_tmp = temp("resume-same");
        let d = d_tmp.path();
        let mut twin = runs[0].clone();
        twin.index = 1;
        let same = vec![runs[0].clone(), twin];
        let all: Vec<&Run> = same.iter().collect();
        write_status(&run_dir(d, &same[0], 2), &same[0].hash, Status::Completed);
        let r = resume(d, &same, &all);
        assert!(r.state[0].is_some());
        assert_eq!(r.state[1], None);
        assert!(r.adopt.is_empty(), "{:?}", r.adopt);
        // Also when only the other run is selected (another shard).
        let r = resume(d, &same, &all[1..]);
        assert_eq!(r.state, vec![None]);
        assert!(r.adopt.is_empty(), "{:?}", r.adopt);
    }

    #[test]
    fn the_error_line_says_why() {
        assert_eq!(
            error_line("warn\nerror: no preset 'X'\n\n"),
            "error: no preset 'X'"
        );
        assert_eq!(error_line(""), "");
        assert_eq!(error_line("a\nlast words\n"), "last words");
        // A panic: its place and message, not the backtrace note after it.
        let panic = "\nthread 'main' panicked at src/x.rs:3:5:\ncapacity overflow\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            error_line(panic),
            "thread 'main' panicked at src/x.rs:3:5: capacity overflow"
        );
        let traced = "thread 'main' panicked at src/x.rs:3:5:\nboom\nstack backtrace:\n   0: f\nnote: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n";
        assert_eq!(
            error_line(traced),
            "thread 'main' panicked at src/x.rs:3:5: boom"
        );
        // An error line after warnings and notes wins.
        assert_eq!(
            error_line("error: bad --rows\nnote: see --help\n"),
            "error: bad --rows"
        );
    }
}
