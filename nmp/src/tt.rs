//! A pool of TT tables (EL-Rec's Eff-TT, `nmpsim_kernels::tt`): every rank
//! holds a copy of every table's three cores ([`Placement::Replicated`]; the
//! cores are small, which is EL-Rec's point), and its core computes TT
//! lookups on its vector ALU.
//!
//! - `tt-gather-reduce`: lookup `i` runs on rank `prefix(row_i) mod R`, the
//!   rank its prefix `(i1, i2)` maps to, so that every lookup sharing a
//!   prefix product is on one rank. With reuse, a rank takes its lookups
//!   grouped by prefix (the host sends them so): per distinct prefix it reads
//!   the two core slices `C1[i1]`, `C2[i2]` and computes their product once,
//!   keeping it (`n_1 n_2 x R` values) while that prefix's lookups each read
//!   `C3[i3]` and take one small product; without reuse every lookup reads
//!   all three slices and computes both products. Each rank adds the rows of
//!   a bag it computed into that bag's partial sum and sends the partial sums
//!   of the bags it touched, each with its bag id; the host adds them.
//! - `tt-write`: new values of some slices of one core, written to every
//!   rank's copy (the link carries them once).
//!
//! The ALU does one multiply-add per lane per cycle: a rank's ALU time is
//! its multiply-adds over its lanes at its clock, beside its DRAM time, and
//! the larger of the two bounds it ([`crate::BatchReport::bound`]). This is
//! the one primitive whose arithmetic can outlast its memory traffic.
//!
//! Arithmetic is the kernels crate's (each row from `TtTable::prefix_into`
//! and `last_into`, the pooling factor from `lookup_scale`): a bag whose
//! lookups all ran on one rank is bit-identical to `tt_gather_reduce`;
//! otherwise the host's sum of partial sums reassociates it (equal within
//! f32 rounding).

use std::collections::BTreeMap;

use nmpsim_kernels::Pooling;
use nmpsim_kernels::pooling::lookup_scale;
use nmpsim_kernels::tt::{CORES, TtShape, TtTable};
use nmpsim_sim::MemOp;
use rayon::prelude::*;

use crate::NmpError;
use crate::isa::Instruction;
use crate::placement::{MAX_RANKS, Placement, SLICE_BYTES};
use crate::pool::RankWork;

/// Region alignment inside a rank (as the layouts of rows).
const ALIGN: u64 = 4096;

/// Bytes of a bag id sent with a partial sum.
pub const BAG_ID_BYTES: u64 = 4;

/// The TT tables of a pool, each rank holding every core.
#[derive(Clone, Debug)]
pub struct TtPool {
    ranks: u32,
    shapes: Vec<TtShape>,
    /// Rank-local byte address of each table's cores (the same on every
    /// rank).
    bases: Vec<[u64; CORES]>,
    used_bytes: u64,
    capacity_bytes: u64,
    /// The cores' values, for a pool that computes.
    tables: Option<Vec<TtTable>>,
}

