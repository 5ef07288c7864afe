//! End-to-end tests of `nmpsim trace …` through the built binary.

use std::path::Path;

use crate::common::*;

fn criteo_line(label: u32, i: u32, cat: &str) -> String {
    let mut f = vec![label.to_string()];
    f.extend((0..13).map(|k| if k == 0 { i.to_string() } else { String::new() }));
    f.extend((0..26).map(|_| cat.to_string()));
    f.join("\t")
}

#[test]
fn gen_stats_export_round_trip() {
    let t = with_trace(
        "gen",
        "--rows 1000 --tables 2 --dist zipf:1.1 --bag 3 --batch \
             16 --batches 4 --seed 7 -q -o a.nmpt",
    );
    let d = &t.0;
    let json: serde_json::Value = serde_json::from_str(&ok(d, &words("trace stats a.nmpt --json")))
        .expect("stats --json is JSON");
    assert_eq!(json["command"], "trace stats");
    let r = &json["results"];
    assert_eq!(r["batches"], 4);
    assert_eq!(r["lookups"], 2 * 4 * 16 * 3);
    assert_eq!(r["tables"][1]["rows"], 1000);
    assert!(r["tables"][0]["coalescing_ratio"].as_f64().unwrap() > 1.0);

    ok(d, &words("trace export a.nmpt --csv a.csv"));
    let csv = read(&d.join("a.csv"));
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("batch,table,bag,position,row,weight"));
    assert_eq!(lines.count(), 2 * 4 * 16 * 3);

    // Same spec, same bytes: traces are identified by their seed.
    ok(
        d,
        &words(
            "trace gen --rows 1000 --tables 2 --dist zipf:1.1 --bag 3 --batch \
             16 --batches 4 --seed 7 -q -o b.nmpt",
        ),
    );
    assert_eq!(
        std::fs::read(d.join("a.nmpt")).unwrap(),
        std::fs::read(d.join("b.nmpt")).unwrap()
    );
}

#[test]
fn profile_stats_write_a_run_directory() {
    let t = TempDir::new("rundir");
    let d = &t.0;
    let text = ok(
        d,
        &words(
            "trace stats --profile movielens-20m --batch 64 --batches 3 --out \
             run -q",
        ),
    );
    assert!(text.contains("coalescing ratio"), "{text}");
    for f in [
        "config.json",
        "results.json",
        "tables.csv",
        "cdf.csv",
        "summary.txt",
    ] {
        assert!(d.join("run").join(f).is_file(), "missing {f}");
    }
    let cfg: serde_json::Value = read_json(&d.join("run/config.json"));
    assert_eq!(cfg["config"]["profile"], "movielens-20m");
    let tables = read(&d.join("run/tables.csv"));
    assert!(
        tables.starts_with("table,rows,batches,lookups,"),
        "{tables}"
    );
    assert_eq!(tables.lines().count(), 2);
}

