//! The timed pool: each rank's core sends its 64 B requests through its own
//! DRAM engine (any engine of `nmpsim_sim`), ranks run in parallel, and the
//! host link carries instructions in and results out.
//!
//! Per instruction batch (model, documented in `docs/nmp.md`):
//!
//! - `link_in` = encoded bytes of the batch / link bandwidth + latency;
//! - each rank: its requests for the whole batch, back to back, through the
//!   engine with at most `min(request_queue, input_buffer / 64)` requests in
//!   flight (the core's bounded queue, throttled by its input buffer; on an
//!   HBM2 pseudo-channel a request is two 32 B bursts), giving the
//!   DRAM time; the vector ALU needs `slices x ceil(16 / lanes)` cycles at
//!   its clock; the rank's time is the larger of the two plus the ALU
//!   pipeline latency (they overlap: the ALU consumes as data arrives);
//! - results (final or partial sums, row-wise exchanges) collect in each
//!   core's output buffer; what overflows it drains over the rank's share of
//!   the link while the rank computes, and the core cannot finish before it
//!   has (back-pressure);
//! - `compute` = the slowest rank; `link_out` = what is still buffered at the
//!   end / link bandwidth;
//! - time = link_in + compute + link_out (phases do not overlap).

use std::time::Instant;

use nmpsim_sim::{DramConfig, EngineKind, EventEnergy, RunOptions, simulate};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::NmpError;
use crate::encoding::encoded_len;
use crate::isa::Instruction;
use crate::placement::{Placement, SLICE_BYTES, SLICE_VALUES};
use crate::pool::{Pool, RankWork};
use crate::tt::TtPool;

/// The NMP core of one rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreParams {
    /// Requests the local memory controller keeps in flight to its rank.
    /// Default 32, the DDR4 controller transaction queue of the DRAM presets.
    pub request_queue: usize,
    /// Input buffer (bytes). Default 4 KiB: 64 slices, more than the request
    /// queue, so the queue is the limit. Modelled, not from a paper.
    pub input_buffer_bytes: u64,
    /// Output buffer (bytes) holding results for the host link. Default
    /// 4 KiB. Modelled. When a rank's results outgrow it, the core stalls
    /// until the link drains them: the excess drains during compute at the
    /// rank's share of the link, the rest after compute.
    pub output_buffer_bytes: u64,
    /// f32 lanes of the vector ALU. Default 16: one 64 B slice per cycle,
    /// matching a rank's 64 B access granularity (Tensor Casting, Sec. IV-C).
    pub alu_lanes: u32,
    /// ALU clock in GHz. Default 1.6, the DDR4-3200 bus clock: at one slice
    /// per cycle the ALU takes 1.6 slices/ns while the rank delivers at most
    /// 0.4 (25.6 GB/s), so it is never the bottleneck of a gather. Modelled.
    pub alu_clock_ghz: f64,
    /// ALU pipeline depth in cycles. Default 4. Modelled.
    pub alu_latency_cycles: u32,
}

impl Default for CoreParams {
    fn default() -> Self {
        CoreParams {
            request_queue: 32,
            input_buffer_bytes: 4096,
            output_buffer_bytes: 4096,
            alu_lanes: 16,
            alu_clock_ghz: 1.6,
            alu_latency_cycles: 4,
        }
    }
}

/// The host link between the GPU (or CPU) and the pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkParams {
    /// GB/s. Default 25, the NMP-GPU link of Tensor Casting's methodology
    /// (Sec. V: "we configure the communication bandwidth between NMP-GPU to
    /// be 25 GB/sec").
    pub bandwidth_gbps: f64,
    /// Per-transfer latency in ns. Default 1000 (a PCIe-class round trip;
    /// modelled).
    pub latency_ns: f64,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            bandwidth_gbps: 25.0,
            latency_ns: 1000.0,
        }
    }
}

/// Per-operation energies of the NMP logic and the link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyParams {
    /// pJ per f32 add or multiply in the ALU. Default 0.9: a 32-bit FP add at
    /// 45 nm (M. Horowitz, "Computing's energy problem", ISSCC 2014).
    pub alu_pj_per_flop: f64,
    /// pJ per byte through the input / output buffers. Default 1.25: a 64-bit
    /// access to an 8 KB SRAM costs 10 pJ at 45 nm (Horowitz, ISSCC 2014).
    pub buffer_pj_per_byte: f64,
    /// pJ per bit on the host link. Default 10. Modelled (a SerDes link of
    /// the PCIe class), not from a cited measurement.
    pub link_pj_per_bit: f64,
}

