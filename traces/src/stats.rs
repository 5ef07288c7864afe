//! Per-table access statistics over a stream of batches: lookups, unique rows per
//! batch, the coalescing ratio of Tensor Casting's Fig. 5b (expanded gradient rows
//! over coalesced rows), distinct rows, access-count histogram, a hotness CDF and
//! the share of accesses taken by the hottest rows.
//!
//! Memory is bounded by the table: rows are counted by [`RowCounts`], dense
//! or sparse by the table's size.

use std::fmt;

use rayon::prelude::*;
use serde::Serialize;

use crate::counts::RowCounts;
pub use crate::counts::{DENSE_COUNTER_MAX_ROWS, DENSE_COUNTERS_TOTAL};
use crate::{Batch, TableBatch, TraceError};
const CDF_POINTS: usize = 20;

/// SCARS' expected number of distinct rows among `lookups` independent draws from
/// `pmf`: sum over rows e of 1 - (1 - P(e))^lookups.
pub fn expected_unique_rows(pmf: &[f64], lookups: u64) -> f64 {
    let b = lookups as f64;
    // ln_1p keeps precision for the tiny probabilities of cold rows.
    pmf.iter().map(|&p| -(b * (-p).ln_1p()).exp_m1()).sum()
}

#[derive(Debug)]
struct TableAcc {
    rows: u64,
    batches: u64,
    lookups: u64,
    unique_sum: u64,
    counts: RowCounts,
    scratch: Vec<u32>,
}

impl TableAcc {
    fn add(&mut self, t: usize, tb: &TableBatch) -> Result<(), TraceError> {
        if tb.num_rows != self.rows {
            return Err(TraceError::InvalidBatch {
                table: t,
                what: format!(
                    "{} rows; the statistics were set up for {}",
                    tb.num_rows, self.rows
                ),
            });
        }
        self.counts.add(t, &tb.indices)?;
        self.scratch.clear();
        self.scratch.extend_from_slice(&tb.indices);
        self.scratch.sort_unstable();
        self.scratch.dedup();
        self.unique_sum += self.scratch.len() as u64;
        self.lookups += tb.indices.len() as u64;
        self.batches += 1;
        Ok(())
    }

    fn finish(self, table: usize) -> TableStats {
        let mut touched: Vec<u64> = self.counts.into_touched_counts();
        touched.sort_unstable_by(|a, b| b.cmp(a));
        let distinct = touched.len() as u64;
        let total: u64 = touched.iter().sum();
        let ratio = |num: u64, den: u64| {
            if den == 0 {
                0.0
            } else {
                num as f64 / den as f64
            }
        };
        // Prefix sums of counts, hottest first: prefix[k] = accesses of the k hottest rows.
        let mut prefix = Vec::with_capacity(touched.len() + 1);
        prefix.push(0u64);
        for &c in &touched {
            prefix.push(prefix[prefix.len() - 1] + c);
        }
        let share_of_hottest = |k: u64| ratio(prefix[k.min(distinct) as usize], total);
        let top = |frac: f64, n: u64| share_of_hottest(((n as f64 * frac).ceil() as u64).max(1));

        let mut histogram: Vec<HistogramBucket> = Vec::new();
        for &c in touched.iter().rev() {
            let bucket = 63 - c.leading_zeros();
            match histogram.last_mut() {
                Some(h) if h.log2 == bucket => h.rows += 1,
                _ => histogram.push(HistogramBucket {
                    log2: bucket,
                    min_count: 1 << bucket,
                    max_count: (1u64 << bucket).saturating_mul(2) - 1,
                    rows: 1,
                }),
            }
        }
        let cdf = if distinct == 0 {
            Vec::new()
        } else {
            (1..=CDF_POINTS)
                .map(|i| {
                    let k = (distinct as f64 * i as f64 / CDF_POINTS as f64).ceil() as u64;
                    CdfPoint {
                        touched_row_share: ratio(k, distinct),
                        table_row_share: ratio(k, self.rows),
                        access_share: share_of_hottest(k),
                    }
                })
                .collect()
        };
        TableStats {
            table,
            rows: self.rows,
            batches: self.batches,
            lookups: self.lookups,
            mean_lookups_per_batch: ratio(self.lookups, self.batches),
            mean_unique_rows_per_batch: ratio(self.unique_sum, self.batches),
            coalescing_ratio: ratio(self.lookups, self.unique_sum),
            distinct_rows: distinct,
            touched_row_share: ratio(distinct, self.rows),
            hottest_1pct_rows_access_share: top(0.01, self.rows),
            hottest_10pct_rows_access_share: top(0.10, self.rows),
            hottest_1pct_touched_access_share: top(0.01, distinct),
            hottest_10pct_touched_access_share: top(0.10, distinct),
            histogram,
            cdf,
        }
    }
}

