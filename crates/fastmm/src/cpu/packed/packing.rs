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

/// Packs the w×kb view `src` into ⌈w/width⌉ panels: element (i, p) of
/// panel r lands at `dst[r·width·kb + p·width + i]`, zero past w.
///
/// The kernels' widths get their own copy of the loops, so that the width
/// is a constant: a k step of a lane-contiguous source becomes a few vector
/// moves instead of a call to `memcpy`, and the scatter down a lane strides
/// by a constant. Kernels inline it into a function compiled with their own
/// instruction set ([`Microkernel::pack`]).
#[inline(always)]
pub(crate) fn pack_panels<T: Element>(src: MatRef<'_, T>, width: usize, dst: &mut [T]) {
    match width {
        4 => pack_panels_body(src, 4, dst),
        6 => pack_panels_body(src, 6, dst),
        8 => pack_panels_body(src, 8, dst),
        12 => pack_panels_body(src, 12, dst),
        16 => pack_panels_body(src, 16, dst),
        24 => pack_panels_body(src, 24, dst),
        32 => pack_panels_body(src, 32, dst),
        48 => pack_panels_body(src, 48, dst),
        _ => pack_panels_body(src, width, dst),
    }
}

/// How many k steps the transposing copy moves per lane before going to the
/// next lane: one cache line of the source row.
const TRANSPOSE_STEPS: usize = 16;

/// The transposing copy: `lanes` contiguous source rows `rs` apart, kb long,
/// into the lanes of a panel `width` wide at `out`. On x86-64 whole groups
/// of lanes go through SSE2 register transposes (4×4 for 4-byte elements,
/// 2×2 for 8-byte ones: one vector store per k step and group instead of
/// one scalar store per element), the rest element by element.
///
/// Never inlined, so it keeps the baseline instruction set: compiled with
/// AVX-512 the scalar scatter becomes `vscatterdps`, which on Zen 4 is
/// slower than scalar stores.
///
/// # Safety
/// Elements `src[i·rs + p]` (i < lanes, p < kb) are readable and
/// `out[p·width + i]` writable.
#[inline(never)]
unsafe fn transpose_lanes<T: Element>(
    src: *const T,
    rs: usize,
    lanes: usize,
    kb: usize,
    out: *mut T,
    width: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let (group, done_lanes, done_steps) = match std::mem::size_of::<T>() {
            // SAFETY: the contract above; 4- and 8-byte elements are moved
            // as bit patterns through float registers, unchanged.
            4 => unsafe {
                transpose_groups_4(src.cast(), rs, lanes, kb, out.cast(), width);
                (4, lanes / 4 * 4, kb / 4 * 4)
            },
            // SAFETY: as above.
            8 => unsafe {
                transpose_groups_2(src.cast(), rs, lanes, kb, out.cast(), width);
                (2, lanes / 2 * 2, kb / 2 * 2)
            },
            _ => (1, 0, 0),
        };
        if group > 1 {
            // SAFETY: the lanes and steps the groups left, inside the
            // contract's ranges.
            unsafe {
                transpose_scalar(
                    src.add(done_lanes * rs),
                    rs,
                    lanes - done_lanes,
                    kb,
                    out.add(done_lanes),
                    width,
                );
                transpose_scalar(
                    src.add(done_steps),
                    rs,
                    done_lanes,
                    kb - done_steps,
                    out.add(done_steps * width),
                    width,
                );
            }
            return;
        }
    }
    // SAFETY: the contract above.
    unsafe { transpose_scalar(src, rs, lanes, kb, out, width) }
}

/// [`transpose_lanes`] element by element, a cache line of a source row at
/// a time, scattered down the lane of the panel, which sits in L1.
///
/// # Safety
/// As [`transpose_lanes`].
#[inline(always)]
unsafe fn transpose_scalar<T: Copy>(
    src: *const T,
    rs: usize,
    lanes: usize,
    kb: usize,
    out: *mut T,
    width: usize,
) {
    for p0 in (0..kb).step_by(TRANSPOSE_STEPS) {
        let steps = TRANSPOSE_STEPS.min(kb - p0);
        for i in 0..lanes {
            // SAFETY: i < lanes and p0 + p < kb, per the contract.
            unsafe {
                let row = src.add(i * rs + p0);
                let lane = out.add(p0 * width + i);
                for p in 0..steps {
                    *lane.add(p * width) = *row.add(p);
                }
            }
        }
    }
}

