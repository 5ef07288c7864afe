//! The embedding layer as a strategy: the trainer hands it each batch and
//! the gradient of its pooled outputs, and the strategy owns the tables,
//! computes the numbers, and records every primitive it ran in the step's
//! timeline (where it ran, how long, measured / simulated / modelled).
//!
//! Tensor Casting's four system modes are one strategy, [`SystemModes`],
//! configured by a [`ModePlan`] that says where each primitive runs. Other
//! systems (FAE's hot embeddings, cDLRM's look-ahead cache, EL-Rec's
//! tensor-train tables, SCARS's cache) are further implementations of
//! [`EmbeddingStrategy`] and leave this one alone.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use nmpsim_kernels::traffic::{
    casted_gather_reduce_traffic, gather_reduce_traffic, scatter_traffic,
};
use nmpsim_kernels::{
    Casted, Coalesced, EmbeddingTable, Expanded, Optimizer, OptimizerState, Pooling,
    casted_gather_reduce_into, coalesce_into, expand_into, gather_reduce, scatter_update,
    tensor_cast,
};
use nmpsim_nmp::{Instruction, Layout};
use nmpsim_traces::Batch;
use serde::{Deserialize, Serialize};

use crate::DlrmError;
use crate::gpu::GpuPreset;
use crate::host::{CpuPrimitive, TableShape};
use crate::pooltime::{PoolTime, PoolTimer};
use crate::timeline::{MAIN, OVERLAP, Resource, Source, Stage, StepTimeline};

/// Wall-clock time of the real computations on this machine, by primitive.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostTimes {
    pub entries: Vec<(String, f64)>,
}

impl HostTimes {
    pub fn add(&mut self, primitive: &str, ns: f64) {
        match self.entries.iter_mut().find(|(p, _)| p == primitive) {
            Some((_, t)) => *t += ns,
            None => self.entries.push((primitive.to_string(), ns)),
        }
    }

    pub fn total_ns(&self) -> f64 {
        self.entries.iter().map(|(_, t)| t).sum()
    }
}

/// What a strategy gets besides the batch.
pub struct StepCtx<'a> {
    pub iteration: u64,
    /// The previous iteration's time on the timeline, ns (0 at the first):
    /// how long background work started then had to run beside it.
    pub previous_ns: f64,
    /// The embedding optimizer at this step's learning rate.
    pub optimizer: Optimizer,
    pub timeline: &'a mut StepTimeline,
    pub host: &'a mut HostTimes,
}

/// Every strategy's starting point: tables of `table_rows` rows of `dim`,
/// table `t` seeded from `seed ^ (0xe0 + t)` as the reference model's
/// (`Dlrm::new`), and fresh state for `optimizer`. Strategies trained on
/// the same data from these compute the same numbers.
pub fn initial_tables(
    table_rows: &[u64],
    dim: usize,
    optimizer: &Optimizer,
    seed: u64,
) -> Result<(Vec<EmbeddingTable>, Vec<OptimizerState>), DlrmError> {
    let tables = table_rows
        .iter()
        .enumerate()
        .map(|(t, &r)| EmbeddingTable::seeded(r, dim, seed ^ (0xe0 + t as u64)))
        .collect::<Result<Vec<_>, _>>()?;
    let states = table_rows
        .iter()
        .map(|&r| OptimizerState::new(optimizer, r, dim))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((tables, states))
}

/// A strategy's [`EmbeddingStrategy::placement`] from (primitive, place)
/// pairs.
pub fn places(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// [`initial_tables`] of a run's model, embedding optimizer and seed.
pub fn initial_tables_for(
    config: &crate::trainer::TrainConfig,
) -> Result<(Vec<EmbeddingTable>, Vec<OptimizerState>), DlrmError> {
    let m = &config.model;
    initial_tables(
        &m.table_rows,
        m.dim,
        &config.embedding_optimizer,
        config.seed,
    )
}

/// An embedding layer: tables, their placement and their training.
pub trait EmbeddingStrategy: Send {
    /// Name for reports (`baseline-cpu`, ...).
    fn name(&self) -> String;
    /// Where each primitive runs, for reports: (primitive, place).
    fn placement(&self) -> Vec<(String, String)>;
    /// Pooled output of every table (`B x dim` each).
    fn forward(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<Vec<Vec<f32>>, DlrmError>;
    /// Turns the pooled-output gradients into table updates.
    fn backward(
        &mut self,
        batch: &Batch,
        dpooled: &[Vec<f32>],
        ctx: &mut StepCtx,
    ) -> Result<(), DlrmError>;
    /// Pooled outputs for inference (evaluation): no timing, no state change.
    fn infer(&self, batch: &Batch) -> Result<Vec<Vec<f32>>, DlrmError>;
    /// The tables as they stand (after [`EmbeddingStrategy::sync`]).
    fn tables(&self) -> &[EmbeddingTable];
    /// Brings the host copy of the tables up to date where a strategy keeps
    /// them elsewhere (on a GPU emulating the NMP pool); the trainer calls it
    /// before evaluation and at the end. Default: nothing to do.
    fn sync(&mut self) -> Result<(), DlrmError> {
        Ok(())
    }
    /// The training input as this strategy wants it, built from the run's
    /// (FAE and SCARS sort it into hot and cold mini-batches). Default: as
    /// it is.
    fn input(
        &self,
        data: Box<dyn crate::trainer::DataSource>,
    ) -> Result<Box<dyn crate::trainer::DataSource>, DlrmError> {
        Ok(data)
    }
    /// Figures of the strategy's own for the run's log and summary (name,
    /// value). Default: none.
    fn notes(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// The strategy's own figures as numbers (name, value), for sweeps and
    /// reports. Default: none.
    fn figures(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// Where a primitive runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    Cpu,
    Gpu,
    Nmp,
}

impl Place {
    fn as_str(self) -> &'static str {
        match self {
            Place::Cpu => "cpu",
            Place::Gpu => "gpu",
            Place::Nmp => "nmp",
        }
    }
}

/// Tensor Casting's four design points (Sec. VI).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SystemMode {
    BaselineCpu,
    TcastCpu,
    BaselineNmp,
    TcastNmp,
}

impl SystemMode {
    pub const ALL: [SystemMode; 4] = [
        SystemMode::BaselineCpu,
        SystemMode::TcastCpu,
        SystemMode::BaselineNmp,
        SystemMode::TcastNmp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SystemMode::BaselineCpu => "baseline-cpu",
            SystemMode::TcastCpu => "tcast-cpu",
            SystemMode::BaselineNmp => "baseline-nmp",
            SystemMode::TcastNmp => "tcast-nmp",
        }
    }

    pub fn parse(s: &str) -> Result<Self, DlrmError> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                DlrmError::Config(format!(
                    "unknown mode `{s}`; expected one of baseline-cpu, tcast-cpu, baseline-nmp, tcast-nmp, all"
                ))
            })
    }

    /// The table of system modes in docs/dlrm.md.
    pub fn plan(self) -> ModePlan {
        use Place::*;
        let (gather, casting, coalesce, scatter) = match self {
            SystemMode::BaselineCpu => (Cpu, None, Cpu, Cpu),
            SystemMode::TcastCpu => (Cpu, Some(Gpu), Cpu, Cpu),
            SystemMode::BaselineNmp => (Nmp, None, Cpu, Nmp),
            SystemMode::TcastNmp => (Nmp, Some(Gpu), Nmp, Nmp),
        };
        ModePlan {
            gather,
            casting,
            coalesce,
            scatter,
        }
    }

    pub fn uses_nmp(self) -> bool {
        let p = self.plan();
        p.gather == Place::Nmp || p.scatter == Place::Nmp || p.coalesce == Place::Nmp
    }
}

