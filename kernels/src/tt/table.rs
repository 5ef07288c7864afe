//! A TT table: three cores, as EL-Rec stores them (core `k` is `m_k` slices
//! of `r_k x n_k x r_{k+1}` values, row-major), and a row computed from
//! them: `C1[i1] C2[i2] C3[i3]` (Eq. 2).

use serde::Serialize;

use super::matmul::mm;
use super::shape::{CORES, TtShape};
use crate::KernelError;

/// A TT table's cores.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TtTable {
    pub shape: TtShape,
    pub cores: [Vec<f32>; CORES],
}

impl TtTable {
    /// Zero cores of `shape`.
    pub fn zeros(shape: TtShape) -> Self {
        TtTable {
            cores: [0, 1, 2].map(|k| vec![0.0; shape.core_len(k)]),
            shape,
        }
    }

    /// Cores initialised as EL-Rec's released code does (the paper does not
    /// say): every value uniform in `[0, s)`, `s = sqrt(2 / (rows + dim))^(1/3)
    /// * prod_k r_k^(-1/6)` over the ranks `[1, R, R, 1]`, so that a row's
    /// values have about the variance of a Xavier-initialised dense row.
    /// Core `k` from `seed ^ k`.
    pub fn seeded(rows: u64, dim: usize, rank: usize, seed: u64) -> Result<Self, KernelError> {
        let shape = TtShape::new(rows, dim, rank)?;
        let mut t = TtTable::zeros(shape);
        let std = (2.0 / (rows as f64 + dim as f64)).sqrt();
        let var: f64 = shape
            .ranks
            .iter()
            .map(|&r| (r as f64).powf(-1.0 / (2.0 * CORES as f64)))
            .product();
        let s = (std.powf(1.0 / CORES as f64) * var) as f32;
        for (k, core) in t.cores.iter_mut().enumerate() {
            crate::table::fill_uniform(core, 0.0, s, seed ^ k as u64);
        }
        Ok(t)
    }

    /// Slice `i` of core `k`.
    #[inline]
    pub fn slice(&self, k: usize, i: u32) -> &[f32] {
        let n = self.shape.slice_len(k);
        &self.cores[k][i as usize * n..(i as usize + 1) * n]
    }

    /// The prefix product `C1[i1] C2[i2]` of `row` into `out` (`(n_1 n_2) x
    /// R`, row-major).
    pub fn prefix_into(&self, row: u32, out: &mut [f32]) {
        let s = &self.shape;
        let [i1, i2, _] = s.split(row);
        let [n1, n2, _] = s.dim_factors;
        // (n1 x R1) times (R1 x n2 R2).
        mm(
            n1,
            s.ranks[1],
            n2 * s.ranks[2],
            self.slice(0, i1),
            self.slice(1, i2),
            0.0,
            out,
        );
    }

    /// Row `row` from its prefix product into `out` (`dim` values, added to
    /// `out` scaled: `out = beta out + prefix C3[i3]`).
    pub fn last_into(&self, row: u32, prefix: &[f32], beta: f32, out: &mut [f32]) {
        let s = &self.shape;
        let i3 = s.split(row)[2];
        mm(
            s.prefix_rows(),
            s.ranks[2],
            s.dim_factors[2],
            prefix,
            self.slice(2, i3),
            beta,
            out,
        );
    }

    /// Row `row` (`dim` values), computed from the cores.
    pub fn row(&self, row: u32) -> Result<Vec<f32>, KernelError> {
        if row as u64 >= self.shape.rows {
            return Err(KernelError::IndexOutOfRange {
                arg: "row",
                position: 0,
                value: row as u64,
                bound: self.shape.rows,
            });
        }
        let mut p = vec![0.0; self.shape.prefix_rows() * self.shape.ranks[2]];
        self.prefix_into(row, &mut p);
        let mut out = vec![0.0; self.shape.dim];
        self.last_into(row, &p, 0.0, &mut out);
        Ok(out)
    }

    /// The dense table it stands for (`rows x dim`).
    pub fn to_dense(&self) -> Result<crate::EmbeddingTable, KernelError> {
        let mut data = Vec::with_capacity(self.shape.rows as usize * self.shape.dim);
        for r in 0..self.shape.rows as u32 {
            data.extend(self.row(r)?);
        }
        crate::EmbeddingTable::from_vec(self.shape.rows, self.shape.dim, data)
    }
}
