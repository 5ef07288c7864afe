//! An independent checker of DRAM command streams: it replays a command
//! log (what a memory controller put on the command bus, cycle by cycle) and
//! reports every command-to-command constraint of the standard the log
//! breaks.
//!
//! It knows nothing of any engine's scheduler: only the bank state machine
//! (a read or write needs an open bank, an activate a closed one, a refresh
//! all banks closed) and the standard's constraint table
//! ([`crate::standard`]), evaluated with the configuration's timing
//! ([`DramConfig::rules`]). For DDR4 ([`crate::standard::ddr4::CONSTRAINTS`]):
//!
//! | rule | between |
//! |---|---|
//! | tRCD | ACT → RD/WR, same bank |
//! | tRAS | ACT → PRE, same bank |
//! | tRC | ACT → ACT, same bank |
//! | tRP | PRE → ACT, same bank; PRE (any bank) → REF |
//! | tRRD_L / tRRD_S | ACT → ACT, same bank group / rank |
//! | tFAW | at most four ACTs per rank in any tFAW window |
//! | tCCD_L / tCCD_S | RD/WR → RD and WR → WR, same bank group / rank |
//! | BL/2 | RD → RD and WR → WR anywhere: one burst on the bus at a time |
//! | tRTP | RD → PRE, same bank |
//! | tWR | WR → PRE, same bank: CWL + BL/2 + tWR (end of write data + tWR) |
//! | tWTR_L / tWTR_S | WR → RD, same bank group / rank: CWL + BL/2 + tWTR |
//! | RD→WR | RD → WR in the rank: CL + BL/2 + 2 − CWL |
//! | tRTRS | a data burst of one rank → the next burst of another: tRTRS between them |
//! | tRFC | REF → any command of the rank |
//! | tREFI | at most 9 × tREFI between refreshes of a rank (8 may be postponed) |
//!
//! A rule at a level binds commands to the same node of that level (the
//! same bank, bank group, rank, or anywhere in the channel); a `sibling` rule
//! binds commands to another node (another rank). Auto-precharge commands
//! (RDA, WRA) are RD and WR in the table's rows, and their precharge takes
//! effect at the first cycle a PRE to the bank would be legal; PREA and
//! auto-precharges count as a PRE of every bank they close; a PRE of a
//! closed bank does nothing and is only checked by the rank's rules. Where
//! the organisation has one bank group, the bank-group rules are left out
//! (the `_S` timings apply, DRAMsim3's convention).
//!
//! Bank numbers are flat within a rank: `bankgroup * banks_per_group + bank`.
//! Rules are only checked against earlier commands of the log, so a log may
//! start at any cycle with all banks closed.

use std::collections::VecDeque;
use std::path::Path;

use crate::config::{DramConfig, Timing};
use crate::error::SimError;
use crate::standard::{Level, Rule};

/// A DRAM command as it appears in a command log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Act,
    Pre,
    /// Precharge all banks of the rank.
    PreA,
    Rd,
    Wr,
    /// Read with auto-precharge.
    Rda,
    /// Write with auto-precharge.
    Wra,
    Ref,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Act => "ACT",
            Command::Pre => "PRE",
            Command::PreA => "PREA",
            Command::Rd => "RD",
            Command::Wr => "WR",
            Command::Rda => "RDA",
            Command::Wra => "WRA",
            Command::Ref => "REF",
        }
    }

    pub fn parse(s: &str) -> Option<Command> {
        Some(match s {
            "ACT" => Command::Act,
            "PRE" => Command::Pre,
            "PREA" => Command::PreA,
            "RD" => Command::Rd,
            "WR" => Command::Wr,
            "RDA" => Command::Rda,
            "WRA" => Command::Wra,
            "REF" => Command::Ref,
            _ => return None,
        })
    }

    fn needs_bank(self) -> bool {
        !matches!(self, Command::PreA | Command::Ref)
    }

    /// Every command, in the order of [`Command::index`].
    pub const ALL: [Command; 8] = [
        Command::Act,
        Command::Pre,
        Command::PreA,
        Command::Rd,
        Command::Wr,
        Command::Rda,
        Command::Wra,
        Command::Ref,
    ];

    /// Position in [`Command::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

const COMMANDS: usize = Command::ALL.len();

