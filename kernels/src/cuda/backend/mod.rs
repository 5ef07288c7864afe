//! The CUDA implementation of every embedding primitive: [`CudaBackend`], a
//! [`Backend`] whose kernels are those of `kernels/cuda/embedding.cu`.
//!
//! Each method validates its inputs with the same checks as the CPU function
//! of the same name (so errors are identical), copies the inputs to the
//! device on the backend's stream, runs the kernels, copies the results back
//! and returns the same analytic [`Traffic`]. Structural results (row lists,
//! [`Casted`] arrays) equal the CPU ones exactly; expand is exact too, and
//! the casted gather-reduce equals this backend's expand + coalesce bit for
//! bit (both add the same f32 products in the same order).
//!
//! The backend is split by concept:
//! - this file: [`CudaBackend`] (construction, its stream, host-device
//!   copies), the names of its kernels, the launch geometry every launch
//!   shares, and the `launch!` macro;
//! - `storage.rs`: device-resident storage, [`DeviceTable`] and the staged
//!   types ([`StagedBatch`], [`StagedTables`], [`DeviceCoalesced`],
//!   [`StagedCasted`]), and the copies of a table to and from the device;
//! - `gather.rs`: the forward gather-reduce (device arrays, a resident
//!   table, staged batches, every table of a batch in one launch);
//! - `coalesce.rs`: the device building blocks of the coalesce, which Tensor
//!   Casting shares (bag ids, scan, radix sort, runs of equal keys), and the
//!   chunked segmented accumulation of the coalesce and the casted
//!   gather-reduce;
//! - `cast.rs`: Tensor Casting (enqueued, timed: [`CastTiming`]) and the
//!   casted gather-reduce;
//! - `scatter.rs`: the scatter with an optimizer (resident and staged);
//! - `trait_impl.rs`: `impl Backend for CudaBackend`, every primitive on
//!   host data;
//! - `tt.rs`: Eff-TT tables ([`DeviceTt`]): the forward with or without
//!   batch-level reuse and the backward with the update fused, timed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, ValidAsZeroBits,
};

use super::{CudaSource, Gpu, GpuUnavailable, SOURCES, default_gpu, driver_err};
#[cfg(doc)]
use crate::backend::Backend;
#[cfg(doc)]
use crate::cast::Casted;
use crate::error::KernelError;
use crate::pooling::Pooling;
#[cfg(doc)]
use crate::traffic::Traffic;

/// Every kernel the backend launches, all in `embedding.cu`. The NVRTC test
/// checks that each is an entry of the compiled PTX, so a misspelt name is
/// caught on a machine without a GPU.
pub const KERNEL_NAMES: &[&str] = &[
    K_GATHER_VEC4,
    K_GATHER_SCALAR,
    K_GATHER_TABLES_VEC4,
    K_GATHER_TABLES_SCALAR,
    K_EXPAND_VEC4,
    K_EXPAND_SCALAR,
    K_BAG_IDS,
    K_IOTA,
    K_SCAN_REDUCE,
    K_SCAN_BLOCKS,
    K_SCAN_APPLY,
    K_RADIX_HISTOGRAM,
    K_RADIX_SCATTER,
    K_HEAD_FLAGS,
    K_SEGMENTS,
    K_COALESCE_VEC4,
    K_COALESCE_SCALAR,
    K_CAST_PERMUTE,
    K_CAST_MEAN_SCALE,
    K_CASTED_VEC4,
    K_CASTED_SCALAR,
    K_SCATTER_VEC4,
    K_SCATTER_SCALAR,
    K_COALESCE_LONG_VEC4,
    K_COALESCE_LONG_SCALAR,
    K_CASTED_LONG_VEC4,
    K_CASTED_LONG_SCALAR,
    K_COMBINE_LONG_VEC4,
    K_COMBINE_LONG_SCALAR,
    K_FILL_UNIFORM,
    K_HOLD,
    K_TT_PREFIX,
    K_TT_POOL,
    K_TT_GRAD_PREFIX,
    K_TT_GRAD_FIRST,
    K_TT_GRAD_LAST,
    K_TT_REDUCE,
];

