//! Embedding index batches for nmpsim.
//!
//! A [`Batch`] holds, per embedding table, the CSR bags of one mini-batch (as in
//! PyTorch's `EmbeddingBag`), plus optional dense features and labels. This crate
//! generates batches (seeded, deterministic), reads Criteo TSV, stores batches in a
//! versioned binary trace format, and computes access statistics.
//!
//! It deliberately knows nothing about what is done with the indices: no embedding
//! tables, no kernels, no DRAM.

pub mod batch;
mod error;

pub use batch::{Batch, Pairs, TableBatch};
pub use error::TraceError;
