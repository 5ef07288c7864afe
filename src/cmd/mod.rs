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

/// The most embedding tables a `--tables` may ask for (production models
/// have hundreds; more is a mistyped value, refused before anything is
/// allocated for it).
pub const MAX_TABLES: usize = 1 << 16;

/// clap's parser of `--tables`: an integer from 1 to [`MAX_TABLES`].
pub fn tables_arg(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("expected a whole number of tables, not `{s}`"))?;
    if n == 0 || n > MAX_TABLES {
        return Err(format!("{n}: expected 1 to {MAX_TABLES} tables"));
    }
    Ok(n)
}

/// clap's parser of a request window (`--window`): 1 to
/// [`nmpsim_sim::runner::MAX_WINDOW`] requests in flight, far beyond what a
/// memory controller's queues hold.
pub fn window_arg(s: &str) -> Result<usize, String> {
    const MAX: usize = nmpsim_sim::runner::MAX_WINDOW;
    let n: usize = s
        .parse()
        .map_err(|_| format!("expected a whole number of requests, not `{s}`"))?;
    if n == 0 || n > MAX {
        return Err(format!("{n}: expected 1 to {MAX} requests in flight"));
    }
    Ok(n)
}

/// `MemAvailable` of `/proc/meminfo`, where there is one.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
