//! `cdlrm` and `cdlrm-nmp` as embedding strategies: the tables in host
//! memory (in the NMP pool for `cdlrm-nmp`), a cache of each on the GPU,
//! windows of `n` batches installed ahead of training, and every batch
//! trained on the GPU from the cache and its conflict victims.
//!
//! Times: the prefetcher's work and the caching step's occupancy look-ups
//! are measured on this machine's CPU (or, with `--host`, the modelled
//! host's, [`super::hostwork`]); for `cdlrm-nmp` the prefetcher's
//! gathers, the coherent re-reads, the victims' fetches and every
//! write-back are the pool's (simulated, [`super::pool`]). The transfers
//! are modelled from the links' bandwidths and the GPU's work from the GPU
//! preset's memory bandwidth, as FAE's and SCARS's are.
//!
//! The prefetcher is the paper's separate process: a window's prefetch runs
//! beside the previous window's steps (the timeline's background lane), and
//! only what outlasts them is on the main path, at the window's first step
//! (the prefetcher's stall). The first window is fetched before training
//! starts: all of it is waited for.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use nmpsim_kernels::{EmbeddingTable, OptimizerState, Pooling};
use nmpsim_traces::Batch;

use super::hostwork::{HostWork, TableInfo};
use super::lookahead::{Ahead, LookAhead, SharedAhead};
use super::pool::{PoolSide, Work};
use super::window::{CachedTables, CdlrmOptions, Consistency, Working};
use crate::DlrmError;
use crate::embedding::{EmbeddingStrategy, StepCtx};
use crate::gpu::GpuPreset;
use crate::hot::gpu_step::{self, Scratch};
use crate::timeline::{BACKGROUND, MAIN, Resource, Source, Stage};
use crate::trainer::DataSource;

fn ns_since(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64
}

/// The run's caching figures, for its notes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachingTimes {
    pub windows: u64,
    /// Time of the caching steps on the main path (installs, and in the
    /// coherent order their write-backs and re-reads), measured and
    /// modelled, ns; the prefetcher's apart.
    pub caching_ns: f64,
    /// The prefetcher's time over the windows placed so far, ns.
    pub prefetch_ns: f64,
    /// Of it, what training waited for (the first window's all of it), ns.
    pub stall_ns: f64,
    /// Windows after the first whose prefetch outlasted the window before.
    pub stalled_windows: u64,
    /// The paper's batch computation time (forward, backward and update:
    /// an iteration less its caching step and its stall), summed over the
    /// steps whose time the strategy has seen (every step but the last), ns.
    pub batch_ns: f64,
    pub batch_steps: u64,
}

/// A batch between its forward and backward passes: its working sets, whose
/// rows and state are in `tables` and `states`, and the batch over them.
struct Step {
    working: Vec<Working>,
    tables: Vec<EmbeddingTable>,
    states: Vec<OptimizerState>,
    rb: Batch,
}

/// Puts `w` on `lane` of `stage`.
fn push(ctx: &mut StepCtx, stage: Stage, lane: u8, w: &Work) {
    ctx.timeline.push(
        w.primitive,
        w.detail.clone(),
        stage,
        lane,
        w.resource,
        w.source,
        w.ns,
        w.bytes,
    );
    ctx.timeline.set_last_energy(w.energy_pj);
}

