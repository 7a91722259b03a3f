//! Complex products over any executor: C = A·B for complex matrices held
//! as split real planes (a real and an imaginary view each: separate
//! matrices, or the strided views of interleaved storage, as numpy's
//! `.real` and `.imag` are), by real products planned once.
//!
//! Written once over [`Executor`], so a complex product runs wherever a
//! real one does: on the CPU, a GPU, a team of GPUs or an MPI cluster, and
//! with any real algorithm under it.
//!
//! **What each form promises** (Higham, *Accuracy and Stability of
//! Numerical Algorithms*, 2nd ed., §23.2.4), with γ the real product's
//! rounding factor for depth k:
//! - [`ComplexForm::Classical`], four real products: Cᵣ = AᵣBᵣ − AᵢBᵢ and
//!   Cᵢ = AᵣBᵢ + AᵢBᵣ, each part within γ·(|Aᵣ||Bᵣ| + |Aᵢ||Bᵢ|) (resp.
//!   |Aᵣ||Bᵢ| + |Aᵢ||Bᵣ|) plus one rounding: the bound of the complex
//!   product itself (zgemm computes the same sums).
//! - [`ComplexForm::Gauss`] (3M), three real products P₁ = AᵣBᵣ, P₂ = AᵢBᵢ,
//!   P₃ = (Aᵣ + Aᵢ)(Bᵣ + Bᵢ), Cᵣ = P₁ − P₂ and Cᵢ = P₃ − P₁ − P₂: the real
//!   part as above, but the imaginary part only within about
//!   γ·(|Aᵣ| + |Aᵢ|)(|Bᵣ| + |Bᵢ|) · 2, which exceeds the classical bound
//!   by any factor where Cᵢ cancels (Aᵣ ≈ −Aᵢ, say). Normwise both are
//!   stable; componentwise only the classical form is.

use rayon::prelude::*;

use crate::cpu::packed::workspace::{Pool, Workspace};
use crate::element::Element;
use crate::error::Error;
use crate::executor::{Executor, Report};
use crate::gemm::Gemm;
use crate::matrix::{MatMut, MatRef, Matrix};
pub use crate::options::ComplexForm;
use crate::options::GemmOptions;
use crate::tunables::{COMPLEX_PARALLEL_MIN_ELEMENTS, COMPLEX_PLANAR_OUTPUT_PART_BYTES};

/// A complex matrix read as two real views of one shape.
#[derive(Debug, Clone, Copy)]
pub struct SplitRef<'a, T: Element> {
    /// The real parts.
    pub re: MatRef<'a, T>,
    /// The imaginary parts.
    pub im: MatRef<'a, T>,
}

/// A complex matrix written as two real views of one shape that share no
/// element.
#[derive(Debug)]
pub struct SplitMut<'a, T: Element> {
    /// The real parts.
    pub re: MatMut<'a, T>,
    /// The imaginary parts.
    pub im: MatMut<'a, T>,
}

/// A complex matrix that owns its parts: two real matrices of one shape,
/// as files and front ends hand complex matrices over.
#[derive(Debug, Clone, PartialEq)]
pub struct ComplexMatrix<T: Element> {
    re: Matrix<T>,
    im: Matrix<T>,
}

impl<T: Element> ComplexMatrix<T> {
    /// The matrix re + i·im; [`Error::OutputShape`] when the parts' shapes
    /// differ.
    pub fn new(re: Matrix<T>, im: Matrix<T>) -> Result<Self, Error> {
        if re.shape() != im.shape() {
            return Err(Error::OutputShape {
                expected: re.shape(),
                got: im.shape(),
            });
        }
        Ok(ComplexMatrix { re, im })
    }

    /// A rows×cols matrix of zeros, or [`Error::SizeOverflow`].
    pub fn try_zeros(rows: usize, cols: usize) -> Result<Self, Error> {
        Ok(ComplexMatrix {
            re: Matrix::try_zeros(rows, cols)?,
            im: Matrix::try_zeros(rows, cols)?,
        })
    }

    /// `re` as a complex matrix (imaginary parts zero).
    pub fn from_real(re: Matrix<T>) -> Result<Self, Error> {
        let im = Matrix::try_zeros(re.rows(), re.cols())?;
        Ok(ComplexMatrix { re, im })
    }

    /// The elements (re, im) of a row-major sequence of pairs, as numpy's
    /// complex arrays and .npy files store them.
    pub fn from_pairs(
        rows: usize,
        cols: usize,
        pairs: impl IntoIterator<Item = (T, T)>,
    ) -> Result<Self, Error> {
        let (re, im): (Vec<T>, Vec<T>) = pairs.into_iter().unzip();
        Self::new(
            Matrix::from_vec(rows, cols, re)?,
            Matrix::from_vec(rows, cols, im)?,
        )
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        self.re.shape()
    }

