//! `nmpsim train`'s flags checked and resolved into the run's configuration:
//! every refusal names the flag at fault.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result, bail};
use nmpsim_dlrm::strategy::{self, StrategyEntry};
use nmpsim_dlrm::{
    GpuPreset, Interaction, LrSchedule, NmpSetup, Preset, PresetOverrides, SimBatches, TrainConfig,
    parse_arch, preset,
};
use nmpsim_nmp::Placement;
use nmpsim_traces::BagSize;
use serde::Serialize;

use crate::cmd::checked_optimizer;

use super::options::{cdlrm_options, hot_options};
use super::{TrainArgs, dense_backend};

/// The resolved run.
#[derive(Serialize, Clone)]
pub(crate) struct Resolved {
    pub(crate) preset: Preset,
    pub(crate) modes: Vec<&'static StrategyEntry>,
    pub(crate) train: TrainConfig,
    pub(crate) gpu: GpuPreset,
    pub(crate) nmp: NmpSetup,
    pub(crate) data: String,
    pub(crate) test_data: String,
    pub(crate) max_lookups_per_table: u64,
    /// Iterations at the start of each mode left out of the summary.
    pub(crate) warmup_iters: u64,
    /// Test batches (`--test-batches`).
    pub(crate) test_batches: usize,
    /// Where the dense path runs: `cpu` or `cuda`.
    pub(crate) device: String,
    /// The GPU that runs the dense path with `cuda`.
    pub(crate) device_name: Option<String>,
    /// How fae, fae-nmp and scars choose and use their hot rows.
    pub(crate) hot: nmpsim_dlrm::hot::HotOptions,
    /// cdlrm's caches and look-ahead.
    pub(crate) cdlrm: nmpsim_dlrm::cdlrm::CdlrmOptions,
    /// eltt's TT rank, threshold and reuse.
    pub(crate) eltt: nmpsim_dlrm::eltt::ElttOptions,
    /// The modelled host (`--host`), its overrides applied.
    pub(crate) host: Option<nmpsim_dlrm::host::HostConfig>,
}

/// Refuses `--data` and `--test-data` naming one pipe or device (the same
/// file, however named): it can be read once, so one of them would see
/// nothing, or a part of the data the other lost.
fn same_stream_refused(data: &Path, test: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(d), Ok(t)) = (std::fs::metadata(data), std::fs::metadata(test)) else {
        return Ok(());
    };
    if !d.is_file() && d.dev() == t.dev() && d.ino() == t.ino() {
        bail!(
            "--data {} and --test-data {} are the same pipe or device, which can be read once; save the data to files (the test set may be a copy of the training file)",
            data.display(),
            test.display()
        );
    }
    Ok(())
}

/// `--device`: `cpu` or `cuda`.
fn parse_device(s: &str) -> Result<&'static str> {
    match s.to_ascii_lowercase().as_str() {
        "cpu" => Ok("cpu"),
        "cuda" | "gpu" => Ok("cuda"),
        _ => bail!("--device: unknown `{s}`; expected cpu or cuda"),
    }
}

