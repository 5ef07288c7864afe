//! SCARS's Table I (the uncached CPU-GPU system and SCARS, forward,
//! backward and optimizer per iteration) and FAE's skew and speed-up.

use crate::*;

/// SCARS's Table I, seconds per iteration: (method, forward, backward,
/// optimizer, total).
const PAPER: [(&str, f64, f64, f64, f64); 3] = [
    ("CPU-only", 12.05, 15.1, 41.94, 69.09),
    ("CPU-GPU baseline", 20.37, 19.14, 54.17, 93.68),
    ("SCARS", 50.88, 5.36, 0.41, 56.65),
];

/// A mode's iteration in Table I's phases, ms: forward (gather-reduce and
/// SCARS's host coalescing), backward (expand-coalesce), optimizer
/// (scatter), transfers, the dense path, and the whole iteration.
struct Phases {
    forward: f64,
    backward: f64,
    optimizer: f64,
    transfer: f64,
    dense: f64,
    total: f64,
}

fn phases(m: &ModeRun) -> Phases {
    Phases {
        forward: m.ms("gather-reduce") + m.ms("coalesce"),
        backward: m.ms("expand-coalesce"),
        optimizer: m.ms("scatter"),
        transfer: m.ms("transfer"),
        dense: m.ms("mlp") + m.ms("interaction"),
        total: m.iter_ms,
    }
}

pub(crate) fn analyse_scars_table1(inp: &Inputs) -> Result<Outcome, String> {
    let runs = inp.completed("hot")?;
    let r = runs.first().ok_or("no run of the hot sweep")?;
    let modes = mode_runs(r)?;
    let base = find(&modes, "baseline-cpu").ok_or("no baseline-cpu mode in the hot run")?;
    let scars = find(&modes, "scars").ok_or("no scars mode in the hot run")?;
    let (b, s) = (phases(base), phases(scars));
    let ms = |csv, md| col(csv, Fmt::Fixed(4), md, Fmt::Unit(3, " ms"));
    let mut table = Table::new(&[
        csv_col("mode", Fmt::Plain),
        md_col("method", Fmt::Plain),
        ms("forward_ms", "forward"),
        ms("backward_ms", "backward"),
        ms("optimizer_ms", "optimizer"),
        csv_col("transfer_ms", Fmt::Fixed(4)),
        csv_col("dense_ms", Fmt::Fixed(4)),
        ms("iteration_ms", "iteration"),
        csv_col("sources", Fmt::Plain),
    ]);
    let mut c = chart(
        "SCARS Table I: one iteration by phase",
        "phase",
        "ms per iteration",
        ChartKind::Bars,
    );
    for (m, p) in [(base, &b), (scars, &s)] {
        let label = if m.mode == "scars" {
            "SCARS (nmpsim)"
        } else {
            "CPU-GPU, no cache (nmpsim baseline-cpu)"
        };
        table.push(vec![
            (&m.mode).into(),
            label.into(),
            p.forward.into(),
            p.backward.into(),
            p.optimizer.into(),
            p.transfer.into(),
            p.dense.into(),
            p.total.into(),
            ["gather-reduce", "coalesce", "expand-coalesce", "scatter"]
                .iter()
                .filter_map(|k| m.sources.get(*k).map(|v| format!("{k}: {v}")))
                .collect::<Vec<_>>()
                .join("; ")
                .into(),
        ]);
        for (phase, ms) in [
            ("forward", p.forward),
            ("backward", p.backward),
            ("optimizer", p.optimizer),
        ] {
            push_point(&mut c, label, XValue::Cat(phase.into()), ms);
        }
    }
    for (method, f, bw, o, t) in PAPER {
        table.paper_row(&[
            &format!("paper: {method}"),
            &format!("{f} s"),
            &format!("{bw} s"),
            &format!("{o} s"),
            &format!("{t} s"),
        ]);
    }
    let backward = b.backward / s.backward;
    let optimizer = b.optimizer / s.optimizer;
    let notes = vec![
        format!(
            "`nmpsim train --model criteo-kaggle --mode baseline-cpu,fae,scars`, batch {}, tables at {} of Criteo-Kaggle's sizes, {} iterations of which the first is warm-up; the hot rows chosen from a profile of the first {} samples of the input (the dataset of which the run trains a prefix), SCARS's cache sized by its cost model within {} (docs/strategies.md).",
            quick_full(inp.size, 512, 2048),
            quick_full(inp.size, "10%", "100%"),
            quick_full(inp.size, 4, 8),
            quick_full(inp.size, "500,000", "4,000,000"),
            quick_full(inp.size, "16 MiB", "256 MiB"),
        ),
        "baseline-cpu's embedding primitives are measured on this machine's CPU; SCARS's host coalescing and its host optimizer step for uncached rows are measured, its GPU work (hot mini-batches, the pooling, coalescing and optimizer step of cached rows) is modelled from the V100 preset's memory bandwidth, and the transfers from the host link's (docs/dlrm.md). The paper measured two TITAN RTX on Criteo Terabyte, whose iteration (seconds) is not comparable in size: compare the ratios.".into(),
        "The paper's first claim, that the uncached CPU-GPU system is slower than CPU-only, is not checked: nmpsim has no CPU-only system (its dense path is always the GPU's, modelled or run on one).".into(),
        format!(
            "SCARS's forward here is {:.2}x the baseline's (the paper: 2.5x slower, 50.88 s against 20.37 s, which it puts down to the larger lookup layer); reported, not checked.",
            s.forward / b.forward
        ),
    ];
    Ok(Outcome {
        csv: table.csv(),
        charts: vec![("phases".into(), c)],
        table_md: table.md(),
        checks: vec![
            check(
                "scars-table1.backward",
                format!("{backward:.2}x"),
                passes("scars-table1.backward", &[backward]),
            ),
            check(
                "scars-table1.optimizer",
                format!("{optimizer:.2}x"),
                passes("scars-table1.optimizer", &[optimizer]),
            ),
        ],
        notes,
    })
}

