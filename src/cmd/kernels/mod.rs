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

mod backends;
mod bench;
mod report;

use backends::{Selected, cuda_backend, select_backends};
use bench::{BenchArgs, bench};
use report::{report, traffic_text, write_run_dir};

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
    /// bags of 4096, or fewer so that every thread has one (no bag boundaries,
    /// almost no output), the rate at which
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
        let distribution = dist_arg(&self.distribution)?;
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

/// `--dist`'s distribution.
fn dist_arg(s: &str) -> anyhow::Result<Distribution> {
    s.parse().with_context(|| "--dist".to_string())
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
            // (A failed primitive's detail in the last column, beside it.)
            let mut t = nmpsim_traces::TextTable::new([
                "backend",
                "primitive",
                "worst rel err",
                "tolerance",
                "ok",
                "",
            ])
            .left(&[0, 1, 4, 5]);
            for b in &report.backends {
                for p in &b.primitives {
                    t.row([
                        b.backend.to_string(),
                        p.primitive.to_string(),
                        format!("{:.3e}", p.worst_rel_err),
                        format!("{:.1e}", p.tolerance),
                        (if p.ok { "yes" } else { "NO" }).to_string(),
                        p.detail.clone().unwrap_or_default(),
                    ]);
                }
            }
            text.push_str(&t.render());
            if let Some(reason) = &skipped {
                let _ = writeln!(text, "cuda: skipped ({reason})");
            }
            if let Some(reason) = &report.tt_skipped {
                let _ = writeln!(text, "cpu-tt: skipped ({reason})");
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
