//! `nmpsim kernels bench`: the primitives timed on the CPU (on a trace or a
//! generated batch, outputs dumpable for a peer) or on the GPU.

use super::*;

#[derive(Args)]
pub struct BenchArgs {
    /// Backend to time: cpu or cuda (default: cpu with --trace, else cuda).
    #[arg(long)]
    backend: Option<String>,
    /// Trace whose batches the CPU bench runs (tables and rows from its header).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tables", "rows", "batch_size", "bag_size", "distribution"])]
    trace: Option<PathBuf>,
    /// Batches: the first N of --trace (default all), or N generated (default 1).
    #[arg(long, value_name = "N", value_parser = crate::cmd::positive_arg::<usize>)]
    batches: Option<usize>,
    /// Untimed repetitions before the timed ones (CPU).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Threads of the CPU kernels (default: every core).
    #[arg(long, value_parser = crate::cmd::positive_arg::<usize>)]
    threads: Option<usize>,
    /// Also write the outputs a peer compares against (.npy) into this new directory (CPU).
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// Learning rate of the SGD and Adagrad scatters (CPU).
    #[arg(long, default_value_t = 0.01)]
    lr: f32,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Number of embedding tables (1 to 65536).
    #[arg(long, value_parser = crate::cmd::tables_arg, default_value_t = 8)]
    tables: usize,
    /// Rows per table.
    #[arg(long, default_value_t = 4_000_000, value_parser = crate::cmd::positive_arg::<u64>)]
    rows: u64,
    /// Samples (bags) per batch.
    #[arg(long = "batch", default_value_t = 2048, value_parser = crate::cmd::positive_arg::<usize>)]
    batch_size: usize,
    /// Lookups per bag.
    #[arg(long = "bag", default_value_t = 80, value_parser = crate::cmd::positive_arg::<u32>)]
    bag_size: u32,
    /// Embedding dimension (f32 elements per row).
    #[arg(long, default_value_t = 64, value_parser = crate::cmd::positive_arg::<usize>)]
    dim: usize,
    /// Timed repetitions (at least 1); the median is reported.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    reps: u64,
    /// Row distribution: uniform, zipf:ALPHA, zipf:ALPHA:noscatter, dlrm.
    #[arg(long = "dist", default_value = "uniform")]
    distribution: String,
    /// Seed of the indices and table values.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write a run directory: config.json, results.json, summary.txt.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub(super) fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let backend = a
        .backend
        .clone()
        .unwrap_or_else(|| if a.trace.is_some() { "cpu" } else { "cuda" }.into());
    match backend.as_str() {
        "cpu" => bench_cpu(a),
        "cuda" => {
            for (set, flag) in [
                (a.trace.is_some(), "--trace"),
                (a.dump.is_some(), "--dump"),
                (a.threads.is_some(), "--threads"),
                (a.batches.is_some(), "--batches"),
            ] {
                if set {
                    anyhow::bail!(
                        "{flag} is for --backend cpu; the CUDA bench generates its batch"
                    );
                }
            }
            bench_cuda(a)
        }
        other => anyhow::bail!("--backend: unknown backend `{other}`; available: cpu, cuda"),
    }
}

/// The batches of the CPU bench and each table's rows: a trace's, or
/// generated from the size flags.
pub(super) fn bench_batches(
    a: &BenchArgs,
) -> anyhow::Result<(Vec<nmpsim_traces::Batch>, Vec<u64>)> {
    use nmpsim_traces::{BagSize, GenSpec, Generator, TableSpec, TraceReader};
    if let Some(path) = &a.trace {
        let reader = TraceReader::open(path)?;
        let rows = reader.header().table_rows.clone();
        let want = a.batches.unwrap_or(usize::MAX);
        let mut batches = Vec::new();
        for b in reader.take(want) {
            batches.push(b?);
        }
        if batches.is_empty() {
            anyhow::bail!("--trace {}: the trace has no batch", path.display());
        }
        return Ok((batches, rows));
    }
    let distribution = dist_arg(&a.distribution)?;
    let table = TableSpec {
        rows: a.rows,
        distribution,
        bag_size: BagSize::Fixed { size: a.bag_size },
        weighted: true,
    };
    let mut generator = Generator::new(GenSpec {
        tables: vec![table; a.tables],
        batch_size: a.batch_size,
        seed: a.seed,
    })?;
    let batches = (0..a.batches.unwrap_or(1))
        .map(|_| generator.next_batch())
        .collect();
    Ok((batches, vec![a.rows; a.tables]))
}

