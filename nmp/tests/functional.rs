//! The pool computes what the kernels crate computes, for every placement,
//! and every 64 B of every row an instruction touches is requested once.

use std::collections::HashMap;

use nmpsim_kernels::{
    EmbeddingTable, Optimizer, OptimizerState, Pooling, casted_gather_reduce, gather_reduce,
    scatter_update, tensor_cast,
};
use nmpsim_nmp::{Instruction, Placement, Pool, StateWidth, TableShape};
use nmpsim_sim::Access;
use nmpsim_traces::TableBatch;
use proptest::prelude::*;

mod support;
use support::layout;

fn batch_strategy(rows: u64) -> impl Strategy<Value = TableBatch> {
    (1usize..12).prop_flat_map(move |bags| {
        (
            proptest::collection::vec(0usize..6, bags),
            proptest::collection::vec(0u32..rows as u32, 0..80),
            any::<u64>(),
        )
            .prop_map(move |(lens, pool, seed)| {
                let mut offsets = vec![0u32];
                let mut indices = Vec::new();
                let mut k = seed;
                for len in lens {
                    for _ in 0..len {
                        k = k
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let r = if pool.is_empty() {
                            (k >> 33) as u32 % rows as u32
                        } else {
                            pool[(k >> 33) as usize % pool.len()]
                        };
                        indices.push(r);
                    }
                    offsets.push(indices.len() as u32);
                }
                let weights = Some(
                    (0..indices.len())
                        .map(|i| 0.25 + ((i as u64 * 7919 + seed) % 97) as f32 / 97.0)
                        .collect(),
                );
                TableBatch {
                    num_rows: rows,
                    offsets,
                    indices,
                    weights,
                }
            })
    })
}

fn config() -> impl Strategy<Value = (Placement, u32, u64, usize)> {
    (
        prop_oneof![
            Just(Placement::VectorSliced),
            Just(Placement::RowInterleaved),
            Just(Placement::TablePerRank)
        ],
        prop_oneof![Just(1u32), Just(2), Just(3), Just(5), Just(8)],
        2u64..120,
        prop_oneof![Just(8usize), Just(16), Just(20), Just(64), Just(100)],
    )
}

/// Two tables: the one under test is table 1, so placements offset it.
fn shapes(rows: u64, dim: usize) -> Vec<TableShape> {
    vec![TableShape { rows: 7, dim: 24 }, TableShape { rows, dim }]
}

