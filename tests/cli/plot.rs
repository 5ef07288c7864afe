//! End-to-end tests of `nmpsim plot` through the built binary: a small
//! results table with a failed run, default and explicit output stems, errors.

use std::path::Path;

use crate::common::*;

/// A sweep's results.csv in miniature: two engines, three batch sizes, one
/// failed run (empty metric, quoted error with a comma).
const RESULTS: &str = "\
run,engine,batch,status,error,wall_s,runs.0.bandwidth_gbps
0000-aaaaaaaa,dramsim3,256,completed,,0.101,10.5
0001-bbbbbbbb,dramsim3,512,completed,,0.102,19.25
0002-cccccccc,dramsim3,1024,completed,,0.103,36
0003-dddddddd,ramulator,256,completed,,0.104,9.75
0004-eeeeeeee,ramulator,512,failed,\"error: engine died, badly\",0.105,
0005-ffffffff,ramulator,1024,completed,,0.106,33.5
";

fn check_png(p: &Path) {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        p.display()
    );
    assert!(
        bytes.len() > 5000,
        "{}: only {} bytes",
        p.display(),
        bytes.len()
    );
}

#[test]
fn plot_writes_svg_and_png_beside_the_csv() {
    let dir = TempDir::new("default");
    let sweep = dir.0.join("sweep");
    std::fs::create_dir_all(&sweep).unwrap();
    write(&sweep, "results.csv", RESULTS);
    let o = nmpsim(
        &dir.0,
        &words(
            "plot sweep/results.csv --x batch --y runs.0.bandwidth_gbps \
             --group engine --log-x",
        ),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "nmpsim plot failed: {stderr}");
    assert!(stderr.contains("skipped 1 of 6 rows"), "{stderr}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    let stem = "sweep/results-runs.0.bandwidth_gbps-vs-batch";
    assert_eq!(stdout, format!("{stem}.svg\n{stem}.png\n"));
    let svg = std::fs::read_to_string(dir.0.join(format!("{stem}.svg"))).unwrap();
    for text in [
        "runs.0.bandwidth_gbps vs batch by engine",
        "dramsim3",
        "ramulator",
        "batch",
    ] {
        assert!(
            svg.lines().any(|l| l.trim() == text),
            "no `{text}` in the SVG"
        );
    }
    check_png(&dir.0.join(format!("{stem}.png")));
}

#[test]
fn plot_bars_with_title_and_out() {
    let dir = TempDir::new("bars");
    write(&dir.0, "results.csv", RESULTS);
    let o = succeeds(
        &dir.0,
        &[
            "plot",
            "results.csv",
            "--x",
            "engine",
            "--y",
            "runs.0.bandwidth_gbps",
            "--y",
            "wall_s",
            "--group",
            "batch",
            "--title",
            "Engines & <speeds>",
            "--out",
            "figs/engines",
            "--size",
            "640x400",
        ],
    );
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "figs/engines.svg\nfigs/engines.png\n"
    );
    let svg = read(&dir.0.join("figs/engines.svg"));
    assert!(
        svg.contains("Engines &amp; &lt;speeds&gt;"),
        "title not escaped"
    );
    assert!(svg.contains("width=\"640\""), "size not applied");
    check_png(&dir.0.join("figs/engines.png"));
}

