//! The training loop: data in, the embedding strategy and the dense backend
//! run a step, the timeline of the step is composed, metrics and records go
//! out to an observer (the CLI writes them to the run directory as they
//! come, so an interrupted run keeps what it did).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use nmpsim_kernels::{EmbeddingTable, Optimizer};
use nmpsim_traces::Batch;
use serde::{Deserialize, Serialize};

use crate::dense::{DenseBackend, DenseOptimizer, DenseParams};
use crate::embedding::{EmbeddingStrategy, HostTimes, StepCtx};
use crate::gpu::{DenseModel, GpuPreset, model_dense};
use crate::schedule::LrSchedule;
use crate::timeline::{MAIN, Resource, Source, Stage, StepTimeline};
use crate::{DlrmConfig, DlrmError, Interaction, loss};

/// Everything a run needs besides the data and the strategy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub model: DlrmConfig,
    pub batch: usize,
    pub iters: u64,
    pub seed: u64,
    /// Base learning rate of the dense and the embedding optimizer.
    pub lr: f32,
    pub dense_optimizer: DenseOptimizer,
    pub embedding_optimizer: Optimizer,
    pub schedule: LrSchedule,
    /// Print (and record) training metrics every this many iterations.
    pub print_every: u64,
    /// Evaluate on the test batches every this many iterations (0: at the end only).
    pub test_every: u64,
}

impl TrainConfig {
    /// `model` trained with plain SGD at rate `lr` for both the MLPs and the
    /// tables, no schedule, seed 1, a log line every tenth of the run and
    /// one evaluation at the end (`nmpsim train`'s defaults, without its
    /// flags).
    pub fn sgd(model: DlrmConfig, batch: usize, iters: u64, lr: f32) -> Self {
        TrainConfig {
            model,
            batch,
            iters,
            seed: 1,
            lr,
            dense_optimizer: DenseOptimizer::Sgd,
            embedding_optimizer: Optimizer::Sgd { lr },
            schedule: LrSchedule::default(),
            print_every: (iters / 10).max(1),
            test_every: 0,
        }
    }

    /// Host bytes a run of this config takes at most, counted without
    /// overflow before anything is allocated: the embedding tables with
    /// their optimizer state, the MLPs with their gradients and optimizer
    /// state, `test_batches` test batches (kept whole) of at most `bag`
    /// lookups per bag, and one step's buffers.
    pub fn memory_bytes(&self, test_batches: usize, bag: u64) -> u128 {
        let m = &self.model;
        let state = self.embedding_optimizer.state_values_per_row(m.dim) as u128;
        let tables: u128 = m
            .table_rows
            .iter()
            .map(|&r| (r as u128).saturating_mul(m.dim as u128 + state))
            .fold(0, u128::saturating_add);
        let layers = |w: &[usize]| -> u128 {
            w.windows(2)
                .map(|p| (p[0] as u128).saturating_mul(p[1] as u128) + p[1] as u128)
                .fold(0, u128::saturating_add)
        };
        // (Weights, their gradients and up to two optimizer values each.)
        let mlps = layers(&m.bottom)
            .saturating_add(layers(&m.top))
            .saturating_mul(4);
        let per_sample = (m.table_rows.len() as u128)
            .saturating_mul(bag as u128 * 2 + 1)
            .saturating_add(m.bottom[0] as u128 + 1);
        let test = (test_batches as u128)
            .saturating_mul(self.batch as u128)
            .saturating_mul(per_sample);
        // One step's buffers: per table the pooled outputs and their gradients,
        // the expanded (or casted) gradients, a row per lookup, the lookups'
        // indices and sort keys; the MLPs' activations, pre-activations and
        // gradients per sample. (Measured peak: rm2 at batch 8192, 1000 rows,
        // 7.6 GB, against 8.3 GB counted.)
        let b = self.batch as u128;
        let lookups = b.saturating_mul(bag as u128);
        let per_table = lookups
            .saturating_mul(m.dim as u128)
            .saturating_add(b.saturating_mul(m.dim as u128).saturating_mul(2))
            .saturating_add(lookups.saturating_mul(4));
        let widths: u128 = m.bottom.iter().chain(&m.top).map(|&w| w as u128).sum();
        let step = (m.table_rows.len() as u128)
            .saturating_mul(per_table)
            .saturating_add(b.saturating_mul(widths).saturating_mul(3));
        let values = tables
            .saturating_add(mlps)
            .saturating_add(test)
            .saturating_add(step);
        values.saturating_mul(4)
    }

