//! The public entry points and the boundary where every input is normalised.
//!
//! Everything the algorithms should not have to think about is settled here,
//! once: shape checks, option checks, β (including "β = 0 never reads C"),
//! empty products, α = 0, and orientation — a column-major C is turned into
//! the row-major problem Cᵀ = Bᵀ·Aᵀ by swapping views, so the algorithms
//! always stream rows of C.

use crate::algo::{self, GemmOptions};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef, Matrix};

/// General matrix multiply: **C ← α·A·B + β·C**.
///
/// A is m×k, B is k×n, C is m×n; any of m, n, k may be 0. All three may be
/// arbitrary strided views (transposes included). When β = 0, C is
/// overwritten without being read, so NaN or garbage in C never reaches the
/// result. Integer types wrap (see [`crate::element`]).
///
/// # Errors
/// [`Error::DimensionMismatch`] when A's columns differ from B's rows,
/// [`Error::OutputShape`] when C is not m×n, [`Error::InvalidOption`] for a
/// zero tile or thread count.
pub fn gemm<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    opts.validate()?;
    check_shapes(a, b, c.shape())?;
    let mut c = c;
    if c.rows() == 0 || c.cols() == 0 {
        return Ok(());
    }
    if a.cols() == 0 || alpha == T::ZERO {
        algo::apply_beta(beta, c.rb_mut());
        return Ok(());
    }
    let column_major = c.col_stride() != 1 && c.row_stride() == 1;
    if column_major {
        algo::multiply(alpha, b.t(), a.t(), beta, c.t(), opts)
    } else {
        algo::multiply(alpha, a, b, beta, c, opts)
    }
}

/// C = A·B with the automatic algorithm, in a new matrix.
pub fn matmul<T: Element>(a: &Matrix<T>, b: &Matrix<T>) -> Result<Matrix<T>, Error> {
    matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::default())
}

/// C = A·B for any views, with explicit options, in a new matrix.
pub fn matmul_with<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    opts: &GemmOptions,
) -> Result<Matrix<T>, Error> {
    check_shapes(a, b, (a.rows(), b.cols()))?;
    let mut c = Matrix::try_filled(a.rows(), b.cols(), T::ZERO)?;
    gemm(T::ONE, a, b, T::ZERO, c.as_mut(), opts)?;
    Ok(c)
}

fn check_shapes<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c_shape: (usize, usize),
) -> Result<(), Error> {
    if a.cols() != b.rows() {
        return Err(Error::DimensionMismatch {
            a: a.shape(),
            b: b.shape(),
        });
    }
    let expected = (a.rows(), b.cols());
    if c_shape != expected {
        return Err(Error::OutputShape {
            expected,
            got: c_shape,
        });
    }
    Ok(())
}
