//! Run directories: every command that produces results writes one directory
//! holding the resolved config, machine-readable results (JSON and tidy CSV) and a
//! short human summary. Files are written atomically (temporary file, then rename),
//! so an interrupted run never leaves a half-written result behind.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nmpsim_traces::staged::StagedFile;
use serde::Serialize;

use crate::build_info::build_info;

const CONFIG: &str = "config.json";
const RESULTS: &str = "results.json";
const SUMMARY: &str = "summary.txt";
/// There from a run's start until it [finishes](RunDir::finish): a run
/// directory holding it is not a finished run, whatever else it holds (a
/// run can fail, or be killed, after writing `results.json`).
const RUNNING: &str = ".nmpsim-running";

/// Where an earlier finished run's files wait while a new run goes into its
/// directory: removed when the new run succeeds, kept if it fails.
pub const PREVIOUS_RUN: &str = "previous-run";
/// In a [`PREVIOUS_RUN`] that nmpsim made: a folder of that name without it
/// is the user's (even an nmpsim run directory of their own), and is never
/// removed.
const PREVIOUS_MARK: &str = ".nmpsim-previous-run";

/// Whether `prev` is a [`PREVIOUS_RUN`] folder nmpsim set aside (it holds
/// [`PREVIOUS_MARK`]).
fn ours_previous(prev: &Path) -> bool {
    prev.is_dir() && prev.join(PREVIOUS_MARK).is_file()
}

/// An output directory for one run.
pub struct RunDir {
    path: PathBuf,
    /// The directory held a finished run (its `results.json`), whose files
    /// this run's removals set aside in [`PREVIOUS_RUN`] instead.
    keeps_previous: bool,
    /// [`finish`](Self::finish) was called: the run succeeded.
    finished: bool,
    /// The directory existed without an nmpsim `config.json`: files under
    /// the names this run writes are someone else's, and are not removed.
    foreign: bool,
    /// The directory itself, locked while the run goes (see [`lock_run_dir`]).
    _lock: fs::File,
}

pub use nmpsim_experiments::sweep::dir::try_lock;

/// Locks the directory `dir` itself (no file is added) for one run, so two
/// runs never write one directory at the same time; fails at once if
/// another run holds it.
pub fn lock_run_dir(dir: &Path) -> Result<fs::File> {
    let f = fs::File::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    if !try_lock(&f).with_context(|| format!("cannot lock {}", dir.display()))? {
        anyhow::bail!(
            "{} is in use by another nmpsim run; wait for it, or name another directory",
            dir.display()
        );
    }
    Ok(f)
}

/// Whether `dir` holds a finished run: its `results.json` is there and does
/// not say the run failed, was interrupted or is still going (a `status`
/// other than `completed`), and the run's [`RUNNING`] mark is gone. A failed
/// or stopped run is not kept aside.
fn finished_run(dir: &Path) -> bool {
    if dir.join(RUNNING).exists() {
        return false;
    }
    let Ok(bytes) = fs::read(dir.join(RESULTS)) else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return false;
    };
    match v.get("results").and_then(|r| r.get("status")) {
        None => true,
        Some(st) => st.as_str() == Some("completed"),
    }
}

/// The command an nmpsim run directory's `config.json` names, with its
/// words joined by `-` as run directories are named; `None` for no
/// `config.json`. An existing `config.json` that is not one of nmpsim's is an
/// error: the directory is not a run directory.
fn earlier_command(dir: &Path) -> Result<Option<String>> {
    let p = dir.join(CONFIG);
    let bytes = match fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
    };
    let v: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
    match v.as_ref().and_then(|v| {
        v.get("build")?;
        v.get("command")?.as_str()
    }) {
        Some(c) => Ok(Some(c.replace(' ', "-"))),
        None => anyhow::bail!(
            "{} is not an nmpsim run's configuration (no `command` and `build`); name a new directory, or an earlier run's, for --out",
            p.display()
        ),
    }
}

