//! Named, documented dataset-like generator profiles (`docs/profiles.md` has the
//! full table and sources). Each resolves to a [`GenSpec`]; overrides adjust batch
//! size, seed, bag size, rows, distribution and table count.
//!
//! The power-law profiles are models, not data: Tensor Casting's Fig. 5a histograms
//! are not published, so each dataset's largest table is modelled as Zipf with a
//! documented alpha and row count.

use crate::TraceError;
use crate::r#gen::{BagSize, Distribution, GenSpec, Generator, TableSpec};

/// A profile's name and one-line description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileInfo {
    pub name: &'static str,
    pub description: &'static str,
}

/// Adjustments applied on top of a profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileOverrides {
    pub batch_size: Option<usize>,
    pub seed: Option<u64>,
    /// Fixed lookups per bag for every table.
    pub bag_size: Option<u32>,
    /// The profile's largest tables are set to this many rows; smaller ones are capped at it.
    pub rows: Option<u64>,
    /// Multiplies every table's rows (after `rows`), rounding, at least 1 row.
    pub rows_scale: Option<f64>,
    /// Replaces every table's distribution.
    pub distribution: Option<Distribution>,
    /// Keeps the first N tables, cycling through the profile's tables if N is larger.
    pub tables: Option<usize>,
}

/// Default batch size of every profile (Tensor Casting's default; it also sweeps 2048 and 4096).
pub const DEFAULT_BATCH_SIZE: usize = 1024;

/// Criteo Kaggle (DAC) table sizes: distinct values per categorical feature C1..C26,
/// as counted by the DLRM reference over the day split.
pub const CRITEO_KAGGLE_ROWS: [u64; 26] = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
    5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
];

/// Zipf alpha of a Criteo Kaggle table: heavy-tailed IDs (>= 1000 values) get 1.05,
/// low-cardinality enum-like features 0.5 (flatter, as few values share the traffic).
pub fn criteo_alpha(rows: u64) -> f64 {
    if rows >= 1000 { 1.05 } else { 0.5 }
}

const PROFILES: [ProfileInfo; 9] = [
    ProfileInfo {
        name: "criteo-kaggle",
        description: "26 tables with the real Criteo Kaggle sizes (3 .. 10.1M rows), 1 lookup/bag, Zipf 1.05 (0.5 under 1000 real rows)",
    },
    ProfileInfo {
        name: "amazon-books",
        description: "model of Amazon Review (Books) largest table: 2.3M rows, Zipf 1.1, 10 lookups/bag (Fig. 5a stand-in)",
    },
    ProfileInfo {
        name: "movielens-20m",
        description: "model of MovieLens-20M largest table (users): 138,493 rows, Zipf 0.9, 10 lookups/bag (Fig. 5a stand-in)",
    },
    ProfileInfo {
        name: "taobao",
        description: "model of Taobao UserBehavior largest table (items): 4,162,024 rows, Zipf 1.2, 10 lookups/bag (Fig. 5a stand-in)",
    },
    ProfileInfo {
        name: "uniform",
        description: "1 table, 1M rows, uniform random, 10 lookups/bag (Fig. 5 'Random')",
    },
    ProfileInfo {
        name: "rm1",
        description: "Tensor Casting RM1: 10 tables x 1M rows, 80 lookups/bag, DLRM random data",
    },
    ProfileInfo {
        name: "rm2",
        description: "Tensor Casting RM2: 40 tables x 1M rows, 80 lookups/bag, DLRM random data",
    },
    ProfileInfo {
        name: "rm3",
        description: "Tensor Casting RM3: 10 tables x 1M rows, 20 lookups/bag, DLRM random data",
    },
    ProfileInfo {
        name: "rm4",
        description: "Tensor Casting RM4: 10 tables x 1M rows, 20 lookups/bag, DLRM random data",
    },
];

pub fn list_profiles() -> Vec<ProfileInfo> {
    PROFILES.to_vec()
}

fn zipf(alpha: f64) -> Distribution {
    Distribution::Zipf {
        alpha,
        scatter: true,
    }
}

