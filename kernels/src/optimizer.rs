//! Sparse optimizers and the gradient scatter that applies them.
//!
//! Semantics are lazy (sparse): a row that is not in the [`Coalesced`]
//! gradient keeps its weights *and* its optimizer state untouched, as in
//! PyTorch's sparse Adagrad and FBGEMM's fused embedding optimizers. (Dense
//! RMSprop would decay every row's accumulator every step; the sparse form only
//! decays the rows it touches.)

use nmpsim_traces::batch::{rows_below, strictly_ascending};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::coalesce::Coalesced;
use crate::error::KernelError;
use crate::gather::check_table;
use crate::shared::SharedMut;
use crate::table::EmbeddingTable;
use crate::traffic::{Traffic, scatter_traffic};
use crate::vecops::{prefetch_at, prefetch_distance};

/// An embedding optimizer, chosen by name in configs (`kind = "sgd"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Optimizer {
    /// `w -= lr * g`.
    Sgd { lr: f32 },
    /// Element-wise, as PyTorch: `a += g^2; w -= lr * g / (sqrt(a) + eps)`,
    /// `a` starting at `initial_accumulator`.
    Adagrad {
        lr: f32,
        eps: f32,
        initial_accumulator: f32,
    },
    /// One accumulator per row, as FBGEMM: `a += mean_k(g_k^2);
    /// w -= lr * g / (sqrt(a) + eps)`.
    RowWiseAdagrad { lr: f32, eps: f32 },
    /// The paper's Eq. 1: `a = alpha * a + (1 - alpha) * g^2;
    /// w -= lr * g / sqrt(eps + a)`.
    RmsProp { lr: f32, alpha: f32, eps: f32 },
}

/// An embedding optimizer's kind, as a command line or a config names it:
/// `sgd`, `adagrad`, `row-wise-adagrad` or `rms-prop` (also `rmsprop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerKind {
    Sgd,
    Adagrad,
    RowWiseAdagrad,
    RmsProp,
}

impl OptimizerKind {
    /// Every kind, in the order the help lists them.
    pub const ALL: [OptimizerKind; 4] = [
        OptimizerKind::Sgd,
        OptimizerKind::Adagrad,
        OptimizerKind::RowWiseAdagrad,
        OptimizerKind::RmsProp,
    ];

    /// The kind's name ([`Optimizer::name`]'s).
    pub fn name(self) -> &'static str {
        self.with_lr(0.0).name()
    }

    /// The optimizer of this kind with learning rate `lr` and the other
    /// hyper-parameters at their defaults (eps 1e-8, Adagrad's accumulator
    /// starting at 0, RMSprop's alpha 0.99). Not checked: see
    /// [`Optimizer::validate`].
    pub fn with_lr(self, lr: f32) -> Optimizer {
        match self {
            OptimizerKind::Sgd => Optimizer::Sgd { lr },
            OptimizerKind::Adagrad => Optimizer::Adagrad {
                lr,
                eps: 1e-8,
                initial_accumulator: 0.0,
            },
            OptimizerKind::RowWiseAdagrad => Optimizer::RowWiseAdagrad { lr, eps: 1e-8 },
            OptimizerKind::RmsProp => Optimizer::RmsProp {
                lr,
                alpha: 0.99,
                eps: 1e-8,
            },
        }
    }
}