impl RunDir {
    /// Uses `dir` if given, else `runs/<command>-<unix seconds>-<pid>` under the
    /// current directory. Creates it (and parents).
    ///
    /// A directory holding another command's run, or a `config.json` that is
    /// not nmpsim's, is refused before anything in it changes, and so is one
    /// without a run's `config.json` that holds a file this run would
    /// replace ([`remove_earlier`](Self::remove_earlier)). A finished
    /// earlier run of the same command (it has `results.json`) is not
    /// deleted: the files this run replaces move to [`PREVIOUS_RUN`], which
    /// goes when this run [finishes](Self::finish) and stays if it fails.
    pub fn create(dir: Option<&Path>, command: &str) -> Result<Self> {
        let path = match dir {
            Some(d) => d.to_path_buf(),
            None => {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                PathBuf::from("runs").join(format!("{command}-{secs}-{}", std::process::id()))
            }
        };
        check_out_path(&path, "the run's directory")?;
        let earlier = earlier_command(&path)?;
        let foreign = earlier.is_none() && path.is_dir();
        if let Some(earlier) = earlier {
            let this = command.replace(' ', "-");
            // (`nmp run` names its directories `nmp-...`.)
            if earlier != this && !(this == "nmp" && earlier == "nmp-run") {
                anyhow::bail!(
                    "{} holds a `{}` run; name another directory for this `{}` run (or remove that one)",
                    path.display(),
                    earlier.replace('-', " "),
                    this.replace('-', " ")
                );
            }
        }
        fs::create_dir_all(&path)
            .with_context(|| format!("cannot create run directory {}", path.display()))?;
        let lock = lock_run_dir(&path)?;
        let keeps_previous = !foreign && finished_run(&path);
        let prev = path.join(PREVIOUS_RUN);
        let theirs = fs::symlink_metadata(&prev).is_ok() && !ours_previous(&prev);
        if theirs && keeps_previous {
            // (This run would set the earlier run aside there.)
            anyhow::bail!(
                "{} holds {PREVIOUS_RUN}, which is not an earlier run nmpsim set aside; move it elsewhere, or name another directory for --out",
                path.display()
            );
        }
        if keeps_previous {
            if prev.is_dir() {
                // An older run than the finished one set aside now.
                fs::remove_dir_all(&prev)
                    .with_context(|| format!("cannot remove {}", prev.display()))?;
            }
            fs::create_dir(&prev).with_context(|| format!("cannot create {}", prev.display()))?;
            write_atomic(&prev.join(PREVIOUS_MARK), b"")?;
        }
        let mark = path.join(RUNNING);
        write_atomic(&mark, format!("{}\n", std::process::id()).as_bytes())?;
        let rd = RunDir {
            path,
            keeps_previous,
            finished: false,
            foreign,
            _lock: lock,
        };
        if !foreign {
            KEPT.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(rd.path.clone());
        }
        // An earlier run's own files go (aside, if it finished), so that the
        // directory describes this run alone even if it fails before writing
        // its results.
        rd.remove_earlier(&[CONFIG, RESULTS, SUMMARY])?;
        Ok(rd)
    }

    /// Writes `summary` as `summary.txt`, [`RunDir::finish`]es, then shows
    /// the run on standard output: its results as JSON with `json`, else
    /// `summary` and where the run directory is.
    pub fn finish_and_print<R: Serialize>(
        self,
        command: &str,
        results: &R,
        summary: &str,
        json: bool,
    ) -> Result<()> {
        self.write_summary(summary)?;
        let dir = self.finish()?;
        print_run(command, results, summary, json, Some(&dir))
    }

