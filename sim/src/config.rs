//! DDR4 configurations: one Rust description from which every engine's own
//! configuration is generated.
//!
//! Timings are JEDEC values (JESD79-4 speed bins DDR4-2400R, 16-16-16, and
//! DDR4-3200AA, 22-22-22) in clock cycles; currents are Micron 8 Gb DDR4 datasheet
//! values (the same ones DRAMsim3 ships). Where an engine cannot take our timings
//! (Ramulator 1 has built-in tables), [`DramConfig::ramulator_timing_differences`]
//! lists what it uses instead.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

use crate::SimError;
use crate::request::BURST_BYTES;

/// Speed grade.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Speed {
    #[serde(rename = "DDR4-2400")]
    Ddr4_2400,
    #[serde(rename = "DDR4-3200")]
    Ddr4_3200,
}

impl Speed {
    pub fn name(self) -> &'static str {
        match self {
            Speed::Ddr4_2400 => "DDR4-2400",
            Speed::Ddr4_3200 => "DDR4-3200",
        }
    }
    /// Mega-transfers per second.
    pub fn mts(self) -> u32 {
        match self {
            Speed::Ddr4_2400 => 2400,
            Speed::Ddr4_3200 => 3200,
        }
    }
}

/// Timing parameters in clock cycles (tCK in ns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub tck_ns: f64,
    pub cl: u32,
    pub cwl: u32,
    pub trcd: u32,
    pub trp: u32,
    pub tras: u32,
    pub trc: u32,
    pub trtp: u32,
    pub twr: u32,
    pub twtr_s: u32,
    pub twtr_l: u32,
    pub tccd_s: u32,
    pub tccd_l: u32,
    pub trrd_s: u32,
    pub trrd_l: u32,
    pub tfaw: u32,
    pub trfc: u32,
    pub trefi: u32,
    pub trtrs: u32,
    pub tcke: u32,
    pub tckesr: u32,
    pub txs: u32,
    pub txp: u32,
}

/// Currents in mA per device, supply in V.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Power {
    pub vdd_v: f64,
    pub idd0_ma: f64,
    pub idd2p_ma: f64,
    pub idd2n_ma: f64,
    pub idd3p_ma: f64,
    pub idd3n_ma: f64,
    pub idd4r_ma: f64,
    pub idd4w_ma: f64,
    pub idd5b_ma: f64,
    pub idd6_ma: f64,
}

/// Device organisation of one rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Organisation {
    /// Device density in Gbit.
    pub density_gbit: u32,
    /// Data pins per device (4, 8 or 16).
    pub device_width: u32,
    pub bankgroups: u32,
    pub banks_per_group: u32,
    pub rows: u64,
    /// Columns per row, each `device_width` bits.
    pub columns: u64,
    /// Rank data bus in bits.
    pub bus_width: u32,
    /// Burst length (8 for DDR4).
    pub burst_length: u32,
}

impl Organisation {
    pub fn devices_per_rank(&self) -> u32 {
        self.bus_width / self.device_width
    }
    pub fn banks(&self) -> u32 {
        self.bankgroups * self.banks_per_group
    }
    /// Bytes of one row across the rank (the rank's page).
    pub fn rank_row_bytes(&self) -> u64 {
        self.columns * self.bus_width as u64 / 8
    }
    /// 64 B bursts per rank row.
    pub fn bursts_per_row(&self) -> u64 {
        self.columns / self.burst_length as u64
    }
    pub fn rank_bytes(&self) -> u64 {
        self.rows * self.banks() as u64 * self.rank_row_bytes()
    }
}

/// One field of a physical address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    Rank,
    Bankgroup,
    Bank,
    Row,
    Column,
}

impl Field {
    fn code(self) -> &'static str {
        match self {
            Field::Rank => "ra",
            Field::Bankgroup => "bg",
            Field::Bank => "ba",
            Field::Row => "ro",
            Field::Column => "co",
        }
    }
}

/// DRAM coordinates of one 64 B burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Coord {
    pub rank: u64,
    pub bankgroup: u64,
    pub bank: u64,
    pub row: u64,
    /// Burst index within the row (column / burst length).
    pub column: u64,
}

