//! DRAM configurations: one Rust description from which every engine's own
//! configuration is generated.
//!
//! A configuration names its [standard] (today DDR4) and a
//! preset of it, and holds the preset's organisation, timing (in clock
//! cycles, from the standard's JEDEC tables), power (datasheet currents) and
//! any overrides ([`DramConfig::from_toml`], [`DramConfig::apply_overrides`]).
//! Where an engine cannot take our timings (Ramulator 1 has built-in tables),
//! [`DramConfig::ramulator_timing_differences`] lists what it uses instead.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

use crate::SimError;
use crate::request::BURST_BYTES;
use crate::standard::{self, ConstraintSpec, Rule, Standard};

/// Timing parameters in clock cycles, by the standard's names (`CL`,
/// `tRCD`, ...), in the standard's order, and the clock period `tCK` in ns.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub tck_ns: f64,
    values: Vec<(String, u32)>,
}

impl Timing {
    pub fn new(tck_ns: f64, values: Vec<(String, u32)>) -> Self {
        Timing { tck_ns, values }
    }

    /// A timing by name, in cycles.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Sets a timing the table has; the error lists the names it has.
    pub fn set(&mut self, name: &str, cycles: u32) -> Result<(), String> {
        if let Some(v) = self.values.iter_mut().find(|(n, _)| n == name) {
            v.1 = cycles;
            return Ok(());
        }
        let names: Vec<&str> = self.values.iter().map(|(n, _)| n.as_str()).collect();
        Err(format!(
            "unknown timing `{name}`; expected tCK (ns) or one of {}",
            names.join(", ")
        ))
    }

    /// `e` evaluated with these timings and burst length `bl` (a name the
    /// table lacks counts as 0).
    pub fn eval(&self, e: &standard::Expr, bl: u32) -> i64 {
        e.eval(&|n| match n {
            "BL" => bl as i64,
            _ => self.get(n).map(i64::from).unwrap_or(0),
        })
    }

    /// Every timing, in the standard's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.values.iter().map(|(n, v)| (n.as_str(), *v))
    }
}

impl std::ops::Index<&str> for Timing {
    type Output = u32;
    fn index(&self, name: &str) -> &u32 {
        match self.values.iter().find(|(n, _)| n == name) {
            Some((_, v)) => v,
            None => panic!("the timing table has no `{name}`"),
        }
    }
}

impl Serialize for Timing {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.values.len() + 1))?;
        // Lower-case keys (`tck_ns`, `cl`, `trcd`, `trrd_s`), as run
        // directories have always had them.
        m.serialize_entry("tck_ns", &self.tck_ns)?;
        for (n, v) in &self.values {
            m.serialize_entry(&n.to_lowercase(), v)?;
        }
        m.end()
    }
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
    /// Bytes of one burst: the bus width times the burst length (64 B on
    /// DDR4's 64-bit rank with BL8 and on HBM2's 128-bit legacy channel with
    /// BL4; 32 B on a 64-bit HBM2 pseudo-channel with BL4).
    pub fn burst_bytes(&self) -> u64 {
        self.bus_width as u64 / 8 * self.burst_length as u64
    }
    /// Bursts per rank row.
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

/// DRAM coordinates of one burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Coord {
    pub rank: u64,
    pub bankgroup: u64,
    pub bank: u64,
    pub row: u64,
    /// Burst index within the row (column / burst length).
    pub column: u64,
}

/// Address mapping: the fields from most to least significant, above the
/// offset bits of a burst (6 for 64 B, 5 for a pseudo-channel's 32 B). The same mapping is applied by every engine
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

