//! A TT table's shape: the row count and the embedding dimension each split
//! into three factors, the TT ranks `[1, R, R, 1]`, and the split of a row id
//! into its three TT indices (EL-Rec's Eq. 3).
//!
//! The factors follow EL-Rec's released code (the paper does not state them):
//! a count is rounded up to `ceil(n / 10^k) * 10^k` for each `k` below its
//! number of digits, each candidate is split into three factors, and the
//! split of maximum entropy (the factors, normalised to sum to 1, as a
//! distribution: the most balanced) wins, the least rounding on a tie. The
//! factors are kept in ascending order, so the last (the least significant
//! digit of a row id) is the largest. Row factors multiply to at least the
//! row count: the padded rows past it are never looked up. Dimension factors
//! are split without rounding: 16 = 2 x 2 x 4, 32 = 2 x 4 x 4, 64 = 4 x 4 x 4,
//! 128 = 4 x 4 x 8, and a dimension with fewer than three prime factors (2,
//! 3, 6, 7, ...) cannot be a TT table's.

use serde::Serialize;

use crate::KernelError;

/// Cores of a TT table (EL-Rec's `d`).
pub const CORES: usize = 3;

/// The shape of one TT table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TtShape {
    /// Rows of the table it stands for.
    pub rows: u64,
    pub dim: usize,
    /// `m_1 <= m_2 <= m_3`, their product at least `rows`.
    pub row_factors: [u64; CORES],
    /// `n_1 n_2 n_3 = dim`.
    pub dim_factors: [usize; CORES],
    /// `[1, R, R, 1]`.
    pub ranks: [usize; CORES + 1],
}

/// The entropy of `f` normalised to a distribution (`-sum p ln p`).
fn entropy(f: &[u64]) -> f64 {
    let s: f64 = f.iter().map(|&x| x as f64).sum();
    f.iter()
        .map(|&x| x as f64 / s)
        .filter(|&p| p > 0.0)
        .map(|p| -p * p.ln())
        .sum()
}

/// The split of `n` into three factors `a <= b <= c` of maximum entropy.
fn best_split(n: u64) -> [u64; CORES] {
    let mut best = [1, 1, n];
    let mut h = entropy(&best);
    let mut a = 1u64;
    while a * a * a <= n {
        if n % a == 0 {
            let r = n / a;
            let mut b = a;
            while b * b <= r {
                if r % b == 0 {
                    let f = [a, b, r / b];
                    let e = entropy(&f);
                    if e > h {
                        (best, h) = (f, e);
                    }
                }
                b += 1;
            }
        }
        a += 1;
    }
    best
}

/// EL-Rec's factors of `n` (module docs): rounded up, split, maximum entropy.
pub fn suggest_row_factors(n: u64) -> [u64; CORES] {
    let digits = n.max(1).to_string().len() as u32;
    let mut best: Option<([u64; CORES], f64)> = None;
    for k in 0..digits {
        let p = 10u64.pow(k);
        let m = n.div_ceil(p) * p;
        let f = best_split(m);
        let e = entropy(&f);
        if best.is_none_or(|(_, h)| e > h) {
            best = Some((f, e));
        }
    }
    best.expect("at least one digit").0
}

/// The factors of `dim` (no rounding), or why it cannot be split.
pub fn dim_factors(dim: usize) -> Result<[usize; CORES], KernelError> {
    let f = best_split(dim as u64);
    if dim == 0 || f[0] < 2 {
        return Err(KernelError::invalid(
            "dim",
            format!(
                "{dim} cannot split into {CORES} factors of at least 2 (a TT table's dimension needs at least {CORES} prime factors: 8, 12, 16, 32, 64, 128, ...)"
            ),
        ));
    }
    Ok([f[0] as usize, f[1] as usize, f[2] as usize])
}

impl TtShape {
    /// The shape of a TT table of `rows` rows of `dim` at TT rank `rank`.
    pub fn new(rows: u64, dim: usize, rank: usize) -> Result<Self, KernelError> {
        if rows == 0 {
            return Err(KernelError::invalid(
                "rows",
                "a TT table needs at least 1 row",
            ));
        }
        if rank == 0 {
            return Err(KernelError::invalid(
                "rank",
                "the TT rank must be at least 1",
            ));
        }
        if rows > u32::MAX as u64 {
            return Err(KernelError::invalid(
                "rows",
                format!("{rows} rows: row ids are u32"),
            ));
        }
        Ok(TtShape {
            rows,
            dim,
            row_factors: suggest_row_factors(rows),
            dim_factors: dim_factors(dim)?,
            ranks: [1, rank, rank, 1],
        })
    }

