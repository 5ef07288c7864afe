//! End-to-end tests of `nmpsim trace hot`.

use crate::common::*;

/// A profile of two large Zipf tables and a small one, as flags.
const SPEC: &str = "--rows 100000 --tables 3 --dist zipf:1.05 --bag 4 --batch 256 --seed 5";

fn hot_json(d: &std::path::Path, args: &str) -> serde_json::Value {
    results_of(d, "trace hot", args)
}

#[test]
fn a_trace_and_the_profile_it_was_generated_from_give_the_same_hot_rows() {
    let t = with_trace("hot-same", &format!("{SPEC} --batches 8 -q -o z.nmpt"));
    let d = &t.0;
    let budgets = "--budget 1MiB,4MiB,16MiB --dim 16 --min-samples 500 --sample-rate 0.5";
    let from_file = hot_json(d, &format!("z.nmpt {budgets}"));
    let generated = hot_json(d, &format!("{SPEC} --batches 8 {budgets}"));
    assert_eq!(from_file, generated);
    let r = &from_file;
    assert_eq!(r["samples_seen"], 8 * 256);
    let profiled = r["samples_profiled"].as_u64().unwrap();
    assert!(profiled > 500 && profiled < 8 * 256, "{profiled}");
    assert_eq!(r["row_bytes"], 64);
    let b = r["budgets"].as_array().unwrap();
    assert_eq!(b.len(), 3);
    let mut last_threshold = u64::MAX;
    for (x, want) in b.iter().zip([1u64 << 20, 4 << 20, 16 << 20]) {
        assert_eq!(x["budget_bytes"], want);
        assert!(x["hot_bytes"].as_u64().unwrap() <= want);
        let th = x["threshold"].as_u64().unwrap();
        assert!(th >= 1 && th <= last_threshold);
        last_threshold = th;
        for k in ["lookup_share", "sample_share"] {
            let s = x[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&s), "{k} {s}");
        }
        // A sample is hot only if all its lookups are: never more samples than lookups.
        assert!(x["sample_share"].as_f64() <= x["lookup_share"].as_f64());
        let (lo, hi) = (
            x["rand_em"]["low"].as_f64().unwrap(),
            x["rand_em"]["high"].as_f64().unwrap(),
        );
        assert!(lo <= hi);
    }
}

#[test]
fn the_run_directory_holds_the_tables_the_budgets_the_curve_and_the_chart() {
    let t = TempDir::new("hot-dir");
    let d = &t.0;
    let text = ok(
        d,
        &words(&format!(
            "trace hot {SPEC} --batches 4 --dim 16 --budget 2MiB -q --out hot"
        )),
    );
    assert!(text.contains("Rand-Em Box estimate (99.9%)"), "{text}");
    assert!(text.contains("run directory: hot"), "{text}");
    for f in [
        "config.json",
        "results.json",
        "budgets.csv",
        "curve.csv",
        "tables.csv",
        "hot-share.svg",
        "hot-share.png",
        "summary.txt",
    ] {
        assert!(d.join("hot").join(f).is_file(), "{f}");
    }
    let budgets = read(&d.join("hot/budgets.csv"));
    assert!(
        budgets.starts_with("budget_bytes,threshold,hot_rows,"),
        "{budgets}"
    );
    assert_eq!(budgets.lines().count(), 2);
    let curve = read(&d.join("hot/curve.csv"));
    assert!(curve.lines().count() >= 3, "{curve}");
    let tables = read(&d.join("hot/tables.csv"));
    assert_eq!(tables.lines().count(), 4);
    let config = read_json(&d.join("hot/config.json"));
    assert_eq!(config["config"]["sampling"]["rate"], 0.05);
    assert_eq!(config["config"]["sampling"]["min_samples"], 500_000);
}

#[test]
fn criteo_files_are_profiled_with_their_ids_reduced() {
    let t = TempDir::new("hot-criteo");
    let d = &t.0;
    let line = |i: u32| {
        let mut f = vec![(i % 2).to_string()];
        f.extend((0..13).map(|_| "1".to_string()));
        f.extend((0..26).map(|c| format!("{:x}", if c == 0 { i % 7 } else { 3 })));
        f.join("\t") + "\n"
    };
    let tsv: String = (0..300).map(line).collect();
    write(d, "day.tsv", tsv);
    let r = hot_json(
        d,
        "--criteo day.tsv --max-ind-range 100000 --dim 16 --budget 2MiB",
    );
    assert_eq!(r["samples_seen"], 300);
    assert_eq!(r["tables"].as_array().unwrap().len(), 26);
    assert_eq!(r["tables"][0]["rows"], 100_000);
    assert_eq!(r["tables"][0]["touched_rows"], 7);
    assert_eq!(r["tables"][1]["touched_rows"], 1);
    // Every touched row fits in 2 MiB: every lookup and sample is hot.
    assert_eq!(r["budgets"][0]["threshold"], 1);
    assert_eq!(r["budgets"][0]["lookup_share"], 1.0);
    assert_eq!(r["budgets"][0]["sample_share"], 1.0);
}

#[test]
fn bad_budgets_rates_and_inputs_are_refused_by_name() {
    let t = with_trace("hot-bad", &format!("{SPEC} --batches 2 -q -o z.nmpt"));
    let d = &t.0;
    let e = fails(d, &words("trace hot z.nmpt --budget 0"));
    assert!(e.contains("--budget 0") && e.contains("0 bytes"), "{e}");
    let e = fails(d, &words("trace hot z.nmpt --budget 1TB"));
    assert!(e.contains("holds every table whole"), "{e}");
    let e = fails(d, &words("trace hot z.nmpt --budget 12parsecs"));
    assert!(e.contains("unknown unit `parsecs`"), "{e}");
    for rate in ["0", "1.5", "-1"] {
        let e = fails(d, &["trace", "hot", "z.nmpt", "--sample-rate", rate]);
        assert!(
            e.contains("--sample-rate") && e.contains("(0, 1]"),
            "{rate}: {e}"
        );
    }
    write(d, "empty.tsv", "");
    let e = fails(d, &words("trace hot --criteo empty.tsv --max-ind-range 10"));
    assert!(e.contains("no samples"), "{e}");
    let e = fails(d, &words("trace hot -"));
    assert!(e.contains("reads its input twice when"), "{e}");
    let e = fails(d, &words("trace hot missing.nmpt"));
    assert!(e.contains("missing.nmpt"), "{e}");
}
