//! The timed pool against the DRAM engines' own numbers.

use nmpsim_kernels::Pooling;
use nmpsim_nmp::{
    CoreParams, Instruction, Layout, LayoutParams, Placement, Pool, PoolParams, StateWidth,
    TableShape, run_batch,
};
use nmpsim_sim::{DramConfig, EngineKind, RunOptions, simulate};
use nmpsim_traces::threads::on_threads;

fn params(engine: EngineKind) -> PoolParams {
    PoolParams {
        engine,
        dram: DramConfig::preset("DDR4-3200-x8").unwrap(),
        core: CoreParams::default(),
        link: Default::default(),
        energy: Default::default(),
    }
}

fn gather_batch(tables: usize, rows: u64, bags: usize, bag: usize, seed: u64) -> Vec<Instruction> {
    let mut x = seed;
    (0..tables)
        .map(|t| {
            let mut indices = Vec::new();
            let mut offsets = vec![0u32];
            for _ in 0..bags {
                for _ in 0..bag {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    indices.push(((x >> 33) % rows) as u32);
                }
                offsets.push(indices.len() as u32);
            }
            Instruction::GatherReduce {
                table: t as u32,
                pooling: Pooling::Sum,
                offsets,
                indices,
                weights: None,
            }
        })
        .collect()
}

fn pool(placement: Placement, ranks: u32, tables: usize, rows: u64) -> Pool {
    let shapes = vec![TableShape { rows, dim: 64 }; tables];
    Pool::without_data(
        Layout::new(
            placement,
            &shapes,
            LayoutParams {
                ranks,
                rank_capacity_bytes: 8 << 30,
                state_values_per_row: StateWidth::None,
                max_bags: 4096,
                max_unique: 1 << 20,
            },
        )
        .unwrap(),
    )
}

#[test]
fn one_rank_matches_the_engine_on_the_same_requests() {
    for engine in EngineKind::ALL {
        let p = params(engine);
        let batch = gather_batch(2, 100_000, 64, 40, 3);
        let mut pl = pool(Placement::TablePerRank, 1, 2, 100_000);
        let works: Vec<_> = batch.iter().map(|i| pl.work(i).unwrap()).collect();
        let report = run_batch(&mut pl, &batch, &p).unwrap();
        let reqs: Vec<_> = works.iter().flat_map(|w| w[0].requests.clone()).collect();
        assert_eq!(report.dram_requests, reqs.len() as u64);
        let opts = RunOptions {
            window: 32,
            ..RunOptions::default()
        };
        let s = simulate(engine, &p.dram, reqs.into_iter().map(Ok), &opts, None).unwrap();
        let rel = (report.effective_bandwidth_gbps - s.bandwidth_gbps).abs() / s.bandwidth_gbps;
        assert!(
            rel < 0.05,
            "{engine}: pool {:.3} GB/s vs engine {:.3} GB/s",
            report.effective_bandwidth_gbps,
            s.bandwidth_gbps
        );
    }
}

/// On HBM2 pseudo-channels (32 B bursts) a core's 64 B request is two
/// bursts: the DRAM's bytes are still the requests' bytes, a rank's
/// bandwidth stays under its 16 GB/s, the engine window holds as many
/// requests as on a legacy channel (twice the bursts), and one rank's time
/// is the engine's on the same requests with that window.
#[test]
fn a_pseudo_channel_pool_counts_bursts_and_bytes_apart() {
    let mut p = params(EngineKind::Native);
    p.dram = DramConfig::preset("HBM2-2000-PC").unwrap();
    let batch = gather_batch(2, 100_000, 64, 40, 5);
    let mut one = pool(Placement::TablePerRank, 1, 2, 100_000);
    let works: Vec<_> = batch.iter().map(|i| one.work(i).unwrap()).collect();
    let r = run_batch(&mut one, &batch, &p).unwrap();
    let reqs: Vec<_> = works.iter().flat_map(|w| w[0].requests.clone()).collect();
    assert_eq!(r.dram_requests, reqs.len() as u64);
    assert_eq!(r.request_read_bytes, 64 * reqs.len() as u64);
    let k = &r.per_rank[0];
    assert!(k.reads <= 2 * reqs.len() as u64 && k.reads > reqs.len() as u64);
    assert!(r.dram_read_bytes <= r.request_read_bytes);
    assert!(k.dram_bandwidth_gbps <= 16.0 + 1e-9);
    let window = CoreParams::default()
        .request_queue
        .min(CoreParams::default().input_buffer_bytes as usize / 64);
    let opts = RunOptions {
        window: 2 * window,
        ..RunOptions::default()
    };
    let s = simulate(p.engine, &p.dram, reqs.into_iter().map(Ok), &opts, None).unwrap();
    assert_eq!(k.dram_cycles, s.cycles);
    assert_eq!(k.reads, s.reads);
    assert_eq!(r.dram_read_bytes, s.read_cmds * 32);
}

