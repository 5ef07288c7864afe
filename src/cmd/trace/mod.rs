//! `nmpsim trace …`: generate, convert, inspect and export embedding traces. Only
//! argument handling and printing live here; the work is in `nmpsim-traces`.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use nmpsim_traces::{
    BagSize, CriteoBatcher, CriteoOptions, CriteoReader, Distribution, GenSpec, Generator,
    ProfileOverrides, StatsBuilder, TableSpec, TraceHeader, TraceReader, TraceStats, TraceWriter,
    list_profiles, profile, write_csv,
};
use serde::Serialize;

use crate::rundir::{self, RunDir};

mod convert;
mod generate;
mod hot;
mod stats;

use convert::{convert_cmd, export_cmd};
use generate::gen_cmd;
use hot::{HotArgs, hot_cmd};
use stats::stats_cmd;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Generate a synthetic trace from a named profile or explicit parameters.
    #[command(after_help = "Examples:\n  \
        nmpsim trace gen --list-profiles\n  \
        nmpsim trace gen --profile criteo-kaggle --batches 4 -o kaggle.nmpt\n  \
        nmpsim trace gen --profile rm1 --rows 4000000 --batch 2048 --batches 10 -o rm1.nmpt\n  \
        nmpsim trace gen --tables 8 --rows 1000000 --dist zipf:1.05 --bag 80 --batches 10 -o z.nmpt")]
    Gen(GenArgs),
    /// Access statistics of a trace (or of a profile generated on the fly).
    ///
    /// Memory: a 4-byte counter per row for tables of up to 64 Mi rows (128 Mi
    /// rows in all), and about 40 bytes per distinct row looked up in larger
    /// tables (a hashed Criteo table of 2^32 rows): a trace that touches 100
    /// million distinct rows of such tables needs about 4 GB.
    #[command(after_help = "Examples:\n  \
        nmpsim trace stats kaggle.nmpt\n  \
        nmpsim trace stats kaggle.nmpt --json\n  \
        nmpsim trace stats --profile taobao --batch 4096 --batches 20 --out runs/taobao-stats")]
    Stats(StatsArgs),
    /// Hot rows (FAE's calibrator): the access profile of a sample of the
    /// input, the threshold that fits the hot rows in each memory budget, and
    /// the shares of lookups and of samples they serve.
    ///
    /// The profile counts every one of the first --min-samples samples (FAE:
    /// at least 500K) and --sample-rate of the rest (FAE: 5%), by a seeded
    /// draw per sample. Tables under 1 MiB are hot whole; in the others a row
    /// is hot when its count reaches the threshold, one for all tables: the
    /// least whose hot rows (with the small tables) fit the budget. Beside
    /// the exact count stands FAE's Rand-Em Box estimate (35 random chunks of
    /// 1024 rows per table, a 99.9% t-interval). A second pass over the input
    /// finds the samples whose every lookup is hot (FAE's hot inputs), so the
    /// input must be a file or a profile. Memory: as `trace stats` (a counter
    /// per row) plus 8 bytes per profiled sample.
    #[command(after_help = "Examples:
          nmpsim trace hot kaggle.nmpt --dim 16
          nmpsim trace hot kaggle.nmpt --dim 16 --budget 64MiB,256MiB,1GiB --out runs/kaggle-hot
          nmpsim trace hot --profile criteo-kaggle --batch 2048 --batches 50 --dim 16 --json
          nmpsim trace hot --criteo train.txt --max-ind-range 10000000 --dim 16")]
    Hot(HotArgs),
    /// Convert Criteo TSV (label, 13 integer, 26 hex categorical fields) to a binary trace.
    #[command(after_help = "Examples:\n  \
        nmpsim trace criteo-sample -o sample.tsv --samples 4096      # a small stand-in file\n  \
        nmpsim trace convert sample.tsv -o sample.nmpt --batch 512\n  \
        nmpsim trace convert train.txt -o kaggle-train.nmpt --batch 2048 --max-ind-range 10000000\n  \
        nmpsim trace convert day_0 -o day0.nmpt --max-ind-range 10000000\n\n\
        train.txt and day_0 are Criteo's own downloads (Kaggle Display Advertising, and\n\
        the Terabyte click logs), which nmpsim does not ship.")]
    Convert(ConvertArgs),
    /// Export a trace as CSV (batch,table,bag,position,row,weight), for inspection,
    /// or as NumPy `.npy` arrays, for other tools to run the same lookups.
    ///
    /// `--npy DIR` writes, per batch k and table t, `bKKKKK_tTTT_offsets.npy`
    /// (int64, B + 1 bag boundaries: PyTorch's `EmbeddingBag` with
    /// `include_last_offset=True`), `bKKKKK_tTTT_indices.npy` (int64 rows) and,
    /// for weighted tables, `bKKKKK_tTTT_weights.npy` (float32); dense
    /// features and labels when the trace has them; and `manifest.json`
    /// listing every table's rows and every file. `numpy.load` reads them,
    /// with no other package. DIR must not exist yet.
    #[command(
        after_help = "Examples:\n  nmpsim trace gen --tables 2 --rows 1000 --bag 4 --batch 8 --batches 2 -o small.nmpt\n  nmpsim trace export small.nmpt --csv small.csv\n  nmpsim trace export small.nmpt --csv -\n  nmpsim trace export small.nmpt --npy small-npy\n  python3 -c \"import numpy; print(numpy.load('small-npy/b00000_t000_indices.npy'))\""
    )]
    Export(ExportArgs),
    /// Write a Criteo-format TSV sample with labels from a planted teacher (Kaggle-like tables, capped rows).
    #[command(after_help = "Examples:\n  \
        nmpsim trace criteo-sample -o sample.tsv --samples 4096\n  \
        nmpsim train --model criteo-kaggle --data sample.tsv --max-ind-range 4096 --batch 256")]
    CriteoSample(CriteoSampleArgs),
}

