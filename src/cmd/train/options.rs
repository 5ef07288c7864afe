//! The strategies' own options from `nmpsim train`'s flags: FAE's and
//! SCARS's hot rows, cDLRM's caches; each refusal names its flag.

use anyhow::{Result, bail};
use nmpsim_dlrm::strategy::StrategyEntry;
use nmpsim_dlrm::{GpuPreset, TrainConfig};

use super::TrainArgs;

/// The hot strategies' options from their flags, each refusal naming its flag.
pub(super) fn hot_options(a: &TrainArgs) -> Result<nmpsim_dlrm::hot::HotOptions> {
    use nmpsim_dlrm::hot::{HotOptions, Schedule};
    let schedule = |flag: &str, kind: &str, rate: f64, patience: u32| -> Result<Schedule> {
        let kind = Schedule::parse_kind(kind).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
        let rate_flag = flag.replace("-schedule", "-rate");
        if !(rate.is_finite() && rate > 0.0 && rate <= 100.0) {
            bail!("{rate_flag} {rate}: expected a percentage in (0, 100], e.g. 50");
        }
        if patience == 0 {
            bail!("--fae-patience 0: expected at least 1 schedule");
        }
        let s = Schedule {
            kind,
            rate,
            patience,
            ..Schedule::fae()
        };
        s.validate(flag)?;
        Ok(s)
    };
    let mut sampling = nmpsim_traces::hot::Sampling::fae(a.seed ^ nmpsim_dlrm::hot::SAMPLE_SEED);
    sampling.rate = a.hot_sample_rate;
    sampling.min_samples = a.hot_min_samples;
    if !(a.hot_sample_rate > 0.0 && a.hot_sample_rate <= 1.0) {
        bail!(
            "--hot-sample-rate {}: expected a share of the samples in (0, 1], e.g. 0.05",
            a.hot_sample_rate
        );
    }
    if a.hot_budget == 0 {
        bail!("--hot-budget 0: expected a size such as 256MiB");
    }
    let cache_bytes = match a.cache_mb {
        None => None,
        Some(m) if m.is_finite() && m > 0.0 => Some((m * (1u64 << 20) as f64) as u64),
        Some(m) => bail!("--cache-mb {m}: expected a positive size in MiB"),
    };
    Ok(HotOptions {
        budget_bytes: a.hot_budget,
        sampling,
        schedule: schedule(
            "--fae-schedule",
            &a.fae_schedule,
            a.fae_rate,
            a.fae_patience,
        )?,
        cache_bytes,
        device_bytes: a.device_memory,
        scars_schedule: schedule("--scars-schedule", &a.scars_schedule, a.scars_rate, 4)?,
        profile_samples: a.hot_profile_samples,
    })
}

/// cdlrm's options, checked against the GPU preset's memory when a mode
/// uses them, and the host bytes its caches and look-ahead take (0 when
/// no mode does).
pub(super) fn cdlrm_options(
    a: &TrainArgs,
    train: &TrainConfig,
    modes: &[&'static StrategyEntry],
    bag: u64,
) -> Result<(nmpsim_dlrm::cdlrm::CdlrmOptions, u128)> {
    use nmpsim_dlrm::cdlrm;
    let options = cdlrm::CdlrmOptions {
        sets: a.cache_sets,
        ways: a.ways,
        lookahead: a.lookahead,
        consistency: a.consistency,
        seed: a.seed,
    };
    if !modes.iter().any(|m| m.name.starts_with("cdlrm")) {
        return Ok((options, 0));
    }
    cdlrm::check_device_memory(train, &options, &GpuPreset::named(&a.gpu)?)?;
    Ok((options, cdlrm::extra_memory_bytes(train, &options, bag)))
}
