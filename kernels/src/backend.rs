//! [`Backend`]: one implementation of every embedding primitive, the seam a
//! further implementation plugs into (the CUDA backend, `cuda::CudaBackend`,
//! next to [`CpuBackend`]); [`ReferenceBackend`] is the scalar f64 one every
//! backend is checked against ([`crate::check`]).

use nmpsim_traces::TableBatch;

use crate::cast::Casted;
use crate::coalesce::{CoalesceTraffic, Coalesced};
use crate::error::KernelError;
use crate::gather::Expanded;
use crate::optimizer::{Optimizer, OptimizerState};
use crate::pooling::Pooling;
use crate::table::EmbeddingTable;
use crate::traffic::Traffic;
use crate::tt::{TtGrads, TtTable};

/// One implementation of every embedding primitive. Signatures and semantics
/// are those of the crate's free functions of the same names.
pub trait Backend: Sync {
    fn name(&self) -> &str;
    fn gather_reduce(
        &self,
        table: &EmbeddingTable,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Vec<f32>, Traffic), KernelError>;
    fn expand(
        &self,
        grad_out: &[f32],
        dim: usize,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Expanded, Traffic), KernelError>;
    fn coalesce(
        &self,
        expanded: &Expanded,
        num_rows: u64,
    ) -> Result<(Coalesced, CoalesceTraffic), KernelError>;
    fn tensor_cast(
        &self,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Casted, Traffic), KernelError>;
    fn casted_gather_reduce(
        &self,
        casted: &Casted,
        grad_out: &[f32],
        dim: usize,
    ) -> Result<(Coalesced, Traffic), KernelError>;
    fn scatter_update(
        &self,
        table: &mut EmbeddingTable,
        state: &mut OptimizerState,
        grads: &Coalesced,
        optimizer: &Optimizer,
    ) -> Result<Traffic, KernelError>;

    /// Whether the backend has TT primitives of its own
    /// ([`Backend::tt_gather_reduce`], [`Backend::tt_core_grads`]); by
    /// default they are the crate's CPU functions, checked as `cpu-tt`.
    fn runs_tt(&self) -> bool {
        false
    }
    /// [`crate::tt::tt_gather_reduce`] on this backend (with `reuse`).
    fn tt_gather_reduce(
        &self,
        table: &TtTable,
        batch: &TableBatch,
        pooling: Pooling,
        reuse: bool,
    ) -> Result<Vec<f32>, KernelError> {
        crate::tt::tt_gather_reduce(table, batch, pooling, reuse).map(|(o, _)| o)
    }
    /// [`crate::tt::tt_core_grads`] on this backend.
    fn tt_core_grads(
        &self,
        table: &TtTable,
        batch: &TableBatch,
        grad_out: &[f32],
        pooling: Pooling,
    ) -> Result<TtGrads, KernelError> {
        crate::tt::tt_core_grads(table, batch, grad_out, pooling).map(|(o, _)| o)
    }
}

/// The crate's parallel CPU kernels.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuBackend;

/// The scalar f64 kernels of [`crate::reference`].
#[derive(Debug, Default, Clone, Copy)]
pub struct ReferenceBackend;

macro_rules! forward_backend {
    ($ty:ty, $name:literal, $($m:ident)::+) => {
        impl Backend for $ty {
            fn name(&self) -> &str {
                $name
            }
            fn gather_reduce(
                &self,
                t: &EmbeddingTable,
                b: &TableBatch,
                p: Pooling,
            ) -> Result<(Vec<f32>, Traffic), KernelError> {
                $($m)::+::gather_reduce(t, b, p)
            }
            fn expand(
                &self,
                g: &[f32],
                dim: usize,
                b: &TableBatch,
                p: Pooling,
            ) -> Result<(Expanded, Traffic), KernelError> {
                $($m)::+::expand(g, dim, b, p)
            }
            fn coalesce(
                &self,
                e: &Expanded,
                rows: u64,
            ) -> Result<(Coalesced, CoalesceTraffic), KernelError> {
                $($m)::+::coalesce(e, rows)
            }
            fn tensor_cast(
                &self,
                b: &TableBatch,
                p: Pooling,
            ) -> Result<(Casted, Traffic), KernelError> {
                $($m)::+::tensor_cast(b, p)
            }
            fn casted_gather_reduce(
                &self,
                c: &Casted,
                g: &[f32],
                dim: usize,
            ) -> Result<(Coalesced, Traffic), KernelError> {
                $($m)::+::casted_gather_reduce(c, g, dim)
            }
            fn scatter_update(
                &self,
                t: &mut EmbeddingTable,
                s: &mut OptimizerState,
                g: &Coalesced,
                o: &Optimizer,
            ) -> Result<Traffic, KernelError> {
                $($m)::+::scatter_update(t, s, g, o)
            }
        }
    };
}

forward_backend!(CpuBackend, "cpu", crate);
forward_backend!(ReferenceBackend, "reference", crate::reference);
