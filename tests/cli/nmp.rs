//! End-to-end tests of `nmpsim nmp …` through the built binary.

use crate::common::*;

#[test]
fn every_primitive_and_placement_runs_and_checks_against_the_kernels() {
    let t = TempDir::new("all");
    for (prim, opt) in [
        ("gather-reduce", "sgd"),
        ("casted-gather-reduce", "sgd"),
        ("scatter", "row-wise-adagrad"),
    ] {
        let out = format!("run-{prim}");
        let o = succeeds(
            &t.0,
            &[
                "nmp",
                "run",
                "--profile",
                "rm1",
                "--rows",
                "3000",
                "--batch",
                "64",
                "--ranks",
                "4",
                "--placement",
                "all",
                "--primitive",
                prim,
                "--optimizer",
                opt,
                "--check",
                "--out",
                &out,
                "--json",
            ],
        );
        let v: serde_json::Value = stdout_json(&o);
        let phases = v["results"]["phases"].as_array().unwrap();
        let primary: Vec<_> = phases.iter().filter(|p| p["primary"] == true).collect();
        assert_eq!(primary.len(), 3, "{prim}: one primary phase per placement");
        for p in primary {
            assert_eq!(p["phase"], prim);
            let r = &p["report"];
            let eff = r["effective_bandwidth_gbps"].as_f64().unwrap();
            assert!(eff > 0.0 && eff <= r["peak_bandwidth_gbps"].as_f64().unwrap());
            assert!(r["energy"]["total_pj"].as_f64().unwrap() > 0.0);
            assert_eq!(r["per_rank"].as_array().unwrap().len(), 4);
        }
        // --check: every primitive's results against the kernels', one
        // check per placement.
        let checks = v["results"]["functional_checks"].as_array().unwrap();
        assert_eq!(checks.len(), 3, "{prim}");
        for c in checks {
            assert!(c["max_rel_err"].as_f64().unwrap() <= 1e-5, "{prim}: {c}");
            assert_eq!(c["batch"], 0, "{prim}: {c}");
        }
        for f in ["config.json", "results.json", "phases.csv", "summary.txt"] {
            assert!(t.0.join(&out).join(f).is_file(), "{f}");
        }
        // The config holds what regenerates the trace: the seed and the
        // generator's spec.
        let cfg: serde_json::Value =
            serde_json::from_slice(&std::fs::read(t.0.join(&out).join("config.json")).unwrap())
                .unwrap();
        assert_eq!(cfg["config"]["seed"], 0, "{prim}");
        let generated = &cfg["config"]["generated"];
        assert_eq!(generated["seed"], 0, "{prim}");
        assert_eq!(generated["batch_size"], 64, "{prim}");
        assert_eq!(generated["tables"][0]["rows"], 3000, "{prim}");
        // The summary names the primitive as `--primitive` does.
        let summary = std::fs::read_to_string(t.0.join(&out).join("summary.txt")).unwrap();
        let first = summary.lines().next().unwrap_or("");
        assert!(first.ends_with(&format!(", primitive {prim}")), "{first}");
        // phases.csv: a row per phase, every value under its own column.
        let csv = std::fs::read_to_string(t.0.join(&out).join("phases.csv")).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        assert_eq!(rows.len(), phases.len(), "{prim}: a row per phase");
        for (row, p) in rows.iter().zip(phases) {
            assert_eq!(row.len(), header.len(), "{prim}: {row:?}");
            let cell = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
            assert_eq!(cell("phase"), p["phase"].as_str().unwrap());
            for (column, value) in [
                ("time_ns", &p["report"]["time_ns"]),
                ("dram_read_bytes", &p["report"]["dram_read_bytes"]),
                ("dram_write_bytes", &p["report"]["dram_write_bytes"]),
                (
                    "effective_bandwidth_gbps",
                    &p["report"]["effective_bandwidth_gbps"],
                ),
                ("load_imbalance", &p["report"]["load_imbalance"]),
                ("energy_total_pj", &p["report"]["energy"]["total_pj"]),
                ("sim_requests_per_s", &p["report"]["sim_requests_per_s"]),
            ] {
                // (serde_json's reader may round the last digit differently.)
                let (got, want): (f64, f64) =
                    (cell(column).parse().unwrap(), value.as_f64().unwrap());
                assert!(
                    (got - want).abs() <= 1e-12 * want.abs(),
                    "{prim}: column {column}: {got} in the CSV, {want} in the JSON"
                );
            }
        }
    }
}

