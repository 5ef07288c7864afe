//! One module per top-level subcommand. Each exposes a clap `Subcommand` enum (or
//! `Args` struct) and a `run` function returning the process exit code.

pub mod demo;
pub mod dram;
pub mod gpu;
pub mod host;
pub mod kernels;
mod memory;
pub mod nmp;
pub mod plot;
pub mod reproduce;
pub mod scars;
pub mod sweep;
pub mod trace;
pub mod train;
pub mod tt;

pub use memory::{check_memory, memory_available};

/// Refuses a `--link-gbps` that is not a positive, finite bandwidth of at
/// least [`nmpsim_nmp::MIN_RATE`] GB/s: it divides the link's bytes, and a
/// slower link (a subnormal such as 1e-320) makes the times infinite.
pub fn check_link_gbps(gbps: f64) -> anyhow::Result<()> {
    check_gbps("--link-gbps", gbps)
}

/// A bandwidth flag in GB/s: finite and at least 1 kB/s (a smaller one gives
/// times past any report's digits, or infinite).
pub fn check_gbps(flag: &str, gbps: f64) -> anyhow::Result<()> {
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
            "{flag} {shown}: expected a positive, finite bandwidth in GB/s, at least {min:e} (1 kB/s)"
        )
    }
}

/// A `--preset` flag: a DDR4 preset name (checked when the flags are read,
/// so a sweep's dry run finds a misspelt one).
pub fn preset_arg(s: &str) -> Result<String, String> {
    nmpsim_sim::DramConfig::preset(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// The DRAM flags shared by `dram`, `nmp run` and `train`: a preset, a
/// configuration file and per-field overrides, applied in that order
/// (`nmpsim_sim::DramConfig::resolve`). Each is a sweep key: `timing =
/// ["tRCD=22", "tRCD=24"]` sweeps one timing, `"tRCD=24,tRP=24"` sets two.
#[derive(clap::Args, Debug, Clone, serde::Serialize)]
pub struct DramArgs {
    /// DRAM preset (see `nmpsim dram presets`).
    #[arg(long, default_value = "DDR4-3200-x8", value_name = "PRESET", value_parser = preset_arg)]
    pub preset: String,
    /// DRAM configuration file (TOML; docs/dram.md): `preset = ...` plus
    /// overrides, or `standard = "DDR4"` with every field. A file without a
    /// preset starts from --preset.
    #[arg(long, value_name = "FILE")]
    pub dram_config: Option<std::path::PathBuf>,
    /// Override timing parameters, in cycles (tCK in ns): NAME=VALUE, several
    /// comma-separated or the flag repeated; e.g. --timing tRCD=24,tRP=24.
    #[arg(long = "timing", value_name = "NAME=VALUE")]
    pub timing: Vec<String>,
    /// Override organisation fields: rows, columns, bankgroups,
    /// banks_per_group, density_gbit, device_width, bus_width, burst_length;
    /// e.g. --org rows=32768.
    #[arg(long = "org", value_name = "FIELD=VALUE")]
    pub org: Vec<String>,
}

impl DramArgs {
    /// The configuration the flags give.
    pub fn config(&self) -> Result<nmpsim_sim::DramConfig, nmpsim_sim::SimError> {
        nmpsim_sim::DramConfig::resolve(
            &self.preset,
            self.dram_config.as_deref(),
            &self.timing,
            &self.org,
        )
    }
}

/// An f32 flag: a finite number past f32's range (`1e300`) is refused as
/// such, rather than read as infinity and reported as `inf`, and so is a
/// non-zero one that would round to 0 (`1e-50`). NaN, infinity and negative
/// values pass through, for the command's own checks.
pub fn f32_arg(s: &str) -> Result<f32, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if v.is_finite() && v.abs() > f64::from(f32::MAX) {
        return Err(format!(
            "{s} is beyond the range of a 32-bit float (at most {:e})",
            f32::MAX
        ));
    }
    if v != 0.0 && v as f32 == 0.0 {
        return Err(format!(
            "{s} is below the smallest 32-bit float ({:e}) and would be read as 0",
            f32::from_bits(1)
        ));
    }
    Ok(v as f32)
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

/// Which of `flags` the command line gives (as `--flag VALUE` or
/// `--flag=VALUE`): for options with defaults, whose values cannot tell given
/// from default.
pub fn flags_given<'a>(flags: &[&'a str]) -> Vec<&'a str> {
    flags
        .iter()
        .filter(|f| {
            // (args_os: an argument that is not UTF-8, such as a file name,
            // would make `args` panic.)
            std::env::args_os().any(|x| {
                let x = x.to_string_lossy();
                x == **f || x.strip_prefix(**f).is_some_and(|r| r.starts_with('='))
            })
        })
        .copied()
        .collect()
}

