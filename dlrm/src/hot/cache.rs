//! SCARS's practical algorithm: a device cache of the hottest rows (sized by
//! the cost model, or given), hot mini-batches trained on the device alone,
//! and normal mini-batches coalesced on the host.
//!
//! The cache holds the only current copy of its rows. For a normal
//! mini-batch the host finds each table's unique rows and sends the
//! uncached ones with the batch's indices (Eq. 6's traffic); the GPU pools
//! from its cache and the rows it received, coalesces the gradients, applies
//! the optimizer to the cached rows and returns the uncached rows' coalesced
//! gradients, which the host's optimizer applies.

use std::sync::Arc;
use std::time::Instant;

use nmpsim_kernels::{Coalesced, EmbeddingTable, OptimizerState, Pooling, scatter_update};
use nmpsim_traces::{Batch, TableBatch};

use super::HotPlan;
use super::gpu_step::{self, Scratch};
use super::input::{InputPlan, Schedule};
use super::replica::Replica;
use crate::DlrmError;
use crate::embedding::{EmbeddingStrategy, StepCtx};
use crate::gpu::GpuPreset;
use crate::timeline::{MAIN, Resource, Source, Stage};
use crate::trainer::DataSource;

/// One normal mini-batch's working set on the device.
struct Working {
    /// Per table the batch's unique rows (host ids, ascending).
    unique: Vec<Vec<u32>>,
    /// The batch with its indices as positions in `unique`.
    batch: Batch,
}

enum Step {
    None,
    Hot(Batch),
    Normal(Working),
}

/// SCARS's counts, for the run's notes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScarsCounts {
    pub hot_steps: u64,
    pub normal_steps: u64,
    /// Uncached unique rows sent to the device, and their gradients back.
    pub rows_sent: u64,
    pub unique_rows: u64,
}

/// SCARS as an embedding strategy.
pub struct Scars {
    tables: Vec<EmbeddingTable>,
    states: Vec<OptimizerState>,
    cache: Replica,
    /// The host's copies of the cached rows are behind the cache's.
    stale: bool,
    plan: Arc<HotPlan>,
    gpu: GpuPreset,
    /// The modelled host (`--host`) that times the CPU's work.
    host: Option<Arc<crate::host::HostConfig>>,
    pooling: Pooling,
    feed: InputPlan,
    step: Step,
    scratch: Scratch,
    /// Per table, host row -> position in the current batch's unique rows.
    slot: Vec<Vec<u32>>,
    pub counts: ScarsCounts,
}

fn ns_since(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64
}

impl Scars {
    /// Tables seeded as every strategy's, with `plan`'s rows cached.
    pub fn new(
        config: &crate::trainer::TrainConfig,
        plan: Arc<HotPlan>,
        gpu: GpuPreset,
        schedule: Schedule,
    ) -> Result<Self, DlrmError> {
        let m = &config.model;
        let (tables, states) = crate::embedding::initial_tables_for(config)?;
        let cache = Replica::new(&plan.rows, &tables, &states)?;
        let slot = m
            .table_rows
            .iter()
            .map(|&r| vec![u32::MAX; r as usize])
            .collect();
        Ok(Scars {
            tables,
            states,
            cache,
            stale: false,
            feed: InputPlan::new(plan.clone(), schedule, config),
            plan,
            gpu,
            host: None,
            pooling: m.pooling,
            step: Step::None,
            scratch: Scratch::default(),
            slot,
            counts: ScarsCounts::default(),
        })
    }

    /// The CPU's work timed by the modelled host `host` (`--host`).
    pub fn with_host(mut self, host: Option<Arc<crate::host::HostConfig>>) -> Self {
        self.host = host;
        self
    }

    /// The device's cache.
    pub fn cache(&self) -> &Replica {
        &self.cache
    }

    /// The normal mini-batch's unique rows, gathered from the cache or the
    /// host, and its indices as positions among them; the working tables.
    fn gather_working(
        &mut self,
        batch: &Batch,
    ) -> Result<(Working, Vec<EmbeddingTable>, u64), DlrmError> {
        let dim = self.tables[0].dim;
        let mut unique = Vec::with_capacity(batch.tables.len());
        let mut rtables = Vec::with_capacity(batch.tables.len());
        let mut working = Vec::with_capacity(batch.tables.len());
        let mut sent = 0u64;
        for (t, tb) in batch.tables.iter().enumerate() {
            let mut u = tb.indices.clone();
            u.sort_unstable();
            u.dedup();
            let slot = &mut self.slot[t];
            let mut w = EmbeddingTable::zeros(u.len() as u64, dim)?;
            for (i, &r) in u.iter().enumerate() {
                slot[r as usize] = i as u32;
                let src = match self.cache.local(t, r) {
                    Some(c) => &self.cache.tables[t].data[c as usize * dim..(c as usize + 1) * dim],
                    None => {
                        sent += 1;
                        &self.tables[t].data[r as usize * dim..(r as usize + 1) * dim]
                    }
                };
                w.data[i * dim..(i + 1) * dim].copy_from_slice(src);
            }
            rtables.push(TableBatch {
                num_rows: u.len() as u64,
                offsets: tb.offsets.clone(),
                indices: tb.indices.iter().map(|&r| slot[r as usize]).collect(),
                weights: tb.weights.clone(),
            });
            for &r in &u {
                slot[r as usize] = u32::MAX;
            }
            unique.push(u);
            working.push(w);
        }
        let w = Working {
            unique,
            batch: Batch::of_tables(rtables),
        };
        Ok((w, working, sent))
    }
}

