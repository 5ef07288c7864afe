//! What every CLI test module needs: run the built binary, and a temporary
//! directory removed when the test ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built `nmpsim`, to run in `dir`.
pub fn command(dir: &Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("nmpsim").expect("the nmpsim binary");
    c.current_dir(dir);
    c
}

/// The built `nmpsim` as a process to set up (pipes, signals), run in the
/// current directory.
pub fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nmpsim"))
}

/// [`binary`], run in `dir`.
pub fn process(dir: &Path) -> Command {
    let mut c = binary();
    c.current_dir(dir);
    c
}

/// Runs the built `nmpsim` in `dir` and returns what it did.
pub fn nmpsim(dir: &Path, args: &[&str]) -> Output {
    command(dir).args(args).output().expect("spawn nmpsim")
}

/// [`nmpsim`], which must succeed.
pub fn succeeds(dir: &Path, args: &[&str]) -> Output {
    command(dir)
        .args(args)
        .assert()
        .success()
        .get_output()
        .clone()
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

/// A fresh directory `nmpsim-cli-<name>-<random>` under the system
/// temporary directory, removed on drop; its path is `.0`.
pub struct TempDir(pub PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let d = tempfile::Builder::new()
            .prefix(&format!("nmpsim-cli-{name}-"))
            .tempdir()
            .expect("create temp dir");
        TempDir(d.path().to_path_buf(), d)
    }
}

/// A fresh [`TempDir`] (see [`TempDir::new`]) holding the trace that
/// `nmpsim trace gen ARGS` writes there, which must succeed.
pub fn with_trace(name: &str, args: &str) -> TempDir {
    let t = TempDir::new(name);
    ok(&t.0, &words(&format!("trace gen {args}")));
    t
}

/// Writes `contents` to `dir/rel`, which must succeed.
pub fn write(dir: &Path, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
    let p = dir.join(rel);
    std::fs::write(&p, contents).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

/// The words of `line`, split at whitespace: a command line written as one
/// string (no quoting; a word with a space in it goes in an array instead).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `nmpsim ARGS` in `dir`, which must succeed; returns its stdout.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let o = command(dir).args(args).assert().success();
    String::from_utf8(o.get_output().stdout.clone()).expect("utf-8 stdout")
}

/// Runs `nmpsim ARGS` in `dir`, which must be refused (exit status 2);
/// returns its stderr.
pub fn fails(dir: &Path, args: &[&str]) -> String {
    let o = command(dir).args(args).assert().code(2);
    String::from_utf8_lossy(&o.get_output().stderr).into_owned()
}

/// What a command printed on stderr, once it has exited with `code` (its
/// stderr is the message where it has not).
#[track_caller]
pub fn exited(o: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "{err}");
    err
}

/// Runs `nmpsim ARGS` in `dir`, which must fail (any status but 0);
/// returns what it printed ([`text`]).
#[track_caller]
pub fn unsuccessful(dir: &Path, args: &[&str]) -> String {
    let o = nmpsim(dir, args);
    let s = text(&o);
    assert!(!o.status.success(), "{s}");
    s
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

/// Column `i` of CSV text's records after the header, as numbers (no
/// quoted commas).
pub fn column(csv: &str, i: usize) -> Vec<f64> {
    csv.lines()
        .skip(1)
        .map(|l| {
            let cell = l
                .split(',')
                .nth(i)
                .unwrap_or_else(|| panic!("no column {i}: {l}"));
            cell.parse()
                .unwrap_or_else(|e| panic!("column {i} `{cell}`: {e}"))
        })
        .collect()
}

/// The `results` of `nmpsim COMMAND ARGS --json` in `dir`, which must
/// succeed and name its command.
pub fn results_of(dir: &Path, command: &str, args: &str) -> serde_json::Value {
    let out = ok(dir, &words(&format!("{command} {args} --json")));
    let v: serde_json::Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{command} --json is not JSON ({e}): {out}"));
    assert_eq!(v["command"], command);
    v["results"].clone()
}

/// What a command printed on stdout, as JSON.
pub fn stdout_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// The JSON file at `path`.
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
