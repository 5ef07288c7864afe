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

/// Refuses a `--link-gbps` that is not a positive, finite bandwidth (it
/// divides the link's bytes).
pub fn check_link_gbps(gbps: f64) -> anyhow::Result<()> {
    if gbps > 0.0 && gbps.is_finite() {
        Ok(())
    } else {
        anyhow::bail!("--link-gbps {gbps}: expected a positive, finite bandwidth in GB/s")
    }
}

/// `MemAvailable` of `/proc/meminfo`, where there is one.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
