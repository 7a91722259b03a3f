//! CBLAS's entry points: `cblas_?gemm` (32-bit sizes), `cblas_?gemm64_`
//! (64-bit sizes), and the names numpy's and scipy's wheels call
//! (`scipy_cblas_?gemm64_`, from their vendored OpenBLAS): scalars by
//! value for real types, by pointer for complex ones; row or column major.

use std::os::raw::{c_int, c_void};

use crate::args::Call;
use crate::fortran::entry;
use crate::product::{self, Complex};
use crate::settings;

/// CBLAS's check of `order`, the ops and `[m, n, k, lda, ldb, ldc]`, and
/// the operands in the order the column-major call takes them: row-major
/// is the column-major product of the transposes, A and B trading places.
fn checked<P>(
    order: c_int,
    transa: c_int,
    transb: c_int,
    [m, n, k, lda, ldb, ldc]: [i64; 6],
    (a, b): (P, P),
) -> (Result<Call, i64>, (P, P)) {
    match Call::cblas(order, transa, transb, m, n, k, lda, ldb, ldc) {
        Ok((call, true)) => (Ok(call), (b, a)),
        Ok((call, false)) => (Ok(call), (a, b)),
        Err(position) => (Err(position), (a, b)),
    }
}

macro_rules! cblas_gemm {
    ($name:ident, $routine:literal, $t:ty, $int:ty, real) => {
        #[doc = concat!("CBLAS's `", $routine, "`: C ← α·op(A)·op(B) + β·C, row- or column-major.")]
        ///
        /// # Safety
        /// CBLAS's contract: every pointer valid, the arrays as large as the
        /// (legal) dimensions and leading dimensions say, C apart from A
        /// and B.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            order: c_int,
            transa: c_int,
            transb: c_int,
            m: $int,
            n: $int,
            k: $int,
            alpha: $t,
            a: *const $t,
            lda: $int,
            b: *const $t,
            ldb: $int,
            beta: $t,
            c: *mut $t,
            ldc: $int,
        ) {
            let sizes = [m, n, k, lda, ldb, ldc].map(i64::from);
            let (checked, (a, b)) = checked(order, transa, transb, sizes, (a, b));
            entry($routine, checked, |call| {
                // SAFETY: a legal call's storage, as the caller guarantees.
                unsafe { product::real(settings::get(), call, alpha, a, b, beta, c) }
            });
        }
    };
    ($name:ident, $routine:literal, $t:ty, $int:ty, complex) => {
        #[doc = concat!("CBLAS's `", $routine, "`: C ← α·op(A)·op(B) + β·C of interleaved complex numbers, row- or column-major.")]
        ///
        /// # Safety
        /// CBLAS's contract: every pointer valid (α and β each address one
        /// complex number), the arrays as large as the (legal) dimensions
        /// and leading dimensions say, C apart from A and B.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            order: c_int,
            transa: c_int,
            transb: c_int,
            m: $int,
            n: $int,
            k: $int,
            alpha: *const c_void,
            a: *const c_void,
            lda: $int,
            b: *const c_void,
            ldb: $int,
            beta: *const c_void,
            c: *mut c_void,
            ldc: $int,
        ) {
            let sizes = [m, n, k, lda, ldb, ldc].map(i64::from);
            let (checked, (a, b)) = checked(order, transa, transb, sizes, (a, b));
            entry($routine, checked, |call| {
                // SAFETY: α and β each address one complex number; the
                // operands are a legal call's storage of complex pairs.
                unsafe {
                    let alpha = *alpha.cast::<Complex<$t>>();
                    let beta = *beta.cast::<Complex<$t>>();
                    let (a, b, c) = (a.cast::<$t>(), b.cast::<$t>(), c.cast::<$t>());
                    product::complex(settings::get(), call, alpha, a, b, beta, c)
                }
            });
        }
    };
}

cblas_gemm!(cblas_sgemm, "cblas_sgemm", f32, c_int, real);
cblas_gemm!(cblas_dgemm, "cblas_dgemm", f64, c_int, real);
cblas_gemm!(cblas_cgemm, "cblas_cgemm", f32, c_int, complex);
cblas_gemm!(cblas_zgemm, "cblas_zgemm", f64, c_int, complex);
cblas_gemm!(cblas_sgemm64_, "cblas_sgemm", f32, i64, real);
cblas_gemm!(cblas_dgemm64_, "cblas_dgemm", f64, i64, real);
cblas_gemm!(cblas_cgemm64_, "cblas_cgemm", f32, i64, complex);
cblas_gemm!(cblas_zgemm64_, "cblas_zgemm", f64, i64, complex);
cblas_gemm!(scipy_cblas_sgemm64_, "cblas_sgemm", f32, i64, real);
cblas_gemm!(scipy_cblas_dgemm64_, "cblas_dgemm", f64, i64, real);
cblas_gemm!(scipy_cblas_cgemm64_, "cblas_cgemm", f32, i64, complex);
cblas_gemm!(scipy_cblas_zgemm64_, "cblas_zgemm", f64, i64, complex);