const K_GATHER_VEC4: &str = "nmpsim_gather_reduce_vec4";
const K_GATHER_SCALAR: &str = "nmpsim_gather_reduce_scalar";
const K_GATHER_TABLES_VEC4: &str = "nmpsim_gather_reduce_tables_vec4";
const K_GATHER_TABLES_SCALAR: &str = "nmpsim_gather_reduce_tables_scalar";
const K_EXPAND_VEC4: &str = "nmpsim_expand_vec4";
const K_EXPAND_SCALAR: &str = "nmpsim_expand_scalar";
const K_BAG_IDS: &str = "nmpsim_bag_ids";
const K_IOTA: &str = "nmpsim_iota";
const K_SCAN_REDUCE: &str = "nmpsim_scan_reduce";
const K_SCAN_BLOCKS: &str = "nmpsim_scan_blocks";
const K_SCAN_APPLY: &str = "nmpsim_scan_apply";
const K_RADIX_HISTOGRAM: &str = "nmpsim_radix_histogram";
const K_RADIX_SCATTER: &str = "nmpsim_radix_scatter";
const K_HEAD_FLAGS: &str = "nmpsim_head_flags";
const K_SEGMENTS: &str = "nmpsim_segments";
const K_COALESCE_VEC4: &str = "nmpsim_coalesce_accumulate_vec4";
const K_COALESCE_SCALAR: &str = "nmpsim_coalesce_accumulate_scalar";
const K_CAST_PERMUTE: &str = "nmpsim_cast_permute";
const K_CAST_MEAN_SCALE: &str = "nmpsim_cast_mean_scale";
const K_CASTED_VEC4: &str = "nmpsim_casted_gather_reduce_vec4";
const K_CASTED_SCALAR: &str = "nmpsim_casted_gather_reduce_scalar";
const K_SCATTER_VEC4: &str = "nmpsim_scatter_update_vec4";
const K_SCATTER_SCALAR: &str = "nmpsim_scatter_update_scalar";
const K_COALESCE_LONG_VEC4: &str = "nmpsim_coalesce_long_pieces_vec4";
const K_COALESCE_LONG_SCALAR: &str = "nmpsim_coalesce_long_pieces_scalar";
const K_CASTED_LONG_VEC4: &str = "nmpsim_casted_long_pieces_vec4";
const K_CASTED_LONG_SCALAR: &str = "nmpsim_casted_long_pieces_scalar";
const K_COMBINE_LONG_VEC4: &str = "nmpsim_segment_combine_long_vec4";
const K_COMBINE_LONG_SCALAR: &str = "nmpsim_segment_combine_long_scalar";
pub(crate) const K_FILL_UNIFORM: &str = "nmpsim_fill_uniform";
const K_HOLD: &str = "nmpsim_hold";
const K_TT_PREFIX: &str = "nmpsim_tt_prefix";
const K_TT_POOL: &str = "nmpsim_tt_pool";
const K_TT_GRAD_PREFIX: &str = "nmpsim_tt_grad_prefix";
const K_TT_GRAD_FIRST: &str = "nmpsim_tt_grad_first";
const K_TT_GRAD_LAST: &str = "nmpsim_tt_grad_last";
const K_TT_REDUCE: &str = "nmpsim_tt_reduce";

/// Threads per block of every launch (`BLOCK` in the CUDA source).
const BLOCK: u32 = 256;
/// Elements per scan / sort tile (`TILE` = `BLOCK * ITEMS` in the source).
const TILE: usize = 2048;
/// Digits of one radix pass (`RADIX`, 8-bit digits).
const RADIX: usize = 256;
const RADIX_BITS: u32 = crate::radix::GPU_DIGIT_BITS;
/// Sorted positions per chunk of the coalesce and casted gather-reduce
/// (`SEG_CHUNK` in the source).
const SEG_CHUNK: usize = 16;

/// Warps per bag of the gather-reduce (`GR_WARPS` in the source).
const GR_WARPS: u64 = 4;

/// Values per table in the table-batched gather-reduce's descriptor array
/// (`GR_DESC` in the source): the table, indices, offsets, weights and
/// output pointers, then the bag count.
const GR_DESC: usize = 6;

/// Segments of more lookups than this are long (`SHORT_SEG` in the source).
const SHORT_SEG: usize = 32;

/// Largest grid of the grid-stride kernels.
const MAX_BLOCKS: u64 = 1 << 20;

/// The source that holds every kernel of this backend.
fn source() -> &'static CudaSource {
    SOURCES
        .iter()
        .find(|s| s.name == "embedding.cu")
        .expect("embedding.cu is in SOURCES")
}

/// Pooling as the kernels' `mode` argument.
fn pooling_mode(p: Pooling) -> i32 {
    match p {
        Pooling::Sum => 0,
        Pooling::Mean => 1,
        Pooling::WeightedSum => 2,
    }
}

