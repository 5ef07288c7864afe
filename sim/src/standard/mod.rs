//! DRAM standards as data, one module per standard (Ramulator 2's way).
//!
//! A [`Standard`] is a table, not code: its command set, its timing
//! parameters, its organisation and speed-bin presets with their power
//! figures, and its timing constraints as declarative rows
//! ([`ConstraintRow`]: *after `preceding` at a node of `level`, `following`
//! at the same node waits `latency` cycles*, with a `window` of the last N
//! preceding commands and a `sibling` flag for the other nodes of the
//! level). Everything that needs the rules derives them from this one table:
//!
//! - the native engine's command-to-command delays
//!   ([`TimingTable::of`](crate::timing::TimingTable::of)),
//! - the JEDEC checker ([`crate::jedec::Checker`]), which replays a command
//!   log against the evaluated rows and knows nothing of any scheduler,
//! - DRAMsim3's `.ini` ([`DramConfig::dramsim3_ini`]) and Ramulator's `.cfg`
//!   ([`DramConfig::ramulator_cfg`]), from the standard's key lists.
//!
//! A configuration ([`DramConfig`]) names its standard; a TOML file may
//! override any timing or organisation field and add constraint rows
//! ([`crate::config::DramConfig::from_toml`]), each checked against the
//! standard (unknown names, missing timings, commands the standard lacks).

pub mod ddr4;
pub mod expr;
pub mod hbm;
pub mod hbm2;

use serde::{Deserialize, Serialize};

use crate::config::{DramConfig, Timing};
use crate::jedec::Command;
pub use expr::Expr;

/// The level of the DRAM hierarchy a constraint is kept at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Channel,
    Rank,
    #[serde(rename = "bankgroup")]
    BankGroup,
    Bank,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::Channel, Level::Rank, Level::BankGroup, Level::Bank];

    pub fn name(self) -> &'static str {
        match self {
            Level::Channel => "channel",
            Level::Rank => "rank",
            Level::BankGroup => "bankgroup",
            Level::Bank => "bank",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// One row of a standard's constraint table, as written in its module.
#[derive(Clone, Copy, Debug)]
pub struct ConstraintRow {
    /// The rule's name in reports (`tRCD`, `tFAW`, `RD→WR`).
    pub rule: &'static str,
    pub level: Level,
    /// Space-separated command names.
    pub preceding: &'static str,
    pub following: &'static str,
    /// A latency expression in the standard's timing names and `BL`.
    pub latency: &'static str,
    /// 1: after the last preceding command; N: after the N-th last (tFAW: 4).
    pub window: u32,
    /// The following command goes to another node of `level` than the
    /// preceding one (a rank switch on the shared data bus), not the same.
    pub sibling: bool,
}

/// Shorthand for the standards' tables: a same-node row with window 1.
pub(crate) const fn row(
    rule: &'static str,
    level: Level,
    preceding: &'static str,
    following: &'static str,
    latency: &'static str,
) -> ConstraintRow {
    ConstraintRow {
        rule,
        level,
        preceding,
        following,
        latency,
        window: 1,
        sibling: false,
    }
}

/// A constraint added by a configuration file: the fields of a
/// [`ConstraintRow`], owned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConstraintSpec {
    pub rule: String,
    pub level: Level,
    pub preceding: Vec<String>,
    pub following: Vec<String>,
    pub latency: String,
    pub window: u32,
    pub sibling: bool,
}

/// A constraint checked against its standard: commands resolved, latency
/// parsed (every name one of the standard's timings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constraint {
    pub rule: String,
    pub level: Level,
    pub preceding: Vec<Command>,
    pub following: Vec<Command>,
    pub latency: Expr,
    pub window: u32,
    pub sibling: bool,
}

/// A constraint evaluated for one configuration: its latency in cycles
/// (negative latencies, which constrain nothing, are 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub rule: String,
    pub level: Level,
    pub preceding: Vec<Command>,
    pub following: Vec<Command>,
    pub cycles: u64,
    pub window: u32,
    pub sibling: bool,
}

/// Where a following command goes relative to the preceding one, for the
/// delays a scheduler keeps ([`delay`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    SameBank,
    /// Another bank of the same bank group.
    SameGroup,
    /// Another bank group of the same rank.
    SameRank,
    /// Another rank of the channel.
    OtherRank,
}

impl Rule {
    /// Whether this rule binds `following` after `preceding` in `scope`.
    /// Rules at the bank-group level are left out where the organisation
    /// has one bank group (DRAMsim3's convention: the `_S` timings apply).
    pub fn binds(
        &self,
        preceding: Command,
        following: Command,
        scope: Scope,
        one_group: bool,
    ) -> bool {
        if !(self.preceding.contains(&preceding) && self.following.contains(&following)) {
            return false;
        }
        if one_group && self.level == Level::BankGroup {
            return false;
        }
        let same = |levels: &[Level]| !self.sibling && levels.contains(&self.level);
        match scope {
            Scope::SameBank => same(&Level::ALL),
            Scope::SameGroup => same(&[Level::Channel, Level::Rank, Level::BankGroup]),
            Scope::SameRank => same(&[Level::Channel, Level::Rank]),
            Scope::OtherRank => {
                same(&[Level::Channel]) || (self.sibling && self.level == Level::Rank)
            }
        }
    }
}