    /// The real parts.
    pub fn re(&self) -> &Matrix<T> {
        &self.re
    }

    /// The imaginary parts.
    pub fn im(&self) -> &Matrix<T> {
        &self.im
    }

    /// Element (i, j) as (re, im).
    ///
    /// # Panics
    /// Out of bounds, as [`Matrix::get`].
    pub fn get(&self, i: usize, j: usize) -> (T, T) {
        (self.re.get(i, j), self.im.get(i, j))
    }

    /// The elements as (re, im) pairs in row-major order.
    pub fn pairs(&self) -> impl Iterator<Item = (T, T)> + '_ {
        self.re
            .as_slice()
            .iter()
            .copied()
            .zip(self.im.as_slice().iter().copied())
    }

    /// The parts, real first.
    pub fn into_parts(self) -> (Matrix<T>, Matrix<T>) {
        (self.re, self.im)
    }

    /// The real 2m×2k block [[Aᵣ, −Aᵢ], [Aᵢ, Aᵣ]] of this m×k matrix A: the
    /// left factor of the real embedding, whose product with B's
    /// [`ComplexMatrix::stacked`] is C's, and whose |A||B| is the classical
    /// complex product's componentwise scale.
    pub fn embedded(&self) -> Result<Matrix<T>, Error> {
        let (m, k) = self.shape();
        Matrix::try_from_fn(2 * m, 2 * k, |i, p| {
            let (re, im) = self.get(i % m, p % k);
            match (i < m, p < k) {
                (true, true) | (false, false) => re,
                (true, false) => T::ZERO.sub(im),
                (false, true) => im,
            }
        })
    }

    /// The parts stacked, [Aᵣ; Aᵢ] (2m×n).
    pub fn stacked(&self) -> Result<Matrix<T>, Error> {
        let (m, n) = self.shape();
        Matrix::try_from_fn(2 * m, n, |i, j| match i < m {
            true => self.re.get(i, j),
            false => self.im.get(i - m, j),
        })
    }

    /// The matrix as split views, for [`multiply`].
    pub fn as_split(&self) -> SplitRef<'_, T> {
        SplitRef {
            re: self.re.as_ref(),
            im: self.im.as_ref(),
        }
    }

    /// The matrix as split views to write, for [`multiply`].
    pub fn as_split_mut(&mut self) -> SplitMut<'_, T> {
        SplitMut {
            re: self.re.as_mut(),
            im: self.im.as_mut(),
        }
    }
}

/// Checks a complex C ≈ A·B of `form` through the real embedding
/// [`ComplexMatrix::embedded`]·[`ComplexMatrix::stacked`] = [Cᵣ; Cᵢ] with
/// the real verifier ([`crate::verify::verify_with_growth`]), allowing
/// `growth` times the classical complex bound, and four times that for
/// 3M, whose imaginary part is bounded by (|Aᵣ|+|Aᵢ|)(|Bᵣ|+|Bᵢ|) instead
/// (Higham §23.2.4).
pub fn verify<T: Element>(
    a: &ComplexMatrix<T>,
    b: &ComplexMatrix<T>,
    c: &ComplexMatrix<T>,
    growth: f64,
    form: ComplexForm,
) -> Result<crate::verify::Verdict, Error> {
    let growth = match form {
        ComplexForm::Classical => growth,
        ComplexForm::Gauss => 4.0 * growth,
    };
    crate::verify::verify_with_growth(
        a.embedded()?.as_ref(),
        b.stacked()?.as_ref(),
        c.stacked()?.as_ref(),
        growth,
    )
}

