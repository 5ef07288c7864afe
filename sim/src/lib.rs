//! DDR4 DRAM engines for nmpsim.
//!
//! One trait, [`DramEngine`]: requests in (address, read or write, id),
//! completions out, a clock, counters. Three cycle-level engines implement it:
//! DRAMsim3 ([`dramsim3`]) and Ramulator 1 ([`ramulator`]), both C++ built by
//! their crates, and a native, event-driven DDR4 model written in Rust
//! ([`native`]) that follows DRAMsim3's controller. All are configured from one
//! Rust description ([`DramConfig`]), and all are measured the same way: [`simulate`] drives an
//! engine with a request [`source`] and returns [`DramStats`], with energy from
//! command counts through one IDD model ([`energy`]). A whole run (a source
//! through several engines, their agreement, the JEDEC check, the summary)
//! is [`run`].

pub mod config;
pub mod config_file;
pub mod dramsim3;
pub mod energy;
pub mod engine;
pub mod error;
pub mod jedec;
pub mod native;
pub mod ramulator;
pub mod request;
pub mod run;
pub mod runner;
pub mod source;
pub mod standard;
pub mod timing;

pub use config::{AddressMapping, Coord, DramConfig, Timing, preset_names};
pub use energy::{CommandCounts, Energy, EventEnergy};
pub use engine::{DramEngine, EngineKind, EngineReport, create_engine, on_fresh_thread};
pub use error::SimError;
pub use request::{Access, BURST_BYTES, Completion, MemOp, Request, RequestId};
pub use runner::{DramStats, RunOptions, simulate, simulate_native};
