//! Figures 16 and 17 and Section VI-D: the speed-ups against the batch, the
//! embedding dimension and the pool link's bandwidth.

use crate::*;

/// What [`sensitivity`] gives: the CSV, the chart, the markdown table, and
/// per model the tcast-nmp speedup at each swept value.
pub(crate) struct Sensitivity {
    pub(crate) csv: String,
    pub(crate) chart: Chart,
    pub(crate) table: String,
    pub(crate) tcast_nmp: BTreeMap<String, Vec<(f64, f64)>>,
    /// Per model, the tcast-cpu speedup at each swept value.
    pub(crate) tcast_cpu: BTreeMap<String, Vec<(f64, f64)>>,
}

/// Speedups of the modes against one swept parameter.
pub(crate) fn sensitivity(
    inp: &Inputs,
    sweep: &str,
    param: &'static str,
    title: &str,
) -> Result<Sensitivity, String> {
    let mut t = Table::new(&[
        MODEL,
        MODEL_LABEL,
        col(param, Fmt::Plain, param, Fmt::Plain),
        csv_col("mode", Fmt::Plain),
        MODELLED_MS,
        SPEEDUP,
    ]);
    let mut c = chart(title, param, "speedup over baseline-cpu", ChartKind::Lines);
    c.log_x = true;
    let mut tn: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut tc: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in inp.completed(sweep)? {
        let model = r.param("model");
        let model = if model.is_empty() { "rm1" } else { model };
        let x: f64 = r
            .param(param)
            .parse()
            .map_err(|_| format!("{param} is not a number"))?;
        let modes = mode_runs(r)?;
        for mode in MODES {
            let Some(m) = find(&modes, mode) else {
                continue;
            };
            t.push(vec![
                model.into(),
                model_label(model).into(),
                x.into(),
                mode.into(),
                m.iter_ms.into(),
                m.speedup.into(),
            ]);
            if mode != "baseline-cpu" {
                push_point(
                    &mut c,
                    &format!("{} {mode}", model_label(model)),
                    XValue::Num(x),
                    m.speedup,
                );
            }
            let into = match mode {
                "tcast-nmp" => Some(&mut tn),
                "tcast-cpu" => Some(&mut tc),
                _ => None,
            };
            if let Some(into) = into {
                into.entry(model.to_string())
                    .or_default()
                    .push((x, m.speedup));
            }
        }
    }
    for v in tn.values_mut().chain(tc.values_mut()) {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let csv = t.csv();
    let table = t
        .pivot(
            &["label", param],
            "mode",
            &MODES,
            "speedup_over_baseline_cpu",
            &[],
        )
        .md();
    Ok(Sensitivity {
        csv,
        chart: c,
        table,
        tcast_nmp: tn,
        tcast_cpu: tc,
    })
}

/// Per model, its speedups against the swept value, as one text: `RM1: 256:
/// 25.0x, 512: 16.0x` with the values, `RM1 tcast-cpu 1.30x -> 1.50x`
/// without (`label` between the model and its speedups).
pub(crate) fn speedups_text(
    m: &BTreeMap<String, Vec<(f64, f64)>>,
    label: &str,
    with_x: bool,
) -> String {
    m.iter()
        .map(|(model, v)| {
            let pts: Vec<String> = v
                .iter()
                .map(|(x, s)| {
                    if with_x {
                        format!("{x}: {s:.1}x")
                    } else {
                        format!("{s:.2}x")
                    }
                })
                .collect();
            let sep = if with_x { ", " } else { " -> " };
            format!("{}{label}{}", model_label(model), pts.join(sep))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) fn analyse_fig16(inp: &Inputs) -> Result<Outcome, String> {
    let Sensitivity {
        csv,
        chart: c,
        table,
        tcast_nmp: tn,
        tcast_cpu: tc,
    } = sensitivity(inp, "batch", "batch", "Speedup against the batch size")?;
    // The default batch: the Figure 12-15 runs' (the paper's 2048 at full size).
    let default = quick_full(inp.size, 512.0, 2048.0);
    let speedups = |m: &BTreeMap<String, Vec<(f64, f64)>>, keep: &dyn Fn(f64) -> bool| {
        m.values()
            .flatten()
            .filter(|(x, _)| keep(*x))
            .map(|(_, s)| *s)
            .collect::<Vec<f64>>()
    };
    let at_default = speedups(&tc, &|x| x == default);
    let larger = speedups(&tc, &|x| x > default);
    // Growth: each Tensor Casting mode's speedup at a model's largest batch
    // above its speedup at the smallest.
    let grows = |m: &BTreeMap<String, Vec<(f64, f64)>>| {
        !m.is_empty()
            && m.values().all(|v| match (v.first(), v.last()) {
                (Some(a), Some(b)) => v.len() > 1 && b.1 > a.1,
                _ => false,
            })
    };
    let growth = grows(&tc) && grows(&tn);
    // Robust: no batch size loses most of a model's speedup (its smallest at
    // least half its largest): the smallest ratio over the models.
    let ratios: Vec<f64> = tn
        .values()
        .map(|v| {
            let lo = v.iter().map(|(_, s)| *s).fold(f64::INFINITY, f64::min);
            let hi = v.iter().map(|(_, s)| *s).fold(0.0, f64::max);
            lo / hi
        })
        .collect();
    let maxima: Vec<f64> = tn
        .values()
        .map(|v| v.iter().map(|(_, s)| *s).fold(0.0, f64::max))
        .collect();
    let trend = |m: &BTreeMap<String, Vec<(f64, f64)>>, mode: &str| {
        speedups_text(m, &format!(" {mode} "), false)
    };
    let desc = speedups_text(&tn, ": ", true);
    let notes = training_notes_at(inp, "as swept");
    Ok(Outcome {
        csv,
        charts: vec![("speedup".into(), c)],
        table_md: table,
        checks: vec![
            check(
                "fig16.growth",
                format!("{}; {}", trend(&tc, "tcast-cpu"), trend(&tn, "tcast-nmp")),
                growth,
            ),
            check(
                "fig16.tcast-cpu-default",
                format!("{} at batch {default}", range(&at_default)),
                passes("fig16.tcast-cpu-default", &at_default),
            ),
            check(
                "fig16.tcast-cpu-larger",
                if larger.is_empty() {
                    "no batch larger than the default".into()
                } else {
                    range(&larger)
                },
                passes("fig16.tcast-cpu-larger", &larger),
            ),
            check(
                "fig16.tcast-nmp-max",
                format!("largest per model: {}", range(&maxima)),
                passes("fig16.tcast-nmp-max", &maxima),
            ),
            check(
                "fig16.robust",
                format!("smallest / largest: {} ({desc})", range(&ratios)),
                passes("fig16.robust", &ratios),
            ),
        ],
        notes,
    })
}

pub(crate) fn analyse_fig17(inp: &Inputs) -> Result<Outcome, String> {
    let Sensitivity {
        csv,
        chart: c,
        table,
        tcast_nmp: tn,
        ..
    } = sensitivity(inp, "dim", "dim", "Speedup against the embedding dimension")?;
    let all: Vec<f64> = tn.values().flatten().map(|(_, s)| *s).collect();
    let desc = tn
        .values()
        .flatten()
        .map(|(x, s)| format!("dim {x}: {s:.1}x"))
        .collect::<Vec<_>>()
        .join(", ");
    // (The batch of `sweeps_dim`.)
    let mut notes = training_notes_at(inp, &quick_full(inp.size, 256, 2048).to_string());
    notes.push("RM1 with its bottom MLP's last width set to the embedding dimension.".into());
    Ok(Outcome {
        csv,
        charts: vec![("speedup".into(), c)],
        table_md: table,
        checks: vec![check(
            "fig17.every-dim",
            desc,
            passes("fig17.every-dim", &all),
        )],
        notes,
    })
}

pub(crate) fn analyse_link(inp: &Inputs) -> Result<Outcome, String> {
    let mut table = Table::new(&[
        csv_col("model", Fmt::Plain),
        md_col("model", Fmt::Plain),
        col("placement", Fmt::Plain, "placement", Fmt::Plain),
        col("link_gbps", Fmt::Plain, "link GB/s", Fmt::Plain),
        col(
            "modelled_ms_per_iteration",
            Fmt::Fixed(4),
            "iteration ms",
            Fmt::Fixed(3),
        ),
        col(
            "gather_reduce_ms",
            Fmt::Fixed(4),
            "forward gather-reduce ms",
            Fmt::Fixed(3),
        ),
        col(
            "relative_to_150",
            Fmt::Fixed(4),
            "of 150 GB/s performance",
            Fmt::Pct(1),
        ),
        chart_col("series"),
    ]);
    let mut c = chart(
        "tcast-nmp performance against the pool link bandwidth",
        "link GB/s",
        "performance relative to 150 GB/s",
        ChartKind::Lines,
    );
    // (model, placement) -> [(link, iteration ms, forward gather-reduce ms)]
    type Points = Vec<(f64, f64, f64)>;
    let mut per: BTreeMap<(String, String), Points> = BTreeMap::new();
    for r in inp.completed("link")? {
        let link: f64 = r
            .param("link_gbps")
            .parse()
            .map_err(|_| "link_gbps is not a number")?;
        let modes = mode_runs(r)?;
        let m = find(&modes, "tcast-nmp").ok_or("no tcast-nmp mode in a link run")?;
        let placement = match r.param("placement") {
            "" => "row-interleaved",
            p => p,
        };
        per.entry((r.param("model").to_string(), placement.to_string()))
            .or_default()
            .push((link, m.iter_ms, m.ms("gather-reduce")));
    }
    // model -> best relative performance at 25 GB/s over placements, and which
    let mut at25: BTreeMap<String, (f64, String)> = BTreeMap::new();
    for ((model, placement), v) in per.iter_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let best = v
            .iter()
            .find(|x| (x.0 - 150.0).abs() < 1e-9)
            .or(v.last())
            .map(|x| x.1)
            .unwrap_or(f64::NAN);
        for &(l, ms, gr) in v.iter() {
            let rel = best / ms;
            table.push(vec![
                model.into(),
                model_label(model).into(),
                placement.into(),
                l.into(),
                ms.into(),
                gr.into(),
                rel.into(),
                format!("{} {placement}", model_label(model)).into(),
            ]);
            if (l - 25.0).abs() < 1e-9 {
                let e = at25
                    .entry(model.clone())
                    .or_insert((f64::NEG_INFINITY, String::new()));
                if rel > e.0 {
                    *e = (rel, placement.clone());
                }
            }
        }
    }
    table.plot(&mut c, "series", "link_gbps", "relative_to_150");
    table.paper_row(&["paper", "", "25", "", "", "99%"]);
    c.hlines.push(("paper at 25 GB/s: 99%".into(), 0.99));
    let mut notes = training_notes(inp);
    notes[0] = format!(
        "`nmpsim train --mode tcast-nmp` per link bandwidth and row placement; the link is modelled (bytes / bandwidth + 1 us per transfer), the pool simulated cycle by cycle in every iteration ({}).",
        inp.train_engine_name()
    );
    notes[1] = "Nothing here is measured: the pool is simulated, and the MLPs, interaction, casting and transfers are modelled (docs/dlrm.md).".into();
    // (Nothing measured: the host's load does not move these numbers.)
    notes.truncate(2);
    notes.push("Row-interleaved placement (the trainer's default, the fastest for the casted gather-reduce) returns, from every rank that looked up any row of a table, a partial sum of every bag (docs/nmp-isa.md), so at these sizes, where every rank is touched, its forward gather-reduce moves 32x the pooled bytes over the link; vector-sliced placement (TensorDIMM's) reduces each slice completely on its rank and returns only the pooled vectors. The paper omits these results (\"for brevity\") and names no placement.".into());
    Ok(Outcome {
        csv: table.csv(),
        charts: vec![("relative".into(), c)],
        table_md: table.md(),
        checks: vec![check(
            "link.25",
            at25.iter()
                .map(|(m, (r, p))| format!("{}: {:.1}% ({p})", model_label(m), 100.0 * r))
                .collect::<Vec<_>>()
                .join(", "),
            passes(
                "link.25",
                &at25.values().map(|(r, _)| 100.0 * r).collect::<Vec<_>>(),
            ),
        )],
        notes,
    })
}
