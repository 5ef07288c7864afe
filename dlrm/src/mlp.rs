//! Multi-layer perceptrons: fully connected layers with ReLU, forward and
//! backward over a batch, row-major, with single-precision GEMM.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::DlrmError;

/// `C (m x n) = alpha * A (m x k) * B (k x n) + beta * C`, with explicit
/// row / column strides for A and B (C is row-major, dense), on rayon's
/// current thread pool (see [`sgemm_threads`]).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    rsa: isize,
    csa: isize,
    b: &[f32],
    rsb: isize,
    csb: isize,
    beta: f32,
    c: &mut [f32],
) {
    sgemm_threads(
        rayon::current_num_threads(),
        m,
        k,
        n,
        alpha,
        a,
        rsa,
        csa,
        b,
        rsb,
        csb,
        beta,
        c,
    );
}

/// Panics unless a `rows x cols` view with strides `rs`, `cs` (both
/// non-negative) lies inside a slice of `len` values.
fn check_view(len: usize, rows: usize, cols: usize, rs: isize, cs: isize, what: &str) {
    assert!(rs >= 0 && cs >= 0, "sgemm: negative stride of {what}");
    if rows > 0 && cols > 0 {
        let last = (rows - 1).checked_mul(rs as usize).and_then(|r| {
            (cols - 1)
                .checked_mul(cs as usize)
                .and_then(|c| r.checked_add(c))
        });
        assert!(
            last.is_some_and(|l| l < len),
            "sgemm: {what} ({rows} x {cols}, strides {rs}, {cs}) does not fit in {len} values"
        );
    }
}

