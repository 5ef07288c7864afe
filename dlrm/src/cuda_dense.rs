//! The dense path on a GPU (feature `cuda`): [`CudaDense`], a
//! [`DenseBackend`] that keeps the MLPs' parameters, activations and
//! gradients on the device, runs the GEMMs through cuBLAS and everything
//! else through the kernels of `cuda/dense.cu`, and times each part with
//! CUDA events so that the trainer can report *measured* dense time.
//!
//! Layout: every matrix is row-major, as on the CPU path, and cuBLAS (which
//! is column-major) is driven through the usual transpose trick: a row-major
//! `C = A B` is the column-major `C^T = B^T A^T`. The parameters sit in one
//! device array in the order of [`DenseBackend::params`] (bottom then top;
//! each layer's weights, then its biases), and so do their gradients and the
//! Adagrad accumulators, so each optimizer is one kernel.
//!
//! Results match [`CpuDense`] to float rounding (different summation orders
//! in the GEMMs and column sums), not bit for bit.

use std::ops::Range;
use std::sync::Arc;

use nmpsim_kernels::KernelError;
use nmpsim_kernels::cuda::cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys as blas_sys};
use nmpsim_kernels::cuda::cudarc::driver::sys::CUevent_flags;
use nmpsim_kernels::cuda::cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig,
    PushKernelArg,
};
use nmpsim_kernels::cuda::{Gpu, cublas_present};

use crate::DlrmError;
use crate::cuda::DENSE;
use crate::dense::{
    CpuDense, DenseBackend, DenseBackward, DenseOptimizer, DenseParams, DenseTimes,
};
use crate::interaction::Interaction;
use crate::mlp::Mlp;
use crate::model::DlrmConfig;

/// Every kernel of `dense.cu` that [`CudaDense`] loads (checked against the
/// PTX by the NVRTC test).
pub const KERNELS: &[&str] = &[
    "nmpsim_dense_bias_act",
    "nmpsim_dense_relu_backward",
    "nmpsim_dense_bias_grad",
    "nmpsim_dense_dot_forward",
    "nmpsim_dense_dot_backward",
    "nmpsim_dense_cat_forward",
    "nmpsim_dense_cat_backward",
    "nmpsim_dense_bce",
    "nmpsim_dense_sgd",
    "nmpsim_dense_adagrad",
];

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;
/// Threads per block of the per-sample `dot` forward (one block per sample).
const DOT_BLOCK: u32 = 128;
/// Grid cap: every kernel is a grid-stride loop, so larger sizes loop.
const MAX_BLOCKS: usize = 1 << 16;
/// Block height of the column sums (`COLSUM_BY` in dense.cu).
const COLSUM_BY: u32 = 16;

fn cuda_err(what: impl Into<String>) -> DlrmError {
    DlrmError::Kernel(KernelError::Cuda { what: what.into() })
}

fn drv(
    doing: &'static str,
) -> impl Fn(nmpsim_kernels::cuda::cudarc::driver::DriverError) -> DlrmError {
    move |e| cuda_err(format!("{doing}: {e}"))
}