/// FAE's Criteo Kaggle skew: the top 6.8% of entries get at least 76% of the
/// accesses (its Sec. II).
const FAE_TOP_SHARE: f64 = 0.068;

/// fae-hot's CSV: a profile's budgets or curve points, each with its hot
/// rows and the shares they serve.
pub(crate) fn hot_table() -> Table {
    Table::new(&[
        csv_col("profile", Fmt::Plain),
        csv_col("points", Fmt::Plain),
        csv_col("budget_bytes", Fmt::Fixed(0)),
        csv_col("hot_bytes", Fmt::Fixed(0)),
        csv_col("hot_share_of_tables", Fmt::Fixed(5)),
        csv_col("lookup_share", Fmt::Fixed(5)),
        csv_col("sample_share", Fmt::Fixed(5)),
    ])
}

pub(crate) fn analyse_fae_hot(inp: &Inputs) -> Result<Outcome, String> {
    let prof = inp.completed("fae-profile")?;
    let p = &prof.first().ok_or("no fae-profile run")?.results;
    let total = num(p, "tables_bytes").ok_or("no tables_bytes in the trace hot output")?;
    let mut table = hot_table();
    let mut md = Table::new(&[
        md_col("budget", Fmt::Unit(1, " MB")),
        md_col("hot rows", Fmt::Plain),
        md_col("lookups they serve", Fmt::Pct(1)),
        md_col("samples entirely hot", Fmt::Pct(1)),
    ]);
    let mut top = None;
    let budgets = hot_points(p, "budgets")?;
    for &(budget, hot, lookups, samples) in &budgets {
        table.push(vec![
            "criteo-kaggle".into(),
            "budgets".into(),
            budget.into(),
            hot.into(),
            (hot / total).into(),
            lookups.into(),
            samples.into(),
        ]);
        md.push(vec![
            (budget / 1e6).into(),
            format!(
                "{:.1} MB ({:.2}% of the tables)",
                hot / 1e6,
                100.0 * hot / total
            )
            .into(),
            lookups.into(),
            samples.map_or("-".into(), Val::from),
        ]);
        // The budget nearest 6.8% of the tables (the spec's first).
        if (budget / total - FAE_TOP_SHARE).abs() < 0.005 {
            top = Some((hot / total, lookups));
        }
    }
    md.paper_row(&["paper (Kaggle)", "top 6.8% of entries", "at least 76%", ""]);
    let (top_rows, top_share) = top.ok_or("no budget at 6.8% of the tables")?;
    let train = inp.completed("hot")?;
    let modes = mode_runs(train.first().ok_or("no run of the hot sweep")?)?;
    let fae = find(&modes, "fae").ok_or("no fae mode in the hot run")?;
    let mut c = chart(
        "FAE: modelled iteration against the CPU-GPU baseline",
        "mode",
        "ms per iteration",
        ChartKind::Bars,
    );
    for m in &modes {
        push_point(
            &mut c,
            "modelled iteration",
            XValue::Cat(m.mode.clone()),
            m.iter_ms,
        );
    }
    let all_touched = budgets.iter().all(|b| b.2 >= 1.0 - 1e-12);
    let (curves, curves_md) = fae_curves(inp, &mut table)?;
    let mut notes = vec![
        format!(
            "The skew: `nmpsim trace hot --profile criteo-kaggle --dim 16 --batch 2048 --batches {} --budget 147MB,256MiB`, counted (nothing timed) on the Criteo-Kaggle profile's generated lookups, FAE's sampling (every one of the first 500K samples, 5% of the rest). The profile's distributions are nmpsim's model of Kaggle's (docs/traces.md), not Kaggle's data: this check is of that model.",
            quick_full(inp.size, 200, 4883)
        ),
        format!(
            "The speed-up: the `hot` sweep of scars-table1 (`--mode baseline-cpu,fae,scars`): baseline-cpu's embedding primitives measured on this machine's CPU, FAE's hot mini-batches modelled on a V100 and its cold ones measured as the baseline's. The paper's 2.34x is a mean over Kaggle, Terabyte and Taobao on 1 to 4 GPUs of a real system; ours is one modelled system, and its hot mini-batches cost the modelled GPU's bandwidth, not a real one's."
        ),
    ];
    if all_touched {
        notes.push(format!(
            "Every row the profiled samples touch fits in {:.2}% of the tables' bytes, inside the 6.8% budget, so the hot rows serve every lookup: the profile's tables are more skewed than Kaggle's data as FAE measured it (6.8% of the entries for 76% of the accesses). The check holds, and says that the profile is more skewed than Kaggle, not that it matches it. The same is why FAE's hot mini-batches are most of the training run above.",
            100.0 * top_rows
        ));
    }
    Ok(Outcome {
        csv: table.csv(),
        charts: vec![("speedup".into(), c), ("curves".into(), curves)],
        table_md: format!(
            "{}\nThe hot rows' share of the lookups against their share of the tables on every skewed profile and a uniform one (`reproduce/specs/fae-curves.toml`; reported, not checked; the chart `fae-hot-curves`):\n\n{curves_md}",
            md.md()
        ),
        checks: vec![
            check(
                "fae-hot.kaggle-top",
                format!(
                    "{:.1}% of the lookups from {:.2}% of the tables' bytes",
                    100.0 * top_share,
                    100.0 * top_rows
                ),
                passes("fae-hot.kaggle-top", &[100.0 * top_share]),
            ),
            check(
                "fae-hot.speedup",
                format!("{:.2}x", fae.speedup),
                passes("fae-hot.speedup", &[fae.speedup]),
            ),
        ],
        notes,
    })
}