fn total_ns(work: &[Work]) -> f64 {
    work.iter().map(|w| w.ns).sum()
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
    /// `cdlrm-nmp`: the host tables' side of the pool.
    pool: Option<PoolSide>,
    /// `--host`: the CPU's work timed by the modelled host.
    host: Option<HostWork>,
    /// The next window's prefetch: its work, placed when its window starts.
    pending: Vec<Work>,
    /// Time the pending prefetch has had beside training so far, ns.
    elapsed_ns: f64,
    /// The caching step's and the stall's time on the main path of the
    /// step before this one, ns.
    last_caching_ns: f64,
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
            pool: None,
            host: None,
            pending: Vec::new(),
            elapsed_ns: 0.0,
            last_caching_ns: 0.0,
            times: CachingTimes::default(),
        })
    }

    /// `cdlrm-nmp`: the host tables in the NMP pool `timer` times.
    pub fn on_pool(mut self, timer: Arc<Mutex<crate::pooltime::PoolTimer>>) -> Self {
        let dims = self.cached.host.iter().map(|t| t.dim).collect();
        let per_row = self
            .cached
            .host_state
            .iter()
            .map(|s| s.values_per_row)
            .collect();
        self.pool = Some(PoolSide::new(timer, dims, per_row));
        self.cached.track_write_backs();
        self
    }

    /// The CPU's work timed by the modelled host `host` (`--host`), not
    /// measured.
    pub fn with_host(mut self, host: Option<Arc<crate::host::HostConfig>>) -> Self {
        self.host = host.map(|host| HostWork {
            host,
            tables: (0..self.cached.host.len())
                .map(|t| {
                    let g = self.cached.geometry(t);
                    TableInfo {
                        num_rows: self.cached.host[t].rows,
                        dim: self.cached.host[t].dim,
                        state_values: self.cached.host_state[t].values_per_row,
                        ways: g.ways,
                        sets: g.sets,
                    }
                })
                .collect(),
        });
        self
    }

    /// Where a CPU part's time comes from, its time and its detail: the
    /// modelled host's `modelled` time when the run models one, else
    /// `measured_ns`.
    fn cpu_time(
        &self,
        detail: &str,
        measured_ns: f64,
        modelled: impl FnOnce(&HostWork) -> f64,
    ) -> (Source, f64, String) {
        match &self.host {
            Some(h) => (Source::ModelledHost, modelled(h), h.detail(detail)),
            None => (Source::Measured, measured_ns, format!("cpu ({detail})")),
        }
    }

    /// The caches and the host tables.
    pub fn cached(&self) -> &CachedTables {
        &self.cached
    }

    /// The mean batch computation time, ms (0 before two steps).
    fn batch_computation_ms(&self) -> f64 {
        self.times.batch_ns / self.times.batch_steps.max(1) as f64 / 1e6
    }

    fn coherent(&self) -> bool {
        self.cached.options.consistency == Consistency::Coherent
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

    /// The prefetch of `window` (fetched last), which took `unique_ns` to
    /// find its rows and `gather_ns` to gather them here: the host's work,
    /// or for `cdlrm-nmp` the host's search and the pool's gathers.
    fn prefetch_work(
        &self,
        window: &[Batch],
        unique_ns: f64,
        gather_ns: f64,
        iteration: u64,
    ) -> Result<Vec<Work>, DlrmError> {
        let index_bytes: u64 = window.iter().map(gpu_step::index_bytes).sum();
        let rows = self.cached.queued_rows().unwrap_or(&[]);
        let row_bytes: u64 = rows
            .iter()
            .enumerate()
            .map(|(t, r)| r.len() as u64 * self.row_bytes(t))
            .sum();
        let counts: Vec<usize> = rows.iter().map(Vec::len).collect();
        let (source, ns, detail) =
            self.cpu_time("the window's unique rows found", unique_ns, |h| {
                h.find_unique_ns(window, &counts)
            });
        let mut work = vec![Work {
            primitive: "prefetch",
            detail,
            resource: Resource::Cpu,
            source,
            ns,
            bytes: index_bytes,
            energy_pj: 0.0,
        }];
        match &self.pool {
            None => {
                let (source, ns, detail) =
                    self.cpu_time("their rows gathered from the host tables", gather_ns, |h| {
                        h.copy_ns(&counts)
                    });
                work.push(Work {
                    primitive: "prefetch",
                    detail,
                    resource: Resource::Cpu,
                    source,
                    ns,
                    bytes: row_bytes,
                    energy_pj: 0.0,
                })
            }
            Some(p) => work.extend(p.gather("prefetch", rows, iteration, "host")?),
        }
        Ok(work)
    }

    /// Places a window's prefetch `work` at its window's first step: the
    /// last `waited` ns of it on the main lane (the stall), the rest in the
    /// background.
    fn place_prefetch(&mut self, ctx: &mut StepCtx, work: Vec<Work>, waited: f64) {
        let mut left = waited;
        let mut exposed = vec![0.0; work.len()];
        for (i, w) in work.iter().enumerate().rev() {
            exposed[i] = left.min(w.ns);
            left -= exposed[i];
        }
        for (w, e) in work.iter().zip(exposed) {
            let share = |ns: f64| if w.ns > 0.0 { ns / w.ns } else { 0.0 };
            let bg = w.ns - e;
            let bg_bytes = if e > 0.0 {
                (w.bytes as f64 * share(bg)).round() as u64
            } else {
                w.bytes
            };
            if bg > 0.0 || e == 0.0 {
                let mut b = w.clone();
                b.ns = bg;
                b.bytes = bg_bytes;
                b.energy_pj = w.energy_pj * share(bg);
                push(ctx, Stage::ForwardEmbedding, BACKGROUND, &b);
            }
            if e > 0.0 {
                let mut m = w.clone();
                m.ns = e;
                m.detail = format!("{}, waited for", w.detail);
                m.bytes = w.bytes - bg_bytes;
                m.energy_pj = w.energy_pj * share(e);
                push(ctx, Stage::ForwardEmbedding, MAIN, &m);
            }
        }
    }

    /// At a window's first batch: wait for its prefetch if it is late,
    /// install it, prefetch the next one.
    fn begin_window(&mut self, ctx: &mut StepCtx) -> Result<(), DlrmError> {
        if self.started {
            self.elapsed_ns += ctx.previous_ns;
            self.times.batch_ns += (ctx.previous_ns - self.last_caching_ns).max(0.0);
            self.times.batch_steps += 1;
        }
        self.last_caching_ns = 0.0;
        let Some((this, next)) = self
            .ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .starts
            .take()
        else {
            return Ok(());
        };
        let (work, waited) = if self.started {
            let work = std::mem::take(&mut self.pending);
            let waited = (total_ns(&work) - self.elapsed_ns).max(0.0);
            if waited > 0.0 {
                self.times.stalled_windows += 1;
            }
            (work, waited)
        } else {
            // The first window is fetched before training starts.
            let (u, g) = self.cached.prefetch(&this.batches);
            self.started = true;
            let work = self.prefetch_work(&this.batches, u, g, ctx.iteration)?;
            let all = total_ns(&work);
            (work, all)
        };
        self.times.prefetch_ns += total_ns(&work);
        self.times.stall_ns += waited;
        self.place_prefetch(ctx, work, waited);
        // (The next prefetch starts once this one is done.)
        self.elapsed_ns = -waited;

        let before: Vec<_> = self.cached.counts.clone();
        let w = self
            .cached
            .begin_window(next.as_ref().map(|n| &n.batches[..]))?;
        let (mut installed, mut evicted) = (0u64, 0u64);
        // Per table: the window's rows looked up, installed, written back.
        let (mut looked_up, mut placed, mut written) = (vec![], vec![], vec![]);
        for (t, (a, b)) in self.cached.counts.iter().zip(&before).enumerate() {
            installed += (a.installed - b.installed) * self.row_bytes(t);
            evicted += (a.evictions - b.evictions) * self.row_bytes(t);
            looked_up.push((a.window_rows - b.window_rows) as usize);
            placed.push((a.installed - b.installed) as usize);
            written.push((a.written_back - b.written_back) as usize);
        }
        let coherent = self.coherent();
        ctx.host.add("caching (occupancy tables)", w.plan_ns);
        ctx.host.add(
            "caching (the caches' copies, modelled as gpu work)",
            w.apply_ns,
        );
        ctx.host.add("write-back", w.write_back_ns);
        let cpu =
            |primitive: &'static str, (source, ns, detail): (Source, f64, String), bytes| Work {
                primitive,
                detail,
                resource: Resource::Cpu,
                source,
                ns,
                bytes,
                energy_pj: 0.0,
            };
        let stage = Stage::ForwardEmbedding;
        let plan = cpu(
            "caching",
            self.cpu_time("occupancy tables: look-ups, ways chosen", w.plan_ns, |h| {
                h.look_up_ns(&looked_up)
            }),
            0,
        );
        let mut on_path = plan.ns;
        push(ctx, stage, MAIN, &plan);
        // The write-backs drained in this step, and the rows read again.
        let (write_back, reread) = match &self.pool {
            None => (
                vec![cpu(
                    "write-back",
                    self.cpu_time(
                        if coherent {
                            "queue drained before the install"
                        } else {
                            "the eviction process"
                        },
                        w.write_back_ns,
                        |h| h.write_back_ns(&written),
                    ),
                    0,
                )],
                vec![cpu(
                    "caching",
                    self.cpu_time("the installed rows re-read: coherent", w.reread_ns, |h| {
                        if coherent { h.copy_ns(&placed) } else { 0.0 }
                    }),
                    installed,
                )],
            ),
            Some(p) => {
                let rows = self.cached.take_written_back().unwrap_or_default();
                let optimizer = ctx.optimizer;
                (
                    p.store("write-back", &rows, &optimizer, ctx.iteration, "host")?,
                    p.gather("re-read", self.cached.reread_rows(), ctx.iteration, "host")?,
                )
            }
        };
        if coherent {
            // The install waits for the write-backs, then reads the rows again.
            ctx.host
                .add("caching (the installed rows re-read)", w.reread_ns);
            for x in write_back.iter().chain(&reread) {
                push(ctx, stage, MAIN, x);
            }
            on_path += total_ns(&write_back) + total_ns(&reread);
        } else {
            for x in &write_back {
                push(ctx, stage, BACKGROUND, x);
            }
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
            self.pending = self.prefetch_work(
                &n.batches,
                w.prefetch_unique_ns,
                w.prefetch_ns - w.prefetch_unique_ns,
                ctx.iteration,
            )?;
        }
        self.times.windows += 1;
        let caching = on_path
            + self.gpu.host_transfer_ns(installed)
            + self.gpu.stream_ns((installed + evicted) as f64)
            + self.gpu.host_transfer_ns(evicted);
        self.times.caching_ns += caching;
        self.last_caching_ns = caching + waited;
        Ok(())
    }
}

