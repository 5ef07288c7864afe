//! Running a sweep: the plan checked against the command's clap definition
//! ([`Plan`]), the executor that starts one child process per run and records
//! it ([`run`]), the sweep directory's lock and results table ([`dir`]),
//! the dry run's list and cost estimate ([`dry_run`]), and the merge of shard
//! directories ([`merge`](mod@merge)).
//!
//! What runs a run is a [`Launcher`]: the program's command-line definition
//! and the process for one argument vector. nmpsim's binary is one; a program
//! of your own is another (see `examples/two_point_sweep.rs`). Nothing here
//! draws progress or installs signal handlers: a [`Monitor`] is told what
//! happens, and the caller decides what to show and what to do on a signal
//! ([`record_interrupted`], [`merge::stop_copying`]).

mod child;
pub mod dir;
pub mod dry_run;
mod execute;
pub mod merge;
mod plan;

use std::path::PathBuf;

pub use dry_run::DryRun;
pub use execute::{
    Monitor, Started, SweepOptions, SweepOutcome, SweepSummary, record_interrupted, run,
};
pub use merge::{MergeOutcome, MergeSummary, merge};
pub use plan::Plan;

use crate::SpecErrors;

/// What runs the runs of a sweep.
pub trait Launcher: Sync {
    /// The program's command-line definition: a spec's `command` is one of
    /// its (sub)commands, and every run's flags are checked against it.
    fn cli(&self) -> clap::Command;

    /// Why the command `path` (its words, e.g. `["nmp", "run"]`) cannot be
    /// swept, if it cannot: a sweep of sweeps, say.
    fn refuse(&self, _path: &[String]) -> Option<String> {
        None
    }

    /// The process that runs one run, given its argument vector (the
    /// command's words, then its flags). The executor sets its standard
    /// streams.
    fn process(&self, argv: &[String]) -> std::process::Command;
}

/// A [`Launcher`] that runs a program on disk, checked against `cli`.
pub struct Program {
    pub exe: PathBuf,
    pub cli: clap::Command,
}

impl Launcher for Program {
    fn cli(&self) -> clap::Command {
        self.cli.clone()
    }

    fn process(&self, argv: &[String]) -> std::process::Command {
        let mut c = std::process::Command::new(&self.exe);
        c.args(argv);
        c
    }
}

/// Why a sweep, dry run or merge did not happen, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The spec, or the runs it expands to, are rejected: nothing ran.
    #[error(transparent)]
    Spec(#[from] SpecErrors),
    /// A file or directory of the sweep could not be read or written.
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A file of the sweep could not be written in full.
    #[error(transparent)]
    Stage(#[from] nmpsim_traces::staged::StageError),
    /// A file of the sweep's is not what the sweep wrote there.
    #[error("{0}")]
    Unreadable(String),
    /// The directories or the options are refused: nothing ran.
    #[error("{0}")]
    Refused(String),
    /// A run could not be recorded, so the sweep stopped, and the runs under
    /// way with it.
    #[error(
        "run {index} in {} (the sweep stopped, and the runs under way with it; the same command runs them again)",
        dir.display()
    )]
    Run {
        index: usize,
        dir: PathBuf,
        #[source]
        source: Box<SweepError>,
    },
}

/// `.io(|| context)` on an I/O result: the error names what was being done.
pub(crate) trait IoContext<T> {
    fn io(self, context: impl FnOnce() -> String) -> Result<T, SweepError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io(self, context: impl FnOnce() -> String) -> Result<T, SweepError> {
        self.map_err(|source| SweepError::Io {
            context: context(),
            source,
        })
    }
}

/// `n one` or `n many`.
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
