//! Access counts per table row, for the statistics ([`crate::stats`]) and the
//! hot sets ([`crate::hot`]).
//!
//! Memory is bounded by the table: a dense u32 counter per row for tables up to
//! [`DENSE_COUNTER_MAX_ROWS`], as long as all dense counters together stay within
//! [`DENSE_COUNTERS_TOTAL`], and a hash map of touched rows beyond (a 2^32-row
//! hashed Criteo table would otherwise need 16 GiB, and 40 tables of 64 Mi rows
//! 10 GiB for a trace of a few lookups).

use std::collections::HashMap;

use crate::TraceError;

/// Tables up to this many rows get a dense counter array (256 MiB at the limit).
pub const DENSE_COUNTER_MAX_ROWS: u64 = 64 << 20;
/// Dense counters of all tables together (512 MiB); tables beyond count
/// sparsely.
pub const DENSE_COUNTERS_TOTAL: u64 = 128 << 20;

/// How one table's accesses are counted.
#[derive(Debug, Clone)]
pub(crate) enum Counts {
    /// Saturates at u32::MAX accesses per row, far beyond any trace we write.
    Dense(Vec<u32>),
    Sparse(HashMap<u32, u64>),
}

/// The access count of every row of one table of `rows` rows.
#[derive(Debug, Clone)]
pub struct RowCounts {
    rows: u64,
    pub(crate) counts: Counts,
}

impl RowCounts {
    /// Counters for tables of `rows` rows each: dense while they fit within
    /// `dense_limit` rows each and [`DENSE_COUNTERS_TOTAL`] in all, in table
    /// order, sparse beyond.
    pub(crate) fn for_tables(rows: &[u64], dense_limit: u64) -> Vec<RowCounts> {
        let mut left = DENSE_COUNTERS_TOTAL;
        rows.iter()
            .map(|&r| RowCounts {
                rows: r,
                counts: if r <= dense_limit && r <= left {
                    left -= r;
                    Counts::Dense(vec![0; r as usize])
                } else {
                    Counts::Sparse(HashMap::new())
                },
            })
            .collect()
    }

    /// Counters for tables of `rows` rows each: dense while they fit within
    /// [`DENSE_COUNTER_MAX_ROWS`] rows each and [`DENSE_COUNTERS_TOTAL`] in all,
    /// in table order, sparse beyond.
    pub fn new_for_tables(rows: &[u64]) -> Vec<RowCounts> {
        Self::for_tables(rows, DENSE_COUNTER_MAX_ROWS)
    }

    /// Rows of the table.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Counts one access to each of `rows` of table `table` (which names the
    /// table in an error: a row at or past the table's end).
    pub fn add(&mut self, table: usize, rows: &[u32]) -> Result<(), TraceError> {
        match &mut self.counts {
            Counts::Dense(c) => {
                for &r in rows {
                    let slot = c
                        .get_mut(r as usize)
                        .ok_or_else(|| out_of_range(table, r, self.rows))?;
                    *slot = slot.saturating_add(1);
                }
            }
            Counts::Sparse(m) => {
                for &r in rows {
                    if u64::from(r) >= self.rows {
                        return Err(out_of_range(table, r, self.rows));
                    }
                    *m.entry(r).or_insert(0) += 1;
                }
            }
        }
        Ok(())
    }

    /// The accesses counted for `row` (0 for a row past the table).
    pub fn get(&self, row: u32) -> u64 {
        match &self.counts {
            Counts::Dense(c) => c.get(row as usize).map_or(0, |&x| u64::from(x)),
            Counts::Sparse(m) => m.get(&row).copied().unwrap_or(0),
        }
    }

    /// The counts of the rows accessed at least once, in no particular order.
    pub fn touched_counts(&self) -> Vec<u64> {
        match &self.counts {
            Counts::Dense(c) => c
                .iter()
                .filter(|&&x| x > 0)
                .map(|&x| u64::from(x))
                .collect(),
            Counts::Sparse(m) => m.values().copied().collect(),
        }
    }

    /// The counts, consumed: those of the rows accessed at least once.
    pub(crate) fn into_touched_counts(self) -> Vec<u64> {
        match self.counts {
            Counts::Dense(c) => c.into_iter().filter(|&x| x > 0).map(u64::from).collect(),
            Counts::Sparse(m) => m.into_values().collect(),
        }
    }
}

pub(crate) fn out_of_range(table: usize, row: u32, rows: u64) -> TraceError {
    TraceError::InvalidBatch {
        table,
        what: format!("row {row} is at or past the table's {rows} rows"),
    }
}
