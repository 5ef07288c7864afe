//! End-to-end tests of the `nmpsim` binary, one module per command.
//!
//! They are one test binary (not one per command) because each binary links
//! every engine and kernel: one link instead of fifteen keeps a test build
//! small on disk and quick to link.

mod common;

mod demo;
mod dram;
mod dram_config;
mod gpu;
mod help;
mod host;
mod kernels;
mod kernels_cuda;
mod nmp;
mod output;
mod peer;
mod plot;
mod reproduce;
mod scars;
mod slurm;
mod snapshots;
mod sweep;
mod trace;
mod trace_hot;
mod train;
mod train_cdlrm;
mod train_cuda;
mod tt;
