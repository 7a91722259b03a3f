//! Packing: copying blocks of A and B into the contiguous micro-panel
//! layouts of the microkernel contract ([`super::kernel`]), with partial
//! panels padded by zeros. Packing is where strides and transposes stop
//! mattering: whatever the layout of the user's views, the kernel reads
//! unit-stride panels.

use crate::element::Element;
use crate::matrix::MatRef;

/// Packs the mb×kb block `a` into ⌈mb/mr⌉ micro-panels of `mr` rows:
/// element (i, p) of panel r lands at `dst[r·mr·kb + p·mr + i]`; rows past
/// mb are zero.
pub(crate) fn pack_a<T: Element>(a: MatRef<'_, T>, mr: usize, dst: &mut [T]) {
    let (mb, kb) = a.shape();
    let rows_contiguous = a.col_stride() == 1;
    for (panel, chunk) in dst
        .chunks_exact_mut(mr * kb)
        .take(mb.div_ceil(mr))
        .enumerate()
    {
        let row0 = panel * mr;
        let rows = mr.min(mb - row0);
        if rows_contiguous {
            // Read each row of A sequentially (what the prefetchers follow)
            // and scatter it down its lane of the panel, which sits in L1.
            for i in 0..rows {
                let src = a.row(row0 + i).expect("unit column stride");
                for (p, &value) in src.iter().enumerate() {
                    chunk[p * mr + i] = value;
                }
            }
            for i in rows..mr {
                for p in 0..kb {
                    chunk[p * mr + i] = T::ZERO;
                }
            }
            continue;
        }
        for (p, column) in chunk.chunks_exact_mut(mr).enumerate() {
            for (i, slot) in column[..rows].iter_mut().enumerate() {
                // SAFETY: row0 + i < mb and p < kb.
                *slot = unsafe { a.get_unchecked(row0 + i, p) };
            }
            column[rows..].fill(T::ZERO);
        }
    }
}

/// Packs the kb×nb block `b` into ⌈nb/nr⌉ micro-panels of `nr` columns:
/// element (p, j) of panel s lands at `dst[s·nr·kb + p·nr + j]`; columns
/// past nb are zero.
pub(crate) fn pack_b<T: Element>(b: MatRef<'_, T>, nr: usize, dst: &mut [T]) {
    let (kb, nb) = b.shape();
    let rows_contiguous = b.col_stride() == 1;
    for (panel, chunk) in dst
        .chunks_exact_mut(nr * kb)
        .take(nb.div_ceil(nr))
        .enumerate()
    {
        let col0 = panel * nr;
        let cols = nr.min(nb - col0);
        for (p, row) in chunk.chunks_exact_mut(nr).enumerate() {
            if rows_contiguous {
                let src = b.row(p).expect("unit column stride");
                row[..cols].copy_from_slice(&src[col0..col0 + cols]);
            } else {
                for (j, slot) in row[..cols].iter_mut().enumerate() {
                    // SAFETY: p < kb and col0 + j < nb.
                    *slot = unsafe { b.get_unchecked(p, col0 + j) };
                }
            }
            row[cols..].fill(T::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;

    #[test]
    fn panels_follow_the_contract_and_pad_with_zeros() {
        let a = Matrix::from_fn(5, 3, |i, p| (10 * i + p) as i32 + 1);
        let mut packed = vec![-1; 2 * 4 * 3];
        pack_a(a.as_ref(), 4, &mut packed);
        for panel in 0..2 {
            for p in 0..3 {
                for i in 0..4 {
                    let row = panel * 4 + i;
                    let want = if row < 5 { a.get(row, p) } else { 0 };
                    assert_eq!(packed[panel * 12 + p * 4 + i], want);
                }
            }
        }
        // B given as a transposed view: the strided path.
        let bt = Matrix::from_fn(7, 3, |j, p| (10 * p + j) as i32 + 1);
        let b = bt.as_ref().t();
        let mut packed = vec![-1; 2 * 4 * 3];
        pack_b(b, 4, &mut packed);
        for panel in 0..2 {
            for p in 0..3 {
                for j in 0..4 {
                    let col = panel * 4 + j;
                    let want = if col < 7 { b.get(p, col) } else { 0 };
                    assert_eq!(packed[panel * 12 + p * 4 + j], want);
                }
            }
        }
    }
}
