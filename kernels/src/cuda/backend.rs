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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig,
    PushKernelArg, ValidAsZeroBits,
};
use nmpsim_traces::TableBatch;

use super::{CudaSource, Gpu, GpuUnavailable, SOURCES, default_gpu, driver_err};
use crate::backend::Backend;
use crate::cast::{Casted, check_casted};
use crate::coalesce::{CoalesceTraffic, Coalesced, check_expanded};
use crate::error::{KernelError, check_batch, check_dim, check_grad_out};
use crate::gather::{
    Expanded, check_expand_inputs, check_gather_inputs, check_lookups, check_pooling,
};
use crate::optimizer::{
    Optimizer, OptimizerState, check_coalesced, check_coalesced_rows, check_scatter,
};
use crate::pooling::Pooling;
use crate::table::EmbeddingTable;
use crate::traffic::{
    Traffic, casted_gather_reduce_traffic, coalesce_accumulate_traffic, expand_traffic,
    gather_reduce_traffic, scatter_traffic, sort_pairs_traffic, tensor_cast_traffic,
};

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

/// Device scratch of the coalesce and the casted gather-reduce for `n`
/// lookups: two partial rows per chunk, and the count and list of long
/// segments.
pub(crate) struct ChunkScratch {
    partial: CudaSlice<f32>,
    longs: CudaSlice<u32>,
}

/// Bytes of [`ChunkScratch`] for `n` lookups of rows of `dim`.
pub(crate) fn chunk_scratch_bytes(n: usize, dim: usize) -> usize {
    (2 * n.div_ceil(SEG_CHUNK) * dim + 2 + n / (SHORT_SEG + 1)) * 4
}

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

/// Runs of equal keys in a sorted device array.
struct Segments {
    /// Run number of every element (Alg. 2's casted_dst).
    seg: CudaSlice<u32>,
    /// Key of every run.
    unique: CudaSlice<u32>,
    /// First element of every run, then `n`.
    starts: CudaSlice<u32>,
    count: usize,
}

/// Runs of equal keys of a sorted device array, before their count is read
/// ([`CudaBackend::runs`]).
struct Runs {
    /// Run number of every element.
    seg: CudaSlice<u32>,
    /// Key of every run (room for one per element).
    unique: CudaSlice<u32>,
    /// First element of every run, then `n`.
    starts: CudaSlice<u32>,
    /// The inclusive scan of the head flags: its last value is the count.
    inclusive: CudaSlice<u32>,
}

/// A casting enqueued on the device ([`CudaBackend::enqueue_cast`]).
struct CastOnDevice {
    casted_src: CudaSlice<u32>,
    runs: Runs,
    scale: Option<CudaSlice<f32>>,
    n: usize,
    bags: usize,
    num_rows: u64,
    scaled: bool,
}

/// What [`CudaBackend::tensor_cast_tables_timed`] holds its stream with.
struct Hold {
    side: Arc<CudaStream>,
    flag: CudaSlice<u32>,
    flag_ptr: cudarc::driver::sys::CUdeviceptr,
    /// The last hold's number (the flag's value that releases it).
    number: u32,
    /// Poolings (by `pooling_mode`) whose casting kernels are loaded.
    warmed: [bool; 3],
}

/// Longest a hold waits for the host (then it lets the stream go, and the
/// timed call fails).
const HOLD_MAX_NS: u64 = 2_000_000_000;

