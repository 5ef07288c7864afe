//! The dense path of DLRM (bottom MLP, interaction, top MLP, loss) behind one
//! backend trait, so that a GPU backend can replace the CPU one without the
//! trainer noticing. The dense side never sees embedding tables: it takes the
//! pooled embeddings in and gives their gradients back.

use serde::{Deserialize, Serialize};

use crate::interaction::Interaction;
use crate::mlp::{LinearGrad, Mlp, MlpCache};

use crate::model::DlrmConfig;
use crate::{DlrmError, loss};

/// The dense optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DenseOptimizer {
    /// `w -= lr * g`.
    Sgd,
    /// As PyTorch's Adagrad: `a += g^2; w -= lr * g / (sqrt(a) + eps)`.
    Adagrad { eps: f32, initial_accumulator: f32 },
}

impl DenseOptimizer {
    /// `sgd` or `adagrad` (PyTorch's defaults: eps 1e-10, accumulator 0).
    pub fn parse(name: &str) -> Result<Self, DlrmError> {
        match name.to_ascii_lowercase().as_str() {
            "sgd" => Ok(DenseOptimizer::Sgd),
            "adagrad" => Ok(DenseOptimizer::Adagrad {
                eps: 1e-10,
                initial_accumulator: 0.0,
            }),
            _ => Err(DlrmError::Config(format!(
                "unknown dense optimizer `{name}`; expected sgd or adagrad"
            ))),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            DenseOptimizer::Sgd => "sgd",
            DenseOptimizer::Adagrad { .. } => "adagrad",
        }
    }

    /// Bytes one update of one parameter reads and writes: SGD reads the
    /// weight and its gradient and writes the weight; Adagrad also reads and
    /// writes the weight's accumulator.
    pub fn step_bytes_per_param(&self) -> usize {
        match self {
            DenseOptimizer::Sgd => 12,
            DenseOptimizer::Adagrad { .. } => 20,
        }
    }
}

/// What one dense backward pass returns.
#[derive(Clone, Debug)]
pub struct DenseBackward {
    /// Mean binary cross-entropy of the batch.
    pub loss: f64,
    /// Gradient of the loss with respect to each table's pooled output
    /// (`B x dim`, row-major).
    pub dpooled: Vec<Vec<f32>>,
}

/// Every dense parameter, flattened layer by layer (bottom, then top; each
/// layer's weights then biases), for comparisons and checkpoints.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseParams {
    pub values: Vec<f32>,
}

/// The inputs of [`DenseBackend::forward`] fit a model whose bottom MLP takes
/// `dense_width` features and whose tables have `dim`-wide rows; shared by
/// the backends so that they refuse the same inputs with the same words.
pub fn check_forward_inputs(
    dense: &[f32],
    pooled: &[Vec<f32>],
    batch: usize,
    dense_width: usize,
    dim: usize,
) -> Result<(), DlrmError> {
    if dense.len() != batch * dense_width {
        return Err(DlrmError::Config(format!(
            "dense input holds {} values; the bottom MLP takes {batch} x {dense_width}",
            dense.len()
        )));
    }
    if let Some((t, p)) = pooled
        .iter()
        .enumerate()
        .find(|(_, p)| p.len() != batch * dim)
    {
        return Err(DlrmError::Config(format!(
            "pooled embedding of table {t} holds {} values; expected {batch} x {dim}",
            p.len()
        )));
    }
    Ok(())
}

/// The dense path of one DLRM: a backend runs it where it likes (CPU here, a
/// GPU in the `cuda` backend) and keeps what backward needs.
pub trait DenseBackend: Send {
    /// Short name for reports (`cpu`, `cuda`).
    fn name(&self) -> &'static str;
    /// Forward pass: dense features (`B x num_dense`) and the pooled embeddings
    /// of every table; returns the logits (`B`).
    fn forward(
        &mut self,
        dense: &[f32],
        pooled: &[Vec<f32>],
        batch: usize,
    ) -> Result<Vec<f32>, DlrmError>;
    /// Loss and gradients of the last forward pass; the parameter gradients
    /// stay inside the backend until [`DenseBackend::step`].
    fn backward(&mut self, labels: &[f32]) -> Result<DenseBackward, DlrmError>;
    /// Applies the last backward's gradients with learning rate `lr`.
    fn step(&mut self, lr: f32);
    /// A copy of every parameter.
    fn params(&self) -> DenseParams;
    /// Device time of the last forward, backward and step, measured on the
    /// device that ran them (the `cuda` backend's CUDA events); `None` for a
    /// backend whose dense time is modelled instead (the CPU one).
    fn measured_times(&self) -> Result<Option<DenseTimes>, DlrmError> {
        Ok(None)
    }
    /// The device the dense path runs on, for reports (`None`: this CPU).
    fn device_name(&self) -> Option<String> {
        None
    }
}

/// Device time of one dense step by part, nanoseconds (measured with events
/// on the device's stream; host-device copies of inputs and outputs are not
/// included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DenseTimes {
    pub bottom_forward_ns: f64,
    pub interaction_forward_ns: f64,
    pub top_forward_ns: f64,
    pub loss_ns: f64,
    pub top_backward_ns: f64,
    pub interaction_backward_ns: f64,
    pub bottom_backward_ns: f64,
    /// The optimizer's update of every dense parameter.
    pub step_ns: f64,
}

impl DenseTimes {
    pub fn forward_ns(&self) -> f64 {
        self.bottom_forward_ns + self.interaction_forward_ns + self.top_forward_ns
    }

    pub fn backward_ns(&self) -> f64 {
        self.loss_ns + self.top_backward_ns + self.interaction_backward_ns + self.bottom_backward_ns
    }

