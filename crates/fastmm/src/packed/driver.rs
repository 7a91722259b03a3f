//! The five loops around the microkernel. In BLIS's terms for the
//! transposed, column-major problem Cᵀ = BᵀAᵀ, our Ã plays BLIS's packed B
//! (the broadcast operand, kept in L1 one micro-panel at a time) and our B̃
//! plays BLIS's packed A (the vector operand, streamed from L2):
//!
//! ```text
//! for ic in 0..m step MC            Ã ← pack A[ic.., pc..]  (MC×KC, L3; shared)
//!   for pc in 0..k step KC
//!     for jc in 0..n step NC        B̃ ← pack B[pc.., jc..]  (KC×NC, L2; per thread)
//!       for ir in 0..MC step MR     one micro-panel of Ã stays in L1
//!         for jr in 0..NC step NR   microkernel: C[ir, jr] ← α Ã B̃ + β' C
//! ```
//!
//! With MC covering all of m for most problems, A and B are each packed
//! once.
//!
//! **Threads.** For each (ic, pc) block the threads first pack Ã together,
//! each a share of its micro-panels, then split the block of C: by columns
//! (each thread runs its own jc loop over its columns, packing its own B̃
//! into its own L2) when there are enough columns, else by rows. Threads
//! never write the same element of C. One thread runs the same loops
//! inline, with no pool.
//!
//! β' is the caller's β on the first KC step and 1 afterwards, so β = 0
//! never reads C. Edge tiles go through a scratch tile (the contract's edge
//! policy): the kernel writes a full MR×NR tile there and only the valid part
//! is merged into C, so nothing outside C is read or written.

use rayon::prelude::*;

use crate::element::Element;
use crate::matrix::{MatMut, MatRef};
use crate::packed::blocking::BlockSizes;
use crate::packed::kernel::Microkernel;
use crate::packed::packing::{pack_a, pack_b};
use crate::packed::workspace::Workspace;
use crate::tunables::{SPLIT_K_MAX_C_BYTES, SPLIT_K_MIN_STEPS_PER_THREAD};

/// Bytes in a cache line, the unit of the prefetches below.
const CACHE_LINE: usize = 64;

/// Largest MR·NR of any kernel: the size of the edge scratch tile.
const MAX_TILE_ELEMENTS: usize = 512;

/// Threads split C by columns when each gets at least this many
/// micro-panels of columns; otherwise by rows.
const MIN_COLUMN_PANELS_PER_THREAD: usize = 2;