/// A batch's parameters sent: without coalescing, coalesced, coalesced with
/// the cache.
type Sent = (f64, f64, f64);

/// A batch's parameters sent in a `scars plan` run, per batch (the run's
/// epoch figures times the batch over the epoch's samples).
fn per_batch(r: &RunResult) -> Result<Sent, String> {
    let v = &r.results;
    let q = num(v, "samples").ok_or("no samples in the scars plan output")?;
    let b = v
        .get("batches")
        .and_then(|b| b.get(0))
        .ok_or("no batches in the scars plan output")?;
    let batch = num(b, "batch").ok_or("a batch without its size")?;
    let un = num(b, "uncoalesced_params").ok_or("no uncoalesced_params")?;
    let co = num(b, "coalesced.total_params").ok_or("no coalesced.total_params")?;
    let ca = b
        .get("cached")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get(1))
        .and_then(|c| num(c, "total_params"))
        .ok_or("no cached total_params (the spec's --cache)")?;
    let k = batch / q;
    Ok((un * k, co * k, ca * k))
}

/// The cache a `scars plan` run modelled, in bytes.
fn cache_bytes(r: &RunResult) -> Result<f64, String> {
    r.results
        .get("batches")
        .and_then(|b| b.get(0))
        .and_then(|b| b.get("cached"))
        .and_then(|c| c.get(0))
        .and_then(|c| c.get(0))
        .and_then(Value::as_f64)
        .ok_or_else(|| "no cache size in the scars plan output".to_string())
}

