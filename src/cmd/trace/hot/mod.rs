//! `nmpsim trace hot`: FAE's calibrator on a trace, a Criteo TSV file or a
//! profile generated on the fly: the access profile of a sample of the
//! input, the threshold that fits the hot rows in each memory budget, the
//! share of lookups and of samples they serve, FAE's Rand-Em Box estimate
//! beside the exact hot-row count, and a chart of the shares against the
//! budget. The work is `nmpsim_traces::hot`.

use nmpsim_experiments::plot::{Chart, ChartKind, Series, XValue, write_chart};
use nmpsim_traces::Batch;
use nmpsim_traces::hot::{
    AccessProfile, BudgetResult, Calibration, FAE_MIN_SAMPLES, FAE_SAMPLE_RATE, HotSamples,
    ProfileBuilder, SMALL_TABLE_BYTES, SampleMins, Sampling,
};

use super::*;
use crate::rundir::{Column, fields};

mod report;
use report::{summary, write_hot_dir};

#[derive(Args)]
#[command(mut_arg("out", |a| a.help(
    "Also write a run directory (config.json, results.json, budgets.csv, curve.csv, tables.csv, hot-share.svg/.png, summary.txt)"
)))]
pub struct HotArgs {
    /// Trace file (.nmpt) to profile (or --criteo TSV, or a profile generated
    /// with --profile / --rows).
    #[arg(value_name = "FILE", conflicts_with_all = [
        "criteo", "profile", "tables", "rows", "rows_scale", "dist", "bag", "batch", "seed",
        "weighted", "batches",
    ])]
    file: Option<PathBuf>,
    /// A Criteo TSV file (label, 13 integer, 26 hex categorical fields) to profile.
    #[arg(long, value_name = "TSV", conflicts_with_all = [
        "profile", "tables", "rows", "rows_scale", "dist", "bag", "batch", "seed", "weighted",
        "batches",
    ])]
    criteo: Option<PathBuf>,
    /// With --criteo: reduce categorical ids modulo N (tables of N rows; without
    /// it, 2^32 rows each, counted sparsely).
    #[arg(long, value_name = "N", requires = "criteo")]
    max_ind_range: Option<u64>,
    #[command(flatten)]
    spec: SpecArgs,
    /// Batches to generate with --profile / --rows (at least 1).
    #[arg(long, value_name = "K", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    batches: u64,
    /// Embedding width: f32 values per row (a row is 4 x DIM bytes).
    #[arg(long, default_value_t = 64, value_parser = crate::cmd::positive_arg::<usize>)]
    dim: usize,
    /// Memory budgets of the hot rows, comma-separated: a size with a unit
    /// (kB, MB, GB, KiB, MiB, GiB) or bytes.
    #[arg(long, value_name = "SIZE,...", value_delimiter = ',', default_value = "256MiB",
          value_parser = crate::cmd::size_arg)]
    budget: Vec<u64>,
    /// Share of the samples past the first --min-samples that the profile counts, in (0, 1].
    #[arg(long, value_name = "RATE", default_value_t = FAE_SAMPLE_RATE)]
    sample_rate: f64,
    /// The first this many samples are all counted.
    #[arg(long, value_name = "N", default_value_t = FAE_MIN_SAMPLES)]
    min_samples: u64,
    /// Seed of the sampling draws and of the Rand-Em Box's chunks.
    #[arg(long, value_name = "S", default_value_t = 0)]
    sample_seed: u64,
    #[command(flatten)]
    print: crate::cmd::PrintArgs,
}

/// Where the batches come from; read once, or twice when the profiled lookups are too many to keep.
enum Input {
    Trace(PathBuf),
    Criteo(PathBuf, CriteoOptions),
    Generated(GenSpec, u64),
}

/// Samples per batch read from a Criteo file (the profile does not depend on it).
const CRITEO_BATCH: usize = 4096;

impl Input {
    fn table_rows(&self) -> Result<Vec<u64>> {
        Ok(match self {
            Input::Trace(p) => TraceReader::open(p)?.header().table_rows.clone(),
            Input::Criteo(_, o) => (0..nmpsim_traces::criteo::NUM_CATS)
                .map(|t| o.rows_of(t))
                .collect(),
            Input::Generated(spec, _) => spec.tables.iter().map(|t| t.rows).collect(),
        })
    }

    /// Hands every batch to `f`, with a progress bar labelled `what`.
    fn each(&self, what: &str, quiet: bool, mut f: impl FnMut(&Batch) -> Result<()>) -> Result<()> {
        match self {
            Input::Trace(p) => {
                let pb = rundir::progress_count(what, "batches", quiet);
                for b in TraceReader::open(p)? {
                    f(&b?)?;
                    pb.inc(1);
                }
                pb.finish_and_clear();
            }
            Input::Criteo(p, o) => {
                let file = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
                let len = file.metadata().map(|m| m.len()).unwrap_or(0);
                let pb = rundir::progress(len, what, quiet);
                let reader = CriteoReader::from_reader(
                    BufReader::with_capacity(1 << 20, pb.wrap_read(file)),
                    p,
                    o.clone(),
                )?;
                for b in CriteoBatcher::new(reader, CRITEO_BATCH)? {
                    f(&b?)?;
                }
                pb.finish_and_clear();
            }
            Input::Generated(spec, batches) => {
                let pb = rundir::progress(*batches, what, quiet);
                for b in Generator::new(spec.clone())?.take(*batches as usize) {
                    f(&b)?;
                    pb.inc(1);
                }
                pb.finish_and_clear();
            }
        }
        Ok(())
    }
}

