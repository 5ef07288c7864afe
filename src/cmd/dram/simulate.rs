//! `nmpsim dram` on a stream or trace: the request source from the flags,
//! the engines run, and their report.

use super::*;

/// Where the requests come from, from the flags.
pub(super) fn source_of(a: &RunArgs) -> Result<RequestSource> {
    if let Some(p) = &a.trace {
        return Ok(RequestSource::AddressTrace { path: p.clone() });
    }
    if let Some(p) = &a.embedding_trace {
        let phase: EmbeddingPhase = a
            .phase
            .as_deref()
            .unwrap_or("forward")
            .parse()
            .map_err(flag_error)?;
        return Ok(RequestSource::EmbeddingTrace {
            path: p.clone(),
            dim: a.dim.unwrap_or(64),
            base: a.base,
            phase,
            max_batches: a.max_batches,
        });
    }
    let kind: StreamKind = a
        .stream
        .as_deref()
        .unwrap_or("random")
        .parse()
        .map_err(flag_error)?;
    Ok(RequestSource::Stream(StreamSpec {
        kind,
        requests: a.requests,
        write_fraction: a.write_fraction,
        seed: a.seed,
        base: a.base,
        footprint_bytes: a.footprint,
    }))
}

/// A source's parameter error, named by the flag that sets it
/// (`footprint_bytes` is `--footprint`); other errors as they are.
pub(super) fn flag_error(e: SimError) -> anyhow::Error {
    if let SimError::Param { name, what } = &e {
        let flag = match name.as_str() {
            "footprint_bytes" => Some("--footprint"),
            "base" => Some("--base"),
            "write_fraction" => Some("--write-fraction"),
            "requests" => Some("--requests"),
            "stream" | "stride_bytes" => Some("--stream"),
            "dim" => Some("--dim"),
            "phase" => Some("--phase"),
            _ => None,
        };
        if let Some(flag) = flag {
            return anyhow::anyhow!("{flag}: {what}");
        }
    }
    e.into()
}

#[derive(Serialize)]
pub(super) struct RunConfig<'a> {
    pub(super) engines: Vec<EngineKind>,
    pub(super) dram: &'a DramConfig,
    pub(super) source: &'a RequestSource,
    pub(super) options: &'a RunOptions,
    pub(super) event_energy_pj: EventEnergy,
    pub(super) ramulator_timing_differences: Vec<(String, u32, u32)>,
}