impl Default for EnergyParams {
    fn default() -> Self {
        EnergyParams {
            alu_pj_per_flop: 0.9,
            buffer_pj_per_byte: 1.25,
            link_pj_per_bit: 10.0,
        }
    }
}

/// The slowest host link (GB/s, 1 kB/s) and ALU clock (GHz) a run accepts:
/// the model divides bytes and cycles by them, and slower ones (a subnormal
/// 1e-320, say) make times infinite.
pub const MIN_RATE: f64 = 1e-6;

/// Everything the timed pool needs besides the layout.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PoolParams {
    pub engine: EngineKind,
    pub dram: DramConfig,
    pub core: CoreParams,
    pub link: LinkParams,
    pub energy: EnergyParams,
}

impl PoolParams {
    /// Checks every parameter a run divides by or bounds with; the error
    /// names the field (`link.bandwidth_gbps`) and what it must be.
    pub fn validate(&self) -> Result<(), NmpError> {
        let positive = |name: &str, x: f64| {
            if x >= MIN_RATE && x.is_finite() {
                Ok(())
            } else {
                Err(NmpError::param(
                    name,
                    format!("{x:?}; expected a positive, finite number of at least {MIN_RATE:e}"),
                ))
            }
        };
        let at_least_zero = |name: &str, x: f64| {
            if x >= 0.0 && x.is_finite() {
                Ok(())
            } else {
                Err(NmpError::param(
                    name,
                    format!("{x}; expected a finite number >= 0"),
                ))
            }
        };
        if self.dram.ranks != 1 {
            return Err(NmpError::param(
                "dram",
                format!(
                    "preset {} has {} ranks a channel; an NMP core sits on one DDR4 rank, so each rank of the pool takes a single-rank preset (one without a -2R or -4R suffix)",
                    self.dram.name, self.dram.ranks
                ),
            ));
        }
        let c = &self.core;
        if c.request_queue == 0 {
            return Err(NmpError::param(
                "core.request_queue",
                "0; expected at least 1",
            ));
        }
        if c.input_buffer_bytes < SLICE_BYTES {
            return Err(NmpError::param(
                "core.input_buffer_bytes",
                format!(
                    "{}; expected at least {SLICE_BYTES} (one slice)",
                    c.input_buffer_bytes
                ),
            ));
        }
        if c.alu_lanes == 0 {
            return Err(NmpError::param("core.alu_lanes", "0; expected at least 1"));
        }
        positive("core.alu_clock_ghz", c.alu_clock_ghz)?;
        positive("link.bandwidth_gbps", self.link.bandwidth_gbps)?;
        at_least_zero("link.latency_ns", self.link.latency_ns)?;
        let e = &self.energy;
        at_least_zero("energy.alu_pj_per_flop", e.alu_pj_per_flop)?;
        at_least_zero("energy.buffer_pj_per_byte", e.buffer_pj_per_byte)?;
        at_least_zero("energy.link_pj_per_bit", e.link_pj_per_bit)
    }
}

/// One rank in one batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: u32,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub dram_cycles: u64,
    pub dram_time_ns: f64,
    pub alu_time_ns: f64,
    /// Time to push the results that overflow the output buffer over this
    /// rank's share of the link (0 when they fit).
    pub output_stall_ns: f64,
    pub time_ns: f64,
    /// time / the batch's compute time.
    pub busy_fraction: f64,
    /// Bytes the rank's DRAM moved (READ and WRITE bursts) over its DRAM
    /// time: at most the rank's peak, and over all ranks consistent with the
    /// batch's `dram_read_bytes + dram_write_bytes`.
    pub dram_bandwidth_gbps: f64,
    pub dram_energy_pj: f64,
    /// Column commands that hit an open row, of all column commands; `None`
    /// (null) for a rank that issued none.
    pub row_hit_rate: Option<f64>,
}

/// Energy of a batch, in pJ.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolEnergy {
    /// Every rank's DRAM energy from its engine run, plus precharge-standby
    /// background while it waits for the slowest rank.
    pub dram_pj: f64,
    pub alu_pj: f64,
    pub buffer_pj: f64,
    pub link_pj: f64,
    pub total_pj: f64,
}

