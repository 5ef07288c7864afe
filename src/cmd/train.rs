//! `nmpsim train`: train a DLRM whose embedding layers run in one of Tensor
//! Casting's system modes (or all four on identical data), with the
//! iteration timeline of each. The work is in `nmpsim-dlrm`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use clap::Args;
use nmpsim_dlrm::data::CriteoEpochs;
use nmpsim_dlrm::report::{self, ReportHeader, SUMMARY_CSV};
use nmpsim_dlrm::run::{self, Monitor, RecordFiles, TrainRun};
use nmpsim_dlrm::strategy::{self, BuildCtx, StrategyEntry};
use nmpsim_dlrm::summary::{ModeSummary, RunState, TrainSummary};
use nmpsim_dlrm::{
    CpuDense, DataSource, DenseBackend, DenseOptimizer, DlrmError, GpuPreset, Interaction,
    LrSchedule, NmpSetup, PoolTimer, Preset, PresetOverrides, SimBatches, Status, TrainConfig,
    Trainer, parse_arch, preset,
};
use nmpsim_nmp::Placement;
use nmpsim_sim::EngineKind;
use nmpsim_traces::{BagSize, Batch, CriteoBatcher, CriteoOptions, CriteoReader};
use serde::Serialize;

use crate::cmd::demo::parse_optimizer;
use crate::rundir::{self, RunDir};

#[derive(Args, Debug, Clone, Serialize)]
#[command(after_help = "Examples:
  nmpsim train --model tiny --iters 300 --batch 256           # seconds; learns the planted teacher
  nmpsim train --model rm1 --mode tcast-nmp --batch 2048 --iters 200
  nmpsim train --model rm1 --mode all --iters 20 --rows 100000   # Fig. 12 breakdown, Fig. 13 speedups
  nmpsim train --model rm1 --mode baseline-cpu,tcast-nmp --iters 20 --rows 100000
  nmpsim train --mode list                                    # every embedding strategy
  nmpsim train --model criteo-kaggle --data data/criteo-sample.tsv --max-ind-range 100000 --batch 512
      # (data/criteo-sample.tsv ships with the source tree; `nmpsim trace criteo-sample` writes others)
  nmpsim train --model rm2 --mode all --nmp-bandwidth 600 --gpu a100   # no DRAM simulation
  nmpsim train --model criteo-kaggle --rows-scale 1 --iters 50 --json
  nmpsim train --model rm1 --device cuda --iters 50   # dense path run and timed on this machine's GPU
  nmpsim train --model rm1 --mode all --device cuda --iters 20

