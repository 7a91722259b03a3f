//! Verification of a computed product C against A·B.
//!
//! * **Integers** are compared exactly against a reference computed in
//!   i128 and reduced modulo 2^w, an implementation independent of every
//!   algorithm (wrapping arithmetic is a ring, so any correct algorithm
//!   agrees to the bit). Large products use Freivalds' check in Z/2^w with
//!   [`FREIVALDS_INT_VECTORS`] random vectors; each catches a wrong C with
//!   probability at least 1/2.
//! * **Floats** are accepted element by element against the first-order
//!   form of Higham's bound for classical summation,
//!   |c_ij − (AB)_ij| ≤ γ·(|A||B|)_ij with γ = f·g·(k+1)·u, where u is the
//!   unit roundoff, f = [`FLOAT_TOLERANCE_FACTOR`] and g an algorithm's growth
//!   factor (1 for classical algorithms), plus f·g·(k+1)·η for the absolute
//!   errors of gradual underflow (η the spacing of the subnormals). A componentwise test catches one
//!   wrong element, which a norm-wise test of a large matrix would not.
//!   - For m·n·k ≤ [`FULL_CHECK_MAX_MNK`] every element is checked against a
//!     reference computed in f64.
//!   - Above that, in O(n²): [`VERIFY_SAMPLED_LINES`] rows and columns of C
//!     (first, last and random ones) are checked element by element, and
//!     Freivalds' test compares C·x with A·(B·x) for random x against
//!     γ·|A|(|B||x|), which sees every element at once.
//!
//! * **Fast algorithms** (Strassen, Winograd) only satisfy norm-wise bounds:
//!   their sums mix entries of different rows and columns. A growth factor
//!   g > 1 therefore also grants every element the norm-wise allowance
//!   γ·k·‖A‖_max·‖B‖_max (Higham, §23.2.2), which bounds (|A||B|)_ij from
//!   above.
//!
//! * **NaN and ±∞** follow IEEE arithmetic, as in numpy: where the f64
//!   reference is NaN, C must hold NaN; where it is ±∞, the same infinity;
//!   where it is finite but beyond T's range, the infinity of its sign
//!   (overflow); where terms of the sum exceed T's range ((|A||B|)_ij
//!   does), any infinity or NaN, as T's own arithmetic may give. When A or B holds non-finite values, Freivalds' test
//!   covers the block of C whose rows of A and columns of B are finite
//!   (the others are left out of its sums); the rows and columns of C
//!   that meet a non-finite input are checked element by element, up to
//!   [`VERIFY_SAMPLED_LINES`] of each (sampled when there are more).
//!
//! The reported error is the relative Frobenius error ‖C − Ĉ‖/‖Ĉ‖ over the
//! checked elements whose reference is finite (all of them, or the sampled
//! rows and columns). For f64 products the reference elements are summed
//! in double-f64 (compensated), since plain f64 sums err as much as the
//! product checked: at n = 16384 cuBLAS dgemm's error measured 8.4e-16
//! against plain sums and 4.3e-15 against the exact product.

use rand::seq::index::sample;
use rand::Rng;
use rayon::prelude::*;

use crate::element::Element;
use crate::error::Error;
use crate::matrix::{check_product_shapes, MatRef};
use crate::random::seeded_rng;
use crate::tunables::{
    FREIVALDS_FLOAT_VECTORS, VERIFY_PARALLEL_MIN_ELEMENTS, VERIFY_ROWS_PER_TASK,
};
// The constants of the policy above, public so that a caller can state it.
pub use crate::tunables::{
    FLOAT_TOLERANCE_FACTOR, FREIVALDS_INT_VECTORS, FULL_CHECK_MAX_MNK, REFERENCE_MAX_ELEMENTS,
    VERIFY_SAMPLED_LINES,
};

/// How a product was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckMethod {
    /// Every element compared with a reference product.
    Full,
    /// Sampled rows and columns plus Freivalds' randomized test.
    Randomized,
}

impl CheckMethod {
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            CheckMethod::Full => "full",
            CheckMethod::Randomized => "randomized",
        }
    }
}

/// The outcome of a check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// How C was checked.
    pub method: CheckMethod,
    /// ‖C − Ĉ‖_F/‖Ĉ‖_F over the checked elements (0 for exact integers).
    pub rel_error: f64,
    /// Largest error of a checked quantity as a fraction of its bound:
    /// at most 1 passes; 0 for exact integers, ∞ for any integer mismatch or
    /// a NaN.
    pub bound_ratio: f64,
    /// Whether C passed.
    pub ok: bool,
}

