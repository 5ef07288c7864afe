//! FAE's input processor and shuffle scheduler: the run's samples sorted
//! into hot mini-batches (every lookup hits a hot row) and cold ones, and
//! the order in which they are trained.
//!
//! A *schedule* is a phase of cold mini-batches followed by a phase of hot
//! ones. At rate `r` (percent) a phase holds `ceil(r / 100 x N)` mini-batches
//! of its kind, `N` being the mini-batches of that kind the run is expected
//! to train (its iterations times the share of samples of that kind seen so
//! far): `R(100)` trains every cold mini-batch before the hot ones, `R(1)`
//! switches after each hundredth. FAE starts at `R(50)` and, after each
//! schedule, halves the rate (down to `R(1)`) when the loss rose over the
//! previous schedule's, and doubles it (up to `R(100)`) when it fell `u = 4`
//! schedules running (its Eq. 7, whose `min` and `max` are printed the wrong
//! way round: the rate halves to at least `R(1)` and doubles to at most
//! `R(100)`). The loss is the test loss when the run has test data, else the
//! schedule's mean training loss.
//!
//! FAE preprocesses the whole input once, offline; this processor does it as
//! the run reads its input, holding the samples of the kind not being
//! trained until their phase (memory grows with the phase's length).

use std::collections::VecDeque;
use std::sync::Arc;

use nmpsim_traces::{Batch, TableBatch};
use serde::Serialize;

use super::HotPlan;
use crate::DlrmError;
use crate::trainer::{DataSource, IterRecord};

/// How hot and cold mini-batches are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScheduleKind {
    /// FAE's rate rule (Eq. 7).
    Adaptive,
    /// The starting rate throughout.
    Fixed,
    /// No split: the input's own mini-batches in their order (a mini-batch
    /// whose every lookup is hot still trains on the GPU).
    Off,
}

/// The shuffle scheduler's rule and its constants.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Schedule {
    pub kind: ScheduleKind,
    /// Starting rate, percent (FAE: 50).
    pub rate: f64,
    /// Least and greatest rate (FAE: 1 and 100).
    pub min_rate: f64,
    pub max_rate: f64,
    /// Schedules of falling loss before the rate doubles (FAE: 4).
    pub patience: u32,
}

impl Schedule {
    /// FAE's: adaptive from R(50), between R(1) and R(100), u = 4.
    pub fn fae() -> Self {
        Schedule {
            kind: ScheduleKind::Adaptive,
            rate: 50.0,
            min_rate: 1.0,
            max_rate: 100.0,
            patience: 4,
        }
    }

    /// A fixed rate.
    pub fn fixed(rate: f64) -> Self {
        Schedule {
            kind: ScheduleKind::Fixed,
            rate,
            ..Self::fae()
        }
    }

    /// The input's own order.
    pub fn off() -> Self {
        Schedule {
            kind: ScheduleKind::Off,
            ..Self::fae()
        }
    }

    /// The kind by name (`adaptive`, `fixed`, `off`).
    pub fn parse_kind(s: &str) -> Result<ScheduleKind, DlrmError> {
        match s.to_ascii_lowercase().as_str() {
            "adaptive" => Ok(ScheduleKind::Adaptive),
            "fixed" => Ok(ScheduleKind::Fixed),
            "off" => Ok(ScheduleKind::Off),
            _ => Err(DlrmError::Config(format!(
                "unknown schedule `{s}`; expected adaptive, fixed or off"
            ))),
        }
    }

    pub fn validate(&self, what: &str) -> Result<(), DlrmError> {
        let ok = |r: f64| r.is_finite() && r > 0.0 && r <= 100.0;
        if !(ok(self.rate) && ok(self.min_rate) && ok(self.max_rate)) {
            return Err(DlrmError::Config(format!(
                "{what}: rates {} (from {} to {}) must be percentages in (0, 100]",
                self.rate, self.min_rate, self.max_rate
            )));
        }
        if self.min_rate > self.max_rate || self.rate < self.min_rate || self.rate > self.max_rate {
            return Err(DlrmError::Config(format!(
                "{what}: the starting rate {} must lie between the least {} and the greatest {}",
                self.rate, self.min_rate, self.max_rate
            )));
        }
        if self.patience == 0 {
            return Err(DlrmError::Config(format!(
                "{what}: the patience must be at least 1 schedule"
            )));
        }
        Ok(())
    }
}

/// A mini-batch being assembled from samples of other batches.
pub(crate) struct Builder {
    tables: Vec<TableBatch>,
    dense: Option<Vec<f32>>,
    num_dense: usize,
    labels: Option<Vec<f32>>,
    samples: usize,
}

impl Builder {
    /// An empty batch with `b`'s tables, features and labels.
    pub(crate) fn like(b: &Batch) -> Self {
        Builder {
            tables: b
                .tables
                .iter()
                .map(|t| TableBatch {
                    num_rows: t.num_rows,
                    offsets: vec![0],
                    indices: Vec::new(),
                    weights: t.weights.as_ref().map(|_| Vec::new()),
                })
                .collect(),
            dense: b.dense.as_ref().map(|_| Vec::new()),
            num_dense: b.num_dense,
            labels: b.labels.as_ref().map(|_| Vec::new()),
            samples: 0,
        }
    }