/// The least gap in cycles the rules (window 1) put between `preceding` and
/// `following` in `scope`: the largest latency of those that bind.
pub fn delay(
    rules: &[Rule],
    preceding: Command,
    following: Command,
    scope: Scope,
    one_group: bool,
) -> u64 {
    rules
        .iter()
        .filter(|r| r.window == 1 && r.binds(preceding, following, scope, one_group))
        .map(|r| r.cycles)
        .max()
        .unwrap_or(0)
}

/// A timing parameter of a standard, in clock cycles.
#[derive(Clone, Copy, Debug)]
pub struct TimingParam {
    pub name: &'static str,
    pub meaning: &'static str,
}

/// How a standard writes DRAMsim3's `.ini`: the protocol name and the
/// `[timing]` keys in order (`KEY` is the timing of that name, `tCK` the
/// clock period; `KEY = VALUE` a constant).
#[derive(Clone, Copy, Debug)]
pub struct Dramsim3Format {
    pub protocol: &'static str,
    /// Columns of the configuration per `columns` of the `.ini` (DRAMsim3
    /// doubles an HBM row's columns itself: 2).
    pub ini_columns_divisor: u64,
    pub timing_keys: &'static [&'static str],
}

/// A DRAM standard: see the [module documentation](self).
pub struct Standard {
    pub name: &'static str,
    /// The document the figures come from.
    pub source: &'static str,
    pub commands: &'static [Command],
    pub timings: &'static [TimingParam],
    /// The constraint rows, in segments (rows two standards share are one
    /// segment of both); [`Standard::rows`] walks them in order.
    pub constraints: &'static [&'static [ConstraintRow]],
    /// The longest gap between two refreshes of a rank (JEDEC lets eight be
    /// postponed: `9 * tREFI`).
    pub refresh_gap: &'static str,
    /// Timings the standard defines from others (`("tRC", "tRAS + tRP")`):
    /// an override of the others carries them along unless given too, and
    /// a configuration must keep them (DRAMsim3 derives them itself).
    pub derived: &'static [(&'static str, &'static str)],
    pub dramsim3: Dramsim3Format,
    /// Row and column commands go over buses of their own (HBM): in one
    /// cycle a controller may issue one of each, a row command (ACT, PRE,
    /// PREA, REF) and a column command (RD, WR and their auto-precharge
    /// forms), as DRAMsim3's HBM controller does.
    pub dual_command: bool,
    /// The channels Ramulator 1 must be given for this standard (its HBM
    /// takes a stack of eight and no other count); nmpsim addresses its
    /// channel 0 only, one engine being one channel.
    pub ramulator_channels: u32,
    /// Ramulator 1's command trace numbers a bank as the checker does, bank
    /// group and bank (DDR4); its HBM trace gives the bank within its group
    /// only, so the checker cannot tell the groups apart.
    pub ramulator_trace_names_groups: bool,
    /// Every preset name.
    pub preset_names: fn() -> Vec<String>,
    /// A preset by name (upper case); `None` if it is not this standard's.
    pub preset: fn(&str) -> Option<DramConfig>,
    /// Ramulator 1's configuration lines for a configuration (standard,
    /// speed and organisation by name: its timing tables are built in).
    pub ramulator_lines: fn(&DramConfig) -> Result<String, String>,
    /// The timing Ramulator 1 uses for a configuration (its built-in table).
    pub ramulator_timing: fn(&DramConfig) -> Option<Timing>,
    /// Ramulator 1's name for the configuration's speed bin, if it has one.
    pub ramulator_speed: fn(&DramConfig) -> Option<&'static str>,
}

/// Every standard nmpsim has.
pub fn all() -> [&'static Standard; 3] {
    [&ddr4::DDR4, &hbm2::HBM2, &hbm::HBM]
}

/// A standard by name (any case).
pub fn by_name(name: &str) -> Option<&'static Standard> {
    all()
        .into_iter()
        .find(|s| s.name.eq_ignore_ascii_case(name.trim()))
}

