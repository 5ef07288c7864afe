//! A training run's results as types: the sums over a mode's iterations
//! ([`ModeAgg`]), each mode's summary ([`ModeSummary`]) and the run's
//! ([`TrainSummary`], `results.json` of `nmpsim train`). They serialise to
//! the JSON a run writes and deserialise from it, so a reader such as
//! `nmpsim reproduce` can hold the same fields the run wrote.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::timeline::{Resource, Source, Stage};
use crate::trainer::{EvalRecord, IterRecord, Status};

/// Sums over a mode's iterations, from which [`summarize`] makes its
/// [`ModeSummary`].
#[derive(Default, Clone, Debug, Serialize)]
pub struct ModeAgg {
    pub iterations: u64,
    pub samples: u64,
    pub wall_ns: f64,
    pub iteration_ns: f64,
    pub hidden_ns: f64,
    pub host: Vec<(String, f64)>,
    /// (primitive, sources, ns) of the modelled iteration.
    pub primitives: Vec<(String, Vec<Source>, f64)>,
    pub stages: Vec<(Stage, f64)>,
    /// Busy ns of each resource (the sum of its events).
    pub busy: Vec<(Resource, f64)>,
    /// The NMP pool's simulated energy, pJ (its primitives' events).
    pub nmp_energy_pj: f64,
    pub last_loss: f64,
    pub evals: Vec<EvalRecord>,
}

/// The resources whose busy time the summary reports.
pub const RESOURCES: [Resource; 5] = [
    Resource::Cpu,
    Resource::Gpu,
    Resource::Nmp,
    Resource::HostLink,
    Resource::PoolLink,
];

impl ModeAgg {
    /// Adds one iteration's record.
    pub fn record(&mut self, r: &IterRecord) {
        self.iterations += 1;
        self.samples += r.batch_size;
        self.wall_ns += r.wall_ns;
        self.iteration_ns += r.iteration_ns;
        self.hidden_ns += r.timeline.hidden_ns();
        self.last_loss = r.loss;
        for (k, v) in &r.host.entries {
            add_to(&mut self.host, k.as_str(), *v);
        }
        for e in &r.timeline.events {
            match self
                .primitives
                .iter_mut()
                .find(|(n, _, _)| *n == e.primitive)
            {
                Some((_, s, t)) => {
                    *t += e.time_ns;
                    if !s.contains(&e.source) {
                        s.push(e.source);
                        s.sort();
                    }
                }
                None => self
                    .primitives
                    .push((e.primitive.clone(), vec![e.source], e.time_ns)),
            }
        }
        for res in RESOURCES {
            add_to(&mut self.busy, &res, r.timeline.busy_ns(res));
        }
        self.nmp_energy_pj += r.timeline.energy_pj();
        for st in Stage::ALL {
            add_to(&mut self.stages, &st, r.timeline.stage_ns(st));
        }
    }
}

/// Adds `x` to key `k`'s total, a new entry (in order of first sight) if
/// `k` has none yet.
fn add_to<K, Q>(v: &mut Vec<(K, f64)>, k: &Q, x: f64)
where
    K: std::borrow::Borrow<Q>,
    Q: PartialEq + ToOwned<Owned = K> + ?Sized,
{
    match v.iter_mut().find(|(n, _)| n.borrow() == k) {
        Some((_, t)) => *t += x,
        None => v.push((k.to_owned(), x)),
    }
}

