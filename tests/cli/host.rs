//! `nmpsim host`: the modelled hosts' presets, host files and estimates.

use crate::common::*;

#[test]
fn host_lists_shows_and_round_trips_its_presets_through_a_file() {
    let t = TempDir::new("host");
    let s = text(&succeeds(&t.0, &words("host presets")));
    assert!(s.contains("dgx1") && s.contains("153.6 GB/s peak"), "{s}");
    assert!(s.contains("spr-2s") && s.contains("614.4 GB/s peak"), "{s}");
    let toml = text(&succeeds(&t.0, &words("host show dgx1 --toml")));
    std::fs::write(
        t.0.join("h.toml"),
        toml.replace("ddr_mts = 2400", "ddr_mts = 3200"),
    )
    .unwrap();
    let v = stdout_json(&succeeds(&t.0, &words("host show h.toml --json")));
    assert_eq!(v["results"]["ddr_mts"], 3200);
    assert_eq!(v["results"]["cores_per_socket"], 20);
    let e = fails(&t.0, &words("host show nosuch"));
    assert!(e.contains("unknown host preset `nosuch`"), "{e}");
    std::fs::write(t.0.join("bad.toml"), toml.replace("sockets = 2\n", "")).unwrap();
    let e = fails(&t.0, &words("host show bad.toml"));
    assert!(
        e.contains("host file bad.toml: field `sockets`: missing"),
        "{e}"
    );
}

#[test]
fn host_estimate_is_modelled_and_more_channels_are_never_slower() {
    let t = TempDir::new("host-estimate");
    let at = |extra: &str| {
        let v = stdout_json(&succeeds(
            &t.0,
            &words(&format!(
                "host estimate dgx1 --lookups 163840 --bags 2048 --dim 64 --json {extra}"
            )),
        ));
        let r = &v["results"];
        assert_eq!(r["source"], "modelled");
        (
            r["gather_reduce_ms"].as_f64().unwrap(),
            r["scatter_ms"].as_f64().unwrap(),
        )
    };
    let base = at("");
    let wide = at("--channels 8");
    assert!(wide.0 < base.0 && wide.1 < base.1, "{base:?} {wide:?}");
    let one = at("--cores 1");
    assert!(one.0 > base.0, "{one:?} {base:?}");
    // (dgx1 streams and reads at random at its whole peak, so a cached line
    // costs what a missed one does; never more.)
    let cached = at("--llc-hit 1");
    assert!(cached.0 <= base.0);
    let spr = |extra: &str| {
        stdout_json(&succeeds(
            &t.0,
            &words(&format!(
                "host estimate spr-2s --lookups 163840 --bags 2048 --json {extra}"
            )),
        ))["results"]["gather_reduce_ms"]
            .as_f64()
            .unwrap()
    };
    assert!(spr("--llc-hit 1") < spr(""));
    let s = text(&succeeds(
        &t.0,
        &words("host estimate spr-2s --lookups 1000 --bags 10"),
    ));
    assert!(s.contains("ms (model)"), "{s}");
    let e = fails(
        &t.0,
        &words("host estimate dgx1 --lookups 10 --bags 1 --cores 41"),
    );
    assert!(e.contains("--cores 41: host dgx1 has 40"), "{e}");
    let e = fails(
        &t.0,
        &words("host estimate dgx1 --lookups 10 --bags 1 --llc-hit 2"),
    );
    assert!(e.contains("--llc-hit 2"), "{e}");
}

