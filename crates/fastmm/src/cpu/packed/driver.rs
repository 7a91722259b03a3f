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
//! which ran the f64 kernel 15–25% slower on an Ice Lake machine.
//!
//! **Threads.** When C has enough rows, every (jc, pc) block's work is a
//! run of tasks in one sequence: a share of B̃'s packing per thread, then
//! row tasks of C (each packs its own rows of Ã into its thread's L2).
//! Threads take the tasks in order as they come free, and a task waits
//! only for the earlier ones it needs ([`gemm_rows_pipelined`]), so a
//! thread the host slows down holds up only its current task, and no
//! thread waits at the end of each block. With few rows, the threads pack
//! B̃ together and then split C by columns (each packs all of Ã, which is
//! then small). Threads never write the same element of C at once. One
//! thread runs the loops inline, with no pool.
//!
//! **Fused sums.** [`gemm_fused`] runs the same loops for the fast
//! algorithms' primitive C_k ← C_k + γ_k·α·(Σ wᵢAᵢ)(Σ vⱼBⱼ): the sums are
//! formed while packing Ã and B̃, and each kernel's tile is added into
//! every destination block, so no sum or product is ever stored whole.
//!
//! β' is the caller's β on the first KC step and 1 afterwards, so β = 0
//! never reads C. Edge tiles go through a scratch tile (the contract's edge
//! policy): the kernel's `run_edge` writes the tile's valid columns there
//! (SIMD kernels only the vectors that hold them) and only the valid part
//! is merged into C, so nothing outside C is read or written.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::threads::{for_each_member, Shares};

use crate::cpu::packed::blocking::{balanced_block, NC_SLACK};
use crate::cpu::packed::kernel::{merge_tile, Microkernel};
use crate::cpu::packed::packing::{pack_a_sum, pack_b_sum};
use crate::cpu::packed::workspace::Workspace;
use crate::element::Element;
use crate::matrix::{MatMut, MatRef};
use crate::options::BlockSizes;
use crate::tunables::TASKS_PER_THREAD;

/// Blocks of KC and MC never exceed their size: KC bounds the micro-panels
/// in L1 and MC the Ã block in L2.
const NO_SLACK: (usize, usize) = (0, 1);

use crate::cpu::packed::kernel::MAX_TILE as MAX_TILE_ELEMENTS;

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

/// One fused product, C_k ← β·C_k + γ_k·α·(Σ wᵢAᵢ)(Σ vⱼBⱼ): the
/// weighted A and B terms, and the weighted destinations (see
/// [`gemm_fused`]).
#[derive(Clone, Copy)]
pub(crate) struct Fused<'p, 'a, T> {
    pub alpha: T,
    pub a: &'p [(T, MatRef<'a, T>)],
    pub b: &'p [(T, MatRef<'a, T>)],
    pub beta: T,
    pub dests: &'p [Dest<T>],
}

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