/// The device's time for a batch's casting kernels
/// ([`CudaBackend::tensor_cast_tables_timed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CastTiming {
    /// Nanoseconds between the events around the kernels.
    pub device_ns: f64,
    /// Whether the stream was held until the host had enqueued every
    /// kernel, so that `device_ns` holds no host launch gap. False on a
    /// device without stream-ordered allocation, where freeing device
    /// memory waits for the stream, so it cannot be held while the host
    /// enqueues: `device_ns` then includes the host's launch gaps.
    pub held: bool,
}

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

    // ---- device-level building blocks (also used by the bench) -------------

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

    /// Scratch for the coalesce or casted gather-reduce of `n` lookups.
    pub(crate) fn chunk_scratch(&self, n: usize, dim: usize) -> Result<ChunkScratch, KernelError> {
        Ok(ChunkScratch {
            partial: self.zeros::<f32>(2 * n.div_ceil(SEG_CHUNK) * dim)?,
            // The count, then at most one entry per SHORT_SEG + 1 lookups
            // (a long segment is longer than SHORT_SEG).
            longs: self.zeros::<u32>(2 + n / (SHORT_SEG + 1))?,
        })
    }

    /// Casted gather-reduce of device arrays into `out` (`unique x dim`):
    /// `n` casted lookups, `seg` the segment of each (`casted_dst`),
    /// `scratch` from [`Self::chunk_scratch`]`(n, dim)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_casted_gather_reduce(
        &self,
        grad_out: &CudaSlice<f32>,
        dim: usize,
        casted_src: &CudaSlice<u32>,
        scale: Option<&CudaSlice<f32>>,
        dummy: &CudaSlice<f32>,
        seg: &CudaSlice<u32>,
        starts: &CudaSlice<u32>,
        unique: usize,
        n: usize,
        scratch: &mut ChunkScratch,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), KernelError> {
        if unique == 0 {
            return Ok(());
        }
        let (vec4, dimv) = vec_dim(dim);
        let (unique64, n64) = (unique as u64, n as u64);
        let lanes = lanes_for(dimv as usize);
        let scaled = i32::from(scale.is_some());
        let scale = scale.unwrap_or(dummy);
        // 1. every segment: short ones whole, long ones listed
        self.stream
            .memset_zeros(&mut scratch.longs)
            .map_err(driver_err("zeroing the long-segment count"))?;
        let (mut count, mut list) = scratch.longs.split_at_mut(1);
        launch!(
            self,
            if vec4 { K_CASTED_VEC4 } else { K_CASTED_SCALAR },
            grid(unique64 * lanes),
            grad_out,
            &dimv,
            casted_src,
            scale,
            &scaled,
            starts,
            &unique64,
            &mut *out,
            &mut count,
            &mut list
        )?;
        // 2. pieces of the long segments, chunk by chunk
        launch!(
            self,
            if vec4 {
                K_CASTED_LONG_VEC4
            } else {
                K_CASTED_LONG_SCALAR
            },
            grid(n64.div_ceil(SEG_CHUNK as u64) * lanes),
            grad_out,
            &dimv,
            casted_src,
            scale,
            &scaled,
            seg,
            starts,
            &n64,
            &mut scratch.partial,
            &scratch.longs
        )?;
        self.launch_combine_long(dim, starts, n, scratch, out)
    }

    /// Step 3 of the coalesce and the casted gather-reduce: a block per
    /// segment step 1 listed as long.
    fn launch_combine_long(
        &self,
        dim: usize,
        starts: &CudaSlice<u32>,
        n: usize,
        scratch: &ChunkScratch,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), KernelError> {
        let (vec4, dimv) = vec_dim(dim);
        let list = scratch.longs.slice(1..);
        // As many blocks as there can be long segments (the kernel reads
        // their count and strides over them), at most 2 per SM of an H100:
        // with no long segment the launch then costs little.
        let blocks = (n / (SHORT_SEG + 1)).clamp(1, 264);
        launch!(
            self,
            if vec4 {
                K_COMBINE_LONG_VEC4
            } else {
                K_COMBINE_LONG_SCALAR
            },
            tiles_grid(blocks),
            &dimv,
            starts,
            &scratch.partial,
            out,
            &scratch.longs,
            &list
        )
    }

    /// Scatter of coalesced gradients on the device into device-resident
    /// table and state with `optimizer`.
    fn launch_scatter(
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

    /// `out[i] = bag of lookup i` for `n` lookups.
    fn bag_ids(
        &self,
        offsets: &CudaSlice<u32>,
        bags: usize,
        n: usize,
    ) -> Result<CudaSlice<u32>, KernelError> {
        let mut dst = self.zeros::<u32>(n)?;
        if bags > 0 && n > 0 {
            let bags64 = bags as u64;
            launch!(
                self,
                K_BAG_IDS,
                grid(bags64 * 32),
                offsets,
                &bags64,
                &mut dst
            )?;
        }
        Ok(dst)
    }

    /// `0, 1, ..., n - 1`.
    fn iota(&self, n: usize) -> Result<CudaSlice<u32>, KernelError> {
        let mut out = self.zeros::<u32>(n)?;
        let n64 = n as u64;
        if n > 0 {
            launch!(self, K_IOTA, grid(n64), &mut out, &n64)?;
        }
        Ok(out)
    }

    /// Scan of the first `n` values of `input` into `output` (which may be
    /// the same buffer), exclusive or inclusive, wrapping u32 arithmetic.
    fn scan(
        &self,
        input: &CudaSlice<u32>,
        output: &CudaSlice<u32>,
        n: usize,
        inclusive: bool,
    ) -> Result<(), KernelError> {
        if n == 0 {
            return Ok(());
        }
        let tiles = n.div_ceil(TILE);
        let (n64, tiles64) = (n as u64, tiles as u64);
        let sums = self.zeros::<u32>(tiles)?;
        let tile_grid = tiles_grid(tiles.min(MAX_BLOCKS as usize));
        launch!(self, K_SCAN_REDUCE, tile_grid, input, &n64, &sums, &tiles64)?;
        let one_block = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        launch!(self, K_SCAN_BLOCKS, one_block, &sums, &tiles64)?;
        let inclusive = i32::from(inclusive);
        launch!(
            self,
            K_SCAN_APPLY,
            tile_grid,
            input,
            output,
            &n64,
            &sums,
            &tiles64,
            &inclusive
        )
    }

    /// Stable sort of `n` (key, value) pairs by key, keys below `num_rows`:
    /// LSD radix passes of 8 bits over the key bits that `num_rows` needs.
    fn sort_pairs(
        &self,
        keys: CudaSlice<u32>,
        vals: CudaSlice<u32>,
        n: usize,
        num_rows: u64,
    ) -> Result<(CudaSlice<u32>, CudaSlice<u32>), KernelError> {
        let bits = crate::radix::key_bits(num_rows).min(32);
        let passes = bits.div_ceil(RADIX_BITS);
        if passes == 0 || n < 2 {
            return Ok((keys, vals));
        }
        let (mut keys, mut vals) = (keys, vals);
        let tiles = n.div_ceil(TILE);
        let (n64, tiles64) = (n as u64, tiles as u64);
        let mut keys2 = self.zeros::<u32>(n)?;
        let mut vals2 = self.zeros::<u32>(n)?;
        let hist = self.zeros::<u32>(RADIX * tiles)?;
        for pass in 0..passes {
            let shift = pass * RADIX_BITS;
            launch!(
                self,
                K_RADIX_HISTOGRAM,
                tiles_grid(tiles),
                &keys,
                &n64,
                &shift,
                &hist,
                &tiles64
            )?;
            self.scan(&hist, &hist, RADIX * tiles, false)?;
            launch!(
                self,
                K_RADIX_SCATTER,
                tiles_grid(tiles),
                &keys,
                &vals,
                &n64,
                &shift,
                &hist,
                &tiles64,
                &mut keys2,
                &mut vals2
            )?;
            std::mem::swap(&mut keys, &mut keys2);
            std::mem::swap(&mut vals, &mut vals2);
        }
        Ok((keys, vals))
    }

    /// Enqueues Tensor Casting of `batch` (n > 0 lookups) whose indices,
    /// offsets and (weighted pooling) weights are on the device: no copy, no
    /// wait. The run count stays on the device until [`Self::finish_cast`].
    fn enqueue_cast(
        &self,
        d_idx: CudaSlice<u32>,
        d_off: &CudaSlice<u32>,
        d_w: Option<&CudaSlice<f32>>,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<CastOnDevice, KernelError> {
        let n = batch.num_lookups();
        let n64 = n as u64;
        let bags = batch.batch_size();
        let d_dst = self.bag_ids(d_off, bags, n)?;
        let (sorted, casted_src, scale) = match d_w {
            Some(d_w) => {
                // Sort (src, position) so each lookup's weight can follow it.
                let d_pos = self.iota(n)?;
                let (sorted, pos) = self.sort_pairs(d_idx, d_pos, n, batch.num_rows)?;
                let mut casted_src = self.zeros::<u32>(n)?;
                let mut scale = self.zeros::<f32>(n)?;
                launch!(
                    self,
                    K_CAST_PERMUTE,
                    grid(n64),
                    &pos,
                    &d_dst,
                    d_w,
                    &n64,
                    &mut casted_src,
                    &mut scale
                )?;
                (sorted, casted_src, Some(scale))
            }
            None => {
                let (sorted, casted_src) = self.sort_pairs(d_idx, d_dst, n, batch.num_rows)?;
                let scale = if pooling == Pooling::Mean {
                    let mut scale = self.zeros::<f32>(n)?;
                    launch!(
                        self,
                        K_CAST_MEAN_SCALE,
                        grid(n64),
                        &casted_src,
                        d_off,
                        &n64,
                        &mut scale
                    )?;
                    Some(scale)
                } else {
                    None
                };
                (sorted, casted_src, scale)
            }
        };
        // (Room for a run per lookup, so that nothing waits for the count.)
        let runs = self.runs(&sorted, n)?;
        Ok(CastOnDevice {
            casted_src,
            runs,
            scale,
            n,
            bags,
            num_rows: batch.num_rows,
            scaled: pooling.scaled(),
        })
    }

    /// Reads an enqueued casting back: the run count, then the casted
    /// arrays.
    fn finish_cast(&self, c: CastOnDevice) -> Result<(Casted, Traffic), KernelError> {
        let n = c.n;
        let count = self.run_count(&c.runs, n)?;
        let casted = Casted {
            casted_src: self.download(&c.casted_src, n)?,
            casted_dst: self.download(&c.runs.seg, n)?,
            unique_rows: self.download(&c.runs.unique, count)?,
            scale: match &c.scale {
                Some(s) => Some(self.download(s, n)?),
                None => None,
            },
            num_bags: c.bags,
        };
        let traffic = tensor_cast_traffic(n, c.bags, count, c.num_rows, c.scaled);
        Ok((casted, traffic))
    }

    /// Tensor Casting of every batch (one per table), with the device's
    /// time for the casting kernels alone.
    ///
    /// The inputs are copied to the device first. Then a one-thread kernel
    /// holds the stream while the host enqueues every table's kernels, and
    /// the host releases it (a copy into its flag on a second stream) once
    /// all are enqueued, so that the device runs them back to back: the
    /// time between the events around them is the device's work, without
    /// the host's launch gaps or the copies. If the hold gives up first
    /// (after 2 s) the call fails. Without stream-ordered allocation there
    /// is no hold (`held` false). Errors name the table.
    pub fn tensor_cast_tables_timed(
        &self,
        batches: &[TableBatch],
        pooling: Pooling,
    ) -> Result<(Vec<(Casted, Traffic)>, CastTiming), KernelError> {
        struct Input {
            idx: CudaSlice<u32>,
            off: CudaSlice<u32>,
            w: Option<CudaSlice<f32>>,
        }
        let mut inputs = Vec::with_capacity(batches.len());
        for (t, b) in batches.iter().enumerate() {
            check_batch(b)
                .and_then(|()| check_pooling(b, pooling))
                .map_err(|e| e.in_table(t))?;
            inputs.push(if b.num_lookups() == 0 {
                None
            } else {
                Some(Input {
                    idx: self.upload(&b.indices).map_err(|e| e.in_table(t))?,
                    off: self.upload(&b.offsets).map_err(|e| e.in_table(t))?,
                    w: match (pooling, b.weights.as_deref()) {
                        (Pooling::WeightedSum, Some(w)) => {
                            Some(self.upload(w).map_err(|e| e.in_table(t))?)
                        }
                        _ => None,
                    },
                })
            });
        }
        let mut guard = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let side = self
                .gpu
                .ctx
                .new_stream()
                .map_err(driver_err("creating a stream"))?;
            let flag = self.zeros::<u32>(2)?;
            let flag_ptr = flag.device_ptr(&self.stream).0;
            *guard = Some(Hold {
                side,
                flag,
                flag_ptr,
                number: 0,
                warmed: [false; 3],
            });
        }
        let hold = guard.as_mut().expect("made above");
        // The driver may load a kernel at its first launch, and loading can
        // wait for the device to be idle, which the hold keeps it from: a
        // small untimed casting first loads every kernel this pooling's
        // casting launches.
        let mode = pooling_mode(pooling) as usize;
        if !hold.warmed[mode] {
            let warm = TableBatch {
                num_rows: 1 << 24,
                offsets: vec![0, 2, 3],
                indices: vec![5, 1, 5],
                weights: (pooling == Pooling::WeightedSum).then(|| vec![0.5, 1.0, 2.0]),
            };
            <Self as Backend>::tensor_cast(self, &warm, pooling)?;
            hold.warmed[mode] = true;
        }
        self.sync()?;
        // Freeing device memory (the casting's temporaries) waits for the
        // stream where allocation is not stream-ordered: no hold there.
        let holding = self.gpu.ctx.has_async_alloc();
        if holding {
            hold.number = hold.number.wrapping_add(1).max(1);
            launch!(
                self,
                K_HOLD,
                LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (1, 1, 1),
                    shared_mem_bytes: 0,
                },
                &mut hold.flag,
                &hold.number,
                &HOLD_MAX_NS
            )?;
        }
        // From here to the release nothing returns early: the stream would
        // wait out the hold.
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .stream
            .record_event(timing)
            .map_err(driver_err("recording the start of casting"));
        let mut enqueued = Vec::with_capacity(batches.len());
        let mut failed = None;
        for (t, (b, input)) in batches.iter().zip(inputs).enumerate() {
            if start.is_err() {
                break;
            }
            match input {
                Some(i) => match self.enqueue_cast(i.idx, &i.off, i.w.as_ref(), b, pooling) {
                    Ok(c) => enqueued.push(Some(c)),
                    Err(e) => {
                        failed = Some(e.in_table(t));
                        break;
                    }
                },
                None => enqueued.push(None),
            }
        }
        let end = self
            .stream
            .record_event(timing)
            .map_err(driver_err("recording the end of casting"));
        // Release the hold from the other stream, whatever happened above
        // (so that the stream never waits out the hold). The flag's address
        // is used directly: the slice's own bookkeeping would make the copy
        // wait for the hold kernel, which waits for the copy.
        let number = [hold.number];
        // SAFETY: `flag_ptr` is the address of `hold.flag`, two u32 that live
        // as long as `self`; the copy writes the first; `number` outlives it,
        // as the side stream is synchronised below before returning.
        let released = if holding {
            unsafe {
                cudarc::driver::result::memcpy_htod_async(
                    hold.flag_ptr,
                    &number,
                    hold.side.cu_stream(),
                )
            }
            .map_err(driver_err("releasing the hold"))
        } else {
            Ok(())
        };
        let side_done = hold
            .side
            .synchronize()
            .map_err(driver_err("releasing the hold"));
        released?;
        side_done?;
        let start = start?;
        if let Some(e) = failed {
            return Err(e);
        }
        let end = end?;
        if holding && self.download(&hold.flag, 2)?[1] != hold.number {
            return Err(KernelError::Cuda {
                what: format!(
                    "timing the casting: the host took over {} s to enqueue its kernels",
                    HOLD_MAX_NS / 1_000_000_000
                ),
            });
        }
        let held = holding;
        drop(guard);
        let mut out = Vec::with_capacity(batches.len());
        for (t, (b, c)) in batches.iter().zip(enqueued).enumerate() {
            out.push(match c {
                Some(c) => self.finish_cast(c).map_err(|e| e.in_table(t))?,
                None => self.tensor_cast(b, pooling).map_err(|e| e.in_table(t))?,
            });
        }
        let ms = start
            .elapsed_ms(&end)
            .map_err(driver_err("timing casting"))?;
        Ok((
            out,
            CastTiming {
                device_ns: f64::from(ms) * 1e6,
                held,
            },
        ))
    }

    /// The runs of equal keys of the first `n > 0` values of `sorted`,
    /// enqueued with no wait: room for `n` runs, of which the first
    /// [`Self::run_count`] are filled.
    fn runs(&self, sorted: &CudaSlice<u32>, n: usize) -> Result<Runs, KernelError> {
        let n64 = n as u64;
        let mut flags = self.zeros::<u32>(n)?;
        launch!(self, K_HEAD_FLAGS, grid(n64), sorted, &n64, &mut flags)?;
        let inclusive = self.zeros::<u32>(n)?;
        self.scan(&flags, &inclusive, n, true)?;
        let mut seg = self.zeros::<u32>(n)?;
        let mut unique = self.zeros::<u32>(n)?;
        let mut starts = self.zeros::<u32>(n + 1)?;
        launch!(
            self,
            K_SEGMENTS,
            grid(n64),
            sorted,
            &flags,
            &inclusive,
            &n64,
            &mut seg,
            &mut unique,
            &mut starts
        )?;
        Ok(Runs {
            seg,
            unique,
            starts,
            inclusive,
        })
    }

    /// How many runs [`Self::runs`] found in its `n` values (waits for it).
    fn run_count(&self, runs: &Runs, n: usize) -> Result<usize, KernelError> {
        let last = self
            .stream
            .clone_dtoh(&runs.inclusive.slice(n - 1..n))
            .map_err(driver_err("copying from the device"))?;
        self.sync()?;
        Ok(last[0] as usize)
    }

    /// The runs of equal keys of the first `n > 0` values of `sorted`, and
    /// their count.
    fn segments(&self, sorted: &CudaSlice<u32>, n: usize) -> Result<Segments, KernelError> {
        let runs = self.runs(sorted, n)?;
        let count = self.run_count(&runs, n)?;
        Ok(Segments {
            seg: runs.seg,
            unique: runs.unique,
            starts: runs.starts,
            count,
        })
    }
}

