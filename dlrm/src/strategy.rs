//! Embedding strategies by name: the one list `--mode`, the trainer's
//! construction, the reports' speed-ups and `reproduce` go through.
//!
//! A strategy joins nmpsim as one module implementing
//! [`EmbeddingStrategy`] plus one [`StrategyEntry`] line in [`REGISTRY`]:
//! its name, its family (the system it comes from), whether it runs
//! anything on the NMP pool (the run then sets one up), and a factory that
//! builds it from the run's configuration.
//!
//! ```
//! use nmpsim_dlrm::strategy;
//! let all = strategy::select("all").unwrap();
//! assert_eq!(all[0].name, strategy::BASELINE);
//! assert!(strategy::find("tcast-nmp").unwrap().uses_nmp);
//! assert!(strategy::find("tcast-gpu").is_err());
//! ```

use std::sync::{Arc, Mutex};

use serde::{Serialize, Serializer};

use crate::DlrmError;
use crate::dense::DenseBackend;
use crate::embedding::{EmbeddingStrategy, SystemMode, SystemModes, TimingEnv};
use crate::gpu::GpuPreset;
use crate::pooltime::PoolTimer;
use crate::trainer::{TrainConfig, Trainer};

/// The strategy every speed-up is taken over.
pub const BASELINE: &str = "baseline-cpu";

/// What a factory builds a strategy from.
#[derive(Clone)]
pub struct BuildCtx<'a> {
    pub config: &'a TrainConfig,
    /// The modelled machine: the GPU preset, and the NMP pool's timer when
    /// the strategy's entry says it uses one.
    pub env: TimingEnv,
    /// A real GPU for the strategy's GPU-placed primitives (then measured
    /// there), when the run has one.
    #[cfg(feature = "cuda")]
    pub device: Option<Arc<nmpsim_kernels::cuda::Gpu>>,
    /// The GPU emulation of the NMP pool, for strategies that use the pool,
    /// when the run emulates it.
    #[cfg(feature = "cuda")]
    pub emulator: Option<Arc<Mutex<crate::emulate::PoolEmulator>>>,
    /// The run's access profile and hot options, for strategies whose entry
    /// says they use hot rows.
    pub hot: Option<Arc<crate::hot::HotContext>>,
    /// cDLRM's cache and look-ahead.
    pub cdlrm: crate::cdlrm::CdlrmOptions,
    /// EL-Rec's TT rank and threshold.
    pub eltt: crate::eltt::ElttOptions,
}

impl<'a> BuildCtx<'a> {
    /// A context with the modelled machine only (no real GPU).
    pub fn new(
        config: &'a TrainConfig,
        gpu: GpuPreset,
        pool: Option<Arc<Mutex<PoolTimer>>>,
    ) -> Self {
        BuildCtx {
            config,
            env: TimingEnv {
                gpu,
                pool,
                host: None,
            },
            #[cfg(feature = "cuda")]
            device: None,
            #[cfg(feature = "cuda")]
            emulator: None,
            hot: None,
            cdlrm: crate::cdlrm::CdlrmOptions::default(),
            eltt: crate::eltt::ElttOptions::default(),
        }
    }
}

/// A factory: the strategy for a run, or why it cannot be built.
pub type Factory = fn(&BuildCtx) -> Result<Box<dyn EmbeddingStrategy>, DlrmError>;

/// One registered strategy.
pub struct StrategyEntry {
    /// Its name in `--mode`, the CSVs, `results.json` and the reports.
    pub name: &'static str,
    /// The system it comes from (`tcast`, ...); `--mode <family>` selects
    /// every strategy of one.
    pub family: &'static str,
    /// One line for `--mode list` and the docs.
    pub about: &'static str,
    /// Whether it runs anything on the NMP pool (the run then sets one up
    /// and hands its timer to the factory).
    pub uses_nmp: bool,
    /// Whether it keeps hot rows apart (the run then profiles its input and
    /// hands the profile to the factory).
    pub uses_hot: bool,
    pub build: Factory,
}

impl std::fmt::Debug for StrategyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl std::fmt::Display for StrategyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// An entry is written as its name (run configurations list them so).
impl Serialize for StrategyEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name)
    }
}

/// Tensor Casting's system mode `mode` (Sec. VI), on the real GPU and the
/// pool's emulation where the context has them.
fn tcast(ctx: &BuildCtx, mode: SystemMode) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    ctx.config.validate()?;
    let m = &ctx.config.model;
    let s = SystemModes::new(
        mode,
        &m.table_rows,
        m.dim,
        m.pooling,
        &ctx.config.embedding_optimizer,
        ctx.config.seed,
        ctx.env.clone(),
    )?;
    Ok(Box::new(on_gpu(s, ctx)?))
}