/// The time of a command that has not been issued yet.
const NEVER: u64 = u64::MAX;

/// One command of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandRecord {
    pub cycle: u64,
    pub rank: u32,
    pub command: Command,
    /// Flat bank within the rank (`bankgroup * banks_per_group + bank`);
    /// ignored for PREA and REF.
    pub bank: u32,
}

/// A broken rule: which command (index in the log), when, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub index: usize,
    pub cycle: u64,
    pub rule: String,
    pub detail: String,
    /// The earlier command and this one, for a timing rule.
    pub between: Option<(Command, Command)>,
}

impl Violation {
    /// Whether this is tRTRS broken between two write bursts of different
    /// ranks: the one rule Ramulator's DDR4 model and DRAMsim3 both break.
    pub fn is_write_to_write_rank_switch(&self) -> bool {
        self.rule == "tRTRS"
            && matches!(
                self.between,
                Some((Command::Wr | Command::Wra, Command::Wr | Command::Wra))
            )
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "command {} at cycle {}: {} ({})",
            self.index, self.cycle, self.rule, self.detail
        )
    }
}

/// The organisation and rules a log is checked against.
#[derive(Clone, Debug)]
pub struct Checker {
    /// The timing the rules were evaluated with.
    pub timing: Timing,
    pub ranks: u32,
    pub bankgroups: u32,
    pub banks_per_group: u32,
    /// The standard's rules, evaluated with `timing`.
    pub rules: Vec<Rule>,
    /// The longest gap between refreshes of a rank, in cycles.
    pub refresh_gap: u64,
}

/// One rule as the replay applies it to a following command.
#[derive(Clone, Copy, Debug)]
struct Check {
    /// Index in [`Checker::rules`].
    rule: usize,
    level: Level,
    sibling: bool,
    preceding: Command,
    gap: u64,
    /// Index of the ring of the last `window` preceding commands, for a
    /// rule with a window above 1.
    ring: Option<usize>,
}

impl Checker {
    /// The checker for `config`'s organisation with its own timing.
    pub fn for_config(config: &DramConfig) -> Self {
        Checker::with_timing(config, config.timing.clone())
    }

    /// The checker for `config`'s organisation and rules with another
    /// timing table (e.g. [`DramConfig::ramulator_timing`], to check
    /// Ramulator against the table it was built with).
    pub fn with_timing(config: &DramConfig, timing: Timing) -> Self {
        Checker {
            rules: config.rules_with(&timing),
            refresh_gap: config.refresh_gap_with(&timing),
            timing,
            ranks: config.ranks,
            bankgroups: config.org.bankgroups,
            banks_per_group: config.org.banks_per_group,
        }
    }

    fn banks(&self) -> u32 {
        self.bankgroups * self.banks_per_group
    }

    /// Every violation in `log`, in log order. Commands must be in
    /// non-decreasing cycle order (a log out of order is itself reported).
    pub fn check(&self, log: &[CommandRecord]) -> Vec<Violation> {
        let mut replay = self.replay();
        let mut out = Vec::new();
        replay.feed(log, &mut out);
        replay.end(&mut out);
        out
    }

    /// A replay to feed a log in parts, as an engine issues it, so that a
    /// long run's log need not be held whole: [`Replay::feed`] each part in
    /// order, then [`Replay::end`]. The violations are those of
    /// [`check`](Self::check) on the whole log.
    pub fn replay(&self) -> Replay {
        let one_group = self.bankgroups == 1;
        let mut checks: Vec<Vec<Check>> = vec![Vec::new(); COMMANDS];
        let mut rings: Vec<(Level, Command, u32)> = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            if one_group && r.level == Level::BankGroup {
                continue;
            }
            for &p in &r.preceding {
                let ring = (r.window > 1).then(|| {
                    let key = (r.level, p, r.window);
                    rings.iter().position(|k| *k == key).unwrap_or_else(|| {
                        rings.push(key);
                        rings.len() - 1
                    })
                });
                for &f in &r.following {
                    checks[f.index()].push(Check {
                        rule: i,
                        level: r.level,
                        sibling: r.sibling,
                        preceding: p,
                        gap: r.cycles,
                        ring,
                    });
                }
            }
        }
        let nodes = self.node_count();
        Replay {
            checker: self.clone(),
            checks,
            ring_keys: rings.clone(),
            rings: vec![VecDeque::new(); rings.len() * nodes],
            last: vec![[NEVER; COMMANDS]; nodes],
            rings_of: (0..COMMANDS)
                .map(|c| {
                    (0..rings.len())
                        .filter(|&k| rings[k].1.index() == c)
                        .collect()
                })
                .collect(),
            open: vec![false; (self.ranks * self.banks()) as usize],
            refresh: vec![None; self.ranks as usize],
            prev_cycle: 0,
            commands: 0,
            last_cycle: None,
        }
    }

    fn node_count(&self) -> usize {
        let r = self.ranks as usize;
        1 + r + r * self.bankgroups as usize + r * self.banks() as usize
    }
}

