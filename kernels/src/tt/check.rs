//! `kernels check` for the TT primitives: each against an f64 reference of
//! its definition, on TT tables of the check's rows and dimension.

use std::collections::BTreeMap;

use super::shape::CORES;
use super::table::TtTable;
use crate::backend::Backend;
use crate::check::{CheckInput, row_rel_err, sum_rel_err};
use crate::pooling::lookup_scale;
use crate::{KernelError, Pooling};

/// The TT rank the check's tables have (small: the f64 reference sums
/// `R^2` products per value).
pub const CHECK_RANK: usize = 4;

/// Row `row` in f64 from Eq. 1.
pub(crate) fn row_f64(t: &TtTable, row: u32) -> Vec<f64> {
    let s = &t.shape;
    let [i1, i2, i3] = s.split(row);
    let [n1, n2, n3] = s.dim_factors;
    let (r1, r2) = (s.ranks[1], s.ranks[2]);
    let (a, b, c) = (t.slice(0, i1), t.slice(1, i2), t.slice(2, i3));
    let mut out = vec![0.0f64; s.dim];
    for j1 in 0..n1 {
        for j2 in 0..n2 {
            for j3 in 0..n3 {
                let mut acc = 0.0;
                for x in 0..r1 {
                    for y in 0..r2 {
                        acc += a[j1 * r1 + x] as f64
                            * b[(x * n2 + j2) * r2 + y] as f64
                            * c[y * n3 + j3] as f64;
                    }
                }
                out[(j1 * n2 + j2) * n3 + j3] = acc;
            }
        }
    }
    out
}

/// The pooled rows in f64.
fn forward_f64(t: &TtTable, input: &CheckInput, pooling: Pooling) -> Vec<f32> {
    let b = &input.batch;
    let dim = t.shape.dim;
    let mut out = vec![0.0f32; b.batch_size() * dim];
    for bag in 0..b.batch_size() {
        let (lo, hi) = (b.offsets[bag] as usize, b.offsets[bag + 1] as usize);
        let mut acc = vec![0.0f64; dim];
        for i in lo..hi {
            let f =
                lookup_scale(pooling, (hi - lo) as u32, b.weights.as_ref().map(|w| w[i])) as f64;
            for (a, x) in acc.iter_mut().zip(row_f64(t, b.indices[i])) {
                *a += f * x;
            }
        }
        for (o, a) in out[bag * dim..(bag + 1) * dim].iter_mut().zip(acc) {
            *o = a as f32;
        }
    }
    out
}

/// The core gradients in f64 (Eq. 6, lookup by lookup), per core by slice;
/// with `abs`, of the terms' absolute values (their magnitude).
fn grads_f64(
    t: &TtTable,
    input: &CheckInput,
    pooling: Pooling,
    abs: bool,
) -> [BTreeMap<u32, Vec<f64>>; CORES] {
    let s = &t.shape;
    let b = &input.batch;
    let [n1, n2, n3] = s.dim_factors;
    let (r1, r2) = (s.ranks[1], s.ranks[2]);
    let mut acc: [BTreeMap<u32, Vec<f64>>; CORES] = Default::default();
    for bag in 0..b.batch_size() {
        let (lo, hi) = (b.offsets[bag] as usize, b.offsets[bag + 1] as usize);
        for i in lo..hi {
            let mut f =
                lookup_scale(pooling, (hi - lo) as u32, b.weights.as_ref().map(|w| w[i])) as f64;
            if abs {
                f = f.abs();
            }
            let g = &input.grad_out[bag * s.dim..(bag + 1) * s.dim];
            let [i1, i2, i3] = s.split(b.indices[i]);
            let (a, bb, c) = (t.slice(0, i1), t.slice(1, i2), t.slice(2, i3));
            let mut da = vec![0.0f64; n1 * r1];
            let mut db = vec![0.0f64; r1 * n2 * r2];
            let mut dc = vec![0.0f64; r2 * n3];
            for j1 in 0..n1 {
                for j2 in 0..n2 {
                    for j3 in 0..n3 {
                        let mut gv = f * g[(j1 * n2 + j2) * n3 + j3] as f64;
                        if abs {
                            gv = gv.abs();
                        }
                        for x in 0..r1 {
                            for y in 0..r2 {
                                let (av, bv, cv) = (
                                    a[j1 * r1 + x] as f64,
                                    bb[(x * n2 + j2) * r2 + y] as f64,
                                    c[y * n3 + j3] as f64,
                                );
                                da[j1 * r1 + x] += gv * bv * cv;
                                db[(x * n2 + j2) * r2 + y] += gv * av * cv;
                                dc[y * n3 + j3] += gv * av * bv;
                            }
                        }
                    }
                }
            }
            for (k, (idx, d)) in [(0, (i1, da)), (1, (i2, db)), (2, (i3, dc))] {
                let e = acc[k].entry(idx).or_insert_with(|| vec![0.0; d.len()]);
                e.iter_mut().zip(d).for_each(|(x, y)| *x += y);
            }
        }
    }
    acc
}

