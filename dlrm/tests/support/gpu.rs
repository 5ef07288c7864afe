//! The GPU the GPU tests run on, or a skip (passing) where none can be
//! opened, saying why; on a machine with NMPSIM_REQUIRE_GPU set, a failure.

use std::sync::Arc;

use nmpsim_kernels::cuda::{Gpu, default_gpu};

pub fn gpu_or_skip() -> Option<Arc<Gpu>> {
    match default_gpu() {
        Ok(g) => {
            eprintln!("GPU: {} (compute {:?})", g.name(), g.capability());
            Some(g)
        }
        Err(e) => {
            assert!(
                std::env::var_os("NMPSIM_REQUIRE_GPU").is_none(),
                "NMPSIM_REQUIRE_GPU is set but {e}"
            );
            eprintln!("skipped: {e}");
            None
        }
    }
}