fn tables(n: usize, rows: u64, distribution: Distribution, bag: u32) -> Vec<TableSpec> {
    let t = TableSpec {
        rows,
        distribution,
        bag_size: BagSize::Fixed { size: bag },
        weighted: false,
    };
    vec![t; n]
}

fn base_tables(name: &str) -> Option<Vec<TableSpec>> {
    const RM_ROWS: u64 = 1_000_000;
    Some(match name {
        "criteo-kaggle" => CRITEO_KAGGLE_ROWS
            .iter()
            .map(|&rows| TableSpec {
                rows,
                distribution: zipf(criteo_alpha(rows)),
                bag_size: BagSize::Fixed { size: 1 },
                weighted: false,
            })
            .collect(),
        "amazon-books" => tables(1, 2_330_066, zipf(1.1), 10),
        "movielens-20m" => tables(1, 138_493, zipf(0.9), 10),
        "taobao" => tables(1, 4_162_024, zipf(1.2), 10),
        "uniform" => tables(1, 1_000_000, Distribution::Uniform, 10),
        "rm1" => tables(10, RM_ROWS, Distribution::DlrmRandom, 80),
        "rm2" => tables(40, RM_ROWS, Distribution::DlrmRandom, 80),
        "rm3" => tables(10, RM_ROWS, Distribution::DlrmRandom, 20),
        "rm4" => tables(10, RM_ROWS, Distribution::DlrmRandom, 20),
        _ => return None,
    })
}

