//! How accurate a product is, measured: the input classes on which
//! accuracy levels are stated, an exact reference, and the two errors the
//! `native` level compares with the native product's.
//!
//! * **Input classes** ([`InputClass`]): uniform data, wide exponent
//!   ranges, rows and columns scaled by very different powers of two,
//!   cancellation (A = [U U], B = [V; −V + E]), integer values, and one
//!   huge column of A beside zero rows of A and zero columns of B. Each is
//!   reproducible from a seed.
//! * **The reference** ([`Reference`]): every element of A·B in
//!   double-f64 arithmetic (error-free products and sums, Dekker and
//!   Knuth), so that even an f64 product's error is measured against a
//!   reference some 2⁻¹⁰⁶ away, and (|A||B|)_ij beside it; integers
//!   exactly, wrapped as their type wraps.
//! * **The errors** ([`Errors`]): the relative Frobenius error
//!   ‖Ĉ − C‖_F/‖C‖_F, and the largest error per element in units of its
//!   own scale, max |Ĉ − C|_ij/(|A||B|)_ij. The `native` level asks each to
//!   be within [`NATIVE_RATIO`] of the native product's on the same inputs
//!   ([`Errors::within`]).

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rayon::prelude::*;

use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatRef, Matrix};
use crate::random::seeded_rng;

/// How far the errors of a product at the `native` level may exceed the
/// native product's on the same inputs.
pub const NATIVE_RATIO: f64 = 2.0;

/// A class of inputs on which accuracy is stated and tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputClass {
    /// Entries uniform in [−1, 1).
    Uniform,
    /// ±10^x with x uniform in [−3, 3): entries of one row or column
    /// differ by up to 10⁶.
    Wide,
    /// Uniform entries with the rows and the columns of A and of B scaled
    /// by powers of two from 2⁻¹² to 2¹², each line its own.
    Scaled,
    /// A = [U U] and B = [V; −V + E] with E of size 2⁻¹⁰: C = U·E, far
    /// smaller than |A||B|.
    Cancellation,
    /// Integers from −16 to 16: every partial sum of the native product
    /// is exact, so an accurate product is exact too.
    Integer,
    /// Uniform entries with A's first column 2²⁰ times larger, A's second
    /// row and B's second column zero.
    HugeColumn,
}

impl InputClass {
    /// Every class, in report order.
    pub const ALL: [InputClass; 6] = [
        InputClass::Uniform,
        InputClass::Wide,
        InputClass::Scaled,
        InputClass::Cancellation,
        InputClass::Integer,
        InputClass::HugeColumn,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            InputClass::Uniform => "uniform",
            InputClass::Wide => "wide",
            InputClass::Scaled => "scaled",
            InputClass::Cancellation => "cancellation",
            InputClass::Integer => "integer",
            InputClass::HugeColumn => "huge-column",
        }
    }

    /// A (m×k) and B (k×n) of this class from `seed`.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for the cancellation class with an odd k
    /// (A is two copies of U side by side); allocation failures.
    pub fn inputs<T: Element>(
        self,
        (m, k, n): (usize, usize, usize),
        seed: u64,
    ) -> Result<(Matrix<T>, Matrix<T>), Error> {
        let mut rng = seeded_rng(seed);
        let mut uniform = |rows: usize, cols: usize| -> Result<Matrix<f64>, Error> {
            Matrix::try_from_fn(rows, cols, |_, _| rng.random_range(-1.0..1.0))
        };
        let (a, b) =
            match self {
                InputClass::Uniform => (uniform(m, k)?, uniform(k, n)?),
                InputClass::Wide => {
                    let mut wide = |rows: usize, cols: usize| {
                        Matrix::try_from_fn(rows, cols, |_, _| {
                            let x = 10f64.powf(rng.random_range(-3.0..3.0));
                            if rng.random_bool(0.5) {
                                x
                            } else {
                                -x
                            }
                        })
                    };
                    (wide(m, k)?, wide(k, n)?)
                }
                InputClass::Scaled => {
                    let (a, b) = (uniform(m, k)?, uniform(k, n)?);
                    let mut powers = |len: usize| -> Vec<f64> {
                        (0..len)
                            .map(|_| 2f64.powi(rng.random_range(-12..=12)))
                            .collect()
                    };
                    let (ra, ca, rb, cb) = (powers(m), powers(k), powers(k), powers(n));
                    (
                        Matrix::try_from_fn(m, k, |i, p| a.get(i, p) * ra[i] * ca[p])?,
                        Matrix::try_from_fn(k, n, |p, j| b.get(p, j) * rb[p] * cb[j])?,
                    )
                }
                InputClass::Cancellation => {
                    if k % 2 != 0 {
                        return Err(Error::InvalidOption(format!(
                            "the cancellation class needs an even depth, not {k}"
                        )));
                    }
                    let h = k / 2;
                    let (u, v, e) = (uniform(m, h)?, uniform(h, n)?, uniform(h, n)?);
                    // −V + E rounded to T first, as a user's data would be.
                    let tail = |p: usize, j: usize| {
                        T::from_f64(-v.get(p, j) + e.get(p, j) / 1024.0).to_f64()
                    };
                    (
                        Matrix::try_from_fn(m, k, |i, p| u.get(i, p % h))?,
                        Matrix::try_from_fn(k, n, |p, j| {
                            if p < h {
                                v.get(p, j)
                            } else {
                                tail(p - h, j)
                            }
                        })?,
                    )
                }
                InputClass::Integer => {
                    let mut ints = |rows: usize, cols: usize| {
                        Matrix::try_from_fn(rows, cols, |_, _| rng.random_range(-16i32..=16) as f64)
                    };
                    (ints(m, k)?, ints(k, n)?)
                }
                InputClass::HugeColumn => {
                    let (a, b) = (uniform(m, k)?, uniform(k, n)?);
                    (
                        Matrix::try_from_fn(m, k, |i, p| match (i, p) {
                            (1, _) => 0.0,
                            (_, 0) => a.get(i, p) * 1_048_576.0,
                            _ => a.get(i, p),
                        })?,
                        Matrix::try_from_fn(k, n, |p, j| if j == 1 { 0.0 } else { b.get(p, j) })?,
                    )
                }
            };
        let cast = |x: &Matrix<f64>| {
            Matrix::try_from_fn(x.rows(), x.cols(), |i, j| T::from_f64(x.get(i, j)))
        };
        Ok((cast(&a)?, cast(&b)?))
    }
}