/// An embedding table and its optimizer state kept on the device between
/// calls, as the NMP pool keeps its tables: only indices and gradients move.
pub struct DeviceTable {
    pub rows: u64,
    pub dim: usize,
    /// Optimizer state values per row (0 for SGD).
    pub state_per_row: usize,
    data: CudaSlice<f32>,
    state: CudaSlice<f32>,
}

impl DeviceTable {
    pub(crate) fn data(&self) -> &CudaSlice<f32> {
        &self.data
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
        if table.rows != dt.rows || table.dim != dt.dim {
            return Err(KernelError::shape(
                "table",
                format!("{} x {}", table.rows, table.dim),
                format!("the device table's {} x {}", dt.rows, dt.dim),
            ));
        }
        if state.values_per_row != dt.state_per_row || state.rows != dt.rows {
            return Err(KernelError::shape(
                "state",
                format!("{} rows x {}", state.rows, state.values_per_row),
                format!("{} rows x {}", dt.rows, dt.state_per_row),
            ));
        }
        self.download_into(&dt.data, &mut table.data)?;
        if dt.state_per_row > 0 {
            self.download_into(&dt.state, &mut state.values)?;
        }
        Ok(())
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

/// A table's batch on the device, with room for its pooled rows: what
/// [`CudaBackend::gather_reduce_staged`] needs, copied before a timed region
/// so that the region holds the kernel alone.
pub struct StagedBatch {
    indices: CudaSlice<u32>,
    offsets: CudaSlice<u32>,
    weights: CudaSlice<f32>,
    out: CudaSlice<f32>,
    bags: usize,
    dim: usize,
    rows: u64,
    pooling: Pooling,
    traffic: Traffic,
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
    batches: Vec<StagedBatch>,
    /// The kernel's descriptors, `GR_DESC` per table; `None` when the
    /// tables' dims differ (one launch per table then).
    desc: Option<CudaSlice<u64>>,
    desc_host: Vec<u64>,
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
    rows: CudaSlice<u32>,
    grads: CudaSlice<f32>,
    unique: usize,
    dim: usize,
    /// The row list, also on the host (the scatter's traffic and checks).
    host_rows: Vec<u32>,
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
    grad_out: CudaSlice<f32>,
    src: CudaSlice<u32>,
    scale: Option<CudaSlice<f32>>,
    dummy: CudaSlice<f32>,
    /// Segment of each casted lookup (`casted_dst`).
    seg: CudaSlice<u32>,
    starts: CudaSlice<u32>,
    /// Casted lookups.
    n: usize,
    scratch: ChunkScratch,
    out: DeviceCoalesced,
    traffic: Traffic,
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

    /// Copies a casted batch and its output gradients (`num_bags x dim`) to
    /// the device for a casted gather-reduce.
    pub fn stage_casted(
        &self,
        casted: &Casted,
        grad_out: &[f32],
        dim: usize,
    ) -> Result<StagedCasted, KernelError> {
        check_dim(dim)?;
        check_grad_out(grad_out, casted.num_bags, dim)?;
        check_casted(casted)?;
        let starts = crate::coalesce::segment_starts(&casted.casted_dst);
        check_coalesced_rows(&casted.unique_rows, u64::MAX)?;
        let unique = casted.unique_rows.len();
        let n = casted.casted_src.len();
        let traffic = casted_gather_reduce_traffic(n, unique, dim, casted.scale.is_some());
        Ok(StagedCasted {
            grad_out: self.upload(grad_out)?,
            src: self.upload(&casted.casted_src)?,
            scale: match &casted.scale {
                Some(s) => Some(self.upload(s)?),
                None => None,
            },
            dummy: self.zeros::<f32>(1)?,
            seg: self.upload(&casted.casted_dst)?,
            starts: self.upload(&starts)?,
            n,
            scratch: self.chunk_scratch(n, dim)?,
            out: DeviceCoalesced {
                rows: self.upload(&casted.unique_rows)?,
                grads: self.zeros::<f32>(unique * dim)?,
                unique,
                dim,
                host_rows: casted.unique_rows.clone(),
            },
            traffic,
        })
    }

    /// Enqueues the casted gather-reduce of a staged batch.
    pub fn casted_gather_reduce_staged(&self, s: &mut StagedCasted) -> Result<(), KernelError> {
        self.launch_casted_gather_reduce(
            &s.grad_out,
            s.out.dim,
            &s.src,
            s.scale.as_ref(),
            &s.dummy,
            &s.seg,
            &s.starts,
            s.out.unique,
            s.n,
            &mut s.scratch,
            &mut s.out.grads,
        )
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }

    fn gather_reduce(
        &self,
        table: &EmbeddingTable,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Vec<f32>, Traffic), KernelError> {
        check_gather_inputs(table, batch, pooling)?;
        let dim = table.dim;
        let bags = batch.batch_size();
        let n = batch.num_lookups();
        let traffic = gather_reduce_traffic(n, bags, dim, pooling == Pooling::WeightedSum);
        if bags == 0 {
            return Ok((Vec::new(), traffic));
        }
        let d_table = self.upload(&table.data)?;
        let d_idx = self.upload(&batch.indices)?;
        let d_off = self.upload(&batch.offsets)?;
        let d_w = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => self.upload(w)?,
            _ => self.zeros::<f32>(1)?,
        };
        let mut d_out = self.zeros::<f32>(bags * dim)?;
        self.launch_gather_reduce(
            &d_table, dim, &d_idx, &d_off, &d_w, bags, pooling, &mut d_out,
        )?;
        Ok((self.download(&d_out, bags * dim)?, traffic))
    }

    fn expand(
        &self,
        grad_out: &[f32],
        dim: usize,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Expanded, Traffic), KernelError> {
        check_expand_inputs(grad_out, dim, batch, pooling)?;
        let bags = batch.batch_size();
        let n = batch.num_lookups();
        let traffic = expand_traffic(n, dim, pooling == Pooling::WeightedSum);
        let mut out = Expanded {
            src: batch.indices.clone(),
            dim,
            grads: Vec::new(),
        };
        if n == 0 {
            return Ok((out, traffic));
        }
        let d_g = self.upload(grad_out)?;
        let d_off = self.upload(&batch.offsets)?;
        let d_dst = self.bag_ids(&d_off, bags, n)?;
        let d_w = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => self.upload(w)?,
            _ => self.zeros::<f32>(1)?,
        };
        let mut d_out = self.zeros::<f32>(n * dim)?;
        let (vec4, dimv) = vec_dim(dim);
        let (n64, mode) = (n as u64, pooling_mode(pooling));
        launch!(
            self,
            if vec4 { K_EXPAND_VEC4 } else { K_EXPAND_SCALAR },
            grid(n64 * dimv),
            &d_g,
            &dimv,
            &d_dst,
            &d_off,
            &d_w,
            &n64,
            &mode,
            &mut d_out
        )?;
        out.grads = self.download(&d_out, n * dim)?;
        Ok((out, traffic))
    }

