//! The CUDA kernels' logic, checked without a GPU (shared by the kernels' and
//! the dense path's tests): a `cpu-check` directory holds `<name>.cpp`, which
//! compiles a `.cu` file as C++ against a small emulation of the CUDA
//! features it uses and runs every kernel against C++ references, printing
//! `all ok`.

use std::path::Path;
use std::process::Command;

/// Builds `<name>.cpp` of `dir` into `tmp` and runs it; skips (with a note)
/// without a C++ compiler, and fails if it does not build or does not pass.
pub fn build_and_run(dir: &Path, name: &str, tmp: &Path) {
    let exe = tmp.join(name);
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let built = Command::new(&cxx)
        .args(["-std=c++20", "-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(dir.join(format!("{name}.cpp")))
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
        "{cxx} could not build the CPU emulation {name}:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().expect("run the check");
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success() && out.contains("all ok"), "{out}");
}
