//! cDLRM's Fig. 3b and 3c: the look-ahead window against the cache.

use crate::*;

/// One run: its cache sets, window, and cdlrm's figures.
struct Point {
    sets: f64,
    n: f64,
    hit: f64,
    amortised_ms: f64,
    victims: f64,
    iter_ms: f64,
}

fn points(inp: &Inputs) -> Result<Vec<Point>, String> {
    let mut out = Vec::new();
    for r in inp.completed("cdlrm-window")? {
        let num = |k: &str| -> Result<f64, String> {
            r.param(k)
                .parse()
                .map_err(|_| format!("{k} is not a number"))
        };
        let modes = mode_runs(r)?;
        let m = find(&modes, "cdlrm").ok_or("no cdlrm mode in a cdlrm-window run")?;
        let fig = |k: &str| -> Result<f64, String> {
            m.figures
                .get(k)
                .copied()
                .ok_or_else(|| format!("no `{k}` in cdlrm's figures (an older nmpsim?)"))
        };
        out.push(Point {
            sets: num("cache_sets")?,
            n: num("lookahead")?,
            hit: fig("hit_rate")?,
            amortised_ms: fig("amortised_caching_overhead_ms")?,
            victims: fig("conflict_victims")?,
            iter_ms: m.iter_ms,
        });
    }
    out.sort_by(|a, b| a.sets.total_cmp(&b.sets).then(a.n.total_cmp(&b.n)));
    Ok(out)
}

/// Per cache size, its smallest-window and largest-window points.
fn ends(pts: &[Point]) -> Vec<(&Point, &Point)> {
    pts.chunk_by(|a, b| a.sets == b.sets)
        .filter(|g| g.len() > 1)
        .map(|g| (&g[0], &g[g.len() - 1]))
        .collect()
}

pub(crate) fn analyse_cdlrm_window(inp: &Inputs) -> Result<Outcome, String> {
    let pts = points(inp)?;
    let mut t = Table::new(&[
        col("cache_sets", Fmt::Plain, "cache sets L", Fmt::Plain),
        col("lookahead", Fmt::Plain, "look-ahead n", Fmt::Plain),
        col("hit_rate", Fmt::Fixed(5), "hit rate", Fmt::Pct(1)),
        col(
            "conflict_victims",
            Fmt::Plain,
            "conflict victims",
            Fmt::Plain,
        ),
        col(
            "amortised_caching_overhead_ms",
            Fmt::Fixed(4),
            "amortised caching overhead",
            Fmt::Unit(3, " ms"),
        ),
        col(
            "modelled_ms_per_iteration",
            Fmt::Fixed(4),
            "iteration",
            Fmt::Unit(3, " ms"),
        ),
        chart_col("series"),
    ]);
    for p in &pts {
        t.push(vec![
            p.sets.into(),
            p.n.into(),
            p.hit.into(),
            p.victims.into(),
            p.amortised_ms.into(),
            p.iter_ms.into(),
            format!("L = {}", p.sets).into(),
        ]);
    }
    let mut overhead = chart(
        "cDLRM: amortised caching overhead against the look-ahead window",
        "look-ahead window n (batches)",
        "amortised caching overhead (ms per batch)",
        ChartKind::Lines,
    );
    overhead.log_x = true;
    t.plot(
        &mut overhead,
        "series",
        "lookahead",
        "amortised_caching_overhead_ms",
    );
    let mut hits = chart(
        "cDLRM: hit rate against the look-ahead window",
        "look-ahead window n (batches)",
        "hit rate of the batches' unique rows",
        ChartKind::Lines,
    );
    hits.log_x = true;
    t.plot(&mut hits, "series", "lookahead", "hit_rate");
    let ends = ends(&pts);
    let falls: Vec<String> = ends
        .iter()
        .map(|(a, b)| {
            format!(
                "L={}: {:.3} -> {:.3} ms",
                a.sets, a.amortised_ms, b.amortised_ms
            )
        })
        .collect();
    let amortised = !ends.is_empty() && ends.iter().all(|(a, b)| b.amortised_ms < a.amortised_ms);
    let small = ends.first();
    let small_text = small.map_or("no cache size with two windows".to_string(), |(a, b)| {
        format!(
            "L={}: {:.1}% -> {:.1}%",
            a.sets,
            100.0 * a.hit,
            100.0 * b.hit
        )
    });
    let small_holds = small.is_some_and(|(a, b)| b.hit < a.hit);
    Ok(Outcome {
        csv: t.csv(),
        charts: vec![("overhead".into(), overhead), ("hit-rate".into(), hits)],
        table_md: t.md(),
        checks: vec![
            check(
                "cdlrm-window.amortised",
                if falls.is_empty() {
                    "no cache size with two windows".into()
                } else {
                    falls.join("; ")
                },
                amortised,
            ),
            check("cdlrm-window.small-cache", small_text, small_holds),
        ],
        notes: vec![
            format!(
                "`nmpsim train --model rm1 --mode cdlrm`, {} rows per table, batch {}, {} iterations (the first warm-up), 16 ways, coherent; `--lookahead` and `--cache-sets` swept (`reproduce/specs/cdlrm-window.toml`).",
                quick_full(inp.size, "100,000", "1,000,000"),
                quick_full(inp.size, 256, 2048),
                quick_full(inp.size, 40, 200),
            ),
            "The amortised caching overhead is the caching step's time per window over n, as the paper defines it: the occupancy tables' look-ups and way draws, and (coherent) the write-backs drained and rows re-read, measured on this machine's CPU; the installed and evicted rows' transfers and device copies modelled (V100 preset). It includes the first window's install into the empty caches. The prefetcher, overlapped with training, is not in it (docs/strategies.md).".into(),
            "The hit rate is the share of the batches' unique rows found in the cache; the rest are conflict victims, fetched into the victim table. Counted, not timed.".into(),
            "The paper measured cDLRM on a GPU with the Criteo Kaggle model (cache sizes up to 50,000 sets, 16 ways); these runs use RM1-shaped synthetic tables, the DLRM reference's uniform rows, so that the checks read the trend, not the paper's values.".into(),
        ],
    })
}