    pub fn validate(&self) -> Result<(), DlrmError> {
        self.model.validate()?;
        self.schedule.validate()?;
        self.embedding_optimizer.validate()?;
        if self.batch == 0 {
            return Err(DlrmError::Config("batch size must be at least 1".into()));
        }
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return Err(DlrmError::Config(format!(
                "learning rate must be a non-negative number, found {}",
                self.lr
            )));
        }
        Ok(())
    }
}

/// One training iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterRecord {
    pub iteration: u64,
    pub epoch: u64,
    pub batch_size: u64,
    pub loss: f64,
    pub accuracy: f64,
    pub lr: f32,
    /// Wall-clock time of the step on this machine (measured), simulator
    /// time excluded.
    pub wall_ns: f64,
    /// Host wall time per primitive (measured), including the dense path.
    pub host: HostTimes,
    /// The modelled system's iteration (Fig. 9 composition).
    pub timeline: StepTimeline,
    pub iteration_ns: f64,
}

/// One evaluation on the test batches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    pub iteration: u64,
    pub samples: u64,
    pub loss: f64,
    pub accuracy: f64,
    /// `None` when the test labels hold one class only.
    pub auc: Option<f64>,
}

/// Receives records as training goes.
pub trait Observer {
    fn iteration(&mut self, _rec: &IterRecord) -> Result<(), DlrmError> {
        Ok(())
    }
    fn eval(&mut self, _rec: &EvalRecord) -> Result<(), DlrmError> {
        Ok(())
    }
    /// After the last iteration (`iterations` of them ran), before the final
    /// evaluation.
    fn finished(&mut self, _iterations: u64) -> Result<(), DlrmError> {
        Ok(())
    }
    /// Asked before every iteration; `true` ends the run as interrupted.
    fn should_stop(&self) -> bool {
        false
    }
}

/// An observer that keeps nothing.
pub struct Quiet;
impl Observer for Quiet {}

/// A source of training batches.
pub trait DataSource {
    /// The next training batch; `None` when the data ends.
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>>;
    /// Passes over the data completed before the batch last returned.
    fn epoch(&self) -> u64 {
        0
    }
    /// Told of every step on the batch last returned; `true` when that batch
    /// ended a schedule whose loss the source wants (FAE's shuffle
    /// scheduler): the trainer then evaluates and calls
    /// [`DataSource::schedule_loss`].
    fn after_step(&mut self, _rec: &IterRecord) -> bool {
        false
    }
    /// The test loss after a schedule, or `None` when the run has no test data.
    fn schedule_loss(&mut self, _test_loss: Option<f64>) {}
}

impl DataSource for crate::TeacherData {
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>> {
        Some(Ok(crate::TeacherData::next_batch(self)))
    }
}

impl<I: Iterator<Item = Result<Batch, DlrmError>>> DataSource for std::iter::Peekable<I> {
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>> {
        self.next()
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Completed,
    /// The data ran out before `iters`.
    DataExhausted,
    /// Stopped on request (Ctrl-C).
    Interrupted,
    /// Stopped by an error (reported beside the records so far).
    Failed,
}

impl Status {
    /// Its name, as `results.json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::DataExhausted => "data-exhausted",
            Status::Interrupted => "interrupted",
            Status::Failed => "failed",
        }
    }
}

/// The outcome of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainOutcome {
    pub status: Status,
    pub iterations: u64,
    pub samples: u64,
    pub last_eval: Option<EvalRecord>,
}

