//! `nmpsim gpu`: the report of what the GPU paths find on this machine.

use crate::common::*;

#[test]
fn gpu_report_says_what_is_there_and_compiles_every_source() {
    let t = TempDir::new("gpu");
    let o = nmpsim(&t.0, &["gpu", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)));
    assert_eq!(
        r["cuda_feature"], true,
        "the default build has CUDA support"
    );
    let code = o.status.code();
    if r["device"].is_null() {
        assert_eq!(code, Some(2), "no GPU: exit 2");
        let why = r["unavailable"].as_str().expect("the reason is given");
        assert!(why.contains("CUDA") || why.contains("device"), "{why}");
    }
    let sources = r["sources"].as_array().expect("sources");
    if std::env::var_os("NMPSIM_REQUIRE_NVRTC").is_some() {
        let names: Vec<&str> = sources
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["embedding.cu", "dense.cu", "emulate.cu"]);
        for s in sources {
            assert_eq!(s["ok"], true, "{s}");
            assert!(s["kernels"].as_u64().unwrap() >= 2, "{s}");
        }
        assert_eq!(r["nvrtc"], true);
        assert!(r["nvrtc_version"].is_string(), "{r}");
    } else if r["nvrtc"] == false {
        assert!(r["nvrtc_version"].is_null(), "{r}");
        assert!(sources.is_empty(), "no NVRTC, nothing compiled");
    }
    // The text form names every library it looked for.
    let o = nmpsim(&t.0, &["gpu"]);
    let text = String::from_utf8_lossy(&o.stdout);
    for lib in [
        "libcuda.so",
        "libnvrtc.so.13",
        "libcublas.so.13",
        "device 0",
    ] {
        assert!(text.contains(lib), "{lib} missing from:\n{text}");
    }
}
