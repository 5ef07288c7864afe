//! A training run's reports: the text summary (`summary.txt` and the
//! terminal) and `summary.csv`, from the strategies' [`ModeSummary`]s.

use std::path::Path;

use crate::pooltime::{NmpSetup, SimBatches};
use crate::summary::{ModeSummary, RunState};
use crate::trainer::Status;

/// `summary.csv`: one line per strategy.
pub const SUMMARY_CSV: &str = "summary.csv";

/// What the report says of the run besides its summaries.
pub struct ReportHeader<'a> {
    /// The model preset's name.
    pub model: &'a str,
    pub batch: usize,
    pub tables: usize,
    pub dim: usize,
    /// The GPU preset the dense path and casting are modelled on.
    pub gpu: &'a str,
    /// The GPU the dense path was measured on, if any.
    pub device_name: Option<&'a str>,
    /// The NMP pool, when a strategy of the run uses it.
    pub pool: Option<&'a NmpSetup>,
}

/// The run's report: the Fig. 12 breakdown and Fig. 13 throughput tables,
/// each cell labelled with where its time comes from, the host's wall-time
/// shares, the pool's simulated bandwidths and the run directory.
pub fn report_text(h: &ReportHeader, modes: &[ModeSummary], run_dir: &Path) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    // (The pool only where a mode runs on it.)
    let pool = if let Some(nmp) = h.pool {
        format!(
            ", NMP {} x {} {} ({})",
            nmp.ranks,
            nmp.dram()
                .map(|d| d.name)
                .unwrap_or_else(|_| nmp.preset.clone()),
            nmp.placement,
            match nmp.fixed_bandwidth_gbps {
                Some(b) => format!("fixed {b} GB/s, modelled"),
                None => match nmp.sim_batches {
                    SimBatches::All => format!("{} engine, every iteration simulated", nmp.engine),
                    SimBatches::First(n) => format!(
                        "{} engine, {n} simulated iteration(s), then proxy",
                        nmp.engine
                    ),
                },
            }
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "model {} (batch {}, {} tables, dim {}), {}{pool}",
        h.model,
        h.batch,
        h.tables,
        h.dim,
        match h.device_name {
            Some(d) => format!(
                "dense path measured on {d}, the rest of the GPU modelled as {}",
                h.gpu
            ),
            None => format!("GPU modelled as {}", h.gpu),
        },
    );
    // Fig. 12 style: modelled latency breakdown per primitive.
    let mut prims: Vec<String> = Vec::new();
    for m in modes {
        for b in &m.breakdown_ms {
            if !prims.contains(&b.primitive) {
                prims.push(b.primitive.clone());
            }
        }
    }
    let _ = writeln!(
        o,
        "\nLatency breakdown of the modelled system, ms per iteration (Fig. 12):"
    );
    let _ = writeln!(
        o,
        "(meas: measured on this machine; sim: NMP pool simulated cycle by cycle; proxy(it A-B): the bandwidth simulated in iterations A to B applied to\n this batch's bytes; model: modelled; emu: GPU emulation of the pool; hidden: time overlapped with other work, subtracted, so a row adds up to its iteration)"
    );
    if let Some(h) = modes.iter().find_map(|m| m.host.as_deref()) {
        let _ = writeln!(
            o,
            "(model(host {h}): a CPU primitive's time on the modelled host {h} (--host, docs/host.md), not this machine's)"
        );
    }
    // (A column of times, and one of where each came from, per primitive.)
    let mut header = vec!["mode".to_string()];
    let mut left = vec![0];
    for p in &prims {
        header.push(p.clone());
        header.push(String::new());
        left.push(header.len() - 1);
    }
    header.extend(["hidden".into(), "iteration".into()]);
    let mut t = nmpsim_traces::TextTable::new(header).left(&left);
    for m in modes {
        let mut row = vec![m.mode.as_str().to_string()];
        for p in &prims {
            match m.breakdown_ms.iter().find(|b| &b.primitive == p) {
                Some(b) => {
                    row.push(format!("{:.3}", b.ms_per_iteration));
                    row.push(b.label());
                }
                None => row.extend(["-".to_string(), String::new()]),
            }
        }
        // (0 - x, not -x: nothing hidden shows as 0.000, not -0.000.)
        row.push(format!("{:.3}", 0.0 - m.modelled_hidden_ms_per_iteration));
        row.push(format!("{:.3}", m.modelled_ms_per_iteration));
        t.row(row);
    }
    o.push_str(&t.render());
    let _ = writeln!(
        o,
        "\nThroughput (Fig. 13: modelled system; wall: this machine, measured):"
    );
    let mut t = nmpsim_traces::TextTable::new([
        "mode",
        "modelled ms/it",
        "speedup vs base",
        "wall ms/it",
        "wall samples/s",
        "dense GF/s",
        "test AUC",
    ])
    .left(&[0]);
    for m in modes {
        t.row([
            m.mode.as_str().to_string(),
            format!("{:.3}", m.modelled_ms_per_iteration),
            m.speedup_over_baseline_cpu
                .map_or("-".to_string(), |s| format!("{s:.2}x")),
            format!("{:.2}", m.wall_ms_per_iteration),
            format!("{:.0}", m.samples_per_second),
            format!("{:.1}", m.dense_gflops),
            m.final_eval
                .as_ref()
                .and_then(|e| e.auc)
                .map_or("-".to_string(), |a| format!("{a:.4}")),
        ]);
    }
    o.push_str(&t.render());
    let _ = writeln!(
        o,
        "\nShare of this machine's wall time per primitive (measured):"
    );
    for m in modes {
        let parts: Vec<String> = m
            .host_share
            .iter()
            .map(|(k, s)| format!("{k} {:.1}%", 100.0 * s))
            .collect();
        let _ = writeln!(o, "  {:<14} {}", m.mode.as_str(), parts.join(", "));
    }
    let with_calib: Vec<_> = modes
        .iter()
        .filter(|m| !m.nmp_calibration_gbps.is_empty())
        .collect();
    for m in &with_calib {
        let parts: Vec<String> = m
            .nmp_calibration_gbps
            .iter()
            .map(|(k, g)| format!("{k} {g:.1} GB/s"))
            .collect();
        let who = if with_calib.len() > 1 {
            format!(", {}", m.mode.as_str())
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "NMP effective bandwidth (simulated{who}): {}",
            parts.join(", ")
        );
    }
    for m in modes {
        if !m.emulated_raw_ms_per_iteration.is_empty() {
            let parts: Vec<String> = m
                .emulated_raw_ms_per_iteration
                .iter()
                .map(|(k, t)| format!("{k} {t:.3} ms"))
                .collect();
            let _ = writeln!(
                o,
                "GPU time of the emulated pool's kernels before the throttle, {} (measured): {}",
                m.mode.as_str(),
                parts.join(", ")
            );
        }
    }
    let sim_s = crate::pooltime::sim_wall_s();
    if sim_s > 0.0 {
        let _ = writeln!(
            o,
            "Cycle-level DRAM simulation of the pool: {sim_s:.1} s of this machine's wall time (measured; not in wall ms/it)"
        );
    }
    let _ = writeln!(o, "\nrun directory: {}", run_dir.display());
    o
}

