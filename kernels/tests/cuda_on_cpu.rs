//! The CUDA kernels' logic, checked without a GPU: `kernels/cuda/cpu-check`
//! compiles `embedding.cu` as C++ against a small emulation of the CUDA
//! features it uses and runs every kernel against C++ references
//! (`embedding_check.cpp`; `tt_check.cpp` for the Eff-TT kernels, bit for bit
//! against transcriptions of the Rust loops they follow).

use std::path::Path;

mod support {
    pub mod cpu_check;
}

#[test]
fn embedding_kernels_pass_on_the_cpu_emulation() {
    support::cpu_check::build_and_run(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/cpu-check"),
        "embedding_check",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
}

#[test]
fn tt_kernels_pass_on_the_cpu_emulation() {
    support::cpu_check::build_and_run(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/cpu-check"),
        "tt_check",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
}