/// A complete DRAM configuration: one channel holding `ranks` ranks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DramConfig {
    /// Preset name, e.g. `DDR4-3200-x8` or `DDR4-2400-x8-2R`; with
    /// overrides, the preset's name and what was changed.
    pub name: String,
    /// The standard's name ([`crate::standard::by_name`]).
    pub standard: String,
    /// The speed bin, e.g. `DDR4-3200` (`custom` for a configuration
    /// written out in full).
    pub speed: String,
    pub ranks: u32,
    pub org: Organisation,
    pub timing: Timing,
    pub power: Power,
    pub mapping: AddressMapping,
    /// Controller transaction queue depth (DRAMsim3 `trans_queue_size`).
    pub transaction_queue: u32,
    /// Per-bank command queue depth (DRAMsim3 `cmd_queue_size`).
    pub command_queue: u32,
    /// Constraints added to the standard's by a configuration file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<ConstraintSpec>,
}

/// Names of all presets, of every standard.
pub fn preset_names() -> Vec<String> {
    standard::all()
        .into_iter()
        .flat_map(|s| (s.preset_names)())
        .collect()
}

impl DramConfig {
    /// Looks a preset up by name (case-insensitive), in every standard:
    /// `DDR4-{2400,3200}-{x4,x8,x16}` with an optional `-2R` / `-4R` suffix
    /// for multi-rank channels (default one rank: the NMP rank).
    pub fn preset(name: &str) -> Result<Self, SimError> {
        let up = name.trim().to_ascii_uppercase();
        standard::all()
            .into_iter()
            .find_map(|s| (s.preset)(&up))
            .ok_or_else(|| SimError::UnknownPreset {
                name: name.to_string(),
                valid: preset_names().join(", "),
            })
    }

