//! Device-resident storage of the CUDA backend, kept apart from its kernels:
//! an embedding table and its optimizer state on the device
//! ([`DeviceTable`]) with its copies to and from the host, and the staged
//! types, a primitive's inputs and results kept on the device between calls
//! ([`StagedBatch`], [`StagedTables`], [`DeviceCoalesced`],
//! [`StagedCasted`]). The `stage_*` methods that fill them and the
//! `*_staged` methods that run on them are with their primitives
//! (`gather.rs`, `cast.rs`, `scatter.rs`).

use cudarc::driver::CudaSlice;

use super::CudaBackend;
use super::coalesce::ChunkScratch;
use crate::error::{KernelError, check_dim};
use crate::optimizer::OptimizerState;
use crate::pooling::Pooling;
use crate::table::EmbeddingTable;
use crate::traffic::Traffic;

/// An embedding table and its optimizer state kept on the device between
/// calls, as the NMP pool keeps its tables: only indices and gradients move.
pub struct DeviceTable {
    pub rows: u64,
    pub dim: usize,
    /// Optimizer state values per row (0 for SGD).
    pub state_per_row: usize,
    pub(super) data: CudaSlice<f32>,
    pub(super) state: CudaSlice<f32>,
}

impl DeviceTable {
    pub(crate) fn data(&self) -> &CudaSlice<f32> {
        &self.data
    }

