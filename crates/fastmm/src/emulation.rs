//! Floating-point products from exact integer ones: Ozaki scheme II
//! (Ozaki, Uchino and Imamura; Uchino, Ozaki and Imamura, SC'25), the
//! arithmetic of an emulated precision mode on INT8 matrix engines, here
//! as plain Rust: the reference twin and test oracle of the GPU kernels.
//!
//! **Scaling.** Row i of A is scaled by 2^{e_i} and truncated to an
//! integer A'_i of at most `bits` bits (|A'_ij| < 2^bits), column j of B
//! likewise by 2^{f_j}; then C_ij ≈ 2^{−e_i−f_j}·(A'·B')_ij, with
//! |(A'·B')_ij| < k·2^{2·bits}.
//!
//! **Residues.** A'·B' is computed exactly modulo each of N pairwise
//! coprime moduli m_l ≤ 256 ([`MODULI`]): the residues of A' and B' in
//! the symmetric range fit an i8, so each (A' mod m_l)·(B' mod m_l) is an
//! INT8 product with INT32 sums (exact while k·128² < 2³¹), reduced mod
//! m_l. With M = Π m_l > 2·max|A'·B'|, the Chinese remainder theorem
//! gives A'·B' exactly ([`reconstruct`], Garner's mixed radix, so no
//! intermediate exceeds M).

use crate::error::Error;
use crate::matrix::{MatRef, Matrix};

/// Pairwise coprime moduli, at most 256 each (a symmetric residue then
/// fits an i8), largest first: 2⁸, 3·5·17, 11·23, 251, 13·19, and primes
/// or products of primes not used before: 2^125.4 together, so up to
/// about 2^124 is recovered.
pub const MODULI: [u32; 16] = [
    256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211, 199, 197, 193,
];

/// The residue of `x` modulo `m` in the symmetric range [−⌊m/2⌋, ⌈m/2⌉ − 1]
/// (for m ≤ 256, an i8).
pub fn symmetric_residue(x: i128, m: u32) -> i8 {
    let m = i128::from(m);
    let r = x.rem_euclid(m);
    let r = if r >= m - m / 2 { r - m } else { r };
    r as i8
}

/// The product of the first `count` moduli.
pub fn modulus(count: usize) -> u128 {
    MODULI[..count].iter().map(|&m| u128::from(m)).product()
}

/// The fewest moduli whose product M exceeds 2·`bound`, so that every
/// integer of magnitude at most `bound` is recovered from its residues.
///
/// # Errors
/// [`Error::Unsupported`] when even all of [`MODULI`] do not suffice.
pub fn moduli_for(bound: u128) -> Result<usize, Error> {
    (1..=MODULI.len())
        .find(|&n| modulus(n) / 2 > bound)
        .ok_or_else(|| Error::Unsupported {
            algorithm: "emulated",
            what: format!(
                "products of magnitude up to {bound} (at most {} moduli)",
                MODULI.len()
            ),
        })
}

/// a⁻¹ mod m (a and m coprime, m ≤ 256).
fn inverse(a: u32, m: u32) -> u32 {
    let a = a % m;
    (1..m)
        .find(|&x| a * x % m == 1)
        .expect("the moduli are pairwise coprime")
}

/// The integer x with |x| < M/2 (M the product of the first
/// `residues.len()` moduli) and x ≡ r_l (mod m_l) for the l-th residue
/// r_l, by Garner's mixed radix: x = v₀ + v₁·m₀ + v₂·m₀m₁ + …, each digit
/// found modulo its own modulus, so no intermediate exceeds M.
pub fn reconstruct(residues: &[i64]) -> i128 {
    let n = residues.len();
    let mut digits: Vec<u32> = Vec::with_capacity(n);
    for (l, &r) in residues.iter().enumerate() {
        let m = MODULI[l];
        // The value of the digits so far, modulo m, and m₀···m_{l−1} mod m.
        let (mut value, mut radix) = (0u32, 1u32);
        for (j, &d) in digits.iter().enumerate() {
            value = (value + d * radix) % m;
            radix = radix * (MODULI[j] % m) % m;
        }
        let target = r.rem_euclid(i64::from(m)) as u32;
        let diff = (target + m - value) % m;
        digits.push(diff * inverse(radix, m) % m);
    }
    let mut x: u128 = 0;
    let mut radix: u128 = 1;
    for (l, &d) in digits.iter().enumerate() {
        x += u128::from(d) * radix;
        radix *= u128::from(MODULI[l]);
    }
    let big = modulus(n);
    if x >= big - big / 2 {
        -((big - x) as i128)
    } else {
        x as i128
    }
}

