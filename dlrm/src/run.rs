//! A training run as library code: one or more embedding strategies trained
//! in turn on identical data, their records written as they come (the log
//! and three CSVs, each flushed after every record, so that a run stopped
//! at any point leaves whole lines), and a summary per strategy.
//!
//! `nmpsim train` maps its flags to a [`TrainRun`], picks the data and the
//! dense backend, and prints; a Rust program drives the same run:
//!
//! ```
//! use nmpsim_dlrm::run::{self, RecordFiles, Silent, Synthetic, TrainRun};
//! use nmpsim_dlrm::{GpuPreset, TrainConfig, preset, strategy};
//! # fn main() -> Result<(), nmpsim_dlrm::DlrmError> {
//! let p = preset("tiny", &Default::default())?;
//! let config = TrainConfig::sgd(p.config.clone(), 64, 20, 0.1);
//! let run = TrainRun::new(strategy::select("baseline-cpu,tcast-cpu")?, config, GpuPreset::named("v100")?);
//! let dir = std::env::temp_dir().join(format!("nmpsim-run-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let mut files = RecordFiles::create(&dir)?;
//! // The preset's synthetic data, the same for both strategies; the dense
//! // path on the CPU.
//! let mut driver = Synthetic { preset: p, batch: 64, seed: 1, test_batches: 1 };
//! let out = run::train_modes(&run, &mut files, &mut Silent, &mut driver)?;
//! assert_eq!(out.summaries.len(), 2);
//! // (Modelled speed-ups over the baseline, whose CPU times are measured.)
//! assert!(out.summaries[1].speedup_over_baseline_cpu.unwrap() > 0.0);
//! assert!(std::fs::read_to_string(dir.join(run::ITERATIONS_CSV)).unwrap().lines().count() == 41);
//! std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(()) }
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nmpsim_traces::Batch;

use crate::DlrmError;
use crate::data::TeacherData;
use crate::dense::CpuDense;
use crate::gpu::GpuPreset;
use crate::pooltime::{PoolTimer, SimBatches};
use crate::presets::Preset;
use crate::strategy::{BuildCtx, StrategyEntry};
use crate::summary::{ModeAgg, ModeSummary, RunState, fill_speedups, summarize};
use crate::timeline::Source;
use crate::trainer::{
    DataSource, EvalRecord, IterRecord, Observer, Status, TrainConfig, TrainOutcome, Trainer,
};

/// The run's log: every log line, then the summary.
pub const LOG: &str = "train.log";
/// One line per iteration and strategy.
pub const ITERATIONS_CSV: &str = "iterations.csv";
/// Every event of every iteration's timeline.
pub const TIMELINE_CSV: &str = "timeline.csv";
/// One line per evaluation.
pub const EVAL_CSV: &str = "eval.csv";
/// The files [`RecordFiles::create`] (re)creates in a run's directory.
pub const RECORD_FILES: [&str; 4] = [LOG, ITERATIONS_CSV, TIMELINE_CSV, EVAL_CSV];

const ITERATIONS_HEADER: [&str; 9] = [
    "mode",
    "iteration",
    "batch_size",
    "loss",
    "accuracy",
    "lr",
    "wall_ms",
    "modelled_ms",
    "modelled_hidden_ms",
];
const TIMELINE_HEADER: [&str; 11] = [
    "mode",
    "iteration",
    "stage",
    "lane",
    "primitive",
    "detail",
    "resource",
    "source",
    "time_ns",
    "bytes",
    "energy_pj",
];
const EVAL_HEADER: [&str; 6] = ["mode", "iteration", "samples", "loss", "accuracy", "auc"];

/// The files a run's records go to, in its directory.
pub struct RecordFiles {
    dir: PathBuf,
    log: BufWriter<File>,
    iterations: csv::Writer<File>,
    timeline: csv::Writer<File>,
    eval: csv::Writer<File>,
}

