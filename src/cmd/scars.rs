//! `nmpsim scars plan`: SCARS's communication cost model (`nmpsim_dlrm::scars`)
//! on a distribution: one of the paper's three families, a named profile's,
//! or a trace's measured frequencies.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use nmpsim_dlrm::scars::{CachePoint, CostModel, DeviceMemory, Family, TableDist};
use nmpsim_traces::hot::{ProfileBuilder, Sampling};
use nmpsim_traces::{Distribution, ProfileOverrides, TraceReader, zipf_pmf};
use serde::Serialize;

use crate::rundir::{self, RunDir};

#[derive(Subcommand)]
pub enum ScarsCommand {
    /// The expected traffic between host and device per epoch, without
    /// coalescing, coalesced and with a device cache of the hottest rows, and
    /// the cache size of least traffic beside the batch it leaves (SCARS,
    /// Eq. 1-12).
    ///
    /// Units are the paper's: parameters (one embedding value, or one index);
    /// bytes count 4 a parameter. The model, its reading of the paper's
    /// overloaded `d` and its truncated Eq. 13 are in docs/strategies.md.
    #[command(after_help = "Examples:\n  \
        nmpsim scars plan --dist zipf:1 --rows 1000000 --dim 64 --batch 2048 --cache 64MiB,256MiB\n  \
        nmpsim scars plan --dist half-normal:0.05 --rows 1000000 --device-memory 1GiB --per-sample 64KiB\n  \
        nmpsim scars plan --profile criteo-kaggle --dim 16 --samples 45840617 --batch 2048,8192\n  \
        nmpsim scars plan --trace kaggle.nmpt --dim 16 --device-memory 512MiB --per-sample 16KiB --json")]
    Plan(PlanArgs),
}

#[derive(Args)]
pub struct PlanArgs {
    /// One of the paper's families over --rows ranks: zipf:ALPHA,
    /// exponential:RATE or half-normal:WIDTH (RATE and WIDTH in units of the
    /// whole table).
    #[arg(long, value_name = "FAMILY", conflicts_with_all = ["profile", "trace"])]
    dist: Option<Family>,
    /// With --dist: rows of each table.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    rows: u64,
    /// With --dist: tables, each with the same distribution.
    #[arg(long, value_name = "T", default_value_t = 1, value_parser = crate::cmd::tables_arg)]
    tables: usize,
    /// With --dist: lookups per sample of each table.
    #[arg(long, value_name = "L", default_value_t = 1.0)]
    lookups: f64,
    /// A named trace profile's tables and distributions (`nmpsim trace gen --list-profiles`).
    #[arg(long, value_name = "NAME", conflicts_with = "trace")]
    profile: Option<String>,
    /// A trace whose measured frequencies stand for the distributions.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Parameters of one embedding row (the dimension, the paper's `d`).
    #[arg(long, default_value_t = 64, value_parser = crate::cmd::positive_arg::<usize>)]
    dim: usize,
    /// Samples per epoch (`Q`) [default: the trace's samples, else 1000000].
    #[arg(long, value_name = "Q")]
    samples: Option<u64>,
    /// Batch sizes (`b`) at which to evaluate Eq. 3-6, comma-separated.
    #[arg(
        long,
        value_name = "B,...",
        value_delimiter = ',',
        default_value = "2048"
    )]
    batch: Vec<u64>,
    /// Device cache sizes to evaluate at each batch (Eq. 6), comma-separated sizes.
    #[arg(long, value_name = "SIZE,...", value_delimiter = ',', value_parser = crate::cmd::size_arg)]
    cache: Vec<u64>,
    /// The device memory the batch and the cache share (`M`, Eq. 7): with
    /// --per-sample, the cache size of least traffic.
    #[arg(long, value_name = "SIZE", value_parser = crate::cmd::size_arg, requires = "per_sample")]
    device_memory: Option<u64>,
    /// Device memory one sample of the batch takes (`a`: its activations and
    /// share of the model).
    #[arg(long, value_name = "SIZE", value_parser = crate::cmd::size_arg, requires = "device_memory")]
    per_sample: Option<u64>,
    /// Print results as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write a run directory (config.json, results.json, summary.txt).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Bytes per parameter (f32 values; indices counted as one parameter each, as the paper does).
const BYTES_PER_PARAM: u64 = 4;

