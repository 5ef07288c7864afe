//! HBM2 (JESD235A) as data: in legacy mode a channel of 128 data bits,
//! bursts of 4 (64 B a burst, as every nmpsim request), 4 bank groups of 4
//! banks; in pseudo-channel mode a pseudo-channel of 64 bits (32 B a
//! burst).
//!
//! - **Speed bin**: HBM2-2000, 2 Gb/s a pin (1 GHz clock, tCK 1 ns), 32 GB/s
//!   a channel, 256 GB/s a stack of 8 channels. The timings are those of
//!   DRAMsim3's `HBM2_8Gb_x128.ini` (the configuration the reference engine
//!   ships for JESD235A's HBM2 at 2 Gb/s), with two readings of that file
//!   stated: DRAMsim3 reads one `tRTP` (which the file leaves out, so
//!   DRAMsim3 ran it at its default of 5) where the file gives `tRTP_L` 6
//!   and `tRTP_S` 4, and nmpsim takes `tRTP` = `tRTP_L` (a read and a
//!   precharge of the same bank are in one bank group); the file's `tCKSRE`
//!   10, which DRAMsim3 does not read, is `tCKESR` here. Both are written
//!   into the `.ini` nmpsim generates, so DRAMsim3 runs what nmpsim says.
//! - **Organisation**: 8 Gb a channel (an 8 GB stack of 8 channels): 32768
//!   rows of 2 KB (128 columns of 128 bits; DRAMsim3's file counts 64,
//!   which it doubles for HBM's 2n prefetch), one rank (stack ID) a
//!   channel.
//! - **Power**: the currents of the same file (its IDD figures), VDD 1.2 V.
//! - **Address mapping**: the same file's, row : rank : bank group : bank :
//!   column ([`mapping`]).
//! - **Constraints**: DDR4's rules ([`super::ddr4::SHARED`]) with HBM2's split activation delay
//!   (`tRCDRD` to a read, `tRCDWR` to a write), one row each
//!   ([`CONSTRAINTS`]).
//!
//! - **Command buses**: rows and columns have buses of their own, so a
//!   controller may issue a row command and a column command in one cycle
//!   ([`Standard::dual_command`]); the checker's `row bus` and `column bus`
//!   rows keep two of one kind a cycle apart.
//!
//! - **Pseudo-channel mode** (preset `HBM2-2000-PC`, one pseudo-channel):
//!   JESD235A splits a channel into two pseudo-channels of 64 data bits,
//!   each with the channel's 16 banks and half its page (1 KB: 128 columns
//!   of 64 bits), BL4, so 32 B a burst and 16 GB/s a pseudo-channel; the
//!   array timings are counted per pseudo-channel (JESD235's table of
//!   timings counted individually per pseudo-channel; Ramulator 2's HBM2
//!   keeps tRRD, tFAW, tCCD and the bus turnarounds at its pseudo-channel
//!   level), so they are the legacy channel's. A 64 B request is two
//!   bursts, split by the runner ([`crate::DramConfig::burst_bytes`]).
//!   One engine is one pseudo-channel, as DRAMsim3 models pseudo-channels
//!   (a channel of a 64-bit bus; its `request_size_bytes` is then 32).
//!   Departure, shared with DRAMsim3: the two pseudo-channels of a channel
//!   share its row and column command buses in JESD235, and here each has
//!   its own. The currents are the channel's, halved (each pseudo-channel
//!   drives half the channel's data pins and opens half its page); no
//!   datasheet at hand gives them per pseudo-channel.
//!
//! Not modelled yet: per-bank refresh (REFSB).

use super::{ConstraintRow, Dramsim3Format, Level, Standard, TimingParam, row};
use crate::config::{AddressMapping, DramConfig, Organisation, Power, Timing};
use crate::jedec::Command;

use Level::{Bank, Channel};

