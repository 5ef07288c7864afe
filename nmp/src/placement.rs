//! How embedding rows map onto the R ranks of the pool.
//!
//! A row of `dim` f32 values is cut into `ceil(dim * 4 / 64)` slices of 64 B,
//! the access granularity of a rank. A placement decides which rank holds each
//! slice of each row and where in the rank it lives:
//!
//! - [`Placement::VectorSliced`] (TensorDIMM): every row of a table is split
//!   across consecutive ranks, slice `s` of table `t` on rank
//!   `(first_t + s) mod R`, where `first_t` is the sum of the slice counts of
//!   the tables before `t`. Each rank reduces its slice of every bag alone.
//! - [`Placement::RowInterleaved`] (RecNMP-style): whole rows, row `r` of
//!   table `t` on rank `(r + t) mod R`. A bag's rows spread over ranks; each
//!   rank produces partial sums that the host adds.
//! - [`Placement::TablePerRank`]: table `t` entirely on rank `t mod R`.
//! - [`Placement::Replicated`]: every rank holds the whole table. Only the
//!   TT tables of [`crate::tt::TtPool`] are placed so (their cores are
//!   small); a [`Layout`] of rows refuses it.
//!
//! Besides the table rows each rank holds, at its table's slices: the optimizer
//! state, a gradient buffer (the output gradient a `LoadGradient` brings) and a
//! coalesced-gradient buffer. Addresses are rank-local byte addresses.

use serde::{Deserialize, Serialize};

use crate::NmpError;

/// Bytes of one access: a BL8 burst on a 64-bit rank.
pub const SLICE_BYTES: u64 = 64;
/// f32 values in one slice.
pub const SLICE_VALUES: usize = 16;
/// Region alignment inside a rank.
const REGION_ALIGN: u64 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    VectorSliced,
    RowInterleaved,
    TablePerRank,
    /// Every rank holds a copy (the TT cores of [`crate::tt::TtPool`]).
    Replicated,
}

impl Placement {
    /// The placements of rows (a [`Layout`]'s).
    pub const ALL: [Placement; 3] = [
        Placement::VectorSliced,
        Placement::RowInterleaved,
        Placement::TablePerRank,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Placement::VectorSliced => "vector-sliced",
            Placement::RowInterleaved => "row-interleaved",
            Placement::TablePerRank => "table-per-rank",
            Placement::Replicated => "replicated",
        }
    }

    /// Whether the ranks split a table's rows between them, so that each
    /// rank that looked up rows of a bag returns a partial sum of whole rows
    /// and the host adds them (row interleaving). Otherwise every element of
    /// a pooled vector is computed by exactly one rank, which returns the
    /// slices it holds.
    pub fn returns_partial_sums(self) -> bool {
        matches!(self, Placement::RowInterleaved)
    }

    /// How many ranks hold some row's copy of each slice position of a
    /// table of `rows` rows on a pool of `ranks` ranks: every rank with a
    /// row of it under row interleaving (at most one per row), one otherwise.
    pub fn slice_holders(self, ranks: u64, rows: u64) -> u64 {
        if self.returns_partial_sums() {
            ranks.min(rows)
        } else {
            1
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Placement {
    type Err = NmpError;
    fn from_str(s: &str) -> Result<Self, NmpError> {
        match s.to_ascii_lowercase().as_str() {
            "vector-sliced" | "sliced" | "tensordimm" => Ok(Placement::VectorSliced),
            "row-interleaved" | "interleaved" | "recnmp" => Ok(Placement::RowInterleaved),
            "table-per-rank" | "table" => Ok(Placement::TablePerRank),
            "replicated" => Ok(Placement::Replicated),
            _ => Err(NmpError::param(
                "placement",
                format!(
                    "`{s}` is not a placement; expected vector-sliced, row-interleaved or table-per-rank"
                ),
            )),
        }
    }
}

/// Rows and width of one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableShape {
    pub rows: u64,
    pub dim: usize,
}

impl TableShape {
    pub fn slices(&self) -> usize {
        self.dim.div_ceil(SLICE_VALUES)
    }
}

/// The most ranks a pool may have.
pub const MAX_RANKS: u32 = 1 << 16;

/// The most values an embedding row may have (a 4 MiB row, 65,536 slices).
pub const MAX_DIM: usize = 1 << 20;

/// Sizes of the buffers a layout reserves besides the tables.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayoutParams {
    pub ranks: u32,
    /// Bytes each rank holds.
    pub rank_capacity_bytes: u64,
    /// Optimizer state values per row: 0 (SGD), 1 (row-wise Adagrad) or `dim`
    /// (Adagrad, RMSprop).
    pub state_values_per_row: StateWidth,
    /// Most bags of one table's output gradient (the gradient buffer's rows).
    pub max_bags: u64,
    /// Most coalesced rows of one table's batch (the coalesced buffer's rows).
    pub max_unique: u64,
}