/// One instruction batch on the pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchReport {
    pub ops: Vec<String>,
    pub engine: EngineKind,
    pub preset: String,
    pub placement: Placement,
    pub ranks: u32,
    /// Ranks with work in this batch.
    pub active_ranks: u32,
    pub time_ns: f64,
    pub link_in_ns: f64,
    pub compute_ns: f64,
    pub link_out_ns: f64,
    pub link_in_bytes: u64,
    pub link_out_bytes: u64,
    /// Of `link_out_bytes`, what the ranks still held in their output buffers
    /// when compute ended: the bytes `link_out_ns` carries (the rest drained
    /// during compute, and its time is in `compute_ns`).
    pub link_out_tail_bytes: u64,
    /// Bytes the cores requested (64 B per request).
    pub request_read_bytes: u64,
    pub request_write_bytes: u64,
    /// Bytes the DRAM moved: READ and WRITE bursts issued by the engines.
    /// Lower than requested where a controller merged reads to one line,
    /// served them from its write queue, or merged a write into a queued
    /// write to the same line.
    pub dram_read_bytes: u64,
    pub dram_write_bytes: u64,
    /// DRAM bytes over the compute time: the pool's effective memory
    /// throughput (the paper's metric).
    pub effective_bandwidth_gbps: f64,
    /// DRAM bytes over the slowest rank's DRAM time: what the ranks' memory
    /// sustains, ignoring ALU and output back-pressure.
    pub memory_side_bandwidth_gbps: f64,
    /// DRAM bytes over the whole time, link included.
    pub end_to_end_bandwidth_gbps: f64,
    /// R x the per-rank peak.
    pub peak_bandwidth_gbps: f64,
    pub mean_busy_fraction: f64,
    /// Slowest rank over the mean rank time (1 = balanced).
    pub load_imbalance: f64,
    pub energy: PoolEnergy,
    /// Ranks whose vector ALU took longer than their DRAM and their output
    /// drain: compute-bound ranks (TT lookups can be; gathers never are at
    /// the default ALU).
    #[serde(default)]
    pub alu_bound_ranks: u32,
    pub per_rank: Vec<RankReport>,
    pub dram_requests: u64,
    pub wall_s: f64,
    pub sim_requests_per_s: f64,
}

impl BatchReport {
    /// What bounds the batch's compute time: the slowest rank's ALU
    /// (`compute`), its DRAM (`memory`) or the link draining its results
    /// (`link`); `idle` when no rank worked.
    pub fn bound(&self) -> &'static str {
        let Some(r) = self
            .per_rank
            .iter()
            .filter(|r| r.time_ns > 0.0)
            .max_by(|a, b| a.time_ns.total_cmp(&b.time_ns))
        else {
            return "idle";
        };
        if r.alu_time_ns > r.dram_time_ns.max(r.output_stall_ns) {
            "compute"
        } else if r.output_stall_ns > r.dram_time_ns {
            "link"
        } else {
            "memory"
        }
    }
}

/// Executes a batch of instructions: checks the whole batch, computes each
/// instruction on the pool's data (if any), and times the whole batch rank by
/// rank, in parallel. A batch with a bad instruction anywhere is refused
/// before the first one runs ([`Pool::check_batch`]): the pool's data is then
/// as it was. (An error of a DRAM engine, after the data has changed, is not
/// an error of the batch and is not undone.)
pub fn run_batch(
    pool: &mut Pool,
    batch: &[Instruction],
    params: &PoolParams,
) -> Result<BatchReport, NmpError> {
    run_batch_within(pool, batch, params, u64::MAX)
}

/// Bytes [`run_batch`] holds per DRAM request of a batch at most: the
/// request itself in its rank's list, and as much again while an
/// instruction's requests are appended to that list.
pub const BYTES_PER_REQUEST: u64 = 2 * std::mem::size_of::<nmpsim_sim::MemOp>() as u64;

