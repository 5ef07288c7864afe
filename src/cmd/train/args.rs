//! The flags of `nmpsim train`.

use std::path::PathBuf;

use clap::Args;
use nmpsim_dlrm::SimBatches;
use serde::Serialize;

#[derive(Args, Debug, Clone, Serialize)]
#[command(mut_arg("placement", |a| a
    .default_value("row-interleaved")
    .help("Row placement on the ranks: vector-sliced, row-interleaved, table-per-rank")))]
#[command(mut_arg("mapping", |a| a
    .default_value("ro-ra-ba-bg-co")
    .help("Address mapping of each rank, most significant field first (ro-ra-ba-bg-co keeps a row's slices in one DRAM row)")))]
#[command(mut_arg("engine", |a| a
    .default_value("native")
    .help("DRAM engine: native (the default: Rust; on one rank per channel it gives dramsim3's results but for the writes dramsim3 leaves unissued, over 20x faster, which makes simulating every iteration affordable), dramsim3 or ramulator")))]
#[command(after_help = "Examples:
  nmpsim train --model tiny --iters 300 --batch 256           # seconds; learns the planted teacher
  nmpsim train --model rm1 --mode tcast-nmp --batch 2048 --iters 200
  nmpsim train --model rm1 --mode tcast --iters 20 --rows 100000   # Fig. 12 breakdown, Fig. 13 speedups
  nmpsim train --model rm1 --mode baseline-cpu,tcast-nmp --iters 20 --rows 100000
  nmpsim train --mode list                                    # every embedding strategy
  nmpsim train --model criteo-kaggle --data data/criteo-sample.tsv --max-ind-range 100000 --batch 512
      # (data/criteo-sample.tsv ships with the source tree; `nmpsim trace criteo-sample` writes others)
  nmpsim train --model rm2 --mode tcast --nmp-bandwidth 600 --gpu a100   # no DRAM simulation
  nmpsim train --model criteo-kaggle --rows-scale 1 --iters 50 --json
  nmpsim train --model rm1 --device cuda --iters 50   # dense path run and timed on this machine's GPU
  nmpsim train --model rm1 --mode tcast --device cuda --iters 20
  nmpsim train --model criteo-kaggle --mode baseline-cpu,fae,scars --batch 1024 --iters 200 --hot-budget 16MiB
  nmpsim train --model criteo-kaggle --mode fae-nmp --iters 50 --fae-schedule fixed --fae-rate 10
  nmpsim train --model rm1 --rows 100000 --batch 256 --mode baseline-cpu,cdlrm,cdlrm-nmp --lookahead 5 --iters 20
  nmpsim train --model criteo-kaggle --mode baseline-cpu,eltt --tt-rank 64 --iters 200
  nmpsim train --model criteo-kaggle --mode eltt,eltt-nmp --iters 6 --sim-batches 2 --alu-lanes 4
  nmpsim train --model rm1 --rows 100000 --mode tcast --iters 20 --host dgx1   # CPU times modelled
  nmpsim train --model rm1 --rows 100000 --mode tcast --iters 20 --host dgx1 --host-channels 8

