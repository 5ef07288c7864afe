//! `nmpsim-kernels`: the embedding-layer primitives of DLRM training,
//! functional and exact, each reporting the memory traffic it implies.
//!
//! - [`gather_reduce`]: forward pooling (`EmbeddingBag`), sum / mean / weighted sum.
//! - [`expand`] + [`coalesce`](fn@coalesce): the baseline backward (the paper's Alg. 1).
//! - [`tensor_cast`] + [`casted_gather_reduce`]: Tensor Casting (Alg. 2 and 3),
//!   the same coalesced gradients with half the memory traffic.
//! - [`scatter_update`]: applies coalesced gradients with an [`Optimizer`]
//!   (SGD, Adagrad, row-wise Adagrad, RMSprop), lazily.
//! - [`backend`]: the [`backend::Backend`] trait (every primitive), the CPU
//!   backend and the scalar f64 [`backend::ReferenceBackend`].
//! - [`check`]: the equivalence check of any backend against the reference.
//!
//! Every primitive returns its result and its [`Traffic`]: the bytes the
//! processor loads and stores, derived analytically from the algorithm (the
//! paper's Fig. 6 method, formulas in `docs/kernels.md`), never measured.
//! CPU kernels use rayon and give bit-identical results for any thread count.
//!
//! What this crate is not: it knows no DRAM timing, no NMP hardware and no
//! training loop; it does not generate traces except inside [`check`], and it
//! measures time only in [`bench`](mod@bench) (CPU wall clock) and `cuda::bench` (CUDA events).

pub mod backend;
pub mod bench;
pub mod cast;
pub mod check;
pub mod coalesce;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
pub mod gather;
pub mod optimizer;
pub mod pooling;
pub mod radix;
pub mod reference;
mod shared;
pub mod table;
pub mod traffic;
pub mod tt;
mod vecops;

#[cfg(test)]
mod tests;

pub use cast::{Casted, casted_gather_reduce, casted_gather_reduce_into, tensor_cast};
pub use coalesce::{CoalesceTraffic, Coalesced, coalesce, coalesce_into};
pub use error::KernelError;
pub use gather::{Expanded, expand, expand_into, gather_reduce, gather_reduce_into};
pub use optimizer::{Optimizer, OptimizerKind, OptimizerState, scatter_update};
pub use pooling::Pooling;
pub use table::EmbeddingTable;
pub use traffic::Traffic;
