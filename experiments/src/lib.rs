//! Design-space sweeps for nmpsim: what a sweep *is*, independent of how its runs
//! are executed.
//!
//! - [`spec`]: the TOML sweep spec ([`Spec`]): a command, fixed `[base]` flags,
//!   `[axes]` combined as a Cartesian product, `[[zip]]` groups that move
//!   together and `[repeat] seeds`, every value remembered with its line.
//! - [`schema`]: the command's flags, read from its clap definition
//!   ([`CommandSchema`]); a spec is checked against it, and every expanded run's
//!   argument vector is parsed by clap before anything runs.
//! - [`expand`](mod@expand): the spec as an ordered list of runs ([`Run`]), each with a
//!   stable hash of its resolved configuration.
//! - [`shard`]: deterministic slices of the run list ([`Shard`]) for many
//!   machines or a Slurm job array.
//! - [`results`]: flattening a run's JSON into metric columns and writing the
//!   tidy `results.csv` ([`results_csv`]).
//! - [`layout`]: the files of a sweep directory and of each run directory, and
//!   loading a finished run back from disk ([`load_row`]).
//! - [`plot`]: line and grouped-bar charts of a results table, as SVG and PNG
//!   ([`plot::chart_from_csv`], [`plot::write_chart`]).
//! - [`sweep`](mod@sweep): running a sweep: the plan ([`sweep::Plan`]), the
//!   executor of its child processes ([`sweep::run`]), the directory's lock and
//!   resumption, dry runs and the merge of shards, for any program a
//!   [`sweep::Launcher`] describes.
//!
//! It knows nothing about DRAM, NMP or training: a command is just a clap
//! definition and a JSON object it prints. It draws no progress bars and
//! installs no signal handlers: a [`sweep::Monitor`] is told what happens.

pub mod error;
pub mod expand;
pub mod hash;
pub mod layout;
pub mod plot;
pub mod results;
pub mod schema;
pub mod shard;
pub mod spec;
pub mod sweep;

pub use error::{SpecError, SpecErrors};
pub use expand::{Run, expand, plan_hash};
pub use layout::{Adopt, Resume, RunConfig, RunStatus, Status, SweepInfo, load_row, resume};
pub use results::{
    Row, UnmatchedPattern, flatten_metrics, is_timing_column, results_csv,
    unmatched_metric_patterns, without_columns,
};
pub use schema::{CommandSchema, check_runs, check_spec};
pub use shard::Shard;
pub use spec::{Scalar, Spec};

/// More runs than this and a sweep asks for `--yes` before starting.
pub const CONFIRM_ABOVE_RUNS: usize = 64;
