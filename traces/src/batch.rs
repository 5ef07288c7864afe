//! The batch data model: per table, CSR bags as in PyTorch's `EmbeddingBag`.

use serde::{Deserialize, Serialize};

use crate::TraceError;

/// One table's lookups for one mini-batch, in CSR form.
///
/// Bag `b` (sample `b` of the batch) gathers rows
/// `indices[offsets[b] as usize..offsets[b + 1] as usize]` of a table that has
/// `num_rows` rows. `offsets` has `B + 1` entries, starts at 0, never decreases
/// and ends at `indices.len()`. `weights`, when present, holds one per-sample
/// weight per index (weighted-sum pooling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableBatch {
    /// Row count of the table these indices address.
    pub num_rows: u64,
    /// CSR bag boundaries, `B + 1` entries.
    pub offsets: Vec<u32>,
    /// Row ids, `offsets[B]` entries, each `< num_rows`.
    pub indices: Vec<u32>,
    /// Optional per-index weights, same length as `indices`.
    pub weights: Option<Vec<f32>>,
}

/// The paper's (src, dst) index-array view of a [`TableBatch`]: lookup `i`
/// reads table row `src[i]` and reduces into output bag `dst[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pairs {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
}

impl TableBatch {
    /// Builds a batch and checks it (see [`TableBatch::validate`]).
    pub fn new(
        num_rows: u64,
        offsets: Vec<u32>,
        indices: Vec<u32>,
        weights: Option<Vec<f32>>,
    ) -> Result<Self, TraceError> {
        let tb = TableBatch {
            num_rows,
            offsets,
            indices,
            weights,
        };
        tb.validate()?;
        Ok(tb)
    }

    /// Number of bags (samples), `B`.
    pub fn batch_size(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Number of lookups, `n = offsets[B]`.
    pub fn num_lookups(&self) -> usize {
        self.indices.len()
    }

    /// Row ids of bag `b`. Panics if `b >= batch_size()`; call on validated batches.
    pub fn bag(&self, b: usize) -> &[u32] {
        &self.indices[self.offsets[b] as usize..self.offsets[b + 1] as usize]
    }

    /// Weights of bag `b`, if the batch is weighted.
    pub fn bag_weights(&self, b: usize) -> Option<&[f32]> {
        self.weights
            .as_ref()
            .map(|w| &w[self.offsets[b] as usize..self.offsets[b + 1] as usize])
    }

    /// Checks every structural rule; the error names the rule, the position and
    /// what was expected. `table` is only used in messages.
    pub fn validate_named(&self, table: usize) -> Result<(), TraceError> {
        self.validate_shape_named(table)?;
        self.validate_rows_named(table)
    }

    /// The rules on offsets and weights, without the scan of every index
    /// against `num_rows` ([`TableBatch::validate_rows_named`]): for a kernel
    /// that checks each index where it reads it, in parallel.
    pub fn validate_shape_named(&self, table: usize) -> Result<(), TraceError> {
        let bad = |what: String| Err(TraceError::InvalidBatch { table, what });
        if self.offsets.is_empty() {
            return bad("offsets is empty; expected B + 1 entries starting at 0".into());
        }
        if self.offsets[0] != 0 {
            return bad(format!("offsets[0] is {}; expected 0", self.offsets[0]));
        }
        // A branch-free scan first (it vectorises); the search below only
        // runs to name the first offender.
        let monotone = self
            .offsets
            .windows(2)
            .fold(true, |ok, w| ok & (w[0] <= w[1]));
        if !monotone
            && let Some((b, w)) = self
                .offsets
                .windows(2)
                .enumerate()
                .find(|(_, w)| w[1] < w[0])
        {
            return bad(format!(
                "offsets are not monotone: offsets[{}] = {} > offsets[{}] = {}",
                b,
                w[0],
                b + 1,
                w[1]
            ));
        }
        let last = *self.offsets.last().unwrap_or(&0) as usize;
        if last != self.indices.len() {
            return bad(format!(
                "offsets end at {last} but there are {} indices; expected offsets[B] == number of indices",
                self.indices.len()
            ));
        }
        if let Some(w) = &self.weights {
            if w.len() != self.indices.len() {
                return bad(format!(
                    "{} weights for {} indices; expected one weight per index",
                    w.len(),
                    self.indices.len()
                ));
            }
        }
        Ok(())
    }

    /// That every index is below `num_rows`; the error names the first that
    /// is not.
    pub fn validate_rows_named(&self, table: usize) -> Result<(), TraceError> {
        let bad = |what: String| Err(TraceError::InvalidBatch { table, what });
        if rows_below(&self.indices, self.num_rows) {
            return Ok(());
        }
        if let Some((i, &r)) = self
            .indices
            .iter()
            .enumerate()
            .find(|&(_, &r)| r as u64 >= self.num_rows)
        {
            return bad(format!(
                "index {i} is row {r}, at or past the table's {} rows",
                self.num_rows
            ));
        }
        Ok(())
    }

    /// [`TableBatch::validate_shape_named`] for table 0.
    pub fn validate_shape(&self) -> Result<(), TraceError> {
        self.validate_shape_named(0)
    }

    /// [`TableBatch::validate_named`] for table 0.
    pub fn validate(&self) -> Result<(), TraceError> {
        self.validate_named(0)
    }

    /// The (src, dst) pair view: `src` is a copy of `indices`, `dst[i]` is the
    /// bag that lookup `i` belongs to.
    pub fn pairs(&self) -> Pairs {
        let mut dst = Vec::with_capacity(self.indices.len());
        for b in 0..self.batch_size() {
            let len = (self.offsets[b + 1] - self.offsets[b]) as usize;
            dst.extend(std::iter::repeat_n(b as u32, len));
        }
        Pairs {
            src: self.indices.clone(),
            dst,
        }
    }

    /// Bag id of every lookup (the `dst` half of [`TableBatch::pairs`]) without copying `src`.
    pub fn dst(&self) -> Vec<u32> {
        let mut dst = vec![0u32; self.indices.len()];
        for (b, w) in self.offsets.windows(2).enumerate() {
            dst[w[0] as usize..w[1] as usize].fill(b as u32);
        }
        dst
    }
}

/// One mini-batch over all tables, with optional dense features and labels
/// (present for Criteo-derived batches, absent for synthetic index traces).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// One entry per embedding table, all with the same batch size.
    pub tables: Vec<TableBatch>,
    /// Dense features, row-major `B x num_dense`, if any.
    pub dense: Option<Vec<f32>>,
    /// Number of dense features per sample (0 when `dense` is `None`).
    pub num_dense: usize,
    /// Click labels (0 or 1), one per sample, if any.
    pub labels: Option<Vec<f32>>,
}