pub(super) fn bench_cpu(a: BenchArgs) -> anyhow::Result<ExitCode> {
    use nmpsim_kernels::bench::{CpuBenchConfig, bench_cpu, dump_outputs};
    if let Some(dir) = &a.dump
        && dir.exists()
    {
        anyhow::bail!(
            "--dump {}: already exists; name a new directory (nothing is overwritten)",
            dir.display()
        );
    }
    if a.trace.is_none() {
        // Tables and Adagrad's state, before the batches are generated.
        let need = 2 * a.tables as u128 * a.rows as u128 * a.dim as u128 * 4;
        crate::cmd::check_memory(
            need,
            &format!(
                "--tables {} x --rows {} x --dim {} (tables and Adagrad state)",
                a.tables, a.rows, a.dim
            ),
            "--tables, --rows or --dim",
        )?;
    }
    let (batches, rows) = bench_batches(&a)?;
    let total_rows: u128 = rows.iter().map(|&r| r as u128).sum();
    let lookups: u128 = batches
        .iter()
        .flat_map(|b| &b.tables)
        .map(|t| t.indices.len() as u128)
        .sum();
    crate::cmd::check_memory(
        2 * total_rows * a.dim as u128 * 4
            + 3 * lookups * a.dim as u128 * 4 / batches.len() as u128,
        &format!(
            "{} tables of {} rows in all x --dim {} (tables, Adagrad state, gradient buffers)",
            rows.len(),
            total_rows,
            a.dim
        ),
        "--dim or the trace's tables",
    )?;
    let config = CpuBenchConfig {
        dim: a.dim,
        reps: a.reps as usize,
        warmup: a.warmup,
        seed: a.seed,
        lr: a.lr,
        eps: 1e-10,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads.unwrap_or(0))
        .build()
        .context("cannot start the kernel threads")?;
    let dumped = match &a.dump {
        Some(dir) => Some(
            pool.install(|| dump_outputs(&batches[0], &rows, &config, dir))
                .with_context(|| format!("--dump {}", dir.display()))?,
        ),
        None => None,
    };
    let pb = crate::rundir::progress(
        (config.warmup + config.reps) as u64,
        "repetitions",
        a.quiet || a.json,
    );
    let r = pool.install(|| {
        bench_cpu(&batches, &rows, &config, |done, _| {
            pb.set_position(done as u64)
        })
    })?;
    pb.finish_and_clear();
    let mut o = String::new();
    let source = match &a.trace {
        Some(p) => format!("trace {}", p.display()),
        None => format!("generated ({})", a.distribution),
    };
    let _ = writeln!(
        o,
        "cpu, {} threads: {} tables x dim {}, {} ({}), {} lookups, {} unique rows; {} timed reps after {} warm-up",
        r.threads,
        r.tables,
        r.dim,
        crate::cmd::plural(r.batches, "batch", "batches"),
        source,
        r.lookups,
        r.unique_rows,
        config.reps,
        config.warmup
    );
    let mut t = nmpsim_traces::TextTable::new([
        "primitive",
        "median ms",
        "min ms",
        "max ms",
        "bytes",
        "GB/s",
    ])
    .left(&[0]);
    for p in &r.primitives {
        t.row([
            p.primitive.to_string(),
            format!("{:.3}", p.median_ms),
            format!("{:.3}", p.min_ms),
            format!("{:.3}", p.max_ms),
            p.bytes.to_string(),
            format!("{:.2}", p.gbps),
        ]);
    }
    o.push_str(&t.render());
    let _ = write!(
        o,
        "measured (wall clock, every table of one batch per rep); bytes: the analytic traffic \
         (Fig. 6 accounting); the scatters apply each rep's coalesced gradients (SGD lr {}, \
         Adagrad lr {} eps {:e})",
        config.lr, config.lr, config.eps
    );
    if let Some(files) = &dumped {
        let _ = write!(
            o,
            "\n{} outputs for a peer written to {}",
            files.len(),
            a.dump.as_ref().expect("dumped").display()
        );
    }
    #[derive(Serialize)]
    struct Config<'a> {
        backend: &'static str,
        trace: Option<String>,
        #[serde(flatten)]
        bench: &'a CpuBenchConfig,
        table_rows: &'a [u64],
    }
    let cfg = Config {
        backend: "cpu",
        trace: a.trace.as_ref().map(|p| p.display().to_string()),
        bench: &config,
        table_rows: &rows,
    };
    report("kernels bench", a.out.as_deref(), a.json, &cfg, &r, &o)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "cuda")]
