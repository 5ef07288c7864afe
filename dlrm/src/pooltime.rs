//! Time of the NMP pool's primitives inside training. By default every
//! iteration runs cycle-level on the timed pool of the `nmp` crate (each
//! rank's requests through its DRAM engine). With [`SimBatches::First`], only
//! the first iterations do, and their effective bandwidth (primitive bytes
//! over simulated compute time) is the proxy for the later ones: the paper's
//! emulation method, faster, and labelled [`Source::SimulatedProxy`]. A fixed
//! bandwidth can replace the simulation altogether (then the time is
//! modelled).
//!
//! The pool computes no data here: the trainer's numerics come from the
//! `kernels` crate, whose results the `nmp` crate's functional pool is tested
//! to equal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use nmpsim_kernels::Optimizer;
use nmpsim_nmp::{
    CoreParams, EnergyParams, Instruction, Layout, LayoutParams, LinkParams, Placement, Pool,
    PoolParams, StateWidth, TableShape, run_batch,
};
use nmpsim_sim::{AddressMapping, DramConfig, EngineKind};
use serde::{Deserialize, Serialize};

use crate::DlrmError;
use crate::timeline::Source;

/// Which iterations of a mode run cycle by cycle on the DRAM engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SimBatches {
    /// Every iteration (the default): no time is a proxy.
    #[default]
    All,
    /// The first N; later iterations use their bandwidth (`simulated-proxy`).
    First(u64),
}

impl SimBatches {
    /// Whether iteration `i` (0-based) is simulated cycle by cycle.
    pub fn simulates(self, i: u64) -> bool {
        match self {
            SimBatches::All => true,
            SimBatches::First(n) => i < n,
        }
    }

    /// How many of `iters` iterations are simulated cycle by cycle.
    pub fn of(self, iters: u64) -> u64 {
        match self {
            SimBatches::All => iters,
            SimBatches::First(n) => n.min(iters),
        }
    }

    /// `all`, or a number of iterations (`0` is allowed only with a fixed
    /// bandwidth, which [`NmpSetup::validate`] checks).
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("all") {
            return Ok(SimBatches::All);
        }
        s.parse::<u64>()
            .map(SimBatches::First)
            .map_err(|_| format!("`{s}` is not a number of iterations or `all`"))
    }
}

impl Serialize for SimBatches {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SimBatches::All => s.serialize_str("all"),
            SimBatches::First(n) => s.serialize_u64(*n),
        }
    }
}

impl<'de> Deserialize<'de> for SimBatches {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(SimBatches::First(n)),
            Raw::S(s) => SimBatches::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

/// How the NMP pool is built and timed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NmpSetup {
    pub ranks: u32,
    pub preset: String,
    /// A DRAM configuration file applied over `preset` (`--dram-config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_config: Option<std::path::PathBuf>,
    /// Timing overrides, `NAME=CYCLES` (`--timing`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timing: Vec<String>,
    /// Organisation overrides, `FIELD=VALUE` (`--org`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub org: Vec<String>,
    /// Address mapping fields (`ro-ra-ba-bg-co`); the preset's default if unset.
    pub mapping: Option<String>,
    pub placement: Placement,
    pub engine: EngineKind,
    /// Pool <-> GPU / host link, GB/s per direction.
    pub link_gbps: f64,
    /// Fixed cost of one link transfer, µs.
    pub link_latency_us: f64,
    /// Iterations simulated cycle by cycle (every one by default; with
    /// `First(n)` the proxy takes over after n).
    pub sim_batches: SimBatches,
    /// Skip simulation: every NMP primitive runs at this effective bandwidth.
    pub fixed_bandwidth_gbps: Option<f64>,
    /// f32 lanes of each core's vector ALU (`nmpsim_nmp::CoreParams`).
    #[serde(default = "default_alu_lanes")]
    pub alu_lanes: u32,
    /// The ALU's clock, GHz.
    #[serde(default = "default_alu_ghz")]
    pub alu_ghz: f64,
}

fn default_alu_lanes() -> u32 {
    CoreParams::default().alu_lanes
}

fn default_alu_ghz() -> f64 {
    CoreParams::default().alu_clock_ghz
}

impl Default for NmpSetup {
    /// 32 DDR4-3200 x8 ranks (Table I), row-interleaved rows with each row's
    /// slices in one DRAM row, the native engine (DRAMsim3's timing, fast
    /// enough to simulate every iteration), a 25 GB/s link, every iteration
    /// simulated.
    fn default() -> Self {
        NmpSetup {
            ranks: 32,
            preset: "DDR4-3200-x8".into(),
            dram_config: None,
            timing: Vec::new(),
            org: Vec::new(),
            mapping: Some("ro-ra-ba-bg-co".into()),
            placement: Placement::RowInterleaved,
            engine: EngineKind::Native,
            link_gbps: 25.0,
            link_latency_us: 1.0,
            sim_batches: SimBatches::All,
            fixed_bandwidth_gbps: None,
            alu_lanes: default_alu_lanes(),
            alu_ghz: default_alu_ghz(),
        }
    }
}

