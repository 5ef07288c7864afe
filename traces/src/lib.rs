//! Embedding index batches for nmpsim.
//!
//! A [`Batch`] holds, per embedding table, the CSR bags of one mini-batch (as in
//! PyTorch's `EmbeddingBag`), plus optional dense features and labels. This crate
//! generates batches (seeded, deterministic: [`Generator`], named [`profiles`]),
//! reads Criteo TSV ([`criteo`]), stores batches in a versioned, checksummed binary
//! trace format ([`format`](mod@format)), and computes access statistics ([`stats`]).
//!
//! It deliberately knows nothing about what is done with the indices: no embedding
//! tables, no kernels, no DRAM.
//!
//! `gen` is a reserved word in Rust 2024, so the generator module is `r#gen`; use
//! the re-exports at the crate root instead.

pub mod batch;
pub mod cleanup;
pub mod counts;
pub mod criteo;
mod error;
pub mod format;
pub mod r#gen;
pub mod hot;
pub mod npy;
pub mod profiles;
pub mod rng;
pub mod staged;
pub mod stats;
pub mod text_table;
pub mod threads;

pub use batch::{Batch, Pairs, TableBatch};
pub use criteo::{CriteoBatcher, CriteoOptions, CriteoReader, CriteoSample};
pub use error::TraceError;
pub use format::{TraceHeader, TraceReader, TraceWriter, write_csv};
pub use r#gen::{
    BagSize, Distribution, GenSpec, Generator, TableSpec, generate_table_batch, zipf_pmf,
};
pub use profiles::{ProfileInfo, ProfileOverrides, list_profiles, profile};
pub use rng::Rng;
pub use stats::{StatsBuilder, TableStats, TraceStats, expected_unique_rows};
pub use text_table::TextTable;

/// The 1-based line of byte `offset` in `text`: where a parser's span (a
/// TOML file's key, say) points, for an error that names the line.
pub fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
