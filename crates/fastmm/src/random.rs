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
        Matrix::try_from_fn(rows, cols, |_, _| T::from_f64(rng.random_range(-1.0..1.0)))
    }
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
    Matrix::try_from_fn(rows, cols, |_, _| {
        let magnitude = 10f64.powf(rng.random_range(-decades..decades));
        T::from_f64(if rng.random_bool(0.5) {
            magnitude
        } else {
            -magnitude
        })
    })
}