/// Checks C ≈ A·B for a classical algorithm (growth factor 1).
pub fn verify<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatRef<'_, T>,
) -> Result<Verdict, Error> {
    verify_with_growth(a, b, c, 1.0)
}

/// Checks C ≈ A·B allowing `growth` times the classical float error bound
/// (fast algorithms such as Strassen have larger constants).
pub fn verify_with_growth<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatRef<'_, T>,
    growth: f64,
) -> Result<Verdict, Error> {
    check_product_shapes(a, b, c.shape())?;
    let bound = Bound::new::<T>(a.cols(), growth, max_finite_abs(a) * max_finite_abs(b));
    Ok(check_afresh(a, b, c, bound))
}

/// The check that computes what it compares: every element, or sampled
/// lines and Freivalds' test above [`FULL_CHECK_MAX_MNK`].
fn check_afresh<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatRef<'_, T>,
    bound: Bound,
) -> Verdict {
    match (T::DTYPE.is_integer(), full_check(a, b)) {
        (true, true) => exact_full(a, b, c),
        (true, false) => exact_randomized(a, b, c),
        (false, true) => float_full(a, b, c, bound),
        (false, false) => float_randomized(a, b, c, bound),
    }
}

/// What checking a C against A·B needs of A and B alone, worked out once,
/// for checking several results of the same inputs (every algorithm of a
/// benchmark, every option set of a test): [`Reference::check`] gives the
/// verdict [`verify_with_growth`] gives, with the same bits.
///
/// Where every element is checked ([`FULL_CHECK_MAX_MNK`]) and C has at
/// most [`REFERENCE_MAX_ELEMENTS`] elements, the reference product and,
/// for floats, |A||B| are kept (16 bytes an element), so that a check is
/// one pass over C. Elsewhere nothing is kept and each check runs as
/// [`verify_with_growth`] does.
pub struct Reference<'a, T: Element> {
    a: MatRef<'a, T>,
    b: MatRef<'a, T>,
    /// ‖A‖_max·‖B‖_max over finite elements: the norm-wise allowance.
    max_product: f64,
    kept: Kept<T>,
}

/// The reference elements a [`Reference`] keeps.
enum Kept<T> {
    /// None: each check computes what it compares.
    Nothing,
    /// Integers: A·B reduced modulo 2^w, row-major.
    Exact(Vec<T>),
    /// Floats: A·B in f64 (double-f64 for f64) and |A||B|, row-major.
    Float {
        exact: Vec<f64>,
        magnitude: Vec<f64>,
    },
}

impl<'a, T: Element> Reference<'a, T> {
    /// The reference of A·B.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when A's columns differ from B's rows.
    pub fn new(a: MatRef<'a, T>, b: MatRef<'a, T>) -> Result<Reference<'a, T>, Error> {
        check_product_shapes(a, b, (a.rows(), b.cols()))?;
        let keep = full_check(a, b) && a.rows() * b.cols() <= REFERENCE_MAX_ELEMENTS;
        let kept = match (keep, T::DTYPE.is_integer()) {
            (false, _) => Kept::Nothing,
            (true, true) => Kept::Exact(
                (0..a.rows())
                    .into_par_iter()
                    .flat_map_iter(|i| exact_row(a, b, i))
                    .collect(),
            ),
            (true, false) => {
                let (exact, magnitude): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (0..a.rows())
                    .into_par_iter()
                    .map(|i| {
                        let (mut exact, mut magnitude) = reference_lines(a, b, &[i]);
                        (exact.swap_remove(0), magnitude.swap_remove(0))
                    })
                    .unzip();
                Kept::Float {
                    exact: exact.concat(),
                    magnitude: magnitude.concat(),
                }
            }
        };
        Ok(Reference {
            a,
            b,
            max_product: max_finite_abs(a) * max_finite_abs(b),
            kept,
        })
    }

    /// Checks C ≈ A·B allowing `growth` times the classical float error
    /// bound, as [`verify_with_growth`] does.
    ///
    /// # Errors
    /// [`Error::OutputShape`] when C is not m×n.
    pub fn check(&self, c: MatRef<'_, T>, growth: f64) -> Result<Verdict, Error> {
        let (a, b) = (self.a, self.b);
        check_product_shapes(a, b, c.shape())?;
        let bound = Bound::new::<T>(a.cols(), growth, self.max_product);
        let n = b.cols();
        Ok(match &self.kept {
            Kept::Nothing => check_afresh(a, b, c, bound),
            Kept::Exact(exact) => {
                let mut tally = Tally::default();
                for i in 0..a.rows() {
                    compare_exact_row(&mut tally, c, i, &exact[i * n..][..n]);
                }
                tally.verdict(CheckMethod::Full)
            }
            Kept::Float { exact, magnitude } => by_rows(a.rows(), |i| {
                let (exact, magnitude) = (&exact[i * n..][..n], &magnitude[i * n..][..n]);
                compare_rows(c, &[i], &[exact], &[magnitude], bound)
            }),
        })
    }
}

