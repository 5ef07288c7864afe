//! An independent checker of DDR4 command streams: it replays a command log
//! (what a memory controller put on the command bus, cycle by cycle) and
//! reports every JEDEC command-to-command constraint the log breaks.
//!
//! It knows nothing of any engine's scheduler: only the bank state machine
//! (a read or write needs an open bank, an activate a closed one, a refresh
//! all banks closed) and the timing rules between commands, taken from a
//! [`Timing`] table:
//!
//! | rule | between |
//! |---|---|
//! | tRCD | ACT → RD/WR, same bank |
//! | tRAS | ACT → PRE, same bank |
//! | tRC | ACT → ACT, same bank |
//! | tRP | PRE → ACT, same bank; PRE (any bank) → REF |
//! | tRRD_L / tRRD_S | ACT → ACT, other bank of the same / another bank group |
//! | tFAW | at most four ACTs per rank in any tFAW window |
//! | tCCD_L / tCCD_S | RD → RD and WR → WR, same / other bank group |
//! | tRTP | RD → PRE, same bank (RDA: its own precharge) |
//! | tWR | end of write data → PRE, same bank (CWL + BL/2 + tWR) |
//! | tWTR_L / tWTR_S | end of write data → RD, same / other bank group (CWL + BL/2 + tWTR) |
//! | RD→WR | RD → WR anywhere in the rank: CL + BL/2 + 2 − CWL |
//! | tRTRS | a data burst (RD: CL after the command, WR: CWL) of one rank → the next burst of another: tRTRS between them |
//! | tRFC | REF → any command of the rank |
//! | tREFI | at most 9 × tREFI between refreshes of a rank (8 may be postponed) |
//!
//! Bank numbers are flat within a rank: `bankgroup * banks_per_group + bank`.
//! Rules are only checked against earlier commands of the log, so a log may
//! start at any cycle with all banks closed.

use std::collections::VecDeque;
use std::path::Path;

use crate::config::{DramConfig, Timing};
use crate::error::SimError;

/// A DDR4 command as it appears in a command log.
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
}

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
    pub rule: &'static str,
    pub detail: String,
}

