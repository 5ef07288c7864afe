//! `experiments/slurm/sweep-array.sh` on a real one-node Slurm cluster, the
//! one `experiments/slurm/cluster.sh` starts (Debian's slurm-wlm and munge,
//! installed where missing when running as root). Where the cluster cannot
//! start, the test says why and passes; `./x test` prints the outcome, kept
//! in `target/tmp/slurm-cluster-test.txt`, either way.
//!
//! One test runs the scenarios one after the other on one cluster (starting
//! it is the slow part):
//! 1. a sweep with failing runs, as 3 array tasks: the merged results equal
//!    the unsharded sweep's but for timing columns, and the merge lists the
//!    failed runs;
//! 2. a slower sweep with tasks of 2 CPUs on a node of 2, so the tasks run one
//!    at a time: one task is cancelled mid-run, one before it starts; the
//!    merge names the missing runs and their shards and fails its job; the
//!    same command submitted again repairs both, keeping the first attempt's
//!    logs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nmpsim_experiments::{is_timing_column, without_columns};

use crate::common::*;

/// Six runs, two of which fail at run time (`strided:0` is no stream).
const FAILING: &str = r#"command = "dram"
[base]
engine = "native"
requests = 20000
[axes]
preset = ["DDR4-2400-x8", "DDR4-3200-x8"]
stream = ["random", "sequential", "strided:0"]
"#;

/// Three runs of a few seconds each (one per shard of 3).
const SLOW: &str = r#"command = "dram"
[base]
engine = "native"
preset = "DDR4-3200-x8"
requests = 6000000
[axes]
stream = ["random", "sequential", "strided:4096"]
"#;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Where the outcome is kept for `./x test` to print.
fn marker() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("slurm-cluster-test.txt")
}