/// x·2^e, exactly where the result is a normal number (scaled in steps
/// that stay within f64's exponent range).
fn scale2(mut x: f64, mut e: i32) -> f64 {
    while e != 0 {
        let step = e.clamp(-1000, 1000);
        x *= f64::powi(2.0, step);
        e -= step;
    }
    x
}

/// The exponent of a finite nonzero x: ⌊log₂|x|⌋.
fn exponent(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let biased = (bits >> 52) as i32;
    if biased == 0 {
        // Subnormal: the leading bit of the fraction.
        -1074 + (63 - (bits & ((1 << 52) - 1)).leading_zeros() as i32)
    } else {
        biased - 1023
    }
}

/// Each of `count` vectors (the rows of A, or the columns of B) scaled by
/// a power of two into integers of at most `bits` bits: (exponents,
/// integers). A zero vector gets exponent 0.
fn scale(
    count: usize,
    len: usize,
    at: impl Fn(usize, usize) -> f64,
    bits: u32,
) -> Result<(Vec<i32>, Vec<i64>), Error> {
    let mut exps = vec![0; count];
    let mut ints = vec![0i64; count * len];
    for v in 0..count {
        let mut top = 0.0f64;
        for i in 0..len {
            let x = at(v, i);
            if !x.is_finite() {
                return Err(Error::Unsupported {
                    algorithm: "emulated",
                    what: "NaN or ∞ in an operand (the native product takes those)".into(),
                });
            }
            top = top.max(x.abs());
        }
        if top == 0.0 {
            continue;
        }
        // top·2^e in [2^(bits−1), 2^bits).
        let e = bits as i32 - 1 - exponent(top);
        exps[v] = e;
        for i in 0..len {
            ints[v * len + i] = scale2(at(v, i), e).trunc() as i64;
        }
    }
    Ok((exps, ints))
}