/// Whether every element of C is checked (else sampled lines and
/// Freivalds' test).
fn full_check<T: Element>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> bool {
    a.rows() as u128 * b.cols() as u128 * a.cols() as u128 <= FULL_CHECK_MAX_MNK
}

/// A float element's allowed error: γ·(|A||B|)_ij, but at least `floor`
/// (the norm-wise allowance of fast algorithms; 0 for classical ones),
/// plus `underflow`.
#[derive(Clone, Copy)]
struct Bound {
    gamma: f64,
    floor: f64,
    /// f·g·(k+1)·η with η the spacing of T's subnormals: in the gradual
    /// underflow range each operation's error is absolute, up to η/2
    /// (Higham, §2.1), which no multiple of (|A||B|)_ij covers, in the
    /// product or in the f64 reference.
    underflow: f64,
    /// The largest finite value of the element type: a reference beyond
    /// it overflows to ±∞.
    largest: f64,
}

impl Bound {
    /// The allowance of a product of A and B with this growth factor;
    /// `max_product` is ‖A‖_max·‖B‖_max over their finite elements.
    fn new<T: Element>(k: usize, growth: f64, max_product: f64) -> Bound {
        let k = k as f64;
        let gamma = FLOAT_TOLERANCE_FACTOR * growth * (k + 1.0) * T::DTYPE.unit_roundoff();
        Bound {
            gamma,
            floor: if growth > 1.0 && !T::DTYPE.is_integer() {
                gamma * k * max_product
            } else {
                0.0
            },
            underflow: FLOAT_TOLERANCE_FACTOR * growth * (k + 1.0) * subnormal_spacing(T::DTYPE),
            largest: largest_finite(T::DTYPE),
        }
    }

    fn of(self, magnitude: f64) -> f64 {
        (self.gamma * magnitude).max(self.floor) + self.underflow
    }
}

/// The largest finite |m_ij| (non-finite elements are checked by IEEE
/// rules, not by this allowance).
fn max_finite_abs<T: Element>(m: MatRef<'_, T>) -> f64 {
    // Row by row on every thread (a maximum is the same in any order).
    (0..m.rows())
        .into_par_iter()
        .map(|i| {
            (0..m.cols())
                .map(|j| m.get(i, j).to_f64().abs())
                .filter(|x| x.is_finite())
                .fold(0.0, f64::max)
        })
        .reduce(|| 0.0, f64::max)
}

/// The spacing of a float type's subnormal numbers (0 for integers).
fn subnormal_spacing(dtype: crate::element::DType) -> f64 {
    use crate::element::DType;
    match dtype {
        DType::F32 => f64::from(f32::from_bits(1)),
        DType::F64 => f64::from_bits(1),
        DType::I32 | DType::I64 => 0.0,
    }
}

/// The largest finite value of a float type (∞ for integers, which do
/// not overflow to anything).
fn largest_finite(dtype: crate::element::DType) -> f64 {
    use crate::element::DType;
    match dtype {
        DType::F32 => f64::from(f32::MAX),
        DType::F64 => f64::MAX,
        DType::I32 | DType::I64 => f64::INFINITY,
    }
}

/// The indices of the lines (rows, or columns through a transposed view)
/// of `m` that hold a NaN or an infinity.
fn non_finite_rows<T: Element>(m: MatRef<'_, T>) -> Vec<usize> {
    if T::DTYPE.is_integer() {
        return Vec::new();
    }
    (0..m.rows())
        .into_par_iter()
        .filter(|&i| (0..m.cols()).any(|j| !m.get(i, j).to_f64().is_finite()))
        .collect()
}

/// The indices of the columns of `m` that hold a NaN or an infinity, read
/// along the dimension `m` is stored in.
fn non_finite_cols<T: Element>(m: MatRef<'_, T>) -> Vec<usize> {
    if T::DTYPE.is_integer() || m.col_stride() != 1 {
        return non_finite_rows(m.t());
    }
    let cols = m.cols();
    let flags = (0..m.rows())
        .into_par_iter()
        .fold(
            || vec![false; cols],
            |mut bad, i| {
                for (j, flag) in bad.iter_mut().enumerate() {
                    *flag |= !m.get(i, j).to_f64().is_finite();
                }
                bad
            },
        )
        .reduce(
            || vec![false; cols],
            |mut x, y| {
                x.iter_mut().zip(y).for_each(|(a, b)| *a |= b);
                x
            },
        );
    (0..cols).filter(|&j| flags[j]).collect()
}

