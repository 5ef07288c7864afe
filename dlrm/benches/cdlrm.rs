//! cDLRM's caching step and prefetcher at RM1's sizes: one table of 1M
//! rows of dim 64, a look-ahead window of n = 100 batches of 2048 samples
//! with 80 lookups a bag (DLRM's random rows), the paper's cache (NextPrime
//! (50,000) sets of 16 ways), SGD (no optimizer state).
//!
//! ```sh
//! cargo bench -p nmpsim-dlrm --bench cdlrm
//! ```
//!
//! Groups (one table; the strategy runs the tables in parallel):
//! - `install/cold`, `install/warm`: `TableCache::install` of the window's
//!   unique rows into an empty cache, and into one holding the previous
//!   window's rows (the steady state); throughput in the window's rows per
//!   second (the target: at least 5 M/s);
//! - `prefetch`: Algorithm 1's body (`fetch_window`: the window's unique
//!   rows found and gathered; bytes: the window's indices, the rows read
//!   and their copy written), and `gather-reduce`: the kernels' forward of
//!   one batch of the same table (bytes: its analytic traffic), both in
//!   bytes per second (the prefetcher's target: no less than the
//!   gather-reduce's bandwidth); `unique-rows` and `gather-rows`, the two
//!   parts of `fetch_window` apart.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use nmpsim_dlrm::cdlrm::{
    DEFAULT_SETS, DEFAULT_WAYS, Geometry, TableCache, WriteBack, fetch_window, fetch_window_into,
    gather_rows_into, unique_rows_into,
};
use nmpsim_kernels::{EmbeddingTable, Optimizer, OptimizerState, Pooling, gather_reduce};
use nmpsim_traces::{BagSize, Batch, Distribution, GenSpec, Generator, TableSpec};

const ROWS: u64 = 1_000_000;
const DIM: usize = 64;
const BATCH: usize = 2048;
const LOOKUPS: u32 = 80;
const N: usize = 100;

fn window(seed: u64) -> Vec<Batch> {
    let mut g = Generator::new(GenSpec {
        tables: vec![TableSpec {
            rows: ROWS,
            distribution: Distribution::DlrmRandom,
            bag_size: BagSize::Fixed { size: LOOKUPS },
            weighted: false,
        }],
        batch_size: BATCH,
        seed,
    })
    .unwrap();
    (0..N).map(|_| g.next_batch()).collect()
}

fn bench(c: &mut Criterion) {
    let table = EmbeddingTable::seeded(ROWS, DIM, 1).unwrap();
    let state = OptimizerState::new(&Optimizer::Sgd { lr: 0.1 }, ROWS, DIM).unwrap();
    let (w0, w1) = (window(1), window(2));
    let (rows0, values0, state0) = fetch_window(&table, &state, &w0, 0);
    let (rows1, values1, state1) = fetch_window(&table, &state, &w1, 0);
    let g = Geometry::for_table(ROWS, DEFAULT_SETS, DEFAULT_WAYS).unwrap();
    let empty = TableCache::new(g, DIM, 0, 7).unwrap();
    let mut warm = empty.clone();
    warm.install(&rows0, &values0, &state0, &mut WriteBack::default());

    let mut group = c.benchmark_group("install");
    group.sample_size(10);
    group.throughput(Throughput::Elements(rows1.len() as u64));
    for (name, start) in [("cold", &empty), ("warm", &warm)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || (start.clone(), WriteBack::default()),
                |(mut cache, mut wb)| {
                    black_box(cache.install(&rows1, &values1, &state1, &mut wb));
                    (cache, wb)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("prefetch");
    group.sample_size(10);
    // (The window's indices read, the rows read and the buffer written, as
    // the gather-reduce's traffic counts its indices, rows and output.)
    let indices: u64 = w1
        .iter()
        .map(|b| 4 * b.tables[0].indices.len() as u64)
        .sum();
    group.throughput(Throughput::Bytes(
        indices + 2 * rows1.len() as u64 * DIM as u64 * 4,
    ));
    // (Into the buffers of the window before, as the prefetcher's are
    // reused in steady state.)
    let mut bufs = fetch_window(&table, &state, &w0, 0);
    group.bench_function("fetch_window", |b| {
        b.iter(|| {
            fetch_window_into(&table, &state, &w1, 0, &mut bufs);
            black_box(bufs.0.len())
        })
    });
    // Its two parts apart: the unique rows found (bytes: the indices), and
    // their rows gathered (bytes: the rows read and written).
    group.throughput(Throughput::Bytes(indices));
    group.bench_function("unique-rows", |b| {
        b.iter(|| {
            unique_rows_into(ROWS, &w1, 0, &mut bufs.0);
            black_box(bufs.0.len())
        })
    });
    group.throughput(Throughput::Bytes(2 * rows1.len() as u64 * DIM as u64 * 4));
    group.bench_function("gather-rows", |b| {
        b.iter(|| {
            gather_rows_into(&table, &state, &rows1, &mut bufs.1, &mut bufs.2);
            black_box(bufs.1.len())
        })
    });
    let (_, traffic) = gather_reduce(&table, &w1[0].tables[0], Pooling::Sum).unwrap();
    group.throughput(Throughput::Bytes(traffic.total_bytes()));
    group.bench_function("gather-reduce", |b| {
        b.iter(|| black_box(gather_reduce(&table, &w1[0].tables[0], Pooling::Sum).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