/// Address mapping: the fields from most to least significant, above the 6
/// offset bits of a 64 B burst. The same mapping is applied by every engine
/// (DRAMsim3 through its `address_mapping` string, Ramulator by re-encoding
/// addresses into its native RoBaRaCoCh layout).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressMapping {
    pub msb_to_lsb: Vec<Field>,
}

impl AddressMapping {
    /// Row : rank : bank : column : bankgroup. Consecutive bursts rotate over the
    /// bank groups (tCCD_S apart instead of tCCD_L) and then walk a row, so a
    /// sequential stream keeps the bus full with row hits.
    pub fn default_ddr4() -> Self {
        AddressMapping {
            msb_to_lsb: vec![
                Field::Row,
                Field::Rank,
                Field::Bank,
                Field::Column,
                Field::Bankgroup,
            ],
        }
    }

    /// Parses a string like `ro-ra-ba-co-bg` (or without dashes).
    pub fn parse(s: &str) -> Result<Self, SimError> {
        let compact: String = s.chars().filter(|c| *c != '-' && *c != ':').collect();
        let err = || {
            SimError::param(
                "mapping",
                format!(
                    "expected the five fields ro, ra, ba, bg, co each once, most significant first (e.g. ro-ra-ba-co-bg), found `{s}`"
                ),
            )
        };
        // Separated fields: each one present (`ro--ra`, a leading or a trailing
        // dash leave one empty, which the compact form would not notice).
        if s.contains(['-', ':']) {
            if let Some(i) = s.split(['-', ':']).position(str::is_empty) {
                return Err(SimError::param(
                    "mapping",
                    format!(
                        "field {} of `{s}` is empty; expected the five fields ro, ra, ba, bg, co each once, separated by single dashes, most significant first (e.g. ro-ra-ba-co-bg)",
                        i + 1
                    ),
                ));
            }
            // A separator between every two fields, or none: not inside one.
            if let Some((i, f)) = s
                .split(['-', ':'])
                .enumerate()
                .find(|(_, f)| f.chars().count() != 2)
            {
                return Err(SimError::param(
                    "mapping",
                    format!(
                        "field {} of `{s}` is `{f}`; expected the five two-letter fields ro, ra, ba, bg, co each once, separated by single dashes or all written together, most significant first (e.g. ro-ra-ba-co-bg)",
                        i + 1
                    ),
                ));
            }
        }
        // (Byte pairs: a multi-byte character is no field, never a panic.)
        let bytes = compact.as_bytes();
        if bytes.len() != 10 {
            return Err(err());
        }
        let mut fields = Vec::new();
        for pair in bytes.chunks(2) {
            let f = match pair {
                b"ra" => Field::Rank,
                b"bg" => Field::Bankgroup,
                b"ba" => Field::Bank,
                b"ro" => Field::Row,
                b"co" => Field::Column,
                _ => return Err(err()),
            };
            if fields.contains(&f) {
                return Err(err());
            }
            fields.push(f);
        }
        Ok(AddressMapping { msb_to_lsb: fields })
    }

    pub fn name(&self) -> String {
        self.msb_to_lsb
            .iter()
            .map(|f| f.code())
            .collect::<Vec<_>>()
            .join("-")
    }
}

/// A complete DDR4 configuration: one channel holding `ranks` ranks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DramConfig {
    /// Preset name, e.g. `DDR4-3200-x8` or `DDR4-2400-x8-2R`.
    pub name: String,
    pub speed: Speed,
    pub ranks: u32,
    pub org: Organisation,
    pub timing: Timing,
    pub power: Power,
    pub mapping: AddressMapping,
    /// Controller transaction queue depth (DRAMsim3 `trans_queue_size`).
    pub transaction_queue: u32,
    /// Per-bank command queue depth (DRAMsim3 `cmd_queue_size`).
    pub command_queue: u32,
}

/// Names of all presets.
pub fn preset_names() -> Vec<String> {
    let mut v = Vec::new();
    for speed in ["DDR4-2400", "DDR4-3200"] {
        for w in ["x4", "x8", "x16"] {
            for r in ["", "-2R", "-4R"] {
                v.push(format!("{speed}-{w}{r}"));
            }
        }
    }
    v
}

