//! Complex products in one pass: C ← α·A·B + β·C at the classical form,
//! with no planes, plans or four real products around it.
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
//!   Σ AᵢBᵢ, so R = [Bᵣᵀ; Bᵢᵀ]·Âᵀ holds all four sums: two real products
//!   of B's parts where they lie, on `packed`'s direct path where they are
//!   small, else on `packed` with its threads; then one pass combines them
//!   with α, β and C. From `COMPLEX_STACKED_PARALLEL_FROM` on, threads
//!   share the direct path's product by bands of C's columns, each band
//!   its two real products and its combining pass. Where B is the
//!   interleaved one as its transpose (row-major storage, numpy's arrays),
//!   the same for Cᵀ = Bᵀ·Aᵀ.
//! - **Otherwise**, up to `COMPLEX_DIRECT_LOOP_MAX_VOLUME` multiply-adds,
//!   and for any A up to `COMPLEX_DIRECT_TINY_VOLUME` (where the copy, the
//!   call and the combining pass cost more than the product), a loop over
//!   C's columns.
//!
//! Either costs less than planning the four real products over copied
//! planes that it replaces (a 2³ zgemm: ~1.4 µs through them, against
//! OpenBLAS's 40–55 ns), and the real products read A and B where they
//! lie.

mod rows;

use std::sync::Mutex;

use super::packed::dispatch::DirectFn;
use super::packed::plain::{direct_for_shape, direct_for_share};
use super::packed::workspace::{Pool, Workspace};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::GemmOptions;
use crate::threads::{even_bands, for_each_member, lock, Shares};
use crate::tunables::{
    COMPLEX_DIRECT_LOOP_MAX_VOLUME, COMPLEX_DIRECT_TINY_VOLUME, COMPLEX_ROWS_MAX_VOLUME,
    COMPLEX_ROWS_MIN_VOLUME, COMPLEX_STACKED_MAX_VOLUME, COMPLEX_STACKED_MIN_SHARE_ROWS,
    COMPLEX_STACKED_PARALLEL_FROM,
};

/// How the two real products of [`Route::Stacked`] run.
#[derive(Clone, Copy)]
pub(crate) enum Real<T: Element> {
    /// `packed`'s direct path, with its KC.
    Direct(DirectFn<T>, usize),
    /// `packed`, packing and threads as its options resolve them.
    Packed,
}

/// How a complex product runs here.
#[derive(Clone, Copy)]
pub(crate) enum Route<T: Element> {
    /// Real products of B's parts by interleaved Â; for Cᵀ = Bᵀ·Aᵀ where
    /// `transposed`.
    Stacked {
        /// The real product's path.
        real: Real<T>,
        /// Whether Bᵀ is the interleaved operand.
        transposed: bool,
        /// The threads that share it, each a band of C's columns (of
        /// its rows for Cᵀ) on the direct path; 1 for `Real::Packed`.
        members: usize,
    },
    /// Rows of C from rows of an interleaved B in vector registers
    /// ([`rows`]); for Cᵀ = Bᵀ·Aᵀ where `transposed` (A's columns
    /// interleaved then).
    Rows {
        /// Whether Aᵀ is the operand read by rows.
        transposed: bool,
    },
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

/// B's parts as the views of storage whose rows are interleaved: the
/// imaginary part one element after the real, each element of a row two
/// after the previous (numpy's row-major complex arrays).
fn rows_interleaved<T: Element>((br, bi): (MatRef<'_, T>, MatRef<'_, T>)) -> bool {
    br.col_stride() == 2
        && bi.col_stride() == 2
        && br.row_stride() == bi.row_stride()
        && bi.as_ptr() == br.as_ptr().wrapping_add(1)
}

/// Â, the real 2m×k matrix of interleaved A's storage, transposed.
fn a_hat_t<'a, T: Element>(ar: MatRef<'a, T>) -> MatRef<'a, T> {
    // SAFETY: A is interleaved (see `interleaved`): element (2i + s, p) of
    // Â is part s of A's element (i, p), inside A's views.
    unsafe { MatRef::from_raw_parts(ar.as_ptr(), 2 * ar.rows(), ar.cols(), 1, ar.col_stride()) }.t()
}

