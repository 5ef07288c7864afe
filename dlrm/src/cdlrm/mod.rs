//! cDLRM (`../shared/papers/cdlrm-lookahead-caching.txt`): the tables stay
//! in host memory, a prefetcher gathers the rows the next `n` batches need,
//! and the device holds a set-associative cache of each table.
//!
//! - [`cache`]: one table's cache: the geometry (`NextPrime(L)` sets of `w`
//!   ways, or the whole table direct-mapped), the occupancy table, pinned
//!   entries, random way selection, conflict victims, write-back;
//! - [`strategy`]: `cdlrm` and `cdlrm-nmp` in the trainer, reading their
//!   input a window ahead, with the prefetcher's stalls;
//! - [`pool`]: `cdlrm-nmp`'s gathers and write-backs timed on the NMP pool;
//! - [`window`]: the prefetcher, the caching step, the batches' working sets
//!   and the eviction process over a model's tables, coherent or in the
//!   paper's asynchronous order, with every count the reports need.

pub mod cache;
pub mod hostwork;
mod lookahead;
pub mod pool;
pub mod strategy;
pub mod window;

pub use cache::{
    DEFAULT_SETS, DEFAULT_WAYS, Geometry, Install, Move, Plan, TableCache, WriteBack, next_prime,
};
pub use strategy::{CachingTimes, Cdlrm};
pub use window::{
    CacheCounts, CachedTables, CdlrmOptions, Consistency, WindowTimes, Working, fetch_window,
    fetch_window_into, gather_rows_into, unique_rows_into,
};

use crate::DlrmError;
use crate::gpu::GpuPreset;
use crate::trainer::TrainConfig;

/// Bytes of the caches of `config`'s tables under `options`: every slot's
/// values and optimizer state.
pub fn cache_bytes(config: &TrainConfig, options: &CdlrmOptions) -> Result<u64, DlrmError> {
    let m = &config.model;
    let per_row = config.embedding_optimizer.state_values_per_row(m.dim);
    let mut bytes = 0u64;
    for &rows in &m.table_rows {
        let g = Geometry::for_table(rows, options.sets, options.ways)?;
        bytes = bytes.saturating_add(g.bytes(m.dim, per_row));
    }
    Ok(bytes)
}

/// Refuses caches the GPU preset's memory cannot hold.
pub fn check_device_memory(
    config: &TrainConfig,
    options: &CdlrmOptions,
    gpu: &GpuPreset,
) -> Result<(), DlrmError> {
    options.validate()?;
    let bytes = cache_bytes(config, options)?;
    if bytes as f64 > gpu.mem_bytes() {
        return Err(DlrmError::Config(format!(
            "cdlrm's caches need {:.2} GiB ({} tables, --cache-sets {} --ways {}), more than the {} GPU's {} GiB: lower --cache-sets or --ways",
            bytes as f64 / (1u64 << 30) as f64,
            config.model.table_rows.len(),
            options.sets,
            options.ways,
            gpu.name,
            gpu.memory_gib
        )));
    }
    Ok(())
}

/// Host bytes `cdlrm` takes beyond the model ([`TrainConfig::memory_bytes`]),
/// counted without overflow: the caches (held in this machine's memory,
/// standing for the GPU's) with their tags and pins (12 bytes a slot), a
/// write-back counter per table row (4 bytes), and the look-ahead: two
/// windows of batches read ahead, and one window's rows fetched (`bag`
/// lookups per bag at most).
pub fn extra_memory_bytes(config: &TrainConfig, options: &CdlrmOptions, bag: u64) -> u128 {
    let m = &config.model;
    let per_row = config.embedding_optimizer.state_values_per_row(m.dim) as u128;
    let mut slots = 0u128;
    for &rows in &m.table_rows {
        if let Ok(g) = Geometry::for_table(rows, options.sets, options.ways) {
            slots = slots.saturating_add(g.slots() as u128);
        }
    }
    let rows: u128 = m.table_rows.iter().map(|&r| r as u128).sum();
    let lookups = (m.table_rows.len() as u128)
        .saturating_mul(bag as u128)
        .saturating_mul(config.batch as u128)
        .saturating_mul(options.lookahead as u128);
    let caches = slots.saturating_mul((m.dim as u128 + per_row) * 4 + 12);
    // (Indices and offsets of two windows; a window's rows at most once
    // each, with their values and state.)
    let ahead = lookups.saturating_mul(2 * 8);
    let fetched = lookups
        .min(rows)
        .saturating_mul((m.dim as u128 + per_row) * 4 + 4);
    caches
        .saturating_add(rows.saturating_mul(4))
        .saturating_add(ahead)
        .saturating_add(fetched)
}

#[cfg(test)]
mod tests;