#[derive(Serialize)]
struct AtBatch {
    batch: u64,
    /// Expected unique rows of a batch (Eq. 2), over all tables.
    unique_rows: f64,
    /// Eq. 4: parameters per epoch, one row per lookup.
    uncoalesced_params: f64,
    /// Eq. 5: coalesced.
    coalesced: CachePoint,
    /// Eq. 6, per cache size asked for.
    cached: Vec<(u64, CachePoint)>,
}

#[derive(Serialize)]
struct Best {
    memory: DeviceMemory,
    /// Without a cache, the batch the whole memory holds.
    no_cache: CachePoint,
    /// The cache of least traffic (binary search) and the batch beside it.
    best: CachePoint,
    cache_bytes: u64,
    /// The marginal rule at the best size: (chance the next row is in a
    /// batch, the threshold it must reach).
    marginal_benefit: f64,
    marginal_threshold: f64,
}

#[derive(Serialize)]
struct PlanResults {
    tables: usize,
    rows: u64,
    row_params: f64,
    samples: f64,
    lookups_per_sample: f64,
    batches: Vec<AtBatch>,
    best: Option<Best>,
}

pub fn run(c: ScarsCommand) -> Result<ExitCode> {
    match c {
        ScarsCommand::Plan(a) => plan(a),
    }
}

/// The tables' distributions, the default epoch and a description of the source.
fn distributions(a: &PlanArgs) -> Result<(Vec<TableDist>, u64, serde_json::Value)> {
    if let Some(path) = &a.trace {
        let reader = TraceReader::open(path)?;
        let rows = reader.header().table_rows.clone();
        let mut pb = ProfileBuilder::new(&rows, Sampling::all())?;
        for b in reader {
            pb.add(&b?)?;
        }
        let p = pb.finish()?;
        let tables = TableDist::from_profile(&p);
        let src = serde_json::json!({ "source": "trace", "file": path.to_string_lossy() });
        return Ok((tables, p.samples_seen, src));
    }
    if let Some(name) = &a.profile {
        let spec = nmpsim_traces::profile(name, &ProfileOverrides::default())?;
        let tables = spec
            .tables
            .iter()
            .map(|t| {
                let probs = match &t.distribution {
                    Distribution::Zipf { alpha, .. } => zipf_pmf(t.rows, *alpha),
                    // (The DLRM reference's rows are uniform, unique within a bag.)
                    Distribution::Uniform | Distribution::DlrmRandom => {
                        vec![1.0 / t.rows as f64; t.rows as usize]
                    }
                };
                let lookups = match t.bag_size {
                    nmpsim_traces::BagSize::Fixed { size } => size as f64,
                    nmpsim_traces::BagSize::Uniform { min, max } => (min + max) as f64 / 2.0,
                };
                TableDist {
                    probs,
                    lookups_per_sample: lookups,
                }
            })
            .collect();
        let src = serde_json::json!({ "source": "profile", "profile": name });
        return Ok((tables, 1_000_000, src));
    }
    let Some(family) = a.dist else {
        bail!("give --dist FAMILY (with --rows), --profile NAME or --trace FILE");
    };
    if a.rows == 0 || a.rows > 1 << 31 {
        bail!("--rows {}: expected 1 to 2^31 rows", a.rows);
    }
    if !(a.lookups.is_finite() && a.lookups > 0.0) {
        bail!(
            "--lookups {}: expected a positive number of lookups per sample",
            a.lookups
        );
    }
    let probs = family.pmf(a.rows);
    let tables = (0..a.tables)
        .map(|_| TableDist {
            probs: probs.clone(),
            lookups_per_sample: a.lookups,
        })
        .collect();
    let src = serde_json::json!({
        "source": "family", "dist": family, "rows": a.rows, "tables": a.tables, "lookups": a.lookups,
    });
    Ok((tables, 1_000_000, src))
}

