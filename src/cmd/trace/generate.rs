//! `nmpsim trace gen`: a profile's or a spec's batches written as a trace,
//! refused up front when one batch cannot be held.

use super::*;

pub(super) fn gen_cmd(a: GenArgs) -> Result<ExitCode> {
    if a.list_profiles {
        for p in list_profiles() {
            outln!("{:<14} {}", p.name, p.description)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(out) = a.output else {
        bail!("give an output file with -o FILE")
    };
    named_file(&out, "-o")?;
    let (name, spec) = a.spec.resolve()?;
    check_batch_fits(&spec, true)?;
    let meta = serde_json::to_string(&GenMeta {
        source: "generator",
        profile: name.as_deref(),
        spec: &spec,
    })?;
    let mut w = TraceWriter::create(&out, TraceHeader::for_spec(&spec, meta))?;
    let pb = rundir::progress(a.batches, "generating", a.quiet);
    for batch in Generator::new(spec)?.take(a.batches as usize) {
        w.write_batch(&batch)?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    let n = w.finish()?;
    if !a.quiet {
        eprintln!(
            "wrote {} to {}",
            crate::cmd::plural(n as usize, "batch", "batches"),
            out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
