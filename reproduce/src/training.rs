//! The training items' shared reading of `train --mode tcast` runs (as
//! `dlrm`'s [`ModeSummary`]), and Figures 4, 12 and 13: the share of
//! embedding time, the latency breakdown, the end-to-end speed-ups.

use crate::*;

/// The model's CSV column (`rm1`) in a table of the training items.
pub(crate) const MODEL: Col = csv_col("model", Fmt::Plain);
/// The model as the report names it (`RM1`), in a column named `label`.
pub(crate) const MODEL_LABEL: Col = md_col("model", Fmt::Plain).named("label");

/// A training run's modelled iteration, in the CSV.
pub(crate) const MODELLED_MS: Col = csv_col("modelled_ms_per_iteration", Fmt::Fixed(4));
/// A mode's speed-up over baseline-cpu: the CSV's, and the report's `2.50x`.
pub(crate) const SPEEDUP: Col = col(
    "speedup_over_baseline_cpu",
    Fmt::Fixed(4),
    "speedup",
    Fmt::Unit(2, "x"),
);

/// The report's table of `t` (with [`MODEL_LABEL`] and a `mode` column): a
/// row per model and a column per mode, each cell column `value`.
pub(crate) fn model_by_mode(t: &Table, value: &str) -> Table {
    t.pivot(&["label"], "mode", &MODES, value, &[])
}

pub(crate) const MODES: [&str; 4] = ["baseline-cpu", "tcast-cpu", "baseline-nmp", "tcast-nmp"];

/// One mode of one `train --mode tcast` run.
pub(crate) struct ModeRun {
    pub(crate) mode: String,
    pub(crate) iter_ms: f64,
    pub(crate) speedup: f64,
    /// primitive -> ms per iteration
    pub(crate) breakdown: BTreeMap<String, f64>,
    /// primitive -> where it runs (cpu, gpu, nmp)
    pub(crate) placement: BTreeMap<String, String>,
    pub(crate) sources: BTreeMap<String, String>,
    /// stage (forward-embedding, dense, backward-embedding, ...) -> ms per
    /// iteration
    pub(crate) stages: BTreeMap<String, f64>,
    /// resource (cpu, gpu, nmp, host-link, pool-link) -> busy ms per iteration
    pub(crate) busy: BTreeMap<String, f64>,
    /// The pool's simulated energy per iteration, J (0 where none).
    pub(crate) nmp_energy_j: f64,
    /// The strategy's own figures (`ModeSummary::figures`).
    pub(crate) figures: BTreeMap<String, f64>,
    /// The last test: (loss, accuracy as a fraction, samples).
    pub(crate) test: Option<(f64, f64, u64)>,
}

impl ModeRun {
    pub(crate) fn ms(&self, p: &str) -> f64 {
        self.breakdown.get(p).copied().unwrap_or(0.0)
    }
    /// Time per iteration the NMP pool computes (its primitives' time).
    pub(crate) fn nmp_busy_ms(&self) -> f64 {
        self.placement
            .iter()
            .filter(|(_, w)| w.as_str() == "nmp")
            .map(|(p, _)| self.ms(p))
            .sum()
    }
    pub(crate) fn is_nmp(&self) -> bool {
        self.placement.values().any(|w| w == "nmp")
    }
    /// Where the iteration's times came from: every primitive's sources,
    /// each once, in the timeline's order (`measured+simulated+modelled`).
    pub(crate) fn all_sources(&self) -> String {
        let order = [
            "measured",
            "simulated",
            "simulated-proxy",
            "modelled",
            "emulated",
        ];
        let mut seen: Vec<&str> = Vec::new();
        for s in self.sources.values().flat_map(|s| s.split('+')) {
            if !s.is_empty() && !seen.contains(&s) {
                seen.push(s);
            }
        }
        seen.sort_by_key(|s| order.iter().position(|o| o == s).unwrap_or(order.len()));
        seen.join("+")
    }
    /// Busy ms per iteration of a resource: the run's own figure, or (from
    /// an nmpsim that did not report it) the time of the primitives placed
    /// on it.
    pub(crate) fn busy(&self, resource: &str) -> f64 {
        match self.busy.get(resource) {
            Some(ms) => *ms,
            None => self
                .placement
                .iter()
                .filter(|(_, w)| w.as_str() == resource)
                .map(|(p, _)| self.ms(p))
                .sum(),
        }
    }
}

