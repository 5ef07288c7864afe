//! End-to-end tests of `nmpsim scars plan`.

use crate::common::*;

fn plan(d: &std::path::Path, args: &str) -> serde_json::Value {
    results_of(d, "scars plan", args)
}

#[test]
fn coalescing_and_a_cache_lower_the_modelled_traffic_and_the_search_finds_a_size() {
    let t = TempDir::new("scars-plan");
    let d = &t.0;
    let r = plan(
        d,
        "--dist zipf:1 --rows 20000 --tables 2 --lookups 3 --dim 16 --samples 100000 \
         --batch 512,4096 --cache 64KiB,512KiB --device-memory 4MiB --per-sample 4KiB",
    );
    assert_eq!(r["tables"], 2);
    assert_eq!(r["rows"], 40_000);
    assert_eq!(r["lookups_per_sample"], 6.0);
    let uncoalesced = 100_000.0 * 6.0 * 16.0;
    for b in r["batches"].as_array().unwrap() {
        assert_eq!(b["uncoalesced_params"], uncoalesced);
        let coalesced = b["coalesced"]["total_params"].as_f64().unwrap();
        // Indices (one a lookup) and rows: fewer rows than lookups.
        assert!(coalesced < uncoalesced + 600_000.0);
        let mut last = coalesced;
        for c in b["cached"].as_array().unwrap() {
            let total = c[1]["total_params"].as_f64().unwrap();
            assert!(total < last, "{c}");
            last = total;
        }
    }
    // A larger batch coalesces more.
    let per_batch = |i: usize| r["batches"][i]["coalesced"]["row_params"].as_f64().unwrap();
    assert!(per_batch(1) < per_batch(0));
    let best = &r["best"];
    assert!(best["best"]["total_params"].as_f64() <= best["no_cache"]["total_params"].as_f64());
    assert_eq!(best["memory"]["params"], (4 << 20) as f64 / 4.0);
    assert!(best["best"]["batch"].as_f64().unwrap() >= 1.0);

    // The same plan, written as a run directory.
    ok(
        d,
        &words("scars plan --dist exponential:20 --rows 5000 --out plan"),
    );
    let res = read_json(&d.join("plan/results.json"));
    assert_eq!(res["results"]["rows"], 5000);
    assert!(d.join("plan/summary.txt").is_file());
}

#[test]
fn a_traces_frequencies_and_a_profiles_distributions_are_modelled() {
    let t = with_trace(
        "scars-trace",
        "--rows 5000 --tables 2 --dist zipf:1.1 --bag 2 --batch 64 --batches 3 -q -o z.nmpt",
    );
    let d = &t.0;
    let r = plan(d, "--trace z.nmpt --dim 8 --batch 64");
    // The epoch is the trace's 192 samples, 2 lookups of each table per sample.
    assert_eq!(r["samples"], 192.0);
    assert_eq!(r["lookups_per_sample"], 4.0);
    assert!(r["rows"].as_u64().unwrap() <= 10_000);
    let r = plan(d, "--profile taobao --dim 16 --batch 1024");
    assert_eq!(r["tables"], 1);
    assert_eq!(r["lookups_per_sample"], 10.0);
}

#[test]
fn bad_plans_are_refused_by_name() {
    let t = TempDir::new("scars-bad");
    let d = &t.0;
    let e = fails(d, &words("scars plan"));
    assert!(e.contains("give --dist"), "{e}");
    let e = fails(d, &words("scars plan --dist poisson:3"));
    assert!(e.contains("unknown distribution `poisson:3`"), "{e}");
    let e = fails(d, &words("scars plan --dist zipf:1 --batch 0"));
    assert!(e.contains("--batch 0"), "{e}");
    let e = fails(
        d,
        &words("scars plan --dist zipf:1 --device-memory 1KiB --per-sample 4KiB"),
    );
    assert!(e.contains("no batch fits"), "{e}");
    let e = fails(d, &words("scars plan --dist zipf:1 --device-memory 1GiB"));
    assert!(e.contains("--per-sample"), "{e}");
}