/// `s` with its casting on the run's real GPU and its NMP-placed
/// primitives on the pool's GPU emulation, where the run has them (as is
/// without the `cuda` feature).
pub(crate) fn on_gpu(
    s: SystemModes,
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] ctx: &BuildCtx,
) -> Result<SystemModes, DlrmError> {
    #[cfg(feature = "cuda")]
    let s = {
        let mode = s.mode;
        let mut s = match &ctx.device {
            Some(d) => s.with_gpu_casting(d.clone())?,
            None => s,
        };
        if let Some(e) = ctx.emulator.clone().filter(|_| mode.uses_nmp()) {
            s = s.with_emulator(e)?;
        }
        s
    };
    Ok(s)
}

/// Every strategy, in report order (the baseline first).
pub static REGISTRY: &[StrategyEntry] = &[
    StrategyEntry {
        name: "baseline-cpu",
        family: "tcast",
        about: "every embedding primitive on the CPU; the gradient coalesced by expand, sort and accumulate",
        uses_nmp: false,
        uses_hot: false,
        build: |c| tcast(c, SystemMode::BaselineCpu),
    },
    StrategyEntry {
        name: "tcast-cpu",
        family: "tcast",
        about: "Tensor Casting on the CPU: casting on the GPU, overlapped with the forward; casted gather-reduce on the CPU",
        uses_nmp: false,
        uses_hot: false,
        build: |c| tcast(c, SystemMode::TcastCpu),
    },
    StrategyEntry {
        name: "baseline-nmp",
        family: "tcast",
        about: "gather-reduce and scatter on the NMP pool; the gradient coalesced on the CPU",
        uses_nmp: true,
        uses_hot: false,
        build: |c| tcast(c, SystemMode::BaselineNmp),
    },
    StrategyEntry {
        name: "tcast-nmp",
        family: "tcast",
        about: "all of embedding training on the NMP pool, the gradient coalesced by casted gather-reduce; casting on the GPU",
        uses_nmp: true,
        uses_hot: false,
        build: |c| tcast(c, SystemMode::TcastNmp),
    },
    StrategyEntry {
        name: "fae",
        family: "hot",
        about: "FAE: hot rows replicated on the GPU (hot mini-batches there), cold mini-batches as baseline-cpu, hot rows copied at every switch",
        uses_nmp: false,
        uses_hot: true,
        build: |c| crate::hot::fae::build(c, "fae", SystemMode::BaselineCpu),
    },
    StrategyEntry {
        name: "fae-nmp",
        family: "hot",
        about: "FAE's hot rows on the GPU with the cold mini-batches on the NMP pool as tcast-nmp runs them",
        uses_nmp: true,
        uses_hot: true,
        build: |c| crate::hot::fae::build(c, "fae-nmp", SystemMode::TcastNmp),
    },
    StrategyEntry {
        name: "scars",
        family: "hot",
        about: "SCARS: a GPU cache of the hottest rows sized by its cost model; hot mini-batches there, normal ones coalesced on the host",
        uses_nmp: false,
        uses_hot: true,
        build: crate::hot::cache::build,
    },
    StrategyEntry {
        name: "cdlrm",
        family: "lookahead",
        about: "cDLRM: tables in host memory, a set-associative cache of each on the GPU filled a look-ahead window of batches ahead; every batch trained on the GPU",
        uses_nmp: false,
        uses_hot: false,
        build: crate::cdlrm::strategy::build,
    },
    StrategyEntry {
        name: "cdlrm-nmp",
        family: "lookahead",
        about: "cDLRM with its host tables in the NMP pool: the prefetcher's gathers, the victims' fetches and the write-backs run there",
        uses_nmp: true,
        uses_hot: false,
        build: crate::cdlrm::strategy::build_nmp,
    },
    StrategyEntry {
        name: "eltt",
        family: "elrec",
        about: "EL-Rec: tables over --tt-threshold rows as Eff-TT tables (batch-level reuse, gradients aggregated in advance, fused update), all of the model on the GPU",
        uses_nmp: false,
        uses_hot: false,
        build: crate::eltt::build,
    },
    StrategyEntry {
        name: "eltt-nmp",
        family: "elrec",
        about: "EL-Rec's TT tables with their lookups on the NMP pool: every rank a copy of the cores, the products on its vector ALU; the backward on the GPU, the updated core slices written back",
        uses_nmp: true,
        uses_hot: false,
        build: crate::eltt::build_nmp,
    },
];

/// Every registered strategy, in report order.
pub fn strategies() -> &'static [StrategyEntry] {
    REGISTRY
}

