//! Hot embedding rows: FAE's calibrator (Adnan et al., "Accelerating
//! Recommendation System Training 15x with RAM-Efficient Hot Embeddings").
//!
//! - **Sampling** ([`Sampling`]): the access profile is counted on a sample of
//!   the input: every one of the first `min_samples` samples (FAE: at least
//!   500K sparse inputs), then each later sample with probability `rate`
//!   (FAE: 5%), decided by a seeded hash of its index, so that a second pass
//!   over the same input sees the same samples.
//! - **Profile** ([`ProfileBuilder`], [`AccessProfile`]): per table, the
//!   accesses of every row in the sampled samples.
//! - **Threshold** ([`Calibration`]): tables under [`SMALL_TABLE_BYTES`] are
//!   hot whole (FAE: "tables smaller than 1MB are de-facto hot"); in the
//!   others a row is hot when its count reaches the access threshold, one
//!   count for all tables. For a memory budget the threshold is the smallest
//!   count whose hot rows (with the small tables) fit in it.
//! - **Rand-Em Box** ([`rand_em_box`]): FAE's estimate of a table's hot rows
//!   from 35 random chunks of 1024 rows (a t-interval at 99.9%), reported
//!   beside the exact count.
//! - **Hot samples** ([`SampleMins`]): a sample is hot when every one of its
//!   lookups, in every table, is to a hot row; a second pass records, per
//!   sampled sample, the least count among its lookups, so that the share of
//!   hot samples follows for any threshold.
//! - **Hot set** ([`HotSet`]): the hot rows of each table at a threshold, to
//!   split batches into all-hot and other samples.
//!
//! Sizes are bytes of rows: `row_bytes` (the embedding width in bytes) times
//! rows. This module counts accesses; it knows nothing of what the rows hold.

use std::collections::HashSet;

use rayon::prelude::*;
use serde::Serialize;

use crate::counts::{Counts, RowCounts};
use crate::rng::splitmix64;
use crate::{Batch, TableBatch, TraceError};

/// FAE's sampling rate of the input (5%).
pub const FAE_SAMPLE_RATE: f64 = 0.05;
/// FAE's least number of profiled samples (500K): all of them when the
/// input is smaller.
pub const FAE_MIN_SAMPLES: u64 = 500_000;
/// Tables under this size (1 MiB) are hot whole.
pub const SMALL_TABLE_BYTES: u64 = 1 << 20;
/// The budget FAE and SCARS use for hot rows (256 MiB).
pub const DEFAULT_BUDGET_BYTES: u64 = 256 << 20;
/// Rand-Em Box: chunks sampled per table (FAE's n = 35).
pub const RAND_EM_CHUNKS: usize = 35;
/// Rand-Em Box: rows per chunk (FAE's m = 1024).
pub const RAND_EM_CHUNK_ROWS: u64 = 1024;
/// Rand-Em Box: the t value of FAE's 99.9% interval for n = 35 (its Eq. 6).
pub const RAND_EM_T: f64 = 3.340;

/// Which samples of the input the profile counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sampling {
    /// Probability that a sample past the first `min_samples` is profiled,
    /// in (0, 1].
    pub rate: f64,
    /// The first this many samples are all profiled.
    pub min_samples: u64,
    /// Seed of the draws.
    pub seed: u64,
}

impl Sampling {
    /// FAE's: 5%, at least the first 500K samples.
    pub fn fae(seed: u64) -> Self {
        Sampling {
            rate: FAE_SAMPLE_RATE,
            min_samples: FAE_MIN_SAMPLES,
            seed,
        }
    }

    /// Every sample.
    pub fn all() -> Self {
        Sampling {
            rate: 1.0,
            min_samples: 0,
            seed: 0,
        }
    }

    /// A rate outside (0, 1] is an error naming it.
    pub fn validate(&self) -> Result<(), TraceError> {
        if !(self.rate > 0.0 && self.rate <= 1.0) {
            return Err(TraceError::param(
                "sample rate",
                format!(
                    "{}: expected a share of the samples in (0, 1], e.g. 0.05",
                    self.rate
                ),
            ));
        }
        Ok(())
    }

