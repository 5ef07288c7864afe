//! Command-to-command delays in cycles ([`TimingTable`]), derived once from a
//! configuration's rules (its standard's constraint table evaluated with its
//! timing, [`crate::standard`]): the delays the native engine schedules by
//! (the DRAMsim3 wrapper takes its read latency from them).

use crate::config::DramConfig;
use crate::jedec::Command;
use crate::standard::{self, Scope};

/// Command-to-command delays in cycles, derived once from a preset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimingTable {
    /// CL + BL/2: READ to data returned.
    pub read_delay: u64,
    pub burst: u64,
    pub rd_to_rd_l: u64,
    pub rd_to_rd_s: u64,
    /// READ to READ in another rank: BL/2 + tRTRS.
    pub rd_to_rd_o: u64,
    /// READ to WRITE in the same rank: CL + BL/2 - CWL + tRTRS.
    pub rd_to_wr: u64,
    pub rd_to_wr_o: u64,
    pub rd_to_pre: u64,
    /// WRITE to READ, same bank group: CWL + BL/2 + tWTR_L.
    pub wr_to_rd_l: u64,
    pub wr_to_rd_s: u64,
    pub wr_to_rd_o: u64,
    pub wr_to_wr_l: u64,
    pub wr_to_wr_s: u64,
    /// WRITE to WRITE in another rank: BL/2 + tRTRS (DRAMsim3 uses BL/2 alone,
    /// which breaks tRTRS; we do not).
    pub wr_to_wr_o: u64,
    /// WRITE to PRECHARGE: CWL + BL/2 + tWR.
    pub wr_to_pre: u64,
    pub pre_to_act: u64,
    pub act_to_act: u64,
    pub act_to_act_l: u64,
    pub act_to_act_s: u64,
    pub act_to_pre: u64,
    /// ACT to READ (tRCD; HBM's tRCDRD).
    pub act_to_rd: u64,
    /// ACT to WRITE (tRCD; HBM's tRCDWR).
    pub act_to_wr: u64,
    pub faw: u64,
    pub ref_to_act: u64,
    pub refi: u64,
}

impl TimingTable {
    /// The delays of `config`'s rules ([`DramConfig::rules`]): for each
    /// pair of commands and each place the second goes (same bank, bank
    /// group, rank, another rank), the largest latency of the rules that
    /// bind it ([`standard::delay`]). One departure follows DRAMsim3's
    /// controller, which the engine models: within a rank, a WRITE after a
    /// READ also waits the rank-switch turnaround (the larger of the same-
    /// and other-rank READ-to-WRITE rules).
    pub fn of(config: &DramConfig) -> Self {
        let rules = config.rules();
        let one_group = config.org.bankgroups == 1;
        let d = |p: Command, f: Command, s: Scope| standard::delay(&rules, p, f, s, one_group);
        use Command::{Act, Pre, Rd, Ref, Wr};
        use Scope::{OtherRank, SameBank, SameGroup, SameRank};
        let bl = config.burst_cycles() as u64;
        let rd_to_wr = d(Rd, Wr, SameRank).max(d(Rd, Wr, OtherRank));
        TimingTable {
            read_delay: config.timing["CL"] as u64 + bl,
            burst: bl,
            rd_to_rd_l: d(Rd, Rd, SameGroup),
            rd_to_rd_s: d(Rd, Rd, SameRank),
            rd_to_rd_o: d(Rd, Rd, OtherRank),
            rd_to_wr,
            rd_to_wr_o: d(Rd, Wr, OtherRank),
            rd_to_pre: d(Rd, Pre, SameBank),
            wr_to_rd_l: d(Wr, Rd, SameGroup),
            wr_to_rd_s: d(Wr, Rd, SameRank),
            wr_to_rd_o: d(Wr, Rd, OtherRank),
            wr_to_wr_l: d(Wr, Wr, SameGroup),
            wr_to_wr_s: d(Wr, Wr, SameRank),
            wr_to_wr_o: d(Wr, Wr, OtherRank),
            wr_to_pre: d(Wr, Pre, SameBank),
            pre_to_act: d(Pre, Act, SameBank),
            act_to_act: d(Act, Act, SameBank),
            act_to_act_l: d(Act, Act, SameGroup),
            act_to_act_s: d(Act, Act, SameRank),
            act_to_pre: d(Act, Pre, SameBank),
            act_to_rd: d(Act, Rd, SameBank),
            act_to_wr: d(Act, Wr, SameBank),
            faw: rules
                .iter()
                .filter(|r| r.window == 4 && r.binds(Act, Act, SameRank, one_group))
                .map(|r| r.cycles)
                .max()
                .unwrap_or(0),
            ref_to_act: d(Ref, Act, SameRank),
            refi: config.timing["tREFI"] as u64,
        }
    }
}
