//! Tensor-train embedding tables (EL-Rec's Eff-TT, `el-rec-tensor-train.txt`):
//! a large table stored as three small cores, a row computed from them as
//! a chain of small products.
//!
//! - [`shape`]: the factors of the rows and the dimension, the TT ranks, the
//!   split of a row id into TT indices (Eq. 3), sizes and FLOPs;
//! - [`table`]: the cores, their initialisation, a row from its cores;
//! - [`forward`]: the gather-reduce over a TT table, with batch-level reuse
//!   of the prefix products or without;
//! - [`backward`]: the core gradients aggregated in advance per unique row,
//!   the fused update, and the plain per-lookup backward;
//! - [`bench`](mod@bench): the forward's wall-clock times on this machine, with and
//!   without reuse, beside the dense gather-reduce;
//! - [`check`]: `kernels check`'s verdicts of these primitives against an
//!   f64 reference;
//! - [`reorder`]: the locality-based index reordering (hot rows first, then
//!   co-occurrence groups), a bijection over row ids.

pub mod backward;
pub mod bench;
pub mod check;
pub mod forward;
mod matmul;
pub mod reorder;
pub mod shape;
pub mod table;

#[cfg(test)]
mod tests;

pub use backward::{
    TtGrads, TtState, tt_backward_update, tt_core_grads, tt_core_grads_per_lookup, tt_update,
};
pub use forward::{TtCost, tt_gather_reduce};
pub use reorder::Reorder;
pub use shape::{CORES, TtShape, dim_factors, suggest_row_factors};
pub use table::TtTable;
