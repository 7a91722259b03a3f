//! nalgebra: its matrices and views (column-major, any strides) become
//! [`MatRef`]/[`MatMut`] without copying; fastmm views become nalgebra
//! views without copying; `DMatrix` ↔ [`Matrix`] copy, because one is
//! column-major and the other row-major.

use nalgebra::{DMatrix, Dim, Dyn, Matrix as NaMatrix, RawStorage, RawStorageMut};
use nalgebra::{ViewStorage, ViewStorageMut};

use super::exported_strides;
use crate::element::Element;
use crate::matrix::{MatMut, MatRef, Matrix};

/// A nalgebra view with run-time strides, as fastmm's views are.
pub type NalgebraView<'a, T> = NaMatrix<T, Dyn, Dyn, ViewStorage<'a, T, Dyn, Dyn, Dyn, Dyn>>;
/// A mutable nalgebra view with run-time strides.
pub type NalgebraViewMut<'a, T> = NaMatrix<T, Dyn, Dyn, ViewStorageMut<'a, T, Dyn, Dyn, Dyn, Dyn>>;

impl<'a, T, R, C, S> From<&'a NaMatrix<T, R, C, S>> for MatRef<'a, T>
where
    T: Element + nalgebra::Scalar,
    R: Dim,
    C: Dim,
    S: RawStorage<T, R, C>,
{
    /// Any nalgebra matrix or view, no copy.
    fn from(m: &'a NaMatrix<T, R, C, S>) -> Self {
        let (rows, cols) = m.shape();
        let (rs, cs) = m.strides();
        // SAFETY: nalgebra's storage holds every (i, j) at ptr + i·rs +
        // j·cs, readable for as long as `m` is borrowed ('a) and unwritten
        // meanwhile.
        unsafe { MatRef::from_raw_parts(m.data.ptr(), rows, cols, rs, cs) }
    }
}

impl<'a, T, R, C, S> From<&'a mut NaMatrix<T, R, C, S>> for MatMut<'a, T>
where
    T: Element + nalgebra::Scalar,
    R: Dim,
    C: Dim,
    S: RawStorageMut<T, R, C>,
{
    /// Any mutable nalgebra matrix or view, no copy.
    fn from(m: &'a mut NaMatrix<T, R, C, S>) -> Self {
        let (rows, cols) = m.shape();
        let (rs, cs) = m.strides();
        // SAFETY: nalgebra's mutable storage holds distinct elements at
        // ptr + i·rs + j·cs, writable and reached by nothing else while
        // `m` is borrowed mutably ('a).
        unsafe { MatMut::from_raw_parts(m.data.ptr_mut(), rows, cols, rs, cs) }
    }
}

impl<'a, T: Element + nalgebra::Scalar> From<MatRef<'a, T>> for NalgebraView<'a, T> {
    /// The same elements, no copy.
    fn from(view: MatRef<'a, T>) -> Self {
        let shape = (Dyn(view.rows()), Dyn(view.cols()));
        let strides = {
            let (rs, cs) = exported_strides(&view);
            (Dyn(rs), Dyn(cs))
        };
        // SAFETY: the MatRef guarantees every element is readable for 'a
        // at these strides, which is what the view storage asks.
        let storage = unsafe { ViewStorage::from_raw_parts(view.as_ptr(), shape, strides) };
        NaMatrix::from_data(storage)
    }
}

impl<'a, T: Element + nalgebra::Scalar> From<MatMut<'a, T>> for NalgebraViewMut<'a, T> {
    /// The same elements, no copy.
    fn from(mut view: MatMut<'a, T>) -> Self {
        let shape = (Dyn(view.rows()), Dyn(view.cols()));
        let strides = {
            let (rs, cs) = exported_strides(&view.rb());
            (Dyn(rs), Dyn(cs))
        };
        // SAFETY: the MatMut guarantees distinct elements (injective
        // strides), writable for 'a and reached by no other path.
        let storage = unsafe { ViewStorageMut::from_raw_parts(view.as_mut_ptr(), shape, strides) };
        NaMatrix::from_data(storage)
    }
}

impl<T: Element + nalgebra::Scalar> From<&Matrix<T>> for DMatrix<T> {
    /// A column-major copy.
    fn from(m: &Matrix<T>) -> Self {
        DMatrix::from_row_slice(m.rows(), m.cols(), m.as_slice())
    }
}

impl<T: Element + nalgebra::Scalar> From<Matrix<T>> for DMatrix<T> {
    /// A column-major copy.
    fn from(m: Matrix<T>) -> Self {
        DMatrix::from(&m)
    }
}

impl<T: Element + nalgebra::Scalar> From<&DMatrix<T>> for Matrix<T> {
    /// A row-major copy.
    fn from(m: &DMatrix<T>) -> Self {
        Matrix::from_view(MatRef::from(m))
    }
}

impl<T: Element + nalgebra::Scalar> From<DMatrix<T>> for Matrix<T> {
    /// A row-major copy.
    fn from(m: DMatrix<T>) -> Self {
        Matrix::from(&m)
    }
}
