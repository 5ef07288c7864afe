//! Every CUDA C source compiles through NVRTC (no GPU needed).
#![cfg(feature = "cuda")]

use nmpsim_kernels::cuda::{
    CHECK_ARCH, KERNEL_NAMES, SOURCES, compile, nvrtc_present, nvrtc_version,
};

#[test]
fn every_source_compiles_through_nvrtc() {
    if !nvrtc_present() {
        assert!(
            std::env::var_os("NMPSIM_REQUIRE_NVRTC").is_none(),
            "NMPSIM_REQUIRE_NVRTC is set but libnvrtc.so.13 cannot be loaded (LD_LIBRARY_PATH={:?})",
            std::env::var_os("LD_LIBRARY_PATH")
        );
        eprintln!("skipped: NVRTC (libnvrtc.so.13) not found; `./x test` installs it");
        return;
    }
    eprintln!("NVRTC {:?}", nvrtc_version());
    for src in SOURCES {
        let ptx = compile(src, CHECK_ARCH).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            ptx.to_src().contains(".entry"),
            "{}: no kernel entry in the PTX",
            src.name
        );
    }
}

/// Every kernel name the CUDA backend loads is an entry of the PTX of
/// `embedding.cu`: a misspelt name fails here, without a GPU.
#[test]
fn every_backend_kernel_is_in_the_ptx() {
    if !nvrtc_present() {
        eprintln!("skipped: NVRTC not found");
        return;
    }
    let src = SOURCES
        .iter()
        .find(|s| s.name == "embedding.cu")
        .expect("embedding.cu in SOURCES");
    let ptx = compile(src, CHECK_ARCH)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_src();
    let entries: Vec<&str> = ptx
        .lines()
        .filter_map(|l| l.split(".entry ").nth(1))
        .map(|rest| rest.split(['(', ' ']).next().unwrap_or("").trim())
        .collect();
    for name in KERNEL_NAMES {
        assert!(
            entries.contains(name),
            "kernel `{name}` is not an entry of embedding.cu's PTX; entries: {entries:?}"
        );
    }
    // And no kernel of the source is left unused by the backend.
    for e in &entries {
        assert!(
            KERNEL_NAMES.contains(e),
            "PTX entry `{e}` is not in KERNEL_NAMES"
        );
    }
}

#[test]
fn a_broken_source_reports_file_and_line() {
    if !nvrtc_present() {
        eprintln!("skipped: NVRTC not found");
        return;
    }
    let bad = nmpsim_kernels::cuda::CudaSource {
        name: "broken.cu",
        code: "extern \"C\" __global__ void k(float *x) {\n  x[0] = undefined_name;\n}\n",
    };
    let err = compile(&bad, CHECK_ARCH).unwrap_err().to_string();
    assert!(
        err.contains("broken.cu") && err.contains("undefined_name"),
        "{err}"
    );
    assert!(err.contains("(2)"), "NVRTC's log names line 2: {err}");
}