/// A DLRM being trained: an embedding strategy and a dense backend.
pub struct Trainer {
    pub config: TrainConfig,
    pub embedding: Box<dyn EmbeddingStrategy>,
    pub dense: Box<dyn DenseBackend>,
    pub gpu: GpuPreset,
    /// The dense path's GPU time per iteration of the configured batch size
    /// (modelled; the timeline uses it unless the dense backend measures its
    /// own time).
    pub dense_model: DenseModel,
    /// The same for the last batch of another size (an epoch's partial last
    /// batch): its size and model.
    other_batch: Option<(usize, DenseModel)>,
    /// Set to stop after the current iteration.
    pub stop: Arc<AtomicBool>,
    checked: bool,
    /// The last step's timeline time (ns), for [`StepCtx::previous_ns`].
    previous_ns: f64,
}

fn slice_or_empty(v: &Option<Vec<f32>>) -> &[f32] {
    v.as_deref().unwrap_or(&[])
}

impl Trainer {
    pub fn new(
        config: TrainConfig,
        embedding: Box<dyn EmbeddingStrategy>,
        dense: Box<dyn DenseBackend>,
        gpu: GpuPreset,
    ) -> Result<Self, DlrmError> {
        config.validate()?;
        let dense_model = Self::model_dense_at(&config, &gpu, config.batch);
        Ok(Trainer {
            config,
            embedding,
            dense,
            gpu,
            dense_model,
            other_batch: None,
            stop: Arc::new(AtomicBool::new(false)),
            checked: false,
            previous_ns: 0.0,
        })
    }

    /// The modelled dense path of `config`'s model at batch size `batch`.
    fn model_dense_at(config: &TrainConfig, gpu: &GpuPreset, batch: usize) -> DenseModel {
        let m = &config.model;
        model_dense(
            gpu,
            &m.bottom,
            &m.top_arch(),
            m.table_rows.len(),
            m.dim,
            m.interaction == Interaction::Dot,
            batch,
            config.dense_optimizer.step_bytes_per_param(),
        )
    }

    /// Checks a batch against the model before it is used (see
    /// [`DlrmConfig::check_batch`]); labels must be present.
    pub fn check_batch(&self, batch: &Batch) -> Result<(), DlrmError> {
        self.config.model.check_batch(batch)?;
        if batch.labels.as_ref().map_or(0, Vec::len) != batch.batch_size() {
            return Err(DlrmError::Config(
                "the data has no labels to train on".into(),
            ));
        }
        Ok(())
    }

    /// One step on `batch`.
    pub fn step(&mut self, iteration: u64, batch: &Batch) -> Result<IterRecord, DlrmError> {
        if !self.checked {
            self.check_batch(batch)?;
            self.checked = true;
        }
        let b = batch.batch_size();
        let lr = self.config.schedule.lr_at(self.config.lr, iteration);
        let mut timeline = StepTimeline::default();
        let mut host = HostTimes::default();
        let started = Instant::now();
        let sim_before = crate::pooltime::sim_wall_s();
        let mut ctx = StepCtx {
            iteration,
            previous_ns: self.previous_ns,
            optimizer: self.config.embedding_optimizer.with_lr(lr),
            timeline: &mut timeline,
            host: &mut host,
        };
        let pooled = self.embedding.forward(batch, &mut ctx)?;
        let t0 = Instant::now();
        let labels = slice_or_empty(&batch.labels);
        let logits = self
            .dense
            .forward(slice_or_empty(&batch.dense), &pooled, b)?;
        let back = self.dense.backward(labels)?;
        self.dense.step(lr);
        ctx.host
            .add("mlp+interaction", t0.elapsed().as_nanos() as f64);
        self.embedding.backward(batch, &back.dpooled, &mut ctx)?;
        let sim_s = crate::pooltime::sim_wall_s() - sim_before;
        let wall_ns = (started.elapsed().as_secs_f64() - sim_s).max(0.0) * 1e9;
        match self.dense.measured_times()? {
            // The dense path ran on a device that timed it: measured.
            Some(t) => {
                for (primitive, what, ns) in [
                    ("mlp", "bottom forward", t.bottom_forward_ns),
                    ("interaction", "forward", t.interaction_forward_ns),
                    ("mlp", "top forward", t.top_forward_ns),
                    ("mlp", "loss", t.loss_ns),
                    ("mlp", "top backward", t.top_backward_ns),
                    ("interaction", "backward", t.interaction_backward_ns),
                    ("mlp", "bottom backward", t.bottom_backward_ns),
                    ("mlp", "optimizer step", t.step_ns),
                ] {
                    Self::push_dense(&mut timeline, Source::Measured, primitive, what, ns);
                }
            }
            None => {
                // The model follows the batch's shape: an epoch's last batch
                // may be smaller than the others.
                if b != self.config.batch && self.other_batch.as_ref().is_none_or(|(n, _)| *n != b)
                {
                    self.other_batch = Some((b, Self::model_dense_at(&self.config, &self.gpu, b)));
                }
                let d = match &self.other_batch {
                    Some((n, d)) if *n == b => d,
                    _ => &self.dense_model,
                };
                Self::push_modelled_dense(d, &mut timeline);
            }
        }
        let iteration_ns = timeline.iteration_ns();
        self.previous_ns = iteration_ns;
        Ok(IterRecord {
            iteration,
            epoch: 0,
            batch_size: b as u64,
            loss: back.loss,
            accuracy: loss::accuracy(&logits, labels),
            lr,
            wall_ns,
            host,
            timeline,
            iteration_ns,
        })
    }

