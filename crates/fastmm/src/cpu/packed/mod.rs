//! `packed`: a BLIS-style GEMM. Five loops of cache blocking
//! ([`blocking`], [`driver`]) around a register-blocked microkernel
//! ([`kernel`], [`kernels`]), fed by packed, aligned panels of A and B
//! ([`packing`], [`workspace`]), with the kernel chosen once from the CPU's
//! features ([`dispatch`]).
//!
//! Threads share each packed block of B and split the block of C it feeds
//! ([`driver`]). One thread, or a small product, runs on the caller's
//! thread with no pool; a tiny product skips packing altogether and runs
//! the unpacked `tiled` loops.

pub(crate) mod blocking;
pub(crate) mod direct;
pub(crate) mod dispatch;
pub(crate) mod driver;
pub(crate) mod kernel;
pub(crate) mod kernels;
pub(crate) mod packing;
pub(crate) mod panels;
pub(crate) mod plain;
pub(crate) mod workspace;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub(crate) use dispatch::DirectFn;
pub(crate) use dispatch::{select_kernel, PackedKernel};

use crate::config::Config;
use crate::cpu::tiled;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{BlockSizes, GemmOptions};
use crate::threads::{even_bands, for_each_member, lock, run_in_pool, Shares};
use crate::tunables::{
    DEFAULT_TILE, INTERRUPTIBLE_MNK, INTERRUPT_K_PANEL, PACKED_BANDS_FROM, PACKED_BAND_MIN_COLS,
    PACKED_DIRECT_MAX_MNK, PACKED_MIN_MNK, PACKED_PARALLEL_FROM, SPLIT_K_MAX_C_BYTES,
    SPLIT_K_MAX_C_ELEMENTS, SPLIT_K_MAX_SLICES, SPLIT_K_MIN_STEPS_PER_SLICE,
};

/// The cache blocks `packed` runs an m×n C with: the option, else
/// `FASTMM_BLOCKS`, else the kernel's default (tuned or analytical).
pub(crate) fn blocks_for<T: Element>(
    kernel: &PackedKernel<T>,
    opts: &GemmOptions,
    (m, n): (usize, usize),
) -> Result<BlockSizes, Error> {
    Ok(match opts.cpu.block_sizes.or(Config::get().blocks()?) {
        Some(blocks) => blocks,
        None => kernel.default_blocks_for(m, n),
    })
}

/// The edge from whose cube `packed` runs products of T on several
/// threads: the options', else the tuning file's, else the built-in
/// [`PACKED_PARALLEL_FROM`].
pub(crate) fn parallel_edge<T: Element>(opts: &GemmOptions) -> usize {
    opts.cpu
        .parallel_from
        .or_else(|| Config::get().tuned_cpu_type(T::DTYPE)?.parallel_from)
        .unwrap_or(if std::mem::size_of::<T>() <= 4 {
            PACKED_PARALLEL_FROM.0
        } else {
            PACKED_PARALLEL_FROM.1
        })
}

/// The threads `packed` runs a product of m·n·k multiply-adds of T on:
/// one below the parallel edge cubed (the options', else the tuning
/// file's, else [`PACKED_PARALLEL_FROM`]), where waking a second thread
/// costs more than it saves, and below [`PACKED_MIN_MNK`] whatever the
/// edge (too small to pack is too small to share; one thread runs such a
/// product on the direct path, which a forced count then does too, so
/// that the bits do not depend on it).
pub(crate) fn threads_for<T: Element>(opts: &GemmOptions, mnk: u128) -> usize {
    let edge = parallel_edge::<T>(opts) as u128;
    if mnk < edge * edge * edge || mnk < PACKED_MIN_MNK {
        1
    } else {
        crate::cpu::threads(opts)
    }
}

/// How `packed` runs a product: the choice by size, made in one place for
/// the product and its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// Below [`PACKED_MIN_MNK`] where the direct path cannot run (no
    /// vector kernel, or B's rows not contiguous): the unpacked `tiled`
    /// loops.
    Tiny,
    /// Up to [`PACKED_DIRECT_MAX_MNK`] on one thread: the kernel on A and
    /// B as they lie ([`direct`]).
    Direct,
    /// The five packed loops on this many threads.
    Packed(usize),
}