/// The [`GenSpec`] of profile `name` with `o` applied, validated.
pub fn profile(name: &str, o: &ProfileOverrides) -> Result<GenSpec, TraceError> {
    let mut ts = base_tables(name).ok_or_else(|| {
        let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
        TraceError::param(
            "profile",
            format!(
                "unknown profile '{name}'; valid names: {}",
                names.join(", ")
            ),
        )
    })?;
    if let Some(n) = o.tables {
        if n == 0 {
            return Err(TraceError::param("tables", "0; expected at least 1"));
        }
        ts = ts.iter().cycle().take(n).cloned().collect();
    }
    if let Some(r) = o.rows {
        let largest = ts.iter().map(|t| t.rows).max().unwrap_or(0);
        for t in &mut ts {
            t.rows = if t.rows == largest { r } else { t.rows.min(r) };
        }
    }
    if let Some(s) = o.rows_scale {
        if !(s.is_finite() && s > 0.0) {
            return Err(TraceError::param(
                "rows_scale",
                format!("{s}; expected a finite number > 0"),
            ));
        }
        for t in &mut ts {
            let scaled = (t.rows as f64 * s).round();
            if scaled > crate::format::MAX_TABLE_ROWS as f64 {
                return Err(TraceError::param(
                    "rows_scale",
                    format!(
                        "{s:e} scales a table of {} rows to {scaled:e}; row ids are u32, so at most 2^32",
                        t.rows
                    ),
                ));
            }
            t.rows = (scaled as u64).max(1);
        }
    }
    if let Some(b) = o.bag_size {
        ts.iter_mut()
            .for_each(|t| t.bag_size = BagSize::Fixed { size: b });
    }
    if let Some(d) = &o.distribution {
        ts.iter_mut().for_each(|t| t.distribution = d.clone());
    }
    let spec = GenSpec {
        tables: ts,
        batch_size: o.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
        seed: o.seed.unwrap_or(0),
    };
    Generator::new(spec.clone()).map_err(|e| match o.rows_scale {
        // The scaled rows are what the spec is refused for: name the scale.
        Some(s) => {
            let mut rows: Vec<u64> = spec.tables.iter().map(|t| t.rows).collect();
            rows.sort_unstable();
            rows.dedup();
            let rows: Vec<String> = rows.iter().map(u64::to_string).collect();
            TraceError::param(
                "rows_scale",
                format!(
                    "{} leaves tables of {} rows, and then {e}",
                    if (1e-4..1e6).contains(&s) {
                        s.to_string()
                    } else {
                        format!("{s:e}")
                    },
                    rows.join(", ")
                ),
            )
        }
        None => e,
    })?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_that_leaves_too_few_rows_is_named() {
        let o = ProfileOverrides {
            rows_scale: Some(1e-30),
            ..Default::default()
        };
        let e = profile("rm1", &o).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "invalid parameter `rows_scale`: 1e-30 leaves tables of 1 rows, and then"
            ) && e.contains("bag_size"),
            "{e}"
        );
    }

    #[test]
    fn every_listed_profile_resolves() {
        for p in list_profiles() {
            let s = profile(p.name, &ProfileOverrides::default()).unwrap();
            assert_eq!(s.batch_size, DEFAULT_BATCH_SIZE);
            assert!(!p.description.is_empty());
        }
        assert_eq!(
            profile("rm2", &ProfileOverrides::default())
                .unwrap()
                .tables
                .len(),
            40
        );
        assert_eq!(
            profile("rm3", &ProfileOverrides::default()).unwrap().tables[0].bag_size,
            BagSize::Fixed { size: 20 }
        );
    }

    #[test]
    fn criteo_kaggle_has_the_real_table_sizes() {
        let s = profile("criteo-kaggle", &ProfileOverrides::default()).unwrap();
        let rows: Vec<u64> = s.tables.iter().map(|t| t.rows).collect();
        assert_eq!(rows, CRITEO_KAGGLE_ROWS);
        assert_eq!(rows.iter().sum::<u64>(), 33_762_577);
        assert_eq!(s.tables[2].distribution, zipf(1.05));
        assert_eq!(s.tables[8].distribution, zipf(0.5));
    }

    #[test]
    fn overrides_apply() {
        let o = ProfileOverrides {
            batch_size: Some(8),
            seed: Some(3),
            bag_size: Some(2),
            rows: Some(1000),
            rows_scale: None,
            distribution: Some(Distribution::Uniform),
            tables: Some(3),
        };
        let s = profile("criteo-kaggle", &o).unwrap();
        assert_eq!((s.batch_size, s.seed, s.tables.len()), (8, 3, 3));
        assert_eq!(
            s.tables.iter().map(|t| t.rows).collect::<Vec<_>>(),
            vec![1000, 583, 1000]
        );
        assert!(
            s.tables
                .iter()
                .all(|t| t.distribution == Distribution::Uniform
                    && t.bag_size == BagSize::Fixed { size: 2 })
        );
        let s = profile(
            "rm1",
            &ProfileOverrides {
                rows: Some(4_000_000),
                tables: Some(12),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(s.tables.iter().all(|t| t.rows == 4_000_000) && s.tables.len() == 12);
        let s = profile(
            "uniform",
            &ProfileOverrides {
                rows_scale: Some(0.001),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(s.tables[0].rows, 1000);
    }

    #[test]
    fn bad_names_and_overrides_are_explained() {
        let refused = |name: &str, o: &ProfileOverrides| profile(name, o).unwrap_err().to_string();
        let e = refused("criteo", &ProfileOverrides::default());
        assert!(
            e.contains("unknown profile 'criteo'")
                && e.contains("criteo-kaggle")
                && e.contains("rm4"),
            "{e}"
        );
        let huge = ProfileOverrides {
            rows_scale: Some(1e20),
            ..Default::default()
        };
        let e = refused("uniform", &huge);
        assert!(
            e.contains("rows_scale") && e.contains("row ids are u32"),
            "{e}"
        );
        let bad = ProfileOverrides {
            rows_scale: Some(-1.0),
            ..Default::default()
        };
        assert!(refused("rm1", &bad).contains("rows_scale"));
        let bad = ProfileOverrides {
            batch_size: Some(0),
            ..Default::default()
        };
        assert!(refused("rm1", &bad).contains("batch_size"));
        // DLRM random bags are unique rows, so 80 cannot be drawn from 10 rows.
        let bad = ProfileOverrides {
            rows: Some(10),
            ..Default::default()
        };
        assert!(refused("rm1", &bad).contains("tables[0].bag_size"));
    }
}