fn jedec_timing(speed: Speed, width: u32) -> Timing {
    // Each field: [DDR4-2400, DDR4-3200]; where the page size matters, each
    // of those is [x4, x8, x16] (page size 512 B, 1 KB, 2 KB).
    let wi = match width {
        4 => 0,
        8 => 1,
        _ => 2,
    };
    let si = match speed {
        Speed::Ddr4_2400 => 0,
        Speed::Ddr4_3200 => 1,
    };
    Timing {
        tck_ns: [1.0 / 1.2, 0.625][si],
        cl: [16, 22][si],
        cwl: [12, 16][si],
        trcd: [16, 22][si],
        trp: [16, 22][si],
        tras: [39, 52][si],
        trc: [55, 74][si],
        trtp: [9, 12][si],
        twr: [18, 24][si],
        twtr_s: [3, 4][si],
        twtr_l: [9, 12][si],
        tccd_s: [4, 4][si],
        tccd_l: [6, 8][si],
        trrd_s: [[4, 4, 7], [4, 4, 9]][si][wi],
        trrd_l: [[6, 6, 8], [8, 8, 11]][si][wi],
        tfaw: [[16, 26, 36], [16, 34, 48]][si][wi],
        trfc: [420, 560][si],
        trefi: [9360, 12480][si],
        trtrs: [2, 2][si],
        tcke: [6, 8][si],
        tckesr: [7, 9][si],
        txs: [432, 576][si],
        txp: [8, 10][si],
    }
}

