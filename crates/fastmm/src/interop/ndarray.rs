//! ndarray: `ArrayView2`/`ArrayViewMut2` ↔ [`MatRef`]/[`MatMut`] without
//! copying (non-negative strides), `Array2` ↔ [`Matrix`] moving the
//! buffer when it is in standard (row-major, contiguous) layout.

use ndarray::{Array2, ArrayView2, ArrayViewMut2, ShapeBuilder};

use super::{exported_strides, non_negative};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef, Matrix};

impl<'a, T: Element> TryFrom<ArrayView2<'a, T>> for MatRef<'a, T> {
    type Error = Error;

    /// The same elements, no copy; a negative stride is an error.
    fn try_from(view: ArrayView2<'a, T>) -> Result<Self, Error> {
        let (rows, cols) = view.dim();
        let (rs, cs) = non_negative(view.strides()[0], view.strides()[1], "ndarray")?;
        // SAFETY: ndarray guarantees that every (i, j) of the view is
        // readable at ptr + i·rs + j·cs for 'a, and the view's borrow keeps
        // it unwritten meanwhile.
        Ok(unsafe { MatRef::from_raw_parts(view.as_ptr(), rows, cols, rs, cs) })
    }
}

impl<'a, T: Element> TryFrom<ArrayViewMut2<'a, T>> for MatMut<'a, T> {
    type Error = Error;

    /// The same elements, no copy; a negative stride is an error.
    fn try_from(mut view: ArrayViewMut2<'a, T>) -> Result<Self, Error> {
        let (rows, cols) = view.dim();
        let (rs, cs) = non_negative(view.strides()[0], view.strides()[1], "ndarray")?;
        // SAFETY: ndarray guarantees that the elements of a mutable view
        // are distinct and writable for 'a, at ptr + i·rs + j·cs, and that
        // nothing else reaches them while the view is borrowed.
        Ok(unsafe { MatMut::from_raw_parts(view.as_mut_ptr(), rows, cols, rs, cs) })
    }
}

impl<'a, T: Element> From<MatRef<'a, T>> for ArrayView2<'a, T> {
    /// The same elements, no copy.
    fn from(view: MatRef<'a, T>) -> Self {
        let shape = (view.rows(), view.cols()).strides(exported_strides(&view));
        // SAFETY: the MatRef guarantees every element is readable for 'a
        // at these (non-negative) strides; ndarray asks the same.
        unsafe { ArrayView2::from_shape_ptr(shape, view.as_ptr()) }
    }
}

impl<'a, T: Element> From<MatMut<'a, T>> for ArrayViewMut2<'a, T> {
    /// The same elements, no copy.
    fn from(mut view: MatMut<'a, T>) -> Self {
        let shape = (view.rows(), view.cols()).strides(exported_strides(&view.rb()));
        // SAFETY: the MatMut guarantees its elements are distinct (checked
        // injective strides), writable for 'a and reached by no other
        // path; ndarray asks the same.
        unsafe { ArrayViewMut2::from_shape_ptr(shape, view.as_mut_ptr()) }
    }
}

impl<T: Element> From<Matrix<T>> for Array2<T> {
    /// Moves the row-major buffer: no copy.
    fn from(m: Matrix<T>) -> Self {
        let shape = m.shape();
        Array2::from_shape_vec(shape, m.into_vec())
            .expect("a Matrix's buffer holds exactly rows·cols elements in row-major order")
    }
}

impl<T: Element> From<Array2<T>> for Matrix<T> {
    /// Moves the buffer when the array is in standard layout and starts
    /// it; copies otherwise (a transposed or sliced array).
    fn from(array: Array2<T>) -> Self {
        let (rows, cols) = array.dim();
        if !array.is_standard_layout() {
            return Matrix::from_fn(rows, cols, |i, j| array[(i, j)]);
        }
        // Standard layout: rows·cols contiguous elements from `offset`.
        let (mut data, offset) = array.into_raw_vec_and_offset();
        let start = offset.unwrap_or(0);
        if start != 0 || data.len() != rows * cols {
            data = data[start..start + rows * cols].to_vec();
        }
        Matrix::from_vec(rows, cols, data)
            .expect("a standard-layout array holds rows·cols contiguous elements")
    }
}
