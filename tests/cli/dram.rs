//! End-to-end tests of `nmpsim dram …` through the built binary.

use crate::common::*;

#[test]
fn both_engines_write_a_run_directory_and_json() {
    let t = TempDir::new("both");
    let d = &t.0;
    let out = ok(
        d,
        &words(
            "dram --engine both --preset DDR4-2400-x8 --stream random \
             --requests 5000 --write-fraction 0.2 --out run --json --quiet",
        ),
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON object");
    let runs = v["results"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(
            r["reads"].as_u64().unwrap() + r["writes"].as_u64().unwrap(),
            5000
        );
        assert!(r["bandwidth_gbps"].as_f64().unwrap() > 1.0);
        assert!(r["energy"]["total_pj"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(runs[0]["engine"], "dramsim3");
    assert_eq!(runs[1]["engine"], "ramulator");
    let ratio = v["results"]["agreement"]["bandwidth_ratio"]
        .as_f64()
        .unwrap();
    assert!((0.85..1.15).contains(&ratio), "{ratio}");
    let run = d.join("run");
    for f in ["config.json", "results.json", "results.csv", "summary.txt"] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    let cfg = read_json(&run.join("config.json"));
    assert_eq!(cfg["config"]["dram"]["name"], "DDR4-2400-x8");
    assert_eq!(cfg["config"]["dram"]["timing"]["cl"], 16);
    assert!(run.join("engine-dramsim3/dramsim3.ini").is_file());
    assert!(run.join("engine-ramulator/ramulator.cfg").is_file());
    // Command traces are parsed and removed unless asked to keep them.
    let kept = std::fs::read_dir(run.join("engine-ramulator"))
        .unwrap()
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "cmdtrace"));
    assert!(!kept);
    let csv = read(&run.join("results.csv"));
    assert_eq!(csv.lines().count(), 3);
    assert!(csv.starts_with("engine,preset,cycles,"));
    let cmp = v["results"]["comparisons"].as_array().unwrap();
    assert_eq!(cmp.len(), 1);
    assert_eq!(
        (&cmp[0]["engine"], &cmp[0]["reference"]),
        (&"ramulator".into(), &"dramsim3".into())
    );
    assert_eq!(cmp[0]["bandwidth_ratio"].as_f64(), Some(ratio));
}

/// Each run after the first is compared with the first, under its own name
/// (a native run must not be labelled Ramulator), and `agreement` stays
/// Ramulator over DRAMsim3, only when both ran.
#[test]
fn comparisons_name_their_engines() {
    let t = TempDir::new("cmp");
    let d = &t.0;
    let out = ok(
        d,
        &words("dram --engine native,dramsim3 --requests 3000 --out r -q"),
    );
    assert!(out.contains("dramsim3 / native: bandwidth 1.000"), "{out}");
    assert!(!out.contains("ramulator"), "{out}");
    let v = read_json(&d.join("r/results.json"));
    assert!(v["results"]["agreement"].is_null(), "{v}");
    let out = ok(
        d,
        &words("dram --engine all --requests 3000 --out a --json -q"),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pairs: Vec<(String, String)> = v["results"]["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["engine"].as_str().unwrap().to_string(),
                c["reference"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("ramulator".to_string(), "dramsim3".to_string()),
            ("native".to_string(), "dramsim3".to_string())
        ]
    );
    assert_eq!(v["results"]["agreement"]["engine"], "ramulator");
}

/// HBM-1000 runs on all three engines; with `--check-timing` native's
/// commands break no rule and Ramulator is reported not checked (its HBM
/// trace names a bank within its group), not refused.
#[test]
fn hbm_1000_runs_on_all_three_engines() {
    let t = TempDir::new("hbm1");
    let d = &t.0;
    let out = ok(
        d,
        &words(
            "dram --engine all --preset HBM-1000 --write-fraction 0.3 \
             --requests 3000 --check-timing --out r -q",
        ),
    );
    assert!(
        out.contains("ramulator: not checked (Ramulator's HBM command trace")
            && out.contains("no rule broken"),
        "{out}"
    );
    let v = read_json(&d.join("r/results.json"));
    let runs = v["results"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    let bw = |engine: &str| {
        runs.iter().find(|r| r["engine"] == engine).unwrap()["bandwidth_gbps"]
            .as_f64()
            .unwrap()
    };
    // Each engine moves every request; their bandwidths agree within 5%.
    let n = bw("native");
    for e in ["dramsim3", "ramulator"] {
        assert!(
            (bw(e) / n - 1.0).abs() < 0.05,
            "{e} {} vs native {n}",
            bw(e)
        );
    }
    let checks = v["results"]["timing_checks"].as_array().unwrap();
    let ram = checks.iter().find(|c| c["engine"] == "ramulator").unwrap();
    assert_eq!(ram["checked"], false);
    assert!(
        ram["reason"].as_str().unwrap().contains("bank group"),
        "{ram}"
    );
}

/// `--check-timing` replays native's command log and Ramulator's command
/// traces through the JEDEC checker: on two ranks with writes, native breaks
/// no rule and Ramulator breaks only tRTRS between writes of different ranks
/// (its known departure), each listed in the run directory; DRAMsim3 has no
/// log to check.
#[test]
fn check_timing_replays_the_engines_commands() {
    let t = TempDir::new("jedec");
    let d = &t.0;
    let out = ok(
        d,
        &words(
            "dram --engine all --preset DDR4-3200-x8-2R --write-fraction 0.3 \
             --requests 6000 --check-timing --out r -q",
        ),
    );
    assert!(
        out.contains("dramsim3: not checked (the DRAMsim3 library exposes no command log)"),
        "{out}"
    );
    let v = read_json(&d.join("r/results.json"));
    let checks = v["results"]["timing_checks"].as_array().unwrap();
    let check = |engine: &str| {
        checks
            .iter()
            .find(|c| c["engine"] == engine)
            .unwrap_or_else(|| panic!("no check of {engine}: {checks:?}"))
    };
    let runs = v["results"]["runs"].as_array().unwrap();
    let run = |engine: &str| runs.iter().find(|r| r["engine"] == engine).unwrap();
    let native = check("native");
    assert_eq!(native["checked"], true);
    assert_eq!(native["violations"], 0, "{native}");
    // Every command the engine counted is in the log it replayed.
    let r = run("native");
    let counted = [
        "activations",
        "precharges",
        "read_cmds",
        "write_cmds",
        "refreshes",
    ]
    .iter()
    .map(|k| r[k].as_u64().unwrap())
    .sum::<u64>();
    assert_eq!(native["commands"].as_u64(), Some(counted));
    assert!(!d.join("r/jedec-native.txt").exists());
    let ram = check("ramulator");
    let n = ram["violations"].as_u64().unwrap();
    assert!(n > 0, "two ranks with writes: {ram}");
    assert_eq!(ram["write_to_write_rank_switches"].as_u64(), Some(n));
    assert_eq!(ram["by_rule"][0]["rule"], "tRTRS");
    assert_eq!(ram["by_rule"][0]["count"].as_u64(), Some(n));
    let listed = read(&d.join("r/jedec-ramulator.txt"));
    assert_eq!(listed.lines().count() as u64, n);
    assert!(
        listed
            .lines()
            .all(|l| l.contains(": tRTRS (WR ") && l.contains(" cycles after WR in rank ")),
        "{listed}"
    );
    // The traces were read and removed (not asked to keep them).
    assert!(
        !std::fs::read_dir(d.join("r/engine-ramulator"))
            .unwrap()
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "cmdtrace"))
    );
    assert_eq!(check("dramsim3")["checked"], false);
}

#[test]
fn address_trace_runs_and_bad_lines_are_named() {
    let t = TempDir::new("trace");
    let d = &t.0;
    let mut text = String::from("# address, op\n");
    for i in 0..2000u64 {
        text.push_str(&format!(
            "{:#x} {}\n",
            i * 64 * 97,
            if i % 4 == 0 { "W" } else { "R" }
        ));
    }
    write(d, "ok.txt", &text);
    let out = ok(d, &words("dram --trace ok.txt --out r --json -q"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &v["results"]["runs"][0];
    assert_eq!(r["reads"], 1500);
    assert_eq!(r["writes"], 500);

    write(d, "bad.txt", "0x40 R\n0x80 W\n\n0xc0 X\n");
    let err = fails(d, &words("dram --trace bad.txt -q"));
    assert!(err.contains("bad.txt: line 4"), "{err}");
    assert!(err.contains("R|W"), "{err}");

    // A missing file is named with the system's reason, once.
    for flag in ["--trace", "--embedding-trace"] {
        let err = fails(d, &["dram", flag, "missing.file", "-q"]);
        assert!(err.contains("missing.file: "), "{err}");
        assert_eq!(err.matches("(os error 2)").count(), 1, "{flag}: {err}");
    }

    write(d, "far.txt", "0x40 R\n0x400000000 R\n");
    let err = fails(d, &words("dram --trace far.txt --preset DDR4-3200-x8 -q"));
    assert!(err.contains("beyond the configured capacity"), "{err}");
    assert!(err.contains("far.txt line 2"), "{err}");

    // A trace with nothing to send, or a bad first line, fails before the
    // run directory exists.
    write(d, "empty.txt", "# nothing\n\n");
    write(d, "first.txt", "zz R\n0x40 R\n");
    for (file, want) in [
        ("empty.txt", "empty.txt: no requests"),
        ("first.txt", "first.txt: line 1"),
    ] {
        let err = fails(d, &["dram", "--trace", file, "--out", "none", "-q"]);
        assert!(err.contains(want), "{err}");
        assert!(!d.join("none").exists(), "{file} left a run directory");
    }
}

#[test]
fn embedding_trace_becomes_row_reads() {
    let t = with_trace(
        "emb",
        "--rows 5000 --tables 2 --bag 4 --batch 64 --batches 2 \
             -o e.nmpt --quiet",
    );
    let d = &t.0;
    let out = ok(
        d,
        &words(
            "dram --embedding-trace e.nmpt --dim 32 --phase forward --out r \
             --json -q",
        ),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // 2 batches x 2 tables x 64 bags x 4 lookups, each a 128 B row = two 64 B reads.
    assert_eq!(v["results"]["runs"][0]["reads"], 2 * 2 * 64 * 4 * 2);
    let err = fails(
        d,
        &words("dram --embedding-trace e.nmpt --max-batches 0 -q"),
    );
    assert!(err.contains("--max-batches 0"), "{err}");
}

#[test]
fn bad_preset_and_engine_list_what_is_valid() {
    let t = TempDir::new("bad");
    let d = &t.0;
    let err = fails(d, &words("dram --preset DDR4-3200-x32 --requests 10"));
    assert!(
        err.contains("DDR4-3200-x32") && err.contains("DDR4-2400-x8-2R"),
        "{err}"
    );
    let err = fails(d, &words("dram --engine ramulator2 --requests 10"));
    assert!(err.contains("dramsim3, ramulator"), "{err}");
    let err = fails(d, &words("dram --stream zigzag --requests 10"));
    assert!(err.contains("strided:"), "{err}");
    let err = fails(d, &words("dram --engine native, --requests 10"));
    assert!(
        err.contains("--engine native,: an empty engine name"),
        "{err}"
    );
    // A negative number reaches the option's own check, which names it.
    let err = fails(d, &words("dram --write-fraction -0.1 --requests 10"));
    assert!(
        err.contains("--write-fraction: -0.1; expected a value in 0.0..=1.0"),
        "{err}"
    );
    // Nothing is run, so no run directory is created.
    assert!(!d.join("runs").exists());
}

#[test]
fn presets_config_and_bench() {
    let t = TempDir::new("misc");
    let d = &t.0;
    let list = ok(d, &["dram", "presets"]);
    assert!(
        list.contains("DDR4-3200-x8") && list.contains("tCCD_L 8->10"),
        "{list}"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(d, &words("dram presets --json"))).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 21);
    assert!(
        list.contains("HBM2-2000") && list.contains("HBM2-2000-PC") && list.contains("HBM-1000"),
        "{list}"
    );
    let ini = ok(
        d,
        &words("dram config --engine dramsim3 --preset DDR4-3200-x16"),
    );
    assert!(
        ini.contains("device_width = 16") && ini.contains("tCK = 0.625"),
        "{ini}"
    );
    let cfg = ok(
        d,
        &words("dram config --engine ramulator --preset DDR4-3200-x8"),
    );
    assert!(
        cfg.contains("speed = DDR4_3200") && cfg.contains("tRAS: JEDEC 52 cycles, Ramulator 56")
    );
    let out = ok(d, &words("dram bench --requests 2000 --out b --json -q"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["results"].as_array().unwrap();
    // native, dramsim3, ramulator x random, sequential
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().any(|r| r["engine"] == "native"), "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["sim_requests_per_s"].as_f64().unwrap() > 0.0)
    );
    assert!(d.join("b/bench.csv").is_file());

    // Native with a reference: the summary states native's speed over it per
    // stream, from the same rows as bench.csv.
    let out = ok(
        d,
        &words("dram bench --requests 2000 --engines native,dramsim3 --out r -q"),
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("native / dramsim3: "))
        .unwrap_or_else(|| panic!("no ratio line in:\n{out}"));
    let csv = read(&d.join("r/bench.csv"));
    let rate = |engine: &str, stream: &str| -> f64 {
        csv.lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f[0] == engine && f[1] == stream)
            .unwrap()[5]
            .parse()
            .unwrap()
    };
    for stream in ["random", "sequential"] {
        let want = format!(
            "{stream} {:.1}x",
            rate("native", stream) / rate("dramsim3", stream)
        );
        assert!(line.contains(&want), "{line} lacks {want}");
    }
    assert!(!out.contains("native / ramulator"), "{out}");
    assert!(
        std::fs::read_to_string(d.join("r/summary.txt"))
            .unwrap()
            .contains(line)
    );

    // Rounds: every engine and stream once per round, each round's ratios from
    // its own rows, and their median (of two: the mean).
    let out = ok(
        d,
        &words(
            "dram bench --requests 2000 --engines native,dramsim3 --repeat 2 \
             --out m -q",
        ),
    );
    let csv = read(&d.join("m/bench.csv"));
    let fields: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(fields[0].last(), Some(&"round"), "{csv}");
    assert_eq!(fields.len(), 1 + 2 * 2 * 2, "{csv}");
    let rate = |engine: &str, stream: &str, round: &str| -> f64 {
        fields
            .iter()
            .find(|f| f[0] == engine && f[1] == stream && f[7] == round)
            .unwrap_or_else(|| panic!("no {engine} {stream} round {round} in\n{csv}"))[5]
            .parse()
            .unwrap()
    };
    let line_of = |prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
            .to_string()
    };
    for stream in ["random", "sequential"] {
        let each: Vec<f64> = ["1", "2"]
            .iter()
            .map(|r| rate("native", stream, r) / rate("dramsim3", stream, r))
            .collect();
        for (i, x) in each.iter().enumerate() {
            let line = line_of(&format!("native / dramsim3, round {}: ", i + 1));
            assert!(line.contains(&format!("{stream} {x:.1}x")), "{line}");
        }
        let line = line_of("native / dramsim3, median of 2 rounds: ");
        let m = (each[0] + each[1]) / 2.0;
        assert!(line.contains(&format!("{stream} {m:.1}x")), "{line}");
    }
    let v = read_json(&d.join("m/results.json"));
    let rounds: Vec<u64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["round"].as_u64().unwrap())
        .collect();
    assert_eq!(rounds, [1, 1, 1, 1, 2, 2, 2, 2]);
    let e = fails(d, &words("dram bench --repeat 0 -q"));
    assert!(e.contains("--repeat"), "{e}");
    let e = fails(d, &words("dram bench --requests 0 --out b0 -q"));
    assert!(e.contains("--requests: 0; expected at least 1"), "{e}");
    assert!(!d.join("b0").exists(), "a run directory was left");
}

#[test]
fn a_run_into_an_earlier_runs_directory_leaves_only_its_own_outputs() {
    let t = TempDir::new("rerun");
    let d = &t.0;
    let base = [
        "dram",
        "--preset",
        "DDR4-3200-x8-2R",
        "--write-fraction",
        "0.3",
        "--requests",
        "3000",
        "--check-timing",
        "--out",
        "r",
        "-q",
        "--engine",
    ];
    let mut a = base.to_vec();
    a.push("native,ramulator");
    ok(d, &a);
    assert!(d.join("r/engine-ramulator").is_dir());
    assert!(d.join("r/jedec-ramulator.txt").is_file());
    write(d, "r/notes.txt", "mine");
    let mut a = base.to_vec();
    a.push("native");
    ok(d, &a);
    assert!(
        !d.join("r/engine-ramulator").exists(),
        "stale engine directory"
    );
    assert!(
        !d.join("r/jedec-ramulator.txt").exists(),
        "stale timing check"
    );
    let v = read_json(&d.join("r/results.json"));
    assert_eq!(v["results"]["runs"].as_array().unwrap().len(), 1);
    // What the command does not own stays.
    assert_eq!(read(&d.join("r/notes.txt")), "mine");
}

/// DRAMsim3 leaves a few posted writes unissued at the end: no ACTIVATE,
/// so the activation ratio over it is undefined, not a made-up 2.0.
#[test]
fn a_reference_without_activations_has_no_activation_ratio() {
    let t = TempDir::new("noact");
    let d = &t.0;
    write(d, "w3.txt", "0x0 W\n0x40 W\n0x1000 W\n");
    let out = ok(
        d,
        &words("dram --engine dramsim3,native --trace w3.txt --out w -q"),
    );
    let v = read_json(&d.join("w/results.json"));
    let runs = v["results"]["runs"].as_array().unwrap();
    assert_eq!(runs[0]["activations"], 0, "{v}");
    assert!(runs[1]["activations"].as_u64().unwrap() > 0, "{v}");
    let c = &v["results"]["comparisons"][0];
    assert!(c["activations_ratio"].is_null(), "{c}");
    assert!(out.contains("activations n/a (dramsim3 has none)"), "{out}");
}

#[test]
fn a_run_without_reads_has_no_read_latency() {
    let t = TempDir::new("noreads");
    let d = &t.0;
    let out = ok(
        d,
        &words(
            "dram --engine dramsim3,native --requests 2000 --write-fraction 1 \
             --out w -q",
        ),
    );
    assert!(out.contains("mean read latency n/a (no reads)"), "{out}");
    assert!(!out.contains("NaN"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("read latency mean"))
        .unwrap();
    assert_eq!(line.matches("n/a").count(), 2, "{line}");
    let v = read_json(&d.join("w/results.json"));
    assert!(
        v["results"]["comparisons"][0]["read_latency_mean_ratio"].is_null(),
        "{v}"
    );
    // No reads: no latency, null in JSON and empty in CSV, not 0 ns.
    for run in v["results"]["runs"].as_array().unwrap() {
        for k in [
            "read_latency_mean_ns",
            "read_latency_p50_ns",
            "read_latency_p99_ns",
            "read_latency_max_ns",
        ] {
            assert!(run[k].is_null(), "{k}: {run}");
        }
        assert!(run["row_hit_rate"].is_number(), "writes hit rows: {run}");
    }
    let csv = read(&d.join("w/results.csv"));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        let cell = |name: &str| cells[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(cell("read_latency_mean_ns"), "", "{line}");
        assert_eq!(cell("read_latency_max_ns"), "", "{line}");
        // Every statistic of results.json's runs, command counts included.
        assert_eq!(cell("read_cmds"), "0", "{line}");
        assert!(cell("write_cmds").parse::<u64>().unwrap() > 0, "{line}");
        for name in [
            "precharges",
            "row_conflicts",
            "row_hit_rate",
            "active_rank_cycles",
            "precharged_rank_cycles",
        ] {
            assert!(header.contains(&name), "{name}: {header:?}");
        }
    }
}

#[test]
fn options_of_another_input_are_refused_not_ignored() {
    let t = TempDir::new("inputs");
    let d = &t.0;
    write(d, "a.txt", "0x40 R\n");
    for (args, want) in [
        (
            vec!["--trace", "a.txt", "--requests", "5"],
            "cannot be used with",
        ),
        (
            vec!["--trace", "a.txt", "--write-fraction", "0.5"],
            "cannot be used with",
        ),
        (
            vec!["--trace", "a.txt", "--base", "64"],
            "cannot be used with",
        ),
        (
            vec!["--embedding-trace", "e.nmpt", "--footprint", "4096"],
            "cannot be used with",
        ),
        (
            vec!["--embedding-trace", "e.nmpt", "--seed", "3"],
            "cannot be used with",
        ),
        (
            vec!["--stream", "random", "--phase", "update"],
            "--phase applies to --embedding-trace",
        ),
        (vec!["--dim", "8"], "--dim applies to --embedding-trace"),
        (
            vec!["--trace", "a.txt", "--max-batches", "1"],
            "--max-batches applies",
        ),
    ] {
        let mut a = vec!["dram", "--engine", "native", "-q", "--out", "none"];
        a.extend(args.iter());
        let err = fails(d, &a);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!d.join("none").exists(), "{args:?}");
    }
}

/// An address trace from a pipe is read once, whole, by the one engine; with
/// two engines it is refused by name, before anything is written.
#[test]
fn an_address_trace_from_a_pipe_is_read_whole_once() {
    use std::io::Write;
    use std::process::Stdio;
    let t = TempDir::new("pipe");
    let d = &t.0;
    // More than one reader buffer's worth of lines.
    let text: String = (0..15_000u64)
        .map(|i| format!("{:#x} R\n", (i * 7919 % 100_000) * 64))
        .collect();
    assert!(text.len() > 1 << 17);
    let run = |engines: &str, out: &str| {
        let mut child = process(d)
            .args([
                "dram",
                "--engine",
                engines,
                "--trace",
                "/dev/stdin",
                "--out",
                out,
                "-q",
                "--json",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nmpsim");
        let mut stdin = child.stdin.take().unwrap();
        let body = text.clone();
        // (A refusal exits without reading: the write may then fail.)
        let feeder = std::thread::spawn(move || stdin.write_all(body.as_bytes()).ok());
        let o = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        o
    };
    let o = run("native", "one");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = stdout_json(&o);
    assert_eq!(v["results"]["runs"][0]["reads"], 15_000);

    let o = run("native,dramsim3", "two");
    let err = exited(&o, 2);
    assert!(
        err.contains("--trace /dev/stdin: not a regular file") && err.contains("2 engines"),
        "{err}"
    );
    assert!(!d.join("two").exists(), "a refused run wrote its directory");
}

/// A run that fails in a directory an earlier run finished in leaves none of
/// the earlier run's results beside its own config: they wait in
/// `previous-run/`, which the next run that succeeds removes.
#[test]
fn a_failed_rerun_keeps_the_earlier_run_aside() {
    let t = TempDir::new("failed-rerun");
    let d = &t.0;
    let good: String = (0..3000u64).map(|i| format!("{:#x} R\n", i * 64)).collect();
    write(d, "a.txt", &good);
    write(d, "bad.txt", format!("{good}0x40 X\n"));
    let first = [
        "dram", "--engine", "native", "--trace", "a.txt", "--out", "r", "-q",
    ];
    ok(d, &first);
    let names = ["results.json", "results.csv", "summary.txt", "config.json"];
    let earlier: Vec<Vec<u8>> = names
        .iter()
        .map(|f| std::fs::read(d.join("r").join(f)).unwrap())
        .collect();
    write(d, "r/notes.txt", "mine");
    let err = fails(d, &words("dram --engine native --trace bad.txt --out r -q"));
    assert!(
        err.contains("bad.txt") && err.contains("line 3001"),
        "{err}"
    );
    assert!(err.contains("kept in r/previous-run"), "{err}");
    for f in ["results.json", "results.csv", "summary.txt"] {
        assert!(
            !d.join("r").join(f).exists(),
            "the earlier run's {f} is still there"
        );
    }
    for (f, bytes) in names.iter().zip(&earlier) {
        assert_eq!(
            &std::fs::read(d.join("r/previous-run").join(f)).unwrap(),
            bytes,
            "{f}"
        );
    }
    let config = read_json(&d.join("r/config.json"));
    assert_eq!(config["config"]["source"]["path"], "bad.txt");
    assert_eq!(read(&d.join("r/notes.txt")), "mine");
    // A run that succeeds there replaces both.
    ok(d, &first);
    assert!(!d.join("r/previous-run").exists());
    for f in names {
        assert!(d.join("r").join(f).is_file(), "{f}");
    }
    assert_eq!(read(&d.join("r/notes.txt")), "mine");
    // A config.json that is not an nmpsim run's is refused, untouched.
    std::fs::create_dir(d.join("mine")).unwrap();
    write(d, "mine/config.json", "{\"x\": 1}");
    let err = fails(d, &words("dram --requests 100 --out mine -q"));
    assert!(err.contains("not an nmpsim run's configuration"), "{err}");
    assert_eq!(read(&d.join("mine/config.json")), "{\"x\": 1}");
    // So is a directory that is no run's but holds a file a run writes.
    std::fs::create_dir(d.join("proj")).unwrap();
    write(d, "proj/results.csv", "mine");
    let err = fails(d, &words("dram --requests 100 --out proj -q"));
    assert!(
        err.contains("proj holds results.csv") && err.contains("no nmpsim run's config.json"),
        "{err}"
    );
    assert_eq!(read(&d.join("proj/results.csv")), "mine");
    assert!(!d.join("proj/config.json").exists());
}

/// A window beyond any controller, and a directory given as a trace, are
/// refused by flag.
#[test]
fn absurd_windows_and_directories_are_refused_by_flag() {
    let t = TempDir::new("absurd");
    let d = &t.0;
    std::fs::create_dir(d.join("adir")).unwrap();
    let err = fails(
        d,
        &words(
            "dram --engine native --requests 200 --window \
             18446744073709551615",
        ),
    );
    assert!(
        err.contains("'--window <N>'") && err.contains("expected 1 to 1048576"),
        "{err}"
    );
    for cmd in [&["dram"][..], &["dram", "bench"][..]] {
        let mut a = cmd.to_vec();
        a.extend(["--engines", "native,native", "--requests", "100"]);
        if cmd.len() == 1 {
            a[1] = "--engine";
        }
        let err = fails(d, &a);
        assert!(err.contains("native is named twice"), "{a:?}: {err}");
    }
    let err = fails(d, &words("dram --trace adir"));
    assert!(err.contains("--trace adir: is a directory"), "{err}");
    let err = fails(d, &words("dram --embedding-trace adir"));
    assert!(
        err.contains("adir: is a directory; expected a trace file"),
        "{err}"
    );
}

/// Two failed reruns keep the finished run aside (a failed run is not one to
/// keep); a user's `previous-run/` in a directory that holds no run, and
/// user files beside a run's own, are left alone; two runs never share a
/// directory at once.
#[test]
fn earlier_runs_and_user_files_survive_reruns() {
    let t = TempDir::new("survive");
    let d = &t.0;
    let good: String = (0..2000u64).map(|i| format!("{:#x} R\n", i * 64)).collect();
    write(d, "a.txt", &good);
    write(d, "bad.txt", format!("{good}0x40 X\n"));
    let first = [
        "dram", "--engine", "native", "--trace", "a.txt", "--out", "r", "-q",
    ];
    ok(d, &first);
    let results = std::fs::read(d.join("r/results.json")).unwrap();
    write(d, "r/engine-notes.txt", "mine");
    let bad = [
        "dram", "--engine", "native", "--trace", "bad.txt", "--out", "r", "-q",
    ];
    for _ in 0..2 {
        let err = fails(d, &bad);
        assert!(err.contains("kept in r/previous-run"), "{err}");
        assert_eq!(
            std::fs::read(d.join("r/previous-run/results.json")).unwrap(),
            results
        );
    }
    ok(d, &first);
    assert!(!d.join("r/previous-run").exists());
    assert_eq!(read(&d.join("r/engine-notes.txt")), "mine");

    std::fs::create_dir_all(d.join("u/previous-run")).unwrap();
    write(d, "u/previous-run/data.txt", "precious");
    ok(d, &words("dram --requests 100 --engine native --out u -q"));
    assert_eq!(read(&d.join("u/previous-run/data.txt")), "precious");

    // A file as the directory.
    let err = fails(d, &words("dram --requests 100 --out a.txt -q"));
    assert!(err.contains("a.txt is not a directory"), "{err}");

    // While one run writes a directory, another is refused.
    let mut long = process(d)
        .args(words(
            "dram --engine dramsim3 --requests 5000000 --out busy -q",
        ))
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !d.join("busy/config.json").exists() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the long run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let err = fails(d, &words("dram --requests 100 --out busy -q"));
    long.kill().unwrap();
    long.wait().unwrap();
    assert!(
        err.contains("busy is in use by another nmpsim run"),
        "{err}"
    );
}

#[test]
fn base_and_footprint_take_hex_as_errors_print_them() {
    let t = TempDir::new("hex");
    let d = &t.0;
    let run = |base: &str, fp: &str, out: &str| {
        ok(
            d,
            &[
                "dram",
                "--engine",
                "native",
                "--stream",
                "random",
                "--requests",
                "500",
                "--base",
                base,
                "--footprint",
                fp,
                "--json",
                "-q",
                "--out",
                out,
            ],
        );
        read_json(&d.join(out).join("results.json"))["results"]["runs"][0]["cycles"].clone()
    };
    assert_eq!(
        run("0x1000", "0x100000", "h"),
        run("4096", "1048576", "dec")
    );
    let err = fails(d, &words("dram --engine native --base 0xzz -q"));
    assert!(
        err.contains("--base") && err.contains("0x-prefixed hexadecimal byte count, not `0xzz`"),
        "{err}"
    );
    // A stream's bad parameters are named by their flags, not the library's fields.
    for (args, want) in [
        (
            ["--footprint", "32"],
            "--footprint: 32; expected a multiple of 64",
        ),
        (["--base", "0x10"], "--base: 0x10 is not 64 B aligned"),
        (
            ["--write-fraction", "2"],
            "--write-fraction: 2; expected a value in 0.0..=1.0",
        ),
        (["--stream", "strided:3"], "--stream: `strided:3`: expected"),
    ] {
        let mut a = vec!["dram", "--engine", "native", "--requests", "10", "-q"];
        a.extend(args);
        let err = fails(d, &a);
        assert!(
            err.contains(want) && !err.contains("invalid parameter"),
            "{err}"
        );
    }
}

#[test]
fn a_missing_trace_is_named_whatever_the_engines() {
    let t = TempDir::new("missing");
    for engines in ["native", "both", "all"] {
        let err = fails(
            &t.0,
            &["dram", "--engine", engines, "--trace", "nonexist.txt", "-q"],
        );
        assert!(
            err.contains("nonexist.txt") && err.contains("No such file"),
            "{engines}: {err}"
        );
        assert!(!err.contains("pipe"), "{engines}: {err}");
    }
}

/// Posted writes that no WRITE command carried (merged in the write buffer,
/// or left there at the end by DRAMsim3) make `bandwidth` exceed the bus
/// bandwidth: the summary says so, naming the engine. Native issues every
/// write of a stream without repeats, so it gets no note; nor does
/// --keep-command-traces go unremarked where Ramulator does not run.
#[test]
fn writes_no_command_carried_are_noted() {
    let t = TempDir::new("writenote");
    let out = ok(
        &t.0,
        &words(
            "dram --engine dramsim3,native --write-fraction 1 --requests 100 \
             -q --out w",
        ),
    );
    let note = out
        .lines()
        .find(|l| l.starts_with("note: dramsim3: 100 writes completed but "))
        .unwrap_or_else(|| panic!("no note for dramsim3:\n{out}"));
    assert!(
        note.contains("DRAMsim3 leaves the writes still buffered"),
        "{note}"
    );
    assert!(!out.contains("note: native"), "{out}");
    let summary = read(&t.0.join("w/summary.txt"));
    assert!(summary.contains(note), "{summary}");
    let o = succeeds(
        &t.0,
        &words("dram --engine native --keep-command-traces --requests 10 --out k"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: --keep-command-traces keeps Ramulator's command traces, and --engine native does not run Ramulator"),
        "{err}"
    );
}
