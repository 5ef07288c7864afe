//! Feature interaction of the bottom-MLP output with the pooled embeddings.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// How dense and sparse features meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interaction {
    /// Pairwise dot products of the strictly lower triangle of `F F^T`, where
    /// `F = [x, e_1, ..., e_T]`, concatenated after `x` (the DLRM reference's
    /// `dot` with `interaction_itself = False`).
    Dot,
    /// `[x, e_1, ..., e_T]` concatenated.
    Cat,
}

impl Interaction {
    /// Output width for `tables` embeddings of width `dim` (x has width dim).
    pub fn output_width(self, tables: usize, dim: usize) -> usize {
        let n = tables + 1;
        match self {
            Interaction::Dot => dim + n * (n - 1) / 2,
            Interaction::Cat => dim * n,
        }
    }

    /// `x`: `B x dim`; `emb[t]`: `B x dim`. Returns `B x output_width`.
    /// Blocks of samples run in parallel; each sample's values are computed
    /// alone and in a fixed order, so the result does not depend on the
    /// thread count.
    pub fn forward(self, x: &[f32], emb: &[Vec<f32>], batch: usize, dim: usize) -> Vec<f32> {
        let w = self.output_width(emb.len(), dim);
        let n = emb.len() + 1;
        let mut out = vec![0.0f32; batch * w];
        if batch == 0 {
            return out;
        }
        match self {
            Interaction::Dot => {
                out.par_chunks_mut(w * LANES)
                    .enumerate()
                    .with_min_len(TASK_BLOCKS)
                    .for_each_init(
                        || vec![[0.0f32; LANES]; n * dim],
                        |f, (blk, o)| {
                            let b0 = blk * LANES;
                            let nb = o.len() / w;
                            load_lanes(f, x, emb, b0, nb, dim);
                            for l in 0..nb {
                                o[l * w..l * w + dim]
                                    .copy_from_slice(&x[(b0 + l) * dim..(b0 + l + 1) * dim]);
                            }
                            let mut k = dim;
                            for i in 1..n {
                                let fi = &f[i * dim..(i + 1) * dim];
                                for j in 0..i {
                                    let fj = &f[j * dim..(j + 1) * dim];
                                    let mut acc = [0.0f32; LANES];
                                    for (a, b) in fi.iter().zip(fj) {
                                        for l in 0..LANES {
                                            acc[l] += a[l] * b[l];
                                        }
                                    }
                                    for l in 0..nb {
                                        o[l * w + k] = acc[l];
                                    }
                                    k += 1;
                                }
                            }
                        },
                    );
            }
            Interaction::Cat => {
                out.par_chunks_mut(w)
                    .enumerate()
                    .with_min_len(TASK_BLOCKS * LANES)
                    .for_each(|(b, o)| gather_features(o, x, emb, b, dim));
            }
        }
        out
    }