    fn coalesce(
        &self,
        expanded: &Expanded,
        num_rows: u64,
    ) -> Result<(Coalesced, CoalesceTraffic), KernelError> {
        // The checks of `coalesce_into`, then those of `radix::sort_pairs`.
        check_expanded(expanded)?;
        let (dim, n) = (expanded.dim, expanded.src.len());
        if let Some((i, &k)) = expanded
            .src
            .iter()
            .enumerate()
            .find(|&(_, &k)| k as u64 >= num_rows)
        {
            return Err(KernelError::IndexOutOfRange {
                arg: "keys",
                position: i,
                value: k as u64,
                bound: num_rows,
            });
        }
        let traffic = |unique| CoalesceTraffic {
            sort: sort_pairs_traffic(n, num_rows),
            accumulate: coalesce_accumulate_traffic(n, unique, dim),
        };
        if n == 0 {
            let empty = Coalesced {
                rows: Vec::new(),
                dim,
                grads: Vec::new(),
            };
            return Ok((empty, traffic(0)));
        }
        let d_src = self.upload(&expanded.src)?;
        let d_pos = self.iota(n)?;
        let (sorted, pos) = self.sort_pairs(d_src, d_pos, n, num_rows)?;
        let segs = self.segments(&sorted, n)?;
        let unique = segs.count;
        let d_grads = self.upload(&expanded.grads)?;
        let mut d_out = self.zeros::<f32>(unique * dim)?;
        let mut scratch = self.chunk_scratch(n, dim)?;
        let (vec4, dimv) = vec_dim(dim);
        let (unique64, n64) = (unique as u64, n as u64);
        let lanes = lanes_for(dimv as usize);
        // 1. every segment: short ones whole, long ones listed
        self.stream
            .memset_zeros(&mut scratch.longs)
            .map_err(driver_err("zeroing the long-segment count"))?;
        let (mut count, mut list) = scratch.longs.split_at_mut(1);
        launch!(
            self,
            if vec4 {
                K_COALESCE_VEC4
            } else {
                K_COALESCE_SCALAR
            },
            grid(unique64 * lanes),
            &d_grads,
            &dimv,
            &pos,
            &segs.starts,
            &unique64,
            &mut d_out,
            &mut count,
            &mut list
        )?;
        // 2. pieces of the long segments, chunk by chunk
        launch!(
            self,
            if vec4 {
                K_COALESCE_LONG_VEC4
            } else {
                K_COALESCE_LONG_SCALAR
            },
            grid(n64.div_ceil(SEG_CHUNK as u64) * lanes),
            &d_grads,
            &dimv,
            &pos,
            &segs.seg,
            &segs.starts,
            &n64,
            &mut scratch.partial,
            &scratch.longs
        )?;
        // 3. the long segments step 1 listed
        self.launch_combine_long(dim, &segs.starts, n, &scratch, &mut d_out)?;
        let rows = self.download(&segs.unique, unique)?;
        let grads = self.download(&d_out, unique * dim)?;
        Ok((Coalesced { rows, dim, grads }, traffic(unique)))
    }