    /// Appends sample `s` of `b`.
    pub(crate) fn push(&mut self, b: &Batch, s: usize) {
        for (out, tb) in self.tables.iter_mut().zip(&b.tables) {
            out.indices.extend_from_slice(tb.bag(s));
            if let (Some(w), Some(src)) = (&mut out.weights, tb.bag_weights(s)) {
                w.extend_from_slice(src);
            }
            out.offsets.push(out.indices.len() as u32);
        }
        if let (Some(d), Some(src)) = (&mut self.dense, &b.dense) {
            d.extend_from_slice(&src[s * b.num_dense..(s + 1) * b.num_dense]);
        }
        if let (Some(l), Some(src)) = (&mut self.labels, &b.labels) {
            l.push(src[s]);
        }
        self.samples += 1;
    }

    pub(crate) fn finish(self) -> Batch {
        Batch {
            tables: self.tables,
            dense: self.dense,
            num_dense: self.num_dense,
            labels: self.labels,
        }
    }
}

/// What a hot strategy builds its input from: its hot set, its schedule,
/// the run's batch and iterations, and where the statistics are kept.
pub struct InputPlan {
    pub plan: Arc<HotPlan>,
    pub schedule: Schedule,
    pub batch: usize,
    pub iters: u64,
    pub stats: Arc<std::sync::Mutex<InputStats>>,
}

impl InputPlan {
    /// For a run of `config` with `plan` and `schedule`.
    pub fn new(
        plan: Arc<HotPlan>,
        schedule: Schedule,
        config: &crate::trainer::TrainConfig,
    ) -> Self {
        InputPlan {
            plan,
            schedule,
            batch: config.batch,
            iters: config.iters,
            stats: Arc::default(),
        }
    }

    /// `inner` as hot and cold mini-batches (what a hot strategy's `input`
    /// returns), its statistics kept in `self.stats` as the run goes.
    pub fn source(&self, inner: Box<dyn DataSource>) -> Result<Box<dyn DataSource>, DlrmError> {
        let i = HotColdInput::new(
            inner,
            self.plan.clone(),
            self.schedule,
            self.batch,
            self.iters,
        )?;
        Ok(Box::new(i.share_stats(self.stats.clone())))
    }
}

/// What the processor did, for the run's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputStats {
    pub hot_samples: u64,
    pub cold_samples: u64,
    pub hot_batches: u64,
    pub cold_batches: u64,
    /// Schedules completed, and the rate after each.
    pub rates: Vec<f64>,
}

/// The most mini-batches of one kind held while the other is looked for.
pub(crate) const LOOK_AHEAD: u64 = 64;

const COLD: usize = 0;
const HOT: usize = 1;

/// The run's input as hot and cold mini-batches in the scheduler's order.
pub struct HotColdInput {
    inner: Box<dyn DataSource>,
    plan: Arc<HotPlan>,
    schedule: Schedule,
    batch: usize,
    /// Iterations the run trains (to size the phases).
    iters: u64,
    building: [Option<Builder>; 2],
    ready: [VecDeque<Batch>; 2],
    inner_done: bool,
    phase: usize,
    left: u64,
    started: bool,
    rate: f64,
    /// Whether the batch last returned ended a schedule.
    ended: bool,
    losses: Vec<f64>,
    falling: u32,
    train_loss: (f64, u64),
    pub stats: InputStats,
    /// A copy of `stats` for whoever asked, brought up to date at every batch.
    shared: Option<Arc<std::sync::Mutex<InputStats>>>,
}

impl HotColdInput {
    /// `inner`'s samples in `batch`-sample mini-batches, hot or cold by
    /// `plan`, ordered by `schedule`, for a run of `iters` iterations.
    pub fn new(
        inner: Box<dyn DataSource>,
        plan: Arc<HotPlan>,
        schedule: Schedule,
        batch: usize,
        iters: u64,
    ) -> Result<Self, DlrmError> {
        schedule.validate("schedule")?;
        if batch == 0 {
            return Err(DlrmError::Config("batch size must be at least 1".into()));
        }
        Ok(HotColdInput {
            inner,
            plan,
            schedule,
            batch,
            iters,
            building: [None, None],
            ready: [VecDeque::new(), VecDeque::new()],
            inner_done: false,
            phase: COLD,
            left: 0,
            started: false,
            rate: schedule.rate,
            ended: false,
            losses: Vec::new(),
            falling: 0,
            train_loss: (0.0, 0),
            stats: InputStats::default(),
            shared: None,
        })
    }

    /// Keeps a copy of the statistics in `to` as the run goes.
    pub fn share_stats(mut self, to: Arc<std::sync::Mutex<InputStats>>) -> Self {
        self.shared = Some(to);
        self
    }

