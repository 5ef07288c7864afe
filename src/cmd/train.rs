//! `nmpsim train`: train a DLRM whose embedding layers run in one of Tensor
//! Casting's system modes (or all four on identical data), with the
//! iteration timeline of each. The work is in `nmpsim-dlrm`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use clap::Args;
use nmpsim_dlrm::strategy::{self, BuildCtx, StrategyEntry};
use nmpsim_dlrm::summary::{
    ModeAgg, ModeSummary, RunState, TrainSummary, fill_speedups, summarize,
};
use nmpsim_dlrm::{
    CpuDense, DataSource, DenseBackend, DenseOptimizer, DlrmConfig, DlrmError, EvalRecord,
    GpuPreset, Interaction, IterRecord, LrSchedule, NmpSetup, Observer, PoolTimer, Preset,
    PresetOverrides, SimBatches, Source, Status, TeacherData, TrainConfig, parse_arch, preset,
};
use nmpsim_experiments::results::csv_field;
use nmpsim_nmp::Placement;
use nmpsim_sim::EngineKind;
use nmpsim_traces::{BagSize, Batch, CriteoBatcher, CriteoOptions, CriteoReader};
use serde::Serialize;

use crate::cmd::demo::parse_optimizer;
use crate::rundir::{self, RunDir, csv_text};

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

/// The trainer of one mode. With `--device cuda` the dense path runs on the
/// GPU and the NMP modes' pool primitives on the same GPU, emulated (one
/// emulator shared by the modes of a run).
fn mode_trainer(
    r: &Resolved,
    mode: &StrategyEntry,
    pool: Option<Arc<Mutex<PoolTimer>>>,
) -> Result<nmpsim_dlrm::Trainer> {
    let pool = mode.uses_nmp.then_some(pool).flatten();
    #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
    let mut ctx = BuildCtx::new(&r.train, r.gpu.clone(), pool);
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
        &p.config,
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
    let dense = r.train.model.bottom[0];
    match &a.data {
        None => {
            let mut spec = r.preset.data.clone();
            spec.batch_size = a.batch;
            spec.seed = a.seed;
            let train = TeacherData::new(spec.clone(), dense, a.seed)?;
            spec.seed = a.seed ^ 0x07e5_75e7;
            let mut test = TeacherData::new(spec, dense, a.seed)?;
            let test = (0..a.test_batches).map(|_| test.next_batch()).collect();
            Ok((Box::new(train), test))
        }
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
            let epochs = CriteoEpochs {
                // A pipe or device is read once: reopening a pipe waits for
                // another writer.
                rereadable: std::fs::metadata(path).is_ok_and(|m| m.is_file()),
                path: path.clone(),
                opts,
                batch: a.batch,
                skip: held_out,
                epoch: 0,
                it: Box::new(train),
            };
            Ok((Box::new(epochs), test))
        }
    }
}

/// A Criteo file read over and over (epochs), skipping the held-out batches
/// at its start each time.
struct CriteoEpochs {
    /// A regular file, read again for every epoch (else the data ends with
    /// the first pass).
    rereadable: bool,
    path: PathBuf,
    opts: CriteoOptions,
    batch: usize,
    skip: usize,
    epoch: u64,
    it: Box<dyn Iterator<Item = Result<Batch, DlrmError>>>,
}