#[derive(Args)]
pub struct CriteoSampleArgs {
    /// Output TSV file.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Lines (samples) to write.
    #[arg(long, default_value_t = 4096)]
    samples: usize,
    /// Rows of the largest tables (the 26 Kaggle sizes are capped at this).
    #[arg(long, default_value_t = 4096)]
    rows: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Refuses `-` as an output file: these commands write files (through a
/// temporary renamed into place), not standard output.
fn named_file(output: &Path, flag: &str) -> Result<()> {
    if output == Path::new("-") {
        anyhow::bail!("{flag} -: this command writes a file, not standard output; name a file");
    }
    Ok(())
}

fn criteo_sample_cmd(a: CriteoSampleArgs) -> Result<ExitCode> {
    named_file(&a.output, "-o")?;
    crate::cmd::at_least_one(&[("--samples", a.samples as u64), ("--rows", a.rows)])?;
    if a.rows > nmpsim_traces::format::MAX_TABLE_ROWS {
        anyhow::bail!("--rows {}: expected at most 2^32 (row ids are u32)", a.rows);
    }
    let spec = nmpsim_traces::profile(
        "criteo-kaggle",
        &ProfileOverrides {
            rows: Some(a.rows),
            batch_size: Some(1024),
            seed: Some(a.seed),
            ..Default::default()
        },
    )?;
    let mut data = nmpsim_dlrm::TeacherData::new(spec, 13, a.seed)?;
    let mut out = crate::rundir::StreamedFile::create(&a.output).context("-o")?;
    nmpsim_dlrm::data::write_criteo_tsv(&mut data, a.samples, out.writer())
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    out.commit()?;
    eprintln!(
        "wrote {} samples to {} (categorical values below {}: pass --max-ind-range {} to train on it)",
        a.samples,
        a.output.display(),
        a.rows,
        a.rows
    );
    Ok(ExitCode::SUCCESS)
}

/// Generator parameters shared by `gen` and `stats --profile`.
#[derive(Args, Debug, Clone)]
pub struct SpecArgs {
    /// Named profile (`nmpsim trace gen --list-profiles` lists them); the other options override it.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Number of tables, 1 to 65536 (without a profile: default 1; with one: keep/cycle its tables).
    #[arg(long, value_parser = crate::cmd::tables_arg, value_name = "N")]
    tables: Option<usize>,
    /// Rows per table (required without a profile; with one: largest tables set, others capped).
    #[arg(long, value_name = "R")]
    rows: Option<u64>,
    /// Multiply every table's rows by this factor (profiles only).
    #[arg(long, value_name = "F")]
    rows_scale: Option<f64>,
    /// Row distribution: uniform, zipf:ALPHA, zipf:ALPHA:noscatter, dlrm.
    #[arg(long, value_name = "DIST", value_parser = parse_dist)]
    dist: Option<Distribution>,
    /// Lookups per bag (without a profile: default 1).
    #[arg(long, value_name = "L")]
    bag: Option<u32>,
    /// Samples per batch [default: 1024].
    #[arg(long, value_name = "B")]
    batch: Option<usize>,
    /// Seed of the whole trace [default: 0].
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Give every lookup a weight in (0, 1].
    #[arg(long)]
    weighted: bool,
}

fn parse_dist(s: &str) -> Result<Distribution, String> {
    s.parse()
        .map_err(|e: nmpsim_traces::TraceError| e.to_string())
}

impl SpecArgs {
    fn resolve(&self) -> Result<(Option<String>, GenSpec)> {
        let mut spec = match &self.profile {
            Some(name) => profile(
                name,
                &ProfileOverrides {
                    batch_size: self.batch,
                    seed: self.seed,
                    bag_size: self.bag,
                    rows: self.rows,
                    rows_scale: self.rows_scale,
                    distribution: self.dist.clone(),
                    tables: self.tables,
                },
            )?,
            None => {
                let Some(rows) = self.rows else {
                    bail!(
                        "give --profile NAME, or --rows R (with optional --tables, --dist, --bag); `nmpsim trace gen --list-profiles` lists the profiles"
                    );
                };
                if self.rows_scale.is_some() {
                    bail!(
                        "--rows-scale applies to profiles; without --profile give --rows directly"
                    );
                }
                let t = TableSpec {
                    rows,
                    distribution: self.dist.clone().unwrap_or(Distribution::Uniform),
                    bag_size: BagSize::Fixed {
                        size: self.bag.unwrap_or(1),
                    },
                    weighted: false,
                };
                GenSpec {
                    tables: vec![t; self.tables.unwrap_or(1)],
                    batch_size: self
                        .batch
                        .unwrap_or(nmpsim_traces::profiles::DEFAULT_BATCH_SIZE),
                    seed: self.seed.unwrap_or(0),
                }
            }
        };
        if self.weighted {
            spec.tables.iter_mut().for_each(|t| t.weighted = true);
        }
        Generator::new(spec.clone())?;
        Ok((self.profile.clone(), spec))
    }
}

#[derive(Args)]
pub struct GenArgs {
    #[command(flatten)]
    spec: SpecArgs,
    /// Number of batches to write (at least 1).
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    batches: u64,
    /// Output trace file (.nmpt).
    #[arg(
        short,
        long,
        value_name = "FILE",
        required_unless_present = "list_profiles"
    )]
    output: Option<PathBuf>,
    /// List the named profiles and exit.
    #[arg(long, conflicts_with = "output")]
    list_profiles: bool,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args)]