impl fmt::Display for InputClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for InputClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for InputClass {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        InputClass::ALL
            .iter()
            .copied()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = InputClass::ALL.iter().map(|c| c.name()).collect();
                Error::InvalidOption(format!(
                    "unknown input class '{}' (expected {})",
                    s.trim(),
                    names.join(", ")
                ))
            })
    }
}

/// One row of the reference: each element as hi + lo, and its scale.
type RowReference = (Vec<(f64, f64)>, Vec<f64>);

/// A·B in double-f64 arithmetic, and |A||B|, over all rows or a sample of
/// them: what errors are measured against.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The rows of C the reference holds, ascending.
    rows: Vec<usize>,
    cols: usize,
    /// (m, k) of A: the shape a checked C must have, and the depth.
    m: usize,
    k: usize,
    /// ‖A‖_max·‖B‖_max.
    max_product: f64,
    /// Each held element of A·B as hi + lo, row-major.
    exact: Vec<(f64, f64)>,
    /// (|A||B|)_ij of the held elements, row-major.
    scale: Vec<f64>,
}

impl Reference {
    /// The reference of A·B, every row.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when A's columns differ from B's rows.
    pub fn of<T: Element>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<Reference, Error> {
        Reference::of_rows(a, b, a.rows())
    }

    /// The reference of A·B on at most `sample` rows, evenly spaced and
    /// the last included (every row when there are no more): the errors of
    /// a product too large to check whole, whose rows all meet the same
    /// kind of data.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when A's columns differ from B's rows.
    pub fn of_rows<T: Element>(
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        sample: usize,
    ) -> Result<Reference, Error> {
        if a.cols() != b.rows() {
            return Err(Error::DimensionMismatch {
                a: a.shape(),
                b: b.shape(),
            });
        }
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let rows: Vec<usize> = if sample >= m || m <= 1 {
            (0..m).collect()
        } else {
            let mut rows: Vec<usize> = (0..sample.max(1))
                .map(|s| s * (m - 1) / sample.max(2).saturating_sub(1).max(1))
                .collect();
            rows.dedup();
            rows
        };
        let max_abs = |x: MatRef<'_, T>| x.iter().map(|v| v.to_f64().abs()).fold(0.0, f64::max);
        let max_product = max_abs(a) * max_abs(b);
        let bt: Vec<f64> = (0..n * k).map(|x| b.get(x % k, x / k).to_f64()).collect();
        let per_row: Vec<RowReference> = rows
            .par_iter()
            .map(|&i| {
                let ai: Vec<f64> = (0..k).map(|p| a.get(i, p).to_f64()).collect();
                let mut exact = Vec::with_capacity(n);
                let mut scale = Vec::with_capacity(n);
                for j in 0..n {
                    let bj = &bt[j * k..][..k];
                    exact.push(if T::DTYPE.is_integer() {
                        // Integers wrap: the exact sum in i128, reduced
                        // as the type's own arithmetic reduces it.
                        let sum = (0..k).fold(0i128, |s, p| {
                            s.wrapping_add(
                                a.get(i, p).to_i128().wrapping_mul(b.get(p, j).to_i128()),
                            )
                        });
                        (T::wrap_from_i128(sum).to_f64(), 0.0)
                    } else {
                        crate::element::dot2(ai.iter().copied().zip(bj.iter().copied()))
                    });
                    scale.push(ai.iter().zip(bj).map(|(x, y)| (x * y).abs()).sum());
                }
                (exact, scale)
            })
            .collect();
        let mut exact = Vec::with_capacity(rows.len() * n);
        let mut scale = Vec::with_capacity(rows.len() * n);
        for (e, s) in per_row {
            exact.extend(e);
            scale.extend(s);
        }
        Ok(Reference {
            rows,
            cols: n,
            m,
            k,
            max_product,
            exact,
            scale,
        })
    }

