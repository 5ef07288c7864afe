//! A two-point sweep through the library alone, of a program of your own.
//!
//! The example is both the sweep and its runs. Run without arguments, it
//! writes a spec that sweeps `square --x` over two values, and runs that sweep
//! with itself as the program: each run is this example started again as
//! `two_point_sweep square --x=X --json`, which prints its result as JSON.
//! The sweep writes a run directory per run and `results.csv`, which is
//! printed; a second pass reuses both runs.
//!
//! ```text
//! cargo run -p nmpsim-experiments --example two_point_sweep [-- OUT_DIR]
//! ```

use std::path::PathBuf;

use clap::{Arg, ArgAction, Command, value_parser};
use nmpsim_experiments::Row;
use nmpsim_experiments::sweep::{self, Monitor, Plan, Program, Started, SweepOptions};
use nmpsim_experiments::{Run, Shard};

/// The program's command line: one subcommand, `square`.
fn cli() -> Command {
    Command::new("two_point_sweep")
        .arg(
            Arg::new("dir")
                .value_name("OUT_DIR")
                .value_parser(value_parser!(PathBuf)),
        )
        .subcommand(
            Command::new("square")
                .about("Prints x and x squared as JSON")
                .arg(
                    Arg::new("x")
                        .long("x")
                        .required(true)
                        .value_parser(value_parser!(f64)),
                )
                .arg(Arg::new("json").long("json").action(ArgAction::SetTrue)),
        )
}

/// What the sweep says as it goes, on standard error.
struct Print;
impl Monitor for Print {
    fn note(&mut self, message: &str) {
        eprintln!("{message}");
    }
    fn started(&mut self, s: &Started<'_>) {
        eprintln!(
            "{} runs: {} reused, {} to run, {} at a time",
            s.selected, s.reused, s.to_run, s.at_once
        );
    }
    fn finished(&mut self, run: &Run, row: Option<&Row>) {
        let status = row.map_or("not recorded", |r| r.status.as_str());
        eprintln!("run {} ({}): {status}", run.index, run.describe());
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let matches = cli().get_matches();
    if let Some(m) = matches.subcommand_matches("square") {
        // One run of the sweep.
        let x: f64 = *m.get_one("x").expect("required");
        println!("{}", serde_json::json!({ "x": x, "square": x * x }));
        return Ok(());
    }

    let dir = matches
        .get_one::<PathBuf>("dir")
        .cloned()
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("nmpsim-two-point-sweep-{}", std::process::id()))
        });
    std::fs::create_dir_all(&dir)?;
    let spec = dir.join("square.toml");
    std::fs::write(&spec, "command = \"square\"\n\n[axes]\nx = [2.0, 3.0]\n")?;

    let program = Program {
        exe: std::env::current_exe()?,
        cli: cli(),
    };
    let plan = Plan::load(&spec, &program)?;
    let options = SweepOptions {
        out: dir.join("sweep"),
        jobs: 2,
        shard: Shard::ALL,
    };
    let outcome = sweep::run(&plan, &options, &program, &mut Print)?;
    print!("{}", std::fs::read_to_string(&outcome.results)?);
    let squares: Vec<Option<&str>> = outcome.rows.iter().map(|r| r.metric("square")).collect();
    assert_eq!(squares, [Some("4.0"), Some("9.0")], "the runs' results");

    // The same sweep again: both runs are finished, so both are reused.
    let again = sweep::run(&plan, &options, &program, &mut Print)?;
    assert_eq!((again.summary.skipped, again.summary.completed), (2, 2));
    eprintln!("sweep directory: {}", options.out.display());
    Ok(())
}
