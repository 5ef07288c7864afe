//! `cdlrm` as an embedding strategy: the tables in host memory, a cache of
//! each on the GPU, windows of `n` batches installed ahead of training, and
//! every batch trained on the GPU from the cache and its conflict victims.
//!
//! Times: the prefetcher's gathers and the caching step's occupancy look-ups
//! are measured on this machine's CPU (the prefetcher on a lane of its own:
//! the paper's separate process, overlapped with training); the transfers
//! are modelled from the host link's bandwidth and the GPU's work from the
//! GPU preset's memory bandwidth, as FAE's and SCARS's are.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use nmpsim_kernels::{EmbeddingTable, OptimizerState, Pooling};
use nmpsim_traces::Batch;

use super::lookahead::{Ahead, LookAhead, SharedAhead};
use super::window::{CachedTables, CdlrmOptions, Working};
use crate::DlrmError;
use crate::embedding::{EmbeddingStrategy, StepCtx};
use crate::gpu::GpuPreset;
use crate::hot::gpu_step::{self, Scratch};
use crate::timeline::{MAIN, OVERLAP, Resource, Source, Stage};
use crate::trainer::DataSource;

fn ns_since(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64
}

/// The run's caching figures, for its notes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachingTimes {
    pub windows: u64,
    /// Modelled and measured time of the caching steps (installs and their
    /// write-backs), ns; the prefetcher's gathers apart (overlapped).
    pub caching_ns: f64,
    pub prefetch_ns: f64,
}

/// A batch between its forward and backward passes: its working sets, whose
/// rows and state are in `tables` and `states`, and the batch over them.
struct Step {
    working: Vec<Working>,
    tables: Vec<EmbeddingTable>,
    states: Vec<OptimizerState>,
    rb: Batch,
}

/// cDLRM as an embedding strategy.
pub struct Cdlrm {
    cached: CachedTables,
    ahead: SharedAhead,
    gpu: GpuPreset,
    pooling: Pooling,
    step: Option<Step>,
    scratch: Scratch,
    /// The host tables are behind the caches.
    stale: bool,
    started: bool,
    /// Batches trained.
    batches: u64,
    pub times: CachingTimes,
}

impl Cdlrm {
    /// Tables seeded as every strategy's, all caches empty.
    pub fn new(
        config: &crate::trainer::TrainConfig,
        options: CdlrmOptions,
        gpu: GpuPreset,
    ) -> Result<Self, DlrmError> {
        let m = &config.model;
        let (tables, states) = crate::embedding::initial_tables_for(config)?;
        super::check_device_memory(config, &options, &gpu)?;
        let cached = CachedTables::new(tables, states, options)?;
        Ok(Cdlrm {
            cached,
            ahead: Arc::new(Mutex::new(Ahead::default())),
            gpu,
            pooling: m.pooling,
            step: None,
            scratch: Scratch::default(),
            stale: false,
            started: false,
            batches: 0,
            times: CachingTimes::default(),
        })
    }

    /// The caches and the host tables.
    pub fn cached(&self) -> &CachedTables {
        &self.cached
    }

    /// Every table's counts added up.
    fn totals(&self) -> super::CacheCounts {
        let mut all = super::CacheCounts::default();
        for c in &self.cached.counts {
            all.merge(c);
        }
        all
    }

    fn row_bytes(&self, t: usize) -> u64 {
        (self.cached.host[t].dim + self.cached.host_state[t].values_per_row) as u64 * 4
    }