/// C ← α·A·B + β·C for complex A (m×k), B (k×n) and C (m×n) as split
/// planes, α and β as (re, im), with no reports: for front ends that
/// answer nothing but C (a BLAS's zgemm). As the reference BLAS: nothing
/// for an empty C, or for α = 0 or k = 0 with β = 1; C ← β·C for α = 0 or
/// k = 0; β = 0 never reads C (NaN there is ignored). A product the
/// executor runs at once ([`Executor::complex_direct`]: small ones on the
/// CPU) runs there; any other is [`multiply`]'s, into C itself where α = 1
/// and β = 0, else into planes that α and β then combine with C.
///
/// # Errors
/// As [`multiply`]; on an error C's contents are unspecified.
#[allow(clippy::too_many_arguments)]
pub fn gemm<E: Executor, T: Element>(
    executor: &E,
    alpha: [T; 2],
    a: SplitRef<'_, T>,
    b: SplitRef<'_, T>,
    beta: [T; 2],
    mut c: SplitMut<'_, T>,
    form: ComplexForm,
    opts: &GemmOptions,
) -> Result<(), Error> {
    check_parts(&a, &b, &c)?;
    let ((m, k), n) = (a.re.shape(), b.re.cols());
    let (zero, one) = ([T::ZERO; 2], [T::ONE, T::ZERO]);
    if m == 0 || n == 0 || ((alpha == zero || k == 0) && beta == one) {
        return Ok(());
    }
    let scaled = |t: [T; 2], c: &SplitMut<'_, T>, (i, j): (usize, usize)| {
        crate::cpu::complex_direct::scaled(alpha, t, beta, || [c.re.get(i, j), c.im.get(i, j)])
    };
    if alpha == zero || k == 0 {
        for i in 0..m {
            for j in 0..n {
                let z = scaled(zero, &c, (i, j));
                c.re.set(i, j, z[0]);
                c.im.set(i, j, z[1]);
            }
        }
        return Ok(());
    }
    if let Some(done) = executor.complex_direct(
        alpha,
        (a.re, a.im),
        (b.re, b.im),
        beta,
        (c.re.rb_mut(), c.im.rb_mut()),
        form,
        opts,
    ) {
        return done;
    }
    if alpha == one && beta == zero {
        return multiply(executor, a, b, c, form, opts).map(|_| ());
    }
    let mut t = ComplexMatrix::try_zeros(m, n)?;
    multiply(executor, a, b, t.as_split_mut(), form, opts)?;
    for i in 0..m {
        for j in 0..n {
            let z = scaled(t.get(i, j).into(), &c, (i, j));
            c.re.set(i, j, z[0]);
            c.im.set(i, j, z[1]);
        }
    }
    Ok(())
}

/// C ← A·B for complex A (m×k) and B (k×n) as split planes, on `executor`
/// with the real products `opts` asks for; returns the real products'
/// reports, in order.
///
/// # Errors
/// [`Error::DimensionMismatch`] and [`Error::OutputShape`] for shapes that
/// do not multiply (a part of another shape than its partner included);
/// the real products' own errors. On an error C's contents are
/// unspecified.
pub fn multiply<E: Executor, T: Element>(
    executor: &E,
    a: SplitRef<'_, T>,
    b: SplitRef<'_, T>,
    mut c: SplitMut<'_, T>,
    form: ComplexForm,
    opts: &GemmOptions,
) -> Result<Vec<Report>, Error> {
    check_parts(&a, &b, &c)?;
    // An executor's own complex product, where it has one for `opts`
    // (cuBLAS's on a GPU asked for `cublas`).
    if let Some(report) = executor.complex_product(
        (a.re, a.im),
        (b.re, b.im),
        (c.re.rb_mut(), c.im.rb_mut()),
        form,
        opts,
    ) {
        return report.map(|r| vec![r]);
    }
    // The layouts are normalised once here: parts strided along their rows
    // (numpy's interleaved storage) are copied into contiguous planes in
    // one pass, so that every real product reads contiguous rows; 3M's
    // sums of the parts are made in the same pass.
    let gauss = form == ComplexForm::Gauss;
    let ((m, k), n) = (a.re.shape(), b.re.cols());
    let (copy_a, copy_b) = (!rows_contiguous(a), !rows_contiguous(b));
    let planar_output =
        !gauss || COMPLEX_PLANAR_OUTPUT_PART_BYTES.contains(&std::mem::size_of::<T>());
    let copy_c = planar_output
        && !rows_contiguous(SplitRef {
            re: c.re.rb(),
            im: c.im.rb(),
        });
    let room = |needed: bool, len: usize| if needed { len } else { 0 };
    let lens = [
        room(copy_a, m * k),
        room(copy_a, m * k),
        room(gauss, m * k),
        room(copy_b, k * n),
        room(copy_b, k * n),
        room(gauss, k * n),
        room(gauss, m * n),
        room(copy_c, m * n),
        room(copy_c, m * n),
    ];
    // The planes, sums and P₂ come from this thread's pool, kept between
    // calls: fresh pages for them cost more than the passes that fill them
    // (0.4–2.3 s of kernel time for a 4096² c128 3M product on the 2-core
    // Zen 4 guest, more right after numpy freed its own arrays), so a
    // steady stream of complex products makes none after the first. Every
    // buffer is written in full before it is read.
    let mut workspace = Workspace::take_from::<T>(Pool::Complex, &lens);
    let Ok([a_re, a_im, a_sum, b_re, b_im, b_sum, p2, c_re, c_im]) =
        <[&mut [T]; 9]>::try_from(workspace.split::<T>(&lens))
    else {
        unreachable!("split returns one buffer per length");
    };
    let (a, sum_a) = normalised(a, (a_re, a_im, a_sum), copy_a, gauss)?;
    let (b, sum_b) = normalised(b, (b_re, b_im, b_sum), copy_b, gauss)?;
    // A strided C (numpy's again) of the types that gain by it is computed
    // in contiguous planes and stored once at the end: the real products,
    // and Winograd's updates of C's quadrants, then write whole rows.
    let mut target = match copy_c {
        true => SplitMut {
            re: MatMut::from_slice(&mut *c_re, m, n)?,
            im: MatMut::from_slice(&mut *c_im, m, n)?,
        },
        false => SplitMut {
            re: c.re.rb_mut(),
            im: c.im.rb_mut(),
        },
    };
    let minus_one = T::ZERO.sub(T::ONE);
    // One plan for the products that overwrite, one for those that add.
    let overwrite = Gemm {
        alpha: T::ONE,
        a: a.re,
        b: b.re,
        beta: T::ZERO,
        c: target.re.rb_mut(),
    };
    let fresh = executor.plan(overwrite.problem(), opts)?;
    let adding = executor.plan(overwrite.problem().reading_c(true), opts)?;
    let mut reports = vec![executor.execute(&fresh, overwrite)?];
    match form {
        ComplexForm::Classical => {
            let steps = [
                (minus_one, a.im, b.im, T::ONE, true),
                (T::ONE, a.re, b.im, T::ZERO, false),
                (T::ONE, a.im, b.re, T::ONE, false),
            ];
            for (alpha, x, y, beta, real) in steps {
                let part = if real {
                    target.re.rb_mut()
                } else {
                    target.im.rb_mut()
                };
                let plan = if beta == T::ZERO { &fresh } else { &adding };
                let product = Gemm {
                    alpha,
                    a: x,
                    b: y,
                    beta,
                    c: part,
                };
                reports.push(executor.execute(plan, product)?);
            }
        }
        ComplexForm::Gauss => {
            let mut p2 = MatMut::from_slice(p2, m, n)?;
            reports.push(executor.execute(
                &fresh,
                Gemm {
                    alpha: T::ONE,
                    a: a.im,
                    b: b.im,
                    beta: T::ZERO,
                    c: p2.rb_mut(),
                },
            )?);
            let (Some(sum_a), Some(sum_b)) = (sum_a, sum_b) else {
                unreachable!("normalised made the sums for 3M");
            };
            reports.push(executor.execute(
                &fresh,
                Gemm {
                    alpha: T::ONE,
                    a: sum_a,
                    b: sum_b,
                    beta: T::ZERO,
                    c: target.im.rb_mut(),
                },
            )?);
            // Cᵣ = P₁ − P₂ and Cᵢ = P₃ − P₁ − P₂ (P₁ is in Cᵣ, P₃ in Cᵢ).
            combine(target.re.rb_mut(), target.im.rb_mut(), p2.rb());
        }
    }
    if copy_c {
        store(
            MatRef::from_slice(c_re, m, n)?,
            MatRef::from_slice(c_im, m, n)?,
            c,
        );
    }
    Ok(reports)
}

