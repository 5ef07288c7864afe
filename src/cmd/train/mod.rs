//! `nmpsim train`: train a DLRM whose embedding layers run in one of Tensor
//! Casting's system modes (or all four on identical data), with the
//! iteration timeline of each. The work is in `nmpsim-dlrm`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[cfg(feature = "cuda")]
use anyhow::Context;
use anyhow::Result;
use nmpsim_dlrm::report::{self, ReportHeader, SUMMARY_CSV};
use nmpsim_dlrm::run::{self, Monitor, RecordFiles, TrainRun};
use nmpsim_dlrm::strategy::{self, BuildCtx, StrategyEntry};
use nmpsim_dlrm::summary::{ModeSummary, RunState, TrainSummary};
use nmpsim_dlrm::{CpuDense, DenseBackend, PoolTimer, Status, TrainConfig, Trainer};

use crate::rundir::{self, RunDir};

mod args;
mod data;
mod options;
mod resolve;

pub use args::TrainArgs;
use args::{CDLRM_FLAGS, ELTT_FLAGS, HOT_FLAGS, NMP_FLAGS};
use data::open_data;
use resolve::{Resolved, resolve};

static STOP: AtomicBool = AtomicBool::new(false);

/// The dense backend of one mode: the CPU one, or with `cuda` a
/// [`nmpsim_dlrm::cuda_dense::CudaDense`] on the default GPU, both from the
/// run's seed (so every mode starts from the same parameters).
fn dense_backend(device: &str, t: &TrainConfig) -> Result<Box<dyn DenseBackend>> {
    if device == "cuda" {
        #[cfg(feature = "cuda")]
        {
            let gpu = nmpsim_kernels::cuda::default_gpu()
                .map_err(|e| anyhow::anyhow!("--device cuda: no usable GPU: {e}"))?;
            let name = gpu.name().to_string();
            let d =
                nmpsim_dlrm::cuda_dense::CudaDense::new(gpu, &t.model, t.dense_optimizer, t.seed)
                    .with_context(|| {
                    format!("--device cuda: the GPU ({name}) cannot run the dense path")
                })?;
            return Ok(Box::new(d));
        }
        #[cfg(not(feature = "cuda"))]
        anyhow::bail!(
            "--device cuda: this nmpsim was built without the `cuda` feature, so no GPU can be used"
        );
    }
    Ok(Box::new(CpuDense::new(
        &t.model,
        t.dense_optimizer,
        t.seed,
    )?))
}

/// The trainer of one mode, the pool (when it uses one) in `ctx`. With `--device cuda` the dense path runs on the
/// GPU and the NMP modes' pool primitives on the same GPU, emulated (one
/// emulator shared by the modes of a run).
fn mode_trainer(r: &Resolved, mode: &StrategyEntry, ctx: &BuildCtx) -> Result<Trainer> {
    #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
    let mut ctx = ctx.clone();
    let dense = dense_backend(&r.device, &r.train)?;
    #[cfg(feature = "cuda")]
    if r.device == "cuda" {
        static EMULATOR: Mutex<Option<Arc<Mutex<nmpsim_dlrm::emulate::PoolEmulator>>>> =
            Mutex::new(None);
        let gpu = nmpsim_kernels::cuda::default_gpu()
            .map_err(|e| anyhow::anyhow!("--device cuda: no usable GPU: {e}"))?;
        ctx.device = Some(gpu.clone());
        ctx.emulator = if mode.uses_nmp {
            let mut slot = EMULATOR.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                let emu = nmpsim_dlrm::emulate::PoolEmulator::new(gpu.clone())
                    .context("--device cuda: the GPU cannot emulate the NMP pool")?;
                *slot = Some(Arc::new(Mutex::new(emu)));
            }
            slot.clone()
        } else {
            None
        };
    }
    Ok(strategy::trainer(mode, &ctx, dense)?)
}

/// The run's data (the first mode takes the data opened before the run
/// directory was made), trainers and summaries, from the command line.
struct Driver<'a> {
    a: &'a TrainArgs,
    r: &'a Resolved,
    rd: &'a RunDir,
    first_data: Option<run::Data>,
}

