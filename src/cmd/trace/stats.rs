//! `nmpsim trace stats`: a trace's statistics (of a file, or of one
//! generated without writing it), printed and written as a run directory.

use nmpsim_traces::TableStats;
use nmpsim_traces::stats::CdfPoint;

use super::*;
use crate::rundir::{Column, fields};

pub(super) fn stats_cmd(a: StatsArgs) -> Result<ExitCode> {
    let (config, stats) = match &a.file {
        Some(path) => {
            let reader = TraceReader::open(path)?;
            let mut sb = StatsBuilder::new(&reader.header().table_rows);
            let config = serde_json::json!({
                "source": "trace",
                "file": path.to_string_lossy(),
                "metadata": serde_json::from_str::<serde_json::Value>(&reader.header().metadata)
                    .unwrap_or_else(|_| serde_json::Value::String(reader.header().metadata.clone())),
            });
            let pb = rundir::progress_count("analysing", "batches", a.print.no_progress());
            for batch in reader {
                sb.add(&batch?)?;
                pb.inc(1);
            }
            pb.finish_and_clear();
            (config, sb.finish())
        }
        None => {
            let (name, spec) = a.spec.resolve()?;
            check_batch_fits(&spec, false)?;
            let config = serde_json::json!({
                "source": "generator",
                "profile": name,
                "spec": &spec,
                "batches": a.batches,
            });
            let rows: Vec<u64> = spec.tables.iter().map(|t| t.rows).collect();
            let mut sb = StatsBuilder::new(&rows);
            let pb = rundir::progress(a.batches, "analysing", a.print.no_progress());
            for batch in Generator::new(spec)?.take(a.batches as usize) {
                sb.add(&batch)?;
                pb.inc(1);
            }
            pb.finish_and_clear();
            (config, sb.finish())
        }
    };
    // The run directory first, as every command writes it: a stdout that
    // cannot be written does not lose it.
    let written = match &a.print.out {
        Some(dir) => Some(write_stats_dir(dir, &config, &stats)?),
        None => None,
    };
    rundir::print_run(
        "trace stats",
        &stats,
        &stats.to_string(),
        a.print.json,
        written.as_deref(),
    )?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn write_stats_dir(
    dir: &Path,
    config: &serde_json::Value,
    stats: &TraceStats,
) -> Result<PathBuf> {
    let rd = RunDir::create(Some(dir), "trace-stats")?;
    rd.remove_earlier(&["tables.csv", "cdf.csv"])?;
    rd.write_config("trace stats", config)?;
    rd.write_results("trace stats", stats)?;
    let columns: [Column<&TableStats>; 13] = fields![
        table,
        rows,
        batches,
        lookups,
        mean_lookups_per_batch,
        mean_unique_rows_per_batch,
        coalescing_ratio,
        distinct_rows,
        touched_row_share,
        hottest_1pct_rows_access_share,
        hottest_10pct_rows_access_share,
        hottest_1pct_touched_access_share,
        hottest_10pct_touched_access_share,
    ];
    rd.write_table("tables.csv", &columns, &stats.tables)?;
    let cdf: [Column<(usize, &CdfPoint)>; 4] = [
        ("table", |(t, _)| t.to_string()),
        ("touched_row_share", |(_, p)| {
            p.touched_row_share.to_string()
        }),
        ("table_row_share", |(_, p)| p.table_row_share.to_string()),
        ("access_share", |(_, p)| p.access_share.to_string()),
    ];
    let points = stats
        .tables
        .iter()
        .flat_map(|t| t.cdf.iter().map(move |p| (t.table, p)));
    rd.write_table("cdf.csv", &cdf, points)?;
    rd.write_summary(&stats.to_string())?;
    rd.finish()
}
