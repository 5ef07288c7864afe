//! The NMP pool of nmpsim.
pub mod encoding;
pub mod error;
pub mod isa;

pub use encoding::{HEADER_BYTES, decode, decode_all, encode, encode_into, encoded_len};
pub use error::NmpError;
pub use isa::Instruction;
pub mod placement;
pub use placement::{Layout, LayoutParams, Piece, Placement, StateWidth, TableShape};
pub mod pool;
pub use pool::{Pool, RankWork, rank_work, validate};
pub mod timing;
pub use timing::{BatchReport, CoreParams, EnergyParams, LinkParams, PoolEnergy, PoolParams, RankReport, run_batch};
