//! A DRAM run as library code: the requests of a [`RequestSource`] through
//! one or more engines, each engine's statistics, how they agree, and on
//! request every command held to the JEDEC timing rules
//! ([`run_engine`]). `nmpsim dram run` maps its flags to these, shows the
//! progress and writes the run directory; [`RunResults`] is its
//! `results.json` and reads back as written.
//!
//! ```
//! use nmpsim_sim::run::{RequestSource, RunResults, run_engine};
//! use nmpsim_sim::source::{StreamKind, StreamSpec};
//! use nmpsim_sim::{DramConfig, EngineKind, RunOptions};
//! let cfg = DramConfig::preset("DDR4-3200-x8").unwrap();
//! let source = RequestSource::Stream(StreamSpec {
//!     kind: StreamKind::Random,
//!     requests: 2000,
//!     write_fraction: 0.25,
//!     seed: 1,
//!     base: 0,
//!     footprint_bytes: None,
//! });
//! let (requests, _len) = source.open(&cfg).unwrap();
//! let opts = RunOptions { window: 32, ..RunOptions::default() };
//! let (stats, check) = run_engine(EngineKind::Native, &cfg, requests, &opts, true, None).unwrap();
//! assert_eq!(stats.reads + stats.writes, 2000);
//! // The native engine's commands break no JEDEC rule.
//! assert!(check.unwrap().violations.is_empty());
//! let results = RunResults::of(vec![stats], Vec::new());
//! println!("{}", results.summary_text(&cfg, &source));
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize, Serializer};

use crate::jedec::{Checker, Violation, read_ramulator_traces};
use crate::native::NativeEngine;
use crate::source::{AddressTrace, EmbeddingPhase, EmbeddingRequests, StreamSpec, synthetic};
use crate::{
    DramConfig, DramStats, EngineKind, MemOp, RunOptions, SimError, simulate, simulate_native,
};

/// Requests one at a time, as a source hands them on.
pub type BoxedSource = Box<dyn Iterator<Item = Result<MemOp, SimError>> + Send>;

/// Serialises a path as text, with any bytes that are not UTF-8 replaced
/// (serde's own impl refuses such a path, which would fail a run's
/// `config.json` over a file name).
fn lossy_path<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// Where a run's requests come from (a run's `config.json` records it).
/// (Written, not read back: a stream's own `kind` sits beside the
/// source's.)
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RequestSource {
    /// A synthetic stream.
    Stream(StreamSpec),
    /// An address trace file.
    AddressTrace {
        #[serde(serialize_with = "lossy_path")]
        path: PathBuf,
    },
    /// An embedding trace replayed as the requests of one phase.
    EmbeddingTrace {
        #[serde(serialize_with = "lossy_path")]
        path: PathBuf,
        dim: usize,
        base: u64,
        phase: EmbeddingPhase,
        max_batches: Option<u64>,
    },
}

impl RequestSource {
    /// Opens the source for a memory of `cfg`'s capacity; `Some(n)` when its
    /// length is known.
    pub fn open(&self, cfg: &DramConfig) -> Result<(BoxedSource, Option<u64>), SimError> {
        let cap = cfg.capacity_bytes();
        Ok(match self {
            RequestSource::Stream(spec) => {
                let s = synthetic(spec, cap)?;
                (Box::new(s.map(Ok)), Some(spec.requests))
            }
            RequestSource::AddressTrace { path } => {
                (Box::new(AddressTrace::open(path, cap)?), None)
            }
            RequestSource::EmbeddingTrace {
                path,
                dim,
                base,
                phase,
                max_batches,
            } => (
                Box::new(EmbeddingRequests::open(
                    path,
                    *dim,
                    *base,
                    *phase,
                    cap,
                    *max_batches,
                )?),
                None,
            ),
        })
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        match self {
            RequestSource::Stream(s) => format!(
                "{} stream, {} request{}, {}% writes, seed {}",
                s.kind,
                s.requests,
                if s.requests == 1 { "" } else { "s" },
                percent_of(s.write_fraction),
                s.seed
            ),
            RequestSource::AddressTrace { path } => format!("address trace {}", path.display()),
            RequestSource::EmbeddingTrace {
                path, dim, phase, ..
            } => {
                format!("embedding trace {} (dim {dim}, {phase})", path.display())
            }
        }
    }
}