/// Running sums of a float comparison.
#[derive(Default)]
struct Tally {
    diff2: f64,
    ref2: f64,
    worst_ratio: f64,
}

impl Tally {
    /// Records one computed value against its exact value and its bound;
    /// non-finite values by IEEE rules (see the module's notes), outside
    /// the norms.
    fn compare(&mut self, got: f64, exact: f64, (bound, magnitude): (f64, f64), largest: f64) {
        // Beyond T's range even after rounding: C must hold ±∞.
        let overflows = exact.is_finite() && exact.abs() - bound > largest;
        if !exact.is_finite() || !got.is_finite() || overflows {
            let may_overflow = exact.is_finite() && exact.abs() + bound > largest;
            // Terms or partial sums beyond T's range: T's own arithmetic
            // may meet +∞ and −∞ and give NaN, or ±∞ of either sign.
            let terms_overflow = exact.is_finite() && magnitude > largest;
            let ieee = (exact.is_nan() && got.is_nan())
                || got == exact
                || (may_overflow && got == exact.signum() * f64::INFINITY)
                || (terms_overflow && !got.is_finite());
            self.worst_ratio = self.worst_ratio.max(if ieee { 0.0 } else { f64::INFINITY });
            return;
        }
        let diff = (got - exact).abs();
        self.diff2 += diff * diff;
        self.ref2 += exact * exact;
        self.bound_only(diff, bound);
    }

    /// Records an error that counts against its bound but not in the norms.
    fn bound_only(&mut self, diff: f64, bound: f64) {
        let ratio = if diff == 0.0 {
            0.0
        } else if diff.is_nan() || bound == 0.0 {
            f64::INFINITY
        } else {
            diff / bound
        };
        self.worst_ratio = self.worst_ratio.max(ratio);
    }

    /// Adds another tally's sums and worst ratio to this one.
    fn merge(mut self, other: Tally) -> Tally {
        self.diff2 += other.diff2;
        self.ref2 += other.ref2;
        self.worst_ratio = self.worst_ratio.max(other.worst_ratio);
        self
    }

    fn verdict(&self, method: CheckMethod) -> Verdict {
        let rel_error = if self.ref2 > 0.0 {
            (self.diff2 / self.ref2).sqrt()
        } else {
            self.diff2.sqrt()
        };
        Verdict {
            method,
            rel_error,
            bound_ratio: self.worst_ratio,
            ok: self.worst_ratio <= 1.0,
        }
    }
}

fn exact_full<T: Element>(a: MatRef<'_, T>, b: MatRef<'_, T>, c: MatRef<'_, T>) -> Verdict {
    let mut tally = Tally::default();
    for i in 0..a.rows() {
        compare_exact_row(&mut tally, c, i, &exact_row(a, b, i));
    }
    tally.verdict(CheckMethod::Full)
}

/// Row i of A·B, each element accumulated in i128 and reduced modulo 2^w.
fn exact_row<T: Element>(a: MatRef<'_, T>, b: MatRef<'_, T>, i: usize) -> Vec<T> {
    let mut row = vec![0i128; b.cols()];
    for p in 0..a.cols() {
        let aip = a.get(i, p).to_i128();
        for (j, acc) in row.iter_mut().enumerate() {
            *acc = acc.wrapping_add(aip.wrapping_mul(b.get(p, j).to_i128()));
        }
    }
    row.into_iter().map(T::wrap_from_i128).collect()
}

fn compare_exact_row<T: Element>(tally: &mut Tally, c: MatRef<'_, T>, i: usize, exact: &[T]) {
    for (j, &expected) in exact.iter().enumerate() {
        tally.compare(
            c.get(i, j).sub(expected).to_f64(),
            0.0,
            (0.0, 0.0),
            f64::INFINITY,
        );
        tally.ref2 += square(expected.to_f64());
    }
}

fn exact_randomized<T: Element>(a: MatRef<'_, T>, b: MatRef<'_, T>, c: MatRef<'_, T>) -> Verdict {
    let mut rng = seeded_rng(0x5eed_f00d);
    let mut tally = Tally::default();
    let wrapping = |acc: T, m: T, v: T| acc.add_product(m, v);
    for _ in 0..FREIVALDS_INT_VECTORS {
        let x: Vec<T> = (0..b.cols())
            .map(|_| T::wrap_from_i128(rng.random::<i64>() as i128))
            .collect();
        let abx = mat_vec(a, &mat_vec(b, &x, T::ZERO, wrapping), T::ZERO, wrapping);
        let cx = mat_vec(c, &x, T::ZERO, wrapping);
        for (&got, &want) in cx.iter().zip(&abx) {
            tally.compare(got.sub(want).to_f64(), 0.0, (0.0, 0.0), f64::INFINITY);
            tally.ref2 += square(want.to_f64());
        }
    }
    tally.verdict(CheckMethod::Randomized)
}

