//! Conversions with ndarray, nalgebra and faer: views in both directions
//! without copying (the same memory, checked by pointer), owned matrices
//! moved or copied, products through converted views equal to products
//! of the copies, and negative strides refused with a typed error.

#![cfg(all(feature = "ndarray", feature = "nalgebra", feature = "faer"))]

use fastmm::{matmul_with, Context, Error, GemmOptions, MatMut, MatRef, Matrix};

fn sample(rows: usize, cols: usize, salt: i32) -> Matrix<f64> {
    Matrix::from_fn(rows, cols, |i, j| {
        ((i as i32 * 7 + j as i32 * 3 + salt) % 11 - 5) as f64
    })
}

/// C = A·B through fastmm from copies: the oracle (small integers, exact).
fn product(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Matrix<f64> {
    let (a, b) = (Matrix::from_view(a), Matrix::from_view(b));
    matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::default()).unwrap()
}

#[test]
fn ndarray_views_and_arrays_convert_without_copying() {
    use ndarray::{s, Array2, ArrayView2, ArrayViewMut2};
    let a = sample(5, 7, 1);
    let ptr = a.as_slice().as_ptr();
    let array: Array2<f64> = a.clone().into();
    assert_eq!(array.dim(), (5, 7));
    assert_eq!(array[(4, 6)], a.get(4, 6));
    let moved: Array2<f64> = Matrix::from_vec(5, 7, a.as_slice().to_vec())
        .unwrap()
        .into();
    let back: Matrix<f64> = moved.into();
    assert_eq!(back, a);
    let owned: Array2<f64> = a.clone().into();
    let owned_ptr = owned.as_ptr();
    let back: Matrix<f64> = owned.into();
    assert_eq!(
        back.as_slice().as_ptr(),
        owned_ptr,
        "a standard-layout array moves"
    );
    // A transposed array is copied into row-major order.
    let transposed: Matrix<f64> = Array2::from_shape_fn((7, 5), |(i, j)| a.get(j, i))
        .reversed_axes()
        .into();
    assert_eq!(transposed, a);

    let view: MatRef<'_, f64> = ArrayView2::from(a.as_ref())
        .reversed_axes()
        .try_into()
        .unwrap();
    assert_eq!(view.shape(), (7, 5));
    assert_eq!(view.as_ptr(), ptr);
    let b = Array2::from_shape_fn((9, 12), |(i, j)| ((i * 5 + j) % 7) as f64 - 3.0);
    let b_view = b.slice(s![1..6, ..;2]);
    let b_ref: MatRef<'_, f64> = b_view.try_into().unwrap();
    assert_eq!((b_ref.shape(), b_ref.col_stride()), ((5, 6), 2));
    let c = matmul_with(view, b_ref.submatrix(0, 0, 5, 6), &GemmOptions::default());
    assert_eq!(c.unwrap(), product(view, b_ref));

    let mut out = Array2::from_elem((7, 6), f64::NAN);
    let out_view: MatMut<'_, f64> = out.view_mut().try_into().unwrap();
    Context::cpu()
        .gemm(1.0, view, b_ref, 0.0, out_view, &GemmOptions::default())
        .unwrap();
    let out: Matrix<f64> = out.into();
    assert_eq!(out, product(view, b_ref));
    let mut c = Matrix::filled(2, 2, 1.0);
    let c_view: ArrayViewMut2<'_, f64> = c.as_mut().into();
    assert_eq!(c_view.dim(), (2, 2));

    let reversed = b.slice(s![..;-1, ..]);
    let refused = MatRef::<f64>::try_from(reversed).unwrap_err();
    assert!(matches!(refused, Error::Unsupported { .. }), "{refused}");
}

#[test]
fn nalgebra_matrices_and_views_convert_without_copying() {
    use fastmm::interop::{NalgebraView, NalgebraViewMut};
    use nalgebra::DMatrix;
    let a = sample(6, 4, 2);
    let na: DMatrix<f64> = a.clone().into();
    assert_eq!(na[(5, 3)], a.get(5, 3));
    let back: Matrix<f64> = (&na).into();
    assert_eq!(back, a);
    // Column-major, viewed in place: same pointer, strides (1, rows).
    let view = MatRef::from(&na);
    assert_eq!(view.as_ptr(), na.as_ptr());
    assert_eq!((view.row_stride(), view.col_stride()), (1, 6));
    let b = DMatrix::from_fn(4, 9, |i, j| ((i * 3 + j) % 5) as f64 - 2.0);
    let b_part = b.view((1, 2), (3, 5));
    let b_ref = MatRef::from(&b_part);
    assert_eq!(b_ref.as_ptr(), b_part.as_ptr());
    let a_part = MatRef::from(&na).submatrix(0, 1, 6, 3);
    let c = matmul_with(a_part, b_ref, &GemmOptions::default()).unwrap();
    let expected = na.view((0, 1), (6, 3)) * b_part;
    assert_eq!(c, Matrix::from(&expected));

    let mut out = DMatrix::from_element(6, 5, f64::NAN);
    Context::cpu()
        .gemm(
            1.0,
            a_part,
            b_ref,
            0.0,
            MatMut::from(&mut out),
            &GemmOptions::default(),
        )
        .unwrap();
    assert_eq!(out, expected);
    let exported: NalgebraView<'_, f64> = a.as_ref().into();
    assert_eq!(exported.as_ptr(), a.as_slice().as_ptr());
    assert_eq!(exported[(5, 3)], a.get(5, 3));
    let mut m = a.clone();
    let mut exported: NalgebraViewMut<'_, f64> = m.as_mut().into();
    exported[(0, 0)] = 42.0;
    assert_eq!(m.get(0, 0), 42.0);
}

#[test]
fn faer_views_convert_without_copying() {
    let a = sample(5, 8, 3);
    let fa = faer::Mat::<f64>::from(&a);
    let view: MatRef<'_, f64> = fa.as_ref().try_into().unwrap();
    assert_eq!(view.as_ptr(), fa.as_ptr());
    assert_eq!(Matrix::from_view(view), a);
    assert_eq!(Matrix::from(&fa), a);
    let b = sample(8, 3, 4);
    let fb = faer::Mat::<f64>::from(&b);
    let b_t: MatRef<'_, f64> = fb.as_ref().transpose().try_into().unwrap();
    assert_eq!(b_t.shape(), (3, 8));
    let c = matmul_with(view, b.as_ref(), &GemmOptions::default()).unwrap();
    let mut out = faer::Mat::<f64>::from_fn(5, 3, |_, _| f64::NAN);
    let out_view: MatMut<'_, f64> = out.as_mut().try_into().unwrap();
    Context::cpu()
        .gemm(1.0, view, b_t.t(), 0.0, out_view, &GemmOptions::default())
        .unwrap();
    assert_eq!(Matrix::from(&out), c);
    let exported: faer::MatRef<'_, f64> = a.as_ref().into();
    assert_eq!(exported.as_ptr(), a.as_slice().as_ptr());
    assert_eq!(exported[(4, 7)], a.get(4, 7));
    let mut m = a.clone();
    let exported: faer::MatMut<'_, f64> = m.as_mut().into();
    assert_eq!(exported.nrows(), 5);
    let refused = MatRef::<f64>::try_from(fa.as_ref().reverse_rows()).unwrap_err();
    assert!(matches!(refused, Error::Unsupported { .. }), "{refused}");
}
