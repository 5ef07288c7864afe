//! The device building blocks of the coalesce, which Tensor Casting shares:
//! bag ids, iota, the scan, the stable LSD radix sort of (key, value) pairs
//! and the runs of equal keys of a sorted array ([`Runs`], [`Segments`]);
//! and the chunked segmented accumulation of the coalesce and the casted
//! gather-reduce: its scratch ([`ChunkScratch`], which the bench sizes and
//! uses too) and the combine of the long segments. The coalesce's own
//! launches are in `trait_impl.rs`.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};

use super::{
    CudaBackend, K_BAG_IDS, K_COMBINE_LONG_SCALAR, K_COMBINE_LONG_VEC4, K_HEAD_FLAGS, K_IOTA,
    K_RADIX_HISTOGRAM, K_RADIX_SCATTER, K_SCAN_APPLY, K_SCAN_BLOCKS, K_SCAN_REDUCE, K_SEGMENTS,
    MAX_BLOCKS, RADIX, RADIX_BITS, SEG_CHUNK, SHORT_SEG, TILE, grid, source, tiles_grid, vec_dim,
};
use crate::cuda::driver_err;
use crate::error::KernelError;

/// Device scratch of the coalesce and the casted gather-reduce for `n`
/// lookups: two partial rows per chunk, and the count and list of long
/// segments.
pub(crate) struct ChunkScratch {
    pub(super) partial: CudaSlice<f32>,
    pub(super) longs: CudaSlice<u32>,
}

/// Bytes of [`ChunkScratch`] for `n` lookups of rows of `dim`.
pub(crate) fn chunk_scratch_bytes(n: usize, dim: usize) -> usize {
    (2 * n.div_ceil(SEG_CHUNK) * dim + 2 + n / (SHORT_SEG + 1)) * 4
}

/// Runs of equal keys in a sorted device array.
pub(super) struct Segments {
    /// Run number of every element (Alg. 2's casted_dst).
    pub(super) seg: CudaSlice<u32>,
    /// Key of every run.
    pub(super) unique: CudaSlice<u32>,
    /// First element of every run, then `n`.
    pub(super) starts: CudaSlice<u32>,
    pub(super) count: usize,
}

/// Runs of equal keys of a sorted device array, before their count is read
/// ([`CudaBackend::runs`]).
pub(super) struct Runs {
    /// Run number of every element.
    pub(super) seg: CudaSlice<u32>,
    /// Key of every run (room for one per element).
    pub(super) unique: CudaSlice<u32>,
    /// First element of every run, then `n`.
    starts: CudaSlice<u32>,
    /// The inclusive scan of the head flags: its last value is the count.
    inclusive: CudaSlice<u32>,
}

impl CudaBackend {
    // ---- device-level building blocks (also used by the bench) -------------

    /// Scratch for the coalesce or casted gather-reduce of `n` lookups.
    pub(crate) fn chunk_scratch(&self, n: usize, dim: usize) -> Result<ChunkScratch, KernelError> {
        Ok(ChunkScratch {
            partial: self.zeros::<f32>(2 * n.div_ceil(SEG_CHUNK) * dim)?,
            // The count, then at most one entry per SHORT_SEG + 1 lookups
            // (a long segment is longer than SHORT_SEG).
            longs: self.zeros::<u32>(2 + n / (SHORT_SEG + 1))?,
        })
    }

    /// Step 3 of the coalesce and the casted gather-reduce: a block per
    /// segment step 1 listed as long.
    pub(super) fn launch_combine_long(
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

    /// `out[i] = bag of lookup i` for `n` lookups.
    pub(super) fn bag_ids(
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
    pub(super) fn iota(&self, n: usize) -> Result<CudaSlice<u32>, KernelError> {
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
    pub(super) fn sort_pairs(
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

    /// The runs of equal keys of the first `n > 0` values of `sorted`,
    /// enqueued with no wait: room for `n` runs, of which the first
    /// [`Self::run_count`] are filled.
    pub(super) fn runs(&self, sorted: &CudaSlice<u32>, n: usize) -> Result<Runs, KernelError> {
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
    pub(super) fn run_count(&self, runs: &Runs, n: usize) -> Result<usize, KernelError> {
        let last = self
            .stream
            .clone_dtoh(&runs.inclusive.slice(n - 1..n))
            .map_err(driver_err("copying from the device"))?;
        self.sync()?;
        Ok(last[0] as usize)
    }

    /// The runs of equal keys of the first `n > 0` values of `sorted`, and
    /// their count.
    pub(super) fn segments(
        &self,
        sorted: &CudaSlice<u32>,
        n: usize,
    ) -> Result<Segments, KernelError> {
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
