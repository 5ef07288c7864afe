//! The CUDA C sources of the dense path (feature `cuda`), compiled at run
//! time through NVRTC by [`nmpsim_kernels::cuda::Gpu::function`]. The NMP-pool
//! emulation keeps its own list (`crate::emulate`).

use nmpsim_kernels::cuda::CudaSource;

/// The dense path's kernels: bias and ReLU, bias gradient, interactions,
/// loss, optimizers (see [`crate::cuda_dense`]).
pub const DENSE: CudaSource = CudaSource {
    name: "dense.cu",
    code: include_str!("../cuda/dense.cu"),
};

/// Every CUDA C source of the dense path.
pub const SOURCES: &[CudaSource] = &[DENSE];