impl RecordFiles {
    /// Creates the log and the CSVs in `dir`, replacing any an earlier run
    /// left (not appending to them). Each CSV's header is flushed at once: a
    /// run killed before its first record still leaves files that say what
    /// they hold.
    pub fn create(dir: &Path) -> Result<Self, DlrmError> {
        let err = |name: &str| {
            let what = dir.join(name).display().to_string();
            move |source: std::io::Error| DlrmError::Write { what, source }
        };
        let log = BufWriter::new(File::create(dir.join(LOG)).map_err(err(LOG))?);
        let csv = |name: &str, header: &[&str]| -> Result<csv::Writer<File>, DlrmError> {
            let f = File::create(dir.join(name)).map_err(err(name))?;
            let mut w = csv::WriterBuilder::new().from_writer(f);
            w.write_record(header)
                .map_err(std::io::Error::from)
                .and_then(|_| w.flush())
                .map_err(err(name))?;
            Ok(w)
        };
        Ok(RecordFiles {
            dir: dir.to_path_buf(),
            log,
            iterations: csv(ITERATIONS_CSV, &ITERATIONS_HEADER)?,
            timeline: csv(TIMELINE_CSV, &TIMELINE_HEADER)?,
            eval: csv(EVAL_CSV, &EVAL_HEADER)?,
        })
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A failed write or flush of `name`: the strategy fails at once
    /// (records missing or cut mid-line are no results).
    fn err(&self, name: &str, source: impl Into<std::io::Error>) -> DlrmError {
        DlrmError::Write {
            what: self.dir.join(name).display().to_string(),
            source: source.into(),
        }
    }

    /// Appends `text` and a line end to the log, flushed.
    pub fn log_line(&mut self, text: &str) -> Result<(), DlrmError> {
        writeln!(self.log, "{text}")
            .and_then(|_| self.log.flush())
            .map_err(|e| self.err(LOG, e))
    }

    /// One iteration of strategy `mode`: its line and its timeline's events.
    fn iteration(&mut self, mode: &str, r: &IterRecord) -> Result<(), DlrmError> {
        let it = r.iteration.to_string();
        self.iterations
            .write_record([
                mode,
                &it,
                &r.batch_size.to_string(),
                &r.loss.to_string(),
                &r.accuracy.to_string(),
                // Shortest round trip: a decayed rate (down to its 1e-7
                // floor) keeps its digits.
                &r.lr.to_string(),
                &format!("{:.6}", r.wall_ns / 1e6),
                &format!("{:.6}", r.iteration_ns / 1e6),
                &format!("{:.6}", r.timeline.hidden_ns() / 1e6),
            ])
            .map_err(|e| self.err(ITERATIONS_CSV, e))?;
        for e in &r.timeline.events {
            self.timeline
                .write_record([
                    mode,
                    &it,
                    e.stage.as_str(),
                    &e.lane.to_string(),
                    &e.primitive,
                    // (A detail may hold a comma or a quote: the writer
                    // quotes it.)
                    &e.detail,
                    e.resource.as_str(),
                    e.source.as_str(),
                    &format!("{:.1}", e.time_ns),
                    &e.bytes.to_string(),
                    // (Empty where no accounting of its own gives the energy.)
                    &if e.energy_pj > 0.0 {
                        format!("{:.1}", e.energy_pj)
                    } else {
                        String::new()
                    },
                ])
                .map_err(|e| self.err(TIMELINE_CSV, e))?;
        }
        self.iterations
            .flush()
            .map_err(|e| self.err(ITERATIONS_CSV, e))?;
        self.timeline.flush().map_err(|e| self.err(TIMELINE_CSV, e))
    }

    /// One evaluation of strategy `mode`.
    fn eval(&mut self, mode: &str, e: &EvalRecord) -> Result<(), DlrmError> {
        self.eval
            .write_record([
                mode,
                &e.iteration.to_string(),
                &e.samples.to_string(),
                &e.loss.to_string(),
                &e.accuracy.to_string(),
                &e.auc.map_or(String::new(), |a| a.to_string()),
            ])
            .map_err(std::io::Error::from)
            .and_then(|_| self.eval.flush())
            .map_err(|e| self.err(EVAL_CSV, e))
    }
}

/// What the driver of a run sees of it as it goes (`nmpsim train`: a
/// progress bar, the log lines on stderr, Ctrl-C). Every method has a
/// do-nothing default.
pub trait Monitor {
    /// Strategy `mode` starts; with `simulating`, its first iterations
    /// simulate the NMP pool cycle by cycle (each takes long).
    fn mode_started(&mut self, _mode: &str, _simulating: bool) {}
    /// A log line (already in the run's log).
    fn line(&mut self, _line: &str) {}
    /// An iteration of `mode` ended; `simulation_over` after the last one
    /// whose pool was simulated cycle by cycle.
    fn iteration(&mut self, _mode: &str, _simulation_over: bool) {}
    /// Asked before every iteration; `true` stops the run (interrupted).
    fn should_stop(&self) -> bool {
        false
    }
}

/// A monitor that shows nothing and never stops the run.
pub struct Silent;
impl Monitor for Silent {}

/// A run: strategies trained in turn on identical data.
pub struct TrainRun {
    pub modes: Vec<&'static StrategyEntry>,
    pub config: TrainConfig,
    pub gpu: GpuPreset,
    /// The NMP pool's timer, shared by the strategies that use one
    /// ([`StrategyEntry::uses_nmp`]); required when any does.
    pub pool: Option<Arc<Mutex<PoolTimer>>>,
    /// Iterations at the start of each strategy left out of its summary's
    /// per-iteration figures (logged and recorded all the same).
    pub warmup_iters: u64,
    /// How the strategies with hot rows ([`StrategyEntry::uses_hot`]) choose
    /// and use them.
    pub hot: crate::hot::HotOptions,
    /// cDLRM's cache and look-ahead.
    pub cdlrm: crate::cdlrm::CdlrmOptions,
    /// EL-Rec's TT rank and threshold.
    pub eltt: crate::eltt::ElttOptions,
    /// The modelled host CPU (`--host`): the CPU primitives' times then come
    /// from its model, the same on every machine.
    pub host: Option<Arc<crate::host::HostConfig>>,
}

impl TrainRun {
    /// A run of `modes` with no pool and no warm-up.
    pub fn new(modes: Vec<&'static StrategyEntry>, config: TrainConfig, gpu: GpuPreset) -> Self {
        TrainRun {
            modes,
            config,
            gpu,
            pool: None,
            warmup_iters: 0,
            hot: crate::hot::HotOptions::default(),
            cdlrm: crate::cdlrm::CdlrmOptions::default(),
            eltt: crate::eltt::ElttOptions::default(),
            host: None,
        }
    }