/// A log being checked part by part (see [`Checker::replay`]).
#[derive(Clone)]
pub struct Replay {
    checker: Checker,
    /// The checks each following command is subject to, by command index.
    checks: Vec<Vec<Check>>,
    /// (level, command, window) of each ring, and the rings: the last
    /// `window` times of the command at each node, ring-major.
    ring_keys: Vec<(Level, Command, u32)>,
    rings: Vec<VecDeque<u64>>,
    /// The latest time of each command at each node (channel, ranks, bank
    /// groups, banks); [`NEVER`] before the first.
    last: Vec<[u64; COMMANDS]>,
    /// The rings each command enters, by command index.
    rings_of: Vec<Vec<usize>>,
    /// Whether each bank (rank-major) is open.
    open: Vec<bool>,
    /// The last refresh of each rank.
    refresh: Vec<Option<u64>>,
    prev_cycle: u64,
    /// Commands fed so far.
    commands: usize,
    last_cycle: Option<u64>,
}

/// Where a command goes: its rank, bank group and flat bank.
#[derive(Clone, Copy)]
struct Place {
    rank: usize,
    group: usize,
    bank: usize,
}

impl Replay {
    /// Checks the next commands of the log; appends what they break to `out`
    /// (indices count from the start of the whole log).
    pub fn feed(&mut self, log: &[CommandRecord], out: &mut Vec<Violation>) {
        for rec in log {
            self.one(rec, out);
        }
    }

    /// Commands fed so far.
    pub fn commands(&self) -> usize {
        self.commands
    }

    /// The end of the log: a rank left unrefreshed for too long by its last
    /// command breaks tREFI.
    pub fn end(&self, out: &mut Vec<Violation>) {
        let Some(last) = self.last_cycle else {
            return;
        };
        let limit = self.checker.refresh_gap;
        for (rank, r) in self.refresh.iter().enumerate() {
            let since = r.unwrap_or(0);
            if last > since + limit {
                out.push(Violation {
                    index: self.commands,
                    cycle: last,
                    rule: "tREFI".into(),
                    detail: format!(
                        "rank {rank} not refreshed for {} cycles; at most {limit}",
                        last - since
                    ),
                    between: None,
                });
            }
        }
    }

    /// The node of `level` that `at` is in.
    fn node(&self, level: Level, at: Place) -> usize {
        self.nodes(at)[level as usize]
    }

    /// The nodes `at` is in, by level (channel, rank, bank group, bank).
    fn nodes(&self, at: Place) -> [usize; 4] {
        let c = &self.checker;
        let r = c.ranks as usize;
        [
            0,
            1 + at.rank,
            1 + r + at.rank * c.bankgroups as usize + at.group,
            1 + r + r * c.bankgroups as usize + at.rank * c.banks() as usize + at.bank,
        ]
    }

    /// The place of flat bank `bank` of `rank`.
    fn place(&self, rank: usize, bank: usize) -> Place {
        Place {
            rank,
            group: bank / self.checker.banks_per_group as usize,
            bank,
        }
    }

    /// The time a check counts from at `node`: the last preceding command,
    /// or for a window the N-th last (none until there are N).
    fn after(&self, ch: &Check, node: usize) -> Option<u64> {
        match ch.ring {
            None => Some(self.last[node][ch.preceding.index()]).filter(|&a| a != NEVER),
            Some(k) => {
                let ring = &self.rings[k * self.last.len() + node];
                if ring.len() == self.ring_keys[k].2 as usize {
                    ring.front().copied()
                } else {
                    None
                }
            }
        }
    }

