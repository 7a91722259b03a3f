//! faer: `faer::MatRef`/`MatMut` ↔ [`MatRef`]/[`MatMut`] without copying
//! (non-negative strides); `faer::Mat` ↔ [`Matrix`] copy, because one is
//! column-major and the other row-major.

use super::{exported_strides, non_negative};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef, Matrix};

impl<'a, T: Element> TryFrom<faer::MatRef<'a, T>> for MatRef<'a, T> {
    type Error = Error;

    /// The same elements, no copy; a negative stride is an error.
    fn try_from(view: faer::MatRef<'a, T>) -> Result<Self, Error> {
        let (rs, cs) = non_negative(view.row_stride(), view.col_stride(), "faer")?;
        // SAFETY: faer guarantees every (i, j) of the view is readable at
        // ptr + i·rs + j·cs for 'a, and unwritten while it is borrowed.
        Ok(unsafe { MatRef::from_raw_parts(view.as_ptr(), view.nrows(), view.ncols(), rs, cs) })
    }
}

impl<'a, T: Element> TryFrom<faer::MatMut<'a, T>> for MatMut<'a, T> {
    type Error = Error;

    /// The same elements, no copy; a negative stride is an error.
    fn try_from(view: faer::MatMut<'a, T>) -> Result<Self, Error> {
        let (rs, cs) = non_negative(view.row_stride(), view.col_stride(), "faer")?;
        let (rows, cols) = (view.nrows(), view.ncols());
        let ptr = view.as_ptr_mut();
        // SAFETY: faer guarantees the elements of a mutable view are
        // distinct, writable for 'a at ptr + i·rs + j·cs, and reached by
        // nothing else while it is borrowed.
        Ok(unsafe { MatMut::from_raw_parts(ptr, rows, cols, rs, cs) })
    }
}

impl<'a, T: Element> From<MatRef<'a, T>> for faer::MatRef<'a, T> {
    /// The same elements, no copy.
    fn from(view: MatRef<'a, T>) -> Self {
        // Exported strides are at most the view's extent, a slice's.
        let (rs, cs) = exported_strides(&view);
        let (rs, cs) = (rs as isize, cs as isize);
        // SAFETY: the MatRef guarantees every element is readable for 'a
        // at these strides, which is what faer asks.
        unsafe { faer::MatRef::from_raw_parts(view.as_ptr(), view.rows(), view.cols(), rs, cs) }
    }
}

impl<'a, T: Element> From<MatMut<'a, T>> for faer::MatMut<'a, T> {
    /// The same elements, no copy.
    fn from(mut view: MatMut<'a, T>) -> Self {
        let (rs, cs) = exported_strides(&view.rb());
        let (rs, cs) = (rs as isize, cs as isize);
        let (rows, cols) = (view.rows(), view.cols());
        // SAFETY: the MatMut guarantees distinct elements (injective
        // strides), writable for 'a and reached by no other path.
        unsafe { faer::MatMut::from_raw_parts_mut(view.as_mut_ptr(), rows, cols, rs, cs) }
    }
}

impl<T: Element> From<&Matrix<T>> for faer::Mat<T> {
    /// A column-major copy.
    fn from(m: &Matrix<T>) -> Self {
        faer::Mat::from_fn(m.rows(), m.cols(), |i, j| m.get(i, j))
    }
}

impl<T: Element> From<&faer::Mat<T>> for Matrix<T> {
    /// A row-major copy.
    fn from(m: &faer::Mat<T>) -> Self {
        Matrix::from_fn(m.nrows(), m.ncols(), |i, j| m[(i, j)])
    }
}
