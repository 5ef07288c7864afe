//! The one trait every DRAM engine implements.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::path::Path;

use crate::config::DramConfig;
use crate::energy::{CommandCounts, Energy};
use crate::{Completion, Request, RequestId, SimError};

/// Which engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Dramsim3,
    Ramulator,
    /// The engine written in Rust ([`crate::native`]), event-driven.
    Native,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [
        EngineKind::Dramsim3,
        EngineKind::Ramulator,
        EngineKind::Native,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Dramsim3 => "dramsim3",
            EngineKind::Ramulator => "ramulator",
            EngineKind::Native => "native",
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EngineKind {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, SimError> {
        match s.to_ascii_lowercase().as_str() {
            "dramsim3" | "ds3" => Ok(EngineKind::Dramsim3),
            "ramulator" | "ramulator1" => Ok(EngineKind::Ramulator),
            "native" | "rust" => Ok(EngineKind::Native),
            _ => Err(SimError::UnknownEngine {
                name: s.to_string(),
                valid: "dramsim3, ramulator, native".to_string(),
            }),
        }
    }
}

/// What an engine reports when a run is finished.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineReport {
    pub counts: CommandCounts,
    /// The engine's own energy figures, converted to pJ, where it has any.
    pub engine_energy: Option<Energy>,
    /// The engine's own read latencies, (cycles, reads) in rising order,
    /// where it keeps them (DRAMsim3). The runner's latency statistics use
    /// them when they account for the same reads and cycles as the
    /// completions: they do not depend on which request a completion that
    /// names only an address was given to.
    pub read_latency_cycles: Option<Vec<(u64, u64)>>,
}

/// A cycle-level DRAM model of one channel.
///
/// Requests go in with [`try_send`](DramEngine::try_send), one clock edge is
/// [`tick`](DramEngine::tick), and every accepted request completes exactly
/// once. Writes are posted: they complete when the controller has taken them;
/// [`draining`](DramEngine::draining) says whether posted writes are still
/// waiting to reach the DRAM.
pub trait DramEngine {
    fn kind(&self) -> EngineKind;
    fn config(&self) -> &DramConfig;
    /// Offers a request for this cycle. `Ok(false)` means "not now" (queue
    /// full); an address beyond the capacity is an error.
    fn try_send(&mut self, req: Request) -> Result<bool, SimError>;
    /// Advances one DRAM clock cycle and appends what completed in it.
    fn tick(&mut self, done: &mut Vec<Completion>);
    /// Ticks until at least one request has completed or [`cycle`] has
    /// reached `limit`, whichever comes first, with no new requests offered
    /// meanwhile: the same as calling [`tick`](DramEngine::tick) in a loop.
    /// Event-driven engines jump over the cycles in which nothing happens.
    ///
    /// [`cycle`]: DramEngine::cycle
    fn tick_until_done(&mut self, limit: u64, done: &mut Vec<Completion>) {
        let before = done.len();
        while self.cycle() < limit {
            self.tick(done);
            if done.len() > before {
                return;
            }
        }
    }
    /// Cycles ticked so far.
    fn cycle(&self) -> u64;
    /// Accepted requests that have not completed.
    fn pending(&self) -> usize;
    /// True while accepted work is still on its way to the DRAM (for example
    /// posted writes not yet issued), so a run is not over.
    fn draining(&mut self) -> bool {
        false
    }
    /// Ends the run and collects counters. Call once, after the last tick.
    fn finish(&mut self) -> Result<EngineReport, SimError>;
}

/// Creates an engine of `kind` for `config`, keeping its files in `work_dir`
/// (which must exist).
///
/// Ramulator keeps its statistics in a per-thread list, so a thread can host
/// only one Ramulator instance in its life: create engines on a fresh thread
/// ([`crate::on_fresh_thread`]; [`crate::simulate`] does this for you).
pub fn create_engine(
    kind: EngineKind,
    config: &DramConfig,
    work_dir: &Path,
) -> Result<Box<dyn DramEngine>, SimError> {
    Ok(match kind {
        EngineKind::Dramsim3 => Box::new(crate::dramsim3::Dramsim3Engine::new(config, work_dir)?),
        EngineKind::Ramulator => {
            Box::new(crate::ramulator::RamulatorEngine::new(config, work_dir)?)
        }
        EngineKind::Native => Box::new(crate::native::NativeEngine::new(config)?),
    })
}

/// Runs `f` on a new thread and returns its result (panics propagate).
pub fn on_fresh_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    })
}

/// The oldest request sent to `addr` and not completed yet, which a reference
/// engine has just completed (it names the address only), taken out of
/// `sent`. Panics with `unsent` if none was sent there, with `more` if all
/// that were have completed: the engine broke its contract.
pub(crate) fn take_sent(
    sent: &mut HashMap<u64, VecDeque<RequestId>>,
    addr: u64,
    (unsent, more): (&str, &str),
) -> RequestId {
    let q = sent.get_mut(&addr).expect(unsent);
    let id = q.pop_front().expect(more);
    if q.is_empty() {
        sent.remove(&addr);
    }
    id
}