fn float_full<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatRef<'_, T>,
    bound: Bound,
) -> Verdict {
    by_rows(a.rows(), |i| compare_lines(a, b, c, &[i], bound))
}

/// A full check of `rows` rows, each tallied by `row` in parallel and the
/// tallies merged in row order: the same sums on any number of threads.
fn by_rows(rows: usize, row: impl Fn(usize) -> Tally + Sync + Send) -> Verdict {
    let tallies: Vec<Tally> = (0..rows).into_par_iter().map(row).collect();
    tallies
        .into_iter()
        .fold(Tally::default(), Tally::merge)
        .verdict(CheckMethod::Full)
}

fn float_randomized<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatRef<'_, T>,
    bound: Bound,
) -> Verdict {
    let mut rng = seeded_rng(0x5eed_f00d);
    // Rows of A and columns of B that hold NaN or ±∞: Freivalds' sums
    // leave them out, and the lines of C they meet are checked here.
    let bad_rows = non_finite_rows(a);
    let bad_cols = non_finite_cols(b);
    let mut rows = sampled_lines(a.rows(), &mut rng);
    rows.extend(sampled_subset(&bad_rows, &mut rng));
    let mut cols = sampled_lines(b.cols(), &mut rng);
    cols.extend(sampled_subset(&bad_cols, &mut rng));
    let mut tally = compare_lines(a, b, c, &rows, bound);
    // Columns of C are rows of Cᵀ = BᵀAᵀ.
    tally = tally.merge(compare_lines(b.t(), a.t(), c.t(), &cols, bound));
    // With non-finite inputs x is 0 on the bad columns, and a term of 0
    // is skipped rather than multiplied, so that ∞·0 = NaN never enters.
    let skip_zeros = !(bad_rows.is_empty() && bad_cols.is_empty());
    let xs: Vec<Vec<f64>> = (0..FREIVALDS_FLOAT_VECTORS)
        .map(|_| {
            let mut x: Vec<f64> = (0..b.cols()).map(|_| rng.random_range(-1.0..1.0)).collect();
            for &j in &bad_cols {
                x[j] = 0.0;
            }
            x
        })
        .collect();
    let x_abs: Vec<Vec<f64>> = xs
        .iter()
        .map(|x| x.iter().map(|v| v.abs()).collect())
        .collect();
    // Every vector through B in one pass, then through A in one, then C·x.
    let (bx, b_sizes) = mat_vecs(b, &slices(&xs), &slices(&x_abs), skip_zeros);
    let (abx, sizes) = mat_vecs(a, &slices(&bx), &slices(&b_sizes), skip_zeros);
    let (cx, _) = mat_vecs(c, &slices(&xs), &[], skip_zeros);
    let mut skip_row = vec![false; a.rows()];
    for &i in &bad_rows {
        skip_row[i] = true;
    }
    for (f, got) in cx.iter().enumerate() {
        let x_norm: f64 = x_abs[f].iter().sum();
        let sums = got.iter().zip(&abx[f]).zip(&sizes[f]).zip(&skip_row);
        for (((got, want), &size), &skip) in sums {
            if !skip {
                let allowed =
                    (bound.gamma * size).max(bound.floor * x_norm) + bound.underflow * x_norm;
                tally.bound_only((got - want).abs(), allowed);
            }
        }
    }
    tally.verdict(CheckMethod::Randomized)
}

/// All of `lines`, or [`VERIFY_SAMPLED_LINES`] of them at random.
fn sampled_subset(lines: &[usize], rng: &mut impl Rng) -> Vec<usize> {
    if lines.len() <= VERIFY_SAMPLED_LINES {
        return lines.to_vec();
    }
    sample(rng, lines.len(), VERIFY_SAMPLED_LINES)
        .into_iter()
        .map(|i| lines[i])
        .collect()
}