impl Path {
    /// The path of an m×k×n product; `rows_contiguous`: B's rows are
    /// (the direct path loads them as they lie). A forced kernel or block
    /// size runs the packed loops as asked (the kernel tests rely on it);
    /// a forced kernel still takes the direct path, which runs it too.
    pub(crate) fn of<T: Element>(
        kernel: &PackedKernel<T>,
        opts: &GemmOptions,
        (m, k, n): (usize, usize, usize),
        rows_contiguous: bool,
    ) -> Result<Path, Error> {
        let threads = threads_for::<T>(opts, m as u128 * n as u128 * k as u128);
        Path::on_threads(kernel, opts, (m, k, n), rows_contiguous, threads)
    }

    /// As [`Path::of`] on a given number of threads.
    fn on_threads<T: Element>(
        kernel: &PackedKernel<T>,
        opts: &GemmOptions,
        (m, k, n): (usize, usize, usize),
        rows_contiguous: bool,
        threads: usize,
    ) -> Result<Path, Error> {
        let mnk = m as u128 * n as u128 * k as u128;
        let blocks_forced = opts.cpu.block_sizes.is_some() || Config::get().blocks()?.is_some();
        let forced = blocks_forced || opts.cpu.kernel.is_some();
        let tiny = mnk < PACKED_MIN_MNK;
        Ok(
            if kernel.direct.is_some()
                && threads == 1
                && mnk <= PACKED_DIRECT_MAX_MNK
                && rows_contiguous
                && !blocks_forced
            {
                Path::Direct
            } else if tiny && !forced {
                Path::Tiny
            } else {
                Path::Packed(threads)
            },
        )
    }
}

/// C ← α·A·B + β·C with the packed algorithm (β = 0 never reads C).
pub(crate) fn multiply<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    opts.check_interrupt()?;
    let kernel = select_kernel::<T>(opts.cpu.kernel)?;
    let shape = (a.rows(), a.cols(), b.cols());
    let rows_contiguous = b.col_stride() == 1 || b.cols() == 1;
    if let Some((members, direct, kc)) = bands::<T>(opts, shape, rows_contiguous) {
        on_bands(members, (direct, kc), (alpha, a, b, beta, c));
        return Ok(());
    }
    let threads = threads_for::<T>(opts, shape.0 as u128 * shape.1 as u128 * shape.2 as u128);
    let path = Path::on_threads(kernel, opts, shape, rows_contiguous, threads)?;
    if path != Path::Tiny {
        let kc = blocks_for(kernel, opts, c.shape())?.kc;
        let slices = k_slices::<T>(shape, kc);
        if slices > 1 {
            // Every slice on the path one thread would take for the whole
            // product: slices short enough for the direct path ran 7%
            // slower there than the packed loops on 128×16384×128 f64.
            let slice_path = Path::on_threads(kernel, opts, shape, rows_contiguous, 1)?;
            let operands = (alpha, a, b, beta, c);
            return multiply_k_slices(kernel, operands, opts, (slices, slice_path), threads);
        }
    }
    multiply_on(kernel, (alpha, a, b, beta, c), opts, path)
}

/// Whether an m×k×n product of T under default options is large enough
/// for [`bands`]: one comparison, for the small products' path.
#[inline]
pub(crate) fn may_band<T: Element>((m, k, n): (usize, usize, usize)) -> bool {
    let edge = if std::mem::size_of::<T>() <= 4 {
        PACKED_BANDS_FROM.0
    } else {
        PACKED_BANDS_FROM.1
    };
    m.saturating_mul(k).saturating_mul(n) >= edge * edge * edge
}

