//! DDR4 (JESD79-4) as data.
//!
//! - **Speed bins**: DDR4-2400R (16-16-16) and DDR4-3200AA (22-22-22), in
//!   clock cycles, from JESD79-4's speed-bin tables; the page-size-dependent
//!   tRRD_S, tRRD_L and tFAW for x4, x8 and x16 devices (512 B, 1 KB, 2 KB
//!   pages).
//! - **Organisations**: 8 Gb devices, x4 (4 bank groups, 128K rows), x8 (4
//!   bank groups, 64K rows) and x16 (2 bank groups, 64K rows), 4 banks per
//!   group, 1024 columns, a 64-bit rank, BL8; one, two or four ranks.
//! - **Power**: Micron 8 Gb DDR4 datasheet currents (the ones DRAMsim3
//!   ships), per speed and width, VDD 1.2 V.
//! - **Constraints**: the JEDEC command-to-command rules, one row each
//!   ([`CONSTRAINTS`]).

use super::{ConstraintRow, Dramsim3Format, Level, Standard, TimingParam, row};
use crate::config::{AddressMapping, DramConfig, Organisation, Power, Timing};
use crate::jedec::Command;

use Level::{Bank, BankGroup, Channel, Rank};

/// DDR4's timing parameters, in the order the configuration lists them.
pub const TIMINGS: &[TimingParam] = &[
    p("CL", "READ to first data (CAS latency)"),
    p("CWL", "WRITE to first data (CAS write latency)"),
    p("tRCD", "ACT to READ or WRITE, same bank"),
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
    p("tFAW", "window of at most four ACTs per rank"),
    p("tRFC", "REF to any command of the rank"),
    p("tREFI", "average refresh interval"),
    p("tRTRS", "rank-to-rank switch on the data bus"),
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

const ALL: &str = "ACT PRE PREA RD WR RDA WRA REF";

/// DDR4's command-to-command rules: its activation delay, then the rules
/// it shares with HBM2 ([`SHARED`]).
pub const CONSTRAINTS: &[&[ConstraintRow]] =
    &[&[row("tRCD", Bank, "ACT", "RD RDA WR WRA", "tRCD")], SHARED];

/// The rules after the activation delay, DDR4's and HBM2's alike. `RD`/`WR`
/// rows name the auto-precharge forms too; PREA and an auto-precharge count
/// as a PRE of every bank they close; a PRE of a closed bank does nothing
/// and binds nothing.
pub const SHARED: &[ConstraintRow] = &[
    // Activation.
    row("tRAS", Bank, "ACT", "PRE", "tRAS"),
    row("tRC", Bank, "ACT", "ACT", "tRC"),
    row("tRP", Bank, "PRE", "ACT", "tRP"),
    row("tRRD_L", BankGroup, "ACT", "ACT", "tRRD_L"),
    row("tRRD_S", Rank, "ACT", "ACT", "tRRD_S"),
    ConstraintRow {
        window: 4,
        ..row("tFAW", Rank, "ACT", "ACT", "tFAW")
    },
    // Column commands.
    row("tCCD_L", BankGroup, "RD RDA WR WRA", "RD RDA", "tCCD_L"),
    row("tCCD_S", Rank, "RD RDA WR WRA", "RD RDA", "tCCD_S"),
    row("tCCD_L", BankGroup, "WR WRA", "WR WRA", "tCCD_L"),
    row("tCCD_S", Rank, "WR WRA", "WR WRA", "tCCD_S"),
    row("BL/2", Channel, "RD RDA", "RD RDA", "BL/2"),
    row("BL/2", Channel, "WR WRA", "WR WRA", "BL/2"),
    row(
        "tWTR_L",
        BankGroup,
        "WR WRA",
        "RD RDA",
        "CWL + BL/2 + tWTR_L",
    ),
    row("tWTR_S", Rank, "WR WRA", "RD RDA", "CWL + BL/2 + tWTR_S"),
    // The data bus turns round between a read burst and a write burst
    // (DRAMsim3's read-to-write delay holds tRTRS there).
    row("RD→WR", Rank, "RD RDA", "WR WRA", "CL + BL/2 + tRTRS - CWL"),
    // Precharge.
    row("tRTP", Bank, "RD RDA", "PRE", "tRTP"),
    row("tWR", Bank, "WR WRA", "PRE", "CWL + BL/2 + tWR"),
    // Data bursts of two ranks on the shared bus: tRTRS between them.
    ConstraintRow {
        sibling: true,
        ..row("tRTRS", Rank, "RD RDA", "RD RDA", "BL/2 + tRTRS")
    },
    ConstraintRow {
        sibling: true,
        ..row("tRTRS", Rank, "RD RDA", "WR WRA", "CL + BL/2 + tRTRS - CWL")
    },
    ConstraintRow {
        sibling: true,
        ..row("tRTRS", Rank, "WR WRA", "RD RDA", "CWL + BL/2 + tRTRS - CL")
    },
    ConstraintRow {
        sibling: true,
        ..row("tRTRS", Rank, "WR WRA", "WR WRA", "BL/2 + tRTRS")
    },
    // Refresh.
    row("tRP", Rank, "PRE", "REF", "tRP"),
    row("tRFC", Rank, "REF", ALL, "tRFC"),
];

/// A DDR4 speed bin: its clock and each timing for x4, x8 and x16 devices.
pub struct SpeedBin {
    pub name: &'static str,
    pub tck_ns: f64,
    pub timings: [(&'static str, [u32; 3]); 22],
    /// Ramulator 1's name for it, and where its built-in table departs
    /// from these values (the same for every width).
    pub ramulator_speed: &'static str,
    pub ramulator_departures: &'static [(&'static str, u32)],
    /// (IDD0, IDD2P, IDD2N, IDD3P, IDD3N, IDD4R, IDD4W, IDD5B, IDD6) in mA
    /// for x4, x8, x16.
    pub idd_ma: [[f64; 9]; 3],
}

const fn same(v: u32) -> [u32; 3] {
    [v, v, v]
}

pub const SPEED_BINS: [SpeedBin; 2] = [
    SpeedBin {
        name: "DDR4-2400",
        tck_ns: 1.0 / 1.2,
        timings: [
            ("CL", same(16)),
            ("CWL", same(12)),
            ("tRCD", same(16)),
            ("tRP", same(16)),
            ("tRAS", same(39)),
            ("tRC", same(55)),
            ("tRTP", same(9)),
            ("tWR", same(18)),
            ("tWTR_S", same(3)),
            ("tWTR_L", same(9)),
            ("tCCD_S", same(4)),
            ("tCCD_L", same(6)),
            ("tRRD_S", [4, 4, 7]),
            ("tRRD_L", [6, 6, 8]),
            ("tFAW", [16, 26, 36]),
            ("tRFC", same(420)),
            ("tREFI", same(9360)),
            ("tRTRS", same(2)),
            ("tCKE", same(6)),
            ("tCKESR", same(7)),
            ("tXS", same(432)),
            ("tXP", same(8)),
        ],
        ramulator_speed: "DDR4_2400R",
        ramulator_departures: &[],
        idd_ma: [
            [43.0, 25.0, 34.0, 32.0, 38.0, 110.0, 103.0, 250.0, 30.0],
            [48.0, 25.0, 34.0, 37.0, 43.0, 135.0, 123.0, 250.0, 30.0],
            [80.0, 25.0, 34.0, 41.0, 47.0, 243.0, 228.0, 280.0, 30.0],
        ],
    },
    SpeedBin {
        name: "DDR4-3200",
        tck_ns: 0.625,
        timings: [
            ("CL", same(22)),
            ("CWL", same(16)),
            ("tRCD", same(22)),
            ("tRP", same(22)),
            ("tRAS", same(52)),
            ("tRC", same(74)),
            ("tRTP", same(12)),
            ("tWR", same(24)),
            ("tWTR_S", same(4)),
            ("tWTR_L", same(12)),
            ("tCCD_S", same(4)),
            ("tCCD_L", same(8)),
            ("tRRD_S", [4, 4, 9]),
            ("tRRD_L", [8, 8, 11]),
            ("tFAW", [16, 34, 48]),
            ("tRFC", same(560)),
            ("tREFI", same(12480)),
            ("tRTRS", same(2)),
            ("tCKE", same(8)),
            ("tCKESR", same(9)),
            ("tXS", same(576)),
            ("tXP", same(10)),
        ],
        ramulator_speed: "DDR4_3200",
        // Ramulator 1's DDR4_3200 row: nCCDL 10, nRAS 56, nRC 78, nCKESR 8.
        ramulator_departures: &[("tCCD_L", 10), ("tRAS", 56), ("tRC", 78), ("tCKESR", 8)],
        idd_ma: [
            [52.0, 25.0, 37.0, 38.0, 47.0, 143.0, 130.0, 250.0, 30.0],
            [57.0, 25.0, 37.0, 43.0, 52.0, 168.0, 150.0, 250.0, 30.0],
            [95.0, 25.0, 37.0, 47.0, 56.0, 302.0, 278.0, 280.0, 30.0],
        ],
    },
];

const WIDTHS: [u32; 3] = [4, 8, 16];

fn width_index(width: u32) -> usize {
    WIDTHS.iter().position(|&w| w == width).unwrap_or(1)
}

impl SpeedBin {
    /// This bin's timing for devices `width` bits wide.
    pub fn timing(&self, width: u32) -> Timing {
        let wi = width_index(width);
        Timing::new(
            self.tck_ns,
            self.timings
                .iter()
                .map(|(n, v)| (n.to_string(), v[wi]))
                .collect(),
        )
    }

    pub fn power(&self, width: u32) -> Power {
        let v = self.idd_ma[width_index(width)];
        Power {
            vdd_v: 1.2,
            idd0_ma: v[0],
            idd2p_ma: v[1],
            idd2n_ma: v[2],
            idd3p_ma: v[3],
            idd3n_ma: v[4],
            idd4r_ma: v[5],
            idd4w_ma: v[6],
            idd5b_ma: v[7],
            idd6_ma: v[8],
        }
    }
}

fn speed_bin(name: &str) -> Option<&'static SpeedBin> {
    SPEED_BINS
        .iter()
        .find(|b| b.name.eq_ignore_ascii_case(name))
}