    fn tensor_cast(
        &self,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Casted, Traffic), KernelError> {
        check_batch(batch)?;
        check_pooling(batch, pooling)?;
        let n = batch.num_lookups();
        let bags = batch.batch_size();
        let traffic =
            |unique| tensor_cast_traffic(n, bags, unique, batch.num_rows, pooling.scaled());
        if n == 0 {
            let empty = Casted {
                casted_src: Vec::new(),
                casted_dst: Vec::new(),
                unique_rows: Vec::new(),
                scale: pooling.scaled().then(Vec::new),
                num_bags: bags,
            };
            return Ok((empty, traffic(0)));
        }
        let d_idx = self.upload(&batch.indices)?;
        let d_off = self.upload(&batch.offsets)?;
        let d_w = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => Some(self.upload(w)?),
            _ => None,
        };
        let c = self.enqueue_cast(d_idx, &d_off, d_w.as_ref(), batch, pooling)?;
        self.finish_cast(c)
    }

    fn casted_gather_reduce(
        &self,
        casted: &Casted,
        grad_out: &[f32],
        dim: usize,
    ) -> Result<(Coalesced, Traffic), KernelError> {
        let mut staged = self.stage_casted(casted, grad_out, dim)?;
        let traffic = staged.traffic();
        if staged.out.unique == 0 {
            return Ok((
                Coalesced {
                    rows: Vec::new(),
                    dim,
                    grads: Vec::new(),
                },
                traffic,
            ));
        }
        self.casted_gather_reduce_staged(&mut staged)?;
        Ok((self.download_coalesced(&staged.out)?, traffic))
    }

    fn scatter_update(
        &self,
        table: &mut EmbeddingTable,
        state: &mut OptimizerState,
        grads: &Coalesced,
        optimizer: &Optimizer,
    ) -> Result<Traffic, KernelError> {
        check_scatter(table, state, grads, optimizer)?;
        let dim = table.dim;
        let per_row = state.values_per_row;
        let unique = grads.rows.len();
        let traffic = scatter_traffic(unique, dim, per_row);
        if unique == 0 {
            return Ok(traffic);
        }
        let mut d_table = self.upload(&table.data)?;
        let mut d_state = self.upload(&state.values)?;
        let staged = self.stage_coalesced(grads)?;
        self.launch_scatter(&mut d_table, &mut d_state, &staged, optimizer)?;
        self.download_into(&d_table, &mut table.data)?;
        if per_row > 0 {
            self.download_into(&d_state, &mut state.values)?;
        }
        Ok(traffic)
    }
}
