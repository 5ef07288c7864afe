//! The small dense products of the TT primitives: [`mm`], a plain loop for
//! the forward's row-major products (a row of the output at a time, the
//! inner loop over its contiguous columns: for a prefix product, two or four
//! rows against one core slice read once, no packing), and [`gemm`], with
//! transposes, through `matrixmultiply` for the backward's. Both are
//! single-threaded and deterministic: the primitives parallelise over
//! prefixes and rows, so a product's bits never depend on the thread count.

/// `x . y` in eight lanes (each summed in order, then the lanes in order,
/// then the tail): a fixed order that vectorises.
#[inline]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let (xt, yt) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for l in 0..8 {
            lanes[l] += a[l] * b[l];
        }
    }
    let mut s = lanes.iter().sum::<f32>();
    for (a, b) in xt.iter().zip(yt) {
        s += a * b;
    }
    s
}

/// `c += a b^T`, `a` `m x k`, `b` stored `n x k`, `c` `m x n`, row-major: a
/// dot product per output value, over `k` contiguous values of each.
#[inline]
pub(crate) fn mm_nt_acc(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= n * k && c.len() >= m * n);
    for i in 0..m {
        let ai = &a[i * k..(i + 1) * k];
        for (r, o) in c[i * n..(i + 1) * n].iter_mut().enumerate() {
            *o += dot(ai, &b[r * k..(r + 1) * k]);
        }
    }
}

/// `c = a^T b`, `a` stored `k x m`, `b` `k x n`, `c` `m x n`, row-major: per
/// row of `a` and `b`, each of `a`'s values times `b`'s row into `c`.
#[inline]
pub(crate) fn mm_tn(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= k * m && b.len() >= k * n && c.len() >= m * n);
    c[..m * n].iter_mut().for_each(|x| *x = 0.0);
    for i in 0..k {
        let bi = &b[i * n..(i + 1) * n];
        for (r, &x) in a[i * m..(i + 1) * m].iter().enumerate() {
            c[r * n..(r + 1) * n]
                .iter_mut()
                .zip(bi)
                .for_each(|(o, y)| *o += x * *y);
        }
    }
}

/// `c = beta c + a b`, `a` `m x k`, `b` `k x n`, `c` `m x n`, row-major.
#[inline]
pub(crate) fn mm(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], beta: f32, c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    for i in 0..m {
        let ci = &mut c[i * n..(i + 1) * n];
        if beta == 0.0 {
            ci.iter_mut().for_each(|x| *x = 0.0);
        } else if beta != 1.0 {
            ci.iter_mut().for_each(|x| *x *= beta);
        }
        for (r, &x) in a[i * k..(i + 1) * k].iter().enumerate() {
            let br = &b[r * n..(r + 1) * n];
            ci.iter_mut().zip(br).for_each(|(o, y)| *o += x * *y);
        }
    }
}

/// `c = beta c + op(a) op(b)`, with `op(a)` `m x k` and `op(b)` `k x n`, all
/// row-major; `ta` / `tb`: `a` is stored `k x m` / `b` is stored `n x k`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn gemm(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    ta: bool,
    b: &[f32],
    tb: bool,
    beta: f32,
    c: &mut [f32],
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
    // SAFETY: the asserts above bound every element the strides address:
    // a's `m x k` (or `k x m`), b's `k x n` (or `n x k`), c's `m x n`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::gemm;

    #[test]
    fn the_plain_loop_is_the_product() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let mut c = [1.0; 4];
        super::mm(2, 3, 2, &a, &b, 0.0, &mut c);
        assert_eq!(c, [4.0, 5.0, 10.0, 11.0]);
        super::mm(2, 3, 2, &a, &b, 1.0, &mut c);
        assert_eq!(c, [8.0, 10.0, 20.0, 22.0]);
    }

    #[test]
    fn the_transposed_loops_are_the_products() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        // a (2 x 3) times a^T: [[14, 32], [32, 77]], added to ones.
        let mut c = [1.0; 4];
        super::mm_nt_acc(2, 3, 2, &a, &a, &mut c);
        assert_eq!(c, [15.0, 33.0, 33.0, 78.0]);
        // a^T (3 x 2, a stored 2 x 3) times b (2 x 3... as 2 x 3).
        let mut d = [9.0; 9];
        super::mm_tn(3, 2, 3, &a, &b, &mut d);
        let mut want = [0.0; 9];
        gemm(3, 2, 3, &a, true, &b, false, 0.0, &mut want);
        assert_eq!(d, want);
    }

    #[test]
    fn products_and_transposes_match_the_definition() {
        // a = [[1, 2, 3], [4, 5, 6]] (2 x 3), b = [[1, 0], [0, 1], [1, 1]] (3 x 2).
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let mut c = [0.0; 4];
        gemm(2, 3, 2, &a, false, &b, false, 0.0, &mut c);
        assert_eq!(c, [4.0, 5.0, 10.0, 11.0]);
        // a^T (3 x 2) times [[1], [1]]: the column sums of a's rows.
        let mut d = [0.0; 3];
        gemm(3, 2, 1, &a, true, &[1.0, 1.0], false, 0.0, &mut d);
        assert_eq!(d, [5.0, 7.0, 9.0]);
        // a b^T with b stored 2 x 3, accumulated onto c.
        let mut e = [1.0; 4];
        gemm(2, 3, 2, &a, false, &a, true, 1.0, &mut e);
        assert_eq!(e, [15.0, 33.0, 33.0, 78.0]);
    }
}
