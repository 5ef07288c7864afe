//! What each rank sends to the host link (`docs/nmp-isa.md`, "Host-link
//! bytes"), instruction by instruction and through the timed pool.

use nmpsim_kernels::{Optimizer, Pooling};
use nmpsim_nmp::{
    Instruction, Layout, Placement, Pool, PoolParams, StateWidth, TableShape, rank_work, run_batch,
};
use nmpsim_sim::{DramConfig, EngineKind};

mod support;
use support::layout;

fn link_out(l: &Layout, instr: &Instruction, coal: &[u32]) -> Vec<u64> {
    (0..l.ranks())
        .map(|k| rank_work(l, instr, k, coal).link_out_bytes)
        .collect()
}

fn gather(table: u32, offsets: Vec<u32>, indices: Vec<u32>) -> Instruction {
    Instruction::GatherReduce {
        table,
        pooling: Pooling::Sum,
        offsets,
        indices,
        weights: None,
    }
}

#[test]
fn row_wise_adagrad_exchanges_only_between_the_ranks_of_a_row() {
    let scatter = Instruction::Scatter {
        table: 0,
        optimizer: Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 },
    };
    let coal: Vec<u32> = vec![1, 5, 17, 40, 99];
    let n = coal.len() as u64;
    // (placement, ranks, dim, bytes each rank sends per coalesced row)
    let cases: &[(Placement, u32, usize, &[u64])] = &[
        // A row on one rank exchanges nothing.
        (Placement::VectorSliced, 1, 64, &[0]),
        (Placement::RowInterleaved, 8, 64, &[0; 8]),
        (Placement::TablePerRank, 8, 64, &[0; 8]),
        (Placement::RowInterleaved, 1, 20, &[0]),
        // Slices 0..3 on ranks 0,1,0,1: every hop of the ring crosses ranks;
        // rank 0 (slice 0, the state) also sends the step.
        (Placement::VectorSliced, 2, 64, &[12, 8]),
        // Ranks 0,1,2,0: the last hop stays on rank 0.
        (Placement::VectorSliced, 3, 64, &[8, 4, 4]),
        // Four slices on four of eight ranks.
        (Placement::VectorSliced, 8, 64, &[8, 4, 4, 4, 0, 0, 0, 0]),
        // Two slices (dim 20) on two of eight ranks.
        (Placement::VectorSliced, 8, 20, &[8, 4, 0, 0, 0, 0, 0, 0]),
    ];
    for &(placement, ranks, dim, per_row) in cases {
        let l = layout(
            placement,
            ranks,
            &[TableShape { rows: 100, dim }],
            StateWidth::PerRow,
        );
        let want: Vec<u64> = per_row.iter().map(|b| b * n).collect();
        assert_eq!(
            link_out(&l, &scatter, &coal),
            want,
            "{placement}, {ranks} ranks, dim {dim}"
        );
    }
    // Other optimizers exchange nothing whatever the placement.
    for optimizer in [
        Optimizer::Sgd { lr: 0.1 },
        Optimizer::Adagrad {
            lr: 0.1,
            eps: 1e-8,
            initial_accumulator: 0.0,
        },
    ] {
        let state = StateWidth::of(&optimizer);
        let l = layout(
            Placement::VectorSliced,
            2,
            &[TableShape { rows: 100, dim: 64 }],
            state,
        );
        let s = Instruction::Scatter {
            table: 0,
            optimizer,
        };
        assert_eq!(link_out(&l, &s, &coal), vec![0, 0], "{}", optimizer.name());
    }
}