    /// The dense path's events from the GPU roofline model.
    fn push_modelled_dense(d: &DenseModel, timeline: &mut StepTimeline) {
        let d = &d.times;
        for (what, ns) in [
            ("bottom forward", d.bottom_forward_ns),
            ("top forward", d.top_forward_ns),
            ("loss", d.loss_ns),
            ("top backward", d.top_backward_ns),
            ("bottom backward", d.bottom_backward_ns),
            ("optimizer step", d.step_ns),
        ] {
            Self::push_dense(timeline, Source::Modelled, "mlp", what, ns);
        }
        for (what, ns) in [
            ("forward", d.interaction_forward_ns),
            ("backward", d.interaction_backward_ns),
        ] {
            Self::push_dense(timeline, Source::Modelled, "interaction", what, ns);
        }
    }

    /// One part of the dense path on the GPU, on the main lane.
    fn push_dense(
        timeline: &mut StepTimeline,
        source: Source,
        primitive: &str,
        what: &str,
        ns: f64,
    ) {
        timeline.push(
            primitive,
            what,
            Stage::Dense,
            MAIN,
            Resource::Gpu,
            source,
            ns,
            0,
        );
    }

    /// Loss, accuracy and exact AUC over `batches`.
    pub fn evaluate(&mut self, iteration: u64, batches: &[Batch]) -> Result<EvalRecord, DlrmError> {
        self.embedding.sync()?;
        let (mut scores, mut labels) = (Vec::new(), Vec::new());
        for batch in batches {
            self.check_batch(batch)?;
            let pooled = self.embedding.infer(batch)?;
            let logits =
                self.dense
                    .forward(slice_or_empty(&batch.dense), &pooled, batch.batch_size())?;
            scores.extend(logits);
            labels.extend_from_slice(slice_or_empty(&batch.labels));
        }
        let (l, _) = loss::bce_with_logits(&scores, &labels);
        Ok(EvalRecord {
            iteration,
            samples: scores.len() as u64,
            loss: l,
            accuracy: loss::accuracy(&scores, &labels),
            auc: loss::auc(&scores, &labels),
        })
    }