/// The organisation of an 8 Gb device of `width` bits.
pub fn organisation(width: u32) -> Organisation {
    let (bankgroups, rows) = match width {
        4 => (4, 1u64 << 17),
        8 => (4, 1 << 16),
        _ => (2, 1 << 16),
    };
    Organisation {
        density_gbit: 8,
        device_width: width,
        bankgroups,
        banks_per_group: 4,
        rows,
        columns: 1024,
        bus_width: 64,
        burst_length: 8,
    }
}

fn preset_names() -> Vec<String> {
    let mut v = Vec::new();
    for bin in &SPEED_BINS {
        for w in WIDTHS {
            for r in ["", "-2R", "-4R"] {
                v.push(format!("{}-x{w}{r}", bin.name));
            }
        }
    }
    v
}

/// `DDR4-{2400,3200}-{x4,x8,x16}` with an optional `-1R`, `-2R` or `-4R`
/// (default one rank: the NMP rank), upper case.
fn preset(up: &str) -> Option<DramConfig> {
    let parts: Vec<&str> = up.split('-').collect();
    if parts.len() < 3 || parts.len() > 4 || parts[0] != "DDR4" {
        return None;
    }
    let bin = speed_bin(&format!("DDR4-{}", parts[1]))?;
    let width = match parts[2] {
        "X4" => 4,
        "X8" => 8,
        "X16" => 16,
        _ => return None,
    };
    let ranks = match parts.get(3) {
        None | Some(&"1R") => 1,
        Some(&"2R") => 2,
        Some(&"4R") => 4,
        _ => return None,
    };
    let name = format!(
        "{}-x{width}{}",
        bin.name,
        if ranks > 1 {
            format!("-{ranks}R")
        } else {
            String::new()
        }
    );
    Some(DramConfig {
        name,
        standard: DDR4.name.to_string(),
        speed: bin.name.to_string(),
        ranks,
        org: organisation(width),
        timing: bin.timing(width),
        power: bin.power(width),
        mapping: AddressMapping::default_ddr4(),
        transaction_queue: 32,
        command_queue: 8,
        constraints: Vec::new(),
    })
}

