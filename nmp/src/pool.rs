//! The pool, functionally: per-rank memory images laid out by a [`Layout`],
//! and the work each rank's core does for an instruction: the 64 B requests
//! it sends to its rank, and (with data) the values it computes.
//!
//! Arithmetic is the kernels crate's, element by element and in the same
//! order, so where a placement keeps each output element on one rank
//! (vector-sliced, table-per-rank, and every casted gather-reduce and
//! scatter) the pool's results are bit-identical to `nmpsim_kernels`. A
//! row-interleaved gather-reduce adds per-rank partial sums on the host,
//! which reassociates the sum: equal within f32 rounding.

use nmpsim_kernels::{Coalesced, EmbeddingTable, Optimizer, OptimizerState, Pooling};
use nmpsim_sim::{Access, MemOp};
use rayon::prelude::*;

use crate::NmpError;
use crate::isa::Instruction;
use crate::placement::{Layout, Piece, Region, SLICE_BYTES, SLICE_VALUES, StateWidth, TableShape};

/// What a rank's core does for one instruction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankWork {
    /// 64 B requests to the rank, in issue order (rank-local addresses).
    pub requests: Vec<MemOp>,
    /// 64 B slices through the vector ALU (adds / multiply-adds / updates).
    pub alu_slices: u64,
    /// The f32 elements those slices carry (16 each, fewer in a row's last
    /// slice when the dim is not a multiple of 16): one add each.
    pub alu_values: u64,
    /// Bytes this rank sends to the host link (partial or final results,
    /// row-wise exchanges).
    pub link_out_bytes: u64,
    /// Multiply-adds of a TT lookup's products (`crate::tt`): one per lane
    /// and cycle, beside the slices above.
    pub alu_macs: u64,
}

/// Checks an instruction against the layout (and, for scatter, the pool's
/// buffers) before any rank starts.
pub fn validate(layout: &Layout, instr: &Instruction) -> Result<(), NmpError> {
    let op = instr.op();
    let t = instr.table();
    if instr.is_tt() {
        return Err(NmpError::Malformed {
            op,
            what: "a TT instruction runs on a pool of TT tables (nmpsim_nmp::tt::TtPool), not on one of embedding rows".into(),
        });
    }
    let Some(shape) = layout.tables.get(t as usize) else {
        return Err(NmpError::MissingTable {
            op,
            table: t,
            tables: layout.tables.len(),
        });
    };
    let malformed = |what: String| NmpError::Malformed { op, what };
    let range = |field: &'static str, position: usize, value: u64, bound: u64, what: String| {
        NmpError::IndexOutOfRange {
            op,
            field,
            position,
            value,
            bound,
            what,
        }
    };
    let dim = shape.dim;
    match instr {
        Instruction::GatherReduce {
            pooling,
            offsets,
            indices,
            weights,
            ..
        } => {
            if offsets.is_empty() || offsets[0] != 0 {
                return Err(malformed("`offsets` must start with 0".into()));
            }
            if *offsets.last().expect("non-empty") as usize != indices.len() {
                return Err(malformed(format!(
                    "`offsets` ends at {} but there are {} indices",
                    offsets.last().expect("non-empty"),
                    indices.len()
                )));
            }
            if let Some(p) = offsets.windows(2).position(|w| w[1] < w[0]) {
                return Err(malformed(format!(
                    "`offsets` decreases at position {}",
                    p + 1
                )));
            }
            if offsets.len() - 1 > layout.params.max_bags as usize {
                return Err(malformed(format!(
                    "{} bags exceed the pool's limit of {}",
                    offsets.len() - 1,
                    layout.params.max_bags
                )));
            }
            if let Some((i, &r)) = indices
                .iter()
                .enumerate()
                .find(|(_, r)| **r as u64 >= shape.rows)
            {
                return Err(range(
                    "indices",
                    i,
                    r as u64,
                    shape.rows,
                    format!("table {t}"),
                ));
            }
            match (pooling, weights) {
                (Pooling::WeightedSum, None) => {
                    return Err(malformed("weighted-sum pooling needs `weights`".into()));
                }
                (_, Some(w)) if w.len() != indices.len() => {
                    return Err(malformed(format!(
                        "{} weights for {} indices",
                        w.len(),
                        indices.len()
                    )));
                }
                _ => {}
            }
        }
        Instruction::LoadGradient { bags, grads, .. } => {
            if *bags as u64 > layout.params.max_bags {
                return Err(malformed(format!(
                    "{bags} bags exceed the pool's limit of {}",
                    layout.params.max_bags
                )));
            }
            if grads.len() != *bags as usize * dim {
                return Err(malformed(format!(
                    "`grads` holds {} values, expected bags x dim = {bags} x {dim}",
                    grads.len()
                )));
            }
        }
        Instruction::CastedGatherReduce {
            num_bags,
            casted_src,
            casted_dst,
            unique_rows,
            scale,
            ..
        } => {
            if casted_src.len() != casted_dst.len() {
                return Err(malformed(format!(
                    "{} casted_src for {} casted_dst",
                    casted_src.len(),
                    casted_dst.len()
                )));
            }
            if let Some(s) = scale {
                if s.len() != casted_src.len() {
                    return Err(malformed(format!(
                        "{} scales for {} lookups",
                        s.len(),
                        casted_src.len()
                    )));
                }
            }
            // (Its lookups read the gradient buffer's bags: past the buffer,
            // the addresses would fall in the next region.)
            if u64::from(*num_bags) > layout.params.max_bags {
                return Err(malformed(format!(
                    "{num_bags} bags exceed the gradient buffer ({} bags)",
                    layout.params.max_bags
                )));
            }
            if unique_rows.len() as u64 > layout.params.max_unique.min(shape.rows) {
                return Err(malformed(format!(
                    "{} unique rows exceed the coalesced buffer ({} rows)",
                    unique_rows.len(),
                    layout.params.max_unique.min(shape.rows)
                )));
            }
            if let Some((i, &b)) = casted_src
                .iter()
                .enumerate()
                .find(|(_, b)| **b >= *num_bags)
            {
                return Err(range(
                    "casted_src",
                    i,
                    b as u64,
                    *num_bags as u64,
                    "the gradient's bags".into(),
                ));
            }
            let mut prev = 0u32;
            for (i, &d) in casted_dst.iter().enumerate() {
                let ok = if i == 0 {
                    d == 0
                } else {
                    d == prev || d == prev + 1
                };
                if !ok || d as usize >= unique_rows.len() {
                    return Err(malformed(format!(
                        "`casted_dst`[{i}] = {d}: must start at 0, rise by 0 or 1, and stay below {} unique rows",
                        unique_rows.len()
                    )));
                }
                prev = d;
            }
            // (No lookups and some unique rows is malformed too: those rows
            // would get no gradient, and their slots keep an older one.)
            let reached = if casted_dst.is_empty() {
                0
            } else {
                prev as usize + 1
            };
            if reached != unique_rows.len() {
                return Err(malformed(
                    "`casted_dst` does not reach every unique row".into(),
                ));
            }
            check_rows(op, t, "unique_rows", unique_rows, shape.rows)?;
        }
        Instruction::LoadCoalesced { rows, grads, .. } => {
            if grads.len() != rows.len() * dim {
                return Err(malformed(format!(
                    "`grads` holds {} values, expected rows x dim = {} x {dim}",
                    grads.len(),
                    rows.len()
                )));
            }
            if rows.len() as u64 > layout.params.max_unique.min(shape.rows) {
                return Err(malformed(format!(
                    "{} rows exceed the coalesced buffer ({} rows)",
                    rows.len(),
                    layout.params.max_unique.min(shape.rows)
                )));
            }
            check_rows(op, t, "rows", rows, shape.rows)?;
        }
        Instruction::Gather { rows, .. } => {
            if let Some((i, &r)) = rows
                .iter()
                .enumerate()
                .find(|(_, r)| **r as u64 >= shape.rows)
            {
                return Err(range("rows", i, r as u64, shape.rows, format!("table {t}")));
            }
        }
        Instruction::Scatter { optimizer, .. } => {
            optimizer.validate()?;
            if StateWidth::of(optimizer) != layout.params.state_values_per_row
                && StateWidth::of(optimizer) != StateWidth::None
            {
                return Err(malformed(format!(
                    "optimizer {} needs {:?} state but the pool was laid out for {:?}",
                    optimizer.name(),
                    StateWidth::of(optimizer),
                    layout.params.state_values_per_row
                )));
            }
        }
        // (Refused above.)
        Instruction::TtGatherReduce { .. } | Instruction::TtWrite { .. } => {}
    }
    Ok(())
}

