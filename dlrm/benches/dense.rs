//! Dense math of the DLRM trainer: the GEMM crates on the exact DLRM layer
//! shapes, and one whole dense training step.
//!
//! ```sh
//! cargo bench -p nmpsim-dlrm --bench dense
//! # matrixmultiply's own threading reads MATMUL_NUM_THREADS once per process:
//! MATMUL_NUM_THREADS=1 cargo bench -p nmpsim-dlrm --bench dense -- 'mm-t'
//! ```
//!
//! Groups:
//! - `gemm/<impl>/<config>-L<i>-<in>x<out>-<op>`: one GEMM of training at
//!   batch 2048: `fwd` `Y = X W^T` (B x in x out), `dw` `dW = dY^T X`
//!   (out x B x in), `dx` `dX = dY W` (B x out x in). Throughput is in
//!   FLOP/s (criterion's "elem/s" counts `2 m n k`).
//! - `gemm-peak/<impl>/2048`: a square 2048^3 GEMM, the crate's own peak.
//! - `step/<config>`: one dense training step (bottom fwd, interaction fwd,
//!   top fwd, top bwd, interaction bwd, bottom bwd), as the trainer runs it.
//!
//! Implementations (`<impl>`):
//! - `gemm-t1`, `gemm-t2`: the `gemm` crate, `Parallelism::None` / `Rayon(2)`;
//! - `mm-t<N>`: `matrixmultiply` with its `threading` feature, N threads from
//!   `MATMUL_NUM_THREADS` (default: the physical cores, at most 4);
//! - `mm-split2`: `matrixmultiply` called on two halves of the output with
//!   `rayon::join` (only meaningful with `MATMUL_NUM_THREADS=1`).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nmpsim_dlrm::Interaction;
use nmpsim_dlrm::mlp::{LinearGrad, Mlp, MlpCache};

const BATCH: usize = 2048;

/// Criteo Kaggle (DLRM reference `--arch-mlp-bot 13-512-256-64-16
/// --arch-mlp-top 512-256-1`, 26 tables of dim 16, dot interaction).
const KAGGLE_BOT: &[usize] = &[13, 512, 256, 64, 16];
const KAGGLE_TOP: &[usize] = &[367, 512, 256, 1];
const KAGGLE_TABLES: usize = 26;
const KAGGLE_DIM: usize = 16;
/// RM1: bottom 256-128-64, top 256-64-1 after a dot interaction of 10
/// tables of dim 64 (64 + 11 * 10 / 2 = 119).
const RM1_BOT: &[usize] = &[256, 128, 64];
const RM1_TOP: &[usize] = &[119, 256, 64, 1];
const RM1_TABLES: usize = 10;
const RM1_DIM: usize = 64;

/// `C (m x n, row-major) = A (m x k) B (k x n)` with strides of A and B.
#[derive(Clone, Copy, Debug)]
struct Shape {
    m: usize,
    k: usize,
    n: usize,
    rsa: isize,
    csa: isize,
    rsb: isize,
    csb: isize,
}

impl Shape {
    fn flops(&self) -> u64 {
        2 * (self.m * self.n * self.k) as u64
    }
    fn a_len(&self) -> usize {
        self.m * self.k
    }
    fn b_len(&self) -> usize {
        self.k * self.n
    }
}

