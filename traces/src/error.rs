use std::path::PathBuf;

/// Every way reading, generating or checking a trace can fail. Messages name the
/// input (file, line, field, table) and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("table {table}: {what}")]
    InvalidBatch { table: usize, what: String },

    #[error("{path}: line {line}: {what}")]
    Parse {
        path: PathBuf,
        line: u64,
        what: String,
    },

    #[error("{path}: {what}")]
    Format { path: PathBuf, what: String },

    #[error("invalid parameter `{name}`: {what}")]
    Param { name: String, what: String },

    /// (The I/O error is part of the message, not a separate source, so
    /// that printing the error with its chain names it once.)
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl TraceError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            error: source,
        }
    }

    /// A bad generator or reader parameter.
    pub fn param(name: impl Into<String>, what: impl Into<String>) -> Self {
        TraceError::Param {
            name: name.into(),
            what: what.into(),
        }
    }
}

/// One step of a reader that ends at its end or its first error: `step` is
/// what the reader read (`None` when it had already ended), and a step that
/// read no record, or failed, ends it (the error is handed out once).
pub(crate) fn until_done<T>(
    done: &mut bool,
    step: Option<Result<Option<T>, TraceError>>,
) -> Option<Result<T, TraceError>> {
    let next = step?.transpose();
    *done = !matches!(next, Some(Ok(_)));
    next
}
