//! How every command meets an output it cannot write: a standard output on a
//! full device, a pipe closed early.

use std::fs::File;
use std::path::Path;
use std::process::{Output, Stdio};

use crate::common::*;

/// Runs `nmpsim args` in `dir` with stdout on `/dev/full`.
fn to_full(dir: &Path, args: &[&str]) -> Output {
    process(dir)
        .args(args)
        .stdout(File::create("/dev/full").expect("open /dev/full"))
        .output()
        .expect("spawn nmpsim")
}

const SPEC: &str = r#"command = "dram"
[base]
engine = "native"
requests = 1000
[axes]
stream = ["random", "sequential"]
"#;

const CSV: &str = "x,y\n1,2\n2,4\n3,8\n";

#[test]
fn a_stdout_that_cannot_be_written_is_an_error_not_a_panic() {
    let t = TempDir::new("full");
    let d = &t.0;
    write(d, "spec.toml", SPEC);
    write(d, "r.csv", CSV);
    succeeds(
        d,
        &words("trace gen --profile rm1 --batch 16 --batches 2 -o t.nmpt"),
    );
    let commands: &[&[&str]] = &[
        &["dram", "presets"],
        &words("dram --engine native --requests 1000 --out dram"),
        &words("dram --engine native --requests 1000 --json --out dram-json"),
        &words("nmp run --rows 2000 --batch 8 --ranks 2 --engine native --json -q --out nmp"),
        &words("train --iters 2 --batch 16 --json -q --out train-json"),
        &words("train --iters 2 --batch 16 --out train"),
        &words("trace stats t.nmpt --out stats"),
        &words("trace gen --list-profiles"),
        &words("trace export t.nmpt --csv -"),
        &words("sweep spec.toml --out sw --dry-run"),
        &words("plot r.csv --x x --y y"),
        &words("kernels check --tables 2 --batch 16 --rows 1000 --dim 8"),
        &["gpu"],
        &["--version"],
        &["--help"],
        &["dram", "--help"],
    ];
    for args in commands {
        let o = to_full(d, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "nmpsim {args:?}: {err}");
        assert!(
            err.contains("error: cannot write to standard output: No space left on device"),
            "nmpsim {args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "nmpsim {args:?}: {err}");
    }
    // The run directories were written whole before anything was printed.
    for run in ["dram", "dram-json", "nmp", "train", "train-json", "stats"] {
        for f in ["config.json", "results.json", "summary.txt"] {
            let p = d.join(run).join(f);
            assert!(p.is_file(), "{} is missing", p.display());
        }
    }
    let log = read(&d.join("train/train.log"));
    assert!(log.contains("run directory:"), "{log}");
    // Help and version still print, plain when stdout is no terminal.
    let o = nmpsim(d, &["dram", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("Usage: nmpsim dram") && !help.contains('\u{1b}'),
        "{help}"
    );
    let o = nmpsim(d, &["--version"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("nmpsim "));
    // A usage error still goes to stderr with status 2.
    let o = nmpsim(d, &["--bogus"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unexpected argument"));
}

#[test]
fn a_pipe_closed_early_ends_the_command_quietly() {
    let t = TempDir::new("pipe");
    succeeds(
        &t.0,
        &words("trace gen --profile rm1 --batch 256 --batches 2 -o t.nmpt"),
    );
    // Megabytes of CSV: far more than a pipe holds, so the command is still
    // writing when the pipe closes.
    let mut child = process(&t.0)
        .args(words("trace export t.nmpt --csv -"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nmpsim");
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("wait");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    use std::os::unix::process::ExitStatusExt;
    const SIGPIPE: i32 = 13;
    assert_eq!(o.status.signal(), Some(SIGPIPE), "{:?}", o.status);
}

/// A stderr that cannot be written (`2> /dev/full`, a log on a full disk)
/// loses no run: messages and progress are dropped, the run finishes.
#[test]
fn a_stderr_that_cannot_be_written_ends_no_run() {
    let t = TempDir::new("errfull");
    let d = &t.0;
    write(d, "spec.toml", SPEC);
    let run = |args: &[&str]| {
        process(d)
            .args(args)
            .stderr(File::create("/dev/full").expect("open /dev/full"))
            .output()
            .expect("spawn nmpsim")
    };
    let o = run(&words("train --model tiny --iters 3 --batch 16 --out tr"));
    assert!(o.status.success(), "{o:?}");
    assert!(d.join("tr/results.json").is_file());
    let o = run(&words("sweep spec.toml --out sw --yes"));
    assert!(o.status.success(), "{o:?}");
    assert!(d.join("sw/results.csv").is_file());
    let o = run(&words(
        "trace gen --profile criteo-kaggle --batches 1 --batch 8 -o \
         t.nmpt",
    ));
    assert!(o.status.success(), "{o:?}");
}