#[test]
fn effective_bandwidth_never_exceeds_the_ranks_peak() {
    let p = params(EngineKind::Dramsim3);
    for placement in Placement::ALL {
        let mut pl = pool(placement, 4, 3, 50_000);
        let r = run_batch(&mut pl, &gather_batch(3, 50_000, 32, 20, 9), &p).unwrap();
        assert!((r.peak_bandwidth_gbps - 4.0 * 25.6).abs() < 1e-9);
        assert!(r.effective_bandwidth_gbps > 0.0);
        assert!(
            r.effective_bandwidth_gbps <= r.peak_bandwidth_gbps,
            "{placement}: {} > {}",
            r.effective_bandwidth_gbps,
            r.peak_bandwidth_gbps
        );
        assert_eq!(r.request_read_bytes, 3 * 32 * 20 * 256);
        assert!(r.dram_read_bytes <= r.request_read_bytes);
        assert!(r.load_imbalance >= 1.0);
        assert!(r.energy.total_pj > r.energy.dram_pj && r.energy.dram_pj > 0.0);
    }
}

#[test]
fn thread_count_does_not_change_the_report() {
    let p = params(EngineKind::Dramsim3);
    let run = |threads: usize| {
        on_threads(threads, || {
            let mut pl = pool(Placement::VectorSliced, 8, 3, 20_000);
            let mut r = run_batch(&mut pl, &gather_batch(3, 20_000, 32, 20, 5), &p).unwrap();
            r.wall_s = 0.0;
            r.sim_requests_per_s = 0.0;
            serde_json::to_string(&r).unwrap()
        })
    };
    assert_eq!(run(1), run(3));
}

#[test]
fn parameters_that_would_give_inf_or_nan_are_refused_by_name() {
    let batch = gather_batch(1, 1000, 4, 4, 1);
    type Set = Box<dyn Fn(&mut PoolParams)>;
    let cases: Vec<(&str, Set)> = vec![
        (
            "link.bandwidth_gbps",
            Box::new(|p| p.link.bandwidth_gbps = 0.0),
        ),
        (
            "link.bandwidth_gbps",
            Box::new(|p| p.link.bandwidth_gbps = -25.0),
        ),
        (
            "link.bandwidth_gbps",
            Box::new(|p| p.link.bandwidth_gbps = f64::INFINITY),
        ),
        (
            "link.bandwidth_gbps",
            Box::new(|p| p.link.bandwidth_gbps = 1e-320),
        ),
        (
            "core.alu_clock_ghz",
            Box::new(|p| p.core.alu_clock_ghz = 1e-300),
        ),
        (
            "link.latency_ns",
            Box::new(|p| p.link.latency_ns = f64::NAN),
        ),
        ("core.request_queue", Box::new(|p| p.core.request_queue = 0)),
        (
            "core.input_buffer_bytes",
            Box::new(|p| p.core.input_buffer_bytes = 32),
        ),
        ("core.alu_lanes", Box::new(|p| p.core.alu_lanes = 0)),
        (
            "core.alu_clock_ghz",
            Box::new(|p| p.core.alu_clock_ghz = 0.0),
        ),
        (
            "energy.link_pj_per_bit",
            Box::new(|p| p.energy.link_pj_per_bit = -1.0),
        ),
    ];
    for (field, set) in cases {
        let mut p = params(EngineKind::Native);
        set(&mut p);
        let mut pl = pool(Placement::TablePerRank, 1, 1, 1000);
        let e = run_batch(&mut pl, &batch, &p).expect_err(field).to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
    // The defaults pass.
    let mut pl = pool(Placement::TablePerRank, 1, 1, 1000);
    let r = run_batch(&mut pl, &batch, &params(EngineKind::Native)).unwrap();
    assert!(r.time_ns.is_finite() && r.time_ns > 0.0);
}

#[test]
fn per_rank_dram_bandwidth_is_the_dram_s_bytes_within_the_rank_s_peak() {
    // A row-wise Adagrad scatter reads each 64 B line of row state once per
    // row it holds; the controllers merge those reads, so the requests'
    // bandwidth exceeds what the DRAM moved.
    let dim = 64;
    let rows = 2000u64;
    let optimizer = nmpsim_kernels::Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 };
    let p = params(EngineKind::Native);
    for placement in Placement::ALL {
        let mut pl = Pool::without_data(
            Layout::new(
                placement,
                &[TableShape { rows, dim }; 2],
                LayoutParams {
                    ranks: 8,
                    rank_capacity_bytes: 8 << 30,
                    state_values_per_row: StateWidth::PerRow,
                    max_bags: 64,
                    max_unique: rows,
                },
            )
            .unwrap(),
        );
        let coal: Vec<u32> = (0..rows as u32).step_by(2).collect();
        let loads: Vec<Instruction> = (0..2)
            .map(|t| Instruction::LoadCoalesced {
                table: t,
                rows: coal.clone(),
                grads: vec![0.0; coal.len() * dim],
            })
            .collect();
        run_batch(&mut pl, &loads, &p).unwrap();
        let scatters: Vec<Instruction> = (0..2)
            .map(|t| Instruction::Scatter {
                table: t,
                optimizer,
            })
            .collect();
        let r = run_batch(&mut pl, &scatters, &p).unwrap();
        let peak = p.dram.peak_bandwidth_gbps();
        let mut moved = 0.0;
        for k in &r.per_rank {
            assert!(
                k.dram_bandwidth_gbps <= peak + 1e-9,
                "{placement}: rank {} at {} GB/s, peak {peak}",
                k.rank,
                k.dram_bandwidth_gbps
            );
            moved += k.dram_bandwidth_gbps * k.dram_time_ns;
        }
        let want = (r.dram_read_bytes + r.dram_write_bytes) as f64;
        assert!(
            (moved - want).abs() <= 1e-6 * want,
            "{placement}: per-rank bandwidths x times give {moved} B, the batch {want} B"
        );
    }
}

