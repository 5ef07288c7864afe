//! Hot embeddings next to the dense model: the strategies of FAE (Adnan et
//! al., "Accelerating Recommendation System Training 15x with RAPIDS"; here
//! "FAE", its framework) and SCARS (Erdogan et al.), and their hybrid with
//! the NMP pool.
//!
//! Both papers keep the most accessed rows (the hot set) on the GPU, next to
//! the dense model, and split the input into mini-batches whose samples look
//! up hot rows only (trained on the GPU alone) and the rest. They differ in
//! what happens to the rest and to the hot rows meanwhile:
//!
//! - FAE ([`fae`]): cold mini-batches run as the baseline does, with every
//!   table on the host CPU; the hot rows live in both places and are copied
//!   whole from the side that trained last at every switch between hot and
//!   cold mini-batches. Its shuffle scheduler ([`input::Schedule`]) decides
//!   how many of each kind run between switches.
//! - SCARS ([`cache`]): the GPU's copy of the hot rows is the only one; a
//!   normal mini-batch is coalesced on the host, which sends the batch's
//!   unique uncached rows with the indices and gets their coalesced
//!   gradients back for its optimizer step.
//!
//! This module holds what they share: the options, the access profile of
//! the run's input and the hot set chosen from it ([`HotPlan`]), the
//! GPU-side copy of the hot rows ([`replica::Replica`]), and the input
//! processor that builds hot and cold mini-batches ([`input::HotColdInput`]).

pub mod cache;
pub mod fae;
#[cfg(feature = "cuda")]
mod gpu_cuda;
pub(crate) mod gpu_step;
pub mod input;
pub mod replica;

use std::sync::Arc;

use nmpsim_traces::Batch;
use nmpsim_traces::hot::{
    AccessProfile, BudgetResult, Calibration, HotSet, ProfileBuilder, Sampling,
};
use serde::Serialize;

use crate::DlrmError;
use crate::scars::{CostModel, DeviceMemory, TableDist};
use crate::trainer::{DataSource, TrainConfig};

pub use input::{HotColdInput, Schedule, ScheduleKind};

/// The hot set's memory budget both papers use: 256 MB.
pub const DEFAULT_BUDGET_BYTES: u64 = 256 << 20;

/// The calibrator's sampling seed when none is given.
pub const SAMPLE_SEED: u64 = 0x05ee_dfae;

/// How a run's hot strategies choose and use their hot rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotOptions {
    /// FAE's GPU memory for the hot rows (their values and optimizer state).
    pub budget_bytes: u64,
    /// Which of the run's training samples the calibrator counts.
    pub sampling: Sampling,
    /// FAE's shuffle scheduler.
    pub schedule: Schedule,
    /// SCARS's cache size; `None`: the cost model's best (Sec. II).
    pub cache_bytes: Option<u64>,
    /// SCARS's device memory `M` for the cache and the batch (Eq. 7);
    /// `None`: the budget plus the configured batch's footprint.
    pub device_bytes: Option<u64>,
    /// SCARS's order of hot and normal mini-batches (the paper gives none).
    pub scars_schedule: Schedule,
    /// Samples of the input the calibrators profile; `None`: the samples
    /// the run trains (its iterations times its batch). More stand for the
    /// dataset of which a short run trains a prefix.
    pub profile_samples: Option<u64>,
}

impl Default for HotOptions {
    fn default() -> Self {
        HotOptions {
            budget_bytes: DEFAULT_BUDGET_BYTES,
            sampling: Sampling::fae(SAMPLE_SEED),
            schedule: Schedule::fae(),
            cache_bytes: None,
            device_bytes: None,
            scars_schedule: Schedule::fixed(1.0),
            profile_samples: None,
        }
    }
}

impl HotOptions {
    /// Every option in range, or an error naming the option.
    pub fn validate(&self) -> Result<(), DlrmError> {
        if self.budget_bytes == 0 {
            return Err(DlrmError::Config(
                "hot budget: 0 bytes; expected a size such as 256MiB".into(),
            ));
        }
        if self.profile_samples == Some(0) {
            return Err(DlrmError::Config(
                "profile samples: 0; expected at least 1 sample".into(),
            ));
        }
        if self.cache_bytes == Some(0) {
            return Err(DlrmError::Config(
                "cache size: 0 bytes; expected a size such as 256MiB".into(),
            ));
        }
        self.sampling.validate()?;
        self.schedule.validate("FAE schedule")?;
        self.scars_schedule.validate("SCARS schedule")
    }
}

/// The run's input as the calibrators see it: per-table access counts of a
/// sample of the samples the run trains on.
#[derive(Debug)]
pub struct HotContext {
    pub options: HotOptions,
    pub profile: AccessProfile,
    /// The hot sets chosen so far, by how they are chosen (FAE's calibrator,
    /// SCARS's cost model): each is chosen once per run.
    plans: std::sync::Mutex<Vec<(PlanKind, TrainConfig, Arc<HotPlan>)>>,
}