/// A fraction as a percentage with the digits it needs, up to four
/// decimals: 30, 0.4, 99.5, 33.3333 (not 0 or 100 for 0.4% or 99.5%).
pub fn percent_of(f: f64) -> String {
    let p = f * 100.0;
    for d in 0..=4 {
        let s = format!("{p:.d$}");
        if s.parse::<f64>()
            .is_ok_and(|v| (v - p).abs() <= 1e-9 * p.abs().max(1.0))
        {
            return s;
        }
    }
    let s = format!("{p:.4}");
    if s.parse::<f64>().is_ok_and(|v| v == 0.0 || v == 100.0) {
        // (Closer to 0 or 100 than four decimals show: every digit.)
        return format!("{p}");
    }
    s
}

/// What checking one engine's commands found.
#[derive(Debug)]
pub struct CommandCheck {
    /// Which timing table the commands were held to.
    pub timing: &'static str,
    pub commands: usize,
    pub violations: Vec<Violation>,
}

/// Runs `engine` on `requests`. With `check_timing`, its commands are held
/// to the JEDEC rules: the native engine's as it issues them, a block at a
/// time (no run is too long to check), against the preset's table;
/// Ramulator's from its command traces against its own table (the traces
/// are removed after unless `opts.keep_command_traces`). An engine whose
/// commands cannot be checked ([`unchecked_because`]) runs unchecked: its
/// check is `None`.
pub fn run_engine(
    engine: EngineKind,
    cfg: &DramConfig,
    requests: BoxedSource,
    opts: &RunOptions,
    check_timing: bool,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<(DramStats, Option<CommandCheck>), SimError> {
    match (check_timing, engine) {
        (true, EngineKind::Native) => {
            let found = Arc::new(Mutex::new((Checker::for_config(cfg).replay(), Vec::new())));
            let sink = Arc::clone(&found);
            let mut e = NativeEngine::with_command_sink(cfg, 1 << 16, move |part| {
                let mut guard = sink.lock().unwrap_or_else(|p| p.into_inner());
                let (replay, v) = &mut *guard;
                replay.feed(part, v);
            })?;
            let stats = simulate_native(&mut e, requests, opts, progress)?;
            drop(e);
            let (replay, mut v) = Arc::into_inner(found)
                .ok_or_else(|| SimError::Engine {
                    engine: "native",
                    what: "the command sink outlived its engine".into(),
                })?
                .into_inner()
                .unwrap_or_else(|p| p.into_inner());
            replay.end(&mut v);
            Ok((
                stats,
                Some(CommandCheck {
                    timing: "the configuration's JEDEC table",
                    commands: replay.commands(),
                    violations: v,
                }),
            ))
        }
        (true, EngineKind::Ramulator) if unchecked_because(engine, cfg).is_none() => {
            let work_dir = opts.work_dir.as_deref().ok_or_else(|| SimError::Param {
                name: "work_dir".into(),
                what: "checking Ramulator's commands needs a work directory for its command traces"
                    .into(),
            })?;
            let keep = RunOptions {
                keep_command_traces: true,
                ..opts.clone()
            };
            let stats = simulate(engine, cfg, requests, &keep, progress)?;
            let paths: Vec<PathBuf> = (0..cfg.ranks)
                .map(|r| crate::ramulator::command_trace_path(work_dir, r))
                .collect();
            let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
            let log = read_ramulator_traces(&refs)?;
            if !opts.keep_command_traces {
                for p in &paths {
                    let _ = std::fs::remove_file(p);
                }
            }
            let violations = Checker::with_timing(cfg, cfg.ramulator_timing()).check(&log);
            Ok((
                stats,
                Some(CommandCheck {
                    timing: "Ramulator's own table",
                    commands: log.len(),
                    violations,
                }),
            ))
        }
        _ => Ok((simulate(engine, cfg, requests, opts, progress)?, None)),
    }
}

/// Why `engine`'s commands cannot be held to `cfg`'s rules, if they cannot:
/// DRAMsim3 exposes no command log, and Ramulator's HBM command trace names
/// a bank by its index within its bank group, so four banks share a name.
pub fn unchecked_because(engine: EngineKind, cfg: &DramConfig) -> Option<String> {
    match engine {
        EngineKind::Dramsim3 => Some("the DRAMsim3 library exposes no command log".into()),
        EngineKind::Ramulator if !cfg.standard().ramulator_trace_names_groups => Some(format!(
            "Ramulator's {} command trace names a bank within its bank group only; check native's commands",
            cfg.standard().name
        )),
        _ => None,
    }
}

/// Violations of one rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RuleCount {
    pub rule: String,
    pub count: usize,
}