/// A rank that only sends results (the zero sums of empty bags) still waits
/// for its output buffer to drain: the back-pressure is in its time.
#[test]
fn a_rank_that_only_sends_results_drains_them_before_it_finishes() {
    let p = params(EngineKind::Native);
    let mut pl = pool(Placement::VectorSliced, 1, 1, 8);
    let batch = vec![Instruction::GatherReduce {
        table: 0,
        pooling: Pooling::Sum,
        offsets: vec![0; 101],
        indices: Vec::new(),
        weights: None,
    }];
    let r = run_batch(&mut pl, &batch, &p).unwrap();
    // 100 bags x 64 values x 4 B, over a 4 KiB buffer at 25 GB/s.
    assert_eq!(r.link_out_bytes, 25_600);
    assert_eq!(r.dram_requests, 0);
    let bw = p.link.bandwidth_gbps;
    let drain = (25_600 - 4096) as f64 / bw;
    let alu_latency = p.core.alu_latency_cycles as f64 / p.core.alu_clock_ghz;
    assert!(
        (r.compute_ns - (drain + alu_latency)).abs() < 1e-6,
        "compute {} ns, drain {drain} ns",
        r.compute_ns
    );
    assert_eq!(r.per_rank[0].time_ns, r.compute_ns);
    assert_eq!(r.active_ranks, 1);
    // Every byte leaves the link at its bandwidth: during compute or after.
    assert!(r.compute_ns + r.link_out_ns >= 25_600.0 / bw + p.link.latency_ns);
}