    /// How many rows of C it holds.
    pub fn sampled_rows(&self) -> usize {
        self.rows.len()
    }

    /// The errors of a computed C over the rows held.
    ///
    /// # Errors
    /// [`Error::OutputShape`] when C is not A·B's shape.
    pub fn errors<T: Element>(&self, c: MatRef<'_, T>) -> Result<Errors, Error> {
        if c.shape() != (self.m, self.cols) {
            return Err(Error::OutputShape {
                expected: (self.m, self.cols),
                got: c.shape(),
            });
        }
        let n = self.cols;
        let normwise = self.k as f64 * self.max_product;
        let (diff2, ref2, worst, worst_norm) = self
            .rows
            .par_iter()
            .enumerate()
            .map(|(r, &i)| {
                let mut acc = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
                for j in 0..n {
                    let (hi, lo) = self.exact[r * n + j];
                    let got = c.get(i, j).to_f64();
                    // got − hi is exact where they are close (Sterbenz);
                    // elsewhere the error is large and its rounding moot.
                    let d = ((got - hi) - lo).abs();
                    let d = if got.is_finite() { d } else { f64::INFINITY };
                    acc.0 += d * d;
                    acc.1 += hi * hi;
                    let ratio = |s: f64| match (d == 0.0, s > 0.0) {
                        (true, _) => 0.0,
                        (false, true) => d / s,
                        (false, false) => f64::INFINITY,
                    };
                    acc.2 = acc.2.max(ratio(self.scale[r * n + j]));
                    acc.3 = acc.3.max(ratio(normwise));
                }
                acc
            })
            .reduce(
                || (0.0, 0.0, 0.0, 0.0),
                |x, y| (x.0 + y.0, x.1 + y.1, x.2.max(y.2), x.3.max(y.3)),
            );
        Ok(Errors {
            relative_frobenius: if ref2 > 0.0 {
                (diff2 / ref2).sqrt()
            } else {
                diff2.sqrt()
            },
            max_scaled: worst,
            max_normwise: worst_norm,
        })
    }
}

/// A measure as JSON: a number, or "inf" or "nan" (which JSON has no
/// number for).
pub fn serialize_measure<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else if x.is_nan() {
        s.serialize_str("nan")
    } else {
        s.serialize_str(if *x > 0.0 { "inf" } else { "-inf" })
    }
}

/// The errors of one product against the exact one.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Errors {
    /// ‖Ĉ − C‖_F/‖C‖_F (the absolute norm where C is zero).
    #[serde(serialize_with = "serialize_measure")]
    pub relative_frobenius: f64,
    /// max over the elements of |Ĉ − C|_ij/(|A||B|)_ij (∞ for an error
    /// where (|A||B|)_ij = 0).
    #[serde(serialize_with = "serialize_measure")]
    pub max_scaled: f64,
    /// max over the elements of |Ĉ − C|_ij/(k·‖A‖_max·‖B‖_max): the
    /// norm-wise measure that Strassen's and Winograd's bounds speak of.
    #[serde(serialize_with = "serialize_measure")]
    pub max_normwise: f64,
}

