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
    // (The list every module load goes through to load each kernel.)
    let entries = nmpsim_kernels::cuda::ptx_entries(&ptx);
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

/// The launch check reads each kernel's parameters from the PTX; a launch
/// whose arguments differ in count or kind is an error naming the parameter.
#[test]
fn launch_arguments_are_checked_against_the_ptx() {
    use ParamKind::{B32, B64, F32};
    use nmpsim_kernels::cuda::{KERNEL_NAMES, KernelArg, ParamKind, check_params, ptx_params};
    // Kinds of the Rust values cudarc passes.
    assert_eq!((&7u64).kind(), B64);
    assert_eq!((&7usize).kind(), B64);
    assert_eq!((&-1i32).kind(), B32);
    assert_eq!((&0.5f32).kind(), F32);
    // A hand-written entry, as NVRTC prints them.
    let ptx = ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1,\n\t.param .f32 k_param_2\n)\n{\n}";
    assert_eq!(ptx_params(ptx, "k"), Some(vec![B64, B32, F32]));
    assert_eq!(ptx_params(ptx, "missing"), None);
    assert!(check_params("x.cu", "k", &[B64, B32, F32], &[B64, B32, F32]).is_ok());
    let e = check_params("x.cu", "k", &[B64, B32, F32], &[B64, F32, F32])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`k`") && e.contains("x.cu") && e.contains("parameter 1"),
        "{e}"
    );
    let e = check_params("x.cu", "k", &[B64, B32], &[B64, B32, F32])
        .unwrap_err()
        .to_string();
    assert!(e.contains("parameter 2"), "{e}");
    if !nvrtc_present() {
        eprintln!("skipped the PTX part: NVRTC not found");
        return;
    }
    let ptx = compile(&SOURCES[0], CHECK_ARCH).unwrap().to_src();
    for k in KERNEL_NAMES {
        let p = ptx_params(&ptx, k).unwrap_or_else(|| panic!("{k}: no entry"));
        assert!(
            !p.is_empty() && !p.contains(&ParamKind::Other),
            "{k}: {p:?}"
        );
    }
    // The scatter kernel: table, state, dimv, dim, rows, grads, unique (64-bit),
    // the optimizer kind (int), then lr, eps, alpha (float).
    assert_eq!(
        ptx_params(&ptx, "nmpsim_scatter_update_vec4").unwrap(),
        [B64, B64, B64, B64, B64, B64, B64, B32, F32, F32, F32]
    );
    // The TT kernels, as kernels/src/cuda/backend/tt.rs launches them: every
    // parameter a pointer or a 64-bit size but the pooling mode (int).
    let b64 = |n: usize| vec![B64; n];
    let mut pool = b64(12);
    pool.extend([B32, B64]);
    for (k, want) in [
        ("nmpsim_tt_prefix", b64(9)),
        ("nmpsim_tt_pool", pool),
        ("nmpsim_tt_grad_prefix", b64(10)),
        ("nmpsim_tt_grad_last", b64(8)),
        ("nmpsim_tt_grad_first", b64(11)),
        ("nmpsim_tt_reduce", b64(6)),
    ] {
        assert_eq!(ptx_params(&ptx, k).unwrap(), want, "{k}");
    }
}
