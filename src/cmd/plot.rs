//! `nmpsim plot`: a chart (SVG and PNG) of columns of a tidy CSV, typically a
//! sweep's `results.csv`. Reading the table and drawing are
//! `nmpsim_experiments::plot`; this module parses flags and names files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use nmpsim_experiments::plot::{CsvChart, CsvChartOptions, read_csv_chart, write_chart_sized};

const EXAMPLES: &str = "Examples:
  # (what `nmpsim sweep experiments/specs/nmp-ranks.toml` and `nmpsim sweep
  #  experiments/specs/dram-ddr4-speed.toml` write, then a results.csv of your own)
  nmpsim plot runs/sweep-nmp-ranks/results.csv --x ranks --y phases.0.report.effective_bandwidth_gbps --log-x
  nmpsim plot runs/sweep-dram-ddr4-speed/results.csv --x preset --y runs.0.bandwidth_gbps --group stream --group seed
  nmpsim plot results.csv --x batch --y sim_gbps --group engine --log-y --title 'Bandwidth' --out figs/bw
  nmpsim plot results.csv --x batch --y read_gbps --y write_gbps      # one series per y column

Writes STEM.svg and STEM.png (default STEM: beside the CSV, <csv name>-<y>-vs-<x>)
and prints their paths. A numeric x gives a line chart (points in x order), any
other x grouped bars (categories in file order); --bars forces bars. Rows whose y
is empty or not a number (failed runs) are skipped and counted on stderr, per y
column. The series are the --group values, or the y columns when there are
several, or both. Nothing is aggregated: rows sharing a category (bars) or an x
(lines) in one series (replicates, seeds) are an error; split them with --group.";

/// `nmpsim plot`: draw a chart of a results table.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct PlotArgs {
    /// The CSV table (header line, RFC 4180 quoting), e.g. a sweep's results.csv.
    #[arg(value_name = "CSV")]
    csv: PathBuf,
    /// Column on the x axis.
    #[arg(long, value_name = "COLUMN")]
    x: String,
    /// Column on the y axis; repeat for several (one series each).
    #[arg(long, value_name = "COLUMN", required = true)]
    y: Vec<String>,
    /// Column whose values split the rows into series; repeat to combine columns.
    #[arg(long, value_name = "COLUMN")]
    group: Vec<String>,
    /// Logarithmic x axis (line charts; values must be positive).
    #[arg(long)]
    log_x: bool,
    /// Logarithmic y axis (values must be positive).
    #[arg(long)]
    log_y: bool,
    /// Grouped bars even when x is numeric.
    #[arg(long)]
    bars: bool,
    /// Chart title [default: <y> vs <x>, plus "by <group>"].
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// x axis label [default: the x column].
    #[arg(long, value_name = "TEXT")]
    x_label: Option<String>,
    /// y axis label [default: the y column, or "value" for several].
    #[arg(long, value_name = "TEXT")]
    y_label: Option<String>,
    /// Output path without extension: writes STEM.svg and STEM.png.
    #[arg(long, value_name = "STEM")]
    out: Option<PathBuf>,
    /// Image size in pixels.
    #[arg(long, value_name = "WxH", default_value = "900x560", value_parser = parse_size)]
    size: (u32, u32),
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected WIDTHxHEIGHT in pixels, e.g. 900x560, got `{s}`");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    if !(300..=10_000).contains(&w) || !(200..=10_000).contains(&h) {
        return Err(format!("{w}x{h} is out of range (300x200 to 10000x10000)"));
    }
    Ok((w, h))
}

/// A column name as part of a file name.
fn file_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '=') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `<dir of csv>/<csv stem>-<y>[+<y>...]-vs-<x>`.
fn default_stem(csv: &Path, x: &str, ys: &[String]) -> PathBuf {
    let stem = csv
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plot".into());
    let ys = ys
        .iter()
        .map(|y| file_part(y))
        .collect::<Vec<_>>()
        .join("+");
    let name = format!("{stem}-{ys}-vs-{}", file_part(x));
    csv.parent().unwrap_or(Path::new("")).join(name)
}

/// Charts `ys` against `x` from `csv` into `stem` (default: [`default_stem`])
/// as SVG and PNG: what `nmpsim plot` and `nmpsim sweep --plot-x` do. Returns
/// the files and the chart with its row counts.
pub(crate) fn draw(
    csv: &Path,
    x: &str,
    ys: &[String],
    group: &[String],
    opts: &CsvChartOptions,
    stem: Option<PathBuf>,
    size: (u32, u32),
) -> Result<(Vec<PathBuf>, CsvChart)> {
    let read = read_csv_chart(csv, x, ys, group, opts)?;
    let stem = stem.unwrap_or_else(|| default_stem(csv, x, ys));
    for ext in ["svg", "png"] {
        let mut chart = stem.as_os_str().to_owned();
        chart.push(format!(".{ext}"));
        crate::rundir::refuse_same_file(csv, Path::new(&chart), "the chart")?;
    }
    let files = write_chart_sized(&read.chart, &stem, size)?;
    Ok((files, read))
}

/// What was left out of the chart: one line per y column that lost rows
/// (one y column: `skipped N of M rows: ...`; several: `... rows for `Y`: ...`).
fn skipped_notes(read: &CsvChart, x: &str, ys: &[String]) -> Vec<String> {
    let empty_x = if read.empty_x > 0 {
        format!(" or empty `{x}`")
    } else {
        String::new()
    };
    ys.iter()
        .zip(&read.skipped)
        .filter(|&(_, &n)| n > 0)
        .map(|(y, n)| {
            let of = format!("skipped {n} of {} rows", read.rows);
            if ys.len() == 1 {
                format!("note: {of}: empty or non-numeric `{y}`{empty_x} (failed runs, or a statistic the run has none of?)")
            } else {
                format!(
                    "note: {of} for `{y}`: empty or non-numeric value{empty_x} (failed runs, or a statistic the run has none of?)"
                )
            }
        })
        .collect()
}

pub fn run(a: PlotArgs) -> Result<ExitCode> {
    if a.log_x && a.bars {
        bail!("--log-x needs a line chart; it cannot be combined with --bars");
    }
    let opts = CsvChartOptions {
        bars: a.bars,
        log_x: a.log_x,
        log_y: a.log_y,
        title: a.title.clone(),
        x_label: a.x_label.clone(),
        y_label: a.y_label.clone(),
    };
    let (files, read) = draw(&a.csv, &a.x, &a.y, &a.group, &opts, a.out.clone(), a.size)?;
    for note in skipped_notes(&read, &a.x, &a.y) {
        eprintln!("{note}");
    }
    for path in files {
        outln!("{}", path.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_default_stems() {
        assert_eq!(parse_size("900x560"), Ok((900, 560)));
        assert_eq!(parse_size("1200X800"), Ok((1200, 800)));
        assert!(parse_size("900").is_err());
        assert!(parse_size("10x10").is_err());
        assert_eq!(
            default_stem(
                Path::new("runs/s/results.csv"),
                "batch",
                &["runs.0.bandwidth_gbps".into(), "a b/c".into()]
            ),
            PathBuf::from("runs/s/results-runs.0.bandwidth_gbps+a_b_c-vs-batch")
        );
        assert_eq!(
            default_stem(Path::new("r.csv"), "x", &["y".into()]),
            PathBuf::from("r-y-vs-x")
        );
    }
}