/// How much optimizer state each row carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateWidth {
    None,
    /// One value per row, on the rank holding the row's slice 0.
    PerRow,
    /// One value per element, laid out like the row.
    PerElement,
}

impl StateWidth {
    pub fn of(optimizer: &nmpsim_kernels::Optimizer) -> Self {
        match optimizer {
            nmpsim_kernels::Optimizer::Sgd { .. } => StateWidth::None,
            nmpsim_kernels::Optimizer::RowWiseAdagrad { .. } => StateWidth::PerRow,
            _ => StateWidth::PerElement,
        }
    }
}

/// One 64 B slice of a row, where it lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    pub rank: u32,
    /// Rank-local byte address.
    pub addr: u64,
    /// Slice index within the row.
    pub slice: u32,
    /// First element of the row in this slice.
    pub first: usize,
    /// Elements in this slice (16, or fewer in a row's last slice).
    pub len: usize,
}

/// Where a table lives on one rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Region {
    /// Slices of each row held here, ascending.
    pub slices: Vec<u32>,
    /// Rows held here.
    pub local_rows: u64,
    pub weights_base: u64,
    pub state_base: u64,
    pub grad_base: u64,
    pub coal_base: u64,
    /// Whether this rank holds the row-wise optimizer state (slice 0's rank).
    pub holds_row_state: bool,
}

/// A placement applied to a set of tables on R ranks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    pub placement: Placement,
    pub params: LayoutParams,
    pub tables: Vec<TableShape>,
    /// `regions[t][rank]`, `None` where the rank holds nothing of table `t`.
    pub regions: Vec<Vec<Option<Region>>>,
    /// Bytes used on each rank.
    pub used_bytes: Vec<u64>,
    /// First rank of each table (vector-sliced: of slice 0).
    first_rank: Vec<u32>,
}

fn align_wide(x: u128) -> u128 {
    let a = u128::from(REGION_ALIGN);
    x.div_ceil(a) * a
}