/// The way this product runs here, or None where it should be planned as
/// real products (another layout past the loop's sizes, or past
/// `COMPLEX_STACKED_MAX_VOLUME`). Shapes as [`classical`] takes them,
/// checked there.
pub(crate) fn route<T: Element>(
    a: (MatRef<'_, T>, MatRef<'_, T>),
    b: (MatRef<'_, T>, MatRef<'_, T>),
    opts: &GemmOptions,
) -> Option<Route<T>> {
    let ((m, k), n) = (a.0.shape(), b.0.cols());
    let volume = m.checked_mul(k).and_then(|mk| mk.checked_mul(n));
    let up_to = |most: usize| volume.is_some_and(|v| v <= most);
    let rows_fit = volume.is_some_and(|v| v >= COMPLEX_ROWS_MIN_VOLUME);
    if rows_fit && up_to(COMPLEX_ROWS_MAX_VOLUME) && rows::available::<T>() {
        if rows_interleaved(b) {
            return Some(Route::Rows { transposed: false });
        }
        if rows_interleaved((a.0.t(), a.1.t())) {
            return Some(Route::Rows { transposed: true });
        }
    }
    if up_to(COMPLEX_DIRECT_TINY_VOLUME) {
        return Some(Route::Loop);
    }
    let transposed = match (interleaved(a), interleaved((b.0.t(), b.1.t()))) {
        _ if m == 0 || k == 0 || n == 0 => None,
        (true, _) => Some(false),
        (false, true) => Some(true),
        (false, false) => None,
    };
    if let Some(transposed) = transposed {
        // R's halves Bᵣᵀ·Âᵀ and Bᵢᵀ·Âᵀ: 2n×k by k×2m in all (m and n
        // trading places for Cᵀ), Âᵀ's rows contiguous.
        let (rows, cols) = if transposed { (m, n) } else { (n, m) };
        let threads = super::threads(opts);
        let members = volume.map_or(1, |v| stacked_members::<T>(threads, v, rows));
        if members > 1 {
            // Each member's share on the direct path, the shares being
            // the threads already.
            let share = rows.div_ceil(members);
            if let Some((direct, kc)) = direct_for_share::<T>((2 * share, k, 2 * cols), true) {
                let real = Real::Direct(direct, kc);
                return Some(Route::Stacked {
                    real,
                    transposed,
                    members,
                });
            }
        }
        if let Some((direct, kc)) = direct_for_shape::<T>((2 * rows, k, 2 * cols), true) {
            let real = Real::Direct(direct, kc);
            let members = 1;
            return Some(Route::Stacked {
                real,
                transposed,
                members,
            });
        }
        if up_to(COMPLEX_STACKED_MAX_VOLUME) {
            let (real, members) = (Real::Packed, 1);
            return Some(Route::Stacked {
                real,
                transposed,
                members,
            });
        }
    }
    up_to(COMPLEX_DIRECT_LOOP_MAX_VOLUME).then_some(Route::Loop)
}

/// One band of C's columns for [`stacked`]: B's columns and C's for it,
/// and R's rows for them (4·m values per column).
struct Part<'a, T: Element> {
    b: (MatRef<'a, T>, MatRef<'a, T>),
    c: (MatMut<'a, T>, MatMut<'a, T>),
    r: &'a mut [T],
}

/// The members that share a stacked product of m·k·n = `volume` complex
/// multiply-adds whose R has `rows` rows (C's columns, or its rows for
/// Cᵀ): one below `COMPLEX_STACKED_PARALLEL_FROM`'s edge cubed, else as
/// many of the `threads` as keep each member's share at half that volume
/// or more and at least `COMPLEX_STACKED_MIN_SHARE_ROWS` rows of R.
fn stacked_members<T: Element>(threads: usize, volume: usize, rows: usize) -> usize {
    let edge = match std::mem::size_of::<T>() {
        ..=4 => COMPLEX_STACKED_PARALLEL_FROM.0,
        _ => COMPLEX_STACKED_PARALLEL_FROM.1,
    };
    let least = edge * edge * edge;
    if volume < least {
        return 1;
    }
    let by_volume = volume / least * 2;
    threads
        .min(by_volume)
        .min(rows / COMPLEX_STACKED_MIN_SHARE_ROWS)
        .max(1)
}

