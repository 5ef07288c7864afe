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
fn summaries_whose_every_number_is_counted_simulated_or_modelled() {
    for (name, args) in [
        (
            "trace_stats_summary",
            "trace stats --profile rm1 --rows 10000 --batch 64 --batches 2 -q",
        ),
        (
            "kernels_traffic_summary",
            "kernels traffic --rows 10000 --batch 64",
        ),
        (
            "scars_plan_summary",
            "scars plan --dist zipf:1.05 --rows 100000 --batch 512,2048 --dim 64 --cache 1MiB",
        ),
        (
            "nmp_run_summary",
            "nmp run --rows 2000 --batch 8 --ranks 2 --engine native --placement all -q --out run",
        ),
        ("dram_presets_listing", "dram presets"),
    ] {
        insta::assert_snapshot!(name, snapshot(args), args);
    }
}
