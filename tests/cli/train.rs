//! End-to-end tests of `nmpsim train` through the built binary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Writes a Criteo-format sample of `samples` lines with at most `rows`
/// rows per table into `dir/file` (`nmpsim trace criteo-sample`).
fn criteo_sample(dir: &Path, file: &str, samples: u32, rows: &str) {
    let samples = samples.to_string();
    succeeds(
        dir,
        &[
            "trace",
            "criteo-sample",
            "-o",
            file,
            "--samples",
            &samples,
            "--rows",
            rows,
        ],
    );
}

#[test]
fn all_modes_train_and_report_breakdown_and_speedups() {
    let t = TempDir::new("all");
    let o = succeeds(
        &t.0,
        &words(
            "train --model tiny --mode tcast --batch 128 --iters 40 \
             --print-freq 20 --nmp-bandwidth 400 --out run",
        ),
    );
    let s = text(&o);
    for m in ["baseline-cpu", "tcast-cpu", "baseline-nmp", "tcast-nmp"] {
        assert!(
            s.contains(&format!("[{m}] Finished training it 40/40 of epoch 0, ")),
            "{s}"
        );
        assert!(
            s.contains(&format!("[{m}] Testing at - 40/40 of epoch 0, loss ")),
            "{s}"
        );
    }
    assert!(
        s.contains("Latency breakdown") && s.contains("speedup vs base"),
        "{s}"
    );
    // A fixed NMP bandwidth simulates nothing.
    assert!(!s.contains("Cycle-level DRAM simulation"), "{s}");
    // The baselines hide nothing: their hidden column is 0.000, not -0.000.
    for m in ["baseline-cpu", "baseline-nmp"] {
        let row = s
            .lines()
            .find(|l| l.starts_with(m) && l.contains(" meas "))
            .unwrap_or_else(|| panic!("no breakdown row of {m} in\n{s}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[cols.len() - 2], "0.000", "{row}");
    }
    let run = t.0.join("run");
    for f in [
        "config.json",
        "results.json",
        "summary.txt",
        "summary.csv",
        "train.log",
        "iterations.csv",
        "timeline.csv",
        "eval.csv",
    ] {
        assert!(run.join(f).exists(), "{f} missing");
    }
    let r = read_json(&run.join("results.json"));
    // The library's type holds every field the run wrote, and writes them back.
    let typed: nmpsim_dlrm::TrainSummary = serde_json::from_value(r["results"].clone())
        .expect("results.json reads as the library's TrainSummary");
    assert_eq!(
        typed.status,
        nmpsim_dlrm::RunState::Ended(nmpsim_dlrm::Status::Completed)
    );
    assert_eq!(serde_json::to_value(&typed).unwrap(), r["results"]);
    let modes = r["results"]["modes"].as_array().unwrap();
    assert_eq!(modes.len(), 4);
    assert_eq!(r["results"]["status"], "completed");
    assert_eq!(modes[0]["speedup_over_baseline_cpu"].as_f64().unwrap(), 1.0);
    // Identical data and the same function: the four final losses agree.
    let l0 = modes[0]["final_loss"].as_f64().unwrap();
    for m in modes {
        assert!((m["final_loss"].as_f64().unwrap() - l0).abs() < 1e-5, "{m}");
        assert!(m["modelled_ms_per_iteration"].as_f64().unwrap() > 0.0);
    }
    // One row per mode and iteration; timeline rows carry their source.
    let iters = read(&run.join("iterations.csv"));
    assert_eq!(iters.lines().count(), 1 + 4 * 40);
    let tl = read(&run.join("timeline.csv"));
    assert!(
        tl.starts_with("mode,iteration,stage,lane,primitive,detail,resource,source,time_ns,bytes")
    );
    assert!(tl.lines().any(|l| l.starts_with("tcast-nmp,")
        && l.contains(",casting,")
        && l.contains(",modelled,")));
    assert!(tl.lines().any(|l| l.starts_with("baseline-cpu,")
        && l.contains(",expand-coalesce,")
        && l.contains(",measured,")));
    let cfg = read_json(&run.join("config.json"));
    assert_eq!(cfg["config"]["train"]["batch"], 128);
    // A 32-bit float reads as given, not widened (0.10000000149011612).
    let cfg_text = read(&run.join("config.json"));
    assert!(
        cfg_text.contains("\"lr\": 0.1") && !cfg_text.contains("0.1000000014"),
        "{cfg_text}"
    );
    // --json prints the same summary.
    let o = succeeds(
        &t.0,
        &words("train --model tiny --batch 64 --iters 3 --json --out j"),
    );
    let v: serde_json::Value = stdout_json(&o);
    assert_eq!(v["results"]["modes"][0]["mode"], "baseline-cpu");
}

#[test]
fn modes_are_chosen_by_name_from_the_registry() {
    let t = TempDir::new("registry");
    // `--mode list` prints every registered strategy and runs nothing.
    let o = succeeds(&t.0, &words("train --mode list"));
    let s = text(&o);
    for e in nmpsim_dlrm::strategy::strategies() {
        assert!(
            s.lines()
                .any(|l| l.starts_with(e.name) && l.contains(e.about)),
            "{} not listed in\n{s}",
            e.name
        );
    }
    assert!(
        std::fs::read_dir(&t.0).unwrap().next().is_none(),
        "list wrote files"
    );
    // A list runs its strategies in the registry's order, each once, with the
    // speed-ups over the baseline.
    let args = "train --model tiny --mode tcast-nmp,baseline-cpu,tcast-nmp --batch 64 --iters 4 \
                --nmp-bandwidth 400 --test-batches 1 --out run";
    succeeds(&t.0, &args.split_whitespace().collect::<Vec<_>>());
    let r = read_json(&t.0.join("run/results.json"));
    let modes: Vec<&str> = r["results"]["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["baseline-cpu", "tcast-nmp"]);
    assert_eq!(r["results"]["modes"][0]["speedup_over_baseline_cpu"], 1.0);
    assert!(
        r["results"]["modes"][1]["speedup_over_baseline_cpu"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn nmp_mode_simulates_then_proxies() {
    let t = TempDir::new("sim");
    succeeds(
        &t.0,
        &words(
            "train --model tiny --mode tcast-nmp --batch 64 --iters 3 --ranks \
             2 --sim-batches 1 --out run -q",
        ),
    );
    let tl = read(&t.0.join("run/timeline.csv"));
    let nmp: Vec<&str> = tl.lines().filter(|l| l.contains(",nmp,")).collect();
    assert!(
        nmp.iter()
            .any(|l| l.starts_with("tcast-nmp,0,") && l.contains(",simulated,"))
    );
    assert!(
        nmp.iter()
            .any(|l| l.starts_with("tcast-nmp,2,") && l.contains(",simulated-proxy,"))
    );
    let r = read_json(&t.0.join("run/results.json"));
    let cal = r["results"]["modes"][0]["nmp_calibration_gbps"]
        .as_array()
        .unwrap();
    assert_eq!(cal.len(), 3, "{cal:?}");
    // The simulator's own wall time is reported apart, in both forms.
    let sim_s = r["results"]["simulation_wall_s"].as_f64().unwrap();
    assert!(sim_s > 0.0, "{sim_s}");
    let summary = read(&t.0.join("run/summary.txt"));
    assert!(
        summary.contains(&format!(
            "Cycle-level DRAM simulation of the pool: {sim_s:.1} s of this machine's wall time"
        )),
        "{summary}"
    ); // The breakdown's NMP cells name the iteration the proxy comes from.
    assert!(summary.contains("proxy(it 0)"), "{summary}");
    let b = &r["results"]["modes"][0]["breakdown_ms"];
    let gr = b
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["primitive"] == "gather-reduce")
        .unwrap();
    assert_eq!(gr["proxy_of_iterations"], serde_json::json!([0, 0]));
}

/// Every proxy in a summarised iteration shows in the summary: the primitive's
/// sources in `results.json` hold `simulated-proxy` with the iterations it
/// comes from, and its cell in `summary.txt` says `proxy(it A-B)`. Without
/// `--sim-batches`, every NMP time is simulated and none is a proxy.
#[test]
fn a_proxy_in_a_reported_mean_is_labelled_where_it_is_read() {
    let t = TempDir::new("proxy-label");
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "train", "--model", "tiny", "--mode", "tcast", "--batch", "32", "--iters", "3",
            "--ranks", "2", "--out", out, "-q",
        ];
        args.extend_from_slice(extra);
        succeeds(&t.0, &args);
        t.0.join(out)
    };
    for (dir, proxied) in [
        (run("every", &[]), false),
        (run("first", &["--sim-batches", "1"]), true),
        (
            run("first2", &words("--sim-batches 2 --warmup-iters 0")),
            true,
        ),
    ] {
        let r = read_json(&dir.join("results.json"));
        let summary = read(&dir.join("summary.txt"));
        let tl = read(&dir.join("timeline.csv"));
        let warmup = r["results"]["modes"][0]["warmup_iterations"]
            .as_u64()
            .unwrap();
        let mut seen_proxy = false;
        for m in r["results"]["modes"].as_array().unwrap() {
            let mode = m["mode"].as_str().unwrap();
            let row = summary
                .lines()
                .find(|l| l.starts_with(&format!("{mode} ")))
                .unwrap_or_else(|| panic!("no row for {mode} in {summary}"));
            for b in m["breakdown_ms"].as_array().unwrap() {
                let p = b["primitive"].as_str().unwrap();
                // Proxy events of this primitive in the iterations the mean covers.
                let in_mean = tl.lines().skip(1).any(|l| {
                    let f: Vec<&str> = l.split(',').collect();
                    f[0] == mode
                        && f[1].parse::<u64>().unwrap() >= warmup
                        && f[4] == p
                        && f[7] == "simulated-proxy"
                });
                let sources = b["sources"].to_string();
                if in_mean {
                    seen_proxy = true;
                    assert!(sources.contains("simulated-proxy"), "{mode} {p}: {sources}");
                    let it = &b["proxy_of_iterations"];
                    assert!(it.is_array(), "{mode} {p}: no proxy_of_iterations");
                    assert!(row.contains("proxy(it "), "{mode} {p}: {row}");
                } else {
                    assert!(!sources.contains("proxy"), "{mode} {p}: {sources}");
                }
            }
            if m["mode"].as_str().unwrap().ends_with("-nmp") {
                // The pool's simulated energy is reported for the NMP modes.
                assert!(
                    m["nmp_energy_j_per_iteration"].as_f64().unwrap() > 0.0,
                    "{m}"
                );
            } else {
                assert_eq!(m["nmp_energy_j_per_iteration"].as_f64().unwrap(), 0.0);
            }
        }
        assert_eq!(seen_proxy, proxied, "{}", dir.display());
        if !proxied {
            assert!(!tl.contains("simulated-proxy"));
            // (The legend explains `proxy(it A-B)`; no cell holds one.)
            assert!(!summary.contains("proxy(it 0"));
            assert!(summary.contains("every iteration simulated"), "{summary}");
        }
    }
}

#[test]
fn all_modes_report_their_own_nmp_calibration() {
    // One pool timer serves both NMP modes of `--mode tcast`: each mode's
    // calibration lists the primitives it ran, not the other mode's.
    let t = TempDir::new("calib");
    let o = succeeds(
        &t.0,
        &words(
            "train --model tiny --mode tcast --batch 32 --iters 2 --ranks 2 \
             --sim-batches 1 --out run -q",
        ),
    );
    let s = text(&o);
    let r = read_json(&t.0.join("run/results.json"));
    let names = |mode: &str| -> Vec<String> {
        let m = r["results"]["modes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mode"] == mode)
            .unwrap_or_else(|| panic!("no {mode}"));
        m["nmp_calibration_gbps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[0].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names("baseline-nmp"),
        ["gather-reduce", "load-coalesced+scatter"]
    );
    assert_eq!(
        names("tcast-nmp"),
        ["casted-gather-reduce", "gather-reduce", "scatter"]
    );
    assert!(names("baseline-cpu").is_empty());
    assert!(
        s.contains("NMP effective bandwidth (simulated, baseline-nmp): gather-reduce ")
            && s.contains("NMP effective bandwidth (simulated, tcast-nmp): casted-gather-reduce "),
        "{s}"
    );
}

#[test]
fn criteo_sample_trains_and_unhashed_data_is_refused() {
    let t = TempDir::new("criteo");
    criteo_sample(&t.0, "s.tsv", 600, "500");
    let o = succeeds(
        &t.0,
        &words(
            "train --model criteo-kaggle --data s.tsv --max-ind-range 500 \
             --batch 100 --iters 12 --test-batches 1 --out run",
        ),
    );
    let s = text(&o);
    // 600 samples, 100 held out: 5 batches per epoch.
    assert!(s.contains("Finished training it 10/12 of epoch 1"), "{s}");
    // An empty test file is refused, not a run without evaluation.
    write(&t.0, "empty.tsv", "");
    let o = nmpsim(
        &t.0,
        &words(
            "train --model criteo-kaggle --data s.tsv --test-data empty.tsv \
             --max-ind-range 500 --batch 100 --iters 2 --out empty",
        ),
    );
    let s = text(&o);
    assert_eq!(o.status.code(), Some(2), "{s}");
    assert!(
        s.contains("--test-data empty.tsv: no samples to test on"),
        "{s}"
    );
    // Without hashing, the raw values must fit the model's tables (the
    // Kaggle sizes x 0.25 here): the first that does not is named.
    let o = nmpsim(
        &t.0,
        &words(
            "train --model criteo-kaggle --data s.tsv --batch 100 --iters 2 \
             --test-batches 1",
        ),
    );
    let s = text(&o);
    assert_eq!(o.status.code(), Some(2), "{s}");
    assert!(
        s.contains("--max-ind-range")
            && s.contains("s.tsv: line 1: field 15 (categorical C2)")
            && s.contains("past table 1's 146 rows"),
        "{s}"
    );

    // A bad line part-way: the run fails, and says so in every record.
    let good = read(&t.0.join("s.tsv"));
    let lines: Vec<&str> = good.lines().collect();
    let bad = format!(
        "{}\nnot a sample\n{}\n",
        lines[..350].join("\n"),
        lines[350..].join("\n")
    );
    write(&t.0, "bad.tsv", bad);
    let o = nmpsim(
        &t.0,
        &words(
            "train --model criteo-kaggle --data bad.tsv --max-ind-range 500 \
             --batch 100 --iters 12 --test-batches 1 --out failed -q",
        ),
    );
    let s = text(&o);
    assert_eq!(o.status.code(), Some(2), "{s}");
    assert!(s.contains("bad.tsv: line 351"), "{s}");
    let v = read_json(&t.0.join("failed/results.json"));
    assert_eq!(v["results"]["status"], "failed", "{v}");
    assert_eq!(v["results"]["modes"][0]["status"], "failed", "{v}");
    // The model may not take data of another shape.
    let o = nmpsim(
        &t.0,
        &words("train --model tiny --data s.tsv --max-ind-range 500 --out tiny"),
    );
    let s = text(&o);
    assert_eq!(o.status.code(), Some(2), "{s}");
    assert!(
        s.contains("model `tiny` takes 4 dense features and has 3"),
        "{s}"
    );
    assert!(!t.0.join("tiny").exists());
}

#[test]
fn bad_configurations_fail_before_training() {
    let t = TempDir::new("bad");
    for (args, want) in [
        (vec!["--model", "rm9"], "unknown model preset `rm9`"),
        (vec!["--mode", "tcast-gpu"], "unknown mode `tcast-gpu`"),
        (vec!["--arch-mlp-bot", "4-8-5"], "bottom MLP output width 5"),
        (vec!["--arch-mlp-bot", "4-x"], "--arch-mlp-bot"),
        (vec!["--gpu", "k80"], "unknown GPU preset `k80`"),
        (vec!["--dense-optimizer", "lamb"], "unknown dense optimizer"),
        (vec!["--ranks", "0"], "--ranks 0"),
        (vec!["--rows", "0"], "--rows 0: every embedding table needs"),
        (
            vec!["--rows-scale", "0.5"],
            "--rows-scale scales the Criteo-Kaggle tables",
        ),
        (
            vec!["--data", "missing.tsv", "--lookups", "3"],
            "--lookups applies to synthetic data",
        ),
        (
            vec![
                "--model",
                "criteo-kaggle",
                "--data",
                "missing.tsv",
                "--max-ind-range",
                "10",
                "--rows",
                "100",
            ],
            "--rows sizes the tables, and --max-ind-range 10 gives every table 10 rows",
        ),
        (
            vec![
                "--model",
                "Kaggle",
                "--data",
                "missing.tsv",
                "--max-ind-range",
                "10",
                "--rows-scale",
                "0.5",
            ],
            "--rows-scale sizes the tables",
        ),
        (
            vec![
                "--model",
                "criteo-kaggle",
                "--data",
                "x.tsv",
                "--max-ind-range",
                "0",
            ],
            "--max-ind-range 0",
        ),
        (vec!["--lr=-1"], "--lr -1: expected a non-negative"),
        (
            vec!["--lr", "1e300"],
            "1e300 is beyond the range of a 32-bit float",
        ),
        (
            vec!["--lr", "1e-50"],
            "1e-50 is below the smallest 32-bit float (1e-45) and would be read as 0",
        ),
        (vec!["--warmup-iters", "5"], "--warmup-iters 5 leaves none"),
        (
            vec!["--test-batches", "18446744073709551615"],
            "GB of memory available); lower",
        ),
        (
            vec!["--model", "rm3", "--rows", "4294967295"],
            "GB of memory available); lower",
        ),
        (
            vec!["--arch-mlp-bot", "13-18446744073709551615-4"],
            "GB of memory available); lower",
        ),
        (vec!["--model", "rm1", "--rows", "0"], "--rows 0"),
        (
            vec!["--link-gbps", "0"],
            "--link-gbps 0: expected a positive",
        ),
        (vec!["--nmp-bandwidth", "inf"], "--nmp-bandwidth inf"),
        (
            vec!["--nmp-bandwidth", "1e-300"],
            "--nmp-bandwidth 1e-300: expected a positive, finite bandwidth in GB/s, at least 1e-6",
        ),
        (
            vec!["--lookups", "100000", "--dim", "1048576"],
            "one step's buffers and the test set need",
        ),
        (
            vec!["--mode", "tcast-nmp", "--sim-batches", "0"],
            "--sim-batches 0 without --nmp-bandwidth",
        ),
        (
            vec![
                "--model",
                "criteo-kaggle",
                "--data",
                "missing.tsv",
                "--max-ind-range",
                "10",
            ],
            "--data missing.tsv: No such file",
        ),
    ] {
        let mut a = vec!["train", "--iters", "2", "--batch", "8", "--out", "bad"];
        a.extend(args.iter());
        let o = nmpsim(&t.0, &a);
        let s = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {s}");
        assert!(s.contains(want), "{args:?}: {s}");
        assert!(!s.contains("Finished training"), "{args:?}: {s}");
        assert!(!t.0.join("bad").exists(), "{args:?} left a run directory");
    }
}

/// An empty training file is an error before training, with or without
/// `--test-data`, not a run that "completes" with no iteration.
#[test]
fn an_empty_training_file_is_refused() {
    let t = TempDir::new("empty");
    write(&t.0, "empty.tsv", "");
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/data/criteo-sample.tsv");
    for extra in [vec![], vec!["--test-data", sample]] {
        let mut a = vec![
            "train",
            "--model",
            "criteo-kaggle",
            "--data",
            "empty.tsv",
            "--max-ind-range",
            "1000",
            "--batch",
            "256",
            "--iters",
            "4",
            "--engine",
            "native",
            "-q",
            "--out",
            "e",
        ];
        a.extend(extra.iter());
        let o = nmpsim(&t.0, &a);
        let s = text(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {s}");
        assert!(
            s.contains("--data empty.tsv: no samples to train on"),
            "{extra:?}: {s}"
        );
        assert!(!t.0.join("e").exists(), "{extra:?} left a run directory");
    }
}

/// `--rows-scale` goes with the Kaggle preset under any name `--model` takes
/// for it, and `--rows` caps the scaled tables.
#[test]
fn kaggle_rows_scale_and_rows_cap_under_every_name() {
    let t = TempDir::new("kag");
    for (name, out) in [("kaggle", "a"), ("Criteo-Kaggle", "b")] {
        let o = nmpsim(
            &t.0,
            &[
                "train",
                "--model",
                name,
                "--rows-scale",
                "0.001",
                "--rows",
                "2000",
                "--batch",
                "8",
                "--iters",
                "1",
                "--test-batches",
                "1",
                "--engine",
                "native",
                "-q",
                "--out",
                out,
            ],
        );
        let s = text(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {s}");
        let v = read_json(&t.0.join(out).join("config.json"));
        let rows: Vec<u64> = v["config"]["train"]["model"]["table_rows"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no config.train.model.table_rows in {v}"))
            .iter()
            .map(|r| r.as_u64().unwrap())
            .collect();
        // Kaggle's largest tables x 0.001 are 10,131 and 8,352 rows: capped at 2,000.
        assert_eq!(rows[2], 2000, "{name}: {rows:?}");
        assert_eq!(rows[11], 2000, "{name}: {rows:?}");
        assert_eq!(rows[0], 1, "{name}: round(1,460 x 0.001) = 1: {rows:?}");
        assert_eq!(rows.iter().max(), Some(&2000));
    }
}

/// Ctrl-C stops the run after the current iteration; the log, the records so
/// far and a summary marked interrupted stay on disk.
#[test]
fn an_interrupted_run_keeps_its_log_and_results() {
    let t = TempDir::new("int");
    let mut child = process(&t.0)
        .args(words(
            "train --model tiny --batch 64 --iters 100000000 --print-freq 50 --out run",
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let started = Instant::now();
    let mut line = String::new();
    while started.elapsed() < Duration::from_secs(60) {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 || line.contains("Finished training it 100/") {
            break;
        }
    }
    assert!(line.contains("Finished training it 100/"), "{line}");
    // SAFETY: sending SIGINT to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let run = t.0.join("run");
    let log = read(&run.join("train.log"));
    assert!(log.contains("Finished training it 100/"), "{log}");
    let rows = std::fs::read_to_string(run.join("iterations.csv"))
        .unwrap()
        .lines()
        .count();
    assert!(rows > 100, "{rows}");
    let r = read_json(&run.join("results.json"));
    assert_eq!(r["results"]["status"], "interrupted");
    // Every logged iteration is in the summary, the warm-up one apart.
    let m = &r["results"]["modes"][0];
    assert_eq!(m["warmup_iterations"], 1);
    assert_eq!(m["iterations"].as_u64().unwrap() as usize, rows - 1 - 1);
    // And the text says so.
    let summary = read(&run.join("summary.txt"));
    assert!(summary.starts_with("run interrupted\n"), "{summary}");
}

/// A killed run (no chance to flush anything) leaves every CSV with its
/// header, also eval.csv before its first evaluation.
#[test]
fn a_killed_run_leaves_every_csv_with_its_header() {
    let t = TempDir::new("killed");
    let mut child = process(&t.0)
        .args(words(
            "train --batch 64 --iters 100000000 --print-freq 20 --out run",
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("Finished training it 20/") {
        line.clear();
    }
    assert!(line.contains("Finished training it 20/"), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
    let run = t.0.join("run");
    for (f, header) in [
        ("iterations.csv", "mode,iteration,batch_size,"),
        ("timeline.csv", "mode,iteration,stage,"),
        ("eval.csv", "mode,iteration,samples,loss,accuracy,auc\n"),
    ] {
        let text = read(&run.join(f));
        assert!(text.starts_with(header), "{f}: {text:.200}");
    }
}

/// A record that cannot be written (here: past the file size limit, as on a
/// full disk) fails the run at once, naming the file; it does not train on
/// with records cut short.
#[test]
fn a_failed_write_of_the_records_ends_the_run_naming_the_file() {
    let t = TempDir::new("efbig");
    // 16 kB a file: config.json and the summary fit, timeline.csv does not
    // for long. (SIGXFSZ ignored: the write fails with EFBIG instead.)
    let o = Command::new("sh")
        .current_dir(&t.0)
        .arg("-c")
        .arg(format!(
            "ulimit -f 32 && trap '' XFSZ && exec '{}' train --iters 200 --out run -q",
            env!("CARGO_BIN_EXE_nmpsim")
        ))
        .output()
        .expect("spawn");
    let err = exited(&o, 2);
    assert!(
        err.contains("training failed")
            && err.contains("cannot write run/timeline.csv: File too large"),
        "{err}"
    );
    let rows = std::fs::read_to_string(t.0.join("run/iterations.csv"))
        .unwrap()
        .lines()
        .count();
    assert!(rows < 100, "trained on: {rows} rows");
    let r = read_json(&t.0.join("run/results.json"));
    assert_eq!(r["results"]["status"], "failed");
}

#[test]
fn warmup_iterations_are_logged_but_left_out_of_the_summary() {
    let t = TempDir::new("warmup");
    let out = t.0.join("run");
    succeeds(
        &t.0,
        &words(
            "train --model tiny --iters 5 --batch 64 --test-batches 1 --warmup-iters 2 --quiet --out run",
        ),
    );
    // iterations.csv keeps all five; the summary averages iterations 2..4.
    let csv = std::fs::read_to_string(out.join("iterations.csv")).expect("iterations.csv");
    let modelled: Vec<(u64, f64)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].parse().unwrap(), f[7].parse().unwrap())
        })
        .collect();
    assert_eq!(modelled.len(), 5);
    let steady: Vec<f64> = modelled
        .iter()
        .filter(|(i, _)| *i >= 2)
        .map(|x| x.1)
        .collect();
    let want = steady.iter().sum::<f64>() / steady.len() as f64;
    let r = read_json(&out.join("results.json"));
    let m = &r["results"]["modes"][0];
    assert_eq!(m["iterations"], 3);
    assert_eq!(m["warmup_iterations"], 2);
    let got = m["modelled_ms_per_iteration"].as_f64().unwrap();
    // iterations.csv rounds to 1 ns.
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");

    // With no more iterations than the warm-up, every iteration counts.
    let out2 = t.0.join("run2");
    succeeds(
        &t.0,
        &[
            "train",
            "--model",
            "tiny",
            "--iters",
            "1",
            "--batch",
            "64",
            "--test-batches",
            "1",
            "--quiet",
            "--out",
            out2.to_str().unwrap(),
        ],
    );
    let m = &read_json(&out2.join("results.json"))["results"]["modes"][0];
    assert_eq!(m["iterations"], 1);
    assert_eq!(m["warmup_iterations"], 0);
}

#[test]
fn a_run_into_an_earlier_runs_directory_replaces_its_records() {
    let t = TempDir::new("again");
    for (iters, batch) in [("5", "32"), ("3", "16")] {
        succeeds(
            &t.0,
            &[
                "train", "--iters", iters, "--batch", batch, "--out", "r", "-q",
            ],
        );
    }
    let csv = read(&t.0.join("r/iterations.csv"));
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert!(
        rows.iter().all(|r| r.split(',').nth(2) == Some("16")),
        "{csv}"
    );
    assert_eq!(csv.matches("mode,iteration").count(), 1, "{csv}");
    // A rerun with data that cannot be read fails before the directory is
    // touched: the earlier run stays whole, its config included.
    let before: Vec<(String, Vec<u8>)> = ["summary.csv", "results.json", "config.json"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(t.0.join("r").join(f)).unwrap()))
        .collect();
    write(&t.0, "bad.tsv", "garbage\n");
    let o = nmpsim(
        &t.0,
        &words(
            "train --model criteo-kaggle --data bad.tsv --max-ind-range 100 \
             --out r -q",
        ),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for (f, bytes) in &before {
        assert_eq!(&std::fs::read(t.0.join("r").join(f)).unwrap(), bytes, "{f}");
    }
    assert!(!t.0.join("r/previous-run").exists());
    // So does an unknown DRAM preset for the pool.
    let o = nmpsim(
        &t.0,
        &words(
            "train --iters 2 --batch 16 --mode tcast-nmp --preset bogus --out \
             r -q",
        ),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unknown DRAM preset"), "{}", text(&o));
    for (f, bytes) in &before {
        assert_eq!(&std::fs::read(t.0.join("r").join(f)).unwrap(), bytes, "{f}");
    }
    // Another command's run is not written over.
    let o = nmpsim(&t.0, &words("dram --requests 100 --out r -q"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("holds a `train` run"), "{}", text(&o));
    for (f, bytes) in &before {
        assert_eq!(&std::fs::read(t.0.join("r").join(f)).unwrap(), bytes, "{f}");
    }
}

/// `--print-freq 0` prints no per-iteration lines; iterations.csv keeps a
/// decayed learning rate's digits down to its 1e-7 floor.
#[test]
fn print_freq_zero_is_silent_and_small_rates_keep_their_digits() {
    let t = TempDir::new("freq");
    let o = succeeds(
        &t.0,
        &[
            "train",
            "--iters",
            "4",
            "--batch",
            "64",
            // Steps 1 and 2 decay 2e-7 by 1 and 1/4, below the 1e-7 floor.
            "--lr",
            "2e-7",
            "--lr-decay-start",
            "1",
            "--lr-decay-steps",
            "2",
            "--print-freq",
            "0",
            "--test-batches",
            "1",
            "--out",
            "r",
        ],
    );
    let s = text(&o);
    assert!(!s.contains("Finished training"), "{s}");
    assert!(s.contains("Testing at - 4/4"), "{s}");
    let log = read(&t.0.join("r/train.log"));
    assert!(!log.contains("Finished training"), "{log}");
    let csv = read(&t.0.join("r/iterations.csv"));
    let lr: Vec<f64> = column(&csv, 5);
    assert_eq!(lr.len(), 4, "{csv}");
    assert!(lr.iter().all(|&x| x > 0.0), "{csv}");
    assert!((lr[0] - 2e-7).abs() < 1e-13, "{csv}");
    for (i, x) in lr.iter().enumerate().skip(1) {
        assert!(
            (x - 1e-7).abs() < 1e-13,
            "iteration {i}: the floor is written as itself: {csv}"
        );
    }
}

/// The synthetic test set is drawn apart from the training data: with one
/// row per table and a frozen model, the test loss is not that of the
/// training batches.
#[test]
fn the_test_set_is_not_the_training_data() {
    let t = TempDir::new("testset");
    let o = succeeds(
        &t.0,
        &words(
            "train --rows 1 --lr 0 --iters 2 --batch 64 --test-batches 2 \
             --json --out r",
        ),
    );
    let v: serde_json::Value = stdout_json(&o);
    let eval = v["results"]["modes"][0]["final_eval"]["loss"]
        .as_f64()
        .expect("eval loss");
    let csv = read(&t.0.join("r/iterations.csv"));
    let losses: Vec<f64> = column(&csv, 3);
    assert_eq!(losses.len(), 2);
    let train = (losses[0] + losses[1]) / 2.0;
    assert!(
        (eval - train).abs() > 1e-4,
        "test loss {eval} vs training loss {train}"
    );
}

/// A learning rate that makes the loss NaN stops the mode as failed, naming
/// the iteration, instead of reporting a NaN loss beside an AUC.
#[test]
fn a_diverging_run_fails_naming_the_iteration() {
    let t = TempDir::new("diverge");
    let o = nmpsim(
        &t.0,
        &words(
            "train --model tiny --iters 3 --batch 8 --test-batches 1 --lr \
             3e38 -q --out d",
        ),
    );
    let s = text(&o);
    assert_ne!(o.status.code(), Some(0), "{s}");
    assert!(
        s.contains("training diverged; lower --lr") && s.contains("(learning rate 3e38)"),
        "{s}"
    );
    let v: serde_json::Value = serde_json::from_str(&read(&t.0.join("d/results.json"))).unwrap();
    assert_eq!(v["results"]["status"], "failed", "{v}");
}

/// The pool's results drain over the link while it computes (that time is in
/// its simulated time), so the forward transfer after it carries only what
/// the ranks still hold: 4 KiB per rank here, as `nmp run` reports. A fixed
/// NMP bandwidth models no link, and the whole result follows.
#[test]
fn the_forward_transfer_carries_only_what_the_pool_still_holds() {
    let t = TempDir::new("tail");
    let transfer = |extra: &[&str], out: &str| -> (f64, u64) {
        let mut a = vec![
            "train",
            "--model",
            "tiny",
            "--mode",
            "baseline-nmp",
            "--iters",
            "1",
            "--batch",
            "512",
            "--dim",
            "64",
            "--ranks",
            "4",
            "--placement",
            "vector-sliced",
            "--engine",
            "native",
            "--test-batches",
            "1",
            "-q",
            "--out",
            out,
        ];
        a.extend(extra);
        succeeds(&t.0, &a);
        let found = transfers(&t.0.join(out), "pooled embeddings pool to gpu");
        assert_eq!(found.len(), 1, "one forward transfer: {found:?}");
        found[0]
    };
    // 3 tables x 512 bags x one 64 B slice per rank: 98,304 B each, all but
    // the 4 KiB output buffer drained during compute.
    let (ns, bytes) = transfer(&[], "sim");
    assert_eq!(bytes, 4 * 4096);
    assert!((ns - (16384.0 / 25.0 + 1000.0)).abs() < 0.1, "{ns}");
    let (_, bytes) = transfer(&["--nmp-bandwidth", "100"], "fixed");
    assert_eq!(bytes, 512 * 64 * 4 * 3);
}

/// Transfers named `what` in a run's timeline: (time ns, bytes) of each.
fn transfers(dir: &Path, what: &str) -> Vec<(f64, u64)> {
    let csv = read(&dir.join("timeline.csv"));
    csv.lines()
        .filter(|l| l.contains(what))
        .map(|row| {
            let f: Vec<&str> = row.split(',').collect();
            (f[8].parse().unwrap(), f[9].parse().unwrap())
        })
        .collect()
}

/// Row-wise Adagrad's exchanges between the ranks of a row cross the link
/// after the scatter, as `nmp run` charges them: on 4 vector-sliced ranks a
/// 64-value row has a slice on each, so each rank sends its hop (4 B) and
/// slice 0's rank the step (4 B): 20 B per coalesced row. A fixed-bandwidth
/// pool sends the same; another optimizer exchanges nothing. And a
/// fixed-bandwidth row-interleaved gather returns a partial sum per bag from
/// every rank that looked up rows, not one pooled vector.
#[test]
fn row_wise_exchanges_and_row_interleaved_partial_sums_cross_the_link() {
    let t = TempDir::new("exchange");
    let run = |extra: &[&str], out: &str| -> PathBuf {
        let mut a = vec![
            "train",
            "--model",
            "tiny",
            "--mode",
            "tcast-nmp",
            "--iters",
            "1",
            "--batch",
            "64",
            "--dim",
            "64",
            "--ranks",
            "4",
            "--engine",
            "native",
            "--test-batches",
            "1",
            "-q",
            "--out",
            out,
        ];
        a.extend(extra);
        succeeds(&t.0, &a);
        t.0.join(out)
    };
    let what = "row-wise adagrad exchanges pool to host";
    let rw = [
        "--placement",
        "vector-sliced",
        "--optimizer",
        "row-wise-adagrad",
    ];
    let sim = transfers(&run(&rw, "sim"), what);
    assert_eq!(sim.len(), 1, "{sim:?}");
    let (ns, bytes) = sim[0];
    assert!(bytes > 0 && bytes % 20 == 0, "{bytes}");
    // (Under the 4 KiB output buffers: all of it follows the scatter.)
    assert!((ns - (bytes as f64 / 25.0 + 1000.0)).abs() < 0.1, "{ns}");
    let mut fixed = rw.to_vec();
    fixed.extend(["--nmp-bandwidth", "100"]);
    assert_eq!(transfers(&run(&fixed, "fixed"), what), vec![(ns, bytes)]);
    let sgd = ["--placement", "vector-sliced", "--optimizer", "sgd"];
    assert!(transfers(&run(&sgd, "sgd"), what).is_empty());

    let ri = [
        "--placement",
        "row-interleaved",
        "--optimizer",
        "sgd",
        "--nmp-bandwidth",
        "100",
    ];
    let fwd = transfers(&run(&ri, "ri"), "pooled embeddings pool to gpu");
    // 3 tables x 64 bags x 64 values x 4 B from each of the 4 ranks.
    assert_eq!(fwd.len(), 1);
    assert_eq!(fwd[0].1, 4 * 3 * 64 * 64 * 4);
}

/// A rerun that fails after writing its own (failed) results, twice, leaves
/// the earlier finished run in previous-run/: a failed run is not one to
/// keep. And a directory that holds no run but a file train writes is
/// refused.
#[test]
fn a_finished_run_outlives_failed_reruns() {
    let t = TempDir::new("outlive");
    let d = &t.0;
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/criteo-sample.tsv");
    let tsv = read(&sample);
    write(d, "good.tsv", &tsv);
    // Bad only past the held-out and first batches: the run starts, writes
    // results after its failed mode, then ends.
    write(d, "late.tsv", format!("{tsv}garbage\n"));
    let run = |data: &str, iters: &str| {
        nmpsim(
            d,
            &[
                "train",
                "--model",
                "criteo-kaggle",
                "--data",
                data,
                "--max-ind-range",
                "1000",
                "--batch",
                "128",
                "--iters",
                iters,
                "--test-batches",
                "1",
                "--out",
                "r",
                "-q",
            ],
        )
    };
    let o = run("good.tsv", "3");
    assert!(o.status.success(), "{}", text(&o));
    let results = std::fs::read(d.join("r/results.json")).unwrap();
    let iterations = std::fs::read(d.join("r/iterations.csv")).unwrap();
    for _ in 0..2 {
        let o = run("late.tsv", "40");
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("kept in r/previous-run"), "{}", text(&o));
        let failed: serde_json::Value = read_json(&d.join("r/results.json"));
        assert_eq!(failed["results"]["status"], "failed");
        assert_eq!(
            std::fs::read(d.join("r/previous-run/results.json")).unwrap(),
            results
        );
        assert_eq!(
            std::fs::read(d.join("r/previous-run/iterations.csv")).unwrap(),
            iterations
        );
    }

    std::fs::create_dir(d.join("mine")).unwrap();
    write(d, "mine/iterations.csv", "mine");
    let o = nmpsim(d, &words("train --iters 2 --batch 16 --out mine -q"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("mine holds iterations.csv"),
        "{}",
        text(&o)
    );
    assert_eq!(read(&d.join("mine/iterations.csv")), "mine");
}

/// A proxied batch's pool-to-GPU tail is at most what the batch sends: an
/// epoch's one-sample last batch does not carry a full batch's leftover.
#[test]
fn a_small_last_batch_sends_at_most_its_own_results() {
    let t = TempDir::new("small-last-batch");
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/data/criteo-sample.tsv");
    // 4096 lines, 315 held out: 3781 = 12 x 315 + 1, so iteration 12 has one sample.
    succeeds(
        &t.0,
        &[
            "train",
            "--model",
            "criteo-kaggle",
            "--data",
            sample,
            "--max-ind-range",
            "1000",
            "--batch",
            "315",
            "--iters",
            "14",
            "--test-batches",
            "1",
            "--mode",
            "tcast-nmp",
            "--engine",
            "native",
            "-q",
            "--out",
            "r",
        ],
    );
    let csv = read(&t.0.join("r/timeline.csv"));
    let pooled: Vec<(u64, u64)> = csv
        .lines()
        .filter(|l| l.contains("pooled embeddings pool to gpu"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            // (mode,iteration,...,time_ns,bytes,energy_pj)
            (f[1].parse().unwrap(), f[9].parse().unwrap())
        })
        .collect();
    assert_eq!(pooled.len(), 14, "{csv}");
    // One sample: 26 tables x 16 values x 4 B.
    assert_eq!(pooled[12], (12, 26 * 16 * 4), "{pooled:?}");
    assert!(pooled[11].1 > 26 * 16 * 4, "{pooled:?}");
}

/// With weighted bags the copy of the indices to the GPU carries the weights
/// casting scales by: 4 B more per lookup.
#[test]
fn weighted_bags_send_their_weights_to_the_gpu_for_casting() {
    let t = TempDir::new("wcopy");
    let copy = |weighted: bool, out: &str| -> u64 {
        let mut a = vec![
            "train",
            "--model",
            "tiny",
            "--mode",
            "tcast-nmp",
            "--batch",
            "8",
            "--iters",
            "1",
            "--test-batches",
            "1",
            "--engine",
            "native",
            "-q",
            "--out",
            out,
        ];
        if weighted {
            a.push("--weighted");
        }
        succeeds(&t.0, &a);
        let csv = std::fs::read_to_string(t.0.join(out).join("timeline.csv")).unwrap();
        let l = csv
            .lines()
            .find(|l| l.contains("indices host to gpu"))
            .unwrap_or_else(|| panic!("{csv}"));
        // (The bytes, before the energy column.)
        l.rsplit(',').nth(1).unwrap().parse().unwrap()
    };
    // tiny: 3 tables of 2 lookups a bag, batch 8: 27 offsets and 48 indices.
    assert_eq!(copy(false, "u"), 4 * (27 + 48));
    assert_eq!(copy(true, "w"), 4 * (27 + 48 + 48));
}

/// Criteo data from a pipe is read once: the run ends when it runs out
/// rather than waiting for a second writer to start another epoch.
#[test]
fn criteo_data_from_a_pipe_ends_with_the_pipe() {
    let t = TempDir::new("pipe");
    let d = &t.0;
    if !crate::common::make_fifo(&d.join("p")) {
        return;
    }
    criteo_sample(d, "s.tsv", 20, "64");
    let data = std::fs::read(d.join("s.tsv")).unwrap();
    let fifo = d.join("p");
    let writer = std::thread::spawn(move || std::fs::write(fifo, data));
    let o = nmpsim(
        d,
        &words(
            "train --model criteo-kaggle --max-ind-range 64 --batch 4 \
             --test-batches 1 --nmp-bandwidth 600 --iters 10 --data p --out \
             run -q",
        ),
    );
    writer.join().unwrap().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&d.join("run/results.json"));
    assert_eq!(r["results"]["status"], "data-exhausted", "{r}");
    // One pass: 20 samples, one batch of 4 held out, 4 batches trained.
    let iters = read(&d.join("run/iterations.csv"));
    assert_eq!(iters.lines().count(), 1 + 4);
}

/// Criteo data without hashing trains when its values fit the model's
/// tables, and a value past them is refused at its line. A run that stops
/// early (the data ends) on a test boundary evaluates once there, and logs
/// its last iterations.
#[test]
fn criteo_without_hashing_and_an_early_end() {
    let t = TempDir::new("nohash");
    let d = &t.0;
    for (file, rows) in [("s.tsv", "100"), ("big.tsv", "3000")] {
        criteo_sample(d, file, 24, rows);
    }
    // The data comes through a pipe, read once: the run ends with it.
    let run = |data: &str, out: &str| {
        use std::io::Write;
        use std::process::Stdio;
        let bytes = std::fs::read(d.join(data)).unwrap();
        let mut child = process(d)
            .args([
                "train",
                "--model",
                "criteo-kaggle",
                "--rows",
                "100",
                "--rows-scale",
                "1",
                "--nmp-bandwidth",
                "600",
                "--batch",
                "4",
                "--test-batches",
                "1",
                "--test-freq",
                "5",
                "--print-freq",
                "3",
                "--iters",
                "20",
                "--data",
                "/dev/stdin",
                "--out",
                out,
                "-q",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nmpsim");
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            // (The run may stop reading early: a broken pipe is fine.)
            let _ = stdin.write_all(&bytes);
        });
        let o = child.wait_with_output().unwrap();
        writer.join().unwrap();
        o
    };
    let o = run("s.tsv", "a");
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&d.join("a/results.json"));
    assert_eq!(r["results"]["status"], "data-exhausted", "{r}");
    // 24 samples: one batch of 4 held out, 5 trained, then the data ends.
    let log = read(&d.join("a/train.log"));
    let tests: Vec<&str> = log.lines().filter(|l| l.contains("Testing at")).collect();
    assert_eq!(tests.len(), 1, "{log}");
    assert!(tests[0].contains("Testing at - 5/20"), "{log}");
    let evals = read(&d.join("a/eval.csv"));
    assert_eq!(evals.lines().count(), 2, "{evals}");
    for it in ["it 3/20", "it 5/20"] {
        assert!(log.contains(&format!("Finished training {it}")), "{log}");
    }
    // Values up to 2999 in tables of 100 rows: refused by line and field.
    let o = run("big.tsv", "b");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let e = text(&o);
    assert!(e.contains("/dev/stdin: line "), "{e}");
    assert!(
        e.contains("rows; hash the values into the tables (--max-ind-range)"),
        "{e}"
    );
}

/// One pipe given as both --data and --test-data (under two names) is
/// refused before it is opened: one reader would see nothing. Two regular
/// files, or one file twice, are fine.
#[test]
fn one_pipe_for_data_and_test_data_is_refused() {
    let t = TempDir::new("pipe2");
    let d = &t.0;
    if !crate::common::make_fifo(&d.join("p")) {
        return;
    }
    std::os::unix::fs::symlink(d.join("p"), d.join("q")).unwrap();
    let o = nmpsim(
        d,
        &words(
            "train --model criteo-kaggle --max-ind-range 64 --iters 1 --data \
             p --test-data q --out run -q",
        ),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let e = text(&o);
    assert!(
        e.contains("--data p and --test-data q are the same pipe"),
        "{e}"
    );
    assert!(!d.join("run").exists());
}

/// The NMP pool's flags given to a mode without NMP are noted as unused.
#[test]
fn nmp_flags_of_a_cpu_mode_are_noted() {
    let t = TempDir::new("nmpflags");
    let base = [
        "train",
        "--model",
        "tiny",
        "--batch",
        "8",
        "--iters",
        "1",
        "--mode",
        "baseline-cpu",
    ];
    let mut a = base.to_vec();
    a.extend(["--nmp-bandwidth", "600", "--ranks=4", "--out", "a"]);
    let o = succeeds(&t.0, &a);
    let s = text(&o);
    assert!(
        s.contains("note: --ranks, --nmp-bandwidth set up the NMP pool, which --mode baseline-cpu does not use"),
        "{s}"
    );
    let mut a = base.to_vec();
    a.extend(["--out", "b"]);
    let o = nmpsim(&t.0, &a);
    assert!(!text(&o).contains("NMP pool, which"), "{}", text(&o));
    // A mode with NMP uses them: no note.
    let o = nmpsim(
        &t.0,
        &words(
            "train --model tiny --batch 8 --iters 1 --mode tcast-nmp \
             --nmp-bandwidth 600 --out c",
        ),
    );
    assert!(!text(&o).contains("NMP pool, which"), "{}", text(&o));
}

/// A log line's loss and accuracy are means over its samples (a smaller last
/// batch weighs less), as in the DLRM reference.
#[test]
fn log_lines_average_loss_over_samples() {
    let t = TempDir::new("per-sample");
    criteo_sample(&t.0, "s.tsv", 250, "500");
    // 250 samples, 100 held out: batches of 100 and 50.
    let o = succeeds(
        &t.0,
        &words(
            "train --model criteo-kaggle --data s.tsv --max-ind-range 500 \
             --batch 100 --iters 2 --test-batches 1 --print-freq 2 --out run",
        ),
    );
    let s = text(&o);
    let csv = read(&t.0.join("run/iterations.csv"));
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (mut loss, mut acc, mut n) = (0.0, 0.0, 0.0);
    let mut sizes = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let b: f64 = f[col("batch_size")].parse().unwrap();
        sizes.push(b);
        loss += b * f[col("loss")].parse::<f64>().unwrap();
        acc += b * f[col("accuracy")].parse::<f64>().unwrap();
        n += b;
    }
    assert_eq!(sizes, [100.0, 50.0], "{csv}");
    let want = format!("loss {:.4}, accuracy {:.3} %", loss / n, 100.0 * acc / n);
    assert!(s.contains(&want), "{want} not in {s}");
}

/// Evaluating every N iterations on an empty test set is refused, naming
/// both options, before anything runs.
#[test]
fn a_test_frequency_without_test_batches_is_refused() {
    let t = TempDir::new("testfreq");
    let o = nmpsim(
        &t.0,
        &words(
            "train --iters 3 --batch 8 --test-batches 0 --test-freq 1 -q \
             --out o",
        ),
    );
    let err = exited(&o, 2);
    assert!(
        err.contains(
            "--test-freq 1: evaluates on the test set, which --test-batches 0 leaves empty"
        ),
        "{err}"
    );
    assert!(!t.0.join("o").exists());
}

/// An argument that is not UTF-8 (here the run directory's name) is no
/// panic where the command line is searched for the NMP flags a CPU mode
/// does not use: the note still names them.
#[cfg(unix)]
#[test]
fn a_run_directory_name_that_is_not_utf8_is_no_panic() {
    use std::os::unix::ffi::OsStrExt;
    let t = TempDir::new("non-utf8-out");
    let out = std::ffi::OsStr::from_bytes(b"o\xff");
    let o = process(&t.0)
        .args(words("train --iters 2 --batch 8 --ranks 4 --out"))
        .arg(out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("note: --ranks sets up the NMP pool, which --mode baseline-cpu does not use"),
        "{err}"
    );
    assert!(t.0.join(out).join("results.json").is_file());
}

/// FAE, its NMP hybrid and SCARS train beside the baseline on a Criteo-like
/// model, report their hot sets in the log and results.json, and name
/// every time's source.
#[test]
fn the_hot_strategies_train_beside_the_baseline() {
    let t = TempDir::new("hot");
    let o = succeeds(
        &t.0,
        &words(
            "train --model criteo-kaggle --rows-scale 0.01 --mode baseline-cpu,hot \
             --batch 128 --iters 12 --hot-budget 580KiB --fae-schedule fixed --fae-rate 25 \
             --nmp-bandwidth 400 --print-freq 0 --out run",
        ),
    );
    let s = text(&o);
    for m in ["fae", "fae-nmp", "scars"] {
        assert!(s.contains(&format!("{m}: hot set: ")), "{s}");
        assert!(s.contains(&format!("{m}: hot steps: ")), "{s}");
    }
    assert!(
        s.contains("fae: hot set: FAE calibrator, budget 0.57 MiB"),
        "{s}"
    );
    assert!(s.contains("scars: hot set: SCARS cost model"), "{s}");
    let r = read_json(&t.0.join("run/results.json"));
    let modes = r["results"]["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["baseline-cpu", "fae", "fae-nmp", "scars"]);
    let fae = &modes[1];
    let notes = fae["notes"].as_array().unwrap();
    let note = |k: &str| {
        notes
            .iter()
            .find(|n| n[0] == k)
            .unwrap_or_else(|| panic!("no {k}: {notes:?}"))[1]
            .as_str()
            .unwrap()
            .to_string()
    };
    let hot: u64 = note("hot steps").parse().unwrap();
    let cold: u64 = note("cold steps").parse().unwrap();
    assert_eq!(hot + cold, 12);
    assert!(hot > 0 && cold > 0, "{notes:?}");
    // The hot steps' GPU work is modelled; the cold ones' CPU work measured.
    let summary = read(&t.0.join("run/summary.txt"));
    let line = summary.lines().find(|l| l.starts_with("fae ")).unwrap();
    assert!(line.contains("meas+model"), "{line}");
}

#[test]
fn a_hot_budget_that_cannot_be_met_fails_before_any_mode_trains() {
    let t = TempDir::new("hot-bad");
    let s = unsuccessful(
        &t.0,
        &words("train --model tiny --mode all --iters 2 --batch 16 --out run"),
    );
    assert!(
        s.contains("mode fae: hot rows (--hot-budget") && s.contains("every table whole"),
        "{s}"
    );
    assert!(!s.contains("Finished training"), "{s}");
    for (flag, want) in [
        (
            "--hot-sample-rate 0",
            "--hot-sample-rate 0: expected a share",
        ),
        ("--hot-budget 0", "--hot-budget 0: expected a size"),
        (
            "--fae-schedule sometimes",
            "--fae-schedule: unknown schedule `sometimes`",
        ),
        ("--fae-rate 150", "--fae-rate 150: expected a percentage"),
        ("--cache-mb -1", "--cache-mb -1: expected a positive size"),
    ] {
        let o = nmpsim(
            &t.0,
            &words(&format!("train --model tiny --mode fae --iters 2 {flag}")),
        );
        let s = text(&o);
        assert!(!o.status.success() && s.contains(want), "{flag}: {s}");
    }
}
