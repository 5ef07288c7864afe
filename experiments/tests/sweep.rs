//! The sweep executor on a program of the test's own (a shell script behind
//! a clap definition): runs recorded, failures kept as results, resumption,
//! the lock, dry runs and a merge of shards.
#![cfg(unix)]

use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command};
use nmpsim_experiments::sweep::{self, DryRun, Launcher, Monitor, Plan, SweepError, SweepOptions};
use nmpsim_experiments::{Row, Run, Shard};

/// `t echo --v=N --json`: prints `{"twice": 2N}`; fails (exit 3, a message
/// on stderr) for N = 13 unless the file `FIXED` exists beside the spec.
struct Script {
    dir: PathBuf,
}

impl Launcher for Script {
    fn cli(&self) -> Command {
        Command::new("t").subcommand(
            Command::new("echo")
                .arg(Arg::new("v").long("v").required(true))
                .arg(Arg::new("json").long("json").action(ArgAction::SetTrue)),
        )
    }

    fn refuse(&self, path: &[String]) -> Option<String> {
        (path.first().map(String::as_str) == Some("t")).then(|| "not t itself".into())
    }

    fn process(&self, argv: &[String]) -> std::process::Command {
        let script = r#"
            v=${2#--v=}
            if [ "$v" = 13 ] && [ ! -e "$FIXED" ]; then echo "unlucky $v" >&2; exit 3; fi
            echo "{\"twice\": $((v * 2))}"
        "#;
        let mut c = std::process::Command::new("sh");
        c.arg("-c")
            .arg(script)
            .arg("sh")
            .args(argv)
            .env("FIXED", self.dir.join("FIXED"));
        c
    }
}

/// Counts what the monitor hears.
#[derive(Default)]
struct Count {
    started: usize,
    finished: Vec<(usize, Option<String>)>,
}

impl Monitor for Count {
    fn started(&mut self, _s: &sweep::Started<'_>) {
        self.started += 1;
    }
    fn finished(&mut self, run: &Run, row: Option<&Row>) {
        self.finished
            .push((run.index, row.map(|r| r.status.clone())));
    }
}

fn temp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("nmpsim-exp-sweep-{name}-"))
        .tempdir()
        .expect("temp dir")
}

fn plan(dir: &Path, values: &str) -> (Script, Plan) {
    let spec = dir.join("s.toml");
    std::fs::write(
        &spec,
        format!("command = \"echo\"\n[axes]\nv = [{values}]\n"),
    )
    .unwrap();
    let script = Script {
        dir: dir.to_path_buf(),
    };
    let plan = Plan::load(&spec, &script).unwrap();
    (script, plan)
}

fn options(out: PathBuf, shard: Shard) -> SweepOptions {
    SweepOptions {
        out,
        jobs: 2,
        shard,
    }
}

#[test]
fn runs_are_recorded_failures_kept_and_a_rerun_retries_only_those() {
    let d_tmp = temp("rerun");
    let d = d_tmp.path();
    let (script, plan) = plan(d, "1, 13, 4");
    let o = options(d.join("out"), Shard::ALL);
    let mut m = Count::default();
    let first = sweep::run(&plan, &o, &script, &mut m).unwrap();
    assert_eq!(m.started, 1);
    assert_eq!(m.finished.len(), 3);
    let s = &first.summary;
    assert_eq!((s.runs, s.completed, s.failed, s.skipped), (3, 2, 1, 0));
    assert_eq!(first.missing, 0);
    assert!(!first.all_completed());
    let twice: Vec<Option<&str>> = first.rows.iter().map(|r| r.metric("twice")).collect();
    assert_eq!(twice, [Some("2"), None, Some("8")]);
    assert_eq!(first.rows[1].error, "unlucky 13");
    let csv = std::fs::read_to_string(&first.results).unwrap();
    assert!(csv.contains("failed,unlucky 13"), "{csv}");

    // Fixed: only the failed run runs again.
    std::fs::write(d.join("FIXED"), "").unwrap();
    let mut m = Count::default();
    let again = sweep::run(&plan, &o, &script, &mut m).unwrap();
    assert_eq!(m.finished, [(1, Some("completed".to_string()))]);
    let s = &again.summary;
    assert_eq!((s.completed, s.failed, s.skipped), (3, 0, 2));
    assert!(again.all_completed());
    assert_eq!(again.rows[1].metric("twice"), Some("26"));

    // The dry run now has every run done, timed.
    let dry = DryRun::new(&plan, &o.out, Shard::ALL);
    assert_eq!((dry.runs_selected, dry.runs_to_run, dry.timed), (3, 0, 3));
    assert!(
        dry.text(&plan, 2)
            .contains("estimated cost: nothing to run")
    );
}

#[test]
fn a_locked_directory_and_a_refused_command_are_errors() {
    let d_tmp = temp("lock");
    let d = d_tmp.path();
    let (script, plan) = plan(d, "1");
    let o = options(d.join("out"), Shard::ALL);
    std::fs::create_dir_all(&o.out).unwrap();
    let held = sweep::dir::lock(&o.out).unwrap();
    match sweep::run(&plan, &o, &script, &mut Count::default()) {
        Err(SweepError::Refused(m)) => assert!(m.contains("in use by another sweep"), "{m}"),
        other => panic!("expected the lock to refuse the sweep, got {other:?}"),
    }
    drop(held);
    assert!(sweep::run(&plan, &o, &script, &mut Count::default()).is_ok());

    let spec = d.join("self.toml");
    std::fs::write(&spec, "command = \"t\"\n").unwrap();
    match Plan::load(&spec, &script) {
        Err(SweepError::Spec(e)) => {
            assert!(e.to_string().contains("key 'command': not t itself"), "{e}")
        }
        other => panic!("expected the command to be refused, got {other:?}"),
    }
}

#[test]
fn shards_merge_into_the_table_of_an_unsharded_sweep() {
    let d_tmp = temp("merge");
    let d = d_tmp.path();
    let (script, plan) = plan(d, "1, 2, 3, 4, 5");
    let whole = sweep::run(
        &plan,
        &options(d.join("whole"), Shard::ALL),
        &script,
        &mut Count::default(),
    )
    .unwrap();
    let mut shards = Vec::new();
    for i in 1..=2 {
        let shard = Shard { index: i, count: 2 };
        let out = d.join(format!("shard-{i}"));
        let r = sweep::run(
            &plan,
            &options(out.clone(), shard),
            &script,
            &mut Count::default(),
        )
        .unwrap();
        assert_eq!(r.summary.runs, if i == 1 { 3 } else { 2 });
        shards.push(out);
    }
    let mut ready = 0;
    let merged = sweep::merge(&d.join("merged"), &shards, &mut || ready += 1).unwrap();
    assert_eq!(ready, 1);
    assert_eq!(
        (merged.summary.merged, merged.summary.missing.len()),
        (5, 0)
    );
    let table = |p: &Path| -> Vec<String> {
        // The table without its timing column.
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| {
                let mut f: Vec<&str> = l.split(',').collect();
                f.remove(4);
                f.join(",")
            })
            .collect()
    };
    assert_eq!(table(&merged.results), table(&whole.results));

    // One shard alone: the other's runs are missing, and said to be.
    let part = sweep::merge(&d.join("part"), &shards[..1], &mut || {}).unwrap();
    assert_eq!(part.summary.missing, [1, 3]);
}
