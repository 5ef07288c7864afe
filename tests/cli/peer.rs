//! Identical inputs for a peer: `nmpsim trace export --npy`, `nmpsim kernels
//! bench --backend cpu --trace … --dump`, and the PyTorch peer benchmark's
//! agreement check at a tiny size (skipped, with a note, where no Python has
//! PyTorch: set NMPSIM_PEER_PYTHON to one that has).

use std::path::Path;
use std::process::Command;

use crate::common::*;
use nmpsim_traces::{TraceReader, npy};

fn gen_trace(dir: &Path) {
    text(&succeeds(
        dir,
        &words(
            "trace gen --tables 3 --rows 500 --bag 5 --batch 32 --dist \
             zipf:1.05 --weighted --batches 2 -q -o t.nmpt",
        ),
    ));
}

#[test]
fn npy_export_holds_exactly_the_traces_lookups() {
    let t = TempDir::new("npy");
    gen_trace(&t.0);
    text(&succeeds(&t.0, &words("trace export t.nmpt --npy out")));
    let m: npy::Manifest = serde_json::from_str(&read(&t.0.join("out/manifest.json"))).unwrap();
    assert_eq!(m.format, npy::MANIFEST_FORMAT);
    assert_eq!(m.batches.len(), 2);
    let reader = TraceReader::open(t.0.join("t.nmpt")).unwrap();
    for (k, batch) in reader.enumerate() {
        let batch = batch.unwrap();
        for (tb, files) in batch.tables.iter().zip(&m.batches[k].tables) {
            let get = |f: &str| npy::read(&t.0.join("out").join(f)).unwrap();
            let as_u32 = |f: &str| -> Vec<u32> {
                let v = get(f).as_i64().unwrap();
                v.into_iter().map(|x| u32::try_from(x).unwrap()).collect()
            };
            assert_eq!(as_u32(&files.indices), tb.indices);
            assert_eq!(as_u32(&files.offsets), tb.offsets);
            let w = get(files.weights.as_ref().unwrap()).as_f32().unwrap();
            assert_eq!(Some(w), tb.weights);
        }
    }
    // Never over an existing directory; --csv and --npy are one or the other.
    let out = nmpsim(&t.0, &words("trace export t.nmpt --npy out"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = nmpsim(&t.0, &words("trace export t.nmpt --npy x --csv -"));
    assert_eq!(out.status.code(), Some(2));
    let out = nmpsim(&t.0, &words("trace export t.nmpt"));
    assert_eq!(out.status.code(), Some(2));
    // NumPy, where there is one, reads the files with nothing else.
    let numpy = Command::new("python3")
        .args([
            "-c",
            "import numpy, sys; a = numpy.load(sys.argv[1]); print(a.dtype, a.shape)",
        ])
        .arg(t.0.join("out").join(&m.batches[0].tables[0].indices))
        .output();
    match numpy {
        Ok(o) if o.status.success() => {
            assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "int64 (160,)")
        }
        _ => eprintln!("skipped the numpy.load check: no python3 with NumPy"),
    }
}

#[test]
fn cpu_bench_times_every_primitive_of_a_trace_and_dumps_its_outputs() {
    let t = TempDir::new("bench");
    gen_trace(&t.0);
    let out = succeeds(
        &t.0,
        &words(
            "kernels bench --trace t.nmpt --dim 16 --reps 2 --threads 2 \
             --json --dump dump",
        ),
    );
    let v: serde_json::Value = stdout_json(&out);
    let r = &v["results"];
    assert_eq!(r["threads"], 2);
    assert_eq!(r["tables"], 3);
    assert_eq!(r["lookups"], 2 * 3 * 32 * 5);
    let prims = r["primitives"].as_array().unwrap();
    assert_eq!(prims.len(), nmpsim_kernels::bench::PRIMITIVES.len());
    for p in prims {
        assert_eq!(p["times_ms"].as_array().unwrap().len(), 2, "{p}");
        assert!(p["bytes"].as_u64().unwrap() > 0, "{p}");
    }
    for f in [
        "forward_sum_t002.npy",
        "forward_weighted_t000.npy",
        "coalesced_rows_t000.npy",
        "adagrad_rows_t000.npy",
    ] {
        let a = npy::read(&t.0.join("dump").join(f)).unwrap();
        assert!(!a.shape.is_empty(), "{f}");
    }
    // The dump directory is never overwritten; a bad backend is named.
    let out = nmpsim(
        &t.0,
        &words("kernels bench --trace t.nmpt --dump dump --reps 1"),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = nmpsim(&t.0, &words("kernels bench --backend tpu"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown backend `tpu`"));
    let out = nmpsim(&t.0, &words("kernels bench --backend cuda --trace t.nmpt"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trace is for --backend cpu"));
}

/// The PyTorch peer benchmark at a tiny size: both sides run, and every
/// output agrees within the benchmark's bound. A benchmark, not a timed
/// test: nothing here depends on speed.
#[test]
fn the_pytorch_peer_agrees_on_a_tiny_trace() {
    let python = std::env::var("NMPSIM_PEER_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_torch = Command::new(&python)
        .args(["-c", "import numpy, torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_torch {
        eprintln!(
            "skipped: `{python}` has no PyTorch and NumPy (set NMPSIM_PEER_PYTHON to a Python that has)"
        );
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/peer/kernels.py");
    let out = Command::new(&python)
        .arg(script)
        .args(["--smoke", "--nmpsim", env!("CARGO_BIN_EXE_nmpsim")])
        .output()
        .expect("run the peer benchmark");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("agree: True"), "{all}");
}
