//! EL-Rec's locality-based index reordering (Sec. IV-B, Algorithm 2): a
//! bijection over a table's row ids, computed offline from the training
//! batches, that puts rows looked up together at nearby ids, so that a
//! batch's rows share more TT prefixes (more reuse) and the cores' slices.
//! The tables are trained from a random initialisation in which every row
//! is alike, so renaming rows changes nothing but locality.
//!
//! - The hot rows (the `hot_ratio` most frequently looked-up share of the
//!   table's rows) come first, by frequency (the most frequent at 0), as
//!   Algorithm 2 keeps them.
//! - The other rows looked up follow in co-occurrence groups: batch by
//!   batch, a batch's rows not yet placed take the next ids together. The
//!   paper detects communities in the graph of rows that share a batch;
//!   placing each batch's new rows together is a one-pass stand-in for
//!   that (each group is a clique of that graph), and what this module does.
//! - Rows never looked up take the remaining ids in their own order.

use nmpsim_traces::TableBatch;
use serde::Serialize;

use crate::KernelError;

/// A bijection over row ids: row `old` becomes `new_of_old[old]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reorder {
    pub new_of_old: Vec<u32>,
    /// Rows placed as hot.
    pub hot: u64,
}

impl Reorder {
    /// The identity over `rows` rows.
    pub fn identity(rows: u64) -> Self {
        Reorder {
            new_of_old: (0..rows as u32).collect(),
            hot: 0,
        }
    }

    /// The reordering of a table of `rows` rows from `batches` (its batches
    /// of the training input, in order).
    pub fn build(rows: u64, batches: &[&TableBatch], hot_ratio: f64) -> Result<Self, KernelError> {
        if !(0.0..=1.0).contains(&hot_ratio) {
            return Err(KernelError::invalid(
                "hot_ratio",
                format!("{hot_ratio}: expected a share of the rows, 0 to 1"),
            ));
        }
        if rows > u32::MAX as u64 {
            return Err(KernelError::invalid(
                "rows",
                format!("{rows} rows: row ids are u32"),
            ));
        }
        let mut count = vec![0u64; rows as usize];
        for (k, b) in batches.iter().enumerate() {
            if let Some((i, &r)) = b
                .indices
                .iter()
                .enumerate()
                .find(|(_, r)| **r as u64 >= rows)
            {
                return Err(KernelError::invalid(
                    "batches",
                    format!("batch {k}: index {i} is row {r}, past the table's {rows} rows"),
                ));
            }
            for &r in &b.indices {
                count[r as usize] += 1;
            }
        }
        const NONE: u32 = u32::MAX;
        let mut new_of_old = vec![NONE; rows as usize];
        let mut by_freq: Vec<u32> = (0..rows as u32)
            .filter(|&r| count[r as usize] > 0)
            .collect();
        by_freq.sort_by(|&a, &b| count[b as usize].cmp(&count[a as usize]).then(a.cmp(&b)));
        let hot = ((rows as f64 * hot_ratio).ceil() as usize).min(by_freq.len());
        let mut next = 0u32;
        for &r in &by_freq[..hot] {
            new_of_old[r as usize] = next;
            next += 1;
        }
        for b in batches {
            for &r in &b.indices {
                if new_of_old[r as usize] == NONE {
                    new_of_old[r as usize] = next;
                    next += 1;
                }
            }
        }
        for slot in new_of_old.iter_mut().filter(|s| **s == NONE) {
            *slot = next;
            next += 1;
        }
        Ok(Reorder {
            new_of_old,
            hot: hot as u64,
        })
    }

    /// Row ids by new id: the inverse.
    pub fn old_of_new(&self) -> Vec<u32> {
        let mut inv = vec![0u32; self.new_of_old.len()];
        for (old, &new) in self.new_of_old.iter().enumerate() {
            inv[new as usize] = old as u32;
        }
        inv
    }

    /// Whether every id is taken exactly once.
    pub fn is_bijection(&self) -> bool {
        let mut seen = vec![false; self.new_of_old.len()];
        self.new_of_old.iter().all(|&n| {
            let fresh = (n as usize) < seen.len() && !seen[n as usize];
            if fresh {
                seen[n as usize] = true;
            }
            fresh
        })
    }

    /// `batch` with its rows renamed.
    pub fn apply(&self, batch: &TableBatch) -> Result<TableBatch, KernelError> {
        let rows = self.new_of_old.len() as u64;
        if batch.num_rows != rows {
            return Err(KernelError::shape(
                "batch.num_rows",
                batch.num_rows,
                format!("the reordering's {rows} rows"),
            ));
        }
        let mut indices = Vec::with_capacity(batch.indices.len());
        for (i, &r) in batch.indices.iter().enumerate() {
            let n = self
                .new_of_old
                .get(r as usize)
                .ok_or(KernelError::IndexOutOfRange {
                    arg: "batch.indices",
                    position: i,
                    value: r as u64,
                    bound: rows,
                })?;
            indices.push(*n);
        }
        Ok(TableBatch {
            indices,
            ..batch.clone()
        })
    }
}
