//! The embedding primitives of a mini-batch the GPU trains on its own copy
//! of the hot rows: the numbers computed here with the CPU kernels (exactly
//! what the GPU's would give), the times modelled from the GPU preset's
//! memory bandwidth on the Fig. 6 byte accounting of each primitive.

use std::time::Instant;

use nmpsim_kernels::{
    Coalesced, EmbeddingTable, Expanded, Optimizer, OptimizerState, Pooling, coalesce_into,
    expand_into, gather_reduce, scatter_update,
};
use nmpsim_traces::Batch;

use crate::DlrmError;
use crate::embedding::StepCtx;
use crate::gpu::GpuPreset;
use crate::timeline::{MAIN, Resource, Source, Stage};

/// Reusable buffers of the backward pass.
#[derive(Default)]
pub(crate) struct Scratch {
    pub expanded: Vec<Expanded>,
    pub coalesced: Vec<Coalesced>,
}

impl Scratch {
    fn fit(&mut self, tables: usize, dim: usize) {
        while self.expanded.len() < tables {
            self.expanded.push(Expanded {
                src: Vec::new(),
                dim,
                grads: Vec::new(),
            });
            self.coalesced.push(Coalesced {
                rows: Vec::new(),
                dim,
                grads: Vec::new(),
            });
        }
    }
}

/// Bytes of a batch's sparse input (offsets, indices, weights).
pub(crate) fn index_bytes(batch: &Batch) -> u64 {
    batch
        .tables
        .iter()
        .map(|tb| {
            4 * (tb.offsets.len() + tb.indices.len()) as u64
                + tb.weights.as_ref().map_or(0, |w| 4 * w.len() as u64)
        })
        .sum()
}

fn ns_since(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64
}

/// Gather-reduce of `rb` (indices already the rows of `tables`) on the GPU.
pub(crate) fn forward(
    tables: &[EmbeddingTable],
    rb: &Batch,
    pooling: Pooling,
    gpu: &GpuPreset,
    detail: &str,
    ctx: &mut StepCtx,
) -> Result<Vec<Vec<f32>>, DlrmError> {
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let mut pooled = Vec::with_capacity(tables.len());
    for (t, (tb, table)) in rb.tables.iter().zip(tables).enumerate() {
        let (o, tr) = gather_reduce(table, tb, pooling).map_err(|e| e.in_table(t))?;
        bytes += tr.total_bytes();
        pooled.push(o);
    }
    ctx.host
        .add("gather-reduce (modelled gpu's numbers)", ns_since(t0));
    ctx.timeline.push(
        "gather-reduce",
        detail,
        Stage::ForwardEmbedding,
        MAIN,
        Resource::Gpu,
        Source::Modelled,
        gpu.stream_ns(bytes as f64),
        bytes,
    );
    Ok(pooled)
}

/// Expand and coalesce of `rb`'s gradients on the GPU, into `scratch`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn coalesce(
    rb: &Batch,
    dpooled: &[Vec<f32>],
    pooling: Pooling,
    dim: usize,
    scratch: &mut Scratch,
    gpu: &GpuPreset,
    detail: &str,
    ctx: &mut StepCtx,
) -> Result<(), DlrmError> {
    scratch.fit(rb.tables.len(), dim);
    let t0 = Instant::now();
    let mut coal_bytes = 0u64;
    for (t, tb) in rb.tables.iter().enumerate() {
        let te = expand_into(&dpooled[t], dim, tb, pooling, &mut scratch.expanded[t])
            .map_err(|e| e.in_table(t))?;
        let tc = coalesce_into(&scratch.expanded[t], tb.num_rows, &mut scratch.coalesced[t])
            .map_err(|e| e.in_table(t))?;
        coal_bytes += te.total_bytes() + tc.total().total_bytes();
    }
    ctx.host
        .add("expand-coalesce (modelled gpu's numbers)", ns_since(t0));
    ctx.timeline.push(
        "expand-coalesce",
        detail,
        Stage::BackwardEmbedding,
        MAIN,
        Resource::Gpu,
        Source::Modelled,
        gpu.stream_ns(coal_bytes as f64),
        coal_bytes,
    );
    Ok(())
}

/// Expand, coalesce and the optimizer's scatter of `rb`'s gradients into
/// `tables` on the GPU.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward(
    tables: &mut [EmbeddingTable],
    states: &mut [OptimizerState],
    rb: &Batch,
    dpooled: &[Vec<f32>],
    pooling: Pooling,
    optimizer: &Optimizer,
    scratch: &mut Scratch,
    gpu: &GpuPreset,
    detail: &str,
    ctx: &mut StepCtx,
) -> Result<(), DlrmError> {
    let dim = tables.first().map_or(1, |t| t.dim);
    coalesce(rb, dpooled, pooling, dim, scratch, gpu, detail, ctx)?;
    let t0 = Instant::now();
    let mut scatter_bytes = 0u64;
    for (t, ((table, state), c)) in tables
        .iter_mut()
        .zip(states.iter_mut())
        .zip(&scratch.coalesced)
        .enumerate()
    {
        scatter_bytes += scatter_update(table, state, c, optimizer)
            .map_err(|e| e.in_table(t))?
            .total_bytes();
    }
    ctx.host
        .add("scatter (modelled gpu's numbers)", ns_since(t0));
    ctx.timeline.push(
        "scatter",
        detail,
        Stage::BackwardEmbedding,
        MAIN,
        Resource::Gpu,
        Source::Modelled,
        gpu.stream_ns(scatter_bytes as f64),
        scatter_bytes,
    );
    Ok(())
}

/// The sparse input of a mini-batch trained on the GPU goes there first.
pub(crate) fn push_indices(batch: &Batch, gpu: &GpuPreset, ctx: &mut StepCtx) {
    let bytes = index_bytes(batch);
    ctx.timeline.push(
        "transfer",
        "indices host to gpu",
        Stage::ForwardTransfer,
        MAIN,
        Resource::HostLink,
        Source::Modelled,
        gpu.host_transfer_ns(bytes),
        bytes,
    );
}