/// The completed modes of a `train` run, read as the trainer's own
/// [`ModeSummary`] (a field the trainer renames or drops is a build error
/// here, or at worst an error naming the field, never a silent zero).
pub(crate) fn mode_runs(r: &RunResult) -> Result<Vec<ModeRun>, String> {
    let modes = r
        .results
        .get("modes")
        .ok_or("no `modes` in the `train` output")?;
    let modes: Vec<ModeSummary> = serde_json::from_value(modes.clone())
        .map_err(|e| format!("the `train` output's `modes`: {e}"))?;
    Ok(modes
        .into_iter()
        .filter(|m| m.status == TrainStatus::Completed)
        .map(|m| ModeRun {
            mode: m.mode.as_str().to_string(),
            iter_ms: m.modelled_ms_per_iteration,
            speedup: m.speedup_over_baseline_cpu.unwrap_or(f64::NAN),
            breakdown: m
                .breakdown_ms
                .iter()
                .map(|b| (b.primitive.clone(), b.ms_per_iteration))
                .collect(),
            sources: m
                .breakdown_ms
                .iter()
                .map(|b| {
                    let s: Vec<&str> = b.sources.iter().map(|x| x.as_str()).collect();
                    (b.primitive.clone(), s.join("+"))
                })
                .collect(),
            placement: m.placement.into_iter().collect(),
            stages: m
                .stages_ms
                .iter()
                .map(|(st, ms)| (st.as_str().to_string(), *ms))
                .collect(),
            busy: m
                .busy_ms_per_iteration
                .iter()
                .map(|(res, ms)| (res.as_str().to_string(), *ms))
                .collect(),
            nmp_energy_j: m.nmp_energy_j_per_iteration,
            test: m
                .final_eval
                .as_ref()
                .map(|e| (e.loss, e.accuracy, e.samples)),
            figures: m.figures,
        })
        .collect())
}

pub(crate) fn find<'a>(ms: &'a [ModeRun], mode: &str) -> Option<&'a ModeRun> {
    ms.iter().find(|m| m.mode == mode)
}

/// (model, modes) of the `models` sweep, in model order.
pub(crate) fn model_runs(inp: &Inputs) -> Result<Vec<(String, Vec<ModeRun>)>, String> {
    inp.completed("models")?
        .into_iter()
        .map(|r| Ok((r.param("model").to_string(), mode_runs(r)?)))
        .collect()
}

pub(crate) fn training_notes(inp: &Inputs) -> Vec<String> {
    training_notes_at(inp, &quick_full(inp.size, 512, 2048).to_string())
}

/// [`training_notes`] of runs at `batch` (a size, or words such as "as swept").
pub(crate) fn training_notes_at(inp: &Inputs, batch: &str) -> Vec<String> {
    vec![
        format!(
            "`nmpsim train --mode tcast`, batch {}, {} rows per table, {} iterations of which the first is warm-up and left out of the means; every iteration's NMP primitives are simulated cycle by cycle ({}, 32 ranks of DDR4-3200, row-interleaved): no reported NMP time is a proxy.",
            batch,
            quick_full(inp.size, "100,000", "1,000,000"),
            quick_full(inp.size, 4, 8),
            inp.train_engine_name()
        ),
        "CPU primitives are measured on this machine (its CPU, not the paper's Xeon); the MLPs, interaction and casting are modelled on a V100 roofline, transfers as bytes over the link's bandwidth plus a fixed latency (docs/dlrm.md). The paper measured a DGX-1 and emulated the NMP pool on a GPU.".into(),
        "Measured CPU times move with the host's load: on a 2-core machine with other work running, one configuration's baseline-cpu iteration has differed by 2x between runs (and so every speedup over it), while simulated and modelled times are the same in every run. Run the training items with nothing else running, and compare speedups only within one run.".into(),
    ]
}

