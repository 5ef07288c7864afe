//! The CUDA backend the GPU tests run on, or a skip (passing) where no GPU
//! can be opened, saying why; on a machine with NMPSIM_REQUIRE_GPU set, a
//! failure.

use nmpsim_kernels::cuda::CudaBackend;

pub fn backend() -> Option<CudaBackend> {
    match CudaBackend::new() {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(
                std::env::var_os("NMPSIM_REQUIRE_GPU").is_none(),
                "NMPSIM_REQUIRE_GPU is set but no GPU can be used: {e}"
            );
            eprintln!("skipped: {e}");
            None
        }
    }
}
