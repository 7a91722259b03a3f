//! `parallel`: the OpenMP `parallel for collapse(2)` of seed 002 §6-7 in
//! rayon. Blocks of C are independent tasks; each runs the `tiled` block
//! loop, so the threads never write the same element.

use rayon::prelude::*;

use crate::algo::tiled;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::threads::run_in_pool;
use crate::tunables::PARALLEL_MIN_MNK;

/// C += α·A·B with blocks of C spread over `threads` workers.
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
    // With fewer tiles than workers some would idle: cut rows finer, which
    // keeps each task's tile of B as large as before.
    let tiles = m.div_ceil(tile) * n.div_ceil(tile);
    let block_rows = if tiles < 2 * threads {
        let row_blocks_wanted = (2 * threads).div_ceil(n.div_ceil(tile));
        m.div_ceil(row_blocks_wanted).max(1)
    } else {
        tile
    };
    let blocks = c.into_blocks(block_rows, tile);
    run_in_pool(threads, || {
        blocks.into_par_iter().for_each(|(row0, col0, block)| {
            tiled::accumulate_block(alpha, a, b, row0, col0, block, tile);
        })
    })
}
