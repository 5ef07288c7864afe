use std::path::PathBuf;

/// Every way configuring or running a DRAM engine can fail. Messages name the
/// input (preset, file and line, field) and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An unknown preset name; the message lists the valid ones.
    #[error("unknown DRAM preset `{name}`; valid presets: {valid}")]
    UnknownPreset { name: String, valid: String },

    /// An unknown engine name.
    #[error("unknown DRAM engine `{name}`; valid engines: {valid}")]
    UnknownEngine { name: String, valid: String },

    /// A malformed line of an input file.
    #[error("{path}: line {line}: {what}")]
    Parse {
        path: PathBuf,
        line: u64,
        what: String,
    },

    /// A request whose address does not fit the configured memory.
    #[error(
        "address {addr:#x} is beyond the configured capacity of {capacity} bytes ({capacity:#x}){context}"
    )]
    AddressOutOfRange {
        addr: u64,
        capacity: u64,
        /// Where the address came from, e.g. " (trace.txt line 12)"; may be empty.
        context: String,
    },

    /// A bad parameter value.
    #[error("invalid parameter `{name}`: {what}")]
    Param { name: String, what: String },

    /// The engine itself failed or reported something inconsistent.
    #[error("{engine}: {what}")]
    Engine { engine: &'static str, what: String },

    /// (The I/O error is part of the message, not a separate source, so
    /// that printing the error with its chain names it once.)
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error(transparent)]
    Trace(#[from] nmpsim_traces::TraceError),
}

impl SimError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SimError::Io {
            path: path.into(),
            error: source,
        }
    }

    pub fn param(name: impl Into<String>, what: impl Into<String>) -> Self {
        SimError::Param {
            name: name.into(),
            what: what.into(),
        }
    }

    /// An engine's `finish` called a second time.
    pub(crate) fn finished_twice(engine: &'static str) -> Self {
        SimError::Engine {
            engine,
            what: "finish called twice".into(),
        }
    }

    pub fn parse(path: impl Into<PathBuf>, line: u64, what: impl Into<String>) -> Self {
        SimError::Parse {
            path: path.into(),
            line,
            what: what.into(),
        }
    }
}