    /// Whether sample `index` (0-based, over the whole input) is profiled.
    pub fn takes(&self, index: u64) -> bool {
        if index < self.min_samples || self.rate >= 1.0 {
            return true;
        }
        let mut s = self.seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
        // The top 53 bits as a uniform in [0, 1).
        ((splitmix64(&mut s) >> 11) as f64) < self.rate * (1u64 << 53) as f64
    }
}

/// Which samples of a batch, the first of which is sample `first` of the
/// input, `sampling` takes: `None` when it takes them all.
fn taken(sampling: &Sampling, first: u64, bags: usize) -> Option<Vec<bool>> {
    if sampling.rate >= 1.0 || first + bags as u64 <= sampling.min_samples {
        return None;
    }
    Some(
        (0..bags as u64)
            .map(|b| sampling.takes(first + b))
            .collect(),
    )
}

/// The lookups of the samples of `batch` that `mask` takes (all of them
/// without one): its tables' offsets and indices, nothing else.
fn taken_lookups(batch: &Batch, mask: Option<&[bool]>) -> Batch {
    let tables = batch
        .tables
        .iter()
        .map(|tb| match mask {
            None => TableBatch {
                num_rows: tb.num_rows,
                offsets: tb.offsets.clone(),
                indices: tb.indices.clone(),
                weights: None,
            },
            Some(m) => {
                let mut offsets = vec![0u32];
                let mut indices = Vec::new();
                for b in (0..m.len()).filter(|&b| m[b]) {
                    indices.extend_from_slice(tb.bag(b));
                    offsets.push(indices.len() as u32);
                }
                TableBatch {
                    num_rows: tb.num_rows,
                    offsets,
                    indices,
                    weights: None,
                }
            }
        })
        .collect();
    Batch::of_tables(tables)
}

/// Checks that `batch` has the tables the profile was set up for.
fn check_tables(batch: &Batch, rows: &[u64]) -> Result<(), TraceError> {
    if batch.tables.len() != rows.len() {
        return Err(TraceError::InvalidBatch {
            table: 0,
            what: format!(
                "batch has {} tables; the profile was set up for {}",
                batch.tables.len(),
                rows.len()
            ),
        });
    }
    for (t, (tb, &r)) in batch.tables.iter().zip(rows).enumerate() {
        if tb.num_rows != r {
            return Err(TraceError::InvalidBatch {
                table: t,
                what: format!("{} rows; the profile was set up for {r}", tb.num_rows),
            });
        }
    }
    Ok(())
}

/// Per-table access counts of the sampled samples.
#[derive(Debug, Clone)]
pub struct AccessProfile {
    pub sampling: Sampling,
    /// Rows of each table.
    pub table_rows: Vec<u64>,
    /// Each table's counts.
    pub counts: Vec<RowCounts>,
    /// Lookups counted, per table.
    pub lookups: Vec<u64>,
    /// Samples in the input.
    pub samples_seen: u64,
    /// Samples counted.
    pub samples_profiled: u64,
}

impl AccessProfile {
    /// Lookups counted over all tables.
    pub fn total_lookups(&self) -> u64 {
        self.lookups.iter().sum()
    }
}

/// Builds an [`AccessProfile`] batch by batch.
#[derive(Debug)]
pub struct ProfileBuilder {
    profile: AccessProfile,
    /// The profiled samples' lookups, kept for the hot samples' pass while
    /// they take at most `limit` bytes ([`ProfileBuilder::retaining`]).
    retained: Option<Retained>,
}

#[derive(Debug)]
struct Retained {
    batches: Vec<Batch>,
    bytes: u64,
    limit: u64,
    /// The limit was passed: nothing is kept.
    over: bool,
}

