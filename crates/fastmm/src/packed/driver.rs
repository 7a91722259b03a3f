//! The five loops around the microkernel (BLIS order), for one thread:
//!
//! ```text
//! for jc in 0..n step NC            B̃ ← pack B[pc.., jc..]  (KC×NC, in L2)
//!   for pc in 0..k step KC
//!     for ic in 0..m step MC        Ã ← pack A[ic.., pc..]  (MC×KC)
//!       for ir in 0..MC step MR     one micro-panel of Ã stays in L1
//!         for jr in 0..NC step NR   microkernel: C[ir, jr] ← α Ã B̃ + β' C
//! ```
//!
//! β' is the caller's β on the first KC step and 1 afterwards, so β = 0
//! never reads C. Edge tiles go through a scratch tile (the contract's edge
//! policy): the kernel writes a full MR×NR tile there and only the valid part
//! is merged into C, so nothing outside C is read or written.

use crate::element::Element;
use crate::matrix::{MatMut, MatRef};
use crate::packed::blocking::BlockSizes;
use crate::packed::kernel::Microkernel;
use crate::packed::packing::{pack_a, pack_b};
use crate::packed::workspace::Workspace;

/// Largest MR·NR of any kernel: the size of the edge scratch tile.
const MAX_TILE_ELEMENTS: usize = 512;

/// C ← α·A·B + β·C on the calling thread with kernel K.
pub(crate) fn gemm_serial<T: Element, K: Microkernel<T>>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    blocks: &BlockSizes,
) {
    const { assert!(K::MR * K::NR <= MAX_TILE_ELEMENTS) };
    let (m, k) = a.shape();
    let n = b.cols();
    debug_assert!(
        m > 0 && n > 0 && k > 0,
        "the boundary handles empty products"
    );
    assert!(
        K::is_available(),
        "kernel {} dispatched on a CPU without its features",
        K::NAME
    );
    let blocks = blocks.fitted(K::MR, K::NR);
    let kc = blocks.kc.min(k);
    let mc = blocks.mc.min(m.div_ceil(K::MR) * K::MR);
    let nc = blocks.nc.min(n.div_ceil(K::NR) * K::NR);
    let (a_len, b_len) = (mc * kc, nc * kc);
    let mut workspace = Workspace::take::<T>(a_len, b_len);
    let (a_buf, b_buf) = workspace.buffers::<T>(a_len, b_len);
    let (rs_c, cs_c) = (c.row_stride(), c.col_stride());
    let c_ptr = c.as_mut_ptr();

    for jc in (0..n).step_by(nc) {
        let nb = nc.min(n - jc);
        for pc in (0..k).step_by(kc) {
            let kb = kc.min(k - pc);
            let beta_here = if pc == 0 { beta } else { T::ONE };
            pack_b(b.submatrix(pc, jc, kb, nb), K::NR, b_buf);
            for ic in (0..m).step_by(mc) {
                let mb = mc.min(m - ic);
                pack_a(a.submatrix(ic, pc, mb, kb), K::MR, a_buf);
                // SAFETY: (ic, jc) is inside C, so the offset is inside its extent.
                let c_block = unsafe { c_ptr.add(ic * rs_c + jc * cs_c) };
                // SAFETY: the packed buffers hold the mb×kb and kb×nb blocks
                // in contract layout; c_block addresses an mb×nb block of the
                // exclusive view C with strides (rs_c, cs_c).
                unsafe {
                    macro_kernel::<T, K>(
                        mb,
                        nb,
                        kb,
                        alpha,
                        a_buf,
                        b_buf,
                        beta_here,
                        c_block,
                        rs_c as isize,
                        cs_c as isize,
                    )
                };
            }
        }
    }
}

/// The two innermost loops over one packed block pair.
///
/// # Safety
/// `c` addresses an mb×nb block with strides (rs_c, cs_c) that is valid for
/// reads and writes and not otherwise aliased; `a_buf` and `b_buf` hold the
/// packed blocks.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel<T: Element, K: Microkernel<T>>(
    mb: usize,
    nb: usize,
    kb: usize,
    alpha: T,
    a_buf: &[T],
    b_buf: &[T],
    beta: T,
    c: *mut T,
    rs_c: isize,
    cs_c: isize,
) {
    let mut scratch = [T::ZERO; MAX_TILE_ELEMENTS];
    for ir in (0..mb).step_by(K::MR) {
        let rows = K::MR.min(mb - ir);
        let a_panel = a_buf[ir * kb..(ir + K::MR) * kb].as_ptr();
        for jr in (0..nb).step_by(K::NR) {
            let cols = K::NR.min(nb - jr);
            let b_panel = b_buf[jr * kb..(jr + K::NR) * kb].as_ptr();
            // SAFETY: (ir, jr) lies inside the mb×nb block.
            let c_tile = unsafe { c.offset(ir as isize * rs_c + jr as isize * cs_c) };
            if rows == K::MR && cols == K::NR {
                // SAFETY: a full tile of C, and panels of MR·kb and kb·NR elements.
                unsafe { K::run(kb, alpha, a_panel, b_panel, beta, c_tile, rs_c, cs_c) };
                continue;
            }
            // SAFETY: the scratch tile is MR×NR row-major (≤ MAX_TILE_ELEMENTS).
            unsafe {
                K::run(
                    kb,
                    alpha,
                    a_panel,
                    b_panel,
                    T::ZERO,
                    scratch.as_mut_ptr(),
                    K::NR as isize,
                    1,
                )
            };
            for i in 0..rows {
                for j in 0..cols {
                    // SAFETY: i < rows and j < cols keep us inside the block.
                    let cij = unsafe { &mut *c_tile.offset(i as isize * rs_c + j as isize * cs_c) };
                    let product = scratch[i * K::NR + j];
                    *cij = if beta == T::ZERO {
                        product
                    } else {
                        product.add_product(beta, *cij)
                    };
                }
            }
        }
    }
}
