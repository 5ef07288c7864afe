//! Cross-primitive properties: the claims the paper (and the simulator built
//! on this crate) rests on, checked on random inputs.

// Index loops spell the formulas out element by element, which is the point here.
#![allow(clippy::needless_range_loop)]

use nmpsim_traces::TableBatch;
use nmpsim_traces::threads::on_threads;
use proptest::prelude::*;

use crate::table::{EmbeddingTable, SplitMix64, fill_uniform};
use crate::traffic::gather_reduce_traffic;
use crate::*;

/// A random valid batch: up to 24 bags of up to 9 lookups over `1..60` rows,
/// with small integer weights (so weighted sums of integers stay exact).
fn batch_strategy() -> impl Strategy<Value = TableBatch> {
    (
        1u64..60,
        proptest::collection::vec(0usize..10, 0..24),
        any::<u64>(),
    )
        .prop_map(|(rows, lens, seed)| {
            let mut rng = SplitMix64::new(seed);
            let mut offsets = vec![0u32];
            let mut indices = Vec::new();
            let mut weights = Vec::new();
            for len in lens {
                for _ in 0..len {
                    indices.push((rng.next_u64() % rows) as u32);
                    weights.push((rng.next_u64() % 7) as f32 - 3.0);
                }
                offsets.push(indices.len() as u32);
            }
            TableBatch {
                num_rows: rows,
                offsets,
                indices,
                weights: Some(weights),
            }
        })
}

/// Integer-valued f32 in [-8, 8]: every partial sum below is exact in f32.
fn integer_values(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..len)
        .map(|_| (rng.next_u64() % 17) as f32 - 8.0)
        .collect()
}

fn uniform_values(len: usize, seed: u64) -> Vec<f32> {
    let mut v = vec![0.0; len];
    fill_uniform(&mut v, -1.0, 1.0, seed);
    v
}

