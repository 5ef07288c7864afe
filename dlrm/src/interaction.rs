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
    /// Samples run in parallel; each is computed alone, so the result does
    /// not depend on the thread count.
    pub fn forward(self, x: &[f32], emb: &[Vec<f32>], batch: usize, dim: usize) -> Vec<f32> {
        let w = self.output_width(emb.len(), dim);
        let n = emb.len() + 1;
        let mut out = vec![0.0f32; batch * w];
        if batch == 0 {
            return out;
        }
        out.par_chunks_mut(w).enumerate().for_each_init(
            || vec![0.0f32; n * dim],
            |f, (b, o)| {
                gather_features(f, x, emb, b, dim);
                match self {
                    Interaction::Dot => {
                        o[..dim].copy_from_slice(&f[..dim]);
                        let mut k = dim;
                        for i in 0..n {
                            let fi = &f[i * dim..(i + 1) * dim];
                            for j in 0..i {
                                o[k] = dot(fi, &f[j * dim..(j + 1) * dim]);
                                k += 1;
                            }
                        }
                    }
                    Interaction::Cat => o.copy_from_slice(f),
                }
            },
        );
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
        // Per-sample gradients of all features, sample-major (B x n x dim),
        // then split into one B x dim array per feature.
        let mut dfs = vec![0.0f32; batch * n * dim];
        if batch > 0 {
            dfs.par_chunks_mut(n * dim).enumerate().for_each_init(
                || vec![0.0f32; n * dim],
                |f, (b, df)| {
                    let g = &dout[b * w..(b + 1) * w];
                    match self {
                        Interaction::Dot => {
                            gather_features(f, x, emb, b, dim);
                            df[..dim].copy_from_slice(&g[..dim]);
                            let mut k = dim;
                            for i in 0..n {
                                for j in 0..i {
                                    let s = g[k];
                                    k += 1;
                                    if s == 0.0 {
                                        continue;
                                    }
                                    let (lo, hi) = df.split_at_mut(i * dim);
                                    let dfi = &mut hi[..dim];
                                    let dfj = &mut lo[j * dim..(j + 1) * dim];
                                    let fi = &f[i * dim..(i + 1) * dim];
                                    let fj = &f[j * dim..(j + 1) * dim];
                                    for e in 0..dim {
                                        dfi[e] += s * fj[e];
                                        dfj[e] += s * fi[e];
                                    }
                                }
                            }
                        }
                        Interaction::Cat => df.copy_from_slice(g),
                    }
                },
            );
        }
        let mut per_feature: Vec<Vec<f32>> = (0..n)
            .into_par_iter()
            .map(|i| {
                let mut v = Vec::with_capacity(batch * dim);
                for b in 0..batch {
                    let o = (b * n + i) * dim;
                    v.extend_from_slice(&dfs[o..o + dim]);
                }
                v
            })
            .collect();
        let dx = per_feature.remove(0);
        (dx, per_feature)
    }
}

/// Sample `b`'s features `[x, e_1, ..., e_T]` into `f` (`n x dim`).
fn gather_features(f: &mut [f32], x: &[f32], emb: &[Vec<f32>], b: usize, dim: usize) {
    f[..dim].copy_from_slice(&x[b * dim..(b + 1) * dim]);
    for (t, e) in emb.iter().enumerate() {
        f[(t + 1) * dim..(t + 2) * dim].copy_from_slice(&e[b * dim..(b + 1) * dim]);
    }
}

/// Dot product in a fixed order (eight partial sums, then the tail), the
/// same for every thread count.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = a.len() / 8;
    for c in 0..chunks {
        for l in 0..8 {
            acc[l] += a[c * 8 + l] * b[c * 8 + l];
        }
    }
    let mut s = acc.iter().sum::<f32>();
    for i in chunks * 8..a.len() {
        s += a[i] * b[i];
    }
    s
}