    /// The configuration's standard.
    pub fn standard(&self) -> &'static Standard {
        standard::by_name(&self.standard)
            .unwrap_or_else(|| panic!("no DRAM standard `{}`", self.standard))
    }

    /// The standard's constraints and the configuration's own, evaluated
    /// with its timing.
    pub fn rules(&self) -> Vec<Rule> {
        self.rules_with(&self.timing)
    }

    /// [`rules`](Self::rules) evaluated with another timing table (e.g.
    /// [`ramulator_timing`](Self::ramulator_timing)).
    pub fn rules_with(&self, timing: &Timing) -> Vec<Rule> {
        let s = self.standard();
        let mut c = s.constraints();
        for (i, spec) in self.constraints.iter().enumerate() {
            c.push(
                s.constraint(spec, &format!("constraint {}", i + 1))
                    .unwrap_or_else(|e| panic!("{e}")),
            );
        }
        c.iter()
            .map(|c| c.evaluate(timing, self.org.burst_length))
            .collect()
    }

    /// The longest gap allowed between two refreshes of a rank, in cycles.
    pub fn refresh_gap(&self) -> u64 {
        self.refresh_gap_with(&self.timing)
    }

    /// [`refresh_gap`](Self::refresh_gap) with another timing table.
    pub fn refresh_gap_with(&self, timing: &Timing) -> u64 {
        let gap = self.standard().refresh_gap;
        timing
            .eval(&self.expr("refresh gap", gap), self.org.burst_length)
            .max(0) as u64
    }

    /// One of the standard's own expressions (`what`: its refresh gap, a
    /// derived timing), parsed.
    pub(crate) fn expr(&self, what: &str, text: &str) -> standard::Expr {
        let s = self.standard();
        standard::Expr::parse(text, &s.latency_names())
            .unwrap_or_else(|e| panic!("{}: {what} {e}", s.name))
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

    /// Bytes of one burst ([`Organisation::burst_bytes`]). A request of
    /// [`BURST_BYTES`] is served as `BURST_BYTES / burst_bytes()` bursts of
    /// consecutive addresses (two on an HBM2 pseudo-channel): the runner
    /// splits it, so every engine sees bursts.
    pub fn burst_bytes(&self) -> u64 {
        self.org.burst_bytes()
    }

    /// Upper bound in GB/s for 64 B requests that each need their own
    /// activation (on a pseudo-channel, a request's two 32 B bursts share
    /// theirs), on the channel: on each rank the activation rate is
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
        let acts_per_cycle = (4.0 / t["tFAW"] as f64)
            .min(1.0 / t["tRRD_S"] as f64)
            .min(self.org.banks() as f64 / t["tRC"] as f64);
        let refresh_share = 1.0 - t["tRFC"] as f64 / t["tREFI"] as f64;
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
        let mut a = addr / self.org.burst_bytes();
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
        a * self.org.burst_bytes()
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
        let f = self.standard().dramsim3;
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
        let _ = writeln!(s, "[dram_structure]\nprotocol = {}", f.protocol);
        let _ = writeln!(
            s,
            "bankgroups = {}\nbanks_per_group = {}\nrows = {}\ncolumns = {}\ndevice_width = {}\nBL = {}",
            o.bankgroups,
            o.banks_per_group,
            o.rows,
            o.columns / f.ini_columns_divisor,
            o.device_width,
            o.burst_length
        );
        if self.standard().dual_command {
            // (DRAMsim3's default for HBM, stated.)
            let _ = writeln!(s, "hbm_dual_cmd = true");
        }
        let _ = writeln!(s, "\n[timing]");
        for key in f.timing_keys {
            if key.contains('=') {
                let _ = writeln!(s, "{key}");
            } else if *key == "tCK" {
                let _ = writeln!(s, "tCK = {}", t.tck_ns);
            } else {
                let _ = writeln!(s, "{key} = {}", t[*key]);
            }
        }
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

    /// The Ramulator configuration. Ramulator takes organisation and speed by
    /// name and uses its built-in timing table; see
    /// [`ramulator_timing_differences`](Self::ramulator_timing_differences).
    pub fn ramulator_cfg(&self, cmd_trace_prefix: &str) -> Result<String, SimError> {
        let lines =
            (self.standard().ramulator_lines)(self).map_err(|e| SimError::param("engine", e))?;
        Ok(format!(
            "# generated by nmpsim from preset {}\n{lines}record_cmd_trace = on\nprint_cmd_trace = off\ncmd_trace_prefix = {}\n",
            self.name, cmd_trace_prefix
        ))
    }

    /// The timing Ramulator 1 actually uses for this configuration (its
    /// built-in table for the speed bin, as shipped in the
    /// `ramulator_wrapper` crate; overrides do not reach it). Without a
    /// speed bin Ramulator knows, the configuration's own.
    pub fn ramulator_timing(&self) -> Timing {
        (self.standard().ramulator_timing)(self).unwrap_or_else(|| self.timing.clone())
    }

    /// Ramulator 1's name for the speed bin (`DDR4_3200`), if it has one.
    pub fn ramulator_speed(&self) -> Option<&'static str> {
        (self.standard().ramulator_speed)(self)
    }

    /// (parameter, ours, Ramulator's) for every timing on which Ramulator's
    /// built-in table departs from this configuration's.
    pub fn ramulator_timing_differences(&self) -> Vec<(String, u32, u32)> {
        timing_differences(&self.timing, &self.ramulator_timing())
    }
}

/// (parameter, a, b) for every timing parameter where `a` and `b` differ
/// (a parameter only one of them has counts as 0 in the other).
pub fn timing_differences(a: &Timing, b: &Timing) -> Vec<(String, u32, u32)> {
    let mut out: Vec<(String, u32, u32)> = a
        .iter()
        .map(|(n, x)| (n.to_string(), x, b.get(n).unwrap_or(0)))
        .filter(|(_, x, y)| x != y)
        .collect();
    for (n, y) in b.iter() {
        if a.get(n).is_none() {
            out.push((n.to_string(), 0, y));
        }
    }
    out
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
        assert!(d.contains(&("tCCD_L".to_string(), 8, 10)), "{d:?}");
        assert!(d.contains(&("tRAS".to_string(), 52, 56)), "{d:?}");
    }
}