/// [`sgemm`] on at most `threads` threads of rayon's current pool (1: the
/// calling thread only). Each output value is computed by one thread in a
/// fixed order, so the result does not depend on `threads`.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_threads(
    threads: usize,
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    rsa: isize,
    csa: isize,
    b: &[f32],
    rsb: isize,
    csb: isize,
    beta: f32,
    c: &mut [f32],
) {
    assert!(c.len() >= m * n, "sgemm: output too small");
    check_view(a.len(), m, k, rsa, csa, "A");
    check_view(b.len(), k, n, rsb, csb, "B");
    if m == 0 || n == 0 {
        return;
    }
    let c = &mut c[..m * n];
    if k == 0 || alpha == 0.0 {
        if beta == 0.0 {
            c.fill(0.0);
        } else {
            c.iter_mut().for_each(|v| *v *= beta);
        }
        return;
    }
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: `check_view` proved that every element of the A and B views
    // lies inside `a` and `b`, and `c` holds the m x n row-major output; the
    // output does not alias the inputs (it is a `&mut`).
    // The gemm crate computes `dst = alpha_g * dst + beta_g * lhs * rhs`,
    // reading `dst` only when asked to.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            beta != 0.0,
            a.as_ptr(),
            csa,
            rsa,
            b.as_ptr(),
            csb,
            rsb,
            beta,
            alpha,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Parses the DLRM reference's dash syntax, e.g. `13-512-256-64-16`.
pub fn parse_arch(s: &str, what: &str) -> Result<Vec<usize>, DlrmError> {
    let bad = || {
        DlrmError::Config(format!(
            "{what}: expected layer widths joined by dashes such as 13-512-256-64-16, found `{s}`"
        ))
    };
    let v: Vec<usize> = s
        .trim()
        .split('-')
        .map(|x| x.trim().parse::<usize>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if v.len() < 2 || v.contains(&0) {
        return Err(bad());
    }
    Ok(v)
}

/// One fully connected layer: `y = x W^T + b`, `W` is `out x in`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    pub inputs: usize,
    pub outputs: usize,
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

/// Gradients of a [`Linear`].
#[derive(Clone, Debug, PartialEq)]
pub struct LinearGrad {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

/// A stack of layers; ReLU after each layer except, optionally, the last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mlp {
    pub layers: Vec<Linear>,
    /// ReLU after the last layer too (bottom MLP: yes; top MLP: no, its
    /// output is the logit).
    pub relu_last: bool,
}

/// What the forward pass keeps for the backward pass, and the buffers both
/// reuse: keep one per MLP across steps and nothing is reallocated once the
/// batch size settles.
#[derive(Clone, Debug, Default)]
pub struct MlpCache {
    /// Input of each layer, then the final output: `layers + 1` arrays.
    pub acts: Vec<Vec<f32>>,
    pub batch: usize,
    /// Backward scratch: the gradient flowing down, in two buffers used in
    /// turn.
    scratch: [Vec<f32>; 2],
    /// Which of `scratch` holds the input gradient after
    /// [`Mlp::backward_into`] with `input_grad`.
    input_grad: Option<usize>,
}

impl MlpCache {
    /// Output of the last forward pass (`batch x output_width`).
    pub fn output(&self) -> &[f32] {
        self.acts.last().map_or(&[], Vec::as_slice)
    }

    /// Gradient of the input from the last [`Mlp::backward_into`], if it
    /// was asked for (`batch x input_width`).
    pub fn input_grad(&self) -> Option<&[f32]> {
        self.input_grad.map(|i| self.scratch[i].as_slice())
    }
}

/// Rows per block of the element-wise passes; the column sums for the bias
/// gradient are taken per block and the blocks added in order, so the
/// result does not depend on the thread count.
const ROW_BLOCK: usize = 128;

/// `y[r] = act(y[r] + b)` for every row `r` of `y`.
fn bias_act(y: &mut [f32], b: &[f32], relu: bool) {
    let n = b.len();
    y.par_chunks_mut(ROW_BLOCK * n).for_each(|blk| {
        for row in blk.chunks_exact_mut(n) {
            if relu {
                for (v, &bb) in row.iter_mut().zip(b) {
                    *v = (*v + bb).max(0.0);
                }
            } else {
                for (v, &bb) in row.iter_mut().zip(b) {
                    *v += bb;
                }
            }
        }
    });
}

/// Through the ReLU (zero `g` where the layer's output `y` is not
/// positive) if `relu`, and `db = column sums of g`.
fn relu_grad_and_colsum(g: &mut [f32], y: &[f32], relu: bool, db: &mut [f32]) {
    let n = db.len();
    let partials: Vec<Vec<f32>> = g
        .par_chunks_mut(ROW_BLOCK * n)
        .zip(y.par_chunks(ROW_BLOCK * n))
        .map(|(gb, yb)| {
            let mut p = vec![0.0f32; n];
            for (gr, yr) in gb.chunks_exact_mut(n).zip(yb.chunks_exact(n)) {
                if relu {
                    for (gv, &yv) in gr.iter_mut().zip(yr) {
                        *gv = if yv <= 0.0 { 0.0 } else { *gv };
                    }
                }
                for (pv, &gv) in p.iter_mut().zip(gr.iter()) {
                    *pv += gv;
                }
            }
            p
        })
        .collect();
    db.fill(0.0);
    for p in partials {
        for (d, v) in db.iter_mut().zip(p) {
            *d += v;
        }
    }
}

/// A normal deviate from two uniforms (Box-Muller), for initialisation.
fn normal(rng: &mut nmpsim_kernels::table::SplitMix64) -> f32 {
    let u1 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    ((-2.0 * (1.0 - u1).ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

impl Mlp {
    /// Layers of widths `arch[0] -> arch[1] -> ...`, initialised as the DLRM
    /// reference does: weights normal with std `sqrt(2 / (in + out))`, biases
    /// normal with std `sqrt(1 / out)`.
    pub fn new(arch: &[usize], relu_last: bool, seed: u64) -> Self {
        let mut rng = nmpsim_kernels::table::SplitMix64::new(seed);
        let layers = arch
            .windows(2)
            .map(|io| {
                let (n, m) = (io[0], io[1]);
                let sw = (2.0 / (n + m) as f64).sqrt() as f32;
                let sb = (1.0 / m as f64).sqrt() as f32;
                Linear {
                    inputs: n,
                    outputs: m,
                    w: (0..n * m).map(|_| normal(&mut rng) * sw).collect(),
                    b: (0..m).map(|_| normal(&mut rng) * sb).collect(),
                }
            })
            .collect();
        Mlp { layers, relu_last }
    }

    pub fn input_width(&self) -> usize {
        self.layers[0].inputs
    }

    pub fn output_width(&self) -> usize {
        self.layers.last().expect("at least one layer").outputs
    }

    pub fn parameters(&self) -> usize {
        self.layers.iter().map(|l| l.w.len() + l.b.len()).sum()
    }

    /// Multiply-adds of one forward pass over `batch` samples.
    pub fn forward_flops(&self, batch: usize) -> f64 {
        self.layers
            .iter()
            .map(|l| 2.0 * (batch * l.inputs * l.outputs) as f64)
            .sum()
    }

    /// Forward over `batch` rows of `x` (`batch x input_width`); returns the
    /// output (`batch x output_width`) and fills `cache`.
    pub fn forward(&self, x: &[f32], batch: usize, cache: &mut MlpCache) -> Vec<f32> {
        self.forward_into(x, batch, cache);
        cache.output().to_vec()
    }

    /// [`Mlp::forward`] that leaves the output in `cache` ([`MlpCache::output`])
    /// and reuses the cache's buffers.
    pub fn forward_into(&self, x: &[f32], batch: usize, cache: &mut MlpCache) {
        assert_eq!(x.len(), batch * self.input_width(), "mlp input shape");
        let threads = rayon::current_num_threads();
        cache.batch = batch;
        cache.input_grad = None;
        cache.acts.resize_with(self.layers.len() + 1, Vec::new);
        cache.acts[0].clear();
        cache.acts[0].extend_from_slice(x);
        let last = self.layers.len() - 1;
        for (i, l) in self.layers.iter().enumerate() {
            let (done, rest) = cache.acts.split_at_mut(i + 1);
            let y = &mut rest[0];
            y.resize(batch * l.outputs, 0.0);
            // y (B x out) = x (B x in) * W^T (in x out).
            sgemm_threads(
                threads,
                batch,
                l.inputs,
                l.outputs,
                1.0,
                &done[i],
                l.inputs as isize,
                1,
                &l.w,
                1,
                l.inputs as isize,
                0.0,
                y,
            );
            bias_act(y, &l.b, i < last || self.relu_last);
        }
    }

    /// Backward from `dy` (gradient of the output); returns the gradient of
    /// the input and each layer's gradients.
    pub fn backward(&self, cache: &MlpCache, dy: &[f32]) -> (Vec<f32>, Vec<LinearGrad>) {
        let mut scratch = [Vec::new(), Vec::new()];
        let mut grads = Vec::new();
        let i = self.backward_impl(&cache.acts, cache.batch, dy, true, &mut grads, &mut scratch);
        let [s0, s1] = scratch;
        (if i == Some(0) { s0 } else { s1 }, grads)
    }

    /// [`Mlp::backward`] without the gradient of the input (the bottom MLP's
    /// input is data): one GEMM less.
    pub fn backward_params_only(&self, cache: &MlpCache, dy: &[f32]) -> Vec<LinearGrad> {
        let mut scratch = [Vec::new(), Vec::new()];
        let mut grads = Vec::new();
        self.backward_impl(
            &cache.acts,
            cache.batch,
            dy,
            false,
            &mut grads,
            &mut scratch,
        );
        grads
    }

    /// Backward into reused buffers: the layers' gradients into `grads`
    /// (resized to the layers), the input gradient, if `input_grad`, into
    /// the cache ([`MlpCache::input_grad`]).
    pub fn backward_into(
        &self,
        cache: &mut MlpCache,
        dy: &[f32],
        input_grad: bool,
        grads: &mut Vec<LinearGrad>,
    ) {
        let MlpCache {
            acts,
            batch,
            scratch,
            input_grad: which,
        } = cache;
        *which = self.backward_impl(acts, *batch, dy, input_grad, grads, scratch);
    }

    /// The backward pass; returns which of `scratch` holds the input
    /// gradient, if asked for.
    fn backward_impl(
        &self,
        acts: &[Vec<f32>],
        batch: usize,
        dy: &[f32],
        input_grad: bool,
        grads: &mut Vec<LinearGrad>,
        scratch: &mut [Vec<f32>; 2],
    ) -> Option<usize> {
        assert_eq!(acts.len(), self.layers.len() + 1, "backward before forward");
        assert_eq!(
            dy.len(),
            batch * self.output_width(),
            "mlp output-gradient shape"
        );
        let threads = rayon::current_num_threads();
        let last = self.layers.len() - 1;
        grads.resize_with(self.layers.len(), || LinearGrad {
            w: Vec::new(),
            b: Vec::new(),
        });
        let mut cur = 0;
        scratch[0].clear();
        scratch[0].extend_from_slice(dy);
        for (i, l) in self.layers.iter().enumerate().rev() {
            let [s0, s1] = &mut *scratch;
            let (g, next) = if cur == 0 { (s0, s1) } else { (s1, s0) };
            let gl = &mut grads[i];
            gl.b.resize(l.outputs, 0.0);
            relu_grad_and_colsum(g, &acts[i + 1], i < last || self.relu_last, &mut gl.b);
            // dW (out x in) = dY^T (out x B) * X (B x in).
            gl.w.resize(l.outputs * l.inputs, 0.0);
            sgemm_threads(
                threads,
                l.outputs,
                batch,
                l.inputs,
                1.0,
                g,
                1,
                l.outputs as isize,
                &acts[i],
                l.inputs as isize,
                1,
                0.0,
                &mut gl.w,
            );
            if i > 0 || input_grad {
                // dX (B x in) = dY (B x out) * W (out x in).
                // Overwritten by the GEMM (beta 0): no zero-fill of the
                // scratch buffer, which alternates between layer widths.
                nmpsim_kernels::table::resize_for_overwrite(next, batch * l.inputs);
                sgemm_threads(
                    threads,
                    batch,
                    l.outputs,
                    l.inputs,
                    1.0,
                    g,
                    l.outputs as isize,
                    1,
                    &l.w,
                    l.inputs as isize,
                    1,
                    0.0,
                    next,
                );
                cur = 1 - cur;
            }
        }
        input_grad.then_some(cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmpsim_traces::threads::on_threads;

    #[test]
    fn dash_syntax() {
        assert_eq!(
            parse_arch("13-512-256-64-16", "bottom").unwrap(),
            vec![13, 512, 256, 64, 16]
        );
        assert!(parse_arch("13", "bottom").is_err());
        let e = parse_arch("13-x-4", "--arch-mlp-bot")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--arch-mlp-bot") && e.contains("13-x-4"), "{e}");
    }

    #[test]
    fn forward_matches_a_naive_loop() {
        let m = Mlp::new(&[5, 7, 3], false, 1);
        let x: Vec<f32> = (0..4 * 5).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut c = MlpCache::default();
        let y = m.forward(&x, 4, &mut c);
        // Naive.
        let mut h = [0.0f32; 4 * 7];
        let l0 = &m.layers[0];
        for b in 0..4 {
            for j in 0..7 {
                let mut s = l0.b[j];
                for k in 0..5 {
                    s += x[b * 5 + k] * l0.w[j * 5 + k];
                }
                h[b * 7 + j] = s.max(0.0);
            }
        }
        let l1 = &m.layers[1];
        for b in 0..4 {
            for j in 0..3 {
                let mut s = l1.b[j];
                for k in 0..7 {
                    s += h[b * 7 + k] * l1.w[j * 7 + k];
                }
                assert!((y[b * 3 + j] - s).abs() < 1e-5);
            }
        }
    }

    /// Forward and backward of a naive triple loop, for comparison: output,
    /// input gradient, and per layer `(dW, db)`.
    #[allow(clippy::type_complexity)]
    fn naive(
        m: &Mlp,
        x: &[f32],
        batch: usize,
        dy: &[f32],
    ) -> (Vec<f32>, Vec<f32>, Vec<(Vec<f32>, Vec<f32>)>) {
        let last = m.layers.len() - 1;
        let mut acts = vec![x.to_vec()];
        for (i, l) in m.layers.iter().enumerate() {
            let inp = acts.last().unwrap();
            let mut y = vec![0.0f32; batch * l.outputs];
            for r in 0..batch {
                for j in 0..l.outputs {
                    let mut s = l.b[j];
                    for k in 0..l.inputs {
                        s += inp[r * l.inputs + k] * l.w[j * l.inputs + k];
                    }
                    y[r * l.outputs + j] = if i < last || m.relu_last {
                        s.max(0.0)
                    } else {
                        s
                    };
                }
            }
            acts.push(y);
        }
        let mut g = dy.to_vec();
        let mut grads = vec![(Vec::new(), Vec::new()); m.layers.len()];
        for (i, l) in m.layers.iter().enumerate().rev() {
            if i < last || m.relu_last {
                for (gv, &o) in g.iter_mut().zip(&acts[i + 1]) {
                    if o <= 0.0 {
                        *gv = 0.0;
                    }
                }
            }
            let mut dw = vec![0.0f32; l.outputs * l.inputs];
            let mut db = vec![0.0f32; l.outputs];
            let mut dx = vec![0.0f32; batch * l.inputs];
            for r in 0..batch {
                for j in 0..l.outputs {
                    let gv = g[r * l.outputs + j];
                    db[j] += gv;
                    for k in 0..l.inputs {
                        dw[j * l.inputs + k] += gv * acts[i][r * l.inputs + k];
                        dx[r * l.inputs + k] += gv * l.w[j * l.inputs + k];
                    }
                }
            }
            grads[i] = (dw, db);
            g = dx;
        }
        (acts.pop().unwrap(), g, grads)
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: length");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                "{what}[{i}]: {x} vs naive {y}"
            );
        }
    }

    #[test]
    fn forward_and_backward_match_a_naive_loop_on_odd_shapes() {
        for (arch, relu_last, batch) in [
            (&[5usize, 7, 3][..], false, 9),
            (&[5, 7, 3][..], true, 9),
            (&[13, 33, 17, 1][..], false, 131),
            (&[3, 1][..], true, 1),
        ] {
            let m = Mlp::new(arch, relu_last, 7);
            let x: Vec<f32> = (0..batch * arch[0])
                .map(|i| (i as f32 * 0.37).sin())
                .collect();
            let dy: Vec<f32> = (0..batch * m.output_width())
                .map(|i| (i as f32 * 0.71).cos())
                .collect();
            let (ny, ndx, ngrads) = naive(&m, &x, batch, &dy);

            let mut c = MlpCache::default();
            let y = m.forward(&x, batch, &mut c);
            close(&y, &ny, "y");
            let (dx, grads) = m.backward(&c, &dy);
            close(&dx, &ndx, "dx");
            for (i, (g, (dw, db))) in grads.iter().zip(&ngrads).enumerate() {
                close(&g.w, dw, &format!("layer {i} dW"));
                close(&g.b, db, &format!("layer {i} db"));
            }
            assert_eq!(m.backward_params_only(&c, &dy), grads);

            // The buffer-reusing variants, twice over the same cache, give
            // the same bits.
            let mut c2 = MlpCache::default();
            let mut g2 = Vec::new();
            for _ in 0..2 {
                m.forward_into(&x, batch, &mut c2);
                assert_eq!(c2.output(), &y[..]);
                m.backward_into(&mut c2, &dy, true, &mut g2);
                assert_eq!(c2.input_grad().unwrap(), &dx[..]);
                assert_eq!(g2, grads);
                m.backward_into(&mut c2, &dy, false, &mut g2);
                assert!(c2.input_grad().is_none());
                assert_eq!(g2, grads);
            }
        }
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let m = Mlp::new(&[29, 300, 70, 1], false, 3);
        let batch = 517;
        let x: Vec<f32> = (0..batch * 29).map(|i| (i as f32 * 0.13).sin()).collect();
        let dy: Vec<f32> = (0..batch).map(|i| (i as f32 * 0.3).cos()).collect();
        let run = |threads: usize| {
            on_threads(threads, || {
                let mut c = MlpCache::default();
                let y = m.forward(&x, batch, &mut c);
                let (dx, g) = m.backward(&c, &dy);
                (y, dx, g)
            })
        };
        let one = run(1);
        assert_eq!(run(2), one);
        assert_eq!(run(3), one);
    }

    #[test]
    fn sgemm_handles_empty_and_strided_views() {
        // k = 0: C = beta * C.
        let mut c = vec![2.0f32; 6];
        sgemm(2, 0, 3, 1.0, &[], 0, 0, &[], 0, 0, 0.5, &mut c);
        assert_eq!(c, vec![1.0; 6]);
        // A^T via strides, alpha and beta.
        let a = [1.0f32, 2.0, 3.0, 4.0]; // A = [[1, 3], [2, 4]] read column-major
        let b = [1.0f32, 0.0, 0.0, 1.0];
        let mut c = vec![1.0f32; 4];
        sgemm(2, 2, 2, 2.0, &a, 1, 2, &b, 2, 1, 1.0, &mut c);
        assert_eq!(c, vec![3.0, 7.0, 5.0, 9.0]);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn sgemm_rejects_views_past_the_slice() {
        let mut c = vec![0.0f32; 4];
        sgemm(2, 2, 2, 1.0, &[0.0; 3], 2, 1, &[0.0; 4], 2, 1, 0.0, &mut c);
    }
}
