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
//! **Fused sums.** [`gemm_fused`] runs the same loops for the fast
//! algorithms' primitive C_k ← C_k + γ_k·α·(Σ wᵢAᵢ)(Σ vⱼBⱼ): the sums are
//! formed while packing Ã and B̃, and each kernel's tile is added into
//! every destination block, so no sum or product is ever stored whole.
//!
//! β' is the caller's β on the first KC step and 1 afterwards, so β = 0
//! never reads C. Edge tiles go through a scratch tile (the contract's edge
//! policy): the kernel writes a full MR×NR tile there and only the valid part
//! is merged into C, so nothing outside C is read or written.

use rayon::prelude::*;

use crate::element::Element;
use crate::matrix::{MatMut, MatRef};
use crate::packed::blocking::{balanced_block, BlockSizes, MC_SLACK};
use crate::packed::kernel::{merge_tile, Microkernel};
use crate::packed::packing::{pack_a_sum, pack_b_sum};
use crate::packed::workspace::Workspace;
use crate::tunables::{SPLIT_K_MAX_C_BYTES, SPLIT_K_MIN_STEPS_PER_THREAD};

/// Blocks of KC and NC never exceed their size: KC bounds the micro-panels
/// in L1/L2 and NC the B̃ block in L2.
const NO_SLACK: (usize, usize) = (0, 1);

/// Bytes in a cache line, the unit of the prefetches below.
const CACHE_LINE: usize = 64;

use crate::packed::kernel::MAX_TILE as MAX_TILE_ELEMENTS;

/// Threads split C by columns when each gets at least this many
/// micro-panels of columns; otherwise by rows.
const MIN_COLUMN_PANELS_PER_THREAD: usize = 2;

/// A weighted block of C the products are added into: element (i, j) at
/// `ptr + i·rs + j·cs`.
#[derive(Clone, Copy)]
pub(crate) struct Dest<T> {
    pub gamma: T,
    pub ptr: *mut T,
    pub rs: isize,
    pub cs: isize,
}

// SAFETY: threads receive destinations offset to disjoint regions of C
// (`Dest::offset` with the split of the driver), so sharing them is like
// sharing disjoint `&mut` sub-slices.
unsafe impl<T: Send> Send for Dest<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Dest<T> {}

impl<T> Dest<T> {
    /// The same destination moved to (row, col).
    fn offset(self, row: usize, col: usize) -> Dest<T> {
        Dest {
            // wrapping_offset: only an address, inside the block by the
            // caller's split.
            ptr: self
                .ptr
                .wrapping_offset(row as isize * self.rs + col as isize * self.cs),
            ..self
        }
    }
}

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
    let (m, k) = a.shape();
    let n = b.cols();
    let fitted = blocks.fitted(K::MR, K::NR);
    if threads > 1 && split_k_pays(m, n, k, fitted.kc, threads, std::mem::size_of::<T>()) {
        gemm_split_k::<T, K>(alpha, a, b, beta, c, &fitted, threads);
        return;
    }
    let dest = Dest {
        gamma: T::ONE,
        ptr: c.as_mut_ptr(),
        rs: c.row_stride() as isize,
        cs: c.col_stride() as isize,
    };
    // SAFETY: `c` is an exclusive m×n view, and the only destination.
    unsafe {
        gemm_fused::<T, K>(
            alpha,
            &[(T::ONE, a)],
            &[(T::ONE, b)],
            beta,
            &[dest],
            blocks,
            threads,
        )
    };
}

