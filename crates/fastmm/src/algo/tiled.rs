//! `tiled`: loop tiling of seed 002 §6.3-6.4. C is cut into tile×tile
//! blocks; each block accumulates products of tile×tile blocks of A and B
//! with the i-k-j loop, so the block of B it streams stays in cache.

use crate::algo::ikj;
use crate::element::Element;
use crate::matrix::{MatMut, MatRef};

/// C += α·A·B over tiles of edge `tile`.
pub fn accumulate<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatMut<'_, T>,
    tile: usize,
) {
    for (row0, col0, block) in c.into_blocks(tile, tile) {
        accumulate_block(alpha, a, b, row0, col0, block, tile);
    }
}

/// C_block += α·A[row0.., :]·B[:, col0..], where C_block is the block of C at
/// (row0, col0), sweeping the shared dimension k in steps of `tile`.
pub(crate) fn accumulate_block<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    row0: usize,
    col0: usize,
    mut c_block: MatMut<'_, T>,
    tile: usize,
) {
    let (rows, cols) = c_block.shape();
    let k = a.cols();
    for p0 in (0..k).step_by(tile) {
        let depth = tile.min(k - p0);
        ikj::accumulate(
            alpha,
            a.submatrix(row0, p0, rows, depth),
            b.submatrix(p0, col0, depth, cols),
            c_block.rb_mut(),
        );
    }
}
