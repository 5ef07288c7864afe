//! Every CUDA C source of nmpsim-dlrm compiles through NVRTC (no GPU needed),
//! and every kernel the CUDA dense backend loads is in its PTX.
#![cfg(feature = "cuda")]

use nmpsim_dlrm::cuda::{DENSE, SOURCES};
use nmpsim_dlrm::cuda_dense::KERNELS;
use nmpsim_kernels::cuda::{CHECK_ARCH, CudaSource, compile, nvrtc_present, nvrtc_version};

/// Skips (returns false) without NVRTC, unless NMPSIM_REQUIRE_NVRTC is set.
fn nvrtc_or_skip() -> bool {
    if nvrtc_present() {
        return true;
    }
    assert!(
        std::env::var_os("NMPSIM_REQUIRE_NVRTC").is_none(),
        "NMPSIM_REQUIRE_NVRTC is set but libnvrtc.so.13 cannot be loaded (LD_LIBRARY_PATH={:?})",
        std::env::var_os("LD_LIBRARY_PATH")
    );
    eprintln!("skipped: NVRTC (libnvrtc.so.13) not found; `./x test` installs it");
    false
}

#[test]
fn dense_kernels_compile_and_every_loaded_kernel_is_an_entry() {
    if !nvrtc_or_skip() {
        return;
    }
    eprintln!("NVRTC {:?}", nvrtc_version());
    for src in SOURCES {
        let ptx = compile(src, CHECK_ARCH).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            ptx.to_src().contains(".entry"),
            "{}: no kernel entry",
            src.name
        );
    }
    let ptx = compile(&DENSE, CHECK_ARCH)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_src();
    for name in KERNELS {
        assert!(
            ptx.contains(&format!(".entry {name}(")),
            "kernel `{name}` that CudaDense loads is not an entry of {}",
            DENSE.name
        );
    }
}

/// Every `.cu` file under dlrm/cuda, registered in a list or not, compiles.
#[test]
fn every_cuda_file_of_the_crate_compiles() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    assert!(
        files.iter().any(|p| p.ends_with("dense.cu")),
        "dense.cu not found in {}",
        dir.display()
    );
    for f in files {
        let name: &'static str = Box::leak(
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
                .into_boxed_str(),
        );
        let code: &'static str = Box::leak(std::fs::read_to_string(&f).unwrap().into_boxed_str());
        let ptx = compile(&CudaSource { name, code }, CHECK_ARCH).unwrap_or_else(|e| panic!("{e}"));
        assert!(ptx.to_src().contains(".entry"), "{name}: no kernel entry");
    }
}
