//! Figures 14 and 15: energy per iteration and the pool's utilisation.

use crate::*;

pub(crate) fn analyse_fig14(inp: &Inputs) -> Result<Outcome, String> {
    let models = model_runs(inp)?;
    let pw = &inp.power;
    let mut t = Table::new(&[
        MODEL,
        MODEL_LABEL,
        csv_col("mode", Fmt::Plain),
        csv_col("cpu_j_per_iteration", Fmt::Fixed(6)),
        csv_col("gpu_j_per_iteration", Fmt::Fixed(6)),
        csv_col("pool_simulated_j_per_iteration", Fmt::Fixed(6)),
        csv_col("pool_background_j_per_iteration", Fmt::Fixed(6)),
        csv_col("total_j_per_iteration", Fmt::Fixed(6)),
        col("normalised", Fmt::Fixed(4), "normalised", Fmt::Fixed(2)),
    ]);
    let mut c = chart(
        "Energy per iteration, normalised to baseline-cpu",
        "model",
        "energy (baseline-cpu = 1)",
        ChartKind::Bars,
    );
    let mut tn_lowest = true;
    let mut tc_below_bn = true;
    // NMP modes whose run gave no simulated pool energy (a fixed bandwidth).
    let mut no_pool_energy = Vec::new();
    // The models where a claim fails.
    let (mut not_lowest, mut tc_above) = (Vec::new(), Vec::new());
    let mut any = false;
    for (model, modes) in &models {
        let energy = |m: &ModeRun| -> Energy { energy_of(pw, m) };
        let Some(base) = find(modes, "baseline-cpu").map(|m| energy(m).total()) else {
            continue;
        };
        let mut e_of = BTreeMap::new();
        for mode in MODES {
            let Some(m) = find(modes, mode) else {
                continue;
            };
            let e = energy(m);
            let total = e.total();
            if m.is_nmp() && m.nmp_energy_j <= 0.0 {
                no_pool_energy.push(format!("{} {mode}", model_label(model)));
            }
            e_of.insert(mode, total);
            t.push(vec![
                model.into(),
                model_label(model).into(),
                mode.into(),
                e.cpu.into(),
                e.gpu.into(),
                e.pool_active.into(),
                e.pool_idle.into(),
                total.into(),
                (total / base).into(),
            ]);
        }
        if let (Some(tc), Some(bn), Some(tn)) = (
            e_of.get("tcast-cpu"),
            e_of.get("baseline-nmp"),
            e_of.get("tcast-nmp"),
        ) {
            any = true;
            if !e_of.values().all(|e| *tn <= *e) {
                tn_lowest = false;
                not_lowest.push(model_label(model));
            }
            if tc >= bn {
                tc_below_bn = false;
                tc_above.push(model_label(model));
            }
        }
    }
    t.plot(&mut c, "mode", "label", "normalised");
    let mut md = model_by_mode(&t, "normalised");
    md.paper_row(&["paper", "1", "below baseline-nmp", "", "lowest"]);
    let mut notes = training_notes(inp);
    notes.push(format!(
        "Energy from its sources: the CPU at {} W while the timeline has it busy and {} W otherwise, the GPU at {} W busy and {} W otherwise (busy: the time of the primitives placed on it, per iteration, from `busy_ms_per_iteration`); in the NMP modes the pool's energy while its primitives run is the DRAM engines' simulated energy of those primitives (commands, and background until the slowest rank is done, plus the cores' ALU, buffer and link energy: `nmp_energy_j_per_iteration`), and {} ranks at {:.2} W (precharge standby) for the rest of the iteration.",
        pw.cpu_active_w, pw.cpu_idle_w, pw.gpu_active_w, pw.gpu_idle_w, pw.ranks, pw.rank_idle_w
    ));
    notes.push(format!(
        "Powers and their sources: {}.",
        pw.sources.join("; ")
    ));
    notes.push("The paper measured CPU and GPU power (powerstat, nvidia-smi) and used Micron's calculator for 32 ranks of 128 GB LR-DIMMs; NMP logic power is negligible in both. As in the paper, the CPU modes' host DRAM is not charged (the sockets' power does not include their DIMMs).".into());
    notes.push("What still follows from time alone: with a CPU and GPU that draw their active power whenever busy, a mode that keeps the host busy for longer costs more; the checks can now fail for a mode that is faster but keeps a higher-power resource busier, or whose pool moves more DRAM energy, which Figure 13's checks cannot.".into());
    if !no_pool_energy.is_empty() {
        notes.push(format!(
            "No simulated pool energy for {} (a fixed NMP bandwidth, or a run from an older nmpsim): their pool energy while computing is counted as 0.",
            no_pool_energy.join(", ")
        ));
    }
    Ok(Outcome {
        csv: t.csv(),
        charts: vec![("energy".into(), c)],
        table_md: md.md(),
        checks: vec![
            check(
                "fig14.lowest",
                if tn_lowest {
                    "lowest for every model".into()
                } else {
                    format!("not lowest for {}", not_lowest.join(", "))
                },
                any && tn_lowest,
            ),
            check(
                "fig14.tcast-cpu",
                if tc_below_bn {
                    "below for every model".into()
                } else {
                    format!("not below for {}", tc_above.join(", "))
                },
                any && tc_below_bn,
            ),
        ],
        notes,
    })
}

