//! The thresholds of `nmpsim reproduce`'s checks, fixed before any result.
//!
//! Every check of a reproduction item takes its threshold from this one table:
//! the paper's number, a tolerance chosen by one rule for all checks (below),
//! and whether the check tests a finding of nmpsim's or an identity that the
//! formulas fix whatever the run. `docs/reproducing.md` prints the same table
//! ([`markdown_table`]; a test keeps the two equal), and a test pins every
//! bound, so changing a threshold is a visible change to a test.
//!
//! The rule, fixed with the table and applied to every check alike:
//!
//! - a value or range the paper reports (`about 3x`, `1.2-1.6x`, `92%`) holds
//!   within 10% of it, relatively: `[0.9 lo, 1.1 hi]`;
//! - a bound the paper states (`over 600 GB/s`, `under 1%`) holds as stated;
//! - an order or a direction (`lowest`, `falls with batch`) has no tolerance;
//! - two counts of the same bytes (the simulated DRAM's against the analytic
//!   accounting) hold within 2%;
//! - a share cannot pass 100%, so an upper bound above it is 100%.

use std::fmt::Write as _;

/// What a check's outcome says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// Tests something about the system that could come out either way.
    Finding,
    /// Its outcome is fixed by construction (by the byte formulas or the
    /// trace's shape), whatever the implementation: reported, not counted
    /// as a finding.
    Identity,
}

impl CheckKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::Finding => "finding",
            CheckKind::Identity => "identity",
        }
    }
}

/// The numeric test a threshold applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// Every value in `[lo, hi]`.
    Within { lo: f64, hi: f64 },
    /// Every value above the bound.
    Above(f64),
    /// Every value below the bound.
    Below(f64),
    /// An order or direction; the analysis decides, with no number.
    Direction,
}

impl Rule {
    /// Whether `x` passes (a `Direction` passes nothing by number).
    pub fn admits(self, x: f64) -> bool {
        match self {
            Rule::Within { lo, hi } => x >= lo && x <= hi,
            Rule::Above(b) => x > b,
            Rule::Below(b) => x < b,
            Rule::Direction => false,
        }
    }

    /// Whether every value of a non-empty list passes.
    pub fn admits_all(self, xs: &[f64]) -> bool {
        !xs.is_empty() && xs.iter().all(|&x| self.admits(x))
    }

    /// The rule in words, with `unit` after each number (`x`, `%`, ` GB/s`).
    pub fn text(self, unit: &str) -> String {
        let n = |x: f64| {
            let s = format!("{x:.3}");
            let s = s.trim_end_matches('0').trim_end_matches('.').to_string();
            format!("{s}{unit}")
        };
        match self {
            Rule::Within { lo, hi } if lo == hi => format!("exactly {}", n(lo)),
            Rule::Within { lo, hi } => format!("{} to {}", n(lo), n(hi)),
            Rule::Above(b) => format!("over {}", n(b)),
            Rule::Below(b) => format!("under {}", n(b)),
            Rule::Direction => "as stated".into(),
        }
    }
}

/// One check's threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// `item.name`.
    pub id: &'static str,
    pub claim: &'static str,
    /// The paper's value, as it states it.
    pub paper: &'static str,
    /// The tolerance, in words (from the module's rule).
    pub tolerance: &'static str,
    pub rule: Rule,
    /// The unit the rule's numbers are in.
    pub unit: &'static str,
    pub kind: CheckKind,
}

/// The relative tolerance on a value or range the paper reports.
pub const REL: f64 = 0.10;

const fn within(lo: f64, hi: f64) -> Rule {
    Rule::Within {
        lo: lo * (1.0 - REL),
        hi: hi * (1.0 + REL),
    }
}

/// A share in percent: the upper bound at most 100.
const fn share(lo: f64, hi: f64) -> Rule {
    let h = hi * (1.0 + REL);
    Rule::Within {
        lo: lo * (1.0 - REL),
        hi: if h > 100.0 { 100.0 } else { h },
    }
}

const PM10: &str = "±10% relative";
const AS_STATED: &str = "none: a bound, as stated";
const NONE_DIR: &str = "none: a direction";