    /// Values of one slice of core `k` (one TT index): `r_k n_k r_{k+1}`.
    pub fn slice_len(&self, k: usize) -> usize {
        self.ranks[k] * self.dim_factors[k] * self.ranks[k + 1]
    }

    /// Values of core `k`: `m_k` slices.
    pub fn core_len(&self, k: usize) -> usize {
        self.row_factors[k] as usize * self.slice_len(k)
    }

    /// Every core's values: the table's parameters.
    pub fn params(&self) -> u64 {
        (0..CORES).map(|k| self.core_len(k) as u64).sum()
    }

    /// Bytes of the cores (f32).
    pub fn bytes(&self) -> u64 {
        4 * self.params()
    }

    /// Bytes of the dense table it stands for.
    pub fn dense_bytes(&self) -> u64 {
        4 * self.rows * self.dim as u64
    }

    /// Rows the factors address (at least `rows`; the rest are padding).
    pub fn padded_rows(&self) -> u64 {
        self.row_factors.iter().product()
    }

    /// Row `row`'s TT indices `(i_1, i_2, i_3)`: Eq. 3, `i_k = row /
    /// prod_{j>k} m_j mod m_k`.
    #[inline]
    pub fn split(&self, row: u32) -> [u32; CORES] {
        let [_, m2, m3] = self.row_factors;
        let r = row as u64;
        [
            (r / (m2 * m3)) as u32,
            ((r / m3) % m2) as u32,
            (r % m3) as u32,
        ]
    }

    /// The prefix `(i_1, i_2)` of `row` as one number, `i_1 m_2 + i_2`
    /// (`row / m_3`): the key of the reuse buffer.
    #[inline]
    pub fn prefix(&self, row: u32) -> u64 {
        row as u64 / self.row_factors[2]
    }

    /// `n_1 n_2`: the rows of a prefix product (`(n_1 n_2) x R`).
    pub fn prefix_rows(&self) -> usize {
        self.dim_factors[0] * self.dim_factors[1]
    }

    /// FLOPs of a prefix product `C1[i1] C2[i2]`: `2 n_1 R n_2 R`.
    pub fn prefix_flops(&self) -> u64 {
        let [n1, n2, _] = self.dim_factors;
        (2 * n1 * self.ranks[1] * n2 * self.ranks[2]) as u64
    }

    /// FLOPs of a row from its prefix product: `2 (n_1 n_2) R n_3`.
    pub fn last_flops(&self) -> u64 {
        (2 * self.prefix_rows() * self.ranks[2] * self.dim_factors[2]) as u64
    }

    /// FLOPs of one row computed from its cores (no reuse).
    pub fn row_flops(&self) -> u64 {
        self.prefix_flops() + self.last_flops()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_are_balanced_cover_the_rows_and_split_dims_as_documented() {
        assert_eq!(suggest_row_factors(10_000_000), [200, 200, 250]);
        assert_eq!(suggest_row_factors(1_000_000), [100, 100, 100]);
        for n in [
            1u64, 7, 1460, 583, 10_131_227, 2_202_608, 8_351_593, 33_823_983,
        ] {
            let f = suggest_row_factors(n);
            assert!(f.iter().product::<u64>() >= n, "{n}: {f:?}");
            assert!(f[0] <= f[1] && f[1] <= f[2], "{n}: {f:?}");
        }
        // A prime count is rounded up to one that splits.
        let f = suggest_row_factors(10_131_227);
        assert!(f[0] > 100, "{f:?}");
        assert_eq!(dim_factors(16).unwrap(), [2, 2, 4]);
        assert_eq!(dim_factors(32).unwrap(), [2, 4, 4]);
        assert_eq!(dim_factors(64).unwrap(), [4, 4, 4]);
        assert_eq!(dim_factors(128).unwrap(), [4, 4, 8]);
        for bad in [0, 2, 6, 7, 9] {
            let e = dim_factors(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad} cannot split")), "{e}");
        }
        assert!(
            TtShape::new(100, 16, 0)
                .unwrap_err()
                .to_string()
                .contains("rank")
        );
    }

    #[test]
    fn a_row_id_splits_most_significant_first_and_its_prefix_is_row_over_m3() {
        let s = TtShape::new(1_000_000, 16, 4).unwrap();
        assert_eq!(s.split(123_456), [12, 34, 56]);
        assert_eq!(s.prefix(123_456), 1234);
        assert_eq!(s.params(), 100 * 8 + 100 * 32 + 100 * 16);
        assert_eq!(s.slice_len(1), 4 * 2 * 4);
    }
}
