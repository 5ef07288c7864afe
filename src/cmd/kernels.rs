//! `nmpsim kernels ...`: embedding-primitive equivalence checks and the
//! analytic traffic of each primitive. All logic lives in `nmpsim-kernels`.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use nmpsim_kernels::Pooling;
use nmpsim_kernels::check::{Backend, CheckConfig, CpuBackend, TrafficBreakdown, run_check};
use nmpsim_traces::Distribution;

#[derive(Subcommand)]
pub enum KernelsCommand {
    /// Check every primitive of each backend against the scalar f64 reference.
    ///
    /// Exits 0 when every primitive is within tolerance, 1 on any mismatch.
    #[command(
        after_help = "Examples:\n  nmpsim kernels check\n  nmpsim kernels check --tables 2 --batch 256 --rows 10000 --dim 32 --dist uniform\n  nmpsim kernels check --pooling weighted-sum --json > check.json"
    )]
    Check {
        #[command(flatten)]
        workload: Workload,
        /// Backend to check (repeatable); only `cpu` exists today.
        #[arg(long = "backend", default_values = ["cpu"])]
        backends: Vec<String>,
        /// Print the full report as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the analytic bytes each primitive reads and writes (the paper's Fig. 6 method).
    #[command(
        after_help = "Examples:\n  nmpsim kernels traffic --bag 10 --batch 2048 --dist uniform\n  nmpsim kernels traffic --json"
    )]
    Traffic {
        #[command(flatten)]
        workload: Workload,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct Workload {
    /// Number of embedding tables.
    #[arg(long, default_value_t = 4)]
    tables: usize,
    /// Samples (bags) per batch.
    #[arg(long = "batch", default_value_t = 1024)]
    batch_size: usize,
    /// Lookups per bag.
    #[arg(long = "bag", default_value_t = 20)]
    bag_size: u32,
    /// Rows per table.
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// Embedding dimension (f32 elements per row).
    #[arg(long, default_value_t = 64)]
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
    fn config(&self) -> anyhow::Result<CheckConfig> {
        let distribution: Distribution = self
            .distribution
            .parse()
            .with_context(|| "--dist".to_string())?;
        let pooling: Pooling = self
            .pooling
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--pooling: {e}"))?;
        Ok(CheckConfig {
            tables: self.tables,
            batch_size: self.batch_size,
            bag_size: self.bag_size,
            rows: self.rows,
            dim: self.dim,
            distribution,
            pooling,
            seed: self.seed,
        })
    }
}

fn backend(name: &str) -> anyhow::Result<&'static dyn Backend> {
    match name {
        "cpu" => Ok(&CpuBackend),
        other => anyhow::bail!("--backend: unknown backend `{other}`; available: cpu"),
    }
}

pub fn run(c: KernelsCommand) -> anyhow::Result<ExitCode> {
    match c {
        KernelsCommand::Check {
            workload,
            backends,
            json,
        } => {
            let config = workload.config()?;
            let backends = backends
                .iter()
                .map(|b| backend(b))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let report = run_check(&config, &backends)?;
            if json {
                println!("{}", crate::rundir::results_json("kernels check", &report)?);
            } else {
                println!(
                    "{:<10} {:<25} {:>14} {:>10}  ok",
                    "backend", "primitive", "worst rel err", "tolerance"
                );
                for b in &report.backends {
                    for p in &b.primitives {
                        println!(
                            "{:<10} {:<25} {:>14.3e} {:>10.1e}  {}",
                            b.backend,
                            p.primitive,
                            p.worst_rel_err,
                            p.tolerance,
                            if p.ok { "yes" } else { "NO" }
                        );
                        if let Some(d) = &p.detail {
                            println!("{:<10}   {d}", "");
                        }
                    }
                }
                println!(
                    "{}",
                    if report.ok {
                        "all primitives match the reference"
                    } else {
                        "MISMATCH"
                    }
                );
            }
            Ok(if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        KernelsCommand::Traffic { workload, json } => {
            let config = workload.config()?;
            let report = run_check(&config, &[])?;
            if json {
                println!(
                    "{}",
                    crate::rundir::results_json("kernels traffic", &report.traffic)?
                );
            } else {
                print_traffic(&report.traffic);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_traffic(t: &TrafficBreakdown) {
    println!(
        "{} lookups, {} unique rows (summed over tables)",
        t.lookups, t.unique_rows
    );
    println!(
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
        ("scatter-sgd (2 steps)", t.scatter_sgd),
        ("scatter-adagrad (2 st.)", t.scatter_adagrad),
    ];
    for (name, x) in rows {
        println!(
            "{name:<24} {:>14} {:>14} {:>14}",
            x.read_bytes,
            x.write_bytes,
            x.total_bytes()
        );
    }
    let ec = (t.expand + t.coalesce_accumulate).total_bytes() as f64;
    println!(
        "expand+coalesce / gather-reduce = {:.2}; expand+coalesce / casted gather-reduce = {:.2}",
        ec / t.gather_reduce.total_bytes().max(1) as f64,
        ec / t.casted_gather_reduce.total_bytes().max(1) as f64
    );
}
