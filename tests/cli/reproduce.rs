//! `nmpsim reproduce fig6 table1 --quick` through the built binary: the files
//! each item writes, and the paper's qualitative results in its CSVs.

use std::collections::HashMap;
use std::path::Path;

use nmpsim_experiments::results::parse_csv;

use crate::common::*;

/// The CSV as a list of column -> value maps.
fn table(p: &Path) -> Vec<HashMap<String, String>> {
    let recs = parse_csv(&read(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let (head, rows) = recs.split_first().expect("a header");
    rows.iter()
        .map(|r| head.iter().cloned().zip(r.iter().cloned()).collect())
        .collect()
}

fn f(row: &HashMap<String, String>, k: &str) -> f64 {
    row.get(k)
        .unwrap_or_else(|| panic!("no column {k} in {row:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{k} is not a number in {row:?}"))
}

fn assert_files(dir: &Path, names: &[&str]) {
    for n in names {
        let p = dir.join(n);
        let len = std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .len();
        assert!(len > 100, "{} is only {len} bytes", p.display());
    }
}

#[test]
fn fig6_and_table1_quick_hold_the_papers_qualitative_results() {
    let t = TempDir::new("quick");
    let out = t.0.join("repro");
    let o = nmpsim(
        &t.0,
        &words("reproduce fig6 table1 --quick --quiet --out repro"),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "reproduce failed ({:?}): {}\n{stdout}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("2 items"), "{stdout}");

    // Figure 6: expand-coalesce (expand + coalesce accumulation) moves about
    // 3x the bytes of gather-reduce, and twice those of the casted
    // gather-reduce, for both index distributions.
    assert_files(
        &out.join("fig6"),
        &words("fig6.csv fig6-traffic.svg fig6-traffic.png fig6.md"),
    );
    let rows = table(&out.join("fig6/fig6.csv"));
    let mut dists = 0;
    for dist in ["uniform", "zipf:1.05"] {
        let total = |p: &str| {
            let r = rows
                .iter()
                .find(|r| r["dist"] == dist && r["primitive"] == p)
                .unwrap_or_else(|| panic!("no {p} row for {dist}"));
            assert_eq!(
                f(r, "total_bytes"),
                f(r, "read_bytes") + f(r, "write_bytes")
            );
            f(r, "total_bytes")
        };
        let ec = total("expand") + total("coalesce (accumulate)");
        let gr = total("gather-reduce");
        let cgr = total("casted gather-reduce");
        assert!(
            (2.0..=4.0).contains(&(ec / gr)),
            "{dist}: EC/GR = {}",
            ec / gr
        );
        assert!(
            (1.5..=3.0).contains(&(ec / cgr)),
            "{dist}: EC/CGR = {}",
            ec / cgr
        );
        // The casted gather-reduce reads every lookup's gradient once and
        // writes the coalesced rows: never more than expand + coalesce.
        assert!(cgr < ec);
        dists += 1;
    }
    assert_eq!(dists, 2);
    let md = read(&out.join("fig6/fig6.md"));
    // Three checks: the two ratios, identities of the byte formulas, and the
    // simulated DRAM's bytes against the analytic ones, a finding, with one
    // row per pool run (3 primitives x 3 placements).
    assert!(
        md.contains("| paper |") && md.contains("of 3 hold; 2 of them identities"),
        "{md}"
    );
    assert!(
        md.contains("(identity)") && md.contains("| 0.98x to 1.02x |"),
        "{md}"
    );
    for prim in ["gather-reduce", "casted-gather-reduce", "scatter"] {
        assert_eq!(
            md.lines()
                .filter(|l| l.starts_with(&format!("| {prim} | ")))
                .count(),
            3,
            "{prim}: {md}"
        );
    }

    // Table I: every configuration's effective and memory-side bandwidth is
    // positive and within the pool's peak (32 x 25.6 GB/s); the casted
    // gather-reduce, which streams each gradient once, beats the forward
    // gather-reduce under row interleaving.
    assert_files(
        &out.join("table1"),
        &words("table1.csv table1-bandwidth.svg table1-bandwidth.png table1.md"),
    );
    let rows = table(&out.join("table1/table1.csv"));
    assert_eq!(rows.len(), 6, "2 primitives x 3 placements");
    for r in &rows {
        let peak = f(r, "peak_gbps");
        assert!((peak - 819.2).abs() < 1e-6, "{r:?}");
        for k in ["effective_gbps", "memory_side_gbps"] {
            let bw = f(r, k);
            assert!(
                bw > 0.0 && bw <= peak,
                "{k} = {bw} out of (0, {peak}]: {r:?}"
            );
        }
        assert!(
            f(r, "effective_gbps") <= f(r, "memory_side_gbps") * 1.0001,
            "{r:?}"
        );
    }
    let eff = |prim: &str, plc: &str| {
        f(
            rows.iter()
                .find(|r| r["primitive"] == prim && r["placement"] == plc)
                .expect("row"),
            "effective_gbps",
        )
    };
    assert!(
        eff("casted-gather-reduce", "row-interleaved") > eff("gather-reduce", "row-interleaved")
    );

    let report = read(&out.join("REPORT.md"));
    assert!(
        report.contains("## Figure 6") && report.contains("## Table I"),
        "{report}"
    );

    // Running again reuses every run and writes the same tables.
    let before = read(&out.join("fig6/fig6.csv"));
    let o = succeeds(&t.0, &words("reproduce fig6 --out repro"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("2 finished, 0 to run"));
    assert_eq!(read(&out.join("fig6/fig6.csv")), before);
}

#[test]
fn unknown_items_are_rejected_with_the_list() {
    let t = TempDir::new("unknown");
    let o = nmpsim(&t.0, &["reproduce", "fig99"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown item `fig99`") && err.contains("table1"),
        "{err}"
    );
    assert!(
        !t.0.join("runs").exists(),
        "nothing is written for a rejected item"
    );
    let o = succeeds(&t.0, &["reproduce", "--list"]);
    let list = String::from_utf8_lossy(&o.stdout);
    // What each sweep runs, at the size asked for.
    assert!(
        list.contains("sweep pool: `nmpsim nmp run`, 9 runs;") && list.contains("--batch 256 "),
        "{list}"
    );
    let full = nmpsim(&t.0, &words("reproduce --list --full"));
    assert!(String::from_utf8_lossy(&full.stdout).contains("--rows 1000000 --batch 2048 "));
    for id in [
        "fig5b",
        "fig6",
        "table1",
        "fig4",
        "fig12",
        "fig13",
        "fig14",
        "fig15",
        "fig16",
        "fig17",
        "link",
        "scars-table1",
        "cdlrm-window",
        "cdlrm-accuracy",
        "cdlrm-vs-nmp",
        "elrec-accuracy",
        "elrec-reuse",
        "elrec-table3",
        "pool-hbm",
    ] {
        assert!(list.contains(id), "{id} missing from --list");
    }
    let o = succeeds(&t.0, &words("reproduce --list --json"));
    let v: serde_json::Value = stdout_json(&o);
    assert_eq!(v["size"], "quick");
    assert_eq!(v["items"].as_array().unwrap().len(), 21);
    // What --list cannot honour is refused, not ignored.
    for extra in [["nosuch", "--quiet"], ["--engine", "bogus"]] {
        let mut a = vec!["reproduce", "--list"];
        a.extend(extra);
        let o = nmpsim(&t.0, &a);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    }
}

/// A run that fails leaves its item `incomplete`: exit status 1, the item's
/// status in `--json`, and a note naming the run in the item's report and in
/// REPORT.md. Re-running once the cause is gone completes the item.
#[test]
fn a_failed_run_leaves_its_item_incomplete_until_it_runs_again() {
    let t = TempDir::new("incomplete");
    let out = t.0.join("repro");
    let out_s = "repro";
    succeeds(
        &t.0,
        &["reproduce", "fig6", "--quick", "--quiet", "--out", out_s],
    );

    // Run 1's results.json cannot be written where a directory stands.
    let runs = out.join("sweeps/traffic/runs");
    let run1 = std::fs::read_dir(&runs)
        .expect("the sweep's runs")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("0001-")
        })
        .expect("run 1 of the traffic sweep");
    std::fs::remove_dir_all(&run1).unwrap();
    std::fs::create_dir_all(run1.join("results.json/blocker")).unwrap();
    let o = nmpsim(
        &t.0,
        &[
            "reproduce",
            "fig6",
            "--quick",
            "--quiet",
            "--json",
            "--out",
            out_s,
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = stdout_json(&o);
    let item = &v["results"]["items"][0];
    assert_eq!(item["item"], "fig6");
    assert_eq!(item["status"], "incomplete", "{item}");
    assert_eq!(item["error"], "1 run(s) did not complete", "{item}");
    for md in [out.join("fig6/fig6.md"), out.join("REPORT.md")] {
        let text = read(&md);
        assert!(
            text.contains("**Incomplete**: 1 run(s) did not complete")
                && text.contains("`traffic` run 1"),
            "{}: {text}",
            md.display()
        );
    }
    // The run that completed still gives its row.
    let rows = table(&out.join("fig6/fig6.csv"));
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["dist"] == "uniform"),
        "{rows:?}"
    );

    // With no run of the sweep left, the analysis fails: the item's report
    // says so (not the earlier run's report), and so does REPORT.md.
    let blocked: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    for r in &blocked {
        std::fs::remove_dir_all(r).unwrap();
        std::fs::create_dir_all(r.join("results.json/blocker")).unwrap();
    }
    let o = nmpsim(
        &t.0,
        &["reproduce", "fig6", "--quick", "--quiet", "--out", out_s],
    );
    assert_eq!(o.status.code(), Some(1));
    // Even with --quiet, the item that failed says so, and the summary counts it.
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("fig6    FAILED") && said.contains("1 item (1 failed), 0 of 0 checks hold"),
        "{said}"
    );
    for md in [out.join("fig6/fig6.md"), out.join("REPORT.md")] {
        let text = read(&md);
        assert!(
            text.contains("**Failed**") && !text.contains("## Checks"),
            "{}: {text}",
            md.display()
        );
    }
    for r in &blocked {
        std::fs::remove_dir_all(r.join("results.json")).unwrap();
    }
    succeeds(
        &t.0,
        &["reproduce", "fig6", "--quick", "--quiet", "--out", out_s],
    );
    let md = read(&out.join("fig6/fig6.md"));
    assert!(!md.contains("Incomplete"), "{md}");
    assert!(
        table(&out.join("fig6/fig6.csv"))
            .iter()
            .any(|r| r["dist"] == "zipf:1.05")
    );
}

/// `--out` naming a directory that holds something other than a
/// reproduction is refused before anything in it changes.
#[test]
fn a_directory_that_is_no_reproductions_is_refused() {
    let t = TempDir::new("repro-foreign");
    let mine = t.0.join("mine");
    std::fs::create_dir_all(mine.join("fig6")).unwrap();
    write(&mine, "REPORT.md", "# my report\n");
    write(&mine, "fig6/fig6.md", "mine\n");
    let o = nmpsim(&t.0, &words("reproduce fig6 --quiet --out mine"));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not a reproduction's directory"), "{err}");
    assert_eq!(read(&mine.join("REPORT.md")), "# my report\n");
    assert_eq!(read(&mine.join("fig6/fig6.md")), "mine\n");
    assert!(!mine.join("sweeps").exists());
}