/// Checks f32 sums `got` against `want`, the same sums taken exactly (or
/// exactly and rounded once to f32). Element `j` sums `n[j]` terms whose
/// magnitudes add up to `magnitude[j]`; summed in f32, in any order, it errs
/// by at most about `n * eps * magnitude`. The tolerance is about twice that,
/// so that a sum whose terms cancel to nearly zero is judged by the size of
/// what was summed, not by its own size (where any relative tolerance fails).
fn within_f32_rounding(
    got: &[f32],
    want: &[f64],
    n: &[usize],
    magnitude: &[f64],
) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} sums against {}", got.len(), want.len()));
    }
    for j in 0..got.len() {
        let bound = (2 * n[j] + 1) as f64 * f32::EPSILON as f64 * magnitude[j];
        let err = (got[j] as f64 - want[j]).abs();
        if err.is_nan() || err > bound {
            return Err(format!(
                "element {j}: {} against {} (error {err:e}, bound {bound:e} for {} terms)",
                got[j], want[j], n[j]
            ));
        }
    }
    Ok(())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn pooling_strategy() -> impl Strategy<Value = Pooling> {
    prop_oneof![
        Just(Pooling::Sum),
        Just(Pooling::Mean),
        Just(Pooling::WeightedSum)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn casting_equals_expand_coalesce(batch in batch_strategy(), dim in 1usize..12, pooling in pooling_strategy(), seed in any::<u64>()) {
        let grad = uniform_values(batch.batch_size() * dim, seed);
        let (ex, _) = expand(&grad, dim, &batch, pooling).unwrap();
        let (co, _) = coalesce(&ex, batch.num_rows).unwrap();
        let (ca, _) = tensor_cast(&batch, pooling).unwrap();
        let (cg, _) = casted_gather_reduce(&ca, &grad, dim).unwrap();
        prop_assert_eq!(&cg.rows, &co.rows);
        prop_assert_eq!(bits(&cg.grads), bits(&co.grads));
        // And both are the true per-row sums.
        let (ex_ref, _) = reference::expand(&grad, dim, &batch, pooling).unwrap();
        let (want, _) = reference::coalesce(&ex_ref, batch.num_rows).unwrap();
        prop_assert_eq!(&co.rows, &want.rows);
        let mut n = vec![0usize; want.grads.len()];
        let mut magnitude = vec![0.0f64; want.grads.len()];
        for (i, &r) in ex_ref.src.iter().enumerate() {
            let u = want.rows.binary_search(&r).unwrap();
            for k in 0..dim {
                n[u * dim + k] += 1;
                magnitude[u * dim + k] += (ex_ref.grads[i * dim + k] as f64).abs();
            }
        }
        let exact: Vec<f64> = want.grads.iter().map(|&x| x as f64).collect();
        let sums = within_f32_rounding(&co.grads, &exact, &n, &magnitude);
        prop_assert!(sums.is_ok(), "{}", sums.unwrap_err());
        // Casting matches the reference Algorithm 2 exactly.
        prop_assert_eq!(ca, reference::tensor_cast(&batch, pooling).unwrap().0);
    }

    #[test]
    fn integer_inputs_give_exact_sums(batch in batch_strategy(), dim in 1usize..12, weighted in any::<bool>(), seed in any::<u64>()) {
        let pooling = if weighted { Pooling::WeightedSum } else { Pooling::Sum };
        let grad = integer_values(batch.batch_size() * dim, seed);
        let (ca, _) = tensor_cast(&batch, pooling).unwrap();
        let (cg, _) = casted_gather_reduce(&ca, &grad, dim).unwrap();
        let (ex, _) = expand(&grad, dim, &batch, pooling).unwrap();
        let (co, _) = coalesce(&ex, batch.num_rows).unwrap();
        let (want, _) = reference::casted_gather_reduce(&ca, &grad, dim).unwrap();
        prop_assert_eq!(&cg, &want);
        prop_assert_eq!(&co, &want);
        let table = EmbeddingTable::from_vec(batch.num_rows, dim, integer_values(batch.num_rows as usize * dim, !seed)).unwrap();
        prop_assert_eq!(gather_reduce(&table, &batch, pooling).unwrap().0, reference::gather_reduce(&table, &batch, pooling).unwrap().0);
    }

    #[test]
    fn gather_reduce_equals_naive_loop(batch in batch_strategy(), dim in 1usize..12, pooling in pooling_strategy(), seed in any::<u64>()) {
        let table = EmbeddingTable::from_vec(batch.num_rows, dim, uniform_values(batch.num_rows as usize * dim, seed)).unwrap();
        let (got, t) = gather_reduce(&table, &batch, pooling).unwrap();
        let (want, t_ref) = reference::gather_reduce(&table, &batch, pooling).unwrap();
        let mut n = vec![0usize; want.len()];
        let mut magnitude = vec![0.0f64; want.len()];
        for b in 0..batch.batch_size() {
            let bag = batch.offsets[b] as usize..batch.offsets[b + 1] as usize;
            let len = bag.len();
            for i in bag {
                let w = match (pooling, &batch.weights) {
                    (Pooling::WeightedSum, Some(ws)) => ws[i] as f64,
                    (Pooling::Mean, _) => 1.0 / len as f64,
                    _ => 1.0,
                };
                for k in 0..dim {
                    n[b * dim + k] += 1;
                    magnitude[b * dim + k] += (w * table.data[batch.indices[i] as usize * dim + k] as f64).abs();
                }
            }
            if pooling == Pooling::Mean {
                // The division rounds once more.
                for k in 0..dim {
                    n[b * dim + k] += 1;
                }
            }
        }
        let exact: Vec<f64> = want.iter().map(|&x| x as f64).collect();
        let sums = within_f32_rounding(&got, &exact, &n, &magnitude);
        prop_assert!(sums.is_ok(), "{} ({:?} vs {:?})", sums.unwrap_err(), got, want);
        prop_assert_eq!(t, t_ref);
        // Empty bags pool to zeros.
        for b in 0..batch.batch_size() {
            if batch.bag(b).is_empty() {
                prop_assert!(got[b * dim..(b + 1) * dim].iter().all(|&x| x == 0.0));
            }
        }
    }

    #[test]
    fn sgd_of_coalesced_equals_applying_every_expanded_gradient(batch in batch_strategy(), dim in 1usize..8, seed in any::<u64>()) {
        let grad = uniform_values(batch.batch_size() * dim, seed);
        let table0 = EmbeddingTable::from_vec(batch.num_rows, dim, uniform_values(batch.num_rows as usize * dim, !seed)).unwrap();
        let opt = Optimizer::Sgd { lr: 0.1 };
        let (ex, _) = expand(&grad, dim, &batch, Pooling::Sum).unwrap();
        let (co, _) = coalesce(&ex, batch.num_rows).unwrap();
        let mut fused = table0.clone();
        let mut state = OptimizerState::new(&opt, batch.num_rows, dim).unwrap();
        scatter_update(&mut fused, &mut state, &co, &opt).unwrap();
        let mut one_by_one = table0.clone();
        for (i, &r) in ex.src.iter().enumerate() {
            let row = one_by_one.row_mut(r as u64).unwrap();
            for k in 0..dim {
                row[k] -= 0.1 * ex.grads[i * dim + k];
            }
        }
        // Both orders must be within f32 rounding of the exact update: the
        // starting value and every update are the terms of one sum, which
        // can cancel to near zero (a row whose many updates cancel).
        let lr = 0.1f32 as f64;
        let mut truth: Vec<f64> = table0.data.iter().map(|&x| x as f64).collect();
        let mut magnitude: Vec<f64> = truth.iter().map(|x| x.abs()).collect();
        let mut terms = vec![1usize; truth.len()];
        for (i, &r) in ex.src.iter().enumerate() {
            for k in 0..dim {
                let j = r as usize * dim + k;
                let t = lr * ex.grads[i * dim + k] as f64;
                truth[j] -= t;
                magnitude[j] += t.abs();
                terms[j] += 1;
            }
        }
        for (what, got) in [("fused", &fused.data), ("one by one", &one_by_one.data)] {
            let sums = within_f32_rounding(got, &truth, &terms, &magnitude);
            prop_assert!(sums.is_ok(), "{}: {}", what, sums.unwrap_err());
        }
    }

    #[test]
    fn every_optimizer_matches_its_scalar_reference(batch in batch_strategy(), dim in 1usize..8, seed in any::<u64>()) {
        let grad = uniform_values(batch.batch_size() * dim, seed);
        let (ca, _) = tensor_cast(&batch, Pooling::Sum).unwrap();
        let (co, _) = casted_gather_reduce(&ca, &grad, dim).unwrap();
        let table0 = EmbeddingTable::from_vec(batch.num_rows, dim, uniform_values(batch.num_rows as usize * dim, !seed)).unwrap();
        for opt in Optimizer::examples() {
            let (mut t1, mut t2) = (table0.clone(), table0.clone());
            let mut s1 = OptimizerState::new(&opt, batch.num_rows, dim).unwrap();
            let mut s2 = s1.clone();
            for _ in 0..3 {
                let a = scatter_update(&mut t1, &mut s1, &co, &opt).unwrap();
                let b = reference::scatter_update(&mut t2, &mut s2, &co, &opt).unwrap();
                prop_assert_eq!(a, b);
            }
            prop_assert!(check::row_rel_err(&t1.data, &t2.data, dim) <= 1e-5, "{}", opt.name());
            prop_assert!(check::row_rel_err(&s1.values, &s2.values, s1.values_per_row.max(1)) <= 1e-5, "{}", opt.name());
        }
    }
}

/// More touched rows than one scatter task holds: the parallel path updates
/// every touched row as the scalar reference does, and no other row.
#[test]
fn a_scatter_over_many_tasks_matches_the_reference() {
    let (rows, bags) = (40_000u64, 7_000usize);
    for dim in [16usize, 64] {
        let batch = TableBatch {
            num_rows: rows,
            offsets: (0..=bags as u32).map(|b| b * 2).collect(),
            indices: (0..bags as u64 * 2)
                .map(|i| (i * 7919 % rows) as u32)
                .collect(),
            weights: None,
        };
        let grad = uniform_values(bags * dim, dim as u64);
        let (ca, _) = tensor_cast(&batch, Pooling::Sum).unwrap();
        let (co, _) = casted_gather_reduce(&ca, &grad, dim).unwrap();
        assert!(co.rows.len() > 3 * 2048, "{} rows", co.rows.len());
        let table0 = EmbeddingTable::seeded(rows, dim, 9).unwrap();
        for opt in Optimizer::examples() {
            let (mut t1, mut t2) = (table0.clone(), table0.clone());
            let mut s1 = OptimizerState::new(&opt, rows, dim).unwrap();
            let mut s2 = s1.clone();
            for _ in 0..2 {
                scatter_update(&mut t1, &mut s1, &co, &opt).unwrap();
                reference::scatter_update(&mut t2, &mut s2, &co, &opt).unwrap();
            }
            assert!(
                check::row_rel_err(&t1.data, &t2.data, dim) <= 1e-6,
                "{}",
                opt.name()
            );
            let per_row = s1.values_per_row.max(1);
            assert!(
                check::row_rel_err(&s1.values, &s2.values, per_row) <= 1e-6,
                "{}",
                opt.name()
            );
            let changed = (0..rows as usize)
                .filter(|&r| t1.data[r * dim..(r + 1) * dim] != table0.data[r * dim..(r + 1) * dim])
                .count();
            assert_eq!(changed, co.rows.len(), "{}: rows changed", opt.name());
        }
    }
}

#[test]
fn papers_figure_8_example() {
    // Fig. 2 / 8: bag 0 gathers rows 1, 2, 4; bag 1 gathers rows 0, 2.
    let batch = TableBatch::new(5, vec![0, 3, 5], vec![1, 2, 4, 0, 2], None).unwrap();
    let (c, _) = tensor_cast(&batch, Pooling::Sum).unwrap();
    assert_eq!(c.casted_src, vec![1, 0, 0, 1, 0]);
    assert_eq!(c.casted_dst, vec![0, 1, 2, 2, 3]);
    assert_eq!(c.unique_rows, vec![0, 1, 2, 4]);
    let (g, _) = casted_gather_reduce(&c, &[1.0, 10.0], 1).unwrap();
    assert_eq!(g.grads, vec![10.0, 1.0, 11.0, 1.0]);
}

#[test]
fn casted_rows_out_of_order_are_refused_as_on_the_gpu() {
    let batch = TableBatch::new(5, vec![0, 3, 5], vec![1, 2, 4, 0, 2], None).unwrap();
    let (mut c, _) = tensor_cast(&batch, Pooling::Sum).unwrap();
    c.unique_rows.swap(1, 2);
    let e = casted_gather_reduce(&c, &[1.0, 10.0], 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("casted.unique_rows")
            && e.contains("unique_rows[2] = 1 after 2; expected strictly ascending"),
        "{e}"
    );
}

#[test]
fn scatter_is_lazy_untouched_rows_keep_weights_and_state() {
    let dim = 4;
    let table0 = EmbeddingTable::seeded(10, dim, 5).unwrap();
    let grads = Coalesced {
        rows: vec![2, 7],
        dim,
        grads: vec![0.5; 2 * dim],
    };
    for opt in [
        Optimizer::Adagrad {
            lr: 0.1,
            eps: 1e-8,
            initial_accumulator: 0.25,
        },
        Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 },
        Optimizer::RmsProp {
            lr: 0.1,
            alpha: 0.9,
            eps: 1e-8,
        },
        Optimizer::Sgd { lr: 0.1 },
    ] {
        let mut table = table0.clone();
        let mut state = OptimizerState::new(&opt, 10, dim).unwrap();
        let state0 = state.clone();
        scatter_update(&mut table, &mut state, &grads, &opt).unwrap();
        let per = state.values_per_row;
        for r in 0..10u64 {
            let touched = r == 2 || r == 7;
            assert_eq!(
                table.row(r) != table0.row(r),
                touched,
                "{} row {r} weights",
                opt.name()
            );
            let (s, e) = (r as usize * per, (r as usize + 1) * per);
            if per > 0 {
                assert_eq!(
                    state.values[s..e] != state0.values[s..e],
                    touched,
                    "{} row {r} state",
                    opt.name()
                );
            }
        }
    }
}