pub(super) fn bench_cuda(a: BenchArgs) -> anyhow::Result<ExitCode> {
    use nmpsim_kernels::cuda::bench::{EmbeddingBenchConfig, bench_embedding};
    let distribution = dist_arg(&a.distribution)?;
    let config = EmbeddingBenchConfig {
        tables: a.tables,
        rows: a.rows,
        batch_size: a.batch_size,
        bag_size: a.bag_size,
        dim: a.dim,
        reps: a.reps as usize,
        distribution,
        seed: a.seed,
    };
    let cuda = match cuda_backend() {
        Ok(b) => b,
        Err(reason) => {
            eprintln!("error: kernels bench --backend cuda: no usable GPU: {reason}");
            return Ok(ExitCode::from(2));
        }
    };
    let r = bench_embedding(&cuda, &config)?;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: {} tables x {} rows x dim {}, batch {} x {} lookups ({}), {} reps",
        r.device,
        config.tables,
        config.rows,
        config.dim,
        config.batch_size,
        config.bag_size,
        a.distribution,
        config.reps
    );
    let _ = writeln!(
        o,
        "{} lookups, {} unique rows; device copy bandwidth {:.1} GB/s ({} MiB copy)",
        r.lookups,
        r.unique_rows,
        r.copy_gbps,
        r.copy_bytes >> 20
    );
    let mut k = nmpsim_traces::TextTable::new([
        "kernel",
        "median ms",
        "bytes",
        "GB/s",
        "of copy",
        "fewest bytes",
        "GB/s",
        "of copy",
    ])
    .left(&[0]);
    for t in [
        &r.gather_reduce,
        &r.gather_reduce_per_table,
        &r.casted_gather_reduce,
    ] {
        k.row([
            t.primitive.to_string(),
            format!("{:.4}", t.median_ms),
            t.bytes.to_string(),
            format!("{:.1}", t.gbps),
            format!("{:.1}%", 100.0 * t.fraction_of_copy),
            t.min_device_bytes.to_string(),
            format!("{:.1}", t.min_device_gbps),
            format!("{:.1}%", 100.0 * t.min_device_fraction_of_copy),
        ]);
    }
    o.push_str(&k.render());
    let _ = write!(
        o,
        "gather-reduce: every table in one launch (as the pool emulation runs it); \
         per table: one launch each. \
         bytes: the analytic traffic (each lookup reads a row, as the NMP pool does); \
         fewest bytes: each array read or written once (the casted gather-reduce's \
         re-reads of the output gradients hit the GPU's L2 cache)"
    );
    report("kernels bench", a.out.as_deref(), a.json, &config, &r, &o)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "cuda"))]
pub(super) fn bench_cuda(_: BenchArgs) -> anyhow::Result<ExitCode> {
    eprintln!(
        "error: kernels bench --backend cuda: {}",
        cuda_backend().unwrap_err()
    );
    Ok(ExitCode::from(2))
}