impl ProfileBuilder {
    /// A profile of tables of `table_rows` rows; `sampling` must be valid.
    pub fn new(table_rows: &[u64], sampling: Sampling) -> Result<Self, TraceError> {
        sampling.validate()?;
        Ok(ProfileBuilder {
            profile: AccessProfile {
                sampling,
                table_rows: table_rows.to_vec(),
                counts: RowCounts::new_for_tables(table_rows),
                lookups: vec![0; table_rows.len()],
                samples_seen: 0,
                samples_profiled: 0,
            },
            retained: None,
        })
    }

    /// Also keeps the profiled samples' lookups while they take at most
    /// `limit_bytes`, so that the hot samples can be found without reading
    /// the input again ([`ProfileBuilder::finish_retained`]).
    pub fn retaining(mut self, limit_bytes: u64) -> Self {
        self.retained = Some(Retained {
            batches: Vec::new(),
            bytes: 0,
            limit: limit_bytes,
            over: false,
        });
        self
    }

    /// Counts the sampled samples of the next batch of the input.
    pub fn add(&mut self, batch: &Batch) -> Result<(), TraceError> {
        let p = &mut self.profile;
        check_tables(batch, &p.table_rows)?;
        let bags = batch.batch_size();
        let mask = taken(&p.sampling, p.samples_seen, bags);
        p.counts
            .par_iter_mut()
            .zip(p.lookups.par_iter_mut())
            .zip(&batch.tables)
            .enumerate()
            .try_for_each(|(t, ((counts, lookups), tb))| {
                match &mask {
                    None => {
                        counts.add(t, &tb.indices)?;
                        *lookups += tb.indices.len() as u64;
                    }
                    Some(m) => {
                        for b in (0..m.len()).filter(|&b| m[b]) {
                            let bag = tb.bag(b);
                            counts.add(t, bag)?;
                            *lookups += bag.len() as u64;
                        }
                    }
                }
                Ok::<(), TraceError>(())
            })?;
        p.samples_profiled += mask
            .as_ref()
            .map_or(bags as u64, |m| m.iter().filter(|&&x| x).count() as u64);
        p.samples_seen += bags as u64;
        if let Some(r) = self.retained.as_mut().filter(|r| !r.over) {
            let kept = taken_lookups(batch, mask.as_deref());
            r.bytes += kept
                .tables
                .iter()
                .map(|t| 4 * (t.offsets.len() + t.indices.len()) as u64)
                .sum::<u64>();
            if r.bytes > r.limit {
                r.over = true;
                r.batches = Vec::new();
            } else {
                r.batches.push(kept);
            }
        }
        Ok(())
    }

    /// The profile and, when [`ProfileBuilder::retaining`] kept them within
    /// its limit, the profiled samples' lookups (for [`HotSamples::of_retained`]).
    pub fn finish_retained(mut self) -> Result<(AccessProfile, Option<Vec<Batch>>), TraceError> {
        let kept = self.retained.take().filter(|r| !r.over).map(|r| r.batches);
        Ok((self.finish()?, kept))
    }

    /// The profile; an input with no samples is an error.
    pub fn finish(self) -> Result<AccessProfile, TraceError> {
        if self.profile.samples_seen == 0 {
            return Err(TraceError::param(
                "input",
                "no samples: the input holds no batch (an empty trace?)",
            ));
        }
        Ok(self.profile)
    }
}

/// What the hot rows of one threshold are: FAE's Rand-Em Box estimate of
/// their number beside the exact count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RandEm {
    /// Hot rows estimated over the large tables.
    pub estimate: f64,
    /// Its 99.9% interval (the sum of the tables' intervals, each clamped at
    /// zero).
    pub low: f64,
    pub high: f64,
    /// Large tables counted exactly, being smaller than the 35 chunks.
    pub exact_tables: usize,
}