#[test]
fn convert_criteo_tsv() {
    let t = TempDir::new("convert");
    let d = &t.0;
    let tsv: String = (0..5)
        .map(|i| criteo_line(i % 2, i, &format!("{:x}", 1000 + i)) + "\n")
        .collect();
    write(d, "day.tsv", tsv);
    ok(
        d,
        &words(
            "trace convert day.tsv -o day.nmpt --batch 2 --max-ind-range 100 \
             -q",
        ),
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(d, &words("trace stats day.nmpt --json"))).unwrap();
    let r = &json["results"];
    assert_eq!(r["batches"], 3);
    assert_eq!(r["tables"].as_array().unwrap().len(), 26);
    assert_eq!(r["tables"][0]["rows"], 100);
    assert_eq!(r["tables"][0]["lookups"], 5);
    ok(d, &words("trace export day.nmpt --csv day.csv"));
    let csv = read(&d.join("day.csv"));
    // Sample 4 (batch 2, bag 0) has id 0x3ec = 1004 -> 1004 % 100 = 4.
    assert!(csv.contains("\n2,25,0,0,4,\n"), "{csv}");

    // An empty TSV writes no trace.
    write(d, "empty.tsv", "");
    let err = fails(d, &words("trace convert empty.tsv -o e.nmpt -q"));
    assert!(err.contains("empty.tsv: no samples to convert"), "{err}");
    assert!(!d.join("e.nmpt").exists() && !d.join("e.nmpt.tmp").exists());

    // A last line without a line end (a file cut short?) converts, with a
    // warning; a whole file gets none.
    let whole = read(&d.join("day.tsv"));
    write(d, "cut.tsv", &whole[..whole.len() - 2]);
    for (file, warned) in [("cut.tsv", true), ("day.tsv", false)] {
        let o = succeeds(d, &["trace", "convert", file, "-o", "c.nmpt", "-q"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.contains(&format!(
                "warning: {file}: line 5, the last, has no line end"
            )),
            warned,
            "{err}"
        );
    }
}

#[test]
fn bad_tsv_line_exits_2_naming_line_and_field() {
    let t = TempDir::new("badtsv");
    let d = &t.0;
    let tsv = format!(
        "{}\n{}\n",
        criteo_line(0, 1, "a"),
        criteo_line(1, 2, "zz12")
    );
    write(d, "bad.tsv", tsv);
    let err = fails(d, &words("trace convert bad.tsv -o bad.nmpt -q"));
    assert!(
        err.contains("line 2")
            && err.contains("field 14 (categorical C1)")
            && err.contains("'zz12' is not hex"),
        "{err}"
    );
    assert!(
        !d.join("bad.nmpt").exists() && !d.join("bad.nmpt.tmp").exists(),
        "a failed conversion left a file"
    );
}

#[test]
fn corrupt_trace_and_bad_arguments_exit_2() {
    let t = with_trace(
        "corrupt",
        "--profile uniform --rows 1000 --batch 8 --batches 2 -q \
             -o u.nmpt",
    );
    let d = &t.0;
    let mut bytes = std::fs::read(d.join("u.nmpt")).unwrap();
    let last = bytes.len() - 30;
    bytes[last] ^= 1;
    write(d, "u.nmpt", bytes);
    let o = nmpsim(d, &words("trace stats u.nmpt"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("checksum mismatch in batch 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Generator flags do not apply to a trace file: refused, not ignored.
    for flag in [["--rows", "5"], ["--batches", "3"], ["--seed", "9"]] {
        let mut a = vec!["trace", "stats", "u.nmpt"];
        a.extend(flag);
        let err = fails(d, &a);
        assert!(
            err.contains("cannot be used with") && err.contains(flag[0]),
            "{err}"
        );
    }

    let o = nmpsim(d, &words("trace gen --profile criteo -o x.nmpt"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("valid names: criteo-kaggle"));
    let o = nmpsim(d, &words("trace gen -o x.nmpt"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--profile NAME, or --rows R"));

    // No batches: nothing to write or analyse, so refused, and no file made.
    for cmd in [
        vec![
            "trace",
            "gen",
            "--profile",
            "uniform",
            "--batches",
            "0",
            "-o",
            "zero.nmpt",
        ],
        vec!["trace", "stats", "--profile", "uniform", "--batches", "0"],
    ] {
        let err = fails(d, &cmd);
        assert!(err.contains("--batches") && err.contains("0"), "{err}");
    }
    assert!(!d.join("zero.nmpt").exists());
}

/// Two batch records of equal length swapped, or one written twice: each
/// record's own CRC and the batch count still match, the end record's stream
/// checksum does not, and `trace stats` / `trace export` refuse the file by name.
#[test]
fn swapped_or_duplicated_batch_records_are_refused() {
    let t = with_trace(
        "swap",
        "--rows 10 --tables 2 --bag 3 --batch 4 --batches 2 \
             --seed 5 -q -o orig.nmpt",
    );
    let d = &t.0;
    let good = std::fs::read(d.join("orig.nmpt")).unwrap();
    let hlen = u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
    let start = 16 + hlen + 4;
    let rec_len =
        |at: usize| 9 + u32::from_le_bytes(good[at + 1..at + 5].try_into().unwrap()) as usize;
    let (r0, r1) = (start..start + rec_len(start), {
        let at = start + rec_len(start);
        at..at + rec_len(at)
    });
    assert_eq!(r0.len(), r1.len(), "fixed bags: equal record lengths");
    assert_ne!(good[r0.clone()], good[r1.clone()]);
    for (name, first, second) in [("swapped.nmpt", &r1, &r0), ("duplicated.nmpt", &r0, &r0)] {
        let mut bad = good[..start].to_vec();
        bad.extend_from_slice(&good[first.clone()]);
        bad.extend_from_slice(&good[second.clone()]);
        bad.extend_from_slice(&good[r1.end..]);
        write(d, name, &bad);
        // Readers that stop after the trace's last batch verify its end too.
        for cmd in [
            vec!["trace", "stats", name],
            vec!["trace", "export", name, "--csv", "-"],
            vec![
                "nmp",
                "run",
                "--trace",
                name,
                "--batches",
                "2",
                "--ranks",
                "2",
                "--engine",
                "native",
                "-q",
                "--out",
                "nr",
            ],
            vec![
                "dram",
                "--engine",
                "native",
                "--embedding-trace",
                name,
                "--max-batches",
                "2",
                "-q",
                "--out",
                "dr",
            ],
        ] {
            let err = fails(d, &cmd);
            assert!(
                err.contains(name)
                    && err
                        .contains("checksum over all batch records does not match the end record"),
                "{cmd:?}: {err}"
            );
        }
    }
}

#[test]
fn outputs_never_destroy_inputs_or_leave_stray_files() {
    let t = TempDir::new("outputs");
    let d = &t.0;
    let small = [
        "trace",
        "gen",
        "--tables",
        "2",
        "--rows",
        "100",
        "--bag",
        "3",
        "--batch",
        "8",
        "--batches",
        "2",
        "-q",
        "-o",
    ];
    let generate = |out: &str| {
        let mut a = small.to_vec();
        a.push(out);
        nmpsim(d, &a)
    };
    assert!(generate("t.nmpt").status.success());
    let before = std::fs::read(d.join("t.nmpt")).unwrap();
    let listing = || {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    std::fs::create_dir(d.join("sub")).unwrap();
    write(d, "in.tsv", criteo_line(1, 0, "a"));
    let files = listing();
    for (args, want) in [
        (
            vec!["trace", "export", "t.nmpt", "--csv", "t.nmpt"],
            "--csv t.nmpt is the input file",
        ),
        (
            vec!["trace", "export", "t.nmpt", "--csv", "./t.nmpt"],
            "is the input file",
        ),
        (
            vec!["trace", "export", "t.nmpt", "--csv", "sub"],
            "sub is a directory",
        ),
        (
            vec!["trace", "convert", "in.tsv", "-o", "in.tsv", "-q"],
            "-o in.tsv is the input file",
        ),
    ] {
        let err = fails(d, &args);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(listing(), files, "{args:?} left or removed a file");
    }
    let o = generate("sub");
    let err = exited(&o, 2);
    assert!(err.contains("sub: is a directory"), "{err}");
    assert_eq!(listing(), files, "trace gen -o DIR left a file");
    assert_eq!(std::fs::read(d.join("t.nmpt")).unwrap(), before);

    // A write that fails (a full device, through a link to it) names the
    // output and leaves the link alone.
    if Path::new("/dev/full").exists() {
        std::os::unix::fs::symlink("/dev/full", d.join("full")).unwrap();
        let err = fails(d, &words("trace export t.nmpt --csv full"));
        assert!(err.contains("--csv full"), "{err}");
        assert!(
            std::fs::symlink_metadata(d.join("full")).is_ok(),
            "the link to /dev/full was removed"
        );
    }
    // And a good export leaves only its CSV.
    assert!(
        nmpsim(d, &words("trace export t.nmpt --csv t.csv"))
            .status
            .success()
    );
    assert!(
        std::fs::read_to_string(d.join("t.csv"))
            .unwrap()
            .starts_with("batch,table")
    );
    assert!(
        !listing().iter().any(|f| f.contains(".tmp")),
        "{:?}",
        listing()
    );
}

/// `trace gen -o` and `trace convert -o` write through a link to a file,
/// into a pipe without replacing it, and never touch a file named like a
/// temporary of their output (`X.tmp`), even when it is the input.
#[test]
fn trace_outputs_honour_links_pipes_and_tmp_named_inputs() {
    let t = TempDir::new("trace-outputs");
    let d = &t.0;
    let gen_to = |out: &str| {
        nmpsim(
            d,
            &[
                "trace", "gen", "--tables", "2", "--rows", "50", "--bag", "2", "--batch", "4",
                "-q", "-o", out,
            ],
        )
    };
    assert!(gen_to("real.nmpt").status.success());
    std::os::unix::fs::symlink("real.nmpt", d.join("link.nmpt")).unwrap();
    write(d, "real.nmpt", b"old");
    assert!(gen_to("link.nmpt").status.success());
    let link = std::fs::symlink_metadata(d.join("link.nmpt")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    assert!(std::fs::read(d.join("real.nmpt")).unwrap().len() > 100);
    ok(d, &words("trace stats link.nmpt"));

    // A FIFO stays a FIFO: the trace goes into it.
    let fifo = d.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let path = fifo.clone();
        let reader = std::thread::spawn(move || std::fs::read(path).unwrap());
        assert!(gen_to("fifo").status.success());
        // (Checked before joining: had the FIFO been replaced, the reader
        // would wait for a writer forever.)
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        let got = reader.join().unwrap();
        assert_eq!(got, std::fs::read(d.join("real.nmpt")).unwrap());
    }

    // An input named like the output's old temporary survives the run.
    let tsv: String = (0..5).map(|i| criteo_line(i % 2, i, "ab") + "\n").collect();
    write(d, "z.nmpt.tmp", &tsv);
    ok(d, &words("trace convert z.nmpt.tmp -o z.nmpt --batch 4 -q"));
    assert_eq!(read(&d.join("z.nmpt.tmp")), tsv);
    ok(d, &words("trace stats z.nmpt"));
}

/// Sizes beyond what a trace can hold are refused by flag before anything
/// is allocated for them.
#[test]
fn absurd_sizes_are_refused_by_flag() {
    let t = TempDir::new("absurd");
    let d = &t.0;
    write(d, "s.tsv", criteo_line(1, 0, "ab") + "\n");
    let huge = "18446744073709551615";
    for (args, want) in [
        (
            vec![
                "trace", "gen", "--rows", "10", "--tables", huge, "-o", "x.nmpt",
            ],
            "'--tables <N>'",
        ),
        (
            vec!["trace", "stats", "--profile", "rm1", "--tables", huge],
            "'--tables <N>'",
        ),
        (
            vec!["trace", "convert", "s.tsv", "-o", "c.nmpt", "--batch", huge],
            "--batch: invalid parameter `batch_size`",
        ),
        (
            vec!["trace", "criteo-sample", "--rows", huge, "-o", "c.tsv"],
            "--rows 18446744073709551615: expected at most",
        ),
        (
            vec!["trace", "gen", "--rows", "10", "-o", "no/such/dir/x.nmpt"],
            "no/such/dir/x.nmpt: No such file",
        ),
        // Listing writes no trace: an output file with it is refused.
        (
            vec!["trace", "gen", "--list-profiles", "-o", "z.nmpt"],
            "'--list-profiles' cannot be used with '--output <FILE>'",
        ),
        (
            vec!["trace", "criteo-sample", "--rows", "0", "-o", "c.tsv"],
            "--rows 0: expected at least 1",
        ),
        // One batch of 24 GB: past a record's 4 GiB (it once aborted on an
        // allocation failure).
        (
            vec![
                "trace",
                "gen",
                "--rows",
                "10",
                "--batch",
                "2000000000",
                "--bag",
                "2",
                "-q",
                "-o",
                "huge.nmpt",
            ],
            "--batch 2000000000 x --bag 2 lookups over 1 table: one batch record would hold 24000000012 bytes",
        ),
    ] {
        let err = fails(d, &args);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains(".tmp"), "{err}");
    }
    assert!(!d.join("huge.nmpt").exists());
}

/// `trace stats` on generated batches counts what it holds: each batch and a
/// copy of its indices (sorted for the unique rows). RM1's 10 tables of 10^6
/// bags of 80 lookups are 3.2 GB a batch, 6.4 GB with the copy: under a
/// 6 GB address-space limit that is refused up front, naming the flags, not
/// run until memory runs out.
#[test]
fn trace_stats_refuses_a_batch_it_cannot_hold_with_its_copy() {
    let t = TempDir::new("stats-memory");
    let o = crate::common::nmpsim_within(
        &t.0,
        6_000_000,
        &words("trace stats --profile rm1 --batch 1000000 -q"),
    );
    let err = exited(&o, 2);
    assert!(
        err.contains("one batch of --batch 1000000 x --bag 80 lookups over 10 tables need")
            && err.contains("lower --batch or --bag"),
        "{err}"
    );
}

/// Input file names that are not UTF-8 are recorded in the run's files with
/// the odd bytes replaced, not refused (nor a panic).
#[cfg(unix)]
#[test]
fn input_names_that_are_not_utf8_are_recorded_lossily() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let t = TempDir::new("non-utf8");
    let name = OsStr::from_bytes(b"u\xff.nmpt");
    succeeds(
        &t.0,
        &words("trace gen --rows 100 --batches 2 -q -o a.nmpt"),
    );
    std::fs::rename(t.0.join("a.nmpt"), t.0.join(name)).unwrap();
    let o = process(&t.0)
        .arg("trace")
        .arg("stats")
        .arg(name)
        .args(words("--json --out st"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let config = read(&t.0.join("st/config.json"));
    assert!(config.contains("u\u{fffd}.nmpt"), "{config}");
    let o = process(&t.0)
        .args(words("dram --engine native --embedding-trace"))
        .arg(name)
        .args(words("-q --json --out dr"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let config = read(&t.0.join("dr/config.json"));
    assert!(config.contains("u\u{fffd}.nmpt"), "{config}");
}

/// SIGINT or SIGTERM during `trace gen` ends it with 130 or 143 and leaves
/// no temporary file behind (nor the trace).
#[test]
fn an_interrupted_gen_leaves_no_temporary_file() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let t = TempDir::new(&format!("signal-{sig}"));
        let mut child = process(&t.0)
            .args(words(
                "trace gen --profile rm1 --batch 2048 --batches 100000 -o big.nmpt",
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let tmp = t.0.join(format!("big.nmpt.{}.tmp", child.id()));
        let started = Instant::now();
        while !tmp.exists() && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(tmp.exists(), "no {}", tmp.display());
        // SAFETY: a signal to our own child process.
        unsafe {
            libc::kill(child.id() as i32, sig);
        }
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code), "signal {sig}: {status:?}");
        let left: Vec<_> = std::fs::read_dir(&t.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "signal {sig} left {left:?}");
    }
}

/// A named pipe is refused at once by every reader of binary traces, even
/// with no writer (opening one for reading would wait for a writer).
#[test]
fn a_pipe_without_a_writer_is_refused_not_waited_on() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let t = TempDir::new("fifo");
    let d = &t.0;
    let made = Command::new("mkfifo").arg(d.join("p")).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    for args in [
        vec!["trace", "stats", "p"],
        vec!["trace", "export", "p", "--csv", "-"],
        vec![
            "nmp", "run", "--engine", "native", "--ranks", "2", "--dim", "16", "-q", "--out", "n",
            "--trace", "p",
        ],
        vec![
            "dram",
            "--engine",
            "native",
            "--dim",
            "16",
            "-q",
            "--out",
            "r",
            "--embedding-trace",
            "p",
        ],
    ] {
        let mut child = process(d)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("{args:?} waits on the pipe");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is not a regular file"), "{args:?}: {err}");
    }
}

/// `-o -` is no file: refused, not written as a file named `-`.
#[test]
fn a_dash_as_output_file_is_refused() {
    let t = TempDir::new("dash-out");
    for args in [
        &words("trace gen --profile criteo-kaggle --batches 1 --batch 8 -o -")[..],
        &words("trace criteo-sample --samples 4 -o -")[..],
    ] {
        let o = nmpsim(&t.0, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("-o -: this command writes a file"),
            "{args:?}"
        );
        assert!(!t.0.join("-").exists(), "{args:?}");
    }
}