/// A 1-D launch over `n` elements.
fn grid(n: usize, block: u32) -> LaunchConfig {
    let blocks = n.div_ceil(block as usize).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches kernel `$f` of [`Kernels`] on `$dev`'s stream with the arguments
/// in the kernel's order.
macro_rules! launch {
    ($dev:expr, $f:ident, $cfg:expr; $($arg:expr),+ $(,)?) => {{
        let dev: &Dev = $dev;
        dev.gpu.check_launch(
            &DENSE,
            concat!("nmpsim_dense_", stringify!($f)),
            &[$( nmpsim_kernels::cuda::KernelArg::kind(&$arg) ),+],
        )?;
        let mut b = dev.stream.launch_builder(&dev.k.$f);
        $( b.arg($arg); )+
        // SAFETY: the arguments are pushed in the order and with the types
        // of the kernel's signature in dense.cu (`i64` for `long long`,
        // `i32` for `int`, `f32` for `float`), and every buffer holds at least
        // the elements that the sizes passed with it address (the callers
        // size the buffers from the same batch, widths and table count).
        unsafe { b.launch($cfg) }
            .map(|_| ())
            .map_err(|e| cuda_err(format!("launching {}: {e}", stringify!($f))))
    }};
}

/// The loaded kernels.
struct Kernels {
    bias_act: CudaFunction,
    relu_backward: CudaFunction,
    bias_grad: CudaFunction,
    dot_forward: CudaFunction,
    dot_backward: CudaFunction,
    cat_forward: CudaFunction,
    cat_backward: CudaFunction,
    bce: CudaFunction,
    sgd: CudaFunction,
    adagrad: CudaFunction,
}

impl Kernels {
    fn load(gpu: &Gpu) -> Result<Self, DlrmError> {
        let f = |name: &str| -> Result<CudaFunction, DlrmError> {
            debug_assert!(KERNELS.contains(&name));
            Ok(gpu.function(&DENSE, name)?)
        };
        Ok(Kernels {
            bias_act: f("nmpsim_dense_bias_act")?,
            relu_backward: f("nmpsim_dense_relu_backward")?,
            bias_grad: f("nmpsim_dense_bias_grad")?,
            dot_forward: f("nmpsim_dense_dot_forward")?,
            dot_backward: f("nmpsim_dense_dot_backward")?,
            cat_forward: f("nmpsim_dense_cat_forward")?,
            cat_backward: f("nmpsim_dense_cat_backward")?,
            bce: f("nmpsim_dense_bce")?,
            sgd: f("nmpsim_dense_sgd")?,
            adagrad: f("nmpsim_dense_adagrad")?,
        })
    }
}

/// The stream, cuBLAS handle and kernels every operation uses.
struct Dev {
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    k: Kernels,
}

impl Dev {
    /// Row-major `C (m x n) = A (m x k) B (k x n)`, where `A` is stored
    /// `k x m` when `ta` (it is then the transpose of what is stored), and
    /// `B` is stored `n x k` when `tb`.
    #[allow(clippy::too_many_arguments)]
    fn gemm<A: DevicePtr<f32>, B: DevicePtr<f32>, C: DevicePtrMut<f32>>(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: &A,
        ta: bool,
        b: &B,
        tb: bool,
        c: &mut C,
    ) -> Result<(), DlrmError> {
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err(cuda_err(format!(
                "GEMM {m} x {k} x {n} on buffers of {}, {} and {} values",
                a.len(),
                b.len(),
                c.len()
            )));
        }
        let int = |v: usize| {
            i32::try_from(v.max(1))
                .map_err(|_| cuda_err(format!("GEMM dimension {v} exceeds cuBLAS's int range")))
        };
        use blas_sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
        // Column-major C^T (n x m) = op(B stored) * op(A stored).
        let cfg = GemmConfig {
            transa: if tb { CUBLAS_OP_T } else { CUBLAS_OP_N },
            transb: if ta { CUBLAS_OP_T } else { CUBLAS_OP_N },
            m: int(n)?,
            n: int(m)?,
            k: int(k)?,
            alpha: 1.0f32,
            lda: int(if tb { k } else { n })?,
            ldb: int(if ta { m } else { k })?,
            beta: 0.0f32,
            ldc: int(n)?,
        };
        // SAFETY: the views hold at least the m x k, k x n and m x n values
        // the call addresses (checked above), with the leading dimensions of
        // their row-major storage; C does not alias A or B (it is borrowed
        // mutably).
        unsafe { self.blas.gemm(cfg, b, a, c) }
            .map_err(|e| cuda_err(format!("cuBLAS sgemm {m} x {k} x {n}: {e}")))
    }
}

/// One layer's shape and where its weights and biases sit in the flat
/// parameter array.
#[derive(Clone, Copy, Debug)]
struct LayerShape {
    inputs: usize,
    outputs: usize,
    /// Offset of the weights (`outputs x inputs`, row-major).
    w: usize,
    /// Offset of the biases.
    b: usize,
}

impl LayerShape {
    fn w_range(&self) -> Range<usize> {
        self.w..self.w + self.inputs * self.outputs
    }

    fn b_range(&self) -> Range<usize> {
        self.b..self.b + self.outputs
    }
}

#[derive(Clone, Debug)]
struct MlpShape {
    layers: Vec<LayerShape>,
    relu_last: bool,
}