    /// Trains for `config.iters` iterations (or until the data ends or `stop`
    /// is set), evaluating on `test` as configured and at the end.
    pub fn train(
        &mut self,
        data: &mut dyn DataSource,
        test: &[Batch],
        obs: &mut dyn Observer,
    ) -> Result<TrainOutcome, DlrmError> {
        let mut status = Status::Completed;
        let mut samples = 0u64;
        let mut it = 0u64;
        let mut last_eval = None;
        while it < self.config.iters {
            if self.stop.load(Ordering::Relaxed) || obs.should_stop() {
                status = Status::Interrupted;
                break;
            }
            let batch = match data.next_batch() {
                Some(b) => b?,
                None => {
                    status = Status::DataExhausted;
                    break;
                }
            };
            let mut rec = self.step(it, &batch)?;
            rec.epoch = data.epoch();
            samples += batch.batch_size() as u64;
            obs.iteration(&rec)?;
            it += 1;
            if data.after_step(&rec) {
                let loss = if test.is_empty() {
                    None
                } else {
                    let e = self.evaluate(it, test)?;
                    let l = e.loss;
                    obs.eval(&e)?;
                    last_eval = Some(e);
                    Some(l)
                };
                data.schedule_loss(loss);
                continue;
            }
            if !test.is_empty()
                && self.config.test_every > 0
                && it % self.config.test_every == 0
                && it < self.config.iters
            {
                let e = self.evaluate(it, test)?;
                obs.eval(&e)?;
                last_eval = Some(e);
            }
        }
        obs.finished(it)?;
        // Tables kept elsewhere (an emulated pool on the GPU) come home.
        self.embedding.sync()?;
        // (Not again where the loop has just evaluated: a run that stops on
        // a test boundary.)
        let evaluated_here = last_eval
            .as_ref()
            .is_some_and(|e: &EvalRecord| e.iteration == it);
        if !test.is_empty() && it > 0 && !evaluated_here {
            let e = self.evaluate(it, test)?;
            obs.eval(&e)?;
            last_eval = Some(e);
        }
        Ok(TrainOutcome {
            status,
            iterations: it,
            samples,
            last_eval,
        })
    }

    pub fn dense_params(&self) -> DenseParams {
        self.dense.params()
    }

    pub fn tables(&self) -> &[EmbeddingTable] {
        self.embedding.tables()
    }
}

/// A trainer for one of Tensor Casting's system modes with the CPU dense
/// backend, initialised from `config.seed`. NMP modes need `pool`. (The
/// registry's [`crate::strategy::trainer`] builds any strategy.)
pub fn system_mode_trainer(
    config: TrainConfig,
    mode: crate::SystemMode,
    gpu: GpuPreset,
    pool: Option<Arc<std::sync::Mutex<crate::PoolTimer>>>,
) -> Result<Trainer, DlrmError> {
    config.validate()?;
    let m = &config.model;
    let dense = crate::CpuDense::new(m, config.dense_optimizer, config.seed)?;
    system_mode_trainer_with_dense(config, mode, gpu, pool, Box::new(dense))
}

/// [`system_mode_trainer`] with a given dense backend (for example a
/// `CudaDense` built from the same seed, whose dense times are then measured
/// instead of modelled).
pub fn system_mode_trainer_with_dense(
    config: TrainConfig,
    mode: crate::SystemMode,
    gpu: GpuPreset,
    pool: Option<Arc<std::sync::Mutex<crate::PoolTimer>>>,
    dense: Box<dyn DenseBackend>,
) -> Result<Trainer, DlrmError> {
    let ctx = crate::strategy::BuildCtx::new(&config, gpu, pool);
    crate::strategy::trainer(crate::strategy::find(mode.as_str())?, &ctx, dense)
}

/// [`system_mode_trainer_with_dense`] on a real GPU: casting runs on
/// `device` (measured), and the NMP-placed primitives run on `emulator` (the
/// GPU emulation of the pool) when the mode has any and an emulator is given.
#[cfg(feature = "cuda")]
pub fn system_mode_trainer_on_gpu(
    config: TrainConfig,
    mode: crate::SystemMode,
    gpu: GpuPreset,
    pool: Option<Arc<std::sync::Mutex<crate::PoolTimer>>>,
    dense: Box<dyn DenseBackend>,
    device: Arc<nmpsim_kernels::cuda::Gpu>,
    emulator: Option<Arc<std::sync::Mutex<crate::emulate::PoolEmulator>>>,
) -> Result<Trainer, DlrmError> {
    let mut ctx = crate::strategy::BuildCtx::new(&config, gpu, pool);
    ctx.device = Some(device);
    ctx.emulator = emulator;
    crate::strategy::trainer(crate::strategy::find(mode.as_str())?, &ctx, dense)
}