/// `train --host`: the CPU primitives' times come from the host's model,
/// labelled so in the timeline, the report and the JSON; two sweeps of the
/// same spec give the same results.csv but for the wall-clock columns.
#[test]
fn training_on_a_modelled_host_is_labelled_and_the_same_in_every_run() {
    use nmpsim_experiments::{is_timing_column, without_columns};
    let t = TempDir::new("host-train");
    let d = &t.0;
    write(
        d,
        "s.toml",
        "command = \"train\"\n[base]\nmodel = \"rm1\"\nrows = 20000\nbatch = 128\niters = 3\nprint-freq = 0\ntest-batches = 1\nmode = \"tcast,fae,scars,eltt,cdlrm\"\nhot-budget = \"1MiB\"\ncache-mb = 1\ncache-sets = 101\nways = 2\nlookahead = 2\nhost = \"dgx1\"\n[axes]\nhost-channels = [2, 8]\n",
    );
    ok(d, &words("sweep s.toml --out a --quiet --jobs 1"));
    ok(d, &words("sweep s.toml --out b --quiet --jobs 1"));
    let a = read(&d.join("a/results.csv"));
    assert!(a.contains("modelled-host"), "{a}");
    assert_eq!(
        without_columns(&a, is_timing_column).unwrap(),
        without_columns(&read(&d.join("b/results.csv")), is_timing_column).unwrap()
    );
    // More channels: the CPU modes' modelled iteration never slower.
    let rows: Vec<&str> = a.lines().collect();
    let header: Vec<&str> = rows[0].split(',').collect();
    let col = header
        .iter()
        .position(|c| *c == "modes.0.modelled_ms_per_iteration")
        .expect("baseline-cpu's modelled time");
    let v = |r: &str| r.split(',').nth(col).unwrap().parse::<f64>().unwrap();
    assert!(v(rows[2]) <= v(rows[1]), "{} vs {}", rows[2], rows[1]);
    // One run by hand: the report, the timeline and the JSON say where each
    // CPU time comes from, and no CPU time is measured.
    let o = succeeds(
        d,
        &words(
            "train --model rm1 --rows 20000 --batch 128 --iters 4 --mode baseline-cpu,tcast-cpu,cdlrm --cache-sets 101 --ways 2 --lookahead 2 --host dgx1 --out r",
        ),
    );
    let s = text(&o);
    assert!(s.contains("model(host dgx1)"), "{s}");
    assert!(s.contains("modelled host dgx1"), "{s}");
    let tl = read(&d.join("r/timeline.csv"));
    assert!(
        tl.contains("cpu (host dgx1)") && tl.contains("modelled-host"),
        "{tl}"
    );
    for line in tl.lines().filter(|l| l.contains(",cpu,")) {
        assert!(!line.contains(",measured,"), "{line}");
    }
    // cDLRM's CPU work too: the prefetcher, the look-ups, the write-backs.
    for what in ["prefetch", "caching", "write-back"] {
        assert!(
            tl.lines()
                .any(|l| l.contains("cdlrm") && l.contains(what) && l.contains("host dgx1")),
            "{what}: {tl}"
        );
    }
    let v = read_json(&d.join("r/results.json"));
    let m = &v["results"]["modes"][0];
    assert_eq!(m["host"], "dgx1");
    let gr = m["breakdown_ms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["primitive"] == "gather-reduce")
        .unwrap();
    assert_eq!(gr["sources"][0], "modelled-host");
    assert_eq!(gr["host"], "dgx1");
}

#[test]
fn host_flags_are_checked_by_name() {
    let t = TempDir::new("host-flags");
    let d = &t.0;
    let e = fails(d, &words("train --host-cores 8"));
    assert!(e.contains("--host"), "{e}");
    let e = fails(d, &words("train --host epyc --iters 1"));
    assert!(e.contains("--host epyc: unknown host preset `epyc`"), "{e}");
    let e = fails(d, &words("train --host dgx1 --host-cores 3 --iters 1"));
    assert!(e.contains("--host-cores 3: host dgx1 has 2 sockets"), "{e}");
    let e = fails(d, &words("train --host this --iters 1"));
    assert!(e.contains("run `nmpsim host calibrate` first"), "{e}");
    write(d, "h.toml", "name = \"x\"\n");
    let e = fails(d, &words("train --host h.toml --iters 1"));
    assert!(e.contains("host file h.toml: field"), "{e}");
    let e = fails(d, &words("reproduce fig4 --host nosuch --out o"));
    assert!(e.contains("--host nosuch: unknown host preset"), "{e}");
}

/// `host calibrate` at a small size: its files, its error table, and the
/// host `this` it installs, which `train --host this` then uses.
#[test]
fn host_calibrate_writes_its_points_and_installs_this() {
    let t = TempDir::new("host-calibrate");
    let d = &t.0;
    let s = ok(
        d,
        &words("host calibrate --quick --rows 50000 --reps 1 --out cal"),
    );
    assert!(
        s.contains("held-out max |err|") && s.contains("installed as host `this`"),
        "{s}"
    );
    let csv = read(&d.join("cal/calibration.csv"));
    // 2 lookups per bag x 2 distributions x 5 batch sizes x 4 primitives.
    assert_eq!(csv.lines().count(), 1 + 80, "{csv}");
    assert!(
        csv.contains("held-out") && csv.contains("zipf:1.05"),
        "{csv}"
    );
    // Each point says how repeatable its measurement was (the split-half
    // difference of its batches); each primitive the worst held-out one.
    assert!(
        csv.lines().next().unwrap().ends_with(",error,split_half"),
        "{csv}"
    );
    assert!(s.contains("held-out max split-half"), "{s}");
    let errs = read(&d.join("cal/errors.csv"));
    assert_eq!(errs.lines().count(), 1 + 4, "{errs}");
    assert!(
        errs.lines()
            .next()
            .unwrap()
            .ends_with(",held_out_max_split_half"),
        "{errs}"
    );
    assert!(d.join("runs/this-host.toml").is_file());
    let shown = ok(d, &words("host show this"));
    assert!(shown.contains("fitted to this machine"), "{shown}");
    let s = ok(
        d,
        &words("train --model tiny --batch 64 --iters 2 --mode baseline-cpu --host this --out r"),
    );
    assert!(s.contains("model(host this)"), "{s}");
    // --no-install leaves the installed host as it is.
    let before = read(&d.join("runs/this-host.toml"));
    ok(
        d,
        &words("host calibrate --quick --rows 50000 --reps 1 --no-install --out cal2"),
    );
    assert_eq!(read(&d.join("runs/this-host.toml")), before);
    // --refit fits the same points again: with the same model, the same
    // host and errors to the digit; it installs nothing.
    let s = ok(d, &words("host calibrate --refit cal2 --out cal3"));
    assert!(
        s.contains("refit of cal2: its measured times and its unfitted host")
            && s.contains("not installed (--refit)"),
        "{s}"
    );
    assert_eq!(
        read(&d.join("cal3/errors.csv")),
        read(&d.join("cal2/errors.csv"))
    );
    assert_eq!(
        read(&d.join("cal3/host.toml")),
        read(&d.join("cal2/host.toml"))
    );
    assert_eq!(read(&d.join("runs/this-host.toml")), before);
    // What it cannot refit is named.
    let e = fails(d, &words("host calibrate --refit nosuch"));
    assert!(e.contains("nosuch") && e.contains("config.json"), "{e}");
    let e = fails(d, &words("host calibrate --refit r"));
    assert!(e.contains("field `command`"), "{e}");
    let e = fails(d, &words("host calibrate --refit cal2 --quick"));
    assert!(e.contains("--quick"), "{e}");
}