/// FAE's Rand-Em Box on one table: the hot rows at `threshold` (accesses at
/// least), estimated from [`RAND_EM_CHUNKS`] chunks of [`RAND_EM_CHUNK_ROWS`]
/// consecutive rows at seeded random starts: `(mean, low, high, exact)`, the
/// mean of the chunks' hot rows scaled to the table and its t-interval
/// (FAE's Eq. 4 and 6). A table smaller than the chunks together is counted
/// exactly (`exact`, the interval its count).
pub fn rand_em_box(counts: &RowCounts, threshold: u64, seed: u64) -> (f64, f64, f64, bool) {
    let rows = counts.rows();
    let chunk = RAND_EM_CHUNK_ROWS;
    if rows < RAND_EM_CHUNKS as u64 * chunk {
        let n = counts
            .touched_counts()
            .iter()
            .filter(|&&c| c >= threshold)
            .count() as f64;
        return (n, n, n, true);
    }
    let mut s = seed;
    let ys: Vec<f64> = (0..RAND_EM_CHUNKS)
        .map(|_| {
            let start = splitmix64(&mut s) % (rows - chunk + 1);
            let hot = match &counts.counts {
                Counts::Dense(c) => c[start as usize..(start + chunk) as usize]
                    .iter()
                    .filter(|&&x| u64::from(x) >= threshold)
                    .count(),
                Counts::Sparse(_) => (start..start + chunk)
                    .filter(|&r| counts.get(r as u32) >= threshold)
                    .count(),
            };
            hot as f64
        })
        .collect();
    let n = ys.len() as f64;
    let mean = ys.iter().sum::<f64>() / n;
    let var = ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let half = RAND_EM_T * var.sqrt() / n.sqrt();
    let scale = rows as f64 / chunk as f64;
    (
        mean * scale,
        (mean - half).max(0.0) * scale,
        (mean + half) * scale,
        false,
    )
}

/// The hot rows of one memory budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetResult {
    pub budget_bytes: u64,
    /// Accesses (in the profile) a row of a large table needs to be hot.
    pub threshold: u64,
    /// Hot rows of the large tables, counted exactly.
    pub hot_rows: u64,
    /// Rows of the small tables (all hot).
    pub small_table_rows: u64,
    /// Bytes of every hot row, the small tables' included.
    pub hot_bytes: u64,
    /// Share of the profiled lookups that hit a hot row.
    pub lookup_share: f64,
    /// Share of the profiled samples whose every lookup hits a hot row, once
    /// a second pass ([`SampleMins`]) has run.
    pub sample_share: Option<f64>,
    /// FAE's estimate of `hot_rows`.
    pub rand_em: RandEm,
}

/// Thresholds for memory budgets, from a profile.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub row_bytes: u64,
    /// Whether each table is small (hot whole).
    pub small: Vec<bool>,
    /// Rows and lookups of the small tables.
    pub small_rows: u64,
    small_lookups: u64,
    /// Distinct counts of the large tables' touched rows, highest first, with
    /// the rows at that count or above and their lookups.
    levels: Vec<(u64, u64, u64)>,
    total_lookups: u64,
    total_bytes: u128,
}

impl Calibration {
    /// The levels of `profile`'s large tables, for rows of `row_bytes` bytes.
    pub fn new(profile: &AccessProfile, row_bytes: u64) -> Result<Self, TraceError> {
        if row_bytes == 0 {
            return Err(TraceError::param(
                "row bytes",
                "0: expected the bytes of one row",
            ));
        }
        let small: Vec<bool> = profile
            .table_rows
            .iter()
            .map(|&r| (r as u128) * (row_bytes as u128) < SMALL_TABLE_BYTES as u128)
            .collect();
        // A per-table count summed over the small tables.
        let over_small = |per_table: &[u64]| -> u64 {
            per_table
                .iter()
                .zip(&small)
                .filter(|(_, s)| **s)
                .map(|(v, _)| v)
                .sum()
        };
        let small_rows = over_small(&profile.table_rows);
        let small_lookups = over_small(&profile.lookups);
        let mut counts: Vec<u64> = profile
            .counts
            .par_iter()
            .zip(&small)
            .filter(|(_, s)| !**s)
            .flat_map_iter(|(c, _)| c.touched_counts())
            .collect();
        counts.par_sort_unstable_by(|a, b| b.cmp(a));
        let mut levels: Vec<(u64, u64, u64)> = Vec::new();
        let (mut rows, mut lookups) = (0u64, 0u64);
        for &c in &counts {
            rows += 1;
            lookups += c;
            match levels.last_mut() {
                Some(l) if l.0 == c => {
                    l.1 = rows;
                    l.2 = lookups;
                }
                _ => levels.push((c, rows, lookups)),
            }
        }
        let total_bytes = profile
            .table_rows
            .iter()
            .map(|&r| r as u128 * row_bytes as u128)
            .sum();
        Ok(Calibration {
            row_bytes,
            small,
            small_rows,
            small_lookups,
            levels,
            total_lookups: profile.total_lookups(),
            total_bytes,
        })
    }

