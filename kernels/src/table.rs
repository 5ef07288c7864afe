//! A dense embedding table: `rows` rows of `dim` f32 values, row-major.

use crate::error::{KernelError, check_dim};

/// A row-major f32 embedding table.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingTable {
    pub rows: u64,
    pub dim: usize,
    /// `rows * dim` values; row `r` is `data[r * dim..(r + 1) * dim]`.
    pub data: Vec<f32>,
}

fn checked_len(rows: u64, dim: usize) -> Result<usize, KernelError> {
    check_dim(dim)?;
    usize::try_from(rows)
        .ok()
        .and_then(|r| r.checked_mul(dim))
        .ok_or_else(|| {
            KernelError::invalid(
                "rows",
                format!("{rows} rows x {dim} does not fit in memory"),
            )
        })
}

/// A zeroed buffer of `len` f32 values whose interior is advised for transparent
/// huge pages (Linux `MADV_HUGEPAGE`) before any page is touched.
///
/// Embedding tables are gigabytes read at random rows: with 4 KiB pages nearly every
/// lookup also misses the TLB, and on machines whose THP mode is `madvise` only an
/// explicit advice gets 2 MiB pages. The advice is a hint; where it is refused or
/// the OS has no such thing, the buffer is an ordinary zeroed `Vec`.
pub fn zeroed_huge(len: usize) -> Vec<f32> {
    // calloc-backed: large buffers come straight from mmap, untouched.
    let v = vec![0.0f32; len];
    advise_huge_pages(&v);
    v
}

/// A zeroed [`zeroed_huge`] buffer with every page already faulted in, for state
/// that kernels read before they write it (optimizer state, tables of zeros).
///
/// An untouched page reads as the kernel's shared zero page; the first write to
/// it then faults, and with huge pages the kernel zeroes 2 MiB there and then.
/// Left to the kernels, that happens inside the first updates that touch each
/// page: on a Criteo-sized Adagrad state it was over half of the CPU time of a
/// whole `kernels bench` run, all inside the timed scatters. One write per
/// 4 KiB page here moves it to allocation, where it is paid once and untimed.
pub fn zeroed_faulted(len: usize) -> Vec<f32> {
    let mut v = zeroed_huge(len);
    const PAGE_VALUES: usize = 4096 / size_of::<f32>();
    for x in v.iter_mut().step_by(PAGE_VALUES) {
        // A volatile write so that storing the zero already there is not elided.
        // SAFETY: `x` is a valid, aligned, exclusive reference.
        unsafe { std::ptr::write_volatile(x, 0.0) };
    }
    v
}

/// Makes `v` hold `len` values for a kernel that overwrites every one of them,
/// without a pass that zeroes memory about to be overwritten.
///
/// A reused buffer keeps its capacity and old contents (only growth within the
/// capacity is zero-filled); a buffer that must grow is replaced by a fresh,
/// untouched [`zeroed_huge`] allocation. Per-step gradient buffers are tens of
/// MB read at random rows, so both the skipped fill and the huge pages count.
pub fn resize_for_overwrite(v: &mut Vec<f32>, len: usize) {
    if v.capacity() < len {
        // Free the old buffer first so both never coexist.
        *v = Vec::new();
        *v = zeroed_huge(len);
    } else if v.len() >= len {
        v.truncate(len);
    } else {
        v.resize(len, 0.0);
    }
}

fn advise_huge_pages(buf: &[f32]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE_BYTES: usize = 2 << 20;
        let start = buf.as_ptr() as usize;
        let end = start + std::mem::size_of_val(buf);
        let (a, b) = (
            start.next_multiple_of(HUGE_BYTES),
            end / HUGE_BYTES * HUGE_BYTES,
        );
        if b > a {
            // SAFETY: [a, b) lies inside `buf`'s allocation, which outlives the call;
            // MADV_HUGEPAGE changes only how the kernel backs the pages, never their
            // contents, and failure is harmless (the return value is ignored on purpose).
            unsafe {
                libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

impl EmbeddingTable {
    /// A table of zeros (its pages faulted in: see [`zeroed_faulted`]).
    pub fn zeros(rows: u64, dim: usize) -> Result<Self, KernelError> {
        let len = checked_len(rows, dim)?;
        Ok(EmbeddingTable {
            rows,
            dim,
            data: zeroed_faulted(len),
        })
    }

    /// Wraps existing values, checking that there are `rows * dim` of them.
    pub fn from_vec(rows: u64, dim: usize, data: Vec<f32>) -> Result<Self, KernelError> {
        let len = checked_len(rows, dim)?;
        if data.len() != len {
            return Err(KernelError::shape(
                "data",
                data.len(),
                format!("rows x dim = {rows} x {dim} = {len}"),
            ));
        }
        Ok(EmbeddingTable { rows, dim, data })
    }

    /// DLRM's initialisation: uniform in `±sqrt(1 / rows)`, deterministic in `seed`.
    pub fn seeded(rows: u64, dim: usize, seed: u64) -> Result<Self, KernelError> {
        let len = checked_len(rows, dim)?;
        let bound = (1.0 / rows.max(1) as f64).sqrt() as f32;
        let mut data = zeroed_huge(len);
        fill_uniform(&mut data, -bound, bound, seed);
        Ok(EmbeddingTable { rows, dim, data })
    }

    /// Row `r`, or `None` past the end.
    pub fn row(&self, r: u64) -> Option<&[f32]> {
        let r = usize::try_from(r)
            .ok()
            .filter(|&r| (r as u64) < self.rows)?;
        self.data.get(r * self.dim..(r + 1) * self.dim)
    }

    /// Row `r` for writing, or `None` past the end.
    pub fn row_mut(&mut self, r: u64) -> Option<&mut [f32]> {
        let r = usize::try_from(r)
            .ok()
            .filter(|&r| (r as u64) < self.rows)?;
        self.data.get_mut(r * self.dim..(r + 1) * self.dim)
    }

    /// Size of the table's values in bytes.
    pub fn bytes(&self) -> u64 {
        self.data.len() as u64 * 4
    }
}

/// SplitMix64: a tiny, well-mixed generator; enough for initial weights and
/// test gradients, and it keeps the crate free of an RNG dependency.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 24 random bits (exact in f32).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }
}

/// Fills `out` with values uniform in `[lo, hi)`, deterministic in `seed`.
pub fn fill_uniform(out: &mut [f32], lo: f32, hi: f32, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    for x in out {
        *x = lo + (hi - lo) * rng.next_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_is_deterministic_and_bounded() {
        let a = EmbeddingTable::seeded(100, 8, 7).unwrap();
        assert_eq!(a, EmbeddingTable::seeded(100, 8, 7).unwrap());
        assert_ne!(a, EmbeddingTable::seeded(100, 8, 8).unwrap());
        assert!(a.data.iter().all(|x| x.abs() <= 0.1));
        assert_eq!(a.bytes(), 100 * 8 * 4);
        assert_eq!(a.row(99).unwrap().len(), 8);
        assert!(a.row(100).is_none());
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(
            EmbeddingTable::zeros(10, 0)
                .unwrap_err()
                .to_string()
                .contains("dim")
        );
        let e = EmbeddingTable::from_vec(2, 3, vec![0.0; 5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`data`") && e.contains("found 5"), "{e}");
    }
}
