//! `tiled`: loop tiling of seed 002 §6.3-6.4. C is cut into tile×tile
//! blocks; each block accumulates products of tile×tile blocks of A and B
//! in i-k-j order, so the block of B it streams stays in cache.
//!
//! One step beyond the seed: rows of C are taken four at a time
//! (unroll-and-jam of the i loop), so each element of B loaded from cache
//! feeds four multiply-adds instead of one. That cuts the cache traffic per
//! flop by four, which is what lets two threads of `parallel` run without
//! starving each other for L3 bandwidth.

use crate::cpu::ikj;
use crate::element::Element;
use crate::matrix::{MatMut, MatRef};

/// Rows of C updated together by one pass over a row of B.
const ROWS_PER_PASS: usize = 4;

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
    let contiguous = b.col_stride() == 1 && c_block.col_stride() == 1;
    for p0 in (0..k).step_by(tile) {
        let depth = tile.min(k - p0);
        let a_tile = a.submatrix(row0, p0, rows, depth);
        let b_tile = b.submatrix(p0, col0, depth, cols);
        let mut done = 0;
        if contiguous {
            while done + ROWS_PER_PASS <= rows {
                let c_rows = c_block.rb_mut().submatrix(done, 0, ROWS_PER_PASS, cols);
                accumulate_four_rows(
                    alpha,
                    a_tile.submatrix(done, 0, ROWS_PER_PASS, depth),
                    b_tile,
                    c_rows,
                );
                done += ROWS_PER_PASS;
            }
        }
        if done < rows {
            let rest = rows - done;
            ikj::accumulate(
                alpha,
                a_tile.submatrix(done, 0, rest, depth),
                b_tile,
                c_block.rb_mut().submatrix(done, 0, rest, cols),
            );
        }
    }
}

/// Four rows of C += α·(four rows of A)·B, with unit column strides.
fn accumulate_four_rows<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatMut<'_, T>,
) {
    let cols = c.cols();
    let (mut top, mut bottom) = c.split_at_row(2);
    let (mut r0, mut r1) = top.rb_mut().split_at_row(1);
    let (mut r2, mut r3) = bottom.rb_mut().split_at_row(1);
    let unit = "four_rows needs unit column stride";
    let c0 = &mut r0.row_mut(0).expect(unit)[..cols];
    let c1 = &mut r1.row_mut(0).expect(unit)[..cols];
    let c2 = &mut r2.row_mut(0).expect(unit)[..cols];
    let c3 = &mut r3.row_mut(0).expect(unit)[..cols];
    for p in 0..a.cols() {
        let b_row = &b.row(p).expect(unit)[..cols];
        // Four plain reads: `[0, 1, 2, 3].map(..)` was left as a call per k
        // step (`try_map`): a quarter of a 16³ product's time in a profile.
        let s0 = alpha.mul(a.get(0, p));
        let s1 = alpha.mul(a.get(1, p));
        let s2 = alpha.mul(a.get(2, p));
        let s3 = alpha.mul(a.get(3, p));
        for j in 0..cols {
            let bj = b_row[j];
            c0[j] = c0[j].add_product(s0, bj);
            c1[j] = c1[j].add_product(s1, bj);
            c2[j] = c2[j].add_product(s2, bj);
            c3[j] = c3[j].add_product(s3, bj);
        }
    }
}
