//! `eltt`: EL-Rec (`el-rec-tensor-train.txt`) as an embedding strategy. Every
//! table of more rows than the threshold (1M, as the paper's end-to-end runs)
//! becomes an Eff-TT table (`nmpsim_kernels::tt`), small enough to live on
//! the GPU with the dense model; the smaller tables stay dense, on the GPU
//! too. Every batch is trained on the GPU: the TT lookups with batch-level
//! reuse, the TT backward aggregated in advance with the update fused in,
//! and the dense tables' primitives as FAE's and cDLRM's GPU rows.
//!
//! Times: the GPU's work modelled from the preset (the TT primitives on
//! their FLOPs and bytes, the slower of the two at the preset's GEMM
//! efficiency; the dense ones on their bytes), the indices over the host
//! link modelled. The numbers are the kernels crate's, computed here.
//!
//! `eltt-nmp` ([`Eltt::on_pool`]) runs the TT tables' lookups on the NMP
//! pool instead: every rank holds a copy of the cores, each lookup runs on
//! the rank its prefix maps to and its products on that core's vector ALU
//! (`nmpsim_nmp::tt`), simulated on the DRAM engines (or their proxy), and
//! the partial sums cross the pool link to the GPU. The backward stays on the
//! GPU, which keeps the cores' master copy and their optimizer state; the
//! core slices it updated are then written to every rank's copy
//! (`tt-write`). The numbers are `eltt`'s, bit for bit: the pool times, the
//! kernels compute (the pool's own lookups are tested to equal them).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use nmpsim_kernels::tt::{TtCost, TtState, TtTable, tt_backward_update, tt_gather_reduce};
use nmpsim_kernels::{EmbeddingTable, OptimizerState, Pooling};
use nmpsim_nmp::Instruction;
use nmpsim_traces::{Batch, TableBatch};
use serde::{Deserialize, Serialize};

use crate::DlrmError;
use crate::embedding::{EmbeddingStrategy, StepCtx};
use crate::gpu::GpuPreset;
use crate::hot::gpu_step::{self, Scratch};
use crate::pooltime::{PoolTime, PoolTimer, array_bytes, fingerprint, lock};
use crate::timeline::{MAIN, Resource, Source, Stage};

/// EL-Rec's choices for a run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElttOptions {
    /// TT rank `R` (the paper's 128 on a V100).
    pub rank: usize,
    /// Tables of more rows become TT tables.
    pub threshold: u64,
    /// Batch-level reuse of the prefix products in the forward.
    pub reuse: bool,
    /// Batches at the start of the input the locality-based reordering of
    /// the TT tables' rows is built from (0: no reordering).
    #[serde(default)]
    pub reorder_batches: usize,
}

impl Default for ElttOptions {
    fn default() -> Self {
        ElttOptions {
            rank: 128,
            threshold: 1_000_000,
            reuse: true,
            reorder_batches: 0,
        }
    }
}

/// One table of the model: dense (its place among the dense tables), or TT.
enum Table {
    Dense(usize),
    Tt(Box<(TtTable, TtState)>),
}

/// The run's counts, for its notes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ElttCounts {
    pub batches: u64,
    pub tt_lookups: u64,
    /// Prefix products computed in the forwards (with reuse, the distinct
    /// prefixes of each batch).
    pub prefixes: u64,
    pub forward_flops: u64,
    pub backward_flops: u64,
}

/// `eltt-nmp`'s pool and what it did.
struct OnPool {
    timer: Arc<Mutex<PoolTimer>>,
    /// The model's table of each of the pool's TT tables.
    tt_ids: Vec<usize>,
    counts: PoolCounts,
}

/// The pool's share of an `eltt-nmp` run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolCounts {
    /// Forwards on the pool, and of them those whose slowest rank's ALU
    /// bounded them (simulated, or a proxy of mostly such batches).
    pub forwards: u64,
    pub compute_bound: u64,
    /// Forwards timed with no simulation (a fixed bandwidth).
    pub unbounded: u64,
    pub forward_ns: f64,
    pub write_ns: f64,
    /// Partial sums sent to the GPU, and core slices written back.
    pub out_bytes: u64,
    pub write_bytes: u64,
}