/// x·B in double-f64 (Dot2) for every x of `xs`, into the rows of `out`
/// where their plain f64 sums were finite (elsewhere IEEE's answer
/// stands). Blocks of [`VERIFY_ROWS_PER_TASK`] columns of B run in
/// parallel, each reading B along its storage: a stripe of every row, or
/// whole contiguous columns. (One line at a time, element by element
/// along B's rows, took most of a 32768 product's check: a transposed
/// view was read across its storage, on one thread per line.)
fn compensated_lines<T: Element>(xs: &[Vec<f64>], b: MatRef<'_, T>, out: &mut [Vec<f64>]) {
    let lines = xs.len();
    let n = b.cols();
    if lines == 0 || n == 0 {
        return;
    }
    let width = VERIFY_ROWS_PER_TASK;
    // Per block: its columns' sums, column by column, every line's side
    // by side.
    let mut sums = vec![0.0f64; n * lines];
    let task = |(chunk, block): (usize, &mut [f64])| {
        let first = chunk * width;
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("fma") {
            // SAFETY: the CPU runs FMA instructions, checked just above.
            unsafe { compensated_block_fma(xs, b, first, block) };
            return;
        }
        compensated_block_any(xs, b, first, block);
    };
    if b.rows() * n < VERIFY_PARALLEL_MIN_ELEMENTS {
        sums.chunks_mut(width * lines).enumerate().for_each(task);
    } else {
        sums.par_chunks_mut(width * lines)
            .enumerate()
            .for_each(task);
    }
    for (l, row) in out.iter_mut().enumerate() {
        for (j, o) in row.iter_mut().enumerate() {
            let sum = sums[j * lines + l];
            if o.is_finite() && sum.is_finite() {
                *o = sum;
            }
        }
    }
}

/// [`compensated_block_any`] compiled with FMA, so that its `mul_add` is
/// one instruction rather than a call into the math library (which made
/// the reference take a third of a small f64 product's check).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn compensated_block_fma<T: Element>(
    xs: &[Vec<f64>],
    b: MatRef<'_, T>,
    first: usize,
    block: &mut [f64],
) {
    compensated_block_any(xs, b, first, block);
}

/// The double-f64 sums Σ_p x_p·B[p][j] of every x of `xs` for the columns
/// j of B from `first` that `block` holds (column-major over the lines),
/// hi + lo rounded once at the end: error-free products by the fused
/// multiply-add, error-free sums by TwoSum. `mul_add` is
/// exact-product-then-round on every CPU, so the sums have the same bits
/// whichever way it is compiled.
#[inline(always)]
fn compensated_block_any<T: Element>(
    xs: &[Vec<f64>],
    b: MatRef<'_, T>,
    first: usize,
    block: &mut [f64],
) {
    let lines = xs.len();
    let cols = block.len() / lines;
    let mut lo = vec![0.0f64; block.len()];
    block.fill(0.0);
    let step = |h: &mut f64, l: &mut f64, xp: f64, y: f64| {
        let prod = xp * y;
        let err = xp.mul_add(y, -prod);
        let s = *h + prod;
        let v = s - *h;
        *l += (*h - (s - v)) + (prod - v) + err;
        *h = s;
    };
    if b.col_stride() == 1 || b.row_stride() != 1 {
        // Rows contiguous (or neither): a stripe of each row in turn.
        for p in 0..b.rows() {
            for c in 0..cols {
                let y = b.get(p, first + c).to_f64();
                for (l, x) in xs.iter().enumerate() {
                    let at = c * lines + l;
                    step(&mut block[at], &mut lo[at], x[p], y);
                }
            }
        }
    } else {
        // Columns contiguous: each column read once, down its length.
        for c in 0..cols {
            let (h, l) = (
                &mut block[c * lines..][..lines],
                &mut lo[c * lines..][..lines],
            );
            for p in 0..b.rows() {
                let y = b.get(p, first + c).to_f64();
                for (li, x) in xs.iter().enumerate() {
                    step(&mut h[li], &mut l[li], x[p], y);
                }
            }
        }
    }
    for (h, l) in block.iter_mut().zip(lo) {
        *h += l;
    }
}

/// Compares rows `lines` of C with the same rows of A·B computed in f64,
/// each element against γ·(|A||B|)_ij: row i is Bᵀ·x and its magnitudes
/// |B|ᵀ·|x| for x = row i of A, all of them in one pass over B, read
/// along whichever dimension it is stored.
fn compare_lines<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatRef<'_, T>,
    lines: &[usize],
    bound: Bound,
) -> Tally {
    let (exact, magnitude) = reference_lines(a, b, lines);
    compare_rows(c, lines, &slices(&exact), &slices(&magnitude), bound)
}