    /// Backward: gradient of `x` and of each embedding from `dout`.
    pub fn backward(
        self,
        x: &[f32],
        emb: &[Vec<f32>],
        dout: &[f32],
        batch: usize,
        dim: usize,
    ) -> (Vec<f32>, Vec<Vec<f32>>) {
        let n = emb.len() + 1;
        let w = self.output_width(emb.len(), dim);
        // One B x dim gradient per feature (x first); every task writes the
        // rows of its own samples in each of them.
        let mut grads: Vec<Vec<f32>> = (0..n).map(|_| vec![0.0f32; batch * dim]).collect();
        if batch == 0 {
            let dx = grads.remove(0);
            return (dx, grads);
        }
        let outs: Vec<OutRows> = grads.iter_mut().map(|g| OutRows(g.as_mut_ptr())).collect();
        let outs = &outs;
        let blocks = batch.div_ceil(LANES);
        (0..blocks)
            .into_par_iter()
            .with_min_len(TASK_BLOCKS)
            .for_each_init(
                || {
                    (
                        vec![[0.0f32; LANES]; n * dim],
                        vec![[0.0f32; LANES]; n * dim],
                    )
                },
                |(f, df), blk| {
                    let b0 = blk * LANES;
                    let nb = LANES.min(batch - b0);
                    match self {
                        Interaction::Dot => {
                            load_lanes(f, x, emb, b0, nb, dim);
                            df.iter_mut().for_each(|v| *v = [0.0; LANES]);
                            // x's own slot of the output passes straight through.
                            for l in 0..nb {
                                let g = &dout[(b0 + l) * w..(b0 + l) * w + dim];
                                for (e, &v) in g.iter().enumerate() {
                                    df[e][l] = v;
                                }
                            }
                            let mut k = dim;
                            for i in 1..n {
                                for j in 0..i {
                                    let mut s = [0.0f32; LANES];
                                    for l in 0..nb {
                                        s[l] = dout[(b0 + l) * w + k];
                                    }
                                    k += 1;
                                    let (lo, hi) = df.split_at_mut(i * dim);
                                    let dfi = &mut hi[..dim];
                                    let dfj = &mut lo[j * dim..(j + 1) * dim];
                                    let fi = &f[i * dim..(i + 1) * dim];
                                    let fj = &f[j * dim..(j + 1) * dim];
                                    for e in 0..dim {
                                        for l in 0..LANES {
                                            dfi[e][l] += s[l] * fj[e][l];
                                            dfj[e][l] += s[l] * fi[e][l];
                                        }
                                    }
                                }
                            }
                            for (i, out) in outs.iter().enumerate() {
                                for l in 0..nb {
                                    // SAFETY: row b0 + l (< batch) of feature i's
                                    // B x dim buffer; rows of distinct blocks
                                    // never overlap, and the buffers outlive the loop.
                                    let row = unsafe { out.row(b0 + l, dim) };
                                    let dfi = &df[i * dim..(i + 1) * dim];
                                    for (r, v) in row.iter_mut().zip(dfi) {
                                        *r = v[l];
                                    }
                                }
                            }
                        }
                        Interaction::Cat => {
                            for (i, out) in outs.iter().enumerate() {
                                for l in 0..nb {
                                    let b = b0 + l;
                                    // SAFETY: as above.
                                    let row = unsafe { out.row(b, dim) };
                                    row.copy_from_slice(
                                        &dout[b * w + i * dim..b * w + (i + 1) * dim],
                                    );
                                }
                            }
                        }
                    }
                },
            );
        let dx = grads.remove(0);
        (dx, grads)
    }
}

/// Samples per SIMD block of the dot interaction: the samples of a block are
/// the lanes of every vector operation, so no horizontal sums are needed.
const LANES: usize = 8;
/// Blocks per rayon task.
const TASK_BLOCKS: usize = 8;

/// Base of a `B x dim` row-major output written by several tasks at once.
struct OutRows(*mut f32);
// SAFETY: tasks write disjoint rows only (see `row`).
unsafe impl Send for OutRows {}
unsafe impl Sync for OutRows {}

impl OutRows {
    /// Row `b` as a mutable slice.
    ///
    /// # Safety
    /// `b` must be a row of the buffer, and no other live slice may cover it.
    #[allow(clippy::mut_from_ref)]
    unsafe fn row(&self, b: usize, dim: usize) -> &mut [f32] {
        unsafe { std::slice::from_raw_parts_mut(self.0.add(b * dim), dim) }
    }
}

/// Features `[x, e_1, ..., e_T]` of samples `b0..b0 + nb` into lanes:
/// `f[i * dim + e][l]` is element `e` of feature `i` of sample `b0 + l`;
/// lanes past `nb` are zero.
fn load_lanes(
    f: &mut [[f32; LANES]],
    x: &[f32],
    emb: &[Vec<f32>],
    b0: usize,
    nb: usize,
    dim: usize,
) {
    if nb < LANES {
        f.iter_mut().for_each(|v| *v = [0.0; LANES]);
    }
    for (i, src) in std::iter::once(x)
        .chain(emb.iter().map(|e| e.as_slice()))
        .enumerate()
    {
        for l in 0..nb {
            let row = &src[(b0 + l) * dim..(b0 + l + 1) * dim];
            for (e, &v) in row.iter().enumerate() {
                f[i * dim + e][l] = v;
            }
        }
    }
}