/// What the JEDEC checker found in one engine's commands.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TimingCheck {
    pub engine: EngineKind,
    /// Whether the engine had a command log to check.
    pub checked: bool,
    /// Why it was not checked ([`unchecked_because`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Which timing table the commands were held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
    pub commands: usize,
    pub violations: usize,
    /// Violations per rule, most frequent first.
    pub by_rule: Vec<RuleCount>,
    /// Of the violations, tRTRS between two writes of different ranks (the
    /// departure DRAMsim3 and Ramulator share).
    pub write_to_write_rank_switches: usize,
    /// The file with every violation, one a line, in the run directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl TimingCheck {
    /// An engine whose commands were not checked on `cfg`, and why
    /// ([`unchecked_because`]).
    pub fn unchecked(engine: EngineKind, cfg: &DramConfig) -> Self {
        TimingCheck {
            engine,
            checked: false,
            reason: Some(
                unchecked_because(engine, cfg)
                    .unwrap_or_else(|| "the engine gave no command log".into()),
            ),
            timing: None,
            commands: 0,
            violations: 0,
            by_rule: Vec::new(),
            write_to_write_rank_switches: 0,
            file: None,
        }
    }

    /// The summary of `check`; `file` names where its violations were
    /// written ([`TimingCheck::file_name`]), if any were.
    pub fn of(engine: EngineKind, check: &CommandCheck, file: Option<String>) -> Self {
        let v = &check.violations;
        let mut by_rule: Vec<RuleCount> = Vec::new();
        for x in v {
            match by_rule.iter_mut().find(|c| c.rule == x.rule) {
                Some(c) => c.count += 1,
                None => by_rule.push(RuleCount {
                    rule: x.rule.to_string(),
                    count: 1,
                }),
            }
        }
        by_rule.sort_by(|a, b| b.count.cmp(&a.count).then(a.rule.cmp(&b.rule)));
        TimingCheck {
            engine,
            checked: true,
            reason: None,
            timing: Some(check.timing.to_string()),
            commands: check.commands,
            violations: v.len(),
            by_rule,
            write_to_write_rank_switches: v
                .iter()
                .filter(|x| x.is_write_to_write_rank_switch())
                .count(),
            file,
        }
    }

    /// The file a run writes `engine`'s violations to.
    pub fn file_name(engine: EngineKind) -> String {
        format!("jedec-{}.txt", engine.name())
    }

    /// Every violation, one a line.
    pub fn violations_text(v: &[Violation]) -> String {
        let mut text = String::new();
        for x in v {
            text.push_str(&x.to_string());
            text.push('\n');
        }
        text
    }

    /// One line for the summary.
    pub fn line(&self) -> String {
        let name = self.engine.name();
        if !self.checked {
            let why = self.reason.as_deref().unwrap_or("no command log");
            return format!("{name}: not checked ({why})");
        }
        let timing = self.timing.as_deref().unwrap_or("?");
        if self.violations == 0 {
            return format!(
                "{name}: {} commands against {timing}, no rule broken",
                self.commands
            );
        }
        let rules: Vec<String> = self
            .by_rule
            .iter()
            .map(|c| format!("{} {}", c.rule, c.count))
            .collect();
        let ww = match self.write_to_write_rank_switches {
            0 => String::new(),
            n if n == self.violations => {
                "; all of them tRTRS between writes of different ranks".to_string()
            }
            n => format!("; {n} of them tRTRS between writes of different ranks"),
        };
        format!(
            "{name}: {} commands against {timing}, {} violations: {}{ww} (every one in {})",
            self.commands,
            self.violations,
            rules.join(", "),
            self.file.as_deref().unwrap_or("?")
        )
    }
}

