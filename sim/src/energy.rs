//! Command counts and the IDD-based DRAM energy model shared by all engines.
//!
//! Per-event energies follow the standard current-based method (the one
//! DRAMsim3 implements, after Micron's power notes), for the `devices` chips of
//! a rank, with V x mA x ns = pJ:
//!
//! - activate (ACT + its PRE): `VDD (IDD0 tRC - (IDD3N tRAS + IDD2N tRP)) tCK`
//! - read burst: `VDD (IDD4R - IDD3N) (BL/2) tCK`, write burst likewise with IDD4W
//! - refresh: `VDD (IDD5B - IDD3N) tRFC tCK`
//! - background, per rank-cycle: `VDD IDD3N tCK` while any bank of the rank is
//!   open, `VDD IDD2N tCK` while all are precharged, `VDD IDD6 tCK` in self refresh.
//!
//! The `tCK` factor turns cycles into ns; DRAMsim3's own counters omit it.

use serde::{Deserialize, Serialize};

use crate::config::DramConfig;

/// What an engine did, counted over the whole run and all ranks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandCounts {
    pub activates: u64,
    pub precharges: u64,
    /// RD and RDA commands.
    pub read_cmds: u64,
    /// WR and WRA commands.
    pub write_cmds: u64,
    /// All-bank refreshes, counted per rank.
    pub refreshes: u64,
    pub row_hits: u64,
    /// Requests that needed an activation (misses and conflicts).
    pub row_misses: u64,
    /// Misses that first had to close another open row, where the engine
    /// tells them apart (Ramulator does; DRAMsim3 does not).
    pub row_conflicts: Option<u64>,
    /// Rank-cycles with at least one bank open, summed over ranks.
    pub active_rank_cycles: u64,
    /// Rank-cycles with every bank precharged, summed over ranks.
    pub precharged_rank_cycles: u64,
    /// Rank-cycles in self refresh, summed over ranks.
    pub self_refresh_rank_cycles: u64,
}

/// Energy split by cause, in pJ.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    pub activate_pj: f64,
    pub read_pj: f64,
    pub write_pj: f64,
    pub refresh_pj: f64,
    pub background_pj: f64,
    pub total_pj: f64,
}

impl Energy {
    pub fn from_parts(
        activate_pj: f64,
        read_pj: f64,
        write_pj: f64,
        refresh_pj: f64,
        background_pj: f64,
    ) -> Self {
        Energy {
            activate_pj,
            read_pj,
            write_pj,
            refresh_pj,
            background_pj,
            total_pj: activate_pj + read_pj + write_pj + refresh_pj + background_pj,
        }
    }
}

/// Per-event energies of one configuration, in pJ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventEnergy {
    pub activate_pj: f64,
    pub read_burst_pj: f64,
    pub write_burst_pj: f64,
    pub refresh_pj: f64,
    pub active_standby_per_cycle_pj: f64,
    pub precharge_standby_per_cycle_pj: f64,
    pub self_refresh_per_cycle_pj: f64,
}

impl EventEnergy {
    pub fn of(c: &DramConfig) -> Self {
        let p = &c.power;
        let t = &c.timing;
        let k = p.vdd_v * c.org.devices_per_rank() as f64 * t.tck_ns;
        let act = p.idd0_ma * t["tRC"] as f64
            - (p.idd3n_ma * t["tRAS"] as f64 + p.idd2n_ma * t["tRP"] as f64);
        let bl2 = c.burst_cycles() as f64;
        EventEnergy {
            activate_pj: k * act,
            read_burst_pj: k * (p.idd4r_ma - p.idd3n_ma) * bl2,
            write_burst_pj: k * (p.idd4w_ma - p.idd3n_ma) * bl2,
            refresh_pj: k * (p.idd5b_ma - p.idd3n_ma) * t["tRFC"] as f64,
            active_standby_per_cycle_pj: k * p.idd3n_ma,
            precharge_standby_per_cycle_pj: k * p.idd2n_ma,
            self_refresh_per_cycle_pj: k * p.idd6_ma,
        }
    }

    /// Energy of a run from its command counts.
    pub fn energy(&self, n: &CommandCounts) -> Energy {
        Energy::from_parts(
            self.activate_pj * n.activates as f64,
            self.read_burst_pj * n.read_cmds as f64,
            self.write_burst_pj * n.write_cmds as f64,
            self.refresh_pj * n.refreshes as f64,
            self.active_standby_per_cycle_pj * n.active_rank_cycles as f64
                + self.precharge_standby_per_cycle_pj * n.precharged_rank_cycles as f64
                + self.self_refresh_per_cycle_pj * n.self_refresh_rank_cycles as f64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_event_energies_by_hand() {
        let c = DramConfig::preset("DDR4-3200-x8").unwrap();
        let e = EventEnergy::of(&c);
        // 1.2 V x 8 devices x 0.625 ns = 6 (pJ per mA-cycle).
        let k = 6.0;
        assert!((e.activate_pj - k * (57.0 * 74.0 - (52.0 * 52.0 + 37.0 * 22.0))).abs() < 1e-6);
        assert!((e.read_burst_pj - k * (168.0 - 52.0) * 4.0).abs() < 1e-6);
        assert!((e.write_burst_pj - k * (150.0 - 52.0) * 4.0).abs() < 1e-6);
        assert!((e.refresh_pj - k * (250.0 - 52.0) * 560.0).abs() < 1e-6);
        assert!((e.active_standby_per_cycle_pj - k * 52.0).abs() < 1e-9);
        let n = CommandCounts {
            activates: 2,
            read_cmds: 3,
            active_rank_cycles: 10,
            precharged_rank_cycles: 5,
            ..Default::default()
        };
        let en = e.energy(&n);
        let want = 2.0 * e.activate_pj + 3.0 * e.read_burst_pj + 10.0 * k * 52.0 + 5.0 * k * 37.0;
        assert!((en.total_pj - want).abs() < 1e-6);
    }
}
