//! SCARS's communication cost model (Erdogan et al., "Stochastic
//! Communication Avoidance for Recommendation Systems", Sec. II): how many
//! embedding parameters an epoch sends from the host's tables to the
//! device, without a cache, with coalescing and with a device cache of the
//! hottest rows, and how large that cache should be when it and the batch
//! share the device's memory.
//!
//! The paper's quantities, as this module reads them:
//!
//! - `P(e)`: the probability that a lookup of a table is row `e`.
//! - `b`: samples per batch; a sample looks up `L` rows of each table (the
//!   paper writes one lookup per sample per feature, and uses `d` for it in
//!   Sec. II-A; here `L` is each table's mean lookups per sample, so a batch
//!   draws `b L` rows of that table).
//! - `d`: parameters of one embedding row (the embedding dimension). The
//!   paper also uses `d` for lookups per sample; Eq. 4-7 and 11-13 need it
//!   as the row's size, which is how they read here.
//! - `Q`: samples per epoch; `M`: parameters the device holds; `a`:
//!   parameters one sample of the batch takes on the device (weights'
//!   share, activations).
//!
//! Equations (per table, summed over tables):
//!
//! - Eq. 1-2, expected unique rows of a batch: `U(b) = sum_e 1 - (1 - P(e))^(b L)`.
//! - Eq. 3, a coalesced batch: `b L` indices plus `U(b)` rows.
//! - Eq. 4, an epoch without coalescing: `Q L d` parameters.
//! - Eq. 5, with coalescing: `Q L` indices + `Q / b U(b) d`.
//! - Eq. 6, with the rows of `C` cached on the device: `Q L` indices +
//!   `Q / b U_(E\C)(b) d`.
//! - Eq. 7, the largest batch beside a cache of `|C|` rows: `b = (M - |C| d) / a`.
//! - Eq. 8-12, the marginal rule: caching one more row `e'` (so `b` falls to
//!   `b' = b - d / a`) lowers the epoch's traffic exactly when
//!   `1 - (1 - P(e'))^b >= t1`, `t1 = sum_(E\C') (b u_e(b') - b' u_e(b)) / b'`
//!   with `u_e(x) = 1 - (1 - P(e))^(x L)`.
//! - The best cache size by binary search over the hottest-first order
//!   (`O(log |E|)` evaluations, as the paper says), assuming the traffic
//!   falls then rises as the cache grows; [`CostModel::best_cache_scan`]
//!   checks every size.
//!
//! Eq. 13, printed truncated in the paper (its sum has no summand), is not
//! used: the marginal rule of Eq. 11-12 decides the same question exactly.
//!
//! The batch of Eq. 7 is real-valued here, as in the paper; a usable batch
//! is its floor. Rows are ranked hottest first by their expected lookups per
//! sample, `L P(e)`, across tables: within a table that is the order of the
//! marginal benefit at any batch.

use rayon::prelude::*;
use serde::Serialize;

use crate::DlrmError;

/// One table's access distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDist {
    /// `P(e)` of every row that can be looked up (summing to 1).
    pub probs: Vec<f64>,
    /// Mean lookups of this table per sample (`L`).
    pub lookups_per_sample: f64,
}

impl TableDist {
    /// Every table's measured distribution in `profile`: the touched rows'
    /// shares of the table's lookups, and its lookups per profiled sample.
    pub fn from_profile(profile: &nmpsim_traces::hot::AccessProfile) -> Vec<TableDist> {
        profile
            .counts
            .iter()
            .zip(&profile.lookups)
            .map(|(c, &l)| TableDist {
                probs: c
                    .touched_counts()
                    .into_iter()
                    .map(|x| x as f64 / l.max(1) as f64)
                    .collect(),
                lookups_per_sample: l as f64 / profile.samples_seen.max(1) as f64,
            })
            .collect()
    }
}