/// The groups of four lanes and four k steps of [`transpose_lanes`] for
/// 4-byte elements, each through one 4×4 register transpose.
///
/// # Safety
/// As [`transpose_lanes`], with f32 standing for any 4-byte element.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_groups_4(
    src: *const f32,
    rs: usize,
    lanes: usize,
    kb: usize,
    out: *mut f32,
    width: usize,
) {
    use std::arch::x86_64::{
        _mm_loadu_ps, _mm_movehl_ps, _mm_movelh_ps, _mm_storeu_ps, _mm_unpackhi_ps, _mm_unpacklo_ps,
    };
    for_each_group(lanes, kb, 4, |i, p| {
        // SAFETY: lanes i..i + 4 < lanes and steps p..p + 4 ≤ kb, per the
        // contract; SSE is in the x86-64 baseline.
        unsafe {
            let r0 = _mm_loadu_ps(src.add(i * rs + p));
            let r1 = _mm_loadu_ps(src.add((i + 1) * rs + p));
            let r2 = _mm_loadu_ps(src.add((i + 2) * rs + p));
            let r3 = _mm_loadu_ps(src.add((i + 3) * rs + p));
            // (a0 b0 a1 b1), (c0 d0 c1 d1), (a2 b2 a3 b3), (c2 d2 c3 d3)
            let ab01 = _mm_unpacklo_ps(r0, r1);
            let cd01 = _mm_unpacklo_ps(r2, r3);
            let ab23 = _mm_unpackhi_ps(r0, r1);
            let cd23 = _mm_unpackhi_ps(r2, r3);
            _mm_storeu_ps(out.add(p * width + i), _mm_movelh_ps(ab01, cd01));
            _mm_storeu_ps(out.add((p + 1) * width + i), _mm_movehl_ps(cd01, ab01));
            _mm_storeu_ps(out.add((p + 2) * width + i), _mm_movelh_ps(ab23, cd23));
            _mm_storeu_ps(out.add((p + 3) * width + i), _mm_movehl_ps(cd23, ab23));
        }
    });
}

/// Calls `body(i, p)` for each group of `group` lanes and `group` k steps
/// that lies whole inside lanes × kb, a cache line of the source rows
/// (TRANSPOSE_STEPS) at a time.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn for_each_group(lanes: usize, kb: usize, group: usize, mut body: impl FnMut(usize, usize)) {
    let steps = kb / group * group;
    for p0 in (0..steps).step_by(TRANSPOSE_STEPS) {
        let end = (p0 + TRANSPOSE_STEPS).min(steps);
        for i in (0..lanes / group * group).step_by(group) {
            for p in (p0..end).step_by(group) {
                body(i, p);
            }
        }
    }
}

/// The groups of two lanes and two k steps of [`transpose_lanes`] for
/// 8-byte elements, each through one 2×2 register transpose.
///
/// # Safety
/// As [`transpose_lanes`], with f64 standing for any 8-byte element.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_groups_2(
    src: *const f64,
    rs: usize,
    lanes: usize,
    kb: usize,
    out: *mut f64,
    width: usize,
) {
    use std::arch::x86_64::{_mm_loadu_pd, _mm_storeu_pd, _mm_unpackhi_pd, _mm_unpacklo_pd};
    for_each_group(lanes, kb, 2, |i, p| {
        // SAFETY: lanes i, i + 1 < lanes and steps p, p + 1 < kb, per the
        // contract; SSE2 is in the x86-64 baseline.
        unsafe {
            let r0 = _mm_loadu_pd(src.add(i * rs + p));
            let r1 = _mm_loadu_pd(src.add((i + 1) * rs + p));
            _mm_storeu_pd(out.add(p * width + i), _mm_unpacklo_pd(r0, r1));
            _mm_storeu_pd(out.add((p + 1) * width + i), _mm_unpackhi_pd(r0, r1));
        }
    });
}

#[inline(always)]
fn pack_panels_body<T: Element>(src: MatRef<'_, T>, width: usize, dst: &mut [T]) {
    let (w, kb) = src.shape();
    let panels = w.div_ceil(width);
    assert!(dst.len() >= panels * width * kb, "packing buffer too small");
    let (rs, cs) = (src.row_stride(), src.col_stride());
    let base = src.as_ptr();
    if rs == 1 && cs != 1 && w > 1 {
        // Lanes contiguous (B row-major): one source row at a time, dealt
        // out to every panel, so the reads stream through memory in order.
        // Panel by panel, each k step would start a new row (and page),
        // which the hardware prefetchers do not follow.
        let full = w / width;
        for p in 0..kb {
            // SAFETY: step p < kb of lanes < w addresses element (lane, p)
            // of `src`; the writes stay inside each panel's width·kb
            // elements of `dst` (checked above).
            unsafe {
                let step = base.add(p * cs);
                for panel in 0..full {
                    let slot = dst.as_mut_ptr().add(panel * width * kb + p * width);
                    std::ptr::copy_nonoverlapping(step.add(panel * width), slot, width);
                }
                if full < panels {
                    let lanes = w - full * width;
                    let slot = dst.as_mut_ptr().add(full * width * kb + p * width);
                    std::ptr::copy_nonoverlapping(step.add(full * width), slot, lanes);
                    for i in lanes..width {
                        *slot.add(i) = T::ZERO;
                    }
                }
            }
        }
        return;
    }
    for panel in 0..panels {
        let first = panel * width;
        let lanes = width.min(w - first);
        let out = dst[panel * width * kb..(panel + 1) * width * kb].as_mut_ptr();
        // SAFETY (both branches): lane i < lanes and step p < kb address
        // element (first + i, p) of `src`, inside its extent; the writes
        // stay inside this panel's width·kb elements of `dst` (checked
        // above).
        unsafe {
            if cs == 1 && lanes > 1 {
                transpose_lanes(base.add(first * rs), rs, lanes, kb, out, width);
            } else {
                for p in 0..kb {
                    let step = base.add(p * cs + first * rs);
                    let slot = out.add(p * width);
                    for i in 0..lanes {
                        *slot.add(i) = *step.add(i * rs);
                    }
                }
            }
            for p in 0..kb {
                for i in lanes..width {
                    *out.add(p * width + i) = T::ZERO;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::packed::kernels::generic::Generic;
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