    /// Marks the run as succeeded: an earlier run set aside in
    /// [`PREVIOUS_RUN`] (by this run, or kept after a failed one) is removed.
    /// Without it (the command failed), that earlier run stays there, and a
    /// note says so when the `RunDir` goes.
    /// Returns the directory's path.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.finished = true;
        let mark = self.path.join(RUNNING);
        match fs::remove_file(&mark) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", mark.display()));
            }
            _ => {}
        }
        let prev = self.path.join(PREVIOUS_RUN);
        // (In a directory that held no run, `previous-run` is not ours.)
        if !self.foreign && ours_previous(&prev) {
            fs::remove_dir_all(&prev)
                .with_context(|| format!("cannot remove {}", prev.display()))?;
        }
        Ok(self.path.clone())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes what an earlier run of the same command left here under the
    /// names it owns: each of `names` is a file name, or, ending in `/`, the
    /// name of a directory (removed with what is in them). A file where a
    /// directory is named, or the other way round, is not what a run wrote:
    /// it stays, and writing there then fails, naming it. A run into an
    /// existing directory then leaves only its own outputs, not a mix of two
    /// runs'. ([`create`](Self::create) removes `config.json`,
    /// `results.json` and `summary.txt` itself.) After a finished run, they
    /// move to [`PREVIOUS_RUN`] instead; in a directory that holds no run
    /// (no `config.json`), any of them is an error.
    pub fn remove_earlier(&self, names: &[impl AsRef<str>]) -> Result<()> {
        for e in fs::read_dir(&self.path)
            .with_context(|| format!("cannot read {}", self.path.display()))?
        {
            let e = e.with_context(|| format!("cannot read {}", self.path.display()))?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name == PREVIOUS_RUN {
                continue;
            }
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            // (A directory under a file's name is not what a run wrote: it
            // stays, and writing that file then fails, naming it.)
            let owned = |p: &str| match p.strip_suffix('/') {
                Some(dir) => name == dir && is_dir,
                None => name == p && !is_dir,
            };
            if !names.iter().any(|p| owned(p.as_ref())) {
                continue;
            }
            let p = e.path();
            if self.foreign {
                // Refused before this run wrote anything: the directory is
                // left as it was.
                let _ = fs::remove_file(self.path.join(RUNNING));
                anyhow::bail!(
                    "{} holds {}, which this run would replace, but no nmpsim run's config.json; name a new directory, or an earlier run's, for --out",
                    self.path.display(),
                    name
                );
            }
            if self.keeps_previous {
                let to = self.path.join(PREVIOUS_RUN).join(e.file_name());
                fs::rename(&p, &to).with_context(|| {
                    format!(
                        "cannot move the earlier run's {} to {}",
                        p.display(),
                        to.display()
                    )
                })?;
                continue;
            }
            let gone = if is_dir {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            gone.with_context(|| format!("cannot remove the earlier run's {}", p.display()))?;
        }
        Ok(())
    }

    /// Writes `config.json`: the fully resolved configuration plus build facts.
    pub fn write_config<C: Serialize>(&self, command: &str, config: &C) -> Result<()> {
        let v = serde_json::json!({
            "command": command,
            "build": build_info(),
            "config": short_floats(config)?,
        });
        self.write_file(CONFIG, serde_json::to_string_pretty(&v)?.as_bytes())
    }

    /// Writes `results.json`: the results object plus build facts.
    pub fn write_results<R: Serialize>(&self, command: &str, results: &R) -> Result<()> {
        self.write_file(RESULTS, results_json(command, results)?.as_bytes())
    }

    /// Writes a tidy CSV (`header` then `rows`, no padding) as `name`.
    pub fn write_csv(&self, name: &str, header: &[&str], rows: &[Vec<String>]) -> Result<()> {
        self.write_file(name, csv_text(header, rows).as_bytes())
    }

    /// Writes a tidy CSV as `name`: the columns' headers, then a row an
    /// item, each cell as its column shows the item.
    pub fn write_table<T>(
        &self,
        name: &str,
        columns: &[Column<T>],
        items: impl IntoIterator<Item = T>,
    ) -> Result<()> {
        let header: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let rows: Vec<Vec<String>> = items
            .into_iter()
            .map(|item| columns.iter().map(|c| (c.1)(&item)).collect())
            .collect();
        self.write_csv(name, &header, &rows)
    }

    /// Writes `summary.txt`.
    pub fn write_summary(&self, text: &str) -> Result<()> {
        self.write_file(SUMMARY, text.as_bytes())
    }

    /// Atomically writes `name` inside the run directory.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.path.join(name), bytes)
    }
}