impl MlpShape {
    fn relu(&self, i: usize) -> bool {
        i + 1 < self.layers.len() || self.relu_last
    }

    /// Widths of the activations: the input, then each layer's output.
    fn widths(&self) -> Vec<usize> {
        std::iter::once(self.layers[0].inputs)
            .chain(self.layers.iter().map(|l| l.outputs))
            .collect()
    }

    fn input_width(&self) -> usize {
        self.layers[0].inputs
    }

    fn output_width(&self) -> usize {
        self.layers.last().expect("at least one layer").outputs
    }
}

/// Batch-sized device buffers, grown when a larger batch comes.
struct Buffers {
    /// Samples each buffer has room for.
    cap: usize,
    tables: usize,
    /// Bottom MLP activations: input of each layer, then the output (x).
    bottom: Vec<CudaSlice<f32>>,
    /// Top MLP activations: the interaction's output z first, logits last.
    top: Vec<CudaSlice<f32>>,
    /// Pooled embeddings, the tables one after another (`T x B x dim`).
    pooled: CudaSlice<f32>,
    /// Their gradients, same layout.
    dpooled: CudaSlice<f32>,
    /// Backward ping-pong: the gradient flowing down.
    scratch: [CudaSlice<f32>; 2],
    labels: CudaSlice<f32>,
    /// Per-sample loss terms, in double (added on the host).
    terms: CudaSlice<f64>,
}

/// CUDA events between the parts of a step: forward 0..=3, backward 4..=8,
/// step 9..=10.
const N_EVENTS: usize = 11;

/// The CUDA dense backend.
pub struct CudaDense {
    gpu: Arc<Gpu>,
    dev: Dev,
    bottom: MlpShape,
    top: MlpShape,
    interaction: Interaction,
    dim: usize,
    optimizer: DenseOptimizer,
    n_params: usize,
    params: CudaSlice<f32>,
    grads: CudaSlice<f32>,
    /// Adagrad accumulators (`None` for SGD).
    accum: Option<CudaSlice<f32>>,
    buf: Option<Buffers>,
    /// Samples and tables of the last forward pass.
    batch: usize,
    tables: usize,
    /// Values of the last forward's logits.
    logits_len: usize,
    /// A forward pass whose activations backward may use.
    forwarded: bool,
    /// The gradients hold a backward pass not yet applied.
    pending: bool,
    /// Which parts of the last step recorded their events.
    timed: [bool; 3],
    events: Vec<CudaEvent>,
    /// An error of [`DenseBackend::step`] (which cannot return one), reported
    /// by the next call that can.
    deferred: Option<String>,
    staging: Vec<f32>,
}

impl CudaDense {
    /// The model's MLPs initialised as [`CpuDense::new`] does for `seed`, on
    /// `gpu`.
    pub fn new(
        gpu: Arc<Gpu>,
        config: &DlrmConfig,
        optimizer: DenseOptimizer,
        seed: u64,
    ) -> Result<Self, DlrmError> {
        let cpu = CpuDense::new(config, optimizer, seed)?;
        Self::from_cpu(gpu, &cpu)
    }

    /// A copy of `cpu` on `gpu`: parameters, optimizer and Adagrad
    /// accumulators, so that both continue identically.
    pub fn from_cpu(gpu: Arc<Gpu>, cpu: &CpuDense) -> Result<Self, DlrmError> {
        Self::build(
            gpu,
            &cpu.bottom,
            &cpu.top,
            cpu.interaction,
            cpu.dim,
            cpu.optimizer,
            Some(cpu.accumulators()),
        )
    }

    /// The backend for given MLPs (Adagrad accumulators start at the
    /// optimizer's initial value).
    pub fn from_mlps(
        gpu: Arc<Gpu>,
        bottom: &Mlp,
        top: &Mlp,
        interaction: Interaction,
        dim: usize,
        optimizer: DenseOptimizer,
    ) -> Result<Self, DlrmError> {
        Self::build(gpu, bottom, top, interaction, dim, optimizer, None)
    }

