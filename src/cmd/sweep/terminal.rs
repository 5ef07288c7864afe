//! What drives a sweep from the command line: this binary as the program
//! its runs start, and the terminal's messages and progress bar.

use super::*;

/// This binary, as what runs a sweep's runs: a [`Program`] that refuses to
/// sweep `sweep` itself.
pub(super) struct Nmpsim(pub(super) Program);

impl Launcher for Nmpsim {
    fn cli(&self) -> clap::Command {
        self.0.cli()
    }

    fn refuse(&self, path: &[String]) -> Option<String> {
        (path.first().map(String::as_str) == Some("sweep")).then(|| {
            "a sweep cannot run `sweep` (expected a command such as dram, nmp run, train)".into()
        })
    }

    fn process(&self, argv: &[String]) -> std::process::Command {
        self.0.process(argv)
    }
}

/// The sweep's messages and progress bar on stderr.
pub(super) struct Terminal {
    pub(super) quiet: bool,
    pub(super) pb: indicatif::ProgressBar,
}

impl Monitor for Terminal {
    fn note(&mut self, message: &str) {
        if !self.quiet {
            eprintln!("{message}");
        }
    }

    fn started(&mut self, s: &Started<'_>) {
        let (plan, o) = (s.plan, s.options);
        if !self.quiet {
            eprintln!(
                "sweep {}: {} of `nmpsim {}`{} in {} ({} finished, {} to run, {} at a time)",
                plan.path.display(),
                crate::cmd::plural(s.selected, "run", "runs"),
                plan.spec.command_str(),
                if o.shard.is_all() {
                    String::new()
                } else {
                    format!(" (shard {} of {})", o.shard, plan.runs.len())
                },
                o.out.display(),
                s.reused,
                s.to_run,
                s.at_once
            );
        }
        self.pb.set_length(s.to_run as u64);
        // Ended by SIGINT or SIGTERM: results.csv holds the runs finished so
        // far (the unfinished ones are run by the same command again).
        let (out, spec, runs, quiet) = (
            o.out.clone(),
            plan.spec.clone(),
            plan.runs.clone(),
            self.quiet,
        );
        crate::signals::before_exit(
            move || match sweep::record_interrupted(&out, &spec, &runs) {
                Ok((n, p)) if !quiet => eprintln!(
                    "sweep: interrupted; {n} finished runs in {}; the same command runs the others",
                    p.display()
                ),
                Ok(_) => {}
                Err(e) => eprintln!(
                    "sweep: interrupted; cannot write results.csv: {:#}",
                    anyhow::Error::from(e)
                ),
            },
        );
    }

    fn finished(&mut self, run: &Run, row: Option<&Row>) {
        self.pb.inc(1);
        let Some(row) = row.filter(|r| r.status == Status::Failed.as_str()) else {
            return;
        };
        if self.quiet {
            return;
        }
        let what = run.describe();
        let msg = format!(
            "run {}{} failed: {}",
            run.index,
            if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            },
            if row.error.is_empty() {
                "no message"
            } else {
                &row.error
            }
        );
        self.pb.suspend(|| eprintln!("{msg}"));
    }
}