    /// Bytes of every table.
    pub fn total_bytes(&self) -> u128 {
        self.total_bytes
    }

    /// Bytes of the small tables.
    pub fn small_bytes(&self) -> u128 {
        self.small_rows as u128 * self.row_bytes as u128
    }

    /// Hot rows of the large tables and their lookups at `threshold`.
    fn at(&self, threshold: u64) -> (u64, u64) {
        // Levels are by count, highest first: the last at or above it.
        let k = self.levels.partition_point(|l| l.0 >= threshold);
        if k == 0 {
            (0, 0)
        } else {
            (self.levels[k - 1].1, self.levels[k - 1].2)
        }
    }

    /// The smallest threshold (at least 1) whose hot rows and the small
    /// tables fit in `budget` bytes. A budget of 0, one that holds every
    /// table whole, or one the small tables alone exceed is an error.
    pub fn threshold(&self, budget: u64) -> Result<u64, TraceError> {
        let name = "budget";
        if budget == 0 {
            return Err(TraceError::param(
                name,
                "0 bytes: expected a size such as 256MB",
            ));
        }
        if budget as u128 >= self.total_bytes {
            return Err(TraceError::param(
                name,
                format!(
                    "{} holds every table whole ({}): every row would be hot; give a budget under the tables' total",
                    bytes_text(budget as u128),
                    bytes_text(self.total_bytes)
                ),
            ));
        }
        let small = self.small_bytes();
        if small > budget as u128 {
            return Err(TraceError::param(
                name,
                format!(
                    "{}: the tables under 1 MiB, hot whole, take {} already",
                    bytes_text(budget as u128),
                    bytes_text(small)
                ),
            ));
        }
        let room = (budget as u128 - small) / self.row_bytes as u128;
        // The first level whose rows overflow the room; the threshold is one
        // above its count (or 1 when every touched row fits).
        let k = self.levels.partition_point(|l| (l.1 as u128) <= room);
        Ok(match self.levels.get(k) {
            None => 1,
            Some(l) => l.0 + 1,
        })
    }

    /// The result of `budget` on `profile` (the profile this calibration was
    /// made from), without the hot samples' share.
    pub fn budget(&self, profile: &AccessProfile, budget: u64) -> Result<BudgetResult, TraceError> {
        let threshold = self.threshold(budget)?;
        let (hot_rows, hot_lookups) = self.at(threshold);
        let mut rand_em = RandEm {
            estimate: 0.0,
            low: 0.0,
            high: 0.0,
            exact_tables: 0,
        };
        let seed = profile.sampling.seed ^ 0x52_414E_445F_454D;
        for (t, c) in profile.counts.iter().enumerate() {
            if self.small[t] {
                continue;
            }
            let (mean, low, high, exact) = rand_em_box(c, threshold, seed.wrapping_add(t as u64));
            rand_em.estimate += mean;
            rand_em.low += low;
            rand_em.high += high;
            rand_em.exact_tables += usize::from(exact);
        }
        let share = |x: u64| {
            if self.total_lookups == 0 {
                0.0
            } else {
                x as f64 / self.total_lookups as f64
            }
        };
        Ok(BudgetResult {
            budget_bytes: budget,
            threshold,
            hot_rows,
            small_table_rows: self.small_rows,
            hot_bytes: (hot_rows + self.small_rows) * self.row_bytes,
            lookup_share: share(hot_lookups + self.small_lookups),
            sample_share: None,
            rand_em,
        })
    }
}