/// Per-mode results in the summary (`results.json`'s `modes`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModeSummary {
    /// The strategy's registered name ([`crate::strategy`]).
    pub mode: String,
    pub status: Status,
    pub placement: Vec<(String, String)>,
    /// Iterations the per-iteration figures average over.
    pub iterations: u64,
    /// Iterations at the start left out of them (`--warmup-iters`).
    pub warmup_iterations: u64,
    pub samples: u64,
    /// This machine (measured).
    pub wall_ms_per_iteration: f64,
    pub samples_per_second: f64,
    pub host_share: Vec<(String, f64)>,
    pub dense_gflops: f64,
    /// The modelled system (Fig. 9 composition).
    pub modelled_ms_per_iteration: f64,
    pub modelled_hidden_ms_per_iteration: f64,
    pub modelled_samples_per_second: f64,
    pub breakdown_ms: Vec<Breakdown>,
    pub stages_ms: Vec<(Stage, f64)>,
    /// Per resource, the time it is busy per iteration (its events' times
    /// added up): what the energy model charges at active power.
    pub busy_ms_per_iteration: Vec<(Resource, f64)>,
    /// The NMP pool's simulated energy per iteration (DRAM commands and
    /// background while its primitives run, ALU, buffers, link), J; 0 for
    /// the CPU modes and for a fixed `--nmp-bandwidth`, which models none.
    pub nmp_energy_j_per_iteration: f64,
    pub speedup_over_baseline_cpu: Option<f64>,
    /// The last iteration's loss; `None` when no iteration ran.
    pub final_loss: Option<f64>,
    pub final_eval: Option<EvalRecord>,
    pub nmp_calibration_gbps: Vec<(String, f64)>,
    /// With `--device cuda`: the raw GPU time of each emulated NMP primitive
    /// (its kernels before the throttle), per iteration; the emulated times
    /// are in `breakdown_ms` (source `emulated`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emulated_raw_ms_per_iteration: Vec<(String, f64)>,
    /// The modelled host whose model gives the CPU primitives' times
    /// (`--host`): its name; `None` where they are measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The strategy's own figures (FAE's and SCARS's hot set, their
    /// mini-batches and copies): name, value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<(String, String)>,
    /// The strategy's own figures as numbers, by name (cDLRM's hit rate,
    /// overheads, bytes): a sweep's `results.csv` gets a column of each.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, f64>,
}

/// Host-time entries that hold the raw GPU time of an emulated primitive.
const GPU_RAW: &str = " gpu-raw";

/// One primitive's time per iteration, and where it came from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Breakdown {
    pub primitive: String,
    pub ms_per_iteration: f64,
    pub sources: Vec<Source>,
    /// Where `sources` holds `simulated-proxy`: the iterations (first and
    /// last, 0-based) whose simulated bandwidth the proxy applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_of_iterations: Option<(u64, u64)>,
    /// Where `sources` holds `modelled-host`: the host the model describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Breakdown {
    /// The table's label of where the time came from: `meas`, `sim`,
    /// `proxy(it 0-1)`, `model(host dgx1)`, ... joined by `+`.
    pub fn label(&self) -> String {
        self.sources
            .iter()
            .map(|x| match (x, self.proxy_of_iterations) {
                (Source::SimulatedProxy, Some((a, b))) if a == b => format!("proxy(it {a})"),
                (Source::SimulatedProxy, Some((a, b))) => format!("proxy(it {a}-{b})"),
                (Source::ModelledHost, _) if self.host.is_some() => {
                    format!("model(host {})", self.host.as_deref().unwrap_or_default())
                }
                (x, _) => x.short().to_string(),
            })
            .collect::<Vec<_>>()
            .join("+")
    }
}

/// Where the run stands when a summary is written: after each mode it is
/// `running` (the modes left are listed), at the end the run's status.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunState {
    Running,
    Ended(Status),
}

impl Serialize for RunState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RunState::Running => s.serialize_str("running"),
            RunState::Ended(st) => st.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for RunState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == "running" {
            return Ok(RunState::Running);
        }
        Status::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&s))
            .map(RunState::Ended)
    }
}

/// A training run's results (`results.json`'s `results` of `nmpsim train`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TrainSummary {
    pub status: RunState,
    /// The modes of `--mode` without a summary (yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modes_not_run: Vec<String>,
    pub model: String,
    pub batch: usize,
    pub gpu: String,
    /// Where the dense path ran: `cpu` (its GPU time modelled on `gpu`) or
    /// `cuda` (measured on `device_name`).
    pub device: String,
    pub device_name: Option<String>,
    pub modes: Vec<ModeSummary>,
    pub simulation_wall_s: f64,
    pub run_dir: String,
}

/// Each mode's modelled speed-up over the baseline's
/// ([`crate::strategy::BASELINE`]), where both have a modelled iteration
/// time (none without a baseline summary).
pub fn fill_speedups(modes: &mut [ModeSummary]) {
    let base = modes
        .iter()
        .find(|m| m.mode == crate::strategy::BASELINE)
        .map(|m| m.modelled_ms_per_iteration);
    for m in modes.iter_mut() {
        m.speedup_over_baseline_cpu = base
            .filter(|b| *b > 0.0 && m.modelled_ms_per_iteration > 0.0)
            .map(|b| b / m.modelled_ms_per_iteration);
    }
}

/// `samples` per second of `ns` nanoseconds; 0 when no time passed.
fn per_second(samples: u64, ns: f64) -> f64 {
    if ns > 0.0 {
        samples as f64 / (ns * 1e-9)
    } else {
        0.0
    }
}