/// Sample `b`'s features `[x, e_1, ..., e_T]` into `f` (`n x dim`).
fn gather_features(f: &mut [f32], x: &[f32], emb: &[Vec<f32>], b: usize, dim: usize) {
    f[..dim].copy_from_slice(&x[b * dim..(b + 1) * dim]);
    for (t, e) in emb.iter().enumerate() {
        f[(t + 1) * dim..(t + 2) * dim].copy_from_slice(&e[b * dim..(b + 1) * dim]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmpsim_traces::threads::on_threads;

    fn features(batch: usize, tables: usize, dim: usize) -> (Vec<f32>, Vec<Vec<f32>>) {
        let mut rng = nmpsim_kernels::table::SplitMix64::new(7);
        let mut v = |len: usize| {
            (0..len)
                .map(|_| rng.next_f32() * 2.0 - 1.0)
                .collect::<Vec<_>>()
        };
        let x = v(batch * dim);
        let emb = (0..tables).map(|_| v(batch * dim)).collect();
        (x, emb)
    }

    fn feat<'a>(x: &'a [f32], emb: &'a [Vec<f32>], i: usize, b: usize, dim: usize) -> &'a [f32] {
        let src = if i == 0 { x } else { &emb[i - 1] };
        &src[b * dim..(b + 1) * dim]
    }

    /// The definition, one sample and one pair at a time, in f64.
    fn naive_dot(
        x: &[f32],
        emb: &[Vec<f32>],
        dout: &[f32],
        batch: usize,
        dim: usize,
    ) -> (Vec<f64>, Vec<Vec<f64>>) {
        let n = emb.len() + 1;
        let w = Interaction::Dot.output_width(emb.len(), dim);
        let mut z = vec![0.0f64; batch * w];
        let mut g = vec![vec![0.0f64; batch * dim]; n];
        for b in 0..batch {
            for e in 0..dim {
                z[b * w + e] = x[b * dim + e] as f64;
                g[0][b * dim + e] += dout[b * w + e] as f64;
            }
            let mut k = dim;
            for i in 1..n {
                for j in 0..i {
                    let (fi, fj) = (feat(x, emb, i, b, dim), feat(x, emb, j, b, dim));
                    z[b * w + k] = fi.iter().zip(fj).map(|(a, c)| *a as f64 * *c as f64).sum();
                    let s = dout[b * w + k] as f64;
                    for e in 0..dim {
                        g[i][b * dim + e] += s * fj[e] as f64;
                        g[j][b * dim + e] += s * fi[e] as f64;
                    }
                    k += 1;
                }
            }
        }
        (z, g)
    }

    #[test]
    fn dot_matches_the_definition_on_ragged_blocks() {
        // 13 samples: one full block of lanes and one partial.
        for (batch, tables, dim) in [(13, 4, 7), (8, 1, 16), (1, 3, 2), (70, 26, 16)] {
            let (x, emb) = features(batch, tables, dim);
            let z = Interaction::Dot.forward(&x, &emb, batch, dim);
            let dout: Vec<f32> = (0..z.len())
                .map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0)
                .collect();
            let (want_z, want_g) = naive_dot(&x, &emb, &dout, batch, dim);
            for (k, (a, b)) in z.iter().zip(&want_z).enumerate() {
                assert!(
                    (*a as f64 - b).abs() < 1e-5 * (1.0 + b.abs()),
                    "{batch}/{tables}/{dim}: z[{k}] {a} vs {b}"
                );
            }
            let (dx, demb) = Interaction::Dot.backward(&x, &emb, &dout, batch, dim);
            for (i, got) in std::iter::once(&dx).chain(&demb).enumerate() {
                for (k, (a, b)) in got.iter().zip(&want_g[i]).enumerate() {
                    assert!(
                        (*a as f64 - b).abs() < 1e-4 * (1.0 + b.abs()),
                        "{batch}/{tables}/{dim}: grad {i}[{k}] {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn cat_is_a_concatenation_and_its_gradient_a_split() {
        let (batch, tables, dim) = (11, 3, 5);
        let (x, emb) = features(batch, tables, dim);
        let z = Interaction::Cat.forward(&x, &emb, batch, dim);
        let w = Interaction::Cat.output_width(tables, dim);
        for b in 0..batch {
            for i in 0..=tables {
                assert_eq!(
                    &z[b * w + i * dim..b * w + (i + 1) * dim],
                    feat(&x, &emb, i, b, dim)
                );
            }
        }
        let (dx, demb) = Interaction::Cat.backward(&x, &emb, &z, batch, dim);
        assert_eq!(dx, x);
        assert_eq!(demb, emb);
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let (batch, tables, dim) = (300, 8, 16);
        let (x, emb) = features(batch, tables, dim);
        let run = |threads| {
            on_threads(threads, || {
                let z = Interaction::Dot.forward(&x, &emb, batch, dim);
                let g = Interaction::Dot.backward(&x, &emb, &z, batch, dim);
                (z, g)
            })
        };
        assert_eq!(run(1), run(3));
    }
}
