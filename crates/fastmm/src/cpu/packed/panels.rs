//! The micro-panel layout itself: a w×kb view copied into ⌈w/width⌉
//! panels of `width` lanes, zero-padded, whatever the view's strides. The
//! leaf under [`super::kernel`] (whose [`super::kernel::Microkernel::pack`]
//! compiles it with each kernel's instruction set) and [`super::packing`]
//! (which packs operand sums through the kernels).

use crate::element::Element;
use crate::matrix::MatRef;

/// Packs the w×kb view `src` into ⌈w/width⌉ panels: element (i, p) of
/// panel r lands at `dst[r·width·kb + p·width + i]`, zero past w.
///
/// The kernels' widths get their own copy of the loops, so that the width
/// is a constant: a k step of a lane-contiguous source becomes a few vector
/// moves instead of a call to `memcpy`, and the scatter down a lane strides
/// by a constant. Kernels inline it into a function compiled with their own
/// instruction set ([`super::kernel::Microkernel::pack`]).
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
pub(crate) const TRANSPOSE_STEPS: usize = 16;

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
