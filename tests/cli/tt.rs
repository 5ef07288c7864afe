//! `nmpsim tt`: the TT shapes of a model's or a list's tables.

use crate::common::*;

#[test]
fn tt_shapes_the_large_tables_and_keeps_the_small_ones_dense() {
    let t = TempDir::new("tt");
    let o = succeeds(
        &t.0,
        &words("tt --rows 10000000,500000 --dim 16 --tt-rank 128 --json --out run"),
    );
    let v = stdout_json(&o);
    let r = &v["results"];
    let big = &r["tables"][0];
    assert_eq!(big["kind"], "tt");
    assert_eq!(
        big["shape"]["row_factors"],
        serde_json::json!([200, 200, 250])
    );
    assert_eq!(big["shape"]["dim_factors"], serde_json::json!([2, 2, 4]));
    // 200 x 256 + 200 x 32768 + 250 x 512 values.
    assert_eq!(big["params"], 200 * 256 + 200 * 32768 + 250 * 512);
    assert_eq!(
        big["flops_per_lookup"],
        2 * 2 * 128 * 2 * 128 + 2 * 4 * 128 * 4
    );
    assert_eq!(r["tables"][1]["kind"], "dense");
    let ratio = r["compression"].as_f64().unwrap();
    let want = (10_500_000.0 * 64.0) / (4.0 * (6_732_800.0 + 500_000.0 * 16.0));
    assert!((ratio - want).abs() < 1e-9, "{ratio} against {want}");
    assert!(t.0.join("run/summary.txt").is_file());
    // The text names every table and the footprint.
    let o = succeeds(&t.0, &words("tt --model criteo-kaggle --rows-scale 1"));
    let s = text(&o);
    assert!(
        s.contains("26 tables, TT rank 128, tables over 1000000 rows as TT (5 of them)"),
        "{s}"
    );
    assert!(s.contains("200x220x250"), "{s}");
}

#[test]
fn tt_refuses_what_it_cannot_shape() {
    let t = TempDir::new("tt-bad");
    let e = fails(&t.0, &words("tt"));
    assert!(e.contains("--model NAME, --profile NAME or --rows"), "{e}");
    let e = fails(&t.0, &words("tt --rows 2000000 --dim 6"));
    assert!(
        e.contains("table 0 (2000000 rows)") && e.contains("6 cannot split"),
        "{e}"
    );
    let e = fails(&t.0, &words("tt --rows 2000000 --tt-rank 0"));
    assert!(e.contains("--tt-rank"), "{e}");
}

#[test]
fn tt_bench_times_the_forward_with_and_without_reuse_and_labels_each_time() {
    let t = TempDir::new("tt-bench");
    let o = succeeds(
        &t.0,
        &words(
            "tt --rows 100000 --dim 16 --tt-rank 8 --tt-threshold 1000 --bench --batch 256 \
             --batches 2 --reps 1 --reorder --reorder-batches 4 --json",
        ),
    );
    let v = stdout_json(&o);
    let b = &v["results"]["tables"][0]["bench"];
    for k in [
        "cpu_reuse_ms",
        "cpu_plain_ms",
        "cpu_dense_ms",
        "gpu_reuse_ms",
        "gpu_plain_ms",
    ] {
        assert!(b[k].as_f64().unwrap() > 0.0, "{k}: {b}");
    }
    assert_eq!(b["reordered"], true);
    assert!(b["lookups_per_prefix"].as_f64().unwrap() >= 1.0);
    let o = succeeds(
        &t.0,
        &words(
            "tt --rows 100000 --dim 16 --tt-rank 8 --tt-threshold 1000 --bench --batches 1 --reps 1",
        ),
    );
    let s = text(&o);
    assert!(s.contains("ms (meas)") && s.contains("ms (model)"), "{s}");
    // --reorder without --bench is refused, not ignored.
    let e = fails(&t.0, &words("tt --rows 100000 --reorder"));
    assert!(e.contains("--bench"), "{e}");
}

/// `--device cuda` times the forward on the GPU too, checked bit for bit
/// against the CPU's; without a usable GPU it fails at once, saying why,
/// before the CPU bench runs.
#[test]
fn tt_bench_on_cuda_measures_the_gpu_or_says_why_it_cannot() {
    let t = TempDir::new("tt-cuda");
    let args = words(
        "tt --rows 100000 --dim 16 --tt-rank 8 --tt-threshold 1000 --bench --batch 256 \
         --batches 2 --reps 1 --device cuda --json",
    );
    let o = nmpsim(&t.0, &args);
    if o.status.success() {
        let v = stdout_json(&o);
        let c = &v["results"]["tables"][0]["bench"]["cuda"];
        assert_eq!(c["equals_cpu"], true, "{c}");
        assert!(c["reuse_ms"].as_f64().unwrap() > 0.0, "{c}");
    } else {
        let e = exited(&o, 2);
        assert!(e.contains("--device cuda: no usable GPU"), "{e}");
        assert!(o.stdout.is_empty(), "nothing timed: {}", text(&o));
    }
    let e = fails(&t.0, &words("tt --rows 100000 --device cuda"));
    assert!(e.contains("--bench"), "{e}");
}

#[test]
fn train_elrec_runs_eltt_and_eltt_nmp_on_the_same_numbers_and_says_what_bound_the_pool() {
    let t = TempDir::new("train-elrec");
    let o = succeeds(
        &t.0,
        &words(
            "train --model tiny --dim 8 --mode elrec --iters 6 --batch 16 --tt-rank 3 \
             --tt-threshold 20 --ranks 4 --alu-lanes 1 --sim-batches 2 --print-freq 6 --out run",
        ),
    );
    let s = text(&o);
    let testing = |mode: &str| {
        s.lines()
            .find(|l| l.starts_with(&format!("[{mode}] Testing at - 6/6")))
            .unwrap_or_else(|| panic!("no test line of {mode} in\n{s}"))
            .split_once(", loss ")
            .unwrap()
            .1
            .to_string()
    };
    assert_eq!(testing("eltt"), testing("eltt-nmp"), "{s}");
    let log = read(&t.0.join("run/train.log"));
    assert!(
        log.contains("eltt-nmp: tt lookups on the pool: every rank a copy of the cores; 6 of 6 forwards compute-bound (the slowest rank's vector ALU, 1 lanes at 1.6 GHz"),
        "{log}"
    );
    let tl = read(&t.0.join("run/timeline.csv"));
    for (p, src) in [
        ("tt-gather-reduce", ",simulated,"),
        ("tt-gather-reduce", ",simulated-proxy,"),
        ("tt-write", ",simulated,"),
    ] {
        assert!(
            tl.lines().any(|l| l.starts_with("eltt-nmp,")
                && l.contains(&format!(",{p},"))
                && l.contains(src)),
            "no {src} {p} in\n{tl}"
        );
    }
    assert!(
        tl.lines().any(|l| l.starts_with("eltt-nmp,")
            && l.contains("compute-bound: the vector ALU is the limit")),
        "{tl}"
    );
    // A bad ALU is refused by its flag.
    let e = fails(
        &t.0,
        &words("train --model tiny --mode eltt-nmp --alu-lanes 0"),
    );
    assert!(e.contains("--alu-lanes"), "{e}");
}