#[test]
fn plot_errors_are_clear() {
    let dir = TempDir::new("errors");
    write(&dir.0, "results.csv", RESULTS);
    let fails = |args: &[&str]| -> String {
        let o = nmpsim(&dir.0, args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{args:?} should fail: {err}");
        err
    };
    let err = fails(&words("plot results.csv --x batch --y bandwidth_gbps"));
    assert!(err.contains("no column `bandwidth_gbps`"), "{err}");
    assert!(err.contains("did you mean runs.0.bandwidth_gbps?"), "{err}");
    assert!(err.contains("run, engine, batch, status"), "{err}");

    let err = fails(&words("plot results.csv --x batch --y error"));
    assert!(err.contains("nothing to plot"), "{err}");

    let err = fails(&words("plot missing.csv --x a --y b"));
    assert!(err.contains("cannot read missing.csv"), "{err}");

    write(&dir.0, "zero.csv", "x,y\n1,0\n2,3\n");
    let err = fails(&words("plot zero.csv --x x --y y --log-y"));
    assert!(err.contains("log y axis needs positive values"), "{err}");

    // Broken quoting names the file, the line and what is wrong, rather than
    // plotting the rows before it (the open quote swallowed the rest).
    write(&dir.0, "open.csv", "x,y\n1,2\n2,\"3\n3,4\n4,5\n");
    let err = fails(&words("plot open.csv --x x --y y"));
    assert!(
        err.contains("open.csv: line 3: unterminated quoted field"),
        "{err}"
    );
    write(&dir.0, "stray.csv", "x,y\n1,2\"3\n3,4\n");
    let err = fails(&words("plot stray.csv --x x --y y"));
    assert!(
        err.contains("stray.csv: line 2: field 2: stray quote in the unquoted field"),
        "{err}"
    );
    assert!(!dir.0.join("open-y-vs-x.svg").exists());

    // clap's own usage errors also exit 2.
    let err = fails(&words("plot results.csv --x batch"));
    assert!(err.contains("--y"), "{err}");
    assert!(!dir.0.join("results-error-vs-batch.svg").exists());
}

#[test]
fn plot_refuses_bars_that_would_hide_each_other() {
    let dir = TempDir::new("stacked");
    // A sweep's table with replicates: 2 streams x 4 seeds.
    let mut csv = String::from("run,stream,seed,status,error,wall_s,runs.0.bandwidth_gbps\n");
    for (i, (stream, seed)) in ["random", "sequential"]
        .iter()
        .flat_map(|s| (1..=4).map(move |seed| (s, seed)))
        .enumerate()
    {
        csv.push_str(&format!(
            "{i:04}-aaaaaaaa,{stream},{seed},completed,,0.1,{}\n",
            10 + i
        ));
    }
    write(&dir.0, "results.csv", csv);
    let args = [
        "plot",
        "results.csv",
        "--x",
        "stream",
        "--y",
        "runs.0.bandwidth_gbps",
        "--out",
        "p",
    ];
    let err = fails(&dir.0, &args);
    assert!(
        err.contains(
            "results.csv: 4 rows (lines 2, 3, 4, 5) have stream = `random` in series \
             `runs.0.bandwidth_gbps` (and so does 1 more category and series pair)"
        ),
        "{err}"
    );
    assert!(err.contains("--group COLUMN"), "{err}");
    assert!(!dir.0.join("p.svg").exists());
    // Split by seed, each bar has its own place.
    let mut grouped = args.to_vec();
    grouped.extend(["--group", "seed"]);
    succeeds(&dir.0, &grouped);
    let svg = read(&dir.0.join("p.svg"));
    // 8 bars and 4 legend swatches, besides the background.
    let rects = svg.lines().filter(|l| l.starts_with("<rect")).count();
    assert_eq!(rects, 1 + 8 + 4, "{svg}");
}

#[test]
fn plot_counts_skipped_rows_per_y_column() {
    let dir = TempDir::new("skipped");
    write(
        &dir.0,
        "t.csv",
        "x,a,b\n1,1,\n2,2,\n3,3,\n4,4,4\n5,5,5\n6,6,6\n",
    );
    let o = succeeds(&dir.0, &words("plot t.csv --x x --y a --y b"));
    let err = String::from_utf8_lossy(&o.stderr);
    // Every row has its `a` point: only `b` lost rows.
    assert_eq!(
        err,
        "note: skipped 3 of 6 rows for `b`: empty or non-numeric value (failed runs, or a statistic the run has none of?)\n"
    );
    let o = nmpsim(&dir.0, &words("plot t.csv --x x --y b"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err,
        "note: skipped 3 of 6 rows: empty or non-numeric `b` (failed runs, or a statistic the run has none of?)\n"
    );
}

#[test]
fn plot_refuses_an_ambiguous_header() {
    let dir = TempDir::new("duplicate");
    write(&dir.0, "d.csv", "x,y,y\n1,2,3\n2,3,4\n");
    let err = fails(&dir.0, &words("plot d.csv --x x --y y"));
    assert!(
        err.contains("d.csv: the header has 2 columns named `y` (columns 2, 3)"),
        "{err}"
    );
    assert!(!dir.0.join("d-y-vs-x.svg").exists());
}

#[test]
fn plot_help_has_examples() {
    let dir = TempDir::new("help");
    let o = succeeds(&dir.0, &["plot", "--help"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Examples:"), "{out}");
    assert!(out.contains("--group"), "{out}");
}

/// Charts never overwrite the table they are drawn from, a directory is no
/// stem, and a chart pair that cannot be written whole leaves the earlier
/// pair as it was.
#[test]
fn charts_never_destroy_their_input_or_an_earlier_pair() {
    let t = TempDir::new("plot-safe");
    let d = &t.0;
    write(d, "t.svg", RESULTS);
    let o = nmpsim(
        d,
        &words(
            "plot t.svg --x batch --y runs.0.bandwidth_gbps --group engine \
             --out t",
        ),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is the input file"));
    assert_eq!(read(&d.join("t.svg")), RESULTS);

    std::fs::create_dir(d.join("figs")).unwrap();
    write(d, "r.csv", RESULTS);
    let args = |out: &'static str| {
        vec![
            "plot",
            "r.csv",
            "--x",
            "batch",
            "--y",
            "runs.0.bandwidth_gbps",
            "--group",
            "engine",
            "--out",
            out,
        ]
    };
    let o = nmpsim(d, &args("figs/"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is a directory; name the charts' file stem")
    );
    assert_eq!(std::fs::read_dir(d.join("figs")).unwrap().count(), 0);

    // A first pair, then a second whose PNG cannot be written (a directory
    // stands in its place): the first SVG stays.
    succeeds(d, &args("c"));
    let svg = std::fs::read(d.join("c.svg")).unwrap();
    std::fs::remove_file(d.join("c.png")).unwrap();
    std::fs::create_dir(d.join("c.png")).unwrap();
    let mut again = args("c");
    again.extend(["--title", "another title"]);
    let o = nmpsim(d, &again);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("c.png is a directory"));
    assert_eq!(std::fs::read(d.join("c.svg")).unwrap(), svg);
    let names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".tmp")), "{names:?}");
}