/// The most bytes of profiled lookups kept in memory for the hot samples'
/// pass (a 10M-sample Criteo-Kaggle input profiled at FAE's rate keeps about
/// 100 MB).
const RETAIN_BYTES: u64 = 1 << 30;

/// One table of the results.
#[derive(Serialize)]
struct TableRow {
    table: usize,
    rows: u64,
    bytes: u128,
    /// Under 1 MiB: hot whole.
    small: bool,
    lookups: u64,
    touched_rows: u64,
}

#[derive(Serialize)]
struct HotResults {
    samples_seen: u64,
    samples_profiled: u64,
    lookups_profiled: u64,
    dim: usize,
    row_bytes: u64,
    tables_bytes: u128,
    small_tables_bytes: u128,
    tables: Vec<TableRow>,
    /// The budgets asked for.
    budgets: Vec<BudgetResult>,
    /// Budgets doubling from the small tables' size to the tables' total,
    /// for the chart.
    curve: Vec<BudgetResult>,
}

pub(super) fn hot_cmd(a: HotArgs) -> Result<ExitCode> {
    let sampling = Sampling {
        rate: a.sample_rate,
        min_samples: a.min_samples,
        seed: a.sample_seed,
    };
    sampling.validate().context("--sample-rate")?;
    let (input, source) = match (&a.file, &a.criteo) {
        (Some(p), _) => (
            Input::Trace(p.clone()),
            serde_json::json!({ "source": "trace", "file": p.to_string_lossy() }),
        ),
        (None, Some(p)) => {
            let opts = CriteoOptions {
                max_ind_range: a.max_ind_range,
                table_rows: None,
            };
            (
                Input::Criteo(p.clone(), opts),
                serde_json::json!({
                    "source": "criteo-tsv",
                    "file": p.to_string_lossy(),
                    "max_ind_range": a.max_ind_range,
                }),
            )
        }
        (None, None) => {
            let (name, spec) = a.spec.resolve()?;
            check_batch_fits(&spec, false)?;
            let source = serde_json::json!({
                "source": "generator", "profile": name, "spec": &spec, "batches": a.batches,
            });
            (Input::Generated(spec, a.batches), source)
        }
    };
    for p in [&a.file, &a.criteo].into_iter().flatten() {
        if p == Path::new("-") || !p.is_file() {
            bail!(
                "{}: not a regular file; `trace hot` reads its input twice when the profiled samples' lookups pass 1 GiB (the profile, then the hot samples), so it needs a file",
                p.display()
            );
        }
    }
    let row_bytes = 4 * a.dim as u64;
    let table_rows = input.table_rows()?;
    let quiet = a.print.no_progress();

    // The profiled samples' lookups are kept for the second pass when they
    // fit in RETAIN_BYTES; past that the input is read again.
    let mut pb = ProfileBuilder::new(&table_rows, sampling)?.retaining(RETAIN_BYTES);
    input.each("profiling", quiet, |b| Ok(pb.add(b)?))?;
    let (profile, retained) = pb.finish_retained()?;
    let cal = Calibration::new(&profile, row_bytes)?;
    let mut budgets = a
        .budget
        .iter()
        .map(|&b| {
            cal.budget(&profile, b)
                .with_context(|| format!("--budget {b}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut curve = curve_budgets(&cal)
        .into_iter()
        .filter_map(|b| cal.budget(&profile, b).ok())
        .collect::<Vec<_>>();
    let samples = match &retained {
        Some(kept) => HotSamples::of_retained(&profile, &cal, kept)?,
        None => {
            let mut mins = SampleMins::new(&profile, &cal);
            input.each("hot samples", quiet, |b| Ok(mins.add(b)?))?;
            mins.finish()?
        }
    };
    drop(retained);
    for r in budgets.iter_mut().chain(curve.iter_mut()) {
        samples.fill(r);
    }
    let results = HotResults {
        samples_seen: profile.samples_seen,
        samples_profiled: profile.samples_profiled,
        lookups_profiled: profile.total_lookups(),
        dim: a.dim,
        row_bytes,
        tables_bytes: cal.total_bytes(),
        small_tables_bytes: cal.small_bytes(),
        tables: table_rows_of(&profile, &cal),
        budgets,
        curve,
    };
    let config = serde_json::json!({
        "input": source,
        "dim": a.dim,
        "budgets": a.budget,
        "sampling": sampling,
        "small_table_bytes": SMALL_TABLE_BYTES,
    });
    let text = summary(&results, &profile);
    let written = match &a.print.out {
        Some(dir) => Some(write_hot_dir(dir, &config, &results, &text)?),
        None => None,
    };
    rundir::print_run(
        "trace hot",
        &results,
        &text,
        a.print.json,
        written.as_deref(),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Budgets doubling from the small tables' size (at least 1 MiB) to under
/// the tables' total.
fn curve_budgets(cal: &Calibration) -> Vec<u64> {
    let mut b = (cal.small_bytes() as u64).max(1 << 20).next_power_of_two();
    let mut out = Vec::new();
    while (b as u128) < cal.total_bytes() && out.len() < 48 {
        out.push(b);
        b = b.saturating_mul(2);
    }
    out
}

fn table_rows_of(p: &AccessProfile, cal: &Calibration) -> Vec<TableRow> {
    p.counts
        .iter()
        .enumerate()
        .map(|(t, c)| TableRow {
            table: t,
            rows: c.rows(),
            bytes: c.rows() as u128 * cal.row_bytes as u128,
            small: cal.small[t],
            lookups: p.lookups[t],
            touched_rows: c.touched_counts().len() as u64,
        })
        .collect()
}
