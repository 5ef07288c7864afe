//! What `nmpsim reproduce` writes: the output directory's check, each
//! item's CSV, plots and markdown report (or, for an item whose analysis
//! failed, a report saying so), `REPORT.md` joining them, and the lines it
//! prints per item; `--list`'s description of a sweep.

use super::*;

/// Refuses an output directory that is not a reproduction's: one that holds
/// anything, but neither [`MARK`] nor (as those of earlier versions) a
/// `REPORT.md` of ours. Reproductions write `REPORT.md`, an item
/// directory each and `sweeps/` over what is there.
pub(super) fn check_out_dir(out: &Path) -> Result<()> {
    rundir::check_out_path(out, "the reproduction's directory")?;
    if !out.is_dir() {
        return Ok(());
    }
    let empty = fs::read_dir(out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .next()
        .is_none();
    let ours = out.join(MARK).is_file()
        || fs::read_to_string(out.join("REPORT.md")).is_ok_and(|t| t.starts_with(REPORT_TITLE));
    if !empty && !ours {
        bail!(
            "{} is not a reproduction's directory (no {MARK}), and a reproduction would write its REPORT.md, item directories and sweeps/ over what is there; name a new directory, or an earlier reproduction's, for --out",
            out.display()
        );
    }
    Ok(())
}

/// `name: command, N runs; base flags; swept flags (values)`: what a sweep
/// of an item runs, for `--list`.
pub(super) fn describe_sweep(def: &reproduce::SweepDef) -> String {
    use nmpsim_experiments::spec::Spec;
    let Ok(spec) = Spec::parse(&def.toml, def.name) else {
        return def.name.to_string();
    };
    let values = |e: &nmpsim_experiments::spec::Entry| {
        e.values
            .iter()
            .map(|v| v.value.render())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let base: Vec<String> = spec
        .base
        .iter()
        .map(|e| format!("--{} {}", e.flag, values(e)))
        .collect();
    let swept: Vec<String> = spec
        .swept_entries()
        .map(|e| format!("--{} [{}]", e.flag, values(e)))
        .collect();
    let runs = nmpsim_experiments::expand::run_count(&spec);
    format!(
        "{}: `nmpsim {}`, {}; {}; swept {}",
        def.name,
        spec.command_str(),
        crate::cmd::plural(runs as usize, "run", "runs"),
        base.join(" "),
        swept.join(" ")
    )
}

pub(super) fn write_item(
    out: &Path,
    it: &Item,
    size: Size,
    engine: Option<&str>,
    host: Option<&str>,
    o: &Outcome,
) -> Result<ItemSummary> {
    let dir = out.join(it.id);
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut files = Vec::new();
    let csv = dir.join(format!("{}.csv", it.id));
    write_atomic(&csv, o.csv.as_bytes())?;
    files.push(format!("{}.csv", it.id));
    for (suffix, chart) in &o.charts {
        let stem = dir.join(format!("{}-{suffix}", it.id));
        let written = write_chart(chart, &stem)
            .map_err(|e| anyhow::anyhow!("plot {}: {e}", stem.display()))?;
        for p in written {
            if let Some(n) = p.file_name() {
                files.push(n.to_string_lossy().into_owned());
            }
        }
    }
    let mut md = markdown(it, size, engine, o, &files);
    if let Some(h) = host {
        // (The command line the report names, with the flag.)
        md = md.replacen("`.\n\n", &format!(" --host {h}`.\n\n"), 1);
    }
    let md_path = dir.join(format!("{}.md", it.id));
    write_atomic(&md_path, md.as_bytes())?;
    files.push(format!("{}.md", it.id));
    Ok(ItemSummary {
        item: it.id.into(),
        title: it.title.into(),
        status: "completed".into(),
        error: None,
        checks: o.checks.len(),
        checks_holding: o.checks.iter().filter(|c| c.holds).count(),
        files: files
            .iter()
            .map(|f| dir.join(f).display().to_string())
            .collect(),
        claims: o
            .checks
            .iter()
            .map(|c| ClaimSummary {
                id: c.id.clone(),
                claim: c.claim.clone(),
                paper: c.paper.clone(),
                threshold: c.threshold.clone(),
                ours: c.ours.clone(),
                holds: c.holds,
                kind: c.kind.as_str().into(),
            })
            .collect(),
    })
}

pub(super) fn print_item(s: &ItemSummary) -> Result<(), crate::out::StdoutError> {
    if s.status == "failed" {
        return outln!("{:<7} FAILED: {}", s.item, s.error.as_deref().unwrap_or(""));
    }
    if let Some(e) = &s.error {
        outln!("{:<7} INCOMPLETE: {e}; the item's files say which", s.item)?;
    }
    outln!(
        "{:<7} {} of {} checks hold  ({})",
        s.item,
        s.checks_holding,
        s.checks,
        s.files.first().map(String::as_str).unwrap_or("")
    )?;
    for c in &s.claims {
        outln!(
            "        [{}] {}: paper {} (holds when {}), nmpsim {}{}",
            if c.holds { "yes" } else { " no" },
            c.claim,
            c.paper,
            c.threshold,
            c.ours,
            if c.kind == "identity" {
                " (an identity: fixed by the formulas)"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}

/// Writes `<item>/<item>.md` for an item whose analysis failed: what
/// failed, and that any other file beside it is from an earlier run.
pub(super) fn write_failed_item(
    out: &Path,
    it: &Item,
    size: Size,
    engine: Option<&str>,
    error: &str,
) -> Result<()> {
    let dir = out.join(it.id);
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let md = format!(
        "# {}\n\nPaper: {}.\n\n**Failed**: `nmpsim reproduce {} --{}{}` could not analyse its runs: {error}\n\nNo table, check or plot of this run. Files beside this report, if any, are an earlier run's. Re-running the same command reuses every finished run, so a failure in runs that finished (damaged, or from another version of nmpsim) comes back: remove their sweep's directory under `sweeps/` to run them again.\n",
        it.title,
        it.paper,
        it.id,
        size.as_str(),
        engine.map_or(String::new(), |e| format!(" --engine {e}"))
    );
    write_atomic(&dir.join(format!("{}.md", it.id)), md.as_bytes())
}

/// `<out>/REPORT.md`: every item's report present in `out`, in paper order.
/// (Items may come from runs of different sizes and engines: each section
/// names the command that produced it.)
pub(super) fn write_report(out: &Path) -> Result<PathBuf> {
    let mut s = format!(
        "{REPORT_TITLE}\n\nEach section is `<item>/<item>.md`, produced by the command it names; the plots and CSVs sit beside it.\n\n"
    );
    for it in items() {
        let p = out.join(it.id).join(format!("{}.md", it.id));
        if let Ok(text) = fs::read_to_string(&p) {
            // Sections one level down, links relative to the report.
            for line in text.lines() {
                if let Some(h) = line.strip_prefix('#') {
                    s.push_str("##");
                    s.push_str(h);
                } else if let Some(f) = line.strip_prefix("Files: ") {
                    let links: Vec<String> = f
                        .trim_end_matches('.')
                        .split(", ")
                        .map(|n| format!("[{n}]({}/{n})", it.id))
                        .collect();
                    s.push_str(&format!("Files: {}.", links.join(", ")));
                } else {
                    s.push_str(line);
                }
                s.push('\n');
            }
            s.push('\n');
        }
    }
    let p = out.join("REPORT.md");
    write_atomic(&p, s.as_bytes())?;
    Ok(p)
}

/// One outcome of an item's measured runs (`measured`) and of its runs on
/// the modelled host `tag` (`host`): the host's table after the measured
/// one, its checks after the measured ones (their ids and claims naming the
/// host), its charts beside (`host-<tag>-...`), and the CSV's rows of both,
/// a first column `cpu_times` telling them apart.
pub(super) fn with_host_outcome(
    mut measured: Outcome,
    host: Outcome,
    tag: &str,
) -> Result<Outcome> {
    let label = format!("host {tag}");
    let tag_csv = |csv: &str, value: &str, header: bool| -> String {
        let mut s = String::new();
        for (i, line) in csv.lines().enumerate() {
            if i == 0 {
                if header {
                    s.push_str("cpu_times,");
                    s.push_str(line);
                    s.push('\n');
                }
                continue;
            }
            s.push_str(value);
            s.push(',');
            s.push_str(line);
            s.push('\n');
        }
        s
    };
    let same_header = measured.csv.lines().next() == host.csv.lines().next();
    measured.csv = if same_header {
        format!(
            "{}{}",
            tag_csv(&measured.csv, "measured", true),
            tag_csv(&host.csv, &format!("\"{label}\""), false)
        )
    } else {
        // (Not expected: one analysis, two sets of runs.)
        anyhow::bail!("the item's table has other columns on host {tag}")
    };
    for (suffix, mut chart) in host.charts {
        chart.title = format!("{} ({label}: CPU times modelled)", chart.title);
        measured
            .charts
            .push((format!("host-{tag}-{suffix}"), chart));
    }
    measured.table_md = format!(
        "{}\n\n**With the CPU primitives on the modelled host `{tag}`** (`train --host {tag}`: every CPU primitive's time from the host's model, labelled modelled-host, the same on every machine; docs/host.md). The paper's values as above:\n\n{}",
        measured.table_md, host.table_md
    );
    for mut c in host.checks {
        c.id = format!("{}@host-{tag}", c.id);
        c.claim = format!("{} [{label}]", c.claim);
        measured.checks.push(c);
    }
    measured.notes.push(format!(
        "With `--host {tag}` the item is run twice: as measured on this machine (the first table and checks), and with every CPU primitive on the modelled host `{tag}` (the second table, the checks marked [{label}], the rows of the CSV whose `cpu_times` is `{label}`). The thresholds are the same."
    ));
    for n in host.notes {
        if !measured.notes.contains(&n) {
            measured.notes.push(format!("[{label}] {n}"));
        }
    }
    Ok(measured)
}