/// EL-Rec as an embedding strategy.
pub struct Eltt {
    tables: Vec<Table>,
    /// The dense tables and their state (the TT ones store no rows), and
    /// their index among the model's tables.
    dense: Vec<EmbeddingTable>,
    dense_states: Vec<OptimizerState>,
    dense_ids: Vec<usize>,
    gpu: GpuPreset,
    pooling: Pooling,
    options: ElttOptions,
    scratch: Scratch,
    /// The dense tables' part of the batch between its forward and backward.
    dense_batch: Option<Batch>,
    pub counts: ElttCounts,
    /// `eltt-nmp`: the TT lookups on the NMP pool.
    pool: Option<OnPool>,
}

fn ns_since(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64
}

impl Eltt {
    /// Table `t` seeded from `seed ^ (0xe0 + t)` as every strategy's: dense
    /// ones with the dense tables' values, TT ones with EL-Rec's cores.
    pub fn new(
        config: &crate::trainer::TrainConfig,
        options: ElttOptions,
        gpu: GpuPreset,
    ) -> Result<Self, DlrmError> {
        config.validate()?;
        if options.rank == 0 {
            return Err(DlrmError::Config(
                "--tt-rank 0: the TT rank must be at least 1".into(),
            ));
        }
        let m = &config.model;
        let opt = &config.embedding_optimizer;
        let mut tables = Vec::with_capacity(m.table_rows.len());
        let (mut dense, mut dense_states, mut dense_ids) = (Vec::new(), Vec::new(), Vec::new());
        for (t, &rows) in m.table_rows.iter().enumerate() {
            let seed = config.seed ^ (0xe0 + t as u64);
            if rows > options.threshold {
                let tt = TtTable::seeded(rows, m.dim, options.rank, seed).map_err(|e| {
                    DlrmError::Config(format!("table {t} ({rows} rows) as a TT table: {e}"))
                })?;
                let state =
                    TtState::new(opt, &tt).map_err(|e| DlrmError::Config(format!("eltt: {e}")))?;
                tables.push(Table::Tt(Box::new((tt, state))));
            } else {
                tables.push(Table::Dense(dense.len()));
                dense.push(EmbeddingTable::seeded(rows, m.dim, seed)?);
                dense_states.push(OptimizerState::new(opt, rows, m.dim)?);
                dense_ids.push(t);
            }
        }
        Ok(Eltt {
            tables,
            dense,
            dense_states,
            dense_ids,
            gpu,
            pooling: m.pooling,
            options,
            scratch: Scratch::default(),
            dense_batch: None,
            counts: ElttCounts::default(),
            pool: None,
        })
    }

    /// `eltt-nmp`: the TT tables' lookups on the NMP pool `timer` times,
    /// every rank a copy of their cores after the rows it holds.
    pub fn on_pool(mut self, timer: Arc<Mutex<PoolTimer>>) -> Result<Self, DlrmError> {
        let shapes = self.tt_shapes();
        if !shapes.is_empty() {
            let s: Vec<_> = shapes.iter().map(|(_, s)| *s).collect();
            lock(&timer)?.set_tt_tables(&s)?;
        }
        self.pool = Some(OnPool {
            timer,
            tt_ids: shapes.iter().map(|(t, _)| *t).collect(),
            counts: PoolCounts::default(),
        });
        Ok(self)
    }

    /// The pool's counts, for `eltt-nmp`.
    pub fn pool_counts(&self) -> Option<&PoolCounts> {
        self.pool.as_ref().map(|p| &p.counts)
    }

