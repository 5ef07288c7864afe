//! The GPU-placed primitives of [`super::gpu_step`] on a real GPU
//! (`--device cuda`), in lockstep with the CPU kernels.
//!
//! Each primitive runs as the CUDA kernels of `nmpsim-kernels` on a stream of
//! its own, on exactly the inputs the CPU kernel gets: the tables it reads
//! are copied to the device first (their values as the host holds them
//! then), the batch and the gradients staged, and only the kernels are
//! timed, with CUDA events, as a GPU holding its rows would run them. The
//! time goes on the timeline as measured. The values the run goes on with
//! stay the CPU kernels' (so a run is bit-identical whatever its device),
//! and every CUDA result is checked against them: the pooled rows and the
//! coalesced gradients at every step, the scattered table at the first
//! scatter. A disagreement beyond [`TOLERANCE`] stops the run.

use std::sync::Arc;

use nmpsim_kernels::cuda::{CudaBackend, DeviceTable, DeviceTt, Gpu, driver_err};
use nmpsim_kernels::tt::{TtState, TtTable};
use nmpsim_kernels::{Coalesced, EmbeddingTable, Optimizer, OptimizerState, Pooling};
use nmpsim_traces::{Batch, TableBatch};

use crate::DlrmError;

/// Largest row-wise relative difference allowed between a CUDA result and
/// the CPU's: ten times the f32-against-f64 tolerance of the kernel checks
/// (`nmpsim_kernels::check::SUM_TOLERANCE`), both being f32 sums of the same
/// terms in different orders.
pub const TOLERANCE: f64 = 10.0 * nmpsim_kernels::check::SUM_TOLERANCE;

/// What the CUDA side ran and how close it came to the CPU's numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CudaCheck {
    /// Primitive calls run on the GPU (a call covers every table).
    pub calls: u64,
    /// Their kernels' time in all, milliseconds.
    pub kernel_ms: f64,
    /// Largest row-wise relative difference from the CPU: pooled rows,
    /// coalesced gradients, the first scatter's table.
    pub forward_err: f64,
    pub coalesce_err: f64,
    pub scatter_err: Option<f64>,
    /// EL-Rec's TT tables: calls of the TT forward and backward, the
    /// largest difference of the TT forward's pooled rows (the kernels
    /// follow the CPU's order, so 0 is expected), and of the cores after
    /// the first fused update (slice-wise relative, as tables row-wise).
    pub tt_calls: u64,
    pub tt_forward_err: f64,
    pub tt_update_err: Option<f64>,
}

/// The GPU that runs one strategy's GPU-placed primitives.
pub struct CudaStep {
    backend: CudaBackend,
    /// Device copies of the tables the last forward read (no optimizer
    /// state) and of those the last scatter wrote (with it), reused while
    /// the shapes stay.
    read: Vec<DeviceTable>,
    write: Vec<DeviceTable>,
    /// Device copies of the TT tables, by the model's table index, and
    /// whether each still equals the host's cores (a TT forward leaves them
    /// as it found them; the backward's update changes them).
    tt: Vec<Option<DeviceTt>>,
    tt_fresh: Vec<bool>,
    pub check: CudaCheck,
}

fn no_state(t: &EmbeddingTable) -> OptimizerState {
    OptimizerState {
        rows: t.rows,
        values_per_row: 0,
        values: Vec::new(),
    }
}

