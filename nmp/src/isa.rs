//! The NMP instruction set: CISC instructions the host sends to the pool.

use nmpsim_kernels::{Optimizer, Pooling};
use serde::{Deserialize, Serialize};

/// One instruction, addressed to the whole pool; each rank's core executes
/// the part that touches its rank. Index arrays travel with the instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Instruction {
    /// Forward embedding: output row `b` pools the table rows of bag `b`
    /// (CSR `offsets`, `indices`, optional `weights`). The `B x dim` result
    /// drains to the host link.
    GatherReduce {
        table: u32,
        pooling: Pooling,
        offsets: Vec<u32>,
        indices: Vec<u32>,
        weights: Option<Vec<f32>>,
    },
    /// Host to pool: the output gradient of one table's bags (`bags x dim`,
    /// row-major), written to the table's gradient buffer in the pool.
    LoadGradient {
        table: u32,
        bags: u32,
        grads: Vec<f32>,
    },
    /// Tensor Casting's gradient gather-reduce (Algorithm 3) over the
    /// table's gradient buffer: `coal[casted_dst[i]] += scale[i] * G[casted_src[i]]`.
    /// The coalesced rows (`unique_rows`) stay in the pool's coalesced buffer.
    CastedGatherReduce {
        table: u32,
        num_bags: u32,
        casted_src: Vec<u32>,
        casted_dst: Vec<u32>,
        unique_rows: Vec<u32>,
        scale: Option<Vec<f32>>,
    },
    /// Host to pool: coalesced gradients computed on the host (the TensorDIMM
    /// baseline coalesces on the host), written to the coalesced buffer.
    LoadCoalesced {
        table: u32,
        rows: Vec<u32>,
        grads: Vec<f32>,
    },
    /// Gradient scatter fused with the optimizer: applies the table's
    /// coalesced buffer to its rows and optimizer state, in DRAM.
    Scatter { table: u32, optimizer: Optimizer },
    /// Reads the listed rows of the table with their optimizer state and
    /// sends them to the host as they are, in list order, unreduced: per
    /// row its `dim` values, then its state values (cDLRM's prefetch and
    /// victim fetch).
    Gather { table: u32, rows: Vec<u32> },
    /// EL-Rec's TT lookup on a pool of TT tables ([`crate::tt::TtPool`],
    /// each rank holding every core): output row `b` pools the rows of bag
    /// `b` (CSR `offsets`, `indices`), each row computed from its three core
    /// slices. A lookup runs on the rank its prefix `(i1, i2)` maps to; with
    /// `reuse` a rank computes each of its prefix products once and keeps it
    /// while its lookups use it (Algorithm 1's batch-level reuse), without it
    /// every lookup computes its own. Each rank sends the partial sums of
    /// the bags it touched, which the host adds.
    TtGatherReduce {
        table: u32,
        pooling: Pooling,
        reuse: bool,
        offsets: Vec<u32>,
        indices: Vec<u32>,
    },
    /// Host to pool: new values of slices `slices` of core `core` of a TT
    /// table (`slices.len()` slices of the core's slice length, in order),
    /// written to every rank's copy. The link carries them once.
    TtWrite {
        table: u32,
        core: u32,
        slices: Vec<u32>,
        values: Vec<f32>,
    },
}

impl Instruction {
    /// Whether the instruction runs on a pool of TT tables
    /// ([`crate::tt::TtPool`]) rather than one of rows ([`crate::Pool`]).
    pub fn is_tt(&self) -> bool {
        matches!(
            self,
            Instruction::TtGatherReduce { .. } | Instruction::TtWrite { .. }
        )
    }

    /// The mnemonic, as in error messages and reports.
    pub fn op(&self) -> &'static str {
        match self {
            Instruction::GatherReduce { .. } => "gather-reduce",
            Instruction::LoadGradient { .. } => "load-gradient",
            Instruction::CastedGatherReduce { .. } => "casted-gather-reduce",
            Instruction::LoadCoalesced { .. } => "load-coalesced",
            Instruction::Scatter { .. } => "scatter",
            Instruction::Gather { .. } => "gather",
            Instruction::TtGatherReduce { .. } => "tt-gather-reduce",
            Instruction::TtWrite { .. } => "tt-write",
        }
    }

    pub fn table(&self) -> u32 {
        match self {
            Instruction::GatherReduce { table, .. }
            | Instruction::LoadGradient { table, .. }
            | Instruction::CastedGatherReduce { table, .. }
            | Instruction::LoadCoalesced { table, .. }
            | Instruction::Scatter { table, .. }
            | Instruction::Gather { table, .. }
            | Instruction::TtGatherReduce { table, .. }
            | Instruction::TtWrite { table, .. } => *table,
        }
    }
}