/// A 4-rank vector-sliced pool of `shapes(50, 16)` keeping `state`.
fn pool_of(state: StateWidth) -> Pool {
    Pool::new(layout(Placement::VectorSliced, 4, &shapes(50, 16), state))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn gather_reduce_matches_the_kernels(
        (placement, ranks, rows, dim) in config(),
        seed in any::<u64>(),
        batch in (2u64..120).prop_flat_map(batch_strategy),
    ) {
        let rows = rows.max(batch.num_rows);
        let batch = TableBatch { num_rows: rows, ..batch };
        let table = EmbeddingTable::seeded(rows, dim, seed).unwrap();
        let mut pool = Pool::new(layout(placement, ranks, &shapes(rows, dim), StateWidth::None));
        pool.load_table(1, &table).unwrap();
        prop_assert_eq!(pool.read_table(1).unwrap(), table.clone());
        for pooling in Pooling::ALL {
            let (want, _) = gather_reduce(&table, &batch, pooling).unwrap();
            let got = pool.execute(&Instruction::GatherReduce {
                table: 1,
                pooling,
                offsets: batch.offsets.clone(),
                indices: batch.indices.clone(),
                weights: batch.weights.clone(),
            }).unwrap().unwrap();
            if placement == Placement::RowInterleaved && ranks > 1 {
                for (g, w) in got.iter().zip(&want) {
                    prop_assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{} vs {}", g, w);
                }
            } else {
                prop_assert_eq!(&got, &want, "{} {} ranks {:?}", placement, ranks, pooling);
            }
        }
    }

    #[test]
    fn casted_gather_reduce_and_scatter_match_the_kernels(
        (placement, ranks, rows, dim) in config(),
        seed in any::<u64>(),
        batch in (2u64..120).prop_flat_map(batch_strategy),
        opt_i in 0usize..4,
        pooling_i in 0usize..3,
    ) {
        let rows = rows.max(batch.num_rows);
        let batch = TableBatch { num_rows: rows, ..batch };
        let pooling = Pooling::ALL[pooling_i];
        let optimizer = Optimizer::examples()[opt_i];
        let width = StateWidth::of(&optimizer);
        let bags = batch.offsets.len() - 1;
        let grad_out: Vec<f32> = EmbeddingTable::seeded(bags as u64, dim, seed ^ 1).unwrap().data;
        let (casted, _) = tensor_cast(&batch, pooling).unwrap();
        let (want_coal, _) = casted_gather_reduce(&casted, &grad_out, dim).unwrap();

        let mut table = EmbeddingTable::seeded(rows, dim, seed).unwrap();
        let mut state = OptimizerState::new(&optimizer, rows, dim).unwrap();
        // Non-trivial starting state.
        for (i, v) in state.values.iter_mut().enumerate() {
            *v += (i % 5) as f32 * 0.01;
        }
        let mut pool = Pool::new(layout(placement, ranks, &shapes(rows, dim), width));
        pool.load_table(1, &table).unwrap();
        pool.load_state(1, &state).unwrap();
        pool.execute(&Instruction::LoadGradient { table: 1, bags: bags as u32, grads: grad_out.clone() }).unwrap();
        pool.execute(&Instruction::CastedGatherReduce {
            table: 1,
            num_bags: bags as u32,
            casted_src: casted.casted_src.clone(),
            casted_dst: casted.casted_dst.clone(),
            unique_rows: casted.unique_rows.clone(),
            scale: casted.scale.clone(),
        }).unwrap();
        prop_assert_eq!(pool.read_coalesced(1), want_coal.clone());

        scatter_update(&mut table, &mut state, &want_coal, &optimizer).unwrap();
        pool.execute(&Instruction::Scatter { table: 1, optimizer }).unwrap();
        prop_assert_eq!(pool.read_table(1).unwrap(), table, "{} {}", placement, optimizer.name());
        prop_assert_eq!(pool.read_state(1, state.values_per_row).unwrap(), state.values);

        // The baseline path: coalesced gradients from the host.
        pool.execute(&Instruction::LoadCoalesced { table: 1, rows: want_coal.rows.clone(), grads: want_coal.grads.clone() }).unwrap();
        prop_assert_eq!(pool.read_coalesced(1), want_coal);
    }

    #[test]
    fn every_slice_of_every_touched_row_is_requested_once(
        (placement, ranks, rows, dim) in config(),
        batch in (2u64..120).prop_flat_map(batch_strategy),
    ) {
        let rows = rows.max(batch.num_rows);
        let batch = TableBatch { num_rows: rows, ..batch };
        let l = layout(placement, ranks, &shapes(rows, dim), StateWidth::PerElement);
        let mut pool = Pool::without_data(l.clone());
        let gr = Instruction::GatherReduce {
            table: 1,
            pooling: Pooling::Sum,
            offsets: batch.offsets.clone(),
            indices: batch.indices.clone(),
            weights: None,
        };
        let mut want: HashMap<(u32, u64), usize> = HashMap::new();
        for &r in &batch.indices {
            for p in l.row_pieces(1, r as u64) {
                *want.entry((p.rank, p.addr)).or_default() += 1;
            }
        }
        let mut got: HashMap<(u32, u64), usize> = HashMap::new();
        for (k, w) in pool.work(&gr).unwrap().iter().enumerate() {
            for op in &w.requests {
                prop_assert_eq!(op.access, Access::Read);
                *got.entry((k as u32, op.addr)).or_default() += 1;
            }
        }
        prop_assert_eq!(&got, &want);

        // Scatter: each slice of each coalesced row is read and written once,
        // with its state slice.
        let (casted, _) = tensor_cast(&batch, Pooling::Sum).unwrap();
        let bags = batch.offsets.len() as u32 - 1;
        pool.execute(&Instruction::LoadGradient { table: 1, bags, grads: vec![0.0; bags as usize * dim] }).unwrap();
        pool.execute(&Instruction::CastedGatherReduce {
            table: 1, num_bags: bags, casted_src: casted.casted_src.clone(),
            casted_dst: casted.casted_dst.clone(), unique_rows: casted.unique_rows.clone(), scale: None,
        }).unwrap();
        let sc = Instruction::Scatter { table: 1, optimizer: Optimizer::examples()[1] };
        let mut reads: HashMap<(u32, u64), usize> = HashMap::new();
        let mut writes: HashMap<(u32, u64), usize> = HashMap::new();
        for (k, w) in pool.work(&sc).unwrap().iter().enumerate() {
            for op in &w.requests {
                let m = if op.access == Access::Read { &mut reads } else { &mut writes };
                *m.entry((k as u32, op.addr)).or_default() += 1;
            }
        }
        for &r in &casted.unique_rows {
            for p in l.row_pieces(1, r as u64).chain(l.state_pieces(1, r as u64)) {
                prop_assert_eq!(reads.get(&(p.rank, p.addr)), Some(&1));
                prop_assert_eq!(writes.get(&(p.rank, p.addr)), Some(&1));
            }
        }
    }

    /// `gather` returns each listed row and its state as loaded, reads each
    /// of their slices once per listing (reads only), and sends exactly
    /// their bytes over the link, for every placement and state width.
    #[test]
    fn gather_returns_the_rows_with_their_state_and_reads_each_once(
        (placement, ranks, rows, dim) in config(),
        seed in any::<u64>(),
        listed in proptest::collection::vec(any::<u32>(), 0..40),
        width_i in 0usize..3,
    ) {
        let width = [StateWidth::None, StateWidth::PerRow, StateWidth::PerElement][width_i];
        let per_row = match width {
            StateWidth::None => 0,
            StateWidth::PerRow => 1,
            StateWidth::PerElement => dim,
        };
        let listed: Vec<u32> = listed.iter().map(|r| r % rows as u32).collect();
        let table = EmbeddingTable::seeded(rows, dim, seed).unwrap();
        let state = OptimizerState {
            rows,
            values_per_row: per_row,
            values: (0..rows as usize * per_row).map(|i| i as f32 * 0.5 + 1.0).collect(),
        };
        let l = layout(placement, ranks, &shapes(rows, dim), width);
        let mut pool = Pool::new(l.clone());
        pool.load_table(1, &table).unwrap();
        pool.load_state(1, &state).unwrap();
        let g = Instruction::Gather { table: 1, rows: listed.clone() };
        let got = pool.execute(&g).unwrap().unwrap();
        let mut want = Vec::new();
        for &r in &listed {
            want.extend_from_slice(table.row(r as u64).unwrap());
            want.extend_from_slice(&state.values[r as usize * per_row..(r as usize + 1) * per_row]);
        }
        prop_assert_eq!(&got, &want);
        let mut expect: HashMap<(u32, u64), usize> = HashMap::new();
        for &r in &listed {
            let state_pieces: Vec<_> = if width == StateWidth::PerElement {
                l.state_pieces(1, r as u64).collect()
            } else {
                Vec::new()
            };
            for p in l.row_pieces(1, r as u64).chain(state_pieces) {
                *expect.entry((p.rank, p.addr)).or_default() += 1;
            }
            if width == StateWidth::PerRow {
                let (k, a) = l.row_state(1, r as u64);
                *expect.entry((k, a & !63)).or_default() += 1;
            }
        }
        let mut seen: HashMap<(u32, u64), usize> = HashMap::new();
        let mut out = 0;
        for (k, w) in pool.work(&g).unwrap().iter().enumerate() {
            prop_assert_eq!(w.alu_slices, 0);
            out += w.link_out_bytes;
            for op in &w.requests {
                prop_assert_eq!(op.access, Access::Read);
                *seen.entry((k as u32, op.addr)).or_default() += 1;
            }
        }
        prop_assert_eq!(&seen, &expect);
        prop_assert_eq!(out, (listed.len() * (dim + per_row) * 4) as u64);
        prop_assert_eq!(out, nmpsim_nmp::gather_rows_link_out_bytes(&l, 1, &listed));
    }
}

