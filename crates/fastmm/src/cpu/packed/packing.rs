//! Packing: copying blocks of A and B into the contiguous micro-panel
//! layouts of the microkernel contract ([`super::kernel`]), with partial
//! panels padded by zeros. Packing is where strides and transposes stop
//! mattering: whatever the layout of the user's views, the kernel reads
//! unit-stride panels.

use crate::cpu::packed::kernel::Microkernel;
use crate::element::Element;
use crate::matrix::MatRef;

/// Packs the linear combination Σ wᵢ·Aᵢ of equally shaped mb×kb blocks
/// into ⌈mb/MR⌉ micro-panels of kernel K's MR rows: element (i, p) of panel
/// r lands at `dst[r·MR·kb + p·MR + i]`; rows past mb are zero. With
/// several terms these are the fused operand sums of the fast algorithms, formed
/// while packing instead of in a temporary. `scratch` holds one
/// micro-panel (MR·kb elements) when there is more than one term.
pub(crate) fn pack_a_sum<T: Element, K: Microkernel<T>>(
    terms: &[(T, MatRef<'_, T>)],
    dst: &mut [T],
    scratch: &mut [T],
) {
    pack_sum::<T, K>(terms, K::MR, false, dst, scratch);
}

/// Packs the linear combination Σ wᵢ·Bᵢ of equally shaped kb×nb blocks
/// into ⌈nb/NR⌉ micro-panels of kernel K's NR columns: element (p, j) of
/// panel s lands at `dst[s·NR·kb + p·NR + j]`; columns past nb are zero.
/// This is the A packing of Bᵀ: the same layout with the roles of rows and
/// columns exchanged.
pub(crate) fn pack_b_sum<T: Element, K: Microkernel<T>>(
    terms: &[(T, MatRef<'_, T>)],
    dst: &mut [T],
    scratch: &mut [T],
) {
    pack_sum::<T, K>(terms, K::NR, true, dst, scratch);
}

/// Packs Σ wᵢ·termᵢ (each term transposed for B) one micro-panel at a
/// time. Where every term is unit-stride in one direction, the sum is
/// formed by streaming the terms' lines together (each element of each
/// term read once), straight into the packed panel when that is the
/// panel's own layout, else into a panel-sized scratch that is then packed
/// once. Other strides pack each term into the scratch and add it.
fn pack_sum<'a, T: Element, K: Microkernel<T>>(
    terms: &[(T, MatRef<'a, T>)],
    width: usize,
    transpose: bool,
    dst: &mut [T],
    scratch: &mut [T],
) {
    let view = |m: MatRef<'a, T>| if transpose { m.t() } else { m };
    let (w0, first) = terms[0];
    if terms.len() == 1 && w0 == T::ONE {
        K::pack(view(first), width, dst);
        return;
    }
    let (rows, depth) = view(first).shape();
    let panel_len = width * depth;
    let scratch = &mut scratch[..panel_len];
    let unit_rows = terms.iter().all(|&(_, t)| view(t).row_stride() == 1);
    let unit_depth = terms.iter().all(|&(_, t)| view(t).col_stride() == 1);
    let mut lines: Vec<(T, *const T, usize)> = Vec::with_capacity(terms.len());
    for (panel, out) in dst
        .chunks_exact_mut(panel_len)
        .take(rows.div_ceil(width))
        .enumerate()
    {
        let row0 = panel * width;
        let height = width.min(rows - row0);
        let panel_of = |term: MatRef<'a, T>| view(term).submatrix(row0, 0, height, depth);
        if unit_rows || unit_depth {
            // Each term's panel as (weight, lines): a column per depth
            // index when unit_rows, else a row per panel row.
            let (count, len) = if unit_rows {
                (depth, height)
            } else {
                (height, depth)
            };
            lines.clear();
            lines.extend(terms.iter().map(|&(w, term)| {
                let part = panel_of(term);
                let step = if unit_rows {
                    part.col_stride()
                } else {
                    part.row_stride()
                };
                (w, part.as_ptr(), step)
            }));
            // SAFETY: line j of a term's panel is the `len` unit-stride
            // elements from ptr + j·step (j < count), all inside the view.
            let line_of = |&(w, ptr, step): &(T, *const T, usize), j: usize| {
                (w, unsafe {
                    std::slice::from_raw_parts(ptr.add(j * step), len)
                })
            };
            if unit_rows && height == width {
                // Element (i, p) of a packed panel sits at p·width + i:
                // column p is a contiguous line of the packed layout.
                for (p, out_line) in out.chunks_exact_mut(width).enumerate() {
                    sum_lines(out_line, lines.iter().map(|l| line_of(l, p)));
                }
                continue;
            }
            for (j, out_line) in scratch.chunks_exact_mut(len.max(1)).take(count).enumerate() {
                sum_lines(out_line, lines.iter().map(|l| line_of(l, j)));
            }
            let sum = &scratch[..height * depth];
            let sum = if unit_rows {
                MatRef::from_slice(sum, depth, height).map(MatRef::t)
            } else {
                MatRef::from_slice(sum, height, depth)
            };
            K::pack(sum.expect("the scratch holds one panel"), width, out);
        } else {
            K::pack(panel_of(first), width, out);
            if w0 != T::ONE {
                out.iter_mut().for_each(|x| *x = w0.mul(*x));
            }
            for &(w, term) in &terms[1..] {
                K::pack(panel_of(term), width, scratch);
                add_scaled(out, w, scratch);
            }
        }
    }
}

/// out ← Σ wᵢ·lineᵢ, every line as long as `out`.
fn sum_lines<'l, T: Element + 'l>(out: &mut [T], mut lines: impl Iterator<Item = (T, &'l [T])>) {
    let Some((w0, first)) = lines.next() else {
        out.fill(T::ZERO);
        return;
    };
    if w0 == T::ONE {
        out.copy_from_slice(first);
    } else {
        for (d, &s) in out.iter_mut().zip(first) {
            *d = w0.mul(s);
        }
    }
    for (w, line) in lines {
        add_scaled(out, w, line);
    }
}

/// out ← out + w·src.
fn add_scaled<T: Element>(out: &mut [T], w: T, src: &[T]) {
    if w == T::ONE {
        out.iter_mut().zip(src).for_each(|(d, &s)| *d = d.add(s));
    } else if w == T::ZERO.sub(T::ONE) {
        out.iter_mut().zip(src).for_each(|(d, &s)| *d = d.sub(s));
    } else {
        out.iter_mut()
            .zip(src)
            .for_each(|(d, &s)| *d = d.add(w.mul(s)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::packed::kernels::generic::Generic;
    use crate::cpu::packed::panels::{pack_panels, TRANSPOSE_STEPS};
    use crate::matrix::Matrix;

    type Generic4 = Generic<i32, 4, 4>;

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
                pack_a_sum::<i32, Generic4>(&[(1, view)], &mut dst, &mut []);
                assert_panels(&dst, 4, 3, 5, |i, p| view.get(i, p));
            } else {
                pack_b_sum::<i32, Generic4>(&[(1, view)], &mut dst, &mut []);
                assert_panels(&dst, 4, 3, 7, |j, p| view.get(p, j));
            }
        }
    }

    /// Every width with its own copy of the loops, and one without, over
    /// sources with more steps than the transposing copy's chunk, step
    /// counts that leave a partial group of the register transposes, and
    /// lane counts that leave a partial panel; 4- and 8-byte elements, each
    /// from row-major and column-major sources.
    #[test]
    fn every_width_packs_to_the_contract() {
        for steps in [1, 2, 3, 8, 16, TRANSPOSE_STEPS + 3, 2 * TRANSPOSE_STEPS + 2] {
            for width in [3, 4, 6, 8, 12, 16, 24, 32, 48] {
                let lanes = 2 * width + 1;
                let value = |i: usize, p: usize| (1000 * i + p) as i32 + 1;
                let a = Matrix::from_fn(lanes, steps, value);
                let at = Matrix::from_view(a.as_ref().t());
                for view in [a.as_ref(), at.as_ref().t()] {
                    let mut dst = vec![-1; 3 * width * steps];
                    pack_panels(view, width, &mut dst);
                    assert_panels(&dst, width, steps, lanes, |i, p| view.get(i, p));
                }
                let wide = Matrix::from_fn(lanes, steps, |i, p| value(i, p) as i64 - (1 << 40));
                let wide_t = Matrix::from_view(wide.as_ref().t());
                for view in [wide.as_ref(), wide_t.as_ref().t()] {
                    let mut dst = vec![-1i64; 3 * width * steps];
                    pack_panels(view, width, &mut dst);
                    let narrowed: Vec<i32> = dst
                        .iter()
                        .map(|&x| if x == 0 { 0 } else { (x + (1 << 40)) as i32 })
                        .collect();
                    assert_panels(&narrowed, width, steps, lanes, value);
                }
            }
        }
    }
}
