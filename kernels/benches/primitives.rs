//! Criterion benchmarks of every primitive on an RM1-like setup: 10 tables of
//! 1M rows, dim 64, batch 2048, 80 lookups per bag, uniform and Zipf(1.05)
//! rows. Each iteration runs the whole 10-table batch; throughput is the
//! analytic traffic, so criterion's GB/s is comparable with `memcpy`.
//! Output buffers are reused across iterations (`*_into`), as a trainer
//! would: faulting in tens of MB of fresh pages per call costs as much as the
//! kernels themselves on this machine.
//!
//! `cargo bench -p nmpsim-kernels` (all, a few minutes on 2 cores), or e.g.
//! `cargo bench -p nmpsim-kernels -- --quick gather_reduce`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};
use nmpsim_kernels::table::fill_uniform;
use nmpsim_kernels::{
    Casted, Coalesced, EmbeddingTable, Expanded, Optimizer, OptimizerState, Pooling, Traffic,
    casted_gather_reduce, casted_gather_reduce_into, coalesce, coalesce_into, expand, expand_into,
    gather_reduce, gather_reduce_into, scatter_update, tensor_cast,
};
use nmpsim_traces::{BagSize, Distribution, TableBatch, TableSpec, generate_table_batch};

const TABLES: usize = 10;
const ROWS: u64 = 1_000_000;
const DIM: usize = 64;
const BATCH: usize = 2048;
const BAG: u32 = 80;

struct Workload {
    name: &'static str,
    batches: Vec<TableBatch>,
    expanded: Vec<Expanded>,
    casted: Vec<Casted>,
    coalesced: Vec<Coalesced>,
}

struct Setup {
    tables: Vec<EmbeddingTable>,
    grad_out: Vec<f32>,
    workloads: Vec<Workload>,
}

fn setup() -> Setup {
    let tables: Vec<EmbeddingTable> = (0..TABLES)
        .map(|t| EmbeddingTable::seeded(ROWS, DIM, t as u64).unwrap())
        .collect();
    let mut grad_out = vec![0.0; BATCH * DIM];
    fill_uniform(&mut grad_out, -1.0, 1.0, 99);
    let workloads = [
        ("uniform", Distribution::Uniform),
        (
            "zipf1.05",
            Distribution::Zipf {
                alpha: 1.05,
                scatter: true,
            },
        ),
    ]
    .into_iter()
    .map(|(name, distribution)| {
        let spec = TableSpec {
            rows: ROWS,
            distribution,
            bag_size: BagSize::Fixed { size: BAG },
            weighted: false,
        };
        let batches: Vec<TableBatch> = (0..TABLES)
            .map(|t| generate_table_batch(&spec, BATCH, 1000 + t as u64).unwrap())
            .collect();
        let expanded: Vec<Expanded> = batches
            .iter()
            .map(|b| expand(&grad_out, DIM, b, Pooling::Sum).unwrap().0)
            .collect();
        let casted: Vec<Casted> = batches
            .iter()
            .map(|b| tensor_cast(b, Pooling::Sum).unwrap().0)
            .collect();
        let coalesced = casted
            .iter()
            .map(|c| casted_gather_reduce(c, &grad_out, DIM).unwrap().0)
            .collect();
        Workload {
            name,
            batches,
            expanded,
            casted,
            coalesced,
        }
    })
    .collect();
    Setup {
        tables,
        grad_out,
        workloads,
    }
}

fn sum_traffic(it: impl Iterator<Item = Traffic>) -> u64 {
    it.fold(Traffic::default(), |a, b| a + b).total_bytes()
}

fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g
}

