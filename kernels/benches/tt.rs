//! EL-Rec's Eff-TT forward on a Criteo-Kaggle-sized table: 10M rows of dim
//! 16 (factors 200 x 200 x 250 and 2 x 2 x 4), TT rank 128, batch 2048, one
//! lookup a bag, Zipf(1.05) rows (hot rows scattered over the table, as
//! `nmpsim`'s criteo-kaggle profile draws them).
//!
//! ```sh
//! cargo bench -p nmpsim-kernels --bench tt
//! ```
//!
//! - `tt-forward/{reuse,plain}/{reordered,scattered}`: the forward with and
//!   without batch-level reuse, on one batch of a 64-batch input renamed by
//!   the locality-based reordering built from that input (the top 1% of
//!   rows hot; EL-Rec builds it offline from the training data), and on the
//!   batch as drawn. Throughput in FLOPs (criterion's `elem/s`), the
//!   primitive's own count (`TtCost::flops`). The target: reuse at least 3x
//!   faster than plain on the reordered batch.
//! - `tt-backward/{aggregated,per-lookup}/{reordered,scattered}`: the core
//!   gradients aggregated in advance per unique row (the FLOPs it counts)
//!   against the plain backward's chain rule per lookup, on the same batches.
//! - `gemm-peak`: `matrixmultiply`'s sgemm of 512 x 512 x 512 on every
//!   thread at once (each its own product), in FLOPs: the GEMM crate's own
//!   peak on this machine, which the TT forward's FLOP rate is read against.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nmpsim_kernels::Pooling;
use nmpsim_kernels::tt::{
    Reorder, TtTable, tt_core_grads, tt_core_grads_per_lookup, tt_gather_reduce,
};
use nmpsim_traces::{BagSize, Batch, Distribution, GenSpec, Generator, TableSpec};
use rayon::prelude::*;

const ROWS: u64 = 10_000_000;
const DIM: usize = 16;
const RANK: usize = 128;
const BATCH: usize = 2048;

fn bench(c: &mut Criterion) {
    let mut g = Generator::new(GenSpec {
        tables: vec![TableSpec {
            rows: ROWS,
            distribution: Distribution::Zipf {
                alpha: 1.05,
                scatter: true,
            },
            bag_size: BagSize::Fixed { size: 1 },
            weighted: false,
        }],
        batch_size: BATCH,
        seed: 1,
    })
    .unwrap();
    let input: Vec<Batch> = (0..64).map(|_| g.next_batch()).collect();
    let refs: Vec<_> = input.iter().map(|b| &b.tables[0]).collect();
    let reorder = Reorder::build(ROWS, &refs, 0.01).unwrap();
    let drawn = input[32].tables[0].clone();
    let reordered = reorder.apply(&drawn).unwrap();
    let table = TtTable::seeded(ROWS, DIM, RANK, 3).unwrap();

    let mut group = c.benchmark_group("tt-forward");
    group.sample_size(10);
    for (name, batch) in [("reordered", &reordered), ("scattered", &drawn)] {
        for reuse in [true, false] {
            let (_, cost) = tt_gather_reduce(&table, batch, Pooling::Sum, reuse).unwrap();
            group.throughput(Throughput::Elements(cost.flops));
            let id = format!("{}/{name}", if reuse { "reuse" } else { "plain" });
            group.bench_function(id, |b| {
                b.iter(|| black_box(tt_gather_reduce(&table, batch, Pooling::Sum, reuse).unwrap()))
            });
        }
    }
    group.finish();

    // The backward's core gradients: aggregated in advance (one chain rule
    // per unique row and prefix) against the plain per-lookup one.
    let grad: Vec<f32> = (0..BATCH * DIM)
        .map(|i| ((i % 13) as f32 - 6.0) / 6.0)
        .collect();
    let mut group = c.benchmark_group("tt-backward");
    group.sample_size(10);
    for (name, batch) in [("reordered", &reordered), ("scattered", &drawn)] {
        let (_, cost) = tt_core_grads(&table, batch, &grad, Pooling::Sum).unwrap();
        group.throughput(Throughput::Elements(cost.flops));
        group.bench_function(format!("aggregated/{name}"), |b| {
            b.iter(|| black_box(tt_core_grads(&table, batch, &grad, Pooling::Sum).unwrap()))
        });
        group.bench_function(format!("per-lookup/{name}"), |b| {
            b.iter(|| {
                black_box(tt_core_grads_per_lookup(&table, batch, &grad, Pooling::Sum).unwrap())
            })
        });
    }
    group.finish();

    let n = 512;
    let threads = rayon::current_num_threads();
    let a = vec![1.0f32; n * n];
    let bm = vec![0.5f32; n * n];
    let mut outs = vec![vec![0.0f32; n * n]; threads];
    let mut group = c.benchmark_group("gemm-peak");
    group.sample_size(10);
    group.throughput(Throughput::Elements((2 * n * n * n * threads) as u64));
    group.bench_function(format!("sgemm-{n}x{n}x{n}-x{threads}"), |b| {
        b.iter(|| {
            outs.par_iter_mut().for_each(|c| unsafe {
                // SAFETY: a, b and c are n x n, row-major, as the strides say.
                matrixmultiply::sgemm(
                    n,
                    n,
                    n,
                    1.0,
                    a.as_ptr(),
                    n as isize,
                    1,
                    bm.as_ptr(),
                    n as isize,
                    1,
                    0.0,
                    c.as_mut_ptr(),
                    n as isize,
                    1,
                )
            });
            black_box(outs[0][0])
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
