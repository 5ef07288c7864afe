//! Command-to-command delays in cycles ([`TimingTable`]), derived once from a
//! preset's [`Timing`](crate::config::Timing): the constraints every engine of
//! this crate reads (the native engine schedules by them; the DRAMsim3
//! wrapper takes its read latency from them).

use crate::config::DramConfig;

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
    pub act_to_rw: u64,
    pub faw: u64,
    pub ref_to_act: u64,
    pub refi: u64,
}

impl TimingTable {
    pub fn of(config: &DramConfig) -> Self {
        let t = &config.timing;
        let bl = config.burst_cycles() as i64;
        let (cl, cwl) = (t.cl as i64, t.cwl as i64);
        // The checker's read-to-write turnaround uses a 2-cycle gap; never less.
        let rtrs = t.trtrs.max(2) as i64;
        let read_delay = cl + bl;
        let write_delay = cwl + bl;
        let one_group = config.org.bankgroups == 1;
        let pick = |l: u32, s: u32| if one_group { s } else { l } as i64;
        let c = |x: i64| x.max(0) as u64;
        TimingTable {
            read_delay: c(read_delay),
            burst: c(bl),
            rd_to_rd_l: c(bl.max(pick(t.tccd_l, t.tccd_s))),
            rd_to_rd_s: c(bl.max(t.tccd_s as i64)),
            rd_to_rd_o: c(bl + rtrs),
            rd_to_wr: c(cl + bl - cwl + rtrs),
            rd_to_wr_o: c(read_delay + bl + rtrs - write_delay),
            rd_to_pre: c(t.trtp as i64),
            wr_to_rd_l: c(write_delay + pick(t.twtr_l, t.twtr_s)),
            wr_to_rd_s: c(write_delay + t.twtr_s as i64),
            wr_to_rd_o: c(write_delay + bl + rtrs - read_delay),
            wr_to_wr_l: c(bl.max(pick(t.tccd_l, t.tccd_s))),
            wr_to_wr_s: c(bl.max(t.tccd_s as i64)),
            wr_to_wr_o: c(bl + rtrs),
            wr_to_pre: c(cwl + bl + t.twr as i64),
            pre_to_act: c(t.trp as i64),
            act_to_act: c(t.trc as i64),
            act_to_act_l: c(pick(t.trrd_l, t.trrd_s)),
            act_to_act_s: c(t.trrd_s as i64),
            act_to_pre: c(t.tras as i64),
            act_to_rw: c(t.trcd as i64),
            faw: c(t.tfaw as i64),
            ref_to_act: c(t.trfc as i64),
            refi: c(t.trefi as i64),
        }
    }
}