fn datasheet_power(speed: Speed, width: u32) -> Power {
    // (IDD0, IDD2P, IDD2N, IDD3P, IDD3N, IDD4R, IDD4W, IDD5B, IDD6) in mA.
    let v: [f64; 9] = match (speed, width) {
        (Speed::Ddr4_2400, 4) => [43.0, 25.0, 34.0, 32.0, 38.0, 110.0, 103.0, 250.0, 30.0],
        (Speed::Ddr4_2400, 8) => [48.0, 25.0, 34.0, 37.0, 43.0, 135.0, 123.0, 250.0, 30.0],
        (Speed::Ddr4_2400, _) => [80.0, 25.0, 34.0, 41.0, 47.0, 243.0, 228.0, 280.0, 30.0],
        (Speed::Ddr4_3200, 4) => [52.0, 25.0, 37.0, 38.0, 47.0, 143.0, 130.0, 250.0, 30.0],
        (Speed::Ddr4_3200, 8) => [57.0, 25.0, 37.0, 43.0, 52.0, 168.0, 150.0, 250.0, 30.0],
        (Speed::Ddr4_3200, _) => [95.0, 25.0, 37.0, 47.0, 56.0, 302.0, 278.0, 280.0, 30.0],
    };
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

impl DramConfig {
    /// Looks a preset up by name (case-insensitive): `DDR4-{2400,3200}-{x4,x8,x16}`
    /// with an optional `-2R` / `-4R` suffix for multi-rank channels (default one
    /// rank: the NMP rank).
    pub fn preset(name: &str) -> Result<Self, SimError> {
        let unknown = || SimError::UnknownPreset {
            name: name.to_string(),
            valid: preset_names().join(", "),
        };
        let up = name.trim().to_ascii_uppercase();
        let parts: Vec<&str> = up.split('-').collect();
        if parts.len() < 3 || parts.len() > 4 || parts[0] != "DDR4" {
            return Err(unknown());
        }
        let speed = match parts[1] {
            "2400" => Speed::Ddr4_2400,
            "3200" => Speed::Ddr4_3200,
            _ => return Err(unknown()),
        };
        let width = match parts[2] {
            "X4" => 4,
            "X8" => 8,
            "X16" => 16,
            _ => return Err(unknown()),
        };
        let ranks = match parts.get(3) {
            None | Some(&"1R") => 1,
            Some(&"2R") => 2,
            Some(&"4R") => 4,
            _ => return Err(unknown()),
        };
        let (bankgroups, rows) = match width {
            4 => (4, 1u64 << 17),
            8 => (4, 1 << 16),
            _ => (2, 1 << 16),
        };
        let org = Organisation {
            density_gbit: 8,
            device_width: width,
            bankgroups,
            banks_per_group: 4,
            rows,
            columns: 1024,
            bus_width: 64,
            burst_length: 8,
        };
        let canonical = format!(
            "{}-x{}{}",
            speed.name(),
            width,
            if ranks > 1 {
                format!("-{ranks}R")
            } else {
                String::new()
            }
        );
        Ok(DramConfig {
            name: canonical,
            speed,
            ranks,
            timing: jedec_timing(speed, width),
            power: datasheet_power(speed, width),
            org,
            mapping: AddressMapping::default_ddr4(),
            transaction_queue: 32,
            command_queue: 8,
        })
    }

    /// Bytes addressable in the channel.
    pub fn capacity_bytes(&self) -> u64 {
        self.org.rank_bytes() * self.ranks as u64
    }

    /// Peak data-bus bandwidth in GB/s (1e9 bytes per second) = bytes per ns.
    pub fn peak_bandwidth_gbps(&self) -> f64 {
        let bytes_per_cycle = (self.org.bus_width / 8) as f64 * 2.0;
        bytes_per_cycle / self.timing.tck_ns
    }

    /// Data-bus cycles of one burst (BL/2).
    pub fn burst_cycles(&self) -> u32 {
        self.org.burst_length / 2
    }

    /// Upper bound in GB/s for 64 B requests that each need their own
    /// activation, on the channel: on each rank the activation rate is
    /// limited by tFAW (four per window), by tRRD_S (back-to-back across bank
    /// groups) and by tRC per bank, and refresh blocks the rank for tRFC of
    /// every tREFI ([`Self::rank_activation_bound_gbps`]); these limits are
    /// per rank, so `ranks` ranks activate that many times as often, up to
    /// the data bus's peak.
    pub fn activation_bound_gbps(&self) -> f64 {
        (self.rank_activation_bound_gbps() * self.ranks as f64).min(self.peak_bandwidth_gbps())
    }

    /// [`Self::activation_bound_gbps`] of one rank alone.
    pub fn rank_activation_bound_gbps(&self) -> f64 {
        let t = &self.timing;
        let acts_per_cycle = (4.0 / t.tfaw as f64)
            .min(1.0 / t.trrd_s as f64)
            .min(self.org.banks() as f64 / t.trc as f64);
        let refresh_share = 1.0 - t.trfc as f64 / t.trefi as f64;
        acts_per_cycle * BURST_BYTES as f64 / t.tck_ns * refresh_share
    }

    /// Bits of each field.
    pub fn field_bits(&self, f: Field) -> u32 {
        let n = match f {
            Field::Rank => self.ranks as u64,
            Field::Bankgroup => self.org.bankgroups as u64,
            Field::Bank => self.org.banks_per_group as u64,
            Field::Row => self.org.rows,
            Field::Column => self.org.bursts_per_row(),
        };
        n.trailing_zeros()
    }

    /// DRAM coordinates of a byte address under the configured mapping.
    pub fn decode(&self, addr: u64) -> Coord {
        let mut a = addr / BURST_BYTES;
        let mut c = Coord::default();
        for f in self.mapping.msb_to_lsb.iter().rev() {
            let bits = self.field_bits(*f);
            let v = a & ((1u64 << bits) - 1);
            a >>= bits;
            match f {
                Field::Rank => c.rank = v,
                Field::Bankgroup => c.bankgroup = v,
                Field::Bank => c.bank = v,
                Field::Row => c.row = v,
                Field::Column => c.column = v,
            }
        }
        c
    }

    /// Byte address of DRAM coordinates under the configured mapping.
    pub fn encode(&self, c: Coord) -> u64 {
        let mut a = 0u64;
        for f in &self.mapping.msb_to_lsb {
            let bits = self.field_bits(*f);
            let v = match f {
                Field::Rank => c.rank,
                Field::Bankgroup => c.bankgroup,
                Field::Bank => c.bank,
                Field::Row => c.row,
                Field::Column => c.column,
            };
            a = (a << bits) | (v & ((1u64 << bits) - 1));
        }
        a * BURST_BYTES
    }

    /// Checks that an address fits the configured capacity.
    pub fn check_addr(&self, addr: u64, context: &str) -> Result<(), SimError> {
        if addr >= self.capacity_bytes() {
            return Err(SimError::AddressOutOfRange {
                addr,
                capacity: self.capacity_bytes(),
                context: context.to_string(),
            });
        }
        Ok(())
    }

    /// The DRAMsim3 `.ini` for this configuration. Statistics go to
    /// `<output dir>/<prefix>.json` when the engine is finished.
    pub fn dramsim3_ini(&self, output_prefix: &str) -> String {
        let t = &self.timing;
        let p = &self.power;
        let o = &self.org;
        let mapping: String = self
            .mapping
            .msb_to_lsb
            .iter()
            .map(|f| f.code())
            .collect::<String>();
        // DRAMsim3 wants all six fields; the channel field is zero bits wide.
        let mapping = format!("ch{mapping}");
        // channel_size is in MB and sets the number of ranks.
        let channel_mb = self.capacity_bytes() >> 20;
        let mut s = String::new();
        let _ = writeln!(s, "; generated by nmpsim from preset {}", self.name);
        let _ = writeln!(s, "[dram_structure]\nprotocol = DDR4");
        let _ = writeln!(
            s,
            "bankgroups = {}\nbanks_per_group = {}\nrows = {}\ncolumns = {}\ndevice_width = {}\nBL = {}",
            o.bankgroups, o.banks_per_group, o.rows, o.columns, o.device_width, o.burst_length
        );
        let _ = writeln!(s, "\n[timing]\ntCK = {}\nAL = 0", t.tck_ns);
        let _ = writeln!(
            s,
            "CL = {}\nCWL = {}\ntRCD = {}\ntRP = {}\ntRAS = {}\ntRFC = {}\ntREFI = {}\ntRPRE = 1\ntWPRE = 1",
            t.cl, t.cwl, t.trcd, t.trp, t.tras, t.trfc, t.trefi
        );
        let _ = writeln!(
            s,
            "tRRD_S = {}\ntRRD_L = {}\ntWTR_S = {}\ntWTR_L = {}\ntFAW = {}\ntWR = {}\ntRTP = {}\ntCCD_S = {}\ntCCD_L = {}",
            t.trrd_s, t.trrd_l, t.twtr_s, t.twtr_l, t.tfaw, t.twr, t.trtp, t.tccd_s, t.tccd_l
        );
        let _ = writeln!(
            s,
            "tCKE = {}\ntCKESR = {}\ntXS = {}\ntXP = {}\ntRTRS = {}",
            t.tcke, t.tckesr, t.txs, t.txp, t.trtrs
        );
        let _ = writeln!(
            s,
            "\n[power]\nVDD = {}\nIDD0 = {}\nIDD2P = {}\nIDD2N = {}\nIDD3P = {}\nIDD3N = {}\nIDD4W = {}\nIDD4R = {}\nIDD5AB = {}\nIDD6x = {}",
            p.vdd_v,
            p.idd0_ma,
            p.idd2p_ma,
            p.idd2n_ma,
            p.idd3p_ma,
            p.idd3n_ma,
            p.idd4w_ma,
            p.idd4r_ma,
            p.idd5b_ma,
            p.idd6_ma
        );
        let _ = writeln!(
            s,
            "\n[system]\nchannel_size = {channel_mb}\nchannels = 1\nbus_width = {}\naddress_mapping = {mapping}\nqueue_structure = PER_BANK\nrefresh_policy = RANK_LEVEL_STAGGERED\nrow_buf_policy = OPEN_PAGE\ncmd_queue_size = {}\ntrans_queue_size = {}",
            o.bus_width, self.command_queue, self.transaction_queue
        );
        let _ = writeln!(
            s,
            "\n[other]\nepoch_period = 2000000000\noutput_level = 0\noutput_prefix = {output_prefix}"
        );
        s
    }

    /// Ramulator's name for the speed grade.
    pub fn ramulator_speed(&self) -> &'static str {
        match self.speed {
            Speed::Ddr4_2400 => "DDR4_2400R",
            Speed::Ddr4_3200 => "DDR4_3200",
        }
    }

    /// The Ramulator configuration. Ramulator takes organisation and speed by
    /// name and uses its built-in timing table; see
    /// [`ramulator_timing_differences`](Self::ramulator_timing_differences).
    pub fn ramulator_cfg(&self, cmd_trace_prefix: &str) -> String {
        format!(
            "# generated by nmpsim from preset {}\nstandard = DDR4\nchannels = 1\nranks = {}\nspeed = {}\norg = DDR4_{}Gb_x{}\naddr_mapping = RoBaRaCoCh\nrecord_cmd_trace = on\nprint_cmd_trace = off\ncmd_trace_prefix = {}\n",
            self.name,
            self.ranks,
            self.ramulator_speed(),
            self.org.density_gbit,
            self.org.device_width,
            cmd_trace_prefix
        )
    }

    /// The timing Ramulator 1 actually uses for this preset (its built-in
    /// table, as shipped in the `ramulator_wrapper` crate).
    pub fn ramulator_timing(&self) -> Timing {
        let mut t = self.timing.clone();
        if self.speed == Speed::Ddr4_3200 {
            // Ramulator 1's DDR4_3200 row: nCCDL 10, nRAS 56, nRC 78, nCKESR 8.
            t.tccd_l = 10;
            t.tras = 56;
            t.trc = 78;
            t.tckesr = 8;
        }
        t
    }

    /// (parameter, ours, Ramulator's) for every timing on which Ramulator's
    /// built-in table departs from the JEDEC values of this preset.
    pub fn ramulator_timing_differences(&self) -> Vec<(&'static str, u32, u32)> {
        timing_differences(&self.timing, &self.ramulator_timing())
    }
}

