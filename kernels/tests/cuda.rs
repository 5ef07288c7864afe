//! The CUDA backend against the scalar reference and the CPU backend. Skips
//! (passing) where no GPU can be opened; on a GPU machine it must pass.
#![cfg(feature = "cuda")]

use nmpsim_kernels::check::{Backend, CheckConfig, CpuBackend, check_inputs, run_check_on};
use nmpsim_kernels::cuda::CudaBackend;
use nmpsim_kernels::{EmbeddingTable, Optimizer, OptimizerState, Pooling};
use nmpsim_traces::{Distribution, TableBatch};

mod support {
    pub mod cuda;
}
use support::cuda::backend;

fn configs() -> Vec<CheckConfig> {
    let zipf = Distribution::Zipf {
        alpha: 1.05,
        scatter: true,
    };
    let mut out = Vec::new();
    // (tables, batch, bag, rows, dims): tiny; one radix pass; three passes
    // and a single tile; a table of one row (no key bits); 40 sort tiles;
    // four passes (keys above 2^24).
    let all: &[usize] = &[1, 3, 4, 64, 128];
    let sizes: [(usize, usize, u32, u64, &[usize]); 6] = [
        (1, 4, 1, 7, all),
        (2, 64, 8, 200, all),
        (2, 512, 20, 100_000, all),
        (1, 16, 4, 1, all),
        (1, 2048, 40, 300_000, &[3, 64]),
        (1, 256, 8, 20_000_000, &[1]),
    ];
    for (i, &(tables, batch_size, bag_size, rows, dims)) in sizes.iter().enumerate() {
        for distribution in [Distribution::Uniform, zipf.clone()] {
            for pooling in Pooling::ALL {
                for &dim in dims {
                    out.push(CheckConfig {
                        tables,
                        batch_size,
                        bag_size,
                        rows,
                        dim,
                        distribution: distribution.clone(),
                        pooling,
                        seed: 7 + i as u64,
                    });
                }
            }
        }
    }
    out
}

#[test]
fn cuda_matches_the_reference_and_the_cpu() {
    let Some(cuda) = backend() else { return };
    eprintln!("device: {}", cuda.gpu().name());
    for config in configs() {
        let what = format!(
            "{} tables x {} bags x {} lookups, {} rows, dim {}, {:?}, {}",
            config.tables,
            config.batch_size,
            config.bag_size,
            config.rows,
            config.dim,
            config.distribution,
            config.pooling
        );
        let inputs = check_inputs(&config).unwrap();
        let report = run_check_on(&config, &inputs, &[&CpuBackend, &cuda]).unwrap();
        assert!(report.ok, "{what}: {:#?}", report.backends);
        // Structural outputs equal the CPU backend's exactly.
        for input in &inputs {
            let (b, p, dim) = (&input.batch, config.pooling, config.dim);
            let (cc, _) = CpuBackend.tensor_cast(b, p).unwrap();
            let (gc, _) = cuda.tensor_cast(b, p).unwrap();
            assert_eq!(gc, cc, "{what}: casted arrays");
            let (ec, _) = CpuBackend.expand(&input.grad_out, dim, b, p).unwrap();
            let (eg, _) = cuda.expand(&input.grad_out, dim, b, p).unwrap();
            assert_eq!(eg, ec, "{what}: expand (exact f32 products)");
            let (kc, _) = CpuBackend.coalesce(&ec, b.num_rows).unwrap();
            let (kg, _) = cuda.coalesce(&ec, b.num_rows).unwrap();
            assert_eq!(kg.rows, kc.rows, "{what}: coalesced rows");
            let (xg, _) = cuda
                .casted_gather_reduce(&cc, &input.grad_out, dim)
                .unwrap();
            assert_eq!(xg.rows, kc.rows, "{what}: casted rows");
        }
    }
}

