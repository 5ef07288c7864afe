//! `nmpsim train --device`: `cuda` runs the dense path on this machine's GPU
//! or, without one, stops before training with the reason; unknown devices
//! are refused.

use crate::common::*;

/// Why no GPU can be used here, or `None` when one can.
fn no_gpu() -> Option<String> {
    #[cfg(feature = "cuda")]
    {
        nmpsim_kernels::cuda::default_gpu()
            .err()
            .map(|e| e.to_string())
    }
    #[cfg(not(feature = "cuda"))]
    {
        Some("built without the cuda feature".into())
    }
}

#[test]
fn device_cuda_trains_on_a_gpu_or_fails_fast_naming_the_gpu() {
    let t = TempDir::new("cuda");
    let out = t.0.join("run");
    let o = nmpsim(
        &t.0,
        &words(
            "train --model tiny --device cuda --batch 64 --iters 4 --nmp-bandwidth 100 --quiet --out run",
        ),
    );
    let s = text(&o);
    match no_gpu() {
        Some(reason) => {
            eprintln!("no GPU here ({reason}): checking the refusal");
            assert!(!o.status.success(), "trained without a GPU: {s}");
            assert!(s.contains("GPU"), "the error names the GPU: {s}");
            assert!(
                s.contains("--device cuda"),
                "the error names the option: {s}"
            );
            assert!(
                !out.exists(),
                "a run directory was left behind without a GPU: {}",
                out.display()
            );
        }
        None => {
            assert!(o.status.success(), "{s}");
            let r: serde_json::Value = read_json(&out.join("results.json"));
            assert_eq!(r["results"]["device"], "cuda", "{r}");
            assert!(
                r["results"]["device_name"]
                    .as_str()
                    .is_some_and(|n| !n.is_empty()),
                "{r}"
            );
            let tl = read(&out.join("timeline.csv"));
            let dense: Vec<&str> = tl.lines().filter(|l| l.contains(",dense,")).collect();
            assert!(!dense.is_empty(), "{tl}");
            assert!(
                dense.iter().all(|l| l.contains(",gpu,measured,")),
                "every dense event is measured on the GPU: {dense:?}"
            );
        }
    }
}

#[test]
fn device_cpu_is_the_default_and_recorded() {
    let t = TempDir::new("cpu");
    let out = t.0.join("run");
    succeeds(
        &t.0,
        &words("train --model tiny --batch 32 --iters 2 --quiet --out run"),
    );
    let r: serde_json::Value = read_json(&out.join("results.json"));
    assert_eq!(r["results"]["device"], "cpu", "{r}");
    assert!(r["results"]["device_name"].is_null(), "{r}");
    let tl = read(&out.join("timeline.csv"));
    assert!(
        tl.lines()
            .filter(|l| l.contains(",dense,"))
            .all(|l| l.contains(",gpu,modelled,")),
        "{tl}"
    );
}

#[test]
fn unknown_device_is_refused_naming_the_choices() {
    let t = TempDir::new("bogus");
    let out = t.0.join("run");
    let s = unsuccessful(
        &t.0,
        &words("train --model tiny --device bogus --iters 1 --out run"),
    );
    assert!(
        s.contains("bogus") && s.contains("cpu") && s.contains("cuda"),
        "{s}"
    );
    assert!(!out.exists(), "nothing is written for a refused option");
}

#[test]
fn help_documents_the_device() {
    let t = TempDir::new("help");
    let o = succeeds(&t.0, &["train", "--help"]);
    let s = text(&o);
    assert!(s.contains("--device") && s.contains("cuda"), "{s}");
}