impl NmpSetup {
    /// Each rank's DRAM: the preset, the file, the overrides, the mapping.
    pub fn dram(&self) -> Result<DramConfig, DlrmError> {
        let mut dram = DramConfig::resolve(
            &self.preset,
            self.dram_config.as_deref(),
            &self.timing,
            &self.org,
        )?;
        if let Some(m) = &self.mapping {
            dram.mapping = AddressMapping::parse(m)?;
        }
        Ok(dram)
    }

    pub fn validate(&self) -> Result<(), DlrmError> {
        let bad = |s: &str| Err(DlrmError::Config(s.to_string()));
        if self.ranks == 0 {
            return bad("NMP ranks must be at least 1");
        }
        if !(self.link_gbps > 0.0 && self.link_gbps.is_finite()) {
            return bad("NMP link bandwidth must be a positive number of GB/s");
        }
        // The DRAM configuration reads (a file, overrides) before any run.
        self.dram()?;
        if self.alu_lanes == 0 {
            return bad("--alu-lanes 0: each NMP core's vector ALU needs at least 1 lane");
        }
        if !(self.alu_ghz >= nmpsim_nmp::MIN_RATE && self.alu_ghz.is_finite()) {
            return bad(&format!(
                "--alu-ghz {}: the NMP cores' ALU clock must be a positive number of GHz",
                self.alu_ghz
            ));
        }
        match self.fixed_bandwidth_gbps {
            Some(b) if !(b > 0.0 && b.is_finite()) => {
                return bad("fixed NMP bandwidth must be a positive number of GB/s");
            }
            None if self.sim_batches == SimBatches::First(0) => {
                return bad(
                    "0 simulated batches and no fixed NMP bandwidth: the bandwidth proxy needs at least one simulated batch to take its bandwidth from",
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// Time of `bytes` over the pool link.
    pub fn link_ns(&self, bytes: u64) -> f64 {
        crate::gpu::transfer_ns(bytes, self.link_gbps, self.link_latency_us)
    }
}

/// The run's shared pool timer, or an error if an earlier failure poisoned
/// it.
pub fn lock(
    timer: &std::sync::Mutex<PoolTimer>,
) -> Result<std::sync::MutexGuard<'_, PoolTimer>, DlrmError> {
    timer.lock().map_err(|_| {
        DlrmError::Config("the NMP pool timer was poisoned by an earlier failure".into())
    })
}

/// FNV-1a over lists of ids: which rows or lookups a timing was for (the
/// pool timer's cache key, with the primitive and the iteration).
pub fn fingerprint<'a>(lists: impl IntoIterator<Item = &'a [u32]>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |x: u64| {
        h ^= x;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    for l in lists {
        eat(l.len() as u64);
        l.iter().for_each(|&x| eat(x as u64));
    }
    h
}

/// Bytes of an encoded u32 or f32 array of `n` elements (its count and its
/// elements, `docs/nmp-isa.md`).
pub fn array_bytes(n: usize) -> u64 {
    4 + 4 * n as u64
}

static SIM_WALL_NS: AtomicU64 = AtomicU64::new(0);

/// Host seconds spent in cycle-level NMP simulation by this process so far
/// (the trainer leaves it out of the measured step time).
pub fn sim_wall_s() -> f64 {
    SIM_WALL_NS.load(Ordering::Relaxed) as f64 * 1e-9
}

/// What one timing gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolTime {
    pub time_ns: f64,
    pub source: Source,
    /// Where the pool's own link model timed the batch (simulated, or a
    /// proxy of simulated batches): the result bytes still to cross the link
    /// after `time_ns` (the rest drained during it, and is in `time_ns`).
    /// `None` for a fixed bandwidth, which models no link: the caller then
    /// sends the whole result (`nmpsim_nmp::gather_link_out_bytes` and
    /// `scatter_link_out_bytes` on [`PoolTimer::layout`]).
    pub link_out_tail_bytes: Option<u64>,
    /// The pool's energy for the primitive, pJ: the engines' DRAM energy
    /// (commands, and background until the slowest rank is done) plus the
    /// cores' ALU, buffer and link energy (`nmpsim_nmp::PoolEnergy`); for a
    /// proxy, the simulated batches' energy per byte times this batch's
    /// bytes. `None` for a fixed bandwidth, which models no energy.
    pub energy_pj: Option<f64>,
    /// Whether the slowest rank's vector ALU bounded the batch rather than
    /// its DRAM or its link (`nmpsim_nmp::BatchReport::bound`); for a proxy,
    /// whether most simulated batches were so bound. `None` for a fixed
    /// bandwidth.
    pub compute_bound: Option<bool>,
}

/// The calibration of one primitive: bytes and simulated time summed over
/// the simulated batches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub bytes: u64,
    pub time_ns: f64,
    pub batches: u64,
    /// DRAM bytes the engines moved, for reports.
    pub dram_bytes: u64,
    /// Result bytes the ranks still held when compute ended, summed.
    #[serde(default)]
    pub link_out_tail_bytes: u64,
    /// The pool's energy over the simulated batches, pJ.
    #[serde(default)]
    pub energy_pj: f64,
    /// Simulated batches whose slowest rank's ALU bounded them.
    #[serde(default)]
    pub alu_bound_batches: u64,
}

impl Calibration {
    /// Primitive bytes per simulated nanosecond (GB/s).
    pub fn gbps(&self) -> f64 {
        if self.time_ns > 0.0 {
            self.bytes as f64 / self.time_ns
        } else {
            0.0
        }
    }
}

/// What a simulated batch gave: primitive bytes, compute ns, DRAM bytes,
/// the link-out tail bytes, the pool's energy (pJ), and whether its ALU
/// bounded it.
type Simulated = (u64, f64, u64, u64, f64, bool);

/// Times NMP primitives for one model on one pool.
pub struct PoolTimer {
    pub setup: NmpSetup,
    params: PoolParams,
    pool: Pool,
    pub calibration: HashMap<String, Calibration>,
    /// The primitives timed since the last [`PoolTimer::begin_run`]: a
    /// timer shared by several modes reports each mode's own.
    timed: std::collections::BTreeSet<String>,
    /// Simulated results by (primitive, iteration, fingerprint), so that modes
    /// running on identical data simulate each batch once.
    cache: HashMap<(String, u64, u64), Simulated>,
    /// Host seconds spent simulating.
    pub sim_wall_s: f64,
    /// The TT tables in the same ranks, after the rows
    /// ([`PoolTimer::set_tt_tables`]).
    tt: Option<nmpsim_nmp::TtPool>,
}

impl PoolTimer {
    /// A pool holding `tables` (rows, dim), sized for batches of `batch` bags
    /// with at most `max_lookups` lookups per table.
    pub fn new(
        setup: NmpSetup,
        tables: &[(u64, usize)],
        batch: usize,
        max_lookups: u64,
        optimizer: &Optimizer,
    ) -> Result<Self, DlrmError> {
        setup.validate()?;
        let dram = setup.dram()?;
        let shapes: Vec<TableShape> = tables
            .iter()
            .map(|&(rows, dim)| TableShape { rows, dim })
            .collect();
        let layout = Layout::new(
            setup.placement,
            &shapes,
            LayoutParams {
                ranks: setup.ranks,
                rank_capacity_bytes: dram.capacity_bytes(),
                state_values_per_row: StateWidth::of(optimizer),
                max_bags: batch as u64,
                max_unique: max_lookups.max(1),
            },
        )?;
        let params = PoolParams {
            engine: setup.engine,
            dram,
            core: CoreParams {
                alu_lanes: setup.alu_lanes,
                alu_clock_ghz: setup.alu_ghz,
                ..CoreParams::default()
            },
            link: LinkParams {
                bandwidth_gbps: setup.link_gbps,
                ..LinkParams::default()
            },
            energy: EnergyParams::default(),
        };
        // (A multi-rank preset, say, is refused here rather than at the first
        // simulated batch.)
        params.validate()?;
        Ok(PoolTimer {
            setup,
            params,
            pool: Pool::without_data(layout),
            calibration: HashMap::new(),
            timed: Default::default(),
            cache: HashMap::new(),
            sim_wall_s: 0.0,
            tt: None,
        })
    }