#[command(mut_arg("out", |a| a.help(
    "Also write a run directory (config.json, results.json, tables.csv, cdf.csv, summary.txt)"
)))]
pub struct StatsArgs {
    /// Trace file to analyse (or use --profile to generate on the fly).
    #[arg(value_name = "FILE", conflicts_with_all = [
        "profile", "tables", "rows", "rows_scale", "dist", "bag", "batch", "seed",
        "weighted", "batches",
    ])]
    file: Option<PathBuf>,
    #[command(flatten)]
    spec: SpecArgs,
    /// Batches to generate with --profile / --rows (at least 1).
    #[arg(long, value_name = "K", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    batches: u64,
    #[command(flatten)]
    print: crate::cmd::PrintArgs,
}

#[derive(Args)]
pub struct ConvertArgs {
    /// Criteo TSV input (e.g. Kaggle train.txt or a Terabyte day file).
    #[arg(value_name = "TSV")]
    input: PathBuf,
    /// Output trace file (.nmpt).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Samples per batch.
    #[arg(long, value_name = "B", default_value_t = 1024)]
    batch: usize,
    /// Reduce categorical ids modulo N (tables then have N rows, else 2^32).
    #[arg(long, value_name = "N")]
    max_ind_range: Option<u64>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args)]
pub struct ExportArgs {
    /// Trace file.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// CSV output path, or - for stdout.
    #[arg(
        long,
        value_name = "OUT.csv",
        required_unless_present = "npy",
        conflicts_with = "npy"
    )]
    csv: Option<PathBuf>,
    /// Directory (new) of NumPy `.npy` arrays and a manifest.json.
    #[arg(long, value_name = "DIR")]
    npy: Option<PathBuf>,
}

