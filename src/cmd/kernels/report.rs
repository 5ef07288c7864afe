//! How a kernels command ends: its run directory (when `--out` is given),
//! then its results as JSON or as the printed table; the traffic table.

use super::*;

/// What a kernels command ends with: the run directory `out` if asked for,
/// then the results as JSON (`json`) or the printed table.
pub(super) fn report<C: Serialize, R: Serialize>(
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
pub(super) fn write_run_dir<C: Serialize, R: Serialize>(
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

pub(super) fn traffic_text(t: &TrafficBreakdown) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} lookups, {} unique rows (summed over tables)",
        t.lookups, t.unique_rows
    );
    let mut table =
        nmpsim_traces::TextTable::new(["primitive", "read_bytes", "write_bytes", "total_bytes"])
            .left(&[0]);
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
        table.row([
            name.to_string(),
            x.read_bytes.to_string(),
            x.write_bytes.to_string(),
            x.total_bytes().to_string(),
        ]);
    }
    o.push_str(&table.render());
    let ec = (t.expand + t.coalesce_accumulate).total_bytes() as f64;
    let _ = write!(
        o,
        "expand+coalesce / gather-reduce = {:.2}; expand+coalesce / casted gather-reduce = {:.2}",
        ec / t.gather_reduce.total_bytes().max(1) as f64,
        ec / t.casted_gather_reduce.total_bytes().max(1) as f64
    );
    o
}