#[test]
fn cuda_handles_empty_bags_and_batches() {
    let Some(cuda) = backend() else { return };
    // Bags 1 and 3 are empty; mean pooling must give zeros there.
    let batch = TableBatch::new(
        10,
        vec![0, 2, 2, 5, 5],
        vec![3, 3, 9, 0, 3],
        Some(vec![0.5, 1.5, -1.0, 2.0, 0.25]),
    )
    .unwrap();
    let table = EmbeddingTable::seeded(10, 5, 3).unwrap();
    for pooling in Pooling::ALL {
        let (want, tw) = CpuBackend.gather_reduce(&table, &batch, pooling).unwrap();
        let (got, tg) = cuda.gather_reduce(&table, &batch, pooling).unwrap();
        assert_eq!(tw, tg);
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-6, "{pooling}: {got:?} vs {want:?}");
        }
        let (cw, _) = CpuBackend.tensor_cast(&batch, pooling).unwrap();
        let (cg, _) = cuda.tensor_cast(&batch, pooling).unwrap();
        assert_eq!(cg, cw, "{pooling}");
    }
    // A batch of empty bags only, and a batch of no bags.
    for offsets in [vec![0, 0, 0], vec![0]] {
        let batch = TableBatch::new(10, offsets, vec![], None).unwrap();
        let (c, _) = cuda.tensor_cast(&batch, Pooling::Sum).unwrap();
        assert_eq!(c, CpuBackend.tensor_cast(&batch, Pooling::Sum).unwrap().0);
        let (o, _) = cuda.gather_reduce(&table, &batch, Pooling::Mean).unwrap();
        assert!(o.iter().all(|&x| x == 0.0));
        let g = vec![1.0; batch.batch_size() * 5];
        let (e, _) = cuda.expand(&g, 5, &batch, Pooling::Sum).unwrap();
        let (k, _) = cuda.coalesce(&e, 10).unwrap();
        assert!(k.rows.is_empty() && k.grads.is_empty());
    }
}

#[test]
fn cuda_refuses_bad_inputs_like_the_cpu() {
    let Some(cuda) = backend() else { return };
    let batch = TableBatch::new(10, vec![0, 2], vec![1, 4], None).unwrap();
    let table = EmbeddingTable::seeded(10, 4, 1).unwrap();
    fn e<T>(r: Result<T, nmpsim_kernels::KernelError>) -> String {
        r.map(|_| ()).unwrap_err().to_string()
    }
    assert_eq!(
        e(cuda.gather_reduce(&table, &batch, Pooling::WeightedSum)),
        e(CpuBackend.gather_reduce(&table, &batch, Pooling::WeightedSum))
    );
    assert_eq!(
        e(cuda.expand(&[0.0; 3], 4, &batch, Pooling::Sum)),
        e(CpuBackend.expand(&[0.0; 3], 4, &batch, Pooling::Sum))
    );
    let (ex, _) = CpuBackend
        .expand(&[1.0; 4], 4, &batch, Pooling::Sum)
        .unwrap();
    assert_eq!(e(cuda.coalesce(&ex, 3)), e(CpuBackend.coalesce(&ex, 3)));
    let (mut casted, _) = CpuBackend.tensor_cast(&batch, Pooling::Sum).unwrap();
    casted.casted_dst[1] = 5;
    assert_eq!(
        e(cuda.casted_gather_reduce(&casted, &[0.0; 4], 4)),
        e(CpuBackend.casted_gather_reduce(&casted, &[0.0; 4], 4))
    );
    let opt = Optimizer::examples()[1];
    let mut state = OptimizerState::new(&opt, 10, 4).unwrap();
    let (co, _) = CpuBackend.coalesce(&ex, 10).unwrap();
    let mut t1 = EmbeddingTable::seeded(10, 8, 1).unwrap();
    let mut t2 = t1.clone();
    assert_eq!(
        e(cuda.scatter_update(&mut t1, &mut state, &co, &opt)),
        e(CpuBackend.scatter_update(&mut t2, &mut state, &co, &opt))
    );
}

#[test]
fn with_stream_runs_on_the_given_stream_and_copy_bandwidth_is_positive() {
    let Some(cuda) = backend() else { return };
    let stream = cuda.gpu().ctx.new_stream().unwrap();
    let other = CudaBackend::with_stream(cuda.gpu().clone(), stream);
    let config = CheckConfig {
        tables: 1,
        batch_size: 128,
        bag_size: 10,
        rows: 5000,
        dim: 32,
        ..Default::default()
    };
    let inputs = check_inputs(&config).unwrap();
    let report = run_check_on(&config, &inputs, &[&other]).unwrap();
    assert!(report.ok, "{:#?}", report.backends);
    let gbps = cuda.copy_bandwidth_gbps(64 << 20).unwrap();
    assert!(gbps.is_finite() && gbps > 0.0, "{gbps}");
}

#[test]
fn small_bench_runs() {
    let Some(cuda) = backend() else { return };
    let config = nmpsim_kernels::cuda::bench::EmbeddingBenchConfig {
        tables: 2,
        rows: 100_000,
        batch_size: 256,
        bag_size: 10,
        dim: 64,
        reps: 3,
        ..Default::default()
    };
    let r = nmpsim_kernels::cuda::bench::bench_embedding(&cuda, &config).unwrap();
    assert_eq!(r.lookups, 2 * 256 * 10);
    assert!(r.gather_reduce.gbps > 0.0 && r.casted_gather_reduce.gbps > 0.0);
    assert!(r.copy_gbps > 0.0);
}