/// A CSV column: its header, and how an item shows in it.
pub type Column<T> = (&'static str, fn(&T) -> String);

/// Columns of an item's fields as they display, each headed by the field's
/// name.
macro_rules! fields {
    ($($field:ident),+ $(,)?) => {
        [$((stringify!($field), |item| item.$field.to_string())),+]
    };
}
pub(crate) use fields;

/// Refuses an `--out` path that cannot be a run directory, naming why: a
/// file, a link to nothing, or a path through a file.
/// `what` names what `--out` names (`the run's directory`).
pub fn check_out_path(path: &Path, what: &str) -> Result<()> {
    for a in path.ancestors() {
        if let Ok(m) = fs::symlink_metadata(a)
            && m.file_type().is_symlink()
            && !a.exists()
        {
            let to = fs::read_link(a).unwrap_or_default();
            anyhow::bail!(
                "{} is a link to {}, which does not exist; --out names {what}",
                a.display(),
                to.display()
            );
        }
    }
    if path.exists() && !path.is_dir() {
        anyhow::bail!("{} is not a directory; --out names {what}", path.display());
    }
    for a in path.ancestors().skip(1) {
        if !a.as_os_str().is_empty() && a.exists() && !a.is_dir() {
            anyhow::bail!(
                "{} is a file, so {} cannot be a directory; --out names {what}",
                a.display(),
                path.display()
            );
        }
    }
    Ok(())
}

/// Run directories of this process whose earlier run waits in
/// [`PREVIOUS_RUN`] until their run finishes: what a signal that ends the
/// process notes ([`note_kept_runs`]).
static KEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn note_kept(dir: &Path) {
    eprintln!(
        "note: the earlier run in {} is kept in {}",
        dir.display(),
        dir.join(PREVIOUS_RUN).display()
    );
}

/// Says, for each run directory of this process still open, that its
/// earlier run is kept in [`PREVIOUS_RUN`] (a signal ends the process
/// without dropping them).
pub fn note_kept_runs() {
    for dir in KEPT.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        if ours_previous(&dir.join(PREVIOUS_RUN)) {
            note_kept(dir);
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        KEPT.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|d| d != &self.path);
        if !self.finished && !self.foreign && ours_previous(&self.path.join(PREVIOUS_RUN)) {
            note_kept(&self.path);
        }
    }
}

/// A command's results on standard output: as JSON with `json`, else
/// `summary` and, when it wrote one, where its run directory is.
pub fn print_run<R: Serialize>(
    command: &str,
    results: &R,
    summary: &str,
    json: bool,
    dir: Option<&Path>,
) -> Result<()> {
    if json {
        outln!("{}", results_json(command, results)?)?;
    } else {
        out!("{summary}")?;
        if let Some(dir) = dir {
            outln!("run directory: {}", dir.display())?;
        }
    }
    Ok(())
}

/// The JSON text every command prints for `--json` and stores as `results.json`.
pub fn results_json<R: Serialize>(command: &str, results: &R) -> Result<String> {
    let v = serde_json::json!({
        "command": command,
        "build": build_info(),
        "results": short_floats(results)?,
    });
    Ok(serde_json::to_string_pretty(&v)?)
}

/// `value` as a JSON value whose 32-bit floats read as they were given:
/// `0.01`, not the `0.009999999776482582` of the same number widened to 64
/// bits (which is what converting straight to a value does). Written out
/// first, each f32 takes its shortest form; read back, that is the f64 the
/// value holds.
fn short_floats<T: Serialize>(value: &T) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(&serde_json::to_string(value)?)?)
}

/// Writes `bytes` to `path` as a [`StreamedFile`]: through a temporary file
/// beside it, renamed into place once complete.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = StreamedFile::create(path)?;
    f.writer()
        .write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.commit()
}

/// Fails when `output` names the same file as `input` (writing it would
/// destroy the input while it is read); `what` names the output's flag.
pub fn refuse_same_file(input: &Path, output: &Path, what: &str) -> Result<()> {
    let same = match (fs::canonicalize(input), fs::canonicalize(output)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        anyhow::bail!(
            "{what} {} is the input file; name another output",
            output.display()
        );
    }
    Ok(())
}

/// A file written in a stream: a [`StagedFile`], so a regular file (or a
/// new one) is written through a temporary file beside it and renamed into
/// place by [`commit`](Self::commit). A failed write leaves neither a
/// half-written file nor a stray one, and never touches what was there
/// before. An existing special file (a device, a pipe) is written directly
/// and never removed, and through a link to a file, that file is replaced.
pub struct StreamedFile(StagedFile);

impl StreamedFile {
    pub fn create(path: &Path) -> Result<Self> {
        Ok(StreamedFile(StagedFile::create(path, 1 << 16)?))
    }

    /// Where to write.
    pub fn writer(&mut self) -> &mut std::io::BufWriter<fs::File> {
        self.0.writer()
    }

    /// Flushes and moves the file into place.
    pub fn commit(self) -> Result<()> {
        Ok(self.0.commit(false)?)
    }
}

pub use nmpsim_experiments::results::csv_text;