pub(crate) fn analyse_fig4(inp: &Inputs) -> Result<Outcome, String> {
    let models = model_runs(inp)?;
    let mut t = Table::new(&[
        MODEL,
        MODEL_LABEL,
        csv_col("stage", Fmt::Plain),
        csv_col("ms_per_iteration", Fmt::Fixed(4)),
        csv_col("share_pct", Fmt::Fixed(3)),
    ]);
    let pct = |n| Fmt::Unit(n, "%");
    let mut md = Table::new(&[
        md_col("model", Fmt::Plain),
        md_col("forward embedding", pct(1)),
        md_col("backward embedding", pct(1)),
        md_col("MLPs + interaction", pct(2)),
        md_col("transfers", pct(1)),
        md_col("paper (backward / MLPs)", Fmt::Plain),
    ]);
    let mut c = chart(
        "baseline-cpu: share of an iteration per stage",
        "model",
        "% of iteration",
        ChartKind::Bars,
    );
    let mut backward = Vec::new();
    // (model, dense share) for RM1/2 and RM3/4.
    let (mut light, mut heavy) = (Vec::new(), Vec::new());
    for (model, modes) in &models {
        let Some(b) = find(modes, "baseline-cpu") else {
            continue;
        };
        let share = |stage: &str| 100.0 * b.stages.get(stage).copied().unwrap_or(0.0) / b.iter_ms;
        for (stage, ms) in &b.stages {
            t.push(vec![
                model.into(),
                model_label(model).into(),
                stage.into(),
                (*ms).into(),
                (100.0 * ms / b.iter_ms).into(),
            ]);
        }
        let (bw, dense) = (share("backward-embedding"), share("dense"));
        let transfer = share("forward-transfer") + share("backward-transfer");
        backward.push(bw);
        if model == "rm1" || model == "rm2" {
            light.push(dense);
        } else {
            heavy.push(dense);
        }
        md.push(vec![
            model_label(model).into(),
            share("forward-embedding").into(),
            bw.into(),
            dense.into(),
            transfer.into(),
            if model == "rm1" || model == "rm2" {
                "62-92% / <1%".into()
            } else {
                "62-92% / 24%".into()
            },
        ]);
    }
    t.plot(&mut c, "stage", "label", "share_pct");
    let mut notes = training_notes(inp);
    notes.push("Shares of baseline-cpu's modelled iteration (the stages add up to it: nothing overlaps in baseline-cpu). The dense stage is the MLPs and the interaction, forward and backward, modelled on the GPU; the paper's MLP share is of its measured CPU-GPU system.".into());
    Ok(Outcome {
        csv: t.csv(),
        charts: vec![("stages".into(), c)],
        table_md: md.md(),
        checks: vec![
            check(
                "fig4.backward",
                range_pct(&backward),
                passes("fig4.backward", &backward),
            ),
            check(
                "fig4.mlp-light",
                format!("RM1/2 {}", range_pct(&light)),
                passes("fig4.mlp-light", &light),
            ),
            check(
                "fig4.mlp-heavy",
                format!("RM3/4 {} (mean {:.1}%)", range_pct(&heavy), mean(&heavy)),
                !heavy.is_empty() && passes("fig4.mlp-heavy", &[mean(&heavy)]),
            ),
        ],
        notes,
    })
}

/// `lo-hi%` of shares in percent.
pub(crate) fn range_pct(xs: &[f64]) -> String {
    if xs.is_empty() {
        return "none".into();
    }
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.1}-{hi:.1}%")
}

