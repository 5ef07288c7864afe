//! End-to-end: `nmpsim kernels check` and `nmpsim kernels traffic` through the binary.

use crate::common::*;

fn nmpsim(args: &[&str]) -> std::process::Output {
    binary().args(args).output().expect("run nmpsim")
}

/// [`nmpsim`], which must succeed.
fn succeeded(args: &[&str]) -> std::process::Output {
    let o = nmpsim(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

const SMALL: [&str; 10] = [
    "--tables", "2", "--batch", "64", "--bag", "5", "--rows", "1000", "--dim", "16",
];

#[test]
fn check_passes_and_reports_json() {
    for pooling in ["sum", "mean", "weighted-sum"] {
        let mut args = vec!["kernels", "check", "--json", "--pooling", pooling];
        args.extend(SMALL);
        let out = nmpsim(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{pooling}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&stdout).expect("valid JSON");
        assert_eq!(v["command"], "kernels check");
        let results = &v["results"];
        assert_eq!(results["ok"], true);
        let prims = results["backends"][0]["primitives"].as_array().unwrap();
        assert!(prims.len() >= 10);
        for p in prims {
            assert_eq!(p["ok"], true, "{p}");
        }
        let names: Vec<&str> = prims
            .iter()
            .map(|p| p["primitive"].as_str().unwrap())
            .collect();
        for want in [
            "gather-reduce",
            "expand",
            "coalesce",
            "tensor-cast",
            "casted-gather-reduce",
            "casted-vs-coalesce",
            "scatter-sgd",
            "scatter-adagrad",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
    }
}

#[test]
fn check_prints_a_table() {
    let mut args = vec!["kernels", "check", "--dist", "uniform"];
    args.extend(SMALL);
    let out = nmpsim(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("casted-gather-reduce") && stdout.contains("all primitives match"),
        "{stdout}"
    );
}

#[test]
fn bad_arguments_fail_with_a_clear_message() {
    let out = nmpsim(&words("kernels check --dist pareto"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dist"));
    let out = nmpsim(&words("kernels check --backend tpu"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown backend `tpu`"));
    let out = nmpsim(&words("kernels check --dim 0"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("dim"));
    // Zero counts are named by their flags, before anything else (a bench's
    // GPU included).
    for (cmd, flag) in [
        ("traffic", "--bag"),
        ("check", "--batch"),
        ("traffic", "--rows"),
        ("bench", "--dim"),
    ] {
        let out = nmpsim(&["kernels", cmd, flag, "0"]);
        let err = exited(&out, 2);
        assert!(
            err.contains(&format!("for '{flag} <")) && err.contains("expected at least 1"),
            "{cmd} {flag}: {err}"
        );
    }
    // Far more than any machine has (16 PB): refused before allocating,
    // not an allocation failure.
    let out = nmpsim(&words("kernels check --rows 1000000000 --dim 1000000"));
    let err = exited(&out, 2);
    assert!(err.contains("GB of memory available); lower"), "{err}");
}

/// `kernels traffic` counts bytes from the batches alone: tables far larger
/// than memory are answered at once (a 102 GB table was once refused, a 5 GB
/// one took a minute to build and check), with the counts of the formulas.
#[test]
fn traffic_builds_no_table() {
    let start = std::time::Instant::now();
    for (rows, dim) in [("200000000", "64"), ("1000000000", "1000000")] {
        let out = nmpsim(&[
            "kernels", "traffic", "--json", "--tables", "1", "--rows", rows, "--dim", dim,
            "--batch", "16", "--bag", "1", "--dist", "uniform",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{rows} x {dim}: {err}");
        let v: serde_json::Value = stdout_json(&out);
        let t = &v["results"];
        let (u, d) = (
            t["unique_rows"].as_u64().unwrap(),
            dim.parse::<u64>().unwrap() * 4,
        );
        assert!(u > 0 && u <= 16, "{t}");
        // 16 rows read, 16 indices and 17 offsets; 16 pooled rows written.
        assert_eq!(t["gather_reduce"]["read_bytes"], 16 * d + 16 * 4 + 17 * 4);
        assert_eq!(t["gather_reduce"]["write_bytes"], 16 * d);
        assert_eq!(t["scatter_sgd"]["write_bytes"], u * d);
    }
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

#[test]
fn traffic_reports_fig6_ratios() {
    let out = succeeded(&words(
        "kernels traffic --json --tables 1 --batch 256 --bag 10 --rows 1000000 --dim 64 --dist uniform",
    ));
    let v: serde_json::Value = stdout_json(&out);
    let t = &v["results"];
    let total =
        |k: &str| t[k]["read_bytes"].as_f64().unwrap() + t[k]["write_bytes"].as_f64().unwrap();
    let ratio = (total("expand") + total("coalesce_accumulate")) / total("gather_reduce");
    assert!((2.6..=3.8).contains(&ratio), "{ratio}");
}

#[test]
fn out_writes_a_run_directory_of_what_was_printed() {
    let t = TempDir::new("kernels-out");
    let dir = &t.0;
    for sub in ["check", "traffic"] {
        let run = dir.join(sub);
        let mut args = vec![
            "kernels",
            sub,
            "--seed",
            "9",
            "--out",
            run.to_str().unwrap(),
        ];
        args.extend(SMALL);
        let o = succeeded(&args);
        let printed = String::from_utf8_lossy(&o.stdout);
        let summary = read(&run.join("summary.txt"));
        assert_eq!(summary, printed, "{sub}: summary.txt is the printed table");
        let read = |f: &str| -> serde_json::Value { read_json(&run.join(f)) };
        let (config, results) = (read("config.json"), read("results.json"));
        assert_eq!(config["command"], format!("kernels {sub}"));
        assert_eq!(results["command"], format!("kernels {sub}"));
        let seed = match sub {
            "check" => &config["config"]["workload"]["seed"],
            _ => &config["config"]["seed"],
        };
        assert_eq!(*seed, 9, "{sub}: {config}");
        assert!(results["results"].is_object(), "{sub}");
    }
    // With every backend asked for, the results say whether CUDA ran, and if
    // not, why: "ok" covers only the backends listed.
    let run = dir.join("all");
    let mut args = vec![
        "kernels",
        "check",
        "--backend",
        "all",
        "--json",
        "--out",
        run.to_str().unwrap(),
    ];
    args.extend(SMALL);
    let o = succeeded(&args);
    let printed: serde_json::Value = stdout_json(&o);
    let file: serde_json::Value = read_json(&run.join("results.json"));
    assert_eq!(printed["results"], file["results"]);
    let r = &file["results"];
    let ran_cuda = r["backends"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["backend"] == "cuda");
    assert_eq!(r["cuda_skipped"].is_string(), !ran_cuda, "{r}");
    assert!(
        r["cuda_skipped"].is_string() || r["cuda_skipped"].is_null(),
        "{r}"
    );
}

/// The default bench's tables, 8 x 4M rows x 64 f32 = 8.192e9 bytes, in
/// both units (once described as 8 GiB).
#[test]
fn bench_help_sizes_the_default_tables_right() {
    let o = nmpsim(&words("kernels bench --help"));
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert_eq!(8u64 * 4_000_000 * 64 * 4, 8_192_000_000);
    assert!(
        help.contains("8.19 GB") && help.contains("(7.63 GiB)") && !help.contains("8 GiB"),
        "{help}"
    );
}

/// `kernels bench --reps 0` is refused by clap, not turned into 1.
#[test]
fn bench_refuses_zero_reps() {
    let o = nmpsim(&words("kernels bench --reps 0"));
    let err = exited(&o, 2);
    assert!(err.contains("'--reps <REPS>'"), "{err}");
}