/// C ≈ A·B from `bits`-bit scaled integers and exact residue products,
/// every step as the GPU path takes it: the reference twin and oracle of
/// the emulated mode. Returns C and the number of moduli used.
///
/// # Errors
/// Mismatched shapes; `bits` outside 2–62; NaN or ∞ in A or B; a depth k
/// whose INT32 sums could overflow (k·128² ≥ 2³¹); more moduli than
/// [`MODULI`] holds.
pub fn multiply_reference(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    bits: u32,
) -> Result<(Matrix<f64>, usize), Error> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    if b.rows() != k {
        return Err(Error::DimensionMismatch {
            a: a.shape(),
            b: b.shape(),
        });
    }
    if !(2..=62).contains(&bits) {
        return Err(Error::InvalidOption(format!(
            "{bits} bits per scaled element (2 to 62)"
        )));
    }
    if (k as u128) * 128 * 128 >= 1 << 31 {
        return Err(Error::Unsupported {
            algorithm: "emulated",
            what: format!("a depth of {k} (INT32 sums of INT8 products overflow from 131072)"),
        });
    }
    let (ea, ia) = scale(m, k, |i, l| a.get(i, l), bits)?;
    let (eb, ib) = scale(n, k, |j, l| b.get(l, j), bits)?;
    let bound = (k as u128) << (2 * bits);
    let count = moduli_for(bound)?;
    // Per modulus: the INT8 residues, their INT32 product, reduced.
    let mut residues = vec![0i64; m * n * count];
    for (l, &md) in MODULI[..count].iter().enumerate() {
        let ra: Vec<i8> = ia
            .iter()
            .map(|&x| symmetric_residue(x.into(), md))
            .collect();
        let rb: Vec<i8> = ib
            .iter()
            .map(|&x| symmetric_residue(x.into(), md))
            .collect();
        for i in 0..m {
            for j in 0..n {
                let mut sum: i32 = 0;
                for p in 0..k {
                    sum += i32::from(ra[i * k + p]) * i32::from(rb[j * k + p]);
                }
                residues[(i * n + j) * count + l] = i64::from(sum);
            }
        }
    }
    let c = Matrix::try_from_fn(m, n, |i, j| {
        let exact = reconstruct(&residues[(i * n + j) * count..][..count]);
        scale2(exact as f64, -(ea[i] + eb[j]))
    })?;
    Ok((c, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn moduli_are_pairwise_coprime_and_residues_fit_an_i8() {
        fn gcd(a: u32, b: u32) -> u32 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        for (i, &a) in MODULI.iter().enumerate() {
            assert!(a <= 256);
            for &b in &MODULI[i + 1..] {
                assert_eq!(gcd(a, b), 1, "{a} and {b}");
            }
            for x in [
                -1000i128,
                -129,
                -128,
                -1,
                0,
                1,
                127,
                128,
                255,
                256,
                1 << 100,
            ] {
                let r = symmetric_residue(x, a);
                assert_eq!(
                    (x - i128::from(r)).rem_euclid(i128::from(a)),
                    0,
                    "{x} mod {a}"
                );
                assert!(i32::from(r) >= -(a as i32 / 2) && i32::from(r) < a as i32 - a as i32 / 2);
            }
        }
    }

    /// Every integer of magnitude below M/2 comes back from its residues,
    /// exactly, for every number of moduli; the bound picks enough.
    #[test]
    fn the_remainders_give_back_the_integer() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        for count in 1..=MODULI.len() {
            let half = (modulus(count) / 2) as i128;
            let mut cases = vec![0, 1, -1, half - 1, -(half - 1), -half];
            cases.extend((0..200).map(|_| rng.random_range(-(half - 1)..half)));
            for x in cases {
                let residues: Vec<i64> = MODULI[..count]
                    .iter()
                    .map(|&m| i64::from(symmetric_residue(x, m)))
                    .collect();
                assert_eq!(reconstruct(&residues), x, "{count} moduli");
            }
        }
        assert_eq!(moduli_for(127).unwrap(), 1);
        assert_eq!(moduli_for(128).unwrap(), 2);
        assert!(modulus(moduli_for(1 << 100).unwrap()) / 2 > 1 << 100);
        assert!(moduli_for(u128::MAX / 2).is_err());
    }

    /// Integer matrices whose entries fit the bits are scaled by powers of
    /// two only, so the emulated product is exact; random floats are
    /// within k·2^(2−bits) of each row's and column's largest entries.
    #[test]
    fn the_reference_product_is_exact_on_integers_and_bounded_on_floats() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(3);
        for (m, k, n) in [(1, 1, 1), (3, 7, 5), (17, 64, 9), (8, 1000, 4)] {
            let a = Matrix::<f64>::from_fn(m, k, |_, _| rng.random_range(-1000i64..1000) as f64);
            let b = Matrix::<f64>::from_fn(k, n, |_, _| rng.random_range(-1000i64..1000) as f64);
            let (c, _) = multiply_reference(a.as_ref(), b.as_ref(), 20).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let exact: i64 = (0..k)
                        .map(|p| a.get(i, p) as i64 * b.get(p, j) as i64)
                        .sum();
                    assert_eq!(c.get(i, j), exact as f64, "({i}, {j}) of {m}×{k}×{n}");
                }
            }
            let a = Matrix::<f64>::from_fn(m, k, |_, _| rng.random_range(-1.0..1.0));
            let b = Matrix::<f64>::from_fn(k, n, |_, _| rng.random_range(-1.0..1.0) * 1e-20);
            for bits in [24, 53] {
                let (c, count) = multiply_reference(a.as_ref(), b.as_ref(), bits).unwrap();
                assert!(modulus(count) / 2 > (k as u128) << (2 * bits));
                for i in 0..m {
                    let top_a = (0..k).map(|p| a.get(i, p).abs()).fold(0.0, f64::max);
                    for j in 0..n {
                        let top_b = (0..k).map(|p| b.get(p, j).abs()).fold(0.0, f64::max);
                        let reference: f64 = (0..k).map(|p| a.get(i, p) * b.get(p, j)).sum();
                        let allowed = k as f64
                            * top_a
                            * top_b
                            * (f64::powi(2.0, 3 - bits as i32) + 4.0 * f64::EPSILON);
                        assert!(
                            (c.get(i, j) - reference).abs() <= allowed,
                            "{bits} bits, ({i}, {j}): {} against {reference}",
                            c.get(i, j)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let a = Matrix::<f64>::filled(2, 3, 1.0);
        let b = Matrix::<f64>::filled(2, 2, 1.0);
        assert!(matches!(
            multiply_reference(a.as_ref(), b.as_ref(), 20),
            Err(Error::DimensionMismatch { .. })
        ));
        let b = Matrix::<f64>::filled(3, 2, f64::NAN);
        assert!(matches!(
            multiply_reference(a.as_ref(), b.as_ref(), 20),
            Err(Error::Unsupported { .. })
        ));
        let b = Matrix::<f64>::filled(3, 2, 1.0);
        assert!(matches!(
            multiply_reference(a.as_ref(), b.as_ref(), 63),
            Err(Error::InvalidOption(_))
        ));
        assert_eq!(exponent(f64::MIN_POSITIVE / 4.0), -1024);
        assert_eq!(exponent(-3.0), 1);
    }
}
