//! Reproducible random matrices: the same seed gives the same matrices on
//! every machine and every run (PCG64-MCG, a fixed, documented generator).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::element::Element;
use crate::error::Error;
use crate::matrix::Matrix;

/// The generator behind every seeded matrix.
pub type SeededRng = Pcg64Mcg;

/// A generator seeded with `seed`.
pub fn seeded_rng(seed: u64) -> SeededRng {
    Pcg64Mcg::seed_from_u64(seed)
}

/// A rows×cols matrix of test data: floats uniform in [-1, 1), integers
/// uniform in -9..=9 (the seeds' `rand() % 10`, made signed). These small
/// integers keep products of moderate k free of overflow, so they match an
/// exact mathematical product as well as the wrapping one.
///
/// # Panics
/// If rows·cols overflows `usize`; [`try_random_matrix`] returns an
/// error instead.
pub fn random_matrix<T: Element>(rows: usize, cols: usize, rng: &mut impl Rng) -> Matrix<T> {
    try_random_matrix(rows, cols, rng).unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`random_matrix`], with overflow reported as an error.
pub fn try_random_matrix<T: Element>(
    rows: usize,
    cols: usize,
    rng: &mut impl Rng,
) -> Result<Matrix<T>, Error> {
    if T::DTYPE.is_integer() {
        Matrix::try_from_fn(rows, cols, |_, _| T::from_i64(rng.random_range(-9..=9)))
    } else {
        Matrix::try_from_fn(rows, cols, |_, _| uniform_float(rng))
    }
}

/// A float uniform in [−1, 1): one draw of the generator.
fn uniform_float<T: Element>(rng: &mut impl Rng) -> T {
    T::from_f64(rng.random_range(-1.0..1.0))
}

/// ±10^u, u uniform in [−decades, decades), the sign at random: two draws.
fn wide_float<T: Element>(rng: &mut impl Rng, decades: f64) -> T {
    let magnitude = 10f64.powf(rng.random_range(-decades..decades));
    T::from_f64(if rng.random_bool(0.5) {
        magnitude
    } else {
        -magnitude
    })
}

/// Like [`random_matrix`], but integers span the whole range of the type, so
/// products wrap and exercise the modular arithmetic.
///
/// # Panics
/// If rows·cols overflows `usize`; [`try_random_matrix_full_range`]
/// returns an error instead.
pub fn random_matrix_full_range<T: Element>(
    rows: usize,
    cols: usize,
    rng: &mut impl Rng,
) -> Matrix<T> {
    try_random_matrix_full_range(rows, cols, rng).unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`random_matrix_full_range`], with overflow reported as an error.
pub fn try_random_matrix_full_range<T: Element>(
    rows: usize,
    cols: usize,
    rng: &mut impl Rng,
) -> Result<Matrix<T>, Error> {
    if T::DTYPE.is_integer() {
        Matrix::try_from_fn(rows, cols, |_, _| {
            T::wrap_from_i128(rng.random::<i64>() as i128)
        })
    } else {
        try_random_matrix(rows, cols, rng)
    }
}

/// Like [`random_matrix`], but floats span `decades` decades each way:
/// ±10^u with u uniform in [−decades, decades) and a random sign, so that
/// entries of one row or column differ by up to 10^(2·decades); integers
/// as [`random_matrix`]. The hard inputs of scaled products (the
/// `emulated` algorithm's certificate).
pub fn try_random_matrix_wide<T: Element>(
    rows: usize,
    cols: usize,
    decades: f64,
    rng: &mut impl Rng,
) -> Result<Matrix<T>, Error> {
    if T::DTYPE.is_integer() || decades <= 0.0 {
        return try_random_matrix(rows, cols, rng);
    }
    Matrix::try_from_fn(rows, cols, |_, _| wide_float(rng, decades))
}

/// [`try_random_matrix_wide`] from the seeded generator, made on every
/// thread: the same matrix, and `rng` left where that leaves it. A float
/// takes a fixed number of draws (one uniform, two wide), so each chunk
/// of elements starts from a copy of the generator advanced past the
/// draws of the elements before it (PCG jumps ahead in O(log n) steps);
/// integers, whose draws vary in number, are made in order.
///
/// # Errors
/// [`Error::SizeOverflow`] when rows·cols overflows `usize`.
pub fn try_seeded_matrix_wide<T: Element>(
    rows: usize,
    cols: usize,
    decades: f64,
    rng: &mut SeededRng,
) -> Result<Matrix<T>, Error> {
    if T::DTYPE.is_integer() {
        return try_random_matrix_wide(rows, cols, decades, rng);
    }
    let wide = decades > 0.0;
    let draws: u128 = if wide { 2 } else { 1 };
    let start = rng.clone();
    let matrix = Matrix::try_from_chunks(rows, cols, |first, chunk| {
        let mut r = start.clone();
        r.advance(first as u128 * draws);
        for x in chunk {
            *x = if wide {
                wide_float(&mut r, decades)
            } else {
                uniform_float(&mut r)
            };
        }
    })?;
    rng.advance((rows * cols) as u128 * draws);
    Ok(matrix)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel generator gives the sequential one's matrices to the
    /// bit, across chunk boundaries, and leaves the generator where the
    /// sequential one does.
    #[test]
    fn seeded_matrices_made_in_parallel_are_the_sequential_ones() {
        for decades in [0.0, 3.0] {
            for (rows, cols) in [(0, 5), (1, 1), (3, 7), (257, 300), (1, 70_000)] {
                let (mut s, mut p) = (seeded_rng(11), seeded_rng(11));
                let a: Matrix<f64> = try_random_matrix_wide(rows, cols, decades, &mut s).unwrap();
                let b: Matrix<f64> = try_seeded_matrix_wide(rows, cols, decades, &mut p).unwrap();
                assert_eq!(a.shape(), b.shape());
                let same = a
                    .as_slice()
                    .iter()
                    .zip(b.as_slice())
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{rows}×{cols}, {decades} decades");
                assert_eq!(s.random::<u64>(), p.random::<u64>());
                let c: Matrix<f32> = try_random_matrix_wide(rows, cols, decades, &mut s).unwrap();
                let d: Matrix<f32> = try_seeded_matrix_wide(rows, cols, decades, &mut p).unwrap();
                assert_eq!(c.as_slice(), d.as_slice());
            }
        }
        let (mut s, mut p) = (seeded_rng(3), seeded_rng(3));
        let a: Matrix<i32> = try_random_matrix_wide(40, 30, 0.0, &mut s).unwrap();
        let b: Matrix<i32> = try_seeded_matrix_wide(40, 30, 0.0, &mut p).unwrap();
        assert_eq!(a.as_slice(), b.as_slice());
    }
}