impl std::fmt::Display for SystemMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where each embedding primitive of a mode runs. With `casting` set, the
/// gradient is coalesced by Tensor Casting (casting there, overlapped with
/// the forward pass; casted gather-reduce at `coalesce`); without it, by
/// expand + sort + accumulate at `coalesce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModePlan {
    pub gather: Place,
    pub casting: Option<Place>,
    pub coalesce: Place,
    pub scatter: Place,
}

/// What the timeline needs to know of the machine being modelled.
#[derive(Clone)]
pub struct TimingEnv {
    pub gpu: GpuPreset,
    /// The NMP pool's timer; required by the NMP modes, shared between modes
    /// that run on identical data.
    pub pool: Option<Arc<Mutex<PoolTimer>>>,
    /// The modelled host CPU (`--host`): the CPU primitives' times come
    /// from its model (`Source::ModelledHost`) instead of this machine's
    /// clock.
    pub host: Option<Arc<crate::host::HostConfig>>,
}

impl TimingEnv {
    /// Where a CPU primitive's time comes from, its time and the timeline's
    /// detail: the modelled host's time of `primitive` over `shapes` (one a
    /// table, each with its share of the cache; `state` optimizer values a
    /// row) when the run models one, else `measured_ns`, measured.
    pub fn cpu_time<'a>(
        &self,
        primitive: crate::host::CpuPrimitive,
        shapes: impl IntoIterator<Item = crate::host::TableShape<'a>>,
        state: usize,
        measured_ns: f64,
    ) -> (Source, f64, String) {
        match &self.host {
            Some(h) => {
                // The tables share the cache: each has its share of it (a
                // table's hot rows stay in it while the others run).
                let shapes: Vec<_> = shapes.into_iter().collect();
                let llc = h.llc_bytes() / shapes.len().max(1) as u64;
                let ns = shapes
                    .into_iter()
                    .map(|s| h.primitive_time_ns(primitive, &s.work(primitive, state, llc)))
                    .sum();
                (Source::ModelledHost, ns, format!("cpu (host {})", h.name))
            }
            None => (Source::Measured, measured_ns, "cpu".into()),
        }
    }
}

/// Tensor Casting's system modes as an embedding strategy.
pub struct SystemModes {
    pub mode: SystemMode,
    plan: ModePlan,
    pooling: Pooling,
    tables: Vec<EmbeddingTable>,
    states: Vec<OptimizerState>,
    env: TimingEnv,
    casted: Vec<Casted>,
    expanded: Vec<Expanded>,
    coalesced: Vec<Coalesced>,
    fingerprint: u64,
    /// The GPU emulation of the pool, when on: the NMP-placed primitives run
    /// there on device-resident tables.
    #[cfg(feature = "cuda")]
    emulation: Option<Emulation>,
    /// Casting on a real GPU (its own stream), when on.
    #[cfg(feature = "cuda")]
    gpu_cast: Option<Arc<nmpsim_kernels::cuda::CudaBackend>>,
}

/// The pool on a GPU: the emulator and the tables it holds.
#[cfg(feature = "cuda")]
struct Emulation {
    emu: Arc<Mutex<crate::emulate::PoolEmulator>>,
    tables: Vec<nmpsim_kernels::cuda::DeviceTable>,
    /// The host tables are behind the device ones.
    stale: bool,
    /// The coalesced gradients the casted gather-reduce left on the device
    /// for the scatter that follows it (the pool keeps them in its ranks).
    coalesced: Option<Vec<nmpsim_kernels::cuda::DeviceCoalesced>>,
}

#[cfg(feature = "cuda")]
impl Emulation {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, crate::emulate::PoolEmulator>, DlrmError> {
        lock_pool(&self.emu)
    }
}

/// The pool emulator, or an error if an earlier failure poisoned it.
#[cfg(feature = "cuda")]
fn lock_pool(
    emu: &Mutex<crate::emulate::PoolEmulator>,
) -> Result<std::sync::MutexGuard<'_, crate::emulate::PoolEmulator>, DlrmError> {
    emu.lock().map_err(|_| {
        DlrmError::Config("the pool emulator was poisoned by an earlier failure".into())
    })
}

