//! The summaries whose every number is counted, simulated or modelled (none
//! measured), so that the whole text is the contract: a change to a
//! number, a column or the layout shows here as a diff against the file
//! under `tests/cli/snapshots/` (insta; `cargo insta review`, or
//! `INSTA_UPDATE=always`, accepts a change on purpose).

use crate::common::*;

fn snapshot(args: &str) -> String {
    let t = TempDir::new("snapshot");
    ok(&t.0, &words(args))
}

#[test]
fn trace_stats_summary() {
    insta::assert_snapshot!(snapshot(
        "trace stats --profile rm1 --rows 10000 --batch 64 --batches 2 -q"
    ));
}

#[test]
fn kernels_traffic_summary() {
    insta::assert_snapshot!(snapshot("kernels traffic --rows 10000 --batch 64"));
}

#[test]
fn scars_plan_summary() {
    insta::assert_snapshot!(snapshot(
        "scars plan --dist zipf:1.05 --rows 100000 --batch 512,2048 --dim 64 --cache 1MiB"
    ));
}

#[test]
fn nmp_run_summary() {
    insta::assert_snapshot!(snapshot(
        "nmp run --rows 2000 --batch 8 --ranks 2 --engine native --placement all -q --out run"
    ));
}

#[test]
fn dram_presets_listing() {
    insta::assert_snapshot!(snapshot("dram presets"));
}
