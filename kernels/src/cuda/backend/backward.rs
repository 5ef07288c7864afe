//! The backward's device building blocks on data already on the device
//! (the expand, and the coalesce of `(row, gradient)` pairs), shared by the
//! host-facing [`Backend`](crate::backend::Backend) methods and by
//! [`CudaBackend::expand_coalesce_timed`], which times them alone.

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use nmpsim_traces::TableBatch;

use super::{
    CudaBackend, K_COALESCE_LONG_SCALAR, K_COALESCE_LONG_VEC4, K_COALESCE_SCALAR, K_COALESCE_VEC4,
    K_EXPAND_SCALAR, K_EXPAND_VEC4, SEG_CHUNK, grid, lanes_for, pooling_mode, source, vec_dim,
};
use crate::coalesce::Coalesced;
use crate::cuda::driver_err;
use crate::error::KernelError;
use crate::gather::check_expand_inputs;
use crate::pooling::Pooling;
use crate::radix::check_keys;

impl CudaBackend {
    /// Enqueues the expand of `bags` bags of output gradients `d_g`
    /// (`bags x dim`) into one gradient per lookup (`n x dim`, returned).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_expand(
        &self,
        d_g: &CudaSlice<f32>,
        dim: usize,
        d_off: &CudaSlice<u32>,
        d_w: &CudaSlice<f32>,
        bags: usize,
        n: usize,
        pooling: Pooling,
    ) -> Result<CudaSlice<f32>, KernelError> {
        let d_dst = self.bag_ids(d_off, bags, n)?;
        let mut d_out = self.zeros::<f32>(n * dim)?;
        let (vec4, dimv) = vec_dim(dim);
        let (n64, mode) = (n as u64, pooling_mode(pooling));
        launch!(
            self,
            if vec4 { K_EXPAND_VEC4 } else { K_EXPAND_SCALAR },
            grid(n64 * dimv),
            d_g,
            &dimv,
            &d_dst,
            d_off,
            d_w,
            &n64,
            &mode,
            &mut d_out
        )?;
        Ok(d_out)
    }

    /// The coalesce of `n > 0` pairs (`d_src` rows below `num_rows`,
    /// `d_grads` `n x dim`) on the device: the unique rows (ascending), their
    /// count, and their summed gradients (`unique x dim`). Waits once, for
    /// the count (the output's size).
    pub(super) fn coalesce_device(
        &self,
        d_src: CudaSlice<u32>,
        d_grads: &CudaSlice<f32>,
        n: usize,
        dim: usize,
        num_rows: u64,
    ) -> Result<(CudaSlice<u32>, usize, CudaSlice<f32>), KernelError> {
        let d_pos = self.iota(n)?;
        let (sorted, pos) = self.sort_pairs(d_src, d_pos, n, num_rows)?;
        let segs = self.segments(&sorted, n)?;
        let unique = segs.count;
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
            d_grads,
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
            d_grads,
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
        Ok((segs.unique, unique, d_out))
    }

    /// Expand and coalesce of one table's output gradients `grad_out`
    /// (`bags x dim`) for `batch`, as a GPU trains on its own rows: the
    /// inputs are copied to the device first, then the kernels alone are
    /// timed with CUDA events (the coalesce's one read of its unique count,
    /// which sizes its output, inside). Returns the coalesced gradients and
    /// the timed milliseconds. Checked as [`crate::expand_into`] and
    /// [`crate::coalesce_into`] check their inputs.
    pub fn expand_coalesce_timed(
        &self,
        grad_out: &[f32],
        dim: usize,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Coalesced, f64), KernelError> {
        check_expand_inputs(grad_out, dim, batch, pooling)?;
        check_keys(&batch.indices, batch.num_rows)?;
        let (bags, n) = (batch.batch_size(), batch.num_lookups());
        if n == 0 {
            let empty = Coalesced::empty(dim);
            return Ok((empty, 0.0));
        }
        let d_g = self.upload(grad_out)?;
        let d_off = self.upload(&batch.offsets)?;
        let d_src = self.upload(&batch.indices)?;
        let d_w = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => self.upload(w)?,
            _ => self.zeros::<f32>(1)?,
        };
        let mut out = None;
        let ms = self.time_ms(|| {
            let d_exp = self.launch_expand(&d_g, dim, &d_off, &d_w, bags, n, pooling)?;
            out = Some(self.coalesce_device(d_src, &d_exp, n, dim, batch.num_rows)?);
            Ok(())
        })?;
        let (d_rows, unique, d_out) = out.expect("set by the timed region");
        let rows = self.download(&d_rows, unique)?;
        let grads = self.download(&d_out, unique * dim)?;
        Ok((Coalesced { rows, dim, grads }, ms))
    }

    /// Milliseconds `work` takes on this backend's stream, from CUDA events
    /// recorded before and after it (waits for the end).
    pub fn time_ms(
        &self,
        work: impl FnOnce() -> Result<(), KernelError>,
    ) -> Result<f64, KernelError> {
        let (start, end) = (self.timing_event()?, self.timing_event()?);
        start
            .record(&self.stream)
            .map_err(driver_err("recording an event"))?;
        work()?;
        end.record(&self.stream)
            .map_err(driver_err("recording an event"))?;
        end.synchronize()
            .map_err(driver_err("waiting for the timed work"))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(driver_err("reading the timed work's events"))?;
        Ok(ms as f64)
    }
}