    /// Whether any of the strategies runs on the NMP pool.
    pub fn uses_nmp(&self) -> bool {
        self.modes.iter().any(|m| m.uses_nmp)
    }

    /// Iterations of `mode` whose pool is simulated cycle by cycle.
    fn simulated(&self, mode: &StrategyEntry) -> Result<u64, DlrmError> {
        match (&self.pool, mode.uses_nmp) {
            (Some(p), true) => {
                let p = lock(p)?;
                Ok(if p.setup.fixed_bandwidth_gbps.is_none() {
                    p.setup.sim_batches.of(self.config.iters)
                } else {
                    0
                })
            }
            _ => Ok(0),
        }
    }

    /// The pool's simulated-iteration setting (none without a pool).
    fn sim_batches(&self) -> Result<Option<SimBatches>, DlrmError> {
        self.pool
            .as_ref()
            .map(|p| lock(p).map(|p| p.setup.sim_batches))
            .transpose()
    }
}

use crate::pooltime::lock;

/// A strategy that failed: its error, and the error of writing the summary
/// after it, if that failed too.
pub struct ModeFailure<E> {
    pub mode: &'static str,
    pub error: DlrmError,
    pub summary_error: Option<E>,
}

/// How a run ended.
pub struct RunOutcome<E> {
    /// One per strategy that ran (the failed one included), speed-ups filled.
    pub summaries: Vec<ModeSummary>,
    /// `Completed`, or how the run ended early.
    pub status: Status,
    /// The strategy whose failure ended the run.
    pub failure: Option<ModeFailure<E>>,
}

/// Training data and its test set, for one strategy.
pub type Data = (Box<dyn DataSource>, Vec<Batch>);

/// What the caller of [`train_modes`] supplies: the data, the trainers (it
/// picks the dense backend and any real GPU), and where the summaries go.
pub trait Driver {
    type Error: From<DlrmError>;
    /// The data for the next strategy: identical for every strategy of a run.
    fn data(&mut self) -> Result<Data, Self::Error>;
    /// The trainer of `mode`, built from `ctx` (which holds the pool when the
    /// strategy uses one), e.g. by [`crate::strategy::trainer`].
    fn trainer(
        &mut self,
        mode: &'static StrategyEntry,
        ctx: &BuildCtx,
    ) -> Result<Trainer, Self::Error>;
    /// Every summary so far, after each strategy, with the run's state
    /// (`Running`, or `Ended(Failed)` when that strategy failed): written
    /// where it survives what follows. Default: kept nowhere.
    fn summaries(
        &mut self,
        _summaries: &[ModeSummary],
        _state: RunState,
    ) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A preset's planted-teacher data for a run (`nmpsim train`'s without
/// `--data`): a training stream of `batch`-sample batches from `seed`, and
/// `test_batches` test batches from a seed of their own. Called once per
/// strategy, it gives each the same data.
pub fn teacher_data(
    preset: &Preset,
    batch: usize,
    seed: u64,
    test_batches: usize,
) -> Result<Data, DlrmError> {
    let dense = preset.config.bottom[0];
    let mut spec = preset.data.clone();
    spec.batch_size = batch;
    spec.seed = seed;
    let train = TeacherData::new(spec.clone(), dense, seed)?;
    spec.seed = seed ^ 0x07e5_75e7;
    let mut test = TeacherData::new(spec, dense, seed)?;
    let test = (0..test_batches).map(|_| test.next_batch()).collect();
    Ok((Box::new(train), test))
}

/// The simplest [`Driver`]: a preset's planted-teacher data
/// ([`teacher_data`]) and the dense path on this machine's CPU, from the
/// run's seed; the summaries are kept nowhere.
pub struct Synthetic {
    pub preset: Preset,
    pub batch: usize,
    pub seed: u64,
    pub test_batches: usize,
}

impl Driver for Synthetic {
    type Error = DlrmError;

