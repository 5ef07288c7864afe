//! The scatter of coalesced gradients with an optimizer on the device: the
//! launch into a device-resident table and its state, the scatter into a
//! [`DeviceTable`], and the staged forms (coalesced gradients copied to and
//! from the device as [`DeviceCoalesced`]).

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};

use super::{
    CudaBackend, DeviceCoalesced, DeviceTable, K_SCATTER_SCALAR, K_SCATTER_VEC4, grid, lanes_for,
    source, vec_dim,
};
#[cfg(doc)]
use crate::backend::Backend;
use crate::coalesce::Coalesced;
use crate::cuda::driver_err;
use crate::error::KernelError;
use crate::optimizer::{Optimizer, check_coalesced};
use crate::traffic::{Traffic, scatter_traffic};

impl CudaBackend {
    /// Scatter of coalesced gradients on the device into device-resident
    /// table and state with `optimizer`.
    pub(super) fn launch_scatter(
        &self,
        d_table: &mut CudaSlice<f32>,
        d_state: &mut CudaSlice<f32>,
        grads: &DeviceCoalesced,
        optimizer: &Optimizer,
    ) -> Result<(), KernelError> {
        let (dim, unique) = (grads.dim, grads.unique);
        if unique == 0 {
            return Ok(());
        }
        let (kind, lr, eps, alpha) = match *optimizer {
            Optimizer::Sgd { lr } => (0i32, lr, 0.0f32, 0.0f32),
            Optimizer::Adagrad { lr, eps, .. } => (1, lr, eps, 0.0),
            Optimizer::RowWiseAdagrad { lr, eps } => (2, lr, eps, 0.0),
            Optimizer::RmsProp { lr, alpha, eps } => (3, lr, eps, alpha),
        };
        let (vec4, dimv) = vec_dim(dim);
        let (dim64, unique64) = (dim as u64, unique as u64);
        // One group of `lanes_for(dimv)` lanes per row, whole warps.
        let groups_per_warp = 32 / lanes_for(dimv as usize);
        launch!(
            self,
            if vec4 {
                K_SCATTER_VEC4
            } else {
                K_SCATTER_SCALAR
            },
            grid(unique64.div_ceil(groups_per_warp) * 32),
            d_table,
            d_state,
            &dimv,
            &dim64,
            &grads.rows,
            &grads.grads,
            &unique64,
            &kind,
            &lr,
            &eps,
            &alpha
        )
    }

    /// [`Backend::scatter_update`] on a device-resident table and state.
    pub fn scatter_update_resident(
        &self,
        dt: &mut DeviceTable,
        grads: &Coalesced,
        optimizer: &Optimizer,
    ) -> Result<Traffic, KernelError> {
        optimizer.validate()?;
        let dim = dt.dim;
        check_coalesced(grads, dt.rows, dim)?;
        let per_row = optimizer.state_values_per_row(dim);
        if per_row != dt.state_per_row {
            return Err(KernelError::shape(
                "optimizer state",
                format!("{} values per row on the device", dt.state_per_row),
                format!("{per_row} for {}", optimizer.name()),
            ));
        }
        let staged = self.stage_coalesced(grads)?;
        let traffic = self.scatter_update_staged(dt, &staged, optimizer)?;
        self.sync()?;
        Ok(traffic)
    }
}

/// Staged primitives: inputs are copied to the device by `stage_*` (checked
/// as the host-facing methods check them), the `*_staged` methods only
/// enqueue work on the stream (kernels and a memset: no host-device copy, no
/// allocation, no wait), and
/// results stay on the device until downloaded. The NMP pool emulation times
/// the kernels alone this way, as the pool would run them on data already in
/// its ranks.
impl CudaBackend {
    /// Copies coalesced gradients to the device (rows strictly ascending).
    pub fn stage_coalesced(&self, c: &Coalesced) -> Result<DeviceCoalesced, KernelError> {
        // The shared check, with no table yet to bound the rows.
        check_coalesced(c, u64::MAX, c.dim)?;
        let unique = c.rows.len();
        Ok(DeviceCoalesced {
            rows: self.upload(&c.rows)?,
            grads: self.upload(&c.grads)?,
            unique,
            dim: c.dim,
            host_rows: c.rows.clone(),
        })
    }

    /// Coalesced gradients back on the host.
    pub fn download_coalesced(&self, d: &DeviceCoalesced) -> Result<Coalesced, KernelError> {
        Ok(Coalesced {
            rows: d.host_rows.clone(),
            dim: d.dim,
            grads: self.download(&d.grads, d.unique * d.dim)?,
        })
    }

    /// Enqueues the scatter of device-resident coalesced gradients into `dt`.
    pub fn scatter_update_staged(
        &self,
        dt: &mut DeviceTable,
        grads: &DeviceCoalesced,
        optimizer: &Optimizer,
    ) -> Result<Traffic, KernelError> {
        optimizer.validate()?;
        let dim = dt.dim;
        if grads.dim != dim {
            return Err(KernelError::shape(
                "grads.dim",
                grads.dim,
                format!("the table's dim {dim}"),
            ));
        }
        // The rows were checked ascending when staged, so the last is the
        // largest: an O(1) bound check, nothing for the host to do while a
        // timed region runs.
        if let Some(&last) = grads.host_rows.last()
            && last as u64 >= dt.rows
        {
            return Err(KernelError::IndexOutOfRange {
                arg: "grads.rows",
                position: grads.unique - 1,
                value: last as u64,
                bound: dt.rows,
            });
        }
        let per_row = optimizer.state_values_per_row(dim);
        if per_row != dt.state_per_row {
            return Err(KernelError::shape(
                "optimizer state",
                format!("{} values per row on the device", dt.state_per_row),
                format!("{per_row} for {}", optimizer.name()),
            ));
        }
        let traffic = scatter_traffic(grads.unique, dim, per_row);
        self.launch_scatter(&mut dt.data, &mut dt.state, grads, optimizer)?;
        Ok(traffic)
    }
}
