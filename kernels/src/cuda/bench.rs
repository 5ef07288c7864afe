//! Kernel-only timing of the CUDA primitives with CUDA events, and the
//! embedding bench behind `nmpsim kernels bench --backend cuda`: forward
//! gather-reduce and the casted gather-reduce of Tensor Casting on an
//! RM1-like setup whose tables are far larger than the L2 cache, reported as
//! achieved bandwidth (analytic [`crate::Traffic`] bytes / kernel time) and
//! as a fraction of the device's copy bandwidth.
//!
//! Only the kernels are timed: inputs are generated and copied to the device
//! once, before any timing, and no copy back happens inside a timed region.

use nmpsim_traces::{BagSize, Distribution, TableBatch, TableSpec, generate_table_batch};
use serde::Serialize;

use super::backend::{ChunkScratch, K_FILL_UNIFORM, chunk_scratch_bytes};
use super::driver_err;
use super::{CudaBackend, DeviceTable};
use crate::coalesce::segment_starts;
use crate::error::KernelError;
use crate::pooling::Pooling;
use crate::table::SplitMix64;
use crate::traffic::{casted_gather_reduce_traffic, gather_reduce_traffic};

/// Median kernel time in ms of `f` (which only enqueues work on `backend`'s
/// stream): `warmup` untimed runs, then `reps` runs each between two CUDA
/// events. All reps are enqueued before the first is waited for, so the
/// host runs ahead of the device and launch overhead does not show up as
/// idle device time between the events.
pub fn time_median_ms(
    backend: &CudaBackend,
    warmup: usize,
    reps: usize,
    mut f: impl FnMut() -> Result<(), KernelError>,
) -> Result<f64, KernelError> {
    for _ in 0..warmup {
        f()?;
    }
    backend.sync()?;
    let stream = backend.stream();
    let reps = reps.max(1);
    let mut events = Vec::with_capacity(reps);
    for _ in 0..reps {
        events.push((backend.timing_event()?, backend.timing_event()?));
    }
    for (start, end) in &events {
        start
            .record(stream)
            .map_err(driver_err("recording an event"))?;
        f()?;
        end.record(stream)
            .map_err(driver_err("recording an event"))?;
    }
    let mut times = Vec::with_capacity(reps);
    for (start, end) in &events {
        let ms = start
            .elapsed_ms(end)
            .map_err(driver_err("timing with events"))?;
        times.push(ms as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// What `nmpsim kernels bench` runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddingBenchConfig {
    pub tables: usize,
    pub rows: u64,
    pub batch_size: usize,
    /// Lookups per bag (fixed).
    pub bag_size: u32,
    pub dim: usize,
    /// Timed repetitions (the median is reported) after one warm-up.
    pub reps: usize,
    pub distribution: Distribution,
    pub seed: u64,
}

impl Default for EmbeddingBenchConfig {
    /// RM1-like (80 lookups per bag, batch 2048) with 8 tables of 4M rows x
    /// 64 (8.19 GB = 7.63 GiB of tables, far beyond any L2 cache).
    fn default() -> Self {
        EmbeddingBenchConfig {
            tables: 8,
            rows: 4_000_000,
            batch_size: 2048,
            bag_size: 80,
            dim: 64,
            reps: 20,
            distribution: Distribution::Uniform,
            seed: 1,
        }
    }
}

/// One primitive's timing over all tables.
#[derive(Debug, Clone, Serialize)]
pub struct PrimitiveTiming {
    pub primitive: String,
    /// Median time of one call on every table, in ms.
    pub median_ms: f64,
    /// Analytic bytes read + written by one call on every table.
    pub bytes: u64,
    /// `bytes / median time`, in GB/s (10^9 bytes per second).
    pub gbps: f64,
    /// `gbps / copy_gbps`.
    pub fraction_of_copy: f64,
    /// The fewest bytes the kernel must move through device memory: each
    /// input array read once, each output written once. For the casted
    /// gather-reduce this is far below `bytes`: its gathers re-read the
    /// batch's small output-gradient array, which stays in the GPU's L2
    /// cache (the NMP pool reads it from DRAM, as `bytes` counts).
    pub min_device_bytes: u64,
    /// `min_device_bytes / median time`, in GB/s.
    pub min_device_gbps: f64,
    /// `min_device_gbps / copy_gbps`.
    pub min_device_fraction_of_copy: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingBenchReport {
    pub device: String,
    pub config: EmbeddingBenchConfig,
    /// Device-to-device copy bandwidth (read + written bytes / time), GB/s.
    pub copy_gbps: f64,
    pub copy_bytes: u64,
    /// Lookups and unique rows, summed over tables.
    pub lookups: u64,
    pub unique_rows: u64,
    /// Every table's gather-reduce in one launch (as the NMP pool emulation
    /// runs it).
    pub gather_reduce: PrimitiveTiming,
    /// One gather-reduce launch per table.
    pub gather_reduce_per_table: PrimitiveTiming,
    /// One casted gather-reduce per table.
    pub casted_gather_reduce: PrimitiveTiming,
}

/// Device arrays of one table of the bench.
struct BenchTable {
    table: DeviceTable,
    batch: TableBatch,
    indices: cudarc::driver::CudaSlice<u32>,
    offsets: cudarc::driver::CudaSlice<u32>,
    out: cudarc::driver::CudaSlice<f32>,
    grad_out: cudarc::driver::CudaSlice<f32>,
    casted_src: cudarc::driver::CudaSlice<u32>,
    casted_dst: cudarc::driver::CudaSlice<u32>,
    starts: cudarc::driver::CudaSlice<u32>,
    coalesced: cudarc::driver::CudaSlice<f32>,
    scratch: ChunkScratch,
    bags: usize,
    lookups: usize,
    unique: usize,
}

/// Fills `n` device values uniformly in `[lo, hi)`.
fn fill_uniform(
    backend: &CudaBackend,
    buf: &mut cudarc::driver::CudaSlice<f32>,
    n: usize,
    seed: u64,
    lo: f32,
    hi: f32,
) -> Result<(), KernelError> {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let f = backend.func(K_FILL_UNIFORM)?;
    let n64 = n as u64;
    let blocks = n64.div_ceil(256).clamp(1, 1 << 20) as u32;
    {
        use super::KernelArg;
        backend.gpu().check_launch(
            &super::SOURCES[0],
            K_FILL_UNIFORM,
            &[
                (&*buf).kind(),
                (&n64).kind(),
                (&seed).kind(),
                (&lo).kind(),
                (&hi).kind(),
            ],
        )?;
    }
    let mut b = backend.stream().launch_builder(&f);
    b.arg(buf).arg(&n64).arg(&seed).arg(&lo).arg(&hi);
    // SAFETY: (float*, u64, u64, float, float) as the kernel declares; the
    // buffer holds at least `n` values.
    unsafe {
        b.launch(LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        })
    }
    .map(|_| ())
    .map_err(driver_err("launching nmpsim_fill_uniform"))
}

/// Runs the embedding bench of `config` on `backend`'s device.
pub fn bench_embedding(
    backend: &CudaBackend,
    config: &EmbeddingBenchConfig,
) -> Result<EmbeddingBenchReport, KernelError> {
    crate::error::check_dim(config.dim)?;
    if config.tables == 0 || config.batch_size == 0 || config.rows == 0 {
        return Err(KernelError::invalid(
            "config",
            "tables, batch and rows must all be at least 1",
        ));
    }
    let dim = config.dim;
    let table_len = usize::try_from(config.rows)
        .ok()
        .and_then(|r| r.checked_mul(dim))
        .ok_or_else(|| KernelError::invalid("rows", "rows x dim overflows"))?;
    let lookups_per_table = config.batch_size * config.bag_size as usize;
    // Tables, plus per table: indices, output, gradient, casted arrays (src,
    // dst, starts) and the coalesced gradient (at most one row per lookup).
    let per_table = table_len * 4
        + lookups_per_table * 4 * 4
        + config.batch_size * dim * 4 * 2
        + lookups_per_table.min(config.rows as usize) * dim * 4
        + chunk_scratch_bytes(lookups_per_table, dim);
    let need = per_table as u128 * config.tables as u128;
    let (free, _total) = backend
        .gpu()
        .ctx
        .mem_get_info()
        .map_err(driver_err("querying device memory"))?;
    if need > free as u128 * 9 / 10 {
        return Err(KernelError::invalid(
            "tables",
            format!(
                "the bench needs {:.1} GiB of device memory, {:.1} GiB is free; use fewer --tables or --rows",
                need as f64 / (1u64 << 30) as f64,
                free as f64 / (1u64 << 30) as f64
            ),
        ));
    }

    let spec = TableSpec {
        rows: config.rows,
        distribution: config.distribution.clone(),
        bag_size: BagSize::Fixed {
            size: config.bag_size,
        },
        weighted: false,
    };
    let mut seeds = SplitMix64::new(config.seed);
    let bound = (1.0 / config.rows as f64).sqrt() as f32;
    let mut tables = Vec::with_capacity(config.tables);
    for t in 0..config.tables {
        let batch = generate_table_batch(&spec, config.batch_size, seeds.next_u64())
            .map_err(|e| KernelError::from(e).in_table(t))?;
        let (casted, _) = crate::tensor_cast(&batch, Pooling::Sum).map_err(|e| e.in_table(t))?;
        let starts = segment_starts(&casted.casted_dst);
        let bags = batch.batch_size();
        let unique = casted.unique_rows.len();
        let mut values = backend.zeros::<f32>(table_len)?;
        fill_uniform(
            backend,
            &mut values,
            table_len,
            seeds.next_u64(),
            -bound,
            bound,
        )?;
        let mut grad_out = backend.zeros::<f32>(bags * dim)?;
        fill_uniform(
            backend,
            &mut grad_out,
            bags * dim,
            seeds.next_u64(),
            -1.0,
            1.0,
        )?;
        tables.push(BenchTable {
            table: backend.device_table(config.rows, dim, values)?,
            indices: backend.upload(&batch.indices)?,
            offsets: backend.upload(&batch.offsets)?,
            out: backend.zeros::<f32>(bags * dim)?,
            grad_out,
            casted_src: backend.upload(&casted.casted_src)?,
            casted_dst: backend.upload(&casted.casted_dst)?,
            starts: backend.upload(&starts)?,
            coalesced: backend.zeros::<f32>(unique * dim)?,
            scratch: backend.chunk_scratch(batch.num_lookups(), dim)?,
            bags,
            lookups: batch.num_lookups(),
            unique,
            batch,
        });
    }
    let dummy = backend.zeros::<f32>(1)?;
    backend.sync()?;

    // (Sized from what is free now, with the tables in place: its two
    // buffers must fit beside them.)
    let (free_now, _) = backend
        .gpu()
        .ctx
        .mem_get_info()
        .map_err(driver_err("querying device memory"))?;
    let copy_bytes = (1usize << 30).min(free_now / 4);
    let copy_gbps = backend.copy_bandwidth_gbps(copy_bytes)?;

    let device_tables: Vec<&DeviceTable> = tables.iter().map(|t| &t.table).collect();
    let batches: Vec<TableBatch> = tables.iter().map(|t| t.batch.clone()).collect();
    let mut staged = backend.stage_tables(&device_tables, &batches, Pooling::Sum)?;
    drop(batches);
    backend.sync()?;
    let gr_tables_ms = time_median_ms(backend, 1, config.reps, || {
        backend.gather_reduce_tables_staged(&device_tables, &mut staged)
    })?;
    drop(staged);
    drop(device_tables);
    let gr_ms = time_median_ms(backend, 1, config.reps, || {
        for t in tables.iter_mut() {
            backend.launch_gather_reduce(
                t.table.data(),
                dim,
                &t.indices,
                &t.offsets,
                &dummy,
                t.bags,
                Pooling::Sum,
                &mut t.out,
            )?;
        }
        Ok(())
    })?;
    let cg_ms = time_median_ms(backend, 1, config.reps, || {
        for t in tables.iter_mut() {
            backend.launch_casted_gather_reduce(
                &t.grad_out,
                dim,
                &t.casted_src,
                None,
                &dummy,
                &t.casted_dst,
                &t.starts,
                t.unique,
                t.lookups,
                &mut t.scratch,
                &mut t.coalesced,
            )?;
        }
        Ok(())
    })?;

    let gr_bytes: u64 = tables
        .iter()
        .map(|t| gather_reduce_traffic(t.lookups, t.bags, dim, false).total_bytes())
        .sum();
    let cg_bytes: u64 = tables
        .iter()
        .map(|t| casted_gather_reduce_traffic(t.lookups, t.unique, dim, false).total_bytes())
        .sum();
    // Fewest device bytes: gather-reduce reads each distinct looked-up row
    // once (`unique`, the casted rows), the indices and offsets, and writes
    // the pooled rows; the casted gather-reduce reads the output gradients,
    // the casted sources and the segment starts, and writes the coalesced
    // rows.
    let gr_min: u64 = tables
        .iter()
        .map(|t| (t.unique * dim * 4 + t.lookups * 4 + (t.bags + 1) * 4 + t.bags * dim * 4) as u64)
        .sum();
    let cg_min: u64 = tables
        .iter()
        .map(|t| {
            (t.bags * dim * 4 + t.lookups * 4 + (t.unique + 1) * 4 + t.unique * dim * 4) as u64
        })
        .sum();
    let timing = |primitive: &str, ms: f64, bytes: u64, min_bytes: u64| {
        let gbps = bytes as f64 / (ms * 1e-3) / 1e9;
        let min_gbps = min_bytes as f64 / (ms * 1e-3) / 1e9;
        PrimitiveTiming {
            primitive: primitive.into(),
            median_ms: ms,
            bytes,
            gbps,
            fraction_of_copy: gbps / copy_gbps,
            min_device_bytes: min_bytes,
            min_device_gbps: min_gbps,
            min_device_fraction_of_copy: min_gbps / copy_gbps,
        }
    };
    Ok(EmbeddingBenchReport {
        device: backend.gpu().name().to_string(),
        config: config.clone(),
        copy_gbps,
        copy_bytes: copy_bytes as u64,
        lookups: tables.iter().map(|t| t.lookups as u64).sum(),
        unique_rows: tables.iter().map(|t| t.unique as u64).sum(),
        gather_reduce: timing("gather-reduce", gr_tables_ms, gr_bytes, gr_min),
        gather_reduce_per_table: timing("gather-reduce per table", gr_ms, gr_bytes, gr_min),
        casted_gather_reduce: timing("casted-gather-reduce", cg_ms, cg_bytes, cg_min),
    })
}
