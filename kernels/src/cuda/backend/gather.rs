//! The forward gather-reduce on the device: the launch over device arrays
//! (also used by the bench), on a device-resident table, and the staged
//! forms, one table at a time or every table of a batch in one launch (as
//! the NMP pool emulation runs its forward).

use cudarc::driver::{
    CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use nmpsim_traces::TableBatch;

use super::{
    BLOCK, CudaBackend, DeviceTable, GR_DESC, GR_WARPS, K_GATHER_SCALAR, K_GATHER_TABLES_SCALAR,
    K_GATHER_TABLES_VEC4, K_GATHER_VEC4, MAX_BLOCKS, StagedBatch, StagedTables, grid, pooling_mode,
    source, vec_dim,
};
#[cfg(doc)]
use crate::backend::Backend;
use crate::cuda::driver_err;
use crate::error::KernelError;
use crate::gather::check_lookups;
use crate::pooling::Pooling;
use crate::traffic::{Traffic, gather_reduce_traffic};

impl CudaBackend {
    /// Forward gather-reduce of device arrays into `out` (`bags x dim`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_gather_reduce(
        &self,
        table: &CudaSlice<f32>,
        dim: usize,
        indices: &CudaSlice<u32>,
        offsets: &CudaSlice<u32>,
        weights: &CudaSlice<f32>,
        bags: usize,
        pooling: Pooling,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), KernelError> {
        if bags == 0 {
            return Ok(());
        }
        let (vec4, dimv) = vec_dim(dim);
        let bags64 = bags as u64;
        let mode = pooling_mode(pooling);
        let name = if vec4 { K_GATHER_VEC4 } else { K_GATHER_SCALAR };
        // GR_WARPS warps per bag.
        launch!(
            self,
            name,
            grid(bags64 * 32 * GR_WARPS),
            table,
            &dimv,
            indices,
            offsets,
            weights,
            &bags64,
            &mode,
            out
        )
    }

    /// [`Backend::gather_reduce`] on a device-resident table: only the batch
    /// goes to the device and only the pooled rows come back.
    pub fn gather_reduce_resident(
        &self,
        dt: &DeviceTable,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Vec<f32>, Traffic), KernelError> {
        let mut staged = self.stage_batch(dt, batch, pooling)?;
        let traffic = staged.traffic();
        if staged.bags == 0 {
            return Ok((Vec::new(), traffic));
        }
        self.gather_reduce_staged(dt, &mut staged)?;
        Ok((self.download_pooled(&staged)?, traffic))
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
    /// Copies a table's batch to the device for a gather-reduce on `dt`.
    pub fn stage_batch(
        &self,
        dt: &DeviceTable,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<StagedBatch, KernelError> {
        check_lookups(batch, pooling, dt.rows)?;
        let bags = batch.batch_size();
        let traffic = gather_reduce_traffic(
            batch.num_lookups(),
            bags,
            dt.dim,
            pooling == Pooling::WeightedSum,
        );
        let weights = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => self.upload(w)?,
            _ => self.zeros::<f32>(1)?,
        };
        Ok(StagedBatch {
            indices: self.upload(&batch.indices)?,
            offsets: self.upload(&batch.offsets)?,
            weights,
            out: self.zeros::<f32>(bags * dt.dim)?,
            bags,
            dim: dt.dim,
            rows: dt.rows,
            pooling,
            traffic,
        })
    }

    /// Enqueues the gather-reduce of a staged batch on `dt`.
    pub fn gather_reduce_staged(
        &self,
        dt: &DeviceTable,
        s: &mut StagedBatch,
    ) -> Result<(), KernelError> {
        if dt.rows != s.rows || dt.dim != s.dim {
            return Err(KernelError::shape(
                "table",
                format!("{} x {}", dt.rows, dt.dim),
                format!("the staged batch's {} x {}", s.rows, s.dim),
            ));
        }
        self.launch_gather_reduce(
            &dt.data, s.dim, &s.indices, &s.offsets, &s.weights, s.bags, s.pooling, &mut s.out,
        )
    }

    /// The pooled rows of a staged batch (`bags x dim`), on the host.
    pub fn download_pooled(&self, s: &StagedBatch) -> Result<Vec<f32>, KernelError> {
        self.download(&s.out, s.bags * s.dim)
    }

    /// Copies every table's batch to the device for one table-batched
    /// gather-reduce on `tables` (one batch per table). Errors name the
    /// table.
    pub fn stage_tables(
        &self,
        tables: &[&DeviceTable],
        batches: &[TableBatch],
        pooling: Pooling,
    ) -> Result<StagedTables, KernelError> {
        if tables.len() != batches.len() {
            return Err(KernelError::shape(
                "batches",
                batches.len(),
                format!("one per table ({})", tables.len()),
            ));
        }
        let staged = tables
            .iter()
            .zip(batches)
            .enumerate()
            .map(|(t, (dt, b))| self.stage_batch(dt, b, pooling).map_err(|e| e.in_table(t)))
            .collect::<Result<Vec<_>, _>>()?;
        // One launch needs one row length; tables of mixed dims get one
        // launch each.
        let one_dim = staged.windows(2).all(|w| w[0].dim == w[1].dim);
        let (desc, desc_host) = if one_dim && !staged.is_empty() {
            let mut host = Vec::with_capacity(staged.len() * GR_DESC);
            for (dt, s) in tables.iter().zip(&staged) {
                host.extend(self.descriptor(dt, s));
            }
            (Some(self.upload(&host)?), host)
        } else {
            (None, Vec::new())
        };
        Ok(StagedTables {
            batches: staged,
            desc,
            desc_host,
        })
    }

    /// The kernel's descriptor of one table's staged batch (`GR_DESC`
    /// values). The pointers are those of the device allocations, which do
    /// not move while the slices live.
    fn descriptor(&self, dt: &DeviceTable, s: &StagedBatch) -> [u64; GR_DESC] {
        let st = &self.stream;
        [
            dt.data.device_ptr(st).0,
            s.indices.device_ptr(st).0,
            s.offsets.device_ptr(st).0,
            s.weights.device_ptr(st).0,
            s.out.device_ptr(st).0,
            s.bags as u64,
        ]
    }

    /// Enqueues the gather-reduce of every staged table in one launch (one
    /// per table when their dims differ). `tables` must be those it was
    /// staged for, in the same order. Each table's pooled rows equal
    /// [`Self::gather_reduce_staged`]'s bit for bit.
    pub fn gather_reduce_tables_staged(
        &self,
        tables: &[&DeviceTable],
        s: &mut StagedTables,
    ) -> Result<(), KernelError> {
        if tables.len() != s.batches.len() {
            return Err(KernelError::shape(
                "tables",
                tables.len(),
                format!("the {} staged", s.batches.len()),
            ));
        }
        for (t, (dt, b)) in tables.iter().zip(&s.batches).enumerate() {
            if dt.rows != b.rows || dt.dim != b.dim {
                return Err(KernelError::shape(
                    "table",
                    format!("{} x {}", dt.rows, dt.dim),
                    format!("the staged batch's {} x {}", b.rows, b.dim),
                )
                .in_table(t));
            }
        }
        let Some(desc) = &s.desc else {
            for (t, (dt, b)) in tables.iter().zip(s.batches.iter_mut()).enumerate() {
                self.gather_reduce_staged(dt, b)
                    .map_err(|e| e.in_table(t))?;
            }
            return Ok(());
        };
        let first = &s.batches[0];
        let (vec4, dimv) = vec_dim(first.dim);
        let mode = pooling_mode(first.pooling);
        let max_bags = s.batches.iter().map(|b| b.bags).max().unwrap_or(0) as u64;
        if max_bags == 0 {
            return Ok(());
        }
        let n = s.batches.len() as u64;
        // Each table gets the blocks a launch of its own would have (the
        // largest table's), fewer when that many tables would pass the grid
        // cap; the kernels stride over any count.
        let per_table =
            u64::from(grid(max_bags * 32 * GR_WARPS).grid_dim.0).min((MAX_BLOCKS / n).max(1));
        let blocks = u32::try_from(per_table * n).map_err(|_| {
            KernelError::invalid("tables", format!("{n} tables are too many for one launch"))
        })?;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // The kernel reaches the buffers through `desc`: take each one as
        // a launch argument would (waiting for writers on other streams,
        // recording this launch's reads and writes), and check that the
        // descriptors still name them.
        let st = &self.stream;
        let mut guards = Vec::with_capacity(s.batches.len() * (GR_DESC - 1));
        for (t, (dt, b)) in tables.iter().zip(s.batches.iter_mut()).enumerate() {
            let (table, g0) = dt.data.device_ptr(st);
            let (indices, g1) = b.indices.device_ptr(st);
            let (offsets, g2) = b.offsets.device_ptr(st);
            let (weights, g3) = b.weights.device_ptr(st);
            let (out, g4) = b.out.device_ptr_mut(st);
            guards.extend([g0, g1, g2, g3, g4]);
            let want = &s.desc_host[t * GR_DESC..(t + 1) * GR_DESC];
            if [table, indices, offsets, weights, out] != want[..GR_DESC - 1] {
                return Err(KernelError::invalid(
                    "tables",
                    "not the tables these batches were staged for",
                )
                .in_table(t));
            }
        }
        let name = if vec4 {
            K_GATHER_TABLES_VEC4
        } else {
            K_GATHER_TABLES_SCALAR
        };
        let result = launch!(self, name, cfg, desc, &n, &per_table, &dimv, &mode);
        drop(guards);
        result
    }

    /// The pooled rows of every staged table (`bags x dim` each), on the
    /// host.
    pub fn download_pooled_tables(&self, s: &StagedTables) -> Result<Vec<Vec<f32>>, KernelError> {
        s.batches
            .iter()
            .enumerate()
            .map(|(t, b)| self.download_pooled(b).map_err(|e| e.in_table(t)))
            .collect()
    }
}