/// A cheap identity of a batch's indices (FNV-1a over table 0 and the sizes).
fn fingerprint(batch: &Batch) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |x: u64| {
        h ^= x;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(batch.tables.len() as u64);
    for t in &batch.tables {
        eat(t.indices.len() as u64);
    }
    if let Some(t) = batch.tables.first() {
        t.indices.iter().for_each(|&i| eat(i as u64));
    }
    h
}

/// Puts the pool's work `primitive` on `stage`'s main lane, taking `time`
/// (its source and nanoseconds) and the energy of the pool's timing `pt`.
fn push_pool_work(
    timeline: &mut StepTimeline,
    primitive: &str,
    stage: Stage,
    time: (Source, f64),
    bytes: u64,
    pt: &PoolTime,
) {
    let (source, time_ns) = time;
    timeline.push(
        primitive,
        "nmp",
        stage,
        MAIN,
        Resource::Nmp,
        source,
        time_ns,
        bytes,
    );
    timeline.set_last_energy(pt.energy_pj.unwrap_or(0.0));
}

fn ns_since(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64
}

impl SystemModes {
    /// Tables initialised as the DLRM reference does (uniform in
    /// +-sqrt(1/rows)), seeded as [`crate::Dlrm::new`] seeds them.
    pub fn new(
        mode: SystemMode,
        table_rows: &[u64],
        dim: usize,
        pooling: Pooling,
        optimizer: &Optimizer,
        seed: u64,
        env: TimingEnv,
    ) -> Result<Self, DlrmError> {
        if mode.uses_nmp() && env.pool.is_none() {
            return Err(DlrmError::Config(format!(
                "mode {mode} runs on the NMP pool but no pool is configured"
            )));
        }
        let (tables, states) = initial_tables(table_rows, dim, optimizer, seed)?;
        let n = table_rows.len();
        Ok(SystemModes {
            mode,
            plan: mode.plan(),
            pooling,
            tables,
            states,
            env,
            casted: Vec::new(),
            expanded: (0..n).map(|_| Expanded::empty(dim)).collect(),
            coalesced: (0..n).map(|_| Coalesced::empty(dim)).collect(),
            fingerprint: 0,
            #[cfg(feature = "cuda")]
            emulation: None,
            #[cfg(feature = "cuda")]
            gpu_cast: None,
        })
    }

    /// Runs Tensor Casting's casting step on `gpu` (a stream of its own,
    /// overlapped with the gather-reduce) and measures it, instead of
    /// computing it on the host and modelling its GPU time. Modes without
    /// casting ignore it.
    #[cfg(feature = "cuda")]
    pub fn with_gpu_casting(
        mut self,
        gpu: Arc<nmpsim_kernels::cuda::Gpu>,
    ) -> Result<Self, DlrmError> {
        if self.plan.casting.is_some() {
            let stream = gpu
                .ctx
                .new_stream()
                .map_err(nmpsim_kernels::cuda::driver_err(
                    "creating the casting stream",
                ))?;
            // Compiled now, not on the first casting, which is timed.
            gpu.module(&nmpsim_kernels::cuda::SOURCES[0])?;
            self.gpu_cast = Some(Arc::new(nmpsim_kernels::cuda::CudaBackend::with_stream(
                gpu, stream,
            )));
        }
        Ok(self)
    }