/// The threads that run an m×k×n product as bands of C's columns, each
/// band on the direct path, with its driver and the KC one thread takes
/// for the whole product; None where
/// this product does not run so. From the parallel edge cubed (the
/// options', else [`PACKED_BANDS_FROM`]'s) on, under the default kernel
/// and blocks, where every band fits the direct path (B's rows
/// contiguous, the band's C within L2, k unsliced): each thread then
/// reads A and its columns of B where they lie and writes its columns of
/// C, with nothing packed, shared or waited for, where `packed`'s own
/// threads would pack B̃ and A's panels and meet at every block. Each
/// element is the direct path's sum, the one `packed` takes on any
/// thread count, so the bits do not depend on the bands.
pub(crate) fn bands<T: Element>(
    opts: &GemmOptions,
    (m, k, n): (usize, usize, usize),
    rows_contiguous: bool,
) -> Option<(usize, DirectFn<T>, usize)> {
    if opts.cpu.kernel.is_some() || opts.cpu.block_sizes.is_some() {
        return None;
    }
    let edge = opts
        .cpu
        .parallel_from
        .unwrap_or(if std::mem::size_of::<T>() <= 4 {
            PACKED_BANDS_FROM.0
        } else {
            PACKED_BANDS_FROM.1
        }) as u128;
    let least = (edge * edge * edge).max(1);
    let volume = m as u128 * k as u128 * n as u128;
    // The size first: the small products that never band pay no look-up
    // of the thread count.
    if volume < least.max(PACKED_MIN_MNK) {
        return None;
    }
    let threads = crate::cpu::threads(opts);
    if threads < 2 {
        return None;
    }
    let by_volume = usize::try_from(volume * 2 / least).unwrap_or(usize::MAX);
    let members = threads.min(n / PACKED_BAND_MIN_COLS).min(by_volume);
    if members < 2 {
        return None;
    }
    let (direct, _) = plain::direct_for_share::<T>((m, k, n.div_ceil(members)), rows_contiguous)?;
    // The bands step through k with the whole product's KC, which one
    // thread would take for it: a C beyond L2 (or a tuning file) gives
    // it another than a band's own, and the bands' sums must be its.
    let kc = select_kernel::<T>(None).ok()?.default_blocks_for(m, n).kc;
    Some((members, direct, kc))
}

/// C ← α·A·B + β·C in `members` bands of C's columns, each on the direct
/// path (see [`bands`]).
pub(crate) fn on_bands<T: Element>(
    members: usize,
    (direct, kc): (DirectFn<T>, usize),
    (alpha, a, b, beta, c): Operands<'_, T>,
) {
    let k = a.cols();
    let mut parts = Vec::with_capacity(members);
    let mut c_rest = c;
    for (j0, cols) in even_bands(b.cols(), members) {
        let (c_here, c_next) = c_rest.split_at_col(cols);
        parts.push((b.submatrix(0, j0, k, cols), c_here));
        c_rest = c_next;
    }
    let shares = Shares::new(parts);
    for_each_member(members, &|t| {
        if let Some((b, c)) = shares.take(t) {
            direct(alpha, a, b, beta, c, kc);
        }
    });
}

/// The operands of one product C ← α·A·B + β·C.
pub(crate) type Operands<'a, T> = (T, MatRef<'a, T>, MatRef<'a, T>, T, MatMut<'a, T>);

/// How many slices of k an m×k×n product of T runs as, with KC = `kc`
/// (1: k is not sliced): where C is small and k long, splitting C would
/// cut every KC step into tasks of a few tens of µs (or a fork-join per
/// step), so each slice runs the whole sequential product on its own part
/// of k, into its own copy of C. The count depends on the shape and KC
/// only, never on the threads, so that every element's sum runs in the
/// same order on any team.
fn k_slices<T: Element>((m, k, n): (usize, usize, usize), kc: usize) -> usize {
    let elements = m.saturating_mul(n);
    if elements.saturating_mul(std::mem::size_of::<T>()) > SPLIT_K_MAX_C_BYTES
        || elements > SPLIT_K_MAX_C_ELEMENTS
        || elements == 0
        || kc == 0
        // Fewer than two slices' worth of steps, asked without the
        // division below (a tenth of a 2³ product's time).
        || k < (2 * SPLIT_K_MIN_STEPS_PER_SLICE).saturating_mul(kc)
    {
        return 1;
    }
    let most = (k / (SPLIT_K_MIN_STEPS_PER_SLICE * kc)).min(SPLIT_K_MAX_SLICES);
    if most < 2 {
        1
    } else {
        1 << most.ilog2()
    }
}