Times: every primitive of the modelled system is labelled measured (CPU
kernels on this machine; with --device cuda also the dense path and casting,
timed with CUDA events on this machine's GPU), simulated (the NMP pool,
cycle by cycle on the DRAM engine in every iteration; with --sim-batches N only
the first N, later ones labelled proxy: their bandwidth applied to the batch's
bytes), emulated (with --device cuda: the NMP pool's primitives and link as
CUDA kernels on a stream of their own, held to the simulated time), or
modelled (the GPU by roofline from --gpu, the links by bandwidth), or, with
--host, modelled-host (the CPU primitives by the host's model, docs/host.md).
`ms/it` in the log lines is this machine's wall clock.")]
pub struct TrainArgs {
    /// Model preset: tiny, rm1, rm2, rm3, rm4, criteo-kaggle.
    #[arg(long, default_value = "tiny")]
    pub(crate) model: String,
    /// Embedding strategy (system mode): baseline-cpu, tcast-cpu, baseline-nmp,
    /// tcast-nmp, fae, fae-nmp, scars; a family (tcast; hot: fae, fae-nmp and scars), all, or a
    /// comma-separated list of these; `list` prints every registered strategy and exits.
    #[arg(long, default_value = "baseline-cpu")]
    pub(crate) mode: String,
    /// Samples per mini-batch.
    #[arg(long, default_value_t = 2048)]
    pub(crate) batch: usize,
    /// Training iterations (per mode).
    #[arg(long, default_value_t = 100)]
    pub(crate) iters: u64,
    /// Seed of the synthetic data and of the model's initialisation.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Base learning rate (dense and embedding optimizers): non-negative and finite.
    #[arg(long, default_value_t = 0.1, value_parser = crate::cmd::f32_arg)]
    pub(crate) lr: f32,
    /// Dense optimizer: sgd or adagrad.
    #[arg(long, default_value = "sgd", value_parser = dense_optimizer_arg)]
    #[serde(serialize_with = "dense_optimizer_name")]
    pub(crate) dense_optimizer: nmpsim_dlrm::DenseOptimizer,
    /// Embedding optimizer: sgd, adagrad, row-wise-adagrad, rms-prop.
    #[arg(long, default_value = "sgd")]
    pub(crate) optimizer: nmpsim_kernels::OptimizerKind,
    /// Linear learning-rate warm-up steps, as the DLRM reference's scheduler (docs/dlrm.md).
    #[arg(long, default_value_t = 0)]
    pub(crate) lr_warmup_steps: u64,
    /// Step at which the quadratic decay starts.
    #[arg(long, default_value_t = 0)]
    pub(crate) lr_decay_start: u64,
    /// Steps over which the learning rate decays (0: no decay).
    #[arg(long, default_value_t = 0)]
    pub(crate) lr_decay_steps: u64,
    /// Rows of every RM table (default 1,000,000); a cap on the rows of every Kaggle table (after --rows-scale) and tiny table (tiny's are 64, 32, 16).
    #[arg(long)]
    pub(crate) rows: Option<u64>,
    /// Scale of the Criteo-Kaggle table sizes (default 0.25; 1 = the full 33.8M rows); criteo-kaggle only.
    #[arg(long)]
    pub(crate) rows_scale: Option<f64>,
    /// Embedding dimension.
    #[arg(long)]
    pub(crate) dim: Option<usize>,
    /// Lookups per bag of every table (synthetic data only).
    #[arg(long)]
    pub(crate) lookups: Option<u32>,
    /// Bottom MLP, dense features first (`13-512-256-64-16`).
    #[arg(long, value_name = "ARCH")]
    pub(crate) arch_mlp_bot: Option<String>,
    /// Top MLP after the interaction, ending in 1 (`512-256-1`).
    #[arg(long, value_name = "ARCH")]
    pub(crate) arch_mlp_top: Option<String>,
    /// Feature interaction: dot or cat.
    #[arg(long)]
    pub(crate) interaction: Option<String>,
    /// Per-sample weights on every lookup (weighted-sum pooling; synthetic data).
    #[arg(long)]
    pub(crate) weighted: bool,
    /// Criteo TSV to train on instead of synthetic data.
    #[arg(long, value_name = "FILE")]
    pub(crate) data: Option<PathBuf>,
    /// Criteo TSV to test on (default: the first --test-batches of --data are held out).
    #[arg(long, value_name = "FILE")]
    pub(crate) test_data: Option<PathBuf>,
    /// Hash categorical values into this many rows per table (Criteo data).
    #[arg(long)]
    pub(crate) max_ind_range: Option<u64>,
    /// Batches in the test set.
    #[arg(long, default_value_t = 4)]
    pub(crate) test_batches: usize,
    /// Evaluate every N iterations (0: at the end only).
    #[arg(long, default_value_t = 0)]
    pub(crate) test_freq: u64,
    /// Print a log line every N iterations, and after the last (0: no per-iteration lines).
    #[arg(long, default_value_t = 10)]
    pub(crate) print_freq: u64,
    /// Iterations at the start of each mode left out of the summary's per-iteration
    /// figures (they pay for first-touch page faults and buffer growth); they are
    /// still in iterations.csv and timeline.csv. 0 keeps every iteration; more than 1
    /// must leave some of the --iters.
    #[arg(long, default_value_t = 1)]
    pub(crate) warmup_iters: u64,
    /// GPU preset the dense path (unless --device cuda) and casting are modelled on: v100, a100, h100.
    #[arg(long, default_value = "v100")]
    pub(crate) gpu: String,
    /// Where the GPU side runs: cpu (the dense path on this CPU, its GPU time
    /// modelled from --gpu) or cuda (CUDA device 0 of this machine: the dense
    /// path and casting run and are timed there; so are the GPU-placed
    /// embedding primitives of fae, scars, cdlrm and eltt, checked against
    /// the CPU's numbers, which the run keeps; and the NMP modes' pool is
    /// emulated there, fae-nmp's cold mini-batches too; fails before
    /// training without one).
    #[arg(long, default_value = "cpu", value_name = "DEVICE")]
    pub(crate) device: String,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) pool: crate::cmd::PoolArgs,
    /// Iterations of each NMP mode simulated cycle by cycle: all (the default), or N,
    /// after which the simulated bandwidth is applied to later batches' bytes (faster;
    /// those times are labelled proxy, with the iterations they come from).
    #[arg(long, default_value = "all", value_name = "N|all", value_parser = SimBatches::parse)]
    pub(crate) sim_batches: SimBatches,
    /// Skip DRAM simulation: every NMP primitive runs at this effective GB/s (modelled).
    #[arg(long, value_name = "GBPS")]
    pub(crate) nmp_bandwidth: Option<f64>,
    /// FAE's and SCARS's memory for the hot rows on the GPU (values and optimizer
    /// state), a size with a unit (256MiB, 1GB); the access threshold is the least
    /// whose hot rows fit (tables under 1 MiB hot whole).
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = crate::cmd::size_arg)]
    pub(crate) hot_budget: u64,
    /// Share of the training samples past the first --hot-min-samples that the
    /// calibrator counts, in (0, 1] (FAE: 0.05).
    #[arg(long, value_name = "RATE", default_value_t = nmpsim_traces::hot::FAE_SAMPLE_RATE)]
    pub(crate) hot_sample_rate: f64,
    /// Training samples the calibrator counts all of (FAE: the first 500K).
    #[arg(long, value_name = "N", default_value_t = nmpsim_traces::hot::FAE_MIN_SAMPLES)]
    pub(crate) hot_min_samples: u64,
    /// Samples of the training input the calibrator profiles (default: the samples the
    /// run trains, --iters x --batch); more stand for the dataset of which a short run
    /// trains a prefix.
    #[arg(long, value_name = "N", value_parser = crate::cmd::positive_arg::<u64>)]
    pub(crate) hot_profile_samples: Option<u64>,
    /// FAE's shuffle scheduler: adaptive (its Eq. 7 rate rule), fixed (--fae-rate
    /// throughout) or off (the input's own mini-batches in order).
    #[arg(long, value_name = "KIND", default_value = "adaptive")]
    pub(crate) fae_schedule: String,
    /// FAE's starting rate: the percent of each kind's mini-batches per phase (FAE: 50).
    #[arg(long, value_name = "PCT", default_value_t = 50.0)]
    pub(crate) fae_rate: f64,
    /// Schedules of falling loss before FAE's rate doubles (FAE's u: 4).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub(crate) fae_patience: u32,
    /// SCARS's cache, MiB (default: the size its cost model gives, within
    /// --device-memory).
    #[arg(long, value_name = "MIB")]
    pub(crate) cache_mb: Option<f64>,
    /// SCARS's device memory for its cache and the batch (Eq. 7), a size with a unit
    /// (default: --hot-budget plus the batch's footprint).
    #[arg(long, value_name = "SIZE", value_parser = crate::cmd::size_arg)]
    pub(crate) device_memory: Option<u64>,
    /// SCARS's order of hot and normal mini-batches, as --fae-schedule; the paper
    /// gives none: fixed at --scars-rate by default.
    #[arg(long, value_name = "KIND", default_value = "fixed")]
    pub(crate) scars_schedule: String,
    /// SCARS's rate, percent of each kind per phase.
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub(crate) scars_rate: f64,
    /// cDLRM's set limit L: a table of at most L rows is cached whole, direct-mapped; a
    /// larger one gets NextPrime(L) sets of --ways ways (cDLRM: 50000).
    #[arg(long, value_name = "L", default_value_t = nmpsim_dlrm::cdlrm::DEFAULT_SETS)]
    pub(crate) cache_sets: u64,
    /// cDLRM's ways per set (cDLRM: 16).
    #[arg(long, value_name = "W", default_value_t = nmpsim_dlrm::cdlrm::DEFAULT_WAYS)]
    pub(crate) ways: u32,
    /// cDLRM's look-ahead window: batches whose rows are installed in the caches at once.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub(crate) lookahead: usize,
    /// cDLRM's consistency: coherent (the write-backs reach the host before a window is
    /// installed: training bit-identical to baseline-cpu) or async (the paper's order;
    /// rows installed stale are counted).
    #[arg(long, value_name = "KIND", default_value = "coherent")]
    pub(crate) consistency: nmpsim_dlrm::cdlrm::Consistency,
    /// EL-Rec's TT rank R (ranks [1, R, R, 1]; the paper's 128 on a V100).
    #[arg(long, value_name = "R", default_value_t = 128, value_parser = crate::cmd::positive_arg::<usize>)]
    pub(crate) tt_rank: usize,
    /// EL-Rec: tables of more rows than this become TT tables (the paper's 1M).
    #[arg(long, value_name = "ROWS", default_value_t = 1_000_000)]
    pub(crate) tt_threshold: u64,
    /// EL-Rec without its batch-level reuse: every TT lookup computes its own prefix product.
    #[arg(long)]
    pub(crate) no_tt_reuse: bool,
    /// EL-Rec's locality-based reordering of the TT tables' rows, built from the input's
    /// first N batches (hot 1% first, then co-occurrence groups; 0: none).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) tt_reorder: usize,
    /// A modelled host CPU (a preset of `nmpsim host presets`, or a host file .toml):
    /// the CPU primitives' times then come from its model, labelled modelled-host, the
    /// same on every machine; without it they are measured on this machine.
    #[arg(long, value_name = "NAME|FILE")]
    pub(crate) host: Option<String>,
    /// The modelled host's cores, all sockets together, in place of its own (with --host).
    #[arg(long, value_name = "N", requires = "host", value_parser = crate::cmd::positive_arg::<u32>)]
    pub(crate) host_cores: Option<u32>,
    /// The modelled host's DDR channels a socket, in place of its own (with --host).
    #[arg(long, value_name = "N", requires = "host", value_parser = crate::cmd::positive_arg::<u32>)]
    pub(crate) host_channels: Option<u32>,
    /// The modelled host's DDR transfer rate, MT/s, in place of its own (with --host).
    #[arg(long, value_name = "MTS", requires = "host", value_parser = crate::cmd::positive_arg::<u32>)]
    pub(crate) host_ddr_mts: Option<u32>,
    /// Run directory (default runs/train-<time>-<pid>).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Print the summary JSON instead of the tables.
    #[arg(long)]
    pub(crate) json: bool,
    /// No log lines or progress bar.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