/// Device-resident tables (the pool emulator's): gather-reduce equals the
/// host-table path, and scatter steps then a download equal the CPU's.
#[test]
fn resident_tables_match_the_cpu() {
    let Some(gpu) = backend() else { return };
    for (dim, optimizer) in [
        (64, Optimizer::examples()[0]),
        (3, Optimizer::examples()[1]),
        (64, Optimizer::examples()[2]),
        (4, Optimizer::examples()[3]),
    ] {
        let config = CheckConfig {
            tables: 1,
            batch_size: 256,
            bag_size: 12,
            rows: 5_000,
            dim,
            distribution: Distribution::Zipf {
                alpha: 1.05,
                scatter: true,
            },
            pooling: Pooling::Sum,
            seed: 11,
        };
        let input = check_inputs(&config).unwrap().remove(0);
        let mut table = input.table.clone();
        let mut state = OptimizerState::new(&optimizer, table.rows, dim).unwrap();
        let mut dt = gpu.upload_table(&table, &state).unwrap();
        let (want, wt) = CpuBackend
            .gather_reduce(&table, &input.batch, Pooling::Sum)
            .unwrap();
        let (got, gt) = gpu
            .gather_reduce_resident(&dt, &input.batch, Pooling::Sum)
            .unwrap();
        assert_eq!(wt, gt);
        assert!(nmpsim_kernels::check::row_rel_err(&got, &want, dim) < 1e-5);
        let (coal, _) = CpuBackend
            .casted_gather_reduce(
                &CpuBackend
                    .tensor_cast(&input.batch, Pooling::Sum)
                    .unwrap()
                    .0,
                &input.grad_out,
                dim,
            )
            .unwrap();
        for _ in 0..3 {
            gpu.scatter_update_resident(&mut dt, &coal, &optimizer)
                .unwrap();
            CpuBackend
                .scatter_update(&mut table, &mut state, &coal, &optimizer)
                .unwrap();
        }
        let mut back = EmbeddingTable::zeros(table.rows, dim).unwrap();
        let mut back_state = OptimizerState::new(&optimizer, table.rows, dim).unwrap();
        gpu.download_table(&dt, &mut back, &mut back_state).unwrap();
        let err = nmpsim_kernels::check::row_rel_err(&back.data, &table.data, dim);
        assert!(
            err < 1e-5,
            "{}: resident scatter differs by {err}",
            optimizer.name()
        );
        if !state.values.is_empty() {
            let w = state.values_per_row.max(1);
            let e = nmpsim_kernels::check::row_rel_err(&back_state.values, &state.values, w);
            assert!(
                e < 1e-5,
                "{}: resident optimizer state differs by {e}",
                optimizer.name()
            );
        }
    }
}

