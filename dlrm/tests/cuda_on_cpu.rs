//! The CUDA kernels' logic, checked without a GPU: `dlrm/cuda/cpu-check`
//! compiles `dense.cu` as C++ against a small emulation of the CUDA
//! features it uses and runs every kernel against C++ references.

use std::path::Path;
use std::process::Command;

#[test]
fn dense_kernels_pass_on_the_cpu_emulation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/cpu-check");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dense_check");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let built = Command::new(&cxx)
        .args(["-std=c++20", "-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(dir.join("dense_check.cpp"))
        .output();
    let built = match built {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: no C++ compiler `{cxx}` ({e})");
            return;
        }
    };
    assert!(
        built.status.success(),
        "{cxx} could not build the CPU emulation of dense.cu:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().expect("run the check");
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success() && out.contains("all ok"), "{out}");
}