/// A batch of `bags` bags of `bag` lookups, rows drawn by `draw(u)` from a
/// uniform `u` in [0, 1).
fn synthetic_batch(
    rows: u64,
    bags: usize,
    bag: usize,
    seed: u64,
    draw: impl Fn(f64) -> f64,
) -> TableBatch {
    let mut rng = SplitMix64::new(seed);
    let indices: Vec<u32> = (0..bags * bag)
        .map(|_| {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            ((draw(u) * rows as f64) as u64).min(rows - 1) as u32
        })
        .collect();
    let offsets = (0..=bags).map(|b| (b * bag) as u32).collect();
    TableBatch::new(rows, offsets, indices, None).unwrap()
}

/// Fig. 6 ratios for one batch: (expand + coalesce-accumulate) / gather-reduce
/// and (expand + coalesce-accumulate) / casted gather-reduce.
fn fig6_ratios(batch: &TableBatch, dim: usize) -> (f64, f64, usize) {
    let grad = uniform_values(batch.batch_size() * dim, 9);
    let (ex, ex_t) = expand(&grad, dim, batch, Pooling::Sum).unwrap();
    let (co, co_t) = coalesce(&ex, batch.num_rows).unwrap();
    let (ca, _) = tensor_cast(batch, Pooling::Sum).unwrap();
    let (_, cg_t) = casted_gather_reduce(&ca, &grad, dim).unwrap();
    let gr_t = gather_reduce_traffic(batch.num_lookups(), batch.batch_size(), dim, false);
    let ec = (ex_t + co_t.accumulate).total_bytes() as f64;
    (
        ec / gr_t.total_bytes() as f64,
        ec / cg_t.total_bytes() as f64,
        co.rows.len(),
    )
}

