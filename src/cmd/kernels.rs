//! `nmpsim kernels ...`: embedding-primitive equivalence checks, the
//! analytic traffic of each primitive, and (CUDA) kernel bandwidth. All logic
//! lives in `nmpsim-kernels`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use nmpsim_kernels::Pooling;
use nmpsim_kernels::check::{
    Backend, CheckConfig, CpuBackend, TrafficBreakdown, analytic_traffic, run_check,
};
use nmpsim_traces::Distribution;
use serde::Serialize;

#[derive(Subcommand)]
pub enum KernelsCommand {
    /// Check every primitive of each backend against the scalar f64 reference.
    ///
    /// Exits 0 when every primitive is within tolerance, 1 on any mismatch,
    /// 2 when `--backend cuda` is asked for and no GPU can be used (the reason
    /// is printed). `--backend all` checks the CPU and, where a GPU can be
    /// used, CUDA; without one it prints `cuda: skipped (<reason>)` and exits
    /// by the CPU's verdict.
    #[command(
        after_help = "Examples:\n  nmpsim kernels check\n  nmpsim kernels check --tables 2 --batch 256 --rows 10000 --dim 32 --dist uniform\n  nmpsim kernels check --pooling weighted-sum --json > check.json\n  nmpsim kernels check --backend cuda\n  nmpsim kernels check --backend all --dist zipf:1.2\n  nmpsim kernels check --out runs/check        # also config.json, results.json, summary.txt"
    )]
    Check {
        #[command(flatten)]
        workload: Workload,
        /// Backend to check (repeatable): cpu, cuda, or all (= cpu and cuda).
        #[arg(long = "backend", default_values = ["cpu"])]
        backends: Vec<String>,
        /// Print the full report as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also write a run directory: config.json, results.json, summary.txt.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Print the analytic bytes each primitive reads and writes (the paper's Fig. 6 method).
    ///
    /// The bytes follow from each table's lookups, bags and unique rows (of a
    /// batch generated as `kernels check` generates it) and from --rows and
    /// --dim: no table is built and no kernel runs, so any table size is
    /// answered at once.
    #[command(
        after_help = "Examples:\n  nmpsim kernels traffic --bag 10 --batch 2048 --dist uniform\n  nmpsim kernels traffic --json\n  nmpsim kernels traffic --bag 80 --out runs/traffic"
    )]
    Traffic {
        #[command(flatten)]
        workload: Workload,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also write a run directory: config.json, results.json, summary.txt.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Time the embedding primitives: on the CPU (wall clock, every
    /// primitive, optionally on a trace) or on CUDA (kernel time).
    ///
    /// `--backend cpu` times forward gather-reduce (sum, mean, and weighted
    /// sum when the batches carry weights), the baseline backward (expand,
    /// coalesce), Tensor Casting's (tensor-cast, casted gather-reduce) and
    /// the scatter with SGD and with Adagrad, each over every table of one
    /// batch per repetition, output buffers reused as a trainer reuses them.
    /// Tables and output gradients are seeded (the kernels crate's `bench`
    /// module says how, so another tool can rebuild them); `--trace FILE`
    /// runs a trace's batches in turn, else batches are generated from the
    /// size flags. `--dump DIR` also writes every table's pooled outputs and
    /// two tables' coalesced gradients and updated rows (`.npy`) for a peer
    /// to compare against (bench/peer/kernels.py does). Medians over --reps.
    /// With two batches or more it also times `row-read-bound`, after the
    /// other repetitions: the forward's code reading the same lookups' rows in
    /// bags of 4096 (no bag boundaries, almost no output), the rate at which
    /// this machine reads those rows.
    ///
    /// `--backend cuda` times the CUDA gather-reduce and casted gather-reduce
    /// kernels (CUDA events, kernel time only, median of --reps after a
    /// warm-up) and reports achieved GB/s (analytic bytes / time) and the
    /// fraction of the device's copy bandwidth. The gather-reduce is timed
    /// twice: every table in one launch (as the pool emulation runs it) and
    /// one launch per table.
    ///
    /// The default is RM1-like (80 lookups per bag, batch 2048) with tables
    /// far larger than any cache: 8 x 4M rows x 64 f32 = 8.19 GB (7.63 GiB)
    /// of memory (on the CPU twice that, with Adagrad's state). The backend is
    /// cpu with --trace, else cuda. Exits 2 when CUDA is asked for and no GPU
    /// can be used (the reason is printed).
    #[command(
        after_help = "Examples:\n  nmpsim trace gen --tables 10 --rows 1000000 --bag 80 --batch 2048 --dist zipf:1.05 --weighted --batches 4 -o rm1z.nmpt\n  nmpsim kernels bench --trace rm1z.nmpt --reps 10\n  nmpsim kernels bench --trace rm1z.nmpt --threads 2 --json --dump dump/\n  nmpsim kernels bench --backend cpu --tables 2 --rows 100000 --reps 5\n  nmpsim kernels bench --backend cuda\n  nmpsim kernels bench --backend cuda --tables 4 --rows 1000000 --dim 128 --reps 50\n  nmpsim kernels bench --backend cuda --json > bench.json"
    )]
    Bench(BenchArgs),
}

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