    /// Checks `command` at `at` against the rules of the levels in `levels`
    /// (a mask of `1 << level`).
    fn apply_checks(&self, command: Command, at: Place, levels: u8, cx: &mut Ctx) {
        let here = self.nodes(at);
        for ch in &self.checks[command.index()] {
            if levels & (1 << ch.level as u8) == 0 {
                continue;
            }
            if ch.sibling {
                for o in (0..self.checker.ranks as usize).filter(|&o| o != at.rank) {
                    let node = self.node(ch.level, Place { rank: o, ..at });
                    if let Some(a) = self.after(ch, node) {
                        if cx.now < a + ch.gap {
                            self.violation(ch, command, a, Some(o), cx);
                        }
                    }
                }
            } else if let Some(a) = self.after(ch, here[ch.level as usize]) {
                if cx.now < a + ch.gap {
                    self.violation(ch, command, a, None, cx);
                }
            }
        }
    }

    /// Reports `command` breaking `ch`, `a` being the time it counts from
    /// (in rank `other` for a sibling rule).
    fn violation(&self, ch: &Check, command: Command, a: u64, other: Option<usize>, cx: &mut Ctx) {
        let rule = &self.checker.rules[ch.rule];
        let place = match (ch.level, other) {
            (_, Some(o)) => format!("in rank {o}"),
            (Level::Bank, _) => "to the bank".into(),
            (Level::BankGroup, _) => "in the bank group".into(),
            (Level::Rank, _) => "in the rank".into(),
            (Level::Channel, _) => "in the channel".into(),
        };
        let which = match ch.ring {
            Some(k) => format!("the {}th-last {}", self.ring_keys[k].2, ch.preceding.name()),
            None => ch.preceding.name().to_string(),
        };
        cx.out.push(Violation {
            index: cx.index,
            cycle: cx.now,
            rule: rule.rule.clone(),
            detail: format!(
                "{} {} cycles after {which} {place} at cycle {a}; needs {}",
                command.name(),
                cx.now as i64 - a as i64,
                ch.gap
            ),
            between: Some((ch.preceding, command)),
        });
    }

    /// Records `command` at `at` at time `t`, at the levels from `from` up.
    fn record(&mut self, command: Command, at: Place, t: u64, from: Level) {
        let nodes = self.last.len();
        let here = self.nodes(at);
        for level in Level::ALL {
            if level > from {
                continue;
            }
            let node = here[level as usize];
            let slot = &mut self.last[node][command.index()];
            *slot = if *slot == NEVER { t } else { (*slot).max(t) };
            for &k in &self.rings_of[command.index()] {
                let (ring_level, _, window) = self.ring_keys[k];
                if ring_level == level {
                    let ring = &mut self.rings[k * nodes + node];
                    if ring.len() == window as usize {
                        ring.pop_front();
                    }
                    ring.push_back(t);
                }
            }
        }
    }

    /// The first cycle from `now` at which a PRE to the bank at `at` keeps
    /// every bank-level rule: when an auto-precharge takes effect.
    fn earliest_precharge(&self, at: Place, now: u64) -> u64 {
        let node = self.node(Level::Bank, at);
        self.checks[Command::Pre.index()]
            .iter()
            .filter(|c| c.level == Level::Bank && c.ring.is_none())
            .filter_map(|c| self.after(c, node).map(|a| a + c.gap))
            .fold(now, u64::max)
    }