pub(crate) fn analyse_fig12(inp: &Inputs) -> Result<Outcome, String> {
    let models = model_runs(inp)?;
    let mut t = Table::new(&[
        MODEL,
        csv_col("mode", Fmt::Plain),
        csv_col("primitive", Fmt::Plain),
        csv_col("ms_per_iteration", Fmt::Fixed(4)),
        csv_col("runs_on", Fmt::Plain),
        csv_col("source", Fmt::Plain),
    ]);
    let mut md = Table::new(&[
        md_col("model", Fmt::Plain),
        md_col("gather-reduce (CPU) ms", Fmt::Fixed(2)),
        md_col("expand-coalesce (CPU) ms", Fmt::Fixed(2)),
        md_col("cast + casted GR (CPU) ms", Fmt::Fixed(2)),
        md_col("cast + casted GR (NMP) ms", Fmt::Fixed(2)),
        md_col(
            "CPU gain (expand-coalesce / cast + casted GR)",
            Fmt::Unit(2, "x"),
        ),
        md_col("NMP gain (casted GR, CPU / NMP)", Fmt::Unit(2, "x")),
    ]);
    let mut c = chart(
        "Gradient coalescing: expand-coalesce vs casting + casted gather-reduce",
        "model",
        "ms per iteration",
        ChartKind::Bars,
    );
    c.log_y = true;
    let mut cpu_gain = Vec::new();
    let mut nmp_gain = Vec::new();
    for (model, modes) in &models {
        for m in modes {
            for (p, ms) in &m.breakdown {
                t.push(vec![
                    model.into(),
                    (&m.mode).into(),
                    p.into(),
                    (*ms).into(),
                    m.placement
                        .get(p)
                        .cloned()
                        .unwrap_or_else(|| "gpu/link".into())
                        .into(),
                    m.sources.get(p).cloned().unwrap_or_default().into(),
                ]);
            }
        }
        let (Some(bc), Some(tc), Some(tn)) = (
            find(modes, "baseline-cpu"),
            find(modes, "tcast-cpu"),
            find(modes, "tcast-nmp"),
        ) else {
            continue;
        };
        let ec = bc.ms("expand-coalesce");
        let cast_cpu = tc.ms("casting") + tc.ms("casted-gather-reduce");
        let cast_nmp = tn.ms("casting") + tn.ms("casted-gather-reduce");
        // The paper's NMP gain is the casted gather-reduce's alone (casting
        // takes the same time in both).
        let (cgr_cpu, cgr_nmp) = (tc.ms("casted-gather-reduce"), tn.ms("casted-gather-reduce"));
        let x = XValue::Cat(model_label(model));
        push_point(&mut c, "expand-coalesce (CPU)", x.clone(), ec);
        push_point(&mut c, "casting + casted GR (CPU)", x.clone(), cast_cpu);
        push_point(&mut c, "casting + casted GR (NMP)", x, cast_nmp);
        cpu_gain.push(ec / cast_cpu);
        nmp_gain.push(cgr_cpu / cgr_nmp);
        md.push(vec![
            model_label(model).into(),
            bc.ms("gather-reduce").into(),
            ec.into(),
            cast_cpu.into(),
            cast_nmp.into(),
            (ec / cast_cpu).into(),
            (cgr_cpu / cgr_nmp).into(),
        ]);
    }
    md.paper_row(&["paper", "", "", "", "", "1.1-9.5x", "1.3-6.1x"]);
    let mut notes = training_notes(inp);
    notes.push("Casting runs on the GPU beside the forward gather-reduce and is hidden there; it is counted here anyway, as the paper's Figure 12 does.".into());
    notes.push("The NMP gain (the casted gather-reduce's, as the paper's 1.3-6.1x: casting takes the same time on both) divides a CPU time measured on this machine (whatever its cores; the paper's was a server Xeon) by the simulated 32-rank pool's time (819.2 GB/s peak): the fewer the measuring CPU's cores, the larger the gain. Where it falls outside the paper's range, that is the reason to look at first.".into());
    Ok(Outcome {
        csv: t.csv(),
        charts: vec![("coalescing".into(), c)],
        table_md: md.md(),
        checks: vec![
            check(
                "fig12.cpu",
                range(&cpu_gain),
                passes("fig12.cpu", &cpu_gain),
            ),
            check(
                "fig12.nmp",
                range(&nmp_gain),
                passes("fig12.nmp", &nmp_gain),
            ),
        ],
        notes,
    })
}

pub(crate) fn analyse_fig13(inp: &Inputs) -> Result<Outcome, String> {
    let models = model_runs(inp)?;
    let mut t = Table::new(&[
        MODEL,
        MODEL_LABEL,
        csv_col("mode", Fmt::Plain),
        MODELLED_MS,
        SPEEDUP,
    ]);
    let mut c = chart(
        "End-to-end speedup over baseline-cpu",
        "model",
        "speedup",
        ChartKind::Bars,
    );
    let mut tc = Vec::new();
    let mut bn_vs_tc = Vec::new();
    let mut tn = Vec::new();
    let mut nmp_beats = true;
    for (model, modes) in &models {
        for mode in MODES {
            let Some(m) = find(modes, mode) else {
                continue;
            };
            t.push(vec![
                model.into(),
                model_label(model).into(),
                mode.into(),
                m.iter_ms.into(),
                m.speedup.into(),
            ]);
        }
        if let (Some(a), Some(b), Some(d)) = (
            find(modes, "tcast-cpu"),
            find(modes, "baseline-nmp"),
            find(modes, "tcast-nmp"),
        ) {
            tc.push(a.speedup);
            bn_vs_tc.push(b.speedup / a.speedup);
            tn.push(d.speedup);
            // (Faster than baseline-cpu, whose speedup is 1, too.)
            nmp_beats &= d.speedup > a.speedup && d.speedup > b.speedup && d.speedup > 1.0;
        } else {
            // A model without every mode cannot show which is fastest.
            nmp_beats = false;
        }
    }
    t.plot(&mut c, "mode", "label", "speedup_over_baseline_cpu");
    let mut md = model_by_mode(&t, "speedup_over_baseline_cpu");
    md.paper_row(&[
        "paper",
        "1.00x",
        "1.2-1.6x",
        "about 15% below tcast-cpu",
        "2.0-15x (mean 6.9x)",
    ]);
    c.hlines.push(("1x (no speedup)".into(), 1.0));
    let bn_mean = mean(&bn_vs_tc);
    Ok(Outcome {
        csv: t.csv(),
        charts: vec![("speedup".into(), c)],
        table_md: md.md(),
        checks: vec![
            check(
                "fig13.tcast-cpu",
                range(&tc),
                passes("fig13.tcast-cpu", &tc),
            ),
            check(
                "fig13.baseline-nmp",
                format!("{bn_mean:.2} (mean of baseline-nmp / tcast-cpu speed)"),
                !bn_vs_tc.is_empty() && passes("fig13.baseline-nmp", &[bn_mean]),
            ),
            check(
                "fig13.tcast-nmp",
                range(&tn),
                passes("fig13.tcast-nmp", &tn),
            ),
            check(
                "fig13.tcast-nmp-mean",
                format!("mean {:.1}x", mean(&tn)),
                !tn.is_empty() && passes("fig13.tcast-nmp-mean", &[mean(&tn)]),
            ),
            check(
                "fig13.fastest",
                if nmp_beats {
                    "fastest for every model".into()
                } else {
                    "not the fastest for every model".into()
                },
                !tn.is_empty() && nmp_beats,
            ),
        ],
        notes: training_notes(inp),
    })
}

