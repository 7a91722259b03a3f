//! A legal call's product: the stored operands as strided views (the
//! layout normalised here, at the boundary), run on the settings'
//! executor.

use fastmm::complex::{ComplexForm, SplitMut, SplitRef};
use fastmm::{Element, Error, Gemm, MatMut, MatRef, Matrix};

use crate::args::{Call, Op};
use crate::settings::Settings;

/// A column-major operand of `rows`×`cols` at `ptr` with leading
/// dimension `ld`, as op(X) asks for it.
///
/// # Safety
/// `ptr` addresses `ld·(cols − 1) + rows` readable elements of T for
/// `'a` (the BLAS's contract for a legal call), none written meanwhile.
unsafe fn operand<'a, T: Element>(
    ptr: *const T,
    (rows, cols): (usize, usize),
    ld: usize,
    op: Op,
) -> MatRef<'a, T> {
    // SAFETY: element (i, j) is at ptr + i + j·ld, inside the caller's
    // storage (see the function's contract).
    let stored = unsafe { MatRef::from_raw_parts(ptr, rows, cols, 1, ld) };
    match op {
        Op::None => stored,
        Op::Transpose | Op::ConjTranspose => stored.t(),
    }
}

/// C ← α·op(A)·op(B) + β·C of real T for a legal `call`, as the reference
/// defines it: nothing for an empty C, or α = 0 or k = 0 with β = 1; C ←
/// β·C (zeros when β = 0, NaN in C ignored) for α = 0 or k = 0.
///
/// # Safety
/// `a`, `b` and `c` address the storage a legal `call` names (A, B read
/// only; C read and written, apart from A and B), as the BLAS's caller
/// guarantees.
///
/// # Errors
/// The executor's errors (memory, a device that failed); C is then
/// unspecified, as a BLAS that cannot finish leaves it.
pub unsafe fn real<T: Element>(
    settings: &Settings,
    call: Call,
    alpha: T,
    a: *const T,
    b: *const T,
    beta: T,
    c: *mut T,
) -> Result<(), Error> {
    let (m, n, k) = (call.m as usize, call.n as usize, call.k as usize);
    if m == 0 || n == 0 || ((alpha == T::ZERO || k == 0) && beta == T::ONE) {
        return Ok(());
    }
    // SAFETY: C is m×n column-major with leading dimension ldc ≥ m, the
    // caller's storage, written by this product alone.
    let c_view = || unsafe { MatMut::from_raw_parts(c, m, n, 1, call.ldc as usize) };
    if alpha == T::ZERO || k == 0 {
        c_view().scale_by(beta);
        return Ok(());
    }
    let (shape_a, shape_b) = call.stored_shapes();
    // SAFETY: A and B are the caller's stored operands of these shapes and
    // leading dimensions (checked legal), read only.
    let (a, b) = unsafe {
        (
            operand(a, shape_a, call.lda as usize, call.op_a),
            operand(b, shape_b, call.ldb as usize, call.op_b),
        )
    };
    // C's view made in the product itself: made apart and moved in, its
    // fields were stored one word at a time and read back two at a time,
    // a load the CPU cannot forward from the stores (a fifth of a 2³
    // dgemm_'s time in perf).
    let product = Gemm {
        alpha,
        a,
        b,
        beta,
        c: c_view(),
    };
    crate::settings::count_product();
    settings.machine.multiply(product, &settings.opts)
}

/// A complex scalar as (re, im).
pub type Complex<T> = [T; 2];

/// [`real`] for interleaved complex T (re, im pairs): op may conjugate.
/// The product runs on the executor's complex product
/// ([`fastmm::complex::gemm`]: small ones in one pass, others as real
/// products of the parts in the accuracy level's complex form), which
/// applies α and β as the reference applies them.
///
/// # Safety
/// As [`real`], counting elements as complex pairs.
///
/// # Errors
/// As [`real`].
pub unsafe fn complex<T: Element>(
    settings: &Settings,
    call: Call,
    alpha: Complex<T>,
    a: *const T,
    b: *const T,
    beta: Complex<T>,
    c: *mut T,
) -> Result<(), Error> {
    let (m, n) = (call.m as usize, call.n as usize);
    let ldc = 2 * call.ldc as usize;
    // SAFETY: C's real and imaginary parts are the even and odd T of the
    // caller's m×n column-major storage: two views of disjoint elements,
    // written by this product alone.
    let c = unsafe {
        SplitMut {
            re: MatMut::from_raw_parts(c, m, n, 2, ldc),
            im: MatMut::from_raw_parts(c.add(1), m, n, 2, ldc),
        }
    };
    let (shape_a, shape_b) = call.stored_shapes();
    // SAFETY: the stored A and B of these shapes and leading dimensions
    // (checked legal), as complex pairs: the parts are every other T.
    let parts = |ptr: *const T, shape: (usize, usize), ld: usize, op: Op| unsafe {
        let ld = 2 * ld;
        let re = MatRef::from_raw_parts(ptr, shape.0, shape.1, 2, ld);
        let im = MatRef::from_raw_parts(ptr.add(1), shape.0, shape.1, 2, ld);
        match op {
            Op::None => (re, im),
            Op::Transpose | Op::ConjTranspose => (re.t(), im.t()),
        }
    };
    let (a_re, a_im) = parts(a, shape_a, call.lda as usize, call.op_a);
    let (b_re, b_im) = parts(b, shape_b, call.ldb as usize, call.op_b);
    let conjugates = |op: Op| op == Op::ConjTranspose;
    if !conjugates(call.op_a) && !conjugates(call.op_b) {
        // No conjugated operand (numpy's calls, most others): nothing to
        // own, and no owned temporaries in this frame.
        let a = SplitRef { re: a_re, im: a_im };
        let b = SplitRef { re: b_re, im: b_im };
        return run(settings, call, alpha, a, b, beta, c);
    }
    // A conjugated operand's imaginary part, negated once.
    let conjugated = |im: MatRef<'_, T>, op: Op| -> Result<Option<Matrix<T>>, Error> {
        match conjugates(op) {
            true => Ok(Some(Matrix::try_from_fn(im.rows(), im.cols(), |i, j| {
                T::ZERO.sub(im.get(i, j))
            })?)),
            false => Ok(None),
        }
    };
    let (a_conj, b_conj) = (conjugated(a_im, call.op_a)?, conjugated(b_im, call.op_b)?);
    let a = SplitRef {
        re: a_re,
        im: a_conj.as_ref().map_or(a_im, Matrix::as_ref),
    };
    let b = SplitRef {
        re: b_re,
        im: b_conj.as_ref().map_or(b_im, Matrix::as_ref),
    };
    run(settings, call, alpha, a, b, beta, c)
}

/// The complex product of the parts' views on the settings' executor.
fn run<T: Element>(
    settings: &Settings,
    call: Call,
    alpha: Complex<T>,
    a: SplitRef<'_, T>,
    b: SplitRef<'_, T>,
    beta: Complex<T>,
    c: SplitMut<'_, T>,
) -> Result<(), Error> {
    let form = ComplexForm::for_level(settings.opts.accuracy);
    // Counted as `real` counts: products that multiply.
    if call.m > 0 && call.n > 0 && call.k > 0 && alpha != [T::ZERO; 2] {
        crate::settings::count_product();
    }
    fastmm::complex::gemm(
        &settings.machine,
        alpha,
        a,
        b,
        beta,
        c,
        form,
        &settings.opts,
    )
}
