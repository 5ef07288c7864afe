//! `trace hot`'s printed summary and its run directory (the tables, the
//! budgets, the curve and its chart).

use super::*;

fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / (1u64 << 20) as f64)
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.1}", 100.0 * x))
}

pub(super) fn summary(r: &HotResults, p: &AccessProfile) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let small = r.tables.iter().filter(|t| t.small).count();
    let _ = writeln!(
        s,
        "{} tables, {} MiB at dim {} ({} under 1 MiB, hot whole: {} MiB)",
        r.tables.len(),
        mib(r.tables_bytes as f64),
        r.dim,
        small,
        mib(r.small_tables_bytes as f64)
    );
    let every = p.samples_profiled == p.samples_seen;
    let _ = writeln!(
        s,
        "profile: {} of {} samples ({}), {} lookups (counted)",
        r.samples_profiled,
        r.samples_seen,
        if every {
            "every one".to_string()
        } else {
            format!(
                "the first {} and {:.1}% of the rest, seed {}",
                p.sampling.min_samples,
                100.0 * p.sampling.rate,
                p.sampling.seed
            )
        },
        r.lookups_profiled
    );
    let _ = writeln!(s);
    let mut t = nmpsim_traces::TextTable::new([
        "budget MiB",
        "threshold",
        "hot rows",
        "Rand-Em Box estimate (99.9%)",
        "hot MiB",
        "lookups%",
        "samples%",
    ]);
    for b in &r.budgets {
        t.row([
            mib(b.budget_bytes as f64),
            b.threshold.to_string(),
            b.hot_rows.to_string(),
            format!(
                "{:.0} [{:.0}, {:.0}]",
                b.rand_em.estimate, b.rand_em.low, b.rand_em.high
            ),
            mib(b.hot_bytes as f64),
            pct(Some(b.lookup_share)),
            pct(b.sample_share),
        ]);
    }
    s.push_str(&t.render());
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "threshold: the accesses (in the profile) a row of a table over 1 MiB needs to be hot, the least whose hot rows fit the budget; hot rows: of those tables, counted exactly (the tables under 1 MiB add {} rows); lookups%: profiled lookups that hit a hot row; samples%: profiled samples whose every lookup does (FAE's hot inputs); all counted on the input, none measured",
        r.budgets.first().map_or(0, |b| b.small_table_rows)
    );
    s
}

pub(super) fn write_hot_dir(
    dir: &Path,
    config: &serde_json::Value,
    r: &HotResults,
    text: &str,
) -> Result<PathBuf> {
    let rd = RunDir::create(Some(dir), "trace-hot")?;
    rd.remove_earlier(&[
        "budgets.csv",
        "curve.csv",
        "tables.csv",
        "hot-share.svg",
        "hot-share.png",
    ])?;
    rd.write_config("trace hot", config)?;
    rd.write_results("trace hot", r)?;
    let budget: [Column<&BudgetResult>; 10] = [
        ("budget_bytes", |b| b.budget_bytes.to_string()),
        ("threshold", |b| b.threshold.to_string()),
        ("hot_rows", |b| b.hot_rows.to_string()),
        ("small_table_rows", |b| b.small_table_rows.to_string()),
        ("hot_bytes", |b| b.hot_bytes.to_string()),
        ("lookup_share", |b| b.lookup_share.to_string()),
        ("sample_share", |b| {
            b.sample_share.map_or(String::new(), |x| x.to_string())
        }),
        ("rand_em_estimate", |b| b.rand_em.estimate.to_string()),
        ("rand_em_low", |b| b.rand_em.low.to_string()),
        ("rand_em_high", |b| b.rand_em.high.to_string()),
    ];
    rd.write_table("budgets.csv", &budget, &r.budgets)?;
    rd.write_table("curve.csv", &budget, &r.curve)?;
    let tables: [Column<&TableRow>; 6] = fields![table, rows, bytes, small, lookups, touched_rows];
    rd.write_table("tables.csv", &tables, &r.tables)?;
    if !r.curve.is_empty() {
        let series = |name: &str, f: &dyn Fn(&BudgetResult) -> Option<f64>| Series {
            name: name.into(),
            points: r
                .curve
                .iter()
                .filter_map(|b| {
                    Some((
                        XValue::Num(b.budget_bytes as f64 / (1 << 20) as f64),
                        100.0 * f(b)?,
                    ))
                })
                .collect(),
        };
        let chart = Chart::new(
            "Hot rows against their memory budget (counted)",
            ChartKind::Lines,
        )
        .labels("budget (MiB)", "share (%)")
        .log_axes(true, false)
        .with_series(series("lookups served by hot rows", &|b| {
            Some(b.lookup_share)
        }))
        .with_series(series("samples entirely hot", &|b| b.sample_share));
        write_chart(&chart, &rd.path().join("hot-share"))?;
    }
    rd.write_summary(text)?;
    rd.finish()
}
