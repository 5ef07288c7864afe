//! The demo's figures: each primitive over the batches, and the summary it
//! prints and writes.

use super::*;

/// Each primitive's figures over the batches: the median time, the mean
/// bytes, and the median of each batch's own bytes over its own time.
pub(super) fn summarize(
    times: &[[f64; PRIMITIVES.len()]],
    traffics: &[Vec<Traffic>],
) -> Vec<PrimitiveResult> {
    PRIMITIVES
        .iter()
        .enumerate()
        .map(|(p, &name)| {
            // The median time, the mean bytes, and the median of each
            // batch's own bytes over its own time.
            let secs = median(&times.iter().map(|b| b[p]).collect::<Vec<_>>());
            let n = traffics.len().max(1) as u64;
            let read_bytes = traffics.iter().map(|t| t[p].read_bytes).sum::<u64>() / n;
            let write_bytes = traffics.iter().map(|t| t[p].write_bytes).sum::<u64>() / n;
            let gbps: Vec<f64> = times
                .iter()
                .zip(traffics)
                .map(|(s, t)| {
                    if s[p] > 0.0 {
                        t[p].total_bytes() as f64 / s[p] / 1e9
                    } else {
                        0.0
                    }
                })
                .collect();
            PrimitiveResult {
                primitive: name,
                time_ms: secs * 1e3,
                read_bytes,
                write_bytes,
                throughput_gbps: median(&gbps),
                source: "measured (time), derived (bytes)",
            }
        })
        .collect()
}

pub(super) fn summary_text(c: &DemoConfig, r: &DemoResults, ok: bool, rundir: &RunDir) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "nmpsim demo — profile {}, {} tables, batch {}, dim {}, {} pooling, {} optimizer, {} batches, {} threads",
        c.profile,
        c.spec.tables.len(),
        c.spec.batch_size,
        c.dim,
        c.pooling,
        c.optimizer.name(),
        c.batches,
        c.threads
    );
    let _ = writeln!(
        s,
        "trace: {:.0} lookups per batch, {:.0} unique rows per batch, coalescing ratio {:.3}",
        r.trace.lookups_per_batch, r.trace.mean_unique_rows_per_batch, r.trace.coalescing_ratio
    );
    let _ = writeln!(s);
    let mut t = nmpsim_traces::TextTable::new([
        "primitive (whole batch)",
        "time ms",
        "read MB",
        "write MB",
        "GB/s",
    ])
    .left(&[0]);
    for p in &r.primitives {
        t.row([
            p.primitive.to_string(),
            format!("{:.2}", p.time_ms),
            format!("{:.1}", p.read_bytes as f64 / 1e6),
            format!("{:.1}", p.write_bytes as f64 / 1e6),
            format!("{:.2}", p.throughput_gbps),
        ]);
    }
    s.push_str(&t.render());
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "times are measured medians over batches; bytes are derived from the algorithms (Figure 6 method), the mean per batch; GB/s is the median of each batch's bytes over its time"
    );
    let _ = writeln!(
        s,
        "coalesce: the time of the whole call (sort and accumulate), the bytes of the accumulate (Figure 6's \"Coalesce\")"
    );
    let _ = writeln!(
        s,
        "large-buffer copy on this machine: {:.2} GB/s (read + write)",
        r.copy_gbps
    );
    let _ = writeln!(
        s,
        "Tensor Casting: cast + casted gather-reduce is {:.2}x faster than expand + coalesce (paper: 1.1-9.5x)",
        r.casting_speedup
    );
    let _ = writeln!(
        s,
        "traffic: expand+coalesce / gather-reduce = {:.2} (paper: about 3); expand+coalesce / casted gather-reduce = {:.2} (paper: 2)",
        r.expand_coalesce_over_gather_reduce_bytes, r.expand_coalesce_over_casted_bytes
    );
    let _ = writeln!(
        s,
        "equivalence: same unique rows {}, max relative difference {:.2e} -> {}",
        if r.same_unique_rows { "yes" } else { "NO" },
        r.casted_vs_coalesced_max_rel_err,
        if ok { "ok" } else { "MISMATCH" }
    );
    let _ = writeln!(s, "run directory: {}", rundir.path().display());
    s
}

pub(super) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}