/// One engine's run over another's.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Agreement {
    pub engine: EngineKind,
    pub reference: EngineKind,
    pub bandwidth_ratio: f64,
    /// `None` when either run has no reads.
    pub read_latency_mean_ratio: Option<f64>,
    /// `None` when the reference issued no ACTIVATE.
    pub activations_ratio: Option<f64>,
    pub energy_ratio: f64,
}

impl Agreement {
    pub fn of(run: &DramStats, reference: &DramStats) -> Self {
        Agreement {
            engine: run.engine,
            reference: reference.engine,
            bandwidth_ratio: run.bandwidth_gbps / reference.bandwidth_gbps,
            read_latency_mean_ratio: run
                .read_latency_mean_ns
                .zip(reference.read_latency_mean_ns)
                .map(|(a, b)| a / b),
            activations_ratio: (reference.activations != 0)
                .then(|| run.activations as f64 / reference.activations as f64),
            energy_ratio: run.energy.total_pj / reference.energy.total_pj,
        }
    }
}

/// A DRAM run's results (`results.json`'s `results` of `nmpsim dram run`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunResults {
    pub runs: Vec<DramStats>,
    /// Ramulator over DRAMsim3, when both ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<Agreement>,
    /// Every engine after the first over the first, in run order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<Agreement>,
    /// With a timing check: one per engine, in run order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timing_checks: Vec<TimingCheck>,
}

impl RunResults {
    /// The results of `runs` (in run order) with their agreements.
    pub fn of(runs: Vec<DramStats>, timing_checks: Vec<TimingCheck>) -> Self {
        let run_of = |kind: EngineKind| runs.iter().find(|r| r.engine == kind);
        let agreement = match (run_of(EngineKind::Ramulator), run_of(EngineKind::Dramsim3)) {
            (Some(a), Some(b)) => Some(Agreement::of(a, b)),
            _ => None,
        };
        let comparisons = runs
            .iter()
            .skip(1)
            .map(|r| Agreement::of(r, &runs[0]))
            .collect();
        RunResults {
            runs,
            agreement,
            comparisons,
            timing_checks,
        }
    }

    /// `results.csv`: a header and one row per engine (a statistic the run
    /// has none of, such as the latency of no reads, left empty).
    pub fn stats_table(&self) -> (Vec<&'static str>, Vec<Vec<String>>) {
        // A statistic the run has none of (no reads: no latency) is left empty.
        let opt = |x: Option<f64>| x.map_or(String::new(), |x| x.to_string());
        let header = vec![
            "engine",
            "preset",
            "cycles",
            "sim_time_ns",
            "reads",
            "writes",
            "bytes",
            "bandwidth_gbps",
            "bus_bandwidth_gbps",
            "bus_utilisation",
            "read_latency_mean_ns",
            "read_latency_p50_ns",
            "read_latency_p99_ns",
            "read_latency_max_ns",
            "row_hits",
            "row_misses",
            "row_conflicts",
            "row_hit_rate",
            "activations",
            "precharges",
            "read_cmds",
            "write_cmds",
            "refreshes",
            "active_rank_cycles",
            "precharged_rank_cycles",
            "energy_activate_pj",
            "energy_read_pj",
            "energy_write_pj",
            "energy_refresh_pj",
            "energy_background_pj",
            "energy_total_pj",
            "energy_per_bit_pj",
            "average_power_mw",
            "wall_s",
            "sim_requests_per_s",
            "sim_cycles_per_s",
        ];
        let rows = self
            .runs
            .iter()
            .map(|s| {
                vec![
                    s.engine.to_string(),
                    s.preset.clone(),
                    s.cycles.to_string(),
                    s.sim_time_ns.to_string(),
                    s.reads.to_string(),
                    s.writes.to_string(),
                    s.bytes.to_string(),
                    s.bandwidth_gbps.to_string(),
                    s.bus_bandwidth_gbps.to_string(),
                    s.bus_utilisation.to_string(),
                    opt(s.read_latency_mean_ns),
                    opt(s.read_latency_p50_ns),
                    opt(s.read_latency_p99_ns),
                    opt(s.read_latency_max_ns),
                    s.row_hits.to_string(),
                    s.row_misses.to_string(),
                    s.row_conflicts.map_or(String::new(), |c| c.to_string()),
                    opt(s.row_hit_rate),
                    s.activations.to_string(),
                    s.precharges.to_string(),
                    s.read_cmds.to_string(),
                    s.write_cmds.to_string(),
                    s.refreshes.to_string(),
                    s.active_rank_cycles.to_string(),
                    s.precharged_rank_cycles.to_string(),
                    s.energy.activate_pj.to_string(),
                    s.energy.read_pj.to_string(),
                    s.energy.write_pj.to_string(),
                    s.energy.refresh_pj.to_string(),
                    s.energy.background_pj.to_string(),
                    s.energy.total_pj.to_string(),
                    s.energy_per_bit_pj.to_string(),
                    s.average_power_mw.to_string(),
                    s.wall_s.to_string(),
                    s.sim_requests_per_s.to_string(),
                    s.sim_cycles_per_s.to_string(),
                ]
            })
            .collect();
        (header, rows)
    }

