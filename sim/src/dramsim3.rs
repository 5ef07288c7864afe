//! DRAMsim3 behind [`DramEngine`], through the C ABI of the `dramsim3` crate.
//!
//! - DRAMsim3's callbacks carry only the address, and reads to one address that
//!   are queued together are served by one READ. Completions are mapped back to
//!   request ids per address: every id sent completes exactly once, and each
//!   at the cycle DRAMsim3 completes it (see [`Dramsim3Engine::tick`]).
//! - Writes are posted: DRAMsim3 calls back one cycle after accepting a write;
//!   its write buffer drains when it holds more than 8 writes and the command
//!   queues are idle, or when full, so up to a buffer's worth may stay
//!   unissued when traffic stops.
//! - The crate binds no statistics call. We call DRAMsim3's
//!   `MemorySystem::PrintStats` (part of the same static library), which writes
//!   the final totals, including the partial last epoch, to
//!   `<work dir>/dramsim3.json`, and read them from there. DRAMsim3's energy
//!   counters are in V x mA x cycles (they lack the tCK factor): they are
//!   converted to pJ here.

use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, c_void};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::DramConfig;
use crate::energy::{CommandCounts, Energy};
use crate::engine::{DramEngine, EngineKind, EngineReport, take_sent};
use crate::{Completion, Request, RequestId, SimError};

// Linking the crate brings in its static DRAMsim3 library.
extern crate dramsim3 as _;

unsafe extern "C" {
    fn ds3_create(
        data: *mut c_void,
        config_path: *const libc::c_char,
        sim_path: *const libc::c_char,
        callback: extern "C" fn(*mut c_void, u64, bool),
    ) -> *mut c_void;
    fn ds3_tick(sys: *mut c_void);
    fn ds3_can_add(sys: *mut c_void, addr: u64, is_write: bool) -> bool;
    fn ds3_add(sys: *mut c_void, addr: u64, is_write: bool) -> bool;
    fn ds3_drop(sys: *mut c_void);
    fn ds3_get_tck(sys: *const c_void) -> libc::c_double;
    /// `dramsim3::MemorySystem::PrintStats() const` (Itanium C++ ABI).
    #[link_name = "_ZNK8dramsim312MemorySystem10PrintStatsEv"]
    fn ds3_print_stats(sys: *const c_void);
}

extern "C" fn on_complete(data: *mut c_void, addr: u64, is_write: bool) {
    // SAFETY: `data` is the `Box<Vec<..>>` owned by the engine, alive for the
    // engine's life, and callbacks only run inside `ds3_tick`, which takes
    // `&mut self`.
    let out = unsafe { &mut *(data as *mut Vec<(u64, bool)>) };
    out.push((addr, is_write));
}

pub struct Dramsim3Engine {
    sys: *mut c_void,
    config: DramConfig,
    work_dir: PathBuf,
    /// Filled by the C++ callback during `ds3_tick`. Boxed so that its
    /// address, which DRAMsim3 holds, survives moves of the engine.
    #[allow(clippy::box_collection)]
    callbacks: Box<Vec<(u64, bool)>>,
    /// The writes in flight by address, oldest first.
    writes: HashMap<u64, VecDeque<RequestId>>,
    /// The reads in flight by address.
    reads: HashMap<u64, Reads>,
    /// CL + BL/2: a READ's data returns this many cycles after it issues.
    read_delay: u64,
    /// This tick's read completions, by address (reused).
    done_reads: Vec<u64>,
    pending: usize,
    cycle: u64,
    finished: bool,
}

impl Dramsim3Engine {
    pub fn new(config: &DramConfig, work_dir: &Path) -> Result<Self, SimError> {
        let ini_path = work_dir.join("dramsim3.ini");
        std::fs::write(&ini_path, config.dramsim3_ini("dramsim3"))
            .map_err(|e| SimError::io(&ini_path, e))?;
        let bad_path = |p: &Path| SimError::Engine {
            engine: "dramsim3",
            what: format!("path {} contains a NUL byte", p.display()),
        };
        let c_ini = CString::new(ini_path.as_os_str().as_encoded_bytes())
            .map_err(|_| bad_path(&ini_path))?;
        let c_dir = CString::new(work_dir.as_os_str().as_encoded_bytes())
            .map_err(|_| bad_path(work_dir))?;
        let mut callbacks: Box<Vec<(u64, bool)>> = Box::default();
        let data = &mut *callbacks as *mut Vec<(u64, bool)> as *mut c_void;
        // SAFETY: the strings outlive the call; `data` outlives the system
        // (dropped after `ds3_drop` in `Drop`).
        let sys = unsafe { ds3_create(data, c_ini.as_ptr(), c_dir.as_ptr(), on_complete) };
        if sys.is_null() {
            return Err(SimError::Engine {
                engine: "dramsim3",
                what: "could not create the memory system".into(),
            });
        }
        // SAFETY: `sys` is a live memory system.
        let tck = unsafe { ds3_get_tck(sys) };
        if (tck - config.timing.tck_ns).abs() > 1e-9 {
            unsafe { ds3_drop(sys) };
            return Err(SimError::Engine {
                engine: "dramsim3",
                what: format!(
                    "configuration not taken: tCK {tck} ns, expected {}",
                    config.timing.tck_ns
                ),
            });
        }
        Ok(Dramsim3Engine {
            sys,
            config: config.clone(),
            work_dir: work_dir.to_path_buf(),
            callbacks,
            writes: HashMap::new(),
            reads: HashMap::new(),
            read_delay: crate::timing::TimingTable::of(config).read_delay,
            done_reads: Vec::new(),
            pending: 0,
            cycle: 0,
            finished: false,
        })
    }