/// `re` and `im` (contiguous) written into `out`'s parts, over bands of
/// rows on the thread pool.
fn store<T: Element>(re: MatRef<'_, T>, im: MatRef<'_, T>, out: SplitMut<'_, T>) {
    let elements = out.re.rows() * out.re.cols();
    on_bands(
        row_bands(out.re, out.im),
        elements,
        |(start, mut to_re, mut to_im)| {
            for i in 0..to_re.rows() {
                let (Some(from_re), Some(from_im)) = (re.row(start + i), im.row(start + i)) else {
                    unreachable!("the planes are contiguous");
                };
                for (j, (&r, &m)) in from_re.iter().zip(from_im).enumerate() {
                    // SAFETY: i < the band's rows and j < cols, its shape; the
                    // two parts are distinct views that share no element.
                    unsafe {
                        *to_re.get_unchecked_mut(i, j) = r;
                        *to_im.get_unchecked_mut(i, j) = m;
                    }
                }
            }
        },
    );
}

/// Whether both parts of `x` have contiguous rows.
fn rows_contiguous<T: Element>(x: SplitRef<'_, T>) -> bool {
    let contiguous = |m: MatRef<'_, T>| m.cols() <= 1 || m.col_stride() == 1;
    contiguous(x.re) && contiguous(x.im)
}