/// [`run_batch`], refusing a batch whose requests would take more than
/// `max_bytes` of memory ([`BYTES_PER_REQUEST`] each) before any of them is
/// built: the requests are counted when the batch is checked, before any
/// instruction runs, so a refused batch leaves the pool's data as it was.
pub fn run_batch_within(
    pool: &mut Pool,
    batch: &[Instruction],
    params: &PoolParams,
    max_bytes: u64,
) -> Result<BatchReport, NmpError> {
    if batch.is_empty() {
        return Err(NmpError::param("batch", "needs at least one instruction"));
    }
    params.validate()?;
    let started = Instant::now();
    let ranks = pool.layout().ranks() as usize;
    let mut per_rank: Vec<RankWork> = vec![RankWork::default(); ranks];
    let mut link_in_bytes = 0u64;
    let mut requests = 0u64;
    let counts = pool.check_batch(batch, max_bytes != u64::MAX)?;
    for (instr, n) in batch.iter().zip(&counts) {
        requests += n;
        let need = requests.saturating_mul(BYTES_PER_REQUEST);
        if need > max_bytes {
            return Err(NmpError::param(
                "batch",
                format!(
                    "its DRAM requests up to instruction {} ({requests} over {ranks} ranks) need {:.1} GB to simulate, more than the {:.1} GB allowed (fewer ranks, a smaller batch or another placement need less)",
                    instr.op(),
                    need as f64 / 1e9,
                    max_bytes as f64 / 1e9
                ),
            ));
        }
    }
    let ops = run_each(batch, &mut per_rank, &mut link_in_bytes, |i| {
        let works = pool.work(i)?;
        pool.execute(i)?;
        Ok(works)
    })?;
    let placement = pool.layout().placement;
    time_works(per_rank, link_in_bytes, ops, placement, params, started)
}

/// Runs each instruction of `batch` (`run` returns its rank works), adding
/// the works to `per_rank` and the encoded bytes to `link_in_bytes`;
/// returns the mnemonics.
fn run_each(
    batch: &[Instruction],
    per_rank: &mut [RankWork],
    link_in_bytes: &mut u64,
    mut run: impl FnMut(&Instruction) -> Result<Vec<RankWork>, NmpError>,
) -> Result<Vec<String>, NmpError> {
    let mut ops = Vec::with_capacity(batch.len());
    for instr in batch {
        let works = run(instr)?;
        *link_in_bytes += encoded_len(instr);
        add_works(per_rank, works);
        ops.push(instr.op().to_string());
    }
    Ok(ops)
}

/// Adds one instruction's rank works to the batch's.
fn add_works(per_rank: &mut [RankWork], works: Vec<RankWork>) {
    for (acc, w) in per_rank.iter_mut().zip(works) {
        acc.requests.extend(w.requests);
        acc.alu_slices += w.alu_slices;
        acc.alu_values += w.alu_values;
        acc.alu_macs += w.alu_macs;
        acc.link_out_bytes += w.link_out_bytes;
    }
}

/// Executes a batch of TT instructions on a pool of TT tables
/// ([`crate::tt`]) and times it as [`run_batch`] times a batch of rows:
/// each rank's requests through its DRAM engine, its multiply-adds on its
/// ALU, its partial sums over the link. The whole batch is checked first.
pub fn run_tt_batch(
    pool: &mut TtPool,
    batch: &[Instruction],
    params: &PoolParams,
) -> Result<BatchReport, NmpError> {
    if batch.is_empty() {
        return Err(NmpError::param("batch", "needs at least one instruction"));
    }
    params.validate()?;
    for instr in batch {
        pool.validate(instr)?;
    }
    let started = Instant::now();
    let ranks = pool.ranks() as usize;
    let mut per_rank: Vec<RankWork> = vec![RankWork::default(); ranks];
    let mut link_in_bytes = 0u64;
    let ops = run_each(batch, &mut per_rank, &mut link_in_bytes, |i| {
        let works = pool.work(i)?;
        pool.execute(i)?;
        Ok(works)
    })?;
    time_works(
        per_rank,
        link_in_bytes,
        ops,
        Placement::Replicated,
        params,
        started,
    )
}