/// The columns every accuracy item's table starts with: the seed, the test
/// samples, baseline-cpu's accuracy; and baseline-cpu's test loss.
pub(crate) const SEED: Col = col("seed", Fmt::Plain, "seed", Fmt::Plain);
pub(crate) const TEST_SAMPLES: Col = col("test_samples", Fmt::Plain, "test samples", Fmt::Plain);
pub(crate) const BASE_ACCURACY: Col = col(
    "baseline_cpu_accuracy",
    Fmt::Fixed(6),
    "baseline-cpu accuracy",
    Fmt::Pct(3),
);
pub(crate) const BASE_TEST_LOSS: Col = col(
    "baseline_cpu_test_loss",
    Fmt::Fixed(6),
    "baseline-cpu test loss",
    Fmt::Fixed(5),
);

/// One seed's run of baseline-cpu and another mode: each one's last test
/// (loss, accuracy as a fraction), its test samples, the mode's figures.
pub(crate) struct SeedTest {
    pub(crate) seed: String,
    pub(crate) samples: u64,
    pub(crate) base: (f64, f64),
    pub(crate) mode: (f64, f64),
    pub(crate) figures: BTreeMap<String, f64>,
}

/// The runs of `sweep` (one per seed, sorted by seed), each of baseline-cpu
/// and `mode`.
pub(crate) fn seed_tests(inp: &Inputs, sweep: &str, mode: &str) -> Result<Vec<SeedTest>, String> {
    let mut out = Vec::new();
    for r in inp.completed(sweep)? {
        let modes = mode_runs(r)?;
        let test = |name: &str| -> Result<(f64, f64, u64), String> {
            find(&modes, name)
                .ok_or_else(|| format!("no {name} mode in a {sweep} run"))?
                .test
                .ok_or_else(|| format!("{name} has no test in a {sweep} run"))
        };
        let (bl, ba, n) = test("baseline-cpu")?;
        let (ml, ma, _) = test(mode)?;
        out.push(SeedTest {
            seed: r.param("seed").to_string(),
            samples: n,
            base: (bl, ba),
            mode: (ml, ma),
            figures: find(&modes, mode).expect("found above").figures.clone(),
        });
    }
    out.sort_by(|a, b| a.seed.cmp(&b.seed));
    Ok(out)
}

/// What one test sample is worth against a threshold of `points`.
pub(crate) fn resolution_note(runs: &[SeedTest], points: f64) -> String {
    let n = runs.iter().map(|r| r.samples).min().unwrap_or(0);
    format!(
        "Accuracy is counted on {n} test samples or more: one sample is {:.4} points, so the {points} points of the threshold is {:.1} samples here.",
        100.0 / n.max(1) as f64,
        points * n as f64 / 100.0
    )
}

/// The seeds, joined for a note.
pub(crate) fn seeds_text(runs: &[SeedTest]) -> String {
    runs.iter()
        .map(|r| r.seed.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