    /// Whether `table` and `state` have this device table's shape.
    fn check_shape(
        &self,
        table: &EmbeddingTable,
        state: &OptimizerState,
    ) -> Result<(), KernelError> {
        if table.rows != self.rows || table.dim != self.dim {
            return Err(KernelError::shape(
                "table",
                format!("{} x {}", table.rows, table.dim),
                format!("the device table's {} x {}", self.rows, self.dim),
            ));
        }
        if state.values_per_row != self.state_per_row || state.rows != self.rows {
            return Err(KernelError::shape(
                "state",
                format!("{} rows x {}", state.rows, state.values_per_row),
                format!("{} rows x {}", self.rows, self.state_per_row),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for DeviceTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTable")
            .field("rows", &self.rows)
            .field("dim", &self.dim)
            .field("state_per_row", &self.state_per_row)
            .finish()
    }
}

impl CudaBackend {
    /// Copies `table` and `state` to the device.
    pub fn upload_table(
        &self,
        table: &EmbeddingTable,
        state: &OptimizerState,
    ) -> Result<DeviceTable, KernelError> {
        check_dim(table.dim)?;
        if state.rows != table.rows {
            return Err(KernelError::shape(
                "state.rows",
                state.rows,
                format!("the table's {} rows", table.rows),
            ));
        }
        let data = self.upload(&table.data)?;
        let st = self.upload(&state.values)?;
        self.sync()?;
        Ok(DeviceTable {
            rows: table.rows,
            dim: table.dim,
            state_per_row: state.values_per_row,
            data,
            state: st,
        })
    }

    /// Copies `table` and `state` into `dt`, which must have their shape
    /// (no allocation: the device copy of a table that changed on the host).
    pub fn refresh_table(
        &self,
        dt: &mut DeviceTable,
        table: &EmbeddingTable,
        state: &OptimizerState,
    ) -> Result<(), KernelError> {
        dt.check_shape(table, state)?;
        if !table.data.is_empty() {
            self.stream
                .memcpy_htod(&table.data, &mut dt.data)
                .map_err(crate::cuda::driver_err("copying a table to the device"))?;
        }
        if !state.values.is_empty() {
            self.stream
                .memcpy_htod(&state.values, &mut dt.state)
                .map_err(crate::cuda::driver_err(
                    "copying a table's state to the device",
                ))?;
        }
        self.sync()
    }

    /// A device table (SGD, no optimizer state) over values already on the
    /// device (`rows x dim`), for the bench.
    pub(crate) fn device_table(
        &self,
        rows: u64,
        dim: usize,
        data: CudaSlice<f32>,
    ) -> Result<DeviceTable, KernelError> {
        Ok(DeviceTable {
            rows,
            dim,
            state_per_row: 0,
            data,
            state: self.zeros::<f32>(1)?,
        })
    }

    /// Copies a device table and its state back into `table` and `state`
    /// (which must have its shape).
    pub fn download_table(
        &self,
        dt: &DeviceTable,
        table: &mut EmbeddingTable,
        state: &mut OptimizerState,
    ) -> Result<(), KernelError> {
        dt.check_shape(table, state)?;
        self.download_into(&dt.data, &mut table.data)?;
        if dt.state_per_row > 0 {
            self.download_into(&dt.state, &mut state.values)?;
        }
        Ok(())
    }
}

/// A table's batch on the device, with room for its pooled rows: what
/// [`CudaBackend::gather_reduce_staged`] needs, copied before a timed region
/// so that the region holds the kernel alone.
pub struct StagedBatch {
    pub(super) indices: CudaSlice<u32>,
    pub(super) offsets: CudaSlice<u32>,
    pub(super) weights: CudaSlice<f32>,
    pub(super) out: CudaSlice<f32>,
    pub(super) bags: usize,
    pub(super) dim: usize,
    pub(super) rows: u64,
    pub(super) pooling: Pooling,
    pub(super) traffic: Traffic,
}

impl StagedBatch {
    /// The analytic traffic of the gather-reduce.
    pub fn traffic(&self) -> Traffic {
        self.traffic
    }
}

/// Every table's batch on the device for one table-batched gather-reduce
/// ([`CudaBackend::stage_tables`]).
pub struct StagedTables {
    pub(super) batches: Vec<StagedBatch>,
    /// The kernel's descriptors, `GR_DESC` per table; `None` when the
    /// tables' dims differ (one launch per table then).
    pub(super) desc: Option<CudaSlice<u64>>,
    pub(super) desc_host: Vec<u64>,
}

impl StagedTables {
    /// The analytic traffic of each table's gather-reduce.
    pub fn traffic(&self) -> Vec<Traffic> {
        self.batches.iter().map(|b| b.traffic).collect()
    }

    /// Whether the gather-reduce runs as one launch for every table.
    pub fn one_launch(&self) -> bool {
        self.desc.is_some()
    }
}

/// Coalesced gradients on the device (`rows` ascending, `grads`
/// `unique x dim`), as the pool holds them between its casted gather-reduce
/// and its scatter.
pub struct DeviceCoalesced {
    pub(super) rows: CudaSlice<u32>,
    pub(super) grads: CudaSlice<f32>,
    pub(super) unique: usize,
    pub(super) dim: usize,
    /// The row list, also on the host (the scatter's traffic and checks).
    pub(super) host_rows: Vec<u32>,
}

impl DeviceCoalesced {
    pub fn num_rows(&self) -> usize {
        self.unique
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn rows(&self) -> &[u32] {
        &self.host_rows
    }
}

/// A casted batch and its output gradients on the device, with room for the
/// coalesced result: what [`CudaBackend::casted_gather_reduce_staged`] needs.
pub struct StagedCasted {
    pub(super) grad_out: CudaSlice<f32>,
    pub(super) src: CudaSlice<u32>,
    pub(super) scale: Option<CudaSlice<f32>>,
    pub(super) dummy: CudaSlice<f32>,
    /// Segment of each casted lookup (`casted_dst`).
    pub(super) seg: CudaSlice<u32>,
    pub(super) starts: CudaSlice<u32>,
    /// Casted lookups.
    pub(super) n: usize,
    pub(super) scratch: ChunkScratch,
    pub(super) out: DeviceCoalesced,
    pub(super) traffic: Traffic,
}

impl StagedCasted {
    /// The analytic traffic of the casted gather-reduce.
    pub fn traffic(&self) -> Traffic {
        self.traffic
    }

    /// The coalesced gradients (computed once
    /// [`CudaBackend::casted_gather_reduce_staged`] has run).
    pub fn into_coalesced(self) -> DeviceCoalesced {
        self.out
    }
}