/// A complex operand's parts as the real products read them: `x` itself,
/// or, when `copy`, its parts copied into `re` and `im` in one pass (numpy's
/// interleaved storage gives parts with a column stride of 2); with
/// `with_sum`, also the sum of the parts, written into `sum` in the same
/// pass. Each buffer holds the operand's elements, or none when unused.
#[allow(clippy::type_complexity)]
fn normalised<'r, T: Element>(
    x: SplitRef<'r, T>,
    (re, im, sum): (&'r mut [T], &'r mut [T], &'r mut [T]),
    copy: bool,
    with_sum: bool,
) -> Result<(SplitRef<'r, T>, Option<MatRef<'r, T>>), Error> {
    let (rows, cols) = x.re.shape();
    let copy_row = |i: usize, r: &mut [T], m: &mut [T]| {
        for (j, (r, m)) in r.iter_mut().zip(m.iter_mut()).enumerate() {
            // SAFETY: i < rows and j < cols, the parts' shape.
            unsafe { (*r, *m) = (x.re.get_unchecked(i, j), x.im.get_unchecked(i, j)) };
        }
    };
    if cols > 0 && rows * cols < COMPLEX_PARALLEL_MIN_ELEMENTS {
        // The same passes on this thread: waking the pool costs more.
        for i in 0..rows {
            let line = i * cols..(i + 1) * cols;
            let sum_row = with_sum.then(|| &mut sum[line.clone()]);
            match copy {
                true => {
                    let (r, m) = (&mut re[line.clone()], &mut im[line]);
                    copy_row(i, r, m);
                    if let Some(s) = sum_row {
                        add_rows(s, r, m);
                    }
                }
                false => {
                    if let Some(s) = sum_row {
                        let (Some(p), Some(q)) = (x.re.row(i), x.im.row(i)) else {
                            unreachable!("the rows were found contiguous");
                        };
                        add_rows(s, p, q);
                    }
                }
            }
        }
    } else if cols > 0 {
        let sums = with_sum.then(|| sum.par_chunks_mut(cols));
        match copy {
            false => {
                if let Some(sums) = sums {
                    sums.enumerate().for_each(|(i, out)| {
                        let (Some(p), Some(q)) = (x.re.row(i), x.im.row(i)) else {
                            unreachable!("the rows were found contiguous");
                        };
                        add_rows(out, p, q);
                    });
                }
            }
            true => {
                let lines = re
                    .par_chunks_mut(cols)
                    .zip(im.par_chunks_mut(cols))
                    .enumerate();
                match sums {
                    Some(sums) => lines.zip(sums).for_each(|((i, (r, m)), s)| {
                        copy_row(i, r, m);
                        add_rows(s, r, m);
                    }),
                    None => lines.for_each(|(i, (r, m))| copy_row(i, r, m)),
                }
            }
        }
    }
    let parts = match copy {
        false => x,
        true => SplitRef {
            re: MatRef::from_slice(re, rows, cols)?,
            im: MatRef::from_slice(im, rows, cols)?,
        },
    };
    let sum = match with_sum {
        true => Some(MatRef::from_slice(sum, rows, cols)?),
        false => None,
    };
    Ok((parts, sum))
}

/// out ← p + q, element by element (rows of one length).
fn add_rows<T: Element>(out: &mut [T], p: &[T], q: &[T]) {
    for ((o, &p), &q) in out.iter_mut().zip(p).zip(q) {
        *o = p.add(q);
    }
}

/// `job` over `bands` of an output of `elements` elements: on the thread
/// pool from [`COMPLEX_PARALLEL_MIN_ELEMENTS`], else on this thread.
fn on_bands<B: Send>(bands: Vec<B>, elements: usize, job: impl Fn(B) + Sync + Send) {
    match elements >= COMPLEX_PARALLEL_MIN_ELEMENTS {
        true => bands.into_par_iter().for_each(job),
        false => bands.into_iter().for_each(job),
    }
}

/// The two parts of a complex output cut into bands of rows for the
/// thread pool (four per thread, to even out uneven threads): each band's
/// first row, and its rows of either part.
#[allow(clippy::type_complexity)]
fn row_bands<'a, T: Element>(
    re: MatMut<'a, T>,
    im: MatMut<'a, T>,
) -> Vec<(usize, MatMut<'a, T>, MatMut<'a, T>)> {
    let rows = re.rows();
    let band = rows.div_ceil(4 * rayon::current_num_threads()).max(1);
    let mut bands = Vec::new();
    let (mut re, mut im, mut start) = (re, im, 0);
    while start < rows {
        let take = band.min(rows - start);
        let (re_head, re_tail) = re.split_at_row(take);
        let (im_head, im_tail) = im.split_at_row(take);
        bands.push((start, re_head, im_head));
        (re, im, start) = (re_tail, im_tail, start + take);
    }
    bands
}

/// 3M's last step over bands of rows on the thread pool: Cᵣ ← P₁ − P₂ and
/// Cᵢ ← P₃ − P₁ − P₂, with P₁ in `re` and P₃ in `im` (of P₂'s shape).
fn combine<T: Element>(re: MatMut<'_, T>, im: MatMut<'_, T>, p2: MatRef<'_, T>) {
    let cols = re.cols();
    let elements = re.rows() * cols;
    on_bands(row_bands(re, im), elements, |(start, mut re, mut im)| {
        for i in 0..re.rows() {
            let two = p2.row(start + i);
            if let (Some(re_row), Some(two)) = (re.row_mut(i), two) {
                if let Some(im_row) = im.row_mut(i) {
                    for ((r, c), &q) in re_row.iter_mut().zip(im_row).zip(two) {
                        let p1 = *r;
                        (*r, *c) = (p1.sub(q), c.sub(p1).sub(q));
                    }
                    continue;
                }
            }
            for j in 0..cols {
                // SAFETY: i < re.rows() = im.rows(), start + i < p2.rows()
                // and j < cols, the shapes of the band and of P₂; re and
                // im are distinct views that share no element.
                unsafe {
                    let q = p2.get_unchecked(start + i, j);
                    let r = re.get_unchecked_mut(i, j);
                    let p1 = *r;
                    *r = p1.sub(q);
                    let c = im.get_unchecked_mut(i, j);
                    *c = c.sub(p1).sub(q);
                }
            }
        }
    });
}

