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
use serde::Serialize;

use crate::element::Element;
use crate::error::Error;
use crate::executor::{Executor, Report};
use crate::gemm::Gemm;
use crate::matrix::{MatMut, MatRef, Matrix};
use crate::options::{Accuracy, GemmOptions};

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

/// How a complex product is made of real ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ComplexForm {
    /// Four real products: the complex product's own rounding bound.
    Classical,
    /// Three real products (Gauss's trick, "3M"): a quarter fewer
    /// multiplications, a weaker componentwise bound on the imaginary part.
    Gauss,
}

impl ComplexForm {
    /// The form a level runs: the classical four real products at
    /// `native` (the complex product's own componentwise bound, as
    /// zgemm's), Gauss's three (3M) at the relaxed levels, which bound
    /// products norm-wise.
    pub fn for_level(level: Accuracy) -> ComplexForm {
        match level {
            Accuracy::Native => ComplexForm::Classical,
            _ => ComplexForm::Gauss,
        }
    }

    /// The form's name: "4m" or "3m".
    pub fn name(self) -> &'static str {
        match self {
            ComplexForm::Classical => "4m",
            ComplexForm::Gauss => "3m",
        }
    }

    /// Real products per complex product.
    pub fn products(self) -> usize {
        match self {
            ComplexForm::Classical => 4,
            ComplexForm::Gauss => 3,
        }
    }
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
    let minus_one = T::ZERO.sub(T::ONE);
    // One plan for the products that overwrite, one for those that add.
    let overwrite = Gemm {
        alpha: T::ONE,
        a: a.re,
        b: b.re,
        beta: T::ZERO,
        c: c.re.rb_mut(),
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
                let target = if real { c.re.rb_mut() } else { c.im.rb_mut() };
                let plan = if beta == T::ZERO { &fresh } else { &adding };
                let product = Gemm {
                    alpha,
                    a: x,
                    b: y,
                    beta,
                    c: target,
                };
                reports.push(executor.execute(plan, product)?);
            }
        }
        ComplexForm::Gauss => {
            let (m, n) = c.re.shape();
            let mut p2 = Matrix::<T>::try_zeros(m, n)?;
            reports.push(executor.execute(
                &fresh,
                Gemm {
                    alpha: T::ONE,
                    a: a.im,
                    b: b.im,
                    beta: T::ZERO,
                    c: p2.as_mut(),
                },
            )?);
            let sum_a = sum_of(a.re, a.im)?;
            let sum_b = sum_of(b.re, b.im)?;
            reports.push(executor.execute(
                &fresh,
                Gemm {
                    alpha: T::ONE,
                    a: sum_a.as_ref(),
                    b: sum_b.as_ref(),
                    beta: T::ZERO,
                    c: c.im.rb_mut(),
                },
            )?);
            // Cᵣ = P₁ − P₂ and Cᵢ = P₃ − P₁ − P₂ (P₁ is in Cᵣ, P₃ in Cᵢ).
            combine(c.re.rb_mut(), c.im.rb_mut(), p2.as_ref());
        }
    }
    Ok(reports)
}

/// X + Y as a new matrix, rows on the thread pool: slices where the rows
/// are contiguous (the loop vectorizes), else element by element.
fn sum_of<T: Element>(x: MatRef<'_, T>, y: MatRef<'_, T>) -> Result<Matrix<T>, Error> {
    let (rows, cols) = x.shape();
    debug_assert_eq!(y.shape(), (rows, cols));
    let mut out = Matrix::<T>::try_zeros(rows, cols)?;
    if cols == 0 {
        return Ok(out);
    }
    out.as_mut_slice()
        .par_chunks_mut(cols)
        .enumerate()
        .for_each(|(i, row)| match (x.row(i), y.row(i)) {
            (Some(xs), Some(ys)) => {
                for ((o, &p), &q) in row.iter_mut().zip(xs).zip(ys) {
                    *o = p.add(q);
                }
            }
            _ => {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = x.get(i, j).add(y.get(i, j));
                }
            }
        });
    Ok(out)
}

/// 3M's last step over bands of rows on the thread pool: Cᵣ ← P₁ − P₂ and
/// Cᵢ ← P₃ − P₁ − P₂, with P₁ in `re` and P₃ in `im` (of P₂'s shape).
fn combine<T: Element>(re: MatMut<'_, T>, im: MatMut<'_, T>, p2: MatRef<'_, T>) {
    let (rows, cols) = re.shape();
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
    bands.into_par_iter().for_each(|(start, mut re, mut im)| {
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
                let (p1, p3, q) = (re.get(i, j), im.get(i, j), p2.get(start + i, j));
                re.set(i, j, p1.sub(q));
                im.set(i, j, p3.sub(p1).sub(q));
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
                    for i in 0..m {
                        for j in 0..n {
                            let (mut re, mut im) = (0.0, 0.0);
                            for p in 0..k {
                                re += ar.get(i, p) * br.get(p, j) - ai.get(i, p) * bi.get(p, j);
                                im += ar.get(i, p) * bi.get(p, j) + ai.get(i, p) * br.get(p, j);
                            }
                            assert_eq!(
                                (cr.get(i, j), ci.get(i, j)),
                                (re, im),
                                "{form:?} {algorithm:?} {m}×{k}×{n}"
                            );
                        }
                    }
                }
            }
        }
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