/// C ← α·A·B + β·C as `slices` products over equal slices of k: slice 0
/// into C (with the caller's β), every other slice into a private m×n
/// buffer (β = 0), each on one thread and on `path`, which the `threads` take in turn as
/// they come free; then the buffers are added into C in slice order, by
/// bands of rows. Each slice's sum and the order of the additions are
/// fixed by the shape, so one thread gives the same bits as any team.
fn multiply_k_slices<T: Element>(
    kernel: &PackedKernel<T>,
    (alpha, a, b, beta, mut c): Operands<'_, T>,
    opts: &GemmOptions,
    (slices, path): (usize, Path),
    threads: usize,
) -> Result<(), Error> {
    let (m, k) = a.shape();
    let n = b.cols();
    let mut partials = vec![T::ZERO; (slices - 1) * m * n];
    let mut targets: Vec<MatMut<'_, T>> = Vec::with_capacity(slices);
    targets.push(c.rb_mut());
    for buffer in partials.chunks_exact_mut(m * n) {
        targets.push(MatMut::from_slice(buffer, m, n)?);
    }
    let targets = Shares::new(targets);
    let next = AtomicUsize::new(0);
    let failure = Mutex::new(None);
    for_each_member(threads, &|_| loop {
        let s = next.fetch_add(1, Ordering::Relaxed);
        let Some(target) = targets.take(s) else {
            return;
        };
        let (p0, p1) = (s * k / slices, (s + 1) * k / slices);
        let (sa, sb) = (
            a.submatrix(0, p0, m, p1 - p0),
            b.submatrix(p0, 0, p1 - p0, n),
        );
        let beta_here = if s == 0 { beta } else { T::ZERO };
        let ran = multiply_on(kernel, (alpha, sa, sb, beta_here, target), opts, path);
        if let Err(e) = ran {
            lock(&failure).get_or_insert(e);
            // The other slices are not worth computing.
            next.store(slices, Ordering::Relaxed);
            return;
        }
    });
    if let Some(e) = lock(&failure).take() {
        return Err(e);
    }
    let rows_per_band = m.div_ceil(threads).max(1);
    let bands = Shares::new(c.into_blocks(rows_per_band, n));
    for_each_member(threads, &|t| {
        if let Some((row0, _, mut rows)) = bands.take(t) {
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
        }
    });
    Ok(())
}

/// One product on the path chosen for it.
fn multiply_on<T: Element>(
    kernel: &PackedKernel<T>,
    (alpha, a, b, beta, mut c): Operands<'_, T>,
    opts: &GemmOptions,
    path: Path,
) -> Result<(), Error> {
    let shape = (a.rows(), a.cols(), b.cols());
    match (path, kernel.direct) {
        (Path::Tiny, _) => {
            // Packing costs more than it saves on products this small.
            c.scale_by(beta);
            tiled::accumulate(alpha, a, b, c, DEFAULT_TILE);
        }
        // The packed loops' KC, so that the sums run in their order.
        (Path::Direct, Some(direct)) => {
            let kc = blocks_for(kernel, opts, c.shape())?.kc;
            direct(alpha, a, b, beta, c, kc)
        }
        (Path::Direct, None) => unreachable!("the direct path is chosen only for direct kernels"),
        (Path::Packed(threads), _) => {
            let blocks = blocks_for(kernel, opts, c.shape())?;
            // On the caller's thread, with a team's helpers when threads
            // > 1: no rayon pool to enter and leave (see `crate::threads`).
            let (m, k, n) = shape;
            let long = m as u128 * k as u128 * n as u128 > INTERRUPTIBLE_MNK;
            if opts.interrupt.is_none() || !long {
                (kernel.gemm)(alpha, a, b, beta, c, &blocks, threads);
                return Ok(());
            }
            // A long product that may be interrupted runs as a sum over
            // panels of k, checked in between: C ← α·A₀B₀ + β·C, then
            // C ← α·AᵢBᵢ + C. The panels are whole KC steps, so each is the
            // driver's own loop cut where it would pass β = 1 anyway.
            let step = INTERRUPT_K_PANEL.div_ceil(blocks.kc).max(1) * blocks.kc;
            for k0 in (0..k).step_by(step) {
                opts.check_interrupt()?;
                let kb = step.min(k - k0);
                let beta_here = if k0 == 0 { beta } else { T::ONE };
                (kernel.gemm)(
                    alpha,
                    a.submatrix(0, k0, m, kb),
                    b.submatrix(k0, 0, kb, n),
                    beta_here,
                    c.rb_mut(),
                    &blocks,
                    threads,
                );
            }
        }
    }
    Ok(())
}