/// Refuses the counts among `counts` (option name, value) that are 0, naming
/// each of them.
pub fn at_least_one(counts: &[(&str, u64)]) -> anyhow::Result<()> {
    let zero: Vec<&str> = counts
        .iter()
        .filter(|(_, v)| *v == 0)
        .map(|(name, _)| *name)
        .collect();
    match zero[..] {
        [] => Ok(()),
        [one] => anyhow::bail!("{one} 0: expected at least 1"),
        _ => anyhow::bail!("{} are 0: each must be at least 1", zero.join(", ")),
    }
}

/// clap's parser of a count that must be at least 1 (`--batch`, `--bag`,
/// `--rows`, `--dim`).
pub fn positive_arg<T: std::str::FromStr + Default + PartialEq>(s: &str) -> Result<T, String> {
    let n: T = s
        .parse()
        .map_err(|_| format!("expected a whole number, not `{s}`"))?;
    if n == T::default() {
        return Err("expected at least 1".into());
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

/// `n` and the noun, singular for one: `plural(1, "batch", "batches")`
/// is "1 batch".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `--out`, `--json` and `--quiet` of a command that writes a run directory
/// and prints its results (`demo`, `nmp run`, `dram`, `dram bench`).
#[derive(clap::Args, Debug, Clone)]
pub struct RunOutputArgs {
    /// Run directory [default: runs/<command>-<time>-<pid>, e.g. runs/dram-bench-20261201-101500-4242].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    /// Print the results as JSON on stdout (no table).
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The NMP pool's flags, shared by `nmp run` and `train`: the ranks, their
/// preset and mapping, the row placement, the DRAM engine and the link.
/// `train` gives some other defaults (`#[command(mut_arg(...))]` on its
/// arguments): it simulates every iteration, so the native engine, and
/// Tensor Casting's placement for training.
#[derive(clap::Args, Debug, Clone, serde::Serialize)]
pub struct PoolArgs {
    /// Number of NMP ranks (1 to 65536).
    #[arg(long, default_value_t = 32, value_parser = ranks_arg)]
    pub ranks: u32,
    /// The DRAM of each rank: --preset (default DDR4-3200-x8, a single-rank
    /// one), --dram-config, --timing, --org.
    #[command(flatten)]
    pub dram: DramArgs,
    /// vector-sliced, row-interleaved, table-per-rank, or all.
    #[arg(long, default_value = "vector-sliced")]
    pub placement: String,
    /// Address mapping of each rank, most significant field first
    /// (default ro-ra-ba-co-bg; ro-ra-ba-bg-co keeps a row's slices in one DRAM row).
    #[arg(long, value_name = "FIELDS")]
    pub mapping: Option<String>,
    /// DRAM engine: dramsim3, ramulator or native (Rust; on one rank per channel it gives
    /// dramsim3's results but for the writes dramsim3 leaves unissued, over 20x faster).
    #[arg(long, default_value = "dramsim3", value_parser = engine_arg)]
    pub engine: nmpsim_sim::EngineKind,
    /// Bandwidth of the link between the host and the pool, GB/s.
    #[arg(long, default_value_t = 25.0)]
    pub link_gbps: f64,
    /// f32 lanes of each NMP core's vector ALU (one add or multiply-add per lane and cycle).
    #[arg(long, default_value_t = 16, value_parser = crate::cmd::positive_arg::<u32>)]
    pub alu_lanes: u32,
    /// Clock of each NMP core's vector ALU, GHz.
    #[arg(long, default_value_t = 1.6)]
    pub alu_ghz: f64,
}

/// `--ranks`: 1 to 65536 NMP ranks.
pub fn ranks_arg(s: &str) -> Result<u32, String> {
    let n: u64 = s
        .parse()
        .map_err(|_| format!("--ranks {s}: expected a whole number of ranks"))?;
    match n {
        0 => Err("--ranks 0: the NMP pool needs at least 1 rank".into()),
        1..=65536 => Ok(n as u32),
        _ => Err(format!("--ranks {n}: at most 65536 ranks")),
    }
}

/// `--json`, `--out` and `--quiet` of a command that prints its results and
/// writes a run directory only when asked (`trace stats`, `trace hot`). A
/// command names the files of its run directory in `--out`'s help with
/// `#[command(mut_arg("out", |a| a.help(...)))]`.
#[derive(clap::Args, Debug, Clone)]
pub struct PrintArgs {
    /// Print results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write a run directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

impl PrintArgs {
    /// Whether to leave progress bars out: asked to, or printing JSON.
    pub fn no_progress(&self) -> bool {
        self.quiet || self.json
    }
}

/// A size in bytes: a number with an optional unit, decimal (kB, MB, GB, TB)
/// or binary (KiB, MiB, GiB, TiB), any case, a space allowed before it:
/// `256MiB`, `1.5 GB`, `4096`.
pub fn size_arg(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "`{s}`: unknown unit `{other}`; expected a size such as 256MiB, 1GB or 4096 (bytes)"
            ));
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}`: expected a size such as 256MiB, 1GB or 4096 (bytes)"))?;
    let bytes = v * scale;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(format!("`{s}`: too large"));
    }
    Ok(bytes.round() as u64)
}

/// A DRAM engine flag (`--engine`) naming one engine: dramsim3, ramulator or
/// native.
pub fn engine_arg(s: &str) -> Result<nmpsim_sim::EngineKind, String> {
    s.parse().map_err(|e: nmpsim_sim::SimError| e.to_string())
}

/// `--optimizer` and `--lr` of a scatter run on its own (`demo`, `nmp run`).
#[derive(clap::Args, Debug, Clone)]
pub struct ScatterOptimizerArgs {
    /// Optimizer of the scatter: sgd, adagrad, row-wise-adagrad, rms-prop.
    #[arg(long, default_value = "sgd")]
    pub optimizer: nmpsim_kernels::OptimizerKind,
    /// Learning rate of the scatter's optimizer.
    #[arg(long, default_value_t = 0.01, value_parser = f32_arg)]
    pub lr: f32,
}

impl ScatterOptimizerArgs {
    /// The optimizer the flags name, checked.
    pub fn optimizer(&self) -> anyhow::Result<nmpsim_kernels::Optimizer> {
        checked_optimizer(self.optimizer, self.lr)
    }
}

/// The optimizer of kind `kind` with learning rate `lr`, its
/// hyper-parameters checked (so that a bad `--lr` fails before a run
/// directory exists).
pub fn checked_optimizer(
    kind: nmpsim_kernels::OptimizerKind,
    lr: f32,
) -> anyhow::Result<nmpsim_kernels::Optimizer> {
    use anyhow::{Context, bail};
    // (As `train` does: a negative rate climbs the loss.)
    if lr < 0.0 {
        bail!("--lr {lr}: expected a non-negative learning rate");
    }
    let o = kind.with_lr(lr);
    o.validate().with_context(|| format!("--lr {lr}"))?;
    Ok(o)
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
    fn sizes_take_decimal_and_binary_units() {
        use super::size_arg;
        assert_eq!(size_arg("256MiB"), Ok(256 << 20));
        assert_eq!(size_arg("256 MB"), Ok(256_000_000));
        assert_eq!(size_arg("1.5GB"), Ok(1_500_000_000));
        assert_eq!(size_arg("4096"), Ok(4096));
        assert_eq!(size_arg("2gib"), Ok(2 << 30));
        assert!(
            size_arg("12 parsecs")
                .unwrap_err()
                .contains("unknown unit `parsecs`")
        );
        assert!(size_arg("MB").is_err() && size_arg("").is_err());
    }

    #[test]
    fn one_is_singular() {
        assert_eq!(super::plural(1, "batch", "batches"), "1 batch");
        assert_eq!(super::plural(0, "batch", "batches"), "0 batches");
        assert_eq!(super::plural(3, "item", "items"), "3 items");
    }
}
