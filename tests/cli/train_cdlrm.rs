//! `nmpsim train --mode cdlrm`: cDLRM's caches in a training run.

use crate::common::*;

#[test]
fn cdlrm_trains_baseline_cpus_numbers_and_reports_its_caches() {
    let t = TempDir::new("cdlrm");
    let o = succeeds(
        &t.0,
        &words(
            "train --model tiny --mode baseline-cpu,lookahead --iters 20 --batch 16 \
             --cache-sets 5 --ways 2 --lookahead 3 --print-freq 10 --ranks 4 --out run",
        ),
    );
    let s = text(&o);
    // Coherent caching: the same test loss and AUC as baseline-cpu.
    let testing = |mode: &str| {
        s.lines()
            .find(|l| l.starts_with(&format!("[{mode}] Testing at - 20/20")))
            .unwrap_or_else(|| panic!("no test line of {mode} in\n{s}"))
            .split_once(", loss ")
            .unwrap()
            .1
            .to_string()
    };
    assert_eq!(testing("baseline-cpu"), testing("cdlrm"), "{s}");
    // With its tables in the NMP pool, the same numbers again.
    assert_eq!(testing("cdlrm"), testing("cdlrm-nmp"), "{s}");
    let log = read(&t.0.join("run/train.log"));
    for note in [
        "cdlrm: cache: --cache-sets 5 --ways 2 --lookahead 3 (coherent)",
        "cdlrm: windows: 7",
        "cdlrm: stale installs: 0",
        "cdlrm: amortised caching overhead per batch, ms (overhead / n): ",
        "cdlrm: prefetcher kept ahead: ",
        "cdlrm-nmp: prefetch per window, ms (measured + simulated, beside training): ",
    ] {
        assert!(log.contains(note), "{note} not in\n{log}");
    }
    let r = read_json(&t.0.join("run/results.json"));
    let modes = r["results"]["modes"].as_array().unwrap();
    assert_eq!(modes[1]["mode"], "cdlrm");
    // The figures as numbers, for sweeps (results.csv flattens them).
    let f = &modes[1]["figures"];
    let hit = f["hit_rate"].as_f64().unwrap();
    assert!(hit > 0.0 && hit <= 1.0, "{f}");
    assert_eq!(f["stale_installs"], 0.0);
    assert_eq!(f["windows"], 7.0);
    // The 16-row table over 5 sets of 2 ways: 10 slots of 4 values.
    assert_eq!(f["cache_bytes_table_2"], 10.0 * 4.0 * 4.0);
    assert!(modes[0].get("figures").is_none(), "baseline-cpu has none");
    // Every figure says where it came from: the caching step's host part
    // measured, the prefetch measured in the background (lane 2), the first
    // window's waited for on the main lane of iteration 0.
    let tl = read(&t.0.join("run/timeline.csv"));
    assert!(
        tl.lines().any(|l| l.starts_with("cdlrm,")
            && l.contains(",caching,\"cpu (occupancy tables")
            && l.contains(",measured,")),
        "{tl}"
    );
    assert!(
        tl.lines()
            .any(|l| l.starts_with("cdlrm,") && l.contains(",2,prefetch,")),
        "{tl}"
    );
    assert!(
        tl.lines().any(|l| l.starts_with("cdlrm,0,")
            && l.contains(",0,prefetch,")
            && l.contains("waited for")),
        "{tl}"
    );
    // cdlrm-nmp's gathers are the pool's, simulated.
    assert!(
        tl.lines().any(|l| l.starts_with("cdlrm-nmp,")
            && l.contains(",prefetch,\"nmp (gather:")
            && l.contains(",nmp,simulated,")),
        "{tl}"
    );
}

#[test]
fn cdlrm_refuses_bad_caches_before_training() {
    let t = TempDir::new("cdlrm-bad");
    for (args, want) in [
        ("--ways 0", "--ways 0: a cache set needs at least 1 way"),
        (
            "--lookahead 0",
            "--lookahead 0: a window needs at least 1 batch",
        ),
        (
            "--cache-sets 0",
            "--cache-sets 0: a cache needs at least 1 set",
        ),
        (
            "--model rm1 --rows 3000000 --cache-sets 2000000 --ways 64",
            "more than the v100 GPU's 16 GiB: lower --cache-sets or --ways",
        ),
        (
            "--consistency eventual",
            "unknown consistency 'eventual'; expected coherent or async",
        ),
    ] {
        let a = format!("train --mode cdlrm --iters 2 --batch 8 --out bad {args}");
        let o = nmpsim(&t.0, &words(&a));
        let e = exited(&o, 2);
        assert!(e.contains(want), "{args}: {e}");
        assert!(!t.0.join("bad").exists(), "{args} left a run directory");
    }
    // Its flags on a run without it are named as unused.
    let o = succeeds(
        &t.0,
        &words("train --model tiny --mode baseline-cpu --iters 2 --batch 8 --ways 4 --out ok"),
    );
    assert!(
        text(&o).contains(
            "note: --ways sets up cdlrm's caches, which --mode baseline-cpu does not run"
        ),
        "{}",
        text(&o)
    );
}
