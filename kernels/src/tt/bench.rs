//! Wall-clock times of the TT forward on this machine's CPU, with and
//! without reuse, beside the dense gather-reduce of the same table shape on
//! the same batches (`nmpsim tt --bench`).

use std::time::Instant;

use nmpsim_traces::TableBatch;
use serde::Serialize;

use super::forward::{TtCost, tt_gather_reduce};
use super::table::TtTable;
use crate::{EmbeddingTable, KernelError, Pooling, Traffic, gather_reduce};

/// Medians over the repetitions of one pass over the batches, ns per batch,
/// and each primitive's cost per batch.
#[derive(Clone, Debug, Serialize)]
pub struct ForwardBench {
    pub batches: usize,
    pub reps: usize,
    pub reuse_ns: f64,
    pub plain_ns: f64,
    /// `None` without a dense table to compare with.
    pub dense_ns: Option<f64>,
    pub reuse: TtCost,
    pub plain: TtCost,
    pub dense: Option<Traffic>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `f` over `batches`, `reps` times (after one pass to warm up): the
/// median pass, per batch.
fn time_passes(
    batches: &[TableBatch],
    reps: usize,
    mut f: impl FnMut(&TableBatch) -> Result<(), KernelError>,
) -> Result<f64, KernelError> {
    for b in batches {
        f(b)?;
    }
    let mut passes = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        for b in batches {
            f(b)?;
        }
        passes.push(t0.elapsed().as_nanos() as f64 / batches.len().max(1) as f64);
    }
    Ok(median(passes))
}

/// The TT forward of `table` over `batches`, with and without reuse, and the
/// dense gather-reduce of `dense` (a table of the same rows and dim) on them.
pub fn bench_forward(
    table: &TtTable,
    dense: Option<&EmbeddingTable>,
    batches: &[TableBatch],
    pooling: Pooling,
    reps: usize,
) -> Result<ForwardBench, KernelError> {
    if batches.is_empty() {
        return Err(KernelError::invalid("batches", "none to time"));
    }
    let n = batches.len() as u64;
    let per = |c: TtCost| TtCost {
        traffic: Traffic::new(c.traffic.read_bytes / n, c.traffic.write_bytes / n),
        flops: c.flops / n,
        prefixes: c.prefixes / n,
    };
    let mut cost = [TtCost::default(), TtCost::default()];
    for b in batches {
        for (k, reuse) in [true, false].into_iter().enumerate() {
            cost[k] = cost[k] + tt_gather_reduce(table, b, pooling, reuse)?.1;
        }
    }
    let reuse_ns = time_passes(batches, reps, |b| {
        std::hint::black_box(tt_gather_reduce(table, b, pooling, true)?);
        Ok(())
    })?;
    let plain_ns = time_passes(batches, reps, |b| {
        std::hint::black_box(tt_gather_reduce(table, b, pooling, false)?);
        Ok(())
    })?;
    let (dense_ns, dense_traffic) = match dense {
        Some(d) => {
            let mut tr = Traffic::default();
            for b in batches {
                tr += gather_reduce(d, b, pooling)?.1;
            }
            let ns = time_passes(batches, reps, |b| {
                std::hint::black_box(gather_reduce(d, b, pooling)?);
                Ok(())
            })?;
            (
                Some(ns),
                Some(Traffic::new(tr.read_bytes / n, tr.write_bytes / n)),
            )
        }
        None => (None, None),
    };
    Ok(ForwardBench {
        batches: batches.len(),
        reps,
        reuse_ns,
        plain_ns,
        dense_ns,
        reuse: per(cost[0]),
        plain: per(cost[1]),
        dense: dense_traffic,
    })
}
