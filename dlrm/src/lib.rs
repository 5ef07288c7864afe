//! The DLRM trainer of nmpsim: bottom MLP, embedding tables, feature
//! interaction, top MLP, binary cross-entropy, metrics; the embedding layer as
//! a strategy with Tensor Casting's four system modes; the dense path behind
//! a backend trait; and the iteration timeline that labels every time
//! measured, simulated or modelled.
//!
//! - [`model`]: the whole model in one struct, for gradient checks.
//! - [`dense`]: [`DenseBackend`] and the CPU backend [`CpuDense`].
//! - [`embedding`]: [`EmbeddingStrategy`] and [`SystemModes`].
//! - [`strategy`]: the strategies by name (the registry `--mode` reads).
//! - [`timeline`], [`gpu`], [`pooltime`]: how each primitive's time is obtained.
//! - [`trainer`]: the loop, records and evaluation.
//! - [`report`]: the run's text report and `summary.csv`.
//! - [`run`]: a run of several strategies with its record files (what
//!   `nmpsim train` drives).
//! - [`summary`]: a run's results as types, as `results.json` holds them.
//! - [`presets`], [`data`]: named models and synthetic labelled data.
pub mod cdlrm;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
pub mod cuda_dense;
pub mod data;
pub mod dense;
pub mod eltt;
pub mod embedding;
pub mod emulate;
pub mod error;
pub mod gpu;
pub mod host;
pub mod hostcal;
pub mod hot;
pub mod interaction;
pub mod loss;
pub mod mlp;
pub mod model;
pub mod pooltime;
pub mod presets;
pub mod report;
pub mod run;
pub mod scars;
pub mod schedule;
pub mod strategy;
pub mod summary;
pub mod timeline;
pub mod trainer;

pub use data::TeacherData;
pub use dense::{CpuDense, DenseBackend, DenseOptimizer, DenseParams, DenseTimes};
pub use embedding::{
    EmbeddingStrategy, HostTimes, ModePlan, Place, StepCtx, SystemMode, SystemModes, TimingEnv,
};
pub use error::DlrmError;
pub use gpu::{DenseModel, GpuPreset};
pub use interaction::Interaction;
pub use mlp::{Linear, Mlp, parse_arch};
pub use model::{Coalescing, Dlrm, DlrmConfig, Forward, Grads};
pub use pooltime::{NmpSetup, PoolTimer, SimBatches};
pub use presets::{Preset, PresetOverrides, preset};
pub use schedule::LrSchedule;
pub use strategy::{BuildCtx, StrategyEntry};
pub use summary::{Breakdown, ModeAgg, ModeSummary, RunState, TrainSummary};
pub use timeline::{Event, Resource, Source, Stage, StepTimeline};
pub use trainer::{
    DataSource, EvalRecord, IterRecord, Observer, Quiet, Status, TrainConfig, TrainOutcome, Trainer,
};
