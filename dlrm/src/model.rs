//! The DLRM model: bottom MLP over dense features, sum-pooled embedding
//! bags, feature interaction, top MLP to one logit.

use nmpsim_kernels::{
    Coalesced, EmbeddingTable, Pooling, casted_gather_reduce, coalesce, expand, gather_reduce,
    tensor_cast,
};
use nmpsim_traces::Batch;
use serde::{Deserialize, Serialize};

use crate::interaction::Interaction;
use crate::mlp::{LinearGrad, Mlp, MlpCache};
use crate::{DlrmError, loss};

/// The architecture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DlrmConfig {
    /// Bottom MLP widths, dense features first (`13-512-256-64-16`); the last
    /// must equal `dim`.
    pub bottom: Vec<usize>,
    /// Top MLP widths after the interaction, ending in 1 (`512-256-1`); the
    /// interaction width is prepended, as the DLRM reference does.
    pub top: Vec<usize>,
    /// Input width of the top MLP if stated explicitly; must then equal the
    /// interaction's output width.
    pub top_input: Option<usize>,
    pub dim: usize,
    pub table_rows: Vec<u64>,
    pub interaction: Interaction,
    /// Pooling of the bags (sum, or weighted sum with per-sample weights).
    pub pooling: Pooling,
}

impl DlrmConfig {
    /// Checks that the pieces fit together.
    pub fn validate(&self) -> Result<(), DlrmError> {
        let err = |s: String| Err(DlrmError::Config(s));
        if self.bottom.len() < 2 {
            return err("bottom MLP needs at least an input and an output width".into());
        }
        if self.table_rows.is_empty() || self.table_rows.contains(&0) {
            return err("the model needs at least one embedding table, each with rows".into());
        }
        if self.dim == 0 {
            return err("embedding dimension must be at least 1".into());
        }
        let bot_out = *self.bottom.last().expect("len >= 2");
        if bot_out != self.dim {
            return err(format!(
                "bottom MLP output width {bot_out} must equal the embedding dimension {} (the interaction combines them)",
                self.dim
            ));
        }
        let inter = self
            .interaction
            .output_width(self.table_rows.len(), self.dim);
        if let Some(t) = self.top_input {
            if t != inter {
                return err(format!(
                    "top MLP input width {t} does not match the {:?} interaction's output width {inter} ({} tables, dim {})",
                    self.interaction,
                    self.table_rows.len(),
                    self.dim
                ));
            }
        }
        if self.top.last() != Some(&1) || self.top.contains(&0) {
            return err(format!(
                "top MLP must end in one output (the logit), found {:?}",
                self.top
            ));
        }
        if self.pooling == Pooling::Mean {
            return err("DLRM pools bags by sum (or weighted sum)".into());
        }
        Ok(())
    }

    /// Checks a batch against the architecture: table count, row ranges (a
    /// dataset whose values exceed the tables without hashing is refused
    /// here), dense width.
    pub fn check_batch(&self, batch: &Batch) -> Result<(), DlrmError> {
        let m = self;
        if batch.tables.len() != m.table_rows.len() {
            return Err(DlrmError::Config(format!(
                "the data has {} embedding tables (categorical features), the model {}",
                batch.tables.len(),
                m.table_rows.len()
            )));
        }
        for (t, (tb, &rows)) in batch.tables.iter().zip(&m.table_rows).enumerate() {
            if let Some((i, r)) = tb
                .indices
                .iter()
                .enumerate()
                .find(|(_, r)| **r as u64 >= rows)
            {
                return Err(DlrmError::Config(format!(
                    "table {t}: categorical value {r} (lookup {i} of the first batch) is past the table's {rows} rows; hash the values into the tables (--max-ind-range) or size the tables to the data"
                )));
            }
            if tb.num_rows > rows {
                return Err(DlrmError::Config(format!(
                    "table {t}: the data's table has {} rows, the model's {rows}; hash the values into the tables (--max-ind-range), or read the data for tables of the model's sizes",
                    tb.num_rows
                )));
            }
        }
        let want = m.bottom[0];
        if batch.num_dense != want
            || batch.dense.as_ref().map_or(0, Vec::len) != batch.batch_size() * want
        {
            return Err(DlrmError::Config(format!(
                "the data has {} dense features per sample, the bottom MLP takes {want}",
                batch.num_dense
            )));
        }
        if batch.labels.as_ref().map_or(0, Vec::len) != batch.batch_size() {
            return Err(DlrmError::Config(
                "the data has no labels to train on".into(),
            ));
        }
        Ok(())
    }

    /// Top MLP widths including its input.
    pub fn top_arch(&self) -> Vec<usize> {
        let mut v = vec![
            self.interaction
                .output_width(self.table_rows.len(), self.dim),
        ];
        v.extend(&self.top);
        v
    }
}

/// Parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Dlrm {
    pub config: DlrmConfig,
    pub bottom: Mlp,
    pub top: Mlp,
    pub tables: Vec<EmbeddingTable>,
}

/// What a forward pass keeps.
#[derive(Clone, Debug, Default)]
pub struct Forward {
    pub batch: usize,
    pub bottom_cache: MlpCache,
    pub top_cache: MlpCache,
    pub x: Vec<f32>,
    pub pooled: Vec<Vec<f32>>,
    pub logits: Vec<f32>,
}

/// Gradients of one step: dense layers, and per table the gradient of the
/// pooled output (`B x dim`), which a system mode turns into coalesced row
/// gradients.
#[derive(Clone, Debug)]
pub struct Grads {
    pub bottom: Vec<LinearGrad>,
    pub top: Vec<LinearGrad>,
    pub pooled: Vec<Vec<f32>>,
    pub loss: f64,
}

/// How the embedding gradient is coalesced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coalescing {
    /// Expand to one row per lookup, then sort and accumulate (Algorithm 1).
    ExpandCoalesce,
    /// Tensor Casting (Algorithms 2 and 3).
    Casted,
}

impl Dlrm {
    /// Initialised as the DLRM reference does: MLPs normal(0, sqrt(2/(m+n))),
    /// embeddings uniform in +-sqrt(1/rows).
    pub fn new(config: DlrmConfig, seed: u64) -> Result<Self, DlrmError> {
        config.validate()?;
        let bottom = Mlp::new(&config.bottom, true, seed ^ 0xb0);
        let top = Mlp::new(&config.top_arch(), false, seed ^ 0x70);
        let tables = config
            .table_rows
            .iter()
            .enumerate()
            .map(|(t, &r)| EmbeddingTable::seeded(r, config.dim, seed ^ (0xe0 + t as u64)))
            .collect::<Result<_, _>>()?;
        Ok(Dlrm {
            config,
            bottom,
            top,
            tables,
        })
    }

    /// Forward pass with the embedding gather-reduce on the CPU kernels.
    pub fn forward(&self, batch: &Batch) -> Result<Forward, DlrmError> {
        let b = batch.batch_size();
        let pooled = batch
            .tables
            .iter()
            .zip(&self.tables)
            .map(|(tb, table)| gather_reduce(table, tb, self.config.pooling).map(|(o, _)| o))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.forward_with(batch, pooled, b))
    }

    /// Forward pass from pooled embeddings computed elsewhere (e.g. the NMP pool).
    pub fn forward_with(&self, batch: &Batch, pooled: Vec<Vec<f32>>, b: usize) -> Forward {
        let mut f = Forward {
            batch: b,
            ..Default::default()
        };
        let dense = batch.dense.as_deref().unwrap_or(&[]);
        f.x = self.bottom.forward(dense, b, &mut f.bottom_cache);
        let z = self
            .config
            .interaction
            .forward(&f.x, &pooled, b, self.config.dim);
        f.logits = self.top.forward(&z, b, &mut f.top_cache);
        f.pooled = pooled;
        f
    }

    /// Loss and gradients of everything but the tables.
    pub fn backward(&self, f: &Forward, labels: &[f32]) -> Grads {
        let (loss, dlogits) = loss::bce_with_logits(&f.logits, labels);
        let (dz, top) = self.top.backward(&f.top_cache, &dlogits);
        let (dx, pooled) =
            self.config
                .interaction
                .backward(&f.x, &f.pooled, &dz, f.batch, self.config.dim);
        let (_, bottom) = self.bottom.backward(&f.bottom_cache, &dx);
        Grads {
            bottom,
            top,
            pooled,
            loss,
        }
    }

    /// Coalesced row gradients of table `t` from the pooled-output gradient.
    pub fn coalesce(
        &self,
        batch: &Batch,
        t: usize,
        dpooled: &[f32],
        how: Coalescing,
    ) -> Result<Coalesced, DlrmError> {
        let tb = &batch.tables[t];
        let dim = self.config.dim;
        Ok(match how {
            Coalescing::ExpandCoalesce => {
                let (e, _) = expand(dpooled, dim, tb, self.config.pooling)?;
                coalesce(&e, tb.num_rows)?.0
            }
            Coalescing::Casted => {
                let (c, _) = tensor_cast(tb, self.config.pooling)?;
                casted_gather_reduce(&c, dpooled, dim)?.0
            }
        })
    }

    /// Plain SGD on the dense layers.
    pub fn sgd_dense(&mut self, g: &Grads, lr: f32) {
        for (m, gs) in [(&mut self.bottom, &g.bottom), (&mut self.top, &g.top)] {
            for (l, gl) in m.layers.iter_mut().zip(gs) {
                for (w, d) in l.w.iter_mut().zip(&gl.w) {
                    *w -= lr * d;
                }
                for (b, d) in l.b.iter_mut().zip(&gl.b) {
                    *b -= lr * d;
                }
            }
        }
    }
}
