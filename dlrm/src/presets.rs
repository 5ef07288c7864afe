//! Named models: Tensor Casting's RM1-RM4 (Table II), the DLRM reference's
//! Criteo-Kaggle configuration, and a tiny model for debugging and tests.
//! Each gives the architecture and the synthetic data that fits it.

use nmpsim_kernels::Pooling;
use nmpsim_traces::{BagSize, Distribution, GenSpec, ProfileOverrides, TableSpec, profile};
use serde::{Deserialize, Serialize};

use crate::{DlrmConfig, DlrmError, Interaction};

/// Rows per table of RM1-RM4 unless stated (the paper does not give one).
pub const RM_DEFAULT_ROWS: u64 = 1_000_000;
/// Default scale of the Criteo-Kaggle table sizes on this class of machine
/// (1.0 gives the full 33.8M rows).
pub const KAGGLE_DEFAULT_SCALE: f64 = 0.25;

/// A model and the shape of its synthetic data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Preset {
    pub name: String,
    pub description: String,
    pub config: DlrmConfig,
    /// Synthetic index batches for this model (batch size and seed are set
    /// by the trainer).
    pub data: GenSpec,
}

/// Adjustments of a preset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PresetOverrides {
    /// Rows of every RM table; for Criteo-Kaggle and tiny, a cap on every
    /// table's rows (after `rows_scale`).
    pub rows: Option<u64>,
    /// Multiplies the Criteo-Kaggle table sizes.
    pub rows_scale: Option<f64>,
    pub dim: Option<usize>,
    /// Lookups per bag of every table.
    pub lookups: Option<u32>,
    pub bottom: Option<Vec<usize>>,
    pub top: Option<Vec<usize>>,
    pub interaction: Option<Interaction>,
    /// Per-sample weights on every lookup (weighted-sum pooling).
    pub weighted: bool,
}

impl PresetOverrides {
    /// Only the table sizes overridden: `rows` and `rows_scale`.
    pub fn sized(rows: Option<u64>, rows_scale: Option<f64>) -> Self {
        PresetOverrides {
            rows,
            rows_scale,
            ..Default::default()
        }
    }
}

pub const NAMES: [&str; 6] = ["tiny", "rm1", "rm2", "rm3", "rm4", "criteo-kaggle"];

/// One line per preset.
pub fn describe() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "tiny",
            "3 tables (64/32/16 rows), dim 4, 2 lookups, 4-8-4 / 8-1: debugging and tests",
        ),
        (
            "rm1",
            "Tensor Casting RM1: 10 tables, 80 lookups, dim 64, 256-128-64 / 256-64-1",
        ),
        (
            "rm2",
            "Tensor Casting RM2: 40 tables, 80 lookups, dim 64, 256-128-64 / 512-128-1",
        ),
        (
            "rm3",
            "Tensor Casting RM3: 10 tables, 20 lookups, dim 64, 2560-512-64 / 512-128-1",
        ),
        (
            "rm4",
            "Tensor Casting RM4: 10 tables, 20 lookups, dim 64, 2560-1024-64 / 2048-2048-1024-1",
        ),
        (
            "criteo-kaggle",
            "DLRM reference Kaggle config: 26 tables (Kaggle sizes x 0.25), 1 lookup, dim 16, 13-512-256-64-16 / 512-256-1",
        ),
    ]
}

fn fixed_tables(rows: &[u64], dist: Distribution, bag: u32) -> Vec<TableSpec> {
    rows.iter()
        .map(|&rows| TableSpec {
            rows,
            distribution: dist.clone(),
            bag_size: BagSize::Fixed { size: bag },
            weighted: false,
        })
        .collect()
}

/// Whether `name` (any case) names the Criteo-Kaggle preset, the one whose
/// tables `rows_scale` scales.
pub fn is_kaggle(name: &str) -> bool {
    ["criteo-kaggle", "kaggle"]
        .iter()
        .any(|k| name.eq_ignore_ascii_case(k))
}