/// Rows `lines` of A·B in f64 (double-f64 for f64) and of |A||B|.
fn reference_lines<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    lines: &[usize],
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let xs: Vec<Vec<f64>> = lines
        .iter()
        .map(|&i| (0..a.cols()).map(|p| a.get(i, p).to_f64()).collect())
        .collect();
    let x_abs: Vec<Vec<f64>> = xs
        .iter()
        .map(|x| x.iter().map(|v| v.abs()).collect())
        .collect();
    let (mut exact, magnitude) = mat_vecs(b.t(), &slices(&xs), &slices(&x_abs), false);
    if T::DTYPE == crate::element::DType::F64 {
        // An f64 sum's own rounding errors are of the size of an f64
        // product's: the reference is compensated (double-f64), so that
        // the reported error is the product's and not the reference's.
        compensated_lines(&xs, b, &mut exact);
    }
    (exact, magnitude)
}

/// Rows `lines` of C against their reference rows and magnitudes.
fn compare_rows<T: Element>(
    c: MatRef<'_, T>,
    lines: &[usize],
    exact: &[&[f64]],
    magnitude: &[&[f64]],
    bound: Bound,
) -> Tally {
    let mut tally = Tally::default();
    for (l, &i) in lines.iter().enumerate() {
        for (j, (&exact, &magnitude)) in exact[l].iter().zip(magnitude[l]).enumerate() {
            tally.compare(
                c.get(i, j).to_f64(),
                exact,
                (bound.of(magnitude), magnitude),
                bound.largest,
            );
        }
    }
    tally
}

/// The first and last index and random others, at most
/// [`VERIFY_SAMPLED_LINES`] distinct indices below `len`.
fn sampled_lines(len: usize, rng: &mut impl Rng) -> Vec<usize> {
    if len <= VERIFY_SAMPLED_LINES {
        return (0..len).collect();
    }
    let mut lines = vec![0, len - 1];
    lines.extend(
        sample(rng, len - 2, VERIFY_SAMPLED_LINES - 2)
            .into_iter()
            .map(|i| i + 1),
    );
    lines
}

/// y = M·x with a caller-supplied multiply-accumulate, y_i folded over j
/// in order (so wrapping integer sums are exact). M is walked along its
/// stored dimension: dot products of contiguous rows, or, when its
/// columns are the contiguous ones (a transposed or column-major view),
/// column by column over blocks of rows; blocks of
/// [`VERIFY_ROWS_PER_TASK`] rows run in parallel on large matrices.
fn mat_vec<T: Element, V: Copy + Send + Sync>(
    m: MatRef<'_, T>,
    x: &[V],
    zero: V,
    mac: impl Fn(V, T, V) -> V + Sync,
) -> Vec<V> {
    let by_columns = m.col_stride() != 1 && m.row_stride() == 1;
    let block = |first: usize, out: &mut [V]| {
        if by_columns {
            for (j, &xj) in x.iter().enumerate() {
                for (r, y) in out.iter_mut().enumerate() {
                    *y = mac(*y, m.get(first + r, j), xj);
                }
            }
        } else {
            // Four rows at a time: four independent chains of additions
            // instead of one, whose latency would bound the loop.
            let len = out.len();
            let mut quads = out.chunks_exact_mut(4);
            for (q, ys) in (&mut quads).enumerate() {
                let row = first + 4 * q;
                let mut acc = [zero; 4];
                for (j, &xj) in x.iter().enumerate() {
                    for (r, acc) in acc.iter_mut().enumerate() {
                        *acc = mac(*acc, m.get(row + r, j), xj);
                    }
                }
                ys.copy_from_slice(&acc);
            }
            let rest = quads.into_remainder();
            let row = first + len - rest.len();
            for (r, y) in rest.iter_mut().enumerate() {
                *y = x
                    .iter()
                    .enumerate()
                    .fold(zero, |acc, (j, &xj)| mac(acc, m.get(row + r, j), xj));
            }
        }
    };
    let mut y = vec![zero; m.rows()];
    if m.rows() * m.cols() < VERIFY_PARALLEL_MIN_ELEMENTS {
        block(0, &mut y);
    } else {
        y.par_chunks_mut(VERIFY_ROWS_PER_TASK)
            .enumerate()
            .for_each(|(chunk, out)| block(chunk * VERIFY_ROWS_PER_TASK, out));
    }
    y
}

/// The vectors as slices.
fn slices(vectors: &[Vec<f64>]) -> Vec<&[f64]> {
    vectors.iter().map(Vec::as_slice).collect()
}