/// Times the ranks' work of a batch (module docs).
fn time_works(
    per_rank: Vec<RankWork>,
    link_in_bytes: u64,
    ops: Vec<String>,
    placement: Placement,
    params: &PoolParams,
    started: Instant,
) -> Result<BatchReport, NmpError> {
    let ranks = per_rank.len();
    let cfg = &params.dram;
    // In bursts, as the engines count them: a request of a slice is
    // `bursts` of them (two of an HBM2 pseudo-channel's 32 B).
    let burst = cfg.burst_bytes();
    let bursts = (SLICE_BYTES / burst).max(1) as usize;
    let window =
        (params.core.request_queue * bursts).min((params.core.input_buffer_bytes / burst) as usize);
    let opts = RunOptions {
        window,
        ..RunOptions::default()
    };
    let sims: Vec<Option<nmpsim_sim::DramStats>> = per_rank
        .par_iter()
        .map(|w| {
            if w.requests.is_empty() {
                return Ok(None);
            }
            let src = w.requests.iter().copied().map(Ok);
            simulate(params.engine, cfg, src, &opts, None).map(Some)
        })
        .collect::<Result<_, nmpsim_sim::SimError>>()?;

    // Ranks with results share the link while they compute.
    let senders = per_rank
        .iter()
        .filter(|w| w.link_out_bytes > 0)
        .count()
        .max(1) as f64;
    let share_gbps = params.link.bandwidth_gbps / senders;
    let out_cap = params.core.output_buffer_bytes;
    let ghz = params.core.alu_clock_ghz;
    let lanes_cycles = (SLICE_VALUES as f64 / params.core.alu_lanes as f64).ceil();
    let mut reports = Vec::with_capacity(ranks);
    for (k, (w, s)) in per_rank.iter().zip(&sims).enumerate() {
        // (A multiply-add per lane and cycle for the TT products.)
        let mac_cycles = w.alu_macs.div_ceil(u64::from(params.core.alu_lanes)) as f64;
        let alu_ns = (w.alu_slices as f64 * lanes_cycles + mac_cycles) / ghz;
        let dram_ns = s.as_ref().map_or(0.0, |s| s.sim_time_ns);
        // (A rank that only sends results, the zero sums of empty bags say,
        // still waits for its output buffer to drain: it is busy too.)
        let busy =
            !w.requests.is_empty() || w.alu_slices > 0 || w.alu_macs > 0 || w.link_out_bytes > 0;
        // Back-pressure: results beyond the output buffer must leave over the
        // link before the core can finish.
        let drain_ns = w.link_out_bytes.saturating_sub(out_cap) as f64 / share_gbps;
        let time_ns = if busy {
            dram_ns.max(alu_ns).max(drain_ns) + params.core.alu_latency_cycles as f64 / ghz
        } else {
            0.0
        };
        reports.push(RankReport {
            rank: k as u32,
            requests: w.requests.len() as u64,
            reads: s.as_ref().map_or(0, |s| s.reads),
            writes: s.as_ref().map_or(0, |s| s.writes),
            dram_cycles: s.as_ref().map_or(0, |s| s.cycles),
            dram_time_ns: dram_ns,
            alu_time_ns: alu_ns,
            output_stall_ns: drain_ns,
            time_ns,
            busy_fraction: 0.0,
            // The bytes the DRAM moved (bursts issued), as the batch counts
            // them, not the requests' bytes: merged reads move nothing.
            dram_bandwidth_gbps: s.as_ref().map_or(0.0, |s| {
                if s.sim_time_ns > 0.0 {
                    (s.read_cmds + s.write_cmds) as f64 * burst as f64 / s.sim_time_ns
                } else {
                    0.0
                }
            }),
            dram_energy_pj: s.as_ref().map_or(0.0, |s| s.energy.total_pj),
            row_hit_rate: s.as_ref().and_then(|s| s.row_hit_rate),
        });
    }
    let compute_ns = reports.iter().map(|r| r.time_ns).fold(0.0, f64::max);
    let max_dram_ns = reports.iter().map(|r| r.dram_time_ns).fold(0.0, f64::max);
    let active = reports.iter().filter(|r| r.time_ns > 0.0).count();
    let mean_time = reports.iter().map(|r| r.time_ns).sum::<f64>() / ranks as f64;
    for r in &mut reports {
        r.busy_fraction = if compute_ns > 0.0 {
            r.time_ns / compute_ns
        } else {
            0.0
        };
    }
    // What the ranks send: results, partial sums and row-wise exchanges. A
    // rank that did nothing of an instruction sends nothing for it.
    let link_out_bytes: u64 = per_rank.iter().map(|w| w.link_out_bytes).sum();
    // What is still buffered when the slowest rank finishes.
    let tail_bytes: u64 = per_rank
        .iter()
        .map(|w| w.link_out_bytes.min(out_cap))
        .sum::<u64>();
    let bw = params.link.bandwidth_gbps;
    let link_in_ns = link_in_bytes as f64 / bw + params.link.latency_ns;
    let link_out_ns = if link_out_bytes > 0 {
        tail_bytes as f64 / bw + params.link.latency_ns
    } else {
        0.0
    };
    let time_ns = link_in_ns + compute_ns + link_out_ns;
    let requests: u64 = per_rank.iter().map(|w| w.requests.len() as u64).sum();
    let (mut rd, mut wr) = (0u64, 0u64);
    for w in &per_rank {
        for op in &w.requests {
            if op.access.is_write() {
                wr += SLICE_BYTES;
            } else {
                rd += SLICE_BYTES;
            }
        }
    }
    let dram_rd: u64 = sims.iter().flatten().map(|s| s.read_cmds * burst).sum();
    let dram_wr: u64 = sims.iter().flatten().map(|s| s.write_cmds * burst).sum();
    // DRAM energy: each engine run, plus precharge standby of every rank for
    // the rest of the batch's compute time.
    let ev = EventEnergy::of(cfg);
    let per_ns = ev.precharge_standby_per_cycle_pj / cfg.timing.tck_ns * cfg.ranks as f64;
    let dram_pj: f64 = reports
        .iter()
        .map(|r| r.dram_energy_pj + (compute_ns - r.dram_time_ns).max(0.0) * per_ns)
        .sum();
    // One add per element the ALU processes; every byte of a request passes
    // the input buffer (reads) or leaves the core (writes), and every result
    // byte the output buffer.
    // (A multiply-add is two operations.)
    let values: u64 = per_rank.iter().map(|w| w.alu_values + 2 * w.alu_macs).sum();
    let e = &params.energy;
    let alu_pj = values as f64 * e.alu_pj_per_flop;
    let buffer_pj = (rd + wr + link_out_bytes) as f64 * e.buffer_pj_per_byte;
    let link_pj = (link_in_bytes + link_out_bytes) as f64 * 8.0 * e.link_pj_per_bit;
    let wall_s = started.elapsed().as_secs_f64();
    let alu_bound_ranks = reports
        .iter()
        .filter(|r| r.time_ns > 0.0 && r.alu_time_ns > r.dram_time_ns.max(r.output_stall_ns))
        .count() as u32;
    Ok(BatchReport {
        ops,
        engine: params.engine,
        preset: cfg.name.clone(),
        placement,
        ranks: ranks as u32,
        active_ranks: active as u32,
        time_ns,
        link_in_ns,
        compute_ns,
        link_out_ns,
        link_in_bytes,
        link_out_bytes,
        link_out_tail_bytes: if link_out_bytes > 0 { tail_bytes } else { 0 },
        request_read_bytes: rd,
        request_write_bytes: wr,
        dram_read_bytes: dram_rd,
        dram_write_bytes: dram_wr,
        effective_bandwidth_gbps: if compute_ns > 0.0 {
            (dram_rd + dram_wr) as f64 / compute_ns
        } else {
            0.0
        },
        memory_side_bandwidth_gbps: if max_dram_ns > 0.0 {
            (dram_rd + dram_wr) as f64 / max_dram_ns
        } else {
            0.0
        },
        end_to_end_bandwidth_gbps: (dram_rd + dram_wr) as f64 / time_ns,
        peak_bandwidth_gbps: ranks as f64 * cfg.peak_bandwidth_gbps(),
        // (The mean of equal times can round a little past their maximum:
        // the fraction is at most 1 and the imbalance at least 1 by definition.)
        mean_busy_fraction: if compute_ns > 0.0 {
            (mean_time / compute_ns).min(1.0)
        } else {
            0.0
        },
        load_imbalance: if mean_time > 0.0 {
            (compute_ns / mean_time).max(1.0)
        } else {
            1.0
        },
        energy: PoolEnergy {
            dram_pj,
            alu_pj,
            buffer_pj,
            link_pj,
            total_pj: dram_pj + alu_pj + buffer_pj + link_pj,
        },
        alu_bound_ranks,
        per_rank: reports,
        dram_requests: requests,
        wall_s,
        sim_requests_per_s: if wall_s > 0.0 {
            requests as f64 / wall_s
        } else {
            0.0
        },
    })
}