impl DataSource for CriteoEpochs {
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>> {
        if let Some(b) = self.it.next() {
            return Some(b);
        }
        if !self.rereadable {
            return None;
        }
        let reader = match CriteoReader::open(&self.path, self.opts.clone()) {
            Ok(r) => r,
            Err(e) => return Some(Err(e.into())),
        };
        let b = match CriteoBatcher::new(reader, self.batch) {
            Ok(b) => b,
            Err(e) => return Some(Err(e.into())),
        };
        self.epoch += 1;
        self.it = Box::new(b.skip(self.skip).map(|r| r.map_err(DlrmError::from)));
        self.it.next()
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// Writes records to the run directory as they come, prints log lines.
struct Recorder {
    mode: &'static StrategyEntry,
    iters: u64,
    print_every: u64,
    quiet: bool,
    /// The run directory, which the files below are in.
    dir: PathBuf,
    log: BufWriter<File>,
    iter_csv: BufWriter<File>,
    timeline_csv: BufWriter<File>,
    eval_csv: BufWriter<File>,
    pb: indicatif::ProgressBar,
    /// The mode's first iterations whose NMP pool is simulated cycle by cycle
    /// (the progress bar says so while they run: each takes long).
    simulated: u64,
    /// Since the last log line: loss and accuracy times samples, wall ns,
    /// modelled ns, iterations, samples (loss and accuracy are averaged over
    /// samples, as in the DLRM reference; times over iterations).
    window: (f64, f64, f64, f64, u64, u64),
    epoch: u64,
    /// Iterations `0..warmup` go to `warm` instead of `agg` when there are more.
    warmup: u64,
    agg: ModeAgg,
    warm: ModeAgg,
}

impl Recorder {
    /// The log line of the iterations since the last one, `it` the last of
    /// them (1-based).
    fn log_window(&mut self, it: u64) -> Result<(), DlrmError> {
        let (l, acc, ns, modelled, n, samples) = self.window;
        let n = n.max(1) as f64;
        let per_sample = samples.max(1) as f64;
        let s = format!(
            "[{}] Finished training it {it}/{} of epoch {}, {:.2} ms/it, loss {:.4}, accuracy {:.3} %, modelled {:.2} ms/it",
            self.mode.name,
            self.iters,
            self.epoch,
            ns / n / 1e6,
            l / per_sample,
            100.0 * acc / per_sample,
            modelled / n / 1e6
        );
        self.window = (0.0, 0.0, 0.0, 0.0, 0, 0);
        self.line(&s)
    }
    fn line(&mut self, s: &str) -> Result<(), DlrmError> {
        if !self.quiet {
            self.pb.suspend(|| eprintln!("{s}"));
        }
        writeln!(self.log, "{s}")
            .and_then(|_| self.log.flush())
            .map_err(|e| self.io_err(LOG, e))
    }

    /// A failed write or flush of `name` in the run directory: the mode
    /// fails at once (records missing or cut mid-line are no results).
    fn io_err(&self, name: &str, source: std::io::Error) -> DlrmError {
        DlrmError::Write {
            what: self.dir.join(name).display().to_string(),
            source,
        }
    }
}

const LOG: &str = "train.log";
const ITERATIONS_CSV: &str = "iterations.csv";
const TIMELINE_CSV: &str = "timeline.csv";
const EVAL_CSV: &str = "eval.csv";

impl Observer for Recorder {
    fn iteration(&mut self, r: &IterRecord) -> Result<(), DlrmError> {
        let m = self.mode.name;
        let a = if r.iteration < self.warmup && self.iters > self.warmup {
            &mut self.warm
        } else {
            &mut self.agg
        };
        a.record(r);
        writeln!(
            self.iter_csv,
            "{m},{},{},{},{},{},{:.6},{:.6},{:.6}",
            r.iteration,
            r.batch_size,
            r.loss,
            r.accuracy,
            // Shortest round trip: a decayed rate (down to its 1e-7 floor) keeps its digits.
            r.lr,
            r.wall_ns / 1e6,
            r.iteration_ns / 1e6,
            r.timeline.hidden_ns() / 1e6
        )
        .map_err(|e| self.io_err(ITERATIONS_CSV, e))?;
        for e in &r.timeline.events {
            writeln!(
                self.timeline_csv,
                "{m},{},{},{},{},{},{},{},{:.1},{},{}",
                r.iteration,
                e.stage.as_str(),
                e.lane,
                csv_field(&e.primitive),
                // (A detail may hold a comma or a quote.)
                csv_field(&e.detail),
                e.resource.as_str(),
                e.source.as_str(),
                e.time_ns,
                e.bytes,
                // (Empty where no accounting of its own gives the energy.)
                if e.energy_pj > 0.0 {
                    format!("{:.1}", e.energy_pj)
                } else {
                    String::new()
                }
            )
            .map_err(|e| self.io_err(TIMELINE_CSV, e))?;
        }
        self.iter_csv
            .flush()
            .map_err(|e| self.io_err(ITERATIONS_CSV, e))?;
        self.timeline_csv
            .flush()
            .map_err(|e| self.io_err(TIMELINE_CSV, e))?;
        if !r.loss.is_finite() {
            // (Recorded above, then the mode stops: every later loss, the
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
        w.0 += r.loss * r.batch_size as f64;
        w.1 += r.accuracy * r.batch_size as f64;
        w.2 += r.wall_ns;
        w.3 += r.iteration_ns;
        w.4 += 1;
        w.5 += r.batch_size;
        self.pb.inc(1);
        if r.iteration + 1 == self.simulated {
            self.pb.set_message(self.mode.name.to_string());
        }
        let it = r.iteration + 1;
        if self.print_every > 0 && (it % self.print_every == 0 || it == self.iters) {
            self.log_window(it)?;
        }
        Ok(())
    }

    /// A run that stopped early (data exhausted, interrupted) logs its last
    /// iterations too.
    fn finished(&mut self, iterations: u64) -> Result<(), DlrmError> {
        if self.print_every > 0 && self.window.4 > 0 {
            self.log_window(iterations)?;
        }
        Ok(())
    }

    fn eval(&mut self, e: &EvalRecord) -> Result<(), DlrmError> {
        let m = self.mode.name;
        let auc = e.auc.map_or("n/a".to_string(), |a| format!("{a:.4}"));
        writeln!(
            self.eval_csv,
            "{m},{},{},{},{},{}",
            e.iteration,
            e.samples,
            e.loss,
            e.accuracy,
            e.auc.map_or(String::new(), |a| a.to_string())
        )
        .and_then(|_| self.eval_csv.flush())
        .map_err(|e| self.io_err(EVAL_CSV, e))?;
        self.agg.evals.push(e.clone());
        let s = format!(
            "[{m}] Testing at - {}/{} of epoch {}, loss {:.4}, accuracy {:.3} %, auc {auc}",
            e.iteration,
            self.iters,
            self.epoch,
            e.loss,
            100.0 * e.accuracy
        );
        self.line(&s)
    }

    fn should_stop(&self) -> bool {
        STOP.load(Ordering::Relaxed)
    }
}

/// A new CSV file of this run (one an earlier run into the same directory
/// left is replaced, not appended to).
/// The header is flushed at once: a run killed before its first record
/// still leaves a file that says what it holds.
fn csv_file(dir: &Path, name: &str, header: &str) -> Result<BufWriter<File>> {
    let p = dir.join(name);
    let f = File::create(&p).with_context(|| format!("cannot create {}", p.display()))?;
    let mut w = BufWriter::new(f);
    writeln!(w, "{header}")
        .and_then(|_| w.flush())
        .with_context(|| format!("cannot write {}", p.display()))?;
    Ok(w)
}

fn report_text(r: &Resolved, modes: &[ModeSummary], rd: &Path) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    // (The pool only where a mode runs on it.)
    let pool = if r.modes.iter().any(|m| m.uses_nmp) {
        format!(
            ", NMP {} x {} {} ({})",
            r.nmp.ranks,
            r.nmp.preset,
            r.nmp.placement,
            match r.nmp.fixed_bandwidth_gbps {
                Some(b) => format!("fixed {b} GB/s, modelled"),
                None => match r.nmp.sim_batches {
                    SimBatches::All =>
                        format!("{} engine, every iteration simulated", r.nmp.engine),
                    SimBatches::First(n) => format!(
                        "{} engine, {n} simulated iteration(s), then proxy",
                        r.nmp.engine
                    ),
                },
            }
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "model {} (batch {}, {} tables, dim {}), {}{pool}",
        r.preset.name,
        r.train.batch,
        r.train.model.table_rows.len(),
        r.train.model.dim,
        match &r.device_name {
            Some(d) => format!(
                "dense path measured on {d}, the rest of the GPU modelled as {}",
                r.gpu.name
            ),
            None => format!("GPU modelled as {}", r.gpu.name),
        },
    );
    // Fig. 12 style: modelled latency breakdown per primitive.
    let mut prims: Vec<String> = Vec::new();
    for m in modes {
        for b in &m.breakdown_ms {
            if !prims.contains(&b.primitive) {
                prims.push(b.primitive.clone());
            }
        }
    }
    let _ = writeln!(
        o,
        "\nLatency breakdown of the modelled system, ms per iteration (Fig. 12):"
    );
    let _ = writeln!(
        o,
        "(meas: measured on this machine; sim: NMP pool simulated cycle by cycle; proxy(it A-B): the bandwidth simulated in iterations A to B applied to\n this batch's bytes; model: modelled; emu: GPU emulation of the pool; hidden: time overlapped with other work, subtracted, so a row adds up to its iteration)"
    );
    // (Wide enough for the longest source label.)
    let lw = modes
        .iter()
        .flat_map(|m| m.breakdown_ms.iter().map(|b| b.label().len()))
        .max()
        .unwrap_or(0)
        .max(10);
    let cw = lw + 10;
    let _ = write!(o, "{:<14}", "mode");
    for p in &prims {
        let _ = write!(o, " {:>cw$}", p);
    }
    let _ = writeln!(o, " {:>10} {:>10}", "hidden", "iteration");
    for m in modes {
        let _ = write!(o, "{:<14}", m.mode.as_str());
        for p in &prims {
            match m.breakdown_ms.iter().find(|b| &b.primitive == p) {
                Some(b) => {
                    let _ = write!(o, " {:>9.3} {:<lw$}", b.ms_per_iteration, b.label());
                }
                None => {
                    let _ = write!(o, " {:>cw$}", "-");
                }
            }
        }
        let _ = writeln!(
            o,
            " {:>10.3} {:>10.3}",
            // (0 - x, not -x: nothing hidden shows as 0.000, not -0.000.)
            0.0 - m.modelled_hidden_ms_per_iteration,
            m.modelled_ms_per_iteration
        );
    }
    let _ = writeln!(
        o,
        "\nThroughput (Fig. 13: modelled system; wall: this machine, measured):"
    );
    let _ = writeln!(
        o,
        "{:<14} {:>14} {:>16} {:>12} {:>14} {:>12} {:>10}",
        "mode",
        "modelled ms/it",
        "speedup vs base",
        "wall ms/it",
        "wall samples/s",
        "dense GF/s",
        "test AUC"
    );
    for m in modes {
        let _ = writeln!(
            o,
            "{:<14} {:>14.3} {:>16} {:>12.2} {:>14.0} {:>12.1} {:>10}",
            m.mode.as_str(),
            m.modelled_ms_per_iteration,
            m.speedup_over_baseline_cpu
                .map_or("-".to_string(), |s| format!("{s:.2}x")),
            m.wall_ms_per_iteration,
            m.samples_per_second,
            m.dense_gflops,
            m.final_eval
                .as_ref()
                .and_then(|e| e.auc)
                .map_or("-".to_string(), |a| format!("{a:.4}"))
        );
    }
    let _ = writeln!(
        o,
        "\nShare of this machine's wall time per primitive (measured):"
    );
    for m in modes {
        let parts: Vec<String> = m
            .host_share
            .iter()
            .map(|(k, s)| format!("{k} {:.1}%", 100.0 * s))
            .collect();
        let _ = writeln!(o, "  {:<14} {}", m.mode.as_str(), parts.join(", "));
    }
    let with_calib: Vec<_> = modes
        .iter()
        .filter(|m| !m.nmp_calibration_gbps.is_empty())
        .collect();
    for m in &with_calib {
        let parts: Vec<String> = m
            .nmp_calibration_gbps
            .iter()
            .map(|(k, g)| format!("{k} {g:.1} GB/s"))
            .collect();
        let who = if with_calib.len() > 1 {
            format!(", {}", m.mode.as_str())
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "NMP effective bandwidth (simulated{who}): {}",
            parts.join(", ")
        );
    }
    for m in modes {
        if !m.emulated_raw_ms_per_iteration.is_empty() {
            let parts: Vec<String> = m
                .emulated_raw_ms_per_iteration
                .iter()
                .map(|(k, t)| format!("{k} {t:.3} ms"))
                .collect();
            let _ = writeln!(
                o,
                "GPU time of the emulated pool's kernels before the throttle, {} (measured): {}",
                m.mode.as_str(),
                parts.join(", ")
            );
        }
    }
    let sim_s = nmpsim_dlrm::pooltime::sim_wall_s();
    if sim_s > 0.0 {
        let _ = writeln!(
            o,
            "Cycle-level DRAM simulation of the pool: {sim_s:.1} s of this machine's wall time (measured; not in wall ms/it)"
        );
    }
    let _ = writeln!(o, "\nrun directory: {}", rd.display());
    o
}

/// Refuses, before anything is allocated, a model and test set the memory
/// cannot hold: the embedding tables with their optimizer state, the MLPs
/// with their gradients and optimizer state, and the test batches (kept
/// whole), counted without overflow.
fn check_memory(
    c: &DlrmConfig,
    t: &TrainConfig,
    test_batches: usize,
    bag: u64,
    hashed: bool,
) -> Result<()> {
    let state = t.embedding_optimizer.state_values_per_row(c.dim) as u128;
    let tables: u128 = c
        .table_rows
        .iter()
        .map(|&r| (r as u128).saturating_mul(c.dim as u128 + state))
        .fold(0, u128::saturating_add);
    let layers = |w: &[usize]| -> u128 {
        w.windows(2)
            .map(|p| (p[0] as u128).saturating_mul(p[1] as u128) + p[1] as u128)
            .fold(0, u128::saturating_add)
    };
    // (Weights, their gradients and up to two optimizer values each.)
    let mlps = layers(&c.bottom)
        .saturating_add(layers(&c.top))
        .saturating_mul(4);
    let per_sample = (c.table_rows.len() as u128)
        .saturating_mul(bag as u128 * 2 + 1)
        .saturating_add(c.bottom[0] as u128 + 1);
    let test = (test_batches as u128)
        .saturating_mul(t.batch as u128)
        .saturating_mul(per_sample);
    // One step's buffers: per table the pooled outputs and their gradients,
    // the expanded (or casted) gradients, a row per lookup, the lookups'
    // indices and sort keys; the MLPs' activations, pre-activations and
    // gradients per sample. (Measured peak: rm2 at batch 8192, 1000 rows,
    // 7.6 GB, against 8.3 GB counted.)
    let b = t.batch as u128;
    let lookups = b.saturating_mul(bag as u128);
    let per_table = lookups
        .saturating_mul(c.dim as u128)
        .saturating_add(b.saturating_mul(c.dim as u128).saturating_mul(2))
        .saturating_add(lookups.saturating_mul(4));
    let widths: u128 = c.bottom.iter().chain(&c.top).map(|&w| w as u128).sum();
    let step = (c.table_rows.len() as u128)
        .saturating_mul(per_table)
        .saturating_add(b.saturating_mul(widths).saturating_mul(3));
    let values = tables
        .saturating_add(mlps)
        .saturating_add(test)
        .saturating_add(step);
    crate::cmd::check_memory(
        values.saturating_mul(4),
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
    let mut first_data = Some(open_data(&a, &r)?);
    let rd = RunDir::create(a.out.as_deref(), "train")?;
    // An earlier run's records go (aside, if it finished) before this run's
    // are created.
    rd.remove_earlier(&["summary.csv", LOG, ITERATIONS_CSV, TIMELINE_CSV, EVAL_CSV])?;
    rd.write_config("train", &r)?;
    // Ctrl-C stops after the current iteration (SIGTERM ends the run at once).
    crate::signals::stop_on_sigint(&STOP);
    let dir = rd.path().to_path_buf();
    let log = BufWriter::new(
        File::create(dir.join(LOG))
            .with_context(|| format!("cannot create {}", dir.join(LOG).display()))?,
    );
    let mut iter_csv = csv_file(
        &dir,
        ITERATIONS_CSV,
        "mode,iteration,batch_size,loss,accuracy,lr,wall_ms,modelled_ms,modelled_hidden_ms",
    )?;
    let mut timeline_csv = csv_file(
        &dir,
        TIMELINE_CSV,
        "mode,iteration,stage,lane,primitive,detail,resource,source,time_ns,bytes,energy_pj",
    )?;
    let mut eval_csv = csv_file(&dir, EVAL_CSV, "mode,iteration,samples,loss,accuracy,auc")?;
    let mut log = Some(log);
    let mut summaries: Vec<ModeSummary> = Vec::new();
    let mut status = Status::Completed;
    let total = r.train.iters * r.modes.len() as u64;
    let pb = rundir::progress(total, "train", a.quiet || a.json);
    for &mode in &r.modes {
        if STOP.load(Ordering::Relaxed) {
            status = Status::Interrupted;
            break;
        }
        pb.set_message(mode.name.to_string());
        let (mut data, test) = match first_data.take() {
            Some(d) => d,
            None => open_data(&a, &r)?,
        };
        let mut tr = mode_trainer(&r, mode, pool.clone())?;
        let simulated = if mode.uses_nmp && r.nmp.fixed_bandwidth_gbps.is_none() {
            r.nmp.sim_batches.of(r.train.iters)
        } else {
            0
        };
        if simulated > 0 {
            pb.set_message(format!("{mode}: simulating the pool"));
        }
        let placement = tr.embedding.placement();
        // (The modelled FLOPs are linear in the batch size; an epoch's last
        // batch may be smaller.)
        let dense_flops_per_sample = tr.dense_model.flops / r.train.batch.max(1) as f64;
        let mut rec = Recorder {
            mode,
            iters: r.train.iters,
            print_every: r.train.print_every,
            quiet: a.quiet || a.json,
            dir: dir.clone(),
            log: log.take().expect("log handed back after each mode"),
            iter_csv,
            timeline_csv,
            eval_csv,
            pb: pb.clone(),
            simulated,
            window: (0.0, 0.0, 0.0, 0.0, 0, 0),
            epoch: 0,
            warmup: a.warmup_iters,
            agg: ModeAgg::default(),
            warm: ModeAgg::default(),
        };
        if let (Some(p), true) = (&pool, mode.uses_nmp) {
            p.lock()
                .map_err(|_| anyhow::anyhow!("NMP timer poisoned"))?
                .begin_run();
        }
        let outcome = tr.train(data.as_mut(), &test, &mut rec);
        let calib: Vec<(String, f64)> = match (&pool, mode.uses_nmp) {
            (Some(p), true) => p
                .lock()
                .map_err(|_| anyhow::anyhow!("NMP timer poisoned"))?
                .run_calibration_gbps(),
            _ => Vec::new(),
        };
        let mode_status = match &outcome {
            Ok(o) => o.status,
            Err(_) => Status::Failed,
        };
        // A run stopped inside its warm-up has only warm-up iterations to report.
        if rec.agg.iterations == 0 && rec.warm.iterations > 0 {
            let evals = std::mem::take(&mut rec.agg.evals);
            rec.agg = std::mem::take(&mut rec.warm);
            rec.agg.evals = evals;
        }
        let mut summary = summarize(
            mode.name,
            mode_status,
            placement,
            &rec.agg,
            dense_flops_per_sample,
            calib,
        );
        summary.warmup_iterations = rec.warm.iterations;
        // A proxy names the simulated iterations it comes from.
        if let SimBatches::First(n) = r.nmp.sim_batches
            && n > 0
        {
            for b in &mut summary.breakdown_ms {
                if b.sources.contains(&Source::SimulatedProxy) {
                    b.proxy_of_iterations =
                        Some((0, r.nmp.sim_batches.of(r.train.iters).max(1) - 1));
                }
            }
        }
        summaries.push(summary);
        let Recorder {
            log: l,
            iter_csv: i,
            timeline_csv: t,
            eval_csv: e,
            ..
        } = rec;
        log = Some(l);
        iter_csv = i;
        timeline_csv = t;
        eval_csv = e;
        if outcome.is_err() {
            status = Status::Failed;
        }
        // Results so far reach the disk whatever happens next: marked as a
        // run still going, unless this mode failed (the run ends here).
        let state = if outcome.is_err() {
            RunState::Ended(Status::Failed)
        } else {
            RunState::Running
        };
        let written = write_summary(&rd, &r, &mut summaries, state);
        let outcome = match outcome {
            Ok(o) => o,
            // The mode's error is the one to report: a summary that could
            // not be written either (a full disk) is said after it.
            Err(e) => {
                let also = match written {
                    Ok(_) => String::new(),
                    Err(w) => format!(" (nor could the summary be written: {w:#})"),
                };
                return Err(anyhow::Error::from(e).context(format!(
                    "mode {mode}: training failed; the log and the records so far are in {}{also}",
                    dir.display()
                )));
            }
        };
        written?;
        if outcome.status != Status::Completed {
            status = outcome.status;
            if outcome.status == Status::Interrupted {
                break;
            }
        }
    }
    pb.finish_and_clear();
    let text = write_summary(&rd, &r, &mut summaries, RunState::Ended(status))?;
    // (The log is complete before anything is printed: a stdout that cannot
    // be written leaves a whole run directory.)
    if let Some(mut l) = log {
        writeln!(l, "{text}")
            .and_then(|_| l.flush())
            .with_context(|| format!("cannot write {}", dir.join(LOG).display()))?;
    }
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
    summaries: &mut [ModeSummary],
    state: RunState,
) -> Result<String> {
    let not_run: Vec<String> = r
        .modes
        .iter()
        .filter(|m| !summaries.iter().any(|s| s.mode == m.name))
        .map(|m| m.name.to_string())
        .collect();
    fill_speedups(summaries);
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
    let header = [
        "mode",
        "status",
        "iterations",
        "wall_ms_per_iteration",
        "samples_per_second",
        "dense_gflops",
        "modelled_ms_per_iteration",
        "modelled_hidden_ms_per_iteration",
        "speedup_over_baseline_cpu",
        "final_loss",
        "test_auc",
    ];
    let rows: Vec<Vec<String>> = summaries
        .iter()
        .map(|m| {
            vec![
                m.mode.to_string(),
                serde_json::to_value(m.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                m.iterations.to_string(),
                format!("{:.4}", m.wall_ms_per_iteration),
                format!("{:.1}", m.samples_per_second),
                format!("{:.2}", m.dense_gflops),
                format!("{:.4}", m.modelled_ms_per_iteration),
                format!("{:.4}", m.modelled_hidden_ms_per_iteration),
                m.speedup_over_baseline_cpu
                    .map_or(String::new(), |s| format!("{s:.4}")),
                // (Empty for a loss that is not a number, as results.json's null.)
                m.final_loss
                    .filter(|l| l.is_finite())
                    .map_or(String::new(), |l| format!("{l:.6}")),
                m.final_eval
                    .as_ref()
                    .and_then(|e| e.auc)
                    .map_or(String::new(), |a| format!("{a:.6}")),
            ]
        })
        .collect();
    rd.write_file("summary.csv", csv_text(&header, &rows).as_bytes())?;
    let mut text = report_text(r, summaries, rd.path());
    if state != RunState::Ended(Status::Completed) {
        // Say so where it is read, not only in the JSON and CSV.
        let not_run: Vec<String> = not_run.iter().map(|m| m.to_string()).collect();
        let word = match state {
            RunState::Running => "in progress (this summary is rewritten after each mode)",
            RunState::Ended(Status::Interrupted) => "interrupted",
            RunState::Ended(Status::Failed) => "failed",
            RunState::Ended(Status::DataExhausted) => "stopped: the data ran out",
            RunState::Ended(Status::Completed) => "completed",
        };
        let rest = match (not_run.is_empty(), state) {
            (true, _) => String::new(),
            (false, RunState::Running) => format!("; not run yet: {}", not_run.join(", ")),
            (false, _) => format!("; not run: {}", not_run.join(", ")),
        };
        text = format!("run {word}{rest}\n{text}");
    }
    rd.write_summary(&text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use nmpsim_dlrm::SystemMode;

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
        let mut summaries = vec![mode(SystemMode::BaselineCpu.as_str())];
        write_summary(&rd, &r, &mut summaries, RunState::Running).unwrap();
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
        write_summary(
            &rd,
            &r,
            &mut summaries,
            RunState::Ended(Status::Interrupted),
        )
        .unwrap();
        assert_eq!(results(&dir)["results"]["status"], "interrupted");
        assert!(
            summary_text(&dir)
                .starts_with("run interrupted; not run: tcast-cpu, baseline-nmp, tcast-nmp\n")
        );

        // Every mode ran: completed, nothing listed.
        let mut summaries: Vec<ModeSummary> =
            SystemMode::ALL.iter().map(|&m| mode(m.as_str())).collect();
        write_summary(&rd, &r, &mut summaries, RunState::Ended(Status::Completed)).unwrap();
        let v = results(&dir);
        assert_eq!(v["results"]["status"], "completed");
        assert!(v["results"].get("modes_not_run").is_none(), "{v}");
        assert!(summary_text(&dir).starts_with("model "));
        std::fs::remove_dir_all(&dir).ok();
    }
}