impl Standard {
    /// The timing names a latency may use: the standard's timings and `BL`.
    pub fn latency_names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.timings.iter().map(|t| t.name).collect();
        v.push("BL");
        v
    }

    /// A command name of this standard (`field` names it in the error).
    pub fn command(&self, name: &str, field: &str) -> Result<Command, String> {
        let known = || {
            self.commands
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match Command::parse(name.trim()) {
            Some(c) if self.commands.contains(&c) => Ok(c),
            _ => Err(format!(
                "{field}: {} has no command `{name}`; its commands are {}",
                self.name,
                known()
            )),
        }
    }

    /// Checks a constraint against the standard (`field` names it in errors).
    pub fn constraint(&self, spec: &ConstraintSpec, field: &str) -> Result<Constraint, String> {
        let commands = |names: &[String], which: &str| -> Result<Vec<Command>, String> {
            if names.is_empty() {
                return Err(format!(
                    "{field}.{which}: empty; expected at least one command"
                ));
            }
            names
                .iter()
                .map(|n| self.command(n, &format!("{field}.{which}")))
                .collect()
        };
        let preceding = commands(&spec.preceding, "preceding")?;
        let following = commands(&spec.following, "following")?;
        let latency = Expr::parse(&spec.latency, &self.latency_names())
            .map_err(|e| format!("{field}.latency: {e}"))?;
        if spec.window == 0 {
            return Err(format!(
                "{field}.window: 0; expected at least 1 (the N-th last preceding command)"
            ));
        }
        if spec.sibling && spec.level != Level::Rank {
            return Err(format!(
                "{field}.sibling: only rank-level constraints can bind another node (a rank switch); this one is at the {} level",
                spec.level.name()
            ));
        }
        if spec.rule.trim().is_empty() {
            return Err(format!("{field}.rule: empty; expected the rule's name"));
        }
        Ok(Constraint {
            rule: spec.rule.clone(),
            level: spec.level,
            preceding,
            following,
            latency,
            window: spec.window,
            sibling: spec.sibling,
        })
    }

    /// The standard's constraint rows as written, in order.
    pub fn rows(&self) -> impl Iterator<Item = &'static ConstraintRow> + use<> {
        self.constraints.iter().flat_map(|seg| seg.iter())
    }

    /// The standard's own constraint rows, checked (a row that does not
    /// check is a bug in the standard's module, caught by its tests).
    pub fn constraints(&self) -> Vec<Constraint> {
        self.rows()
            .enumerate()
            .map(|(i, r)| {
                self.constraint(&r.spec(), &format!("{} constraint {}", self.name, i + 1))
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect()
    }
}

impl ConstraintRow {
    pub fn spec(&self) -> ConstraintSpec {
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect();
        ConstraintSpec {
            rule: self.rule.to_string(),
            level: self.level,
            preceding: words(self.preceding),
            following: words(self.following),
            latency: self.latency.to_string(),
            window: self.window,
            sibling: self.sibling,
        }
    }
}

impl Constraint {
    /// Evaluated with `timing` and burst length `bl`.
    pub fn evaluate(&self, timing: &Timing, bl: u32) -> Rule {
        Rule {
            rule: self.rule.clone(),
            level: self.level,
            preceding: self.preceding.clone(),
            following: self.following.clone(),
            cycles: timing.eval(&self.latency, bl).max(0) as u64,
            window: self.window,
            sibling: self.sibling,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_standards_rows_check() {
        for s in all() {
            let c = s.constraints();
            assert_eq!(c.len(), s.rows().count());
            // Every timing is used by a constraint, the refresh gap, or is a
            // documented power-state timing.
            let used: Vec<String> = c
                .iter()
                .flat_map(|c| c.latency.names().into_iter().map(str::to_string))
                .collect();
            for t in s.timings {
                assert!(
                    used.iter().any(|u| u == t.name)
                        || s.refresh_gap.contains(t.name)
                        || t.meaning.contains("not scheduled"),
                    "{}: timing {} is in no constraint",
                    s.name,
                    t.name
                );
            }
            Expr::parse(s.refresh_gap, &s.latency_names()).unwrap();
        }
    }

    #[test]
    fn a_constraint_naming_what_the_standard_lacks_is_refused() {
        let s = &ddr4::DDR4;
        let mut spec = ConstraintSpec {
            rule: "tXX".into(),
            level: Level::Bank,
            preceding: vec!["RD".into()],
            following: vec!["REFSB".into()],
            latency: "tRTP".into(),
            window: 1,
            sibling: false,
        };
        let e = s.constraint(&spec, "constraint 1").unwrap_err();
        assert!(
            e.contains("constraint 1.following")
                && e.contains("no command `REFSB`")
                && e.contains("ACT"),
            "{e}"
        );
        spec.following = vec!["ACT".into()];
        spec.latency = "tRTP + tRPX".into();
        let e = s.constraint(&spec, "constraint 1").unwrap_err();
        assert!(
            e.contains("constraint 1.latency") && e.contains("unknown timing `tRPX`"),
            "{e}"
        );
        spec.latency = "tRTP + tRP".into();
        assert!(s.constraint(&spec, "c").is_ok());
        spec.sibling = true;
        assert!(s.constraint(&spec, "c").unwrap_err().contains("c.sibling"));
    }
}