/// `held`, made to hold `tables` (and `states`): refreshed in place where
/// the shapes match, uploaded anew where not.
fn hold(
    backend: &CudaBackend,
    held: &mut Vec<DeviceTable>,
    tables: &[EmbeddingTable],
    states: Option<&[OptimizerState]>,
) -> Result<(), DlrmError> {
    held.truncate(tables.len());
    for (t, table) in tables.iter().enumerate() {
        let empty;
        let state = match states {
            Some(s) => &s[t],
            None => {
                empty = no_state(table);
                &empty
            }
        };
        let same = held.get(t).is_some_and(|d| {
            d.rows == table.rows && d.dim == table.dim && d.state_per_row == state.values_per_row
        });
        if same {
            backend
                .refresh_table(&mut held[t], table, state)
                .map_err(|e| e.in_table(t))?;
        } else {
            let d = backend
                .upload_table(table, state)
                .map_err(|e| e.in_table(t))?;
            if t < held.len() {
                held[t] = d;
            } else {
                held.push(d);
            }
        }
    }
    Ok(())
}

/// Fails when a CUDA result strays from the CPU's beyond [`TOLERANCE`].
fn agree(what: &str, table: usize, err: f64) -> Result<f64, DlrmError> {
    if err.is_finite() && err <= TOLERANCE {
        Ok(err)
    } else {
        Err(DlrmError::Config(format!(
            "--device cuda: table {table}: the GPU's {what} differs from the CPU's by {err:.3e} \
             (row-wise relative), over the tolerance {TOLERANCE:.0e}"
        )))
    }
}

impl CudaStep {
    /// A stream of its own on `gpu`, with the kernels compiled now (not in
    /// the first timed region).
    pub fn new(gpu: Arc<Gpu>) -> Result<Self, DlrmError> {
        let stream = gpu
            .ctx
            .new_stream()
            .map_err(driver_err("creating the GPU-side stream"))?;
        gpu.module(&nmpsim_kernels::cuda::SOURCES[0])?;
        Ok(CudaStep {
            backend: CudaBackend::with_stream(gpu, stream),
            read: Vec::new(),
            write: Vec::new(),
            tt: Vec::new(),
            tt_fresh: Vec::new(),
            check: CudaCheck::default(),
        })
    }

    fn timed(&mut self, ms: f64) -> f64 {
        self.check.calls += 1;
        self.check.kernel_ms += ms;
        ms * 1e6
    }

    /// The gather-reduce of every table of `rb` on `tables`' device copies,
    /// checked against the CPU's `pooled`: the kernels' nanoseconds.
    pub fn forward(
        &mut self,
        tables: &[EmbeddingTable],
        rb: &Batch,
        pooling: Pooling,
        pooled: &[Vec<f32>],
    ) -> Result<f64, DlrmError> {
        hold(&self.backend, &mut self.read, tables, None)?;
        let b = &self.backend;
        let mut staged = rb
            .tables
            .iter()
            .zip(&self.read)
            .enumerate()
            .map(|(t, (tb, dt))| b.stage_batch(dt, tb, pooling).map_err(|e| e.in_table(t)))
            .collect::<Result<Vec<_>, _>>()?;
        let read = &self.read;
        let ms = b.time_ms(|| {
            for (t, (dt, s)) in read.iter().zip(staged.iter_mut()).enumerate() {
                b.gather_reduce_staged(dt, s).map_err(|e| e.in_table(t))?;
            }
            Ok(())
        })?;
        for (t, (s, want)) in staged.iter().zip(pooled).enumerate() {
            let got = b.download_pooled(s).map_err(|e| e.in_table(t))?;
            let dim = tables[t].dim;
            let err = agree(
                "pooled rows",
                t,
                nmpsim_kernels::check::row_rel_err(&got, want, dim),
            )?;
            self.check.forward_err = self.check.forward_err.max(err);
        }
        Ok(self.timed(ms))
    }

