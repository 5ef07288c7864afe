//! One module per top-level subcommand. Each exposes a clap `Subcommand` enum (or
//! `Args` struct) and a `run` function returning the process exit code.

pub mod demo;
pub mod dram;
pub mod gpu;
pub mod kernels;
pub mod nmp;
pub mod plot;
pub mod reproduce;
pub mod sweep;
pub mod trace;
pub mod train;
