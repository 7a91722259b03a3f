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
    let blocks = opts.block_sizes.unwrap_or_else(|| kernel.default_blocks());
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
