//! HBM (JESD235, the first generation) as data: the one HBM channel both
//! reference engines ship, so that Ramulator 1 can be set beside DRAMsim3
//! and the native engine on the HBM protocol (it has no HBM2).
//!
//! - **Source**: Ramulator 1's `HBM` standard at its one speed bin
//!   `HBM_1Gbps` with organisation `HBM_4Gb` (`HBM.h` and `HBM.cpp` of the
//!   `ramulator_wrapper` crate), and DRAMsim3's `HBM_4Gb_x128.ini`, which
//!   lists the same timings (DRAMsim3's copy of Ramulator's table). Where
//!   the two differ, or one is silent:
//!   - `tRFC` 130 and `tXS` 135 are Ramulator's (its tables by density);
//!     DRAMsim3's file leaves both blank.
//!   - `tRTP` is 7: Ramulator's `nRTP`, DRAMsim3's `tRTP_L` (DRAMsim3 reads
//!     a single `tRTP`, which nmpsim writes into the `.ini` it generates).
//!   - `tCKE` 5 and `tCKESR` 5 are Ramulator's `nPD` and `nCKESR`
//!     (power-down and self-refresh are not scheduled).
//!   - `tRTRS` 2, as for HBM2: there is one stack ID (rank) a channel, so
//!     only the read-to-write turnaround uses it, `CL + BL/2 + tRTRS - CWL`
//!     = 7 cycles, which is Ramulator's `nCL + nCCDS + 2 - nCWL` too.
//!   - **Power**: DRAMsim3's file (Ramulator has no currents), VDD 1.2 V.
//! - **Speed**: 1 Gb/s a pin (500 MHz clock, tCK 2 ns), 128 data bits,
//!   BL4: 64 B a burst in 2 cycles, 16 GB/s a channel.
//! - **Organisation**: 4 Gb a channel, 4 bank groups of 4 banks, 16384 rows
//!   of 2 KB (128 columns of 128 bits), one rank.
//! - **Rules**: HBM2's ([`super::hbm2::CONSTRAINTS`]): the protocol is the
//!   same, with separate row and column command buses. Ramulator 1's
//!   controller issues one command a cycle, so it uses one bus at a time:
//!   a departure of that engine, not of the standard.
//! - **Ramulator 1** takes eight channels for an HBM stack (it refuses any
//!   other count); nmpsim addresses only its channel 0 (one engine is one
//!   channel). Its command trace names an HBM bank by its index within the
//!   bank group (it adds the bank group for DDR4 and GDDR5 only), so its
//!   traces identify a bank exactly only for traffic in one bank group
//!   ([`crate::jedec::read_ramulator_traces`]).

use super::{Dramsim3Format, Standard, hbm2};
use crate::config::{DramConfig, Organisation, Power, Timing};
use crate::jedec::Command;

/// The speed bin's name, and the preset's.
pub const SPEED: &str = "HBM-1000";

/// HBM-1000's timings in cycles of its 2 ns clock (module docs).
const TIMING_1000: [(&str, u32); 23] = [
    ("CL", 7),
    ("CWL", 4),
    ("tRCDRD", 7),
    ("tRCDWR", 6),
    ("tRP", 7),
    ("tRAS", 17),
    ("tRC", 24),
    ("tRTP", 7),
    ("tWR", 8),
    ("tWTR_S", 2),
    ("tWTR_L", 4),
    ("tCCD_S", 2),
    ("tCCD_L", 3),
    ("tRRD_S", 4),
    ("tRRD_L", 5),
    ("tFAW", 20),
    ("tRFC", 130),
    ("tREFI", 1950),
    ("tRTRS", 2),
    ("tCKE", 5),
    ("tCKESR", 5),
    ("tXS", 135),
    ("tXP", 5),
];

