//! The pool of TT tables: its lookups against the kernels' TT forward, its
//! requests and multiply-adds against their formulas, its writes, its
//! errors, and when its ALU bounds it.

use nmpsim_kernels::Pooling;
use nmpsim_kernels::tt::{TtTable, tt_gather_reduce};
use nmpsim_nmp::{
    CoreParams, Instruction, Layout, LayoutParams, Placement, Pool, PoolParams, StateWidth,
    TableShape, TtPool, run_tt_batch,
};
use nmpsim_sim::{DramConfig, EngineKind};
use nmpsim_traces::TableBatch;

const CAP: u64 = 1 << 30;

fn params(lanes: u32) -> PoolParams {
    PoolParams {
        engine: EngineKind::Native,
        dram: DramConfig::preset("DDR4-3200-x8").unwrap(),
        core: CoreParams {
            alu_lanes: lanes,
            ..CoreParams::default()
        },
        link: Default::default(),
        energy: Default::default(),
    }
}

/// `bags` bags of `bag` lookups each of rows drawn from `rows` (a few hot
/// rows, so that prefixes repeat).
fn batch(rows: u64, bags: usize, bag: usize, seed: u64) -> TableBatch {
    let mut x = seed;
    let mut indices = Vec::new();
    let mut offsets = vec![0u32];
    for _ in 0..bags {
        for _ in 0..bag {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 33) % rows;
            indices.push(if x & 1 == 0 {
                (r % 40) as u32
            } else {
                r as u32
            });
        }
        offsets.push(indices.len() as u32);
    }
    TableBatch {
        offsets,
        indices,
        weights: None,
        num_rows: rows,
    }
}

fn lookup(tb: &TableBatch, pooling: Pooling, reuse: bool) -> Instruction {
    Instruction::TtGatherReduce {
        table: 0,
        pooling,
        reuse,
        offsets: tb.offsets.clone(),
        indices: tb.indices.clone(),
    }
}

fn pool(table: &TtTable, ranks: u32) -> TtPool {
    TtPool::with_tables(ranks, CAP, 0, vec![table.clone()]).unwrap()
}

#[test]
fn one_lookup_bags_equal_the_kernels_tt_forward_bit_for_bit() {
    let table = TtTable::seeded(5000, 16, 8, 3).unwrap();
    let tb = batch(5000, 200, 1, 7);
    for pooling in [Pooling::Sum, Pooling::Mean] {
        let (want, _) = tt_gather_reduce(&table, &tb, pooling, true).unwrap();
        for reuse in [true, false] {
            let mut p = pool(&table, 4);
            let got = p.execute(&lookup(&tb, pooling, reuse)).unwrap().unwrap();
            assert_eq!(got, want, "{pooling:?}, reuse {reuse}");
        }
    }
}

#[test]
fn multi_lookup_bags_equal_it_within_rounding() {
    let table = TtTable::seeded(3000, 16, 8, 5).unwrap();
    let tb = batch(3000, 64, 9, 11);
    for pooling in [Pooling::Sum, Pooling::Mean] {
        let (want, _) = tt_gather_reduce(&table, &tb, pooling, true).unwrap();
        let got = pool(&table, 8)
            .execute(&lookup(&tb, pooling, true))
            .unwrap()
            .unwrap();
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5 * scale, "{g} vs {w} ({pooling:?})");
        }
        // On one rank every bag is one rank's: bit for bit again.
        let one = pool(&table, 1)
            .execute(&lookup(&tb, pooling, true))
            .unwrap()
            .unwrap();
        assert_eq!(one, want);
    }
}