    fn one(&mut self, rec: &CommandRecord, out: &mut Vec<Violation>) {
        let index = self.commands;
        self.commands += 1;
        self.last_cycle = Some(rec.cycle);
        let banks = self.checker.banks() as usize;
        let now = rec.cycle;
        let mut cx = Ctx { index, now, out };
        let prev_cycle = self.prev_cycle;
        if now < prev_cycle {
            cx.fail(
                "order",
                format!("cycle {now} comes after cycle {prev_cycle}"),
            );
        }
        self.prev_cycle = prev_cycle.max(now);
        if rec.rank >= self.checker.ranks {
            cx.fail(
                "address",
                format!("rank {} of a {}-rank channel", rec.rank, self.checker.ranks),
            );
            return;
        }
        if rec.command.needs_bank() && rec.bank as usize >= banks {
            cx.fail(
                "address",
                format!("bank {} of a {banks}-bank rank", rec.bank),
            );
            return;
        }
        let rank = rec.rank as usize;
        let bank = if rec.command.needs_bank() {
            rec.bank as usize
        } else {
            0
        };
        let at = self.place(rank, bank);
        let flat = rank * banks + bank;
        // Level masks: every level, and the channel and rank only.
        const ALL_LEVELS: u8 = 0b1111;
        let above_bank: u8 = (1 << Level::Channel as u8) | (1 << Level::Rank as u8);
        match rec.command {
            Command::Act => {
                if self.open[flat] {
                    cx.fail("state", format!("ACT to bank {bank}, which is open"));
                }
                self.apply_checks(Command::Act, at, ALL_LEVELS, &mut cx);
                self.record(Command::Act, at, now, Level::Bank);
                self.open[flat] = true;
            }
            Command::Rd | Command::Rda | Command::Wr | Command::Wra => {
                if !self.open[flat] {
                    cx.fail(
                        "state",
                        format!("{} to bank {bank}, which is closed", rec.command.name()),
                    );
                }
                self.apply_checks(rec.command, at, ALL_LEVELS, &mut cx);
                self.record(rec.command, at, now, Level::Bank);
                if matches!(rec.command, Command::Rda | Command::Wra) {
                    let t = self.earliest_precharge(at, now);
                    self.record(Command::Pre, at, t, Level::Bank);
                    self.open[flat] = false;
                }
            }
            Command::Pre => {
                if self.open[flat] {
                    self.apply_checks(Command::Pre, at, ALL_LEVELS, &mut cx);
                    self.record(Command::Pre, at, now, Level::Bank);
                    self.open[flat] = false;
                } else {
                    self.apply_checks(Command::Pre, at, above_bank, &mut cx);
                }
            }
            Command::PreA => {
                for b in 0..banks {
                    if self.open[rank * banks + b] {
                        let p = self.place(rank, b);
                        self.apply_checks(
                            Command::Pre,
                            p,
                            (1 << Level::Bank as u8) | (1 << Level::BankGroup as u8),
                            &mut cx,
                        );
                    }
                }
                self.apply_checks(Command::PreA, at, above_bank, &mut cx);
                for b in 0..banks {
                    if self.open[rank * banks + b] {
                        let p = self.place(rank, b);
                        self.record(Command::Pre, p, now, Level::Bank);
                        self.open[rank * banks + b] = false;
                    }
                }
                self.record(Command::PreA, at, now, Level::Rank);
            }
            Command::Ref => {
                if let Some(open) = (0..banks).find(|&b| self.open[rank * banks + b]) {
                    cx.fail("state", format!("REF while bank {open} is open"));
                }
                self.apply_checks(Command::Ref, at, above_bank, &mut cx);
                let limit = self.checker.refresh_gap;
                let since = self.refresh[rank].unwrap_or(0);
                if now > since + limit {
                    cx.fail(
                        "tREFI",
                        format!(
                            "{} cycles since the last refresh; at most {limit}",
                            now - since
                        ),
                    );
                }
                self.refresh[rank] = Some(now);
                self.record(Command::Ref, at, now, Level::Rank);
            }
        }
    }
}

/// Where the violations of one command go.
struct Ctx<'a> {
    index: usize,
    now: u64,
    out: &'a mut Vec<Violation>,
}

impl Ctx<'_> {
    fn fail(&mut self, rule: &'static str, detail: String) {
        self.out.push(Violation {
            index: self.index,
            cycle: self.now,
            rule: rule.into(),
            detail,
            between: None,
        });
    }
}