/// The stacked product's band: R = [Bᵣᵀ; Bᵢᵀ]·Âᵀ for B's columns in
/// `part` (`a_hat` is Âᵀ, k×2m), then C ← α·(combined R) + β·C there.
fn stacked<T: Element>(
    real: Real<T>,
    opts: &GemmOptions,
    alpha: [T; 2],
    a_hat: MatRef<'_, T>,
    beta: [T; 2],
    part: Part<'_, T>,
) -> Result<(), Error> {
    let Part {
        b: (br, bi),
        c: (mut cr, mut ci),
        r,
    } = part;
    let (m, n) = cr.shape();
    // R's halves: row j of R holds (Σ AᵣBᵣ, Σ AᵢBᵣ) of column j's
    // elements in turn, row n + j (Σ AᵣBᵢ, Σ AᵢBᵢ): two real products of
    // B's parts where they lie, on `packed`'s direct path or on `packed`
    // with its threads. (Copying B's parts into one 2n×k matrix, so that
    // Âᵀ is packed once, measured 2–5% slower at 128–512 and no faster at
    // 1024–2048: the copy ran on one thread.)
    for (b_part, rows) in [br, bi].into_iter().zip(r.chunks_exact_mut(2 * n * m)) {
        let rows = MatMut::from_slice(rows, n, 2 * m)?;
        match real {
            Real::Direct(direct, kc) => direct(T::ONE, b_part.t(), a_hat, T::ZERO, rows, kc),
            Real::Packed => {
                super::packed::multiply(T::ONE, b_part.t(), a_hat, T::ZERO, rows, opts)?;
            }
        }
    }
    let (p, q) = r.split_at(2 * n * m);
    let zero = beta == [T::ZERO; 2];
    if interleaved((cr.rb(), ci.rb())) {
        // C interleaved as A is (the BLAS's and numpy's storage): each
        // column a run of 2m values, combined as slices, so the pass
        // streams instead of addressing each part from its strides.
        let (ld, base) = (cr.col_stride(), cr.as_mut_ptr());
        for (j, (pj, qj)) in p.chunks_exact(2 * m).zip(q.chunks_exact(2 * m)).enumerate() {
            // SAFETY: C is interleaved (checked): column j < n holds
            // its m elements' parts in the 2m consecutive T from
            // base + j·ld, all inside C's two views, and nothing else
            // reads or writes them during this pass.
            let out = unsafe { std::slice::from_raw_parts_mut(base.add(j * ld), 2 * m) };
            let cells = out
                .chunks_exact_mut(2)
                .zip(pj.chunks_exact(2).zip(qj.chunks_exact(2)));
            match zero {
                true => cells.for_each(|(o, (pp, qq))| {
                    let z = times(alpha, [pp[0].sub(qq[1]), qq[0].add(pp[1])]);
                    (o[0], o[1]) = (z[0], z[1]);
                }),
                false => cells.for_each(|(o, (pp, qq))| {
                    let sum = [pp[0].sub(qq[1]), qq[0].add(pp[1])];
                    let z = scaled(alpha, sum, beta, || [o[0], o[1]]);
                    (o[0], o[1]) = (z[0], z[1]);
                }),
            }
        }
        return Ok(());
    }
    let (rs_r, cs_r, rs_i, cs_i) = (
        cr.row_stride(),
        cr.col_stride(),
        ci.row_stride(),
        ci.col_stride(),
    );
    let (re, im) = (cr.as_mut_ptr(), ci.as_mut_ptr());
    for (j, (pj, qj)) in p.chunks_exact(2 * m).zip(q.chunks_exact(2 * m)).enumerate() {
        for (i, (pp, qq)) in pj.chunks_exact(2).zip(qj.chunks_exact(2)).enumerate() {
            let sum = [pp[0].sub(qq[1]), qq[0].add(pp[1])];
            // SAFETY: i < m and j < n, the shape of both of C's views
            // (checked above): element (i, j) of each lies at its
            // strides from its start, inside the view; the two views
            // share no element.
            unsafe {
                let to_re = re.add(i * rs_r + j * cs_r);
                let to_im = im.add(i * rs_i + j * cs_i);
                let z = match zero {
                    true => times(alpha, sum),
                    false => scaled(alpha, sum, beta, || [*to_re, *to_im]),
                };
                (*to_re, *to_im) = (z[0], z[1]);
            }
        }
    }
    Ok(())
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
    opts: &GemmOptions,
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
    if let Route::Rows { transposed } = route {
        // Cᵀ = Bᵀ·Aᵀ where A's columns are interleaved; the shapes were
        // checked above, so the views go to the kernel at once.
        let (a, b, c) = match transposed {
            true => ((br.t(), bi.t()), (ar.t(), ai.t()), (cr.t(), ci.t())),
            false => ((ar, ai), (br, bi), (cr, ci)),
        };
        if !rows_interleaved(b) || !rows::product(alpha, a, b.0, beta, c) {
            return Err(Error::InvalidOption(
                "a complex product routed by interleaved rows whose B is not, or where it cannot run"
                    .into(),
            ));
        }
        return Ok(());
    }
    if let Route::Stacked {
        real,
        transposed,
        members,
    } = route
    {
        if transposed {
            let route = Route::Stacked {
                real,
                transposed: false,
                members,
            };
            let (a, b, c) = ((br.t(), bi.t()), (ar.t(), ai.t()), (cr.t(), ci.t()));
            return classical(route, opts, alpha, a, b, beta, c);
        }
        if !interleaved((ar, ai)) || m == 0 || k == 0 || n == 0 {
            return Err(Error::InvalidOption(
                "a complex product routed as interleaved whose A is not".into(),
            ));
        }
        // R = [Bᵣᵀ; Bᵢᵀ]·Âᵀ (2n×2m), computed and combined by `stacked`.
        let a_hat = a_hat_t(ar);
        let members = match real {
            Real::Direct(..) => members.clamp(1, n),
            Real::Packed => 1,
        };
        let r_len = 4 * n * m;
        let mut workspace = Workspace::take_from::<T>(Pool::Complex, &[r_len]);
        let Ok([r]) = <[&mut [T]; 1]>::try_from(workspace.split::<T>(&[r_len])) else {
            unreachable!("split returns one buffer per length");
        };
        if members <= 1 {
            let part = Part {
                b: (br, bi),
                c: (cr, ci),
                r,
            };
            return stacked(real, opts, alpha, a_hat, beta, part);
        }
        // Each member takes a band of C's columns whole: B's columns, R's
        // rows and the combining pass for them, with nothing to wait for
        // (a member no helper has started, the caller takes). Every
        // element is the same kernel's sum in the same order, so the bits
        // do not depend on the members. (Four bands a member, taken in
        // turn, measured 5–25% slower at 32³–64³ on the 2-vCPU guest.)
        let mut parts = Vec::with_capacity(members);
        let (mut c_rest, mut r_rest) = ((cr, ci), r);
        for (j0, cols) in even_bands(n, members) {
            let ((cr_here, cr_next), (ci_here, ci_next)) =
                (c_rest.0.split_at_col(cols), c_rest.1.split_at_col(cols));
            let (r_here, r_next) = r_rest.split_at_mut(4 * cols * m);
            parts.push(Part {
                b: (br.submatrix(0, j0, k, cols), bi.submatrix(0, j0, k, cols)),
                c: (cr_here, ci_here),
                r: r_here,
            });
            (c_rest, r_rest) = ((cr_next, ci_next), r_next);
        }
        let shares = Shares::new(parts);
        let failed = Mutex::new(None);
        for_each_member(members, &|t| {
            let Some(part) = shares.take(t) else {
                return;
            };
            if let Err(e) = stacked(real, opts, alpha, a_hat, beta, part) {
                *lock(&failed) = Some(e);
            }
        });
        let failed = lock(&failed).take();
        return failed.map_or(Ok(()), Err);
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
