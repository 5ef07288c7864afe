//! Synthetic streams: sequential, strided and uniformly random 64 B accesses.

use std::fmt;
use std::str::FromStr;

use nmpsim_traces::Rng;
use serde::{Deserialize, Serialize};

use crate::{BURST_BYTES, MemOp, SimError};

use super::align_down;

/// The address pattern of a synthetic stream.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StreamKind {
    /// Consecutive 64 B lines from the base, wrapping at the end of the footprint.
    Sequential,
    /// Uniformly random 64 B lines of the footprint.
    Random,
    /// Advances by `stride_bytes` (a positive multiple of 64), wrapping modulo
    /// the footprint.
    Strided { stride_bytes: u64 },
}

const STREAM_FORMS: &str = "`sequential` (or `seq`), `random` (or `rand`), `strided:BYTES` (BYTES a positive multiple of 64, e.g. `strided:4096`)";

fn check_stride(stride_bytes: u64) -> Result<(), SimError> {
    if stride_bytes == 0 || stride_bytes % BURST_BYTES != 0 {
        return Err(SimError::param(
            "stride_bytes",
            format!("{stride_bytes}; expected a positive multiple of {BURST_BYTES}"),
        ));
    }
    Ok(())
}

/// Parses a decimal or `0x`-prefixed hexadecimal `u64`.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(hex, 16).ok()
        }
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    }
}

impl FromStr for StreamKind {
    type Err = SimError;

    /// Accepts `sequential` | `seq`, `random` | `rand`, `strided:BYTES`
    /// (case-insensitive; BYTES decimal or `0x` hex).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "sequential" | "seq" => return Ok(StreamKind::Sequential),
            "random" | "rand" => return Ok(StreamKind::Random),
            _ => {}
        }
        if let Some(arg) = lower.strip_prefix("strided:") {
            let stride_bytes = parse_u64(arg.trim()).ok_or_else(|| {
                SimError::param(
                    "stream",
                    format!("`{s}`: stride `{arg}` is not a number; expected {STREAM_FORMS}"),
                )
            })?;
            check_stride(stride_bytes).map_err(|_| {
                SimError::param("stream", format!("`{s}`: expected {STREAM_FORMS}"))
            })?;
            return Ok(StreamKind::Strided { stride_bytes });
        }
        Err(SimError::param(
            "stream",
            format!("`{s}` is not a stream kind; expected {STREAM_FORMS}"),
        ))
    }
}

impl fmt::Display for StreamKind {
    /// The form [`StreamKind::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamKind::Sequential => f.write_str("sequential"),
            StreamKind::Random => f.write_str("random"),
            StreamKind::Strided { stride_bytes } => write!(f, "strided:{stride_bytes}"),
        }
    }
}

/// Everything that defines a synthetic stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamSpec {
    pub kind: StreamKind,
    /// Number of requests, > 0.
    pub requests: u64,
    /// Probability that a request is a write, in `0.0..=1.0`.
    pub write_fraction: f64,
    /// Seed of the random address and read/write draws.
    pub seed: u64,
    /// First byte of the region the stream touches; 64 B aligned.
    pub base: u64,
    /// Size of the region in bytes (a multiple of 64, at least 64); `None` means
    /// everything from `base` to the capacity (rounded down to 64 B).
    pub footprint_bytes: Option<u64>,
}

impl StreamSpec {
    /// `requests` reads of `kind` over the whole memory, seed 0.
    pub fn new(kind: StreamKind, requests: u64) -> Self {
        StreamSpec {
            kind,
            requests,
            write_fraction: 0.0,
            seed: 0,
            base: 0,
            footprint_bytes: None,
        }
    }
}

/// Sub-stream of the spec's seed used for addresses of random streams.
const ADDR_STREAM: u64 = 0;
/// Sub-stream used for read/write decisions, independent of the address draws.
const RW_STREAM: u64 = 1;