/// C_k ← β·C_k + γ_k·α·(Σ wᵢAᵢ)(Σ vⱼBⱼ) for every destination: the five
/// loops for sums of operands and several destinations, which are the fast
/// algorithms' primitive (sums formed while packing) and, with one term and
/// one destination, the plain GEMM.
///
/// # Safety
/// Every destination addresses an m×n block (m rows of the A terms, n
/// columns of the B terms) valid for reads and writes, reached through no
/// other path during the call; no two destinations overlap, and none
/// overlaps an A or B term.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_fused<T: Element, K: Microkernel<T>>(
    alpha: T,
    a: &[(T, MatRef<'_, T>)],
    b: &[(T, MatRef<'_, T>)],
    beta: T,
    dests: &[Dest<T>],
    blocks: &BlockSizes,
    threads: usize,
) {
    const { assert!(K::MR * K::NR <= MAX_TILE_ELEMENTS) };
    let (m, k) = a[0].1.shape();
    let n = b[0].1.cols();
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
    let kc = balanced_block(k, blocks.kc, 1, NO_SLACK);
    let mc = balanced_block(m, blocks.mc, K::MR, MC_SLACK);
    // One micro-panel of scratch per thread for packing sums.
    let a_scratch_panel = if a.len() > 1 { K::MR * kc } else { 0 };
    let a_scratch_len = a_scratch_panel * threads;
    let mut shared = Workspace::take::<T>(mc * kc, a_scratch_len);
    let (a_buf, a_scratch) = shared.buffers::<T>(mc * kc, a_scratch_len);
    let column_panels = n.div_ceil(K::NR);
    let split_columns = column_panels >= threads * MIN_COLUMN_PANELS_PER_THREAD;
    let mut a_terms = a.to_vec();
    let mut b_terms = b.to_vec();

    for ic in (0..m).step_by(mc) {
        let mb = mc.min(m - ic);
        for pc in (0..k).step_by(kc) {
            let kb = kc.min(k - pc);
            let beta_here = if pc == 0 { beta } else { T::ONE };
            for (term, &(w, whole)) in a_terms.iter_mut().zip(a) {
                *term = (w, whole.submatrix(ic, pc, mb, kb));
            }
            let row_panels = mb.div_ceil(K::MR);
            let a_packed = &mut a_buf[..row_panels * K::MR * kb];
            if threads == 1 {
                pack_a_sum::<T, K>(&a_terms, a_packed, a_scratch);
            } else {
                let per_thread = row_panels.div_ceil(threads);
                let chunk = per_thread * K::MR * kb;
                let scratch_chunks = a_scratch.chunks_mut(a_scratch_panel.max(1)).map(Some);
                a_packed
                    .par_chunks_mut(chunk)
                    .zip(
                        scratch_chunks
                            .chain(std::iter::repeat_with(|| None))
                            .take(threads)
                            .collect::<Vec<_>>(),
                    )
                    .enumerate()
                    .for_each(|(t, (chunk, scratch))| {
                        let row0 = t * per_thread * K::MR;
                        let rows = (per_thread * K::MR).min(mb - row0);
                        let part: Vec<(T, MatRef<'_, T>)> = a_terms
                            .iter()
                            .map(|&(w, block)| (w, block.submatrix(row0, 0, rows, kb)))
                            .collect();
                        pack_a_sum::<T, K>(&part, chunk, scratch.unwrap_or(&mut []));
                    });
            }
            let a_packed: &[T] = a_packed;
            for (term, &(w, whole)) in b_terms.iter_mut().zip(b) {
                *term = (w, whole.submatrix(pc, 0, kb, n));
            }
            let b_terms = &b_terms;
            let run = |(row0, col0, rows, cols): (usize, usize, usize, usize)| {
                let a_part = &a_packed[row0 * kb..];
                let b_part: Vec<(T, MatRef<'_, T>)> = b_terms
                    .iter()
                    .map(|&(w, block)| (w, block.submatrix(0, col0, kb, cols)))
                    .collect();
                let part: Vec<Dest<T>> = dests.iter().map(|d| d.offset(ic + row0, col0)).collect();
                // SAFETY: each region (row0, col0, rows, cols) of the split
                // below is disjoint from the others and inside every
                // destination's mb×n block at row ic.
                unsafe {
                    multiply_part::<T, K>(alpha, a_part, &b_part, beta_here, &part, rows, blocks.nc)
                };
            };
            if threads == 1 {
                run((0, 0, mb, n));
            } else if split_columns {
                let cols = column_panels.div_ceil(threads) * K::NR;
                let regions: Vec<_> = (0..n)
                    .step_by(cols)
                    .map(|c0| (0, c0, mb, cols.min(n - c0)))
                    .collect();
                regions.into_par_iter().for_each(run);
            } else {
                let rows = row_panels.div_ceil(threads) * K::MR;
                let regions: Vec<_> = (0..mb)
                    .step_by(rows)
                    .map(|r0| (r0, 0, rows.min(mb - r0), n))
                    .collect();
                regions.into_par_iter().for_each(run);
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

/// One thread's share of an (ic, pc) block: its columns of the B terms
/// packed NC at a time into its own buffer, against the shared micro-panels
/// of Ã starting at `a_packed`, into `mb` rows of every destination.
///
/// # Safety
/// Each destination addresses an mb×n block (n = the B terms' columns)
/// that only this call touches.
unsafe fn multiply_part<T: Element, K: Microkernel<T>>(
    alpha: T,
    a_packed: &[T],
    b: &[(T, MatRef<'_, T>)],
    beta: T,
    dests: &[Dest<T>],
    mb: usize,
    nc: usize,
) {
    let (kb, n) = b[0].1.shape();
    let nc = balanced_block(n, nc, K::NR, NO_SLACK);
    let scratch_len = if b.len() > 1 { K::NR * kb } else { 0 };
    let mut own = Workspace::take::<T>(nc * kb, scratch_len);
    let (b_buf, b_scratch) = own.buffers::<T>(nc * kb, scratch_len);
    let mut b_block = b.to_vec();
    let mut part = dests.to_vec();
    for jc in (0..n).step_by(nc) {
        let nb = nc.min(n - jc);
        for (term, &(w, whole)) in b_block.iter_mut().zip(b) {
            *term = (w, whole.submatrix(0, jc, kb, nb));
        }
        for (d, &whole) in part.iter_mut().zip(dests) {
            *d = whole.offset(0, jc);
        }
        // SAFETY: `a_packed` holds at least mb rows of packed Ã and
        // `b_buf` room for the packed kb×nb block of B; every destination
        // moved to column jc addresses an mb×nb block only this call
        // touches.
        unsafe {
            macro_kernel::<T, K>(
                mb, nb, kb, alpha, a_packed, &b_block, b_buf, b_scratch, beta, &part,
            )
        };
    }
}

/// The two innermost loops over one block pair. B̃ is packed lazily: each
/// micro-panel right before its first use (in the first row of micro-tiles),
/// so it is still in L1 when the kernel reads it, and packing interleaves
/// with computing instead of preceding it.
///
/// One destination with weight 1 gets full tiles straight from the kernel;
/// otherwise (edge tiles, or several weighted destinations) the kernel
/// writes an MR×NR scratch tile and its valid part is merged into each.
///
/// # Safety
/// Each destination addresses an mb×nb block valid for reads and writes and
/// not otherwise aliased; `a_buf` and `b_buf` hold the packed blocks.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel<T: Element, K: Microkernel<T>>(
    mb: usize,
    nb: usize,
    kb: usize,
    alpha: T,
    a_buf: &[T],
    b_block: &[(T, MatRef<'_, T>)],
    b_buf: &mut [T],
    b_scratch: &mut [T],
    beta: T,
    dests: &[Dest<T>],
) {
    let mut scratch = [T::ZERO; MAX_TILE_ELEMENTS];
    // Full tiles go straight from the kernel's registers into every
    // destination when they share strides (always, for blocks of one C).
    let (rs, cs) = (dests[0].rs, dests[0].cs);
    let direct = dests.iter().all(|d| d.rs == rs && d.cs == cs);
    let mut tile_dests: Vec<(T, *mut T)> =
        dests.iter().map(|d| (alpha.mul(d.gamma), d.ptr)).collect();
    let mut b_panel_terms = b_block.to_vec();
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
                for (term, &(w, block)) in b_panel_terms.iter_mut().zip(b_block) {
                    *term = (w, block.submatrix(0, jr, kb, cols));
                }
                pack_b_sum::<T, K>(&b_panel_terms, b_panel_buf, b_scratch);
            }
            let b_panel = b_panel_buf.as_ptr();
            if direct && rows == K::MR && cols == K::NR {
                for (slot, d) in tile_dests.iter_mut().zip(dests) {
                    slot.1 = d.offset(ir, jr).ptr;
                }
                // SAFETY: a full tile of each destination, with the common
                // strides, and panels of MR·kb and kb·NR elements.
                unsafe { K::run_multi(kb, a_panel, b_panel, beta, &tile_dests, rs, cs) };
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
            for dest in dests {
                let d = dest.offset(ir, jr);
                // SAFETY: rows×cols is the valid part of this tile, inside
                // the destination block.
                unsafe {
                    merge_tile(
                        &scratch,
                        K::NR,
                        (rows, cols),
                        d.gamma,
                        beta,
                        d.ptr,
                        d.rs,
                        d.cs,
                    )
                };
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