/// The three GEMMs of a layer `inp -> out` at batch `b`, as `mlp.rs` lays
/// them out (row-major activations, `W` is `out x in`).
fn layer_shapes(b: usize, inp: usize, out: usize) -> [(&'static str, Shape); 3] {
    let (ii, oi) = (inp as isize, out as isize);
    [
        (
            "fwd",
            Shape {
                m: b,
                k: inp,
                n: out,
                rsa: ii,
                csa: 1,
                rsb: 1,
                csb: ii,
            },
        ),
        (
            "dw",
            Shape {
                m: out,
                k: b,
                n: inp,
                rsa: 1,
                csa: oi,
                rsb: ii,
                csb: 1,
            },
        ),
        (
            "dx",
            Shape {
                m: b,
                k: out,
                n: inp,
                rsa: oi,
                csa: 1,
                rsb: ii,
                csb: 1,
            },
        ),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Impl {
    Gemm(usize),
    Mm,
    MmSplit2,
}

/// `c[0..m*n] (row stride rsc, col stride 1) = a b` with one implementation.
///
/// # Safety
/// The strides of `s` must describe `a`, `b` and `c`.
unsafe fn mm_raw(s: &Shape, a: *const f32, b: *const f32, c: *mut f32, rsc: isize) {
    unsafe {
        matrixmultiply::sgemm(
            s.m, s.k, s.n, 1.0, a, s.rsa, s.csa, b, s.rsb, s.csb, 0.0, c, rsc, 1,
        );
    }
}

#[derive(Clone, Copy)]
struct SendPtr<T>(T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

fn run(imp: Impl, s: &Shape, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= s.a_len() && b.len() >= s.b_len() && c.len() >= s.m * s.n);
    match imp {
        Impl::Gemm(t) => unsafe {
            gemm::gemm(
                s.m,
                s.n,
                s.k,
                c.as_mut_ptr(),
                1,
                s.n as isize,
                false,
                a.as_ptr(),
                s.csa,
                s.rsa,
                b.as_ptr(),
                s.csb,
                s.rsb,
                0.0,
                1.0,
                false,
                false,
                false,
                if t <= 1 {
                    gemm::Parallelism::None
                } else {
                    gemm::Parallelism::Rayon(t)
                },
            )
        },
        Impl::Mm => unsafe { mm_raw(s, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), s.n as isize) },
        Impl::MmSplit2 => {
            // Split the longer output side in two; each half is an
            // independent single-threaded GEMM.
            let (ap, bp, cp) = (
                SendPtr(a.as_ptr()),
                SendPtr(b.as_ptr()),
                SendPtr(c.as_mut_ptr()),
            );
            let rsc = s.n as isize;
            // The halves' shapes, and where the second starts in A, B and C.
            let (s1, s2, da, db, dc) = if s.m >= s.n {
                let h = s.m / 2;
                let (s1, s2) = (Shape { m: h, ..*s }, Shape { m: s.m - h, ..*s });
                (s1, s2, h as isize * s.rsa, 0, h as isize * rsc)
            } else {
                let h = s.n / 2;
                let (s1, s2) = (Shape { n: h, ..*s }, Shape { n: s.n - h, ..*s });
                (s1, s2, 0, h as isize * s.csb, h as isize)
            };
            rayon::join(
                move || unsafe {
                    let (ap, bp, cp) = (ap, bp, cp);
                    mm_raw(&s1, ap.0, bp.0, cp.0, rsc)
                },
                move || unsafe {
                    let (ap, bp, cp) = (ap, bp, cp);
                    mm_raw(&s2, ap.0.offset(da), bp.0.offset(db), cp.0.offset(dc), rsc)
                },
            );
        }
    }
}

fn filled(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) as f32
                / (1u32 << 24) as f32
                - 0.5
        })
        .collect()
}

