//! Small complex products in one pass: C ← α·A·B + β·C at the classical
//! form, with no planes, plans or real products around it.
//!
//! Each element keeps the four real sums of the classical form apart,
//! Σ AᵣBᵣ, Σ AᵢBᵢ, Σ AᵣBᵢ and Σ AᵢBᵣ, each in the order of the depth, and
//! takes Cᵣ = ΣAᵣBᵣ − ΣAᵢBᵢ and Cᵢ = ΣAᵣBᵢ + ΣAᵢBᵣ: the four real products'
//! sums and one rounding, so the error stays within the classical form's
//! bound (`crate::complex`), as the real products' would. α and β are
//! applied as complex scalars, as the reference zgemm applies them; β = 0
//! never reads C (NaN there is ignored).
//!
//! Two ways, chosen by [`route`]:
//! - **Interleaved A** (numpy's and the BLAS's storage, A not transposed):
//!   A read as one real 2m×k matrix Â whose rows alternate real and
//!   imaginary parts. Â·Bᵣ holds Σ AᵣBᵣ and Σ AᵢBᵣ, Â·Bᵢ holds Σ AᵣBᵢ and
//!   Σ AᵢBᵢ: two real products on `packed`'s direct path (its AVX-512
//!   kernels, computed as (Bᵣᵀ·Âᵀ)ᵀ so that the kernel streams Â's
//!   columns), then one pass that combines them with α, β and C. Where B
//!   is the interleaved one as its transpose (row-major storage, numpy's
//!   arrays), the same for Cᵀ = Bᵀ·Aᵀ.
//! - **Otherwise**, up to `COMPLEX_DIRECT_LOOP_MAX_VOLUME` multiply-adds,
//!   and for any A up to `COMPLEX_DIRECT_TINY_VOLUME` (where the two calls
//!   and the combining pass cost more than the product), a loop over C's
//!   columns.
//!
//! Either costs less than planning the four real products it replaces (a
//! 2³ zgemm: ~1.4 µs through them, against OpenBLAS's 40–55 ns).

use super::packed::dispatch::DirectFn;
use super::packed::plain::direct_for;
use super::packed::workspace::{Pool, Workspace};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::tunables::{COMPLEX_DIRECT_LOOP_MAX_VOLUME, COMPLEX_DIRECT_TINY_VOLUME};

/// How a small complex product runs in one pass.
#[derive(Clone, Copy)]
pub(crate) enum Route<T: Element> {
    /// Two real products of interleaved Â on the direct path, with its KC.
    Interleaved(DirectFn<T>, usize),
    /// The same for Cᵀ = Bᵀ·Aᵀ, whose left factor is interleaved (row-major
    /// storage, numpy's).
    Transposed(DirectFn<T>, usize),
    /// The loop over C's columns.
    Loop,
}

/// A's parts as the views of interleaved storage: the imaginary part one
/// element after the real, each row two elements after the previous.
fn interleaved<T: Element>((ar, ai): (MatRef<'_, T>, MatRef<'_, T>)) -> bool {
    ar.row_stride() == 2
        && ai.row_stride() == 2
        && ar.col_stride() == ai.col_stride()
        && ai.as_ptr() == ar.as_ptr().wrapping_add(1)
}

/// Â, the real 2m×k matrix of interleaved A's storage, transposed.
fn a_hat_t<'a, T: Element>(ar: MatRef<'a, T>) -> MatRef<'a, T> {
    // SAFETY: A is interleaved (see `interleaved`): element (2i + s, p) of
    // Â is part s of A's element (i, p), inside A's views.
    unsafe { MatRef::from_raw_parts(ar.as_ptr(), 2 * ar.rows(), ar.cols(), 1, ar.col_stride()) }.t()
}

/// The way this product runs in one pass, or None where it is too large
/// for either (the caller then plans real products). Shapes as
/// [`classical`] takes them, checked there.
pub(crate) fn route<T: Element>(
    a: (MatRef<'_, T>, MatRef<'_, T>),
    b: (MatRef<'_, T>, MatRef<'_, T>),
) -> Option<Route<T>> {
    let ((m, k), n) = (a.0.shape(), b.0.cols());
    let volume = m.checked_mul(k).and_then(|mk| mk.checked_mul(n));
    let up_to = |most: usize| volume.is_some_and(|v| v <= most);
    if up_to(COMPLEX_DIRECT_TINY_VOLUME) {
        return Some(Route::Loop);
    }
    if m > 0 && k > 0 && n > 0 {
        if interleaved(a) {
            if let Some((direct, kc)) = direct_for(&b.0.t(), &a_hat_t(a.0)) {
                return Some(Route::Interleaved(direct, kc));
            }
        }
        if interleaved((b.0.t(), b.1.t())) {
            if let Some((direct, kc)) = direct_for(&a.0, &a_hat_t(b.0.t())) {
                return Some(Route::Transposed(direct, kc));
            }
        }
    }
    up_to(COMPLEX_DIRECT_LOOP_MAX_VOLUME).then_some(Route::Loop)
}

/// x·y of complex scalars (re, im).
#[inline(always)]
pub(crate) fn times<T: Element>(x: [T; 2], y: [T; 2]) -> [T; 2] {
    [
        x[0].mul(y[0]).sub(x[1].mul(y[1])),
        x[0].mul(y[1]).add(x[1].mul(y[0])),
    ]
}