/// One primitive's worst relative error on one table, or why it failed.
pub type Verdict = (&'static str, Result<f64, String>);

/// The verdicts of the TT primitives on `inputs` (table `t`'s TT table seeded
/// from the check's seed): `(primitive, worst relative error)` per table, or
/// why the check's dimension has no TT table.
pub fn check_tt(
    inputs: &[CheckInput],
    dim: usize,
    pooling: Pooling,
    seed: u64,
) -> Result<Vec<Verdict>, KernelError> {
    check_tt_on(&crate::backend::CpuBackend, inputs, dim, pooling, seed)
}

/// [`check_tt`] of `backend`'s TT primitives ([`Backend::tt_gather_reduce`],
/// [`Backend::tt_core_grads`]).
pub fn check_tt_on(
    backend: &dyn Backend,
    inputs: &[CheckInput],
    dim: usize,
    pooling: Pooling,
    seed: u64,
) -> Result<Vec<Verdict>, KernelError> {
    super::shape::dim_factors(dim)?;
    let mut out = Vec::new();
    for (t, input) in inputs.iter().enumerate() {
        let table = TtTable::seeded(
            input.batch.num_rows,
            dim,
            CHECK_RANK,
            seed ^ (0x77 + t as u64),
        )?;
        let want = forward_f64(&table, input, pooling);
        for (name, reuse) in [
            ("tt-gather-reduce", true),
            ("tt-gather-reduce (no reuse)", false),
        ] {
            let r = backend
                .tt_gather_reduce(&table, &input.batch, pooling, reuse)
                .map(|got| row_rel_err(&got, &want, dim))
                .map_err(|e| e.to_string());
            out.push((name, r));
        }
        // (f32's rounding of a slice's gradient is bounded by the longest
        // chain of additions into it times the terms' magnitude, as
        // `sum_rel_err` reads it: a row's occurrences summed, then each
        // unique row's products, of at most `R max(n_k)` terms a step,
        // added into the slice one after another.)
        let want = grads_f64(&table, input, pooling, false);
        let magnitude = grads_f64(&table, input, pooling, true);
        let s = &table.shape;
        let mut counts = std::collections::HashMap::new();
        for &r in &input.batch.indices {
            *counts.entry(r).or_insert(0usize) += 1;
        }
        let most = counts.values().copied().max().unwrap_or(0);
        let widest = s.ranks[1] * s.dim_factors.iter().copied().max().unwrap_or(1);
        let terms = most + counts.len() + 4 * widest + 2;
        let r = backend
            .tt_core_grads(&table, &input.batch, &input.grad_out, pooling)
            .map_err(|e| e.to_string())
            .and_then(|got| {
                let mut worst = 0.0f64;
                for (k, (want, mag)) in want.iter().zip(&magnitude).enumerate() {
                    let ids: Vec<u32> = want.keys().copied().collect();
                    if got.slices[k] != ids {
                        return Err(format!("core {k}: the touched slices differ"));
                    }
                    let w: Vec<f32> = want.values().flatten().map(|&x| x as f32).collect();
                    let m: Vec<f32> = mag.values().flatten().map(|&x| x as f32).collect();
                    worst = worst.max(sum_rel_err(&got.grads[k], &w, &m, terms, s.slice_len(k)));
                }
                Ok(worst)
            });
        out.push(("tt-core-gradients", r));
    }
    Ok(out)
}