/// M·x for every x of `signed` and |M|·x for every x of `magnitude`, in
/// one pass over M, in f64, each y_i summed over j in order. With
/// `skip_zeros`, a term whose x is 0 is left out rather than multiplied,
/// so that ∞·0 = NaN never enters. M is walked as in [`mat_vec`]: rows four
/// at a time, or column by column over blocks of rows when its columns are
/// the contiguous ones; blocks of [`VERIFY_ROWS_PER_TASK`] rows run in
/// parallel on large matrices.
fn mat_vecs<T: Element>(
    m: MatRef<'_, T>,
    signed: &[&[f64]],
    magnitude: &[&[f64]],
    skip_zeros: bool,
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let (s, v) = (signed.len(), signed.len() + magnitude.len());
    if v == 0 {
        return (Vec::new(), Vec::new());
    }
    // The vectors interleaved, x_j of every probe side by side: the inner
    // loop reads them contiguously.
    let mut xt = vec![0.0; m.cols() * v];
    for (p, x) in signed.iter().chain(magnitude).enumerate() {
        for (j, &xj) in x.iter().enumerate() {
            xt[j * v + p] = xj;
        }
    }
    let add = |acc: &mut [f64], mij: f64, j: usize| {
        let x = &xt[j * v..][..v];
        if skip_zeros && !mij.is_finite() {
            for (p, (y, &xj)) in acc.iter_mut().zip(x).enumerate() {
                if xj != 0.0 {
                    *y += if p < s { mij } else { mij.abs() } * xj;
                }
            }
            return;
        }
        let (ys, ym) = acc.split_at_mut(s);
        for (y, &xj) in ys.iter_mut().zip(&x[..s]) {
            *y += mij * xj;
        }
        let size = mij.abs();
        for (y, &xj) in ym.iter_mut().zip(&x[s..]) {
            *y += size * xj;
        }
    };
    let by_columns = m.col_stride() != 1 && m.row_stride() == 1;
    // out: the block's rows × probes, row-major.
    let block = |first: usize, out: &mut [f64]| {
        if by_columns {
            for j in 0..m.cols() {
                for (r, acc) in out.chunks_exact_mut(v).enumerate() {
                    add(acc, m.get(first + r, j).to_f64(), j);
                }
            }
        } else {
            // Four rows at a time: independent chains of additions.
            for (q, accs) in out.chunks_mut(4 * v).enumerate() {
                let row = first + 4 * q;
                for j in 0..m.cols() {
                    for (r, acc) in accs.chunks_exact_mut(v).enumerate() {
                        add(acc, m.get(row + r, j).to_f64(), j);
                    }
                }
            }
        }
    };
    let mut y = vec![0.0; m.rows() * v];
    if m.rows() * m.cols() < VERIFY_PARALLEL_MIN_ELEMENTS {
        block(0, &mut y);
    } else {
        y.par_chunks_mut(VERIFY_ROWS_PER_TASK * v)
            .enumerate()
            .for_each(|(chunk, out)| block(chunk * VERIFY_ROWS_PER_TASK, out));
    }
    let column = |p: usize| -> Vec<f64> { y.iter().skip(p).step_by(v).copied().collect() };
    ((0..s).map(column).collect(), (s..v).map(column).collect())
}

fn square(x: f64) -> f64 {
    x * x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::dot2;
    use crate::matrix::Matrix;

    /// The blocked double-f64 lines equal the plain Dot2 of each line and
    /// column (same terms, same order) on B stored either way, across
    /// block edges and on wide exponents.
    #[test]
    fn compensated_lines_equal_dot2_along_either_storage() {
        let (k, n) = (37, VERIFY_ROWS_PER_TASK + 3);
        let wide = |i: usize, j: usize| {
            let e = ((i * 7 + j * 13) % 61) as i32 - 30;
            let sign = if (i + 2 * j).is_multiple_of(3) {
                -1.0
            } else {
                1.0
            };
            sign * (1.0 + ((i * 31 + j * 17) % 97) as f64 / 97.0) * 2f64.powi(e)
        };
        let b = Matrix::<f64>::from_fn(k, n, wide);
        let bt = Matrix::<f64>::from_fn(n, k, |i, j| wide(j, i));
        let xs: Vec<Vec<f64>> = (0..3)
            .map(|l| (0..k).map(|p| wide(p + 5 * l, l)).collect())
            .collect();
        for view in [b.as_ref(), bt.as_ref().t()] {
            let mut out = vec![vec![0.0; n]; xs.len()];
            compensated_lines(&xs, view, &mut out);
            for (l, x) in xs.iter().enumerate() {
                for (j, &got) in out[l].iter().enumerate() {
                    let (hi, lo) = dot2((0..k).map(|p| (x[p], view.get(p, j))));
                    assert_eq!(got.to_bits(), (hi + lo).to_bits(), "line {l} column {j}");
                }
            }
        }
    }
}