/// α·t + β·y, or α·t where β = 0 (y never read then).
#[inline(always)]
pub(crate) fn scaled<T: Element>(
    alpha: [T; 2],
    t: [T; 2],
    beta: [T; 2],
    y: impl Fn() -> [T; 2],
) -> [T; 2] {
    let at = times(alpha, t);
    if beta == [T::ZERO, T::ZERO] {
        return at;
    }
    let by = times(beta, y());
    [at[0].add(by[0]), at[1].add(by[1])]
}

/// C ← α·A·B + β·C for complex A (m×k), B (k×n) and C (m×n), each as its
/// real and imaginary views (any strides; C's two views share no
/// element), the way `route` chose.
///
/// # Errors
/// [`Error::DimensionMismatch`] or [`Error::OutputShape`] for parts whose
/// shapes do not make that product, and [`Error::InvalidOption`] for a
/// route that does not fit them; C is then untouched.
pub(crate) fn classical<T: Element>(
    route: Route<T>,
    alpha: [T; 2],
    (ar, ai): (MatRef<'_, T>, MatRef<'_, T>),
    (br, bi): (MatRef<'_, T>, MatRef<'_, T>),
    beta: [T; 2],
    (mut cr, mut ci): (MatMut<'_, T>, MatMut<'_, T>),
) -> Result<(), Error> {
    let ((m, k), n) = (ar.shape(), br.cols());
    if ai.shape() != (m, k) || br.shape() != (k, n) || bi.shape() != (k, n) {
        return Err(Error::DimensionMismatch {
            a: ai.shape(),
            b: bi.shape(),
        });
    }
    for got in [cr.shape(), ci.shape()] {
        if got != (m, n) {
            return Err(Error::OutputShape {
                expected: (m, n),
                got,
            });
        }
    }
    if let Route::Transposed(direct, kc) = route {
        return classical(
            Route::Interleaved(direct, kc),
            alpha,
            (br.t(), bi.t()),
            (ar.t(), ai.t()),
            beta,
            (cr.t(), ci.t()),
        );
    }
    if let Route::Interleaved(direct, kc) = route {
        if !interleaved((ar, ai)) || m == 0 || k == 0 || n == 0 {
            return Err(Error::InvalidOption(
                "a complex product routed as interleaved whose A is not".into(),
            ));
        }
        // Pᵀ = Bᵣᵀ·Âᵀ and Qᵀ = Bᵢᵀ·Âᵀ, n×2m each: row j of Pᵀ holds
        // (Σ AᵣBᵣ, Σ AᵢBᵣ) of column j's elements in turn, Qᵀ's
        // (Σ AᵣBᵢ, Σ AᵢBᵢ).
        let len = n * 2 * m;
        let mut workspace = Workspace::take_from::<T>(Pool::Complex, &[len, len]);
        let Ok([p, q]) = <[&mut [T]; 2]>::try_from(workspace.split::<T>(&[len, len])) else {
            unreachable!("split returns one buffer per length");
        };
        let a_hat = a_hat_t(ar);
        direct(
            T::ONE,
            br.t(),
            a_hat,
            T::ZERO,
            MatMut::from_slice(p, n, 2 * m)?,
            kc,
        );
        direct(
            T::ONE,
            bi.t(),
            a_hat,
            T::ZERO,
            MatMut::from_slice(q, n, 2 * m)?,
            kc,
        );
        for (j, (pj, qj)) in p.chunks_exact(2 * m).zip(q.chunks_exact(2 * m)).enumerate() {
            for (i, (pp, qq)) in pj.chunks_exact(2).zip(qj.chunks_exact(2)).enumerate() {
                let sum = [pp[0].sub(qq[1]), qq[0].add(pp[1])];
                let z = scaled(alpha, sum, beta, || [cr.get(i, j), ci.get(i, j)]);
                // SAFETY: i < m and j < n, C's shape; the two parts are
                // distinct views that share no element.
                unsafe {
                    *cr.get_unchecked_mut(i, j) = z[0];
                    *ci.get_unchecked_mut(i, j) = z[1];
                }
            }
        }
        return Ok(());
    }
    for i in 0..m {
        for j in 0..n {
            let [mut rr, mut ii, mut ri, mut ir] = [T::ZERO; 4];
            for p in 0..k {
                // SAFETY: i < m, p < k and j < n: inside A's and B's views,
                // whose shapes were checked above.
                let (x, y, u, v) = unsafe {
                    (
                        ar.get_unchecked(i, p),
                        ai.get_unchecked(i, p),
                        br.get_unchecked(p, j),
                        bi.get_unchecked(p, j),
                    )
                };
                rr = rr.add_product(x, u);
                ii = ii.add_product(y, v);
                ri = ri.add_product(x, v);
                ir = ir.add_product(y, u);
            }
            let sum = [rr.sub(ii), ri.add(ir)];
            let z = scaled(alpha, sum, beta, || [cr.get(i, j), ci.get(i, j)]);
            // SAFETY: i < m and j < n, C's shape; the two parts are
            // distinct views that share no element.
            unsafe {
                *cr.get_unchecked_mut(i, j) = z[0];
                *ci.get_unchecked_mut(i, j) = z[1];
            }
        }
    }
    Ok(())
}