/// `n` bytes as MB or GB (decimal, two significant decimals).
fn bytes_text(n: u128) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.2} GB", n / 1e9)
    } else {
        format!("{:.2} MB", n / 1e6)
    }
}

/// The second pass: per profiled sample, the least count among its lookups
/// (a lookup of a small table counting as hot at any threshold).
#[derive(Debug)]
pub struct SampleMins<'a> {
    profile: &'a AccessProfile,
    small: &'a [bool],
    seen: u64,
    mins: Vec<u64>,
}

impl<'a> SampleMins<'a> {
    /// Over the same input, in the same order, as `profile` was counted on.
    pub fn new(profile: &'a AccessProfile, calibration: &'a Calibration) -> Self {
        SampleMins {
            profile,
            small: &calibration.small,
            seen: 0,
            mins: Vec::new(),
        }
    }

    /// The next batch of the input.
    pub fn add(&mut self, batch: &Batch) -> Result<(), TraceError> {
        let p = self.profile;
        check_tables(batch, &p.table_rows)?;
        let bags = batch.batch_size();
        let mask = taken(&p.sampling, self.seen, bags);
        self.mins
            .extend(sample_mins(batch, p, self.small, mask.as_deref()));
        self.seen += bags as u64;
        Ok(())
    }

    /// The mins, sorted; the input must have been the profile's.
    pub fn finish(mut self) -> Result<HotSamples, TraceError> {
        if self.seen != self.profile.samples_seen {
            return Err(TraceError::param(
                "input",
                format!(
                    "the second pass read {} samples, the profile {}: the input changed between them",
                    self.seen, self.profile.samples_seen
                ),
            ));
        }
        self.mins.par_sort_unstable();
        Ok(HotSamples { mins: self.mins })
    }
}

/// Per sample of `batch` that `mask` takes (all without one), the least
/// count among its lookups (a small table's counting as hot at any
/// threshold), in sample order.
fn sample_mins(
    batch: &Batch,
    p: &AccessProfile,
    small: &[bool],
    mask: Option<&[bool]>,
) -> Vec<u64> {
    let bags = batch.batch_size();
    let skip = |b: usize| mask.is_some_and(|m| !m[b]);
    // Per table, each sample's least count; then the least over tables.
    let per_table: Vec<Vec<u64>> = batch
        .tables
        .par_iter()
        .enumerate()
        .map(|(t, tb)| {
            (0..bags)
                .map(|b| {
                    // (A sample the profile did not take is not looked at.)
                    if small[t] || skip(b) {
                        return u64::MAX;
                    }
                    tb.bag(b)
                        .iter()
                        .map(|&r| p.counts[t].get(r))
                        .min()
                        .unwrap_or(u64::MAX)
                })
                .collect()
        })
        .collect();
    (0..bags)
        .filter(|&b| !skip(b))
        .map(|b| per_table.iter().map(|v| v[b]).min().unwrap_or(u64::MAX))
        .collect()
}

/// The profiled samples' least counts, sorted.
#[derive(Debug, Clone)]
pub struct HotSamples {
    mins: Vec<u64>,
}

impl HotSamples {
    /// The hot samples of `retained` (every profiled sample's lookups, as
    /// [`ProfileBuilder::finish_retained`] kept them), as [`SampleMins`]
    /// finds them in a second pass over the input.
    pub fn of_retained(
        profile: &AccessProfile,
        calibration: &Calibration,
        retained: &[Batch],
    ) -> Result<Self, TraceError> {
        let mut mins = Vec::with_capacity(profile.samples_profiled as usize);
        for b in retained {
            check_tables(b, &profile.table_rows)?;
            mins.extend(sample_mins(b, profile, &calibration.small, None));
        }
        if mins.len() as u64 != profile.samples_profiled {
            return Err(TraceError::param(
                "input",
                format!(
                    "{} retained samples, {} profiled: not this profile's",
                    mins.len(),
                    profile.samples_profiled
                ),
            ));
        }
        mins.par_sort_unstable();
        Ok(HotSamples { mins })
    }

