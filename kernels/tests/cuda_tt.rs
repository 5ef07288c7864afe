//! The Eff-TT kernels on a GPU against the CPU's TT primitives: the forward
//! bit for bit (with and without reuse, every pooling, dims 16 to 128), and
//! the backward with the fused update within rounding of the CPU's, for
//! SGD, Adagrad and RMSprop. Skips (passing) where no GPU can be opened; on a
//! GPU machine (`NMPSIM_REQUIRE_GPU`) it must pass.
#![cfg(feature = "cuda")]

use nmpsim_kernels::tt::{TtState, TtTable, tt_backward_update, tt_gather_reduce};
use nmpsim_kernels::{Optimizer, Pooling};
use nmpsim_traces::TableBatch;

mod support {
    pub mod cuda;
}
use support::cuda::backend;

/// `bags` bags of 1 to `max` lookups among the first `span` rows (rows
/// then share prefixes), with weights, from an LCG.
fn batch(rows: u64, bags: usize, max: u32, span: u64, seed: u64) -> TableBatch {
    let mut k = seed;
    let mut next = || {
        k = k
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        k >> 33
    };
    let (mut offsets, mut indices, mut weights) = (vec![0u32], Vec::new(), Vec::new());
    for b in 0..bags {
        // One empty bag.
        let len = if b == 3 { 0 } else { 1 + next() as u32 % max };
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

/// Largest difference relative to the largest magnitude of `want`.
fn rel(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs() as f64))
        .max(1e-30);
    got.iter()
        .zip(want)
        .map(|(a, b)| (*a as f64 - *b as f64).abs() / scale)
        .fold(0.0, f64::max)
}

#[test]
fn the_tt_forward_equals_the_cpu_bit_for_bit() {
    let Some(b) = backend() else { return };
    for (rows, dim, rank, span) in [
        (1000u64, 16usize, 3usize, 1000u64),
        (5000, 32, 8, 300),
        (200_000, 64, 16, 2000),
        (1_000_000, 128, 32, 1_000_000),
    ] {
        let t = TtTable::seeded(rows, dim, rank, 11).unwrap();
        let state = TtState::new(&Optimizer::Sgd { lr: 0.1 }, &t).unwrap();
        let d = b.upload_tt(&t, &state).unwrap();
        let tb = batch(rows, 300, 12, span, 5);
        for pooling in Pooling::ALL {
            for reuse in [true, false] {
                let (want, _) = tt_gather_reduce(&t, &tb, pooling, reuse).unwrap();
                let (got, ms) = b.tt_gather_reduce_timed(&d, &tb, pooling, reuse).unwrap();
                assert!(ms > 0.0, "{ms}");
                assert!(
                    got.iter()
                        .map(|x| x.to_bits())
                        .eq(want.iter().map(|x| x.to_bits())),
                    "dim {dim} R {rank} {pooling} reuse {reuse}: off by {:.3e}",
                    rel(&got, &want)
                );
            }
        }
    }
}

#[test]
fn the_tt_backward_and_its_update_match_the_cpu() {
    let Some(b) = backend() else { return };
    let optimizers = [
        Optimizer::Sgd { lr: 0.1 },
        Optimizer::Adagrad {
            lr: 0.05,
            eps: 1e-8,
            initial_accumulator: 0.1,
        },
        Optimizer::RmsProp {
            lr: 0.01,
            alpha: 0.9,
            eps: 1e-8,
        },
    ];
    for (rows, dim, rank, span) in [(5000u64, 16usize, 8usize, 400u64), (200_000, 64, 16, 5000)] {
        for opt in &optimizers {
            for pooling in Pooling::ALL {
                let mut t = TtTable::seeded(rows, dim, rank, 3).unwrap();
                let mut state = TtState::new(opt, &t).unwrap();
                let mut d = b.upload_tt(&t, &state).unwrap();
                let tb = batch(rows, 200, 10, span, 9);
                let grad: Vec<f32> = (0..tb.batch_size() * dim)
                    .map(|i| ((i * 7919) % 113) as f32 / 113.0 - 0.5)
                    .collect();
                let ms = b
                    .tt_backward_update_timed(&mut d, &tb, &grad, pooling, opt)
                    .unwrap();
                assert!(ms > 0.0);
                tt_backward_update(&mut t, &mut state, &tb, &grad, pooling, opt).unwrap();
                let (got, got_state) = b.download_tt(&d).unwrap();
                for k in 0..3 {
                    let e = rel(&got.cores[k], &t.cores[k]);
                    assert!(e < 1e-5, "{} {pooling} core {k}: {e:.3e}", opt.name());
                    if !state.values[k].is_empty() {
                        let e = rel(&got_state.values[k], &state.values[k]);
                        assert!(e < 1e-5, "{} {pooling} state {k}: {e:.3e}", opt.name());
                    }
                }
            }
        }
    }
}

#[test]
fn the_tt_backward_refuses_what_the_cpu_refuses() {
    let Some(b) = backend() else { return };
    let t = TtTable::seeded(1000, 16, 3, 1).unwrap();
    let sgd = Optimizer::Sgd { lr: 0.1 };
    let mut d = b.upload_tt(&t, &TtState::new(&sgd, &t).unwrap()).unwrap();
    let tb = batch(1000, 8, 3, 1000, 2);
    let grad = vec![0.5f32; tb.batch_size() * 16];
    // Row-wise Adagrad is not defined on cores; Adagrad needs its state.
    let rw = Optimizer::RowWiseAdagrad { lr: 0.1, eps: 1e-8 };
    let e = b
        .tt_backward_update_timed(&mut d, &tb, &grad, Pooling::Sum, &rw)
        .unwrap_err()
        .to_string();
    assert!(e.contains("row-wise"), "{e}");
    let ada = Optimizer::Adagrad {
        lr: 0.1,
        eps: 1e-8,
        initial_accumulator: 0.0,
    };
    let e = b
        .tt_backward_update_timed(&mut d, &tb, &grad, Pooling::Sum, &ada)
        .unwrap_err()
        .to_string();
    assert!(e.contains("state"), "{e}");
    // An index past the table.
    let mut bad = tb.clone();
    bad.indices[0] = 1000;
    assert!(
        b.tt_gather_reduce_timed(&d, &bad, Pooling::Sum, true)
            .is_err()
    );
}
