//! The reference BLAS's Fortran entry points: `sgemm_`, `dgemm_`,
//! `cgemm_`, `zgemm_` with 32-bit integers (LP64) and `*_64_` with 64-bit
//! ones (ILP64). Every argument by reference; the characters' hidden
//! lengths, which gfortran passes after the last argument, are not read.

use std::os::raw::c_char;

use fastmm::Error;

use crate::args::{illegal, Call};
use crate::product::{self, Complex};
use crate::settings::{self, warn};

/// Runs `run` on a legal call, else reports the illegal argument the
/// reference's way and leaves C untouched; a failed product or a panic is
/// reported, never carried across the C boundary.
pub(crate) fn entry(
    routine: &str,
    checked: Result<Call, i64>,
    run: impl FnOnce(Call) -> Result<(), Error>,
) {
    let call = match checked {
        Ok(call) => call,
        Err(position) => {
            eprintln!("{}", illegal(routine, position));
            return;
        }
    };
    // The error boxed inside the guarded call: the product's Result is a
    // few words written to memory, and moved out whole it was read back
    // in wider loads than its stores (a store-forwarding stall, a tenth
    // of a 2³ zgemm_); a box is one word, null for Ok.
    let guarded = || run(call).map_err(Box::new);
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(guarded)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn(&format!("{routine} failed: {e}")),
        Err(_) => warn(&format!("{routine} failed: an internal error")),
    }
}

macro_rules! fortran_gemm {
    ($name:ident, $routine:literal, $t:ty, $int:ty, real) => {
        fortran_gemm!(@def $name, $routine, $t, $int, $t, |call, alpha: &$t, a, b, beta: &$t, c| {
            // SAFETY: a legal call's storage, as the caller guarantees.
            unsafe { product::real(settings::get(), call, *alpha, a, b, *beta, c) }
        });
    };
    ($name:ident, $routine:literal, $t:ty, $int:ty, complex) => {
        fortran_gemm!(@def $name, $routine, $t, $int, Complex<$t>, |call, alpha: &Complex<$t>, a, b, beta: &Complex<$t>, c| {
            // SAFETY: a legal call's storage of complex pairs, as the caller
            // guarantees.
            unsafe { product::complex(settings::get(), call, *alpha, a, b, *beta, c) }
        });
    };
    (@def $name:ident, $routine:literal, $t:ty, $int:ty, $scalar:ty, $run:expr) => {
        #[doc = concat!("The reference `", $routine, "`: C ← α·op(A)·op(B) + β·C, column-major.")]
        ///
        /// # Safety
        /// The reference BLAS's contract: every pointer valid, the arrays
        /// as large as the (legal) dimensions and leading dimensions say, C
        /// apart from A and B.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            transa: *const c_char,
            transb: *const c_char,
            m: *const $int,
            n: *const $int,
            k: *const $int,
            alpha: *const $scalar,
            a: *const $t,
            lda: *const $int,
            b: *const $t,
            ldb: *const $int,
            beta: *const $scalar,
            c: *mut $t,
            ldc: *const $int,
        ) {
            // SAFETY: the scalars are passed by reference, valid per the
            // caller's contract.
            let (ta, tb, m, n, k, lda, ldb, ldc, alpha, beta) = unsafe {
                (
                    *transa as u8,
                    *transb as u8,
                    i64::from(*m),
                    i64::from(*n),
                    i64::from(*k),
                    i64::from(*lda),
                    i64::from(*ldb),
                    i64::from(*ldc),
                    &*alpha,
                    &*beta,
                )
            };
            let run = $run;
            entry(
                $routine,
                Call::fortran(ta, tb, m, n, k, lda, ldb, ldc),
                |call| run(call, alpha, a, b, beta, c),
            );
        }
    };
}

fortran_gemm!(sgemm_, "SGEMM", f32, i32, real);
fortran_gemm!(dgemm_, "DGEMM", f64, i32, real);
fortran_gemm!(cgemm_, "CGEMM", f32, i32, complex);
fortran_gemm!(zgemm_, "ZGEMM", f64, i32, complex);
fortran_gemm!(sgemm_64_, "SGEMM", f32, i64, real);
fortran_gemm!(dgemm_64_, "DGEMM", f64, i64, real);
fortran_gemm!(cgemm_64_, "CGEMM", f32, i64, complex);
fortran_gemm!(zgemm_64_, "ZGEMM", f64, i64, complex);