    /// At a window's first batch: install it, prefetch the next one.
    fn begin_window(&mut self, ctx: &mut StepCtx) -> Result<(), DlrmError> {
        let Some((this, next)) = self
            .ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .starts
            .take()
        else {
            return Ok(());
        };
        let before: Vec<_> = self.cached.counts.clone();
        if !self.started {
            // The first window is fetched before training starts.
            let t0 = Instant::now();
            self.cached.prefetch(&this.batches);
            self.times.prefetch_ns += ns_since(t0);
            self.started = true;
        }
        let w = self
            .cached
            .begin_window(next.as_ref().map(|n| &n.batches[..]))?;
        let (mut installed, mut evicted) = (0u64, 0u64);
        for (t, (a, b)) in self.cached.counts.iter().zip(&before).enumerate() {
            installed += (a.installed - b.installed) * self.row_bytes(t);
            evicted += (a.evictions - b.evictions) * self.row_bytes(t);
        }
        let coherent = self.cached.options.consistency == super::Consistency::Coherent;
        ctx.host.add("caching (occupancy tables)", w.plan_ns);
        ctx.host.add(
            "caching (the caches' copies, modelled as gpu work)",
            w.apply_ns,
        );
        ctx.host.add("write-back", w.write_back_ns);
        let mut on_path = w.plan_ns;
        let cpu =
            |ctx: &mut StepCtx, primitive: &str, detail: &str, lane: u8, ns: f64, bytes: u64| {
                ctx.timeline.push(
                    primitive,
                    detail,
                    Stage::ForwardEmbedding,
                    lane,
                    Resource::Cpu,
                    Source::Measured,
                    ns,
                    bytes,
                );
            };
        cpu(
            ctx,
            "caching",
            "cpu (occupancy tables: look-ups, ways chosen)",
            MAIN,
            w.plan_ns,
            0,
        );
        if coherent {
            // The install waits for the write-backs, then reads the rows again.
            ctx.host
                .add("caching (the installed rows re-read)", w.reread_ns);
            cpu(
                ctx,
                "write-back",
                "cpu (queue drained before the install)",
                MAIN,
                w.write_back_ns,
                0,
            );
            cpu(
                ctx,
                "caching",
                "cpu (the installed rows re-read: coherent)",
                MAIN,
                w.reread_ns,
                installed,
            );
            on_path += w.write_back_ns + w.reread_ns;
        } else {
            cpu(
                ctx,
                "write-back",
                "cpu (the eviction process)",
                OVERLAP,
                w.write_back_ns,
                0,
            );
        }
        ctx.timeline.push(
            "transfer",
            "installed rows host to gpu",
            Stage::ForwardTransfer,
            MAIN,
            Resource::HostLink,
            Source::Modelled,
            self.gpu.host_transfer_ns(installed),
            installed,
        );
        ctx.timeline.push(
            "caching",
            "gpu (installed rows written, evicted rows read)",
            Stage::ForwardEmbedding,
            MAIN,
            Resource::Gpu,
            Source::Modelled,
            self.gpu.stream_ns((installed + evicted) as f64),
            installed + evicted,
        );
        ctx.timeline.push(
            "transfer",
            "evicted rows gpu to host",
            Stage::BackwardTransfer,
            MAIN,
            Resource::HostLink,
            Source::Modelled,
            self.gpu.host_transfer_ns(evicted),
            evicted,
        );
        if let Some(n) = &next {
            ctx.host
                .add("prefetch (unique rows, gathered)", w.prefetch_ns);
            let bytes: u64 = n.batches.iter().map(gpu_step::index_bytes).sum();
            cpu(
                ctx,
                "prefetch",
                "cpu (next window's unique rows gathered)",
                OVERLAP,
                w.prefetch_ns,
                bytes,
            );
        }
        let prefetch_ns = w.prefetch_ns;
        let caching_ns = on_path;
        self.times.windows += 1;
        self.times.caching_ns += caching_ns
            + self.gpu.host_transfer_ns(installed)
            + self.gpu.stream_ns((installed + evicted) as f64)
            + self.gpu.host_transfer_ns(evicted);
        self.times.prefetch_ns += prefetch_ns;
        Ok(())
    }
}

impl EmbeddingStrategy for Cdlrm {
    fn name(&self) -> String {
        "cdlrm".into()
    }

    fn placement(&self) -> Vec<(String, String)> {
        crate::embedding::places(&[
            ("prefetch", "cpu"),
            ("caching", "cpu+gpu"),
            ("gather-reduce", "gpu"),
            ("expand-coalesce", "gpu"),
            ("scatter", "gpu"),
            ("victim fetch", "cpu"),
        ])
    }