    /// Puts TT tables of `shapes` in the pool, every rank a copy of their
    /// cores after the rows it holds (`eltt-nmp`'s tables). Setting the
    /// same shapes again keeps the pool; other shapes replace it.
    pub fn set_tt_tables(
        &mut self,
        shapes: &[nmpsim_kernels::tt::TtShape],
    ) -> Result<(), DlrmError> {
        if self.tt.as_ref().is_some_and(|p| p.shapes() == shapes) {
            return Ok(());
        }
        let start = self
            .pool
            .layout()
            .used_bytes
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        self.tt = Some(nmpsim_nmp::TtPool::new(
            self.setup.ranks,
            self.params.dram.capacity_bytes(),
            start,
            shapes,
        )?);
        Ok(())
    }

    /// The TT tables' pool, once set.
    pub fn tt_pool(&self) -> Option<&nmpsim_nmp::TtPool> {
        self.tt.as_ref()
    }

    /// Starts a run (one mode's training) on this timer: forgets which
    /// primitives were timed (the calibration and the cache stay).
    pub fn begin_run(&mut self) {
        self.timed.clear();
    }

    /// The calibrated bandwidth (GB/s) of each primitive timed since
    /// [`PoolTimer::begin_run`], by name.
    pub fn run_calibration_gbps(&self) -> Vec<(String, f64)> {
        self.timed
            .iter()
            .filter_map(|k| self.calibration.get(k).map(|c| (k.clone(), c.gbps())))
            .collect()
    }