    fn build(
        gpu: Arc<Gpu>,
        bottom: &Mlp,
        top: &Mlp,
        interaction: Interaction,
        dim: usize,
        optimizer: DenseOptimizer,
        accum: Option<&[f32]>,
    ) -> Result<Self, DlrmError> {
        let mut values = Vec::with_capacity(bottom.parameters() + top.parameters());
        let mut shape = |m: &Mlp, what: &str| -> Result<MlpShape, DlrmError> {
            if m.layers.is_empty() {
                return Err(DlrmError::Config(format!("the {what} MLP has no layers")));
            }
            let mut layers = Vec::with_capacity(m.layers.len());
            for (i, l) in m.layers.iter().enumerate() {
                if l.inputs == 0
                    || l.outputs == 0
                    || l.w.len() != l.inputs * l.outputs
                    || l.b.len() != l.outputs
                    || (i > 0 && m.layers[i - 1].outputs != l.inputs)
                {
                    return Err(DlrmError::Config(format!(
                        "layer {i} of the {what} MLP is malformed ({} -> {}, {} weights, {} biases)",
                        l.inputs,
                        l.outputs,
                        l.w.len(),
                        l.b.len()
                    )));
                }
                let w = values.len();
                values.extend_from_slice(&l.w);
                let b = values.len();
                values.extend_from_slice(&l.b);
                layers.push(LayerShape {
                    inputs: l.inputs,
                    outputs: l.outputs,
                    w,
                    b,
                });
            }
            Ok(MlpShape {
                layers,
                relu_last: m.relu_last,
            })
        };
        let bottom = shape(bottom, "bottom")?;
        let top = shape(top, "top")?;
        if bottom.output_width() != dim {
            return Err(DlrmError::Config(format!(
                "bottom MLP output width {} must equal the embedding dimension {dim}",
                bottom.output_width()
            )));
        }
        if !cublas_present() {
            return Err(cuda_err(
                "the cuBLAS library (libcublas.so.13) cannot be loaded; put its folder on LD_LIBRARY_PATH",
            ));
        }
        let n_params = values.len();
        let stream = gpu
            .ctx
            .new_stream()
            .map_err(drv("creating the dense path's stream"))?;
        let blas = CudaBlas::new(stream.clone())
            .map_err(|e| cuda_err(format!("creating a cuBLAS handle: {e}")))?;
        // Plain FP32 GEMMs (no TF32), whatever the library's default becomes.
        // SAFETY: the handle is valid for the life of `blas`.
        let r = unsafe {
            blas_sys::cublasSetMathMode(*blas.handle(), blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH)
        };
        if r != blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(cuda_err(format!("cublasSetMathMode: {r:?}")));
        }
        let k = Kernels::load(&gpu)?;
        let params = stream
            .clone_htod(&values)
            .map_err(drv("copying the dense parameters to the GPU"))?;
        let grads = stream
            .alloc_zeros::<f32>(n_params.max(1))
            .map_err(drv("allocating the dense gradients"))?;
        let accum = match optimizer {
            DenseOptimizer::Sgd => None,
            DenseOptimizer::Adagrad {
                initial_accumulator,
                ..
            } => {
                let init = match accum {
                    Some(a) if a.len() == n_params => a.to_vec(),
                    _ => vec![initial_accumulator; n_params],
                };
                Some(
                    stream
                        .clone_htod(&init)
                        .map_err(drv("copying the Adagrad accumulators to the GPU"))?,
                )
            }
        };
        let events = (0..N_EVENTS)
            .map(|_| gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(drv("creating CUDA events"))?;
        stream
            .synchronize()
            .map_err(drv("initialising the dense path"))?;
        Ok(CudaDense {
            gpu: gpu.clone(),
            dev: Dev {
                gpu,
                stream,
                blas,
                k,
            },
            bottom,
            top,
            interaction,
            dim,
            optimizer,
            n_params,
            params,
            grads,
            accum,
            buf: None,
            batch: 0,
            tables: 0,
            logits_len: 0,
            forwarded: false,
            pending: false,
            timed: [false; 3],
            events,
            deferred: None,
            staging: Vec::new(),
        })
    }