/// The fast algorithms' fused primitive on the CPU:
/// C_k ← β·C_k + γ_k·α·(Σ wᵢAᵢ)(Σ vⱼBⱼ) for every destination (γ_k, C_k),
/// with the sums formed while packing and each tile added into every
/// destination; β = 0 never reads C_k. All A terms are m×k, all B terms
/// k×n, all destinations m×n.
///
/// # Safety
/// No destination overlaps another destination or any term, and nothing
/// else touches the destinations during the call.
pub(crate) unsafe fn multiply_fused<T: Element>(
    alpha: T,
    a: &[(T, MatRef<'_, T>)],
    b: &[(T, MatRef<'_, T>)],
    beta: T,
    dests: &mut [(T, MatMut<'_, T>)],
    opts: &GemmOptions,
) -> Result<(), Error> {
    opts.check_interrupt()?;
    let kernel = select_kernel::<T>(opts.cpu.kernel)?;
    let (m, k) = a[0].1.shape();
    let n = b[0].1.cols();
    debug_assert!(a.iter().all(|(_, x)| x.shape() == (m, k)));
    debug_assert!(b.iter().all(|(_, x)| x.shape() == (k, n)));
    debug_assert!(dests.iter().all(|(_, c)| c.shape() == (m, n)));
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        for (_, c) in dests.iter_mut() {
            c.scale_by(beta);
        }
        return Ok(());
    }
    let blocks = blocks_for(kernel, opts, (m, n))?;
    let threads = threads_for::<T>(opts, m as u128 * n as u128 * k as u128);
    let raw: Vec<driver::Dest<T>> = dests
        .iter_mut()
        .map(|(gamma, c)| driver::Dest {
            gamma: *gamma,
            ptr: c.as_mut_ptr(),
            rs: c.row_stride() as isize,
            cs: c.col_stride() as isize,
        })
        .collect();
    let product = driver::Fused {
        alpha,
        a,
        b,
        beta,
        dests: &raw,
    };
    // SAFETY: the destinations are exclusive views (borrowed mutably for
    // the call) that, per this function's contract, overlap nothing else.
    let run = || unsafe { (kernel.fused)(product, &blocks, threads) };
    if threads == 1 {
        run();
        return Ok(());
    }
    run_in_pool(threads, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_is_sliced_by_the_shape_alone() {
        let kc = 192;
        // Small C, long k: powers of two up to the cap, each slice at
        // least SPLIT_K_MIN_STEPS_PER_SLICE KC steps deep.
        assert_eq!(k_slices::<f64>((64, 8192, 48), kc), 8);
        assert_eq!(k_slices::<f64>((64, 4096, 64), kc), 4);
        assert_eq!(k_slices::<f32>((1, 1 << 20, 1), kc), SPLIT_K_MAX_SLICES);
        for k in [1, 1535, 8 * kc * SPLIT_K_MIN_STEPS_PER_SLICE - 1, 100_000] {
            let s = k_slices::<f32>((16, k, 16), kc);
            assert!(s.is_power_of_two() && s <= SPLIT_K_MAX_SLICES, "{k}: {s}");
            assert!(
                s == 1 || k / s >= SPLIT_K_MIN_STEPS_PER_SLICE * kc,
                "{k}: {s}"
            );
        }
        // Too short, C too large, or nothing to compute: one slice.
        assert_eq!(k_slices::<f64>((64, 1000, 64), kc), 1);
        assert_eq!(k_slices::<f64>((512, 1 << 16, 512), kc), 1);
        assert_eq!(k_slices::<f32>((300, 1 << 16, 300), kc), 1);
        assert_eq!(k_slices::<f32>((0, 1 << 16, 8), kc), 1);
        assert_eq!(k_slices::<f32>((8, 1 << 16, 8), 0), 1);
    }
}
