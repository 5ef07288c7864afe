//! End-to-end: `nmpsim demo` on a small configuration writes a complete run
//! directory and reports that both backward paths agree.

use crate::common::*;

use std::process::Command;

#[test]
fn demo_writes_a_run_directory_and_agrees() {
    let t = TempDir::new("demo-ok");
    let out = t.0.join("run");
    let o = binary()
        .args(words("demo --rows 5000 --batch 128 --tables 3 --batches 2"))
        .args(words("--dist zipf:1.05 --optimizer adagrad --json --out"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = stdout_json(&o);
    let r = &v["results"];
    assert_eq!(r["same_unique_rows"], true);
    assert_eq!(r["casted_vs_coalesced_max_rel_err"].as_f64(), Some(0.0));
    assert_eq!(r["primitives"].as_array().unwrap().len(), 8);
    // Figure 6's shape holds on any input: casting at least halves expand-coalesce traffic.
    assert!(r["expand_coalesce_over_casted_bytes"].as_f64().unwrap() >= 1.9);
    for f in [
        "config.json",
        "results.json",
        "primitives.csv",
        "summary.txt",
        "trace-stats.json",
    ] {
        assert!(out.join(f).is_file(), "missing {f}");
    }
    let cfg: serde_json::Value = read_json(&out.join("config.json"));
    assert_eq!(cfg["config"]["spec"]["batch_size"], 128);
    assert_eq!(cfg["config"]["optimizer"]["kind"], "adagrad");
    assert!(cfg["build"]["git_rev"].is_string());
    let csv = read(&out.join("primitives.csv"));
    assert!(csv.starts_with("primitive,time_ms,read_bytes,write_bytes,throughput_gbps\n"));
    // Bytes are the mean per batch, as the trace's unique rows are: the
    // coalesce writes one 256 B row and its 4 B id per unique row.
    let coalesce = r["primitives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["primitive"] == "coalesce")
        .unwrap();
    let unique = r["trace"]["mean_unique_rows_per_batch"].as_f64().unwrap();
    let written = coalesce["write_bytes"].as_f64().unwrap();
    assert!((written / 260.0 - unique).abs() < 1.0, "{written} {unique}");
}

#[test]
fn demo_rejects_bad_arguments_clearly() {
    let o = binary()
        .args(words("demo --optimizer lamb -q"))
        .output()
        .unwrap();
    let e = exited(&o, 2);
    assert!(
        e.contains("unknown optimizer 'lamb'") && e.contains("row-wise-adagrad"),
        "{e}"
    );

    let o = binary()
        .args(words("demo --profile nope -q"))
        .output()
        .unwrap();
    let e = exited(&o, 2);
    assert!(
        e.contains("unknown profile 'nope'") && e.contains("rm1"),
        "{e}"
    );

    // Tables that cannot fit are refused before anything is allocated.
    let o = binary()
        .args(words("demo --rows 4000000000 --dim 4096 -q"))
        .output()
        .unwrap();
    let e = exited(&o, 2);
    assert!(e.contains("GB of memory available); lower"), "{e}");
    // An address-space limit (ulimit -v) is memory the run cannot take either:
    // 5.1 GB of tables fit the machine but not 3 GB of address space.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 3000000 && exec '{}' demo --rows 20000000 --dim 32 -q",
            env!("CARGO_BIN_EXE_nmpsim")
        ))
        .output()
        .unwrap();
    let e = exited(&o, 2);
    assert!(
        e.contains("GB the address-space limit (ulimit -v) leaves); lower"),
        "{e}"
    );

    // A learning rate that is not a number stops the run before its directory.
    let dir = TempDir::new("demo-nan-lr");
    let out = dir.0.join("run");
    let o = binary()
        .args(words("demo --lr NaN -q --out"))
        .arg(&out)
        .output()
        .unwrap();
    let e = exited(&o, 2);
    assert!(e.contains("--lr NaN"), "{e}");
    assert!(!out.exists(), "a run directory was left");
    // So does a negative one, in `demo` and `nmp run` as in `train`.
    for cmd in [&["demo"][..], &["nmp", "run"][..]] {
        let o = binary()
            .args(cmd)
            .args(words("--lr=-1 -q --out"))
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains("--lr -1: expected a non-negative"),
            "{cmd:?}: {e}"
        );
        assert!(!out.exists(), "{cmd:?}: a run directory was left");
    }
}

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = binary()
        .args(words("trace gen --list-profiles"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close our end of stdout before the child writes: its writes hit a broken pipe.
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!err.contains("panicked"), "stderr: {err}");
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.success() || status.signal() == Some(libc_sigpipe()),
        "{status:?}"
    );
}

#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13 // SIGPIPE on Linux and the BSDs
}

/// A batch too large for memory is refused up front, naming the flags,
/// rather than aborting (or being killed) part-way: the check counts the
/// batch and the primitives' buffers, not only the tables (here 10^6 bags
/// of RM1's 80 lookups on 10 tables, under a 6 GB address-space limit).
#[test]
fn a_batch_beyond_memory_is_refused_before_anything_runs() {
    let t = TempDir::new("demo-bigbatch");
    let dir = &t.0;
    let o = nmpsim_within(
        dir,
        6_000_000,
        &words("demo --batch 1000000 --rows 1000 -q --out o"),
    );
    let err = exited(&o, 2);
    assert!(
        err.contains("a batch of 1000000 bags on 10 tables and the primitives' buffers need")
            && err.contains("lower --batch, --bag, --tables, --rows or --dim"),
        "{err}"
    );
    assert!(!dir.join("o").exists());
}
