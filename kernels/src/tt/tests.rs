//! The TT primitives against their definitions.

use nmpsim_traces::TableBatch;

use super::*;
use crate::{EmbeddingTable, Optimizer, Pooling, gather_reduce};

/// Bags over `rows` rows from a little LCG: `bags` bags of 1 to `max` lookups
/// among the first `span` rows (a small span: rows share prefixes).
fn batch(rows: u64, bags: usize, max: u32, span: u64, seed: u64) -> TableBatch {
    let mut k = seed;
    let mut next = || {
        k = k
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        k >> 33
    };
    let mut offsets = vec![0u32];
    let mut indices = Vec::new();
    let mut weights = Vec::new();
    for _ in 0..bags {
        let len = 1 + next() as u32 % max;
        for _ in 0..len {
            indices.push((next() % span.min(rows)) as u32);
            weights.push(0.5 + (next() % 7) as f32 / 7.0);
        }
        offsets.push(indices.len() as u32);
    }
    TableBatch {
        num_rows: rows,
        offsets,
        indices,
        weights: Some(weights),
    }
}

fn close(a: &[f32], b: &[f32], tol: f32) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} values against {}", a.len(), b.len()));
    }
    let scale = b.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-30);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if (x - y).abs() > tol * scale {
            return Err(format!("value {i}: {x} against {y} (scale {scale})"));
        }
    }
    Ok(())
}

use check::row_f64;

#[test]
fn a_row_is_the_chain_of_its_core_slices_and_the_dense_table_holds_every_row() {
    let t = TtTable::seeded(1000, 16, 3, 5).unwrap();
    assert_eq!(t.shape.row_factors, [10, 10, 10]);
    for row in [0u32, 1, 9, 10, 123, 999] {
        let got = t.row(row).unwrap();
        let want: Vec<f32> = row_f64(&t, row).iter().map(|&x| x as f32).collect();
        close(&got, &want, 1e-6).unwrap();
    }
    let dense = t.to_dense().unwrap();
    assert_eq!(dense.rows, 1000);
    for row in [0u64, 456, 999] {
        assert_eq!(dense.row(row).unwrap(), &t.row(row as u32).unwrap()[..]);
    }
    // Padding is never read: the last row exists, the next is refused.
    let e = t.row(1000).unwrap_err().to_string();
    assert!(e.contains("1000") && e.contains("bound 1000"), "{e}");
    // Initialised in [0, s): every value non-negative, not all equal.
    assert!(t.cores.iter().flatten().all(|&x| x >= 0.0));
    assert!(t.cores[0].iter().any(|&x| x != t.cores[0][0]));
}

#[test]
fn the_forward_with_reuse_equals_the_plain_one_bit_for_bit_and_the_dense_gather_reduce() {
    let t = TtTable::seeded(5000, 16, 4, 9).unwrap();
    let dense = t.to_dense().unwrap();
    for pooling in Pooling::ALL {
        for span in [40u64, 5000] {
            let b = batch(5000, 70, 5, span, span);
            let (with, c_with) = tt_gather_reduce(&t, &b, pooling, true).unwrap();
            let (without, c_without) = tt_gather_reduce(&t, &b, pooling, false).unwrap();
            assert_eq!(with, without, "{pooling:?}");
            let (want, _) = gather_reduce(&dense, &b, pooling).unwrap();
            close(&with, &want, 1e-5).unwrap();
            // Reuse computes each distinct prefix once.
            let (keys, _) = forward::prefixes(&t.shape, &b.indices);
            assert_eq!(c_with.prefixes, keys.len() as u64);
            assert_eq!(c_without.prefixes, b.indices.len() as u64);
            assert!(c_with.flops < c_without.flops || keys.len() == b.indices.len());
        }
    }
}

#[test]
fn the_aggregated_backward_sums_the_per_lookup_gradients_and_matches_finite_differences() {
    let t = TtTable::seeded(800, 16, 3, 2).unwrap();
    let b = batch(800, 40, 4, 60, 7);
    let dim = 16;
    let w: Vec<f32> = (0..b.batch_size() * dim)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0)
        .collect();
    for pooling in Pooling::ALL {
        let (agg, cost) = tt_core_grads(&t, &b, &w, pooling).unwrap();
        let per = tt_core_grads_per_lookup(&t, &b, &w, pooling).unwrap();
        assert_eq!(agg.slices, per.slices, "{pooling:?}");
        for k in 0..CORES {
            close(&agg.grads[k], &per.grads[k], 1e-5).unwrap();
        }
        assert!(cost.prefixes <= agg.slices[0].len() as u64 * agg.slices[1].len() as u64);
        // The loss sum_b <w_b, pooled_b> is linear in each core value: a
        // finite difference of any step is the gradient, up to rounding.
        let loss = |t: &TtTable| -> f64 {
            let (p, _) = tt_gather_reduce(t, &b, pooling, true).unwrap();
            p.iter().zip(&w).map(|(a, b)| *a as f64 * *b as f64).sum()
        };
        let l0 = loss(&t);
        for k in 0..CORES {
            let i = agg.slices[k][agg.slices[k].len() / 2];
            let n = t.shape.slice_len(k);
            for e in [0, n / 2, n - 1] {
                let mut u = t.clone();
                u.cores[k][i as usize * n + e] += 0.25;
                let fd = (loss(&u) - l0) / 0.25;
                let g = agg.slice(&t, k, i).unwrap()[e] as f64;
                assert!(
                    (fd - g).abs() <= 2e-3 * (1.0 + g.abs()),
                    "{pooling:?} core {k} slice {i} value {e}: fd {fd} against {g}"
                );
            }
        }
    }
}