/// The flags of the strategies with hot rows (fae, fae-nmp, scars).
pub(crate) const HOT_FLAGS: [&str; 11] = [
    "--hot-budget",
    "--hot-profile-samples",
    "--hot-sample-rate",
    "--hot-min-samples",
    "--fae-schedule",
    "--fae-rate",
    "--fae-patience",
    "--cache-mb",
    "--device-memory",
    "--scars-schedule",
    "--scars-rate",
];

/// The flags that set up the NMP pool: only the NMP modes use them.
/// Flags of cdlrm alone.
pub(crate) const CDLRM_FLAGS: [&str; 4] =
    ["--cache-sets", "--ways", "--lookahead", "--consistency"];

/// Flags of eltt alone.
pub(crate) const ELTT_FLAGS: [&str; 4] = [
    "--tt-rank",
    "--tt-threshold",
    "--no-tt-reuse",
    "--tt-reorder",
];

pub(crate) const NMP_FLAGS: [&str; 13] = [
    "--ranks",
    "--preset",
    "--dram-config",
    "--timing",
    "--org",
    "--placement",
    "--mapping",
    "--engine",
    "--link-gbps",
    "--alu-lanes",
    "--alu-ghz",
    "--sim-batches",
    "--nmp-bandwidth",
];

/// `--dense-optimizer`: sgd or adagrad.
fn dense_optimizer_arg(s: &str) -> Result<nmpsim_dlrm::DenseOptimizer, String> {
    nmpsim_dlrm::DenseOptimizer::parse(s).map_err(|e| e.to_string())
}

/// The dense optimizer as the command line named it.
fn dense_optimizer_name<S: serde::Serializer>(
    o: &nmpsim_dlrm::DenseOptimizer,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(o.name())
}