fn plan(a: PlanArgs) -> Result<ExitCode> {
    if a.batch.contains(&0) {
        bail!("--batch 0: expected batch sizes of at least 1 sample");
    }
    let (tables, default_samples, source) = distributions(&a)?;
    let samples = a.samples.unwrap_or(default_samples);
    if samples == 0 {
        bail!("--samples 0: expected at least one sample per epoch");
    }
    let model = CostModel::new(&tables, a.dim as f64, samples as f64)?;
    let row_bytes = a.dim as u64 * BYTES_PER_PARAM;
    let rows_of = |bytes: u64| bytes / row_bytes;
    let batches = a
        .batch
        .iter()
        .map(|&b| AtBatch {
            batch: b,
            unique_rows: model.unique(b as f64, 0),
            uncoalesced_params: model.epoch_uncoalesced(),
            coalesced: model.epoch(b as f64, 0),
            cached: a
                .cache
                .iter()
                .map(|&c| (c, model.epoch(b as f64, rows_of(c))))
                .collect(),
        })
        .collect();
    let best = match (a.device_memory, a.per_sample) {
        (Some(m), Some(s)) => {
            let mem = DeviceMemory {
                params: (m / BYTES_PER_PARAM) as f64,
                per_sample: (s / BYTES_PER_PARAM) as f64,
            };
            let best = model
                .best_cache(mem)
                .context("--device-memory and --per-sample")?;
            let (benefit, threshold) = model.marginal(mem, best.cached_rows);
            Some(Best {
                memory: mem,
                no_cache: model.epoch_with_memory(mem, 0),
                best,
                cache_bytes: best.cached_rows * row_bytes,
                marginal_benefit: benefit,
                marginal_threshold: threshold,
            })
        }
        _ => None,
    };
    let r = PlanResults {
        tables: tables.len(),
        rows: model.rows(),
        row_params: a.dim as f64,
        samples: samples as f64,
        lookups_per_sample: model.lookups_per_sample,
        batches,
        best,
    };
    let config = serde_json::json!({
        "input": source,
        "dim": a.dim,
        "samples": samples,
        "batches": a.batch,
        "caches": a.cache,
        "device_memory": a.device_memory,
        "per_sample": a.per_sample,
    });
    let text = summary(&r);
    if let Some(dir) = &a.out {
        let rd = RunDir::create(Some(dir), "scars-plan")?;
        rd.write_config("scars plan", &config)?;
        rd.write_results("scars plan", &r)?;
        rd.write_summary(&text)?;
        rd.finish()?;
    }
    if a.json {
        outln!("{}", rundir::results_json("scars plan", &r)?)?;
    } else {
        out!("{text}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn gb(params: f64) -> String {
    format!("{:.3}", params * BYTES_PER_PARAM as f64 / 1e9)
}

fn summary(r: &PlanResults) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "SCARS cost model (modelled): {}, {} rows that can be looked up, {} {} per sample, rows of {} parameters, {} samples per epoch",
        crate::cmd::plural(r.tables, "table", "tables"),
        r.rows,
        r.lookups_per_sample,
        if r.lookups_per_sample == 1.0 {
            "lookup"
        } else {
            "lookups"
        },
        r.row_params,
        r.samples
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "GB per epoch (4 bytes a parameter):");
    let mut t = nmpsim_traces::TextTable::new([
        "batch",
        "unique rows",
        "uncoalesced",
        "coalesced",
        "cache",
    ]);
    for b in &r.batches {
        t.row([
            b.batch.to_string(),
            format!("{:.1}", b.unique_rows),
            gb(b.uncoalesced_params),
            gb(b.coalesced.total_params),
            "-".into(),
        ]);
        for (bytes, c) in &b.cached {
            t.row([
                String::new(),
                format!("{:.1}", c.unique_uncached),
                String::new(),
                gb(c.total_params),
                format!("{:.1} MiB", *bytes as f64 / (1u64 << 20) as f64),
            ]);
        }
    }
    s.push_str(&t.render());
    if let Some(b) = &r.best {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "device memory {:.1} MiB, {:.1} KiB a sample (Eq. 7):",
            b.memory.params * 4.0 / (1u64 << 20) as f64,
            b.memory.per_sample * 4.0 / 1024.0
        );
        let _ = writeln!(
            s,
            "  no cache: batch {:.1}, {} GB per epoch",
            b.no_cache.batch,
            gb(b.no_cache.total_params)
        );
        let _ = writeln!(
            s,
            "  least traffic: cache {} rows ({:.1} MiB), batch {:.1}, {} GB per epoch; the next row: benefit {:.3e} against t1 {:.3e} (Eq. 11-12)",
            b.best.cached_rows,
            b.cache_bytes as f64 / (1u64 << 20) as f64,
            b.best.batch,
            gb(b.best.total_params),
            b.marginal_benefit,
            b.marginal_threshold
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "uncoalesced: Eq. 4, one row per lookup; coalesced: Eq. 5, an index per lookup and each batch's unique rows; cache: Eq. 6, the hottest rows kept on the device; all modelled from the distribution, none measured"
    );
    s
}
