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

/// Refuses a `--link-gbps` that is not a positive, finite bandwidth of at
/// least [`nmpsim_nmp::MIN_RATE`] GB/s: it divides the link's bytes, and a
/// slower link (a subnormal such as 1e-320) makes the times infinite.
pub fn check_link_gbps(gbps: f64) -> anyhow::Result<()> {
    let min = nmpsim_nmp::MIN_RATE;
    if gbps >= min && gbps.is_finite() {
        Ok(())
    } else {
        // Very small or large values in exponent form, as they were given.
        let shown = if gbps != 0.0 && gbps.is_finite() && !(1e-4..1e16).contains(&gbps.abs()) {
            format!("{gbps:e}")
        } else {
            format!("{gbps}")
        };
        anyhow::bail!(
            "--link-gbps {shown}: expected a positive, finite bandwidth in GB/s, at least {min:e} (1 kB/s)"
        )
    }
}

/// The most embedding tables a `--tables` may ask for (production models
/// have hundreds; more is a mistyped value, refused before anything is
/// allocated for it).
pub const MAX_TABLES: usize = 1 << 16;

/// A count from 1 to `max` of `what`, for clap's parsers.
fn count_arg(s: &str, max: usize, what: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("expected a whole number of {what}, not `{s}`"))?;
    if n == 0 || n > max {
        return Err(format!("{n}: expected 1 to {max} {what}"));
    }
    Ok(n)
}

/// clap's parser of `--tables`: an integer from 1 to [`MAX_TABLES`].
pub fn tables_arg(s: &str) -> Result<usize, String> {
    count_arg(s, MAX_TABLES, "tables")
}

/// clap's parser of a request window (`--window`): 1 to
/// [`nmpsim_sim::runner::MAX_WINDOW`] requests in flight, far beyond what a
/// memory controller's queues hold.
pub fn window_arg(s: &str) -> Result<usize, String> {
    count_arg(s, nmpsim_sim::runner::MAX_WINDOW, "requests in flight")
}

/// Refuses a run whose `need` bytes (`what` they hold) exceed 80% of the
/// memory available, naming the flags that lower it (`lower`), instead of
/// leaving the out-of-memory killer to end it.
pub fn check_memory(need: u128, what: &str, lower: &str) -> anyhow::Result<()> {
    if let Some(avail) = available_memory_bytes() {
        if need > avail as u128 * 8 / 10 {
            anyhow::bail!(
                "{what} need {:.1} GB, more than the {:.1} GB a run may take (80% of the {:.1} GB of memory available); lower {lower}",
                need as f64 / 1e9,
                avail as f64 * 0.8 / 1e9,
                avail as f64 / 1e9
            );
        }
    }
    Ok(())
}

/// `MemAvailable` of `/proc/meminfo`, where there is one.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `n` and the noun, singular for one: `plural(1, "batch", "batches")`
/// is "1 batch".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    #[test]
    fn link_bandwidths_that_make_times_infinite_are_refused() {
        for (gbps, shown) in [
            (0.0, "--link-gbps 0:"),
            (-25.0, "--link-gbps -25:"),
            (1e-320, "--link-gbps 1e-320:"),
            (5e-7, "--link-gbps 5e-7:"),
            (f64::INFINITY, "--link-gbps inf:"),
            (f64::NAN, "--link-gbps NaN:"),
        ] {
            let e = super::check_link_gbps(gbps).unwrap_err().to_string();
            assert!(e.starts_with(shown) && e.contains("at least 1e-6"), "{e}");
        }
        for gbps in [1e-6, 0.5, 25.0, 1e6] {
            super::check_link_gbps(gbps).unwrap();
        }
    }

    #[test]
    fn one_is_singular() {
        assert_eq!(super::plural(1, "batch", "batches"), "1 batch");
        assert_eq!(super::plural(0, "batch", "batches"), "0 batches");
        assert_eq!(super::plural(3, "item", "items"), "3 items");
    }
}