/// One launch for every table gives each table's pooled rows bit for bit as
/// a launch of its own: every pooling, float4 and scalar rows, a table with
/// no bags, bags of different counts; tables of mixed dims take a launch
/// each; and tables other than the staged ones are refused.
#[test]
fn table_batched_gather_reduce_equals_a_launch_per_table() {
    let Some(gpu) = backend() else { return };
    for dim in [64usize, 3] {
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::WeightedSum] {
            let mut inputs = Vec::new();
            for (t, batch_size) in [300usize, 17, 2048].into_iter().enumerate() {
                let config = CheckConfig {
                    tables: 1,
                    batch_size,
                    bag_size: 9,
                    rows: 20_000,
                    dim,
                    distribution: Distribution::Zipf {
                        alpha: 1.05,
                        scatter: true,
                    },
                    pooling,
                    seed: 40 + t as u64,
                };
                inputs.push(check_inputs(&config).unwrap().remove(0));
            }
            // A table whose batch has no bags.
            let mut empty = inputs[0].batch.clone();
            empty.offsets = vec![0];
            empty.indices.clear();
            empty.weights = empty.weights.map(|_| Vec::new());
            let mut tables: Vec<_> = inputs.iter().map(|i| i.table.clone()).collect();
            let mut batches: Vec<_> = inputs.iter().map(|i| i.batch.clone()).collect();
            tables.insert(1, inputs[0].table.clone());
            batches.insert(1, empty);
            let dts: Vec<_> = tables
                .iter()
                .map(|t| {
                    let st = OptimizerState::new(&Optimizer::examples()[0], t.rows, t.dim).unwrap();
                    gpu.upload_table(t, &st).unwrap()
                })
                .collect();
            let refs: Vec<_> = dts.iter().collect();
            let mut staged = gpu.stage_tables(&refs, &batches, pooling).unwrap();
            assert!(staged.one_launch());
            gpu.gather_reduce_tables_staged(&refs, &mut staged).unwrap();
            let got = gpu.download_pooled_tables(&staged).unwrap();
            assert_eq!(got.len(), 4);
            for (t, (dt, b)) in dts.iter().zip(&batches).enumerate() {
                let (want, _) = gpu.gather_reduce_resident(dt, b, pooling).unwrap();
                assert_eq!(got[t].len(), b.batch_size() * dim, "table {t}");
                assert!(
                    got[t]
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "dim {dim}, {pooling:?}: table {t} differs from its own launch"
                );
            }
            // The staged tables in another order are not the staged ones.
            let swapped = vec![refs[2], refs[1], refs[0], refs[3]];
            let err = gpu
                .gather_reduce_tables_staged(&swapped, &mut staged)
                .unwrap_err()
                .to_string();
            assert!(err.contains("table 0"), "{err}");
        }
    }
    // Mixed dims: one launch per table, the same rows.
    let mk = |dim: usize, seed: u64| {
        let config = CheckConfig {
            tables: 1,
            batch_size: 64,
            bag_size: 5,
            rows: 1_000,
            dim,
            distribution: Distribution::Uniform,
            pooling: Pooling::Sum,
            seed,
        };
        check_inputs(&config).unwrap().remove(0)
    };
    let inputs = [mk(8, 1), mk(5, 2)];
    let dts: Vec<_> = inputs
        .iter()
        .map(|i| {
            let st =
                OptimizerState::new(&Optimizer::examples()[0], i.table.rows, i.table.dim).unwrap();
            gpu.upload_table(&i.table, &st).unwrap()
        })
        .collect();
    let refs: Vec<_> = dts.iter().collect();
    let batches: Vec<_> = inputs.iter().map(|i| i.batch.clone()).collect();
    let mut staged = gpu.stage_tables(&refs, &batches, Pooling::Sum).unwrap();
    assert!(!staged.one_launch());
    gpu.gather_reduce_tables_staged(&refs, &mut staged).unwrap();
    let got = gpu.download_pooled_tables(&staged).unwrap();
    for (t, (dt, b)) in dts.iter().zip(&batches).enumerate() {
        let (want, _) = gpu.gather_reduce_resident(dt, b, Pooling::Sum).unwrap();
        assert_eq!(got[t], want, "table {t}");
    }
    // A batch row past its table is refused, naming the table.
    let mut bad = batches.clone();
    bad[1].indices[0] = 5_000;
    let err = gpu
        .stage_tables(&refs, &bad, Pooling::Sum)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("table 1"), "{err}");
}

/// The timed casting of every table gives the CPU's casted arrays exactly,
/// for every pooling and tables with and without lookups; its device time
/// is positive, the stream is held until every kernel is enqueued, and bad
/// input names its table.
#[test]
fn timed_casting_of_every_table_equals_the_cpu() {
    let Some(gpu) = backend() else { return };
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::WeightedSum] {
        let config = CheckConfig {
            tables: 6,
            batch_size: 2048,
            bag_size: 20,
            rows: 1_000_000,
            dim: 16,
            distribution: Distribution::Zipf {
                alpha: 1.05,
                scatter: true,
            },
            pooling,
            seed: 77,
        };
        let mut batches: Vec<TableBatch> = check_inputs(&config)
            .unwrap()
            .into_iter()
            .map(|i| i.batch)
            .collect();
        // A table whose bags are all empty.
        let bags = batches[2].batch_size();
        batches[2].offsets = vec![0; bags + 1];
        batches[2].indices.clear();
        batches[2].weights = batches[2].weights.take().map(|_| Vec::new());
        let mut held = Vec::new();
        for _ in 0..3 {
            let (got, timing) = gpu.tensor_cast_tables_timed(&batches, pooling).unwrap();
            assert!(timing.device_ns > 0.0, "{timing:?}");
            held.push(timing.held);
            for (t, (b, (c, tr))) in batches.iter().zip(&got).enumerate() {
                let (want, wt) = CpuBackend.tensor_cast(b, pooling).unwrap();
                assert_eq!(c, &want, "{pooling:?}: table {t}");
                assert_eq!(tr, &wt, "{pooling:?}: table {t}");
            }
        }
        assert!(held.iter().all(|h| *h), "{pooling:?}: held {held:?}");
    }
    let config = CheckConfig {
        tables: 2,
        batch_size: 8,
        bag_size: 3,
        rows: 100,
        dim: 4,
        distribution: Distribution::Uniform,
        pooling: Pooling::Sum,
        seed: 1,
    };
    let mut batches: Vec<TableBatch> = check_inputs(&config)
        .unwrap()
        .into_iter()
        .map(|i| i.batch)
        .collect();
    batches[1].indices[0] = 100;
    let err = gpu
        .tensor_cast_tables_timed(&batches, Pooling::Sum)
        .unwrap_err()
        .to_string();
    assert!(err.contains("table 1"), "{err}");
}