    /// The TT forward on the pool: the instructions in, the ranks' lookups,
    /// the partial sums out to the GPU.
    fn pool_forward(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<(), DlrmError> {
        let (pooling, reuse) = (self.pooling, self.options.reuse);
        let p = self.pool.as_mut().expect("eltt-nmp");
        let tbs: Vec<&TableBatch> = p.tt_ids.iter().map(|&t| &batch.tables[t]).collect();
        let in_bytes: u64 = tbs
            .iter()
            .map(|tb| {
                nmpsim_nmp::HEADER_BYTES as u64
                    + array_bytes(tb.offsets.len())
                    + array_bytes(tb.indices.len())
            })
            .sum();
        let fp = fingerprint(tbs.iter().map(|tb| &tb.indices[..]));
        let instrs = || {
            tbs.iter()
                .enumerate()
                .map(|(k, tb)| Instruction::TtGatherReduce {
                    table: k as u32,
                    pooling,
                    reuse,
                    offsets: tb.offsets.clone(),
                    indices: tb.indices.clone(),
                })
                .collect::<Vec<_>>()
        };
        let mut timer = lock(&p.timer)?;
        // (The pool's DRAM bytes: the proxy's measure and the bandwidth
        // reported; the kernels' traffic counts the GPU's reuse buffer too.)
        let (out_bytes, read_bytes): (u64, u64) = {
            let pool = timer
                .tt_pool()
                .ok_or_else(|| DlrmError::Config("eltt-nmp: the pool holds no TT tables".into()))?;
            tbs.iter()
                .enumerate()
                .map(|(k, tb)| {
                    (
                        pool.gather_reduce_link_out_bytes(k, &tb.offsets, &tb.indices),
                        pool.gather_reduce_read_bytes(k, reuse, &tb.indices),
                    )
                })
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let pt = timer.time("tt-gather-reduce", ctx.iteration, fp, read_bytes, instrs)?;
        let tail = pt
            .link_out_tail_bytes
            .map_or(out_bytes, |b| b.min(out_bytes));
        let (in_ns, out_ns) = (timer.setup.link_ns(in_bytes), timer.setup.link_ns(tail));
        drop(timer);
        ctx.timeline.push(
            "transfer",
            "tt-gather-reduce instructions to pool",
            Stage::ForwardEmbedding,
            MAIN,
            Resource::PoolLink,
            Source::Modelled,
            in_ns,
            in_bytes,
        );
        ctx.timeline.push(
            "tt-gather-reduce",
            format!(
                "nmp ({}: each lookup on its prefix's rank, {}, products on the vector ALUs)",
                bound_text(&pt),
                if reuse {
                    "a prefix product once per rank"
                } else {
                    "every lookup's products"
                }
            ),
            Stage::ForwardEmbedding,
            MAIN,
            Resource::Nmp,
            pt.source,
            pt.time_ns,
            read_bytes,
        );
        ctx.timeline.set_last_energy(pt.energy_pj.unwrap_or(0.0));
        ctx.timeline.push(
            "transfer",
            "tt partial sums to gpu",
            Stage::ForwardEmbedding,
            MAIN,
            Resource::PoolLink,
            Source::Modelled,
            out_ns,
            tail,
        );
        let c = &mut p.counts;
        c.forwards += 1;
        match pt.compute_bound {
            Some(true) => c.compute_bound += 1,
            Some(false) => {}
            None => c.unbounded += 1,
        }
        c.forward_ns += pt.time_ns;
        c.out_bytes += out_bytes;
        Ok(())
    }

    /// After the GPU's backward: the core slices it updated, written to
    /// every rank's copy.
    fn pool_write(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<(), DlrmError> {
        let p = self.pool.as_mut().expect("eltt-nmp");
        // Per TT table of the pool and core, the slices the batch touched.
        let mut touched: Vec<(usize, [Vec<u32>; 3])> = Vec::with_capacity(p.tt_ids.len());
        for &t in &p.tt_ids {
            let Table::Tt(x) = &self.tables[t] else {
                unreachable!("tt_ids are TT tables")
            };
            let s = x.0.shape;
            let mut sl: [Vec<u32>; 3] = Default::default();
            for &r in &batch.tables[t].indices {
                let ix = s.split(r);
                for k in 0..3 {
                    sl[k].push(ix[k]);
                }
            }
            for v in &mut sl {
                v.sort_unstable();
                v.dedup();
            }
            touched.push((t, sl));
        }
        let tables = &self.tables;
        let core = |t: usize| match &tables[t] {
            Table::Tt(x) => &x.0,
            Table::Dense(..) => unreachable!("tt_ids are TT tables"),
        };
        let mut timer = lock(&p.timer)?;
        let (mut bytes, mut in_bytes) = (0u64, 0u64);
        {
            let pool = timer
                .tt_pool()
                .ok_or_else(|| DlrmError::Config("eltt-nmp: the pool holds no TT tables".into()))?;
            for (j, (t, sl)) in touched.iter().enumerate() {
                for (k, v) in sl.iter().enumerate() {
                    let n = v.len() * core(*t).shape.slice_len(k);
                    // (Every rank's copy written: the pool's DRAM bytes.)
                    bytes += pool.write_bytes(j, k, v.len());
                    in_bytes +=
                        nmpsim_nmp::HEADER_BYTES as u64 + 4 + array_bytes(v.len()) + array_bytes(n);
                }
            }
        }
        if bytes == 0 {
            return Ok(());
        }
        let fp = fingerprint(p.tt_ids.iter().map(|&t| &batch.tables[t].indices[..]));
        let instrs = || {
            let mut out = Vec::new();
            for (j, (t, sl)) in touched.iter().enumerate() {
                let tt = core(*t);
                for (k, v) in sl.iter().enumerate() {
                    let mut values = Vec::with_capacity(v.len() * tt.shape.slice_len(k));
                    for &i in v {
                        values.extend_from_slice(tt.slice(k, i));
                    }
                    out.push(Instruction::TtWrite {
                        table: j as u32,
                        core: k as u32,
                        slices: v.clone(),
                        values,
                    });
                }
            }
            out
        };
        let pt = timer.time("tt-write", ctx.iteration, fp, bytes, instrs)?;
        let in_ns = timer.setup.link_ns(in_bytes);
        drop(timer);
        ctx.timeline.push(
            "transfer",
            "tt-write: updated core slices to pool",
            Stage::BackwardEmbedding,
            MAIN,
            Resource::PoolLink,
            Source::Modelled,
            in_ns,
            in_bytes,
        );
        ctx.timeline.push(
            "tt-write",
            "nmp (the updated core slices written to every rank's copy)",
            Stage::BackwardEmbedding,
            MAIN,
            Resource::Nmp,
            pt.source,
            pt.time_ns,
            bytes,
        );
        ctx.timeline.set_last_energy(pt.energy_pj.unwrap_or(0.0));
        p.counts.write_ns += pt.time_ns;
        p.counts.write_bytes += bytes;
        Ok(())
    }

    /// The TT tables' shapes, by table.
    pub fn tt_shapes(&self) -> Vec<(usize, nmpsim_kernels::tt::TtShape)> {
        self.tables
            .iter()
            .enumerate()
            .filter_map(|(t, x)| match x {
                Table::Tt(x) => Some((t, x.0.shape)),
                Table::Dense(..) => None,
            })
            .collect()
    }

    /// The model's embedding bytes as stored (TT cores and dense tables),
    /// and as dense tables all.
    pub fn bytes(&self) -> (u64, u64) {
        let mut stored = 0;
        let mut dense = 0;
        for x in &self.tables {
            match x {
                Table::Tt(x) => {
                    stored += x.0.shape.bytes();
                    dense += x.0.shape.dense_bytes();
                }
                Table::Dense(i) => {
                    stored += self.dense[*i].bytes();
                    dense += self.dense[*i].bytes();
                }
            }
        }
        (stored, dense)
    }

    /// The dense tables' part of `batch`.
    fn dense_part(&self, batch: &Batch) -> Batch {
        let tbs: Vec<TableBatch> = self
            .dense_ids
            .iter()
            .map(|&t| batch.tables[t].clone())
            .collect();
        Batch::of_tables(tbs)
    }

    fn tt_ns(&self, cost: &TtCost) -> f64 {
        self.gpu.kernel_ns(
            cost.flops as f64,
            cost.traffic.total_bytes() as f64,
            self.gpu.gemm_efficiency,
        )
    }

    fn pooled(&self, batch: &Batch, timed: bool) -> Result<(Vec<Vec<f32>>, TtCost), DlrmError> {
        let mut out = Vec::with_capacity(self.tables.len());
        let mut cost = TtCost::default();
        for (t, (x, tb)) in self.tables.iter().zip(&batch.tables).enumerate() {
            match x {
                Table::Tt(x) => {
                    let (o, c) = tt_gather_reduce(&x.0, tb, self.pooling, self.options.reuse)
                        .map_err(|e| e.in_table(t))?;
                    cost = cost + c;
                    out.push(o);
                }
                Table::Dense(i) if !timed => {
                    let (o, _) = nmpsim_kernels::gather_reduce(&self.dense[*i], tb, self.pooling)
                        .map_err(|e| e.in_table(t))?;
                    out.push(o);
                }
                // (Timed: the dense tables' pooled rows come from gpu_step.)
                Table::Dense(..) => out.push(Vec::new()),
            }
        }
        Ok((out, cost))
    }
}

impl EmbeddingStrategy for Eltt {
    fn name(&self) -> String {
        if self.pool.is_some() {
            "eltt-nmp".into()
        } else {
            "eltt".into()
        }
    }

    fn placement(&self) -> Vec<(String, String)> {
        let mut p = vec![
            (
                "tt-gather-reduce",
                if self.pool.is_some() { "nmp" } else { "gpu" },
            ),
            ("tt-backward", "gpu"),
        ];
        if self.pool.is_some() {
            p.push(("tt-write", "nmp"));
        }
        p.extend([
            ("gather-reduce", "gpu"),
            ("expand-coalesce", "gpu"),
            ("scatter", "gpu"),
        ]);
        crate::embedding::places(&p)
    }

    fn forward(&mut self, batch: &Batch, ctx: &mut StepCtx) -> Result<Vec<Vec<f32>>, DlrmError> {
        self.counts.batches += 1;
        gpu_step::push_indices(batch, &self.gpu, ctx);
        let t0 = Instant::now();
        let (mut pooled, cost) = self.pooled(batch, true)?;
        ctx.host
            .add("tt-gather-reduce (modelled gpu's numbers)", ns_since(t0));
        if cost.flops > 0 {
            self.counts.prefixes += cost.prefixes;
            self.counts.forward_flops += cost.flops;
            self.counts.tt_lookups += self
                .tables
                .iter()
                .zip(&batch.tables)
                .filter(|(x, _)| matches!(x, Table::Tt(..)))
                .map(|(_, tb)| tb.num_lookups() as u64)
                .sum::<u64>();
            if self.pool.is_some() {
                self.pool_forward(batch, ctx)?;
            } else {
                // On a real GPU (`--device cuda`): the TT kernels, timed,
                // their pooled rows checked against the CPU's.
                let mut measured = None;
                if let Some(dev) = self.scratch.device() {
                    let mut ns = 0.0;
                    for (t, (x, tb)) in self.tables.iter().zip(&batch.tables).enumerate() {
                        if let Table::Tt(x) = x {
                            ns += dev.tt_forward(
                                t,
                                &x.0,
                                &x.1,
                                tb,
                                self.pooling,
                                self.options.reuse,
                                &pooled[t],
                            )?;
                        }
                    }
                    measured = Some(ns);
                }
                let detail = if self.options.reuse {
                    "gpu (prefix products once per batch, then a product per lookup)"
                } else {
                    "gpu (every lookup's products, no reuse)"
                };
                let (source, ns, detail) =
                    gpu_step::measured_or_modelled(measured, || self.tt_ns(&cost), detail);
                ctx.timeline.push(
                    "tt-gather-reduce",
                    detail,
                    Stage::ForwardEmbedding,
                    MAIN,
                    Resource::Gpu,
                    source,
                    ns,
                    cost.traffic.total_bytes(),
                );
            }
        }
        if !self.dense_ids.is_empty() {
            let part = self.dense_part(batch);
            let out = gpu_step::forward(
                &self.dense,
                &part,
                self.pooling,
                &mut self.scratch,
                &self.gpu,
                "gpu (dense tables)",
                ctx,
            )?;
            for (&t, o) in self.dense_ids.iter().zip(out) {
                pooled[t] = o;
            }
            self.dense_batch = Some(part);
        }
        Ok(pooled)
    }

    fn backward(
        &mut self,
        batch: &Batch,
        dpooled: &[Vec<f32>],
        ctx: &mut StepCtx,
    ) -> Result<(), DlrmError> {
        let optimizer = ctx.optimizer;
        let t0 = Instant::now();
        let mut cost = TtCost::default();
        // On a real GPU (`--device cuda`): the same backward and update on
        // the device copy of the cores as they are before the CPU's update,
        // timed, and the updated cores checked against the CPU's once.
        let mut dev = self.scratch.device();
        let mut measured = dev.as_ref().map(|_| 0.0);
        for (t, (x, tb)) in self.tables.iter_mut().zip(&batch.tables).enumerate() {
            if let Table::Tt(x) = x {
                let (tt, state) = &mut **x;
                if let (Some(d), Some(ns)) = (dev.as_deref_mut(), measured.as_mut()) {
                    *ns +=
                        d.tt_backward(t, tt, state, tb, &dpooled[t], self.pooling, &optimizer)?;
                }
                cost = cost
                    + tt_backward_update(tt, state, tb, &dpooled[t], self.pooling, &optimizer)
                        .map_err(|e| e.in_table(t))?;
                if let Some(d) = dev.as_deref_mut() {
                    d.tt_after_update(t, tt)?;
                }
            }
        }
        ctx.host
            .add("tt-backward (modelled gpu's numbers)", ns_since(t0));
        if cost.flops > 0 {
            self.counts.backward_flops += cost.flops;
            let detail = "gpu (gradients aggregated per unique row, chain rule per unique row and prefix, update fused)";
            let (source, ns, detail) =
                gpu_step::measured_or_modelled(measured, || self.tt_ns(&cost), detail);
            ctx.timeline.push(
                "tt-backward",
                detail,
                Stage::BackwardEmbedding,
                MAIN,
                Resource::Gpu,
                source,
                ns,
                cost.traffic.total_bytes(),
            );
            if self.pool.is_some() {
                self.pool_write(batch, ctx)?;
            }
        }
        if !self.dense_ids.is_empty() {
            let part = match self.dense_batch.take() {
                Some(p) => p,
                None => self.dense_part(batch),
            };
            let grads: Vec<Vec<f32>> = self.dense_ids.iter().map(|&t| dpooled[t].clone()).collect();
            gpu_step::backward(
                &mut self.dense,
                &mut self.dense_states,
                &part,
                &grads,
                self.pooling,
                &optimizer,
                &mut self.scratch,
                &self.gpu,
                "gpu (dense tables)",
                ctx,
            )?;
        }
        Ok(())
    }

    fn infer(&self, batch: &Batch) -> Result<Vec<Vec<f32>>, DlrmError> {
        Ok(self.pooled(batch, false)?.0)
    }

    /// The dense tables only: a TT table stores no rows.
    fn tables(&self) -> &[EmbeddingTable] {
        &self.dense
    }

    /// With a reordering, the input with the TT tables' rows renamed by
    /// EL-Rec's bijection, built from its first batches.
    fn input(
        &self,
        data: Box<dyn crate::trainer::DataSource>,
    ) -> Result<Box<dyn crate::trainer::DataSource>, DlrmError> {
        if self.options.reorder_batches == 0 || self.tt_shapes().is_empty() {
            return Ok(data);
        }
        let tt: Vec<(usize, u64)> = self.tt_shapes().iter().map(|(t, s)| (*t, s.rows)).collect();
        Ok(Box::new(Reordered::new(
            data,
            self.options.reorder_batches,
            &tt,
        )?))
    }

    fn figures(&self) -> Vec<(String, f64)> {
        let (stored, dense) = self.bytes();
        let c = &self.counts;
        let b = c.batches.max(1) as f64;
        let mut pool = Vec::new();
        if let Some(p) = &self.pool {
            let q = &p.counts;
            let f = q.forwards.max(1) as f64;
            pool = vec![
                ("tt_pool_forward_ms".into(), q.forward_ns / f / 1e6),
                ("tt_pool_write_ms".into(), q.write_ns / f / 1e6),
                (
                    "tt_pool_compute_bound_share".into(),
                    q.compute_bound as f64 / (q.forwards - q.unbounded).max(1) as f64,
                ),
                (
                    "tt_pool_partial_sum_mb".into(),
                    q.out_bytes as f64 / f / 1e6,
                ),
                ("tt_pool_write_mb".into(), q.write_bytes as f64 / f / 1e6),
            ];
        }
        let mut v: Vec<(String, f64)> = vec![
            ("tt_tables".into(), self.tt_shapes().len() as f64),
            ("embedding_bytes".into(), stored as f64),
            ("dense_embedding_bytes".into(), dense as f64),
            ("compression".into(), dense as f64 / stored.max(1) as f64),
            (
                "lookups_per_prefix".into(),
                c.tt_lookups as f64 / c.prefixes.max(1) as f64,
            ),
            (
                "tt_forward_gflop_per_batch".into(),
                c.forward_flops as f64 / b / 1e9,
            ),
            (
                "tt_backward_gflop_per_batch".into(),
                c.backward_flops as f64 / b / 1e9,
            ),
        ];
        v.extend(pool);
        v
    }

    fn notes(&self) -> Vec<(String, String)> {
        let mut v = self.tt_notes();
        if let Some(p) = &self.pool {
            let q = &p.counts;
            let f = q.forwards.max(1) as f64;
            let (alu, ranks) = lock(&p.timer)
                .map(|t| {
                    (
                        format!("{} lanes at {} GHz", t.setup.alu_lanes, t.setup.alu_ghz),
                        t.setup.ranks,
                    )
                })
                .unwrap_or_default();
            v.push((
                "tt lookups on the pool".into(),
                format!(
                    "every rank a copy of the cores; {} of {} forwards compute-bound (the slowest rank's vector ALU, {alu}, outlasted its DRAM){}; {:.3} ms a forward on the pool, {:.3} MB of partial sums to the GPU; {:.3} ms to write the updated core slices into the {} ranks' copies ({:.3} MB in all)",
                    q.compute_bound,
                    q.forwards - q.unbounded,
                    if q.unbounded > 0 {
                        format!(", {} timed at a fixed bandwidth", q.unbounded)
                    } else {
                        String::new()
                    },
                    q.forward_ns / f / 1e6,
                    q.out_bytes as f64 / f / 1e6,
                    q.write_ns / f / 1e6,
                    ranks,
                    q.write_bytes as f64 / f / 1e6,
                ),
            ));
        }
        v.extend(self.scratch.notes());
        v
    }
}

impl Eltt {
    fn tt_notes(&self) -> Vec<(String, String)> {
        let (stored, dense) = self.bytes();
        let c = &self.counts;
        let b = c.batches.max(1) as f64;
        let shapes = self
            .tt_shapes()
            .iter()
            .map(|(t, s)| {
                format!(
                    "{t}: {}x{}x{} rows, {}x{}x{} dim",
                    s.row_factors[0],
                    s.row_factors[1],
                    s.row_factors[2],
                    s.dim_factors[0],
                    s.dim_factors[1],
                    s.dim_factors[2]
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        vec![
            (
                "tt".into(),
                format!(
                    "--tt-rank {} --tt-threshold {} ({} of {} tables as TT{}{})",
                    self.options.rank,
                    self.options.threshold,
                    self.tt_shapes().len(),
                    self.tables.len(),
                    if self.options.reuse { "" } else { ", no reuse" },
                    if self.options.reorder_batches > 0 {
                        format!(
                            ", rows reordered from the first {} batches",
                            self.options.reorder_batches
                        )
                    } else {
                        String::new()
                    }
                ),
            ),
            (
                "tt shapes".into(),
                if shapes.is_empty() {
                    "none".into()
                } else {
                    shapes
                },
            ),
            (
                "embedding footprint, MiB (dense / with tt)".into(),
                format!(
                    "{:.2} / {:.2} ({:.2}x smaller)",
                    dense as f64 / (1u64 << 20) as f64,
                    stored as f64 / (1u64 << 20) as f64,
                    dense as f64 / stored.max(1) as f64
                ),
            ),
            (
                "tt lookups per prefix product (reuse)".into(),
                format!("{:.2}", c.tt_lookups as f64 / c.prefixes.max(1) as f64),
            ),
            (
                "tt GFLOP per batch, forward / backward (modelled on the gpu)".into(),
                format!(
                    "{:.3} / {:.3}",
                    c.forward_flops as f64 / b / 1e9,
                    c.backward_flops as f64 / b / 1e9
                ),
            ),
        ]
    }
}

/// The training input with some tables' rows renamed by EL-Rec's
/// locality-based reordering (`nmpsim_kernels::tt::Reorder`), built from
/// the input's first batches, which are then trained as the others.
struct Reordered {
    inner: Box<dyn crate::trainer::DataSource>,
    /// The batches read to build the bijections, with the input's epoch then.
    head: std::collections::VecDeque<(Batch, u64)>,
    maps: Vec<(usize, nmpsim_kernels::tt::Reorder)>,
    epoch: u64,
}

impl Reordered {
    fn new(
        mut inner: Box<dyn crate::trainer::DataSource>,
        batches: usize,
        tables: &[(usize, u64)],
    ) -> Result<Self, DlrmError> {
        let mut head = std::collections::VecDeque::new();
        while head.len() < batches {
            match inner.next_batch() {
                Some(b) => head.push_back((b?, inner.epoch())),
                None => break,
            }
        }
        let mut maps = Vec::with_capacity(tables.len());
        for &(t, rows) in tables {
            let refs: Vec<&TableBatch> = head.iter().filter_map(|(b, _)| b.tables.get(t)).collect();
            let r = nmpsim_kernels::tt::Reorder::build(rows, &refs, 0.01)
                .map_err(|e| DlrmError::Config(format!("eltt's reordering of table {t}: {e}")))?;
            maps.push((t, r));
        }
        Ok(Reordered {
            inner,
            head,
            maps,
            epoch: 0,
        })
    }

    fn rename(&self, mut b: Batch) -> Result<Batch, DlrmError> {
        for (t, r) in &self.maps {
            if let Some(tb) = b.tables.get(*t) {
                let renamed = r.apply(tb).map_err(|e| e.in_table(*t))?;
                b.tables[*t] = renamed;
            }
        }
        Ok(b)
    }
}

impl crate::trainer::DataSource for Reordered {
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>> {
        let b = match self.head.pop_front() {
            Some((b, e)) => {
                self.epoch = e;
                b
            }
            None => match self.inner.next_batch()? {
                Ok(b) => {
                    self.epoch = self.inner.epoch();
                    b
                }
                Err(e) => return Some(Err(e)),
            },
        };
        Some(self.rename(b))
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn after_step(&mut self, rec: &crate::trainer::IterRecord) -> bool {
        self.inner.after_step(rec)
    }

    fn schedule_loss(&mut self, test_loss: Option<f64>) {
        self.inner.schedule_loss(test_loss)
    }
}

/// What bounded a pool timing, in words.
fn bound_text(pt: &PoolTime) -> &'static str {
    match (pt.compute_bound, pt.source) {
        (None, _) => "bound not simulated: a fixed bandwidth",
        (Some(true), Source::SimulatedProxy) => "compute-bound in the simulated batches",
        (Some(false), Source::SimulatedProxy) => "memory-bound in the simulated batches",
        (Some(true), _) => "compute-bound: the vector ALU is the limit",
        (Some(false), _) => "memory-bound",
    }
}

/// The factory of `eltt`.
pub(crate) fn build(
    ctx: &crate::strategy::BuildCtx,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    let mut s = Eltt::new(ctx.config, ctx.eltt, ctx.env.gpu.clone())?;
    s.scratch = Scratch::for_run(ctx)?;
    Ok(Box::new(s))
}

/// The factory of `eltt-nmp`.
pub(crate) fn build_nmp(
    ctx: &crate::strategy::BuildCtx,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    let timer = ctx.env.pool.clone().ok_or_else(|| {
        DlrmError::Config("eltt-nmp needs the run's NMP pool, and none was set up".into())
    })?;
    let mut s = Eltt::new(ctx.config, ctx.eltt, ctx.env.gpu.clone())?.on_pool(timer)?;
    s.scratch = Scratch::for_run(ctx)?;
    Ok(Box::new(s))
}
