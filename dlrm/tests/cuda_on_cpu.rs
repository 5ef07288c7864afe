//! The CUDA kernels' logic, checked without a GPU: `dlrm/cuda/cpu-check`
//! compiles `dense.cu` as C++ against a small emulation of the CUDA
//! features it uses and runs every kernel against C++ references.

use std::path::Path;

#[path = "../../kernels/tests/support/cpu_check.rs"]
mod cpu_check;

#[test]
fn dense_kernels_pass_on_the_cpu_emulation() {
    cpu_check::build_and_run(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/cpu-check"),
        "dense_check",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
}
