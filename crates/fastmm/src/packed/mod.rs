//! `packed`: a BLIS-style GEMM. Five loops of cache blocking
//! ([`blocking`], [`driver`]) around a register-blocked microkernel
//! ([`kernel`], [`kernels`]), fed by packed, aligned panels of A and B
//! ([`packing`], [`workspace`]), with the kernel chosen once from the CPU's
//! features ([`dispatch`]).
//!
//! Threads split C into slabs along its larger dimension, in whole
//! micro-tiles; each thread runs the serial driver on its slab with its own
//! packing buffers. One thread, or a small product, runs on the caller's
//! thread with no pool.

pub mod blocking;
pub mod dispatch;
pub mod driver;
pub mod kernel;
pub mod kernels;
pub mod packing;
mod workspace;

use rayon::prelude::*;

pub use blocking::BlockSizes;
pub use dispatch::{default_cpu_kernel, select_kernel, CpuKernel, PackedKernel};

use crate::algo::GemmOptions;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::threads::run_in_pool;
use crate::tunables::PACKED_PARALLEL_MIN_MNK;

/// C ← α·A·B + β·C with the packed algorithm (β = 0 never reads C).
pub fn multiply<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    let kernel = select_kernel::<T>(opts.cpu_kernel)?;
    let blocks = opts.block_sizes.unwrap_or_else(|| kernel.default_blocks());
    let (m, n) = c.shape();
    let k = a.cols();
    let threads = if (m as u128 * n as u128 * k as u128) < PACKED_PARALLEL_MIN_MNK {
        1
    } else {
        opts.effective_threads()
    };
    if threads == 1 {
        (kernel.gemm)(alpha, a, b, beta, c, &blocks);
        return Ok(());
    }
    // Slabs along the larger of m and n, in whole micro-tiles.
    let split_columns = n >= m;
    let (extent, unit) = if split_columns {
        (n, kernel.nr)
    } else {
        (m, kernel.mr)
    };
    let slab = extent.div_ceil(threads).div_ceil(unit) * unit;
    let slabs = if split_columns {
        c.into_blocks(m, slab)
    } else {
        c.into_blocks(slab, n)
    };
    run_in_pool(threads, || {
        slabs.into_par_iter().for_each(|(row0, col0, slab)| {
            let (rows, cols) = slab.shape();
            (kernel.gemm)(
                alpha,
                a.submatrix(row0, 0, rows, k),
                b.submatrix(0, col0, k, cols),
                beta,
                slab,
                &blocks,
            );
        })
    })
}
