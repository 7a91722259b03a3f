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
pub(crate) mod workspace;

pub(crate) use dispatch::{select_kernel, PackedKernel};

use crate::config::Config;
use crate::cpu::tiled;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{BlockSizes, GemmOptions};
use crate::threads::run_in_pool;
use crate::tunables::{
    DEFAULT_TILE, INTERRUPTIBLE_MNK, INTERRUPT_K_PANEL, PACKED_DIRECT_MAX_MNK, PACKED_MIN_MNK,
    PACKED_PARALLEL_FROM,
};

/// The cache blocks `packed` runs an m×n C with: the option, else
/// `FASTMM_BLOCKS`, else the kernel's default (tuned or analytical).
pub(crate) fn blocks_for<T: Element>(
    kernel: &PackedKernel<T>,
    opts: &GemmOptions,
    (m, n): (usize, usize),
) -> Result<BlockSizes, Error> {
    Ok(match opts.block_sizes.or(Config::get().blocks()?) {
        Some(blocks) => blocks,
        None => kernel.default_blocks_for(m, n),
    })
}

/// The edge from whose cube `packed` runs products of T on several
/// threads: the options', else the tuning file's, else the built-in
/// [`PACKED_PARALLEL_FROM`].
pub(crate) fn parallel_edge<T: Element>(opts: &GemmOptions) -> usize {
    opts.parallel_from
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
/// costs more than it saves.
pub(crate) fn threads_for<T: Element>(opts: &GemmOptions, mnk: u128) -> usize {
    let edge = parallel_edge::<T>(opts) as u128;
    if mnk < edge * edge * edge {
        1
    } else {
        crate::cpu::threads(opts)
    }
}

/// How `packed` runs a product: the choice by size, made in one place for
/// the product and its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// Below [`PACKED_MIN_MNK`]: the unpacked `tiled` loops.
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
        let mnk = m as u128 * n as u128 * k as u128;
        let blocks_forced = opts.block_sizes.is_some() || Config::get().blocks()?.is_some();
        let forced = blocks_forced || opts.cpu_kernel.is_some();
        let threads = threads_for::<T>(opts, mnk);
        Ok(if mnk < PACKED_MIN_MNK && !forced {
            Path::Tiny
        } else if kernel.direct.is_some()
            && threads == 1
            && mnk <= PACKED_DIRECT_MAX_MNK
            && rows_contiguous
            && !blocks_forced
        {
            Path::Direct
        } else {
            Path::Packed(threads)
        })
    }
}

/// C ← α·A·B + β·C with the packed algorithm (β = 0 never reads C).
pub(crate) fn multiply<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    opts.check_interrupt()?;
    let kernel = select_kernel::<T>(opts.cpu_kernel)?;
    let shape = (a.rows(), a.cols(), b.cols());
    let rows_contiguous = b.col_stride() == 1 || b.cols() == 1;
    match (
        Path::of(kernel, opts, shape, rows_contiguous)?,
        kernel.direct,
    ) {
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
    let kernel = select_kernel::<T>(opts.cpu_kernel)?;
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
    // SAFETY: the destinations are exclusive views (borrowed mutably for
    // the call) that, per this function's contract, overlap nothing else.
    let run = || unsafe { (kernel.fused)(alpha, a, b, beta, &raw, &blocks, threads) };
    if threads == 1 {
        run();
        return Ok(());
    }
    run_in_pool(threads, run)
}