fn ramulator_lines(c: &DramConfig) -> Result<String, String> {
    let bin = speed_bin(&c.speed).ok_or_else(|| {
        format!(
            "Ramulator has no DDR4 speed `{}`; it has DDR4-2400 and DDR4-3200",
            c.speed
        )
    })?;
    Ok(format!(
        "standard = DDR4\nchannels = 1\nranks = {}\nspeed = {}\norg = DDR4_{}Gb_x{}\naddr_mapping = RoBaRaCoCh\n",
        c.ranks, bin.ramulator_speed, c.org.density_gbit, c.org.device_width
    ))
}

fn ramulator_timing(c: &DramConfig) -> Option<Timing> {
    let bin = speed_bin(&c.speed)?;
    let mut t = bin.timing(c.org.device_width);
    for (name, v) in bin.ramulator_departures {
        t.set(name, *v).ok()?;
    }
    Some(t)
}

fn ramulator_speed(c: &DramConfig) -> Option<&'static str> {
    speed_bin(&c.speed).map(|b| b.ramulator_speed)
}

pub static DDR4: Standard = Standard {
    name: "DDR4",
    source: "JESD79-4 (speed bins DDR4-2400R, DDR4-3200AA); Micron 8 Gb DDR4 datasheet currents",
    // Every command the checker knows: DDR4 is where they come from.
    commands: &Command::ALL,
    timings: TIMINGS,
    constraints: CONSTRAINTS,
    refresh_gap: "9 * tREFI",
    // JESD79-4 defines tRC = tRAS + tRP; DRAMsim3 reads no tRC and derives it.
    derived: &[("tRC", "tRAS + tRP")],
    dramsim3: Dramsim3Format {
        protocol: "DDR4",
        ini_columns_divisor: 1,
        timing_keys: &[
            "tCK",
            "AL = 0",
            "CL",
            "CWL",
            "tRCD",
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
        ],
    },
    dual_command: false,
    ramulator_channels: 1,
    ramulator_trace_names_groups: true,
    preset_names,
    preset,
    ramulator_lines,
    ramulator_timing,
    ramulator_speed,
};