/// One mode's energy per iteration, J.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Energy {
    pub(crate) cpu: f64,
    pub(crate) gpu: f64,
    /// The pool while its primitives run: simulated.
    pub(crate) pool_active: f64,
    /// The pool for the rest of the iteration: background power.
    pub(crate) pool_idle: f64,
}

impl Energy {
    pub(crate) fn total(&self) -> f64 {
        self.cpu + self.gpu + self.pool_active + self.pool_idle
    }
}

/// A mode's energy per iteration: each resource's busy time at its active
/// power and the rest of the iteration at its idle power; the pool's own
/// simulated energy while it computes.
pub(crate) fn energy_of(pw: &PowerModel, m: &ModeRun) -> Energy {
    let split = |busy: f64, active: f64, idle: f64| {
        let busy = busy.clamp(0.0, m.iter_ms);
        (active * busy + idle * (m.iter_ms - busy)) * 1e-3
    };
    let (pool_active, pool_idle) = if m.is_nmp() {
        let busy = m.nmp_busy_ms().min(m.iter_ms);
        (
            m.nmp_energy_j,
            pw.ranks as f64 * pw.rank_idle_w * (m.iter_ms - busy) * 1e-3,
        )
    } else {
        (0.0, 0.0)
    };
    Energy {
        cpu: split(m.busy("cpu"), pw.cpu_active_w, pw.cpu_idle_w),
        gpu: split(m.busy("gpu"), pw.gpu_active_w, pw.gpu_idle_w),
        pool_active,
        pool_idle,
    }
}

pub(crate) fn analyse_fig15(inp: &Inputs) -> Result<Outcome, String> {
    let models = model_runs(inp)?;
    let mut t = Table::new(&[
        MODEL,
        MODEL_LABEL,
        csv_col("mode", Fmt::Plain),
        csv_col("nmp_busy_ms", Fmt::Fixed(4)),
        csv_col("iteration_ms", Fmt::Fixed(4)),
        col(
            "utilisation_pct",
            Fmt::Fixed(3),
            "utilisation",
            Fmt::Unit(1, "%"),
        ),
        md_col("paper (baseline / tcast)", Fmt::Plain).named("paper"),
    ]);
    let mut c = chart(
        "NMP utilisation",
        "model",
        "pool busy (% of iteration)",
        ChartKind::Bars,
    );
    // Utilisation (%) per mode, for RM1/2 and RM3/4.
    let (mut tn_light, mut tn_heavy, mut bn_light, mut bn_heavy) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Per model with both modes: tcast-nmp keeps the pool busier (compared
    // model by model; a model missing a mode cannot support the claim).
    let mut higher = !models.is_empty();
    for (model, modes) in &models {
        let paper = if model == "rm1" || model == "rm2" {
            "6.5% / 92%"
        } else {
            "8.5% / 44%"
        };
        match (find(modes, "tcast-nmp"), find(modes, "baseline-nmp")) {
            (Some(t), Some(b)) => {
                higher &= t.nmp_busy_ms() / t.iter_ms > b.nmp_busy_ms() / b.iter_ms;
            }
            _ => higher = false,
        }
        for mode in ["baseline-nmp", "tcast-nmp"] {
            let Some(m) = find(modes, mode) else {
                continue;
            };
            let u = 100.0 * m.nmp_busy_ms() / m.iter_ms;
            t.push(vec![
                model.into(),
                model_label(model).into(),
                mode.into(),
                m.nmp_busy_ms().into(),
                m.iter_ms.into(),
                u.into(),
                paper.into(),
            ]);
            let light = model == "rm1" || model == "rm2";
            match (mode == "tcast-nmp", light) {
                (true, true) => tn_light.push(u),
                (true, false) => tn_heavy.push(u),
                (false, true) => bn_light.push(u),
                (false, false) => bn_heavy.push(u),
            }
        }
    }
    t.plot(&mut c, "mode", "label", "utilisation_pct");
    Ok(Outcome {
        csv: t.csv(),
        charts: vec![("utilisation".into(), c)],
        table_md: t
            .pivot(
                &["label"],
                "mode",
                &["baseline-nmp", "tcast-nmp"],
                "utilisation_pct",
                &["paper"],
            )
            .md(),
        checks: {
            let group = |id: &str, xs: &[f64], what: &str| {
                check(
                    id,
                    if xs.is_empty() {
                        format!("no {what} run")
                    } else {
                        format!("{what} mean {:.1}% ({})", mean(xs), range_pct(xs))
                    },
                    !xs.is_empty() && passes(id, &[mean(xs)]),
                )
            };
            vec![
                check(
                    "fig15.busier",
                    if higher {
                        "busier for every model".into()
                    } else {
                        "not busier for every model".into()
                    },
                    higher,
                ),
                group("fig15.tcast-light", &tn_light, "RM1/2"),
                group("fig15.tcast-heavy", &tn_heavy, "RM3/4"),
                group("fig15.baseline-light", &bn_light, "RM1/2"),
                group("fig15.baseline-heavy", &bn_heavy, "RM3/4"),
            ]
        },
        notes: {
            let mut n = training_notes(inp);
            n.push("Utilisation = time per iteration of the primitives placed on the pool (simulated) over the modelled iteration time. A primitive's time includes the cycles it waits for its outputs to drain over the host link: under row-interleaved placement (the default) the forward gather-reduce is link-bound (Table I: about 63 GB/s effective against over 700 GB/s drawn from the ranks), so the pool counts as busy while it waits on the link, and a faster link lowers the figure with the same DRAM work.".into());
            n
        },
    })
}
