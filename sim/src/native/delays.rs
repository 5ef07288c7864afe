//! The command-to-command delays the engine adds to the current cycle
//! ([`Delays`]), taken from the [`TimingTable`].

use crate::timing::TimingTable;

/// The delays of [`TimingTable`] the commands add to the current cycle, as
/// `i32` (the engine's time unit).
#[derive(Clone, Copy, Debug)]
pub(super) struct Delays {
    pub(super) act_to_act: i32,
    pub(super) act_to_rd: i32,
    pub(super) act_to_wr: i32,
    pub(super) act_to_pre: i32,
    pub(super) act_to_act_l: i32,
    pub(super) act_to_act_s: i32,
    pub(super) faw: i32,
    pub(super) pre_to_act: i32,
    pub(super) ref_to_act: i32,
    /// Per column command (0 READ, 1 WRITE): to PRECHARGE, to READ and
    /// WRITE in the bank group, in the rank, and in the other ranks.
    pub(super) col: [[i32; 7]; 2],
}

impl Delays {
    pub(super) fn of(t: &TimingTable) -> Self {
        let c = |x: u64| x as i32;
        Delays {
            act_to_act: c(t.act_to_act),
            act_to_rd: c(t.act_to_rd),
            act_to_wr: c(t.act_to_wr),
            act_to_pre: c(t.act_to_pre),
            act_to_act_l: c(t.act_to_act_l),
            act_to_act_s: c(t.act_to_act_s),
            faw: c(t.faw),
            pre_to_act: c(t.pre_to_act),
            ref_to_act: c(t.ref_to_act),
            col: [
                [
                    c(t.rd_to_pre),
                    c(t.rd_to_rd_l),
                    c(t.rd_to_wr),
                    c(t.rd_to_rd_s),
                    c(t.rd_to_wr),
                    c(t.rd_to_rd_o),
                    c(t.rd_to_wr_o),
                ],
                [
                    c(t.wr_to_pre),
                    c(t.wr_to_rd_l),
                    c(t.wr_to_wr_l),
                    c(t.wr_to_rd_s),
                    c(t.wr_to_wr_s),
                    c(t.wr_to_rd_o),
                    c(t.wr_to_wr_o),
                ],
            ],
        }
    }
}