    /// The pool's layout of the model's tables.
    pub fn layout(&self) -> &Layout {
        self.pool.layout()
    }

    /// Time of `primitive` at `iteration`, moving `bytes` (the kernels'
    /// traffic for it). `instrs` builds the instructions when the iteration
    /// is simulated; `fingerprint` identifies the batch's data.
    pub fn time(
        &mut self,
        primitive: &str,
        iteration: u64,
        fingerprint: u64,
        bytes: u64,
        instrs: impl FnOnce() -> Vec<Instruction>,
    ) -> Result<PoolTime, DlrmError> {
        if !self.timed.contains(primitive) {
            self.timed.insert(primitive.to_string());
        }
        if let Some(bw) = self.setup.fixed_bandwidth_gbps {
            return Ok(PoolTime {
                time_ns: bytes as f64 / bw,
                source: Source::Modelled,
                link_out_tail_bytes: None,
                energy_pj: None,
                compute_bound: None,
            });
        }
        if self.setup.sim_batches.simulates(iteration) {
            let key = (primitive.to_string(), iteration, fingerprint);
            let (b, ns, dram, tail, pj, alu) = match self.cache.get(&key) {
                Some(&v) => v,
                None => {
                    let started = Instant::now();
                    // (TT instructions go to the TT tables, every other to
                    // the rows; each pool refuses the other's.)
                    let batch = instrs();
                    let report = if batch.first().is_some_and(Instruction::is_tt) {
                        let p = self.tt.as_mut().ok_or_else(|| {
                            DlrmError::Config(format!(
                                "`{primitive}`: the NMP pool holds no TT tables"
                            ))
                        })?;
                        nmpsim_nmp::run_tt_batch(p, &batch, &self.params)?
                    } else {
                        run_batch(&mut self.pool, &batch, &self.params)?
                    };
                    let el = started.elapsed();
                    self.sim_wall_s += el.as_secs_f64();
                    SIM_WALL_NS.fetch_add(el.as_nanos() as u64, Ordering::Relaxed);
                    let v = (
                        bytes,
                        report.compute_ns,
                        report.dram_read_bytes + report.dram_write_bytes,
                        report.link_out_tail_bytes,
                        report.energy.total_pj,
                        report.bound() == "compute",
                    );
                    self.cache.insert(key, v);
                    v
                }
            };
            let c = self.calibration.entry(primitive.to_string()).or_default();
            c.bytes += b;
            c.time_ns += ns;
            c.batches += 1;
            c.dram_bytes += dram;
            c.link_out_tail_bytes += tail;
            c.energy_pj += pj;
            c.alu_bound_batches += u64::from(alu);
            return Ok(PoolTime {
                time_ns: ns,
                source: Source::Simulated,
                link_out_tail_bytes: Some(tail),
                energy_pj: Some(pj),
                compute_bound: Some(alu),
            });
        }
        let cal = self.calibration.get(primitive);
        let bw = cal
            .map(Calibration::gbps)
            .filter(|&g| g > 0.0)
            .ok_or_else(|| {
                DlrmError::Config(format!(
                    "no simulated batch of `{primitive}` to take the NMP bandwidth from (set sim batches >= 1 or a fixed NMP bandwidth)"
                ))
            })?;
        // (The simulated batches' mean tail: at most a buffer per rank.)
        let tail = cal.map_or(0, |c| c.link_out_tail_bytes / c.batches.max(1));
        let pj_per_byte = cal.map_or(0.0, |c| c.energy_pj / c.bytes.max(1) as f64);
        let alu = cal.is_some_and(|c| 2 * c.alu_bound_batches > c.batches);
        Ok(PoolTime {
            time_ns: bytes as f64 / bw,
            source: Source::SimulatedProxy,
            link_out_tail_bytes: Some(tail),
            energy_pj: Some(pj_per_byte * bytes as f64),
            compute_bound: Some(alu),
        })
    }
}