    fn read_stats(&self) -> Result<EngineReport, SimError> {
        let path = self.work_dir.join("dramsim3.json");
        let text = std::fs::read_to_string(&path).map_err(|e| SimError::io(&path, e))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| SimError::Engine {
            engine: "dramsim3",
            what: format!("{}: not valid JSON: {e}", path.display()),
        })?;
        let ch = v.get("0").ok_or_else(|| SimError::Engine {
            engine: "dramsim3",
            what: format!("{}: no statistics for channel 0", path.display()),
        })?;
        let num = |k: &str| -> Result<f64, SimError> {
            ch.get(k)
                .and_then(Value::as_f64)
                .ok_or_else(|| SimError::Engine {
                    engine: "dramsim3",
                    what: format!("{}: missing counter `{k}`", path.display()),
                })
        };
        let per_rank = |k: &str| -> Result<f64, SimError> {
            let m = ch
                .get(k)
                .and_then(Value::as_object)
                .ok_or_else(|| SimError::Engine {
                    engine: "dramsim3",
                    what: format!("{}: missing per-rank counter `{k}`", path.display()),
                })?;
            Ok(m.values().filter_map(Value::as_f64).sum())
        };
        let u = |x: f64| x.round() as u64;
        let read_cmds = u(num("num_read_cmds")?);
        let write_cmds = u(num("num_write_cmds")?);
        let row_hits = u(num("num_read_row_hits")? + num("num_write_row_hits")?);
        let counts = CommandCounts {
            activates: u(num("num_act_cmds")?),
            precharges: u(num("num_pre_cmds")?),
            read_cmds,
            write_cmds,
            refreshes: u(num("num_ref_cmds")?),
            row_hits,
            row_misses: (read_cmds + write_cmds).saturating_sub(row_hits),
            row_conflicts: None,
            active_rank_cycles: u(per_rank("rank_active_cycles")?),
            precharged_rank_cycles: u(per_rank("all_bank_idle_cycles")?),
            self_refresh_rank_cycles: u(per_rank("sref_cycles")?),
        };
        // V x mA x cycles -> pJ.
        let tck = self.config.timing.tck_ns;
        let engine_energy = Energy::from_parts(
            num("act_energy")? * tck,
            num("read_energy")? * tck,
            num("write_energy")? * tck,
            (num("ref_energy")? + num("refb_energy")?) * tck,
            (per_rank("act_stb_energy")? + per_rank("pre_stb_energy")? + per_rank("sref_energy")?)
                * tck,
        );
        let cycles = u(num("num_cycles")?);
        if cycles != self.cycle {
            return Err(SimError::Engine {
                engine: "dramsim3",
                what: format!("reported {cycles} cycles, {} were ticked", self.cycle),
            });
        }
        // DRAMsim3's `read_latency`: reads by latency in cycles, every one.
        let read_latency_cycles = ch.get("read_latency").and_then(Value::as_object).map(|m| {
            let mut h: Vec<(u64, u64)> = m
                .iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, u(v.as_f64()?))))
                .collect();
            h.sort_unstable();
            h
        });
        Ok(EngineReport {
            counts,
            engine_energy: Some(engine_energy),
            read_latency_cycles,
        })
    }
}

impl DramEngine for Dramsim3Engine {
    fn kind(&self) -> EngineKind {
        EngineKind::Dramsim3
    }

    fn config(&self) -> &DramConfig {
        &self.config
    }

    fn try_send(&mut self, req: Request) -> Result<bool, SimError> {
        self.config.check_addr(req.addr, "")?;
        let addr = req.addr & !(self.config.burst_bytes() - 1);
        let w = req.access.is_write();
        // SAFETY: `sys` is live until drop.
        if !unsafe { ds3_can_add(self.sys, addr, w) } {
            return Ok(false);
        }
        if !unsafe { ds3_add(self.sys, addr, w) } {
            return Ok(false);
        }
        if w {
            self.writes.entry(addr).or_default().push_back(req.id);
            if let Some(r) = self.reads.get_mut(&addr) {
                r.last_write = Some(self.cycle);
            }
        } else {
            self.reads
                .entry(addr)
                .or_insert_with(|| Reads {
                    sent: VecDeque::new(),
                    last_write: None,
                })
                .sent
                .push_back((req.id, self.cycle));
        }
        self.pending += 1;
        Ok(true)
    }