    /// The GPU this backend runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    pub fn optimizer(&self) -> DenseOptimizer {
        self.optimizer
    }

    /// Every parameter, read back from the device (in the order of
    /// [`DenseBackend::params`]).
    pub fn try_params(&self) -> Result<DenseParams, DlrmError> {
        Ok(DenseParams {
            values: self.read(
                &self.params,
                self.n_params,
                "reading the dense parameters back",
            )?,
        })
    }

    /// The Adagrad accumulators (empty for SGD), read back from the device.
    pub fn accumulators(&self) -> Result<Vec<f32>, DlrmError> {
        match &self.accum {
            None => Ok(Vec::new()),
            Some(a) => self.read(a, self.n_params, "reading the Adagrad accumulators back"),
        }
    }

    /// The device time of the last step's parts (see
    /// [`DenseBackend::measured_times`]); waits for the step to finish.
    pub fn last_times_ns(&self) -> Result<DenseTimes, DlrmError> {
        self.check_deferred()?;
        let ns = |a: usize, b: usize| -> Result<f64, DlrmError> {
            let ms = self.events[a]
                .elapsed_ms(&self.events[b])
                .map_err(drv("reading the CUDA event timers"))?;
            Ok(f64::from(ms.max(0.0)) * 1e6)
        };
        let mut t = DenseTimes::default();
        if self.timed[0] {
            t.bottom_forward_ns = ns(0, 1)?;
            t.interaction_forward_ns = ns(1, 2)?;
            t.top_forward_ns = ns(2, 3)?;
        }
        if self.timed[1] {
            t.loss_ns = ns(4, 5)?;
            t.top_backward_ns = ns(5, 6)?;
            t.interaction_backward_ns = ns(6, 7)?;
            t.bottom_backward_ns = ns(7, 8)?;
        }
        if self.timed[2] {
            t.step_ns = ns(9, 10)?;
        }
        Ok(t)
    }

    fn read(
        &self,
        s: &CudaSlice<f32>,
        n: usize,
        doing: &'static str,
    ) -> Result<Vec<f32>, DlrmError> {
        let mut out = vec![0.0f32; n];
        if n > 0 {
            self.dev
                .stream
                .memcpy_dtoh(&s.slice(0..n), &mut out[..])
                .map_err(drv(doing))?;
            self.dev.stream.synchronize().map_err(drv(doing))?;
        }
        Ok(out)
    }

    fn check_deferred(&self) -> Result<(), DlrmError> {
        match &self.deferred {
            Some(e) => Err(cuda_err(format!("an earlier dense step failed: {e}"))),
            None => Ok(()),
        }
    }

    fn record(&self, i: usize) -> Result<(), DlrmError> {
        self.events[i]
            .record(&self.dev.stream)
            .map_err(drv("recording a CUDA event"))
    }

    /// Buffers with room for `batch` samples of `tables` tables.
    fn ensure(&mut self, batch: usize, tables: usize) -> Result<(), DlrmError> {
        if let Some(b) = &self.buf {
            if b.cap >= batch && b.tables == tables {
                return Ok(());
            }
        }
        let cap = match &self.buf {
            Some(b) if b.tables == tables => batch.max(b.cap),
            _ => batch,
        };
        // Free the old buffers first.
        self.buf = None;
        let s = &self.dev.stream;
        let alloc = |n: usize| {
            s.alloc_zeros::<f32>(n.max(1))
                .map_err(drv("allocating the dense path's buffers"))
        };
        let acts = |m: &MlpShape| -> Result<Vec<CudaSlice<f32>>, DlrmError> {
            m.widths().into_iter().map(|w| alloc(cap * w)).collect()
        };
        let widest = self
            .bottom
            .widths()
            .into_iter()
            .chain(self.top.widths())
            .chain([self.dim])
            .max()
            .unwrap_or(1);
        self.buf = Some(Buffers {
            cap,
            tables,
            bottom: acts(&self.bottom)?,
            top: acts(&self.top)?,
            pooled: alloc(tables * cap * self.dim)?,
            dpooled: alloc(tables * cap * self.dim)?,
            scratch: [alloc(cap * widest)?, alloc(cap * widest)?],
            labels: alloc(cap)?,
            terms: s
                .alloc_zeros::<f64>(cap.max(1))
                .map_err(drv("allocating the dense path's buffers"))?,
        });
        Ok(())
    }

    fn forward_inner(
        &mut self,
        dense: &[f32],
        pooled: &[Vec<f32>],
        batch: usize,
    ) -> Result<Vec<f32>, DlrmError> {
        let (dim, tables) = (self.dim, pooled.len());
        self.ensure(batch, tables)?;
        self.staging.clear();
        for p in pooled {
            self.staging.extend_from_slice(p);
        }
        let buf = self.buf.as_mut().expect("ensured");
        let s = &self.dev.stream;
        s.memcpy_htod(dense, &mut buf.bottom[0].slice_mut(0..dense.len()))
            .map_err(drv("copying the dense features to the GPU"))?;
        if !self.staging.is_empty() {
            s.memcpy_htod(
                &self.staging[..],
                &mut buf.pooled.slice_mut(0..self.staging.len()),
            )
            .map_err(drv("copying the pooled embeddings to the GPU"))?;
        }
        let ev = &self.events;
        let rec = |i: usize| ev[i].record(s).map_err(drv("recording a CUDA event"));
        rec(0)?;
        mlp_forward(
            &self.dev,
            &self.bottom,
            &self.params,
            &mut buf.bottom,
            batch,
        )?;
        rec(1)?;
        let x = buf.bottom.last().expect("layers");
        let (b64, t64, d64) = (batch as i64, tables as i64, dim as i64);
        match self.interaction {
            Interaction::Dot => {
                let cfg = LaunchConfig {
                    grid_dim: (batch.clamp(1, MAX_BLOCKS) as u32, 1, 1),
                    block_dim: (DOT_BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                };
                launch!(&self.dev, dot_forward, cfg;
                    x, &buf.pooled, &mut buf.top[0], &b64, &t64, &d64)?;
            }
            Interaction::Cat => {
                let cfg = grid(batch * (tables + 1) * dim, BLOCK);
                launch!(&self.dev, cat_forward, cfg;
                    x, &buf.pooled, &mut buf.top[0], &b64, &t64, &d64)?;
            }
        }
        rec(2)?;
        mlp_forward(&self.dev, &self.top, &self.params, &mut buf.top, batch)?;
        rec(3)?;
        let n = batch * self.top.output_width();
        let mut logits = vec![0.0f32; n];
        s.memcpy_dtoh(
            &buf.top.last().expect("layers").slice(0..n),
            &mut logits[..],
        )
        .map_err(drv("copying the logits back"))?;
        s.synchronize().map_err(drv("the dense forward pass"))?;
        self.logits_len = n;
        Ok(logits)
    }

    fn backward_inner(&mut self, labels: &[f32]) -> Result<DenseBackward, DlrmError> {
        let (batch, tables, dim) = (self.batch, self.tables, self.dim);
        let buf = self
            .buf
            .as_mut()
            .expect("a forward pass allocated the buffers");
        let s = &self.dev.stream;
        s.memcpy_htod(labels, &mut buf.labels.slice_mut(0..batch))
            .map_err(drv("copying the labels to the GPU"))?;
        let ev = &self.events;
        let rec = |i: usize| ev[i].record(s).map_err(drv("recording a CUDA event"));
        rec(4)?;
        let b64 = batch as i64;
        {
            let logits = buf.top.last().expect("layers");
            launch!(&self.dev, bce, grid(batch, BLOCK);
                logits, &buf.labels, &mut buf.scratch[0], &mut buf.terms, &b64)?;
        }
        rec(5)?;
        let cur = mlp_backward(
            &self.dev,
            &self.top,
            &self.params,
            &mut self.grads,
            &buf.top,
            &mut buf.scratch,
            0,
            batch,
            true,
        )?;
        rec(6)?;
        let (t64, d64) = (tables as i64, dim as i64);
        {
            let x = buf.bottom.last().expect("layers");
            let [s0, s1] = &mut buf.scratch;
            let (dz, dx) = if cur == 0 { (s0, s1) } else { (s1, s0) };
            let cfg = grid(batch * (tables + 1) * dim, BLOCK);
            match self.interaction {
                Interaction::Dot => launch!(&self.dev, dot_backward, cfg;
                    x, &buf.pooled, &*dz, dx, &mut buf.dpooled, &b64, &t64, &d64)?,
                Interaction::Cat => launch!(&self.dev, cat_backward, cfg;
                    &*dz, dx, &mut buf.dpooled, &b64, &t64, &d64)?,
            }
        }
        rec(7)?;
        // The bottom MLP's input is data: no input gradient.
        mlp_backward(
            &self.dev,
            &self.bottom,
            &self.params,
            &mut self.grads,
            &buf.bottom,
            &mut buf.scratch,
            1 - cur,
            batch,
            false,
        )?;
        rec(8)?;
        let mut terms = vec![0.0f64; batch];
        s.memcpy_dtoh(&buf.terms.slice(0..batch), &mut terms[..])
            .map_err(drv("copying the loss back"))?;
        let per = batch * dim;
        self.staging.resize(tables * per, 0.0);
        if per > 0 && tables > 0 {
            s.memcpy_dtoh(&buf.dpooled.slice(0..tables * per), &mut self.staging[..])
                .map_err(drv("copying the pooled gradients back"))?;
        }
        s.synchronize().map_err(drv("the dense backward pass"))?;
        let loss = terms.iter().sum::<f64>() / batch.max(1) as f64;
        let dpooled = self
            .staging
            .chunks(per.max(1))
            .take(tables)
            .map(<[f32]>::to_vec)
            .collect();
        Ok(DenseBackward { loss, dpooled })
    }

    fn step_inner(&mut self, lr: f32) -> Result<(), DlrmError> {
        self.record(9)?;
        let n = self.n_params as i64;
        let cfg = grid(self.n_params, BLOCK);
        match (self.optimizer, &mut self.accum) {
            (DenseOptimizer::Sgd, _) => {
                launch!(&self.dev, sgd, cfg; &mut self.params, &self.grads, &lr, &n)?
            }
            (DenseOptimizer::Adagrad { eps, .. }, Some(a)) => {
                launch!(&self.dev, adagrad, cfg; &mut self.params, &self.grads, a, &lr, &eps, &n)?
            }
            (DenseOptimizer::Adagrad { .. }, None) => {
                return Err(cuda_err("Adagrad without accumulators"));
            }
        }
        self.record(10)?;
        Ok(())
    }
}

