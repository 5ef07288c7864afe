//! The CUDA implementation of every embedding primitive.

use std::sync::Arc;

use super::{Gpu, GpuUnavailable, default_gpu};

/// Every primitive of the crate as CUDA kernels on one device.
pub struct CudaBackend {
    gpu: Arc<Gpu>,
}

impl CudaBackend {
    /// The backend on the process's default device.
    pub fn new() -> Result<Self, GpuUnavailable> {
        Ok(CudaBackend {
            gpu: default_gpu()?,
        })
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}