#[test]
fn tables_that_do_not_fit_are_a_clear_error() {
    let t = TempDir::new("fit");
    // 10 tables of 8M rows x 256 B = 20 GiB on one 4 GiB rank.
    let err = fails(
        &t.0,
        &words(
            "nmp run --profile rm1 --rows 8000000 --batch 8 --ranks 1 \
             --preset DDR4-3200-x16 -q",
        ),
    );
    assert!(
        err.contains("does not fit") && err.contains("rank 0"),
        "{err}"
    );
    let o = nmpsim(&t.0, &words("nmp run --placement diagonal -q"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("vector-sliced, row-interleaved or table-per-rank"),
        "{err}"
    );
}

#[test]
fn a_zero_link_or_queue_is_refused_before_anything_runs() {
    let t = TempDir::new("link");
    for (args, want) in [
        (["--link-gbps", "0"], "--link-gbps 0: expected a positive"),
        (
            ["--link-gbps=-25", "--batches=1"],
            "--link-gbps -25: expected a positive",
        ),
        (
            ["--link-gbps", "1e-320"],
            "--link-gbps 1e-320: expected a positive, finite bandwidth in GB/s, at least 1e-6",
        ),
        (["--queue", "0"], "--queue 0"),
        // A negative number reaches the option's own check (not clap's
        // "unexpected argument '-2'"), and a zero count is named.
        (
            ["--link-gbps", "-25"],
            "--link-gbps -25: expected a positive",
        ),
        (["--dim", "0"], "--dim 0: expected at least 1"),
        (["--batches", "0"], "--batches 0: expected at least 1"),
        // More batches than memory holds: refused from the first one.
        (
            ["--batches", "18446744073709551615"],
            "18446744073709551615 batches take about",
        ),
    ] {
        let mut a = vec!["nmp", "run", "--batch", "8", "-q"];
        a.extend(args);
        let o = nmpsim(&t.0, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!t.0.join("runs").exists(), "{args:?} left a run directory");
    }
    // A trace file's shape is its own: generator options are refused with it.
    for flag in ["--rows", "--batch", "--dist"] {
        let o = nmpsim(&t.0, &["nmp", "run", "--trace", "x.nmpt", flag, "5", "-q"]);
        assert_eq!(o.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("cannot be used with"), "{flag}: {err}");
    }
}

/// Writes a trace of `batches` to `path`.
fn write_trace(path: &std::path::Path, batches: &[nmpsim_traces::Batch]) {
    let header = nmpsim_traces::TraceHeader::for_batch(&batches[0], "");
    let mut w = nmpsim_traces::TraceWriter::create(path, header).unwrap();
    for b in batches {
        w.write_batch(b).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn a_trace_without_tables_is_a_clear_error() {
    let t = TempDir::new("zero");
    let empty = nmpsim_traces::Batch {
        tables: vec![],
        dense: None,
        num_dense: 0,
        labels: None,
    };
    write_trace(&t.0.join("zero.nmpt"), &[empty]);
    let err = fails(&t.0, &words("nmp run --trace zero.nmpt -q"));
    assert!(
        err.contains("trace zero.nmpt") && err.contains("no embedding tables"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!t.0.join("runs").exists(), "left a run directory");
}

#[test]
fn a_queue_beyond_the_input_buffer_is_refused() {
    let t = TempDir::new("queue");
    for q in ["65", "128", "1000"] {
        let err = fails(&t.0, &["nmp", "run", "--batch", "8", "--queue", q, "-q"]);
        assert!(
            err.contains(&format!("--queue {q}"))
                && err.contains("at most 64")
                && err.contains("input buffer"),
            "{q}: {err}"
        );
        assert!(
            !t.0.join("runs").exists(),
            "--queue {q} left a run directory"
        );
    }
    // 64, the input buffer's slices, runs.
    succeeds(
        &t.0,
        &words(
            "nmp run --rows 2000 --batch 8 --ranks 2 --engine native --queue 64 --json --out q64",
        ),
    );
    // The help says so.
    let o = nmpsim(&t.0, &words("nmp run --help"));
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("1 to 64"), "{help}");
}

#[test]
fn a_weighted_trace_pools_with_its_weights() {
    let t = TempDir::new("weighted");
    let bags = 8usize;
    let tables: Vec<nmpsim_traces::TableBatch> = (0..2u32)
        .map(|table| {
            let mut offsets = vec![0u32];
            let mut indices = Vec::new();
            for b in 0..bags as u32 {
                for i in 0..(b % 4 + 1) {
                    indices.push((b * 37 + i * 101 + table * 7) % 500);
                }
                offsets.push(indices.len() as u32);
            }
            // Table 0 is weighted, table 1 is not.
            let weights =
                (table == 0).then(|| (0..indices.len()).map(|i| 0.5 + i as f32 / 8.0).collect());
            nmpsim_traces::TableBatch {
                num_rows: 500,
                offsets,
                indices,
                weights,
            }
        })
        .collect();
    // What the gather-reduce instructions put on the link: the weights of
    // table 0 travel with its indices (docs/nmp-isa.md).
    let gather_in: u64 = tables
        .iter()
        .map(|tb| {
            let n = tb.indices.len() as u64;
            16 + (4 + 4 * (bags as u64 + 1))
                + (4 + 4 * n)
                + tb.weights.as_ref().map_or(0, |_| 4 + 4 * n)
        })
        .sum();
    let batch = nmpsim_traces::Batch {
        tables,
        dense: None,
        num_dense: 0,
        labels: None,
    };
    write_trace(&t.0.join("w.nmpt"), &[batch]);
    for prim in ["gather-reduce", "casted-gather-reduce", "scatter"] {
        let o = nmpsim(
            &t.0,
            &[
                "nmp",
                "run",
                "--trace",
                "w.nmpt",
                "--ranks",
                "3",
                "--dim",
                "20",
                "--engine",
                "native",
                "--placement",
                "all",
                "--primitive",
                prim,
                "--optimizer",
                "adagrad",
                "--check",
                "--json",
                "--out",
                prim,
            ],
        );
        assert!(
            o.status.success(),
            "{prim}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = stdout_json(&o);
        // The pool's weighted sums against the kernels' weighted reference.
        let checks = v["results"]["functional_checks"].as_array().unwrap();
        assert_eq!(checks.len(), 3, "{prim}");
        for c in checks {
            assert!(c["max_rel_err"].as_f64().unwrap() <= 1e-5, "{prim}: {c}");
        }
        if prim == "gather-reduce" {
            for p in v["results"]["phases"].as_array().unwrap() {
                assert_eq!(p["report"]["link_in_bytes"], gather_in, "{p}");
            }
        }
    }
}

/// What cannot run (a placement that does not fit, a --check the memory
/// cannot hold) is refused before the run directory exists.
#[test]
fn runs_that_cannot_fit_leave_no_run_directory() {
    let t = TempDir::new("nofit");
    let d = &t.0;
    for (args, want) in [
        (
            &words("--rows 100000000 --ranks 2 --placement table-per-rank")[..],
            "does not fit",
        ),
        (
            &words(
                "--rows 120000000 --dim 1024 --ranks 1024 --placement \
                 vector-sliced --check",
            )[..],
            "leave out --check",
        ),
    ] {
        let mut a = vec![
            "nmp",
            "run",
            "--profile",
            "rm1",
            "--batch",
            "4",
            "--engine",
            "native",
            "-q",
            "--out",
            "r",
        ];
        a.extend(args);
        let err = fails(d, &a);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!d.join("r").exists(), "{args:?}: a run directory was left");
    }
}

/// A row-interleaved pool adds per-rank partial sums: on bags of 200 lookups
/// of three rows, that reassociation differs from the kernels' order by more
/// than 1e-5 of the result, but within f32's bound on a 200-term sum, so the
/// check passes (it once failed this valid run).
#[test]
fn row_interleaved_partial_sums_of_hot_rows_pass_the_check() {
    let t = with_trace(
        "hotcheck",
        "--tables 2 --rows 3 --dist uniform --bag 200 --batch 1024 --seed 4 -o hot.nmpt -q",
    );
    let d = &t.0;
    let o = nmpsim(
        d,
        &words(
            "nmp run --trace hot.nmpt --ranks 8 --placement all --dim 32 \
             --engine native --check -q --out nh",
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(out.matches("functional check").count(), 3, "{out}");
}

#[test]
fn batches_beyond_a_trace_run_the_trace_with_a_note() {
    let t = TempDir::new("short");
    let spec = nmpsim_traces::profile(
        "uniform",
        &nmpsim_traces::ProfileOverrides {
            batch_size: Some(4),
            rows: Some(100),
            ..Default::default()
        },
    )
    .unwrap();
    let mut g = nmpsim_traces::Generator::new(spec).unwrap();
    let two = [g.next_batch(), g.next_batch()];
    write_trace(&t.0.join("two.nmpt"), &two);
    let o = succeeds(
        &t.0,
        &words(
            "nmp run --trace two.nmpt --batches 5 --ranks 2 --engine native \
             -q --out r",
        ),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("trace two.nmpt holds 2 batches; running those, not the 5 --batches asks for"),
        "{err}"
    );
    let c: serde_json::Value = read_json(&t.0.join("r/config.json"));
    assert_eq!(c["config"]["batches"], 2, "{c}");
    // As many as it holds: no note.
    let o = succeeds(
        &t.0,
        &words(
            "nmp run --trace two.nmpt --batches 2 --ranks 2 --engine native \
             -q --out r2",
        ),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("note:"), "{err}");
}

/// `--check`'s memory guard counts the pool as its layout sizes it: every
/// rank's gradient and coalesced buffers included, not only the tables.
#[test]
fn the_check_memory_guard_counts_the_pool_s_buffers() {
    let t = TempDir::new("memguard");
    // 100 rows of 1M values (0.4 GB of tables, twice), but 65,536 row-interleaved
    // ranks each reserving a gradient buffer of 1536 bags of 4 MiB (6 GiB).
    let err = fails(
        &t.0,
        &words(
            "nmp run --profile uniform --rows 100 --batch 1536 --ranks 65536 \
             --placement row-interleaved --dim 1048576 --engine native \
             --check -q --out m",
        ),
    );
    assert!(
        err.contains("--check: the pool's regions") && err.contains("a run may take"),
        "{err}"
    );
    assert!(!t.0.join("m").exists(), "left a run directory");
}

/// Layouts too large for memory (every slice of a 2^20-wide row on each of
/// 65,536 ranks) are refused up front, not aborted on allocation.
#[test]
fn layouts_beyond_memory_are_refused() {
    let t = TempDir::new("layoutmem");
    let o = nmpsim(
        &t.0,
        &words(
            "nmp run --rows 65536 --batch 1 --ranks 65536 --dim 1048576 \
             --placement row-interleaved --engine native -q --out o",
        ),
    );
    let err = exited(&o, 2);
    assert!(err.contains("the pool's layouts"), "{err}");
    assert!(!t.0.join("o").exists());
}

/// A trace holding fewer batches than --batches runs whole, with a note,
/// however large --batches is (its size is not estimated from the first
/// batch); a table of few rows on many row-interleaved ranks is laid out on
/// the ranks that hold its rows, and is not refused as if every rank did.
#[test]
fn short_traces_and_small_tables_on_many_ranks_run() {
    let t = with_trace(
        "short-many-ranks",
        "--tables 2 --rows 10 --batch 2 --bag 2 --batches 2 -o \
             t.nmpt -q",
    );
    let d = &t.0;
    let o = succeeds(
        d,
        &words(
            "nmp run --trace t.nmpt --batches 100000000000 --engine native \
             --ranks 4 -q --out a",
        ),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds 2 batches; running those"), "{err}");
    succeeds(
        d,
        &words(
            "nmp run --trace t.nmpt --ranks 65536 --dim 1048576 --placement \
             row-interleaved --engine native -q --out b",
        ),
    );
}

/// A batch whose DRAM requests would not fit in memory is refused by name,
/// counted before any is built, instead of aborting on a failed allocation:
/// row-interleaved load-gradient gives every rank a copy of the gradient
/// (here 8192 ranks x 512 bags x 4 slices a table, under a 2.5 GB
/// address-space limit).
#[test]
fn batches_whose_requests_do_not_fit_are_refused() {
    let t = TempDir::new("reqmem");
    let o = nmpsim_within(
        &t.0,
        2_500_000,
        &words(
            "nmp run --profile rm1 --rows 20000 --batch 512 --ranks 8192 \
             --placement row-interleaved --primitive casted-gather-reduce \
             --engine native -q --out o",
        ),
    );
    let err = exited(&o, 2);
    assert!(
        err.contains("row-interleaved: load-gradient of batch 0")
            && err.contains("over 8192 ranks) need")
            && err.contains("fewer ranks, a smaller batch or another placement"),
        "{err}"
    );
}

/// Ranks that issued no column command have no row-hit rate (null, as
/// `nmpsim dram` reports it), and a balanced batch's imbalance is at least
/// 1 and its busy fraction at most 1 however the mean rounds.
#[test]
fn idle_ranks_have_no_hit_rate_and_balance_stays_in_range() {
    let t = TempDir::new("idle");
    let o = succeeds(
        &t.0,
        &words(
            "nmp run --profile rm1 --rows 2000 --batch 8 --ranks 16 --engine \
             native --placement table-per-rank --primitive scatter -q --json",
        ),
    );
    let v: serde_json::Value = stdout_json(&o);
    let mut idle = 0;
    for p in v["results"]["phases"].as_array().unwrap() {
        let r = &p["report"];
        assert!(r["load_imbalance"].as_f64().unwrap() >= 1.0, "{r}");
        assert!(r["mean_busy_fraction"].as_f64().unwrap() <= 1.0, "{r}");
        for k in r["per_rank"].as_array().unwrap() {
            let commands = k["reads"].as_u64().unwrap() + k["writes"].as_u64().unwrap();
            if commands == 0 {
                idle += 1;
                assert!(k["row_hit_rate"].is_null(), "{k}");
            } else {
                assert!(k["row_hit_rate"].as_f64().is_some(), "{k}");
            }
        }
    }
    // RM1's 10 tables, one a rank: 6 of the 16 ranks do nothing.
    assert!(idle >= 6, "{idle}");
}

/// An NMP core sits on one DDR4 rank: a multi-rank preset is refused by
/// `nmp run` (naming the flag) and by the NMP modes of `train`, before
/// anything runs.
#[test]
fn multi_rank_presets_are_refused_for_the_pool() {
    let t = TempDir::new("multirank");
    let o = nmpsim(
        &t.0,
        &words(
            "nmp run --profile rm1 --rows 2000 --ranks 4 --batch 16 --preset \
             DDR4-3200-x8-4R --engine native -q --out o",
        ),
    );
    let err = exited(&o, 2);
    assert!(
        err.contains("--preset DDR4-3200-x8-4R: a channel of 4 ranks")
            && err.contains("e.g. DDR4-3200-x8"),
        "{err}"
    );
    assert!(!t.0.join("o").exists());
    let o = nmpsim(
        &t.0,
        &words(
            "train --model tiny --mode tcast-nmp --iters 1 --preset \
             DDR4-2400-x16-2R -q --out t",
        ),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("preset DDR4-2400-x16-2R has 2 ranks a channel"),
        "{err}"
    );
}

/// SIGINT or SIGTERM while reference engines run leaves none of their work
/// behind: `nmp run`'s per-rank temporary directories (in TMPDIR), and the
/// command traces Ramulator writes into a `dram` run's directory (kept only
/// with --keep-command-traces).
#[test]
fn an_interrupted_run_leaves_no_engine_files() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let wait_for = |what: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !what() && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
        what()
    };
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let t = TempDir::new(&format!("engine-signal-{sig}"));
        let tmp = t.0.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let count = |d: &std::path::Path| std::fs::read_dir(d).map_or(0, |r| r.count());
        let mut child = process(&t.0)
            .env("TMPDIR", &tmp)
            .args(words(
                "nmp run --profile rm1 --rows 100000 --engine dramsim3 --batches 50 -q --out n",
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            wait_for(&|| count(&tmp) > 0),
            "no engine directory in {}",
            tmp.display()
        );
        // SAFETY: a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, sig) };
        assert_eq!(child.wait().unwrap().code(), Some(code), "signal {sig}");
        assert_eq!(
            count(&tmp),
            0,
            "signal {sig} left {:?}",
            std::fs::read_dir(&tmp).unwrap().collect::<Vec<_>>()
        );

        let engine_dir = t.0.join("d/engine-ramulator");
        let trace = engine_dir.join("ramulator-chan-0-rank-0.cmdtrace");
        let mut child = process(&t.0)
            .env("TMPDIR", &tmp)
            .args(words(
                "dram --engine ramulator --requests 50000000 -q --out d",
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_for(&|| trace.exists()), "no {}", trace.display());
        unsafe { libc::kill(child.id() as i32, sig) };
        assert_eq!(child.wait().unwrap().code(), Some(code), "signal {sig}");
        assert!(
            engine_dir.is_dir() && !trace.exists(),
            "signal {sig} left {}",
            trace.display()
        );
    }
}

/// The scatter's optimizer options are noted as unused with another
/// primitive (they have defaults, so the command line tells), and not with
/// -q or the scatter.
#[test]
fn optimizer_options_without_the_scatter_are_noted() {
    let t = TempDir::new("optnote");
    let base = [
        "nmp", "run", "--rows", "1000", "--batch", "16", "--engine", "native",
    ];
    let run = |extra: &[&str], out: &str| {
        let mut a = base.to_vec();
        a.extend(extra);
        a.extend(["--out", out]);
        let o = nmpsim(&t.0, &a);
        assert!(
            o.status.success(),
            "{a:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&words("--lr 0.5 --optimizer=adagrad"), "a");
    assert!(
        err.contains(
            "note: --optimizer and --lr set the scatter's optimizer, which --primitive gather-reduce does not use"
        ),
        "{err}"
    );
    let err = run(&words("--lr 0.5 --primitive scatter"), "b");
    assert!(!err.contains("note:"), "{err}");
    let err = run(&words("--lr 0.5 -q"), "c");
    assert!(!err.contains("note:"), "{err}");
}