/// How a strategy chooses its hot set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanKind {
    /// FAE's calibrator: the least threshold that fits the budget.
    Fae,
    /// SCARS: the cost model's cache (or `--cache-mb`).
    Scars,
}

impl PlanKind {
    /// The kind of the hot strategy `mode` (`scars`, else FAE's).
    pub fn of_mode(mode: &str) -> Self {
        if mode == "scars" {
            PlanKind::Scars
        } else {
            PlanKind::Fae
        }
    }
}

impl HotContext {
    /// Profiles the first `samples` samples of `data` (the run's training
    /// input) under `options.sampling`.
    pub fn profile(
        data: &mut dyn DataSource,
        table_rows: &[u64],
        samples: u64,
        options: HotOptions,
    ) -> Result<Self, DlrmError> {
        options.validate()?;
        let mut pb = ProfileBuilder::new(table_rows, options.sampling)?;
        let mut seen = 0u64;
        while seen < samples {
            let Some(b) = data.next_batch() else { break };
            let b = b?;
            let n = b.batch_size() as u64;
            if n == 0 {
                break;
            }
            let b = if seen + n > samples {
                take_first(&b, (samples - seen) as usize)
            } else {
                b
            };
            pb.add(&b)?;
            seen += b.batch_size() as u64;
        }
        if seen == 0 {
            return Err(DlrmError::Config(
                "the input is empty: there is nothing to profile for the hot rows".into(),
            ));
        }
        Ok(HotContext {
            options,
            profile: pb.finish()?,
            plans: Default::default(),
        })
    }

    /// The hot set of `kind` for a run of `config`, chosen on its first
    /// request and shared after (the run's check before training, `fae` and
    /// `fae-nmp` ask for the same one).
    pub fn plan(&self, kind: PlanKind, config: &TrainConfig) -> Result<Arc<HotPlan>, DlrmError> {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, p)) = plans.iter().find(|(k, c, _)| *k == kind && c == config) {
            return Ok(p.clone());
        }
        let p = match kind {
            PlanKind::Fae => HotPlan::fae(self, config)?,
            PlanKind::Scars => HotPlan::scars(self, config)?,
        };
        plans.push((kind, config.clone(), p.clone()));
        Ok(p)
    }
}

/// The first `n` samples of `b`.
fn take_first(b: &Batch, n: usize) -> Batch {
    let mut out = input::Builder::like(b);
    for s in 0..n {
        out.push(b, s);
    }
    out.finish()
}

/// A hot set chosen for a run, and how.
#[derive(Debug)]
pub struct HotPlan {
    pub set: HotSet,
    /// Per table, the hot rows, ascending.
    pub rows: Vec<Vec<u32>>,
    /// The profile's figures at the chosen budget.
    pub result: BudgetResult,
    /// Bytes the hot set may take (the budget or the cost model's cache).
    pub bytes: u64,
    /// Bytes of one row on the device: values and optimizer state.
    pub row_bytes: u64,
    /// How the size was chosen, for the logs.
    pub how: String,
    /// SCARS's cost model's figures, when it chose the size.
    pub cost_model: Option<crate::scars::CachePoint>,
}

impl HotPlan {
    /// FAE's calibrator: the least access threshold whose hot rows fit the
    /// budget (tables under 1 MiB hot whole).
    pub fn fae(ctx: &HotContext, config: &TrainConfig) -> Result<Arc<Self>, DlrmError> {
        let row_bytes = row_bytes(config);
        let budget = ctx.options.budget_bytes;
        Self::at_budget(
            ctx,
            row_bytes,
            budget,
            format!("FAE calibrator, budget {}", mib(budget)),
            None,
        )
    }