#[test]
fn the_fused_update_equals_the_per_lookup_gradients_applied_apart() {
    let t0 = TtTable::seeded(900, 16, 3, 4).unwrap();
    let b = batch(900, 30, 3, 100, 3);
    let w: Vec<f32> = (0..b.batch_size() * 16)
        .map(|i| (i % 5) as f32 - 2.0)
        .collect();
    let sgd = Optimizer::Sgd { lr: 0.1 };
    let mut fused = t0.clone();
    let mut st = TtState::new(&sgd, &fused).unwrap();
    tt_backward_update(&mut fused, &mut st, &b, &w, Pooling::Sum, &sgd).unwrap();
    let per = tt_core_grads_per_lookup(&t0, &b, &w, Pooling::Sum).unwrap();
    let mut apart = t0.clone();
    for k in 0..CORES {
        let n = t0.shape.slice_len(k);
        for (j, &i) in per.slices[k].iter().enumerate() {
            for e in 0..n {
                apart.cores[k][i as usize * n + e] -= 0.1 * per.grads[k][j * n + e];
            }
        }
        close(&fused.cores[k], &apart.cores[k], 1e-5).unwrap();
    }
    assert_ne!(fused, t0);
    // Adagrad keeps a value per core value; row-wise Adagrad is refused.
    let ada = Optimizer::Adagrad {
        lr: 0.1,
        eps: 1e-8,
        initial_accumulator: 0.0,
    };
    let mut a = t0.clone();
    let mut s = TtState::new(&ada, &a).unwrap();
    tt_backward_update(&mut a, &mut s, &b, &w, Pooling::Sum, &ada).unwrap();
    assert!(s.values[2].iter().any(|&x| x > 0.0));
    let e = TtState::new(&Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 }, &t0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("row-wise Adagrad is not defined on TT cores"),
        "{e}"
    );
}

#[test]
fn the_reordering_is_a_bijection_hot_first_and_changes_no_result() {
    let rows = 300u64;
    let batches: Vec<TableBatch> = (0..6).map(|k| batch(rows, 20, 3, 200, k + 11)).collect();
    let refs: Vec<&TableBatch> = batches.iter().collect();
    let r = Reorder::build(rows, &refs, 0.05).unwrap();
    assert!(r.is_bijection());
    assert_eq!(r.hot, 15);
    // The most looked-up row is 0.
    let mut count = vec![0u32; rows as usize];
    batches
        .iter()
        .flat_map(|b| &b.indices)
        .for_each(|&i| count[i as usize] += 1);
    let top = (0..rows as usize)
        .max_by_key(|&i| (count[i], std::cmp::Reverse(i)))
        .unwrap();
    assert_eq!(r.new_of_old[top], 0);
    let inv = r.old_of_new();
    assert!((0..rows as usize).all(|o| inv[r.new_of_old[o] as usize] as usize == o));
    // A table renamed the same way gives the same pooled rows.
    let table = EmbeddingTable::seeded(rows, 8, 3).unwrap();
    let mut renamed = EmbeddingTable::zeros(rows, 8).unwrap();
    for old in 0..rows {
        let new = r.new_of_old[old as usize] as u64;
        renamed
            .row_mut(new)
            .unwrap()
            .copy_from_slice(table.row(old).unwrap());
    }
    for b in &batches {
        let (a, _) = gather_reduce(&table, b, Pooling::WeightedSum).unwrap();
        let (c, _) = gather_reduce(&renamed, &r.apply(b).unwrap(), Pooling::WeightedSum).unwrap();
        assert_eq!(a, c);
    }
    assert!(Reorder::identity(rows).is_bijection());
    let e = Reorder::build(rows, &refs, 1.5).unwrap_err().to_string();
    assert!(e.contains("hot_ratio"), "{e}");
}

#[test]
fn bad_shapes_and_indices_are_clear_errors() {
    let e = TtTable::seeded(100, 16, 0, 1).unwrap_err().to_string();
    assert!(e.contains("rank must be at least 1"), "{e}");
    let e = TtTable::seeded(100, 6, 2, 1).unwrap_err().to_string();
    assert!(e.contains("6 cannot split into 3 factors"), "{e}");
    let t = TtTable::seeded(100, 16, 2, 1).unwrap();
    let mut b = batch(100, 4, 2, 100, 1);
    b.indices[1] = 100;
    let e = tt_gather_reduce(&t, &b, Pooling::Sum, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("100"), "{e}");
    let b = batch(100, 4, 2, 100, 1);
    let e = tt_core_grads(&t, &b, &[0.0; 3], Pooling::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("grad_out"), "{e}");
}

#[test]
fn kernels_check_covers_the_tt_primitives_and_skips_a_dim_without_a_split() {
    let config = crate::check::CheckConfig {
        tables: 2,
        batch_size: 64,
        bag_size: 4,
        rows: 5000,
        dim: 16,
        ..Default::default()
    };
    let inputs = crate::check::check_inputs(&config).unwrap();
    let r = check::check_tt(&inputs, 16, Pooling::Sum, 1).unwrap();
    assert_eq!(r.len(), 2 * 3);
    for (name, e) in &r {
        let e = e.as_ref().unwrap();
        assert!(*e < 1e-5, "{name}: {e}");
    }
    let report = crate::check::run_check(&config, &[&crate::backend::CpuBackend]).unwrap();
    let tt = report
        .backends
        .iter()
        .find(|b| b.backend == "cpu-tt")
        .unwrap();
    assert!(tt.ok && tt.primitives.len() == 3, "{tt:?}");
    let config = crate::check::CheckConfig { dim: 6, ..config };
    let report = crate::check::run_check(&config, &[&crate::backend::CpuBackend]).unwrap();
    assert!(report.backends.iter().all(|b| b.backend != "cpu-tt"));
    assert!(report.tt_skipped.unwrap().contains("6 cannot split"));
}