fn check_rows(
    op: &'static str,
    t: u32,
    field: &'static str,
    rows: &[u32],
    bound: u64,
) -> Result<(), NmpError> {
    for (i, &r) in rows.iter().enumerate() {
        if r as u64 >= bound {
            return Err(NmpError::IndexOutOfRange {
                op,
                field,
                position: i,
                value: r as u64,
                bound,
                what: format!("table {t}"),
            });
        }
        if i > 0 && r <= rows[i - 1] {
            return Err(NmpError::Malformed {
                op,
                what: format!(
                    "`{field}` must be strictly ascending; position {i} is {r} after {}",
                    rows[i - 1]
                ),
            });
        }
    }
    Ok(())
}

/// The requests and ALU work of `rank` for a valid instruction. `coal_rows`
/// is the table's coalesced buffer content (for scatter).
pub fn rank_work(layout: &Layout, instr: &Instruction, rank: u32, coal_rows: &[u32]) -> RankWork {
    let mut requests = Vec::new();
    let mut w = work_into(layout, instr, rank, coal_rows, &mut requests);
    w.requests = requests;
    w
}

/// How many requests [`rank_work`] would give `rank` for `instr`, counted
/// without building them.
pub fn rank_request_count(
    layout: &Layout,
    instr: &Instruction,
    rank: u32,
    coal_rows: &[u32],
) -> u64 {
    let mut n = RequestCount(0);
    work_into(layout, instr, rank, coal_rows, &mut n);
    n.0
}

/// Where [`work_into`] puts a rank's requests: a list of them, or a count.
trait RequestSink {
    fn push(&mut self, op: MemOp);
    fn is_empty(&self) -> bool;
}