/// The paper's three families of synthetic distributions (Sec. II-B), over
/// `rows` ranks with rank 1 the hottest. Their scale parameters are ours
/// (the paper gives none): the exponential's rate and the half-normal's
/// width are in units of the whole table, so that growing the table
/// stretches the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "family", rename_all = "kebab-case")]
pub enum Family {
    /// `P(r) ~ r^-alpha` (the paper: alpha 1).
    Zipf { alpha: f64 },
    /// `P(r) ~ exp(-rate (r - 1) / rows)`.
    Exponential { rate: f64 },
    /// `P(r) ~ exp(-((r - 1) / (width rows))^2 / 2)`.
    HalfNormal { width: f64 },
}

impl std::str::FromStr for Family {
    type Err = DlrmError;

    fn from_str(s: &str) -> Result<Self, DlrmError> {
        let bad = || {
            DlrmError::Config(format!(
                "unknown distribution `{s}`; expected zipf:ALPHA, exponential:RATE or half-normal:WIDTH (e.g. zipf:1, exponential:20, half-normal:0.05)"
            ))
        };
        let (name, v) = s.split_once(':').ok_or_else(bad)?;
        let v: f64 = v.parse().map_err(|_| bad())?;
        if !(v.is_finite() && v > 0.0) {
            return Err(DlrmError::Config(format!(
                "{s}: the parameter must be a positive number"
            )));
        }
        match name {
            "zipf" => Ok(Family::Zipf { alpha: v }),
            "exponential" | "exp" => Ok(Family::Exponential { rate: v }),
            "half-normal" | "halfnormal" => Ok(Family::HalfNormal { width: v }),
            _ => Err(bad()),
        }
    }
}

impl Family {
    /// The pmf over `rows` ranks, hottest first.
    pub fn pmf(self, rows: u64) -> Vec<f64> {
        let n = rows as f64;
        let w: Vec<f64> = (0..rows)
            .into_par_iter()
            .map(|i| {
                let r = i as f64;
                match self {
                    Family::Zipf { alpha } => (r + 1.0).powf(-alpha),
                    Family::Exponential { rate } => (-rate * r / n).exp(),
                    Family::HalfNormal { width } => (-0.5 * (r / (width * n)).powi(2)).exp(),
                }
            })
            .collect();
        let sum: f64 = w.iter().sum();
        w.into_par_iter().map(|x| x / sum).collect()
    }
}

/// Rows of equal probability, as one entry of the hottest-first order.
#[derive(Debug, Clone, Copy)]
struct Group {
    p: f64,
    /// Draws of this table per sample (`L`).
    lookups: f64,
    rows: u64,
}

impl Group {
    /// `u(x) = 1 - (1 - p)^(x L)`, the chance a batch of `x` samples looks it up.
    fn u(&self, x: f64) -> f64 {
        // ln_1p and exp_m1 keep precision for the tiny p of cold rows.
        -(x * self.lookups * (-self.p).ln_1p()).exp_m1()
    }
}

/// A cost model: the tables' distributions, the row size and the epoch.
#[derive(Debug, Clone)]
pub struct CostModel {
    /// Hottest first; rows of equal probability in one table share a group.
    groups: Vec<Group>,
    /// Rows before each group (prefix sums), and all of them at the end.
    before: Vec<u64>,
    /// `d`: parameters per row.
    pub row_params: f64,
    /// `Q`: samples per epoch.
    pub samples: f64,
    /// `sum_t L_t`: lookups per sample over all tables.
    pub lookups_per_sample: f64,
}

/// One cache size evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CachePoint {
    /// Rows cached (`|C|`), the hottest first.
    pub cached_rows: u64,
    /// The batch beside it (Eq. 7), real-valued.
    pub batch: f64,
    /// Expected unique rows of a batch outside the cache.
    pub unique_uncached: f64,
    /// Parameters per epoch: indices, embedding rows, and both (Eq. 6).
    pub index_params: f64,
    pub row_params: f64,
    pub total_params: f64,
}