    /// The run's summary: the memory and source, a column per engine, the
    /// agreements, notes on posted writes, and the timing checks.
    pub fn summary_text(&self, cfg: &DramConfig, source: &RequestSource) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} ({} rank{}, mapping {}), {}",
            cfg.name,
            cfg.ranks,
            if cfg.ranks > 1 { "s" } else { "" },
            cfg.mapping.name(),
            source.describe()
        );
        let mut t = nmpsim_traces::TextTable::new(
            std::iter::once("").chain(self.runs.iter().map(|r| r.engine.name())),
        )
        .left(&[0]);
        let mut row = |label: &str, f: &dyn Fn(&DramStats) -> String| {
            t.row(std::iter::once(label.to_string()).chain(self.runs.iter().map(f)));
        };
        // A run without reads has no read latency.
        let latency = |ns: Option<f64>| ns.map_or("n/a".to_string(), |ns| format!("{ns:.1}"));
        row("requests (R/W)", &|x| format!("{}/{}", x.reads, x.writes));
        row("cycles", &|x| x.cycles.to_string());
        row("simulated time (us)", &|x| {
            format!("{:.2}", x.sim_time_ns / 1e3)
        });
        row("bandwidth (GB/s)", &|x| format!("{:.3}", x.bandwidth_gbps));
        row("bus bandwidth (GB/s)", &|x| {
            format!("{:.3}", x.bus_bandwidth_gbps)
        });
        row("  of peak", &|x| {
            format!("{:.1}%", x.bus_utilisation * 100.0)
        });
        row("read latency mean (ns)", &|x| {
            latency(x.read_latency_mean_ns)
        });
        row("read latency p50 (ns)", &|x| latency(x.read_latency_p50_ns));
        row("read latency p99 (ns)", &|x| latency(x.read_latency_p99_ns));
        row("row hit rate", &|x| {
            x.row_hit_rate
                .map_or("n/a".to_string(), |r| format!("{:.1}%", r * 100.0))
        });
        row("activations", &|x| x.activations.to_string());
        row("refreshes", &|x| x.refreshes.to_string());
        type Part = fn(&DramStats) -> f64;
        let parts: [(&str, Part); 6] = [
            ("energy activate (nJ)", |x| x.energy.activate_pj),
            ("energy read (nJ)", |x| x.energy.read_pj),
            ("energy write (nJ)", |x| x.energy.write_pj),
            ("energy refresh (nJ)", |x| x.energy.refresh_pj),
            ("energy background (nJ)", |x| x.energy.background_pj),
            ("energy total (nJ)", |x| x.energy.total_pj),
        ];
        for (label, pj) in parts {
            row(label, &|x| format!("{:.1}", pj(x) / 1e3));
        }
        row("energy per bit (pJ)", &|x| {
            format!("{:.2}", x.energy_per_bit_pj)
        });
        row("average power (mW)", &|x| {
            format!("{:.0}", x.average_power_mw)
        });
        row("wall time (s)", &|x| format!("{:.2}", x.wall_s));
        row("simulated requests/s", &|x| {
            format!("{:.0}", x.sim_requests_per_s)
        });
        row("simulated cycles/s", &|x| {
            format!("{:.0}", x.sim_cycles_per_s)
        });
        s.push_str(&t.render());
        for a in &self.comparisons {
            let _ = writeln!(
                s,
                "{} / {}: bandwidth {:.3}, mean read latency {}, activations {}, energy {:.3}",
                a.engine.name(),
                a.reference.name(),
                a.bandwidth_ratio,
                a.read_latency_mean_ratio
                    .map_or("n/a (no reads)".to_string(), |x| format!("{x:.3}")),
                a.activations_ratio.map_or(
                    format!("n/a ({} has none)", a.reference.name()),
                    |x| format!("{x:.3}")
                ),
                a.energy_ratio
            );
        }
        for x in self.runs.iter().filter(|x| x.write_cmds < x.writes) {
            // `bandwidth` counts requests as they complete, and a posted write
            // completes when accepted: writes merged in the write buffer, or
            // still there when the run ends, count though no WRITE carried them.
            let _ = writeln!(
                s,
                "note: {}: {} writes completed but {} WRITE commands issued (writes to one line \
                 merge in the write buffer{}); bandwidth counts the writes, bus bandwidth the \
                 commands (docs/dram.md, \"Writes are posted\")",
                x.engine.name(),
                x.writes,
                x.write_cmds,
                if x.engine == EngineKind::Dramsim3 {
                    ", and DRAMsim3 leaves the writes still buffered at the end unissued"
                } else {
                    ""
                }
            );
        }
        if !self.timing_checks.is_empty() {
            let _ = writeln!(s, "timing check (the JEDEC command-log checker):");
            for c in &self.timing_checks {
                let _ = writeln!(s, "  {}", c.line());
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::StreamKind;

    #[test]
    fn write_shares_keep_the_digits_that_matter() {
        assert_eq!(percent_of(0.3), "30");
        assert_eq!(percent_of(0.0), "0");
        assert_eq!(percent_of(1.0), "100");
        assert_eq!(percent_of(0.004), "0.4");
        assert_eq!(percent_of(0.995), "99.5");
        assert_eq!(percent_of(1.0 / 3.0), "33.3333");
        assert_ne!(percent_of(0.9999999), "100.0000");
        assert_ne!(percent_of(0.0000001), "0.0000");
    }

    #[test]
    fn results_read_back_as_written_with_their_agreements() {
        let cfg = DramConfig::preset("DDR4-3200-x8").unwrap();
        let source = RequestSource::Stream(StreamSpec {
            kind: StreamKind::Random,
            requests: 500,
            write_fraction: 0.3,
            seed: 7,
            base: 0,
            footprint_bytes: None,
        });
        let opts = RunOptions {
            window: 16,
            ..RunOptions::default()
        };
        let mut runs = Vec::new();
        let mut checks = Vec::new();
        for engine in [EngineKind::Native, EngineKind::Dramsim3] {
            let (requests, len) = source.open(&cfg).unwrap();
            assert_eq!(len, Some(500));
            let (stats, check) = run_engine(engine, &cfg, requests, &opts, true, None).unwrap();
            checks.push(match check {
                Some(c) => TimingCheck::of(engine, &c, None),
                None => TimingCheck::unchecked(engine, &cfg),
            });
            runs.push(stats);
        }
        assert!(checks[0].checked && checks[0].violations == 0 && checks[0].commands > 0);
        assert!(!checks[1].checked);
        let r = RunResults::of(runs, checks);
        // Ramulator did not run: no Ramulator-over-DRAMsim3 agreement; the
        // second engine is compared with the first.
        assert!(r.agreement.is_none());
        assert_eq!(r.comparisons.len(), 1);
        assert_eq!(r.comparisons[0].engine, EngineKind::Dramsim3);
        let json = serde_json::to_string(&r).unwrap();
        let back: RunResults = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let (header, rows) = r.stats_table();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|row| row.len() == header.len()));
        let text = r.summary_text(&cfg, &source);
        assert!(
            text.contains("random stream, 500 requests, 30% writes, seed 7")
                && text.contains("native: ")
                && text.contains("no rule broken")
                && text.contains("dramsim3: not checked"),
            "{text}"
        );
    }
}
