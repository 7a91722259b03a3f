//! `ikj`: the loop interchange of seed 002 §5. For each row i of C and each
//! p, row p of B is scaled by α·A(i, p) and added to row i of C. Both rows are
//! contiguous in row-major storage, so the inner loop is a unit-stride AXPY
//! that the compiler vectorises.

use crate::element::Element;
use crate::matrix::{MatMut, MatRef};

/// C += α·A·B in i-k-j order.
pub fn accumulate<T: Element>(alpha: T, a: MatRef<'_, T>, b: MatRef<'_, T>, mut c: MatMut<'_, T>) {
    let (m, k) = a.shape();
    let n = b.cols();
    debug_assert_eq!(b.rows(), k);
    debug_assert_eq!(c.shape(), (m, n));
    let rows_contiguous = n == 1 || (b.col_stride() == 1 && c.col_stride() == 1);
    for i in 0..m {
        for p in 0..k {
            // SAFETY: i < m and p < k.
            let scaled = alpha.mul(unsafe { a.get_unchecked(i, p) });
            if rows_contiguous {
                let b_row = b.row(p).expect("unit column stride");
                let c_row = c.row_mut(i).expect("unit column stride");
                axpy(scaled, b_row, c_row);
            } else {
                for j in 0..n {
                    // SAFETY: i < m, p < k, j < n.
                    unsafe {
                        let cij = c.get_unchecked_mut(i, j);
                        *cij = cij.add_product(scaled, b.get_unchecked(p, j));
                    }
                }
            }
        }
    }
}

/// y += s·x over equal-length slices; the loop the compiler vectorises.
#[inline(always)]
fn axpy<T: Element>(s: T, x: &[T], y: &mut [T]) {
    for (yj, &xj) in y.iter_mut().zip(x) {
        *yj = yj.add_product(s, xj);
    }
}