fn impls() -> Vec<(String, Impl)> {
    let mm_threads = std::env::var("MATMUL_NUM_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 4);
    let mut v = vec![
        ("gemm-t1".to_string(), Impl::Gemm(1)),
        ("gemm-t2".to_string(), Impl::Gemm(2)),
        (format!("mm-t{mm_threads}"), Impl::Mm),
    ];
    if mm_threads == 1 {
        v.push(("mm-split2".to_string(), Impl::MmSplit2));
    }
    v
}

fn bench_shapes(c: &mut Criterion) {
    let configs: [(&str, &[usize]); 4] = [
        ("kaggle-bot", KAGGLE_BOT),
        ("kaggle-top", KAGGLE_TOP),
        ("rm1-bot", RM1_BOT),
        ("rm1-top", RM1_TOP),
    ];
    let mut g = c.benchmark_group("gemm");
    let impls = impls();
    let big = filled(BATCH * 512, 1);
    let big2 = filled(BATCH * 512, 2);
    let mut out = vec![0.0f32; BATCH * 512];
    for (cfg, arch) in configs {
        for (i, io) in arch.windows(2).enumerate() {
            for (op, s) in layer_shapes(BATCH, io[0], io[1]) {
                g.throughput(Throughput::Elements(s.flops()));
                for (name, imp) in &impls {
                    let id = format!("{name}/{cfg}-L{i}-{}x{}-{op}", io[0], io[1]);
                    g.bench_function(id, |bch| {
                        bch.iter(|| run(*imp, &s, black_box(&big), black_box(&big2), &mut out))
                    });
                }
            }
        }
    }
    g.finish();

    let mut g = c.benchmark_group("gemm-peak");
    g.sample_size(10);
    let n = 2048;
    let s = Shape {
        m: n,
        k: n,
        n,
        rsa: n as isize,
        csa: 1,
        rsb: n as isize,
        csb: 1,
    };
    let a = filled(n * n, 3);
    let b = filled(n * n, 4);
    let mut cm = vec![0.0f32; n * n];
    g.throughput(Throughput::Elements(s.flops()));
    for (name, imp) in &impls {
        g.bench_function(format!("{name}/{n}"), |bch| {
            bch.iter(|| run(*imp, &s, black_box(&a), black_box(&b), &mut cm))
        });
    }
    g.finish();
}

/// One dense training step: everything of a DLRM step but the embeddings.
struct Step {
    bottom: Mlp,
    top: Mlp,
    inter: Interaction,
    dim: usize,
    dense: Vec<f32>,
    pooled: Vec<Vec<f32>>,
    bc: MlpCache,
    tc: MlpCache,
    bg: Vec<LinearGrad>,
    tg: Vec<LinearGrad>,
}

impl Step {
    fn new(bot: &[usize], top: &[usize], tables: usize, dim: usize) -> Self {
        let bottom = Mlp::new(bot, true, 1);
        let top = Mlp::new(top, false, 2);
        let inter = Interaction::Dot;
        assert_eq!(inter.output_width(tables, dim), top.input_width());
        Step {
            dense: filled(BATCH * bottom.input_width(), 5),
            pooled: (0..tables)
                .map(|t| filled(BATCH * dim, 10 + t as u32))
                .collect(),
            bg: Vec::new(),
            tg: Vec::new(),
            bottom,
            top,
            inter,
            dim,
            bc: MlpCache::default(),
            tc: MlpCache::default(),
        }
    }

    fn run(&mut self) -> f32 {
        let b = BATCH;
        self.bottom.forward_into(&self.dense, b, &mut self.bc);
        let x = self.bc.output();
        let z = self.inter.forward(x, &self.pooled, b, self.dim);
        self.top.forward_into(&z, b, &mut self.tc);
        // d(logit): any gradient of the right shape.
        let dlogit: Vec<f32> = self.tc.output().iter().map(|v| v * 1e-3).collect();
        self.top
            .backward_into(&mut self.tc, &dlogit, true, &mut self.tg);
        let (dx, _demb) = self.inter.backward(
            self.bc.output(),
            &self.pooled,
            self.tc.input_grad().expect("asked for"),
            b,
            self.dim,
        );
        self.bottom
            .backward_into(&mut self.bc, &dx, false, &mut self.bg);
        self.bg[0].b[0] + self.tg[0].b[0]
    }
}

/// (name, bottom MLP, top MLP, tables, dim).
type StepConfig = (
    &'static str,
    &'static [usize],
    &'static [usize],
    usize,
    usize,
);

fn bench_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("step");
    g.sample_size(20);
    let cfgs: [StepConfig; 2] = [
        ("kaggle", KAGGLE_BOT, KAGGLE_TOP, KAGGLE_TABLES, KAGGLE_DIM),
        ("rm1", RM1_BOT, RM1_TOP, RM1_TABLES, RM1_DIM),
    ];
    for (name, bot, top, tables, dim) in cfgs {
        let mut st = Step::new(bot, top, tables, dim);
        let flops = 3.0 * (st.bottom.forward_flops(BATCH) + st.top.forward_flops(BATCH))
            - 2.0 * (BATCH * bot[0] * bot[1]) as f64;
        g.throughput(Throughput::Elements(flops as u64));
        g.bench_function(name, |bch| bch.iter(|| black_box(st.run())));
    }
    g.finish();
}

criterion_group!(benches, bench_shapes, bench_step);
criterion_main!(benches);