/// Rows whose access count lies in `[min_count, max_count]` = `[2^log2, 2^(log2+1) - 1]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistogramBucket {
    pub log2: u32,
    pub min_count: u64,
    pub max_count: u64,
    pub rows: u64,
}

/// With rows sorted hottest first, the hottest `touched_row_share` of the touched
/// rows (= `table_row_share` of the table) take `access_share` of all accesses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfPoint {
    pub touched_row_share: f64,
    pub table_row_share: f64,
    pub access_share: f64,
}

/// Statistics of one table over the whole trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableStats {
    pub table: usize,
    pub rows: u64,
    pub batches: u64,
    pub lookups: u64,
    pub mean_lookups_per_batch: f64,
    pub mean_unique_rows_per_batch: f64,
    /// Expanded gradient rows / coalesced rows: lookups over unique rows, summed over batches.
    pub coalescing_ratio: f64,
    /// Rows touched at least once over the trace.
    pub distinct_rows: u64,
    pub touched_row_share: f64,
    pub hottest_1pct_rows_access_share: f64,
    pub hottest_10pct_rows_access_share: f64,
    pub hottest_1pct_touched_access_share: f64,
    pub hottest_10pct_touched_access_share: f64,
    /// Touched rows by access count, log2 buckets, coldest first.
    pub histogram: Vec<HistogramBucket>,
    pub cdf: Vec<CdfPoint>,
}

/// Statistics of a whole trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceStats {
    pub batches: u64,
    pub lookups: u64,
    /// Over all tables: total lookups / total unique rows per batch.
    pub coalescing_ratio: f64,
    pub tables: Vec<TableStats>,
}

/// Accumulates [`TraceStats`] batch by batch.
#[derive(Debug)]
pub struct StatsBuilder {
    tables: Vec<TableAcc>,
    batches: u64,
}

impl StatsBuilder {
    /// One entry of `rows` per table.
    pub fn new(rows: &[u64]) -> Self {
        Self::with_dense_limit(rows, DENSE_COUNTER_MAX_ROWS)
    }

    fn with_dense_limit(rows: &[u64], dense_limit: u64) -> Self {
        let tables = RowCounts::for_tables(rows, dense_limit)
            .into_iter()
            .map(|counts| TableAcc {
                rows: counts.rows(),
                batches: 0,
                lookups: 0,
                unique_sum: 0,
                counts,
                scratch: Vec::new(),
            })
            .collect();
        StatsBuilder { tables, batches: 0 }
    }

    /// Adds one batch; it must have one table per entry given to [`StatsBuilder::new`].
    pub fn add(&mut self, batch: &Batch) -> Result<(), TraceError> {
        if batch.tables.len() != self.tables.len() {
            return Err(TraceError::InvalidBatch {
                table: 0,
                what: format!(
                    "batch has {} tables; the statistics were set up for {}",
                    batch.tables.len(),
                    self.tables.len()
                ),
            });
        }
        self.tables
            .par_iter_mut()
            .zip(&batch.tables)
            .enumerate()
            .try_for_each(|(t, (acc, tb))| acc.add(t, tb))?;
        self.batches += 1;
        Ok(())
    }

    pub fn finish(self) -> TraceStats {
        let lookups = self.tables.iter().map(|t| t.lookups).sum::<u64>();
        let unique = self.tables.iter().map(|t| t.unique_sum).sum::<u64>();
        let tables = self
            .tables
            .into_par_iter()
            .enumerate()
            .map(|(i, t)| t.finish(i))
            .collect();
        TraceStats {
            batches: self.batches,
            lookups,
            coalescing_ratio: if unique == 0 {
                0.0
            } else {
                lookups as f64 / unique as f64
            },
            tables,
        }
    }
}