/// Reads Ramulator's per-rank command traces (`clk,CMD[,bank]` lines) from
/// `paths[rank]` into one log ordered by cycle (stable: within a cycle, by rank).
///
/// A DDR4 trace numbers a rank's banks as the checker does (bank group
/// times banks a group, plus bank). An HBM trace gives the bank within its
/// group only, so its log names each bank exactly for traffic kept to bank
/// group 0 (then the two numberings agree); with several groups, banks of
/// different groups share a number and the log is not checkable as is.
pub fn read_ramulator_traces(paths: &[&Path]) -> Result<Vec<CommandRecord>, SimError> {
    let mut log = Vec::new();
    for (rank, path) in paths.iter().enumerate() {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
        for (i, line) in text.lines().enumerate() {
            let line_no = i as u64 + 1;
            let bad = |what: &str| SimError::parse(path, line_no, format!("{what} in `{line}`"));
            let mut f = line.split(',');
            let cycle: u64 = f
                .next()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| bad("expected a cycle number first"))?;
            let name = f
                .next()
                .ok_or_else(|| bad("expected a command after the cycle"))?;
            let command = Command::parse(name.trim())
                .ok_or_else(|| bad("expected ACT, PRE, PREA, RD, WR, RDA, WRA or REF"))?;
            let bank = if command.needs_bank() {
                f.next()
                    .and_then(|s| s.trim().parse().ok())
                    .ok_or_else(|| bad("expected a bank number third"))?
            } else {
                0
            };
            log.push(CommandRecord {
                cycle,
                rank: rank as u32,
                command,
                bank,
            });
        }
    }
    log.sort_by_key(|r| r.cycle);
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker() -> Checker {
        Checker::for_config(&DramConfig::preset("DDR4-3200-x8").unwrap())
    }

    fn rec(cycle: u64, command: Command, bank: u32) -> CommandRecord {
        CommandRecord {
            cycle,
            rank: 0,
            command,
            bank,
        }
    }

    /// A legal open-row sequence built from the timing table itself.
    fn legal(c: &Checker) -> Vec<CommandRecord> {
        let t = &c.timing;
        let bpg = c.banks_per_group;
        let mut v = Vec::new();
        let act0 = 10;
        v.push(rec(act0, Command::Act, 0));
        // Other bank group, tRRD_S later; same group tRRD_L after the first.
        v.push(rec(act0 + t["tRRD_S"] as u64, Command::Act, bpg));
        let act2 = act0 + (t["tRRD_L"].max(2 * t["tRRD_S"])) as u64;
        v.push(rec(act2, Command::Act, 1));
        let rd0 = act0 + t["tRCD"] as u64;
        v.push(rec(rd0, Command::Rd, 0));
        v.push(rec(rd0 + t["tCCD_L"] as u64, Command::Rd, 0));
        let rd2 = (rd0 + t["tCCD_L"] as u64 + t["tCCD_S"] as u64)
            .max(act0 + t["tRRD_S"] as u64 + t["tRCD"] as u64);
        v.push(rec(rd2, Command::Rd, bpg));
        let wr = rd2 + (t["CL"] as u64 + 4 + 2).saturating_sub(t["CWL"] as u64);
        let wr = wr.max(act2 + t["tRCD"] as u64);
        v.push(rec(wr, Command::Wr, 1));
        let wr_end = wr + t["CWL"] as u64 + 4;
        let rd3 = (wr_end + t["tWTR_S"] as u64).max(wr + t["tCCD_S"] as u64);
        v.push(rec(rd3, Command::Rd, bpg));
        let pre0 = (act0 + t["tRAS"] as u64)
            .max(rd0 + t["tCCD_L"] as u64 + t["tRTP"] as u64)
            .max(rd3);
        v.push(rec(pre0, Command::Pre, 0));
        let pre1 = (wr_end + t["tWR"] as u64).max(pre0);
        v.push(rec(pre1, Command::Pre, 1));
        let prea = pre1
            .max(rd3 + t["tRTP"] as u64)
            .max(act0 + t["tRRD_S"] as u64 + t["tRAS"] as u64);
        v.push(rec(prea, Command::PreA, 0));
        let refc = prea + t["tRP"] as u64;
        v.push(rec(refc, Command::Ref, 0));
        let act3 = (refc + t["tRFC"] as u64).max(act0 + t["tRC"] as u64);
        v.push(rec(act3, Command::Act, 0));
        v
    }

    #[test]
    fn a_legal_sequence_passes() {
        let c = checker();
        let v = c.check(&legal(&c));
        assert!(v.is_empty(), "{:#?}", v);
    }

    #[test]
    fn every_planted_violation_is_caught_by_its_rule() {
        let c = checker();
        let base = legal(&c);
        // (index of the command moved one cycle earlier, the rule that must fire)
        let cases = [
            (1, "tRRD_S"),
            (3, "tRCD"),
            (4, "tCCD_L"),
            (7, "tWTR_S"),
            (9, "tWR"),
            (11, "tRP"),
            (12, "tRFC"),
        ];
        for (i, rule) in cases {
            let mut log = base.clone();
            // Only the moved command may break a rule, and it must break this one.
            let tight = c.check(&log).is_empty();
            assert!(tight);
            log[i].cycle -= 1;
            let v = c.check(&log);
            assert!(
                v.iter().any(|x| x.index == i && x.rule == rule),
                "moving command {i} ({:?}) one cycle earlier should break {rule}: {v:#?}",
                log[i].command
            );
        }
    }

    /// A log fed in parts, split anywhere, breaks the same rules at the same
    /// indices as the whole log checked at once.
    #[test]
    fn a_replay_fed_in_parts_finds_what_check_finds() {
        let c = checker();
        let mut log = legal(&c);
        // Three planted violations, and a long silence for the end's tREFI.
        for i in [3, 7, 11] {
            log[i].cycle -= 1;
        }
        let last = log.last().unwrap().cycle;
        log.push(rec(last + 10 * c.timing["tREFI"] as u64, Command::Act, 0));
        let whole = c.check(&log);
        assert!(whole.len() >= 4, "{whole:#?}");
        assert!(
            whole
                .iter()
                .any(|v| v.rule == "tREFI" && v.index == log.len())
        );
        for cut in [vec![], vec![1], vec![5, 6], vec![2, 7, 12]] {
            let mut replay = c.replay();
            let mut got = Vec::new();
            let mut from = 0;
            for &to in cut.iter().chain(std::iter::once(&log.len())) {
                replay.feed(&log[from..to], &mut got);
                from = to;
            }
            replay.end(&mut got);
            assert_eq!(replay.commands(), log.len());
            assert_eq!(got, whole, "cut at {cut:?}");
        }
    }

    #[test]
    fn state_faw_and_refresh_rules() {
        let c = checker();
        let t = c.timing.clone();
        // RD to a closed bank; ACT to an open one.
        let v = c.check(&[rec(0, Command::Rd, 3)]);
        assert_eq!(v[0].rule, "state");
        let v = c.check(&[
            rec(0, Command::Act, 3),
            rec(t["tRC"] as u64 + 5, Command::Act, 3),
        ]);
        assert!(v.iter().any(|x| x.rule == "state"), "{v:?}");
        // Five ACTs to different bank groups, tRRD_S apart: the fifth breaks tFAW
        // whenever 4 x tRRD_S < tFAW.
        let acts: Vec<_> = (0..5)
            .map(|i| {
                rec(
                    i * t["tRRD_S"] as u64,
                    Command::Act,
                    (i as u32 % 4) * c.banks_per_group + i as u32 / 4,
                )
            })
            .collect();
        let v = c.check(&acts);
        assert_eq!(
            4 * t["tRRD_S"] < t["tFAW"],
            v.iter().any(|x| x.rule == "tFAW" && x.index == 4),
            "{v:?}"
        );
        // No refresh for ten tREFI.
        let long = 10 * t["tREFI"] as u64;
        let v = c.check(&[rec(0, Command::Act, 0), rec(long, Command::Pre, 0)]);
        assert!(v.iter().any(|x| x.rule == "tREFI"), "{v:?}");
        // REF with a bank open.
        let v = c.check(&[rec(0, Command::Act, 0), rec(100, Command::Ref, 0)]);
        assert!(v.iter().any(|x| x.rule == "state"), "{v:?}");
    }

    #[test]
    fn reads_ramulator_trace_lines_and_names_bad_ones() {
        let dir = std::env::temp_dir().join(format!("nmpsim-jedec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("rank0.cmdtrace");
        std::fs::write(&p, "5,ACT,3\n27,RD,3\n60,PREA\n80,REF\n").unwrap();
        let log = read_ramulator_traces(&[p.as_path()]).unwrap();
        assert_eq!(log.len(), 4);
        assert_eq!(log[1], rec(27, Command::Rd, 3));
        std::fs::write(&p, "5,ACT,3\n27,XX,3\n").unwrap();
        let e = read_ramulator_traces(&[p.as_path()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