/// Every check's threshold, by item in the paper's order.
pub static THRESHOLDS: &[Threshold] = &[
    Threshold {
        id: "fig5b.expand",
        claim: "expanded gradients are 10x the backpropagated gradients",
        paper: "exactly 10x",
        tolerance: "none: exact",
        rule: Rule::Within { lo: 10.0, hi: 10.0 },
        unit: "x",
        kind: CheckKind::Identity,
    },
    Threshold {
        id: "fig5b.shrink",
        claim: "coalescing shrinks the gradients more as the batch grows",
        paper: "coalesced share falls with batch",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig6.ec-gr",
        claim: "expand-coalesce moves about 3x the bytes of gather-reduce",
        paper: "about 3x",
        tolerance: PM10,
        rule: within(3.0, 3.0),
        unit: "x",
        kind: CheckKind::Identity,
    },
    Threshold {
        id: "fig6.ec-cgr",
        claim: "the casted gather-reduce halves expand-coalesce's traffic",
        paper: "2x",
        tolerance: PM10,
        rule: within(2.0, 2.0),
        unit: "x",
        kind: CheckKind::Identity,
    },
    Threshold {
        id: "fig6.dram",
        claim: "the simulated DRAM moves each primitive's analytic row bytes (every pool run of Table I's sweep)",
        paper: "the bytes the paper derives analytically",
        tolerance: "±2%: two counts of the same bytes",
        rule: Rule::Within { lo: 0.98, hi: 1.02 },
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "table1.peak",
        claim: "no configuration exceeds the pool's peak",
        paper: "peak 819.2 GB/s",
        tolerance: AS_STATED,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "table1.600",
        claim: "the NMP pool sustains over 600 GB/s",
        paper: "over 600 GB/s",
        tolerance: AS_STATED,
        rule: Rule::Above(600.0),
        unit: " GB/s",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "pool-hbm.ddr4",
        claim: "the 32-rank DDR4-3200 pool sustains over 600 GB/s of gather-reduce (Table I), beside the HBM2 pools",
        paper: "over 600 GB/s",
        tolerance: AS_STATED,
        rule: Rule::Above(600.0),
        unit: " GB/s",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "pool-hbm.per-gb",
        claim: "an HBM2 pool gives more effective gather-reduce bandwidth per GB of capacity than the DDR4 pool (stacked DRAM is bandwidth-optimised and capacity-limited, Sec. II)",
        paper: "HBM: bandwidth-optimised, several tens of GB a device",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "pool-hbm.capacity",
        claim: "an HBM2 pool of the DDR4 pool's 256 GiB takes 8x its NMP units (256 channels, 32 stacks of 8 GB)",
        paper: "stacked DRAMs are capacity limited",
        tolerance: AS_STATED,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Identity,
    },
    Threshold {
        id: "fig4.backward",
        claim: "the embedding backward takes 62-92% of a baseline iteration (every model)",
        paper: "62-92%",
        tolerance: PM10,
        rule: share(62.0, 92.0),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig4.mlp-light",
        claim: "the MLPs take under 1% of a baseline iteration on RM1/2 (each)",
        paper: "under 1%",
        tolerance: AS_STATED,
        rule: Rule::Below(1.0),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig4.mlp-heavy",
        claim: "the MLPs take 24% of a baseline iteration on RM3/4 (their mean)",
        paper: "24%",
        tolerance: PM10,
        rule: share(24.0, 24.0),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig12.cpu",
        claim: "on the CPU, casting + casted gather-reduce is 1.1-9.5x faster than expand-coalesce (every model)",
        paper: "1.1-9.5x",
        tolerance: PM10,
        rule: within(1.1, 9.5),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig12.nmp",
        claim: "on NMP the casted gather-reduce is another 1.3-6.1x faster than on the CPU (every model)",
        paper: "1.3-6.1x",
        tolerance: PM10,
        rule: within(1.3, 6.1),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig13.tcast-cpu",
        claim: "Tensor Casting on the CPU speeds up training 1.2-1.6x (every model)",
        paper: "1.2-1.6x",
        tolerance: PM10,
        rule: within(1.2, 1.6),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig13.baseline-nmp",
        claim: "baseline-nmp runs at about 0.87 of tcast-cpu's speed on average (15% slower)",
        paper: "tcast-cpu 15% faster on average: 1/1.15 = 0.87",
        tolerance: PM10,
        rule: within(0.87, 0.87),
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig13.tcast-nmp",
        claim: "tcast-nmp speeds up training 2.0-15x (every model)",
        paper: "2.0-15x",
        tolerance: PM10,
        rule: within(2.0, 15.0),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig13.tcast-nmp-mean",
        claim: "tcast-nmp's mean speedup is 6.9x",
        paper: "mean 6.9x",
        tolerance: PM10,
        rule: within(6.9, 6.9),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig13.fastest",
        claim: "tcast-nmp is the fastest mode (every model)",
        paper: "fastest",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig14.lowest",
        claim: "tcast-nmp uses the least energy (every model)",
        paper: "lowest of the four",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig14.tcast-cpu",
        claim: "tcast-cpu uses less energy than baseline-nmp (every model)",
        paper: "below",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig15.tcast-light",
        claim: "with Tensor Casting the pool is busy 92% of training time on RM1/2 (their mean)",
        paper: "92%",
        tolerance: PM10,
        rule: share(92.0, 92.0),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig15.tcast-heavy",
        claim: "with Tensor Casting the pool is busy 44% of training time on RM3/4 (their mean)",
        paper: "44%",
        tolerance: PM10,
        rule: share(44.0, 44.0),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig15.baseline-light",
        claim: "without Tensor Casting the pool is busy 6.5% of training time on RM1/2 (their mean)",
        paper: "6.5%",
        tolerance: PM10,
        rule: share(6.5, 6.5),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig15.baseline-heavy",
        claim: "without Tensor Casting the pool is busy 8.5% of training time on RM3/4 (their mean)",
        paper: "8.5%",
        tolerance: PM10,
        rule: share(8.5, 8.5),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig15.busier",
        claim: "Tensor Casting keeps the pool busier than baseline-nmp (every model)",
        paper: "92%/44% against 6.5%/8.5%",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig16.growth",
        claim: "the Tensor Casting speedups grow with the batch (tcast-cpu and tcast-nmp, largest batch over smallest, every model)",
        paper: "tcast-cpu 1.2-1.6x at the default batch, 1.4-2.8x at larger ones; up to 15x",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig16.tcast-cpu-default",
        claim: "tcast-cpu speeds up training 1.2-1.6x at the default batch (every model)",
        paper: "1.2-1.6x",
        tolerance: PM10,
        rule: within(1.2, 1.6),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig16.tcast-cpu-larger",
        claim: "tcast-cpu speeds up training 1.4-2.8x at batches larger than the default (every model and batch)",
        paper: "1.4-2.8x",
        tolerance: PM10,
        rule: within(1.4, 2.8),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig16.tcast-nmp-max",
        claim: "tcast-nmp's largest speedup over the batches is about 15x (the largest of every model)",
        paper: "up to 15x",
        tolerance: PM10,
        rule: within(15.0, 15.0),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig16.robust",
        claim: "the tcast-nmp speedup is robust across batch sizes (each model's smallest more than half its largest)",
        paper: "robust across a wide range of batch sizes",
        tolerance: "none: the ratio as stated",
        rule: Rule::Above(0.5),
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fig17.every-dim",
        claim: "tcast-nmp speeds up training at every embedding dimension",
        paper: "speedups hold for dims below and above 64",
        tolerance: AS_STATED,
        rule: Rule::Above(1.0),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "link.25",
        claim: "at 25 GB/s tcast-nmp reaches 99% of its performance at 150 GB/s (best placement, every model)",
        paper: "99%",
        tolerance: PM10,
        rule: share(99.0, 99.0),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "scars-table1.backward",
        claim: "SCARS's cache cuts the backward pass's time several-fold against the uncached CPU-GPU system (baseline-cpu over scars)",
        paper: "several-fold (3.6x: 19.14 s to 5.36 s)",
        tolerance: "as stated, several-fold read as over 2x",
        rule: Rule::Above(2.0),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "scars-table1.optimizer",
        claim: "SCARS's cache cuts the optimizer's time several-fold against the uncached CPU-GPU system (baseline-cpu over scars)",
        paper: "several-fold (132x: 54.17 s to 0.41 s)",
        tolerance: "as stated, several-fold read as over 2x",
        rule: Rule::Above(2.0),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fae-hot.kaggle-top",
        claim: "on the Criteo-Kaggle profile the hottest 6.8% of the tables' rows serve at least 76% of the lookups",
        paper: "the top 6.8% of Kaggle's entries get at least 76% of the accesses",
        tolerance: AS_STATED,
        rule: Rule::Above(76.0),
        unit: "%",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "fae-hot.speedup",
        claim: "FAE trains faster than the CPU-GPU baseline by about the paper's mean speed-up",
        paper: "up to 2.34x (mean over three datasets)",
        tolerance: PM10,
        rule: within(2.34, 2.34),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "scars-growth.prior",
        claim: "without coalescing or a cache, a batch's communication grows 5x with 5x batch",
        paper: "5x",
        tolerance: "none: exact",
        rule: Rule::Within { lo: 5.0, hi: 5.0 },
        unit: "x",
        kind: CheckKind::Identity,
    },
    Threshold {
        id: "scars-growth.light",
        claim: "with coalescing and the cache, a batch's communication grows under 1.5x at 5x table and 5x batch (exponential, half-normal)",
        paper: "under 1.5x",
        tolerance: AS_STATED,
        rule: Rule::Below(1.5),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "scars-growth.zipf",
        claim: "with coalescing and the cache, a batch's communication grows under 2x at 5x table and 5x batch (Zipf)",
        paper: "under 2x",
        tolerance: AS_STATED,
        rule: Rule::Below(2.0),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "cdlrm-window.amortised",
        claim: "the amortised caching overhead falls as the look-ahead window grows, whatever the cache size (largest window against smallest, every cache size)",
        paper: "decreases with the window, independent of the cache size (Fig. 3b)",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "cdlrm-window.small-cache",
        claim: "with a small cache a larger look-ahead window lowers the hit rate (the smallest cache, largest window against smallest)",
        paper: "more conflict victims with a larger window when the cache is small (Fig. 3c)",
        tolerance: NONE_DIR,
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "cdlrm-accuracy.within",
        claim: "cdlrm in the paper's asynchronous order reaches baseline-cpu's test accuracy within 0.02 percentage points, on every seed",
        paper: "within 0.02% (Table 1b, Criteo Kaggle: 78.967% against 78.971%)",
        tolerance: AS_STATED,
        rule: Rule::Below(0.02),
        unit: " points",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "elrec-accuracy.within",
        claim: "eltt's test accuracy is less than 0.1 points below baseline-cpu's, on every seed",
        paper: "0.02-0.06 points below DLRM (Table IV; Criteo Kaggle 78.50 against 78.53)",
        tolerance: AS_STATED,
        rule: Rule::Below(0.1),
        unit: " points",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "elrec-reuse.reuse",
        claim: "batch-level reuse makes the TT forward faster than the plain TT lookup by about the paper's factor (mean over the TT tables, CPU measured, rows as drawn)",
        paper: "1.75x from intermediate result reuse (Fig. 17, mean over batch sizes)",
        tolerance: PM10,
        rule: within(1.75, 1.75),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "elrec-reuse.reorder",
        claim: "the locality-based reordering makes the reuse forward faster again by about the paper's factor (mean over the TT tables, CPU measured)",
        paper: "1.05x from the index reordering (Fig. 17)",
        tolerance: PM10,
        rule: within(1.05, 1.05),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "elrec-reuse.total",
        claim: "reuse and reordering together make the TT forward faster than the plain TT lookup by about the paper's factor (mean over the TT tables, CPU measured)",
        paper: "1.83x over TT-Rec's TT table on average (Fig. 17)",
        tolerance: PM10,
        rule: within(1.83, 1.83),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "elrec-table3.avazu",
        claim: "with the tables over 1M rows as TT tables of rank 128, Avazu's embedding footprint shrinks by about the paper's ratio",
        paper: "6.22x: 87.6 MB against 0.55 GB (Table III)",
        tolerance: PM10,
        rule: within(6.22, 6.22),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "elrec-table3.kaggle",
        claim: "with the tables over 1M rows as TT tables of rank 128, Criteo Kaggle's embedding footprint shrinks by about the paper's ratio",
        paper: "7.29x: 258.2 MB against 1.9 GB (Table III)",
        tolerance: PM10,
        rule: within(7.29, 7.29),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "elrec-table3.terabyte",
        claim: "with the tables over 1M rows as TT tables of rank 128, Criteo Terabyte's embedding footprint shrinks by about the paper's ratio",
        paper: "74.19x: 797.9 MB against 59.2 GB (Table III)",
        tolerance: PM10,
        rule: within(74.19, 74.19),
        unit: "x",
        kind: CheckKind::Finding,
    },
    Threshold {
        id: "cdlrm-vs-nmp.same-numbers",
        claim: "cdlrm-nmp trains cdlrm's numbers (the pool times the gathers and write-backs; the host tables compute them): the same test loss on every model",
        paper: "none: no paper ran cDLRM on an NMP pool; nmpsim's construction",
        tolerance: "none: exact",
        rule: Rule::Direction,
        unit: "",
        kind: CheckKind::Identity,
    },
];