fn align(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// The 64 B lines a byte range `[addr, addr + bytes)` touches.
fn lines(addr: u64, bytes: u64) -> impl Iterator<Item = u64> {
    let first = addr / SLICE_BYTES;
    let last = (addr + bytes.max(1) - 1) / SLICE_BYTES;
    (first..=last).map(|l| l * SLICE_BYTES)
}

impl TtPool {
    /// A pool of `ranks` ranks of `capacity_bytes` each, holding the TT
    /// tables of `shapes` from rank-local address `start` up (after what
    /// else the ranks hold), times only: it computes no values.
    pub fn new(
        ranks: u32,
        capacity_bytes: u64,
        start: u64,
        shapes: &[TtShape],
    ) -> Result<Self, NmpError> {
        if ranks == 0 || ranks > MAX_RANKS {
            return Err(NmpError::param(
                "ranks",
                format!("{ranks}: expected 1 to {MAX_RANKS} ranks"),
            ));
        }
        if shapes.is_empty() {
            return Err(NmpError::param(
                "tables",
                "a TT pool needs at least one TT table",
            ));
        }
        let mut at = align(start);
        let mut bases = Vec::with_capacity(shapes.len());
        for s in shapes {
            let mut b = [0u64; CORES];
            for (k, base) in b.iter_mut().enumerate() {
                *base = at;
                at = align(at + s.core_len(k) as u64 * 4);
            }
            bases.push(b);
        }
        if at > capacity_bytes {
            return Err(NmpError::Capacity {
                placement: Placement::Replicated.to_string(),
                rank: 0,
                need: u128::from(at),
                capacity: capacity_bytes,
                what: format!(
                    "every rank holds a copy of the {} TT tables' cores ({} bytes) after {start} bytes of rows",
                    shapes.len(),
                    at - align(start)
                ),
            });
        }
        Ok(TtPool {
            ranks,
            shapes: shapes.to_vec(),
            bases,
            used_bytes: at,
            capacity_bytes,
            tables: None,
        })
    }

    /// [`TtPool::new`] holding the values of `tables`, which it computes
    /// with.
    pub fn with_tables(
        ranks: u32,
        capacity_bytes: u64,
        start: u64,
        tables: Vec<TtTable>,
    ) -> Result<Self, NmpError> {
        let shapes: Vec<TtShape> = tables.iter().map(|t| t.shape).collect();
        let mut p = TtPool::new(ranks, capacity_bytes, start, &shapes)?;
        p.tables = Some(tables);
        Ok(p)
    }

    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    pub fn shapes(&self) -> &[TtShape] {
        &self.shapes
    }

    /// Bytes each rank holds up to the end of the TT cores.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Table `t`'s cores, in a pool that computes.
    pub fn table(&self, t: usize) -> Option<&TtTable> {
        self.tables.as_ref().and_then(|v| v.get(t))
    }

    /// The rank a lookup of `row` of table `t` runs on.
    pub fn rank_of(&self, t: usize, row: u32) -> u32 {
        (self.shapes[t].prefix(row) % self.ranks as u64) as u32
    }

    /// Bytes every rank together sends for a tt-gather-reduce of `indices`
    /// (CSR `offsets`) on table `t`: one partial sum of `dim` values and its
    /// bag id per rank and bag it touched (what the ranks' [`RankWork`]
    /// `link_out_bytes` add up to).
    pub fn gather_reduce_link_out_bytes(&self, t: usize, offsets: &[u32], indices: &[u32]) -> u64 {
        let s = &self.shapes[t];
        let bags = offsets.len().saturating_sub(1) as u64;
        let mut pairs: Vec<u64> = Vec::with_capacity(indices.len());
        for (b, w) in offsets.windows(2).enumerate() {
            for &r in &indices[w[0] as usize..w[1] as usize] {
                pairs.push(self.rank_of(t, r) as u64 * bags + b as u64);
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs.len() as u64 * (s.dim as u64 * 4 + BAG_ID_BYTES)
    }

    /// Bytes all ranks together read for a tt-gather-reduce of `indices` on
    /// table `t` (64 B lines of core slices, what its requests add up to):
    /// with reuse each distinct prefix's two slices once (every prefix is on
    /// one rank), without it every lookup's; every lookup's last slice.
    pub fn gather_reduce_read_bytes(&self, t: usize, reuse: bool, indices: &[u32]) -> u64 {
        let s = &self.shapes[t];
        let lines = |k: usize| (s.slice_len(k) as u64 * 4).div_ceil(SLICE_BYTES) * SLICE_BYTES;
        let n = indices.len() as u64;
        let products = if reuse {
            let mut p: Vec<u64> = indices.iter().map(|&r| s.prefix(r)).collect();
            p.sort_unstable();
            p.dedup();
            p.len() as u64
        } else {
            n
        };
        products * (lines(0) + lines(1)) + n * lines(2)
    }

    /// Bytes all ranks together write for a tt-write of `slices` slices
    /// of core `k` of table `t`: every rank's copy.
    pub fn write_bytes(&self, t: usize, k: usize, slices: usize) -> u64 {
        let per = (self.shapes[t].slice_len(k) as u64 * 4).div_ceil(SLICE_BYTES) * SLICE_BYTES;
        self.ranks as u64 * slices as u64 * per
    }

    /// Checks an instruction against the tables.
    pub fn validate(&self, instr: &Instruction) -> Result<(), NmpError> {
        let op = instr.op();
        let t = instr.table();
        let malformed = |what: String| NmpError::Malformed { op, what };
        if !instr.is_tt() {
            return Err(malformed(
                "a pool of TT tables runs tt-gather-reduce and tt-write only".into(),
            ));
        }
        let Some(shape) = self.shapes.get(t as usize) else {
            return Err(NmpError::MissingTable {
                op,
                table: t,
                tables: self.shapes.len(),
            });
        };
        match instr {
            Instruction::TtGatherReduce {
                pooling,
                offsets,
                indices,
                ..
            } => {
                if *pooling == Pooling::WeightedSum {
                    return Err(malformed(
                        "a TT lookup pools by sum or mean (it carries no weights)".into(),
                    ));
                }
                if offsets.is_empty() || offsets[0] != 0 {
                    return Err(malformed("`offsets` must start with 0".into()));
                }
                let last = *offsets.last().expect("non-empty");
                if last as usize != indices.len() {
                    return Err(malformed(format!(
                        "`offsets` ends at {last} but there are {} indices",
                        indices.len()
                    )));
                }
                if let Some(p) = offsets.windows(2).position(|w| w[1] < w[0]) {
                    return Err(malformed(format!(
                        "`offsets` decreases at position {}",
                        p + 1
                    )));
                }
                if let Some((i, &r)) = indices
                    .iter()
                    .enumerate()
                    .find(|(_, r)| **r as u64 >= shape.rows)
                {
                    return Err(NmpError::IndexOutOfRange {
                        op,
                        field: "indices",
                        position: i,
                        value: r as u64,
                        bound: shape.rows,
                        what: format!("TT table {t}"),
                    });
                }
            }
            Instruction::TtWrite {
                core,
                slices,
                values,
                ..
            } => {
                let k = *core as usize;
                if k >= CORES {
                    return Err(malformed(format!(
                        "core {core}: a TT table has cores 0 to {}",
                        CORES - 1
                    )));
                }
                let n = shape.row_factors[k];
                if let Some((i, &s)) = slices.iter().enumerate().find(|(_, s)| **s as u64 >= n) {
                    return Err(NmpError::IndexOutOfRange {
                        op,
                        field: "slices",
                        position: i,
                        value: s as u64,
                        bound: n,
                        what: format!("core {core} of TT table {t}"),
                    });
                }
                let want = slices.len() * shape.slice_len(k);
                if values.len() != want {
                    return Err(malformed(format!(
                        "{} values for {} slices of {} values each (core {core})",
                        values.len(),
                        slices.len(),
                        shape.slice_len(k)
                    )));
                }
            }
            _ => unreachable!("refused above"),
        }
        Ok(())
    }

    /// Rank-local address of slice `i` of core `k` of table `t`.
    fn slice_addr(&self, t: usize, k: usize, i: u32) -> u64 {
        self.bases[t][k] + i as u64 * self.shapes[t].slice_len(k) as u64 * 4
    }

    fn read_slice(&self, w: &mut RankWork, t: usize, k: usize, i: u32) {
        let bytes = self.shapes[t].slice_len(k) as u64 * 4;
        w.requests
            .extend(lines(self.slice_addr(t, k, i), bytes).map(MemOp::read));
    }

    /// Each rank's lookups of a tt-gather-reduce: per rank, its prefixes in
    /// ascending order, each with the positions (into `indices`) of its
    /// lookups, ascending.
    fn assign(&self, t: usize, indices: &[u32]) -> Vec<BTreeMap<u64, Vec<u32>>> {
        let s = &self.shapes[t];
        let mut per: Vec<BTreeMap<u64, Vec<u32>>> = vec![BTreeMap::new(); self.ranks as usize];
        for (i, &r) in indices.iter().enumerate() {
            let p = s.prefix(r);
            per[(p % self.ranks as u64) as usize]
                .entry(p)
                .or_default()
                .push(i as u32);
        }
        per
    }

    /// The work of every rank for `instr` (after validating it), in rank
    /// order: its requests, its multiply-adds, the bytes it sends.
    pub fn work(&self, instr: &Instruction) -> Result<Vec<RankWork>, NmpError> {
        self.validate(instr)?;
        let t = instr.table() as usize;
        let s = self.shapes[t];
        match instr {
            Instruction::TtGatherReduce {
                reuse,
                offsets,
                indices,
                ..
            } => {
                let per = self.assign(t, indices);
                let bag_of = bag_index(offsets);
                let [n1, n2, n3] = s.dim_factors;
                let r = s.ranks[1] as u64;
                let prefix_macs = (n1 * n2) as u64 * r * r;
                let last_macs = (n1 * n2 * n3) as u64 * r;
                let dim = s.dim as u64;
                Ok(per
                    .par_iter()
                    .map(|mine| {
                        let mut w = RankWork::default();
                        let mut bags = std::collections::BTreeSet::new();
                        for lookups in mine.values() {
                            let row0 = indices[lookups[0] as usize];
                            let [i1, i2, _] = s.split(row0);
                            let times = if *reuse { 1 } else { lookups.len() };
                            for _ in 0..times {
                                self.read_slice(&mut w, t, 0, i1);
                                self.read_slice(&mut w, t, 1, i2);
                                w.alu_macs += prefix_macs;
                            }
                            for &i in lookups {
                                let [_, _, i3] = s.split(indices[i as usize]);
                                self.read_slice(&mut w, t, 2, i3);
                                // The row's product, and its scaled add into
                                // the bag's partial sum.
                                w.alu_macs += last_macs + dim;
                                bags.insert(bag_of[i as usize]);
                            }
                        }
                        w.link_out_bytes = bags.len() as u64 * (dim * 4 + BAG_ID_BYTES);
                        w
                    })
                    .collect())
            }
            Instruction::TtWrite { core, slices, .. } => {
                let k = *core as usize;
                let bytes = s.slice_len(k) as u64 * 4;
                let mut one = RankWork::default();
                for &i in slices {
                    one.requests
                        .extend(lines(self.slice_addr(t, k, i), bytes).map(MemOp::write));
                }
                Ok(vec![one; self.ranks as usize])
            }
            _ => unreachable!("validate refuses them"),
        }
    }

    /// Runs one instruction on the values: the pooled rows (`B x dim`) for
    /// a tt-gather-reduce in a pool that computes, nothing otherwise.
    pub fn execute(&mut self, instr: &Instruction) -> Result<Option<Vec<f32>>, NmpError> {
        self.validate(instr)?;
        let t = instr.table() as usize;
        if self.tables.is_none() {
            return Ok(None);
        }
        let per = match instr {
            Instruction::TtGatherReduce { indices, .. } => self.assign(t, indices),
            _ => Vec::new(),
        };
        let tables = self.tables.as_mut().expect("checked");
        match instr {
            Instruction::TtGatherReduce {
                pooling,
                offsets,
                indices,
                ..
            } => {
                let table = &tables[t];
                let s = table.shape;
                let dim = s.dim;
                let bags = offsets.len() - 1;
                let bag_of = bag_index(offsets);
                // Each rank's partial sums, its lookups of a bag added in
                // the bag's order.
                let partials: Vec<BTreeMap<u32, Vec<f32>>> = per
                    .par_iter()
                    .map(|mine| {
                        let mut order: Vec<u32> = mine.values().flatten().copied().collect();
                        order.sort_unstable();
                        let mut sums: BTreeMap<u32, Vec<f32>> = BTreeMap::new();
                        let mut prefix = vec![0.0f32; s.prefix_rows() * s.ranks[2]];
                        let mut row = vec![0.0f32; dim];
                        for i in order {
                            let r = indices[i as usize];
                            let b = bag_of[i as usize];
                            table.prefix_into(r, &mut prefix);
                            table.last_into(r, &prefix, 0.0, &mut row);
                            let len = offsets[b as usize + 1] - offsets[b as usize];
                            let f = lookup_scale(*pooling, len, None);
                            let o = sums.entry(b).or_insert_with(|| vec![0.0; dim]);
                            if f == 1.0 {
                                o.iter_mut().zip(&row).for_each(|(a, x)| *a += *x);
                            } else {
                                o.iter_mut().zip(&row).for_each(|(a, x)| *a += f * *x);
                            }
                        }
                        sums
                    })
                    .collect();
                let mut out = vec![0.0f32; bags * dim];
                for sums in &partials {
                    for (&b, v) in sums {
                        let o = &mut out[b as usize * dim..(b as usize + 1) * dim];
                        o.iter_mut().zip(v).for_each(|(a, x)| *a += *x);
                    }
                }
                Ok(Some(out))
            }
            Instruction::TtWrite {
                core,
                slices,
                values,
                ..
            } => {
                let k = *core as usize;
                let table = &mut tables[t];
                let n = table.shape.slice_len(k);
                for (j, &i) in slices.iter().enumerate() {
                    table.cores[k][i as usize * n..(i as usize + 1) * n]
                        .copy_from_slice(&values[j * n..(j + 1) * n]);
                }
                Ok(None)
            }
            _ => unreachable!("validate refuses them"),
        }
    }
}

/// The bag of each lookup position of a CSR batch.
fn bag_index(offsets: &[u32]) -> Vec<u32> {
    let n = *offsets.last().unwrap_or(&0) as usize;
    let mut out = vec![0u32; n];
    for (b, w) in offsets.windows(2).enumerate() {
        out[w[0] as usize..w[1] as usize].fill(b as u32);
    }
    out
}
