//! What flows into and out of an engine.

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
