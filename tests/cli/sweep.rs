//! End-to-end tests of `nmpsim sweep` through the built binary: resume after a
//! kill, sharding and merge, spec errors, the size guard, failed runs.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nmpsim_experiments::{is_timing_column, without_columns};

use crate::common::*;

/// Runs with a `status.json` (finished) under a sweep directory.
fn finished_runs(sweep: &Path) -> usize {
    std::fs::read_dir(sweep.join("runs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().join("status.json").exists())
                .count()
        })
        .unwrap_or(0)
}

/// Six runs of about 0.2 s each: long enough to kill a sweep between two.
const SIX_RUNS: &str = r#"command = "dram"
[base]
engine = "dramsim3"
requests = 20000
[axes]
preset = ["DDR4-2400-x8", "DDR4-3200-x8"]
stream = ["random", "sequential", "strided:4096"]
"#;

#[test]
fn interrupted_resumed_and_sharded_sweeps_give_the_same_results() {
    let t = TempDir::new("resume");
    let d = &t.0;
    write(d, "six.toml", SIX_RUNS);

    // Uninterrupted.
    let out = ok(d, &words("sweep six.toml --out whole --json"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("summary JSON");
    assert_eq!(v["results"]["completed"], 6, "{out}");
    assert_eq!(v["results"]["failed"], 0, "{out}");
    let whole = read(&d.join("whole/results.csv"));
    let lines: Vec<&str> = whole.lines().collect();
    assert_eq!(lines.len(), 7, "{whole}");
    assert!(
        lines[0].starts_with("run,preset,stream,status,error,wall_s,runs.0."),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("runs.0.bandwidth_gbps"), "{}", lines[0]);
    assert!(lines[1].starts_with("0000-") && lines[1].contains(",DDR4-2400-x8,random,completed,,"));
    assert!(
        lines[6].starts_with("0005-")
            && lines[6].contains(",DDR4-3200-x8,strided:4096,completed,,")
    );
    let expected = without_columns(&whole, is_timing_column).unwrap();
    assert_ne!(expected, whole, "timing columns exist and are dropped");
    // The comparison below is not vacuous: the runs differ in their metrics.
    let body: Vec<&str> = expected.lines().skip(1).collect();
    let metrics = |l: &str| l.split(',').skip(5).collect::<Vec<_>>().join(",");
    assert_ne!(metrics(body[0]), metrics(body[1]));

    // Interrupted part-way (killed, as by a lost node), then resumed.
    let mut child = process(d)
        .args(words("sweep six.toml --out resumed --jobs 1 --quiet"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sweep");
    let t0 = Instant::now();
    while finished_runs(&d.join("resumed")) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no run finished in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("kill sweep");
    child.wait().expect("reap sweep");
    let done_before = finished_runs(&d.join("resumed"));
    assert!(
        (1..6).contains(&done_before),
        "the sweep should be stopped part-way, {done_before} of 6 runs finished"
    );
    let out = ok(d, &words("sweep six.toml --out resumed --json"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("summary JSON");
    assert_eq!(
        v["results"]["skipped"], done_before,
        "finished runs are reused: {out}"
    );
    assert_eq!(v["results"]["completed"], 6, "{out}");
    let resumed = read(&d.join("resumed/results.csv"));
    assert_eq!(
        without_columns(&resumed, is_timing_column).unwrap(),
        expected
    );

    // Resuming a finished sweep runs nothing and rewrites the same file.
    let out = ok(d, &words("sweep six.toml --out resumed --json"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("summary JSON");
    assert_eq!(v["results"]["skipped"], 6, "{out}");
    // The summary has the fields docs/sweeps.md names, and no others.
    let fields: Vec<&str> = v["results"]
        .as_object()
        .expect("results object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(documented_summary_fields(), sorted(fields), "{out}");
    assert_eq!(read(&d.join("resumed/results.csv")), resumed);

    // Three shards, merged.
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let dir = format!("shard-{i}");
        ok(
            d,
            &[
                "sweep", "six.toml", "--shard", &shard, "--out", &dir, "--quiet",
            ],
        );
        assert_eq!(
            finished_runs(&d.join(&dir)),
            2,
            "shard {i} holds runs i-1 and i+2"
        );
    }
    ok(d, &words("sweep merge merged shard-1 shard-2 shard-3"));
    let merged = read(&d.join("merged/results.csv"));
    assert_eq!(
        without_columns(&merged, is_timing_column).unwrap(),
        expected
    );
    // The table is a function of the run directories: merging again, in
    // another order, gives the very same bytes, timings included.
    ok(
        d,
        &words("sweep merge merged-again shard-3 shard-1 shard-2"),
    );
    assert_eq!(read(&d.join("merged-again/results.csv")), merged);

    // A directory's table holds every run finished in it, also those of
    // another shard run into the same directory.
    ok(
        d,
        &words("sweep six.toml --shard 2/3 --out shard-1 --quiet"),
    );
    let two_shards = read(&d.join("shard-1/results.csv"));
    let indices: Vec<&str> = two_shards.lines().skip(1).map(|l| &l[..4]).collect();
    assert_eq!(
        indices,
        vec!["0000", "0001", "0003", "0004"],
        "{two_shards}"
    );

    // A missing shard is reported (exit 1) and a different sweep refused.
    let o = nmpsim(d, &words("sweep merge partial shard-1 shard-2"));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error: the merge is incomplete: 2 runs of 6 are in no shard directory")
            && err.contains("shard 3/3: runs 2, 5 (none of the DIRs is this shard's")
            && err.contains("Re-run shard 3/3"),
        "{err}"
    );
    write(d, "other.toml", SIX_RUNS.replace("20000", "2000"));
    ok(
        d,
        &words("sweep other.toml --shard 1/3 --out other --quiet"),
    );
    let err = fails(d, &words("sweep merge mixed shard-1 other"));
    assert!(err.contains("different sweep"), "{err}");
    // Nor is another sweep's directory merged into.
    let err = fails(d, &words("sweep merge other shard-1 shard-3"));
    assert!(err.contains("OUT (other) holds a different sweep"), "{err}");

    // A status file that cannot be read is named, not taken for a missing run.
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            let dst = to.join(p.file_name().unwrap());
            if p.is_dir() {
                copy_tree(&p, &dst);
            } else {
                std::fs::copy(&p, dst).unwrap();
            }
        }
    }
    let copy = d.join("shard-3c");
    copy_tree(&d.join("shard-3"), &copy);
    let first_run = std::fs::read_dir(copy.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    let corrupt = first_run.join("status.json");
    std::fs::write(&corrupt, "{\"hash\": ").unwrap();
    let o = nmpsim(d, &words("sweep merge partial-c shard-1 shard-3c"));
    let err = exited(&o, 1);
    let name = corrupt.strip_prefix(d).unwrap().display().to_string();
    assert!(err.contains("1 run of 6 is in no shard directory"), "{err}");
    assert!(
        err.contains(&format!("{name}: unreadable")),
        "{name}: {err}"
    );
}

fn sorted(mut v: Vec<&str>) -> Vec<&str> {
    v.sort_unstable();
    v
}

/// The `--json` summary's fields as docs/sweeps.md lists them (the code
/// spans of its `--json` item, up to the dry run's), sorted.
fn documented_summary_fields() -> Vec<&'static str> {
    static DOC: &str = include_str!("../../docs/sweeps.md");
    let start = DOC
        .find("- `--json` prints a summary")
        .expect("docs/sweeps.md describes --json");
    let item = &DOC[start + "- `--json`".len()..];
    let item = &item[..item.find("`--dry-run`").expect("end of the item")];
    sorted(item.split('`').skip(1).step_by(2).collect())
}

fn spec_error(name: &str, spec: &str, line: usize, key: &str, what: &str) {
    let t = TempDir::new(name);
    let d = &t.0;
    let file = format!("{name}.toml");
    write(d, &file, spec);
    let err = fails(d, &["sweep", &file, "--out", "out"]);
    let place = format!("{file}:{line}: key '{key}'");
    assert!(err.contains(&place), "expected `{place}` in: {err}");
    assert_eq!(err.matches(&place).count(), 1, "said once: {err}");
    assert!(err.contains(what), "expected `{what}` in: {err}");
    assert!(!d.join("out").exists(), "nothing may run or be written");
}

/// Three runs of about a second each.
const SLOW_RUNS: &str = r#"command = "dram"
[base]
engine = "dramsim3"
requests = 200000
[axes]
stream = ["random", "sequential", "strided:4096"]
"#;

/// Starts `nmpsim sweep slow.toml --out DIR --jobs 1` in `d` and waits
/// until its first run has finished.
fn start_slow_sweep(d: &Path, out: &str) -> std::process::Child {
    write(d, "slow.toml", SLOW_RUNS);
    let child = process(d)
        .args(["sweep", "slow.toml", "--out", out, "--jobs", "1", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sweep");
    let t0 = Instant::now();
    while finished_runs(&d.join(out)) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no run finished in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

/// A second sweep into a directory that a sweep is running in fails at
/// once; a run whose directory went meanwhile is named as having no result.
#[test]
fn a_busy_sweep_directory_is_refused_and_missing_results_are_said() {
    let t = TempDir::new("busy");
    let d = &t.0;
    let first = start_slow_sweep(d, "sw");
    let t0 = Instant::now();
    let err = fails(d, &words("sweep slow.toml --out sw --jobs 1"));
    assert!(t0.elapsed() < Duration::from_secs(1), "not at once");
    assert!(
        err.contains("error: sw is in use by another sweep (lock sw/sweep.lock)"),
        "{err}"
    );
    // The finished run's directory removed under the running sweep.
    let runs = d.join("sw/runs");
    for e in std::fs::read_dir(&runs).unwrap() {
        let p = e.unwrap().path();
        if p.join("status.json").exists() {
            std::fs::remove_dir_all(&p).unwrap();
            break;
        }
    }
    let o = first.wait_with_output().unwrap();
    let err = exited(&o, 1);
    assert!(
        err.contains("sweep: 1 runs have no result (interrupted or removed?)"),
        "{err}"
    );
    // The lock went with the sweep.
    ok(d, &words("sweep slow.toml --out sw --jobs 1 --quiet"));
}

/// Ctrl-C (SIGINT to the sweep and its runs) or SIGTERM ends a sweep with
/// 130 or 143 and a results.csv of the runs finished so far; the runs it
/// cut short are not recorded as failed, and the same command runs them.
#[test]
fn an_interrupted_sweep_writes_the_results_so_far() {
    use std::os::unix::process::CommandExt;
    let t = TempDir::new("sigint");
    let d = &t.0;
    write(d, "slow.toml", SLOW_RUNS);
    for (sig, group, code) in [(libc::SIGINT, true, 130), (libc::SIGTERM, false, 143)] {
        let out = format!("sw-{sig}");
        let child = process(d)
            .args(["sweep", "slow.toml", "--out", &out, "--jobs", "1"])
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sweep");
        let t0 = Instant::now();
        while finished_runs(&d.join(&out)) == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "no run finished in 60 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let pid = child.id() as i32;
        // SAFETY: a signal to our own child (and, as Ctrl-C does, its group).
        unsafe {
            libc::kill(if group { -pid } else { pid }, sig);
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{err}");
        assert!(err.contains("sweep: interrupted; "), "{err}");
        let finished = finished_runs(&d.join(&out));
        assert!(finished < 3, "not interrupted: {err}");
        let csv = read(&d.join(&out).join("results.csv"));
        let rows: Vec<&str> = csv.lines().skip(1).collect();
        assert_eq!(rows.len(), finished, "{csv}");
        assert!(rows.iter().all(|r| r.contains(",completed,")), "{csv}");
        // (The sweep's own temporary files: a run's, killed with the sweep,
        // are its command's.)
        let tmp = format!(".{pid}.tmp");
        let left: Vec<_> = walk(&d.join(&out))
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(&tmp))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    let o = ok(d, &words("sweep slow.toml --out sw-2 --json"));
    let v: serde_json::Value = serde_json::from_str(&o).expect("summary JSON");
    assert_eq!(v["results"]["completed"], 3, "{o}");
}

fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    let mut v = vec![p.to_path_buf()];
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            v.extend(walk(&e.unwrap().path()));
        }
    }
    v
}

#[test]
fn spec_errors_name_file_line_and_key_before_any_run() {
    spec_error(
        "unknown",
        "command = \"dram\"\n[base]\nrequests = 2000\n[axes]\npreset = [\"DDR4-2400-x8\"]\nrank = [1, 2]\n",
        6,
        "rank",
        "unknown key",
    );
    spec_error(
        "empty",
        "command = \"dram\"\n[base]\nrequests = 2000\n[axes]\n\nstream = []\n",
        6,
        "stream",
        "no values",
    );
    spec_error(
        "mismatch",
        "command = \"dram\"\n[base]\nrequests = 2000\n[axes]\nwindow = [4,\n   \"wide\"]\n",
        6,
        "window",
        "invalid value 'wide'",
    );
    spec_error(
        "zip",
        "command = \"nmp run\"\n[[zip]]\nranks = [1, 2, 4]\nlink_gbps = [25, 50]\n",
        4,
        "link_gbps",
        "equally long",
    );
    // Two runs of one configuration: one finished run would stand for both.
    spec_error(
        "dup",
        "command = \"train\"\nmetrics = [\"modes.*.final_loss\"]\n[base]\nmodel = \"tiny\"\niters = 2\n[axes]\nlr = [0.1, 0.1]\n",
        7,
        "lr",
        "value \"0.1\" is listed twice",
    );
    spec_error(
        "dupzip",
        "command = \"nmp run\"\n[[zip]]\nranks = [1, 2, 1]\nbatch = [64, 128,\n  64]\n",
        3,
        "ranks",
        "point 3 (ranks=1, batch=64) repeats point 1",
    );
    spec_error(
        "reserved",
        "command = \"train\"\n[base]\niters = 1\njson = true\n",
        4,
        "json",
        "set by the sweep",
    );
    // A flag the run's own parser refuses beside the --out the sweep adds.
    spec_error(
        "added",
        "command = \"reproduce\"\n[base]\nlist = true\n",
        3,
        "list",
        "run 0: the argument '--list' cannot be used with '--out <DIR>' \
         (every run of a sweep gets --out --json --quiet from the sweep itself)",
    );
    // An unknown [repeat] key is one error, not also one about its value.
    spec_error(
        "repeat",
        "command = \"dram\"\n[base]\nrequests = 2000\n[repeat]\ncount = 3\n",
        5,
        "count",
        "unknown key in [repeat] (expected: seeds = [1, 2, 3])",
    );
    let t = TempDir::new("repeat-once");
    write(&t.0, "r.toml", "command = \"dram\"\n[repeat]\ncount = 3\n");
    let err = fails(&t.0, &words("sweep r.toml --dry-run"));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("expected a list"), "{err}");
    // A misspelt DRAM preset is found before anything runs, on its line.
    spec_error(
        "preset",
        "command = \"dram\"\n[base]\nrequests = 100\n[axes]\npreset = [\"DDR4-2400-x8\", \"DDR4-2400-x9\"]\n",
        5,
        "preset",
        "unknown DRAM preset `DDR4-2400-x9`",
    );
    // A command without flags says so, rather than listing none.
    spec_error(
        "noflags",
        "command = \"dram presets\"\n[axes]\nx = [1, 2]\n",
        3,
        "x",
        "unknown key: `nmpsim dram presets` takes no flags but --json, which the sweep sets itself",
    );
}

/// The dry run's advice works: after one shard ran into its default
/// directory, the unsharded dry run is timed from it.
#[test]
fn a_shard_times_the_whole_sweep_s_dry_run() {
    let t = TempDir::new("shardtime");
    let d = &t.0;
    write(
        d,
        "s.toml",
        "command = \"dram\"\n[base]\nrequests = 200\n[axes]\nwindow = [1, 2, 4, 8]\n",
    );
    let out = ok(d, &words("sweep s.toml --dry-run"));
    assert!(out.contains("estimated cost: unknown"), "{out}");
    assert!(out.contains("--shard 1/4"), "{out}");
    ok(d, &words("sweep s.toml --shard 1/4 -q"));
    assert!(d.join("runs/sweep-s-shard-1-of-4").is_dir());
    let out = ok(d, &words("sweep s.toml --dry-run"));
    assert!(
        out.contains("estimated cost: 4 runs to run x")
            && out.contains("(of 1 finished run in runs/sweep-s-shard-1-of-4)"),
        "{out}"
    );
}

#[test]
fn large_sweeps_need_yes_and_dry_run_lists_them() {
    let t = TempDir::new("large");
    let d = &t.0;
    write(
        d,
        "big.toml",
        "command = \"dram\"\n[base]\nrequests = 200\n[axes]\nwindow = [1, 2, 4, 8, 16, 32, 64, 128, 256]\n[repeat]\nseeds = [1, 2, 3, 4, 5, 6, 7, 8]\n",
    );
    let err = fails(d, &words("sweep big.toml --out out"));
    assert!(err.contains("72 runs") && err.contains("--yes"), "{err}");
    assert!(!d.join("out").exists());

    let out = ok(d, &words("sweep big.toml --out out --dry-run"));
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("--window=")).collect();
    assert_eq!(rows.len(), 72, "{out}");
    assert!(
        rows[0].starts_with("0000  ") && rows[0].ends_with("--window=1 --seed=1"),
        "{}",
        rows[0]
    );
    assert!(rows[71].ends_with("--window=256 --seed=8"), "{}", rows[71]);
    assert!(out.contains("every run: --requests=200"), "{out}");
    assert!(out.contains("estimated cost: unknown"), "{out}");
    assert!(out.contains("needs --yes"), "{out}");
    assert!(!d.join("out").exists(), "a dry run writes nothing");

    let out = ok(d, &words("sweep big.toml --dry-run --json --shard 2/4"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("dry-run JSON");
    assert_eq!(v["runs_total"], 72);
    assert_eq!(v["runs_selected"], 18);
    assert_eq!(v["runs"][0]["index"], 1);
    assert_eq!(v["runs"][1]["index"], 5);
    assert!(v["estimated_run_s"].is_null());
}

#[test]
fn a_failing_run_is_recorded_and_the_others_complete() {
    let t = TempDir::new("failing");
    let d = &t.0;
    // The flag parser takes any stream name; the command rejects the unknown one.
    write(
        d,
        "f.toml",
        "command = \"dram\"\n[base]\nrequests = 2000\n[axes]\nstream = [\"random\", \"bogus\", \"sequential\"]\n",
    );
    let o = nmpsim(
        d,
        &words(
            "sweep f.toml --out out --jobs 1 --plot-x stream --plot-y \
             runs.0.bandwidth_gbps",
        ),
    );
    assert_eq!(o.status.code(), Some(1), "some runs failed: exit 1");
    // The plot of results.csv is drawn from the completed runs.
    for ext in ["svg", "png"] {
        let p = d.join(format!("out/results-runs.0.bandwidth_gbps-vs-stream.{ext}"));
        assert!(
            std::fs::metadata(&p).is_ok_and(|m| m.len() > 1000),
            "{}",
            p.display()
        );
    }
    let svg = read(&d.join("out/results-runs.0.bandwidth_gbps-vs-stream.svg"));
    assert!(svg.contains("random") && svg.contains("sequential"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("run 1 (stream=bogus) failed"), "{err}");
    let csv = read(&d.join("out/results.csv"));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(lines[1].contains(",random,completed,,"), "{}", lines[1]);
    assert!(lines[2].contains(",bogus,failed,"), "{}", lines[2]);
    assert!(
        lines[2].contains("`bogus` is not a stream kind"),
        "the error names the stream: {}",
        lines[2]
    );
    assert!(lines[3].contains(",sequential,completed,,"), "{}", lines[3]);
    let bw = lines[0]
        .split(',')
        .position(|c| c == "runs.0.bandwidth_gbps")
        .expect("bandwidth column");
    let cell = |l: &str, i: usize| l.split(',').nth(i).unwrap_or("").to_string();
    assert!(
        cell(lines[1], bw).parse::<f64>().is_ok_and(|b| b > 0.0),
        "{}",
        lines[1]
    );
    let failed_dir = std::fs::read_dir(d.join("out/runs"))
        .expect("runs")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("0001-"))
        .expect("run 1 directory");
    let status: serde_json::Value =
        serde_json::from_str(&read(&failed_dir.path().join("status.json"))).expect("status");
    assert_eq!(status["status"], "failed");
    assert_eq!(status["exit_code"], 2);
    assert!(read(&failed_dir.path().join("stderr.log")).contains("`bogus` is not a stream kind"));

    // A plot of a column the table lacks is reported; results.csv stays.
    let o = nmpsim(
        d,
        &words("sweep f.toml --out out --plot-x stream --plot-y nope"),
    );
    let err = exited(&o, 1);
    assert!(err.contains("cannot plot") && err.contains("nope"), "{err}");
    assert_eq!(read(&d.join("out/results.csv")).lines().count(), 4);
}

#[test]
fn a_plot_that_cannot_be_drawn_fails_the_sweep_after_writing_results() {
    let t = TempDir::new("plotfail");
    let d = &t.0;
    write(
        d,
        "p.toml",
        "command = \"dram\"\n[base]\nrequests = 1000\n[axes]\npreset = [\"DDR4-2400-x8\", \"DDR4-3200-x8\"]\n",
    );
    let args = [
        "sweep", "p.toml", "--out", "out", "--jobs", "1", "--plot-x", "preset",
    ];
    // Every run completes, but the plot asks for a column results.csv lacks.
    let mut bad = args.to_vec();
    bad.extend(["--plot-y", "no_such_column"]);
    let o = nmpsim(d, &bad);
    let err = exited(&o, 1);
    assert!(
        err.contains("cannot plot") && err.contains("no_such_column"),
        "{err}"
    );
    assert!(err.contains("2 completed"), "{err}");
    assert_eq!(read(&d.join("out/results.csv")).lines().count(), 3);
    // The same sweep with a column that exists succeeds (runs reused).
    let mut good = args.to_vec();
    good.extend(["--plot-y", "runs.0.bandwidth_gbps"]);
    let o = nmpsim(d, &good);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The `runs.0.bandwidth_gbps` cell of `csv`'s line `line`.
fn bandwidth_cell(csv: &str, line: usize) -> String {
    let lines: Vec<&str> = csv.lines().collect();
    let i = lines[0]
        .split(',')
        .position(|c| c == "runs.0.bandwidth_gbps")
        .expect("bandwidth column");
    lines[line].split(',').nth(i).unwrap_or("").to_string()
}

const TWO_PRESETS: &str =
    "[base]\nrequests = 1000\n[axes]\npreset = [\"DDR4-2400-x8\", \"DDR4-3200-x8\"]\n";

/// A `metrics` pattern that keeps no column is warned about, naming the
/// nearest metric; the sweep still succeeds.
#[test]
fn a_metrics_pattern_matching_nothing_is_warned_about() {
    let t = TempDir::new("metrics");
    let d = &t.0;
    write(
        d,
        "m.toml",
        format!(
            "command = \"dram\"\nmetrics = [\"runs.*.bandwidth_gbs\", \"runs.*.bandwidth_gbps\"]\n{TWO_PRESETS}"
        ),
    );
    let o = nmpsim(d, &words("sweep m.toml --out out --quiet"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "a warning only: {err}");
    assert!(
        err.contains("warning: m.toml: metrics pattern `runs.*.bandwidth_gbs` matches no metric of any completed run")
            && err.contains("(did you mean runs.*.bandwidth_gbps?)"),
        "{err}"
    );
    assert!(!err.contains("`runs.*.bandwidth_gbps` matches no"), "{err}");
    let csv = read(&d.join("out/results.csv"));
    assert!(bandwidth_cell(&csv, 1).parse::<f64>().is_ok(), "{csv}");
}

/// A completed run whose stdout.json cannot be read runs again on resume
/// instead of giving blank metrics.
#[test]
fn a_completed_run_with_unreadable_output_runs_again() {
    let t = TempDir::new("unreadable");
    let d = &t.0;
    write(d, "u.toml", format!("command = \"dram\"\n{TWO_PRESETS}"));
    let args = ["sweep", "u.toml", "--out", "out", "--jobs", "1", "--json"];
    ok(d, &args);
    let csv = read(&d.join("out/results.csv"));
    assert!(bandwidth_cell(&csv, 1).parse::<f64>().is_ok(), "{csv}");
    let run0 = std::fs::read_dir(d.join("out/runs"))
        .expect("runs")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("0000-"))
        .expect("run 0 directory")
        .path();
    for lost in ["", "{\"command\":\"dram\",\"resu"] {
        write(&run0, "stdout.json", lost);
        let out = ok(d, &args);
        let v: serde_json::Value = serde_json::from_str(&out).expect("summary JSON");
        assert_eq!(v["results"]["skipped"], 1, "only run 1 is reused: {out}");
        assert_eq!(v["results"]["completed"], 2, "{out}");
        let again = read(&d.join("out/results.csv"));
        assert_eq!(again.lines().count(), 3);
        assert_eq!(bandwidth_cell(&again, 1), bandwidth_cell(&csv, 1));
    }
}

#[test]
fn example_specs_validate() {
    let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/specs");
    let t = TempDir::new("examples");
    let mut n = 0;
    for e in std::fs::read_dir(&specs).expect("experiments/specs") {
        let p = e.expect("entry").path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        n += 1;
        let spec = p.to_string_lossy().into_owned();
        let out = ok(&t.0, &["sweep", &spec, "--dry-run", "--out", "out"]);
        assert!(out.contains("estimated cost"), "{spec}: {out}");
    }
    assert!(n >= 6, "expected the example specs, found {n}");
}

#[test]
fn help_has_examples() {
    let t = TempDir::new("help");
    let out = ok(&t.0, &["sweep", "--help"]);
    assert!(
        out.contains("Examples:") && out.contains("nmpsim sweep merge"),
        "{out}"
    );
    let out = ok(&t.0, &words("sweep merge --help"));
    assert!(out.contains("Examples:"), "{out}");
}

/// A spec edit that moves unchanged configs to other indices reuses their
/// finished runs, and the table equals a fresh sweep of the new spec.
#[test]
fn an_edited_spec_reuses_runs_whose_config_moved() {
    let t = TempDir::new("edit");
    let d = &t.0;
    let spec = |windows: &str| {
        format!(
            "command = \"dram\"\n[base]\nengine = \"native\"\nrequests = 3000\n[axes]\nwindow = [{windows}]\nstream = [\"random\", \"sequential\"]\n"
        )
    };
    write(d, "a.toml", spec("4, 16"));
    write(d, "b.toml", spec("4, 8, 16"));
    ok(d, &words("sweep a.toml --out s --quiet --jobs 1"));
    // window 16's two runs move from indices 2-3 to 4-5.
    let dry = ok(d, &words("sweep b.toml --out s --dry-run --json"));
    let v: serde_json::Value = serde_json::from_str(&dry).unwrap();
    let done: Vec<bool> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["finished"] == "completed")
        .collect();
    assert_eq!(done, [true, true, false, false, true, true], "{dry}");
    let o = succeeds(d, &words("sweep b.toml --out s --jobs 1"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("4 finished, 2 to run"), "{err}");
    assert_eq!(finished_runs(&d.join("s")), 6, "no run directory left over");
    // The moved runs' run.json is that of their new index and directory.
    for (new, old) in [("0004-", "0002-"), ("0005-", "0003-")] {
        let rd = std::fs::read_dir(d.join("s/runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(new))
            .expect("moved run");
        let cfg: serde_json::Value = serde_json::from_str(&read(&rd.join("run.json"))).unwrap();
        assert_eq!(cfg["index"].as_u64(), new[..4].parse().ok(), "{cfg}");
        let name = rd.file_name().unwrap().to_string_lossy().into_owned();
        let argv: Vec<&str> = cfg["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            argv.iter()
                .any(|a| a.starts_with("--out=") && a.ends_with(&name)),
            "{cfg}"
        );
        let from = cfg["moved_from"].as_str().expect("moved_from");
        assert!(from.contains(&format!("runs/{old}")), "{cfg}");
    }
    // Nothing left to run: the start line still says how many would run at once.
    let o = succeeds(d, &words("sweep b.toml --out s --jobs 2"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("6 finished, 0 to run, 2 at a time"), "{err}");
    ok(d, &words("sweep b.toml --out fresh --quiet --jobs 1"));
    assert_eq!(
        without_columns(&read(&d.join("s/results.csv")), is_timing_column).unwrap(),
        without_columns(&read(&d.join("fresh/results.csv")), is_timing_column).unwrap()
    );
}

/// `sweep merge` of sweeps whose specs give different columns is refused,
/// whatever the order of the directories; specs that differ only in comments
/// merge to the same bytes in any order.
#[test]
fn merge_refuses_different_columns_and_is_order_independent() {
    let t = TempDir::new("merge-metrics");
    let d = &t.0;
    let spec = |metrics: &str| {
        format!(
            "command = \"dram\"\n{metrics}[base]\nengine = \"native\"\nrequests = 2000\n[axes]\nwindow = [4, 8]\n"
        )
    };
    write(d, "one.toml", spec(""));
    write(
        d,
        "two.toml",
        spec("metrics = [\"runs.*.bandwidth_gbps\"]\n"),
    );
    write(d, "three.toml", format!("# a comment\n{}", spec("")));
    for (s, out, shard) in [
        ("one.toml", "sw1", "1/2"),
        ("two.toml", "sw2", "2/2"),
        ("three.toml", "sw3", "2/2"),
    ] {
        ok(d, &["sweep", s, "--out", out, "--shard", shard, "--quiet"]);
    }
    for (out, a, b) in [("mA", "sw1", "sw2"), ("mB", "sw2", "sw1")] {
        let err = fails(d, &["sweep", "merge", out, a, b]);
        assert!(
            err.contains(&format!("{b} and {a} keep different metrics")),
            "{err}"
        );
        assert!(err.contains("runs.*.bandwidth_gbps"), "{err}");
        assert!(!d.join(out).join("results.csv").exists());
    }
    ok(d, &words("sweep merge mC sw1 sw3"));
    ok(d, &words("sweep merge mD sw3 sw1"));
    for f in ["results.csv", "spec.toml", "sweep.json"] {
        assert_eq!(
            read(&d.join("mC").join(f)),
            read(&d.join("mD").join(f)),
            "{f}"
        );
    }
    assert_eq!(read(&d.join("mC/results.csv")).lines().count(), 3);
}

/// A sweep does not write over a directory that is no sweep's but holds
/// what a sweep writes, nor over a command's run directory.
#[test]
fn a_sweep_refuses_a_directory_that_is_no_sweep_s() {
    let t = TempDir::new("foreign");
    let d = &t.0;
    write(
        d,
        "s.toml",
        "command = \"dram\"\n[base]\nrequests = 200\n[axes]\nwindow = [1, 2]\n",
    );
    std::fs::create_dir(d.join("mine")).unwrap();
    write(d, "mine/results.csv", "my,data\n");
    let err = fails(d, &words("sweep s.toml --out mine"));
    assert!(
        err.contains("mine holds results.csv but is no sweep directory"),
        "{err}"
    );
    assert_eq!(read(&d.join("mine/results.csv")), "my,data\n");
    assert!(!d.join("mine/runs").exists());
    // A sweep.json that is not a sweep's does not make a sweep directory.
    write(d, "mine/sweep.json", "{\"my\": \"settings\"}");
    let err = fails(d, &words("sweep s.toml --out mine"));
    assert!(
        err.contains("mine/sweep.json is not an nmpsim sweep's"),
        "{err}"
    );
    assert_eq!(read(&d.join("mine/sweep.json")), "{\"my\": \"settings\"}");
    assert!(!d.join("mine/runs").exists());
    ok(
        d,
        &words("dram --requests 100 --engine native --out run -q"),
    );
    let err = fails(d, &words("sweep s.toml --out run"));
    assert!(err.contains("run holds config.json"), "{err}");
    // A new directory, and the sweep's own again, are fine.
    ok(d, &words("sweep s.toml --out sw -q"));
    ok(d, &words("sweep s.toml --out sw -q"));
}

/// A run the sweep cannot record stops the sweep at once: no run starts
/// after it, the run under way is stopped (and counts as not run), and
/// results.csv holds what finished.
#[test]
fn a_fatal_error_stops_the_runs_under_way() {
    let t = TempDir::new("fatal");
    let d = &t.0;
    // Two runs of about a second each.
    write(
        d,
        "s.toml",
        "command = \"dram\"\n[base]\nengine = \"dramsim3\"\nrequests = 150000\n[axes]\npreset = [\"DDR4-2400-x8\", \"DDR4-3200-x8\"]\n",
    );
    ok(d, &words("sweep s.toml --out sw -j 1 -q"));
    let mut runs: Vec<_> = std::fs::read_dir(d.join("sw/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort();
    for r in &runs {
        std::fs::remove_dir_all(r).unwrap();
    }
    // Run 0's status cannot be written where a directory stands.
    std::fs::create_dir_all(runs[0].join("status.json")).unwrap();
    let started = Instant::now();
    let err = fails(d, &words("sweep s.toml --out sw -j 1 -q"));
    assert!(
        err.contains("run 0 in") && err.contains("the sweep stopped"),
        "{err}"
    );
    // Run 1 started as run 0 ended, and was stopped rather than finished.
    assert!(!runs[1].join("status.json").exists());
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(read(&d.join("sw/results.csv")).starts_with("run,preset,status"));
    // Once the blocker goes, the same command runs both.
    std::fs::remove_dir_all(&runs[0]).unwrap();
    ok(d, &words("sweep s.toml --out sw -j 1 -q"));
    assert_eq!(finished_runs(&d.join("sw")), 2);
}

/// A finished run whose input file changed after it ran runs again: the
/// config hash covers the file's name, not its contents.
#[test]
fn a_run_whose_input_changed_runs_again() {
    let t = TempDir::new("input");
    let d = &t.0;
    let gen_trace = |rows: &str, bag: &str| {
        ok(
            d,
            &[
                "trace",
                "gen",
                "--tables",
                "1",
                "--rows",
                rows,
                "--bag",
                bag,
                "--batch",
                "4",
                "--batches",
                "1",
                "-o",
                "t.nmpt",
                "-q",
            ],
        );
    };
    gen_trace("100", "1");
    write(
        d,
        "s.toml",
        "command = \"nmp run\"\n[base]\nengine = \"native\"\nranks = 2\ndim = 16\ntrace = \"t.nmpt\"\n[axes]\nplacement = [\"vector-sliced\"]\n",
    );
    let bytes = |csv: &str| -> String {
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        let i = head
            .iter()
            .position(|h| h.ends_with("dram_read_bytes"))
            .expect("a dram_read_bytes column");
        row[i].to_string()
    };
    ok(d, &words("sweep s.toml --out sw -j 1 -q"));
    let first = bytes(&read(&d.join("sw/results.csv")));
    // Unchanged: reused.
    let o = succeeds(d, &words("sweep s.toml --out sw -j 1"));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("runs again"));
    // The same name, other contents (dated later, whatever the file
    // system's clock resolution): run again.
    gen_trace("1000", "8");
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(d.join("t.nmpt"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    let o = succeeds(d, &words("sweep s.toml --out sw -j 1"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: run 0 ran on an earlier t.nmpt; it runs again"),
        "{err}"
    );
    assert_ne!(bytes(&read(&d.join("sw/results.csv"))), first);
}

/// A file a run writes (`trace gen`'s output) is no input: a run that
/// rewrites it is finished, and reused next time.
#[test]
fn a_file_the_run_writes_is_no_input() {
    let t = TempDir::new("output");
    let d = &t.0;
    write(
        d,
        "s.toml",
        "command = \"trace gen\"\n[base]\ntables = 1\nrows = 1000\nbatch = 16\noutput = \"g.nmpt\"\n",
    );
    // An earlier file under the output's name.
    write(d, "g.nmpt", "old");
    for reused in ["0 reused", "1 reused"] {
        let o = succeeds(d, &words("sweep s.toml --out sw -j 1"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("1 completed ({reused})")) && !err.contains("runs again"),
            "{err}"
        );
    }
}

/// A grid too large to run is refused from its axes' lengths, before it is
/// expanded (10^8 runs would take gigabytes to list), with --dry-run too.
#[test]
fn a_grid_beyond_the_run_limit_is_refused_before_expanding() {
    let t = TempDir::new("huge");
    let list = |n: usize| {
        (1..=n)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let spec = format!(
        "command = \"dram\"\n[base]\nengine = \"native\"\n[axes]\nrequests = [{}]\nwindow = [{}]\n[repeat]\nseeds = [{}]\n",
        list(1000),
        list(100),
        list(1000)
    );
    write(&t.0, "s.toml", spec);
    for extra in [None, Some("--dry-run")] {
        let mut args = vec!["sweep", "s.toml", "--out", "o"];
        args.extend(extra);
        let e = fails(&t.0, &args);
        assert!(
            e.contains("the spec expands to 100000000 runs") && e.contains("more than the 1000000"),
            "{e}"
        );
    }
    assert!(!t.0.join("o").exists());
}

/// The Slurm helper's submission side, through stand-ins for `sbatch` and
/// `sinfo` (the jobs themselves are tested on a real cluster, in `slurm.rs`):
/// it submits the array and the merge job every time (its dry-run check reads
/// the whole plan rather than closing the pipe on nmpsim, which would end it
/// with SIGPIPE); a refused submission leaves no `OUT/logs` behind; a task
/// asking for more CPUs than the partition's nodes have is refused before
/// anything is queued.
#[test]
fn the_slurm_script_submits_its_jobs() {
    use std::os::unix::fs::PermissionsExt;
    let t = TempDir::new("slurm");
    let d = &t.0;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/slurm/sweep-array.sh");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/specs/nmp-native-100.toml");
    // An executable `dir/name` running `body`.
    let stand_in = |dir: &Path, name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // The script on SPEC with 5 shards into `out`, the stand-ins in `bin`
    // first on PATH.
    let submit = |bin: &Path, out: &str, env: &[(&str, &str)]| {
        let mut c = std::process::Command::new("bash");
        c.current_dir(d)
            .arg(&script)
            .arg(&spec)
            .arg("5")
            .arg(out)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("NMPSIM", env!("CARGO_BIN_EXE_nmpsim"));
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("run the script")
    };
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    stand_in(&bin, "sbatch", "#!/bin/sh\necho 42\n");
    for _ in 0..5 {
        let o = submit(&bin, "out", &[]);
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success()
                && said.contains("submitted array job 42 (5 shards) and merge job 42"),
            "{o:?}"
        );
    }
    // A refused submission: nothing made under OUT.
    let refuses = d.join("refuses");
    std::fs::create_dir(&refuses).unwrap();
    stand_in(
        &refuses,
        "sbatch",
        "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid account' >&2\nexit 1\n",
    );
    let o = submit(&refuses, "refused", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(2)
            && err.contains("Invalid account")
            && err.contains(
                "sbatch refused the array job (its message above); nothing was submitted"
            ),
        "{o:?}"
    );
    assert!(
        !d.join("refused").exists(),
        "a refused submission left OUT behind"
    );
    // Nodes of 2 CPUs (8 in partition `big`): the default 4 per task is
    // refused, `--partition=big` or 2 per task accepted.
    stand_in(
        &bin,
        "sinfo",
        "#!/bin/sh\ncase \"$*\" in *'-p big'*) echo 8 ;; *) printf '2\\n1\\n' ;; esac\n",
    );
    let o = submit(&bin, "too-big", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(2)
            && err.contains(
                "CPUS_PER_TASK=4, but the largest node in any partition has 2 CPUs (sinfo)"
            )
            && err.contains("set CPUS_PER_TASK=2 or less"),
        "{o:?}"
    );
    assert!(!d.join("too-big").exists());
    for env in [
        &[("SBATCH_ARGS", "--time=1:00 --partition=big")][..],
        &[("SBATCH_ARGS", "-p big")][..],
        &[("CPUS_PER_TASK", "2")][..],
    ] {
        let o = submit(&bin, "fits", env);
        assert!(o.status.success(), "{env:?}: {o:?}");
    }
    let o = submit(&bin, "fits", &[("SBATCH_ARGS", "--partition=small")]);
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("the largest node in partition 'small' has 2 CPUs"),
        "{o:?}"
    );
    let o = std::process::Command::new("bash")
        .arg(&script)
        .arg("--help")
        .output()
        .expect("run the script");
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("SBATCH_ARGS")
            && help.contains("shard-%a.job%A.log")
            && help.contains("not meant to be run by hand")
            && !help.contains("set -euo"),
        "{help}"
    );
}