pub fn run(c: TraceCommand) -> Result<ExitCode> {
    match c {
        TraceCommand::Gen(a) => gen_cmd(a),
        TraceCommand::Stats(a) => stats_cmd(a),
        TraceCommand::Hot(a) => hot_cmd(a),
        TraceCommand::Convert(a) => convert_cmd(a),
        TraceCommand::CriteoSample(a) => criteo_sample_cmd(a),
        TraceCommand::Export(a) => export_cmd(a),
    }
}

/// What `trace gen` stores as trace metadata and `trace stats --out` as config.
#[derive(Serialize)]
struct GenMeta<'a> {
    source: &'static str,
    profile: Option<&'a str>,
    spec: &'a GenSpec,
}

/// Refuses, before anything is allocated or created, a spec one of whose
/// batches cannot be held, naming --batch and --bag: a batch record beyond
/// the format's limit (`record`: when one is written), or the batch's arrays
/// (every table's offsets, indices and weights, the bytes of its record)
/// twice over beyond the memory available, as `kernels check` measures it.
/// Twice: `trace gen` holds the batch and the record built from it, `trace
/// stats` the batch and a copy of every table's indices (sorted to count
/// the unique rows).
fn check_batch_fits(spec: &GenSpec, record: bool) -> Result<()> {
    use nmpsim_traces::format::{MAX_RECORD_PAYLOAD, batch_payload_bytes};
    let b = spec.batch_size as u64;
    let bag = spec
        .tables
        .iter()
        .map(|t| t.bag_size.max())
        .max()
        .unwrap_or(0);
    let tables = spec
        .tables
        .iter()
        .map(|t| (b * u64::from(t.bag_size.max()), t.weighted));
    let payload = batch_payload_bytes(b, tables, None, false);
    let shape = format!(
        "--batch {b} x --bag {bag} lookups over {}",
        crate::cmd::plural(spec.tables.len(), "table", "tables")
    );
    if record && payload > u128::from(MAX_RECORD_PAYLOAD) {
        bail!(
            "{shape}: one batch record would hold {payload} bytes ({:.1} GB), but a trace record holds at most {MAX_RECORD_PAYLOAD} bytes (its length is a u32); lower --batch or --bag",
            payload as f64 / 1e9
        );
    }
    let need = payload * 2;
    crate::cmd::check_memory(need, &format!("one batch of {shape}"), "--batch or --bag")
}