/// Checks `spec` against a memory of `capacity_bytes` and returns its stream.
pub fn synthetic(spec: &StreamSpec, capacity_bytes: u64) -> Result<SyntheticStream, SimError> {
    if spec.requests == 0 {
        return Err(SimError::param("requests", "0; expected at least 1"));
    }
    if !(0.0..=1.0).contains(&spec.write_fraction) {
        return Err(SimError::param(
            "write_fraction",
            format!("{}; expected a value in 0.0..=1.0", spec.write_fraction),
        ));
    }
    if spec.base % BURST_BYTES != 0 {
        return Err(SimError::param(
            "base",
            format!(
                "{:#x} is not {BURST_BYTES} B aligned; expected a multiple of {BURST_BYTES}",
                spec.base
            ),
        ));
    }
    if spec.base >= capacity_bytes {
        return Err(SimError::param(
            "base",
            format!(
                "{:#x} is at or past the capacity of {capacity_bytes} bytes ({capacity_bytes:#x})",
                spec.base
            ),
        ));
    }
    let footprint = match spec.footprint_bytes {
        None => align_down(capacity_bytes - spec.base),
        Some(f) => {
            if f % BURST_BYTES != 0 {
                return Err(SimError::param(
                    "footprint_bytes",
                    format!("{f}; expected a multiple of {BURST_BYTES}"),
                ));
            }
            if f > capacity_bytes - spec.base {
                return Err(SimError::param(
                    "footprint_bytes",
                    format!(
                        "{f}: base {:#x} + footprint ends past the capacity of {capacity_bytes} bytes",
                        spec.base
                    ),
                ));
            }
            f
        }
    };
    if footprint < BURST_BYTES {
        return Err(SimError::param(
            "footprint_bytes",
            format!("{footprint}; expected at least {BURST_BYTES}"),
        ));
    }
    let step = match spec.kind {
        StreamKind::Sequential => BURST_BYTES,
        StreamKind::Random => 0,
        StreamKind::Strided { stride_bytes } => {
            check_stride(stride_bytes)?;
            stride_bytes % footprint
        }
    };
    let root = Rng::new(spec.seed);
    Ok(SyntheticStream {
        random: matches!(spec.kind, StreamKind::Random),
        base: spec.base,
        footprint,
        step,
        offset: 0,
        remaining: spec.requests,
        write_fraction: spec.write_fraction,
        addr_rng: root.fork(ADDR_STREAM),
        rw_rng: root.fork(RW_STREAM),
    })
}

/// A synthetic request stream; see [`synthetic`]. Deterministic for a given spec.
#[derive(Clone, Debug)]
pub struct SyntheticStream {
    random: bool,
    base: u64,
    /// Region size in bytes, a multiple of 64.
    footprint: u64,
    /// Offset advance per request (`< footprint`) for the walking kinds.
    step: u64,
    /// Offset of the next walking request from `base`, `< footprint`.
    offset: u64,
    remaining: u64,
    write_fraction: f64,
    addr_rng: Rng,
    rw_rng: Rng,
}

impl SyntheticStream {
    /// First byte of the region the stream touches.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Size of the region in bytes.
    pub fn footprint_bytes(&self) -> u64 {
        self.footprint
    }
}

impl Iterator for SyntheticStream {
    type Item = MemOp;

    fn next(&mut self) -> Option<MemOp> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let offset = if self.random {
            self.addr_rng.below(self.footprint / BURST_BYTES) * BURST_BYTES
        } else {
            let o = self.offset;
            // offset + step modulo footprint, without overflowing near 2^64.
            self.offset = if o >= self.footprint - self.step {
                o - (self.footprint - self.step)
            } else {
                o + self.step
            };
            o
        };
        let addr = self.base + offset;
        // All reads or all writes need no draw (`next_f64` is in [0, 1)).
        let write = match self.write_fraction {
            f if f <= 0.0 => false,
            f if f >= 1.0 => true,
            f => self.rw_rng.next_f64() < f,
        };
        Some(if write {
            MemOp::write(addr)
        } else {
            MemOp::read(addr)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match usize::try_from(self.remaining) {
            Ok(n) => (n, Some(n)),
            Err(_) => (usize::MAX, None),
        }
    }
}

impl ExactSizeIterator for SyntheticStream {}

impl std::iter::FusedIterator for SyntheticStream {}