/// `summary.csv`'s text: per strategy its status, iterations, wall and
/// modelled times, speed-up, final loss and test AUC (empty where there is
/// none, as `results.json`'s null).
pub fn summary_csv(modes: &[ModeSummary]) -> String {
    const HEADER: [&str; 11] = [
        "mode",
        "status",
        "iterations",
        "wall_ms_per_iteration",
        "samples_per_second",
        "dense_gflops",
        "modelled_ms_per_iteration",
        "modelled_hidden_ms_per_iteration",
        "speedup_over_baseline_cpu",
        "final_loss",
        "test_auc",
    ];
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    // (Writes to memory cannot fail.)
    w.write_record(HEADER).expect("in memory");
    for m in modes {
        w.write_record([
            m.mode.clone(),
            m.status.as_str().to_string(),
            m.iterations.to_string(),
            format!("{:.4}", m.wall_ms_per_iteration),
            format!("{:.1}", m.samples_per_second),
            format!("{:.2}", m.dense_gflops),
            format!("{:.4}", m.modelled_ms_per_iteration),
            format!("{:.4}", m.modelled_hidden_ms_per_iteration),
            m.speedup_over_baseline_cpu
                .map_or(String::new(), |s| format!("{s:.4}")),
            // (Empty for a loss that is not a number, as results.json's null.)
            m.final_loss
                .filter(|l| l.is_finite())
                .map_or(String::new(), |l| format!("{l:.6}")),
            m.final_eval
                .as_ref()
                .and_then(|e| e.auc)
                .map_or(String::new(), |a| format!("{a:.6}")),
        ])
        .expect("in memory");
    }
    String::from_utf8(w.into_inner().expect("in memory")).expect("UTF-8 fields")
}

/// The line a report of a run that has not completed starts with (none for
/// a completed one): how it stands, and the strategies `not_run`.
pub fn status_line(state: RunState, not_run: &[String]) -> Option<String> {
    let word = match state {
        RunState::Ended(Status::Completed) => return None,
        RunState::Running => "in progress (this summary is rewritten after each mode)",
        RunState::Ended(Status::Interrupted) => "interrupted",
        RunState::Ended(Status::Failed) => "failed",
        RunState::Ended(Status::DataExhausted) => "stopped: the data ran out",
    };
    let rest = match (not_run.is_empty(), state) {
        (true, _) => String::new(),
        (false, RunState::Running) => format!("; not run yet: {}", not_run.join(", ")),
        (false, _) => format!("; not run: {}", not_run.join(", ")),
    };
    Some(format!("run {word}{rest}"))
}