impl Errors {
    /// How many times the native product's errors these are: the larger
    /// of the two ratios. An exact native product asks for an exact
    /// result (ratio 1 if exact, else ∞).
    pub fn ratio_to(&self, native: &Errors) -> f64 {
        let ratio = |x: f64, base: f64| {
            if base > 0.0 {
                x / base
            } else if x == 0.0 {
                1.0
            } else {
                f64::INFINITY
            }
        };
        ratio(self.relative_frobenius, native.relative_frobenius)
            .max(ratio(self.max_scaled, native.max_scaled))
    }

    /// Whether these errors meet the `native` level beside the native
    /// product's: each within [`NATIVE_RATIO`] of it.
    pub fn within(&self, native: &Errors) -> bool {
        self.ratio_to(native) <= NATIVE_RATIO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_exact_where_f64_sums_are_not() {
        // 1 + 2⁻⁶⁰ − 1: plain f64 sums give 0.
        let a = Matrix::<f64>::from_vec(1, 3, vec![1.0, 2f64.powi(-60), -1.0]).unwrap();
        let b = Matrix::<f64>::from_vec(3, 1, vec![1.0, 1.0, 1.0]).unwrap();
        let r = Reference::of(a.as_ref(), b.as_ref()).unwrap();
        let zero = Matrix::<f64>::zeros(1, 1);
        let e = r.errors(zero.as_ref()).unwrap();
        assert_eq!(e.relative_frobenius, 1.0);
        assert!((e.max_scaled - 2f64.powi(-60) / 2.0).abs() < 1e-30, "{e:?}");
        let got = Matrix::<f64>::filled(1, 1, 2f64.powi(-60));
        assert_eq!(r.errors(got.as_ref()).unwrap().relative_frobenius, 0.0);
    }

    #[test]
    fn sampled_rows_measure_the_rows_they_hold() {
        let (a, b) = InputClass::Uniform.inputs::<f32>((9, 16, 4), 3).unwrap();
        let r = Reference::of_rows(a.as_ref(), b.as_ref(), 3).unwrap();
        assert_eq!(r.rows, vec![0, 4, 8]);
        assert_eq!(
            Reference::of_rows(a.as_ref(), b.as_ref(), 20)
                .unwrap()
                .sampled_rows(),
            9
        );
        // An error outside the sampled rows is not seen; inside, it is.
        let mut c = Matrix::<f32>::from_fn(9, 4, |i, j| {
            let (hi, lo) = crate::element::dot2(
                (0..16).map(|p| (f64::from(a.get(i, p)), f64::from(b.get(p, j)))),
            );
            (hi + lo) as f32
        });
        let clean = r.errors(c.as_ref()).unwrap();
        c.set(1, 1, c.get(1, 1) + 1.0);
        assert_eq!(r.errors(c.as_ref()).unwrap(), clean);
        c.set(4, 1, c.get(4, 1) + 1.0);
        assert!(r.errors(c.as_ref()).unwrap().relative_frobenius > 0.1);
    }

    #[test]
    fn classes_are_reproducible_and_shaped_as_asked() {
        for class in InputClass::ALL {
            let (a, b) = class.inputs::<f32>((5, 8, 3), 7).unwrap();
            let (a2, b2) = class.inputs::<f32>((5, 8, 3), 7).unwrap();
            assert_eq!((a.shape(), b.shape()), ((5, 8), (8, 3)));
            assert_eq!((a.as_slice(), b.as_slice()), (a2.as_slice(), b2.as_slice()));
            assert_eq!(class.name().parse::<InputClass>().unwrap(), class);
        }
        assert!(InputClass::Cancellation
            .inputs::<f64>((2, 3, 2), 1)
            .is_err());
        // Cancellation: C = U·E is small beside |A||B|.
        let (a, b) = InputClass::Cancellation
            .inputs::<f64>((4, 64, 4), 3)
            .unwrap();
        let r = Reference::of(a.as_ref(), b.as_ref()).unwrap();
        assert!(r
            .exact
            .iter()
            .zip(&r.scale)
            .all(|(e, s)| e.0.abs() < s / 64.0));
    }

    #[test]
    fn ratios_ask_an_exact_native_product_for_an_exact_result() {
        let exact = Errors {
            relative_frobenius: 0.0,
            max_scaled: 0.0,
            max_normwise: 0.0,
        };
        let off = Errors {
            relative_frobenius: 1e-9,
            max_scaled: 1e-12,
            max_normwise: 1e-13,
        };
        assert!(exact.within(&exact));
        assert!(!off.within(&exact));
        let native = Errors {
            relative_frobenius: 1e-9,
            max_scaled: 4e-13,
            max_normwise: 1e-13,
        };
        assert_eq!(off.ratio_to(&native), 2.5);
        assert!(!off.within(&native));
        assert!(native.within(&off));
    }
}
