//! FAE: the hot rows replicated on the GPU, every table on the host.
//!
//! A hot mini-batch (every lookup hits a hot row) trains on the GPU alone,
//! on its replica of the hot rows; a cold one trains as the baseline does,
//! on the host's tables, which hold the hot rows too. The side that trained
//! last holds the current hot rows: at the first mini-batch of the other
//! kind they are copied across whole (values and optimizer state), and the
//! copy is timed over the host link (over the pool's link for `fae-nmp`,
//! whose host tables are the NMP pool's).
//!
//! `fae-nmp` is the hybrid no paper ran: the cold mini-batches run on the
//! NMP pool as `tcast-nmp` runs every mini-batch.

use std::sync::{Arc, Mutex};

use nmpsim_kernels::{EmbeddingTable, Pooling};
use nmpsim_traces::Batch;

use super::HotPlan;
use super::gpu_step::{self, Scratch};
use super::input::{InputPlan, Schedule};
use super::replica::Replica;
use crate::DlrmError;
use crate::embedding::{EmbeddingStrategy, StepCtx, SystemMode, SystemModes};
use crate::gpu::GpuPreset;
use crate::timeline::{MAIN, Resource, Source, Stage};
use crate::trainer::DataSource;

/// Which copy of the hot rows is current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Current {
    Host,
    Replica,
    Both,
}

/// The mini-batch between its forward and backward pass.
enum Step {
    None,
    Cold,
    /// Its indices as the replica's rows.
    Hot(Batch),
}

/// FAE's counts, for the run's notes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaeCounts {
    pub hot_steps: u64,
    pub cold_steps: u64,
    pub syncs: u64,
    pub sync_bytes: u64,
}

/// FAE (or `fae-nmp`) as an embedding strategy.
pub struct Fae {
    name: &'static str,
    cold: SystemModes,
    replica: Replica,
    current: Current,
    plan: Arc<HotPlan>,
    gpu: GpuPreset,
    pooling: Pooling,
    feed: InputPlan,
    step: Step,
    scratch: Scratch,
    pub counts: FaeCounts,
}

impl Fae {
    /// FAE over `cold` (the strategy of its cold mini-batches: `baseline-cpu`
    /// for FAE, `tcast-nmp` for `fae-nmp`), with `plan`'s hot rows.
    /// `config` gives the pooling, the batch and the run's iterations.
    pub fn new(
        name: &'static str,
        cold: SystemModes,
        plan: Arc<HotPlan>,
        gpu: GpuPreset,
        schedule: Schedule,
        config: &crate::trainer::TrainConfig,
    ) -> Result<Self, DlrmError> {
        let replica = Replica::new(&plan.rows, cold.tables(), cold.states())?;
        Ok(Fae {
            name,
            cold,
            replica,
            // (Equal at the start: the first hot mini-batch still copies the
            // rows to the GPU, which is how they get there.)
            current: Current::Host,
            feed: InputPlan::new(plan.clone(), schedule, config),
            plan,
            gpu,
            pooling: config.model.pooling,
            step: Step::None,
            scratch: Scratch::default(),
            counts: FaeCounts::default(),
        })
    }

    /// The GPU's copy of the hot rows.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The host's tables and optimizer state (current only after `sync`).
    pub fn host(&self) -> (&[EmbeddingTable], &[nmpsim_kernels::OptimizerState]) {
        (self.cold.tables(), self.cold.states())
    }

    fn on_pool(&self) -> bool {
        self.cold.mode.uses_nmp()
    }

    /// Copies the hot rows to the side that trains next, timing the copy.
    fn sync_to(&mut self, to_gpu: bool, ctx: &mut StepCtx) -> Result<(), DlrmError> {
        let bytes = self.replica.bytes();
        let (tables, states) = self.cold.host_parts_mut()?;
        if to_gpu {
            self.replica.load(tables, states);
        } else {
            self.replica.store(tables, states);
            self.cold.host_changed()?;
        }
        let host = if self.on_pool() { "pool" } else { "host" };
        let what = if to_gpu {
            format!("hot rows {host} to gpu")
        } else {
            format!("hot rows gpu to {host}")
        };
        let (resource, (source, ns)) = if self.on_pool() {
            (Resource::PoolLink, self.cold.pool_transfer(bytes)?)
        } else {
            (
                Resource::HostLink,
                (Source::Modelled, self.gpu.host_transfer_ns(bytes)),
            )
        };
        ctx.timeline.push(
            "transfer",
            what,
            Stage::ForwardTransfer,
            MAIN,
            resource,
            source,
            ns,
            bytes,
        );
        self.counts.syncs += 1;
        self.counts.sync_bytes += bytes;
        self.current = Current::Both;
        Ok(())
    }
}

impl EmbeddingStrategy for Fae {
    fn name(&self) -> String {
        self.name.to_string()
    }

    fn placement(&self) -> Vec<(String, String)> {
        let mut v = vec![("hot mini-batches".to_string(), "gpu".to_string())];
        for (p, place) in self.cold.placement() {
            v.push((format!("cold {p}"), place));
        }
        v
    }

