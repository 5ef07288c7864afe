/// Every way building or running the NMP pool can fail. Messages name the
/// instruction, table, field or rank and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum NmpError {
    /// An instruction names a table the pool does not hold.
    #[error("instruction {op}: table {table} does not exist (the pool holds {tables} tables)")]
    MissingTable {
        op: &'static str,
        table: u32,
        tables: usize,
    },

    /// An index past the end of what it addresses.
    #[error("instruction {op}: `{field}`[{position}] is {value}, past the end ({bound}) of {what}")]
    IndexOutOfRange {
        op: &'static str,
        field: &'static str,
        position: usize,
        value: u64,
        bound: u64,
        what: String,
    },

    /// An instruction whose fields do not fit together.
    #[error("instruction {op}: {what}")]
    Malformed { op: &'static str, what: String },

    /// The tables (and their optimizer state and buffers) do not fit the ranks.
    #[error("placement {placement}: rank {rank} needs {need} bytes but holds {capacity}: {what}")]
    Capacity {
        placement: String,
        rank: u32,
        /// Wider than the capacity: a size past 2^64 bytes is reported as it is.
        need: u128,
        capacity: u64,
        what: String,
    },

    /// A binary instruction that cannot be decoded.
    #[error("instruction bytes at offset {offset}: {what}")]
    Decode { offset: usize, what: String },

    /// A bad parameter.
    #[error("invalid parameter `{name}`: {what}")]
    Param { name: String, what: String },

    /// An error of a step a run names (`placement: phase of batch N`).
    #[error("{what}: {inner}")]
    Within { what: String, inner: Box<NmpError> },

    #[error(transparent)]
    Kernel(#[from] nmpsim_kernels::KernelError),

    #[error(transparent)]
    Sim(#[from] nmpsim_sim::SimError),
}

impl NmpError {
    /// This error as one of the step `what`.
    pub fn within(self, what: impl Into<String>) -> Self {
        NmpError::Within {
            what: what.into(),
            inner: Box::new(self),
        }
    }

    pub fn param(name: impl Into<String>, what: impl Into<String>) -> Self {
        NmpError::Param {
            name: name.into(),
            what: what.into(),
        }
    }
}