impl RequestSink for Vec<MemOp> {
    fn push(&mut self, op: MemOp) {
        Vec::push(self, op);
    }
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

struct RequestCount(u64);

impl RequestSink for RequestCount {
    fn push(&mut self, _: MemOp) {
        self.0 += 1;
    }
    fn is_empty(&self) -> bool {
        self.0 == 0
    }
}

/// [`rank_work`] with its requests put in `sink` (the returned work's own
/// list stays empty).
fn work_into<S: RequestSink>(
    layout: &Layout,
    instr: &Instruction,
    rank: u32,
    coal_rows: &[u32],
    sink: &mut S,
) -> RankWork {
    let t = instr.table() as usize;
    let dim = layout.tables[t].dim as u64;
    let mut w = RankWork::default();
    let Some(region) = layout.regions[t][rank as usize].as_ref() else {
        return w;
    };
    let rd = |s: &mut S, p: &Piece| s.push(MemOp::read(p.addr));
    let wr = |s: &mut S, p: &Piece| s.push(MemOp::write(p.addr));
    match instr {
        Instruction::GatherReduce {
            offsets, indices, ..
        } => {
            for &row in indices {
                for p in layout.row_pieces_on(t, row as u64, rank) {
                    rd(sink, &p);
                    w.alu_slices += 1;
                    w.alu_values += p.len as u64;
                }
            }
            let bags = offsets.len() as u64 - 1;
            w.link_out_bytes = if layout.placement.returns_partial_sums() {
                // A rank that looked up rows of the table returns partial
                // sums of whole rows for every bag; one that did not, nothing.
                if sink.is_empty() { 0 } else { bags * dim * 4 }
            } else {
                bags * held_bytes(region, dim)
            };
        }
        Instruction::LoadGradient { bags, .. } => {
            for b in 0..*bags as u64 {
                for p in layout.grad_pieces_on(t, b, rank) {
                    wr(sink, &p);
                }
            }
        }
        Instruction::CastedGatherReduce {
            casted_src,
            casted_dst,
            unique_rows,
            ..
        } => {
            let mut i = 0;
            while i < casted_dst.len() {
                let u = casted_dst[i];
                let row = unique_rows[u as usize] as u64;
                let mine: Vec<Piece> = layout.coal_pieces_on(t, row, u as u64, rank).collect();
                let mut j = i;
                while j < casted_dst.len() && casted_dst[j] == u {
                    if !mine.is_empty() {
                        for g in layout.grad_pieces_on(t, casted_src[j] as u64, rank) {
                            if mine.iter().any(|p| p.slice == g.slice) {
                                rd(sink, &g);
                                w.alu_slices += 1;
                                w.alu_values += g.len as u64;
                            }
                        }
                    }
                    j += 1;
                }
                for p in &mine {
                    wr(sink, p);
                }
                i = j;
            }
        }
        Instruction::LoadCoalesced { rows, .. } => {
            for (u, &row) in rows.iter().enumerate() {
                for p in layout.coal_pieces_on(t, row as u64, u as u64, rank) {
                    wr(sink, &p);
                }
            }
        }
        Instruction::Scatter { optimizer, .. } => {
            let width = StateWidth::of(optimizer);
            for (u, &row) in coal_rows.iter().enumerate() {
                let row = row as u64;
                let coal: Vec<Piece> = layout.coal_pieces_on(t, row, u as u64, rank).collect();
                if coal.is_empty() {
                    continue;
                }
                let weights: Vec<Piece> = layout.row_pieces_on(t, row, rank).collect();
                let states: Vec<Piece> = if width == StateWidth::PerElement {
                    layout.state_pieces_on(t, row, rank).collect()
                } else {
                    Vec::new()
                };
                let row_state = (width == StateWidth::PerRow)
                    .then(|| layout.row_state(t, row))
                    .filter(|(k, _)| *k == rank);
                for p in &coal {
                    rd(sink, p);
                }
                for p in &weights {
                    rd(sink, p);
                }
                for p in &states {
                    rd(sink, p);
                }
                if let Some((_, a)) = row_state {
                    sink.push(MemOp::read(a & !(SLICE_BYTES - 1)));
                }
                for p in &weights {
                    wr(sink, p);
                    w.alu_slices += 1;
                    w.alu_values += p.len as u64;
                }
                for p in &states {
                    wr(sink, p);
                }
                if let Some((_, a)) = row_state {
                    sink.push(MemOp::write(a & !(SLICE_BYTES - 1)));
                }
                if width == StateWidth::PerRow {
                    w.link_out_bytes += row_wise_exchange_bytes(layout, t, row, rank);
                }
            }
        }
        Instruction::Gather { rows, .. } => {
            let width = layout.params.state_values_per_row;
            for &row in rows {
                let row = row as u64;
                for p in layout.row_pieces_on(t, row, rank) {
                    rd(sink, &p);
                    w.link_out_bytes += p.len as u64 * 4;
                }
                match width {
                    StateWidth::None => {}
                    StateWidth::PerElement => {
                        for p in layout.state_pieces_on(t, row, rank) {
                            rd(sink, &p);
                            w.link_out_bytes += p.len as u64 * 4;
                        }
                    }
                    StateWidth::PerRow => {
                        let (k, a) = layout.row_state(t, row);
                        if k == rank {
                            sink.push(MemOp::read(a & !(SLICE_BYTES - 1)));
                            w.link_out_bytes += 4;
                        }
                    }
                }
            }
        }
        // (No work on a pool of rows: `validate` refuses them.)
        Instruction::TtGatherReduce { .. } | Instruction::TtWrite { .. } => {}
    }
    w
}

/// Bytes every rank together sends over the host link for a gather of
/// `rows` of table `t`: each row's values and optimizer state (what the
/// ranks' [`RankWork`] `link_out_bytes` add up to).
pub fn gather_rows_link_out_bytes(layout: &Layout, t: usize, rows: &[u32]) -> u64 {
    let dim = layout.tables[t].dim as u64;
    let state = match layout.params.state_values_per_row {
        StateWidth::None => 0,
        StateWidth::PerRow => 1,
        StateWidth::PerElement => dim,
    };
    rows.len() as u64 * (dim + state) * 4
}

/// Bytes every rank together sends over the host link for a gather-reduce of
/// `bags` bags looking up `indices` in table `t`: what the ranks' [`RankWork`]
/// `link_out_bytes` add up to, without building their requests. For a pool
/// with no link model (a fixed bandwidth), this is the whole result transfer.
pub fn gather_link_out_bytes(layout: &Layout, t: usize, bags: u64, indices: &[u32]) -> u64 {
    let dim = layout.tables[t].dim as u64;
    let ranks = layout.ranks() as usize;
    if layout.placement.returns_partial_sums() {
        // Each rank that looked up a row returns a partial sum per bag.
        let mut looked = vec![false; ranks];
        for &row in indices {
            for p in layout.row_pieces(t, row as u64) {
                looked[p.rank as usize] = true;
            }
        }
        let n = (0..ranks)
            .filter(|&k| looked[k] && layout.regions[t][k].is_some())
            .count() as u64;
        n * bags * dim * 4
    } else {
        let held: u64 = layout.regions[t]
            .iter()
            .flatten()
            .map(|region| held_bytes(region, dim))
            .sum();
        bags * held
    }
}

/// Bytes of one pooled vector that a rank holding `region` of a table of
/// `dim` values returns: its slices' values (a row's last slice may hold
/// fewer than 16).
fn held_bytes(region: &Region, dim: u64) -> u64 {
    region
        .slices
        .iter()
        .map(|&s| (dim - s as u64 * SLICE_VALUES as u64).min(SLICE_VALUES as u64) * 4)
        .sum()
}

/// Bytes every rank together sends over the host link for a scatter of the
/// coalesced `rows` of table `t` with `optimizer`: the row-wise Adagrad
/// exchanges between the ranks of a row (`docs/nmp-isa.md`, "Host-link
/// bytes"); 0 for the other optimizers.
/// What the ranks' [`RankWork`] `link_out_bytes` add up to.
pub fn scatter_link_out_bytes(
    layout: &Layout,
    t: usize,
    rows: &[u32],
    optimizer: &Optimizer,
) -> u64 {
    if StateWidth::of(optimizer) != StateWidth::PerRow {
        return 0;
    }
    rows.iter()
        .map(|&row| {
            // Summed over the row's ranks: every hop that crosses ranks, and
            // the step, unless the row stays on one rank.
            let (n, rank_of) = slice_ranks(layout, t, row as u64);
            let crossings = (0..n)
                .filter(|&s| rank_of(s) != rank_of((s + 1) % n))
                .count() as u64;
            if crossings == 0 {
                0
            } else {
                4 * (crossings + 1)
            }
        })
        .sum()
}

/// The slices of row `row` of table `t` and the rank of each.
fn slice_ranks(layout: &Layout, t: usize, row: u64) -> (usize, impl Fn(usize) -> u32 + '_) {
    (layout.tables[t].slices(), move |s| {
        layout.locate(t, row, s as u32).0
    })
}

/// Bytes `rank` sends over the host link for the row-wise Adagrad update of
/// row `row` of table `t`. The update needs the row's sum of squares, and the
/// row's state lives with slice 0. The running sum passes from slice to slice
/// in element order and then back to slice 0's rank: each hop to a slice on
/// another rank costs the sender 4 B. Slice 0's rank then sends the row's
/// step (4 B) for the row's other ranks. A row whose slices are all on one
/// rank exchanges nothing.
fn row_wise_exchange_bytes(layout: &Layout, t: usize, row: u64, rank: u32) -> u64 {
    let (n, rank_of) = slice_ranks(layout, t, row);
    if (1..n).all(|s| rank_of(s) == rank_of(0)) {
        return 0;
    }
    let hops = (0..n)
        .filter(|&s| rank_of(s) == rank && rank_of((s + 1) % n) != rank)
        .count() as u64;
    let step = u64::from(rank_of(0) == rank);
    4 * (hops + step)
}

/// Per-rank memory images with real data, plus the buffers' bookkeeping.
pub struct Pool {
    layout: Layout,
    /// f32 words of each rank's used bytes.
    mem: Vec<Vec<f32>>,
    /// Bags in each table's gradient buffer.
    grad_bags: Vec<u32>,
    /// Table rows in each table's coalesced buffer, by slot.
    coal_rows: Vec<Vec<u32>>,
    /// Whether the memory images hold data (a timing-only pool keeps just the
    /// buffers' bookkeeping).
    has_data: bool,
}

fn word(p: &Piece) -> usize {
    (p.addr / 4) as usize
}

/// `acc += s * x` element by element (`acc += x` without a factor).
#[inline]
fn add_scaled(acc: &mut [f32], x: &[f32], s: Option<f32>) {
    match s {
        Some(s) => {
            for (a, x) in acc.iter_mut().zip(x) {
                *a += s * *x;
            }
        }
        None => {
            for (a, x) in acc.iter_mut().zip(x) {
                *a += *x;
            }
        }
    }
}

impl Pool {
    pub fn new(layout: Layout) -> Self {
        let mem = layout
            .used_bytes
            .iter()
            .map(|&b| vec![0.0f32; (b / 4) as usize])
            .collect();
        let n = layout.tables.len();
        Pool {
            layout,
            mem,
            grad_bags: vec![0; n],
            coal_rows: vec![Vec::new(); n],
            has_data: true,
        }
    }