/// A mode's summary from its sums; `warmup_iterations` and
/// `speedup_over_baseline_cpu` are left for the caller ([`fill_speedups`]).
pub fn summarize(
    mode: impl Into<String>,
    status: Status,
    placement: Vec<(String, String)>,
    agg: &ModeAgg,
    dense_flops_per_sample: f64,
    calib: Vec<(String, f64)>,
) -> ModeSummary {
    let n = agg.iterations.max(1) as f64;
    let host: Vec<&(String, f64)> = agg
        .host
        .iter()
        .filter(|(k, _)| !k.ends_with(GPU_RAW))
        .collect();
    let host_total: f64 = host.iter().map(|(_, t)| t).sum();
    let mlp_ns = agg
        .host
        .iter()
        .find(|(k, _)| k == "mlp+interaction")
        .map_or(0.0, |(_, t)| *t);
    ModeSummary {
        mode: mode.into(),
        status,
        placement,
        iterations: agg.iterations,
        warmup_iterations: 0,
        samples: agg.samples,
        wall_ms_per_iteration: agg.wall_ns / n / 1e6,
        samples_per_second: per_second(agg.samples, agg.wall_ns),
        host_share: host
            .iter()
            .map(|(k, t)| {
                (
                    k.clone(),
                    if host_total > 0.0 {
                        t / host_total
                    } else {
                        0.0
                    },
                )
            })
            .collect(),
        dense_gflops: if mlp_ns > 0.0 {
            dense_flops_per_sample * agg.samples as f64 / mlp_ns
        } else {
            0.0
        },
        modelled_ms_per_iteration: agg.iteration_ns / n / 1e6,
        modelled_hidden_ms_per_iteration: agg.hidden_ns / n / 1e6,
        modelled_samples_per_second: per_second(agg.samples, agg.iteration_ns),
        breakdown_ms: agg
            .primitives
            .iter()
            .map(|(p, s, t)| Breakdown {
                primitive: p.clone(),
                ms_per_iteration: t / n / 1e6,
                sources: s.clone(),
                proxy_of_iterations: None,
                host: None,
            })
            .collect(),
        stages_ms: agg.stages.iter().map(|(s, t)| (*s, t / n / 1e6)).collect(),
        busy_ms_per_iteration: agg.busy.iter().map(|(r, t)| (*r, t / n / 1e6)).collect(),
        nmp_energy_j_per_iteration: agg.nmp_energy_pj / n * 1e-12,
        speedup_over_baseline_cpu: None,
        final_loss: (agg.iterations > 0).then_some(agg.last_loss),
        final_eval: agg.evals.last().cloned(),
        nmp_calibration_gbps: calib,
        emulated_raw_ms_per_iteration: agg
            .host
            .iter()
            .filter_map(|(k, t)| {
                k.strip_suffix(GPU_RAW)
                    .map(|p| (p.to_string(), t / n / 1e6))
            })
            .collect(),
        host: None,
        notes: Vec::new(),
        figures: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_back_as_written() {
        let mut modes: Vec<ModeSummary> = crate::SystemMode::ALL
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let agg = ModeAgg {
                    iterations: 4,
                    samples: 64,
                    wall_ns: 8e6,
                    iteration_ns: 4e6 / (i + 1) as f64,
                    primitives: vec![("scatter".into(), vec![Source::Measured], 2e6)],
                    host: vec![("scatter".into(), 1e6), ("scatter gpu-raw".into(), 5e5)],
                    ..ModeAgg::default()
                };
                summarize(
                    m.as_str(),
                    Status::Completed,
                    Vec::new(),
                    &agg,
                    10.0,
                    Vec::new(),
                )
            })
            .collect();
        fill_speedups(&mut modes);
        assert_eq!(modes[3].speedup_over_baseline_cpu, Some(4.0));
        assert_eq!(
            modes[0].emulated_raw_ms_per_iteration,
            vec![("scatter".to_string(), 0.125)]
        );
        for status in [RunState::Running, RunState::Ended(Status::Interrupted)] {
            let s = TrainSummary {
                status,
                modes_not_run: Vec::new(),
                model: "tiny".into(),
                batch: 16,
                gpu: "v100".into(),
                device: "cpu".into(),
                device_name: None,
                modes: modes.clone(),
                simulation_wall_s: 0.5,
                run_dir: "runs/x".into(),
            };
            let json = serde_json::to_string(&s).unwrap();
            let back: TrainSummary = serde_json::from_str(&json).unwrap();
            assert_eq!(back, s);
        }
        let bad = serde_json::from_str::<RunState>("\"paused\"").unwrap_err();
        assert!(bad.to_string().contains("paused"), "{bad}");
    }
}