impl Layout {
    pub fn new(
        placement: Placement,
        tables: &[TableShape],
        params: LayoutParams,
    ) -> Result<Self, NmpError> {
        let r = params.ranks;
        if placement == Placement::Replicated {
            return Err(NmpError::param(
                "placement",
                "replicated places the TT tables of a TT pool (nmpsim_nmp::tt::TtPool); a pool of rows takes vector-sliced, row-interleaved or table-per-rank",
            ));
        }
        if r == 0 || r > MAX_RANKS {
            return Err(NmpError::param(
                "ranks",
                format!("{r}: expected 1 to {MAX_RANKS} ranks"),
            ));
        }
        if tables.is_empty() {
            return Err(NmpError::param(
                "tables",
                "the pool needs at least one table",
            ));
        }
        for (t, s) in tables.iter().enumerate() {
            if s.dim == 0 || s.rows == 0 {
                return Err(NmpError::param(
                    format!("tables[{t}]"),
                    format!("needs rows >= 1 and dim >= 1, found {} x {}", s.rows, s.dim),
                ));
            }
            if s.dim > MAX_DIM {
                return Err(NmpError::param(
                    "dim",
                    format!(
                        "{}: expected at most {MAX_DIM} values per row (table {t})",
                        s.dim
                    ),
                ));
            }
        }
        let mut first_rank = Vec::with_capacity(tables.len());
        let mut acc = 0u64;
        for (t, s) in tables.iter().enumerate() {
            first_rank.push(match placement {
                Placement::VectorSliced => (acc % r as u64) as u32,
                Placement::RowInterleaved => (t as u64 % r as u64) as u32,
                Placement::TablePerRank | Placement::Replicated => (t as u64 % r as u64) as u32,
            });
            acc += s.slices() as u64;
        }
        let mut used = vec![0u64; r as usize];
        let mut regions = Vec::with_capacity(tables.len());
        for (t, s) in tables.iter().enumerate() {
            let nsl = s.slices() as u32;
            let mut per_rank = Vec::with_capacity(r as usize);
            for k in 0..r {
                let (slices, local_rows): (Vec<u32>, u64) = match placement {
                    Placement::VectorSliced => {
                        // Slices s with (first + s) mod R == k: the first at
                        // (k - first) mod R, then every R-th.
                        let start =
                            (k as u64 + r as u64 - first_rank[t] as u64 % r as u64) % r as u64;
                        let sl: Vec<u32> = (start..nsl as u64)
                            .step_by(r as usize)
                            .map(|s| s as u32)
                            .collect();
                        let rows = if sl.is_empty() { 0 } else { s.rows };
                        (sl, rows)
                    }
                    Placement::RowInterleaved => {
                        // Rows with (row + t) mod R == k: row = k - t (mod R) + j R.
                        let first = (k as u64 + r as u64 - (t as u64 % r as u64)) % r as u64;
                        let rows = if first < s.rows {
                            (s.rows - first).div_ceil(r as u64)
                        } else {
                            0
                        };
                        ((0..nsl).collect(), rows)
                    }
                    Placement::TablePerRank | Placement::Replicated => {
                        if first_rank[t] == k {
                            ((0..nsl).collect(), s.rows)
                        } else {
                            (Vec::new(), 0)
                        }
                    }
                };
                if local_rows == 0 {
                    per_rank.push(None);
                    continue;
                }
                let holds_row_state = slices.contains(&0);
                // Sizes in u128: a table of 2^58 rows must be refused as not
                // fitting, not wrap around to a small size (rows < 2^64 and a
                // line < 2^23 bytes, so nothing here can overflow u128).
                let rows = u128::from(local_rows);
                let line = slices.len() as u128 * u128::from(SLICE_BYTES);
                let state_bytes = match params.state_values_per_row {
                    StateWidth::None => 0,
                    StateWidth::PerRow if holds_row_state => rows * 4,
                    StateWidth::PerRow => 0,
                    StateWidth::PerElement => rows * line,
                };
                let grad_rows = u128::from(params.max_bags);
                let coal_rows = u128::from(params.max_unique.min(s.rows));
                let mut at = u128::from(used[k as usize]);
                let weights_base = at;
                at = align_wide(at + rows * line);
                let state_base = at;
                at = align_wide(at + state_bytes);
                let grad_base = at;
                at = align_wide(at + grad_rows * line);
                let coal_base = at;
                at = align_wide(at + coal_rows * line);
                if at > u128::from(params.rank_capacity_bytes) {
                    return Err(NmpError::Capacity {
                        placement: placement.name().into(),
                        rank: k,
                        need: at,
                        capacity: params.rank_capacity_bytes,
                        what: format!(
                            "table {t} ({} rows x {} dim) with its optimizer state and buffers does not fit; use more ranks, a larger preset or another placement",
                            s.rows, s.dim
                        ),
                    });
                }
                // Every offset is at most `at`, which fits the u64 capacity.
                let narrow = |x: u128| x as u64;
                let at = narrow(at);
                let (weights_base, state_base, grad_base, coal_base) = (
                    narrow(weights_base),
                    narrow(state_base),
                    narrow(grad_base),
                    narrow(coal_base),
                );
                used[k as usize] = at;
                per_rank.push(Some(Region {
                    slices,
                    local_rows,
                    weights_base,
                    state_base,
                    grad_base,
                    coal_base,
                    holds_row_state,
                }));
            }
            regions.push(per_rank);
        }
        Ok(Layout {
            placement,
            params,
            tables: tables.to_vec(),
            regions,
            used_bytes: used,
            first_rank,
        })
    }

    pub fn ranks(&self) -> u32 {
        self.params.ranks
    }

    /// The rank holding slice `slice` of row `row` of table `t`, and the row's
    /// index among the rows that rank holds.
    pub fn locate(&self, t: usize, row: u64, slice: u32) -> (u32, u64) {
        let r = self.params.ranks as u64;
        match self.placement {
            Placement::VectorSliced => {
                (((self.first_rank[t] as u64 + slice as u64) % r) as u32, row)
            }
            Placement::RowInterleaved => (((row + t as u64) % r) as u32, row / r),
            // (A layout of rows is never replicated: `new` refuses it.)
            Placement::TablePerRank | Placement::Replicated => (self.first_rank[t], row),
        }
    }