/// HBM2's timing parameters, in the order the configuration lists them.
pub const TIMINGS: &[TimingParam] = &[
    p("CL", "READ to first data (read latency)"),
    p("CWL", "WRITE to first data (write latency)"),
    p("tRCDRD", "ACT to READ, same bank"),
    p("tRCDWR", "ACT to WRITE, same bank"),
    p("tRP", "PRE to ACT, same bank"),
    p("tRAS", "ACT to PRE, same bank"),
    p("tRC", "ACT to ACT, same bank"),
    p("tRTP", "READ to PRE, same bank"),
    p(
        "tWR",
        "end of write data to PRE, same bank (write recovery)",
    ),
    p("tWTR_S", "end of write data to READ, another bank group"),
    p("tWTR_L", "end of write data to READ, same bank group"),
    p(
        "tCCD_S",
        "column command to column command, another bank group",
    ),
    p(
        "tCCD_L",
        "column command to column command, same bank group",
    ),
    p("tRRD_S", "ACT to ACT, another bank group"),
    p("tRRD_L", "ACT to ACT, same bank group"),
    p("tFAW", "window of at most four ACTs per channel"),
    p("tRFC", "REF to any command of the channel"),
    p("tREFI", "average refresh interval"),
    p("tRTRS", "data-bus turnaround (read to write; stack IDs)"),
    p(
        "tCKE",
        "CKE minimum pulse width (power-down; not scheduled)",
    ),
    p("tCKESR", "CKE low in self-refresh (not scheduled)"),
    p("tXS", "self-refresh exit to a command (not scheduled)"),
    p("tXP", "power-down exit to a command (not scheduled)"),
];

const fn p(name: &'static str, meaning: &'static str) -> TimingParam {
    TimingParam { name, meaning }
}

const ROW: &str = "ACT PRE PREA REF";
const COLUMN: &str = "RD RDA WR WRA";

/// HBM2's command-to-command rules (legacy mode): the activation delay
/// split by the column command that follows, DDR4's other rules
/// ([`super::ddr4::SHARED`]), and the two command buses.
pub const CONSTRAINTS: &[&[ConstraintRow]] = &[
    &[
        row("tRCDRD", Bank, "ACT", "RD RDA", "tRCDRD"),
        row("tRCDWR", Bank, "ACT", "WR WRA", "tRCDWR"),
    ],
    super::ddr4::SHARED,
    // One row command and one column command a cycle, each on its bus.
    &[
        row("row bus", Channel, ROW, ROW, "1"),
        row("column bus", Channel, COLUMN, COLUMN, "1"),
    ],
];

/// The speed bin's name, and the legacy-mode preset's.
pub const SPEED: &str = "HBM2-2000";
/// The pseudo-channel preset's name.
pub const PSEUDO_CHANNEL: &str = "HBM2-2000-PC";

/// HBM2-2000's timings in cycles of its 1 ns clock (module docs).
const TIMING_2000: [(&str, u32); 23] = [
    ("CL", 14),
    ("CWL", 4),
    ("tRCDRD", 14),
    ("tRCDWR", 14),
    ("tRP", 14),
    ("tRAS", 34),
    ("tRC", 48),
    ("tRTP", 6),
    ("tWR", 16),
    ("tWTR_S", 6),
    ("tWTR_L", 8),
    ("tCCD_S", 1),
    ("tCCD_L", 2),
    ("tRRD_S", 4),
    ("tRRD_L", 6),
    ("tFAW", 30),
    ("tRFC", 260),
    ("tREFI", 3900),
    ("tRTRS", 2),
    ("tCKE", 8),
    ("tCKESR", 10),
    ("tXS", 268),
    ("tXP", 8),
];

/// One legacy channel of an 8 Gb-a-channel stack.
pub fn organisation() -> Organisation {
    Organisation {
        density_gbit: 8,
        device_width: 128,
        bankgroups: 4,
        banks_per_group: 4,
        rows: 1 << 15,
        columns: 128,
        bus_width: 128,
        burst_length: 4,
    }
}

/// One pseudo-channel of the same stack: half the channel's data bus and
/// page, all its banks and rows (module docs).
pub fn pseudo_channel_organisation() -> Organisation {
    Organisation {
        density_gbit: 4,
        device_width: 64,
        columns: 128,
        bus_width: 64,
        ..organisation()
    }
}

fn timing() -> Timing {
    Timing::new(
        1.0,
        TIMING_2000
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect(),
    )
}

fn power() -> Power {
    Power {
        vdd_v: 1.2,
        idd0_ma: 65.0,
        idd2p_ma: 28.0,
        idd2n_ma: 40.0,
        idd3p_ma: 40.0,
        idd3n_ma: 55.0,
        idd4r_ma: 390.0,
        idd4w_ma: 500.0,
        idd5b_ma: 250.0,
        idd6_ma: 31.0,
    }
}

/// Row : rank : bank group : bank : column, DRAMsim3's HBM2 mapping
/// (`rorabgbachco` in its `HBM2_8Gb_x128.ini`, less the channel field: an
/// engine is one channel or pseudo-channel). The bursts of a row are
/// consecutive, so an embedding row of several bursts, or a 64 B request's
/// two 32 B bursts on a pseudo-channel, costs one activation; HBM2's tCCD_L
/// (2 cycles) equals a burst's BL/2, so a stream loses nothing by staying in
/// a bank group, unlike DDR4's ([`AddressMapping::default_ddr4`]).
pub fn mapping() -> AddressMapping {
    use crate::config::Field::{Bank, Bankgroup, Column, Rank, Row};
    AddressMapping {
        msb_to_lsb: vec![Row, Rank, Bankgroup, Bank, Column],
    }
}