/// One channel of a 4 Gb-a-channel stack (Ramulator's `HBM_4Gb`).
pub fn organisation() -> Organisation {
    Organisation {
        density_gbit: 4,
        device_width: 128,
        bankgroups: 4,
        banks_per_group: 4,
        rows: 1 << 14,
        columns: 128,
        bus_width: 128,
        burst_length: 4,
    }
}

fn timing() -> Timing {
    Timing::new(
        2.0,
        TIMING_1000
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect(),
    )
}

/// DRAMsim3's `HBM_4Gb_x128.ini` currents.
fn power() -> Power {
    Power {
        vdd_v: 1.2,
        idd0_ma: 48.0,
        idd2p_ma: 25.0,
        idd2n_ma: 34.0,
        idd3p_ma: 37.0,
        idd3n_ma: 43.0,
        idd4r_ma: 135.0,
        idd4w_ma: 123.0,
        idd5b_ma: 250.0,
        idd6_ma: 31.0,
    }
}

fn preset_names() -> Vec<String> {
    vec![SPEED.to_string()]
}

/// `HBM-1000` (upper case).
fn preset(up: &str) -> Option<DramConfig> {
    (up == SPEED).then(|| DramConfig {
        name: SPEED.to_string(),
        standard: HBM.name.to_string(),
        speed: SPEED.to_string(),
        ranks: 1,
        org: organisation(),
        timing: timing(),
        power: power(),
        // DRAMsim3's file maps rorabgbachco, as its HBM2 files do.
        mapping: hbm2::mapping(),
        transaction_queue: 32,
        command_queue: 8,
        constraints: Vec::new(),
    })
}

/// Ramulator's names for HBM-1000's speed bin and organisation.
const RAMULATOR_SPEED: &str = "HBM_1Gbps";
const RAMULATOR_ORG: &str = "HBM_4Gb";

fn ramulator_lines(c: &DramConfig) -> Result<String, String> {
    if c.speed != SPEED {
        return Err(format!(
            "Ramulator has no HBM speed `{}`; it has {SPEED} only",
            c.speed
        ));
    }
    if c.org != organisation() || c.ranks != 1 {
        return Err(format!(
            "Ramulator's HBM has one organisation, {RAMULATOR_ORG} with one rank (4 Gb, 4x4 banks, 16384 rows of 2 KB); {} differs",
            c.name
        ));
    }
    Ok(format!(
        "standard = HBM\nchannels = {RAMULATOR_CHANNELS}\nranks = 1\nspeed = {RAMULATOR_SPEED}\norg = {RAMULATOR_ORG}\naddr_mapping = RoBaRaCoCh\n"
    ))
}

/// Ramulator 1 builds an HBM stack of eight channels and no other.
pub const RAMULATOR_CHANNELS: u32 = 8;

fn ramulator_timing(c: &DramConfig) -> Option<Timing> {
    (c.speed == SPEED).then(timing)
}

fn ramulator_speed(c: &DramConfig) -> Option<&'static str> {
    (c.speed == SPEED).then_some(RAMULATOR_SPEED)
}

pub static HBM: Standard = Standard {
    name: "HBM",
    source: "JESD235 (HBM, 1 Gb/s a pin); Ramulator 1's HBM_4Gb at HBM_1Gbps, the timings DRAMsim3's HBM_4Gb_x128.ini repeats (tRFC and tXS Ramulator's), currents of that file",
    commands: &Command::ALL,
    timings: hbm2::TIMINGS,
    constraints: hbm2::CONSTRAINTS,
    refresh_gap: "9 * tREFI",
    derived: &[("tRC", "tRAS + tRP")],
    dramsim3: Dramsim3Format {
        protocol: "HBM",
        ini_columns_divisor: 2,
        timing_keys: hbm2::DRAMSIM3_TIMING_KEYS,
    },
    dual_command: true,
    ramulator_channels: RAMULATOR_CHANNELS,
    ramulator_trace_names_groups: false,
    preset_names,
    preset,
    ramulator_lines,
    ramulator_timing,
    ramulator_speed,
};