/// The device's memory, as Eq. 7 takes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeviceMemory {
    /// `M`: parameters the device holds for the batch and the cache.
    pub params: f64,
    /// `a`: parameters one sample of the batch takes.
    pub per_sample: f64,
}

impl CostModel {
    /// A model of `tables` for rows of `row_params` parameters and epochs of
    /// `samples` samples.
    pub fn new(tables: &[TableDist], row_params: f64, samples: f64) -> Result<Self, DlrmError> {
        if tables.is_empty() {
            return Err(DlrmError::Config(
                "the cost model needs at least one table".into(),
            ));
        }
        for (name, v) in [("row parameters (d)", row_params), ("samples (Q)", samples)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(DlrmError::Config(format!(
                    "{name}: {v}; expected a positive number"
                )));
            }
        }
        let mut groups = Vec::new();
        for (t, d) in tables.iter().enumerate() {
            if !(d.lookups_per_sample.is_finite() && d.lookups_per_sample > 0.0) {
                return Err(DlrmError::Config(format!(
                    "table {t}: {} lookups per sample; expected a positive number",
                    d.lookups_per_sample
                )));
            }
            let sum: f64 = d.probs.iter().sum();
            if d.probs.iter().any(|&p| !(0.0..=1.0).contains(&p)) || (sum - 1.0).abs() > 1e-6 {
                return Err(DlrmError::Config(format!(
                    "table {t}: its probabilities sum to {sum}, or one lies outside [0, 1]; expected a distribution"
                )));
            }
            let mut probs: Vec<f64> = d.probs.iter().copied().filter(|&p| p > 0.0).collect();
            probs.par_sort_unstable_by(|a, b| b.total_cmp(a));
            for p in probs {
                match groups.last_mut() {
                    Some(Group {
                        p: q,
                        lookups,
                        rows,
                    }) if *q == p && *lookups == d.lookups_per_sample => *rows += 1,
                    _ => groups.push(Group {
                        p,
                        lookups: d.lookups_per_sample,
                        rows: 1,
                    }),
                }
            }
        }
        // Hottest first across tables: by expected lookups per sample.
        groups.par_sort_by(|a, b| (b.p * b.lookups).total_cmp(&(a.p * a.lookups)));
        let mut before = Vec::with_capacity(groups.len() + 1);
        let mut n = 0u64;
        for g in &groups {
            before.push(n);
            n += g.rows;
        }
        before.push(n);
        Ok(CostModel {
            groups,
            before,
            row_params,
            samples,
            lookups_per_sample: tables.iter().map(|t| t.lookups_per_sample).sum(),
        })
    }

    /// Rows that can be looked up (of positive probability).
    pub fn rows(&self) -> u64 {
        *self.before.last().unwrap_or(&0)
    }

    /// Expected unique rows of a batch of `batch` samples, the hottest
    /// `cached` rows left out (Eq. 2, over `E \ C`).
    pub fn unique(&self, batch: f64, cached: u64) -> f64 {
        let k = self
            .before
            .partition_point(|&b| b <= cached)
            .saturating_sub(1);
        let (first, tail) = match self.groups.get(k) {
            // The group `cached` falls in: its rows past the cache.
            Some(g) => (
                (self.before[k] + g.rows).saturating_sub(cached.max(self.before[k])) as f64
                    * g.u(batch),
                k + 1,
            ),
            None => (0.0, self.groups.len()),
        };
        // Fixed chunks summed in order: the same sum on any thread count.
        let parts: Vec<f64> = self.groups[tail.min(self.groups.len())..]
            .par_chunks(4096)
            .map(|c| c.iter().map(|g| g.rows as f64 * g.u(batch)).sum::<f64>())
            .collect();
        first + parts.iter().sum::<f64>()
    }

    /// An epoch's parameters without coalescing (Eq. 4): every lookup's row.
    pub fn epoch_uncoalesced(&self) -> f64 {
        self.samples * self.lookups_per_sample * self.row_params
    }

    /// An epoch at batch `batch` with the hottest `cached` rows on the device
    /// (Eq. 6; with `cached` 0, Eq. 5).
    pub fn epoch(&self, batch: f64, cached: u64) -> CachePoint {
        let unique = self.unique(batch, cached);
        let index_params = self.samples * self.lookups_per_sample;
        let row_params = self.samples / batch * unique * self.row_params;
        CachePoint {
            cached_rows: cached,
            batch,
            unique_uncached: unique,
            index_params,
            row_params,
            total_params: index_params + row_params,
        }
    }

    /// The largest batch beside a cache of `cached` rows (Eq. 7).
    pub fn batch_beside(&self, mem: DeviceMemory, cached: u64) -> f64 {
        (mem.params - cached as f64 * self.row_params) / mem.per_sample
    }

    /// The most rows a cache may hold and leave a batch of one sample.
    pub fn max_cached(&self, mem: DeviceMemory) -> u64 {
        let k = ((mem.params - mem.per_sample) / self.row_params).floor();
        if k <= 0.0 {
            0
        } else {
            (k as u64).min(self.rows())
        }
    }

    /// The epoch with the hottest `cached` rows cached and the batch Eq. 7 leaves.
    pub fn epoch_with_memory(&self, mem: DeviceMemory, cached: u64) -> CachePoint {
        self.epoch(self.batch_beside(mem, cached), cached)
    }

    /// The marginal rule (Eq. 11-12) for caching the next hottest row beside
    /// `cached` rows: `(benefit, t1)`, the chance a batch looks that row up
    /// and the threshold it must reach; caching it lowers the epoch's traffic
    /// exactly when `benefit >= t1`.
    pub fn marginal(&self, mem: DeviceMemory, cached: u64) -> (f64, f64) {
        let b = self.batch_beside(mem, cached);
        let b2 = self.batch_beside(mem, cached + 1);
        let k = self
            .before
            .partition_point(|&x| x <= cached)
            .saturating_sub(1);
        let benefit = self.groups.get(k).map_or(0.0, |g| g.u(b));
        // t1 over E \ C': every row past the next one.
        let t1 = (b * self.unique(b2, cached + 1) - b2 * self.unique(b, cached + 1)) / b2;
        (benefit, t1)
    }

    /// The cache size of least traffic by binary search on the sign of the
    /// traffic's change from one size to the next (`O(log |E|)` epochs).
    pub fn best_cache(&self, mem: DeviceMemory) -> Result<CachePoint, DlrmError> {
        let hi = self.usable(mem)?;
        // The first size from which one more row no longer lowers the traffic.
        let rises = |k: u64| {
            self.epoch_with_memory(mem, k + 1).total_params
                >= self.epoch_with_memory(mem, k).total_params
        };
        let (mut lo, mut hi) = (0u64, hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if rises(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(self.epoch_with_memory(mem, lo))
    }

    /// [`CostModel::best_cache`] by evaluating every size (for checks on
    /// small problems).
    pub fn best_cache_scan(&self, mem: DeviceMemory) -> Result<CachePoint, DlrmError> {
        let hi = self.usable(mem)?;
        let mut best = self.epoch_with_memory(mem, 0);
        for k in 1..=hi {
            let e = self.epoch_with_memory(mem, k);
            if e.total_params < best.total_params {
                best = e;
            }
        }
        Ok(best)
    }

    /// The largest cache to consider, or why the memory holds no batch.
    fn usable(&self, mem: DeviceMemory) -> Result<u64, DlrmError> {
        if !(mem.per_sample > 0.0 && mem.params.is_finite()) || mem.params < mem.per_sample {
            return Err(DlrmError::Config(format!(
                "the device's {} parameters hold no sample of {} parameters: no batch fits",
                mem.params, mem.per_sample
            )));
        }
        Ok(self.max_cached(mem))
    }
}

#[cfg(test)]
mod tests;