/// The channel's currents, halved: a pseudo-channel's (module docs).
fn pseudo_channel_power() -> Power {
    let p = power();
    Power {
        vdd_v: p.vdd_v,
        idd0_ma: p.idd0_ma / 2.0,
        idd2p_ma: p.idd2p_ma / 2.0,
        idd2n_ma: p.idd2n_ma / 2.0,
        idd3p_ma: p.idd3p_ma / 2.0,
        idd3n_ma: p.idd3n_ma / 2.0,
        idd4r_ma: p.idd4r_ma / 2.0,
        idd4w_ma: p.idd4w_ma / 2.0,
        idd5b_ma: p.idd5b_ma / 2.0,
        idd6_ma: p.idd6_ma / 2.0,
    }
}

fn preset_names() -> Vec<String> {
    vec![SPEED.to_string(), PSEUDO_CHANNEL.to_string()]
}

/// `HBM2-2000`: one legacy channel; `HBM2-2000-PC`: one pseudo-channel
/// (upper case).
fn preset(up: &str) -> Option<DramConfig> {
    let (name, org, power) = match up {
        SPEED => (SPEED, organisation(), power()),
        PSEUDO_CHANNEL => (
            PSEUDO_CHANNEL,
            pseudo_channel_organisation(),
            pseudo_channel_power(),
        ),
        _ => return None,
    };
    Some(DramConfig {
        name: name.to_string(),
        standard: HBM2.name.to_string(),
        speed: SPEED.to_string(),
        ranks: 1,
        org,
        timing: timing(),
        power,
        mapping: mapping(),
        transaction_queue: 32,
        command_queue: 8,
        constraints: Vec::new(),
    })
}

/// The `[timing]` keys of DRAMsim3's `.ini` for HBM and HBM2.
pub const DRAMSIM3_TIMING_KEYS: &[&str] = &[
    "tCK",
    "AL = 0",
    "CL",
    "CWL",
    "tRCDRD",
    "tRCDWR",
    "tRP",
    "tRAS",
    "tRFC",
    "tREFI",
    "tRPRE = 1",
    "tWPRE = 1",
    "tRRD_S",
    "tRRD_L",
    "tWTR_S",
    "tWTR_L",
    "tFAW",
    "tWR",
    "tRTP",
    "tCCD_S",
    "tCCD_L",
    "tCKE",
    "tCKESR",
    "tXS",
    "tXP",
    "tRTRS",
];

fn ramulator_lines(_: &DramConfig) -> Result<String, String> {
    Err(
        "Ramulator 1 has no HBM2: its `HBM` standard is HBM1 (1 Gb/s a pin, 500 MHz, its own timing table); run HBM2 on dramsim3 or native, or preset HBM-1000 (Ramulator's HBM) on all three engines"
            .into(),
    )
}

fn ramulator_timing(_: &DramConfig) -> Option<Timing> {
    None
}

fn ramulator_speed(_: &DramConfig) -> Option<&'static str> {
    None
}

pub static HBM2: Standard = Standard {
    name: "HBM2",
    source: "JESD235A (HBM2, legacy and pseudo-channel mode, 2 Gb/s a pin); timings and currents of DRAMsim3's HBM2_8Gb_x128.ini (tRTP = its tRTP_L, tCKESR = its tCKSRE)",
    commands: &Command::ALL,
    timings: TIMINGS,
    constraints: CONSTRAINTS,
    refresh_gap: "9 * tREFI",
    // DRAMsim3 reads no tRC and derives it, as for DDR4.
    derived: &[("tRC", "tRAS + tRP")],
    dramsim3: Dramsim3Format {
        protocol: "HBM2",
        // DRAMsim3 counts an HBM column as two (its 2n prefetch).
        ini_columns_divisor: 2,
        timing_keys: DRAMSIM3_TIMING_KEYS,
    },
    // Separate row and column command buses (JESD235A; DRAMsim3's
    // `hbm_dual_cmd`, which the generated `.ini` states).
    dual_command: true,
    ramulator_channels: 1,
    ramulator_trace_names_groups: false,
    preset_names,
    preset,
    ramulator_lines,
    ramulator_timing,
    ramulator_speed,
};
