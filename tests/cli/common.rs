//! What every CLI test module needs: run the built binary, and a temporary
//! directory removed when the test ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs the built `nmpsim` in `dir` and returns what it did.
pub fn nmpsim(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nmpsim"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("spawn nmpsim")
}

/// [`nmpsim`] under an address-space limit of `kib` KiB (`ulimit -v`), which
/// the memory checks take as the memory available.
pub fn nmpsim_within(dir: &Path, kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .current_dir(dir)
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_nmpsim"))
        .args(args)
        .output()
        .expect("spawn sh")
}

/// Makes a named pipe at `path`; false (with a note that the test is
/// skipped) where `mkfifo` is not available.
pub fn make_fifo(path: &Path) -> bool {
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipped: mkfifo is not available");
    }
    made
}

/// A fresh directory `nmpsim-cli-<name>-<pid>-<n>` under the system
/// temporary directory, removed on drop; `n` counts the directories this
/// process made, so tests that run at once never share one.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("nmpsim-cli-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create temp dir");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The words of `line`, split at whitespace: a command line written as one
/// string (no quoting; a word with a space in it goes in an array instead).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `nmpsim ARGS` in `dir`, which must succeed; returns its stdout.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let o = nmpsim(dir, args);
    assert!(
        o.status.success(),
        "nmpsim {args:?} failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8 stdout")
}

/// Runs `nmpsim ARGS` in `dir`, which must be refused (exit status 2);
/// returns its stderr.
pub fn fails(dir: &Path, args: &[&str]) -> String {
    let o = nmpsim(dir, args);
    assert_eq!(o.status.code(), Some(2), "nmpsim {args:?} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a command printed: its stdout, then its stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The file at `p`, which must be readable text.
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// The JSON file at `path`.
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