#[test]
fn fig6_traffic_ratios_uniform_and_skewed() {
    // The paper's setup: each table gathered 10 times per sample, dim 64.
    let (bags, bag, dim) = (2048, 10, 64);
    let uniform_huge = synthetic_batch(1 << 30, bags, bag, 1, |u| u);
    let uniform = synthetic_batch(1_000_000, bags, bag, 2, |u| u);
    // Heavy skew: row = rows * u^16, so P(row < k) = (k / rows)^(1/16); a few rows take most lookups.
    let skewed = synthetic_batch(1_000_000, bags, bag, 3, |u| u.powi(16));
    let (r_gr, r_cast, _) = fig6_ratios(&uniform_huge, dim);
    assert!(
        (2.6..=3.8).contains(&r_gr),
        "uniform huge: E+C / GR = {r_gr}"
    );
    assert!(
        (r_cast - 2.0).abs() <= 0.1,
        "uniform huge: E+C / casted = {r_cast}"
    );
    for (name, b) in [("uniform", &uniform), ("skewed", &skewed)] {
        let (r_gr, r_cast, unique) = fig6_ratios(b, dim);
        assert!(
            (2.6..=3.8).contains(&r_gr),
            "{name}: E+C / GR = {r_gr} ({unique} unique)"
        );
        assert!(
            (1.9..=3.1).contains(&r_cast),
            "{name}: E+C / casted = {r_cast} ({unique} unique)"
        );
    }
    // The skewed batch must really coalesce, or the test proves nothing about skew.
    let unique = fig6_ratios(&skewed, dim).2;
    assert!(unique < bags * bag / 2, "{unique} unique rows");
}