fn primitives(c: &mut Criterion) {
    let s = setup();
    let g_out = &s.grad_out;

    let mut g = group(c, "gather_reduce");
    for w in &s.workloads {
        let bytes = sum_traffic(
            s.tables
                .iter()
                .zip(&w.batches)
                .map(|(t, b)| gather_reduce(t, b, Pooling::Sum).unwrap().1),
        );
        g.throughput(Throughput::Bytes(bytes));
        let mut outs = vec![Vec::new(); TABLES];
        g.bench_function(w.name, |bench| {
            bench.iter(|| {
                for ((t, b), o) in s.tables.iter().zip(&w.batches).zip(outs.iter_mut()) {
                    black_box(gather_reduce_into(t, b, Pooling::Sum, o).unwrap());
                }
            })
        });
    }
    g.finish();

    let mut g = group(c, "expand");
    for w in &s.workloads {
        g.throughput(Throughput::Bytes(sum_traffic(
            w.batches
                .iter()
                .map(|b| expand(g_out, DIM, b, Pooling::Sum).unwrap().1),
        )));
        let mut out = w.expanded.clone();
        g.bench_function(w.name, |bench| {
            bench.iter(|| {
                for (b, o) in w.batches.iter().zip(out.iter_mut()) {
                    black_box(expand_into(g_out, DIM, b, Pooling::Sum, o).unwrap());
                }
            })
        });
    }
    g.finish();

    let mut g = group(c, "coalesce");
    for w in &s.workloads {
        g.throughput(Throughput::Bytes(sum_traffic(
            w.expanded
                .iter()
                .map(|e| coalesce(e, ROWS).unwrap().1.total()),
        )));
        let mut out = w.coalesced.clone();
        g.bench_function(w.name, |bench| {
            bench.iter(|| {
                for (e, o) in w.expanded.iter().zip(out.iter_mut()) {
                    black_box(coalesce_into(e, ROWS, o).unwrap());
                }
            })
        });
    }
    g.finish();

    let mut g = group(c, "expand_coalesce");
    for w in &s.workloads {
        let bytes = sum_traffic(w.batches.iter().map(|b| {
            let (e, t) = expand(g_out, DIM, b, Pooling::Sum).unwrap();
            t + coalesce(&e, ROWS).unwrap().1.total()
        }));
        g.throughput(Throughput::Bytes(bytes));
        let (mut ex, mut co) = (w.expanded.clone(), w.coalesced.clone());
        g.bench_function(w.name, |bench| {
            bench.iter(|| {
                for ((b, e), o) in w.batches.iter().zip(ex.iter_mut()).zip(co.iter_mut()) {
                    expand_into(g_out, DIM, b, Pooling::Sum, e).unwrap();
                    black_box(coalesce_into(e, ROWS, o).unwrap());
                }
            })
        });
    }
    g.finish();

    let mut g = group(c, "tensor_cast");
    for w in &s.workloads {
        g.throughput(Throughput::Bytes(sum_traffic(
            w.batches
                .iter()
                .map(|b| tensor_cast(b, Pooling::Sum).unwrap().1),
        )));
        g.bench_function(w.name, |bench| {
            bench.iter(|| {
                for b in &w.batches {
                    black_box(tensor_cast(b, Pooling::Sum).unwrap());
                }
            })
        });
    }
    g.finish();

    let mut g = group(c, "casted_gather_reduce");
    for w in &s.workloads {
        g.throughput(Throughput::Bytes(sum_traffic(
            w.casted
                .iter()
                .map(|c| casted_gather_reduce(c, g_out, DIM).unwrap().1),
        )));
        let mut out = w.coalesced.clone();
        g.bench_function(w.name, |bench| {
            bench.iter(|| {
                for (c, o) in w.casted.iter().zip(out.iter_mut()) {
                    black_box(casted_gather_reduce_into(c, g_out, DIM, o).unwrap());
                }
            })
        });
    }
    g.finish();

    let mut g = group(c, "cast_plus_casted_gr");
    for w in &s.workloads {
        let bytes = sum_traffic(w.batches.iter().map(|b| {
            let (c, t) = tensor_cast(b, Pooling::Sum).unwrap();
            t + casted_gather_reduce(&c, g_out, DIM).unwrap().1
        }));
        g.throughput(Throughput::Bytes(bytes));
        let mut out = w.coalesced.clone();
        g.bench_function(w.name, |bench| {
            bench.iter(|| {
                for (b, o) in w.batches.iter().zip(out.iter_mut()) {
                    let (c, _) = tensor_cast(b, Pooling::Sum).unwrap();
                    black_box(casted_gather_reduce_into(&c, g_out, DIM, o).unwrap());
                }
            })
        });
    }
    g.finish();

    let mut tables = s.tables;
    for (name, opt) in [
        ("scatter_sgd", Optimizer::Sgd { lr: 1e-6 }),
        (
            "scatter_adagrad",
            Optimizer::Adagrad {
                lr: 1e-6,
                eps: 1e-8,
                initial_accumulator: 0.0,
            },
        ),
    ] {
        let mut states: Vec<OptimizerState> = (0..TABLES)
            .map(|_| OptimizerState::new(&opt, ROWS, DIM).unwrap())
            .collect();
        // Fresh zeroed state is lazily mapped; fault it in now so the first
        // timed steps do not pay the page faults (seconds here for 2.5 GB).
        states
            .iter_mut()
            .for_each(|s| s.values.iter_mut().for_each(|x| *x = black_box(0.0)));
        let mut g = group(c, name);
        for w in &s.workloads {
            let bytes = sum_traffic(w.coalesced.iter().map(|co| {
                nmpsim_kernels::traffic::scatter_traffic(
                    co.rows.len(),
                    DIM,
                    opt.state_values_per_row(DIM),
                )
            }));
            g.throughput(Throughput::Bytes(bytes));
            g.bench_function(w.name, |bench| {
                bench.iter(|| {
                    for ((t, st), co) in tables.iter_mut().zip(states.iter_mut()).zip(&w.coalesced)
                    {
                        black_box(scatter_update(t, st, co, &opt).unwrap());
                    }
                })
            });
        }
        g.finish();
    }
    drop(tables);

    let mut g = group(c, "memcpy");
    let len = 512 << 20;
    let src = vec![1u8; len];
    let mut dst = vec![0u8; len];
    g.throughput(Throughput::Bytes(2 * len as u64));
    g.bench_function("512MiB", |bench| {
        bench.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    g.finish();
}

criterion_group!(benches, primitives);
criterion_main!(benches);
