//! A sweep directory as a whole: whether one may be written, its lock, its
//! results table, and where a sweep and its shards go by default. (The files
//! of each run are [`crate::layout`]'s.)

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use nmpsim_traces::staged::StagedFile;
use serde::Serialize;

use super::{IoContext, SweepError};
use crate::layout::{RESULTS_CSV, RUNS_DIR, SPEC_COPY, SWEEP_INFO, SweepInfo};
use crate::results::{Row, results_csv};
use crate::shard::Shard;
use crate::spec::Spec;

/// The lock file of a sweep directory: [`lock`].
pub const LOCK: &str = "sweep.lock";

/// What a shard's default directory adds to the whole sweep's, before `I-of-N`.
pub const SHARD_DIR: &str = "-shard-";

/// Where a sweep of `spec` goes by default: `runs/sweep-<spec name>`, plus
/// `-shard-I-of-N` for one shard.
pub fn default_out(spec: &Path, shard: Shard) -> PathBuf {
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

/// Directories beside `out` named `<out>-shard-I-of-N`, in name order: where
/// the shards of a sweep into `out` go by default.
pub fn shard_dirs(out: &Path) -> Vec<PathBuf> {
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

/// Refuses a sweep directory `dir` that exists but is no sweep's (no
/// `sweep.json`) while it holds something a sweep writes, or is a command's
/// run directory: a sweep would write over it.
pub fn check(dir: &Path) -> Result<(), SweepError> {
    let info = dir.join(SWEEP_INFO);
    if info.is_file() {
        // A sweep's own, not a file of that name that someone else wrote.
        if read_info(&info).is_err() {
            return Err(SweepError::Refused(format!(
                "{} is not an nmpsim sweep's (it does not hold a sweep's spec, command, plan hash, run count and shard), so {} is no sweep directory; name a new directory, or an earlier sweep's, for --out",
                info.display(),
                dir.display()
            )));
        }
        return Ok(());
    }
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(SweepError::Refused(format!(
            "{} is not a directory; --out names the sweep's directory",
            dir.display()
        )));
    }
    // (An empty runs/ is what a sweep killed before its first write leaves.)
    let runs_empty = fs::read_dir(dir.join(RUNS_DIR)).is_ok_and(|mut d| d.next().is_none());
    for name in ["config.json", RESULTS_CSV, SPEC_COPY, RUNS_DIR] {
        if dir.join(name).exists() && !(name == RUNS_DIR && runs_empty) {
            return Err(SweepError::Refused(format!(
                "{} holds {name} but is no sweep directory (no {SWEEP_INFO}); name a new directory, or an earlier sweep's, for --out",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// `sweep.json` at `path`.
pub fn read_info(path: &Path) -> Result<SweepInfo, SweepError> {
    let b = fs::read(path).io(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&b)
        .map_err(|e| SweepError::Unreadable(format!("cannot parse {}: {e}", path.display())))
}

/// Takes the lock of the sweep directory `dir` (an exclusive lock on its
/// `sweep.lock`, released when the returned file is dropped or the process
/// ends), or fails at once if another sweep (or merge) holds it.
pub fn lock(dir: &Path) -> Result<fs::File, SweepError> {
    let path = dir.join(LOCK);
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .io(|| format!("cannot create {}", path.display()))?;
    // A process forked by another thread of this one (a run being spawned)
    // holds a copy of every descriptor until it execs: a lock it shares goes
    // with its exec, so a held lock is tried again for up to 200 ms before
    // it counts as another sweep's.
    let mut held = !try_lock(&f).io(|| format!("cannot lock {}", path.display()))?;
    for _ in 0..20 {
        if !held {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        held = !try_lock(&f).io(|| format!("cannot lock {}", path.display()))?;
    }
    if held {
        return Err(SweepError::Refused(format!(
            "{} is in use by another sweep (lock {})",
            dir.display(),
            path.display()
        )));
    }
    Ok(f)
}

/// Takes an exclusive lock on `f` (flock, as std's `File::try_lock`, which is
/// newer than this crate's rust-version), held until `f` is dropped or the
/// process ends. `Ok(false)`: another process holds it.
pub fn try_lock(f: &fs::File) -> std::io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor that `f` owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::WouldBlock {
                Ok(false)
            } else {
                Err(e)
            };
        }
    }
    #[cfg(not(unix))]
    let _ = f;
    Ok(true)
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed into
/// place once complete.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SweepError> {
    let mut f = StagedFile::create(path, 1 << 16)?;
    f.write_all(bytes)?;
    Ok(f.commit(false)?)
}

/// `value` as pretty JSON in `path`, as [`write_atomic`] writes.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), SweepError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| SweepError::Unreadable(format!("cannot encode {}: {e}", path.display())))?;
    write_atomic(path, text.as_bytes())
}

/// Held while results.csv is written: a sweep and its clean-up on a signal
/// (another thread) never write it at once.
static RESULTS_WRITE: Mutex<()> = Mutex::new(());

fn results_write() -> MutexGuard<'static, ()> {
    RESULTS_WRITE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes the results table of `rows` as `out/results.csv` and returns its path.
pub fn write_results<'a>(
    out: &Path,
    spec: &Spec,
    rows: impl Iterator<Item = &'a Row>,
) -> Result<PathBuf, SweepError> {
    let _one = results_write();
    write_results_unlocked(out, spec, rows)
}

/// [`write_results`], after which no other write of a results table starts
/// in this process: for a process about to end on a signal.
pub(crate) fn write_results_last<'a>(
    out: &Path,
    spec: &Spec,
    rows: impl Iterator<Item = &'a Row>,
) -> Result<PathBuf, SweepError> {
    // Never released: the process ends after this write, and the sweep's own
    // writes wait until then.
    std::mem::forget(results_write());
    write_results_unlocked(out, spec, rows)
}

fn write_results_unlocked<'a>(
    out: &Path,
    spec: &Spec,
    rows: impl Iterator<Item = &'a Row>,
) -> Result<PathBuf, SweepError> {
    let rows: Vec<Row> = rows.cloned().collect();
    let path = out.join(RESULTS_CSV);
    write_atomic(
        &path,
        results_csv(&spec.param_columns(), &rows, &spec.metrics).as_bytes(),
    )?;
    Ok(path)
}
