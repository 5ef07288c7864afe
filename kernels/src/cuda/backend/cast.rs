//! Tensor Casting on the device and the casted gather-reduce: a casting
//! enqueued with no wait and read back later, every table's casting timed
//! on the device alone (the stream held while the host enqueues,
//! [`CastTiming`]), and the casted gather-reduce over device arrays (also
//! used by the bench) and its staged form.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};
use nmpsim_traces::TableBatch;

use super::coalesce::{ChunkScratch, Runs};
use super::{
    CudaBackend, DeviceCoalesced, K_CAST_MEAN_SCALE, K_CAST_PERMUTE, K_CASTED_LONG_SCALAR,
    K_CASTED_LONG_VEC4, K_CASTED_SCALAR, K_CASTED_VEC4, K_HOLD, SEG_CHUNK, StagedCasted, grid,
    lanes_for, pooling_mode, source, vec_dim,
};
use crate::backend::Backend;
use crate::cast::{Casted, check_casted};
use crate::cuda::driver_err;
use crate::error::{KernelError, check_batch, check_dim, check_grad_out};
use crate::gather::check_pooling;
use crate::optimizer::check_coalesced_rows;
use crate::pooling::Pooling;
use crate::traffic::{Traffic, casted_gather_reduce_traffic, tensor_cast_traffic};

/// A casting enqueued on the device ([`CudaBackend::enqueue_cast`]).
pub(super) struct CastOnDevice {
    casted_src: CudaSlice<u32>,
    runs: Runs,
    scale: Option<CudaSlice<f32>>,
    n: usize,
    bags: usize,
    num_rows: u64,
    scaled: bool,
}

/// What [`CudaBackend::tensor_cast_tables_timed`] holds its stream with.
pub(super) struct Hold {
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

impl CudaBackend {
    /// Enqueues Tensor Casting of `batch` (n > 0 lookups) whose indices,
    /// offsets and (weighted pooling) weights are on the device: no copy, no
    /// wait. The run count stays on the device until [`Self::finish_cast`].
    pub(super) fn enqueue_cast(
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
    pub(super) fn finish_cast(&self, c: CastOnDevice) -> Result<(Casted, Traffic), KernelError> {
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
}

/// Staged primitives: inputs are copied to the device by `stage_*` (checked
/// as the host-facing methods check them), the `*_staged` methods only
/// enqueue work on the stream (kernels and a memset: no host-device copy, no
/// allocation, no wait), and
/// results stay on the device until downloaded. The NMP pool emulation times
/// the kernels alone this way, as the pool would run them on data already in
/// its ranks.
impl CudaBackend {
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
