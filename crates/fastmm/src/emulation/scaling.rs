//! Power-of-two scaling of the rows of A and the columns of B into
//! integers, and the statistics of each such vector that the scaling and
//! the accuracy certificate need.
//!
//! A vector x (a row of A, a column of B) with largest magnitude in
//! [2^E, 2^{E+1}) is scaled for b bits by 2^{b−1−E} and rounded to the
//! nearest integer: x′ = rint(x·2^{b−1−E}), |x′| ≤ 2^b, and each entry's
//! error is at most half a unit, |x − x′·2^{E+1−b}| ≤ 2^{E−b}. Scaling by
//! a power of two is exact, so x′ is an exact integer held in an f64.

use crate::element::Element;
use crate::matrix::MatRef;

/// ⌊log₂|x|⌋ of a finite nonzero x, subnormals included.
pub fn exponent(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let biased = (bits >> 52) as i32;
    if biased == 0 {
        -1074 + (63 - (bits & ((1 << 52) - 1)).leading_zeros() as i32)
    } else {
        biased - 1023
    }
}

/// x·2^e: exact where the result is a normal number, rounded where it is
/// subnormal, as C's `ldexp`. Steps of at most 2^±1000, all of one sign,
/// keep every intermediate finite.
pub fn ldexp(mut x: f64, mut e: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    while e != 0 {
        let step = e.clamp(-1000, 1000);
        x *= f64::powi(2.0, step);
        e -= step;
    }
    x
}

/// What the scaling of one vector needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorStats {
    /// E: ⌊log₂ max|x_p|⌋ (0 for a zero or non-finite vector).
    pub exponent: i32,
    /// Σ|x_p|·2^{−E}, at most 2·len: the 1-norm in units of 2^E (0 for a
    /// zero or non-finite vector).
    pub norm: f64,
    /// Whether every entry is finite.
    pub finite: bool,
}

impl VectorStats {
    /// The statistics of the `len` entries `at(0)`, …, `at(len − 1)`.
    pub fn of(len: usize, at: impl Fn(usize) -> f64) -> Self {
        let mut top = 0.0f64;
        for p in 0..len {
            let x = at(p);
            if !x.is_finite() {
                return VectorStats {
                    exponent: 0,
                    norm: 0.0,
                    finite: false,
                };
            }
            top = top.max(x.abs());
        }
        if top == 0.0 {
            return VectorStats {
                exponent: 0,
                norm: 0.0,
                finite: true,
            };
        }
        let e = exponent(top);
        let norm = (0..len).map(|p| ldexp(at(p).abs(), -e)).sum();
        VectorStats {
            exponent: e,
            norm,
            finite: true,
        }
    }

    /// Whether the vector scales to integers: finite and nonzero.
    pub fn scales(&self) -> bool {
        self.finite && self.norm > 0.0
    }
}

/// Statistics of every row of A.
pub fn row_stats<T: Element>(a: MatRef<'_, T>) -> Vec<VectorStats> {
    (0..a.rows())
        .map(|i| VectorStats::of(a.cols(), |p| a.get(i, p).to_f64()))
        .collect()
}

/// Statistics of every column of B.
pub fn col_stats<T: Element>(b: MatRef<'_, T>) -> Vec<VectorStats> {
    (0..b.cols())
        .map(|j| VectorStats::of(b.rows(), |p| b.get(p, j).to_f64()))
        .collect()
}

/// Bits of the magnitude integers of the accuracy certificate: the
/// largest entry of a vector scales into [2^{MAGNITUDE_BITS−1}, 2^MAGNITUDE_BITS),
/// which fits an i8.
pub const MAGNITUDE_BITS: i32 = 7;

/// ⌊|x|·2^{MAGNITUDE_BITS−1−E}⌋, in 0..=127: a lower bound of |x| in units
/// of 2^{E+1−MAGNITUDE_BITS} (0 for a vector that does not scale).
pub fn magnitude(x: f64, stats: &VectorStats) -> i8 {
    if !stats.scales() {
        return 0;
    }
    ldexp(x.abs(), MAGNITUDE_BITS - 1 - stats.exponent).floor() as i8
}

/// rint(x·2^{bits−1−E}) (ties to even), an exact integer with
/// |x′| ≤ 2^bits (0 for a vector that does not scale).
pub fn scaled(x: f64, stats: &VectorStats, bits: u32) -> f64 {
    if !stats.scales() {
        return 0.0;
    }
    ldexp(x, bits as i32 - 1 - stats.exponent).round_ties_even()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_and_scaling_cover_the_whole_range() {
        assert_eq!(exponent(f64::MIN_POSITIVE / 4.0), -1024);
        assert_eq!(exponent(5e-324), -1074);
        assert_eq!(exponent(-3.0), 1);
        assert_eq!(exponent(f64::MAX), 1023);
        assert_eq!(ldexp(5e-324, 1074), 1.0);
        assert_eq!(ldexp(1.0, -1074), 5e-324);
        assert_eq!(ldexp(f64::MAX, -1023), f64::MAX / f64::powi(2.0, 1023));
        assert_eq!(ldexp(1.5, 0), 1.5);
        let s = VectorStats::of(3, |p| [1e-300, -3.0, 1e300][p]);
        assert_eq!(s.exponent, exponent(1e300));
        assert!(s.finite && s.norm >= 1.0 && s.norm < 2.0 + 1e-12);
        // The largest entry scales into [2^(b−1), 2^b].
        for bits in [1, 7, 24, 53, 62] {
            let x = scaled(1e300, &s, bits);
            assert!(x >= f64::powi(2.0, bits as i32 - 1) && x <= f64::powi(2.0, bits as i32));
        }
        assert_eq!(scaled(1e-300, &s, 53), 0.0);
        let m = magnitude(-1e300, &s);
        assert!((64..=127).contains(&m));
        let zero = VectorStats::of(4, |_| 0.0);
        assert!(zero.finite && !zero.scales());
        let nan = VectorStats::of(2, |p| [1.0, f64::NAN][p]);
        assert!(!nan.finite && !nan.scales());
        assert_eq!(scaled(1.0, &nan, 20), 0.0);
        // Subnormal vectors scale like any other.
        let tiny = VectorStats::of(2, |p| [5e-324, 1e-310][p]);
        assert_eq!(tiny.exponent, exponent(1e-310));
        assert!(scaled(1e-310, &tiny, 30) >= f64::powi(2.0, 29));
    }
}