/// (parameter, a, b) for every timing parameter where `a` and `b` differ.
pub fn timing_differences(a: &Timing, b: &Timing) -> Vec<(&'static str, u32, u32)> {
    let pairs: [(&'static str, u32, u32); 22] = [
        ("CL", a.cl, b.cl),
        ("CWL", a.cwl, b.cwl),
        ("tRCD", a.trcd, b.trcd),
        ("tRP", a.trp, b.trp),
        ("tRAS", a.tras, b.tras),
        ("tRC", a.trc, b.trc),
        ("tRTP", a.trtp, b.trtp),
        ("tWR", a.twr, b.twr),
        ("tWTR_S", a.twtr_s, b.twtr_s),
        ("tWTR_L", a.twtr_l, b.twtr_l),
        ("tCCD_S", a.tccd_s, b.tccd_s),
        ("tCCD_L", a.tccd_l, b.tccd_l),
        ("tRRD_S", a.trrd_s, b.trrd_s),
        ("tRRD_L", a.trrd_l, b.trrd_l),
        ("tFAW", a.tfaw, b.tfaw),
        ("tRFC", a.trfc, b.trfc),
        ("tREFI", a.trefi, b.trefi),
        ("tRTRS", a.trtrs, b.trtrs),
        ("tCKE", a.tcke, b.tcke),
        ("tCKESR", a.tckesr, b.tckesr),
        ("tXS", a.txs, b.txs),
        ("tXP", a.txp, b.txp),
    ];
    pairs.into_iter().filter(|(_, x, y)| x != y).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_name_resolves_and_is_canonical() {
        for n in preset_names() {
            let c = DramConfig::preset(&n).unwrap();
            assert_eq!(c.name, n);
            assert_eq!(DramConfig::preset(&n.to_lowercase()).unwrap().name, n);
        }
    }

    #[test]
    fn unknown_preset_lists_valid_ones() {
        let e = DramConfig::preset("DDR5-4800-x8").unwrap_err().to_string();
        assert!(e.contains("DDR5-4800-x8"), "{e}");
        assert!(
            e.contains("DDR4-3200-x8") && e.contains("DDR4-2400-x16-4R"),
            "{e}"
        );
    }

    #[test]
    fn physical_facts() {
        let c = DramConfig::preset("DDR4-3200-x8").unwrap();
        assert!((c.peak_bandwidth_gbps() - 25.6).abs() < 1e-9);
        assert_eq!(c.capacity_bytes(), 8 << 30);
        assert_eq!(c.org.rank_row_bytes(), 8192);
        let b = c.activation_bound_gbps();
        // 4 ACT per 34 cycles of 0.625 ns, less the refresh share: about 11.5 GB/s.
        assert!(b > 11.0 && b < 12.1, "{b}");
        assert_eq!(b, c.rank_activation_bound_gbps());
        // Per-rank limits: two ranks activate twice as often, up to the peak.
        let two = DramConfig::preset("DDR4-2400-x8-2R").unwrap();
        let one = DramConfig::preset("DDR4-2400-x8").unwrap();
        assert_eq!(
            two.rank_activation_bound_gbps(),
            one.rank_activation_bound_gbps()
        );
        let want = (2.0 * one.activation_bound_gbps()).min(two.peak_bandwidth_gbps());
        assert!((two.activation_bound_gbps() - want).abs() < 1e-12);
        assert!(two.activation_bound_gbps() > one.activation_bound_gbps());
        assert!(two.activation_bound_gbps() <= two.peak_bandwidth_gbps());
        assert_eq!(
            DramConfig::preset("DDR4-2400-x4").unwrap().capacity_bytes(),
            16 << 30
        );
        assert_eq!(
            DramConfig::preset("DDR4-2400-x16-2R")
                .unwrap()
                .capacity_bytes(),
            8 << 30
        );
    }

    #[test]
    fn mapping_round_trips_and_interleaves_bank_groups() {
        let c = DramConfig::preset("DDR4-3200-x8-2R").unwrap();
        for addr in [0u64, 64, 4096, 123 * 64, (c.capacity_bytes() - 64)] {
            assert_eq!(c.encode(c.decode(addr)), addr);
        }
        let a = c.decode(0);
        let b = c.decode(64);
        assert_eq!((a.bankgroup, b.bankgroup), (0, 1));
        assert_eq!(c.decode(4 * 64).column, 1);
        let top = c.decode(c.capacity_bytes() - 64);
        assert_eq!(top.row, c.org.rows - 1);
        assert_eq!(top.rank, 1);
        assert!(AddressMapping::parse("ro-ra-ba-co-bg").unwrap() == c.mapping);
        assert!(AddressMapping::parse("ro-ro-ba-co-bg").is_err());
        // A multi-byte character where a field's letters go is refused, not a panic.
        for bad in [
            "rorab\u{a9}obg",
            "\u{a9}\u{a9}\u{a9}\u{a9}\u{a9}",
            "ro-ra-ba-co-b\u{e9}",
        ] {
            let e = AddressMapping::parse(bad).unwrap_err();
            assert!(
                e.to_string().contains("expected the five fields"),
                "{bad}: {e}"
            );
        }
        // An empty field (a doubled, leading or trailing dash) is named by position.
        for (bad, field) in [
            ("ro--ra-ba-bg-co", 2),
            ("-ro-ra-ba-bg-co-", 1),
            ("ro-ra-ba-bg-co-", 6),
            ("ro-ra-ba-bg-co:", 6),
            ("ro-ra-ba-:bg-co", 4),
            ("-", 1),
        ] {
            let e = AddressMapping::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("field {field} of `{bad}` is empty"))
                    && e.contains("expected the five fields"),
                "{bad}: {e}"
            );
        }
        assert!(AddressMapping::parse("ro-ra-ba-bg-co").is_ok());
        assert!(AddressMapping::parse("ro:ra:ba:bg:co").is_ok());
        assert!(AddressMapping::parse("rorababgco").is_ok());
        // A separator inside a field, or fields run together between
        // separators, is refused.
        for (bad, field, f) in [
            ("r-o-r-a-b-a-c-o-b-g", 1, "r"),
            ("ro-rabacobg", 2, "rabacobg"),
            ("ro-ra-bab-gco", 3, "bab"),
        ] {
            let e = AddressMapping::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("field {field} of `{bad}` is `{f}`")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn ramulator_differs_from_jedec_only_at_3200() {
        assert!(
            DramConfig::preset("DDR4-2400-x8")
                .unwrap()
                .ramulator_timing_differences()
                .is_empty()
        );
        let d = DramConfig::preset("DDR4-3200-x8")
            .unwrap()
            .ramulator_timing_differences();
        assert!(d.contains(&("tCCD_L", 8, 10)), "{d:?}");
        assert!(d.contains(&("tRAS", 52, 56)), "{d:?}");
    }
}
