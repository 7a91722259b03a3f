//! `naive`: the i-j-k triple loop of every seed. Each element of C is one
//! dot product, walking a row of A and a column of B; for row-major B that
//! column walk touches a new cache line per step, which is what makes this
//! the slowest rung of the ladder.

use crate::element::Element;
use crate::matrix::{MatMut, MatRef};

/// C += α·A·B, one dot product per element of C.
pub fn accumulate<T: Element>(alpha: T, a: MatRef<'_, T>, b: MatRef<'_, T>, mut c: MatMut<'_, T>) {
    let (m, k) = a.shape();
    let n = b.cols();
    debug_assert_eq!(b.rows(), k);
    debug_assert_eq!(c.shape(), (m, n));
    for i in 0..m {
        for j in 0..n {
            let mut dot = T::ZERO;
            for p in 0..k {
                // SAFETY: i < m, p < k and j < n are the views' shapes.
                dot = unsafe { dot.add_product(a.get_unchecked(i, p), b.get_unchecked(p, j)) };
            }
            // SAFETY: i < m and j < n.
            let cij = unsafe { c.get_unchecked_mut(i, j) };
            *cij = cij.add_product(alpha, dot);
        }
    }
}