impl fmt::Display for TraceStats {
    /// A human table, one line per table. Its shares are
    /// percentages (the JSON and CSV fields hold them as fractions), as the
    /// legend under it says.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} batches, {} lookups, coalescing ratio {:.3} (lookups / unique rows per batch)",
            self.batches, self.lookups, self.coalescing_ratio
        )?;
        let mut t = crate::TextTable::new([
            "table",
            "rows",
            "lookups/b",
            "unique/b",
            "coalesce",
            "distinct",
            "touched%",
            "top1%:acc%",
            "top10%:acc%",
        ]);
        for s in &self.tables {
            t.row([
                s.table.to_string(),
                s.rows.to_string(),
                format!("{:.1}", s.mean_lookups_per_batch),
                format!("{:.1}", s.mean_unique_rows_per_batch),
                format!("{:.3}", s.coalescing_ratio),
                s.distinct_rows.to_string(),
                format!("{:.3}", 100.0 * s.touched_row_share),
                format!("{:.3}", 100.0 * s.hottest_1pct_rows_access_share),
                format!("{:.3}", 100.0 * s.hottest_10pct_rows_access_share),
            ]);
        }
        f.write_str(&t.render())?;
        writeln!(
            f,
            "touched%: rows looked up at least once, % of the table's rows; \
             top1%:acc% / top10%:acc%: lookups of the hottest 1% / 10% of the table's rows, % of its lookups"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::r#gen::{BagSize, Distribution, GenSpec, Generator, TableSpec, zipf_pmf};

    fn spec(rows: u64, distribution: Distribution, batch_size: usize, bag: u32) -> GenSpec {
        GenSpec {
            tables: vec![TableSpec {
                rows,
                distribution,
                bag_size: BagSize::Fixed { size: bag },
                weighted: false,
            }],
            batch_size,
            seed: 17,
        }
    }

    fn stats_of(spec: GenSpec, batches: usize) -> TableStats {
        let mut sb = StatsBuilder::new(&[spec.tables[0].rows]);
        for b in Generator::new(spec).unwrap().take(batches) {
            sb.add(&b).unwrap();
        }
        sb.finish().tables.remove(0)
    }

    fn hand_batch() -> Batch {
        // Row 2 three times, row 0 once, row 4 once in batch of two bags.
        let tb = TableBatch::new(100, vec![0, 3, 5], vec![2, 0, 2, 4, 2], None).unwrap();
        Batch {
            tables: vec![tb],
            dense: None,
            num_dense: 0,
            labels: None,
        }
    }

    #[test]
    fn dense_counters_stay_within_their_total() {
        let sb = StatsBuilder::new(&[DENSE_COUNTER_MAX_ROWS; 40]);
        let dense: u64 = sb
            .tables
            .iter()
            .map(|t| match &t.counts.counts {
                crate::counts::Counts::Dense(c) => c.len() as u64,
                crate::counts::Counts::Sparse(_) => 0,
            })
            .sum();
        assert_eq!(dense, DENSE_COUNTERS_TOTAL);
        assert!(matches!(
            sb.tables[39].counts.counts,
            crate::counts::Counts::Sparse(_)
        ));
    }

    #[test]
    fn hand_counted_example() {
        for limit in [DENSE_COUNTER_MAX_ROWS, 0] {
            let mut sb = StatsBuilder::with_dense_limit(&[100], limit);
            sb.add(&hand_batch()).unwrap();
            sb.add(&hand_batch()).unwrap();
            let s = sb.finish();
            let t = &s.tables[0];
            assert_eq!((t.batches, t.lookups, t.distinct_rows), (2, 10, 3));
            assert_eq!(t.mean_unique_rows_per_batch, 3.0);
            assert!((t.coalescing_ratio - 10.0 / 6.0).abs() < 1e-12);
            // Counts: row 2 -> 6, rows 0 and 4 -> 2. Hottest 1% of 100 rows = 1 row.
            assert!((t.hottest_1pct_rows_access_share - 0.6).abs() < 1e-12);
            assert_eq!(t.hottest_10pct_rows_access_share, 1.0);
            assert_eq!(
                t.histogram,
                vec![
                    HistogramBucket {
                        log2: 1,
                        min_count: 2,
                        max_count: 3,
                        rows: 2
                    },
                    HistogramBucket {
                        log2: 2,
                        min_count: 4,
                        max_count: 7,
                        rows: 1
                    },
                ]
            );
            assert_eq!(t.cdf.len(), CDF_POINTS);
            assert_eq!(t.cdf.last().unwrap().access_share, 1.0);
            assert!((t.cdf[0].access_share - 0.6).abs() < 1e-12);
            assert!(
                t.cdf
                    .windows(2)
                    .all(|w| w[0].access_share <= w[1].access_share)
            );
            // The table shows every share as a percentage: 3 of 100 rows
            // touched, 60% and 100% of the lookups on the hottest 1 and 10.
            let text = s.to_string();
            let row = text.lines().nth(2).unwrap();
            let cols: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cols[6..], ["3.000", "60.000", "100.000"], "{text}");
            assert!(text.contains("top1%:acc%") && text.contains("% of its lookups"));
        }
    }

    #[test]
    fn bad_batches_are_errors_not_panics() {
        let mut sb = StatsBuilder::new(&[100, 5]);
        assert!(
            sb.add(&hand_batch())
                .unwrap_err()
                .to_string()
                .contains("1 tables")
        );
        let mut sb = StatsBuilder::new(&[3]);
        let mut b = hand_batch();
        b.tables[0].num_rows = 3;
        assert!(sb.add(&b).unwrap_err().to_string().contains("row 4"));
    }

    #[test]
    fn coalescing_ratio_rises_with_batch_size_on_skewed_data() {
        let zipf = Distribution::Zipf {
            alpha: 1.05,
            scatter: true,
        };
        let ratios: Vec<f64> = [256, 512, 1024, 2048, 4096]
            .iter()
            .map(|&b| stats_of(spec(1_000_000, zipf.clone(), b, 1), 4).coalescing_ratio)
            .collect();
        assert!(ratios.windows(2).all(|w| w[1] > w[0]), "{ratios:?}");
        assert!(ratios[0] > 1.05, "{ratios:?}");
    }

    #[test]
    fn uniform_data_over_a_huge_table_barely_coalesces() {
        let t = stats_of(spec(100_000_000, Distribution::Uniform, 4096, 1), 4);
        assert!(
            t.coalescing_ratio >= 1.0 && t.coalescing_ratio < 1.01,
            "{}",
            t.coalescing_ratio
        );
        // The hottest 1% of a 100M-row table holds every touched row; among touched rows, no hot set.
        assert_eq!(t.hottest_1pct_rows_access_share, 1.0);
        assert!(
            t.hottest_1pct_touched_access_share < 0.02,
            "{}",
            t.hottest_1pct_touched_access_share
        );
    }

    #[test]
    fn measured_unique_rows_match_the_scars_formula() {
        let (rows, alpha, batch, bag) = (1000u64, 1.05, 64usize, 8u32);
        let t = stats_of(
            spec(
                rows,
                Distribution::Zipf {
                    alpha,
                    scatter: true,
                },
                batch,
                bag,
            ),
            60,
        );
        let expected = expected_unique_rows(&zipf_pmf(rows, alpha), (batch * bag as usize) as u64);
        let rel = (t.mean_unique_rows_per_batch - expected).abs() / expected;
        assert!(
            rel < 0.03,
            "measured {} vs expected {expected}",
            t.mean_unique_rows_per_batch
        );
    }

    #[test]
    fn skew_shows_in_hot_shares() {
        let t = stats_of(
            spec(
                100_000,
                Distribution::Zipf {
                    alpha: 1.2,
                    scatter: true,
                },
                1024,
                4,
            ),
            10,
        );
        let u = stats_of(spec(100_000, Distribution::Uniform, 1024, 4), 10);
        assert!(
            t.hottest_1pct_rows_access_share > 0.5,
            "{}",
            t.hottest_1pct_rows_access_share
        );
        assert!(
            u.hottest_1pct_rows_access_share < 0.1,
            "{}",
            u.hottest_1pct_rows_access_share
        );
        assert!(t.hottest_10pct_touched_access_share > u.hottest_10pct_touched_access_share);
    }
}
