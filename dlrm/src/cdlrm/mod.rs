//! cDLRM (`../shared/papers/cdlrm-lookahead-caching.txt`): the tables stay
//! in host memory, a prefetcher gathers the rows the next `n` batches need,
//! and the device holds a set-associative cache of each table.
//!
//! - [`cache`]: one table's cache: the geometry (`NextPrime(L)` sets of `w`
//!   ways, or the whole table direct-mapped), the occupancy table, pinned
//!   entries, random way selection, conflict victims, write-back;
//! - [`window`]: the prefetcher, the caching step, the batches' working sets
//!   and the eviction process over a model's tables, coherent or in the
//!   paper's asynchronous order, with every count the reports need.

pub mod cache;
pub mod window;

pub use cache::{DEFAULT_SETS, DEFAULT_WAYS, Geometry, Install, TableCache, WriteBack, next_prime};
pub use window::{CacheCounts, CachedTables, CdlrmOptions, Consistency, Working};

#[cfg(test)]
mod tests;
