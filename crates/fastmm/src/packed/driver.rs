//! The five loops around the microkernel, in GotoBLAS order. In BLIS's
//! terms for the transposed, column-major problem Cᵀ = BᵀAᵀ, our Ã plays
//! BLIS's packed B (the broadcast operand) and our B̃ plays BLIS's packed A
//! (the vector operand):
//!
//! ```text
//! for jc in 0..n step NC            (one block unless n is very large)
//!   for pc in 0..k step KC          B̃ ← pack B[pc.., jc..]  (KC×NC, L3; shared)
//!     for ic in 0..m step MC        Ã ← pack A[ic.., pc..]  (MC×KC, L2; per thread)
//!       for jr in 0..NC step NR     one micro-panel of B̃ stays in L1
//!         for ir in 0..MC step MR   microkernel: C[ir, jr] ← α Ã B̃ + β' C
//! ```
//!
//! The vector operand (B̃, NR = three vectors wide) is the one that stays in
//! L1, and the broadcast operand (Ã, MR = 8 elements per k step) the one that
//! streams from L2: a third of the bytes per flop of the other way round,
//! which ran the f64 kernel 15–25% slower on the Ice Lake dev machine
//! (docs/perf-notes.md, "Vector operand in L1").
//!
//! **Threads.** For each (jc, pc) block the threads first pack B̃ together,
//! each a share of its micro-panels, then split the block of C: by rows
//! (each task packs its own rows of Ã into its thread's L2) when there are
//! enough rows, else by columns (each thread packs all of Ã, which is then
//! small). The rows are cut into several tasks per thread, taken by
//! whichever thread is free, so a thread that the host pauses holds up
//! only its current task. Threads never write the same element of C. One
//! thread runs the same loops inline, with no pool.
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
use crate::packed::blocking::{balanced_block, BlockSizes, NC_SLACK};
use crate::packed::kernel::{merge_tile, Microkernel};
use crate::packed::packing::{pack_a_sum, pack_b_sum};
use crate::packed::workspace::Workspace;
use crate::tunables::{SPLIT_K_MAX_C_BYTES, SPLIT_K_MIN_STEPS_PER_THREAD, TASKS_PER_THREAD};

/// Blocks of KC and MC never exceed their size: KC bounds the micro-panels
/// in L1 and MC the Ã block in L2.
const NO_SLACK: (usize, usize) = (0, 1);

/// Bytes in a cache line, the unit of the prefetches below.
const CACHE_LINE: usize = 64;

use crate::packed::kernel::MAX_TILE as MAX_TILE_ELEMENTS;

/// Threads split C by rows when each gets at least this many micro-panels
/// of rows; otherwise by columns.
const MIN_ROW_PANELS_PER_THREAD: usize = 4;