impl Violation {
    /// Whether this is tRTRS broken between two write bursts of different
    /// ranks: the one rule Ramulator's DDR4 model and DRAMsim3 both break.
    pub fn is_write_to_write_rank_switch(&self) -> bool {
        // The detail is written by `data_bus_rule`.
        self.rule == "tRTRS"
            && self.detail.starts_with("WR data")
            && self.detail.contains("'s WR data")
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

/// The rank organisation and timing a log is checked against.
#[derive(Clone, Debug)]
pub struct Checker {
    pub timing: Timing,
    pub ranks: u32,
    pub bankgroups: u32,
    pub banks_per_group: u32,
    /// Data burst on the bus, in cycles (BL/2: 4 for BL8).
    pub burst_cycles: u32,
}

/// "Never happened" for the last-time registers.
const NEVER: Option<u64> = None;

#[derive(Clone, Default)]
struct BankState {
    open: bool,
    act: Option<u64>,
    /// When the bank's last precharge took effect (PRE, PREA, or the
    /// implicit one of RDA / WRA).
    pre: Option<u64>,
    rd: Option<u64>,
    /// End of the last write's data burst (WR cycle + CWL + BL/2).
    wr_end: Option<u64>,
}

#[derive(Clone, Default)]
struct RankState {
    banks: Vec<BankState>,
    /// Last ACT / RD / WR (data end) per bank group.
    group_act: Vec<Option<u64>>,
    group_rd: Vec<Option<u64>>,
    group_wr: Vec<Option<u64>>,
    group_wr_end: Vec<Option<u64>>,
    rank_act: Option<u64>,
    rank_rd: Option<u64>,
    rank_wr: Option<u64>,
    rank_wr_end: Option<u64>,
    /// The last four ACTs of the rank.
    faw: VecDeque<u64>,
    refresh: Option<u64>,
}

impl Checker {
    /// The checker for `config`'s organisation with its own JEDEC timing.
    pub fn for_config(config: &DramConfig) -> Self {
        Checker::with_timing(config, config.timing.clone())
    }

    /// The checker for `config`'s organisation with another timing table
    /// (e.g. [`DramConfig::ramulator_timing`], to check Ramulator against
    /// the table it was built with).
    pub fn with_timing(config: &DramConfig, timing: Timing) -> Self {
        Checker {
            timing,
            ranks: config.ranks,
            bankgroups: config.org.bankgroups,
            banks_per_group: config.org.banks_per_group,
            burst_cycles: config.burst_cycles(),
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
        let banks = self.banks() as usize;
        let groups = self.bankgroups as usize;
        Replay {
            checker: self.clone(),
            ranks: (0..self.ranks)
                .map(|_| RankState {
                    banks: vec![BankState::default(); banks],
                    group_act: vec![NEVER; groups],
                    group_rd: vec![NEVER; groups],
                    group_wr: vec![NEVER; groups],
                    group_wr_end: vec![NEVER; groups],
                    ..RankState::default()
                })
                .collect(),
            bus: vec![None; self.ranks as usize],
            prev_cycle: 0,
            commands: 0,
            last_cycle: None,
        }
    }
}

/// A log being checked part by part (see [`Checker::replay`]).
#[derive(Clone)]
pub struct Replay {
    checker: Checker,
    ranks: Vec<RankState>,
    /// End of the last data burst of each rank on the shared bus.
    bus: Vec<Option<(u64, Command)>>,
    prev_cycle: u64,
    /// Commands fed so far.
    commands: usize,
    last_cycle: Option<u64>,
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
        let limit = 9 * self.checker.timing.trefi as u64;
        for (rank, r) in self.ranks.iter().enumerate() {
            let since = r.refresh.unwrap_or(0);
            if last > since + limit {
                out.push(Violation {
                    index: self.commands,
                    cycle: last,
                    rule: "tREFI",
                    detail: format!(
                        "rank {rank} not refreshed for {} cycles; at most {limit}",
                        last - since
                    ),
                });
            }
        }
    }

    fn one(&mut self, rec: &CommandRecord, out: &mut Vec<Violation>) {
        let index = self.commands;
        self.commands += 1;
        self.last_cycle = Some(rec.cycle);
        let t = &self.checker.timing;
        let banks = self.checker.banks() as usize;
        let bl = self.checker.burst_cycles as u64;
        let (cl, cwl) = (t.cl as u64, t.cwl as u64);
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
        let r = &mut self.ranks[rec.rank as usize];
        let rank_idx = rec.rank as usize;
        let bank = rec.bank as usize;
        let group = bank / self.checker.banks_per_group as usize;
        cx.need("tRFC", r.refresh, t.trfc as u64, "REF");
        match rec.command {
            Command::Act => {
                let b = &r.banks[bank];
                if b.open {
                    cx.fail("state", format!("ACT to bank {bank}, which is open"));
                }
                cx.need("tRP", b.pre, t.trp as u64, "its precharge");
                cx.need("tRC", b.act, t.trc as u64, "ACT to the same bank");
                cx.need(
                    "tRRD_L",
                    r.group_act[group],
                    t.trrd_l as u64,
                    "ACT in the same bank group",
                );
                cx.need("tRRD_S", r.rank_act, t.trrd_s as u64, "ACT in the rank");
                if r.faw.len() == 4 {
                    cx.need(
                        "tFAW",
                        r.faw.front().copied(),
                        t.tfaw as u64,
                        "the 4th-last ACT",
                    );
                }
                let b = &mut r.banks[bank];
                b.open = true;
                b.act = Some(now);
                r.group_act[group] = Some(now);
                r.rank_act = Some(now);
                if r.faw.len() == 4 {
                    r.faw.pop_front();
                }
                r.faw.push_back(now);
            }
            Command::Rd | Command::Rda => {
                column_opens(&r.banks[bank], bank, rec.command, t, &mut cx);
                cx.ccd(r.group_rd[group], r.rank_rd, t, RD_BEFORE);
                cx.ccd(r.group_wr[group], r.rank_wr, t, WR_BEFORE);
                cx.need(
                    "tWTR_L",
                    r.group_wr_end[group],
                    t.twtr_l as u64,
                    "the end of write data in the same bank group",
                );
                cx.need(
                    "tWTR_S",
                    r.rank_wr_end,
                    t.twtr_s as u64,
                    "the end of write data in the rank",
                );
                data_bus_rule(
                    &self.bus,
                    rank_idx,
                    now + cl,
                    t.trtrs as u64,
                    rec.command,
                    &mut cx,
                );
                let b = &mut r.banks[bank];
                b.rd = Some(now);
                r.group_rd[group] = Some(now);
                r.rank_rd = Some(now);
                self.bus[rank_idx] = Some((now + cl + bl, rec.command));
                if rec.command == Command::Rda {
                    // The precharge starts once tRAS and tRTP allow it.
                    let at = (now + t.trtp as u64).max(b.act.unwrap_or(0) + t.tras as u64);
                    b.open = false;
                    b.pre = Some(at);
                }
            }
            Command::Wr | Command::Wra => {
                column_opens(&r.banks[bank], bank, rec.command, t, &mut cx);
                cx.ccd(r.group_wr[group], r.rank_wr, t, WR_BEFORE);
                // RD -> WR: read data must clear the bus before write data.
                let rd_to_wr = (cl + bl + 2).saturating_sub(cwl);
                cx.need("RD→WR", r.rank_rd, rd_to_wr, "RD in the rank");
                data_bus_rule(
                    &self.bus,
                    rank_idx,
                    now + cwl,
                    t.trtrs as u64,
                    rec.command,
                    &mut cx,
                );
                let end = now + cwl + bl;
                let b = &mut r.banks[bank];
                b.wr_end = Some(end);
                r.group_wr[group] = Some(now);
                r.rank_wr = Some(now);
                r.group_wr_end[group] = Some(end);
                r.rank_wr_end = Some(end);
                self.bus[rank_idx] = Some((end, rec.command));
                if rec.command == Command::Wra {
                    let at = (end + t.twr as u64).max(b.act.unwrap_or(0) + t.tras as u64);
                    b.open = false;
                    b.pre = Some(at);
                }
            }
            Command::Pre => {
                precharge_rules(&r.banks[bank], t, &mut cx);
                let b = &mut r.banks[bank];
                if b.open {
                    b.open = false;
                    b.pre = Some(now);
                }
            }
            Command::PreA => {
                for b in r.banks.iter_mut() {
                    precharge_rules(b, t, &mut cx);
                    if b.open {
                        b.open = false;
                        b.pre = Some(now);
                    }
                }
            }
            Command::Ref => {
                if let Some(open) = r.banks.iter().position(|b| b.open) {
                    cx.fail("state", format!("REF while bank {open} is open"));
                }
                for b in &r.banks {
                    cx.need("tRP", b.pre, t.trp as u64, "a precharge in the rank");
                }
                let limit = 9 * t.trefi as u64;
                let since = r.refresh.unwrap_or(0);
                if now > since + limit {
                    cx.fail(
                        "tREFI",
                        format!(
                            "{} cycles since the last refresh; at most {limit}",
                            now - since
                        ),
                    );
                }
                r.refresh = Some(now);
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
            rule,
            detail,
        });
    }

    /// tCCD_L and tCCD_S after the last RD or WR in the bank group (`group`,
    /// named `what.0`) and in the rank (`rank`, named `what.1`).
    fn ccd(&mut self, group: Option<u64>, rank: Option<u64>, t: &Timing, what: (&str, &str)) {
        self.need("tCCD_L", group, t.tccd_l as u64, what.0);
        self.need("tCCD_S", rank, t.tccd_s as u64, what.1);
    }

    /// `rule` holds if `now >= after + gap` (or `after` never happened).
    fn need(&mut self, rule: &'static str, after: Option<u64>, gap: u64, what: &str) {
        if let Some(a) = after
            && self.now < a + gap
        {
            let now = self.now;
            self.fail(
                rule,
                format!(
                    "{} cycles after {what} at cycle {a}; needs {gap}",
                    now as i64 - a as i64
                ),
            );
        }
    }
}

/// A burst of `rank` starting at `start` must leave `trtrs` cycles after the
/// last burst of every other rank.
fn data_bus_rule(
    bus: &[Option<(u64, Command)>],
    rank: usize,
    start: u64,
    trtrs: u64,
    this: Command,
    cx: &mut Ctx,
) {
    for (o, last) in bus.iter().enumerate() {
        if let Some((e, prev)) = *last
            && o != rank
            && start < e + trtrs
        {
            cx.fail(
                "tRTRS",
                format!(
                    "{} data at cycle {start}, {} cycles after rank {o}'s {} data ended at {e}; needs {trtrs}",
                    this.name(),
                    start as i64 - e as i64,
                    prev.name()
                ),
            );
        }
    }
}

/// The earlier RDs and WRs [`Ctx::ccd`] names.
const RD_BEFORE: (&str, &str) = ("RD in the same bank group", "RD in the rank");
const WR_BEFORE: (&str, &str) = ("WR in the same bank group", "WR in the rank");

/// A RD's or WR's rules on its bank: open, and tRCD after its ACT.
fn column_opens(b: &BankState, bank: usize, command: Command, t: &Timing, cx: &mut Ctx) {
    if !b.open {
        cx.fail(
            "state",
            format!("{} to bank {bank}, which is closed", command.name()),
        );
    }
    cx.need("tRCD", b.act, t.trcd as u64, "ACT to the bank");
}

/// The rules a precharge of bank `b` must respect (only if it is open).
fn precharge_rules(b: &BankState, t: &Timing, cx: &mut Ctx) {
    if !b.open {
        return;
    }
    cx.need("tRAS", b.act, t.tras as u64, "ACT to the bank");
    cx.need("tRTP", b.rd, t.trtp as u64, "RD to the bank");
    cx.need(
        "tWR",
        b.wr_end,
        t.twr as u64,
        "the end of write data to the bank",
    );
}

/// Reads Ramulator's per-rank command traces (`clk,CMD[,bank]` lines) from
/// `paths[rank]` into one log ordered by cycle (stable: within a cycle, by rank).
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
        v.push(rec(act0 + t.trrd_s as u64, Command::Act, bpg));
        let act2 = act0 + (t.trrd_l.max(2 * t.trrd_s)) as u64;
        v.push(rec(act2, Command::Act, 1));
        let rd0 = act0 + t.trcd as u64;
        v.push(rec(rd0, Command::Rd, 0));
        v.push(rec(rd0 + t.tccd_l as u64, Command::Rd, 0));
        let rd2 =
            (rd0 + t.tccd_l as u64 + t.tccd_s as u64).max(act0 + t.trrd_s as u64 + t.trcd as u64);
        v.push(rec(rd2, Command::Rd, bpg));
        let wr = rd2 + (t.cl as u64 + 4 + 2).saturating_sub(t.cwl as u64);
        let wr = wr.max(act2 + t.trcd as u64);
        v.push(rec(wr, Command::Wr, 1));
        let wr_end = wr + t.cwl as u64 + 4;
        let rd3 = (wr_end + t.twtr_s as u64).max(wr + t.tccd_s as u64);
        v.push(rec(rd3, Command::Rd, bpg));
        let pre0 = (act0 + t.tras as u64)
            .max(rd0 + t.tccd_l as u64 + t.trtp as u64)
            .max(rd3);
        v.push(rec(pre0, Command::Pre, 0));
        let pre1 = (wr_end + t.twr as u64).max(pre0);
        v.push(rec(pre1, Command::Pre, 1));
        let prea = pre1
            .max(rd3 + t.trtp as u64)
            .max(act0 + t.trrd_s as u64 + t.tras as u64);
        v.push(rec(prea, Command::PreA, 0));
        let refc = prea + t.trp as u64;
        v.push(rec(refc, Command::Ref, 0));
        let act3 = (refc + t.trfc as u64).max(act0 + t.trc as u64);
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
        log.push(rec(last + 10 * c.timing.trefi as u64, Command::Act, 0));
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
            rec(t.trc as u64 + 5, Command::Act, 3),
        ]);
        assert!(v.iter().any(|x| x.rule == "state"), "{v:?}");
        // Five ACTs to different bank groups, tRRD_S apart: the fifth breaks tFAW
        // whenever 4 x tRRD_S < tFAW.
        let acts: Vec<_> = (0..5)
            .map(|i| {
                rec(
                    i * t.trrd_s as u64,
                    Command::Act,
                    (i as u32 % 4) * c.banks_per_group + i as u32 / 4,
                )
            })
            .collect();
        let v = c.check(&acts);
        assert_eq!(
            4 * t.trrd_s < t.tfaw,
            v.iter().any(|x| x.rule == "tFAW" && x.index == 4),
            "{v:?}"
        );
        // No refresh for ten tREFI.
        let long = 10 * t.trefi as u64;
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