#[derive(Args)]
pub struct Workload {
    /// Number of embedding tables (1 to 65536).
    #[arg(long, value_parser = crate::cmd::tables_arg, default_value_t = 4)]
    tables: usize,
    /// Samples (bags) per batch.
    #[arg(long = "batch", default_value_t = 1024, value_parser = crate::cmd::positive_arg::<usize>)]
    batch_size: usize,
    /// Lookups per bag.
    #[arg(long = "bag", default_value_t = 20, value_parser = crate::cmd::positive_arg::<u32>)]
    bag_size: u32,
    /// Rows per table.
    #[arg(long, default_value_t = 100_000, value_parser = crate::cmd::positive_arg::<u64>)]
    rows: u64,
    /// Embedding dimension (f32 elements per row).
    #[arg(long, default_value_t = 64, value_parser = crate::cmd::positive_arg::<usize>)]
    dim: usize,
    /// Row distribution: uniform, zipf:ALPHA, zipf:ALPHA:noscatter, dlrm.
    #[arg(long = "dist", default_value = "zipf:1.05")]
    distribution: String,
    /// Pooling: sum, mean, weighted-sum.
    #[arg(long, default_value = "sum")]
    pooling: String,
    /// Seed of the traces, tables and gradients.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl Workload {
    /// The workload as a check config; `check_memory` (what running the
    /// check on it needs) is the caller's.
    fn config(&self) -> anyhow::Result<CheckConfig> {
        let distribution: Distribution = self
            .distribution
            .parse()
            .with_context(|| "--dist".to_string())?;
        let pooling: Pooling = self
            .pooling
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--pooling: {e}"))?;
        let config = CheckConfig {
            tables: self.tables,
            batch_size: self.batch_size,
            bag_size: self.bag_size,
            rows: self.rows,
            dim: self.dim,
            distribution,
            pooling,
            seed: self.seed,
        };
        Ok(config)
    }
}

/// Refuses a workload that cannot fit in memory, before allocating anything.
/// Counted: every table four times (the table, the updated copies the
/// scatter checks compare, the reference's) and four of one table's
/// expanded gradients (expanded, coalesced, casted, the reference's), against
/// the 80% of the available memory a run may take.
fn check_memory(c: &CheckConfig) -> anyhow::Result<()> {
    let f32s = c.tables as u128 * c.rows as u128 * c.dim as u128 * 4
        + c.batch_size as u128 * c.bag_size as u128 * c.dim as u128 * 4;
    crate::cmd::check_memory(
        f32s * 4,
        &format!(
            "--tables {} x --rows {} x --dim {} (batch {} x bag {})",
            c.tables, c.rows, c.dim, c.batch_size, c.bag_size
        ),
        "--tables, --rows, --dim, --batch or --bag",
    )
}