/// C ← α·A·B + β·C with kernel K on `threads` threads: the caller's, when
/// 1; otherwise the caller and a team's helpers, or, called from a rayon
/// pool, that pool's threads (see [`for_each_member`]).
pub(crate) fn gemm<T: Element, K: Microkernel<T>>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    blocks: &BlockSizes,
    threads: usize,
) {
    let dest = Dest {
        gamma: T::ONE,
        ptr: c.as_mut_ptr(),
        rs: c.row_stride() as isize,
        cs: c.col_stride() as isize,
    };
    // SAFETY: `c` is an exclusive m×n view, and the only destination.
    unsafe {
        gemm_fused::<T, K>(
            Fused {
                alpha,
                a: &[(T::ONE, a)],
                b: &[(T::ONE, b)],
                beta,
                dests: &[dest],
            },
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
pub(crate) unsafe fn gemm_fused<T: Element, K: Microkernel<T>>(
    product: Fused<'_, '_, T>,
    blocks: &BlockSizes,
    threads: usize,
) {
    let Fused {
        alpha,
        a,
        b,
        beta,
        dests,
    } = product;
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
    if threads > 1 && m.div_ceil(K::MR) >= threads * MIN_ROW_PANELS_PER_THREAD {
        // SAFETY: forwarded contract.
        unsafe { gemm_rows_pipelined::<T, K>(product, &blocks, (kc, nc), threads) };
        return;
    }
    // One micro-panel of scratch per thread for packing sums.
    let b_scratch_panel = if b.len() > 1 { K::NR * kc } else { 0 };
    let b_scratch_len = b_scratch_panel * threads;
    let mut shared = Workspace::take_from::<T>(
        crate::cpu::packed::workspace::Pool::SharedPacking,
        &[nc * kc, b_scratch_len],
    );
    let (b_buf, b_scratch) = shared.buffers::<T>(nc * kc, b_scratch_len);
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
                // Member t packs the t-th chunk of column panels, with
                // the t-th scratch panel.
                let per_thread = column_panels.div_ceil(threads);
                let chunk = per_thread * K::NR * kb;
                let mut scratch_chunks = b_scratch.chunks_mut(b_scratch_panel.max(1));
                let parts = Shares::new(
                    b_packed
                        .chunks_mut(chunk)
                        .map(|c| (c, scratch_chunks.next().unwrap_or(&mut []))),
                );
                for_each_member(threads, &|t| {
                    let Some((chunk, scratch)) = parts.take(t) else {
                        return;
                    };
                    let col0 = t * per_thread * K::NR;
                    let cols = (per_thread * K::NR).min(nb - col0);
                    let terms: Vec<(T, MatRef<'_, T>)> = b_terms
                        .iter()
                        .map(|&(w, block)| (w, block.submatrix(0, col0, kb, cols)))
                        .collect();
                    pack_b_sum::<T, K>(&terms, chunk, scratch);
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
            } else {
                let cols = column_panels.div_ceil(threads) * K::NR;
                let regions: Vec<_> = (0..nb)
                    .step_by(cols)
                    .map(|c0| (0, c0, m, cols.min(nb - c0)))
                    .collect();
                for_each_member(threads, &|t| {
                    if let Some(&region) = regions.get(t) {
                        run(region);
                    }
                });
            }
        }
    }
}

/// [`gemm_fused`] on several threads when C has enough rows for each
/// thread: the (jc, pc) steps' work as one sequence of tasks, taken in
/// order by whichever thread is free, in one parallel region. Each step is
/// `threads` chunks of B̃'s packing and then the row tasks of C
/// ([`row_tasks`]), each of which packs its rows of Ã and multiplies them
/// by the step's B̃. A task waits only for earlier tasks:
///
/// * a row task, for its step's B̃ chunks and for the same rows' task of
///   the step before (which wrote C there first);
/// * a B̃ chunk, for every row task two steps back, whose B̃ buffer
///   (there are two, used in turn) it overwrites.
///
/// So a thread that finishes its last row task of one step goes on to
/// pack the next step's B̃ and take its row tasks while another thread is
/// still busy, instead of waiting for it at the end of every step. On the
/// two-vCPU Zen 3 VM one vCPU ran row tasks 30% slower than the other
/// for seconds at a time, and with a fork-join per step the faster thread
/// waited up to 6 ms of every 20 ms step.
///
/// Every task a thread waits for was taken before its own, by a thread
/// that is running it (threads take tasks only while running and finish
/// each before taking the next), so the waits always end, even when the
/// pool runs the workers one after another on one thread.
///
/// # Safety
/// As [`gemm_fused`].
unsafe fn gemm_rows_pipelined<T: Element, K: Microkernel<T>>(
    Fused {
        alpha,
        a,
        b,
        beta,
        dests,
    }: Fused<'_, '_, T>,
    blocks: &BlockSizes,
    (kc, nc): (usize, usize),
    threads: usize,
) {
    let (m, k) = a[0].1.shape();
    let n = b[0].1.cols();
    let steps: Vec<(usize, usize, usize, usize)> = (0..n)
        .step_by(nc)
        .flat_map(|jc| {
            (0..k)
                .step_by(kc)
                .map(move |pc| (jc, nc.min(n - jc), pc, kc.min(k - pc)))
        })
        .collect();
    let rows: Vec<(usize, usize)> = row_tasks(m, K::MR, blocks.mc, threads).collect();
    let chunks = threads;
    let tasks_per_step = chunks + rows.len();
    let b_len = nc.min(n).div_ceil(K::NR) * K::NR * kc;
    let b_scratch_panel = if b.len() > 1 { K::NR * kc } else { 0 };
    let mut shared = Workspace::take_from::<T>(
        crate::cpu::packed::workspace::Pool::SharedPacking,
        &[b_len, b_len, b_scratch_panel * threads],
    );
    let mut buffers = shared
        .split::<T>(&[b_len, b_len, b_scratch_panel * threads])
        .into_iter()
        .map(SharedSlice::new);
    let (Some(first), Some(second), Some(scratch)) =
        (buffers.next(), buffers.next(), buffers.next())
    else {
        unreachable!("three buffers were asked for")
    };
    let b_bufs = [first, second];
    let next_task = AtomicUsize::new(0);
    let chunks_packed: Vec<AtomicUsize> = steps.iter().map(|_| AtomicUsize::new(0)).collect();
    let rows_done: Vec<AtomicUsize> = steps.iter().map(|_| AtomicUsize::new(0)).collect();
    let steps_done_by_rows: Vec<AtomicUsize> = rows.iter().map(|_| AtomicUsize::new(0)).collect();
    let total = steps.len() * tasks_per_step;

    let abandoned = AtomicBool::new(false);
    let worker = |worker: usize| {
        let _abandon_on_panic = AbandonOnPanic(&abandoned);
        let wait_for = |ready: &dyn Fn() -> bool| wait_until(ready, &abandoned);
        loop {
            let task = next_task.fetch_add(1, Ordering::Relaxed);
            if task >= total {
                return;
            }
            let (step, index) = (task / tasks_per_step, task % tasks_per_step);
            let (jc, nb, pc, kb) = steps[step];
            let column_panels = nb.div_ceil(K::NR);
            let per_chunk = column_panels.div_ceil(chunks);
            let b_buf = &b_bufs[step % 2];
            if index < chunks {
                if step >= 2 {
                    wait_for(&|| rows_done[step - 2].load(Ordering::Acquire) == rows.len());
                }
                let first_panel = (index * per_chunk).min(column_panels);
                let panels = per_chunk.min(column_panels - first_panel);
                if panels > 0 {
                    let col0 = first_panel * K::NR;
                    let cols = (panels * K::NR).min(nb - col0);
                    let part: Vec<(T, MatRef<'_, T>)> = b
                        .iter()
                        .map(|&(w, whole)| (w, whole.submatrix(pc, jc + col0, kb, cols)))
                        .collect();
                    // SAFETY: chunk `index` of this step's buffer is written by
                    // this task alone: the row tasks that read the buffer two
                    // steps back are done (waited for above), and this step's
                    // wait for the chunk to be counted. Worker `worker` runs
                    // one task at a time, so its scratch panel is its own.
                    let (dst, own_scratch) = unsafe {
                        (
                            b_buf.slice_mut(col0 * kb, panels * K::NR * kb),
                            scratch.slice_mut(worker * b_scratch_panel, b_scratch_panel),
                        )
                    };
                    pack_b_sum::<T, K>(&part, dst, own_scratch);
                }
                chunks_packed[step].fetch_add(1, Ordering::Release);
                continue;
            }
            let row_task = index - chunks;
            let (row0, row_count) = rows[row_task];
            wait_for(&|| chunks_packed[step].load(Ordering::Acquire) == chunks);
            wait_for(&|| steps_done_by_rows[row_task].load(Ordering::Acquire) == step);
            // SAFETY: every chunk of this step's B̃ is packed (waited for
            // above) and no chunk task writes it until this step's row tasks
            // are all done.
            let b_packed = unsafe { b_buf.slice(0, column_panels * K::NR * kb) };
            let a_part: Vec<(T, MatRef<'_, T>)> = a
                .iter()
                .map(|&(w, whole)| (w, whole.submatrix(row0, pc, row_count, kb)))
                .collect();
            let part: Vec<Dest<T>> = dests.iter().map(|d| d.offset(row0, jc)).collect();
            let beta_here = if pc == 0 { beta } else { T::ONE };
            // SAFETY: rows row0.. of the destinations' columns jc..jc+nb are
            // touched by this row task alone: the other row tasks cover other
            // rows, and the same rows' task of the step before is done.
            unsafe {
                multiply_part::<T, K>(alpha, &a_part, b_packed, beta_here, &part, nb, blocks.mc)
            };
            steps_done_by_rows[row_task].store(step + 1, Ordering::Release);
            rows_done[step].fetch_add(1, Ordering::Release);
        }
    };
    for_each_member(threads, &worker);
}

/// Waits until `ready()` holds ([`crate::threads::wait_until`]: a short
/// spin, then yielding, so that a member the scheduler has put on this
/// thread's CPU gets to run). Gives up (panics) once `abandoned` is set:
/// a worker that panicked will never finish the task waited for, and the
/// panic should reach the caller rather than leave the other workers
/// spinning.
fn wait_until(ready: &dyn Fn() -> bool, abandoned: &AtomicBool) {
    crate::threads::wait_until(|| {
        assert!(
            !abandoned.load(Ordering::Relaxed),
            "another thread of the packed product panicked"
        );
        ready()
    });
}

/// Sets its flag when dropped during a panic, so that the other workers'
/// waits give up instead of spinning on a task that will never finish.
struct AbandonOnPanic<'a>(&'a AtomicBool);

impl Drop for AbandonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// A buffer written and read by several threads under the pipeline's
/// protocol ([`gemm_rows_pipelined`]), which keeps the parts any two
/// threads use at once apart or read-only.
struct SharedSlice<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: access goes through the unsafe methods below, whose callers keep
// concurrent uses disjoint or read-only.
unsafe impl<T: Send> Send for SharedSlice<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for SharedSlice<T> {}

impl<T> SharedSlice<T> {
    fn new(slice: &mut [T]) -> SharedSlice<T> {
        SharedSlice {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
        }
    }

    /// # Safety
    /// No other thread writes `start..start + len` while the slice lives.
    unsafe fn slice(&self, start: usize, len: usize) -> &[T] {
        assert!(start + len <= self.len);
        // SAFETY: in bounds (asserted), and unaliased by writers (contract).
        unsafe { std::slice::from_raw_parts(self.ptr.add(start), len) }
    }

    /// # Safety
    /// No other thread reads or writes `start..start + len` while the slice
    /// lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice_mut(&self, start: usize, len: usize) -> &mut [T] {
        assert!(start + len <= self.len);
        // SAFETY: in bounds (asserted), and used by this thread alone
        // (contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// The row tasks of a block of C with m rows, as (first row, rows): whole
/// micro-panels of `mr` rows, at most `mc` rows a task, about
/// TASKS_PER_THREAD tasks a thread (fewer when a task would drop below
/// MIN_ROW_PANELS_PER_TASK panels), and a multiple of `threads` tasks whose
/// panel counts differ by at most one, so that the last tasks leave no
/// thread waiting for a longer one (11 tasks of 29 panels and one of 23
/// left one of two threads idle for 6 panels of every KC step).
fn row_tasks(
    m: usize,
    mr: usize,
    mc: usize,
    threads: usize,
) -> impl Iterator<Item = (usize, usize)> {
    let panels = m.div_ceil(mr);
    let most_per_task = mc.div_ceil(mr).max(1);
    let fewest_per_task = MIN_ROW_PANELS_PER_TASK
        .min(panels.div_ceil(threads))
        .min(most_per_task);
    let wanted = (threads * TASKS_PER_THREAD).min(panels / fewest_per_task.max(1));
    let tasks = wanted
        .max(panels.div_ceil(most_per_task))
        .next_multiple_of(threads)
        .clamp(1, panels);
    let (base, extra) = (panels / tasks, panels % tasks);
    (0..tasks).scan(0, move |first_panel, task| {
        let count = base + usize::from(task < extra);
        let r0 = *first_panel * mr;
        *first_panel += count;
        Some((r0, (count * mr).min(m - r0)))
    })
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
        unsafe { macro_kernel::<T, K>((mb, nb, kb), alpha, (a_packed, b_packed), beta, &part) };
    }
}

/// The two innermost loops over one block pair: each micro-panel of B̃
/// stays in L1 (or, at the streaming KC, in L2) while the micro-panels of
/// Ã stream past it from L2. The next micro-panel of B̃ comes from L3
/// through the hardware prefetchers: a software prefetch of it into L2,
/// spread over the column's kernel calls, cost 0.5–2% on Zen 4.
///
/// One destination with weight 1 gets full tiles straight from the kernel;
/// otherwise (edge tiles, or several weighted destinations) the kernel
/// writes an MR×NR scratch tile (`run_edge`: the valid columns) and its
/// valid part is merged into each.
///
/// # Safety
/// Each destination addresses an mb×nb block valid for reads and writes and
/// not otherwise aliased; `a_buf` and `b_buf` hold the packed blocks.
unsafe fn macro_kernel<T: Element, K: Microkernel<T>>(
    (mb, nb, kb): (usize, usize, usize),
    alpha: T,
    (a_buf, b_buf): (&[T], &[T]),
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
    for jr in (0..nb).step_by(K::NR) {
        let cols = K::NR.min(nb - jr);
        let b_panel = b_buf[jr * kb..(jr + K::NR) * kb].as_ptr();
        for ir in (0..mb).step_by(K::MR) {
            let rows = K::MR.min(mb - ir);
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
            // SAFETY: the scratch tile is MR×NR row-major (≤ MAX_TILE_ELEMENTS),
            // and 1 ≤ cols ≤ NR.
            unsafe { K::run_edge(kb, alpha, a_panel, b_panel, scratch.as_mut_ptr(), cols) };
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
                        (d.ptr, d.rs, d.cs),
                    )
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row tasks tile 0..m in order with whole panels, never exceed mc,
    /// come in a multiple of the threads, and differ by at most one panel.
    #[test]
    fn row_tasks_are_balanced_and_cover_every_row() {
        for (m, mr, mc, threads) in [
            (2048, 6, 174, 2),
            (2048, 8, 96, 2),
            (4096, 6, 174, 2),
            (1000, 6, 174, 3),
            (48, 6, 174, 2),
            (97, 8, 96, 4),
            (6000, 8, 120, 16),
        ] {
            let tasks: Vec<_> = row_tasks(m, mr, mc, threads).collect();
            assert_eq!(tasks.len() % threads, 0, "{m} {mr} {mc} {threads}");
            let mut next = 0;
            for &(r0, rows) in &tasks {
                assert_eq!(r0, next);
                assert_eq!(r0 % mr, 0);
                assert!(rows > 0 && rows <= mc.div_ceil(mr) * mr);
                next += rows;
            }
            assert_eq!(next, m);
            let panels: Vec<usize> = tasks.iter().map(|&(_, rows)| rows.div_ceil(mr)).collect();
            let (least, most) = (panels.iter().min().unwrap(), panels.iter().max().unwrap());
            assert!(most - least <= 1, "{m} {mr} {mc} {threads}: {panels:?}");
        }
    }
}
