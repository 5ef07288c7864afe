/// Every way configuring or training a DLRM can fail.
#[derive(Debug, thiserror::Error)]
pub enum DlrmError {
    /// An inconsistent or malformed model or run configuration.
    #[error("{0}")]
    Config(String),

    /// A write failed: `what` names the file, or what was being written.
    #[error("cannot write {what}: {source}")]
    Write {
        what: String,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    Kernel(#[from] nmpsim_kernels::KernelError),

    #[error(transparent)]
    Trace(#[from] nmpsim_traces::TraceError),

    #[error(transparent)]
    Nmp(#[from] nmpsim_nmp::NmpError),

    #[error(transparent)]
    Sim(#[from] nmpsim_sim::SimError),
}