    /// Runs this mode's NMP-placed primitives on `emu` (the GPU emulation of
    /// the pool), with the tables copied to its device. Only for NMP modes.
    #[cfg(feature = "cuda")]
    pub fn with_emulator(
        mut self,
        emu: Arc<Mutex<crate::emulate::PoolEmulator>>,
    ) -> Result<Self, DlrmError> {
        if !self.mode.uses_nmp() {
            return Err(DlrmError::Config(format!(
                "mode {} runs nothing on the NMP pool; there is nothing to emulate",
                self.mode
            )));
        }
        let tables = {
            let e = lock_pool(&emu)?;
            self.tables
                .iter()
                .zip(&self.states)
                .enumerate()
                .map(|(t, (table, state))| {
                    e.backend()
                        .upload_table(table, state)
                        .map_err(|err| DlrmError::from(err.in_table(t)))
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        self.emulation = Some(Emulation {
            emu,
            tables,
            stale: false,
            coalesced: None,
        });
        Ok(self)
    }

    /// Whether the NMP-placed primitives run on the GPU emulation.
    pub fn emulating(&self) -> bool {
        #[cfg(feature = "cuda")]
        {
            self.emulation.is_some()
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
    }

    fn dim(&self) -> usize {
        self.tables[0].dim
    }

    /// The host's tables and their optimizer state, current (copied back
    /// from the pool's emulation first, when it is on), for strategies that
    /// keep copies of some rows elsewhere (FAE's hot rows). A caller that
    /// changes them calls [`Self::host_changed`] next.
    pub(crate) fn host_parts_mut(
        &mut self,
    ) -> Result<(&mut [EmbeddingTable], &mut [OptimizerState]), DlrmError> {
        self.sync()?;
        Ok((&mut self.tables, &mut self.states))
    }

    /// The host's tables were changed through [`Self::host_parts_mut`]: the
    /// pool's emulation (when on) gets them again.
    pub(crate) fn host_changed(&mut self) -> Result<(), DlrmError> {
        #[cfg(feature = "cuda")]
        if let Some(em) = &mut self.emulation {
            let Emulation { emu, tables, .. } = em;
            let e = lock_pool(emu)?;
            for (t, ((dt, table), state)) in tables
                .iter_mut()
                .zip(&self.tables)
                .zip(&self.states)
                .enumerate()
            {
                e.backend()
                    .refresh_table(dt, table, state)
                    .map_err(|err| err.in_table(t))?;
            }
        }
        Ok(())
    }

    /// The optimizer state of the host's tables.
    pub(crate) fn states(&self) -> &[OptimizerState] {
        &self.states
    }

    /// A transfer of `bytes` over the pool's link (modelled, or emulated).
    pub(crate) fn pool_transfer(&mut self, bytes: u64) -> Result<(Source, f64), DlrmError> {
        self.pool_link(bytes)
    }

    /// Runs `f` on the shared pool timer.
    fn with_pool<R>(&self, f: impl FnOnce(&mut PoolTimer) -> R) -> Result<R, DlrmError> {
        let pool = self.env.pool.as_ref().expect("checked in new");
        Ok(f(&mut *crate::pooltime::lock(pool)?))
    }

    /// Times `primitive` on the shared pool timer.
    fn pool_time(
        &self,
        primitive: &str,
        iteration: u64,
        bytes: u64,
        instrs: impl FnOnce() -> Vec<Instruction>,
    ) -> Result<crate::pooltime::PoolTime, DlrmError> {
        self.with_pool(|p| p.time(primitive, iteration, self.fingerprint, bytes, instrs))?
    }

    /// What the ranks still hold when the pool's work `pt` ends: `all` it
    /// sends over the pool's layout, or the tail `pt` gives where smaller.
    fn link_out_tail(
        &self,
        pt: &PoolTime,
        all: impl FnOnce(&Layout) -> u64,
    ) -> Result<u64, DlrmError> {
        let all = self.with_pool(|p| all(p.layout()))?;
        Ok(pt.link_out_tail_bytes.map_or(all, |b| b.min(all)))
    }

    /// A transfer over the pool link: modelled, or emulated on the pool
    /// stream at the link's bandwidth and latency when the emulation is on.
    fn pool_link(&mut self, bytes: u64) -> Result<(Source, f64), DlrmError> {
        #[cfg(feature = "cuda")]
        if let Some(em) = &self.emulation {
            let (gbps, latency_ns) =
                self.with_pool(|p| (p.setup.link_gbps, p.setup.link_latency_us * 1e3))?;
            let e = em.lock()?.transfer(bytes, gbps, latency_ns)?;
            return Ok((Source::Emulated, e.emulated_ns));
        }
        Ok((
            Source::Modelled,
            self.with_pool(|p| p.setup.link_ns(bytes))?,
        ))
    }
}

impl EmbeddingStrategy for SystemModes {
    fn name(&self) -> String {
        self.mode.to_string()
    }

    fn placement(&self) -> Vec<(String, String)> {
        let p = self.plan;
        let mut v = vec![("gather-reduce".to_string(), p.gather.as_str().to_string())];
        match p.casting {
            Some(c) => {
                v.push(("casting".into(), c.as_str().into()));
                v.push(("casted-gather-reduce".into(), p.coalesce.as_str().into()));
            }
            None => v.push(("expand-coalesce".into(), p.coalesce.as_str().into())),
        }
        v.push(("scatter".into(), p.scatter.as_str().into()));
        v
    }

    fn forward(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<Vec<Vec<f32>>, DlrmError> {
        // With casting on a real GPU, it runs on a thread of its own (its own
        // stream) while this thread runs the gather-reduce, as Fig. 9b
        // overlaps them.
        #[cfg(feature = "cuda")]
        if let Some(b) = self
            .gpu_cast
            .clone()
            .filter(|_| self.plan.casting.is_some())
        {
            let pooling = self.pooling;
            return std::thread::scope(|sc| {
                let job = sc.spawn(move || gpu_cast_all(&b, batch, pooling));
                let join: CastJob = Box::new(move || {
                    job.join().unwrap_or_else(|_| {
                        Err(DlrmError::Config("the GPU casting thread panicked".into()))
                    })
                });
                self.forward_with(batch, ctx, Some(join))
            });
        }
        self.forward_with(batch, ctx, None)
    }

    fn backward(
        &mut self,
        batch: &Batch,
        dpooled: &[Vec<f32>],
        ctx: &mut StepCtx,
    ) -> Result<(), DlrmError> {
        let dim = self.dim();
        let b = batch.batch_size();
        let grad_bytes = (b * dim * 4 * self.tables.len()) as u64;
        // Output gradients leave the GPU for where they are coalesced.
        if self.plan.coalesce == Place::Nmp {
            let link = self.pool_link(grad_bytes)?;
            ctx.timeline.push(
                "transfer",
                "gradients gpu to pool",
                Stage::BackwardTransfer,
                MAIN,
                Resource::PoolLink,
                link.0,
                link.1,
                grad_bytes,
            );
        } else {
            ctx.timeline.push(
                "transfer",
                "gradients gpu to host",
                Stage::BackwardTransfer,
                MAIN,
                Resource::HostLink,
                Source::Modelled,
                self.env.gpu.host_transfer_ns(grad_bytes),
                grad_bytes,
            );
        }
        // The numbers: coalesced gradients of every table (on the emulated
        // pool further down when the GPU emulation is on).
        let t0 = Instant::now();
        let mut coal_bytes = 0u64;
        let casting = self.plan.casting.is_some();
        let emulate_coalesce = self.emulating() && self.plan.coalesce == Place::Nmp && casting;
        for (t, tb) in batch.tables.iter().enumerate() {
            let d = &dpooled[t];
            if emulate_coalesce {
                let c = &self.casted[t];
                coal_bytes += casted_gather_reduce_traffic(
                    c.casted_src.len(),
                    c.unique_rows.len(),
                    dim,
                    c.scale.is_some(),
                )
                .total_bytes();
                // The coalesced rows are the casted unique rows; their
                // gradients come from the pool below.
                self.coalesced[t].rows.clone_from(&c.unique_rows);
            } else if casting {
                let tr = casted_gather_reduce_into(&self.casted[t], d, dim, &mut self.coalesced[t])
                    .map_err(|e| e.in_table(t))?;
                coal_bytes += tr.total_bytes();
            } else {
                let te = expand_into(d, dim, tb, self.pooling, &mut self.expanded[t])
                    .map_err(|e| e.in_table(t))?;
                let tc = coalesce_into(&self.expanded[t], tb.num_rows, &mut self.coalesced[t])
                    .map_err(|e| e.in_table(t))?;
                coal_bytes += te.total_bytes() + tc.total().total_bytes();
            }
        }
        let coal_ns = ns_since(t0);
        let coal_name = if casting {
            "casted-gather-reduce"
        } else {
            "expand-coalesce"
        };
        if !emulate_coalesce {
            ctx.host.add(coal_name, coal_ns);
        }
        let unique: usize = self.coalesced.iter().map(|c| c.rows.len()).sum();
        let coal_out_bytes = (unique * (dim + 1) * 4) as u64;
        if self.plan.coalesce == Place::Nmp {
            let casted = &self.casted;
            let instrs = || {
                let mut v = Vec::new();
                for (t, c) in casted.iter().enumerate() {
                    v.push(Instruction::LoadGradient {
                        table: t as u32,
                        bags: c.num_bags as u32,
                        grads: dpooled[t].clone(),
                    });
                    v.push(Instruction::CastedGatherReduce {
                        table: t as u32,
                        num_bags: c.num_bags as u32,
                        casted_src: c.casted_src.clone(),
                        casted_dst: c.casted_dst.clone(),
                        unique_rows: c.unique_rows.clone(),
                        scale: c.scale.clone(),
                    });
                }
                v
            };
            let pt = self.pool_time(coal_name, ctx.iteration, coal_bytes + grad_bytes, instrs)?;
            let time = match self.emulate_coalesce(dpooled, pt.time_ns, ctx.host)? {
                Some(ns) => (Source::Emulated, ns),
                None => (pt.source, pt.time_ns),
            };
            push_pool_work(
                ctx.timeline,
                coal_name,
                Stage::BackwardEmbedding,
                time,
                coal_bytes + grad_bytes,
                &pt,
            );
        } else {
            let (primitive, pooling) = if casting {
                (CpuPrimitive::CastedGatherReduce, self.pooling)
            } else {
                (CpuPrimitive::ExpandCoalesce, self.pooling)
            };
            let shapes = batch
                .tables
                .iter()
                .zip(&self.coalesced)
                .map(|(tb, c)| TableShape::of(tb, dim, pooling, c.rows.len()));
            let (source, ns, detail) = self.env.cpu_time(primitive, shapes, 0, coal_ns);
            ctx.timeline.push(
                coal_name,
                &detail,
                Stage::BackwardEmbedding,
                MAIN,
                Resource::Cpu,
                source,
                ns,
                coal_bytes,
            );
        }
        // Scatter with the optimizer (on the emulated pool further down when
        // the GPU emulation is on).
        let emulate_scatter = self.emulating() && self.plan.scatter == Place::Nmp;
        let t0 = Instant::now();
        let mut scatter_bytes = 0u64;
        if emulate_scatter {
            let per_row = ctx.optimizer.state_values_per_row(dim);
            for c in &self.coalesced {
                scatter_bytes += scatter_traffic(c.rows.len(), dim, per_row).total_bytes();
            }
        } else {
            for (t, ((table, state), c)) in self
                .tables
                .iter_mut()
                .zip(&mut self.states)
                .zip(&self.coalesced)
                .enumerate()
            {
                let tr =
                    scatter_update(table, state, c, &ctx.optimizer).map_err(|e| e.in_table(t))?;
                scatter_bytes += tr.total_bytes();
            }
        }
        let scatter_ns = ns_since(t0);
        if !emulate_scatter {
            ctx.host.add("scatter", scatter_ns);
        }
        if self.plan.scatter == Place::Nmp {
            let optimizer = ctx.optimizer;
            let (name, load) = if self.plan.coalesce == Place::Nmp {
                ("scatter", false)
            } else {
                // TensorDIMM: the host's coalesced gradients go to the pool first.
                let link = self.pool_link(coal_out_bytes)?;
                ctx.timeline.push(
                    "transfer",
                    "coalesced gradients host to pool",
                    Stage::BackwardEmbedding,
                    MAIN,
                    Resource::PoolLink,
                    link.0,
                    link.1,
                    coal_out_bytes,
                );
                ("load-coalesced+scatter", true)
            };
            let coalesced = &self.coalesced;
            let instrs = || {
                let mut v = Vec::new();
                for (t, c) in coalesced.iter().enumerate() {
                    if load {
                        v.push(Instruction::LoadCoalesced {
                            table: t as u32,
                            rows: c.rows.clone(),
                            grads: c.grads.clone(),
                        });
                    }
                    v.push(Instruction::Scatter {
                        table: t as u32,
                        optimizer,
                    });
                }
                v
            };
            let bytes = scatter_bytes + if load { coal_out_bytes } else { 0 };
            let pt = self.pool_time(name, ctx.iteration, bytes, instrs)?;
            let time = match self.emulate_scatter(&optimizer, pt.time_ns, ctx.host)? {
                Some(ns) => (Source::Emulated, ns),
                None => (pt.source, pt.time_ns),
            };
            push_pool_work(
                ctx.timeline,
                "scatter",
                Stage::BackwardEmbedding,
                time,
                bytes,
                &pt,
            );
            // Row-wise Adagrad's exchanges between a row's ranks go through
            // the host: what the ranks still hold when the scatter ends
            // follows it (all of it for a fixed-bandwidth pool).
            // (A proxied batch's tail is the simulated batches' mean, at most
            // what this batch sends in all.)
            let out_bytes = self.link_out_tail(&pt, |l| {
                self.coalesced
                    .iter()
                    .enumerate()
                    .map(|(t, c)| nmpsim_nmp::scatter_link_out_bytes(l, t, &c.rows, &optimizer))
                    .sum()
            })?;
            if out_bytes > 0 {
                let link = self.pool_link(out_bytes)?;
                ctx.timeline.push(
                    "transfer",
                    "row-wise adagrad exchanges pool to host",
                    Stage::BackwardEmbedding,
                    MAIN,
                    Resource::PoolLink,
                    link.0,
                    link.1,
                    out_bytes,
                );
            }
        } else {
            let state = ctx.optimizer.state_values_per_row(dim);
            let shapes = batch
                .tables
                .iter()
                .zip(&self.coalesced)
                .map(|(tb, c)| TableShape::of(tb, dim, self.pooling, c.rows.len()));
            let (source, ns, detail) =
                self.env
                    .cpu_time(CpuPrimitive::Scatter, shapes, state, scatter_ns);
            ctx.timeline.push(
                "scatter",
                &detail,
                Stage::BackwardEmbedding,
                MAIN,
                Resource::Cpu,
                source,
                ns,
                scatter_bytes,
            );
        }
        Ok(())
    }

    fn infer(&self, batch: &Batch) -> Result<Vec<Vec<f32>>, DlrmError> {
        self.check_synced()?;
        pool_all(&self.tables, batch, self.pooling)
    }

    fn tables(&self) -> &[EmbeddingTable] {
        &self.tables
    }

    fn sync(&mut self) -> Result<(), DlrmError> {
        #[cfg(feature = "cuda")]
        if let Some(em) = &mut self.emulation {
            if em.stale {
                let emu = em.lock()?;
                for (t, ((dt, table), state)) in em
                    .tables
                    .iter()
                    .zip(&mut self.tables)
                    .zip(&mut self.states)
                    .enumerate()
                {
                    emu.backend()
                        .download_table(dt, table, state)
                        .map_err(|e| e.in_table(t))?;
                }
                drop(emu);
                em.stale = false;
            }
        }
        Ok(())
    }
}

/// Every table's pooled output of `batch` from `tables` (inference: no
/// timing).
pub(crate) fn pool_all(
    tables: &[EmbeddingTable],
    batch: &Batch,
    pooling: Pooling,
) -> Result<Vec<Vec<f32>>, DlrmError> {
    batch
        .tables
        .iter()
        .zip(tables)
        .enumerate()
        .map(|(t, (tb, table))| {
            gather_reduce(table, tb, pooling)
                .map(|(o, _)| o)
                .map_err(|e| e.in_table(t).into())
        })
        .collect()
}

/// Casting done elsewhere (on a GPU thread): the casted arrays of every
/// table, their bytes, and the GPU time it took.
type CastJob<'a> = Box<dyn FnOnce() -> Result<(Vec<Casted>, u64, f64), DlrmError> + 'a>;

/// Tensor casting of every table of `batch` on the GPU, the device's time
/// for its kernels measured with CUDA events (the copies of the indices in
/// and of the casted arrays out are outside it: the timeline models them as
/// link transfers).
#[cfg(feature = "cuda")]
fn gpu_cast_all(
    b: &nmpsim_kernels::cuda::CudaBackend,
    batch: &Batch,
    pooling: Pooling,
) -> Result<(Vec<Casted>, u64, f64), DlrmError> {
    // (On a device without stream-ordered allocation the time includes the
    // host's launch gaps: `timing.held` is false there; docs/gpu.md.)
    let (cast, timing) = b.tensor_cast_tables_timed(&batch.tables, pooling)?;
    let bytes = cast.iter().map(|(_, tr)| tr.total_bytes()).sum();
    Ok((
        cast.into_iter().map(|(c, _)| c).collect(),
        bytes,
        timing.device_ns,
    ))
}

impl SystemModes {
    fn forward_with(
        &mut self,
        batch: &Batch,
        ctx: &mut StepCtx,
        cast_job: Option<CastJob<'_>>,
    ) -> Result<Vec<Vec<f32>>, DlrmError> {
        let b = batch.batch_size();
        let dim = self.dim();
        if self.mode.uses_nmp() {
            self.fingerprint = fingerprint(batch);
        }
        // The numbers: gather-reduce of every table (on the emulated pool
        // further down when the GPU emulation is on; its bytes are analytic).
        let emulate_gather = self.emulating() && self.plan.gather == Place::Nmp;
        let t0 = Instant::now();
        let mut pooled = Vec::with_capacity(self.tables.len());
        let mut gather_bytes = 0u64;
        if emulate_gather {
            let weighted = self.pooling == Pooling::WeightedSum;
            for tb in &batch.tables {
                gather_bytes +=
                    gather_reduce_traffic(tb.num_lookups(), tb.batch_size(), dim, weighted)
                        .total_bytes();
            }
        } else {
            for (t, (tb, table)) in batch.tables.iter().zip(&self.tables).enumerate() {
                let (o, tr) = gather_reduce(table, tb, self.pooling).map_err(|e| e.in_table(t))?;
                gather_bytes += tr.total_bytes();
                pooled.push(o);
            }
            ctx.host.add("gather-reduce", ns_since(t0));
        }
        let gather_ns = ns_since(t0);
        let pooled_bytes = (b * dim * 4 * self.tables.len()) as u64;
        match self.plan.gather {
            Place::Nmp => {
                let pooling = self.pooling;
                let instrs = || {
                    batch
                        .tables
                        .iter()
                        .enumerate()
                        .map(|(t, tb)| Instruction::GatherReduce {
                            table: t as u32,
                            pooling,
                            offsets: tb.offsets.clone(),
                            indices: tb.indices.clone(),
                            weights: tb.weights.clone(),
                        })
                        .collect::<Vec<_>>()
                };
                // The encoded length (`nmp::encoded_len`) without building the
                // instructions: header, then length-prefixed u32 arrays.
                let arr = |n: usize| 4 + 4 * n as u64;
                let instr_bytes: u64 = batch
                    .tables
                    .iter()
                    .map(|tb| {
                        nmpsim_nmp::HEADER_BYTES as u64
                            + arr(tb.offsets.len())
                            + arr(tb.indices.len())
                            + tb.weights.as_ref().map_or(0, |w| arr(w.len()))
                    })
                    .sum();
                let link = self.pool_link(instr_bytes)?;
                ctx.timeline.push(
                    "transfer",
                    "gather instructions to pool",
                    Stage::ForwardEmbedding,
                    MAIN,
                    Resource::PoolLink,
                    link.0,
                    link.1,
                    instr_bytes,
                );
                let pt = self.pool_time("gather-reduce", ctx.iteration, gather_bytes, instrs)?;
                let time = match self.emulate_gather(batch, pt.time_ns, ctx.host)? {
                    Some((out, ns)) => {
                        pooled = out;
                        (Source::Emulated, ns)
                    }
                    None => (pt.source, pt.time_ns),
                };
                push_pool_work(
                    ctx.timeline,
                    "gather-reduce",
                    Stage::ForwardEmbedding,
                    time,
                    gather_bytes,
                    &pt,
                );
                // The results (pooled vectors, or a row-interleaved pool's
                // partial sums) drain over the link while the pool computes,
                // in its time above; what the ranks still hold follows. A
                // fixed-bandwidth pool models no link: all of it follows (a
                // row-interleaved pool's partial sums from every rank that
                // looked up rows).
                // (A proxied batch's tail is the simulated batches' mean, at
                // most what this batch sends in all: a smaller last batch.)
                let out_bytes = self.link_out_tail(&pt, |l| {
                    batch
                        .tables
                        .iter()
                        .enumerate()
                        .map(|(t, tb)| {
                            let bags = tb.offsets.len().saturating_sub(1) as u64;
                            nmpsim_nmp::gather_link_out_bytes(l, t, bags, &tb.indices)
                        })
                        .sum()
                })?;
                let link = self.pool_link(out_bytes)?;
                ctx.timeline.push(
                    "transfer",
                    "pooled embeddings pool to gpu",
                    Stage::ForwardTransfer,
                    MAIN,
                    Resource::PoolLink,
                    link.0,
                    link.1,
                    out_bytes,
                );
            }
            _ => {
                let pooling = self.pooling;
                let (source, ns, detail) = self.env.cpu_time(
                    CpuPrimitive::GatherReduce,
                    batch
                        .tables
                        .iter()
                        .map(|tb| TableShape::of(tb, dim, pooling, 0)),
                    0,
                    gather_ns,
                );
                ctx.timeline.push(
                    "gather-reduce",
                    &detail,
                    Stage::ForwardEmbedding,
                    MAIN,
                    Resource::Cpu,
                    source,
                    ns,
                    gather_bytes,
                );
                ctx.timeline.push(
                    "transfer",
                    "pooled embeddings host to gpu",
                    Stage::ForwardTransfer,
                    MAIN,
                    Resource::HostLink,
                    Source::Modelled,
                    self.env.gpu.host_transfer_ns(pooled_bytes),
                    pooled_bytes,
                );
            }
        }
        // Tensor Casting's casting step, overlapped with the gather-reduce
        // (Fig. 9b): indices to the GPU, casting there, casted arrays to
        // where the casted gather-reduce runs.
        if self.plan.casting.is_some() {
            let t0 = Instant::now();
            self.casted.clear();
            let mut cast_bytes = 0u64;
            // The modelled GPU time of each table's casting.
            let mut cast_model_ns = 0.0;
            let (mut idx_bytes, mut out_bytes) = (0u64, 0u64);
            // Measured on a real GPU (the kernels alone), or computed here
            // and its GPU time modelled.
            let measured_ns = match cast_job {
                Some(job) => {
                    let (casted, bytes, ns) = job()?;
                    self.casted = casted;
                    cast_bytes = bytes;
                    Some(ns)
                }
                None => {
                    for (t, tb) in batch.tables.iter().enumerate() {
                        let (c, tr) = tensor_cast(tb, self.pooling).map_err(|e| e.in_table(t))?;
                        cast_bytes += tr.total_bytes();
                        cast_model_ns += self.env.gpu.casting_ns(
                            tb.indices.len(),
                            tb.num_rows,
                            tr.total_bytes(),
                        );
                        self.casted.push(c);
                    }
                    ctx.host.add("casting", ns_since(t0));
                    None
                }
            };
            for (tb, c) in batch.tables.iter().zip(&self.casted) {
                // (Weighted bags: casting reads the weights too, to scale.)
                idx_bytes += 4 * (tb.offsets.len() + tb.indices.len()) as u64
                    + tb.weights.as_ref().map_or(0, |w| 4 * w.len() as u64);
                out_bytes += 4
                    * (c.casted_src.len() + c.casted_dst.len() + c.unique_rows.len()) as u64
                    + c.scale.as_ref().map_or(0, |s| 4 * s.len() as u64);
            }
            let gpu = &self.env.gpu;
            ctx.timeline.push(
                "transfer",
                "indices host to gpu",
                Stage::ForwardEmbedding,
                OVERLAP,
                Resource::HostLink,
                Source::Modelled,
                gpu.host_transfer_ns(idx_bytes),
                idx_bytes,
            );
            let (cast_source, cast_ns) = match measured_ns {
                Some(ns) => (Source::Measured, ns),
                // Per table: the sort-by-key's passes, flags and scan, at
                // the casting kernels' share of the bandwidth fitted on an H100.
                None => (Source::Modelled, cast_model_ns),
            };
            ctx.timeline.push(
                "casting",
                "gpu",
                Stage::ForwardEmbedding,
                OVERLAP,
                Resource::Gpu,
                cast_source,
                cast_ns,
                cast_bytes,
            );
            let (res, (source, ns), what) = if self.plan.coalesce == Place::Nmp {
                (
                    Resource::PoolLink,
                    self.pool_link(out_bytes)?,
                    "casted indices gpu to pool",
                )
            } else {
                (
                    Resource::HostLink,
                    (Source::Modelled, gpu.host_transfer_ns(out_bytes)),
                    "casted indices gpu to host",
                )
            };
            ctx.timeline.push(
                "transfer",
                what,
                Stage::ForwardEmbedding,
                OVERLAP,
                res,
                source,
                ns,
                out_bytes,
            );
        }
        Ok(pooled)
    }
}

/// Pooled outputs of every table and the time they took.
type PooledAndTime = (Vec<Vec<f32>>, f64);

impl SystemModes {
    /// Host tables behind the emulated pool's are an error, not stale numbers.
    fn check_synced(&self) -> Result<(), DlrmError> {
        #[cfg(feature = "cuda")]
        if self.emulation.as_ref().is_some_and(|e| e.stale) {
            return Err(DlrmError::Config(
                "the host tables are behind the emulated pool's; call sync() first".into(),
            ));
        }
        Ok(())
    }

    /// Gather-reduce on the emulated pool, held to `target_ns`: the pooled
    /// outputs and the emulated time, or `None` without emulation.
    #[cfg(feature = "cuda")]
    fn emulate_gather(
        &mut self,
        batch: &Batch,
        target_ns: f64,
        host: &mut HostTimes,
    ) -> Result<Option<PooledAndTime>, DlrmError> {
        let Some(em) = &self.emulation else {
            return Ok(None);
        };
        let pooling = self.pooling;
        let mut emu = em.lock()?;
        // Indices go to the device before the timed region (in the system
        // they cross the pool link, which is emulated on its own); the
        // region holds the kernels alone; the pooled rows come back after.
        // Every table's gather-reduce is one launch, as the pool runs one
        // batch's lookups of every table together.
        let tables: Vec<&nmpsim_kernels::cuda::DeviceTable> = em.tables.iter().collect();
        let mut staged = emu
            .backend()
            .stage_tables(&tables, &batch.tables, pooling)?;
        let ((), e) = emu.run(target_ns, |b| {
            b.gather_reduce_tables_staged(&tables, &mut staged)?;
            Ok(())
        })?;
        let out = emu.backend().download_pooled_tables(&staged)?;
        host.add("gather-reduce gpu-raw", e.raw_ns);
        Ok(Some((out, e.emulated_ns)))
    }

    #[cfg(not(feature = "cuda"))]
    fn emulate_gather(
        &mut self,
        _: &Batch,
        _: f64,
        _: &mut HostTimes,
    ) -> Result<Option<PooledAndTime>, DlrmError> {
        Ok(None)
    }

    /// Casted gather-reduce on the emulated pool; its coalesced gradients
    /// stay on the device for [`Self::emulate_scatter`].
    #[cfg(feature = "cuda")]
    fn emulate_coalesce(
        &mut self,
        dpooled: &[Vec<f32>],
        target_ns: f64,
        host: &mut HostTimes,
    ) -> Result<Option<f64>, DlrmError> {
        if self.plan.casting.is_none() {
            return Ok(None);
        }
        let dim = self.tables[0].dim;
        let Some(em) = &mut self.emulation else {
            return Ok(None);
        };
        let mut emu = lock_pool(&em.emu)?;
        // The output gradients reach the pool over its link (emulated on its
        // own): staged before the timed region, which holds the kernels.
        let mut staged = self
            .casted
            .iter()
            .zip(dpooled)
            .enumerate()
            .map(|(t, (c, d))| {
                emu.backend()
                    .stage_casted(c, d, dim)
                    .map_err(|err| DlrmError::from(err.in_table(t)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ((), e) = emu.run(target_ns, |b| {
            for (t, s) in staged.iter_mut().enumerate() {
                b.casted_gather_reduce_staged(s)
                    .map_err(|err| DlrmError::from(err.in_table(t)))?;
            }
            Ok(())
        })?;
        // The coalesced gradients stay on the device for the scatter; the
        // host copies hold the rows only, so nothing reads stale values.
        for c in &mut self.coalesced {
            c.grads.clear();
        }
        em.coalesced = Some(staged.into_iter().map(|s| s.into_coalesced()).collect());
        host.add("casted-gather-reduce gpu-raw", e.raw_ns);
        Ok(Some(e.emulated_ns))
    }

    #[cfg(not(feature = "cuda"))]
    fn emulate_coalesce(
        &mut self,
        _: &[Vec<f32>],
        _: f64,
        _: &mut HostTimes,
    ) -> Result<Option<f64>, DlrmError> {
        Ok(None)
    }

    /// Scatter into the emulated pool's tables.
    #[cfg(feature = "cuda")]
    fn emulate_scatter(
        &mut self,
        optimizer: &Optimizer,
        target_ns: f64,
        host: &mut HostTimes,
    ) -> Result<Option<f64>, DlrmError> {
        let Some(em) = &mut self.emulation else {
            return Ok(None);
        };
        let emu_arc = em.emu.clone();
        let mut emu = lock_pool(&emu_arc)?;
        // Gradients the pool coalesced are already on the device; the host's
        // (TensorDIMM: coalesced on the CPU, sent over the link, which is
        // emulated on its own) are staged before the timed region.
        let staged = match em.coalesced.take() {
            Some(d) => d,
            None => self
                .coalesced
                .iter()
                .enumerate()
                .map(|(t, c)| {
                    emu.backend()
                        .stage_coalesced(c)
                        .map_err(|err| DlrmError::from(err.in_table(t)))
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let tables = &mut em.tables;
        let ((), e) = emu.run(target_ns, |b| {
            for (t, (dt, c)) in tables.iter_mut().zip(&staged).enumerate() {
                b.scatter_update_staged(dt, c, optimizer)
                    .map_err(|err| DlrmError::from(err.in_table(t)))?;
            }
            Ok(())
        })?;
        em.stale = true;
        host.add("scatter gpu-raw", e.raw_ns);
        Ok(Some(e.emulated_ns))
    }

    #[cfg(not(feature = "cuda"))]
    fn emulate_scatter(
        &mut self,
        _: &Optimizer,
        _: f64,
        _: &mut HostTimes,
    ) -> Result<Option<f64>, DlrmError> {
        Ok(None)
    }
}