/// The CUDA backend, or why it cannot be used here.
#[cfg(feature = "cuda")]
fn cuda_backend() -> Result<nmpsim_kernels::cuda::CudaBackend, String> {
    nmpsim_kernels::cuda::CudaBackend::new().map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Result<CpuBackend, String> {
    Err("this nmpsim was built without the `cuda` feature (no CUDA support)".into())
}

/// What `--backend` resolved to.
enum Selected {
    /// The backends to check, and why CUDA was skipped (from `all`), if it was.
    Run(Vec<Box<dyn Backend>>, Option<String>),
    /// Stop with this status (CUDA named and no GPU; the reason is printed).
    Exit(ExitCode),
}

/// The backends of `--backend`, each once, in order. CUDA named explicitly
/// with no usable GPU prints the reason and exits 2; CUDA from `all` is
/// skipped with its reason.
fn select_backends(names: &[String]) -> anyhow::Result<Selected> {
    let mut wanted: Vec<(&str, bool)> = Vec::new();
    for name in names {
        let expanded: &[(&str, bool)] = match name.as_str() {
            "cpu" => &[("cpu", true)],
            "cuda" => &[("cuda", true)],
            "all" => &[("cpu", false), ("cuda", false)],
            other => {
                anyhow::bail!("--backend: unknown backend `{other}`; available: cpu, cuda, all")
            }
        };
        for &(b, explicit) in expanded {
            match wanted.iter_mut().find(|w| w.0 == b) {
                Some(w) => w.1 |= explicit,
                None => wanted.push((b, explicit)),
            }
        }
    }
    let mut out: Vec<Box<dyn Backend>> = Vec::new();
    let mut skipped = None;
    for (name, explicit) in wanted {
        match name {
            "cpu" => out.push(Box::new(CpuBackend)),
            _ => match cuda_backend() {
                Ok(b) => out.push(Box::new(b)),
                Err(reason) if explicit => {
                    eprintln!("error: --backend cuda: no usable GPU: {reason}");
                    return Ok(Selected::Exit(ExitCode::from(2)));
                }
                Err(reason) => skipped = Some(reason),
            },
        }
    }
    Ok(Selected::Run(out, skipped))
}

pub fn run(c: KernelsCommand) -> anyhow::Result<ExitCode> {
    match c {
        KernelsCommand::Check {
            workload,
            backends,
            json,
            out,
        } => {
            let config = workload.config()?;
            check_memory(&config)?;
            let (owned, skipped) = match select_backends(&backends)? {
                Selected::Run(b, skipped) => (b, skipped),
                Selected::Exit(code) => return Ok(code),
            };
            let backends: Vec<&dyn Backend> = owned.iter().map(|b| b.as_ref()).collect();
            let report = run_check(&config, &backends)?;
            let mut text = String::new();
            let _ = writeln!(
                text,
                "{:<10} {:<25} {:>14} {:>10}  ok",
                "backend", "primitive", "worst rel err", "tolerance"
            );
            for b in &report.backends {
                for p in &b.primitives {
                    let _ = writeln!(
                        text,
                        "{:<10} {:<25} {:>14.3e} {:>10.1e}  {}",
                        b.backend,
                        p.primitive,
                        p.worst_rel_err,
                        p.tolerance,
                        if p.ok { "yes" } else { "NO" }
                    );
                    if let Some(d) = &p.detail {
                        let _ = writeln!(text, "{:<10}   {d}", "");
                    }
                }
            }
            if let Some(reason) = &skipped {
                let _ = writeln!(text, "cuda: skipped ({reason})");
            }
            let _ = write!(
                text,
                "{}",
                if report.ok {
                    "all primitives match the reference"
                } else {
                    "MISMATCH"
                }
            );
            // The results say which backends ran, and why CUDA did not when
            // it was asked for: "ok" covers only the backends listed.
            #[derive(Serialize)]
            struct Results<'a> {
                #[serde(flatten)]
                report: &'a nmpsim_kernels::check::CheckReport,
                cuda_skipped: Option<&'a str>,
            }
            let results = Results {
                report: &report,
                cuda_skipped: skipped.as_deref(),
            };
            if let Some(dir) = &out {
                #[derive(Serialize)]
                struct Config<'a> {
                    workload: &'a CheckConfig,
                    backends: Vec<&'a str>,
                    cuda_skipped: Option<&'a str>,
                }
                let names = report.backends.iter().map(|b| b.backend.as_str()).collect();
                let config = Config {
                    workload: &config,
                    backends: names,
                    cuda_skipped: skipped.as_deref(),
                };
                write_run_dir(dir, "kernels check", &config, &results, &text)?;
            }
            if json {
                outln!(
                    "{}",
                    crate::rundir::results_json("kernels check", &results)?
                )?;
                if let Some(reason) = &skipped {
                    eprintln!("cuda: skipped ({reason})");
                }
            } else {
                outln!("{text}")?;
            }
            Ok(if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        KernelsCommand::Traffic {
            workload,
            json,
            out,
        } => {
            let config = workload.config()?;
            // One table's batch at a time: its indices (and weights), and
            // the sorted copy that counts its unique rows.
            let words = if config.pooling == Pooling::WeightedSum {
                3
            } else {
                2
            };
            crate::cmd::check_memory(
                config.batch_size as u128 * config.bag_size as u128 * words * 4,
                &format!(
                    "--batch {} x --bag {} lookups of one table",
                    config.batch_size, config.bag_size
                ),
                "--batch or --bag",
            )?;
            let traffic = analytic_traffic(&config)?;
            let text = traffic_text(&traffic);
            report(
                "kernels traffic",
                out.as_deref(),
                json,
                &config,
                &traffic,
                &text,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        KernelsCommand::Bench(args) => bench(args),
    }
}

fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
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
fn bench_batches(a: &BenchArgs) -> anyhow::Result<(Vec<nmpsim_traces::Batch>, Vec<u64>)> {
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
    let distribution: Distribution = a
        .distribution
        .parse()
        .with_context(|| "--dist".to_string())?;
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

fn bench_cpu(a: BenchArgs) -> anyhow::Result<ExitCode> {
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
    let _ = writeln!(
        o,
        "{:<26} {:>10} {:>10} {:>10} {:>14} {:>9}",
        "primitive", "median ms", "min ms", "max ms", "bytes", "GB/s"
    );
    for p in &r.primitives {
        let _ = writeln!(
            o,
            "{:<26} {:>10.3} {:>10.3} {:>10.3} {:>14} {:>9.2}",
            p.primitive, p.median_ms, p.min_ms, p.max_ms, p.bytes, p.gbps
        );
    }
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
fn bench_cuda(a: BenchArgs) -> anyhow::Result<ExitCode> {
    use nmpsim_kernels::cuda::bench::{EmbeddingBenchConfig, bench_embedding};
    let distribution: Distribution = a
        .distribution
        .parse()
        .with_context(|| "--dist".to_string())?;
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
    let _ = writeln!(
        o,
        "{:<26} {:>10} {:>14} {:>9} {:>8} {:>14} {:>9} {:>8}",
        "kernel", "median ms", "bytes", "GB/s", "of copy", "fewest bytes", "GB/s", "of copy"
    );
    for t in [
        &r.gather_reduce,
        &r.gather_reduce_per_table,
        &r.casted_gather_reduce,
    ] {
        let _ = writeln!(
            o,
            "{:<26} {:>10.4} {:>14} {:>9.1} {:>7.1}% {:>14} {:>9.1} {:>7.1}%",
            t.primitive,
            t.median_ms,
            t.bytes,
            t.gbps,
            100.0 * t.fraction_of_copy,
            t.min_device_bytes,
            t.min_device_gbps,
            100.0 * t.min_device_fraction_of_copy
        );
    }
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
fn bench_cuda(_: BenchArgs) -> anyhow::Result<ExitCode> {
    eprintln!(
        "error: kernels bench --backend cuda: {}",
        cuda_backend().unwrap_err()
    );
    Ok(ExitCode::from(2))
}

/// What a kernels command ends with: the run directory `out` if asked for,
/// then the results as JSON (`json`) or the printed table.
fn report<C: Serialize, R: Serialize>(
    command: &str,
    out: Option<&Path>,
    json: bool,
    config: &C,
    results: &R,
    text: &str,
) -> anyhow::Result<()> {
    if let Some(dir) = out {
        write_run_dir(dir, command, config, results, text)?;
    }
    if json {
        outln!("{}", crate::rundir::results_json(command, results)?)?;
    } else {
        outln!("{text}")?;
    }
    Ok(())
}

/// Writes run directory `dir` of a kernels command: `config.json`,
/// `results.json` and `summary.txt` (the table printed).
fn write_run_dir<C: Serialize, R: Serialize>(
    dir: &Path,
    command: &str,
    config: &C,
    results: &R,
    summary: &str,
) -> anyhow::Result<()> {
    let rd = crate::rundir::RunDir::create(Some(dir), &command.replace(' ', "-"))?;
    rd.write_config(command, config)?;
    rd.write_results(command, results)?;
    rd.write_summary(&format!("{summary}\n"))?;
    rd.finish()?;
    Ok(())
}

fn traffic_text(t: &TrafficBreakdown) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} lookups, {} unique rows (summed over tables)",
        t.lookups, t.unique_rows
    );
    let _ = writeln!(
        o,
        "{:<24} {:>14} {:>14} {:>14}",
        "primitive", "read_bytes", "write_bytes", "total_bytes"
    );
    let rows = [
        ("gather-reduce", t.gather_reduce),
        ("expand", t.expand),
        ("coalesce (sort)", t.coalesce_sort),
        ("coalesce (accumulate)", t.coalesce_accumulate),
        ("tensor-cast", t.tensor_cast),
        ("casted-gather-reduce", t.casted_gather_reduce),
        ("scatter-sgd", t.scatter_sgd),
        ("scatter-adagrad", t.scatter_adagrad),
    ];
    for (name, x) in rows {
        let _ = writeln!(
            o,
            "{name:<24} {:>14} {:>14} {:>14}",
            x.read_bytes,
            x.write_bytes,
            x.total_bytes()
        );
    }
    let ec = (t.expand + t.coalesce_accumulate).total_bytes() as f64;
    let _ = write!(
        o,
        "expand+coalesce / gather-reduce = {:.2}; expand+coalesce / casted gather-reduce = {:.2}",
        ec / t.gather_reduce.total_bytes().max(1) as f64,
        ec / t.casted_gather_reduce.total_bytes().max(1) as f64
    );
    o
}