#[test]
fn requests_and_multiply_adds_follow_the_formulas() {
    let table = TtTable::seeded(8000, 16, 8, 1).unwrap();
    let s = table.shape;
    let tb = batch(8000, 300, 2, 3);
    let p = pool(&table, 4);
    let lines = |k: usize| (s.slice_len(k) as u64 * 4).div_ceil(64);
    let [n1, n2, n3] = s.dim_factors;
    let r = s.ranks[1] as u64;
    let (prefix_macs, last_macs) = ((n1 * n2) as u64 * r * r, (n1 * n2 * n3) as u64 * r);
    let n = tb.indices.len() as u64;
    let mut distinct: Vec<u64> = tb.indices.iter().map(|&x| s.prefix(x)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let d = distinct.len() as u64;
    assert!(d < n, "the batch must repeat prefixes ({d} of {n})");
    for (reuse, products) in [(true, d), (false, n)] {
        let w = p.work(&lookup(&tb, Pooling::Sum, reuse)).unwrap();
        let reqs: u64 = w.iter().map(|w| w.requests.len() as u64).sum();
        assert_eq!(reqs, products * (lines(0) + lines(1)) + n * lines(2));
        assert_eq!(p.gather_reduce_read_bytes(0, reuse, &tb.indices), 64 * reqs);
        let macs: u64 = w.iter().map(|w| w.alu_macs).sum();
        assert_eq!(
            macs,
            products * prefix_macs + n * (last_macs + s.dim as u64)
        );
        assert!(
            w.iter()
                .all(|w| w.requests.iter().all(|op| !op.access.is_write()))
        );
    }
    // Each lookup on its prefix's rank, which sends one partial sum (and
    // its bag id) per bag it touched.
    let w = p.work(&lookup(&tb, Pooling::Sum, true)).unwrap();
    for (k, wk) in w.iter().enumerate() {
        let mut bags: Vec<usize> = (0..tb.batch_size())
            .filter(|&b| {
                (tb.offsets[b]..tb.offsets[b + 1])
                    .any(|i| p.rank_of(0, tb.indices[i as usize]) == k as u32)
            })
            .collect();
        bags.dedup();
        assert_eq!(
            wk.link_out_bytes,
            bags.len() as u64 * (16 * 4 + 4),
            "rank {k}"
        );
    }
    let all: u64 = w.iter().map(|w| w.link_out_bytes).sum();
    assert_eq!(
        p.gather_reduce_link_out_bytes(0, &tb.offsets, &tb.indices),
        all
    );
}

#[test]
fn a_write_changes_every_copy_and_the_lookups_after_it() {
    let mut table = TtTable::seeded(2000, 16, 4, 9).unwrap();
    let s = table.shape;
    let mut p = pool(&table, 4);
    let slices = vec![0u32, 3];
    let n = s.slice_len(1);
    let values: Vec<f32> = (0..2 * n).map(|i| i as f32 * 1e-3).collect();
    let write = Instruction::TtWrite {
        table: 0,
        core: 1,
        slices: slices.clone(),
        values: values.clone(),
    };
    let w = p.work(&write).unwrap();
    let lines = (n as u64 * 4).div_ceil(64);
    assert_eq!(p.write_bytes(0, 1, 2), 4 * 2 * lines * 64);
    for wk in &w {
        assert_eq!(wk.requests.len() as u64, 2 * lines);
        assert!(wk.requests.iter().all(|op| op.access.is_write()));
        assert_eq!(wk.link_out_bytes, 0);
    }
    assert_eq!(p.execute(&write).unwrap(), None);
    for (j, &i) in slices.iter().enumerate() {
        table.cores[1][i as usize * n..(i as usize + 1) * n]
            .copy_from_slice(&values[j * n..(j + 1) * n]);
    }
    assert_eq!(p.table(0).unwrap(), &table);
    let tb = batch(2000, 50, 1, 2);
    let (want, _) = tt_gather_reduce(&table, &tb, Pooling::Sum, true).unwrap();
    let got = p
        .execute(&lookup(&tb, Pooling::Sum, true))
        .unwrap()
        .unwrap();
    assert_eq!(got, want);
}

#[test]
fn bad_instructions_are_refused_naming_what_is_wrong() {
    let table = TtTable::seeded(1000, 16, 4, 1).unwrap();
    let mut p = pool(&table, 2);
    let tb = batch(1000, 4, 1, 1);
    let mut bad = lookup(&tb, Pooling::Sum, true);
    if let Instruction::TtGatherReduce { indices, .. } = &mut bad {
        indices[2] = 1000;
    }
    let e = p.execute(&bad).unwrap_err().to_string();
    assert!(
        e.contains("`indices`[2] is 1000") && e.contains("TT table 0"),
        "{e}"
    );
    let e = p
        .work(&lookup(&tb, Pooling::WeightedSum, true))
        .unwrap_err()
        .to_string();
    assert!(e.contains("sum or mean"), "{e}");
    let write = |core: u32, slices: Vec<u32>, values: usize| Instruction::TtWrite {
        table: 0,
        core,
        slices,
        values: vec![0.0; values],
    };
    let e = p.work(&write(3, vec![], 0)).unwrap_err().to_string();
    assert!(e.contains("cores 0 to 2"), "{e}");
    let m1 = table.shape.row_factors[0] as u32;
    let e = p
        .work(&write(0, vec![m1], table.shape.slice_len(0)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`slices`[0]") && e.contains("core 0"), "{e}");
    let e = p.work(&write(2, vec![0], 5)).unwrap_err().to_string();
    assert!(e.contains("5 values for 1 slices"), "{e}");
    let e = p
        .work(&Instruction::Gather {
            table: 0,
            rows: vec![1],
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("tt-gather-reduce and tt-write only"), "{e}");
    let e = p.work(&Instruction::TtWrite {
        table: 1,
        core: 0,
        slices: vec![],
        values: vec![],
    });
    assert!(
        e.unwrap_err()
            .to_string()
            .contains("table 1 does not exist")
    );
    // And a pool of rows refuses TT instructions.
    let layout = Layout::new(
        Placement::RowInterleaved,
        &[TableShape {
            rows: 1000,
            dim: 16,
        }],
        LayoutParams {
            ranks: 2,
            rank_capacity_bytes: CAP,
            state_values_per_row: StateWidth::None,
            max_bags: 8,
            max_unique: 8,
        },
    )
    .unwrap();
    let e = Pool::new(layout)
        .execute(&lookup(&tb, Pooling::Sum, true))
        .unwrap_err()
        .to_string();
    assert!(e.contains("pool of TT tables"), "{e}");
    // Nor does a layout of rows take the TT tables' placement.
    let e = Layout::new(
        Placement::Replicated,
        &[TableShape { rows: 10, dim: 16 }],
        LayoutParams {
            ranks: 2,
            rank_capacity_bytes: CAP,
            state_values_per_row: StateWidth::None,
            max_bags: 8,
            max_unique: 8,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("TT tables of a TT pool"), "{e}");
    // Cores that do not fit a rank.
    let e = TtPool::new(2, 4096, 0, &[table.shape])
        .unwrap_err()
        .to_string();
    assert!(e.contains("copy of the 1 TT tables' cores"), "{e}");
}

#[test]
fn fewer_lanes_make_the_pool_compute_bound() {
    // Rank 64, dim 16: a prefix product is 2 x 64 x 2 x 64 = 16K
    // multiply-adds for its 33 KB of slices read.
    let table = TtTable::seeded(100_000, 16, 64, 4).unwrap();
    let tb = batch(100_000, 256, 1, 5);
    let instr = [lookup(&tb, Pooling::Sum, false)];
    let mut p = TtPool::new(4, CAP, 0, &[table.shape]).unwrap();
    let wide = run_tt_batch(&mut p, &instr, &params(64)).unwrap();
    let narrow = run_tt_batch(&mut p, &instr, &params(1)).unwrap();
    assert_eq!(wide.placement, Placement::Replicated);
    assert_eq!(wide.ops, vec!["tt-gather-reduce".to_string()]);
    assert_eq!(wide.bound(), "memory", "{wide:?}");
    assert_eq!(wide.alu_bound_ranks, 0);
    assert_eq!(narrow.bound(), "compute");
    assert_eq!(narrow.alu_bound_ranks, narrow.active_ranks);
    assert!(
        narrow.compute_ns > 3.0 * wide.compute_ns,
        "{} vs {}",
        narrow.compute_ns,
        wide.compute_ns
    );
    // The same requests either way: the DRAM did the same.
    assert_eq!(wide.dram_requests, narrow.dram_requests);
    assert_eq!(wide.dram_read_bytes, narrow.dram_read_bytes);
    // The ALU's time is its multiply-adds over its lanes at its clock.
    let macs: u64 = p
        .work(&instr[0])
        .unwrap()
        .iter()
        .map(|w| w.alu_macs)
        .max()
        .unwrap();
    let slowest = narrow
        .per_rank
        .iter()
        .map(|r| r.alu_time_ns)
        .fold(0.0, f64::max);
    assert!(
        (slowest - macs as f64 / 1.6).abs() < 1e-6 * slowest,
        "{slowest} vs {macs}"
    );
    assert!(narrow.energy.alu_pj > 0.0);
}

#[test]
fn a_batch_with_a_bad_instruction_changes_nothing() {
    let table = TtTable::seeded(1000, 16, 4, 1).unwrap();
    let mut p = pool(&table, 2);
    let n = table.shape.slice_len(0);
    let good = Instruction::TtWrite {
        table: 0,
        core: 0,
        slices: vec![1],
        values: vec![9.0; n],
    };
    let bad = Instruction::TtWrite {
        table: 0,
        core: 0,
        slices: vec![2],
        values: vec![9.0; n + 1],
    };
    assert!(run_tt_batch(&mut p, &[good, bad], &params(16)).is_err());
    assert_eq!(p.table(0).unwrap(), &table);
}