impl EmbeddingStrategy for Cdlrm {
    fn name(&self) -> String {
        if self.pool.is_some() {
            "cdlrm-nmp".into()
        } else {
            "cdlrm".into()
        }
    }

    fn placement(&self) -> Vec<(String, String)> {
        let host = if self.pool.is_some() { "nmp" } else { "cpu" };
        crate::embedding::places(&[
            (
                "prefetch",
                if self.pool.is_some() {
                    "cpu+nmp"
                } else {
                    "cpu"
                },
            ),
            ("caching", "cpu+gpu"),
            ("gather-reduce", "gpu"),
            ("expand-coalesce", "gpu"),
            ("scatter", "gpu"),
            ("victim fetch", host),
            ("write-back", host),
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
        match &self.pool {
            Some(p) if victims > 0 => {
                let rows: Vec<Vec<u32>> = working.iter().map(Working::victims).collect();
                for x in p.gather("victim fetch", &rows, ctx.iteration, "gpu")? {
                    push(ctx, Stage::ForwardEmbedding, MAIN, &x);
                }
            }
            None if victims > 0 => ctx.timeline.push(
                "victim fetch",
                "conflict victims host to gpu",
                Stage::ForwardTransfer,
                MAIN,
                Resource::HostLink,
                Source::Modelled,
                self.gpu.host_transfer_ns(vbytes),
                vbytes,
            ),
            _ => {}
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
            &mut self.scratch,
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
        let before: Vec<u64> = self.cached.counts.iter().map(|c| c.written_back).collect();
        let mut drain_ns = 0.0;
        for (t, ((mut w, table), state)) in working.into_iter().zip(tables).zip(states).enumerate()
        {
            w.table = table;
            w.state = state;
            drain_ns += self.cached.finish(t, w);
        }
        let drained: Vec<usize> = self
            .cached
            .counts
            .iter()
            .zip(&before)
            .map(|(c, b)| (c.written_back - b) as usize)
            .collect();
        let back = (self
            .cached
            .counts
            .iter()
            .map(|c| c.written_back)
            .sum::<u64>()
            - before.iter().sum::<u64>())
            * self.row_bytes(0);
        // Coherent: the next batch may read the victims again, from where
        // they are written; in the paper's order the eviction process
        // writes them beside training.
        let lane = if self.coherent() { MAIN } else { BACKGROUND };
        match &self.pool {
            Some(p) => {
                let rows = self.cached.take_written_back().unwrap_or_default();
                for x in p.store("write-back", &rows, &optimizer, ctx.iteration, "gpu")? {
                    push(ctx, Stage::BackwardEmbedding, lane, &x);
                }
            }
            None if back > 0 => {
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
                ctx.host.add("write-back", drain_ns);
                let (source, ns, detail) = self.cpu_time(
                    "conflict victims written to the host tables",
                    drain_ns,
                    |h| h.write_back_ns(&drained),
                );
                ctx.timeline.push(
                    "write-back",
                    detail,
                    Stage::BackwardEmbedding,
                    lane,
                    Resource::Cpu,
                    source,
                    ns,
                    back,
                );
            }
            None => {}
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
            ("prefetch_stall_ms".into(), self.times.stall_ns / 1e6),
            ("batch_computation_ms".into(), self.batch_computation_ms()),
            (
                "total_per_batch_ms".into(),
                self.batch_computation_ms()
                    + self.times.caching_ns / w / self.cached.options.lookahead as f64 / 1e6,
            ),
            ("stalled_windows".into(), self.times.stalled_windows as f64),
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
        let mut v = vec![
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
                format!(
                    "prefetch per window, ms ({}, beside training)",
                    if self.pool.is_some() {
                        "measured + simulated"
                    } else {
                        "measured"
                    }
                ),
                format!(
                    "{:.3}",
                    self.times.prefetch_ns / self.times.windows.max(1) as f64 / 1e6
                ),
            ),
            (
                "batch computation per batch, ms (forward, backward, update: the iteration less its caching step and stall; every step but the last)".into(),
                format!("{:.3}", self.batch_computation_ms()),
            ),
            (
                "total per batch execution, ms (batch computation + amortised caching overhead)".into(),
                format!(
                    "{:.3}",
                    self.batch_computation_ms() + per_window / o.lookahead as f64 / 1e6
                ),
            ),
            (
                "prefetcher kept ahead".into(),
                format!(
                    "{} ({} of {} later windows waited for; {:.3} ms waited in all, the first window's fetch included)",
                    if self.times.stalled_windows == 0 {
                        "yes"
                    } else {
                        "no"
                    },
                    self.times.stalled_windows,
                    self.times.windows.saturating_sub(1),
                    self.times.stall_ns / 1e6
                ),
            ),
        ];
        v.extend(self.scratch.notes());
        v
    }
}

/// The factory of `cdlrm`.
pub(crate) fn build(
    ctx: &crate::strategy::BuildCtx,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    ctx.config.validate()?;
    let mut s =
        Cdlrm::new(ctx.config, ctx.cdlrm, ctx.env.gpu.clone())?.with_host(ctx.env.host.clone());
    s.scratch = Scratch::for_run(ctx)?;
    Ok(Box::new(s))
}

/// The factory of `cdlrm-nmp`: `cdlrm` with its host tables in the pool.
pub(crate) fn build_nmp(
    ctx: &crate::strategy::BuildCtx,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    ctx.config.validate()?;
    let timer = ctx.env.pool.clone().ok_or_else(|| {
        DlrmError::Config("cdlrm-nmp needs the run's NMP pool, and none was set up".into())
    })?;
    let mut s = Cdlrm::new(ctx.config, ctx.cdlrm, ctx.env.gpu.clone())?
        .on_pool(timer)
        .with_host(ctx.env.host.clone());
    s.scratch = Scratch::for_run(ctx)?;
    Ok(Box::new(s))
}