    pub fn total_ns(&self) -> f64 {
        self.forward_ns() + self.backward_ns() + self.step_ns
    }
}

/// The CPU dense backend.
pub struct CpuDense {
    pub bottom: Mlp,
    pub top: Mlp,
    pub interaction: Interaction,
    pub dim: usize,
    pub optimizer: DenseOptimizer,
    /// Adagrad accumulators, shaped as the parameters (empty for SGD).
    accum: Vec<f32>,
    bottom_cache: MlpCache,
    top_cache: MlpCache,
    x: Vec<f32>,
    pooled: Vec<Vec<f32>>,
    logits: Vec<f32>,
    grads_bottom: Vec<LinearGrad>,
    grads_top: Vec<LinearGrad>,
    /// The gradients hold a backward pass not yet applied.
    pending: bool,
}

impl CpuDense {
    /// The Adagrad accumulators, shaped as [`DenseBackend::params`] (empty
    /// for SGD).
    pub fn accumulators(&self) -> &[f32] {
        &self.accum
    }

    /// The model's MLPs, initialised as [`crate::Dlrm::new`] does for `seed`.
    pub fn new(
        config: &DlrmConfig,
        optimizer: DenseOptimizer,
        seed: u64,
    ) -> Result<Self, DlrmError> {
        config.validate()?;
        let bottom = Mlp::new(&config.bottom, true, seed ^ 0xb0);
        let top = Mlp::new(&config.top_arch(), false, seed ^ 0x70);
        Ok(Self::from_mlps(
            bottom,
            top,
            config.interaction,
            config.dim,
            optimizer,
        ))
    }

    pub fn from_mlps(
        bottom: Mlp,
        top: Mlp,
        interaction: Interaction,
        dim: usize,
        optimizer: DenseOptimizer,
    ) -> Self {
        let n = bottom.parameters() + top.parameters();
        let accum = match optimizer {
            DenseOptimizer::Sgd => Vec::new(),
            DenseOptimizer::Adagrad {
                initial_accumulator,
                ..
            } => vec![initial_accumulator; n],
        };
        CpuDense {
            bottom,
            top,
            interaction,
            dim,
            optimizer,
            accum,
            bottom_cache: MlpCache::default(),
            top_cache: MlpCache::default(),
            x: Vec::new(),
            pooled: Vec::new(),
            logits: Vec::new(),
            grads_bottom: Vec::new(),
            grads_top: Vec::new(),
            pending: false,
        }
    }
}

impl DenseBackend for CpuDense {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn forward(
        &mut self,
        dense: &[f32],
        pooled: &[Vec<f32>],
        batch: usize,
    ) -> Result<Vec<f32>, DlrmError> {
        check_forward_inputs(dense, pooled, batch, self.bottom.input_width(), self.dim)?;
        self.bottom
            .forward_into(dense, batch, &mut self.bottom_cache);
        self.x.clear();
        self.x.extend_from_slice(self.bottom_cache.output());
        let z = self.interaction.forward(&self.x, pooled, batch, self.dim);
        self.top.forward_into(&z, batch, &mut self.top_cache);
        self.logits.clear();
        self.logits.extend_from_slice(self.top_cache.output());
        self.pooled.clear();
        self.pooled.extend(pooled.iter().cloned());
        self.pending = false;
        Ok(self.logits.clone())
    }

    fn backward(&mut self, labels: &[f32]) -> Result<DenseBackward, DlrmError> {
        let batch = self.top_cache.batch;
        if labels.len() != batch || self.logits.len() != batch {
            return Err(DlrmError::Config(format!(
                "backward needs {} labels after a forward pass of {batch} samples, found {}",
                self.logits.len(),
                labels.len()
            )));
        }
        let (loss, dlogits) = loss::bce_with_logits(&self.logits, labels);
        self.top
            .backward_into(&mut self.top_cache, &dlogits, true, &mut self.grads_top);
        let dz = self
            .top_cache
            .input_grad()
            .expect("asked for the input gradient");
        let (dx, dpooled) = self
            .interaction
            .backward(&self.x, &self.pooled, dz, batch, self.dim);
        // The bottom MLP's input is data: no input gradient.
        self.bottom
            .backward_into(&mut self.bottom_cache, &dx, false, &mut self.grads_bottom);
        self.pending = true;
        Ok(DenseBackward { loss, dpooled })
    }

    fn step(&mut self, lr: f32) {
        if !std::mem::take(&mut self.pending) {
            return;
        }
        let (gb, gt) = (&self.grads_bottom, &self.grads_top);
        let mut k = 0usize;
        let opt = self.optimizer;
        let accum = &mut self.accum;
        for (m, gs) in [(&mut self.bottom, gb), (&mut self.top, gt)] {
            for (l, g) in m.layers.iter_mut().zip(gs) {
                for (p, d) in [(&mut l.w, &g.w), (&mut l.b, &g.b)] {
                    match opt {
                        DenseOptimizer::Sgd => {
                            p.iter_mut().zip(d.iter()).for_each(|(w, d)| *w -= lr * d)
                        }
                        DenseOptimizer::Adagrad { eps, .. } => {
                            let a = &mut accum[k..k + p.len()];
                            for ((w, d), a) in p.iter_mut().zip(d.iter()).zip(a.iter_mut()) {
                                *a += d * d;
                                *w -= lr * d / (a.sqrt() + eps);
                            }
                        }
                    }
                    k += p.len();
                }
            }
        }
    }

    fn params(&self) -> DenseParams {
        let mut values = Vec::with_capacity(self.bottom.parameters() + self.top.parameters());
        for m in [&self.bottom, &self.top] {
            for l in &m.layers {
                values.extend_from_slice(&l.w);
                values.extend_from_slice(&l.b);
            }
        }
        DenseParams { values }
    }
}