Times: every primitive of the modelled system is labelled measured (CPU
kernels on this machine; with --device cuda also the dense path and casting,
timed with CUDA events on this machine's GPU), simulated (the NMP pool,
cycle by cycle on the DRAM engine in every iteration; with --sim-batches N only
the first N, later ones labelled proxy: their bandwidth applied to the batch's
bytes), emulated (with --device cuda: the NMP pool's primitives and link as
CUDA kernels on a stream of their own, held to the simulated time), or
modelled (the GPU by roofline from --gpu, the links by bandwidth). `ms/it` in
the log lines is this machine's wall clock.")]
pub struct TrainArgs {
    /// Model preset: tiny, rm1, rm2, rm3, rm4, criteo-kaggle.
    #[arg(long, default_value = "tiny")]
    model: String,
    /// Embedding strategy (system mode): baseline-cpu, tcast-cpu, baseline-nmp,
    /// tcast-nmp; a family (tcast), all, or a comma-separated list of these;
    /// `list` prints every registered strategy and exits.
    #[arg(long, default_value = "baseline-cpu")]
    mode: String,
    /// Samples per mini-batch.
    #[arg(long, default_value_t = 2048)]
    batch: usize,
    /// Training iterations (per mode).
    #[arg(long, default_value_t = 100)]
    iters: u64,
    /// Seed of the synthetic data and of the model's initialisation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Base learning rate (dense and embedding optimizers): non-negative and finite.
    #[arg(long, default_value_t = 0.1, value_parser = crate::cmd::f32_arg)]
    lr: f32,
    /// Dense optimizer: sgd or adagrad.
    #[arg(long, default_value = "sgd")]
    dense_optimizer: String,
    /// Embedding optimizer: sgd, adagrad, row-wise-adagrad, rms-prop.
    #[arg(long, default_value = "sgd")]
    optimizer: String,
    /// Linear learning-rate warm-up steps, as the DLRM reference's scheduler (docs/dlrm.md).
    #[arg(long, default_value_t = 0)]
    lr_warmup_steps: u64,
    /// Step at which the quadratic decay starts.
    #[arg(long, default_value_t = 0)]
    lr_decay_start: u64,
    /// Steps over which the learning rate decays (0: no decay).
    #[arg(long, default_value_t = 0)]
    lr_decay_steps: u64,
    /// Rows of every RM table (default 1,000,000); a cap on the rows of every Kaggle table (after --rows-scale) and tiny table (tiny's are 64, 32, 16).
    #[arg(long)]
    rows: Option<u64>,
    /// Scale of the Criteo-Kaggle table sizes (default 0.25; 1 = the full 33.8M rows); criteo-kaggle only.
    #[arg(long)]
    rows_scale: Option<f64>,
    /// Embedding dimension.
    #[arg(long)]
    dim: Option<usize>,
    /// Lookups per bag of every table (synthetic data only).
    #[arg(long)]
    lookups: Option<u32>,
    /// Bottom MLP, dense features first (`13-512-256-64-16`).
    #[arg(long, value_name = "ARCH")]
    arch_mlp_bot: Option<String>,
    /// Top MLP after the interaction, ending in 1 (`512-256-1`).
    #[arg(long, value_name = "ARCH")]
    arch_mlp_top: Option<String>,
    /// Feature interaction: dot or cat.
    #[arg(long)]
    interaction: Option<String>,
    /// Per-sample weights on every lookup (weighted-sum pooling; synthetic data).
    #[arg(long)]
    weighted: bool,
    /// Criteo TSV to train on instead of synthetic data.
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    /// Criteo TSV to test on (default: the first --test-batches of --data are held out).
    #[arg(long, value_name = "FILE")]
    test_data: Option<PathBuf>,
    /// Hash categorical values into this many rows per table (Criteo data).
    #[arg(long)]
    max_ind_range: Option<u64>,
    /// Batches in the test set.
    #[arg(long, default_value_t = 4)]
    test_batches: usize,
    /// Evaluate every N iterations (0: at the end only).
    #[arg(long, default_value_t = 0)]
    test_freq: u64,
    /// Print a log line every N iterations, and after the last (0: no per-iteration lines).
    #[arg(long, default_value_t = 10)]
    print_freq: u64,
    /// Iterations at the start of each mode left out of the summary's per-iteration
    /// figures (they pay for first-touch page faults and buffer growth); they are
    /// still in iterations.csv and timeline.csv. 0 keeps every iteration; more than 1
    /// must leave some of the --iters.
    #[arg(long, default_value_t = 1)]
    warmup_iters: u64,
    /// GPU preset the dense path (unless --device cuda) and casting are modelled on: v100, a100, h100.
    #[arg(long, default_value = "v100")]
    gpu: String,
    /// Where the GPU side runs: cpu (the dense path on this CPU, its GPU time
    /// modelled from --gpu) or cuda (CUDA device 0 of this machine: the dense
    /// path and casting run and are timed there, and the NMP modes' pool is
    /// emulated there; fails before training without one).
    #[arg(long, default_value = "cpu", value_name = "DEVICE")]
    device: String,
    /// NMP ranks.
    #[arg(long, default_value_t = 32)]
    ranks: u32,
    /// DDR4 preset of every rank.
    #[arg(long, default_value = "DDR4-3200-x8", value_parser = crate::cmd::preset_arg)]
    preset: String,
    /// Row placement on the ranks: vector-sliced, row-interleaved, table-per-rank.
    #[arg(long, default_value = "row-interleaved")]
    placement: String,
    /// Address mapping fields of the ranks.
    #[arg(long, default_value = "ro-ra-ba-bg-co")]
    mapping: String,
    /// DRAM engine: native (the default: Rust; on one rank per channel it gives dramsim3's
    /// results but for the writes dramsim3 leaves unissued, over 20x faster, which makes
    /// simulating every iteration affordable), dramsim3 or ramulator.
    #[arg(long, default_value = "native")]
    engine: String,
    /// NMP pool link bandwidth, GB/s.
    #[arg(long, default_value_t = 25.0)]
    link_gbps: f64,
    /// Iterations of each NMP mode simulated cycle by cycle: all (the default), or N,
    /// after which the simulated bandwidth is applied to later batches' bytes (faster;
    /// those times are labelled proxy, with the iterations they come from).
    #[arg(long, default_value = "all", value_name = "N|all", value_parser = SimBatches::parse)]
    sim_batches: SimBatches,
    /// Skip DRAM simulation: every NMP primitive runs at this effective GB/s (modelled).
    #[arg(long, value_name = "GBPS")]
    nmp_bandwidth: Option<f64>,
    /// Run directory (default runs/train-<time>-<pid>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the summary JSON instead of the tables.
    #[arg(long)]
    json: bool,
    /// No log lines or progress bar.
    #[arg(long, short)]
    quiet: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

/// The flags that set up the NMP pool: only the NMP modes use them.
const NMP_FLAGS: [&str; 8] = [
    "--ranks",
    "--preset",
    "--placement",
    "--mapping",
    "--engine",
    "--link-gbps",
    "--sim-batches",
    "--nmp-bandwidth",
];

/// The resolved run.
#[derive(Serialize, Clone)]
struct Resolved {
    preset: Preset,
    modes: Vec<&'static StrategyEntry>,
    train: TrainConfig,
    gpu: GpuPreset,
    nmp: NmpSetup,
    data: String,
    test_data: String,
    max_lookups_per_table: u64,
    /// Iterations at the start of each mode left out of the summary.
    warmup_iters: u64,
    /// Test batches (`--test-batches`).
    test_batches: usize,
    /// Where the dense path runs: `cpu` or `cuda`.
    device: String,
    /// The GPU that runs the dense path with `cuda`.
    device_name: Option<String>,
}

/// Refuses `--data` and `--test-data` naming one pipe or device (the same
/// file, however named): it can be read once, so one of them would see
/// nothing, or a part of the data the other lost.
fn same_stream_refused(data: &Path, test: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(d), Ok(t)) = (std::fs::metadata(data), std::fs::metadata(test)) else {
        return Ok(());
    };
    if !d.is_file() && d.dev() == t.dev() && d.ino() == t.ino() {
        bail!(
            "--data {} and --test-data {} are the same pipe or device, which can be read once; save the data to files (the test set may be a copy of the training file)",
            data.display(),
            test.display()
        );
    }
    Ok(())
}