impl run::Driver for Driver<'_> {
    type Error = anyhow::Error;

    fn data(&mut self) -> Result<run::Data> {
        match self.first_data.take() {
            Some(d) => Ok(d),
            None => open_data(self.a, self.r),
        }
    }

    fn trainer(&mut self, mode: &'static StrategyEntry, ctx: &BuildCtx) -> Result<Trainer> {
        mode_trainer(self.r, mode, ctx)
    }

    fn summaries(&mut self, summaries: &[ModeSummary], state: RunState) -> Result<()> {
        write_summary(self.rd, self.r, summaries, state).map(drop)
    }
}

/// The run as the terminal shows it: a progress bar, the log lines on
/// stderr (unless quiet), and Ctrl-C.
struct Progress {
    pb: indicatif::ProgressBar,
    quiet: bool,
}

impl Monitor for Progress {
    fn mode_started(&mut self, mode: &str, simulating: bool) {
        self.pb.set_message(if simulating {
            format!("{mode}: simulating the pool")
        } else {
            mode.to_string()
        });
    }

    fn line(&mut self, line: &str) {
        if !self.quiet {
            self.pb.suspend(|| eprintln!("{line}"));
        }
    }

    fn iteration(&mut self, mode: &str, simulation_over: bool) {
        self.pb.inc(1);
        if simulation_over {
            self.pb.set_message(mode.to_string());
        }
    }

    fn should_stop(&self) -> bool {
        STOP.load(Ordering::Relaxed)
    }
}