/// ALU energy is one add per element, not 16 per slice, and the buffers
/// count the result bytes through the output buffer as well as the requests.
#[test]
fn alu_and_buffer_energy_count_elements_and_result_bytes() {
    let p = params(EngineKind::Native);
    for dim in [1usize, 20, 64] {
        let shapes = vec![TableShape { rows: 16, dim }];
        let mut pl = Pool::without_data(
            Layout::new(
                Placement::VectorSliced,
                &shapes,
                LayoutParams {
                    ranks: 1,
                    rank_capacity_bytes: 8 << 30,
                    state_values_per_row: StateWidth::None,
                    max_bags: 64,
                    max_unique: 64,
                },
            )
            .unwrap(),
        );
        // 3 bags of 3 lookups.
        let batch = vec![Instruction::GatherReduce {
            table: 0,
            pooling: Pooling::Sum,
            offsets: vec![0, 3, 6, 9],
            indices: vec![0, 1, 2, 3, 4, 5, 6, 7, 8],
            weights: None,
        }];
        let r = run_batch(&mut pl, &batch, &p).unwrap();
        let e = &p.energy;
        let adds = 9 * dim;
        assert!(
            (r.energy.alu_pj - adds as f64 * e.alu_pj_per_flop).abs() < 1e-9,
            "dim {dim}: {} pJ for {adds} adds",
            r.energy.alu_pj
        );
        let slices = dim.div_ceil(16) as u64;
        assert_eq!(r.request_read_bytes, 9 * slices * 64);
        assert_eq!(r.link_out_bytes, 3 * dim as u64 * 4);
        let through = r.request_read_bytes + r.request_write_bytes + r.link_out_bytes;
        assert!(
            (r.energy.buffer_pj - through as f64 * e.buffer_pj_per_byte).abs() < 1e-9,
            "dim {dim}: buffer {} pJ for {through} B",
            r.energy.buffer_pj
        );
    }
}

/// Counting a batch's requests (to refuse one too large to build) gives the
/// number the ranks' work lists hold, for every instruction, placement and
/// kind of optimizer state; a budget one request short refuses the batch
/// before anything runs, and a budget that fits gives `run_batch`'s report.
#[test]
fn request_counts_equal_the_requests_built_and_bound_the_batch() {
    use nmpsim_kernels::Optimizer;
    use nmpsim_nmp::{BYTES_PER_REQUEST, run_batch_within};
    let (rows, dim, bags) = (300u64, 40usize, 8usize);
    let p = params(EngineKind::Native);
    let optimizers = [
        (StateWidth::None, Optimizer::Sgd { lr: 0.1 }),
        (
            StateWidth::PerElement,
            Optimizer::Adagrad {
                lr: 0.1,
                eps: 1e-8,
                initial_accumulator: 0.0,
            },
        ),
        (
            StateWidth::PerRow,
            Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 },
        ),
    ];
    for placement in Placement::ALL {
        for (state, optimizer) in optimizers {
            let layout = Layout::new(
                placement,
                &[TableShape { rows, dim }; 2],
                LayoutParams {
                    ranks: 5,
                    rank_capacity_bytes: 8 << 30,
                    state_values_per_row: state,
                    max_bags: 64,
                    max_unique: rows,
                },
            )
            .unwrap();
            let mut pl = Pool::without_data(layout.clone());
            let mut instrs = Vec::new();
            for g in gather_batch(2, rows, bags, 3, 7) {
                let Instruction::GatherReduce {
                    table,
                    offsets,
                    indices,
                    ..
                } = &g
                else {
                    unreachable!()
                };
                let table = *table;
                // Tensor Casting's arrays: (row, bag) pairs in row order.
                let mut pairs: Vec<(u32, u32)> = (0..bags)
                    .flat_map(|b| (offsets[b]..offsets[b + 1]).map(move |i| (i as usize, b as u32)))
                    .map(|(i, b)| (indices[i], b))
                    .collect();
                pairs.sort();
                let mut unique: Vec<u32> = pairs.iter().map(|&(r, _)| r).collect();
                unique.dedup();
                let casted_dst = pairs
                    .iter()
                    .map(|&(r, _)| unique.binary_search(&r).unwrap() as u32)
                    .collect();
                instrs.push(g.clone());
                instrs.push(Instruction::LoadGradient {
                    table,
                    bags: bags as u32,
                    grads: vec![0.0; bags * dim],
                });
                instrs.push(Instruction::CastedGatherReduce {
                    table,
                    num_bags: bags as u32,
                    casted_src: pairs.iter().map(|&(_, b)| b).collect(),
                    casted_dst,
                    unique_rows: unique.clone(),
                    scale: None,
                });
                instrs.push(Instruction::LoadCoalesced {
                    table,
                    rows: unique.clone(),
                    grads: vec![0.0; unique.len() * dim],
                });
                instrs.push(Instruction::Scatter { table, optimizer });
            }
            let mut total = 0;
            let mut each = Vec::new();
            for instr in &instrs {
                let n = pl.request_count(instr).unwrap();
                each.push(n);
                let built: usize = pl
                    .work(instr)
                    .unwrap()
                    .iter()
                    .map(|w| w.requests.len())
                    .sum();
                assert_eq!(n, built as u64, "{placement} {state:?}: {}", instr.op());
                assert!(n > 0, "{placement}: {}", instr.op());
                total += n;
                pl.execute(instr).unwrap();
            }
            // Checked as a whole on a fresh pool, each instruction's count
            // is what it is at its turn.
            let fresh = Pool::without_data(layout.clone());
            assert_eq!(fresh.check_batch(&instrs, true).unwrap(), each);
            assert!(fresh.check_batch(&instrs, false).unwrap().is_empty());
            // The whole batch on a fresh pool: one request short of the
            // budget is refused, the exact budget runs as run_batch does.
            let short = total * BYTES_PER_REQUEST - 1;
            let e = run_batch_within(&mut Pool::without_data(layout.clone()), &instrs, &p, short)
                .expect_err("one request over the budget")
                .to_string();
            assert!(e.contains(&format!("({total} over 5 ranks)")), "{e}");
            let mut a = run_batch_within(
                &mut Pool::without_data(layout.clone()),
                &instrs,
                &p,
                total * BYTES_PER_REQUEST,
            )
            .unwrap();
            let mut b = run_batch(&mut Pool::without_data(layout), &instrs, &p).unwrap();
            (
                a.wall_s,
                b.wall_s,
                a.sim_requests_per_s,
                b.sim_requests_per_s,
            ) = (0.0, 0.0, 0.0, 0.0);
            assert_eq!(a, b, "{placement} {state:?}");
            assert_eq!(a.dram_requests, total);
        }
    }
}

