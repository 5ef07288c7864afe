//! The embedding primitives of a mini-batch the GPU trains on its own copy
//! of the hot rows: the numbers computed here with the CPU kernels (exactly
//! what the GPU's would give), the times modelled from the GPU preset's
//! memory bandwidth on the Fig. 6 byte accounting of each primitive, or,
//! with a real GPU (`--device cuda`, [`Scratch::for_run`]), measured: the
//! same primitives run there as CUDA kernels on the same inputs, checked
//! against the CPU's numbers (`gpu_cuda`).

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

/// Reusable buffers of the backward pass, and the real GPU the primitives
/// run on when the run has one.
#[derive(Default)]
pub(crate) struct Scratch {
    pub expanded: Vec<Expanded>,
    pub coalesced: Vec<Coalesced>,
    cuda: Option<Device>,
}

/// The real GPU of a run.
#[cfg(feature = "cuda")]
pub(crate) type Device = super::gpu_cuda::CudaStep;
/// Without the `cuda` feature there is none.
#[cfg(not(feature = "cuda"))]
pub(crate) type Device = NoDevice;

/// No GPU: the type of the device a build without `cuda` never has.
#[cfg(not(feature = "cuda"))]
pub(crate) enum NoDevice {}

#[cfg(not(feature = "cuda"))]
impl NoDevice {
    fn forward(
        &mut self,
        _: &[EmbeddingTable],
        _: &Batch,
        _: Pooling,
        _: &[Vec<f32>],
    ) -> Result<f64, DlrmError> {
        match *self {}
    }
    fn coalesce(
        &mut self,
        _: &Batch,
        _: &[Vec<f32>],
        _: Pooling,
        _: usize,
        _: &[Coalesced],
    ) -> Result<f64, DlrmError> {
        match *self {}
    }
    fn before_scatter(
        &mut self,
        _: &[EmbeddingTable],
        _: &[OptimizerState],
    ) -> Result<(), DlrmError> {
        match *self {}
    }
    fn scatter(
        &mut self,
        _: &[EmbeddingTable],
        _: &[Coalesced],
        _: &Optimizer,
    ) -> Result<f64, DlrmError> {
        match *self {}
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tt_forward(
        &mut self,
        _: usize,
        _: &nmpsim_kernels::tt::TtTable,
        _: &nmpsim_kernels::tt::TtState,
        _: &nmpsim_traces::TableBatch,
        _: Pooling,
        _: bool,
        _: &[f32],
    ) -> Result<f64, DlrmError> {
        match *self {}
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tt_backward(
        &mut self,
        _: usize,
        _: &nmpsim_kernels::tt::TtTable,
        _: &nmpsim_kernels::tt::TtState,
        _: &nmpsim_traces::TableBatch,
        _: &[f32],
        _: Pooling,
        _: &Optimizer,
    ) -> Result<f64, DlrmError> {
        match *self {}
    }
    pub(crate) fn tt_after_update(
        &mut self,
        _: usize,
        _: &nmpsim_kernels::tt::TtTable,
    ) -> Result<(), DlrmError> {
        match *self {}
    }
}

/// The primitive's time: measured on the real GPU when there is one
/// (`cuda` gives its nanoseconds), else modelled on `bytes`.
fn gpu_time(
    measured: Option<f64>,
    gpu: &GpuPreset,
    bytes: u64,
    detail: &str,
) -> (Source, f64, String) {
    measured_or_modelled(measured, || gpu.stream_ns(bytes as f64), detail)
}

/// A GPU primitive's timeline source, time and detail: `measured` on the
/// real GPU when there is one (the detail then ends `, cuda`), else the
/// model's `modelled()` nanoseconds.
pub(crate) fn measured_or_modelled(
    measured: Option<f64>,
    modelled: impl FnOnce() -> f64,
    detail: &str,
) -> (Source, f64, String) {
    match measured {
        Some(ns) => (Source::Measured, ns, format!("{detail}, cuda")),
        None => (Source::Modelled, modelled(), detail.into()),
    }
}

impl Scratch {
    /// Buffers for a strategy of `ctx`'s run, its GPU-placed primitives
    /// run on the run's real GPU where it has one.
    pub fn for_run(
        #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] ctx: &crate::strategy::BuildCtx,
    ) -> Result<Self, DlrmError> {
        #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
        let mut s = Scratch::default();
        #[cfg(feature = "cuda")]
        if let Some(d) = &ctx.device {
            s.cuda = Some(super::gpu_cuda::CudaStep::new(d.clone())?);
        }
        Ok(s)
    }

    /// The real GPU, for [`scatter`].
    pub fn device(&mut self) -> Option<&mut Device> {
        self.cuda.as_mut()
    }

    /// The notes of the real GPU's runs (none without one).
    pub fn notes(&self) -> Vec<(String, String)> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            let k = &c.check;
            let mut v = vec![
                ("cuda primitive calls".to_string(), k.calls.to_string()),
                ("cuda kernel ms".to_string(), format!("{:.3}", k.kernel_ms)),
                (
                    "cuda vs cpu: pooled rows".to_string(),
                    format!("{:.2e}", k.forward_err),
                ),
                (
                    "cuda vs cpu: coalesced gradients".to_string(),
                    format!("{:.2e}", k.coalesce_err),
                ),
            ];
            if let Some(e) = k.scatter_err {
                v.push(("cuda vs cpu: first scatter".to_string(), format!("{e:.2e}")));
            }
            if k.tt_calls > 0 {
                v.push(("cuda TT calls".to_string(), k.tt_calls.to_string()));
                v.push((
                    "cuda vs cpu: TT pooled rows".to_string(),
                    format!("{:.2e}", k.tt_forward_err),
                ));
                if let Some(e) = k.tt_update_err {
                    v.push((
                        "cuda vs cpu: TT cores after the first update".to_string(),
                        format!("{e:.2e}"),
                    ));
                }
            }
            return v;
        }
        Vec::new()
    }