/// C ← α·A·B + β·C with kernel K on `threads` threads (the caller's, when 1;
/// otherwise those of the current rayon pool, which must have that many).
pub(crate) fn gemm<T: Element, K: Microkernel<T>>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    blocks: &BlockSizes,
    threads: usize,
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
    if threads > 1 && split_k_pays(m, n, k, blocks.kc, threads, std::mem::size_of::<T>()) {
        gemm_split_k::<T, K>(alpha, a, b, beta, c, &blocks, threads);
        return;
    }
    let kc = blocks.kc.min(k);
    let mc = blocks.mc.min(m.div_ceil(K::MR) * K::MR);
    let nc = blocks.nc.min(n.div_ceil(K::NR) * K::NR);
    let mut shared = Workspace::take::<T>(mc * kc, 0);
    let (a_buf, _) = shared.buffers::<T>(mc * kc, 0);
    let column_panels = n.div_ceil(K::NR);
    let split_columns = column_panels >= threads * MIN_COLUMN_PANELS_PER_THREAD;

    for ic in (0..m).step_by(mc) {
        let mb = mc.min(m - ic);
        for pc in (0..k).step_by(kc) {
            let kb = kc.min(k - pc);
            let beta_here = if pc == 0 { beta } else { T::ONE };
            let a_block = a.submatrix(ic, pc, mb, kb);
            let row_panels = mb.div_ceil(K::MR);
            let a_packed = &mut a_buf[..row_panels * K::MR * kb];
            if threads == 1 {
                pack_a::<T, K>(a_block, a_packed);
            } else {
                let per_thread = row_panels.div_ceil(threads);
                a_packed
                    .par_chunks_mut(per_thread * K::MR * kb)
                    .enumerate()
                    .for_each(|(t, chunk)| {
                        let row0 = t * per_thread * K::MR;
                        let rows = (per_thread * K::MR).min(mb - row0);
                        pack_a::<T, K>(a_block.submatrix(row0, 0, rows, kb), chunk);
                    });
            }
            let a_packed: &[T] = a_packed;
            let b_block = b.submatrix(pc, 0, kb, n);
            let c_block = c.rb_mut().submatrix(ic, 0, mb, n);
            let run = |(row0, col0, part): (usize, usize, MatMut<'_, T>)| {
                let a_part = &a_packed[row0 * kb..];
                let b_part = b_block.submatrix(0, col0, kb, part.cols());
                multiply_part::<T, K>(alpha, a_part, b_part, beta_here, part, nc);
            };
            if threads == 1 {
                run((0, 0, c_block));
            } else if split_columns {
                let cols = column_panels.div_ceil(threads) * K::NR;
                c_block.into_blocks(mb, cols).into_par_iter().for_each(run);
            } else {
                let rows = row_panels.div_ceil(threads) * K::MR;
                c_block.into_blocks(rows, n).into_par_iter().for_each(run);
            }
        }
    }
}

/// Whether to split k instead of C: when C is small and k long, the other
/// splits would run a fork-join (two, with Ã's packing) for every KC step
/// of a few hundred µs of work, and each thread can instead run the whole
/// sequential GEMM on its own slice of k, into its own copy of C.
fn split_k_pays(m: usize, n: usize, k: usize, kc: usize, threads: usize, size: usize) -> bool {
    m * n * size <= SPLIT_K_MAX_C_BYTES && k >= SPLIT_K_MIN_STEPS_PER_THREAD * kc * threads
}

/// C ← α·A·B + β·C with k split in `threads` slices: thread 0 accumulates
/// its slice into C (with the caller's β), every other thread computes its
/// slice into a private m×n buffer, and the buffers are then added into C.
/// With wrapping integers the result is exactly the classical one; with
/// floats only the order of the k sums changes.
fn gemm_split_k<T: Element, K: Microkernel<T>>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    blocks: &BlockSizes,
    threads: usize,
) {
    let (m, k) = a.shape();
    let n = b.cols();
    let slice = k.div_ceil(threads).div_ceil(blocks.kc) * blocks.kc;
    let slices: Vec<(usize, usize)> = (0..k)
        .step_by(slice)
        .map(|p| (p, slice.min(k - p)))
        .collect();
    let mut partials = vec![T::ZERO; (slices.len() - 1) * m * n];
    let mut targets: Vec<MatMut<'_, T>> = Vec::with_capacity(slices.len());
    targets.push(c.rb_mut());
    for buffer in partials.chunks_exact_mut(m * n) {
        targets.push(MatMut::from_slice(buffer, m, n).expect("an m×n buffer"));
    }
    targets
        .into_par_iter()
        .zip(slices)
        .enumerate()
        .for_each(|(t, (target, (p0, len)))| {
            let beta_here = if t == 0 { beta } else { T::ZERO };
            let a_slice = a.submatrix(0, p0, m, len);
            let b_slice = b.submatrix(p0, 0, len, n);
            gemm::<T, K>(alpha, a_slice, b_slice, beta_here, target, blocks, 1);
        });
    let rows_per_task = m.div_ceil(threads);
    c.into_blocks(rows_per_task, n)
        .into_par_iter()
        .for_each(|(row0, _, mut rows)| {
            for partial in partials.chunks_exact(m * n) {
                for i in 0..rows.rows() {
                    let src = &partial[(row0 + i) * n..(row0 + i + 1) * n];
                    for (j, &value) in src.iter().enumerate() {
                        // SAFETY: i < rows.rows() and j < n = rows.cols().
                        let cij = unsafe { rows.get_unchecked_mut(i, j) };
                        *cij = cij.add(value);
                    }
                }
            }
        });
}

