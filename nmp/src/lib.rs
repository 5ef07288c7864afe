//! The NMP pool of nmpsim: near-memory processing cores, one per DDR4 rank,
//! running the embedding primitives of DLRM training (TensorDIMM / Tensor
//! Casting, Sec. IV-C).
//!
//! - [`isa`]: the CISC instructions the host sends ([`Instruction`]), and
//!   [`encoding`]: their binary form, whose length is what the host link carries.
//! - [`placement`]: how table rows map onto the ranks ([`Placement`]), giving
//!   rank-local addresses for every 64 B slice ([`Layout`]).
//! - [`pool`]: the functional pool ([`Pool`]): real data in per-rank memory
//!   images, results equal to `nmpsim_kernels`, and each rank's request stream.
//! - [`timing`]: the timed pool ([`run_batch`]): each rank's requests through its
//!   own DRAM engine, ranks in parallel, a vector ALU and a host link, reported
//!   as a [`BatchReport`].
//! - [`tt`]: a pool of TT tables ([`TtPool`], EL-Rec's Eff-TT), every rank
//!   holding every core and computing TT lookups on its vector ALU, timed by
//!   [`run_tt_batch`].
//! - [`run`]: a whole run (batches under several placements, one primitive
//!   and the phases that set it up, the analytic bytes, the kernels' check),
//!   what `nmpsim nmp run` drives.
pub mod encoding;
pub mod error;
pub mod isa;

pub use encoding::{
    HEADER_BYTES, check_encodable, decode, decode_all, encode, encode_into, encoded_len,
};
pub use error::NmpError;
pub use isa::Instruction;
pub mod placement;
pub use placement::{Layout, LayoutParams, Piece, Placement, StateWidth, TableShape};
pub mod pool;
pub use pool::{
    Pool, RankWork, gather_link_out_bytes, gather_rows_link_out_bytes, rank_request_count,
    rank_work, scatter_link_out_bytes, validate,
};
pub mod run;
pub mod timing;
pub mod tt;
pub use timing::{
    BYTES_PER_REQUEST, BatchReport, CoreParams, EnergyParams, LinkParams, MIN_RATE, PoolEnergy,
    PoolParams, RankReport, run_batch, run_batch_within, run_tt_batch,
};
pub use tt::TtPool;