impl Batch {
    /// A batch of lookups only: `tables`, no dense features, no labels.
    pub fn of_tables(tables: Vec<TableBatch>) -> Self {
        Batch {
            tables,
            dense: None,
            num_dense: 0,
            labels: None,
        }
    }

    /// Batch size `B` (0 for a batch with no tables).
    pub fn batch_size(&self) -> usize {
        self.tables.first().map_or(0, TableBatch::batch_size)
    }

    /// Checks every table and that all agree on `B`, and the dense / label shapes.
    pub fn validate(&self) -> Result<(), TraceError> {
        let b = self.batch_size();
        for (t, tb) in self.tables.iter().enumerate() {
            tb.validate_named(t)?;
            if tb.batch_size() != b {
                return Err(TraceError::InvalidBatch {
                    table: t,
                    what: format!("batch size {} differs from table 0's {b}", tb.batch_size()),
                });
            }
        }
        if let Some(d) = &self.dense {
            if d.len() != b * self.num_dense {
                return Err(TraceError::InvalidBatch {
                    table: 0,
                    what: format!(
                        "dense features hold {} values; expected B x num_dense = {b} x {}",
                        d.len(),
                        self.num_dense
                    ),
                });
            }
        }
        if let Some(l) = &self.labels {
            if l.len() != b {
                return Err(TraceError::InvalidBatch {
                    table: 0,
                    what: format!("{} labels for batch size {b}", l.len()),
                });
            }
        }
        Ok(())
    }
}

/// Whether `list` is strictly ascending: one branch-free pass (it
/// vectorises), for checks that run on every call.
pub fn strictly_ascending(list: &[u32]) -> bool {
    list.windows(2).fold(true, |ok, w| ok & (w[0] < w[1]))
}

/// Whether every index is below `rows`: one branch-free pass (it
/// vectorises), so a kernel can afford it on every call.
pub fn rows_below(indices: &[u32], rows: u64) -> bool {
    indices.is_empty() || u64::from(indices.iter().copied().fold(0u32, u32::max)) < rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig2() -> TableBatch {
        // The paper's Figure 2: bag 0 gathers rows 1, 2, 4; bag 1 gathers 0, 2.
        TableBatch::new(5, vec![0, 3, 5], vec![1, 2, 4, 0, 2], None).unwrap()
    }

    #[test]
    fn pairs_follow_the_papers_figure_2() {
        let p = fig2().pairs();
        assert_eq!(p.src, vec![1, 2, 4, 0, 2]);
        assert_eq!(p.dst, vec![0, 0, 0, 1, 1]);
        assert_eq!(fig2().dst(), p.dst);
    }

    #[test]
    fn structural_errors_name_the_problem() {
        let e = TableBatch::new(5, vec![0, 3, 2], vec![1, 2, 4], None).unwrap_err();
        assert!(e.to_string().contains("not monotone"), "{e}");
        let e = TableBatch::new(5, vec![0, 3, 4], vec![1, 2, 4], None).unwrap_err();
        assert!(e.to_string().contains("offsets end at 4"), "{e}");
        let e = TableBatch::new(5, vec![0, 2], vec![1, 5], None).unwrap_err();
        assert!(
            e.to_string()
                .contains("row 5, at or past the table's 5 rows"),
            "{e}"
        );
        let e = TableBatch::new(5, vec![0, 2], vec![1, 3], Some(vec![1.0])).unwrap_err();
        assert!(e.to_string().contains("1 weights for 2 indices"), "{e}");
        let e = TableBatch::new(5, vec![1, 2], vec![1, 3], None).unwrap_err();
        assert!(e.to_string().contains("offsets[0] is 1"), "{e}");
        let e = TableBatch::new(5, vec![], vec![], None).unwrap_err();
        assert!(e.to_string().contains("offsets is empty"), "{e}");
    }

    #[test]
    fn batch_checks_shapes_across_tables() {
        let mut b = Batch {
            tables: vec![fig2(), fig2()],
            dense: None,
            num_dense: 0,
            labels: None,
        };
        b.validate().unwrap();
        b.tables[1] = TableBatch::new(5, vec![0, 1], vec![3], None).unwrap();
        let e = b.validate().unwrap_err().to_string();
        assert!(
            e.contains("table 1") && e.contains("batch size 1 differs"),
            "{e}"
        );
    }
}