impl std::str::FromStr for OptimizerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "rmsprop" {
            return Ok(OptimizerKind::RmsProp);
        }
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown optimizer '{s}'; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl std::fmt::Display for OptimizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Optimizer {
    /// A representative of each kind, for tests and checks.
    pub fn examples() -> [Optimizer; 4] {
        [
            Optimizer::Sgd { lr: 0.01 },
            Optimizer::Adagrad {
                lr: 0.01,
                eps: 1e-8,
                initial_accumulator: 0.0,
            },
            Optimizer::RowWiseAdagrad {
                lr: 0.01,
                eps: 1e-8,
            },
            Optimizer::RmsProp {
                lr: 0.01,
                alpha: 0.99,
                eps: 1e-8,
            },
        ]
    }

    /// The config name of the kind.
    pub fn name(&self) -> &'static str {
        match self {
            Optimizer::Sgd { .. } => "sgd",
            Optimizer::Adagrad { .. } => "adagrad",
            Optimizer::RowWiseAdagrad { .. } => "row-wise-adagrad",
            Optimizer::RmsProp { .. } => "rms-prop",
        }
    }

    /// The learning rate.
    pub fn lr(&self) -> f32 {
        match *self {
            Optimizer::Sgd { lr }
            | Optimizer::Adagrad { lr, .. }
            | Optimizer::RowWiseAdagrad { lr, .. }
            | Optimizer::RmsProp { lr, .. } => lr,
        }
    }

    /// The same optimizer with learning rate `lr` (for schedules).
    pub fn with_lr(mut self, new: f32) -> Self {
        match &mut self {
            Optimizer::Sgd { lr }
            | Optimizer::Adagrad { lr, .. }
            | Optimizer::RowWiseAdagrad { lr, .. }
            | Optimizer::RmsProp { lr, .. } => *lr = new,
        }
        self
    }

    /// f32 state values kept per table row.
    pub fn state_values_per_row(&self, dim: usize) -> usize {
        match self {
            Optimizer::Sgd { .. } => 0,
            Optimizer::RowWiseAdagrad { .. } => 1,
            Optimizer::Adagrad { .. } | Optimizer::RmsProp { .. } => dim,
        }
    }

    /// Checks the hyper-parameters.
    pub fn validate(&self) -> Result<(), KernelError> {
        let finite = |arg, v: f32| {
            if v.is_finite() {
                Ok(())
            } else {
                Err(KernelError::invalid(arg, format!("{v} is not finite")))
            }
        };
        let non_negative = |arg, v: f32| {
            finite(arg, v)?;
            if v >= 0.0 {
                Ok(())
            } else {
                Err(KernelError::invalid(arg, format!("{v}; expected >= 0")))
            }
        };
        match *self {
            Optimizer::Sgd { lr } => non_negative("lr", lr),
            Optimizer::Adagrad {
                lr,
                eps,
                initial_accumulator,
            } => {
                non_negative("lr", lr)?;
                non_negative("eps", eps)?;
                non_negative("initial_accumulator", initial_accumulator)
            }
            Optimizer::RowWiseAdagrad { lr, eps } => {
                non_negative("lr", lr)?;
                non_negative("eps", eps)
            }
            Optimizer::RmsProp { lr, alpha, eps } => {
                non_negative("lr", lr)?;
                non_negative("eps", eps)?;
                if !(0.0..=1.0).contains(&alpha) {
                    return Err(KernelError::invalid(
                        "alpha",
                        format!("{alpha}; expected in [0, 1]"),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// Optimizer state for one table: `values_per_row` f32 per row, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizerState {
    pub rows: u64,
    pub values_per_row: usize,
    pub values: Vec<f32>,
}

impl OptimizerState {
    /// Fresh state for `optimizer` on a `rows x dim` table.
    pub fn new(optimizer: &Optimizer, rows: u64, dim: usize) -> Result<Self, KernelError> {
        optimizer.validate()?;
        crate::error::check_dim(dim)?;
        let per_row = optimizer.state_values_per_row(dim);
        let len = usize::try_from(rows)
            .ok()
            .and_then(|r| r.checked_mul(per_row))
            .ok_or_else(|| {
                KernelError::invalid(
                    "rows",
                    format!("{rows} rows of optimizer state do not fit in memory"),
                )
            })?;
        let init = match *optimizer {
            Optimizer::Adagrad {
                initial_accumulator,
                ..
            } => initial_accumulator,
            _ => 0.0,
        };
        Ok(OptimizerState {
            rows,
            values_per_row: per_row,
            values: {
                // Read before written at every touched row: faulted in now,
                // not inside the first scatters (see `zeroed_faulted`).
                let mut v = crate::table::zeroed_faulted(len);
                if init != 0.0 {
                    v.fill(init);
                }
                v
            },
        })
    }

    /// Size of the state in bytes.
    pub fn bytes(&self) -> u64 {
        self.values.len() as u64 * 4
    }
}

/// Coalesced gradients fit a table of `rows` x `dim`: their width, their
/// length, and rows in range and strictly ascending.
pub(crate) fn check_coalesced(grads: &Coalesced, rows: u64, dim: usize) -> Result<(), KernelError> {
    if grads.dim != dim {
        return Err(KernelError::shape(
            "grads.dim",
            grads.dim,
            format!("the table's dim {dim}"),
        ));
    }
    if grads.grads.len() != grads.rows.len() * dim {
        return Err(KernelError::shape(
            "grads.grads",
            grads.grads.len(),
            format!("rows.len() x dim = {} x {dim}", grads.rows.len()),
        ));
    }
    check_coalesced_rows(&grads.rows, rows)
}

/// Coalesced rows must be below `rows` and strictly ascending.
pub(crate) fn check_coalesced_rows(list: &[u32], rows: u64) -> Result<(), KernelError> {
    // Branch-free passes (they vectorise); the loop below names an offender.
    if rows_below(list, rows) && strictly_ascending(list) {
        return Ok(());
    }
    for (i, &r) in list.iter().enumerate() {
        if r as u64 >= rows {
            return Err(KernelError::IndexOutOfRange {
                arg: "grads.rows",
                position: i,
                value: r as u64,
                bound: rows,
            });
        }
        if i > 0 && r <= list[i - 1] {
            return Err(KernelError::invalid(
                "grads.rows",
                format!(
                    "rows[{i}] = {r} after {}; expected strictly ascending",
                    list[i - 1]
                ),
            ));
        }
    }
    Ok(())
}

/// Checks everything [`scatter_update`] relies on; shared with the reference.
/// Returns the table's dim and the state's values per row.
pub(crate) fn check_scatter(
    table: &EmbeddingTable,
    state: &OptimizerState,
    grads: &Coalesced,
    optimizer: &Optimizer,
) -> Result<(usize, usize), KernelError> {
    optimizer.validate()?;
    check_table(table)?;
    let dim = table.dim;
    check_coalesced(grads, table.rows, dim)?;
    let per_row = optimizer.state_values_per_row(dim);
    if state.values_per_row != per_row
        || state.rows != table.rows
        || state.values.len() as u128 != table.rows as u128 * per_row as u128
    {
        return Err(KernelError::shape(
            "state",
            format!(
                "{} rows x {} values ({} in all)",
                state.rows,
                state.values_per_row,
                state.values.len()
            ),
            format!(
                "{} rows x {per_row} values for {}",
                table.rows,
                optimizer.name()
            ),
        ));
    }
    Ok((dim, per_row))
}

/// Updated rows per scatter task. Prefetching runs within a task, so its
/// first rows wait for DRAM: large tasks keep that start-up rare, and 2048
/// rows still split an RM1 step's ~150K touched rows into ~75 tasks.
const SCATTER_ROWS_PER_TASK: usize = 2048;

/// Applies `grads` to `table` with `optimizer`, updating `state`. Rows are
/// independent, so they update in parallel; each row's arithmetic is
/// sequential, so the result is the same for any thread count.
pub fn scatter_update(
    table: &mut EmbeddingTable,
    state: &mut OptimizerState,
    grads: &Coalesced,
    optimizer: &Optimizer,
) -> Result<Traffic, KernelError> {
    let (dim, per_row) = check_scatter(table, state, grads, optimizer)?;
    // Each task writes only the rows of its own slice of the coalesced rows,
    // which are strictly ascending, so no two tasks touch one value.
    let (weights, states) = (
        SharedMut::new(&mut table.data),
        SharedMut::new(&mut state.values),
    );
    let opt = *optimizer;
    // Rows ahead, into L2: as many lines in flight as the forward keeps (a
    // row and its state each).
    let ahead = prefetch_distance(dim + per_row);
    let update = |rows: &[u32], gs: &[f32]| {
        for (k, &r) in rows.iter().enumerate() {
            // The touched rows are scattered over the table: fetch the rows
            // a few updates ahead so their misses overlap.
            if let Some(&next) = rows.get(k + ahead) {
                prefetch_at(weights.hint_at(next as usize * dim), dim);
                prefetch_at(states.hint_at(next as usize * per_row), per_row);
            }
            // SAFETY: `check_scatter` found every row below the table's
            // rows, and the table and state hold `rows * dim` and
            // `rows * per_row` values; the rows are strictly ascending, so
            // row `r` is this task's alone, and no other reference to the
            // arrays lives while the tasks run (both are borrowed mutably
            // by the wrappers).
            let r = r as usize;
            let (w, a) = unsafe {
                (
                    weights.slice(r * dim, dim),
                    states.slice(r * per_row, per_row),
                )
            };
            update_row(&opt, w, a, &gs[k * dim..(k + 1) * dim]);
        }
    };
    let n = grads.rows.len();
    if n <= SCATTER_ROWS_PER_TASK {
        // One task: on this thread (a pool hand-off costs a wake-up).
        update(&grads.rows, &grads.grads);
    } else {
        grads
            .rows
            .par_chunks(SCATTER_ROWS_PER_TASK)
            .zip(grads.grads.par_chunks(dim * SCATTER_ROWS_PER_TASK))
            .for_each(|(rows, gs)| update(rows, gs));
    }
    Ok(scatter_traffic(n, dim, per_row))
}

#[inline]
pub(crate) fn update_row(opt: &Optimizer, w: &mut [f32], a: &mut [f32], g: &[f32]) {
    match *opt {
        Optimizer::Sgd { lr } => {
            for (w, g) in w.iter_mut().zip(g) {
                *w -= lr * g;
            }
        }
        Optimizer::Adagrad { lr, eps, .. } => {
            for ((w, a), g) in w.iter_mut().zip(a.iter_mut()).zip(g) {
                *a += g * g;
                *w -= lr * g / (a.sqrt() + eps);
            }
        }
        Optimizer::RowWiseAdagrad { lr, eps } => {
            let mean_sq = g.iter().map(|g| g * g).sum::<f32>() / g.len() as f32;
            a[0] += mean_sq;
            let step = lr / (a[0].sqrt() + eps);
            for (w, g) in w.iter_mut().zip(g) {
                *w -= step * g;
            }
        }
        Optimizer::RmsProp { lr, alpha, eps } => {
            for ((w, a), g) in w.iter_mut().zip(a.iter_mut()).zip(g) {
                *a = alpha * *a + (1.0 - alpha) * g * g;
                *w -= lr * g / (eps + *a).sqrt();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Optimizer, OptimizerKind};

    #[test]
    fn every_kind_reads_back_from_its_name_and_others_are_refused_with_the_names() {
        for k in OptimizerKind::ALL {
            assert_eq!(k.name().parse::<OptimizerKind>(), Ok(k));
            assert_eq!(k.with_lr(0.5).lr(), 0.5);
            k.with_lr(0.5).validate().unwrap();
        }
        assert_eq!("rmsprop".parse(), Ok(OptimizerKind::RmsProp));
        let e = "lamb".parse::<OptimizerKind>().unwrap_err();
        assert_eq!(
            e,
            "unknown optimizer 'lamb'; expected one of sgd, adagrad, row-wise-adagrad, rms-prop"
        );
    }

    #[test]
    fn a_negative_or_non_finite_learning_rate_is_refused() {
        for lr in [-0.1f32, f32::NAN, f32::INFINITY] {
            for o in [
                Optimizer::Sgd { lr },
                Optimizer::RowWiseAdagrad { lr, eps: 1e-8 },
                Optimizer::RmsProp {
                    lr,
                    alpha: 0.99,
                    eps: 1e-8,
                },
                Optimizer::Adagrad {
                    lr,
                    eps: 1e-8,
                    initial_accumulator: 0.0,
                },
            ] {
                let e = o.validate().unwrap_err().to_string();
                assert!(e.contains("lr"), "{o:?}: {e}");
            }
        }
        assert!(Optimizer::Sgd { lr: 0.0 }.validate().is_ok());
    }
}