/// The threshold called `id`. Panics on an unknown id: every analysis names
/// its thresholds, and a test runs every analysis.
pub fn threshold(id: &str) -> &'static Threshold {
    THRESHOLDS
        .iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("no threshold `{id}`"))
}

impl Threshold {
    /// The threshold in words: the rule with its numbers.
    pub fn rule_text(&self) -> String {
        self.rule.text(self.unit)
    }
}

/// The table of every threshold, as `docs/reproducing.md` prints it.
pub fn markdown_table() -> String {
    let mut s = String::from(
        "| check | claim | paper | tolerance | holds when | kind |\n|---|---|---|---|---|---|\n",
    );
    for t in THRESHOLDS {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} |",
            t.id,
            t.claim,
            t.paper,
            t.tolerance,
            t.rule_text(),
            t.kind.as_str()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bound, pinned: changing a threshold changes this test.
    #[test]
    fn thresholds_are_pinned() {
        let within = |id: &str| match threshold(id).rule {
            Rule::Within { lo, hi } => (lo, hi),
            r => panic!("{id}: {r:?}"),
        };
        let close = |id: &str, lo: f64, hi: f64| {
            let (a, b) = within(id);
            assert!(
                (a - lo).abs() < 1e-9 && (b - hi).abs() < 1e-9,
                "{id}: {a}-{b}, pinned {lo}-{hi}"
            );
        };
        close("fig5b.expand", 10.0, 10.0);
        close("fig6.ec-gr", 2.7, 3.3);
        close("fig6.ec-cgr", 1.8, 2.2);
        close("fig6.dram", 0.98, 1.02);
        close("fig4.backward", 55.8, 100.0);
        close("fig4.mlp-heavy", 21.6, 26.4);
        close("fig12.cpu", 0.99, 10.45);
        close("fig12.nmp", 1.17, 6.71);
        close("fig13.tcast-cpu", 1.08, 1.76);
        close("fig13.baseline-nmp", 0.783, 0.957);
        close("fig13.tcast-nmp", 1.8, 16.5);
        close("fig13.tcast-nmp-mean", 6.21, 7.59);
        close("fig15.tcast-light", 82.8, 100.0);
        close("fig15.tcast-heavy", 39.6, 48.4);
        close("fig15.baseline-light", 5.85, 7.15);
        close("fig15.baseline-heavy", 7.65, 9.35);
        close("fig16.tcast-cpu-default", 1.08, 1.76);
        close("fig16.tcast-cpu-larger", 1.26, 3.08);
        close("fig16.tcast-nmp-max", 13.5, 16.5);
        close("link.25", 89.1, 100.0);
        close("fae-hot.speedup", 2.106, 2.574);
        close("scars-growth.prior", 5.0, 5.0);
        close("elrec-reuse.reuse", 1.575, 1.925);
        close("elrec-reuse.reorder", 0.945, 1.155);
        close("elrec-reuse.total", 1.647, 2.013);
        close("elrec-table3.avazu", 5.598, 6.842);
        close("elrec-table3.kaggle", 6.561, 8.019);
        close("elrec-table3.terabyte", 66.771, 81.609);
        assert_eq!(threshold("scars-growth.light").rule, Rule::Below(1.5));
        assert_eq!(threshold("scars-growth.zipf").rule, Rule::Below(2.0));
        assert_eq!(threshold("table1.600").rule, Rule::Above(600.0));
        assert_eq!(threshold("fig4.mlp-light").rule, Rule::Below(1.0));
        assert_eq!(threshold("fig16.robust").rule, Rule::Above(0.5));
        assert_eq!(threshold("fig17.every-dim").rule, Rule::Above(1.0));
        assert_eq!(threshold("scars-table1.backward").rule, Rule::Above(2.0));
        assert_eq!(threshold("scars-table1.optimizer").rule, Rule::Above(2.0));
        assert_eq!(threshold("fae-hot.kaggle-top").rule, Rule::Above(76.0));
        assert_eq!(threshold("cdlrm-accuracy.within").rule, Rule::Below(0.02));
        assert_eq!(threshold("elrec-accuracy.within").rule, Rule::Below(0.1));
        for id in [
            "fig5b.shrink",
            "table1.peak",
            "fig13.fastest",
            "fig14.lowest",
            "fig14.tcast-cpu",
            "fig15.busier",
            "fig16.growth",
            "cdlrm-window.amortised",
            "cdlrm-window.small-cache",
            "cdlrm-vs-nmp.same-numbers",
            "pool-hbm.per-gb",
            "pool-hbm.capacity",
        ] {
            assert_eq!(threshold(id).rule, Rule::Direction, "{id}");
        }
        // The identities: fixed by construction, not findings.
        let ids: Vec<&str> = THRESHOLDS
            .iter()
            .filter(|t| t.kind == CheckKind::Identity)
            .map(|t| t.id)
            .collect();
        assert_eq!(
            ids,
            [
                "fig5b.expand",
                "fig6.ec-gr",
                "fig6.ec-cgr",
                "pool-hbm.capacity",
                "scars-growth.prior",
                "cdlrm-vs-nmp.same-numbers"
            ]
        );
        assert_eq!(threshold("pool-hbm.ddr4").rule, Rule::Above(600.0));
        assert_eq!(THRESHOLDS.len(), 52);
    }

    #[test]
    fn ids_are_unique_and_rules_read() {
        for (i, t) in THRESHOLDS.iter().enumerate() {
            assert!(
                THRESHOLDS[..i].iter().all(|u| u.id != t.id),
                "{} twice",
                t.id
            );
        }
        assert_eq!(threshold("fig6.ec-gr").rule_text(), "2.7x to 3.3x");
        assert_eq!(threshold("table1.600").rule_text(), "over 600 GB/s");
        assert_eq!(threshold("fig5b.expand").rule_text(), "exactly 10x");
        assert!(Rule::Within { lo: 1.0, hi: 2.0 }.admits(2.0));
        assert!(!Rule::Within { lo: 1.0, hi: 2.0 }.admits_all(&[]));
        assert!(!Rule::Above(1.0).admits(1.0));
    }

    /// `docs/reproducing.md` prints this very table.
    #[test]
    fn the_docs_print_the_table() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reproducing.md"),
        )
        .unwrap();
        assert!(
            doc.contains(&markdown_table()),
            "docs/reproducing.md's thresholds table differs from THRESHOLDS; paste:\n{}",
            markdown_table()
        );
    }
}