/// A grid-stride launch wanting `threads` threads in all.
fn grid(threads: u64) -> LaunchConfig {
    let blocks = threads.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Exactly `blocks` blocks (one per tile).
fn tiles_grid(blocks: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks.max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Lanes per row in the kernels (`lanes_for` in the source).
fn lanes_for(dimv: usize) -> u64 {
    dimv.next_power_of_two().min(32) as u64
}

/// Row length in kernel elements, and whether rows are float4 vectors.
fn vec_dim(dim: usize) -> (bool, u64) {
    if dim % 4 == 0 {
        (true, (dim / 4) as u64)
    } else {
        (false, dim as u64)
    }
}

/// Launches kernel `$name` with `$cfg` and the given arguments (references
/// to locals, which must outlive the statement).
macro_rules! launch {
    ($self:expr, $name:expr, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        let name: &'static str = $name;
        let f: CudaFunction = $self.func(name)?;
        $self.gpu.check_launch(
            source(),
            name,
            &[$( $crate::cuda::KernelArg::kind(&$arg) ),+],
        )?;
        let mut b = $self.stream.launch_builder(&f);
        $( b.arg($arg); )+
        // SAFETY: the argument list matches the kernel's parameters in order,
        // count and size (u64 <-> unsigned long long, i32 <-> int, f32 <->
        // float, slices <-> pointers), and every buffer is at least as long as
        // the sizes passed beside it say; the kernels bound every access.
        unsafe { b.launch($cfg) }
            .map(|_| ())
            .map_err(driver_err(&format!("launching {name}")))
    }};
}

// The submodules come after `launch!`, which they use (a `macro_rules!`
// macro is in scope only below its definition).
mod backward;
mod cast;
mod coalesce;
mod gather;
mod scatter;
mod storage;
mod trait_impl;
mod tt;

pub use cast::CastTiming;
use cast::Hold;
pub(crate) use coalesce::{ChunkScratch, chunk_scratch_bytes};
pub use storage::{DeviceCoalesced, DeviceTable, StagedBatch, StagedCasted, StagedTables};
pub use tt::{DeviceTt, TtForwardTiming};

/// Every primitive of the crate as CUDA kernels on one device.
pub struct CudaBackend {
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    /// For timed sequences: a second stream, and the two-word flag of the
    /// hold kernel with its device address (made on first use).
    hold: Mutex<Option<Hold>>,
    /// Kernels loaded so far (a launch then costs no module lookup).
    funcs: Mutex<HashMap<&'static str, CudaFunction>>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("gpu", &self.gpu)
            .finish()
    }
}

impl CudaBackend {
    /// The backend on the process's default device and its stream.
    pub fn new() -> Result<Self, GpuUnavailable> {
        let gpu = default_gpu()?;
        let stream = gpu.stream.clone();
        Ok(Self::with_stream(gpu, stream))
    }

    /// The backend on `gpu`, running every primitive on `stream` (a stream of
    /// `gpu`'s context) instead of the device's default one.
    pub fn with_stream(gpu: Arc<Gpu>, stream: Arc<CudaStream>) -> Self {
        CudaBackend {
            gpu,
            stream,
            hold: Mutex::new(None),
            funcs: Mutex::new(HashMap::new()),
        }
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The stream every primitive runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn func(&self, name: &'static str) -> Result<CudaFunction, KernelError> {
        let mut funcs = self.funcs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = funcs.get(name) {
            return Ok(f.clone());
        }
        let f = self.gpu.function(source(), name)?;
        funcs.insert(name, f.clone());
        Ok(f)
    }

    /// `v` on the device (one zero when empty: no zero-byte allocations).
    pub(crate) fn upload<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        v: &[T],
    ) -> Result<CudaSlice<T>, KernelError> {
        if v.is_empty() {
            return self.zeros(1);
        }
        self.stream
            .clone_htod(v)
            .map_err(driver_err("copying to the device"))
    }

    /// `n` zeroed values on the device (at least one).
    pub(crate) fn zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        n: usize,
    ) -> Result<CudaSlice<T>, KernelError> {
        self.stream
            .alloc_zeros(n.max(1))
            .map_err(driver_err(&format!("allocating {n} device values")))
    }

    /// The first `n` values of `s`, on the host.
    pub(crate) fn download<T: DeviceRepr>(
        &self,
        s: &CudaSlice<T>,
        n: usize,
    ) -> Result<Vec<T>, KernelError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let v = self
            .stream
            .clone_dtoh(&s.slice(0..n))
            .map_err(driver_err("copying from the device"))?;
        self.sync()?;
        Ok(v)
    }

    /// Copies the first `out.len()` values of `s` into `out`.
    fn download_into<T: DeviceRepr>(
        &self,
        s: &CudaSlice<T>,
        out: &mut [T],
    ) -> Result<(), KernelError> {
        if out.is_empty() {
            return Ok(());
        }
        let n = out.len();
        self.stream
            .memcpy_dtoh(&s.slice(0..n), out)
            .map_err(driver_err("copying from the device"))?;
        self.sync()
    }

    pub(crate) fn sync(&self) -> Result<(), KernelError> {
        self.stream
            .synchronize()
            .map_err(driver_err("running the kernels"))
    }

    /// Bandwidth of a device-to-device copy of `bytes` bytes, in GB/s of
    /// bytes read plus written (`2 * bytes / time`), timed with CUDA events:
    /// the median of 5 copies after a warm-up.
    pub fn copy_bandwidth_gbps(&self, bytes: usize) -> Result<f64, KernelError> {
        let n = (bytes / 4).max(1);
        let src = self.zeros::<u32>(n)?;
        let mut dst = self.zeros::<u32>(n)?;
        let ms = super::bench::time_median_ms(self, 1, 5, || {
            self.stream
                .memcpy_dtod(&src, &mut dst)
                .map_err(driver_err("device-to-device copy"))
        })?;
        Ok(2.0 * (n * 4) as f64 / (ms * 1e-3) / 1e9)
    }

    /// A timing event on this backend's context.
    pub(crate) fn timing_event(&self) -> Result<cudarc::driver::CudaEvent, KernelError> {
        self.gpu
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_err("creating a CUDA event"))
    }
}