/// The preset `name` with `o` applied, validated.
pub fn preset(name: &str, o: &PresetOverrides) -> Result<Preset, DlrmError> {
    let key = name.to_ascii_lowercase();
    let (description, mut bottom, mut top, dim, mut data) = match key.as_str() {
        "tiny" => (
            "tiny debugging model",
            vec![4, 8, 4],
            vec![8, 1],
            4,
            GenSpec {
                tables: fixed_tables(&[64, 32, 16], Distribution::Uniform, 2),
                batch_size: 64,
                seed: 0,
            },
        ),
        "rm1" | "rm2" | "rm3" | "rm4" => {
            let (bottom, top): (Vec<usize>, Vec<usize>) = match key.as_str() {
                "rm1" => (vec![256, 128, 64], vec![256, 64, 1]),
                "rm2" => (vec![256, 128, 64], vec![512, 128, 1]),
                "rm3" => (vec![2560, 512, 64], vec![512, 128, 1]),
                _ => (vec![2560, 1024, 64], vec![2048, 2048, 1024, 1]),
            };
            let spec = profile(
                &key,
                &ProfileOverrides {
                    rows: Some(o.rows.unwrap_or(RM_DEFAULT_ROWS)),
                    bag_size: o.lookups,
                    ..Default::default()
                },
            )?;
            ("Tensor Casting Table II", bottom, top, 64, spec)
        }
        "criteo-kaggle" | "kaggle" => {
            let spec = profile(
                "criteo-kaggle",
                &ProfileOverrides {
                    // (`rows` caps the scaled tables below, as it caps tiny's.)
                    rows_scale: Some(o.rows_scale.unwrap_or(KAGGLE_DEFAULT_SCALE)),
                    bag_size: o.lookups,
                    ..Default::default()
                },
            )?;
            (
                "DLRM reference Criteo-Kaggle configuration",
                vec![13, 512, 256, 64, 16],
                vec![512, 256, 1],
                16,
                spec,
            )
        }
        _ => {
            return Err(DlrmError::Config(format!(
                "unknown model preset `{name}`; expected one of {}",
                NAMES.join(", ")
            )));
        }
    };
    if key == "tiny" {
        if let Some(l) = o.lookups {
            for t in &mut data.tables {
                t.bag_size = BagSize::Fixed { size: l };
            }
        }
    }
    if key == "tiny" || is_kaggle(&key) {
        if let Some(r) = o.rows {
            for t in &mut data.tables {
                t.rows = t.rows.min(r);
            }
            // As the profiles of the other presets check theirs: 0 rows is refused.
            nmpsim_traces::Generator::new(data.clone())?;
        }
    }
    if o.weighted {
        for t in &mut data.tables {
            t.weighted = true;
        }
    }
    let dim = o.dim.unwrap_or(dim);
    if let Some(b) = &o.bottom {
        bottom = b.clone();
    } else if o.dim.is_some() {
        *bottom.last_mut().expect("non-empty") = dim;
    }
    if let Some(t) = &o.top {
        top = t.clone();
    } else {
        // The paper's top MLPs list their first hidden width first; the
        // interaction width is prepended by the model.
    }
    let config = DlrmConfig {
        bottom,
        top,
        top_input: None,
        dim,
        table_rows: data.tables.iter().map(|t| t.rows).collect(),
        interaction: o.interaction.unwrap_or(Interaction::Dot),
        pooling: if o.weighted {
            Pooling::WeightedSum
        } else {
            Pooling::Sum
        },
    };
    config.validate()?;
    Ok(Preset {
        name: key,
        description: description.to_string(),
        config,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_resolve() {
        for n in NAMES {
            let p = preset(n, &PresetOverrides::sized(Some(1000), None)).unwrap();
            assert_eq!(p.config.table_rows.len(), p.data.tables.len(), "{n}");
        }
        let rm1 = preset("rm1", &PresetOverrides::default()).unwrap();
        assert_eq!(rm1.config.table_rows, vec![1_000_000; 10]);
        assert_eq!(rm1.config.top_arch(), vec![64 + 55, 256, 64, 1]);
        let k = preset("criteo-kaggle", &PresetOverrides::sized(None, Some(1.0))).unwrap();
        assert_eq!(k.config.top_arch()[0], 16 + 27 * 26 / 2);
        assert_eq!(k.config.table_rows.iter().sum::<u64>(), 33_762_577);
        // --rows caps every scaled Kaggle table, and never raises one.
        let capped = |rows, scale| {
            preset("kaggle", &PresetOverrides::sized(Some(rows), scale))
                .unwrap()
                .config
                .table_rows
        };
        let default_scale = preset("criteo-kaggle", &PresetOverrides::default())
            .unwrap()
            .config
            .table_rows;
        let c = capped(100_000, None);
        assert_eq!(c.iter().max(), Some(&100_000));
        for (c, d) in c.iter().zip(&default_scale) {
            assert_eq!(*c, (*d).min(100_000));
        }
        let c = capped(20_000_000, Some(0.001));
        assert_eq!(c[2], 10_131, "round(10,131,227 x 0.001), below the cap");
        assert!(c.iter().all(|&r| r <= 10_131));
        let e = preset("rm9", &PresetOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("rm9") && e.contains("criteo-kaggle"), "{e}");
        let e = preset(
            "rm1",
            &PresetOverrides {
                bottom: Some(vec![256, 32]),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bottom MLP output width 32"), "{e}");
    }

    #[test]
    fn zero_rows_are_refused_by_every_preset() {
        let zero = PresetOverrides::sized(Some(0), None);
        for n in ["tiny", "rm1"] {
            let e = preset(n, &zero).unwrap_err().to_string();
            assert!(
                e.contains("tables[0].rows") && e.contains("0 rows"),
                "{n}: {e}"
            );
        }
        let one = preset("tiny", &PresetOverrides::sized(Some(1), None)).unwrap();
        assert_eq!(one.config.table_rows, vec![1, 1, 1]);
    }
}