    /// Expand and coalesce of every table's gradients `dpooled` for `rb`,
    /// checked against the CPU's `coalesced`: the kernels' nanoseconds.
    pub fn coalesce(
        &mut self,
        rb: &Batch,
        dpooled: &[Vec<f32>],
        pooling: Pooling,
        dim: usize,
        coalesced: &[Coalesced],
    ) -> Result<f64, DlrmError> {
        let mut ms = 0.0;
        for (t, (tb, g)) in rb.tables.iter().zip(dpooled).enumerate() {
            let (got, m) = self
                .backend
                .expand_coalesce_timed(g, dim, tb, pooling)
                .map_err(|e| e.in_table(t))?;
            ms += m;
            let want = &coalesced[t];
            if got.rows != want.rows {
                return Err(DlrmError::Config(format!(
                    "--device cuda: table {t}: the GPU's coalesce found {} unique rows where the \
                     CPU's found {} (or other rows)",
                    got.rows.len(),
                    want.rows.len()
                )));
            }
            let err = agree(
                "coalesced gradients",
                t,
                nmpsim_kernels::check::row_rel_err(&got.grads, &want.grads, dim),
            )?;
            self.check.coalesce_err = self.check.coalesce_err.max(err);
        }
        Ok(self.timed(ms))
    }

    /// Copies `tables` and `states` to the device before the CPU's scatter
    /// updates them, for [`Self::scatter`].
    pub fn before_scatter(
        &mut self,
        tables: &[EmbeddingTable],
        states: &[OptimizerState],
    ) -> Result<(), DlrmError> {
        hold(&self.backend, &mut self.write, tables, Some(states))
    }

    /// The optimizer's scatter of `coalesced` into the device copies
    /// [`Self::before_scatter`] made: the kernels' nanoseconds. The first
    /// call checks the whole updated tables against the CPU's (`after`).
    pub fn scatter(
        &mut self,
        after: &[EmbeddingTable],
        coalesced: &[Coalesced],
        optimizer: &Optimizer,
    ) -> Result<f64, DlrmError> {
        if self.write.len() != after.len() {
            return Err(DlrmError::Config(
                "--device cuda: a scatter without its tables on the device".into(),
            ));
        }
        let b = &self.backend;
        let staged = coalesced
            .iter()
            .enumerate()
            .map(|(t, c)| b.stage_coalesced(c).map_err(|e| e.in_table(t)))
            .collect::<Result<Vec<_>, _>>()?;
        let write = &mut self.write;
        let ms = b.time_ms(|| {
            for (t, (dt, c)) in write.iter_mut().zip(&staged).enumerate() {
                b.scatter_update_staged(dt, c, optimizer)
                    .map_err(|e| e.in_table(t))?;
            }
            Ok(())
        })?;
        if self.check.scatter_err.is_none() {
            let mut worst = 0.0f64;
            for (t, (dt, want)) in self.write.iter().zip(after).enumerate() {
                let mut got = EmbeddingTable::zeros(want.rows, want.dim)?;
                let mut state = OptimizerState {
                    rows: dt.rows,
                    values_per_row: dt.state_per_row,
                    values: vec![0.0; dt.rows as usize * dt.state_per_row],
                };
                b.download_table(dt, &mut got, &mut state)
                    .map_err(|e| e.in_table(t))?;
                let err = agree(
                    "scattered table",
                    t,
                    nmpsim_kernels::check::row_rel_err(&got.data, &want.data, want.dim),
                )?;
                worst = worst.max(err);
            }
            self.check.scatter_err = Some(worst);
        }
        Ok(self.timed(ms))
    }
}

impl CudaStep {
    /// Table `t`'s device copy, made to hold `table` and `state` as the
    /// host holds them now: copied unless it already does (the forward of
    /// this step copied them, and only the TT backward changes the cores).
    fn hold_tt(&mut self, t: usize, table: &TtTable, state: &TtState) -> Result<(), DlrmError> {
        if self.tt.len() <= t {
            self.tt.resize_with(t + 1, || None);
            self.tt_fresh.resize(t + 1, false);
        }
        if self.tt_fresh[t] {
            return Ok(());
        }
        self.tt_fresh[t] = true;
        let b = &self.backend;
        match &mut self.tt[t] {
            Some(d) if *d.shape() == table.shape => {
                b.refresh_tt(d, table, state).map_err(|e| e.in_table(t))?
            }
            slot => *slot = Some(b.upload_tt(table, state).map_err(|e| e.in_table(t))?),
        }
        Ok(())
    }