impl EmbeddingStrategy for Scars {
    fn name(&self) -> String {
        "scars".into()
    }

    fn placement(&self) -> Vec<(String, String)> {
        crate::embedding::places(&[
            ("hot mini-batches", "gpu"),
            ("normal coalesce (unique rows)", "cpu"),
            ("normal gather-reduce", "gpu"),
            ("normal expand-coalesce", "gpu"),
            ("cached-row scatter", "gpu"),
            ("uncached-row scatter", "cpu"),
        ])
    }

    fn forward(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<Vec<Vec<f32>>, DlrmError> {
        gpu_step::push_indices(batch, &self.gpu, ctx);
        let t0 = Instant::now();
        let hot = self.plan.batch_is_hot(batch);
        ctx.host.add("hot check", ns_since(t0));
        if hot {
            let rb = self.cache.remap(batch)?;
            let pooled = gpu_step::forward(
                &self.cache.tables,
                &rb,
                self.pooling,
                &mut self.scratch,
                &self.gpu,
                "gpu (cache)",
                ctx,
            )?;
            self.step = Step::Hot(rb);
            self.counts.hot_steps += 1;
            return Ok(pooled);
        }
        // The host coalesces: unique rows per table, the uncached ones
        // gathered into the buffer it sends.
        let t0 = Instant::now();
        let (w, working, sent) = self.gather_working(batch)?;
        let coalesce_ns = ns_since(t0);
        ctx.host.add("coalesce indices", coalesce_ns);
        let dim = self.tables[0].dim as u64;
        let unique: u64 = w.unique.iter().map(|u| u.len() as u64).sum();
        let row_bytes = sent * dim * 4;
        let (source, ns, detail) = match &self.host {
            Some(h) => {
                let mut work = crate::host::PrimitiveWork::default();
                for (tb, u) in batch.tables.iter().zip(&w.unique) {
                    work = work
                        + crate::host::unique_rows_work(
                            tb.indices.len(),
                            tb.num_rows,
                            u.len(),
                            0,
                            dim as usize,
                        );
                }
                // The uncached rows, read at random from the host tables.
                work.random_lines += sent * (dim * 4).div_ceil(crate::host::LINE_BYTES);
                (
                    Source::ModelledHost,
                    h.time_ns(&work),
                    format!("cpu (host {}: unique rows, uncached ones gathered)", h.name),
                )
            }
            None => (
                Source::Measured,
                coalesce_ns,
                "cpu (unique rows, uncached ones gathered)".to_string(),
            ),
        };
        ctx.timeline.push(
            "coalesce",
            &detail,
            Stage::ForwardEmbedding,
            MAIN,
            Resource::Cpu,
            source,
            ns,
            // (Each lookup's index read, the sort's pass, the rows copied.)
            8 * gpu_step::index_bytes(batch) + 2 * row_bytes,
        );
        let bytes = row_bytes + 4 * unique;
        ctx.timeline.push(
            "transfer",
            "uncached unique rows host to gpu",
            Stage::ForwardTransfer,
            MAIN,
            Resource::HostLink,
            Source::Modelled,
            self.gpu.host_transfer_ns(bytes),
            bytes,
        );
        let pooled = gpu_step::forward(
            &working,
            &w.batch,
            self.pooling,
            &mut self.scratch,
            &self.gpu,
            "gpu (cache and sent rows)",
            ctx,
        )?;
        self.counts.normal_steps += 1;
        self.counts.rows_sent += sent;
        self.counts.unique_rows += unique;
        self.step = Step::Normal(w);
        Ok(pooled)
    }

    fn backward(
        &mut self,
        _batch: &Batch,
        dpooled: &[Vec<f32>],
        ctx: &mut StepCtx,
    ) -> Result<(), DlrmError> {
        let optimizer = ctx.optimizer;
        match std::mem::replace(&mut self.step, Step::None) {
            Step::None => Err(DlrmError::Config(
                "backward without a forward pass before it".into(),
            )),
            Step::Hot(rb) => {
                let c = &mut self.cache;
                gpu_step::backward(
                    &mut c.tables,
                    &mut c.states,
                    &rb,
                    dpooled,
                    self.pooling,
                    &optimizer,
                    &mut self.scratch,
                    &self.gpu,
                    "gpu (cache)",
                    ctx,
                )?;
                self.stale = true;
                Ok(())
            }
            Step::Normal(w) => {
                // Expand and coalesce on the device, over the working rows.
                let dim = self.tables[0].dim;
                gpu_step::coalesce(
                    &w.batch,
                    dpooled,
                    self.pooling,
                    dim,
                    &mut self.scratch,
                    &self.gpu,
                    "gpu (cache and sent rows)",
                    ctx,
                )?;
                // The coalesced rows split between the cache and the host.
                let (mut cached, mut host) = (Vec::new(), Vec::new());
                for (t, c) in self
                    .scratch
                    .coalesced
                    .iter()
                    .enumerate()
                    .take(w.unique.len())
                {
                    let mut hc = Coalesced::empty(dim);
                    let mut cc = Coalesced::empty(dim);
                    for (k, &pos) in c.rows.iter().enumerate() {
                        let r = w.unique[t][pos as usize];
                        let g = &c.grads[k * dim..(k + 1) * dim];
                        match self.cache.local(t, r) {
                            Some(l) => {
                                cc.rows.push(l);
                                cc.grads.extend_from_slice(g);
                            }
                            None => {
                                hc.rows.push(r);
                                hc.grads.extend_from_slice(g);
                            }
                        }
                    }
                    cached.push(cc);
                    host.push(hc);
                }
                gpu_step::scatter(
                    &mut self.cache.tables,
                    &mut self.cache.states,
                    &cached,
                    &optimizer,
                    self.scratch.device(),
                    &self.gpu,
                    "gpu (cached rows)",
                    ctx,
                )?;
                if cached.iter().any(|c| !c.rows.is_empty()) {
                    self.stale = true;
                }
                let back: u64 = host
                    .iter()
                    .map(|c| (c.rows.len() * (dim + 1) * 4) as u64)
                    .sum();
                ctx.timeline.push(
                    "transfer",
                    "uncached rows' gradients gpu to host",
                    Stage::BackwardTransfer,
                    MAIN,
                    Resource::HostLink,
                    Source::Modelled,
                    self.gpu.host_transfer_ns(back),
                    back,
                );
                let t0 = Instant::now();
                let mut hbytes = 0u64;
                for (t, c) in host.iter().enumerate() {
                    hbytes +=
                        scatter_update(&mut self.tables[t], &mut self.states[t], c, &optimizer)
                            .map_err(|e| e.in_table(t))?
                            .total_bytes();
                }
                let ns = ns_since(t0);
                ctx.host.add("scatter", ns);
                let state = optimizer.state_values_per_row(dim);
                let shapes = host.iter().map(|c| crate::host::TableShape {
                    indices: &[],
                    bags: 0,
                    dim,
                    weighted: false,
                    scaled: false,
                    num_rows: 0,
                    unique: c.rows.len(),
                });
                let env = crate::embedding::TimingEnv {
                    gpu: self.gpu.clone(),
                    pool: None,
                    host: self.host.clone(),
                };
                let (source, ns, _) =
                    env.cpu_time(crate::host::CpuPrimitive::Scatter, shapes, state, ns);
                let detail = match &self.host {
                    Some(h) => format!("cpu (host {}: uncached rows)", h.name),
                    None => "cpu (uncached rows)".into(),
                };
                ctx.timeline.push(
                    "scatter",
                    &detail,
                    Stage::BackwardEmbedding,
                    MAIN,
                    Resource::Cpu,
                    source,
                    ns,
                    hbytes,
                );
                Ok(())
            }
        }
    }

    fn infer(&self, batch: &Batch) -> Result<Vec<Vec<f32>>, DlrmError> {
        if self.stale {
            return Err(DlrmError::Config(
                "the host's copies of the cached rows are behind the cache; call sync() first"
                    .into(),
            ));
        }
        crate::embedding::pool_all(&self.tables, batch, self.pooling)
    }

    fn tables(&self) -> &[EmbeddingTable] {
        &self.tables
    }

    fn sync(&mut self) -> Result<(), DlrmError> {
        // (For evaluation and the end of the run: the cache stays the owner.)
        if self.stale {
            self.cache.store(&mut self.tables, &mut self.states);
            self.stale = false;
        }
        Ok(())
    }

    fn input(&self, data: Box<dyn DataSource>) -> Result<Box<dyn DataSource>, DlrmError> {
        self.feed.source(data)
    }

    fn notes(&self) -> Vec<(String, String)> {
        let c = &self.counts;
        let mut v = super::fae::notes(
            &self.plan,
            &self.feed.stats,
            &[
                ("hot steps", c.hot_steps.to_string()),
                ("normal steps", c.normal_steps.to_string()),
                ("unique rows of normal steps", c.unique_rows.to_string()),
                ("uncached rows sent", c.rows_sent.to_string()),
            ],
        );
        v.extend(self.scratch.notes());
        v
    }
}

/// The factory of `scars`.
pub(crate) fn build(
    ctx: &crate::strategy::BuildCtx,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    let c = ctx.config;
    c.validate()?;
    let hot = ctx.hot.as_ref().ok_or_else(|| {
        DlrmError::Config("mode scars needs the run's access profile (none was made)".into())
    })?;
    let plan = hot.plan(super::PlanKind::Scars, c)?;
    let mut s = Scars::new(c, plan, ctx.env.gpu.clone(), hot.options.scars_schedule)?
        .with_host(ctx.env.host.clone());
    s.scratch = Scratch::for_run(ctx)?;
    Ok(Box::new(s))
}
