//! `nmpsim trace convert` and `nmpsim trace export`: a trace rewritten in
//! another format, or exported for other tools (`.npy`).

use super::*;

pub(super) fn convert_cmd(a: ConvertArgs) -> Result<ExitCode> {
    named_file(&a.output, "-o")?;
    rundir::refuse_same_file(&a.input, &a.output, "-o")?;
    let opts = CriteoOptions {
        max_ind_range: a.max_ind_range,
        table_rows: None,
    };
    let file =
        File::open(&a.input).with_context(|| format!("cannot open {}", a.input.display()))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let pb = rundir::progress(len, "converting", a.quiet);
    let reader = CriteoReader::from_reader(
        BufReader::with_capacity(1 << 20, pb.wrap_read(file)),
        &a.input,
        opts.clone(),
    )?;
    let batcher = CriteoBatcher::new(reader, a.batch).context("--batch")?;
    let meta = serde_json::json!({
        "source": "criteo-tsv",
        "input": a.input.to_string_lossy(),
        "batch_size": a.batch,
        "max_ind_range": a.max_ind_range,
    });
    let header = TraceHeader {
        table_rows: (0..nmpsim_traces::criteo::NUM_CATS)
            .map(|t| opts.rows_of(t))
            .collect(),
        weighted: vec![false; nmpsim_traces::criteo::NUM_CATS],
        num_dense: Some(nmpsim_traces::criteo::NUM_DENSE as u32),
        labels: true,
        metadata: meta.to_string(),
    };
    let mut w = TraceWriter::create(&a.output, header)?;
    for batch in batcher {
        w.write_batch(&batch?)?;
    }
    pb.finish_and_clear();
    if w.batches_written() == 0 {
        // (Dropping the writer removes its temporary file.)
        bail!(
            "{}: no samples to convert (the file is empty); nothing written to {}",
            a.input.display(),
            a.output.display()
        );
    }
    let n = w.finish()?;
    if !a.quiet {
        eprintln!(
            "wrote {} to {}",
            crate::cmd::plural(n as usize, "batch", "batches"),
            a.output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn export_cmd(a: ExportArgs) -> Result<ExitCode> {
    let reader = TraceReader::open(&a.file)?;
    if let Some(dir) = &a.npy {
        let header = reader.header().clone();
        let source = a.file.display().to_string();
        let m = nmpsim_traces::npy::export_dir(&header, &source, reader, dir)
            .with_context(|| format!("--npy {}", dir.display()))?;
        eprintln!(
            "wrote {} of {} to {} (manifest.json lists the files)",
            crate::cmd::plural(m.batches.len(), "batch", "batches"),
            crate::cmd::plural(m.tables.len(), "table", "tables"),
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let csv = a.csv.expect("clap requires --csv without --npy");
    if csv == Path::new("-") {
        let mut w = crate::out::Writer::default();
        let written = write_csv(reader, &mut w);
        if let Some(e) = w.into_error() {
            return Err(e.into());
        }
        written?;
    } else {
        rundir::refuse_same_file(&a.file, &csv, "--csv")?;
        // A half-written CSV would look like a short trace: it takes its
        // name only once complete.
        let mut out = rundir::StreamedFile::create(&csv)?;
        write_csv(reader, out.writer()).with_context(|| format!("--csv {}", csv.display()))?;
        out.commit()?;
    }
    Ok(ExitCode::SUCCESS)
}