/// Forward through `m`: `acts[0]` holds the input (`batch` rows); each
/// layer's output goes to the next activation.
fn mlp_forward(
    dev: &Dev,
    m: &MlpShape,
    params: &CudaSlice<f32>,
    acts: &mut [CudaSlice<f32>],
    batch: usize,
) -> Result<(), DlrmError> {
    for (i, l) in m.layers.iter().enumerate() {
        let (done, rest) = acts.split_at_mut(i + 1);
        let (x, y) = (&done[i], &mut rest[0]);
        // y (B x out) = x (B x in) W^T, W stored out x in.
        dev.gemm(
            batch,
            l.outputs,
            l.inputs,
            x,
            false,
            &params.slice(l.w_range()),
            true,
            y,
        )?;
        let (rows, cols, relu) = (batch as i64, l.outputs as i64, i32::from(m.relu(i)));
        let bias = params.slice(l.b_range());
        launch!(dev, bias_act, grid(batch * l.outputs, BLOCK); y, &bias, &rows, &cols, &relu)?;
    }
    Ok(())
}

/// Backward through `m` from the output gradient in `scratch[start]`; the
/// layers' gradients go to their places in `grads`. Returns which scratch
/// buffer holds the input gradient when `input_grad`.
#[allow(clippy::too_many_arguments)]
fn mlp_backward(
    dev: &Dev,
    m: &MlpShape,
    params: &CudaSlice<f32>,
    grads: &mut CudaSlice<f32>,
    acts: &[CudaSlice<f32>],
    scratch: &mut [CudaSlice<f32>; 2],
    start: usize,
    batch: usize,
    input_grad: bool,
) -> Result<usize, DlrmError> {
    let mut cur = start;
    for (i, l) in m.layers.iter().enumerate().rev() {
        let [s0, s1] = &mut *scratch;
        let (g, next) = if cur == 0 { (s0, s1) } else { (s1, s0) };
        let n = (batch * l.outputs) as i64;
        if m.relu(i) {
            launch!(dev, relu_backward, grid(batch * l.outputs, BLOCK);
                &mut *g, &acts[i + 1], &n)?;
        }
        {
            let (rows, cols) = (batch as i64, l.outputs as i64);
            let mut db = grads.slice_mut(l.b_range());
            let cfg = LaunchConfig {
                grid_dim: (l.outputs.div_ceil(32).clamp(1, MAX_BLOCKS) as u32, 1, 1),
                block_dim: (32, COLSUM_BY, 1),
                shared_mem_bytes: 0,
            };
            launch!(dev, bias_grad, cfg; &*g, &mut db, &rows, &cols)?;
        }
        // dW (out x in) = g^T (out x B) X (B x in); g stored B x out.
        dev.gemm(
            l.outputs,
            l.inputs,
            batch,
            &*g,
            true,
            &acts[i],
            false,
            &mut grads.slice_mut(l.w_range()),
        )?;
        if i > 0 || input_grad {
            // dX (B x in) = g (B x out) W (out x in).
            dev.gemm(
                batch,
                l.inputs,
                l.outputs,
                &*g,
                false,
                &params.slice(l.w_range()),
                false,
                next,
            )?;
            cur = 1 - cur;
        }
    }
    Ok(cur)
}