#[test]
fn a_batch_with_a_bad_instruction_anywhere_changes_nothing() {
    use nmpsim_kernels::{EmbeddingTable, Optimizer};
    let (rows, dim) = (64u64, 16usize);
    let layout = Layout::new(
        Placement::RowInterleaved,
        &[TableShape { rows, dim }; 2],
        LayoutParams {
            ranks: 4,
            rank_capacity_bytes: 1 << 30,
            state_values_per_row: StateWidth::None,
            max_bags: 16,
            max_unique: rows,
        },
    )
    .unwrap();
    let mut pl = Pool::new(layout);
    for t in 0..2 {
        pl.load_table(t, &EmbeddingTable::seeded(rows, dim, 3 + t as u64).unwrap())
            .unwrap();
    }
    let p = params(EngineKind::Native);
    // Runs alone: the scatter changes table 0 and its coalesced buffer.
    let good = vec![
        Instruction::LoadCoalesced {
            table: 0,
            rows: vec![2, 9],
            grads: vec![1.0; 2 * dim],
        },
        Instruction::Scatter {
            table: 0,
            optimizer: Optimizer::Sgd { lr: 0.5 },
        },
    ];
    let bad_tail = [
        // An index past the table.
        Instruction::GatherReduce {
            table: 1,
            pooling: Pooling::Sum,
            offsets: vec![0, 1],
            indices: vec![rows as u32],
            weights: None,
        },
        // A casting for more bags than the gradient buffer holds (the load
        // before it in the batch sets 2).
        Instruction::CastedGatherReduce {
            table: 1,
            num_bags: 3,
            casted_src: vec![0],
            casted_dst: vec![0],
            unique_rows: vec![5],
            scale: None,
        },
        // A table the pool does not hold.
        Instruction::Scatter {
            table: 2,
            optimizer: Optimizer::Sgd { lr: 0.5 },
        },
    ];
    let before = (pl.read_table(0).unwrap(), pl.read_coalesced(0));
    for bad in bad_tail {
        let mut batch = good.clone();
        batch.push(Instruction::LoadGradient {
            table: 1,
            bags: 2,
            grads: vec![0.0; 2 * dim],
        });
        batch.push(bad.clone());
        let e = run_batch(&mut pl, &batch, &p)
            .expect_err(bad.op())
            .to_string();
        assert!(e.contains(bad.op()), "{e}");
        assert_eq!(
            (pl.read_table(0).unwrap(), pl.read_coalesced(0)),
            before,
            "{e}"
        );
    }
    // The good part alone does change them: the checks above can fail.
    run_batch(&mut pl, &good, &p).unwrap();
    assert_ne!(pl.read_table(0).unwrap(), before.0);
    assert_ne!(pl.read_coalesced(0), before.1);
}