/// `--device`: `cpu` or `cuda`.
fn parse_device(s: &str) -> Result<&'static str> {
    match s.to_ascii_lowercase().as_str() {
        "cpu" => Ok("cpu"),
        "cuda" | "gpu" => Ok("cuda"),
        _ => bail!("--device: unknown `{s}`; expected cpu or cuda"),
    }
}

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
        bail!(
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

fn resolve(a: &TrainArgs) -> Result<Resolved> {
    let modes = strategy::select(&a.mode)?;
    let interaction = match a.interaction.as_deref() {
        None => None,
        Some("dot") => Some(Interaction::Dot),
        Some("cat") => Some(Interaction::Cat),
        Some(o) => bail!("--interaction: unknown `{o}`; expected dot or cat"),
    };
    let o = PresetOverrides {
        rows: a.rows,
        rows_scale: a.rows_scale,
        dim: a.dim,
        lookups: a.lookups,
        bottom: a
            .arch_mlp_bot
            .as_deref()
            .map(|s| parse_arch(s, "--arch-mlp-bot"))
            .transpose()?,
        top: a
            .arch_mlp_top
            .as_deref()
            .map(|s| parse_arch(s, "--arch-mlp-top"))
            .transpose()?,
        interaction,
        weighted: a.weighted,
    };
    if a.rows == Some(0) {
        bail!("--rows 0: every embedding table needs at least 1 row");
    }
    // (Options the chosen data would ignore are refused, not dropped.)
    if a.rows_scale.is_some() && !nmpsim_dlrm::presets::is_kaggle(&a.model) {
        bail!(
            "--rows-scale scales the Criteo-Kaggle tables; model `{}` takes --rows",
            a.model
        );
    }
    if a.lookups.is_some() && a.data.is_some() {
        bail!("--lookups applies to synthetic data; Criteo data has one lookup per table");
    }
    if a.max_ind_range == Some(0) {
        bail!("--max-ind-range 0: every embedding table needs at least 1 row");
    }
    if !(a.lr.is_finite() && a.lr >= 0.0) {
        bail!(
            "--lr {}: expected a non-negative, finite learning rate",
            a.lr
        );
    }
    if a.warmup_iters >= a.iters && a.warmup_iters > 1 {
        bail!(
            "--warmup-iters {} leaves none of the {} iterations for the summary; expected fewer than --iters",
            a.warmup_iters,
            a.iters
        );
    }
    let mut p = preset(&a.model, &o)?;
    // The synthetic data's batch and seed are the run's (as `open_data`
    // uses them), so config.json records what ran.
    p.data.batch_size = a.batch;
    p.data.seed = a.seed;
    if a.weighted && a.data.is_some() {
        bail!("--weighted applies to synthetic data; Criteo TSV has no per-sample weights");
    }
    if a.data.is_some() {
        // Criteo's shape: 13 dense and 26 categorical features.
        use nmpsim_traces::criteo::{NUM_CATS, NUM_DENSE};
        let (tables, dense) = (p.config.table_rows.len(), p.config.bottom[0]);
        if tables != NUM_CATS || dense != NUM_DENSE {
            let hint = if tables != NUM_CATS {
                "use --model criteo-kaggle".to_string()
            } else {
                format!("give an --arch-mlp-bot starting at {NUM_DENSE}")
            };
            bail!(
                "--data: Criteo data has {NUM_DENSE} dense and {NUM_CATS} categorical features; model `{}` takes {dense} dense features and has {tables} embedding tables ({hint})",
                a.model
            );
        }
        if let Some(m) = a.max_ind_range {
            for (flag, given) in [
                ("--rows", a.rows.is_some()),
                ("--rows-scale", a.rows_scale.is_some()),
            ] {
                if given {
                    bail!(
                        "{flag} sizes the tables, and --max-ind-range {m} gives every table {m} rows; give one of them"
                    );
                }
            }
            // The reader hashes every categorical value into m rows.
            p.config.table_rows = vec![m; p.config.table_rows.len()];
            p.config.validate()?;
        }
    } else if a.max_ind_range.is_some() || a.test_data.is_some() {
        bail!("--max-ind-range and --test-data apply to Criteo data given with --data");
    }
    crate::cmd::at_least_one(&[("--batch", a.batch as u64), ("--iters", a.iters)])?;
    if a.test_freq > 0 && a.test_batches == 0 {
        bail!(
            "--test-freq {}: evaluates on the test set, which --test-batches 0 leaves empty; give --test-batches 1 or more, or drop --test-freq",
            a.test_freq
        );
    }
    // A data file that cannot be read stops the run before its directory
    // exists. A pipe is not opened here: that would wait for its writer and
    // lose what it wrote.
    for (flag, f) in [("--data", &a.data), ("--test-data", &a.test_data)] {
        if let Some(f) = f {
            let meta = std::fs::metadata(f).with_context(|| format!("{flag} {}", f.display()))?;
            if meta.is_dir() {
                bail!(
                    "{flag} {}: is a directory; expected a Criteo TSV file",
                    f.display()
                );
            }
            if meta.is_file() {
                File::open(f).with_context(|| format!("{flag} {}", f.display()))?;
            } else if modes.len() > 1 {
                bail!(
                    "{flag} {}: a pipe or device can be read once, and --mode all trains {} modes on the same data; save the data to a file",
                    f.display(),
                    modes.len()
                );
            }
        }
    }
    if let (Some(d), Some(t)) = (&a.data, &a.test_data) {
        same_stream_refused(d, t)?;
    }
    let device = parse_device(&a.device)?;
    let lr = a.lr;
    let train = TrainConfig {
        model: p.config.clone(),
        batch: a.batch,
        iters: a.iters,
        seed: a.seed,
        lr,
        dense_optimizer: DenseOptimizer::parse(&a.dense_optimizer)?,
        embedding_optimizer: parse_optimizer(&a.optimizer, lr)?,
        schedule: LrSchedule {
            warmup_steps: a.lr_warmup_steps,
            decay_start_step: a.lr_decay_start,
            decay_steps: a.lr_decay_steps,
        },
        print_every: a.print_freq,
        test_every: a.test_freq,
    };
    train.validate()?;
    let nmp = NmpSetup {
        ranks: a.ranks,
        preset: a.preset.clone(),
        mapping: Some(a.mapping.clone()),
        placement: a.placement.parse::<Placement>()?,
        engine: a.engine.parse::<EngineKind>()?,
        link_gbps: a.link_gbps,
        link_latency_us: 1.0,
        sim_batches: a.sim_batches,
        fixed_bandwidth_gbps: a.nmp_bandwidth,
    };
    // The same checks as `NmpSetup::validate`, naming the flags.
    if a.ranks == 0 {
        bail!("--ranks 0: the NMP pool needs at least 1 rank");
    }
    crate::cmd::check_link_gbps(a.link_gbps)?;
    match a.nmp_bandwidth {
        Some(b) => crate::cmd::check_gbps("--nmp-bandwidth", b)?,
        None if a.sim_batches == SimBatches::First(0) => bail!(
            "--sim-batches 0 without --nmp-bandwidth: the NMP modes take their bandwidth from the simulated batches, so simulate at least 1 or give a fixed bandwidth"
        ),
        _ => {}
    }
    nmp.validate()?;
    // The GPU is opened (and the dense kernels compiled) here, before the run
    // directory exists: without a usable GPU the run stops with the reason
    // and leaves nothing behind.
    let device_name = match device {
        "cuda" => dense_backend(device, &train)?.device_name(),
        _ => None,
    };
    let bag = if a.data.is_some() {
        1
    } else {
        p.data
            .tables
            .iter()
            .map(|t| match t.bag_size {
                BagSize::Fixed { size } => size,
                BagSize::Uniform { max, .. } => max,
            })
            .max()
            .unwrap_or(1) as u64
    };
    check_memory(
        &train,
        a.test_batches,
        bag,
        a.data.is_some() && a.max_ind_range.is_some(),
    )?;
    let data = match &a.data {
        Some(f) => format!("criteo tsv {}", f.display()),
        None => format!("synthetic {} profile with a planted teacher", p.name),
    };
    let test_data = match (&a.data, &a.test_data) {
        (_, Some(f)) => format!("criteo tsv {}", f.display()),
        (Some(_), None) => format!("first {} batches of the data, held out", a.test_batches),
        (None, None) => format!("{} synthetic batches from a separate seed", a.test_batches),
    };
    Ok(Resolved {
        gpu: GpuPreset::named(&a.gpu)?,
        preset: p,
        modes,
        train,
        nmp,
        data,
        test_data,
        max_lookups_per_table: bag * a.batch as u64,
        warmup_iters: a.warmup_iters,
        test_batches: a.test_batches,
        device: device.to_string(),
        device_name,
    })
}

/// Training data and test set for one mode (identical for every mode).
fn open_data(a: &TrainArgs, r: &Resolved) -> Result<(Box<dyn DataSource>, Vec<Batch>)> {
    match &a.data {
        None => Ok(run::teacher_data(
            &r.preset,
            a.batch,
            a.seed,
            a.test_batches,
        )?),
        Some(path) => {
            // Without hashing, the raw values must lie in the model's tables:
            // the reader refuses one that does not, naming its line.
            let opts = CriteoOptions {
                max_ind_range: a.max_ind_range,
                table_rows: a
                    .max_ind_range
                    .is_none()
                    .then(|| r.train.model.table_rows.clone()),
            };
            let open = |p: &Path| -> Result<_> {
                let reader = CriteoReader::open(p, opts.clone())?;
                let b = CriteoBatcher::new(reader, a.batch)?;
                Ok(b.map(|r| r.map_err(DlrmError::from)))
            };
            let mut train = open(path)?.peekable();
            let held_out = if a.test_data.is_some() {
                0
            } else {
                a.test_batches
            };
            let test: Vec<Batch> = match &a.test_data {
                Some(t) => {
                    let v: Vec<Batch> = open(t)?.take(a.test_batches).collect::<Result<_, _>>()?;
                    if v.is_empty() && a.test_batches > 0 {
                        bail!("--test-data {}: no samples to test on", t.display());
                    }
                    if train.peek().is_none() {
                        bail!("--data {}: no samples to train on", path.display());
                    }
                    v
                }
                None => {
                    let mut v = Vec::new();
                    for _ in 0..a.test_batches {
                        match train.next() {
                            Some(b) => v.push(b?),
                            None => break,
                        }
                    }
                    if v.is_empty() && train.peek().is_none() {
                        bail!("--data {}: no samples to train on", path.display());
                    }
                    if train.peek().is_none() {
                        bail!(
                            "{}: holding out {} test batches of {} leaves nothing to train on; pass fewer --test-batches, a smaller --batch, or --test-data",
                            path.display(),
                            a.test_batches,
                            a.batch
                        );
                    }
                    v
                }
            };
            let epochs =
                CriteoEpochs::new(path.to_path_buf(), opts, a.batch, held_out, Box::new(train));
            Ok((Box::new(epochs), test))
        }
    }
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

/// Refuses, before anything is allocated, a model and test set the memory
/// cannot hold ([`TrainConfig::memory_bytes`]).
fn check_memory(t: &TrainConfig, test_batches: usize, bag: u64, hashed: bool) -> Result<()> {
    crate::cmd::check_memory(
        t.memory_bytes(test_batches, bag),
        "the model (tables, optimizer state, MLPs), one step's buffers and the test set",
        // (With --max-ind-range the tables are its size: --rows is refused then.)
        if hashed {
            "--max-ind-range, --dim, --arch-mlp-bot / --arch-mlp-top, --batch or --test-batches"
        } else {
            "--rows (--rows-scale for Criteo-Kaggle), --dim, --arch-mlp-bot / --arch-mlp-top, --batch or --test-batches"
        },
    )
}

pub fn run(a: TrainArgs) -> Result<ExitCode> {
    if a.mode.eq_ignore_ascii_case("list") {
        print!("{}", strategy::listing());
        return Ok(ExitCode::SUCCESS);
    }
    let r = resolve(&a)?;
    if !a.quiet && !r.modes.iter().any(|m| m.uses_nmp) {
        // (Flags with defaults cannot tell given from default: the command
        // line says.)
        let given = crate::cmd::flags_given(&NMP_FLAGS);
        if !given.is_empty() {
            eprintln!(
                "note: {} set{} up the NMP pool, which --mode {} does not use",
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
mod tests {
    use super::*;
    use clap::Parser;
    use nmpsim_dlrm::SystemMode;
    use nmpsim_dlrm::summary::{ModeAgg, summarize};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        train: TrainArgs,
    }

    fn results(dir: &Path) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
    }

    fn summary_text(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("summary.txt")).unwrap()
    }

    /// The summary written after a mode of `--mode all` says the run is still
    /// going and which modes are left: a run killed between modes is not
    /// taken for a completed one.
    #[test]
    fn the_summary_after_a_mode_says_the_run_is_still_going() {
        let a = Cli::parse_from(["train", "--mode", "all", "--nmp-bandwidth", "100"]).train;
        let r = resolve(&a).unwrap();
        let dir = std::env::temp_dir().join(format!("nmpsim-train-summary-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let rd = RunDir::create(Some(&dir), "train").unwrap();
        let mode = |m| {
            summarize(
                m,
                Status::Completed,
                Vec::new(),
                &ModeAgg::default(),
                0.0,
                Vec::new(),
            )
        };
        let summaries = vec![mode(SystemMode::BaselineCpu.as_str())];
        write_summary(&rd, &r, &summaries, RunState::Running).unwrap();
        let v = results(&dir);
        assert_eq!(v["results"]["status"], "running");
        assert_eq!(
            v["results"]["modes_not_run"],
            serde_json::json!(["tcast-cpu", "baseline-nmp", "tcast-nmp"])
        );
        let text = summary_text(&dir);
        assert!(
            text.starts_with("run in progress")
                && text
                    .lines()
                    .next()
                    .unwrap()
                    .ends_with("; not run yet: tcast-cpu, baseline-nmp, tcast-nmp"),
            "{text}"
        );

        // Stopped there: the modes left were not run.
        write_summary(&rd, &r, &summaries, RunState::Ended(Status::Interrupted)).unwrap();
        assert_eq!(results(&dir)["results"]["status"], "interrupted");
        assert!(
            summary_text(&dir)
                .starts_with("run interrupted; not run: tcast-cpu, baseline-nmp, tcast-nmp\n")
        );

        // Every mode ran: completed, nothing listed.
        let summaries: Vec<ModeSummary> =
            SystemMode::ALL.iter().map(|&m| mode(m.as_str())).collect();
        write_summary(&rd, &r, &summaries, RunState::Ended(Status::Completed)).unwrap();
        let v = results(&dir);
        assert_eq!(v["results"]["status"], "completed");
        assert!(v["results"].get("modes_not_run").is_none(), "{v}");
        assert!(summary_text(&dir).starts_with("model "));
        std::fs::remove_dir_all(&dir).ok();
    }
}