    /// DRAMsim3 completes a read of an address in one of two ways, and calls
    /// back with the address alone:
    ///
    /// - from the write buffer, when a write of the address waits there: one
    ///   cycle after the read was sent;
    /// - from DRAM: a READ takes every read of its address pending when it
    ///   issues (sent at or before that cycle), and all of them complete
    ///   `read_delay` cycles later.
    ///
    /// So the `n` reads of an address completing at cycle `c` are the `b`
    /// oldest (sent at or before `c - read_delay`: a READ's batch), reads
    /// sent at `c - 1` (from the write buffer: at most the `k` sent then), or
    /// both; no other read in flight can complete at `c`. The count tells
    /// which, but when both fit (`n == b == k`, one request a cycle): then
    /// the reads sent at `c - 1` came from the write buffer only if a write
    /// of the address arrived after the older ones (had it come before,
    /// they would have come from the write buffer too), and that decides.
    /// It is a guess: that write may have been issued in the meantime, and
    /// then the two reads swap completion cycles. The run's latency
    /// statistics do not depend on it: they come from DRAMsim3's own
    /// per-read histogram (`EngineReport::read_latency_cycles`).
    fn tick(&mut self, done: &mut Vec<Completion>) {
        self.callbacks.clear();
        // SAFETY: `sys` is live; callbacks write into `self.callbacks` only.
        unsafe { ds3_tick(self.sys) };
        let c = self.cycle;
        self.done_reads.clear();
        for &(addr, w) in self.callbacks.iter() {
            if !w {
                self.done_reads.push(addr);
                continue;
            }
            let id = take_sent(
                &mut self.writes,
                addr,
                (
                    "DRAMsim3 completed a write that was never sent",
                    "DRAMsim3 completed more writes than were sent",
                ),
            );
            self.pending -= 1;
            done.push(Completion { id, cycle: c });
        }
        self.done_reads.sort_unstable();
        let mut i = 0;
        while i < self.done_reads.len() {
            let addr = self.done_reads[i];
            let n = self.done_reads[i..]
                .iter()
                .take_while(|&&a| a == addr)
                .count();
            i += n;
            let r = self
                .reads
                .get_mut(&addr)
                .expect("DRAMsim3 completed a read that was never sent");
            // (Reads sent at `c` itself, before this tick, come last.)
            let now = r.sent.iter().rev().take_while(|&&(_, s)| s == c).count();
            let k = r
                .sent
                .iter()
                .rev()
                .skip(now)
                .take_while(|&&(_, s)| s + 1 == c)
                .count();
            let b = r
                .sent
                .iter()
                .take_while(|&&(_, s)| s + self.read_delay <= c)
                .count();
            // Whether a write of the address came after the newest of the
            // `b` oldest reads (`b > 0`).
            let write_after_old = |r: &Reads| {
                let newest_old = r.sent[b - 1].1;
                r.last_write.is_some_and(|w| w >= newest_old)
            };
            // The `b` oldest and `n - b` of those sent at `c - 1`, or `n` of
            // those alone. (Reads sent at `c - 1` ahead of a write of their
            // address in that cycle did not come from the write buffer:
            // those taken are the youngest.)
            let batch_fits = n >= b && n - b <= k;
            let buffer_fits = n <= k;
            let (old, young) = match (batch_fits, buffer_fits) {
                (true, true) if b > 0 && write_after_old(r) => (0, n),
                (true, _) => (b, n - b),
                (false, true) => (0, n),
                (false, false) => {
                    // (Not what DRAMsim3 does: the oldest, as a FIFO would.)
                    debug_assert!(false, "{n} reads of {addr:#x} at {c}: b {b}, k {k}");
                    (n, 0)
                }
            };
            let end = r.sent.len() - now;
            for (id, _) in r.sent.drain(end - young..end) {
                done.push(Completion { id, cycle: c });
            }
            for _ in 0..old {
                let (id, _) = r
                    .sent
                    .pop_front()
                    .expect("DRAMsim3 completed more reads than were sent");
                done.push(Completion { id, cycle: c });
            }
            self.pending -= n;
            if r.sent.is_empty() {
                self.reads.remove(&addr);
            }
        }
        self.cycle += 1;
    }

    fn cycle(&self) -> u64 {
        self.cycle
    }

    fn pending(&self) -> usize {
        self.pending
    }

    fn finish(&mut self) -> Result<EngineReport, SimError> {
        if self.finished {
            return Err(SimError::finished_twice("dramsim3"));
        }
        self.finished = true;
        // SAFETY: `sys` is live; PrintStats only reads state and writes files.
        unsafe { ds3_print_stats(self.sys) };
        self.read_stats()
    }
}

/// The reads of one address in flight, oldest first, with the cycle each
/// was sent, and the cycle of the last write of the address sent while any
/// of them was in flight.
struct Reads {
    sent: VecDeque<(RequestId, u64)>,
    last_write: Option<u64>,
}

impl Drop for Dramsim3Engine {
    fn drop(&mut self) {
        // SAFETY: created by `ds3_create`, dropped once.
        unsafe { ds3_drop(self.sys) };
    }
}
