//! Every CUDA C source compiles through NVRTC (no GPU needed).
#![cfg(feature = "cuda")]

use nmpsim_kernels::cuda::{CHECK_ARCH, SOURCES, compile, nvrtc_present, nvrtc_version};

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
