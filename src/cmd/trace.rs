use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum TraceCommand {}

pub fn run(c: TraceCommand) -> anyhow::Result<ExitCode> {
    match c {}
}