    fn forward(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<Vec<Vec<f32>>, DlrmError> {
        let t0 = std::time::Instant::now();
        let hot = self.plan.batch_is_hot(batch);
        ctx.host.add("hot check", t0.elapsed().as_nanos() as f64);
        if hot {
            if self.current == Current::Host {
                self.sync_to(true, ctx)?;
            }
            let rb = self.replica.remap(batch)?;
            gpu_step::push_indices(batch, &self.gpu, ctx);
            let pooled = gpu_step::forward(
                &self.replica.tables,
                &rb,
                self.pooling,
                &mut self.scratch,
                &self.gpu,
                "gpu (hot rows)",
                ctx,
            )?;
            self.step = Step::Hot(rb);
            self.counts.hot_steps += 1;
            Ok(pooled)
        } else {
            if self.current == Current::Replica {
                self.sync_to(false, ctx)?;
            }
            self.step = Step::Cold;
            self.counts.cold_steps += 1;
            self.cold.forward(batch, ctx)
        }
    }

    fn backward(
        &mut self,
        batch: &Batch,
        dpooled: &[Vec<f32>],
        ctx: &mut StepCtx,
    ) -> Result<(), DlrmError> {
        match std::mem::replace(&mut self.step, Step::None) {
            Step::Hot(rb) => {
                let r = &mut self.replica;
                gpu_step::backward(
                    &mut r.tables,
                    &mut r.states,
                    &rb,
                    dpooled,
                    self.pooling,
                    &ctx.optimizer.clone(),
                    &mut self.scratch,
                    &self.gpu,
                    "gpu (hot rows)",
                    ctx,
                )?;
                self.current = Current::Replica;
                Ok(())
            }
            Step::Cold => {
                self.cold.backward(batch, dpooled, ctx)?;
                self.current = Current::Host;
                Ok(())
            }
            Step::None => Err(DlrmError::Config(
                "backward without a forward pass before it".into(),
            )),
        }
    }

    fn infer(&self, batch: &Batch) -> Result<Vec<Vec<f32>>, DlrmError> {
        if self.current == Current::Replica {
            return Err(DlrmError::Config(
                "the host's hot rows are behind the GPU's; call sync() first".into(),
            ));
        }
        self.cold.infer(batch)
    }

    fn tables(&self) -> &[EmbeddingTable] {
        self.cold.tables()
    }

    fn sync(&mut self) -> Result<(), DlrmError> {
        // (For evaluation and the end of the run: not a step's transfer.)
        if self.current == Current::Replica {
            let (tables, states) = self.cold.host_parts_mut()?;
            self.replica.store(tables, states);
            self.cold.host_changed()?;
            self.current = Current::Both;
        }
        self.cold.sync()
    }

    fn input(&self, data: Box<dyn DataSource>) -> Result<Box<dyn DataSource>, DlrmError> {
        self.feed.source(data)
    }

    fn notes(&self) -> Vec<(String, String)> {
        let mut v = notes(
            &self.plan,
            &self.feed.stats,
            &[
                ("hot steps", self.counts.hot_steps.to_string()),
                ("cold steps", self.counts.cold_steps.to_string()),
                ("hot-row syncs", self.counts.syncs.to_string()),
                (
                    "hot-row sync MB",
                    format!("{:.3}", self.counts.sync_bytes as f64 / 1e6),
                ),
            ],
        );
        v.extend(self.scratch.notes());
        v
    }
}

/// The notes of a hot strategy: its plan, its input's split, and `extra`.
pub(super) fn notes(
    plan: &HotPlan,
    input: &Mutex<super::input::InputStats>,
    extra: &[(&str, String)],
) -> Vec<(String, String)> {
    let mut v = vec![
        ("hot set".to_string(), plan.how.clone()),
        ("hot rows".into(), plan.hot_rows().to_string()),
        (
            "hot MB".into(),
            format!(
                "{:.3}",
                plan.hot_rows() as f64 * plan.row_bytes as f64 / 1e6
            ),
        ),
        ("access threshold".into(), plan.result.threshold.to_string()),
        (
            "profiled hot-lookup share".into(),
            format!("{:.4}", plan.result.lookup_share),
        ),
    ];
    if let Ok(s) = input.lock() {
        let n = (s.hot_samples + s.cold_samples).max(1) as f64;
        v.push((
            "hot-sample share read".into(),
            format!("{:.4}", s.hot_samples as f64 / n),
        ));
        v.push(("hot mini-batches".into(), s.hot_batches.to_string()));
        v.push(("cold mini-batches".into(), s.cold_batches.to_string()));
        if let Some(last) = s.rates.last() {
            v.push(("schedules".into(), s.rates.len().to_string()));
            // The rate after each change (Eq. 7), from the start.
            let mut changes = vec![format!("{}", plan_rate_start(&s.rates))];
            for w in s.rates.windows(2).filter(|w| w[0] != w[1]) {
                changes.push(format!("{}", w[1]));
            }
            v.push(("schedule rates".into(), changes.join(" -> ")));
            v.push(("last rate".into(), format!("{last}")));
        }
    }
    v.extend(extra.iter().map(|(k, x)| (k.to_string(), x.clone())));
    v
}

/// The rate of the first schedule.
fn plan_rate_start(rates: &[f64]) -> f64 {
    rates.first().copied().unwrap_or(0.0)
}

/// The factory of `fae` and `fae-nmp`.
pub(crate) fn build(
    ctx: &crate::strategy::BuildCtx,
    name: &'static str,
    cold_mode: SystemMode,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    let c = ctx.config;
    c.validate()?;
    let hot = ctx.hot.as_ref().ok_or_else(|| {
        DlrmError::Config(format!(
            "mode {name} needs the run's access profile (none was made)"
        ))
    })?;
    let plan = hot.plan(super::PlanKind::Fae, c)?;
    let m = &c.model;
    let cold = crate::strategy::on_gpu(
        SystemModes::new(
            cold_mode,
            &m.table_rows,
            m.dim,
            m.pooling,
            &c.embedding_optimizer,
            c.seed,
            ctx.env.clone(),
        )?,
        ctx,
    )?;
    let mut f = Fae::new(
        name,
        cold,
        plan,
        ctx.env.gpu.clone(),
        hot.options.schedule,
        c,
    )?;
    f.scratch = Scratch::for_run(ctx)?;
    Ok(Box::new(f))
}