    fn fit(&mut self, tables: usize, dim: usize) {
        while self.expanded.len() < tables {
            self.expanded.push(Expanded::empty(dim));
            self.coalesced.push(Coalesced::empty(dim));
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
    scratch: &mut Scratch,
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
    let measured = match scratch.cuda.as_mut() {
        Some(c) => Some(c.forward(tables, rb, pooling, &pooled)?),
        None => None,
    };
    let (source, ns, detail) = gpu_time(measured, gpu, bytes, detail);
    ctx.timeline.push(
        "gather-reduce",
        detail,
        Stage::ForwardEmbedding,
        MAIN,
        Resource::Gpu,
        source,
        ns,
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
    let measured = match scratch.cuda.as_mut() {
        Some(c) => {
            let n = rb.tables.len();
            Some(c.coalesce(rb, dpooled, pooling, dim, &scratch.coalesced[..n])?)
        }
        None => None,
    };
    let (source, ns, detail) = gpu_time(measured, gpu, coal_bytes, detail);
    ctx.timeline.push(
        "expand-coalesce",
        detail,
        Stage::BackwardEmbedding,
        MAIN,
        Resource::Gpu,
        source,
        ns,
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
    let n = rb.tables.len();
    let Scratch {
        coalesced, cuda, ..
    } = scratch;
    scatter(
        tables,
        states,
        &coalesced[..n],
        optimizer,
        cuda.as_mut(),
        gpu,
        detail,
        ctx,
    )
}

/// The optimizer's scatter of `coalesced` (one per table) into `tables` on
/// the GPU.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    tables: &mut [EmbeddingTable],
    states: &mut [OptimizerState],
    coalesced: &[Coalesced],
    optimizer: &Optimizer,
    mut cuda: Option<&mut Device>,
    gpu: &GpuPreset,
    detail: &str,
    ctx: &mut StepCtx,
) -> Result<(), DlrmError> {
    if let Some(c) = cuda.as_deref_mut() {
        c.before_scatter(tables, states)?;
    }
    let t0 = Instant::now();
    let mut scatter_bytes = 0u64;
    for (t, ((table, state), c)) in tables
        .iter_mut()
        .zip(states.iter_mut())
        .zip(coalesced)
        .enumerate()
    {
        scatter_bytes += scatter_update(table, state, c, optimizer)
            .map_err(|e| e.in_table(t))?
            .total_bytes();
    }
    ctx.host
        .add("scatter (modelled gpu's numbers)", ns_since(t0));
    let measured = match cuda {
        Some(c) => Some(c.scatter(tables, coalesced, optimizer)?),
        None => None,
    };
    let (source, ns, detail) = gpu_time(measured, gpu, scatter_bytes, detail);
    ctx.timeline.push(
        "scatter",
        detail,
        Stage::BackwardEmbedding,
        MAIN,
        Resource::Gpu,
        source,
        ns,
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