pub(super) fn run_sim(a: RunArgs) -> Result<ExitCode> {
    let engines = engines_of(&a.engine, "--engine")?;
    let mut cfg = a.dram.config()?;
    if let Some(m) = &a.mapping {
        cfg.mapping = AddressMapping::parse(m)?;
    }
    if a.window == 0 {
        bail!("invalid parameter `--window`: must be at least 1");
    }
    if a.embedding_trace.is_none() {
        // (Options of an embedding trace, which clap's `requires` does not
        // enforce beside this command's subcommands.)
        for (flag, given) in [
            ("--dim", a.dim.is_some()),
            ("--phase", a.phase.is_some()),
            ("--max-batches", a.max_batches.is_some()),
        ] {
            if given {
                bail!("{flag} applies to --embedding-trace only");
            }
        }
    }
    if a.max_batches == Some(0) {
        bail!("--max-batches 0: expected at least 1 batch of the embedding trace");
    }
    if a.keep_command_traces && !engines.contains(&EngineKind::Ramulator) && !a.output.quiet {
        eprintln!(
            "note: --keep-command-traces keeps Ramulator's command traces, and --engine {} does not run Ramulator",
            a.engine
        );
    }
    if engines.contains(&EngineKind::Ramulator)
        && !a.output.quiet
        && (a.dram.dram_config.is_some() || !a.dram.timing.is_empty())
    {
        // Ramulator 1 takes a speed bin by name and its built-in table.
        let d = cfg.ramulator_timing_differences();
        if !d.is_empty() {
            eprintln!(
                "note: Ramulator runs its built-in {} timing, which the configuration's timing does not reach: {}",
                cfg.ramulator_speed().unwrap_or("DDR4"),
                d.iter()
                    .map(|(p, ours, theirs)| format!("{p} {ours} (Ramulator {theirs})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let source = source_of(&a)?;
    if let RequestSource::AddressTrace { path } = &source {
        if path.is_dir() {
            bail!(
                "--trace {}: is a directory; expected an address trace file",
                path.display()
            );
        }
        let meta =
            std::fs::metadata(path).with_context(|| format!("--trace {}", path.display()))?;
        if !meta.is_file() && engines.len() > 1 {
            bail!(
                "--trace {}: not a regular file (a pipe?), so it can be read only once, and each of the {} engines reads the whole trace; save it to a file first, or run one engine",
                path.display(),
                engines.len()
            );
        }
    }
    // Open once up front and read the first request, so that a missing or
    // empty input, or a bad first line, fails before anything is written.
    // The first engine goes on with that same stream (a pipe can be read
    // only once); the others open the source again.
    let (mut opened, first_len) = source.open(&cfg).map_err(flag_error)?;
    let mut first_source: Option<(BoxedSource, Option<u64>)> = match opened.next() {
        Some(Ok(op)) => Some((Box::new(std::iter::once(Ok(op)).chain(opened)), first_len)),
        Some(Err(e)) => return Err(e.into()),
        None => match &source {
            RequestSource::AddressTrace { path } => bail!(
                "{}: no requests (the trace is empty, or only blank and comment lines)",
                path.display()
            ),
            RequestSource::EmbeddingTrace { path, .. } => {
                bail!("{}: no lookups to replay", path.display())
            }
            RequestSource::Stream(_) => bail!("the synthetic stream has no requests"),
        },
    };
    let rd = RunDir::create(a.output.out.as_deref(), "dram")?;
    let mut owned: Vec<String> = EngineKind::ALL
        .iter()
        .flat_map(|e| {
            [
                format!("engine-{}/", e.name()),
                format!("jedec-{}.txt", e.name()),
            ]
        })
        .collect();
    owned.push("results.csv".into());
    rd.remove_earlier(&owned)?;
    let mut opts = RunOptions {
        window: a.window,
        keep_command_traces: a.keep_command_traces,
        ..RunOptions::default()
    };
    rd.write_config(
        "dram",
        &RunConfig {
            engines: engines.clone(),
            dram: &cfg,
            source: &source,
            options: &opts,
            event_energy_pj: EventEnergy::of(&cfg),
            ramulator_timing_differences: cfg.ramulator_timing_differences(),
        },
    )?;
    let mut runs = Vec::new();
    let mut timing_checks = Vec::new();
    for &engine in &engines {
        let (src, len) = match first_source.take() {
            Some(opened) => opened,
            None => source.open(&cfg).map_err(flag_error)?,
        };
        let work_dir = rd.path().join(format!("engine-{}", engine.name()));
        opts.work_dir = Some(work_dir.clone());
        let pb = match len {
            Some(n) => rundir::progress(n, engine.name(), a.output.quiet),
            None => spinner(engine.name(), a.output.quiet),
        };
        let tick = |n: u64| pb.set_position(n);
        let failed = || {
            format!(
                "{engine} run failed (run directory {})",
                rd.path().display()
            )
        };
        let (stats, check) = run_engine(engine, &cfg, src, &opts, a.check_timing, Some(&tick))
            .with_context(failed)?;
        if a.check_timing {
            timing_checks.push(match check {
                Some(c) => {
                    // Every violation, one a line, beside the results.
                    let file = (!c.violations.is_empty()).then(|| TimingCheck::file_name(engine));
                    if let Some(f) = &file {
                        let path = rd.path().join(f);
                        std::fs::write(&path, TimingCheck::violations_text(&c.violations))
                            .with_context(|| format!("writing {}", path.display()))?;
                    }
                    TimingCheck::of(engine, &c, file)
                }
                None => TimingCheck::unchecked(engine, &cfg),
            });
        }
        pb.finish_and_clear();
        runs.push(stats);
    }
    let results = RunResults::of(runs, timing_checks);
    rd.write_results("dram", &results)?;
    let (header, rows) = results.stats_table();
    rd.write_csv("results.csv", &header, &rows)?;
    let summary = results.summary_text(&cfg, &source);
    rd.finish_and_print("dram", &results, &summary, a.output.json)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn spinner(what: &str, quiet: bool) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    let pb = ProgressBar::new_spinner();
    if quiet {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} {spinner} {pos} requests {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(what.to_string());
    pb
}