pub(crate) fn resolve(a: &TrainArgs) -> Result<Resolved> {
    let modes = strategy::select(&a.mode)?;
    let interaction = match a.interaction.as_deref() {
        None => None,
        Some("dot") => Some(Interaction::Dot),
        Some("cat") => Some(Interaction::Cat),
        Some(o) => bail!("--interaction: unknown `{o}`; expected dot or cat"),
    };
    let o = PresetOverrides {
        rows: a.rows,
        rows_scale: a.rows_scale,
        dim: a.dim,
        lookups: a.lookups,
        bottom: a
            .arch_mlp_bot
            .as_deref()
            .map(|s| parse_arch(s, "--arch-mlp-bot"))
            .transpose()?,
        top: a
            .arch_mlp_top
            .as_deref()
            .map(|s| parse_arch(s, "--arch-mlp-top"))
            .transpose()?,
        interaction,
        weighted: a.weighted,
    };
    if a.rows == Some(0) {
        bail!("--rows 0: every embedding table needs at least 1 row");
    }
    // (Options the chosen data would ignore are refused, not dropped.)
    if a.rows_scale.is_some() && !nmpsim_dlrm::presets::is_kaggle(&a.model) {
        bail!(
            "--rows-scale scales the Criteo-Kaggle tables; model `{}` takes --rows",
            a.model
        );
    }
    if a.lookups.is_some() && a.data.is_some() {
        bail!("--lookups applies to synthetic data; Criteo data has one lookup per table");
    }
    if a.max_ind_range == Some(0) {
        bail!("--max-ind-range 0: every embedding table needs at least 1 row");
    }
    if !(a.lr.is_finite() && a.lr >= 0.0) {
        bail!(
            "--lr {}: expected a non-negative, finite learning rate",
            a.lr
        );
    }
    if a.warmup_iters >= a.iters && a.warmup_iters > 1 {
        bail!(
            "--warmup-iters {} leaves none of the {} iterations for the summary; expected fewer than --iters",
            a.warmup_iters,
            a.iters
        );
    }
    let mut p = preset(&a.model, &o)?;
    // The synthetic data's batch and seed are the run's (as `open_data`
    // uses them), so config.json records what ran.
    p.data.batch_size = a.batch;
    p.data.seed = a.seed;
    if a.weighted && a.data.is_some() {
        bail!("--weighted applies to synthetic data; Criteo TSV has no per-sample weights");
    }
    if a.data.is_some() {
        // Criteo's shape: 13 dense and 26 categorical features.
        use nmpsim_traces::criteo::{NUM_CATS, NUM_DENSE};
        let (tables, dense) = (p.config.table_rows.len(), p.config.bottom[0]);
        if tables != NUM_CATS || dense != NUM_DENSE {
            let hint = if tables != NUM_CATS {
                "use --model criteo-kaggle".to_string()
            } else {
                format!("give an --arch-mlp-bot starting at {NUM_DENSE}")
            };
            bail!(
                "--data: Criteo data has {NUM_DENSE} dense and {NUM_CATS} categorical features; model `{}` takes {dense} dense features and has {tables} embedding tables ({hint})",
                a.model
            );
        }
        if let Some(m) = a.max_ind_range {
            for (flag, given) in [
                ("--rows", a.rows.is_some()),
                ("--rows-scale", a.rows_scale.is_some()),
            ] {
                if given {
                    bail!(
                        "{flag} sizes the tables, and --max-ind-range {m} gives every table {m} rows; give one of them"
                    );
                }
            }
            // The reader hashes every categorical value into m rows.
            p.config.table_rows = vec![m; p.config.table_rows.len()];
            p.config.validate()?;
        }
    } else if a.max_ind_range.is_some() || a.test_data.is_some() {
        bail!("--max-ind-range and --test-data apply to Criteo data given with --data");
    }
    crate::cmd::at_least_one(&[("--batch", a.batch as u64), ("--iters", a.iters)])?;
    if a.test_freq > 0 && a.test_batches == 0 {
        bail!(
            "--test-freq {}: evaluates on the test set, which --test-batches 0 leaves empty; give --test-batches 1 or more, or drop --test-freq",
            a.test_freq
        );
    }
    // A data file that cannot be read stops the run before its directory
    // exists. A pipe is not opened here: that would wait for its writer and
    // lose what it wrote.
    for (flag, f) in [("--data", &a.data), ("--test-data", &a.test_data)] {
        if let Some(f) = f {
            let meta = std::fs::metadata(f).with_context(|| format!("{flag} {}", f.display()))?;
            if meta.is_dir() {
                bail!(
                    "{flag} {}: is a directory; expected a Criteo TSV file",
                    f.display()
                );
            }
            if meta.is_file() {
                File::open(f).with_context(|| format!("{flag} {}", f.display()))?;
            } else if modes.len() > 1 {
                bail!(
                    "{flag} {}: a pipe or device can be read once, and --mode all trains {} modes on the same data; save the data to a file",
                    f.display(),
                    modes.len()
                );
            } else if flag == "--data" && modes.iter().any(|m| m.uses_hot) {
                bail!(
                    "{flag} {}: a pipe or device can be read once, and --mode {} reads the data twice (once to profile its hot rows); save the data to a file",
                    f.display(),
                    a.mode
                );
            }
        }
    }
    if let (Some(d), Some(t)) = (&a.data, &a.test_data) {
        same_stream_refused(d, t)?;
    }
    let device = parse_device(&a.device)?;
    let lr = a.lr;
    let train = TrainConfig {
        model: p.config.clone(),
        batch: a.batch,
        iters: a.iters,
        seed: a.seed,
        lr,
        dense_optimizer: a.dense_optimizer,
        embedding_optimizer: checked_optimizer(a.optimizer, lr)?,
        schedule: LrSchedule {
            warmup_steps: a.lr_warmup_steps,
            decay_start_step: a.lr_decay_start,
            decay_steps: a.lr_decay_steps,
        },
        print_every: a.print_freq,
        test_every: a.test_freq,
    };
    train.validate()?;
    let nmp = NmpSetup {
        ranks: a.pool.ranks,
        preset: a.pool.dram.preset.clone(),
        dram_config: a.pool.dram.dram_config.clone(),
        timing: a.pool.dram.timing.clone(),
        org: a.pool.dram.org.clone(),
        mapping: a.pool.mapping.clone(),
        placement: a.pool.placement.parse::<Placement>()?,
        engine: a.pool.engine,
        link_gbps: a.pool.link_gbps,
        link_latency_us: 1.0,
        sim_batches: a.sim_batches,
        fixed_bandwidth_gbps: a.nmp_bandwidth,
        alu_lanes: a.pool.alu_lanes,
        alu_ghz: a.pool.alu_ghz,
    };
    // The same checks as `NmpSetup::validate`, naming the flags.
    // (`--ranks 0` is refused as the flag is read: `ranks_arg`.)
    crate::cmd::check_link_gbps(a.pool.link_gbps)?;
    match a.nmp_bandwidth {
        Some(b) => crate::cmd::check_gbps("--nmp-bandwidth", b)?,
        None if a.sim_batches == SimBatches::First(0) => bail!(
            "--sim-batches 0 without --nmp-bandwidth: the NMP modes take their bandwidth from the simulated batches, so simulate at least 1 or give a fixed bandwidth"
        ),
        _ => {}
    }
    nmp.validate()?;
    // The GPU is opened (and the dense kernels compiled) here, before the run
    // directory exists: without a usable GPU the run stops with the reason
    // and leaves nothing behind.
    let device_name = match device {
        "cuda" => dense_backend(device, &train)?.device_name(),
        _ => None,
    };
    let bag = if a.data.is_some() {
        1
    } else {
        p.data
            .tables
            .iter()
            .map(|t| match t.bag_size {
                BagSize::Fixed { size } => size,
                BagSize::Uniform { max, .. } => max,
            })
            .max()
            .unwrap_or(1) as u64
    };
    let hot = hot_options(a)?;
    let hot_extra = if modes.iter().any(|m| m.uses_hot) {
        nmpsim_dlrm::hot::extra_memory_bytes(&train, &hot, bag)
    } else {
        0
    };
    let (cdlrm, cdlrm_extra) = cdlrm_options(a, &train, &modes, bag)?;
    check_memory(
        &train,
        a.test_batches,
        bag,
        a.data.is_some() && a.max_ind_range.is_some(),
        hot_extra.saturating_add(cdlrm_extra),
    )?;
    let data = match &a.data {
        Some(f) => format!("criteo tsv {}", f.display()),
        None => format!("synthetic {} profile with a planted teacher", p.name),
    };
    let test_data = match (&a.data, &a.test_data) {
        (_, Some(f)) => format!("criteo tsv {}", f.display()),
        (Some(_), None) => format!("first {} batches of the data, held out", a.test_batches),
        (None, None) => format!("{} synthetic batches from a separate seed", a.test_batches),
    };
    Ok(Resolved {
        gpu: GpuPreset::named(&a.gpu)?,
        preset: p,
        modes,
        train,
        nmp,
        data,
        test_data,
        max_lookups_per_table: bag * a.batch as u64,
        warmup_iters: a.warmup_iters,
        test_batches: a.test_batches,
        device: device.to_string(),
        device_name,
        hot,
        cdlrm,
        eltt: nmpsim_dlrm::eltt::ElttOptions {
            rank: a.tt_rank,
            threshold: a.tt_threshold,
            reuse: !a.no_tt_reuse,
            reorder_batches: a.tt_reorder,
        },
        host: crate::cmd::host::resolve(
            a.host.as_deref(),
            a.host_cores,
            a.host_channels,
            a.host_ddr_mts,
        )?,
    })
}

/// Refuses, before anything is allocated, a model and test set the memory
/// cannot hold ([`TrainConfig::memory_bytes`]), with `hot_extra` bytes of the
/// strategies' own memory (hot rows, caches, look-ahead) when the run has any.
pub(crate) fn check_memory(
    t: &TrainConfig,
    test_batches: usize,
    bag: u64,
    hashed: bool,
    hot_extra: u128,
) -> Result<()> {
    crate::cmd::check_memory(
        t.memory_bytes(test_batches, bag).saturating_add(hot_extra),
        if hot_extra > 0 {
            "the model (tables, optimizer state, MLPs), one step's buffers, the test set and the strategies' own (fae's and scars's hot rows, profile and look-ahead; cdlrm's caches and look-ahead)"
        } else {
            "the model (tables, optimizer state, MLPs), one step's buffers and the test set"
        },
        // (With --max-ind-range the tables are its size: --rows is refused then.)
        if hashed {
            "--max-ind-range, --dim, --arch-mlp-bot / --arch-mlp-top, --batch or --test-batches"
        } else {
            "--rows (--rows-scale for Criteo-Kaggle), --dim, --arch-mlp-bot / --arch-mlp-top, --batch or --test-batches"
        },
    )
}
