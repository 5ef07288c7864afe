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

use std::time::Instant;

use nmpsim_kernels::tt::{TtCost, TtState, TtTable, tt_backward_update, tt_gather_reduce};
use nmpsim_kernels::{EmbeddingTable, OptimizerState, Pooling};
use nmpsim_traces::{Batch, TableBatch};
use serde::{Deserialize, Serialize};

use crate::DlrmError;
use crate::embedding::{EmbeddingStrategy, StepCtx};
use crate::gpu::GpuPreset;
use crate::hot::gpu_step::{self, Scratch};
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
        })
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
        "eltt".into()
    }

    fn placement(&self) -> Vec<(String, String)> {
        crate::embedding::places(&[
            ("tt-gather-reduce", "gpu"),
            ("tt-backward", "gpu"),
            ("gather-reduce", "gpu"),
            ("expand-coalesce", "gpu"),
            ("scatter", "gpu"),
        ])
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
            ctx.timeline.push(
                "tt-gather-reduce",
                if self.options.reuse {
                    "gpu (prefix products once per batch, then a product per lookup)"
                } else {
                    "gpu (every lookup's products, no reuse)"
                },
                Stage::ForwardEmbedding,
                MAIN,
                Resource::Gpu,
                Source::Modelled,
                self.tt_ns(&cost),
                cost.traffic.total_bytes(),
            );
        }
        if !self.dense_ids.is_empty() {
            let part = self.dense_part(batch);
            let out = gpu_step::forward(
                &self.dense,
                &part,
                self.pooling,
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
        for (t, (x, tb)) in self.tables.iter_mut().zip(&batch.tables).enumerate() {
            if let Table::Tt(x) = x {
                let (tt, state) = &mut **x;
                cost = cost
                    + tt_backward_update(tt, state, tb, &dpooled[t], self.pooling, &optimizer)
                        .map_err(|e| e.in_table(t))?;
            }
        }
        ctx.host
            .add("tt-backward (modelled gpu's numbers)", ns_since(t0));
        if cost.flops > 0 {
            self.counts.backward_flops += cost.flops;
            ctx.timeline.push(
                "tt-backward",
                "gpu (gradients aggregated per unique row, chain rule per unique row and prefix, update fused)",
                Stage::BackwardEmbedding,
                MAIN,
                Resource::Gpu,
                Source::Modelled,
                self.tt_ns(&cost),
                cost.traffic.total_bytes(),
            );
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
        vec![
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
        ]
    }

    fn notes(&self) -> Vec<(String, String)> {
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

/// The factory of `eltt`.
pub(crate) fn build(
    ctx: &crate::strategy::BuildCtx,
) -> Result<Box<dyn EmbeddingStrategy>, DlrmError> {
    Ok(Box::new(Eltt::new(
        ctx.config,
        ctx.eltt,
        ctx.env.gpu.clone(),
    )?))
}
