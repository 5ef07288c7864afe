//! `nmpsim kernels check --backend cuda|all` and `kernels bench` through the
//! binary. On a machine without a GPU (where these tests usually run) CUDA
//! must be refused with a reason and exit status 2, and `all` must check the
//! CPU and report CUDA as skipped; on a GPU machine both must pass.

use crate::common::*;

const SMALL: [&str; 10] = [
    "--tables", "2", "--batch", "64", "--bag", "5", "--rows", "1000", "--dim", "16",
];

/// Whether this machine can run the CUDA backend, judged by the binary.
fn gpu_usable(out: &std::process::Output) -> bool {
    out.status.code() != Some(2)
}

#[test]
fn cuda_check_without_a_gpu_exits_2_with_the_reason() {
    let t = TempDir::new("cuda");
    let mut args = vec!["kernels", "check", "--backend", "cuda"];
    args.extend(SMALL);
    let out = nmpsim(&t.0, &args);
    let all = text(&out);
    if gpu_usable(&out) {
        assert!(out.status.success(), "{all}");
        assert!(
            all.contains("cuda") && all.contains("all primitives match"),
            "{all}"
        );
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("GPU") || all.contains("CUDA"), "{all}");
    let reason_lines = String::from_utf8_lossy(&out.stderr).lines().count();
    assert_eq!(reason_lines, 1, "one line of reason: {all}");
}

#[test]
fn all_checks_cpu_and_skips_or_checks_cuda() {
    let t = TempDir::new("all");
    let mut args = vec!["kernels", "check", "--backend", "all"];
    args.extend(SMALL);
    let out = nmpsim(&t.0, &args);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("all primitives match"), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("cpu "), "{all}");
    if stdout.contains("cuda ") {
        return; // a GPU machine: CUDA was checked
    }
    assert!(all.contains("cuda: skipped ("), "{all}");

    // JSON stays valid: the skip note goes to stderr.
    let mut args = vec!["kernels", "check", "--backend", "all", "--json"];
    args.extend(SMALL);
    let out = nmpsim(&t.0, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = stdout_json(&out);
    assert_eq!(v["results"]["backends"][0]["backend"], "cpu");
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped"));
}

#[test]
fn bench_without_a_gpu_exits_2_and_bad_backends_are_refused() {
    let t = TempDir::new("bench");
    let out = nmpsim(
        &t.0,
        &words(
            "kernels bench --backend cuda --tables 1 --rows 10000 --batch 64 \
             --bag 4 --reps 2 --json",
        ),
    );
    let all = text(&out);
    if out.status.code() == Some(2) {
        assert!(all.contains("GPU") || all.contains("CUDA"), "{all}");
    } else {
        assert!(out.status.success(), "{all}");
        let v: serde_json::Value = stdout_json(&out);
        assert!(v["results"]["gather_reduce"]["gbps"].as_f64().unwrap() > 0.0);
    }
    let out = nmpsim(&t.0, &words("kernels bench --backend tpu"));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("unknown backend `tpu`; available: cpu, cuda"),
        "{}",
        text(&out)
    );
    let out = nmpsim(&t.0, &words("kernels check --backend tpu"));
    assert!(text(&out).contains("unknown backend `tpu`"));
}
