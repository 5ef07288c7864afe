//! Address mapping: the bit positions of the address fields ([`Mapping`]),
//! an address decoded to its bank queue and row, and a queue's rank.

use crate::config::DramConfig;

use super::NativeEngine;
use super::txn_queue::{NO_IDS, Txn};

/// Bit positions of the address fields in a byte address (above the
/// burst's offset bits).
#[derive(Clone, Copy, Debug)]
struct FieldPos {
    shift: u32,
    mask: u64,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Mapping {
    rank: FieldPos,
    bankgroup: FieldPos,
    bank: FieldPos,
    row: FieldPos,
}

impl Mapping {
    pub(super) fn of(c: &DramConfig) -> Self {
        use crate::config::Field;
        let mut pos = [FieldPos { shift: 0, mask: 0 }; 5];
        let mut shift = c.burst_bytes().trailing_zeros();
        for f in c.mapping.msb_to_lsb.iter().rev() {
            let bits = c.field_bits(*f);
            let i = match f {
                Field::Rank => 0,
                Field::Bankgroup => 1,
                Field::Bank => 2,
                Field::Row => 3,
                Field::Column => 4,
            };
            pos[i] = FieldPos {
                shift,
                mask: (1u64 << bits) - 1,
            };
            shift += bits;
        }
        Mapping {
            rank: pos[0],
            bankgroup: pos[1],
            bank: pos[2],
            row: pos[3],
        }
    }
}

impl NativeEngine {
    #[inline]
    pub(super) fn decode(&self, addr: u64) -> Txn {
        let f = |p: FieldPos| (addr >> p.shift) & p.mask;
        let rank = f(self.map.rank) as usize;
        let bg = f(self.map.bankgroup) as usize;
        let bank = f(self.map.bank) as usize;
        Txn {
            addr,
            row: f(self.map.row) as u32,
            queue: (rank * self.banks_per_rank + bg * 4 + bank) as u8,
            write: false,
            ids: NO_IDS,
        }
    }

    #[inline(always)]
    pub(super) fn rank_of(&self, q: usize) -> usize {
        q >> self.rank_shift
    }
}