/// The forward checks each task's indices as it reads them: an index past the
/// table in any task is still an error, and it names the batch's first one.
#[test]
fn the_forward_finds_a_bad_index_in_any_task() {
    let (rows, dim, bags) = (50u64, 64usize, 3000usize);
    let table = EmbeddingTable::seeded(rows, dim, 3).unwrap();
    let mut batch = TableBatch {
        num_rows: rows,
        offsets: (0..=bags as u32).map(|b| b * 3).collect(),
        indices: (0..bags as u32 * 3).map(|i| i % rows as u32).collect(),
        weights: None,
    };
    assert!(gather_reduce(&table, &batch, Pooling::Sum).is_ok());
    batch.indices[8000] = 50;
    batch.indices[5000] = 77;
    for pooling in [Pooling::Sum, Pooling::Mean] {
        let e = gather_reduce(&table, &batch, pooling)
            .unwrap_err()
            .to_string();
        assert!(e.contains("index 5000 is row 77"), "{e}");
    }
}

#[test]
fn bad_input_is_an_error_naming_the_problem() {
    let table = EmbeddingTable::zeros(5, 2).unwrap();
    let good = TableBatch {
        num_rows: 5,
        offsets: vec![0, 2, 3],
        indices: vec![1, 4, 0],
        weights: None,
    };
    let err = |b: TableBatch| {
        gather_reduce(&table, &b, Pooling::Sum)
            .unwrap_err()
            .to_string()
    };
    let e = err(TableBatch {
        indices: vec![1, 5, 0],
        ..good.clone()
    });
    assert!(e.contains("index 1 is row 5"), "{e}");
    let e = err(TableBatch {
        offsets: vec![0, 3, 2],
        ..good.clone()
    });
    assert!(e.contains("not monotone"), "{e}");
    let e = err(TableBatch {
        offsets: vec![0, 1, 2],
        ..good.clone()
    });
    assert!(e.contains("offsets end at 2"), "{e}");
    let e = gather_reduce(
        &table,
        &TableBatch {
            weights: Some(vec![1.0]),
            ..good.clone()
        },
        Pooling::WeightedSum,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("1 weights for 3 indices"), "{e}");
    let e = gather_reduce(&table, &good, Pooling::WeightedSum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("batch.weights"), "{e}");
    let e = gather_reduce(&EmbeddingTable::zeros(6, 2).unwrap(), &good, Pooling::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("batch.num_rows"), "{e}");
    let broken_table = EmbeddingTable {
        rows: 5,
        dim: 2,
        data: vec![0.0; 3],
    };
    assert!(
        gather_reduce(&broken_table, &good, Pooling::Sum)
            .unwrap_err()
            .to_string()
            .contains("table.data")
    );

    let e = expand(&[0.0; 3], 2, &good, Pooling::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`grad_out`") && e.contains("found 3"), "{e}");
    let e = expand(&[], 0, &good, Pooling::Sum).unwrap_err().to_string();
    assert!(e.contains("`dim`"), "{e}");
    let e = coalesce(
        &Expanded {
            src: vec![1, 9],
            dim: 1,
            grads: vec![0.0; 2],
        },
        5,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("is 9"), "{e}");
    let e = coalesce(
        &Expanded {
            src: vec![1],
            dim: 2,
            grads: vec![0.0; 3],
        },
        5,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("expanded.grads"), "{e}");

    let (c, _) = tensor_cast(&good, Pooling::Sum).unwrap();
    let e = casted_gather_reduce(&c, &[0.0; 3], 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`grad_out`"), "{e}");
    // `c` with one array broken, and the argument the error names.
    let broken = |f: fn(&mut Casted)| {
        let mut b = c.clone();
        f(&mut b);
        b
    };
    for (bad, arg) in [
        (
            broken(|b| b.casted_src = vec![0, 7, 1]),
            "casted.casted_src",
        ),
        (
            broken(|b| b.casted_dst = vec![0, 2, 2]),
            "casted.casted_dst",
        ),
        (broken(|b| b.scale = Some(vec![1.0])), "casted.scale"),
    ] {
        let e = casted_gather_reduce(&bad, &[0.0; 4], 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains(arg), "{e}");
    }

    let opt = Optimizer::Sgd { lr: 0.1 };
    let mut t = table.clone();
    let mut s = OptimizerState::new(&opt, 5, 2).unwrap();
    // Zero gradients of width 2 for `rows`.
    let zeros = |rows: Vec<u32>| Coalesced {
        grads: vec![0.0; 2 * rows.len()],
        rows,
        dim: 2,
    };
    let bad = zeros(vec![3, 1]);
    let e = scatter_update(&mut t, &mut s, &bad, &opt)
        .unwrap_err()
        .to_string();
    assert!(e.contains("strictly ascending"), "{e}");
    let bad = zeros(vec![5]);
    assert!(
        scatter_update(&mut t, &mut s, &bad, &opt)
            .unwrap_err()
            .to_string()
            .contains("grads.rows")
    );
    let mut wrong_state =
        OptimizerState::new(&Optimizer::RowWiseAdagrad { lr: 0.1, eps: 0.0 }, 5, 2).unwrap();
    let ok = zeros(vec![1]);
    let e = scatter_update(&mut t, &mut wrong_state, &ok, &opt)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`state`"), "{e}");
    assert!(
        OptimizerState::new(
            &Optimizer::RmsProp {
                lr: 0.1,
                alpha: 2.0,
                eps: 0.0
            },
            5,
            2
        )
        .is_err()
    );
    assert_eq!(t, table, "a refused update must not touch the table");
}

#[test]
fn results_are_identical_for_one_and_two_threads() {
    // Big enough for the parallel radix path (> 2^16 lookups).
    let (rows, dim) = (5000u64, 16);
    let batch = synthetic_batch(rows, 2048, 40, 11, |u| u * u);
    let batch = TableBatch {
        weights: Some(uniform_values(batch.num_lookups(), 12)),
        ..batch
    };
    let table = EmbeddingTable::seeded(rows, dim, 13).unwrap();
    let grad = uniform_values(batch.batch_size() * dim, 14);
    let run = || {
        let mut out = Vec::new();
        for pooling in Pooling::ALL {
            let (gr, _) = gather_reduce(&table, &batch, pooling).unwrap();
            let (ex, _) = expand(&grad, dim, &batch, pooling).unwrap();
            let (co, _) = coalesce(&ex, rows).unwrap();
            let (ca, _) = tensor_cast(&batch, pooling).unwrap();
            let (cg, _) = casted_gather_reduce(&ca, &grad, dim).unwrap();
            assert_eq!(bits(&cg.grads), bits(&co.grads));
            let mut t = table.clone();
            let opt = Optimizer::Adagrad {
                lr: 0.1,
                eps: 1e-8,
                initial_accumulator: 0.0,
            };
            let mut s = OptimizerState::new(&opt, rows, dim).unwrap();
            scatter_update(&mut t, &mut s, &co, &opt).unwrap();
            out.push((
                bits(&gr),
                bits(&ex.grads),
                co.rows,
                bits(&co.grads),
                ca.casted_src,
                ca.casted_dst,
                bits(&t.data),
                bits(&s.values),
            ));
        }
        out
    };
    assert!(on_threads(1, run) == on_threads(2, run));
}

#[test]
fn into_variants_reuse_dirty_buffers() {
    let small = TableBatch::new(5, vec![0, 3, 5], vec![1, 2, 4, 0, 2], None).unwrap();
    let big = synthetic_batch(50, 30, 7, 21, |u| u);
    let dim = 3;
    let (gs, gb) = (uniform_values(2 * dim, 1), uniform_values(30 * dim, 2));
    let mut ex = expand(&gb, dim, &big, Pooling::Sum).unwrap().0;
    let mut co = coalesce(&ex, 50).unwrap().0;
    let mut cg = co.clone();
    // The small batch into the big one's buffers, then the big batch again:
    // the buffers grow again within their capacity, over the small batch's
    // values.
    for (g, batch, rows) in [(&gs, &small, 5), (&gb, &big, 50)] {
        expand_into(g, dim, batch, Pooling::Mean, &mut ex).unwrap();
        assert_eq!(ex, expand(g, dim, batch, Pooling::Mean).unwrap().0);
        coalesce_into(&ex, rows, &mut co).unwrap();
        assert_eq!(co, coalesce(&ex, rows).unwrap().0);
        let (ca, _) = tensor_cast(batch, Pooling::Mean).unwrap();
        casted_gather_reduce_into(&ca, g, dim, &mut cg).unwrap();
        assert_eq!(cg, co);
    }
}

#[test]
fn resize_for_overwrite_keeps_capacity_and_length() {
    let mut v = vec![1.0f32; 10];
    crate::table::resize_for_overwrite(&mut v, 4);
    assert_eq!(v.len(), 4);
    let cap = v.capacity();
    crate::table::resize_for_overwrite(&mut v, 9);
    assert_eq!((v.len(), v.capacity()), (9, cap));
    crate::table::resize_for_overwrite(&mut v, 1000);
    assert_eq!(v.len(), 1000);
    assert!(v[10..].iter().all(|&x| x == 0.0));
}

proptest! {
    /// The forward's specialised row widths (16, 32, 64, 128: register
    /// accumulators) and the general path (any other width) compute the
    /// same f32 sums, in lookup order, as a plain scalar loop: bit for bit,
    /// for sum, mean and weighted sum, empty bags included, with real-valued
    /// (not integer) rows and weights, where any change of order would show.
    #[test]
    fn every_forward_width_sums_in_lookup_order(
        batch in batch_strategy(),
        dim in prop::sample::select(vec![1usize, 8, 16, 24, 32, 64, 100, 128]),
        seed in any::<u64>(),
    ) {
        let mut table = EmbeddingTable::zeros(batch.num_rows, dim).unwrap();
        fill_uniform(&mut table.data, -1.0, 1.0, seed);
        let mut batch = batch;
        if let Some(w) = batch.weights.as_mut() {
            fill_uniform(w, -2.0, 2.0, seed ^ 1);
        }
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::WeightedSum] {
            let (got, _) = gather_reduce(&table, &batch, pooling).unwrap();
            for b in 0..batch.batch_size() {
                let (s, e) = (batch.offsets[b] as usize, batch.offsets[b + 1] as usize);
                for k in 0..dim {
                    let mut acc = 0.0f32;
                    for i in s..e {
                        let x = table.row(batch.indices[i] as u64).unwrap()[k];
                        acc += match pooling {
                            Pooling::WeightedSum => batch.weights.as_ref().unwrap()[i] * x,
                            _ => x,
                        };
                    }
                    if pooling == Pooling::Mean && e > s {
                        acc /= (e - s) as f32;
                    }
                    prop_assert_eq!(got[b * dim + k].to_bits(), acc.to_bits(), "{:?} dim {} bag {} k {}", pooling, dim, b, k);
                }
            }
        }
    }
}

/// A reused output buffer (bigger, then smaller, then bigger again) holds
/// exactly the fresh result each time: nothing of an earlier call leaks.
#[test]
fn gather_reduce_into_reuses_a_buffer_without_leftovers() {
    let table = EmbeddingTable::seeded(50, 16, 3).unwrap();
    let big = TableBatch::new(50, vec![0, 2, 3, 5], vec![1, 2, 3, 4, 49], None).unwrap();
    let small = TableBatch::new(50, vec![0, 1, 1], vec![7], None).unwrap();
    let mut buf = vec![f32::NAN; 3];
    for b in [&big, &small, &big] {
        for pooling in [Pooling::Sum, Pooling::Mean] {
            gather_reduce_into(&table, b, pooling, &mut buf).unwrap();
            assert_eq!(buf, gather_reduce(&table, b, pooling).unwrap().0);
        }
    }
    // The empty bag of `small` is zeros, not what `big` left there.
    gather_reduce_into(&table, &small, Pooling::Sum, &mut buf).unwrap();
    assert_eq!(buf.len(), 2 * 16);
    assert!(buf[16..].iter().all(|&x| x == 0.0));
}