pub fn run(a: TrainArgs) -> Result<ExitCode> {
    if a.mode.eq_ignore_ascii_case("list") {
        print!("{}", strategy::listing());
        return Ok(ExitCode::SUCCESS);
    }
    let r = resolve(&a)?;
    // Flags given for what no mode of the run uses. (Flags with defaults
    // cannot tell given from default: the command line says.)
    let unused = [
        (
            r.modes.iter().any(|m| m.uses_nmp),
            &NMP_FLAGS[..],
            "the NMP pool",
            "use",
        ),
        (
            r.modes.iter().any(|m| m.uses_hot),
            &HOT_FLAGS[..],
            "the hot rows of fae, fae-nmp and scars",
            "run",
        ),
        (
            r.modes.iter().any(|m| m.name.starts_with("cdlrm")),
            &CDLRM_FLAGS[..],
            "cdlrm's caches",
            "run",
        ),
        (
            r.modes.iter().any(|m| m.name.starts_with("eltt")),
            &ELTT_FLAGS[..],
            "eltt's TT tables",
            "run",
        ),
    ];
    for (used, flags, what, verb) in unused {
        if a.quiet || used {
            continue;
        }
        let given = crate::cmd::flags_given(flags);
        if !given.is_empty() {
            eprintln!(
                "note: {} set{} up {what}, which --mode {} does not {verb}",
                given.join(", "),
                if given.len() == 1 { "s" } else { "" },
                a.mode
            );
        }
    }
    // The pool (its DRAM preset, mapping and layout) and the data are set up
    // before the run directory is touched, so that a mistake in either fails
    // with an earlier run there untouched. The first mode takes this data.
    let pool = if r.modes.iter().any(|m| m.uses_nmp) {
        let shapes: Vec<(u64, usize)> = r
            .train
            .model
            .table_rows
            .iter()
            .map(|&n| (n, r.train.model.dim))
            .collect();
        Some(Arc::new(Mutex::new(PoolTimer::new(
            r.nmp.clone(),
            &shapes,
            r.train.batch,
            r.max_lookups_per_table,
            &r.train.embedding_optimizer,
        )?)))
    } else {
        None
    };
    let first_data = Some(open_data(&a, &r)?);
    let rd = RunDir::create(a.out.as_deref(), "train")?;
    // An earlier run's records go (aside, if it finished) before this run's
    // are created.
    let mut earlier = vec![SUMMARY_CSV];
    earlier.extend(run::RECORD_FILES);
    rd.remove_earlier(&earlier)?;
    rd.write_config("train", &r)?;
    // Ctrl-C stops after the current iteration (SIGTERM ends the run at once).
    crate::signals::stop_on_sigint(&STOP);
    let dir = rd.path().to_path_buf();
    let mut files = RecordFiles::create(&dir)?;
    let pb = rundir::progress(
        r.train.iters * r.modes.len() as u64,
        "train",
        a.quiet || a.json,
    );
    let mut monitor = Progress {
        pb: pb.clone(),
        quiet: a.quiet || a.json,
    };
    let spec = TrainRun {
        modes: r.modes.clone(),
        config: r.train.clone(),
        gpu: r.gpu.clone(),
        pool,
        warmup_iters: a.warmup_iters,
        hot: r.hot.clone(),
        cdlrm: r.cdlrm,
        eltt: r.eltt,
        host: r.host.clone().map(Arc::new),
    };
    let mut driver = Driver {
        a: &a,
        r: &r,
        rd: &rd,
        first_data,
    };
    let out = run::train_modes(&spec, &mut files, &mut monitor, &mut driver)?;
    if let Some(f) = out.failure {
        // The mode's error is the one to report: a summary that could not be
        // written either (a full disk) is said after it.
        let also = f.summary_error.map_or(String::new(), |w| {
            format!(" (nor could the summary be written: {w:#})")
        });
        return Err(anyhow::Error::from(f.error).context(format!(
            "mode {}: training failed; the log and the records so far are in {}{also}",
            f.mode,
            dir.display()
        )));
    }
    let summaries = out.summaries;
    let status = out.status;
    pb.finish_and_clear();
    let text = write_summary(&rd, &r, &summaries, RunState::Ended(status))?;
    // (The log is complete before anything is printed: a stdout that cannot
    // be written leaves a whole run directory.)
    files.log_line(&text)?;
    if status == Status::Interrupted {
        // A stopped run does not replace an earlier finished one: that stays
        // in previous-run/ (and a note says so).
        drop(rd);
    } else {
        rd.finish()?;
    }
    if a.json {
        let v =
            serde_json::from_slice::<serde_json::Value>(&std::fs::read(dir.join("results.json"))?)?;
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        if !a.quiet {
            // Apart from the log lines above it.
            outln!()?;
        }
        outln!("{text}")?;
    }
    Ok(if status == Status::Interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_summary(
    rd: &RunDir,
    r: &Resolved,
    summaries: &[ModeSummary],
    state: RunState,
) -> Result<String> {
    let not_run: Vec<String> = r
        .modes
        .iter()
        .filter(|m| !summaries.iter().any(|s| s.mode == m.name))
        .map(|m| m.name.to_string())
        .collect();
    let s = TrainSummary {
        status: state,
        modes_not_run: not_run.clone(),
        model: r.preset.name.clone(),
        batch: r.train.batch,
        gpu: r.gpu.name.clone(),
        device: r.device.clone(),
        device_name: r.device_name.clone(),
        modes: summaries.to_vec(),
        simulation_wall_s: nmpsim_dlrm::pooltime::sim_wall_s(),
        run_dir: rd.path().display().to_string(),
    };
    rd.write_results("train", &s)?;
    rd.write_file(SUMMARY_CSV, report::summary_csv(summaries).as_bytes())?;
    let header = ReportHeader {
        model: &r.preset.name,
        batch: r.train.batch,
        tables: r.train.model.table_rows.len(),
        dim: r.train.model.dim,
        gpu: &r.gpu.name,
        device_name: r.device_name.as_deref(),
        pool: r.modes.iter().any(|m| m.uses_nmp).then_some(&r.nmp),
    };
    let mut text = report::report_text(&header, summaries, rd.path());
    // A run not completed says so where it is read, not only in the JSON and CSV.
    if let Some(line) = report::status_line(state, &not_run) {
        text = format!("{line}\n{text}");
    }
    rd.write_summary(&text)?;
    Ok(text)
}

#[cfg(test)]
mod tests;
