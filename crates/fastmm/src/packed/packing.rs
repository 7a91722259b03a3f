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
    pack_panels(a, mr, dst);
}

/// Packs the kb×nb block `b` into ⌈nb/nr⌉ micro-panels of `nr` columns:
/// element (p, j) of panel s lands at `dst[s·nr·kb + p·nr + j]`; columns
/// past nb are zero. This is `pack_a` of Bᵀ: the same layout with the roles
/// of rows and columns exchanged.
pub(crate) fn pack_b<T: Element>(b: MatRef<'_, T>, nr: usize, dst: &mut [T]) {
    pack_panels(b.t(), nr, dst);
}

/// Packs the w×kb view `src` into ⌈w/width⌉ panels: element (i, p) of
/// panel r lands at `dst[r·width·kb + p·width + i]`, zero past w.
fn pack_panels<T: Element>(src: MatRef<'_, T>, width: usize, dst: &mut [T]) {
    let (w, kb) = src.shape();
    for (panel, chunk) in dst
        .chunks_exact_mut(width * kb)
        .take(w.div_ceil(width))
        .enumerate()
    {
        let first = panel * width;
        let lanes = width.min(w - first);
        if src.col_stride() == 1 {
            // Each lane is a contiguous row of the source: read it
            // sequentially (what the prefetchers follow) and scatter it down
            // its lane of the panel, which sits in L1.
            for i in 0..lanes {
                let row = src.row(first + i).expect("unit column stride");
                for (p, &value) in row.iter().enumerate() {
                    chunk[p * width + i] = value;
                }
            }
            for i in lanes..width {
                for p in 0..kb {
                    chunk[p * width + i] = T::ZERO;
                }
            }
            continue;
        }
        let lanes_contiguous = src.row_stride() == 1;
        let block = src.submatrix(first, 0, lanes, kb).t();
        for (p, step) in chunk.chunks_exact_mut(width).enumerate() {
            if lanes_contiguous {
                // Each k step is a contiguous run of the source.
                step[..lanes].copy_from_slice(block.row(p).expect("unit stride"));
            } else {
                for (i, slot) in step[..lanes].iter_mut().enumerate() {
                    // SAFETY: p < kb and i < lanes are inside `block`.
                    *slot = unsafe { block.get_unchecked(p, i) };
                }
            }
            step[lanes..].fill(T::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;

    /// Checks a packed buffer against the layout of the contract.
    fn assert_panels(
        dst: &[i32],
        width: usize,
        kb: usize,
        lanes: usize,
        value: impl Fn(usize, usize) -> i32,
    ) {
        for panel in 0..lanes.div_ceil(width) {
            for p in 0..kb {
                for i in 0..width {
                    let lane = panel * width + i;
                    let want = if lane < lanes { value(lane, p) } else { 0 };
                    assert_eq!(
                        dst[panel * width * kb + p * width + i],
                        want,
                        "lane {lane}, step {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_source_layout_packs_to_the_contract() {
        let a = Matrix::from_fn(5, 3, |i, p| (10 * i + p) as i32 + 1);
        let b = Matrix::from_fn(3, 7, |p, j| (10 * p + j) as i32 + 1);
        let bt = Matrix::from_view(b.as_ref().t());
        // Every other element of a larger buffer: both strides non-unit.
        let mut sparse = vec![-7; 6 * 5];
        for i in 0..5 {
            for p in 0..3 {
                sparse[6 * i + 2 * p] = a.get(i, p);
            }
        }
        let a_strided = MatRef::from_slice_strided(&sparse, 5, 3, 6, 2).unwrap();
        let cases: [(MatRef<'_, i32>, bool); 4] = [
            (a.as_ref(), true),
            (a_strided, true),
            (b.as_ref(), false),
            (bt.as_ref().t(), false),
        ];
        for (view, is_a) in cases {
            let mut dst = vec![-1; 2 * 4 * 3];
            if is_a {
                pack_a(view, 4, &mut dst);
                assert_panels(&dst, 4, 3, 5, |i, p| view.get(i, p));
            } else {
                pack_b(view, 4, &mut dst);
                assert_panels(&dst, 4, 3, 7, |j, p| view.get(p, j));
            }
        }
    }
}