/// `PATH` with the daemons' directories (Debian puts them in /usr/sbin).
fn path() -> String {
    format!(
        "/usr/sbin:/sbin:{}",
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A started cluster, stopped (its daemons, by pid) when dropped, also when
/// the test fails.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    /// Whether starting it installed Slurm and munge first.
    installed: bool,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo("experiments/slurm/cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .env("PATH", path())
            .status();
    }
}

impl Cluster {
    /// Starts one in `dir`; `Err` holds the reason it cannot start here.
    fn start(dir: &Path) -> Result<Cluster, String> {
        let o = Command::new("bash")
            .arg(repo("experiments/slurm/cluster.sh"))
            .arg("start")
            .arg(dir)
            .env("PATH", path())
            .output()
            .expect("run cluster.sh");
        let err = String::from_utf8_lossy(&o.stderr);
        match o.status.code() {
            Some(0) => Ok(Cluster {
                dir: dir.to_path_buf(),
                conf: dir.join("slurm.conf"),
                installed: err.contains("installing slurm-wlm and munge"),
            }),
            Some(77) => Err(err
                .lines()
                .rev()
                .find(|l| l.starts_with("skipped: "))
                .unwrap_or("skipped: cluster.sh gave no reason")
                .trim_start_matches("skipped: ")
                .to_string()),
            _ => panic!("the test cluster did not start: {o:?}\n{err}"),
        }
    }

    /// A Slurm (or other) command against this cluster.
    fn command(&self, program: &str, dir: &Path) -> Command {
        let mut c = Command::new(program);
        c.current_dir(dir)
            .env("PATH", path())
            .env("SLURM_CONF", &self.conf);
        c
    }

    /// Output of a Slurm client command, which must succeed.
    fn query(&self, program: &str, args: &[&str]) -> String {
        let o = self
            .command(program, &self.dir)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(o.status.success(), "{program} {args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `sweep-array.sh SPEC 3 OUT` with `cpus` per task, run in `dir`; the
    /// array's and the merge's job ids.
    fn submit(&self, dir: &Path, spec: &str, out: &str, cpus: u32) -> (String, String) {
        let o = self
            .command("bash", dir)
            .arg(repo("experiments/slurm/sweep-array.sh"))
            .args([spec, "3", out])
            .env("NMPSIM", env!("CARGO_BIN_EXE_nmpsim"))
            .env("CPUS_PER_TASK", cpus.to_string())
            .output()
            .expect("run sweep-array.sh");
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{o:?}");
        let line = said
            .lines()
            .find(|l| l.starts_with("submitted array job "))
            .unwrap_or_else(|| panic!("no submission line: {said}"));
        let w: Vec<&str> = line.split_whitespace().collect();
        // "submitted array job A (3 shards) and merge job M; logs: ..."
        (w[3].to_string(), w[9].trim_end_matches(';').to_string())
    }

    /// Waits until none of `jobs` is pending, running or completing.
    fn wait_done(&self, jobs: &[&str], within: Duration) {
        let list = jobs.join(",");
        let t = Instant::now();
        loop {
            let left = self.query(
                "squeue",
                &[
                    "-h",
                    "-j",
                    &list,
                    "-t",
                    "pending,running,completing,configuring,suspended",
                    "-o",
                    "%i %T",
                ],
            );
            if left.trim().is_empty() {
                return;
            }
            assert!(
                t.elapsed() < within,
                "jobs {list} not done in {within:?}: {left}\n{}",
                self.query("squeue", &["-h", "-o", "%i %T %r"])
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The `JobState=` of a job the controller still remembers (MinJobAge).
    fn state(&self, job: &str) -> String {
        let s = self.query("scontrol", &["-o", "show", "job", job]);
        s.split_whitespace()
            .find_map(|w| w.strip_prefix("JobState="))
            .unwrap_or_else(|| panic!("no JobState for job {job}: {s}"))
            .to_string()
    }
}

fn log(dir: &Path, name: &str) -> String {
    read(&dir.join(name))
}

/// Results without the columns that time the runs.
fn untimed(csv: &Path) -> String {
    without_columns(&read(csv), is_timing_column).unwrap()
}

#[test]
fn sweep_arrays_run_cancel_resume_and_merge_on_a_real_slurm_cluster() {
    let _ = std::fs::remove_file(marker());
    let t = TempDir::new("slurm-cluster");
    let d = &t.0;
    let began = Instant::now();
    let cluster = match Cluster::start(&d.join("cluster")) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: the Slurm cluster test: {why}");
            std::fs::write(marker(), format!("skipped: {why}\n")).unwrap();
            return;
        }
    };
    let started_in = began.elapsed();
    write(d, "failing.toml", FAILING);
    write(d, "slow.toml", SLOW);
    // The references, unsharded: the slow one in the background meanwhile.
    let reference = process(d)
        .args([
            "sweep",
            "slow.toml",
            "--out",
            "slow-whole",
            "--yes",
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the reference sweep");
    let o = nmpsim(
        d,
        &["sweep", "failing.toml", "--out", "failing-whole", "--yes"],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");

    // 1. Three tasks of one CPU; runs 2 and 5 (both in shard 3/3) fail.
    let (array, merge) = cluster.submit(d, "failing.toml", "failing", 1);
    cluster.wait_done(&[&array, &merge], Duration::from_secs(60));
    assert_eq!(
        untimed(&d.join("failing/results.csv")),
        untimed(&d.join("failing-whole/results.csv")),
        "the merged results are the unsharded ones"
    );
    let logs = d.join("failing/logs");
    let m = log(&logs, &format!("merge.job{merge}.log"));
    assert!(
        m.contains("merged 6 of 6 runs from 3 directories")
            && m.contains("2 runs failed")
            && m.lines()
                .filter(|l| l.contains("--stream: `strided:0`"))
                .count()
                == 2
            && m.contains("sweep-array: merged at"),
        "{m}"
    );
    assert_eq!(cluster.state(&merge), "COMPLETED", "{m}");
    let s3 = log(&logs, &format!("shard-3.job{array}.log"));
    assert!(
        s3.contains("run 2 (preset=DDR4-2400-x8 stream=strided:0) failed: error: --stream")
            && s3.contains(&format!("shard 3/3 (job {array}_3 on "))
            && s3.contains("exit 1 after")
            && s3.contains("some runs failed"),
        "{s3}"
    );
    let s1 = log(&logs, &format!("shard-1.job{array}.log"));
    assert!(
        s1.contains("exit 0 after") && s1.contains("every run of the shard completed"),
        "{s1}"
    );

    // 2. Tasks of 2 CPUs on a node of 2 run one at a time. Cancel task 2
    // once its run is under way, and task 3, still pending behind it.
    let (array, merge) = cluster.submit(d, "slow.toml", "slow", 2);
    let logs = d.join("slow/logs");
    let shard2 = logs.join(format!("shard-2.job{array}.log"));
    let shard3 = logs.join(format!("shard-3.job{array}.log"));
    let t2 = Instant::now();
    while !std::fs::read_to_string(&shard2).is_ok_and(|s| s.contains("1 to run")) {
        assert!(
            t2.elapsed() < Duration::from_secs(60),
            "task 2 did not start its run: {}",
            cluster.query("squeue", &["-h", "-o", "%i %T %r"])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !shard3.exists(),
        "task 3 started before task 2 was cancelled"
    );
    cluster.query("scancel", &[&format!("{array}_3")]);
    cluster.query("scancel", &[&format!("{array}_2")]);
    cluster.wait_done(&[&array, &merge], Duration::from_secs(60));
    assert!(!shard3.exists(), "the cancelled pending task 3 ran");
    let s2 = read(&shard2);
    assert!(
        s2.contains("sweep: interrupted; 0 finished runs")
            && s2.contains("exit 143 after")
            && s2.contains("re-submit the same command to resume"),
        "{s2}"
    );
    let m = log(&logs, &format!("merge.job{merge}.log"));
    assert!(
        m.contains("shard 3/3 has no sweep directory")
            && m.contains("error: the merge is incomplete: 2 runs of 3 are in no shard directory")
            && m.contains(
                "shard 2/3: run 1 (its directory is merged, and these did not finish in it)"
            )
            && m.contains("shard 3/3: run 2 (none of the DIRs is this shard's")
            && m.contains("Re-run shards 2/3, 3/3")
            && m.contains("sweep-array: the merge is incomplete"),
        "{m}"
    );
    // The merge's job fails, so that an afterok dependent would not run.
    assert_eq!(cluster.state(&merge), "FAILED", "{m}");

    // The same command again resumes: shard 1 keeps its run, 2 and 3 run.
    let (again, merge2) = cluster.submit(d, "slow.toml", "slow", 2);
    cluster.wait_done(&[&again, &merge2], Duration::from_secs(60));
    let m2 = log(&logs, &format!("merge.job{merge2}.log"));
    assert!(
        m2.contains("merged 3 of 3 runs from 3 directories") && m2.contains("(0 failed)"),
        "{m2}"
    );
    assert_eq!(cluster.state(&merge2), "COMPLETED", "{m2}");
    let r1 = log(&logs, &format!("shard-1.job{again}.log"));
    assert!(r1.contains("(1 finished, 0 to run"), "{r1}");
    // The first attempt's logs are kept beside the second's.
    assert!(read(&shard2).contains("exit 143"));
    let r2 = log(&logs, &format!("shard-2.job{again}.log"));
    assert!(
        r2.contains("(0 finished, 1 to run") && r2.contains("exit 0 after"),
        "{r2}"
    );
    let o: Output = reference.wait_with_output().expect("the reference sweep");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        untimed(&d.join("slow/results.csv")),
        untimed(&d.join("slow-whole/results.csv")),
        "the repaired results are the unsharded ones"
    );
    let installed = cluster.installed;
    drop(cluster);
    std::fs::write(
        marker(),
        format!(
            "ran: the Slurm cluster test passed in {:.0} s (cluster start {:.1} s{})\n",
            began.elapsed().as_secs_f64(),
            started_in.as_secs_f64(),
            if installed {
                ", installing slurm-wlm and munge included"
            } else {
                ""
            }
        ),
    )
    .unwrap();
}