/// The strategy named `name` (any case).
pub fn find(name: &str) -> Result<&'static StrategyEntry, DlrmError> {
    REGISTRY
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            DlrmError::Config(format!(
                "unknown mode `{name}`; expected one of {}, a family ({}), all, or a comma-separated list",
                names().join(", "),
                families().join(", ")
            ))
        })
}

/// Every strategy's name, in report order.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// The families, each once, in report order.
pub fn families() -> Vec<&'static str> {
    let mut f: Vec<&'static str> = Vec::new();
    for e in REGISTRY {
        if !f.contains(&e.family) {
            f.push(e.family);
        }
    }
    f
}

/// The strategies `spec` names: `all`, a family, one name, or a
/// comma-separated list of those; in report order, each once.
pub fn select(spec: &str) -> Result<Vec<&'static StrategyEntry>, DlrmError> {
    let mut chosen = vec![false; REGISTRY.len()];
    for part in spec.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(DlrmError::Config(format!(
                "mode list `{spec}` has an empty entry"
            )));
        }
        if part.eq_ignore_ascii_case("all") {
            chosen.iter_mut().for_each(|c| *c = true);
        } else if families().iter().any(|f| f.eq_ignore_ascii_case(part)) {
            for (c, e) in chosen.iter_mut().zip(REGISTRY) {
                *c |= e.family.eq_ignore_ascii_case(part);
            }
        } else {
            let e = find(part)?;
            chosen[REGISTRY
                .iter()
                .position(|x| x.name == e.name)
                .expect("found")] = true;
        }
    }
    Ok(REGISTRY
        .iter()
        .zip(chosen)
        .filter_map(|(e, c)| c.then_some(e))
        .collect())
}

/// The registry as a table: name, family, pool, about (for `--mode list`).
pub fn listing() -> String {
    let w = REGISTRY.iter().map(|e| e.name.len()).max().unwrap_or(0);
    let mut o = String::new();
    for e in REGISTRY {
        o.push_str(&format!(
            "{:<w$}  {:<6}  {:<4}  {}\n",
            e.name,
            e.family,
            if e.uses_nmp { "nmp" } else { "" },
            e.about
        ));
    }
    o
}

/// A trainer for strategy `entry` with dense backend `dense`, initialised
/// from `config.seed` (every strategy of a run starts from the same
/// parameters). A strategy that uses the pool needs `ctx.env.pool`.
pub fn trainer(
    entry: &StrategyEntry,
    ctx: &BuildCtx,
    dense: Box<dyn DenseBackend>,
) -> Result<Trainer, DlrmError> {
    if entry.uses_hot && ctx.hot.is_none() {
        return Err(DlrmError::Config(format!(
            "mode {} keeps hot rows apart but the run made no access profile",
            entry.name
        )));
    }
    if entry.uses_nmp && ctx.env.pool.is_none() {
        return Err(DlrmError::Config(format!(
            "mode {} runs on the NMP pool but no pool is configured",
            entry.name
        )));
    }
    let emb = (entry.build)(ctx)?;
    Trainer::new(ctx.config.clone(), emb, dense, ctx.env.gpu.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_baseline_comes_first() {
        let n = names();
        assert_eq!(n[0], BASELINE);
        for (i, a) in n.iter().enumerate() {
            assert!(!n[i + 1..].contains(a), "{a} registered twice");
            assert_eq!(*a, a.to_ascii_lowercase());
            assert!(!a.contains(','), "{a}");
        }
        // The families are not also strategy names.
        for f in families() {
            assert!(find(f).is_err(), "family {f} shadows a strategy");
        }
    }

    #[test]
    fn selections_keep_report_order_and_refuse_unknown_names() {
        let s = select("tcast-nmp, baseline-cpu,TCAST-NMP").unwrap();
        assert_eq!(
            s.iter().map(|e| e.name).collect::<Vec<_>>(),
            ["baseline-cpu", "tcast-nmp"]
        );
        assert_eq!(select("all").unwrap().len(), REGISTRY.len());
        assert_eq!(
            select("tcast").unwrap().len(),
            REGISTRY.iter().filter(|e| e.family == "tcast").count()
        );
        let e = select("baseline-cpu,fae-x").unwrap_err().to_string();
        assert!(
            e.contains("unknown mode `fae-x`") && e.contains("tcast-nmp"),
            "{e}"
        );
        assert!(select("baseline-cpu,").is_err());
        assert!(listing().lines().count() == REGISTRY.len());
    }

    #[test]
    fn the_tcast_entries_agree_with_their_plans() {
        for (e, m) in REGISTRY
            .iter()
            .filter(|e| e.family == "tcast")
            .zip(SystemMode::ALL)
        {
            assert_eq!(e.name, m.as_str());
            assert_eq!(e.uses_nmp, m.uses_nmp());
        }
    }
}