    /// A pool that tracks only what timing needs (which rows each buffer
    /// holds), without memory images: for tables too large to hold twice.
    pub fn without_data(layout: Layout) -> Self {
        let n = layout.tables.len();
        Pool {
            mem: vec![Vec::new(); layout.ranks() as usize],
            layout,
            grad_bags: vec![0; n],
            coal_rows: vec![Vec::new(); n],
            has_data: false,
        }
    }

    pub fn has_data(&self) -> bool {
        self.has_data
    }

    fn need_data(&self, what: &str) -> Result<(), NmpError> {
        if self.has_data {
            Ok(())
        } else {
            Err(NmpError::param(
                what,
                "this pool was built without data (timing only)",
            ))
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Rows held in the coalesced buffer of table `t`.
    pub fn coalesced_rows(&self, t: usize) -> &[u32] {
        &self.coal_rows[t]
    }

    fn shape_check(&self, t: usize, rows: u64, dim: usize, what: &str) -> Result<(), NmpError> {
        let s = self.table_shape(t, "load")?;
        if s.rows != rows || s.dim != dim {
            return Err(NmpError::param(
                what,
                format!(
                    "table {t} is {} x {} in the pool, {rows} x {dim} given",
                    s.rows, s.dim
                ),
            ));
        }
        Ok(())
    }

    /// The layout's optimizer-state values per row of table `t`.
    fn state_width(&self, t: usize) -> usize {
        match self.layout.params.state_values_per_row {
            StateWidth::None => 0,
            StateWidth::PerRow => 1,
            StateWidth::PerElement => self.layout.tables[t].dim,
        }
    }

    /// Table `t`'s shape, or the error that it does not exist.
    fn table_shape(&self, t: usize, op: &'static str) -> Result<TableShape, NmpError> {
        self.layout
            .tables
            .get(t)
            .copied()
            .ok_or(NmpError::MissingTable {
                op,
                table: t as u32,
                tables: self.layout.tables.len(),
            })
    }

    /// Writes a table's rows to their slices.
    pub fn load_table(&mut self, t: usize, table: &EmbeddingTable) -> Result<(), NmpError> {
        self.need_data("table")?;
        self.shape_check(t, table.rows, table.dim, "table")?;
        if table.data.len() as u128 != table.rows as u128 * table.dim as u128 {
            return Err(NmpError::param(
                "table",
                format!(
                    "{} values for {} x {} rows",
                    table.data.len(),
                    table.rows,
                    table.dim
                ),
            ));
        }
        for row in 0..table.rows {
            let src = table.row(row).expect("length checked above");
            for p in self.layout.row_pieces(t, row) {
                let w = word(&p);
                self.mem[p.rank as usize][w..w + p.len]
                    .copy_from_slice(&src[p.first..p.first + p.len]);
            }
        }
        Ok(())
    }

    /// Reads a table back from the ranks.
    pub fn read_table(&self, t: usize) -> Result<EmbeddingTable, NmpError> {
        self.need_data("table")?;
        let s = self.table_shape(t, "read")?;
        let mut data = vec![0.0f32; s.rows as usize * s.dim];
        for row in 0..s.rows {
            let dst = &mut data[row as usize * s.dim..(row as usize + 1) * s.dim];
            for p in self.layout.row_pieces(t, row) {
                let w = word(&p);
                dst[p.first..p.first + p.len]
                    .copy_from_slice(&self.mem[p.rank as usize][w..w + p.len]);
            }
        }
        Ok(EmbeddingTable::from_vec(s.rows, s.dim, data).expect("shape matches"))
    }

    /// Writes optimizer state to its slices.
    pub fn load_state(&mut self, t: usize, state: &OptimizerState) -> Result<(), NmpError> {
        self.need_data("state")?;
        let s = self.table_shape(t, "load")?;
        self.shape_check(t, state.rows, s.dim, "state")?;
        let width = self.state_width(t);
        if state.values_per_row != width
            || state.values.len() as u128 != state.rows as u128 * width as u128
        {
            return Err(NmpError::param(
                "state",
                format!(
                    "{} values per row ({} in all) given; table {t}'s layout keeps {width} per row",
                    state.values_per_row,
                    state.values.len()
                ),
            ));
        }
        for row in 0..s.rows {
            let v = &state.values
                [row as usize * state.values_per_row..(row as usize + 1) * state.values_per_row];
            match self.layout.params.state_values_per_row {
                StateWidth::None => {}
                StateWidth::PerRow => {
                    let (k, a) = self.layout.row_state(t, row);
                    self.mem[k as usize][(a / 4) as usize] = v[0];
                }
                StateWidth::PerElement => {
                    for p in self.layout.state_pieces(t, row) {
                        let w = word(&p);
                        self.mem[p.rank as usize][w..w + p.len]
                            .copy_from_slice(&v[p.first..p.first + p.len]);
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads optimizer state back, `values_per_row` values per row.
    pub fn read_state(&self, t: usize, values_per_row: usize) -> Result<Vec<f32>, NmpError> {
        self.need_data("state")?;
        let s = self.table_shape(t, "read")?;
        let width = self.state_width(t);
        if values_per_row != width {
            return Err(NmpError::param(
                "values_per_row",
                format!("{values_per_row}; table {t}'s layout keeps {width} per row"),
            ));
        }
        let mut out = vec![0.0f32; s.rows as usize * values_per_row];
        for row in 0..s.rows {
            let dst = &mut out[row as usize * values_per_row..(row as usize + 1) * values_per_row];
            match self.layout.params.state_values_per_row {
                StateWidth::None => {}
                StateWidth::PerRow => {
                    let (k, a) = self.layout.row_state(t, row);
                    dst[0] = self.mem[k as usize][(a / 4) as usize];
                }
                StateWidth::PerElement => {
                    for p in self.layout.state_pieces(t, row) {
                        let w = word(&p);
                        dst[p.first..p.first + p.len]
                            .copy_from_slice(&self.mem[p.rank as usize][w..w + p.len]);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The coalesced buffer of table `t` as the kernels crate's type.
    pub fn read_coalesced(&self, t: usize) -> Coalesced {
        let dim = self.layout.tables[t].dim;
        let rows = self.coal_rows[t].clone();
        let mut grads = vec![0.0f32; rows.len() * dim];
        for (u, &row) in rows.iter().enumerate() {
            for p in self.layout.coal_pieces(t, row as u64, u as u64) {
                let w = word(&p);
                grads[u * dim + p.first..u * dim + p.first + p.len]
                    .copy_from_slice(&self.mem[p.rank as usize][w..w + p.len]);
            }
        }
        Coalesced { rows, dim, grads }
    }

    /// Runs one instruction on the data. Returns the gather-reduce output
    /// (`B x dim`) for `GatherReduce` and the rows with their state
    /// (`rows x (dim + state)`) for `Gather` on a pool with data, nothing otherwise
    /// (a timing-only pool, [`Pool::without_data`], returns nothing).
    pub fn execute(&mut self, instr: &Instruction) -> Result<Option<Vec<f32>>, NmpError> {
        validate(&self.layout, instr)?;
        let t = instr.table() as usize;
        if !self.has_data {
            match instr {
                Instruction::LoadGradient { bags, .. } => self.grad_bags[t] = *bags,
                Instruction::CastedGatherReduce {
                    num_bags,
                    unique_rows,
                    ..
                } => {
                    bags_held(instr, *num_bags, self.grad_bags[t])?;
                    self.coal_rows[t] = unique_rows.clone();
                }
                Instruction::LoadCoalesced { rows, .. } => self.coal_rows[t] = rows.clone(),
                _ => {}
            }
            return Ok(None);
        }
        let dim = self.layout.tables[t].dim;
        let layout = &self.layout;
        match instr {
            Instruction::GatherReduce {
                pooling,
                offsets,
                indices,
                weights,
                ..
            } => {
                let bags = offsets.len() - 1;
                let weights = if *pooling == Pooling::WeightedSum {
                    weights.as_deref()
                } else {
                    None
                };
                // Each rank accumulates the elements it holds, bag by bag, in
                // lookup order; row-interleaved ranks make partial sums.
                let partial: Vec<Option<Vec<f32>>> = self
                    .mem
                    .par_iter()
                    .enumerate()
                    .map(|(k, mem)| {
                        let k = k as u32;
                        layout.regions[t][k as usize].as_ref()?;
                        let mut acc = vec![0.0f32; bags * dim];
                        for b in 0..bags {
                            let out = &mut acc[b * dim..(b + 1) * dim];
                            for i in offsets[b] as usize..offsets[b + 1] as usize {
                                for p in layout
                                    .row_pieces(t, indices[i] as u64)
                                    .filter(|p| p.rank == k)
                                {
                                    let w = word(&p);
                                    let x = &mem[w..w + p.len];
                                    let a = &mut out[p.first..p.first + p.len];
                                    add_scaled(a, x, weights.map(|wt| wt[i]));
                                }
                            }
                        }
                        Some(acc)
                    })
                    .collect();
                let mut out = vec![0.0f32; bags * dim];
                if layout.placement.returns_partial_sums() {
                    // The host adds the ranks' partial sums in rank order.
                    for acc in partial.iter().flatten() {
                        for (o, a) in out.iter_mut().zip(acc) {
                            *o += *a;
                        }
                    }
                } else {
                    // Every element was computed by exactly one rank.
                    for (k, acc) in partial.iter().enumerate() {
                        let Some(acc) = acc else { continue };
                        let reg = layout.regions[t][k].as_ref().expect("present");
                        for b in 0..bags {
                            for &s in &reg.slices {
                                let first = s as usize * crate::placement::SLICE_VALUES;
                                let end = (first + crate::placement::SLICE_VALUES).min(dim);
                                out[b * dim + first..b * dim + end]
                                    .copy_from_slice(&acc[b * dim + first..b * dim + end]);
                            }
                        }
                    }
                }
                if *pooling == Pooling::Mean {
                    for b in 0..bags {
                        let len = offsets[b + 1] - offsets[b];
                        if len > 0 {
                            let len = len as f32;
                            out[b * dim..(b + 1) * dim]
                                .iter_mut()
                                .for_each(|a| *a /= len);
                        }
                    }
                }
                Ok(Some(out))
            }
            Instruction::LoadGradient { bags, grads, .. } => {
                for k in layout.ranks_of(t) {
                    for b in 0..*bags as u64 {
                        for p in layout.grad_pieces_on(t, b, k) {
                            let w = word(&p);
                            let src = &grads
                                [b as usize * dim + p.first..b as usize * dim + p.first + p.len];
                            self.mem[k as usize][w..w + p.len].copy_from_slice(src);
                        }
                    }
                }
                self.grad_bags[t] = *bags;
                Ok(None)
            }
            Instruction::CastedGatherReduce {
                num_bags,
                casted_src,
                casted_dst,
                unique_rows,
                scale,
                ..
            } => {
                bags_held(instr, *num_bags, self.grad_bags[t])?;
                let mut i = 0;
                let mut acc = vec![0.0f32; dim];
                while i < casted_dst.len() {
                    let u = casted_dst[i] as usize;
                    let row = unique_rows[u] as u64;
                    acc.iter_mut().for_each(|a| *a = 0.0);
                    let mut j = i;
                    while j < casted_dst.len() && casted_dst[j] as usize == u {
                        let b = casted_src[j] as u64;
                        // Each slice is reduced on the rank that owns the
                        // coalesced row's slice, from its copy of the gradient.
                        for p in layout.coal_pieces(t, row, u as u64) {
                            let g = layout
                                .grad_pieces_on(t, b, p.rank)
                                .into_iter()
                                .find(|g| g.slice == p.slice)
                                .expect("the owner holds the gradient slice");
                            let w = word(&g);
                            let x = &self.mem[p.rank as usize][w..w + g.len];
                            let a = &mut acc[p.first..p.first + p.len];
                            add_scaled(a, x, scale.as_ref().map(|sc| sc[j]));
                        }
                        j += 1;
                    }
                    for p in layout.coal_pieces(t, row, u as u64) {
                        let w = word(&p);
                        self.mem[p.rank as usize][w..w + p.len]
                            .copy_from_slice(&acc[p.first..p.first + p.len]);
                    }
                    i = j;
                }
                self.coal_rows[t] = unique_rows.clone();
                Ok(None)
            }
            Instruction::LoadCoalesced { rows, grads, .. } => {
                for (u, &row) in rows.iter().enumerate() {
                    for p in layout.coal_pieces(t, row as u64, u as u64) {
                        let w = word(&p);
                        self.mem[p.rank as usize][w..w + p.len]
                            .copy_from_slice(&grads[u * dim + p.first..u * dim + p.first + p.len]);
                    }
                }
                self.coal_rows[t] = rows.clone();
                Ok(None)
            }
            Instruction::Scatter { optimizer, .. } => {
                let rows = self.coal_rows[t].clone();
                let mut g = vec![0.0f32; dim];
                for (u, &row) in rows.iter().enumerate() {
                    let row = row as u64;
                    for p in self.layout.coal_pieces(t, row, u as u64) {
                        let w = word(&p);
                        g[p.first..p.first + p.len]
                            .copy_from_slice(&self.mem[p.rank as usize][w..w + p.len]);
                    }
                    self.update_row(t, row, optimizer, &g);
                }
                Ok(None)
            }
            Instruction::Gather { rows, .. } => {
                let width = self.state_width(t);
                let per = dim + width;
                let mut out = vec![0.0f32; rows.len() * per];
                for (i, &row) in rows.iter().enumerate() {
                    let row = row as u64;
                    let o = &mut out[i * per..(i + 1) * per];
                    for p in layout.row_pieces(t, row) {
                        let w = word(&p);
                        o[p.first..p.first + p.len]
                            .copy_from_slice(&self.mem[p.rank as usize][w..w + p.len]);
                    }
                    match layout.params.state_values_per_row {
                        StateWidth::None => {}
                        StateWidth::PerRow => {
                            let (k, a) = layout.row_state(t, row);
                            o[dim] = self.mem[k as usize][(a / 4) as usize];
                        }
                        StateWidth::PerElement => {
                            for p in layout.state_pieces(t, row) {
                                let w = word(&p);
                                o[dim + p.first..dim + p.first + p.len]
                                    .copy_from_slice(&self.mem[p.rank as usize][w..w + p.len]);
                            }
                        }
                    }
                }
                Ok(Some(out))
            }
            // (`validate` refused them above.)
            Instruction::TtGatherReduce { .. } | Instruction::TtWrite { .. } => Ok(None),
        }
    }

    /// The optimizer step of one row, slice by slice on the slices' ranks,
    /// with the kernels crate's arithmetic.
    fn update_row(&mut self, t: usize, row: u64, opt: &Optimizer, g: &[f32]) {
        let pieces: Vec<Piece> = self.layout.row_pieces(t, row).collect();
        let states: Vec<Piece> = match self.layout.params.state_values_per_row {
            StateWidth::PerElement => self.layout.state_pieces(t, row).collect(),
            _ => Vec::new(),
        };
        match *opt {
            Optimizer::Sgd { lr } => {
                for p in &pieces {
                    let w = word(p);
                    let m = &mut self.mem[p.rank as usize][w..w + p.len];
                    for (w, g) in m.iter_mut().zip(&g[p.first..p.first + p.len]) {
                        *w -= lr * g;
                    }
                }
            }
            Optimizer::Adagrad { lr, eps, .. } => {
                for (p, s) in pieces.iter().zip(&states) {
                    for (e, gv) in g[p.first..p.first + p.len].iter().enumerate() {
                        let a = &mut self.mem[s.rank as usize][word(s) + e];
                        *a += gv * gv;
                        let a = *a;
                        self.mem[p.rank as usize][word(p) + e] -= lr * gv / (a.sqrt() + eps);
                    }
                }
            }
            Optimizer::RowWiseAdagrad { lr, eps } => {
                // The running sum of squares passes from slice to slice in
                // element order, as the one-rank sum does.
                let mean_sq = g.iter().map(|g| g * g).sum::<f32>() / g.len() as f32;
                let (k, a) = self.layout.row_state(t, row);
                let acc = &mut self.mem[k as usize][(a / 4) as usize];
                *acc += mean_sq;
                let step = lr / (acc.sqrt() + eps);
                for p in &pieces {
                    let w = word(p);
                    let m = &mut self.mem[p.rank as usize][w..w + p.len];
                    for (w, g) in m.iter_mut().zip(&g[p.first..p.first + p.len]) {
                        *w -= step * g;
                    }
                }
            }
            Optimizer::RmsProp { lr, alpha, eps } => {
                for (p, s) in pieces.iter().zip(&states) {
                    for (e, gv) in g[p.first..p.first + p.len].iter().enumerate() {
                        let a = &mut self.mem[s.rank as usize][word(s) + e];
                        *a = alpha * *a + (1.0 - alpha) * gv * gv;
                        let a = *a;
                        self.mem[p.rank as usize][word(p) + e] -= lr * gv / (eps + a).sqrt();
                    }
                }
            }
        }
    }

    /// The work of every rank for `instr` (after validating it), in rank order.
    pub fn work(&self, instr: &Instruction) -> Result<Vec<RankWork>, NmpError> {
        validate(&self.layout, instr)?;
        let t = instr.table() as usize;
        let coal = &self.coal_rows[t];
        Ok((0..self.layout.ranks())
            .into_par_iter()
            .map(|k| rank_work(&self.layout, instr, k, coal))
            .collect())
    }

    /// How many requests [`work`](Self::work) would give the ranks for
    /// `instr`, all ranks together, counted without building them.
    pub fn request_count(&self, instr: &Instruction) -> Result<u64, NmpError> {
        validate(&self.layout, instr)?;
        Ok(self.count_requests(instr, &self.coal_rows[instr.table() as usize]))
    }

    /// The requests of a valid `instr`, all ranks together, with `coal` as
    /// its table's coalesced rows.
    fn count_requests(&self, instr: &Instruction, coal: &[u32]) -> u64 {
        (0..self.layout.ranks())
            .into_par_iter()
            .map(|k| rank_request_count(&self.layout, instr, k, coal))
            .sum()
    }

    /// Checks a whole batch before any of it runs, as [`execute`](Self::execute)
    /// would check it one instruction at a time: each instruction against the
    /// layout, and against the buffers as the instructions before it leave
    /// them (a casted gather-reduce needs its table's gradient buffer to hold
    /// its bags). With `count`, also returns each instruction's request count
    /// ([`request_count`](Self::request_count) at its turn), else nothing.
    /// Changes nothing: the buffers' later states are tracked aside, without
    /// copying them.
    pub fn check_batch(&self, batch: &[Instruction], count: bool) -> Result<Vec<u64>, NmpError> {
        let mut bags: Vec<Option<u32>> = vec![None; self.grad_bags.len()];
        let mut coal: Vec<Option<&[u32]>> = vec![None; self.coal_rows.len()];
        let mut counts = Vec::with_capacity(if count { batch.len() } else { 0 });
        for instr in batch {
            validate(&self.layout, instr)?;
            let t = instr.table() as usize;
            let rows = coal[t].unwrap_or(&self.coal_rows[t]);
            if count {
                counts.push(self.count_requests(instr, rows));
            }
            match instr {
                Instruction::LoadGradient { bags: b, .. } => bags[t] = Some(*b),
                Instruction::CastedGatherReduce {
                    num_bags,
                    unique_rows,
                    ..
                } => {
                    let held = bags[t].unwrap_or(self.grad_bags[t]);
                    bags_held(instr, *num_bags, held)?;
                    coal[t] = Some(unique_rows);
                }
                Instruction::LoadCoalesced { rows, .. } => coal[t] = Some(rows),
                _ => {}
            }
        }
        Ok(counts)
    }
}

/// Refuses a casted gather-reduce for `num_bags` bags when the gradient
/// buffer holds `held`.
fn bags_held(instr: &Instruction, num_bags: u32, held: u32) -> Result<(), NmpError> {
    if num_bags == held {
        return Ok(());
    }
    Err(NmpError::Malformed {
        op: instr.op(),
        what: format!(
            "the casting is for {num_bags} bags but the gradient buffer holds {held} (send LoadGradient first)"
        ),
    })
}

/// Access helper for reports: total request bytes of a set of rank works.
pub fn request_bytes(works: &[RankWork]) -> (u64, u64) {
    let mut r = 0;
    let mut w = 0;
    for wk in works {
        for op in &wk.requests {
            match op.access {
                Access::Read => r += SLICE_BYTES,
                Access::Write => w += SLICE_BYTES,
            }
        }
    }
    (r, w)
}