    /// SCARS: the cache of `--cache-mb`, or the cost model's best size for
    /// the profiled distribution and the device's memory.
    pub fn scars(ctx: &HotContext, config: &TrainConfig) -> Result<Arc<Self>, DlrmError> {
        let row_bytes = row_bytes(config);
        if let Some(c) = ctx.options.cache_bytes {
            return Self::at_budget(
                ctx,
                row_bytes,
                c,
                format!("SCARS cache of {} (given)", mib(c)),
                None,
            );
        }
        let p = &ctx.profile;
        let tables = TableDist::from_profile(p);
        let row_params = (row_bytes / 4) as f64;
        let samples = (config.iters as f64 * config.batch as f64).max(1.0);
        let model = CostModel::new(&tables, row_params, samples)?;
        let m = &config.model;
        // A sample's parameters on the device: its looked-up rows, dense
        // features and the MLPs' activations and their gradients.
        let lookups = p.total_lookups() as f64 / p.samples_seen.max(1) as f64;
        let widths: usize = m.bottom.iter().chain(&m.top).sum();
        let per_sample = lookups * m.dim as f64 + 2.0 * widths as f64;
        let device = ctx.options.device_bytes.unwrap_or_else(|| {
            ctx.options.budget_bytes + (per_sample * 4.0 * config.batch as f64) as u64
        });
        let mem = DeviceMemory {
            params: device as f64 / 4.0,
            per_sample,
        };
        let best = model.best_cache(mem)?;
        // The run keeps its configured batch: the cache holds the cost
        // model's best rows, or fewer where those would crowd that batch out.
        let beside_batch = model.max_cached(DeviceMemory {
            params: mem.params - per_sample * (config.batch as f64 - 1.0),
            per_sample,
        });
        let rows = best.cached_rows.min(beside_batch);
        let cal = Calibration::new(p, row_bytes)?;
        // (Tables under 1 MiB are cached whole, as FAE's; the budget holds them.)
        let bytes = (rows * row_bytes).max(cal.small_bytes() as u64).max(1);
        Self::at_budget(
            ctx,
            row_bytes,
            bytes,
            format!(
                "SCARS cost model in {} of device memory: best {} rows beside a batch of {:.0}; the run's batch of {} leaves room for {}; {} cached",
                mib(device),
                best.cached_rows,
                best.batch,
                config.batch,
                beside_batch,
                mib(bytes)
            ),
            Some(best),
        )
    }

    fn at_budget(
        ctx: &HotContext,
        row_bytes: u64,
        budget: u64,
        how: String,
        cost_model: Option<crate::scars::CachePoint>,
    ) -> Result<Arc<Self>, DlrmError> {
        let p = &ctx.profile;
        let cal = Calibration::new(p, row_bytes)?;
        let result = cal.budget(p, budget).map_err(|e| {
            DlrmError::Config(format!(
                "hot rows (--hot-budget, or SCARS's --cache-mb): {}",
                e.to_string()
                    .trim_start_matches("invalid parameter `budget`: ")
            ))
        })?;
        let set = HotSet::new(p, &cal, result.threshold);
        let rows = p
            .table_rows
            .iter()
            .enumerate()
            .map(|(t, &r)| set.hot_rows(t, r))
            .collect();
        Ok(Arc::new(HotPlan {
            set,
            rows,
            result,
            bytes: budget,
            row_bytes,
            how,
            cost_model,
        }))
    }

    /// Whether every sample of `batch` looks up hot rows only.
    pub fn batch_is_hot(&self, batch: &Batch) -> bool {
        batch
            .tables
            .iter()
            .enumerate()
            .all(|(t, tb)| self.set.all_hot(t) || tb.indices.iter().all(|&r| self.set.is_hot(t, r)))
    }

    /// Hot rows in all.
    pub fn hot_rows(&self) -> u64 {
        self.rows.iter().map(|r| r.len() as u64).sum()
    }
}

/// Host bytes the strategies with hot rows take at most beyond the model
/// ([`TrainConfig::memory_bytes`]), counted without overflow: the access
/// profile (a 4-byte counter per row, kept for the run), the larger of FAE's
/// copy of the hot rows with its row map (4 bytes a row) and SCARS's cache
/// with its slot maps (4 bytes a row), and the input processor's look-ahead
/// (64 mini-batches of each kind, `bag` lookups per bag at most).
pub fn extra_memory_bytes(config: &TrainConfig, options: &HotOptions, bag: u64) -> u128 {
    let m = &config.model;
    let rows: u128 = m.table_rows.iter().map(|&r| r as u128).sum();
    let tables_bytes = rows.saturating_mul(row_bytes(config) as u128);
    let budget = (options.budget_bytes as u128)
        .max(options.cache_bytes.unwrap_or(0) as u128)
        .min(tables_bytes);
    let profile = rows.saturating_mul(4);
    let copies = budget.saturating_add(rows.saturating_mul(4));
    let per_sample = (m.table_rows.len() as u128)
        .saturating_mul(bag as u128 * 2 + 1)
        .saturating_add(m.bottom[0] as u128 + 1)
        .saturating_mul(4);
    let look_ahead = (2 * (input::LOOK_AHEAD as u128 + 1))
        .saturating_mul(config.batch as u128)
        .saturating_mul(per_sample);
    profile.saturating_add(copies).saturating_add(look_ahead)
}

/// Bytes of one row on the device: its values and its optimizer state.
pub fn row_bytes(config: &TrainConfig) -> u64 {
    let dim = config.model.dim;
    ((dim + config.embedding_optimizer.state_values_per_row(dim)) * 4) as u64
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64)
}

#[cfg(all(test, feature = "cuda"))]
mod cuda_tests;
#[cfg(test)]
mod tests;