    fn data(&mut self) -> Result<Data, DlrmError> {
        teacher_data(&self.preset, self.batch, self.seed, self.test_batches)
    }

    fn trainer(
        &mut self,
        mode: &'static StrategyEntry,
        ctx: &BuildCtx,
    ) -> Result<Trainer, DlrmError> {
        let c = ctx.config;
        let dense = CpuDense::new(&c.model, c.dense_optimizer, c.seed)?;
        crate::strategy::trainer(mode, ctx, Box::new(dense))
    }
}

/// Trains `run`'s strategies in turn on `driver`'s data and trainers,
/// recording to `files` and telling `monitor`. A strategy's failure ends the
/// run ([`RunOutcome::failure`]); an error of the driver is returned as it
/// is.
pub fn train_modes<D: Driver>(
    run: &TrainRun,
    files: &mut RecordFiles,
    monitor: &mut dyn Monitor,
    driver: &mut D,
) -> Result<RunOutcome<D::Error>, D::Error> {
    if run.uses_nmp() && run.pool.is_none() {
        return Err(DlrmError::Config(
            "the run has strategies on the NMP pool but no pool is configured".into(),
        )
        .into());
    }
    let mut out = RunOutcome {
        summaries: Vec::new(),
        status: Status::Completed,
        failure: None,
    };
    // The strategies with hot rows calibrate on the samples the run trains.
    let hot = if run.modes.iter().any(|m| m.uses_hot) {
        let (mut source, _) = driver.data()?;
        let samples = run
            .hot
            .profile_samples
            .unwrap_or_else(|| run.config.iters.saturating_mul(run.config.batch as u64));
        monitor.line(&format!(
            "profiling the first {samples} samples of the training input for the hot rows"
        ));
        let h = crate::hot::HotContext::profile(
            source.as_mut(),
            &run.config.model.table_rows,
            samples,
            run.hot.clone(),
        )?;
        // A hot set that cannot be chosen fails the run before any strategy
        // trains, not after the others.
        for m in run.modes.iter().filter(|m| m.uses_hot) {
            h.plan(crate::hot::PlanKind::of_mode(m.name), &run.config)
                .map_err(|e| DlrmError::Config(format!("mode {}: {e}", m.name)))?;
        }
        Some(Arc::new(h))
    } else {
        None
    };
    for &mode in &run.modes {
        if monitor.should_stop() {
            out.status = Status::Interrupted;
            break;
        }
        let simulated = run.simulated(mode)?;
        monitor.mode_started(mode.name, simulated > 0);
        let (source, test) = driver.data()?;
        let pool = run.pool.clone().filter(|_| mode.uses_nmp);
        let mut ctx = BuildCtx::new(&run.config, run.gpu.clone(), pool.clone());
        ctx.hot = hot.clone().filter(|_| mode.uses_hot);
        ctx.cdlrm = run.cdlrm;
        ctx.eltt = run.eltt;
        ctx.env.host = run.host.clone();
        let mut tr = driver.trainer(mode, &ctx)?;
        let mut source = tr.embedding.input(source)?;
        let placement = tr.embedding.placement();
        // (The modelled FLOPs are linear in the batch size; an epoch's last
        // batch may be smaller.)
        let dense_flops_per_sample = tr.dense_model.flops / run.config.batch.max(1) as f64;
        if let Some(p) = &pool {
            lock(p)?.begin_run();
        }
        let mut rec = Recorder {
            mode: mode.name,
            iters: run.config.iters,
            print_every: run.config.print_every,
            warmup: run.warmup_iters,
            simulated,
            files: &mut *files,
            monitor: &mut *monitor,
            window: Window::default(),
            epoch: 0,
            agg: ModeAgg::default(),
            warm: ModeAgg::default(),
        };
        let outcome = tr.train(source.as_mut(), &test, &mut rec);
        let calib = match &pool {
            Some(p) => lock(p)?.run_calibration_gbps(),
            None => Vec::new(),
        };
        let mut summary = rec.summary(
            &outcome,
            placement,
            dense_flops_per_sample,
            calib,
            run.sim_batches()?,
        );
        if let Some(h) = &run.host {
            summary.host = Some(h.name.clone());
            for b in &mut summary.breakdown_ms {
                if b.sources.contains(&Source::ModelledHost) {
                    b.host = Some(h.name.clone());
                }
            }
        }
        summary.notes = tr.embedding.notes();
        summary.figures = tr.embedding.figures().into_iter().collect();
        for (k, v) in &summary.notes {
            let line = format!("{}: {k}: {v}", mode.name);
            files.log_line(&line)?;
            monitor.line(&line);
        }
        out.summaries.push(summary);
        fill_speedups(&mut out.summaries);
        // Results so far reach the caller whatever happens next: marked as a
        // run still going, unless this strategy failed (the run ends here).
        let state = match &outcome {
            Err(_) => RunState::Ended(Status::Failed),
            Ok(_) => RunState::Running,
        };
        let written = driver.summaries(&out.summaries, state);
        match outcome {
            Err(error) => {
                out.status = Status::Failed;
                out.failure = Some(ModeFailure {
                    mode: mode.name,
                    error,
                    summary_error: written.err(),
                });
                return Ok(out);
            }
            Ok(o) => {
                written?;
                if o.status != Status::Completed {
                    out.status = o.status;
                    if o.status == Status::Interrupted {
                        break;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Since the last log line: loss and accuracy times samples, wall ns,
/// modelled ns, iterations, samples (loss and accuracy are averaged over
/// samples, as in the DLRM reference; times over iterations).
#[derive(Default)]
struct Window {
    loss: f64,
    accuracy: f64,
    wall_ns: f64,
    modelled_ns: f64,
    iterations: u64,
    samples: u64,
}

/// Writes one strategy's records as they come and sums them for its summary.
struct Recorder<'a> {
    mode: &'static str,
    iters: u64,
    print_every: u64,
    /// Iterations `0..warmup` go to `warm` instead of `agg` when there are more.
    warmup: u64,
    /// The first iterations whose pool is simulated cycle by cycle.
    simulated: u64,
    files: &'a mut RecordFiles,
    monitor: &'a mut dyn Monitor,
    window: Window,
    epoch: u64,
    agg: ModeAgg,
    warm: ModeAgg,
}

impl Recorder<'_> {
    fn line(&mut self, s: &str) -> Result<(), DlrmError> {
        self.monitor.line(s);
        self.files.log_line(s)
    }

    /// The log line of the iterations since the last one, `it` the last of
    /// them (1-based).
    fn log_window(&mut self, it: u64) -> Result<(), DlrmError> {
        let w = std::mem::take(&mut self.window);
        let n = w.iterations.max(1) as f64;
        let per_sample = w.samples.max(1) as f64;
        let s = format!(
            "[{}] Finished training it {it}/{} of epoch {}, {:.2} ms/it, loss {:.4}, accuracy {:.3} %, modelled {:.2} ms/it",
            self.mode,
            self.iters,
            self.epoch,
            w.wall_ns / n / 1e6,
            w.loss / per_sample,
            100.0 * w.accuracy / per_sample,
            w.modelled_ns / n / 1e6
        );
        self.line(&s)
    }

    /// The strategy's summary once its training returned `outcome`.
    fn summary(
        mut self,
        outcome: &Result<TrainOutcome, DlrmError>,
        placement: Vec<(String, String)>,
        dense_flops_per_sample: f64,
        calib: Vec<(String, f64)>,
        sim_batches: Option<SimBatches>,
    ) -> ModeSummary {
        let status = match outcome {
            Ok(o) => o.status,
            Err(_) => Status::Failed,
        };
        // A run stopped inside its warm-up has only warm-up iterations to report.
        if self.agg.iterations == 0 && self.warm.iterations > 0 {
            let evals = std::mem::take(&mut self.agg.evals);
            self.agg = std::mem::take(&mut self.warm);
            self.agg.evals = evals;
        }
        let mut s = summarize(
            self.mode,
            status,
            placement,
            &self.agg,
            dense_flops_per_sample,
            calib,
        );
        s.warmup_iterations = self.warm.iterations;
        // A proxy names the simulated iterations it comes from.
        if let Some(sb @ SimBatches::First(n)) = sim_batches
            && n > 0
        {
            for b in &mut s.breakdown_ms {
                if b.sources.contains(&Source::SimulatedProxy) {
                    b.proxy_of_iterations = Some((0, sb.of(self.iters).max(1) - 1));
                }
            }
        }
        s
    }
}

impl Observer for Recorder<'_> {
    fn iteration(&mut self, r: &IterRecord) -> Result<(), DlrmError> {
        let a = if r.iteration < self.warmup && self.iters > self.warmup {
            &mut self.warm
        } else {
            &mut self.agg
        };
        a.record(r);
        self.files.iteration(self.mode, r)?;
        if !r.loss.is_finite() {
            // (Recorded above, then the strategy stops: every later loss, the
            // evaluation and the AUC would be meaningless.)
            return Err(DlrmError::Config(format!(
                "the loss is {} at iteration {} (learning rate {}): training diverged; lower --lr",
                r.loss,
                r.iteration,
                if (1e-4..1e6).contains(&r.lr.abs()) {
                    format!("{}", r.lr)
                } else {
                    format!("{:e}", r.lr)
                }
            )));
        }
        self.epoch = r.epoch;
        let w = &mut self.window;
        w.loss += r.loss * r.batch_size as f64;
        w.accuracy += r.accuracy * r.batch_size as f64;
        w.wall_ns += r.wall_ns;
        w.modelled_ns += r.iteration_ns;
        w.iterations += 1;
        w.samples += r.batch_size;
        self.monitor
            .iteration(self.mode, r.iteration + 1 == self.simulated);
        let it = r.iteration + 1;
        if self.print_every > 0 && (it % self.print_every == 0 || it == self.iters) {
            self.log_window(it)?;
        }
        Ok(())
    }

    /// A run that stopped early (data exhausted, interrupted) logs its last
    /// iterations too.
    fn finished(&mut self, iterations: u64) -> Result<(), DlrmError> {
        if self.print_every > 0 && self.window.iterations > 0 {
            self.log_window(iterations)?;
        }
        Ok(())
    }

    fn eval(&mut self, e: &EvalRecord) -> Result<(), DlrmError> {
        self.files.eval(self.mode, e)?;
        self.agg.evals.push(e.clone());
        let auc = e.auc.map_or("n/a".to_string(), |a| format!("{a:.4}"));
        let s = format!(
            "[{}] Testing at - {}/{} of epoch {}, loss {:.4}, accuracy {:.3} %, auc {auc}",
            self.mode,
            e.iteration,
            self.iters,
            self.epoch,
            e.loss,
            100.0 * e.accuracy
        );
        self.line(&s)
    }

    fn should_stop(&self) -> bool {
        self.monitor.should_stop()
    }
}