    fn forward(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<Vec<Vec<f32>>, DlrmError> {
        self.begin_window(ctx)?;
        self.batches += 1;
        gpu_step::push_indices(batch, &self.gpu, ctx);
        let t0 = Instant::now();
        let before: u64 = self.cached.counts.iter().map(|c| c.victim_rows).sum();
        let mut working = Vec::with_capacity(batch.tables.len());
        for (t, tb) in batch.tables.iter().enumerate() {
            working.push(self.cached.working(t, tb)?);
        }
        let victims: u64 = self
            .cached
            .counts
            .iter()
            .map(|c| c.victim_rows)
            .sum::<u64>()
            - before;
        let vbytes = victims * self.row_bytes(0);
        if victims > 0 {
            ctx.timeline.push(
                "victim fetch",
                "conflict victims host to gpu",
                Stage::ForwardTransfer,
                MAIN,
                Resource::HostLink,
                Source::Modelled,
                self.gpu.host_transfer_ns(vbytes),
                vbytes,
            );
        }
        ctx.host
            .add("working sets (the gpu's look-ups)", ns_since(t0));
        // (The working rows move into the step's tables, and back at the end
        // of the backward pass.)
        let mut tables = Vec::with_capacity(working.len());
        let mut states = Vec::with_capacity(working.len());
        let mut batches = Vec::with_capacity(working.len());
        for w in &mut working {
            let dim = w.table.dim;
            tables.push(std::mem::replace(
                &mut w.table,
                EmbeddingTable {
                    rows: 0,
                    dim,
                    data: Vec::new(),
                },
            ));
            states.push(std::mem::replace(
                &mut w.state,
                OptimizerState {
                    rows: 0,
                    values_per_row: 0,
                    values: Vec::new(),
                },
            ));
            batches.push(std::mem::replace(
                &mut w.batch,
                nmpsim_traces::TableBatch {
                    num_rows: 0,
                    offsets: Vec::new(),
                    indices: Vec::new(),
                    weights: None,
                },
            ));
        }
        let rb = Batch::of_tables(batches);
        let pooled = gpu_step::forward(
            &tables,
            &rb,
            self.pooling,
            &self.gpu,
            "gpu (cache and victim table)",
            ctx,
        )?;
        self.step = Some(Step {
            working,
            tables,
            states,
            rb,
        });
        Ok(pooled)
    }

    fn backward(
        &mut self,
        _batch: &Batch,
        dpooled: &[Vec<f32>],
        ctx: &mut StepCtx,
    ) -> Result<(), DlrmError> {
        let Step {
            working,
            mut tables,
            mut states,
            rb,
        } = self
            .step
            .take()
            .ok_or_else(|| DlrmError::Config("backward without a forward pass before it".into()))?;
        let optimizer = ctx.optimizer;
        gpu_step::backward(
            &mut tables,
            &mut states,
            &rb,
            dpooled,
            self.pooling,
            &optimizer,
            &mut self.scratch,
            &self.gpu,
            "gpu (cache and victim table)",
            ctx,
        )?;
        let before: u64 = self.cached.counts.iter().map(|c| c.written_back).sum();
        for (t, ((mut w, table), state)) in working.into_iter().zip(tables).zip(states).enumerate()
        {
            w.table = table;
            w.state = state;
            self.cached.finish(t, w);
        }
        let back = (self
            .cached
            .counts
            .iter()
            .map(|c| c.written_back)
            .sum::<u64>()
            - before)
            * self.row_bytes(0);
        if back > 0 {
            ctx.timeline.push(
                "victim fetch",
                "conflict victims gpu to host",
                Stage::BackwardTransfer,
                MAIN,
                Resource::HostLink,
                Source::Modelled,
                self.gpu.host_transfer_ns(back),
                back,
            );
        }
        self.stale = true;
        Ok(())
    }

    fn infer(&self, batch: &Batch) -> Result<Vec<Vec<f32>>, DlrmError> {
        if self.stale {
            return Err(DlrmError::Config(
                "the host tables are behind the caches; call sync() first".into(),
            ));
        }
        crate::embedding::pool_all(&self.cached.host, batch, self.pooling)
    }

    fn tables(&self) -> &[EmbeddingTable] {
        &self.cached.host
    }

    fn sync(&mut self) -> Result<(), DlrmError> {
        if self.stale {
            self.cached.sync_host();
            self.stale = false;
        }
        Ok(())
    }

    fn input(&self, data: Box<dyn DataSource>) -> Result<Box<dyn DataSource>, DlrmError> {
        Ok(Box::new(LookAhead::new(
            data,
            self.cached.options.lookahead,
            self.ahead.clone(),
        )))
    }

    fn figures(&self) -> Vec<(String, f64)> {
        let c = self.totals();
        let batches = self.batches.max(1) as f64;
        let w = self.times.windows.max(1) as f64;
        let mut f = vec![
            ("windows".to_string(), c.windows as f64),
            ("hit_rate".into(), c.hit_rate()),
            ("conflict_victims".into(), c.conflict_victims as f64),
            ("evictions".into(), c.evictions as f64),
            ("stale_installs".into(), c.stale_installs as f64),
            (
                "bytes_to_gpu_per_batch".into(),
                c.bytes_to_device as f64 / batches,
            ),
            (
                "bytes_to_host_per_batch".into(),
                c.bytes_to_host as f64 / batches,
            ),
            (
                "caching_overhead_ms_per_window".into(),
                self.times.caching_ns / w / 1e6,
            ),
            (
                "amortised_caching_overhead_ms".into(),
                self.times.caching_ns / w / self.cached.options.lookahead as f64 / 1e6,
            ),
            (
                "prefetch_ms_per_window".into(),
                self.times.prefetch_ns / w / 1e6,
            ),
        ];
        for t in 0..self.cached.host.len() {
            let g = self.cached.geometry(t);
            let bytes = g.bytes(
                self.cached.host[t].dim,
                self.cached.host_state[t].values_per_row,
            );
            f.push((format!("cache_bytes_table_{t}"), bytes as f64));
        }
        f
    }

    fn notes(&self) -> Vec<(String, String)> {
        let o = &self.cached.options;
        let c = self.totals();
        let per_window = self.times.caching_ns / self.times.windows.max(1) as f64;
        vec![
            (
                "cache".into(),
                format!(
                    "--cache-sets {} --ways {} --lookahead {} ({})",
                    o.sets,
                    o.ways,
                    o.lookahead,
                    match o.consistency {
                        super::Consistency::Coherent => "coherent",
                        super::Consistency::Async => "async",
                    }
                ),
            ),
            ("windows".into(), c.windows.to_string()),
            (
                "hit rate (batches' unique rows)".into(),
                format!("{:.4}", c.hit_rate()),
            ),
            ("conflict victims".into(), c.conflict_victims.to_string()),
            ("evictions".into(), c.evictions.to_string()),
            ("stale installs".into(), c.stale_installs.to_string()),
            (
                "cache memory per table, MiB".into(),
                (0..self.cached.host.len())
                    .map(|t| {
                        let g = self.cached.geometry(t);
                        let b = g.bytes(
                            self.cached.host[t].dim,
                            self.cached.host_state[t].values_per_row,
                        );
                        format!("{:.1}", b as f64 / (1u64 << 20) as f64)
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "bytes to gpu / to host per batch".into(),
                format!(
                    "{:.0} / {:.0}",
                    c.bytes_to_device as f64 / self.batches.max(1) as f64,
                    c.bytes_to_host as f64 / self.batches.max(1) as f64
                ),
            ),
            (
                "bytes to gpu / to host".into(),
                format!("{} / {}", c.bytes_to_device, c.bytes_to_host),
            ),
            (
                "caching overhead per window, ms (measured + modelled)".into(),
                format!("{:.3}", per_window / 1e6),
            ),
            (
                "amortised caching overhead per batch, ms (overhead / n)".into(),
                format!("{:.3}", per_window / o.lookahead as f64 / 1e6),
            ),
            (
                "prefetch per window, ms (measured, overlapped)".into(),
                format!(
                    "{:.3}",
                    self.times.prefetch_ns / self.times.windows.max(1) as f64 / 1e6
                ),
            ),
        ]
    }
}

/// The factory of `cdlrm`.
pub(crate) fn build(
    ctx: &crate::strategy::BuildCtx,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    ctx.config.validate()?;
    Ok(Box::new(Cdlrm::new(
        ctx.config,
        ctx.cdlrm,
        ctx.env.gpu.clone(),
    )?))
}
