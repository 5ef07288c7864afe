//! The one error type of the crate. Every public function checks its inputs
//! before touching them and returns one of these instead of panicking; messages
//! name the argument, what was found and what was expected.

use nmpsim_traces::TraceError;

/// Every way a kernel call can be refused.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The index batch breaks a structural rule (offsets, index range, weights).
    #[error("invalid batch: {what}")]
    InvalidBatch { what: String },

    /// An index array holds a value outside the range it addresses.
    #[error("`{arg}`[{position}] is {value}, at or past the bound {bound}")]
    IndexOutOfRange {
        arg: &'static str,
        position: usize,
        value: u64,
        bound: u64,
    },

    /// An argument has the wrong length or shape.
    #[error("shape mismatch in `{arg}`: found {found}, expected {expected}")]
    ShapeMismatch {
        arg: &'static str,
        found: String,
        expected: String,
    },

    /// An argument's value is not allowed (dim 0, negative learning rate, ...).
    #[error("invalid argument `{arg}`: {what}")]
    InvalidArgument { arg: &'static str, what: String },

    /// An error raised while working on one table of a multi-table batch.
    /// (The table's error is part of the message, not a separate source,
    /// so that printing the error with its chain says it once.)
    #[error("table {table}: {error}")]
    Table {
        table: usize,
        error: Box<KernelError>,
    },

    /// The CUDA backend failed: no device, a kernel that does not compile, a
    /// driver error.
    #[error("CUDA: {what}")]
    Cuda { what: String },

    /// A trace generator or reader failed (only `check` generates traces).
    #[error(transparent)]
    Trace(TraceError),
}

impl KernelError {
    /// Names the table this error happened in.
    pub fn in_table(self, table: usize) -> Self {
        KernelError::Table {
            table,
            error: Box::new(self),
        }
    }

    pub(crate) fn shape(arg: &'static str, found: impl ToString, expected: impl ToString) -> Self {
        KernelError::ShapeMismatch {
            arg,
            found: found.to_string(),
            expected: expected.to_string(),
        }
    }

    pub(crate) fn invalid(arg: &'static str, what: impl Into<String>) -> Self {
        KernelError::InvalidArgument {
            arg,
            what: what.into(),
        }
    }
}

impl From<TraceError> for KernelError {
    fn from(e: TraceError) -> Self {
        match e {
            // The kernels see one table at a time and do not know its position in
            // the batch, so drop the traces crate's table number (always 0 here);
            // callers that know it add it with `in_table`.
            TraceError::InvalidBatch { what, .. } => KernelError::InvalidBatch { what },
            other => KernelError::Trace(other),
        }
    }
}

/// Checks a [`nmpsim_traces::TableBatch`] before a kernel reads it.
pub(crate) fn check_batch(batch: &nmpsim_traces::TableBatch) -> Result<(), KernelError> {
    check_batch_shape(batch)?;
    batch.validate_rows_named(0)?;
    Ok(())
}

/// [`check_batch`] without the scan of every index against the row count,
/// for a kernel that checks each task's indices before it reads their rows.
pub(crate) fn check_batch_shape(batch: &nmpsim_traces::TableBatch) -> Result<(), KernelError> {
    batch.validate_shape()?;
    if batch.indices.len() > u32::MAX as usize {
        return Err(KernelError::invalid("batch", "more than 2^32 - 1 lookups"));
    }
    Ok(())
}

/// Checks that an output gradient is `bags x dim`.
pub(crate) fn check_grad_out(grad_out: &[f32], bags: usize, dim: usize) -> Result<(), KernelError> {
    if grad_out.len() != bags * dim {
        return Err(KernelError::shape(
            "grad_out",
            grad_out.len(),
            format!("B x dim = {bags} x {dim}"),
        ));
    }
    Ok(())
}

/// Checks an embedding dimension.
pub(crate) fn check_dim(dim: usize) -> Result<(), KernelError> {
    if dim == 0 {
        return Err(KernelError::invalid(
            "dim",
            "is 0; expected at least 1 element per row",
        ));
    }
    Ok(())
}