#[test]
fn gather_reduce_returns_each_slice_s_bytes_whatever_the_dim() {
    let offsets = vec![0u32, 2, 3, 6];
    let indices = vec![0u32, 9, 3, 3, 7, 1];
    let bags = 3u64;
    for dim in [8usize, 16, 20, 33, 64, 100] {
        for placement in [Placement::VectorSliced, Placement::TablePerRank] {
            for ranks in [1u32, 3, 8] {
                // Table 1 under test, so placements offset it.
                let shapes = [
                    TableShape { rows: 7, dim: 24 },
                    TableShape { rows: 10, dim },
                ];
                let l = layout(placement, ranks, &shapes, StateWidth::None);
                let g = gather(1, offsets.clone(), indices.clone());
                let per_rank = link_out(&l, &g, &[]);
                assert_eq!(
                    per_rank.iter().sum::<u64>(),
                    bags * dim as u64 * 4,
                    "{placement}, {ranks} ranks, dim {dim}: {per_rank:?}"
                );
                // Each rank returns exactly the values it holds of each bag.
                for (k, &b) in per_rank.iter().enumerate() {
                    let held: u64 = l.regions[1][k].as_ref().map_or(0, |r| {
                        r.slices
                            .iter()
                            .map(|&s| (dim - s as usize * 16).min(16) as u64 * 4)
                            .sum()
                    });
                    assert_eq!(b, bags * held, "{placement}, rank {k}, dim {dim}");
                }
            }
        }
    }
}

fn params() -> PoolParams {
    PoolParams {
        engine: EngineKind::Native,
        dram: DramConfig::preset("DDR4-3200-x8").unwrap(),
        core: Default::default(),
        link: Default::default(),
        energy: Default::default(),
    }
}

#[test]
fn row_interleaved_ranks_without_lookups_return_nothing() {
    // Rows 0, 4, 8, … of table 0 all live on rank 0 of 4.
    let l = layout(
        Placement::RowInterleaved,
        4,
        &[TableShape { rows: 100, dim: 64 }],
        StateWidth::None,
    );
    let g = gather(0, vec![0, 5, 10], vec![0, 4, 8, 12, 16, 20, 24, 28, 32, 36]);
    assert_eq!(link_out(&l, &g, &[]), vec![512, 0, 0, 0]);
    let p = params();
    let r = run_batch(&mut Pool::without_data(l.clone()), &[g], &p).unwrap();
    assert_eq!(r.active_ranks, 1);
    assert_eq!(r.link_out_bytes, 2 * 64 * 4);
    // All of it fits the output buffer: the whole of it is the tail.
    assert_eq!(r.link_out_tail_bytes, 512);
    // Only the active rank's partial sums are buffered at the end.
    let want = 512.0 / p.link.bandwidth_gbps + p.link.latency_ns;
    assert!(
        (r.link_out_ns - want).abs() < 1e-9,
        "{} ns, expected {want}",
        r.link_out_ns
    );
    // Two bags over two ranks: each returns partial sums of every bag.
    let g = gather(0, vec![0, 1, 2], vec![0, 1]);
    assert_eq!(link_out(&l, &g, &[]), vec![512, 512, 0, 0]);
    // A rank with lookups of one table only returns that table's sums.
    let l = layout(
        Placement::RowInterleaved,
        4,
        &[TableShape { rows: 100, dim: 64 }; 2],
        StateWidth::None,
    );
    let batch = [
        gather(0, vec![0, 1, 2], vec![0, 4]),
        gather(1, vec![0, 1, 2], vec![0, 4]),
    ];
    let per_rank: Vec<Vec<u64>> = batch.iter().map(|g| link_out(&l, g, &[])).collect();
    assert_eq!(per_rank, vec![vec![512, 0, 0, 0], vec![0, 512, 0, 0]]);
    let r = run_batch(&mut Pool::without_data(l.clone()), &batch, &p).unwrap();
    assert_eq!(r.link_out_bytes, 1024);
    assert_eq!(r.active_ranks, 2);
    // Empty bags: no rank looked anything up, nothing comes back.
    let empty = gather(0, vec![0, 0, 0], vec![]);
    let r = run_batch(&mut Pool::without_data(l), &[empty], &p).unwrap();
    assert_eq!((r.link_out_bytes, r.link_out_ns), (0, 0.0));
}

