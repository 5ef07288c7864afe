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
    let cached = at("--llc-hit 1");
    assert!(cached.0 < base.0);
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
