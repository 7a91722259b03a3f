//! Conversions between fastmm's matrices and those of other crates, each
//! behind its own cargo feature: `ndarray`, `nalgebra` and `faer`.
//!
//! Views convert both ways without copying whenever the other crate can
//! describe the same memory: fastmm's [`MatRef`](crate::MatRef) and
//! [`MatMut`](crate::MatMut) take any non-negative strides, so views of
//! ndarray's and faer's arrays (row- or column-major, sliced, transposed)
//! and nalgebra's column-major matrices become fastmm views as they are;
//! a negative stride (a reversed axis) is an [`Error::Unsupported`].
//! Owned matrices move without copying where the layouts agree (a
//! row-major [`Matrix`](crate::Matrix) and a standard-layout ndarray
//! `Array2`); nalgebra's and faer's owned matrices are column-major, so
//! they are copied into and out of the row-major `Matrix`, and their views
//! are the zero-copy path:
//!
//! ```
//! # #[cfg(feature = "ndarray")] {
//! use fastmm::{matmul_with, GemmOptions, Matrix};
//! let a = ndarray::Array2::<f64>::eye(3);
//! let b = ndarray::Array2::<f64>::ones((3, 2));
//! // Views in, without copying; the product out, moved into an Array2.
//! let c: Matrix<f64> = matmul_with(a.view().try_into()?, b.view().try_into()?, &GemmOptions::default())?;
//! let c: ndarray::Array2<f64> = c.into();
//! assert_eq!(c, b);
//! # }
//! # Ok::<(), fastmm::Error>(())
//! ```
//!
//! [`Error::Unsupported`]: crate::Error::Unsupported

#[cfg(feature = "faer")]
mod faer;
#[cfg(feature = "nalgebra")]
mod nalgebra;
#[cfg(feature = "ndarray")]
mod ndarray;

#[cfg(feature = "nalgebra")]
pub use self::nalgebra::{NalgebraView, NalgebraViewMut};

/// Converts signed strides to fastmm's, or says which is negative.
#[cfg(any(feature = "ndarray", feature = "faer"))]
fn non_negative(
    row_stride: isize,
    col_stride: isize,
    from: &'static str,
) -> Result<(usize, usize), crate::Error> {
    match (usize::try_from(row_stride), usize::try_from(col_stride)) {
        (Ok(r), Ok(c)) => Ok((r, c)),
        _ => Err(crate::Error::Unsupported {
            algorithm: "a fastmm view",
            what: format!(
                "a {from} view with strides ({row_stride}, {col_stride}): a negative stride (a reversed axis) needs a copy first"
            ),
        }),
    }
}

/// A view's strides for export: 0 along a dimension of length 0 or 1,
/// where a stride is never used (and may be any value in a fastmm view),
/// so that every exported stride is at most the view's extent and fits
/// `isize`.
#[cfg(any(feature = "ndarray", feature = "nalgebra", feature = "faer"))]
fn exported_strides<T: crate::Element>(view: &crate::MatRef<'_, T>) -> (usize, usize) {
    let used = |len: usize, stride: usize| if len > 1 { stride } else { 0 };
    (
        used(view.rows(), view.row_stride()),
        used(view.cols(), view.col_stride()),
    )
}
