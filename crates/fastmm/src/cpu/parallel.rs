//! `parallel`: the OpenMP `parallel for` of seed 002 §6-7 in rayon. C is cut
//! into horizontal slabs, one or more per thread, and each slab runs the
//! `tiled` loops, so threads never write the same element and each streams
//! its own rows of A and C while sharing reads of B.

use rayon::prelude::*;

use crate::cpu::tiled;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::threads::run_in_pool;
use crate::tunables::{PARALLEL_MIN_MNK, PARALLEL_SLABS_PER_THREAD};

/// C += α·A·B with slabs of C rows spread over `threads` workers.
pub fn accumulate<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatMut<'_, T>,
    tile: usize,
    threads: usize,
) -> Result<(), Error> {
    let (m, n) = c.shape();
    if threads == 1 || (m as u128 * n as u128 * a.cols() as u128) < PARALLEL_MIN_MNK {
        tiled::accumulate(alpha, a, b, c, tile);
        return Ok(());
    }
    let slab_rows = m.div_ceil(threads * PARALLEL_SLABS_PER_THREAD).max(1);
    let slabs = c.into_blocks(slab_rows, n.max(1));
    run_in_pool(threads, || {
        slabs.into_par_iter().for_each(|(row0, _, slab)| {
            tiled::accumulate(
                alpha,
                a.submatrix(row0, 0, slab.rows(), a.cols()),
                b,
                slab,
                tile,
            );
        })
    })
}