/// That each operand's parts share a shape and the operands multiply.
fn check_parts<T: Element>(
    a: &SplitRef<'_, T>,
    b: &SplitRef<'_, T>,
    c: &SplitMut<'_, T>,
) -> Result<(), Error> {
    for (re, im) in [(a.re.shape(), a.im.shape()), (b.re.shape(), b.im.shape())] {
        if re != im {
            return Err(Error::InvalidOption(format!(
                "a complex operand's parts differ in shape: {}×{} and {}×{}",
                re.0, re.1, im.0, im.1
            )));
        }
    }
    if c.re.shape() != c.im.shape() {
        return Err(Error::InvalidOption(
            "the complex result's parts differ in shape".into(),
        ));
    }
    if a.re.cols() != b.re.rows() {
        return Err(Error::DimensionMismatch {
            a: a.re.shape(),
            b: b.re.shape(),
        });
    }
    if c.re.shape() != (a.re.rows(), b.re.cols()) {
        return Err(Error::OutputShape {
            expected: (a.re.rows(), b.re.cols()),
            got: c.re.shape(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Context;
    use crate::options::Algorithm;

    fn split<'a>(re: &'a Matrix<f64>, im: &'a Matrix<f64>) -> SplitRef<'a, f64> {
        SplitRef {
            re: re.as_ref(),
            im: im.as_ref(),
        }
    }

    fn split_mut<'a>(re: &'a mut Matrix<f64>, im: &'a mut Matrix<f64>) -> SplitMut<'a, f64> {
        SplitMut {
            re: re.as_mut(),
            im: im.as_mut(),
        }
    }

    /// Gaussian-integer operands: every product is exact in f64, so both
    /// forms must give the exact complex product.
    fn operands(m: usize, k: usize, n: usize) -> [Matrix<f64>; 4] {
        let f = |seed: usize| move |i: usize, j: usize| ((i * 7 + j * 13 + seed) % 17) as f64 - 8.0;
        [
            Matrix::from_fn(m, k, f(1)),
            Matrix::from_fn(m, k, f(5)),
            Matrix::from_fn(k, n, f(3)),
            Matrix::from_fn(k, n, f(11)),
        ]
    }

    /// That C is exactly the naive complex sums of A = Aᵣ + iAᵢ and
    /// B = Bᵣ + iBᵢ (Gaussian integers: every sum is exact).
    fn assert_naive(
        [ar, ai, br, bi]: [&Matrix<f64>; 4],
        (cr, ci): (&Matrix<f64>, &Matrix<f64>),
        what: &str,
    ) {
        let ((m, k), n) = (ar.shape(), br.cols());
        for i in 0..m {
            for j in 0..n {
                let (mut re, mut im) = (0.0, 0.0);
                for p in 0..k {
                    re += ar.get(i, p) * br.get(p, j) - ai.get(i, p) * bi.get(p, j);
                    im += ar.get(i, p) * bi.get(p, j) + ai.get(i, p) * br.get(p, j);
                }
                assert_eq!((cr.get(i, j), ci.get(i, j)), (re, im), "{what} ({i}, {j})");
            }
        }
    }

    #[test]
    fn both_forms_give_the_exact_product_of_gaussian_integers() {
        let ctx = Context::cpu();
        for (m, k, n) in [
            (1, 1, 1),
            (5, 7, 3),
            (33, 17, 65),
            (64, 96, 40),
            (0, 4, 3),
            (4, 0, 3),
        ] {
            let [ar, ai, br, bi] = operands(m, k, n);
            for form in [ComplexForm::Classical, ComplexForm::Gauss] {
                for algorithm in [Algorithm::Packed, Algorithm::Naive, Algorithm::Winograd] {
                    let opts = GemmOptions::new(algorithm);
                    let mut cr = Matrix::<f64>::from_fn(m, n, |_, _| f64::NAN);
                    let mut ci = Matrix::<f64>::from_fn(m, n, |_, _| f64::NAN);
                    let reports = multiply(
                        &ctx,
                        split(&ar, &ai),
                        split(&br, &bi),
                        split_mut(&mut cr, &mut ci),
                        form,
                        &opts,
                    )
                    .unwrap();
                    assert_eq!(reports.len(), form.products());
                    let what = format!("{form:?} {algorithm:?} {m}×{k}×{n}");
                    assert_naive([&ar, &ai, &br, &bi], (&cr, &ci), &what);
                }
            }
        }
    }

    #[test]
    fn a_cpu_context_has_no_complex_product_of_its_own() {
        // Only a GPU context has one (cuBLAS's); on the CPU every
        // algorithm goes through the real products, and `cublas` is
        // refused there with a typed error, C untouched by a product.
        let ctx = Context::cpu();
        let (m, k, n) = (3, 4, 5);
        let [ar, ai, br, bi] = operands(m, k, n);
        let mut cr = Matrix::<f64>::zeros(m, n);
        let mut ci = Matrix::<f64>::zeros(m, n);
        for algorithm in [Algorithm::Cublas, Algorithm::Packed, Algorithm::Auto] {
            let own = ctx.complex_product(
                (ar.as_ref(), ai.as_ref()),
                (br.as_ref(), bi.as_ref()),
                (cr.as_mut(), ci.as_mut()),
                ComplexForm::Classical,
                &GemmOptions::new(algorithm),
            );
            assert!(own.is_none(), "{algorithm:?}");
        }
        let refused = multiply(
            &ctx,
            split(&ar, &ai),
            split(&br, &bi),
            split_mut(&mut cr, &mut ci),
            ComplexForm::Classical,
            &GemmOptions::new(Algorithm::Cublas),
        );
        assert!(refused.is_err());
    }

    #[test]
    fn interleaved_storage_is_read_and_written_through_strided_views() {
        // numpy's complex128 layout: re, im, re, im, ... row by row.
        let (m, k, n) = (6, 5, 4);
        let [ar, ai, br, bi] = operands(m, k, n);
        let interleave = |re: &Matrix<f64>, im: &Matrix<f64>| {
            let (rows, cols) = re.shape();
            let mut v = vec![0.0; 2 * rows * cols];
            for i in 0..rows {
                for j in 0..cols {
                    v[2 * (i * cols + j)] = re.get(i, j);
                    v[2 * (i * cols + j) + 1] = im.get(i, j);
                }
            }
            v
        };
        let (a, b) = (interleave(&ar, &ai), interleave(&br, &bi));
        let mut c = vec![f64::NAN; 2 * m * n];
        fn view(v: &[f64], rows: usize, cols: usize, offset: usize) -> MatRef<'_, f64> {
            MatRef::from_slice_strided(&v[offset..], rows, cols, 2 * cols, 2).unwrap()
        }
        let base = c.as_mut_ptr();
        // SAFETY: the two views take alternate elements of one live buffer
        // (even and odd indices), so they share none; each stays inside it
        // (offset 0 or 1, stride 2, 2·m·n elements).
        let (c_re, c_im) = unsafe {
            (
                MatMut::from_raw_parts(base, m, n, 2 * n, 2),
                MatMut::from_raw_parts(base.add(1), m, n, 2 * n, 2),
            )
        };
        multiply(
            &Context::cpu(),
            SplitRef {
                re: view(&a, m, k, 0),
                im: view(&a, m, k, 1),
            },
            SplitRef {
                re: view(&b, k, n, 0),
                im: view(&b, k, n, 1),
            },
            SplitMut { re: c_re, im: c_im },
            ComplexForm::Classical,
            &GemmOptions::default(),
        )
        .unwrap();
        let mut cr = Matrix::<f64>::zeros(m, n);
        let mut ci = Matrix::<f64>::zeros(m, n);
        multiply(
            &Context::cpu(),
            split(&ar, &ai),
            split(&br, &bi),
            split_mut(&mut cr, &mut ci),
            ComplexForm::Classical,
            &GemmOptions::default(),
        )
        .unwrap();
        assert_eq!(c, interleave(&cr, &ci));
    }

    /// The planes come from a pool kept between calls, so each call finds
    /// the last one's values in its buffers: products of several shapes,
    /// both forms, interleaved and split operands in turn on one thread,
    /// each exact on Gaussian integers against the naive complex sums.
    #[test]
    fn reused_planes_never_leak_into_a_later_product() {
        for (round, &(m, k, n)) in [(9, 7, 5), (3, 2, 4), (12, 11, 1), (1, 1, 1), (8, 13, 6)]
            .iter()
            .enumerate()
        {
            let [ar, ai, br, bi] = operands(m, k, n);
            let pairs = |re: &Matrix<f64>, im: &Matrix<f64>| -> Vec<f64> {
                re.as_slice()
                    .iter()
                    .zip(im.as_slice())
                    .flat_map(|(&r, &i)| [r, i])
                    .collect()
            };
            let (a, b) = (pairs(&ar, &ai), pairs(&br, &bi));
            fn view(v: &[f64], rows: usize, cols: usize, offset: usize) -> MatRef<'_, f64> {
                MatRef::from_slice_strided(&v[offset..], rows, cols, 2 * cols, 2).unwrap()
            }
            for form in [ComplexForm::Classical, ComplexForm::Gauss] {
                let (mut cr, mut ci) = (
                    Matrix::filled(m, n, f64::NAN),
                    Matrix::filled(m, n, f64::NAN),
                );
                // Interleaved A on even rounds, interleaved B on odd ones.
                let (x, y) = match round % 2 {
                    0 => (
                        SplitRef {
                            re: view(&a, m, k, 0),
                            im: view(&a, m, k, 1),
                        },
                        split(&br, &bi),
                    ),
                    _ => (
                        split(&ar, &ai),
                        SplitRef {
                            re: view(&b, k, n, 0),
                            im: view(&b, k, n, 1),
                        },
                    ),
                };
                multiply(
                    &Context::cpu(),
                    x,
                    y,
                    split_mut(&mut cr, &mut ci),
                    form,
                    &GemmOptions::default(),
                )
                .unwrap();
                assert_naive(
                    [&ar, &ai, &br, &bi],
                    (&cr, &ci),
                    &format!("{m}×{k}×{n} {form:?}"),
                );
                // The same product into interleaved storage (computed in
                // pooled planes and stored at the end).
                let mut c = vec![f64::NAN; 2 * m * n];
                let base = c.as_mut_ptr();
                // SAFETY: the two views take alternate elements of one live
                // buffer, so they share none; each stays inside it.
                let (c_re, c_im) = unsafe {
                    (
                        MatMut::from_raw_parts(base, m, n, 2 * n, 2),
                        MatMut::from_raw_parts(base.add(1), m, n, 2 * n, 2),
                    )
                };
                let out = SplitMut { re: c_re, im: c_im };
                multiply(&Context::cpu(), x, y, out, form, &GemmOptions::default()).unwrap();
                assert_eq!(c, pairs(&cr, &ci), "{m}×{k}×{n} {form:?} interleaved C");
            }
        }
    }

    /// complex64's strided output goes through pooled planes
    /// ([`COMPLEX_PLANAR_OUTPUT_PART_BYTES`]): numpy's interleaved storage written in
    /// full, exact on Gaussian integers, both forms, shapes in turn.
    #[test]
    fn interleaved_f32_output_is_stored_from_planes() {
        assert!(COMPLEX_PLANAR_OUTPUT_PART_BYTES.contains(&std::mem::size_of::<f32>()));
        for &(m, k, n) in &[(9, 7, 5), (1, 1, 1), (12, 11, 1), (3, 2, 4)] {
            let [ar, ai, br, bi] = operands(m, k, n);
            let single =
                |x: &Matrix<f64>| Matrix::from_fn(x.rows(), x.cols(), |i, j| x.get(i, j) as f32);
            let (sr, si, tr, ti) = (single(&ar), single(&ai), single(&br), single(&bi));
            for form in [ComplexForm::Classical, ComplexForm::Gauss] {
                let mut c = vec![f32::NAN; 2 * m * n];
                let base = c.as_mut_ptr();
                // SAFETY: the two views take alternate elements of one live
                // buffer, so they share none; each stays inside it.
                let out = unsafe {
                    SplitMut {
                        re: MatMut::from_raw_parts(base, m, n, 2 * n, 2),
                        im: MatMut::from_raw_parts(base.add(1), m, n, 2 * n, 2),
                    }
                };
                let a = SplitRef {
                    re: sr.as_ref(),
                    im: si.as_ref(),
                };
                let b = SplitRef {
                    re: tr.as_ref(),
                    im: ti.as_ref(),
                };
                multiply(&Context::cpu(), a, b, out, form, &GemmOptions::default()).unwrap();
                let (cr, ci) = (
                    Matrix::from_fn(m, n, |i, j| f64::from(c[2 * (i * n + j)])),
                    Matrix::from_fn(m, n, |i, j| f64::from(c[2 * (i * n + j) + 1])),
                );
                assert_naive(
                    [&ar, &ai, &br, &bi],
                    (&cr, &ci),
                    &format!("f32 {m}×{k}×{n} {form:?}"),
                );
            }
        }
    }

    #[test]
    fn shapes_are_checked() {
        let [ar, ai, br, bi] = operands(3, 4, 5);
        let mut cr = Matrix::<f64>::zeros(3, 5);
        let mut ci = Matrix::<f64>::zeros(3, 4);
        let err = multiply(
            &Context::cpu(),
            split(&ar, &ai),
            split(&br, &bi),
            split_mut(&mut cr, &mut ci),
            ComplexForm::Gauss,
            &GemmOptions::default(),
        );
        assert!(err.is_err());
    }
}