    fn publish(&self) {
        if let Some(s) = &self.shared {
            if let Ok(mut g) = s.lock() {
                g.clone_from(&self.stats);
            }
        }
    }

    /// The current rate, percent.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Reads one batch of the input into the two kinds' queues.
    fn read_more(&mut self) -> Result<(), DlrmError> {
        let Some(b) = self.inner.next_batch() else {
            self.inner_done = true;
            for k in [COLD, HOT] {
                if let Some(part) = self.building[k].take().filter(|p| p.samples > 0) {
                    self.ready[k].push_back(part.finish());
                }
            }
            return Ok(());
        };
        let b = b?;
        for s in 0..b.batch_size() {
            let k = if self.plan.set.sample_is_hot(&b, s) {
                self.stats.hot_samples += 1;
                HOT
            } else {
                self.stats.cold_samples += 1;
                COLD
            };
            let part = self.building[k].get_or_insert_with(|| Builder::like(&b));
            part.push(&b, s);
            if part.samples == self.batch {
                let full = self.building[k].take().expect("just filled");
                self.ready[k].push_back(full.finish());
            }
        }
        Ok(())
    }

    /// The next mini-batch of kind `k`, reading the input as needed: not
    /// past the point where the other kind holds four times the mini-batches
    /// the run has left to train, or 64 (an endless input with few of kind
    /// `k` would otherwise be read forever, and held in memory).
    fn next_of(&mut self, k: usize) -> Result<Option<Batch>, DlrmError> {
        let emitted = self.stats.hot_batches + self.stats.cold_batches;
        let left = (4 * self.iters.saturating_sub(emitted).max(1)).min(LOOK_AHEAD);
        while self.ready[k].is_empty() && !self.inner_done {
            if self.ready[1 - k].len() as u64 >= left {
                break;
            }
            self.read_more()?;
        }
        Ok(self.ready[k].pop_front())
    }

    /// Mini-batches of kind `k` in a phase at the current rate.
    fn phase_len(&self, k: usize) -> u64 {
        let s = &self.stats;
        let seen = (s.hot_samples + s.cold_samples).max(1) as f64;
        let share = if k == HOT {
            s.hot_samples
        } else {
            s.cold_samples
        } as f64
            / seen;
        let expected = self.iters as f64 * share;
        ((self.rate / 100.0 * expected).ceil() as u64).max(1)
    }

    fn start_phase(&mut self, k: usize) {
        self.phase = k;
        self.left = self.phase_len(k);
    }

    fn next_scheduled(&mut self) -> Result<Option<Batch>, DlrmError> {
        if !self.started {
            self.started = true;
            // (The phase lengths need the shares: read one batch first.)
            self.read_more()?;
            self.start_phase(COLD);
        }
        for _ in 0..2 {
            if self.left == 0 {
                let next = 1 - self.phase;
                self.start_phase(next);
            }
            if let Some(b) = self.next_of(self.phase)? {
                self.left -= 1;
                if self.phase == HOT {
                    self.stats.hot_batches += 1;
                    // A schedule ends with its hot phase, or where the cold
                    // phase finds no hot batches left to follow it.
                    self.ended = self.left == 0;
                } else {
                    self.stats.cold_batches += 1;
                }
                return Ok(Some(b));
            }
            // This kind has run out: the rest is of the other kind.
            if self.phase == HOT {
                self.ended = true;
            }
            self.left = 0;
        }
        Ok(None)
    }

    /// FAE's Eq. 7 after a schedule whose loss was `loss`.
    fn adjust(&mut self, loss: f64) {
        let s = self.schedule;
        if s.kind == ScheduleKind::Adaptive {
            match self.losses.last() {
                Some(&prev) if loss > prev => {
                    self.rate = (self.rate / 2.0).max(s.min_rate);
                    self.falling = 0;
                }
                Some(&prev) if loss < prev => {
                    self.falling += 1;
                    if self.falling >= s.patience {
                        self.rate = (self.rate * 2.0).min(s.max_rate);
                        self.falling = 0;
                    }
                }
                _ => {}
            }
        }
        self.losses.push(loss);
        self.stats.rates.push(self.rate);
    }
}

impl DataSource for HotColdInput {
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>> {
        self.ended = false;
        if self.schedule.kind == ScheduleKind::Off {
            return self.inner.next_batch();
        }
        let b = self.next_scheduled().transpose();
        self.publish();
        b
    }

    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    fn after_step(&mut self, rec: &IterRecord) -> bool {
        self.train_loss.0 += rec.loss;
        self.train_loss.1 += 1;
        self.ended && self.schedule.kind != ScheduleKind::Off
    }

    fn schedule_loss(&mut self, test_loss: Option<f64>) {
        let (sum, n) = std::mem::take(&mut self.train_loss);
        let loss = test_loss.unwrap_or(sum / n.max(1) as f64);
        self.adjust(loss);
        self.publish();
    }
}