/// Results beyond a rank's output buffer drain while it computes; the tail
/// (at most a buffer per rank) is what link-out's time carries.
#[test]
fn the_link_out_tail_is_what_the_buffers_still_hold() {
    let shapes = [TableShape { rows: 64, dim: 64 }; 3];
    let l = layout(Placement::VectorSliced, 4, &shapes, StateWidth::None);
    let bags = 64u32;
    let batch: Vec<Instruction> = (0..3)
        .map(|t| {
            gather(
                t,
                (0..=bags).map(|b| 2 * b).collect(),
                (0..2 * bags).map(|i| i % 64).collect(),
            )
        })
        .collect();
    let p = params();
    let r = run_batch(&mut Pool::without_data(l), &batch, &p).unwrap();
    // Each rank holds one slice of each table: 3 x 64 x 64 B, beyond its buffer.
    assert_eq!(r.link_out_bytes, 4 * 3 * 64 * 64);
    let cap = p.core.output_buffer_bytes;
    assert_eq!(r.link_out_tail_bytes, 4 * cap);
    let want = (4 * cap) as f64 / p.link.bandwidth_gbps + p.link.latency_ns;
    assert!(
        (r.link_out_ns - want).abs() < 1e-9,
        "{} ns, expected {want}",
        r.link_out_ns
    );
}

/// A small deterministic generator for the cases below.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

#[test]
fn totals_without_requests_equal_the_ranks_link_out_bytes() {
    let mut seed = 7u64;
    let optimizers = [
        Optimizer::Sgd { lr: 0.1 },
        Optimizer::Adagrad {
            lr: 0.1,
            eps: 1e-8,
            initial_accumulator: 0.0,
        },
        Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 },
    ];
    let mut nonzero = (0, 0);
    for placement in Placement::ALL {
        for ranks in [1, 2, 3, 5, 8, 32] {
            for dim in [8, 16, 20, 48, 64, 200] {
                let shapes = [TableShape { rows: 97, dim }, TableShape { rows: 5, dim }];
                for (t, rows) in [(0usize, 97u64), (1, 5)] {
                    let bags = 1 + lcg(&mut seed) % 6;
                    let lookups = lcg(&mut seed) % 12;
                    let indices: Vec<u32> = (0..lookups)
                        .map(|_| (lcg(&mut seed) % rows) as u32)
                        .collect();
                    // Bags split the lookups anyhow (some empty).
                    let mut offsets = vec![0u32];
                    for b in 1..bags {
                        offsets.push((lookups * b / bags) as u32);
                    }
                    offsets.push(lookups as u32);
                    let l = layout(placement, ranks, &shapes, StateWidth::PerRow);
                    let g = gather(t as u32, offsets, indices.clone());
                    let want: u64 = link_out(&l, &g, &[]).iter().sum();
                    let got = nmpsim_nmp::gather_link_out_bytes(&l, t, bags, &indices);
                    assert_eq!(
                        got, want,
                        "gather {placement:?} {ranks} ranks dim {dim} t{t}"
                    );
                    nonzero.0 += (got > 0) as u32;
                    let mut coal = indices.clone();
                    coal.sort_unstable();
                    coal.dedup();
                    for opt in &optimizers {
                        let l = layout(placement, ranks, &shapes, StateWidth::of(opt));
                        let s = Instruction::Scatter {
                            table: t as u32,
                            optimizer: *opt,
                        };
                        let want: u64 = link_out(&l, &s, &coal).iter().sum();
                        let got = nmpsim_nmp::scatter_link_out_bytes(&l, t, &coal, opt);
                        assert_eq!(got, want, "scatter {opt:?} {placement:?} {ranks} dim {dim}");
                        nonzero.1 += (got > 0) as u32;
                    }
                }
            }
        }
    }
    // The cases exercise both kinds of traffic.
    assert!(nonzero.0 > 100 && nonzero.1 > 20, "{nonzero:?}");
}