/// One thread's share of an (ic, pc) block: its columns of B packed NC at a
/// time into its own buffer, against the shared micro-panels of Ã starting
/// at `a_packed`.
fn multiply_part<T: Element, K: Microkernel<T>>(
    alpha: T,
    a_packed: &[T],
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    nc: usize,
) {
    let (mb, n) = c.shape();
    let kb = b.rows();
    let nc = nc.min(n.div_ceil(K::NR) * K::NR);
    let mut own = Workspace::take::<T>(0, nc * kb);
    let (_, b_buf) = own.buffers::<T>(0, nc * kb);
    let (rs_c, cs_c) = (c.row_stride(), c.col_stride());
    let c_ptr = c.as_mut_ptr();
    for jc in (0..n).step_by(nc) {
        let nb = nc.min(n - jc);
        // SAFETY: column jc is inside C, so the offset is inside its extent.
        let c_cols = unsafe { c_ptr.add(jc * cs_c) };
        // SAFETY: `a_packed` holds at least mb rows of packed Ã and
        // `b_buf` room for the packed kb×nb block of B; c_cols addresses an
        // mb×nb block of the exclusive view C with strides (rs_c, cs_c).
        unsafe {
            macro_kernel::<T, K>(
                mb,
                nb,
                kb,
                alpha,
                a_packed,
                b.submatrix(0, jc, kb, nb),
                b_buf,
                beta,
                c_cols,
                rs_c as isize,
                cs_c as isize,
            )
        };
    }
}

/// The two innermost loops over one block pair. B̃ is packed lazily: each
/// micro-panel right before its first use (in the first row of micro-tiles),
/// so it is still in L1 when the kernel reads it, and packing interleaves
/// with computing instead of preceding it.
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
    b_block: MatRef<'_, T>,
    b_buf: &mut [T],
    beta: T,
    c: *mut T,
    rs_c: isize,
    cs_c: isize,
) {
    let mut scratch = [T::ZERO; MAX_TILE_ELEMENTS];
    for ir in (0..mb).step_by(K::MR) {
        let rows = K::MR.min(mb - ir);
        let a_panel = a_buf[ir * kb..(ir + K::MR) * kb].as_ptr();
        // The next micro-panel of Ã comes from L3; spread its prefetch into
        // L2 over this row's kernel calls so the next row starts warm.
        let next_end = (ir + 2 * K::MR).min(mb.div_ceil(K::MR) * K::MR);
        let next_a = &a_buf[(ir + K::MR) * kb..next_end * kb];
        let lines_per_call =
            std::mem::size_of_val(next_a).div_ceil(CACHE_LINE * nb.div_ceil(K::NR));
        for (call, jr) in (0..nb).step_by(K::NR).enumerate() {
            let cols = K::NR.min(nb - jr);
            prefetch_l2(next_a, call * lines_per_call, lines_per_call);
            let b_panel_buf = &mut b_buf[jr * kb..(jr + K::NR) * kb];
            if ir == 0 {
                pack_b::<T, K>(b_block.submatrix(0, jr, kb, cols), b_panel_buf);
            }
            let b_panel = b_panel_buf.as_ptr();
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

/// Hints lines `first..first + count` of `data` (those that exist) into L2.
fn prefetch_l2<T>(data: &[T], first: usize, count: usize) {
    let bytes = std::mem::size_of_val(data);
    let base = data.as_ptr().cast::<i8>();
    for line in first..(first + count).min(bytes.div_ceil(CACHE_LINE)) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint that never faults, and the address is
        // inside `data`.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
            _mm_prefetch::<_MM_HINT_T1>(base.add(line * CACHE_LINE));
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (base, line);
    }
}
