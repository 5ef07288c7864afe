//! What flows into and out of an engine.

use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

/// Bytes moved by one request: one BL8 burst on a 64-bit rank.
pub const BURST_BYTES: u64 = 64;

/// Identifies a request from the moment it is sent until it completes.
pub type RequestId = u64;

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Write,
}

impl Access {
    pub fn is_write(self) -> bool {
        matches!(self, Access::Write)
    }
}

/// One memory operation of a request source: a 64 B access at `addr`.
/// Addresses are byte addresses; engines align them down to 64 B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemOp {
    pub addr: u64,
    pub access: Access,
}

impl MemOp {
    pub fn read(addr: u64) -> Self {
        MemOp {
            addr,
            access: Access::Read,
        }
    }
    pub fn write(addr: u64) -> Self {
        MemOp {
            addr,
            access: Access::Write,
        }
    }
}

/// A request as an engine sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: RequestId,
    pub addr: u64,
    pub access: Access,
}

/// A finished request: its id and the engine cycle at which it completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub id: RequestId,
    pub cycle: u64,
}

/// A hasher for the integer keys of the simulator's hot maps: request ids
/// (consecutive) and 64 B aligned addresses (low bits zero). A SplitMix64
/// finaliser spreads both over the table; SipHash per request was a visible
/// share of a fast engine's run.
#[derive(Default)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        let h = (self.0 ^ (self.0 >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^ (h >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 ^= x;
    }
}

/// `HashMap` / `HashSet` state with [`IntHasher`].
pub(crate) type IntHash = BuildHasherDefault<IntHasher>;