    /// EL-Rec's TT forward of table `t` (`tb`) on its cores as the host
    /// holds them, checked against the CPU's pooled rows `want`: the
    /// kernels' nanoseconds.
    #[allow(clippy::too_many_arguments)]
    pub fn tt_forward(
        &mut self,
        t: usize,
        table: &TtTable,
        state: &TtState,
        tb: &TableBatch,
        pooling: Pooling,
        reuse: bool,
        want: &[f32],
    ) -> Result<f64, DlrmError> {
        self.hold_tt(t, table, state)?;
        let d = self.tt[t].as_ref().expect("held");
        let (got, ms) = self
            .backend
            .tt_gather_reduce_timed(d, tb, pooling, reuse)
            .map_err(|e| e.in_table(t))?;
        let err = agree(
            "TT pooled rows",
            t,
            nmpsim_kernels::check::row_rel_err(&got, want, table.shape.dim),
        )?;
        self.check.tt_forward_err = self.check.tt_forward_err.max(err);
        self.check.tt_calls += 1;
        Ok(self.timed(ms))
    }

    /// EL-Rec's TT backward of table `t` with the update fused, on its
    /// cores as the host holds them before the CPU's update: the kernels'
    /// nanoseconds (the aggregation's included). [`Self::tt_after_update`]
    /// then checks the result.
    #[allow(clippy::too_many_arguments)]
    pub fn tt_backward(
        &mut self,
        t: usize,
        table: &TtTable,
        state: &TtState,
        tb: &TableBatch,
        grad: &[f32],
        pooling: Pooling,
        optimizer: &Optimizer,
    ) -> Result<f64, DlrmError> {
        self.hold_tt(t, table, state)?;
        // (Its update makes the device copy the GPU's, not the host's.)
        self.tt_fresh[t] = false;
        let d = self.tt[t].as_mut().expect("held");
        let ms = self
            .backend
            .tt_backward_update_timed(d, tb, grad, pooling, optimizer)
            .map_err(|e| e.in_table(t))?;
        self.check.tt_calls += 1;
        Ok(self.timed(ms))
    }

    /// The first time: table `t`'s cores on the device after
    /// [`Self::tt_backward`] against the CPU's updated `after`.
    pub fn tt_after_update(&mut self, t: usize, after: &TtTable) -> Result<(), DlrmError> {
        if self.check.tt_update_err.is_some() {
            return Ok(());
        }
        let Some(Some(d)) = self.tt.get(t) else {
            return Err(DlrmError::Config(
                "--device cuda: a TT update check without its table on the device".into(),
            ));
        };
        let (got, _) = self.backend.download_tt(d).map_err(|e| e.in_table(t))?;
        let mut worst = 0.0f64;
        for (k, (g, w)) in got.cores.iter().zip(&after.cores).enumerate() {
            let what = format!("TT core {k} after the update");
            // Slice-wise, as the scattered tables are compared row-wise.
            let err = nmpsim_kernels::check::row_rel_err(g, w, after.shape.slice_len(k));
            worst = worst.max(agree(&what, t, err)?);
        }
        self.check.tt_update_err = Some(worst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_over_the_tolerance_or_not_a_number_stops_the_run() {
        assert_eq!(agree("pooled rows", 0, 0.0).unwrap(), 0.0);
        assert_eq!(agree("pooled rows", 0, TOLERANCE).unwrap(), TOLERANCE);
        let e = agree("coalesced gradients", 2, 2.0 * TOLERANCE)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("table 2") && e.contains("coalesced gradients") && e.contains("2.000e-3"),
            "{e}"
        );
        assert!(agree("scattered table", 1, f64::NAN).is_err());
        assert!(agree("scattered table", 1, f64::INFINITY).is_err());
    }
}