#[test]
fn bad_instructions_are_clear_errors() {
    let l = layout(
        Placement::VectorSliced,
        4,
        &shapes(50, 16),
        StateWidth::None,
    );
    let mut pool = Pool::new(l);
    // A casted gather-reduce on table 1, unscaled.
    let casted = |num_bags, casted_src, casted_dst, unique_rows| Instruction::CastedGatherReduce {
        table: 1,
        num_bags,
        casted_src,
        casted_dst,
        unique_rows,
        scale: None,
    };
    let e = pool
        .execute(&Instruction::Scatter {
            table: 9,
            optimizer: Optimizer::Sgd { lr: 0.1 },
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("table 9 does not exist"), "{e}");
    let e = pool
        .execute(&Instruction::GatherReduce {
            table: 1,
            pooling: Pooling::Sum,
            offsets: vec![0, 2],
            indices: vec![3, 50],
            weights: None,
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`indices`[1] is 50") && e.contains("table 1"),
        "{e}"
    );
    let e = pool
        .execute(&casted(3, vec![0], vec![0], vec![4]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("LoadGradient first"), "{e}");
    // Unique rows without a lookup that reaches them: refused, not left
    // with an older gradient in their slots.
    let e = pool
        .work(&casted(1, vec![], vec![], vec![5]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not reach every unique row"), "{e}");
    // More bags than the gradient buffer holds: refused before any address
    // is made (they would fall in the next region).
    let e = pool
        .work(&casted(1000, vec![130], vec![0], vec![1]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("1000 bags exceed the gradient buffer (64 bags)"),
        "{e}"
    );
    // Loading and reading with a wrong table, state width or a timing-only
    // pool: errors, not panics or state stored wrong.
    assert!(pool.read_table(9).is_err());
    assert!(pool.read_state(1, 16).is_err(), "the layout keeps no state");
    let adagrad = nmpsim_kernels::OptimizerState::new(&Optimizer::examples()[1], 50, 16).unwrap();
    let e = pool.load_state(1, &adagrad).unwrap_err().to_string();
    assert!(e.contains("layout keeps 0 per row"), "{e}");
    assert!(pool.load_state(9, &adagrad).is_err());
    let mut per_row = pool_of(StateWidth::PerRow);
    let e = per_row.load_state(1, &adagrad).unwrap_err().to_string();
    assert!(e.contains("16 values per row"), "{e}");
    let timing = Pool::without_data(layout(
        Placement::VectorSliced,
        4,
        &shapes(50, 16),
        StateWidth::None,
    ));
    let e = timing.read_table(1).unwrap_err().to_string();
    assert!(e.contains("without data"), "{e}");
    let e = pool
        .execute(&Instruction::Scatter {
            table: 1,
            optimizer: Optimizer::examples()[1],
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("laid out for"), "{e}");
}
