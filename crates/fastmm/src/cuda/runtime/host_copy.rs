//! Copies between a host matrix (any view: strided, transposed, mapped
//! from a file) and a compact row-major staging buffer, in parallel bands
//! over the CPU's threads: the host side of every pipeline that streams
//! host matrices through page-locked buffers to and from the GPUs.

use rayon::prelude::*;

use crate::element::Element;
use crate::matrix::{MatMut, MatRef};

/// Host copies into or out of staging run in parallel bands of about this
/// many bytes.
const BAND_BYTES: usize = 1 << 20;

/// Rows per parallel band of a host copy.
fn band_rows<T>(cols: usize) -> usize {
    (BAND_BYTES / (cols.max(1) * std::mem::size_of::<T>())).max(1)
}

/// `view` into `out`, row-major.
pub(crate) fn gather<T: Element>(view: MatRef<'_, T>, out: &mut [T]) {
    let cols = view.cols();
    let band = band_rows::<T>(cols);
    out.par_chunks_mut(band * cols)
        .enumerate()
        .for_each(|(index, rows)| {
            for (r, row) in rows.chunks_exact_mut(cols).enumerate() {
                let i = index * band + r;
                match view.row(i) {
                    Some(src) => row.copy_from_slice(src),
                    None => {
                        for (j, x) in row.iter_mut().enumerate() {
                            *x = view.get(i, j);
                        }
                    }
                }
            }
        });
}

/// `dst` ← `src` (row-major) when β = 0, else β·`dst` + `src`.
pub(crate) fn scatter<T: Element>(src: &[T], dst: MatMut<'_, T>, beta: T) {
    let cols = dst.cols();
    let band = band_rows::<T>(cols);
    let mut bands = Vec::with_capacity(dst.rows().div_ceil(band));
    let mut rest = dst;
    while rest.rows() > band {
        let (head, tail) = rest.split_at_row(band);
        bands.push(head);
        rest = tail;
    }
    bands.push(rest);
    bands
        .into_par_iter()
        .zip(src.par_chunks(band * cols))
        .for_each(|(mut dst, src)| {
            for (i, src) in src.chunks_exact(cols).enumerate() {
                if beta == T::ZERO {
                    if let Some(row) = dst.row_mut(i) {
                        row.copy_from_slice(src);
                        continue;
                    }
                }
                for (j, &x) in src.iter().enumerate() {
                    let value = if beta == T::ZERO {
                        x
                    } else {
                        beta.mul(dst.get(i, j)).add(x)
                    };
                    dst.set(i, j, value);
                }
            }
        });
}
