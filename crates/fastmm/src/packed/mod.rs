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

pub mod blocking;
pub mod dispatch;
pub mod driver;
pub mod kernel;
pub mod kernels;
pub mod packing;
pub(crate) mod workspace;

pub use blocking::BlockSizes;
pub use dispatch::{default_cpu_kernel, select_kernel, CpuKernel, PackedKernel};

use crate::algo::GemmOptions;
use crate::algo::{self, tiled};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::threads::run_in_pool;
use crate::tunables::{DEFAULT_TILE, PACKED_MIN_MNK, PACKED_PARALLEL_MIN_MNK};

/// C ← α·A·B + β·C with the packed algorithm (β = 0 never reads C).
pub fn multiply<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    let kernel = select_kernel::<T>(opts.cpu_kernel)?;
    let mnk = c.rows() as u128 * c.cols() as u128 * a.cols() as u128;
    let forced = opts.cpu_kernel.is_some() || opts.block_sizes.is_some();
    if mnk < PACKED_MIN_MNK && !forced {
        // Packing costs more than it saves on products this small. A forced
        // kernel or block size always runs as asked (the kernel tests rely
        // on it).
        algo::apply_beta(beta, c.rb_mut());
        tiled::accumulate(alpha, a, b, c, DEFAULT_TILE);
        return Ok(());
    }
    let blocks = opts
        .block_sizes
        .unwrap_or_else(|| kernel.default_blocks_for(c.rows(), c.cols()));
    let threads = if mnk < PACKED_PARALLEL_MIN_MNK {
        1
    } else {
        opts.effective_threads()
    };
    if threads == 1 {
        (kernel.gemm)(alpha, a, b, beta, c, &blocks, 1);
        return Ok(());
    }
    run_in_pool(threads, || {
        (kernel.gemm)(alpha, a, b, beta, c, &blocks, threads)
    })
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
            algo::apply_beta(beta, c.rb_mut());
        }
        return Ok(());
    }
    let blocks = opts
        .block_sizes
        .unwrap_or_else(|| kernel.default_blocks_for(m, n));
    let mnk = m as u128 * n as u128 * k as u128;
    let threads = if mnk < PACKED_PARALLEL_MIN_MNK {
        1
    } else {
        opts.effective_threads()
    };
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