    /// Share of the profiled samples entirely hot at `threshold`.
    pub fn share_at(&self, threshold: u64) -> f64 {
        if self.mins.is_empty() {
            return 0.0;
        }
        let cold = self.mins.partition_point(|&m| m < threshold);
        (self.mins.len() - cold) as f64 / self.mins.len() as f64
    }

    /// Fills `r`'s sample share.
    pub fn fill(&self, r: &mut BudgetResult) {
        r.sample_share = Some(self.share_at(r.threshold));
    }
}

/// The hot rows of each table at one threshold.
#[derive(Debug, Clone)]
pub struct HotSet {
    pub threshold: u64,
    tables: Vec<HotRows>,
}

#[derive(Debug, Clone)]
enum HotRows {
    /// A small table: every row.
    All,
    /// One bit per row.
    Bits(Vec<u64>),
    /// The hot rows of a sparsely counted table.
    Set(HashSet<u32>),
}

impl HotSet {
    /// The hot set of `profile` at `threshold` (rows with that many accesses
    /// or more; every row of a small table).
    pub fn new(profile: &AccessProfile, calibration: &Calibration, threshold: u64) -> Self {
        let tables = profile
            .counts
            .par_iter()
            .enumerate()
            .map(|(t, c)| {
                if calibration.small[t] {
                    return HotRows::All;
                }
                match &c.counts {
                    Counts::Dense(v) => {
                        let mut bits = vec![0u64; v.len().div_ceil(64)];
                        for (r, &x) in v.iter().enumerate() {
                            if u64::from(x) >= threshold {
                                bits[r / 64] |= 1 << (r % 64);
                            }
                        }
                        HotRows::Bits(bits)
                    }
                    Counts::Sparse(m) => HotRows::Set(
                        m.iter()
                            .filter(|&(_, &x)| x >= threshold)
                            .map(|(&r, _)| r)
                            .collect(),
                    ),
                }
            })
            .collect();
        HotSet { threshold, tables }
    }

    /// Tables.
    pub fn tables(&self) -> usize {
        self.tables.len()
    }

    /// Whether row `row` of table `table` is hot.
    pub fn is_hot(&self, table: usize, row: u32) -> bool {
        match &self.tables[table] {
            HotRows::All => true,
            HotRows::Bits(b) => b
                .get(row as usize / 64)
                .is_some_and(|w| w >> (row % 64) & 1 == 1),
            HotRows::Set(s) => s.contains(&row),
        }
    }

    /// Whether table `table` is hot whole.
    pub fn all_hot(&self, table: usize) -> bool {
        matches!(self.tables[table], HotRows::All)
    }

    /// The hot rows of table `table` of `rows` rows, ascending.
    pub fn hot_rows(&self, table: usize, rows: u64) -> Vec<u32> {
        match &self.tables[table] {
            HotRows::All => (0..rows as u32).collect(),
            HotRows::Bits(b) => (0..rows as u32)
                .filter(|&r| b[r as usize / 64] >> (r % 64) & 1 == 1)
                .collect(),
            HotRows::Set(s) => {
                let mut v: Vec<u32> = s.iter().copied().collect();
                v.sort_unstable();
                v
            }
        }
    }

    /// Whether sample `b` of `batch` looks up hot rows only, in every table.
    pub fn sample_is_hot(&self, batch: &Batch, b: usize) -> bool {
        batch
            .tables
            .iter()
            .enumerate()
            .all(|(t, tb)| self.all_hot(t) || tb.bag(b).iter().all(|&r| self.is_hot(t, r)))
    }
}

#[cfg(test)]
mod tests;