    fn piece_at(
        &self,
        t: usize,
        local: u64,
        slice: u32,
        rank: u32,
        base: impl Fn(&Region) -> u64,
    ) -> Piece {
        let reg = self.regions[t][rank as usize]
            .as_ref()
            .expect("a located rank holds the table");
        // (Slices are ascending: a search, not a scan, keeps a row's pieces
        // linear in its slices for any dim.)
        let j = reg
            .slices
            .binary_search(&slice)
            .expect("a located rank holds the slice") as u64;
        let dim = self.tables[t].dim;
        let first = slice as usize * SLICE_VALUES;
        Piece {
            rank,
            addr: base(reg) + (local * reg.slices.len() as u64 + j) * SLICE_BYTES,
            slice,
            first,
            len: SLICE_VALUES.min(dim - first),
        }
    }

    /// Every slice of a table row, in slice order.
    pub fn row_pieces(&self, t: usize, row: u64) -> impl Iterator<Item = Piece> + '_ {
        (0..self.tables[t].slices() as u32).map(move |s| {
            let (rank, local) = self.locate(t, row, s);
            self.piece_at(t, local, s, rank, |g| g.weights_base)
        })
    }

    /// Every slice of a row's element-wise optimizer state.
    pub fn state_pieces(&self, t: usize, row: u64) -> impl Iterator<Item = Piece> + '_ {
        (0..self.tables[t].slices() as u32).map(move |s| {
            let (rank, local) = self.locate(t, row, s);
            self.piece_at(t, local, s, rank, |g| g.state_base)
        })
    }

    /// Rank and byte address of a row's row-wise optimizer state (4 B).
    pub fn row_state(&self, t: usize, row: u64) -> (u32, u64) {
        let (rank, local) = self.locate(t, row, 0);
        let reg = self.regions[t][rank as usize]
            .as_ref()
            .expect("holds slice 0");
        (rank, reg.state_base + local * 4)
    }

    /// Slices of gradient-buffer row `bag` on `rank` (the ranks that hold
    /// slices of table `t`; row-interleaved: every rank holding rows of `t`
    /// keeps the whole gradient).
    pub fn grad_pieces_on(&self, t: usize, bag: u64, rank: u32) -> Vec<Piece> {
        let Some(reg) = self.regions[t][rank as usize].as_ref() else {
            return Vec::new();
        };
        let dim = self.tables[t].dim;
        reg.slices
            .iter()
            .enumerate()
            .map(|(j, &s)| {
                let first = s as usize * SLICE_VALUES;
                Piece {
                    rank,
                    addr: reg.grad_base + (bag * reg.slices.len() as u64 + j as u64) * SLICE_BYTES,
                    slice: s,
                    first,
                    len: SLICE_VALUES.min(dim - first),
                }
            })
            .collect()
    }

    /// Slices of coalesced-buffer slot `slot`, which holds table row `row`.
    pub fn coal_pieces(&self, t: usize, row: u64, slot: u64) -> impl Iterator<Item = Piece> + '_ {
        (0..self.tables[t].slices() as u32).map(move |s| {
            let (rank, _) = self.locate(t, row, s);
            self.piece_at(t, slot, s, rank, |g| g.coal_base)
        })
    }

    /// The slices of row `row` of table `t` that `rank` holds (in slice
    /// order; none when the row is elsewhere), found from the rank's own
    /// region rather than by locating every slice of the row: a rank's work
    /// stays linear in what it holds, however many ranks share a row.
    fn slices_on(&self, t: usize, row: u64, rank: u32) -> &[u32] {
        let Some(reg) = self.regions[t][rank as usize].as_ref() else {
            return &[];
        };
        // (A region's slices are the same rank's for every row it holds;
        // under row interleaving only some rows are its.)
        match reg.slices.first() {
            Some(&s) if self.locate(t, row, s).0 == rank => &reg.slices,
            _ => &[],
        }
    }

    /// The pieces of `rank`'s slices of row `row`, in the part of the
    /// region `base` picks (the weights or the optimizer state).
    fn row_part_on(
        &self,
        t: usize,
        row: u64,
        rank: u32,
        base: impl Fn(&Region) -> u64 + Copy + 'static,
    ) -> impl Iterator<Item = Piece> + '_ {
        self.slices_on(t, row, rank).iter().map(move |&s| {
            let (_, local) = self.locate(t, row, s);
            self.piece_at(t, local, s, rank, base)
        })
    }

    /// [`row_pieces`](Self::row_pieces) on `rank` alone.
    pub fn row_pieces_on(&self, t: usize, row: u64, rank: u32) -> impl Iterator<Item = Piece> + '_ {
        self.row_part_on(t, row, rank, |g| g.weights_base)
    }

    /// [`state_pieces`](Self::state_pieces) on `rank` alone.
    pub fn state_pieces_on(
        &self,
        t: usize,
        row: u64,
        rank: u32,
    ) -> impl Iterator<Item = Piece> + '_ {
        self.row_part_on(t, row, rank, |g| g.state_base)
    }

    /// [`coal_pieces`](Self::coal_pieces) on `rank` alone.
    pub fn coal_pieces_on(
        &self,
        t: usize,
        row: u64,
        slot: u64,
        rank: u32,
    ) -> impl Iterator<Item = Piece> + '_ {
        self.slices_on(t, row, rank)
            .iter()
            .map(move |&s| self.piece_at(t, slot, s, rank, |g| g.coal_base))
    }

    /// Ranks holding anything of table `t`.
    pub fn ranks_of(&self, t: usize) -> Vec<u32> {
        (0..self.params.ranks)
            .filter(|&k| self.regions[t][k as usize].is_some())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn params(ranks: u32) -> LayoutParams {
        LayoutParams {
            ranks,
            rank_capacity_bytes: 1 << 30,
            state_values_per_row: StateWidth::PerElement,
            max_bags: 64,
            max_unique: 256,
        }
    }

    #[test]
    fn the_slice_holders_are_the_layouts_and_partial_sums_go_with_split_rows() {
        let tables = odd_tables();
        for placement in Placement::ALL {
            for ranks in [1, 2, 3, 8, 65] {
                let l = Layout::new(placement, &tables, params(ranks)).unwrap();
                for (t, s) in tables.iter().enumerate() {
                    let held: usize = l.regions[t].iter().flatten().map(|r| r.slices.len()).sum();
                    let want = s.slices() as u64 * placement.slice_holders(ranks as u64, s.rows);
                    assert_eq!(held as u64, want, "{placement}, {ranks} ranks, table {t}");
                    // A row's pieces sit on one rank exactly when ranks
                    // return partial sums of whole rows.
                    let on: std::collections::BTreeSet<u32> =
                        l.row_pieces(t, s.rows - 1).map(|p| p.rank).collect();
                    if placement.returns_partial_sums() {
                        assert_eq!(on.len(), 1, "{placement}");
                    }
                }
            }
        }
    }

    /// Tables of odd sizes: rows that do not divide among the ranks, rows
    /// of one slice and of many, a last slice part full.
    fn odd_tables() -> [TableShape; 4] {
        [
            TableShape { rows: 37, dim: 64 },
            TableShape { rows: 5, dim: 20 },
            TableShape { rows: 9, dim: 200 },
            TableShape { rows: 3, dim: 1000 },
        ]
    }

    #[test]
    fn a_ranks_own_pieces_are_its_share_of_the_rows_pieces() {
        let tables = odd_tables();
        for placement in Placement::ALL {
            for ranks in [1, 2, 3, 7, 8, 32, 65] {
                let l = Layout::new(placement, &tables, params(ranks)).unwrap();
                for (t, s) in tables.iter().enumerate() {
                    for row in 0..s.rows {
                        for k in 0..ranks {
                            let all = |it: &mut dyn Iterator<Item = Piece>| -> Vec<Piece> {
                                it.filter(|p| p.rank == k).collect()
                            };
                            let on: Vec<Piece> = l.row_pieces_on(t, row, k).collect();
                            assert_eq!(on, all(&mut l.row_pieces(t, row)), "{placement} {ranks}");
                            let on: Vec<Piece> = l.state_pieces_on(t, row, k).collect();
                            assert_eq!(on, all(&mut l.state_pieces(t, row)));
                            let slot = row % 7;
                            let on: Vec<Piece> = l.coal_pieces_on(t, row, slot, k).collect();
                            assert_eq!(on, all(&mut l.coal_pieces(t, row, slot)));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_slice_of_every_row_has_one_distinct_home() {
        let tables = [
            TableShape { rows: 37, dim: 64 },
            TableShape { rows: 50, dim: 20 },
            TableShape { rows: 9, dim: 200 },
        ];
        for placement in Placement::ALL {
            for ranks in [1, 3, 8, 32] {
                let l = Layout::new(placement, &tables, params(ranks)).unwrap();
                let mut seen = HashSet::new();
                for (t, s) in tables.iter().enumerate() {
                    for row in 0..s.rows {
                        let pieces: Vec<Piece> = l.row_pieces(t, row).collect();
                        assert_eq!(pieces.len(), s.slices());
                        let covered: usize = pieces.iter().map(|p| p.len).sum();
                        assert_eq!(covered, s.dim);
                        for p in pieces {
                            assert_eq!(p.addr % SLICE_BYTES, 0);
                            assert!(p.addr < l.used_bytes[p.rank as usize]);
                            assert!(seen.insert((p.rank, p.addr)), "{placement} {ranks}: shared");
                        }
                        for p in l.state_pieces(t, row) {
                            assert!(seen.insert((p.rank, p.addr)), "{placement}: state overlaps");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn placements_spread_as_documented() {
        let tables = vec![
            TableShape {
                rows: 1000,
                dim: 64
            };
            10
        ];
        let sliced = Layout::new(Placement::VectorSliced, &tables, params(32)).unwrap();
        // 10 tables x 4 slices = 40 slice columns over 32 ranks.
        let busy: Vec<usize> = (0..32)
            .map(|k| (0..10).filter(|&t| sliced.regions[t][k].is_some()).count())
            .collect();
        assert_eq!(busy.iter().filter(|&&b| b == 2).count(), 8);
        assert_eq!(busy.iter().filter(|&&b| b == 1).count(), 24);
        let per_table = Layout::new(Placement::TablePerRank, &tables, params(32)).unwrap();
        assert_eq!((0..32).filter(|&k| per_table.used_bytes[k] > 0).count(), 10);
        let inter = Layout::new(Placement::RowInterleaved, &tables, params(32)).unwrap();
        assert!(inter.used_bytes.iter().all(|&b| b > 0));
        assert_eq!(inter.locate(3, 100, 0), (7, 3));
    }

    /// Sizes no pool could hold are refused by name before anything is
    /// allocated per rank (a `dim` beyond u32 slices once wrapped).
    #[test]
    fn absurd_ranks_and_dims_are_refused_by_name() {
        let t = [TableShape { rows: 10, dim: 16 }];
        for placement in Placement::ALL {
            let e = Layout::new(placement, &t, params(MAX_RANKS + 1)).unwrap_err();
            assert!(e.to_string().contains("`ranks`"), "{e}");
            assert!(Layout::new(placement, &t, params(MAX_RANKS)).is_ok());
            let wide = [TableShape {
                rows: 10,
                dim: 16 << 32,
            }];
            let e = Layout::new(placement, &wide, params(2)).unwrap_err();
            assert!(e.to_string().contains("`dim`"), "{e}");
        }
    }

    /// Tables whose size passes 2^64 bytes are refused as not fitting rather
    /// than wrapping around to a size that fits (2^58 rows x 64 B slices).
    #[test]
    fn sizes_past_the_64_bit_range_do_not_fit() {
        for (placement, rows) in [
            (Placement::VectorSliced, 1u64 << 58),
            (Placement::RowInterleaved, 1 << 61),
            (Placement::TablePerRank, 1 << 58),
            (Placement::VectorSliced, u64::MAX),
            (Placement::RowInterleaved, u64::MAX),
        ] {
            let mut p = params(4);
            p.rank_capacity_bytes = 8 << 30;
            p.state_values_per_row = StateWidth::PerRow;
            let t = [TableShape { rows, dim: 1 }];
            let e = Layout::new(placement, &t, p.clone())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("placement {placement}: rank "))
                    && e.contains("bytes but holds 8589934592")
                    && e.contains("does not fit"),
                "{placement} {rows}: {e}"
            );
            // Every capacity short of the size is refused likewise.
            p.rank_capacity_bytes = u64::MAX;
            assert!(Layout::new(placement, &t, p).is_err(), "{placement} {rows}");
        }
    }

    #[test]
    fn a_placement_that_does_not_fit_is_an_error() {
        let tables = vec![
            TableShape {
                rows: 1 << 20,
                dim: 64
            };
            4
        ];
        let mut p = params(2);
        p.rank_capacity_bytes = 256 << 20;
        let e = Layout::new(Placement::TablePerRank, &tables, p.clone())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("table-per-rank") && e.contains("does not fit"),
            "{e}"
        );
        // Spread over 16 ranks the same tables fit.
        p.ranks = 16;
        assert!(Layout::new(Placement::RowInterleaved, &tables, p).is_ok());
        assert!(
            "zigzag"
                .parse::<Placement>()
                .unwrap_err()
                .to_string()
                .contains("vector-sliced")
        );
    }
}