impl DenseBackend for CudaDense {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn forward(
        &mut self,
        dense: &[f32],
        pooled: &[Vec<f32>],
        batch: usize,
    ) -> Result<Vec<f32>, DlrmError> {
        self.check_deferred()?;
        crate::dense::check_forward_inputs(
            dense,
            pooled,
            batch,
            self.bottom.input_width(),
            self.dim,
        )?;
        let w = self.interaction.output_width(pooled.len(), self.dim);
        if w != self.top.input_width() {
            return Err(DlrmError::Config(format!(
                "{} pooled embeddings of width {} give an interaction of width {w}; the top MLP takes {}",
                pooled.len(),
                self.dim,
                self.top.input_width()
            )));
        }
        if i32::try_from(batch).is_err() {
            return Err(DlrmError::Config(format!(
                "batch of {batch} samples exceeds cuBLAS's int range"
            )));
        }
        self.forwarded = false;
        self.pending = false;
        self.timed = [false; 3];
        self.batch = batch;
        self.tables = pooled.len();
        if batch == 0 {
            self.logits_len = 0;
            self.forwarded = true;
            return Ok(Vec::new());
        }
        let logits = self.forward_inner(dense, pooled, batch)?;
        self.forwarded = true;
        self.timed[0] = true;
        Ok(logits)
    }