pub(crate) fn analyse_scars_growth(inp: &Inputs) -> Result<Outcome, String> {
    let mut table = Table::new(&[
        csv_col("dist", Fmt::Plain),
        csv_col("rows", Fmt::Plain),
        csv_col("batch", Fmt::Plain),
        csv_col("cache_bytes", Fmt::Plain),
        csv_col("uncoalesced_params_per_batch", Fmt::Fixed(1)),
        csv_col("coalesced_params_per_batch", Fmt::Fixed(1)),
        csv_col("cached_params_per_batch", Fmt::Fixed(1)),
    ]);
    // dist -> (rows, batch) -> per-batch params, and the grown point with a
    // grown cache
    let mut by: BTreeMap<String, BTreeMap<(u64, u64), Sent>> = BTreeMap::new();
    let mut grown: BTreeMap<String, Sent> = BTreeMap::new();
    for (sweep, fixed) in [("scars-growth", true), ("scars-growth-cache", false)] {
        for r in inp.completed(sweep)? {
            let p = per_batch(r)?;
            let rows_n = num(&r.results, "rows").ok_or("no rows in the scars plan output")?;
            let batch = num(&r.results, "batches.0.batch").ok_or("a batch without its size")?;
            table.push(vec![
                r.param("dist").into(),
                rows_n.into(),
                batch.into(),
                cache_bytes(r)?.into(),
                p.0.into(),
                p.1.into(),
                p.2.into(),
            ]);
            let dist = r.param("dist").to_string();
            if fixed {
                by.entry(dist)
                    .or_default()
                    .insert((rows_n as u64, batch as u64), p);
            } else {
                grown.insert(dist, p);
            }
        }
    }
    let growth = |h| md_col(h, Fmt::Unit(2, "x"));
    let mut md = Table::new(&[
        md_col("distribution", Fmt::Plain),
        growth("no coalescing"),
        growth("coalesced"),
        growth("coalesced, 64 MiB cache"),
        growth("coalesced, cache grown 5x (reported)"),
    ]);
    let mut c = chart(
        "SCARS: a batch's communication after 5x table and 5x batch",
        "distribution",
        "growth (x)",
        ChartKind::Bars,
    );
    let (mut prior, mut light, mut zipf) = (Vec::new(), Vec::new(), Vec::new());
    let mut with_grown = Vec::new();
    for (dist, m) in &by {
        // The smallest table and batch against the largest of both.
        let (Some(a), Some(b)) = (m.values().next(), m.values().next_back()) else {
            continue;
        };
        let g = (b.0 / a.0, b.1 / a.1, b.2 / a.2);
        let gc = grown.get(dist).map(|p| p.2 / a.2);
        md.push(vec![
            dist.into(),
            g.0.into(),
            g.1.into(),
            g.2.into(),
            gc.map_or("-".into(), Val::from),
        ]);
        for (s, x) in [
            ("no coalescing", Some(g.0)),
            ("coalesced", Some(g.1)),
            ("coalesced, 64 MiB cache", Some(g.2)),
            ("coalesced, cache grown 5x", gc),
        ] {
            if let Some(x) = x {
                push_point(&mut c, s, XValue::Cat(dist.clone()), x);
            }
        }
        if let Some(x) = gc {
            with_grown.push(format!("{dist} {x:.2}x"));
        }
        prior.push(g.0);
        if dist.starts_with("zipf") {
            zipf.push(g.2);
        } else {
            light.push(g.2);
        }
    }
    md.paper_row(&[
        "paper",
        "5x",
        "",
        "under 1.5x (exponential, half-normal), under 2x (Zipf)",
        "",
    ]);
    c.hlines.push(("paper: under 2x (Zipf)".into(), 2.0));
    c.hlines.push(("paper: under 1.5x".into(), 1.5));
    let list = |xs: &[f64]| {
        xs.iter()
            .map(|x| format!("{x:.2}x"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let notes = vec![
        "`nmpsim scars plan --dist D --rows N --batch B --dim 64 --cache 64MiB` per family, at (1M rows, batch 2048) and (5M rows, batch 10240) (quick: 100K and 500K rows, a 6.4 MiB cache, the same share of the table): a batch's parameters sent, modelled by SCARS's cost model (Eq. 3-6; docs/strategies.md), nothing simulated or measured. The epoch figures are per batch here (times B over the epoch's samples): per epoch, uncoalesced traffic does not grow with the batch at all, and the paper's 5x is per batch.".into(),
        "The families' shapes are in units of the table (`Family::pmf`): the 5M-row table stretches the same shape, so its hot set is 5x larger and the same 64 MiB cache covers a fifth of it. The paper does not say how its distributions scale or whether its cache grows. These are the parameters we chose, fixed before the runs, and the checks read them.".into(),
        format!(
            "A second reading, reported and not checked (its parameters were chosen after the first reading's outcome): the cache grows with the table, 5x at the grown point (`reproduce/specs/scars-growth-cache.toml`: {} for {} rows), so it covers the same share of the table; the growth against the same first point is {}.",
            quick_full(inp.size, "32 MiB", "320 MiB"),
            quick_full(inp.size, "500K", "5M"),
            if with_grown.is_empty() {
                "not measured".to_string()
            } else {
                with_grown.join(", ")
            }
        ),
    ];
    Ok(Outcome {
        csv: table.csv(),
        charts: vec![("growth".into(), c)],
        table_md: md.md(),
        checks: vec![
            check(
                "scars-growth.prior",
                list(&prior),
                passes("scars-growth.prior", &prior),
            ),
            check(
                "scars-growth.light",
                list(&light),
                passes("scars-growth.light", &light),
            ),
            check(
                "scars-growth.zipf",
                list(&zipf),
                passes("scars-growth.zipf", &zipf),
            ),
        ],
        notes,
    })
}

/// One budget of a `trace hot` run: (budget, hot bytes, lookup share,
/// sample share).
type HotPoint = (f64, f64, f64, Option<f64>);

/// The budgets of a `trace hot` run's `key` (`budgets` or `curve`).
fn hot_points(v: &Value, key: &str) -> Result<Vec<HotPoint>, String> {
    v.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no {key} in the trace hot output"))?
        .iter()
        .map(|b| {
            Ok((
                num(b, "budget_bytes").ok_or("a budget without budget_bytes")?,
                num(b, "hot_bytes").ok_or("a budget without hot_bytes")?,
                num(b, "lookup_share").ok_or("a budget without lookup_share")?,
                num(b, "sample_share"),
            ))
        })
        .collect()
}

/// The profiles' curves (the `fae-curves` sweep): rows of `table`, a chart
/// of the lookups served against the tables' share, and a markdown table of
/// the share served within 1%, 5% and 10% of the tables.
pub(crate) fn fae_curves(inp: &Inputs, table: &mut Table) -> Result<(Chart, String), String> {
    let mut c = chart(
        "Hot rows: share of the lookups against share of the tables, per profile",
        "hot rows, % of the tables' bytes",
        "% of the lookups they serve",
        ChartKind::Lines,
    );
    c.log_x = true;
    let mut md = Table::new(&[
        md_col("profile", Fmt::Plain),
        md_col("lookups served within 1% of the tables", Fmt::Pct(1)),
        md_col("within 5%", Fmt::Pct(1)),
        md_col("within 10%", Fmt::Pct(1)),
    ]);
    for r in inp.completed("fae-curves")? {
        let profile = r.param("profile");
        let total =
            num(&r.results, "tables_bytes").ok_or("no tables_bytes in the trace hot output")?;
        let points = hot_points(&r.results, "curve")?;
        for &(budget, hot, lookups, samples) in &points {
            table.push(vec![
                profile.into(),
                "curve".into(),
                budget.into(),
                hot.into(),
                (hot / total).into(),
                lookups.into(),
                samples.into(),
            ]);
            push_point(
                &mut c,
                profile,
                XValue::Num(100.0 * hot / total),
                100.0 * lookups,
            );
        }
        let within = |share: f64| {
            points
                .iter()
                .filter(|p| p.1 / total <= share)
                .map(|p| p.2)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
                .map_or("-".into(), Val::from)
        };
        md.push(vec![
            profile.into(),
            within(0.01),
            within(0.05),
            within(0.10),
        ]);
    }
    md.paper_row(&["paper (Kaggle)", "", "", "at least 76% within 6.8%"]);
    Ok((c, md.md()))
}