/// A counter of `unit` on stderr for work of unknown length (a trace read to
/// its end), hidden as [`progress`] is.
pub fn progress_count(what: &str, unit: &str, quiet: bool) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let pb = ProgressBar::new_spinner();
    if quiet {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg:>12}} {{spinner}} {{pos}} {unit} {{per_sec}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(what.to_string());
    pb
}

/// A progress bar on stderr that hides itself when stderr is not a terminal or
/// `quiet` is set.
pub fn progress(len: u64, what: &str, quiet: bool) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let pb = ProgressBar::new(len);
    if quiet {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_only_when_needed() {
        let t = csv_text(
            &["a", "b"],
            &[
                vec!["1".into(), "x,y".into()],
                vec!["q\"".into(), "2".into()],
            ],
        );
        assert_eq!(t, "a,b\n1,\"x,y\"\n\"q\"\"\",2\n");
    }

    #[test]
    fn atomic_write_leaves_no_temporary() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let rd = RunDir::create(Some(&dir), "test").unwrap();
        rd.write_results("test", &serde_json::json!({"x": 1}))
            .unwrap();
        rd.finish().unwrap();
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("results.json")]);
        let v: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(v["results"]["x"], 1);
        assert!(v["build"]["git_rev"].is_string());
    }

    #[test]
    fn a_run_that_fails_after_its_results_does_not_replace_the_finished_one() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let run = |x: u32, finish: bool| {
            let rd = RunDir::create(Some(&dir), "test").unwrap();
            rd.write_config("test", &serde_json::json!({"x": x}))
                .unwrap();
            rd.write_results("test", &serde_json::json!({"x": x}))
                .unwrap();
            if finish {
                rd.finish().unwrap();
            }
        };
        let x_in = |p: &Path| -> serde_json::Value {
            serde_json::from_slice::<serde_json::Value>(&fs::read(p.join("results.json")).unwrap())
                .unwrap()["results"]["x"]
                .clone()
        };
        let prev = dir.join(PREVIOUS_RUN);
        run(1, true);
        assert!(!dir.join(RUNNING).exists());
        // Run 2 writes its results, then fails: run 1 waits in previous-run.
        run(2, false);
        assert_eq!(x_in(&prev), 1);
        assert!(dir.join(RUNNING).exists());
        // Run 3 fails too: run 1 is still the one kept, not the failed run 2.
        run(3, false);
        assert_eq!(x_in(&prev), 1);
        // A run that finishes replaces them all.
        run(4, true);
        assert_eq!(x_in(&dir), 4);
        assert!(!prev.exists() && !dir.join(RUNNING).exists());
    }

    #[test]
    fn a_users_previous_run_folder_is_never_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let mine = dir.join(PREVIOUS_RUN).join("thesis.tex");
        fs::create_dir_all(mine.parent().unwrap()).unwrap();
        fs::write(&mine, "important").unwrap();
        let run = || -> Result<()> {
            let rd = RunDir::create(Some(&dir), "test")?;
            rd.write_config("test", &serde_json::json!({}))?;
            rd.write_results("test", &serde_json::json!({}))?;
            rd.finish()?;
            Ok(())
        };
        // The first run goes into the user's directory beside the folder.
        run().unwrap();
        assert_eq!(fs::read_to_string(&mine).unwrap(), "important");
        // The second would set the first aside in it: refused, untouched.
        let e = run().unwrap_err().to_string();
        assert!(e.contains("not an earlier run nmpsim set aside"), "{e}");
        assert_eq!(fs::read_to_string(&mine).unwrap(), "important");
        assert!(dir.join(RESULTS).exists());
    }

    #[test]
    fn a_refused_directory_is_left_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(SUMMARY), "mine").unwrap();
        let e = RunDir::create(Some(&dir), "test")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("which this run would replace"), "{e}");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(SUMMARY)]);
    }

    #[test]
    fn out_paths_that_cannot_be_directories_say_why() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("afile");
        fs::write(&file, "x").unwrap();
        let e = RunDir::create(Some(&file.join("sub")), "test")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("afile is a file, so"), "{e}");
        let link = dir.join("dangling");
        std::os::unix::fs::symlink(dir.join("nowhere"), &link).unwrap();
        let e = RunDir::create(Some(&link), "test")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("which does not exist"), "{e}");
    }
}
