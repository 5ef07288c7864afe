use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum KernelsCommand {}

pub fn run(c: KernelsCommand) -> anyhow::Result<ExitCode> {
    match c {}
}
