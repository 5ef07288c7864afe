//! The shared DRAM flags (`--dram-config`, `--timing`, `--org`) on `dram`,
//! `nmp run` and `train`, and their errors.

use crate::common::*;

/// The mean read latency and the configuration of a native run.
fn native_run(d: &std::path::Path, out: &str, extra: &str) -> (f64, serde_json::Value) {
    let stdout = ok(
        d,
        &words(&format!(
            "dram --engine native --stream random --requests 3000 --seed 7 --json -q --out {out} {extra}"
        )),
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let lat = v["results"]["runs"][0]["read_latency_mean_ns"]
        .as_f64()
        .unwrap_or_else(|| panic!("no read_latency_mean_ns in {}", v["results"]["runs"][0]));
    let cfg = read_json(&d.join(out).join("config.json"))["config"]["dram"].clone();
    (lat, cfg)
}

#[test]
fn a_file_and_overrides_reach_every_engine_config_and_the_run() {
    let t = TempDir::new("dramcfg");
    let d = &t.0;
    write(
        d,
        "slow.toml",
        "preset = \"DDR4-3200-x8\"\n[timing]\ntRCD = 30\ntRP = 30\n",
    );
    // The generated configurations take the file.
    let ini = ok(
        d,
        &words("dram config --engine dramsim3 --dram-config slow.toml"),
    );
    assert!(
        ini.contains("tRCD = 30") && ini.contains("tRP = 30"),
        "{ini}"
    );
    let native = ok(
        d,
        &words("dram config --engine native --dram-config slow.toml"),
    );
    assert!(
        native.contains("act_to_rd: 30,") && native.contains("pre_to_act: 30,"),
        "{native}"
    );
    // tRC = tRAS + tRP follows tRP.
    assert!(native.contains("act_to_act: 82,"), "{native}");
    assert!(
        native.starts_with("# native engine, preset DDR4-3200-x8 (slow.toml)"),
        "{native}"
    );
    // Flags over a preset; the name records them.
    let native = ok(
        d,
        &words("dram config --engine native --timing tRCD=24 --timing tWR=30"),
    );
    assert!(native.contains("act_to_rd: 24,"), "{native}");
    assert!(
        native.starts_with("# native engine, preset DDR4-3200-x8 [tRCD=24,tWR=30]"),
        "{native}"
    );

    // A run: the configuration is recorded, and a slower tRCD is slower.
    let (fast, _) = native_run(d, "fast", "");
    let (slow, cfg) = native_run(d, "slow", "--dram-config slow.toml");
    assert_eq!(cfg["timing"]["trcd"], 30, "{cfg}");
    assert_eq!(cfg["name"], "DDR4-3200-x8 (slow.toml)");
    assert!(slow > fast, "tRCD 30: {slow} ns, tRCD 22: {fast} ns");
    let (same, _) = native_run(d, "same", "--timing tRCD=22");
    assert_eq!(
        same, fast,
        "an override to the preset's own value changes nothing"
    );

    // Ramulator takes its speed bin by name: a run says the override misses it.
    let o = succeeds(
        d,
        &words(
            "dram --engine native,ramulator --stream random --requests 500 --timing tRCD=30 --out r",
        ),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: Ramulator runs its built-in DDR4_3200 timing")
            && err.contains("tRCD 30 (Ramulator 22)"),
        "{err}"
    );
    // A file with --org: the organisation reaches the mapping.
    let v = results_of(
        d,
        "dram",
        "--engine native --stream sequential --requests 500 --org rows=32768 -q --out o",
    );
    assert!(v["runs"][0]["bandwidth_gbps"].as_f64().unwrap() > 0.0);
    let cfg = read_json(&d.join("o/config.json"))["config"]["dram"].clone();
    assert_eq!(cfg["org"]["rows"], 32768);
}

#[test]
fn bad_configurations_name_the_field() {
    let t = TempDir::new("dramcfg-bad");
    let d = &t.0;
    write(
        d,
        "unknown.toml",
        "preset = \"DDR4-3200-x8\"\n[timing]\ntRDC = 22\n",
    );
    write(
        d,
        "short.toml",
        "standard = \"DDR4\"\n[timing]\ntCK = 0.625\nCL = 22\n",
    );
    write(
        d,
        "cmd.toml",
        "[[constraint]]\nrule = \"tX\"\nlevel = \"bank\"\npreceding = \"RD\"\nfollowing = \"REFSB\"\nlatency = \"4\"\n",
    );
    write(d, "trc.toml", "[timing]\ntRC = 90\n");
    for (args, says) in [
        (
            "dram --dram-config unknown.toml",
            "unknown.toml: line 3: field `timing.tRDC`: unknown; [timing] has tCK, CL",
        ),
        (
            "dram --dram-config short.toml",
            "short.toml: line 2: field `timing.CWL`: missing",
        ),
        (
            "dram --dram-config cmd.toml",
            "cmd.toml: line 5: field `constraint[1].following`: DDR4 has no command `REFSB`",
        ),
        (
            "dram --dram-config trc.toml",
            "trc.toml: line 2: field `timing.tRC`: 90; DDR4 defines tRC = tRAS + tRP = 74",
        ),
        ("dram --dram-config none.toml", "none.toml"),
        (
            "dram --timing tRDC=3",
            "tRDC=3: unknown timing `tRDC`; expected tCK (ns) or one of CL",
        ),
        ("dram --timing tRCD", "`tRCD`: expected NAME=VALUE"),
        ("dram --org rows=3", "org.rows`: 3; expected a power of two"),
        (
            "dram config --org lanes=2",
            "lanes=2: unknown field; expected one of",
        ),
        (
            "nmp run --profile rm1 --ranks 2 --timing tRCD=x",
            "tRCD=x: expected a whole number of cycles",
        ),
        (
            "train --model tiny --mode tcast-nmp --iters 1 --timing tRDC=2",
            "unknown timing `tRDC`",
        ),
    ] {
        let e = fails(d, &words(args));
        assert!(e.contains(says), "{args}: {e}");
    }
    let e = fails(d, &words("dram --dram-config cmd.toml"));
    assert!(e.contains("REFSB") && e.contains("DDR4 has"), "{e}");
    assert!(
        !d.join("runs").exists(),
        "a refused run left a run directory"
    );
}

#[test]
fn the_pool_and_training_take_the_flags() {
    let t = TempDir::new("dramcfg-pool");
    let d = &t.0;
    let time = |extra: &str| {
        let v = results_of(
            d,
            "nmp run",
            &format!(
                "--profile rm1 --primitive gather-reduce --ranks 2 --engine native -q {extra}"
            ),
        );
        v["phases"][0]["report"]["time_ns"]
            .as_f64()
            .unwrap_or_else(|| panic!("no time_ns in {v}"))
    };
    let base = time("");
    let slow = time("--timing tRCD=40,tRP=40");
    assert!(slow > base, "{slow} <= {base}");
    write(d, "r2.toml", "preset = \"DDR4-3200-x8\"\nranks = 2\n");
    let e = fails(
        d,
        &words("nmp run --profile rm1 --ranks 2 --dram-config r2.toml"),
    );
    assert!(
        e.contains("--dram-config r2.toml: a channel of 2 ranks"),
        "{e}"
    );

    // train: the pool's DRAM comes from the flags, the report names it.
    ok(
        d,
        &words(
            "train --model tiny --mode tcast-nmp --batch 32 --iters 2 --ranks 2 --timing tRCD=30 --out tr -q",
        ),
    );
    let summary = read(&d.join("tr/summary.txt"));
    assert!(
        summary.contains("NMP 2 x DDR4-3200-x8 [tRCD=30]"),
        "{summary}"
    );
    // A mode without the pool says the flag goes unused.
    let o = succeeds(
        d,
        &words(
            "train --model tiny --mode baseline-cpu --batch 32 --iters 1 --timing tRCD=30 --out cpu",
        ),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--timing sets up the NMP pool"), "{err}");
}

#[test]
fn the_standard_lists_its_table_evaluated_for_the_configuration() {
    let t = TempDir::new("dramcfg-standard");
    let d = &t.0;
    let text = ok(d, &words("dram standard --timing tRP=30"));
    assert!(text.starts_with("DDR4 (JESD79-4"), "{text}");
    assert!(
        text.contains("evaluated for DDR4-3200-x8 [tRP=30]"),
        "{text}"
    );
    assert!(text.contains("derived: tRC = tRAS + tRP"), "{text}");
    assert!(text.contains("9 * tREFI = 112320 cycles"), "{text}");
    write(
        d,
        "plus.toml",
        "[[constraint]]\nrule = \"tX\"\nlevel = \"bank\"\npreceding = \"RD RDA\"\nfollowing = \"PRE\"\nlatency = \"tRTP + 40\"\n",
    );
    let v: serde_json::Value = serde_json::from_str(&ok(
        d,
        &words(
            "dram standard --preset DDR4-2400-x8 --timing tRP=20 --dram-config plus.toml --json",
        ),
    ))
    .unwrap();
    assert_eq!(v["standard"], "DDR4");
    let rule = |name: &str| {
        v["constraints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["rule"] == name)
            .unwrap_or_else(|| panic!("no {name} in {v}"))
            .clone()
    };
    // DDR4-2400: tRAS 39, so tRC = 39 + 20; tRTP 9.
    assert_eq!(rule("tRC")["cycles"], 59);
    assert_eq!(rule("tRP")["cycles"], 20);
    assert_eq!(rule("tFAW")["window"], 4);
    let x = rule("tX");
    assert_eq!(
        (x["cycles"].as_u64(), x["added"].as_bool()),
        (Some(49), Some(true))
    );
    assert_eq!(x["latency"], "tRTP + 40");
    assert_eq!(rule("tRCD")["added"], false);
    let trc = v["timings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "tRC")
        .unwrap()
        .clone();
    assert_eq!(trc["cycles"], 59);
}