    fn backward(&mut self, labels: &[f32]) -> Result<DenseBackward, DlrmError> {
        self.check_deferred()?;
        let batch = self.batch;
        if !self.forwarded || labels.len() != batch || self.logits_len != batch {
            return Err(DlrmError::Config(format!(
                "backward needs {} labels after a forward pass of {batch} samples, found {}",
                self.logits_len,
                labels.len()
            )));
        }
        self.pending = false;
        self.timed[1] = false;
        self.timed[2] = false;
        if batch == 0 {
            return Ok(DenseBackward {
                loss: 0.0,
                dpooled: vec![Vec::new(); self.tables],
            });
        }
        let back = self.backward_inner(labels)?;
        self.pending = true;
        self.timed[1] = true;
        Ok(back)
    }

    fn step(&mut self, lr: f32) {
        if !std::mem::take(&mut self.pending) {
            return;
        }
        match self.step_inner(lr) {
            Ok(()) => self.timed[2] = true,
            Err(e) => self.deferred = Some(e.to_string()),
        }
    }

    /// # Panics
    /// If the parameters cannot be read back from the device (see
    /// [`CudaDense::try_params`]).
    fn params(&self) -> DenseParams {
        self.try_params()
            .unwrap_or_else(|e| panic!("CudaDense::params: {e}"))
    }

    fn measured_times(&self) -> Result<Option<DenseTimes>, DlrmError> {
        if !self.timed[0] {
            return Ok(None);
        }
        self.last_times_ns().map(Some)
    }

    fn device_name(&self) -> Option<String> {
        Some(self.gpu.name().to_string())
    }
}