/// A row task covers at least this many micro-panels of Ã (unless that
/// leaves a thread without one), so that each micro-panel of B̃ brought
/// into L1 serves as many kernel calls.
const MIN_ROW_PANELS_PER_TASK: usize = 32;

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
    let nc = balanced_block(n, blocks.nc, K::NR, NC_SLACK);
    // One micro-panel of scratch per thread for packing sums.
    let b_scratch_panel = if b.len() > 1 { K::NR * kc } else { 0 };
    let b_scratch_len = b_scratch_panel * threads;
    let mut shared = Workspace::take::<T>(nc * kc, b_scratch_len);
    let (b_buf, b_scratch) = shared.buffers::<T>(nc * kc, b_scratch_len);
    let row_panels = m.div_ceil(K::MR);
    let split_rows = row_panels >= threads * MIN_ROW_PANELS_PER_THREAD;
    let mut a_terms = a.to_vec();
    let mut b_terms = b.to_vec();

    for jc in (0..n).step_by(nc) {
        let nb = nc.min(n - jc);
        let column_panels = nb.div_ceil(K::NR);
        for pc in (0..k).step_by(kc) {
            let kb = kc.min(k - pc);
            let beta_here = if pc == 0 { beta } else { T::ONE };
            for (term, &(w, whole)) in b_terms.iter_mut().zip(b) {
                *term = (w, whole.submatrix(pc, jc, kb, nb));
            }
            let b_packed = &mut b_buf[..column_panels * K::NR * kb];
            if threads == 1 {
                pack_b_sum::<T, K>(&b_terms, b_packed, b_scratch);
            } else {
                let per_thread = column_panels.div_ceil(threads);
                let chunk = per_thread * K::NR * kb;
                let scratch_chunks = b_scratch.chunks_mut(b_scratch_panel.max(1)).map(Some);
                b_packed
                    .par_chunks_mut(chunk)
                    .zip(
                        scratch_chunks
                            .chain(std::iter::repeat_with(|| None))
                            .take(threads)
                            .collect::<Vec<_>>(),
                    )
                    .enumerate()
                    .for_each(|(t, (chunk, scratch))| {
                        let col0 = t * per_thread * K::NR;
                        let cols = (per_thread * K::NR).min(nb - col0);
                        let part: Vec<(T, MatRef<'_, T>)> = b_terms
                            .iter()
                            .map(|&(w, block)| (w, block.submatrix(0, col0, kb, cols)))
                            .collect();
                        pack_b_sum::<T, K>(&part, chunk, scratch.unwrap_or(&mut []));
                    });
            }
            let b_packed: &[T] = b_packed;
            for (term, &(w, whole)) in a_terms.iter_mut().zip(a) {
                *term = (w, whole.submatrix(0, pc, m, kb));
            }
            let a_terms = &a_terms;
            let run = |(row0, col0, rows, cols): (usize, usize, usize, usize)| {
                let b_part = &b_packed[col0 * kb..];
                let a_part: Vec<(T, MatRef<'_, T>)> = a_terms
                    .iter()
                    .map(|&(w, block)| (w, block.submatrix(row0, 0, rows, kb)))
                    .collect();
                let part: Vec<Dest<T>> = dests.iter().map(|d| d.offset(row0, jc + col0)).collect();
                // SAFETY: each region (row0, col0, rows, cols) of the split
                // below is disjoint from the others and inside every
                // destination's m×nb block at column jc.
                unsafe {
                    multiply_part::<T, K>(alpha, &a_part, b_part, beta_here, &part, cols, blocks.mc)
                };
            };
            if threads == 1 {
                run((0, 0, m, nb));
            } else if split_rows {
                // More row blocks than threads, taken by whichever thread
                // is free (see TASKS_PER_THREAD).
                let tasks = threads * TASKS_PER_THREAD;
                let fewest = MIN_ROW_PANELS_PER_TASK.min(row_panels.div_ceil(threads));
                let rows = row_panels
                    .div_ceil(tasks)
                    .max(fewest)
                    .min(blocks.mc.div_ceil(K::MR).max(1))
                    * K::MR;
                let regions: Vec<_> = (0..m)
                    .step_by(rows)
                    .map(|r0| (r0, 0, rows.min(m - r0), nb))
                    .collect();
                regions.into_par_iter().for_each(run);
            } else {
                let cols = column_panels.div_ceil(threads) * K::NR;
                let regions: Vec<_> = (0..nb)
                    .step_by(cols)
                    .map(|c0| (0, c0, m, cols.min(nb - c0)))
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

/// One thread's share of a (jc, pc) block: its rows of the A terms packed
/// MC at a time into its own buffer, against `nb` columns of the shared
/// B̃ starting at `b_packed`, into every destination.
///
/// # Safety
/// Each destination addresses an m×nb block (m = the A terms' rows) that
/// only this call touches.
unsafe fn multiply_part<T: Element, K: Microkernel<T>>(
    alpha: T,
    a: &[(T, MatRef<'_, T>)],
    b_packed: &[T],
    beta: T,
    dests: &[Dest<T>],
    nb: usize,
    mc: usize,
) {
    let (m, kb) = a[0].1.shape();
    let mc = balanced_block(m, mc, K::MR, NO_SLACK);
    let scratch_len = if a.len() > 1 { K::MR * kb } else { 0 };
    let mut own = Workspace::take::<T>(mc * kb, scratch_len);
    let (a_buf, a_scratch) = own.buffers::<T>(mc * kb, scratch_len);
    let mut a_block = a.to_vec();
    let mut part = dests.to_vec();
    for ic in (0..m).step_by(mc) {
        let mb = mc.min(m - ic);
        for (term, &(w, whole)) in a_block.iter_mut().zip(a) {
            *term = (w, whole.submatrix(ic, 0, mb, kb));
        }
        let a_packed = &mut a_buf[..mb.div_ceil(K::MR) * K::MR * kb];
        pack_a_sum::<T, K>(&a_block, a_packed, a_scratch);
        for (d, &whole) in part.iter_mut().zip(dests) {
            *d = whole.offset(ic, 0);
        }
        // SAFETY: `a_packed` holds the packed mb×kb block of Ã and
        // `b_packed` at least nb columns of packed B̃; every destination
        // moved to row ic addresses an mb×nb block only this call touches.
        unsafe { macro_kernel::<T, K>(mb, nb, kb, alpha, a_packed, b_packed, beta, &part) };
    }
}

/// The two innermost loops over one block pair: each micro-panel of B̃
/// stays in L1 while the micro-panels of Ã stream past it from L2, and the
/// next micro-panel of B̃ is fetched from L3 into L2 meanwhile, a few lines
/// per kernel call.
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
    b_buf: &[T],
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
    let column_panels = nb.div_ceil(K::NR);
    let row_panels = mb.div_ceil(K::MR);
    for jr in (0..nb).step_by(K::NR) {
        let cols = K::NR.min(nb - jr);
        let b_panel = b_buf[jr * kb..(jr + K::NR) * kb].as_ptr();
        let next_end = (jr + 2 * K::NR).min(column_panels * K::NR);
        let next_b = &b_buf[((jr + K::NR) * kb).min(next_end * kb)..next_end * kb];
        let lines_per_call = std::mem::size_of_val(next_b).div_ceil(CACHE_LINE * row_panels);
        for (call, ir) in (0..mb).step_by(K::MR).enumerate() {
            let rows = K::MR.min(mb - ir);
            prefetch_l2(next_b, call * lines_per_call, lines_per_call);
            let a_panel = a_buf[ir * kb..(ir + K::MR) * kb].as_ptr();
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
