//! The moduli, residues and the Chinese remainder theorem of Ozaki
//! scheme II: an integer of magnitude below M/2 (M = m₀·m₁···m_{N−1})
//! from its residues modulo N pairwise coprime moduli, each at most 256
//! so that a symmetric residue fits an i8.

use crate::error::Error;

/// Pairwise coprime moduli, at most 256 each, largest first: 2⁸, 3·5·17,
/// 11·23, 251, 13·19, then primes or products of primes not used before.
/// The first N of them multiply to about 2^(7.9·N); all 16 to 2^125.4.
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

/// The product M of the first `count` moduli.
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

/// `x` mod `m` in the symmetric range, for |x| < 2³¹.
fn balanced(x: i32, m: u32) -> i32 {
    let m = m as i32;
    let r = x.rem_euclid(m);
    if r >= m - m / 2 {
        r - m
    } else {
        r
    }
}

/// Garner's algorithm with balanced digits, for the first `count` moduli.
///
/// With radices R₀ = 1, R_l = m₀···m_{l−1}, every integer x with
/// −M/2 ≤ x < M/2 is x = Σ d_l·R_l for unique digits d_l in the symmetric
/// range of m_l (the digits' extremes sum to exactly −M/2 and M/2 − 1). The
/// digits come from the residues one by one,
/// d_l = (r_l − Σ_{j<l} d_j·(R_j mod m_l))·(R_l⁻¹ mod m_l) mod m_l,
/// with sums below 2²⁰ in magnitude, so an i32 GPU thread computes them as
/// this code does; then Horner's rule x = d₀ + m₀·(d₁ + m₁·(d₂ + …)) in
/// 128-bit integers gives x exactly. A small x has zero high digits, so
/// there is no cancellation anywhere.
#[derive(Debug, Clone)]
pub struct Garner {
    count: usize,
    /// weight[l][j] = R_j mod m_l for j < l.
    weight: [[u32; 16]; 16],
    /// inverse[l] = R_l⁻¹ mod m_l.
    inverse: [u32; 16],
}

impl Garner {
    /// The tables for the first `count` moduli (1 to 16).
    pub fn new(count: usize) -> Self {
        assert!((1..=MODULI.len()).contains(&count), "1 to 16 moduli");
        let mut weight = [[0u32; 16]; 16];
        let mut inverse_of = [1u32; 16];
        for l in 0..count {
            let m = MODULI[l];
            let mut radix = 1u32;
            for (j, &mj) in MODULI[..l].iter().enumerate() {
                weight[l][j] = radix;
                radix = radix * (mj % m) % m;
            }
            inverse_of[l] = inverse(radix, m);
        }
        Garner {
            count,
            weight,
            inverse: inverse_of,
        }
    }

    /// The balanced digits of the integer whose residues (any
    /// representatives, |r| < 2³¹ − 2²⁰) are `residues`.
    pub fn digits(&self, residues: &[i64]) -> [i32; 16] {
        assert_eq!(residues.len(), self.count, "one residue per modulus");
        let mut d = [0i32; 16];
        for l in 0..self.count {
            let m = MODULI[l];
            let r = residues[l].rem_euclid(i64::from(m)) as i32;
            let mut s = 0i32;
            for (j, &dj) in d[..l].iter().enumerate() {
                s += dj * self.weight[l][j] as i32;
            }
            let t = balanced(r - s, m);
            d[l] = balanced(t * self.inverse[l] as i32, m);
        }
        d
    }

    /// The integer x with −M/2 ≤ x < M/2 and x ≡ r_l (mod m_l) for each
    /// residue r_l.
    pub fn reconstruct(&self, residues: &[i64]) -> i128 {
        let d = self.digits(residues);
        let mut x = i128::from(d[self.count - 1]);
        for l in (0..self.count - 1).rev() {
            x = x * i128::from(MODULI[l]) + i128::from(d[l]);
        }
        x
    }
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
                assert_eq!((x - i128::from(r)).rem_euclid(i128::from(a)), 0);
                assert!(i32::from(r) >= -(a as i32 / 2) && i32::from(r) < a as i32 - a as i32 / 2);
            }
        }
    }

    /// Every integer in [−M/2, M/2) comes back from its residues, exactly,
    /// for every number of moduli, the range's ends included; residues
    /// given as INT32 sums (any representative) do too.
    #[test]
    fn the_remainders_give_back_the_integer() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        for count in 1..=MODULI.len() {
            let garner = Garner::new(count);
            let half = (modulus(count) / 2) as i128;
            let mut cases = vec![0, 1, -1, half - 1, -half, -(half - 1), half / 3];
            cases.extend((0..300).map(|_| rng.random_range(-half..half)));
            for x in cases {
                let residues: Vec<i64> = MODULI[..count]
                    .iter()
                    .map(|&m| {
                        let r = i64::from(symmetric_residue(x, m));
                        // Another representative, as an INT32 sum gives.
                        r + i64::from(m) * rng.random_range(-1000..1000)
                    })
                    .collect();
                assert_eq!(garner.reconstruct(&residues), x, "{count} moduli");
            }
        }
        assert_eq!(moduli_for(127).unwrap(), 1);
        assert_eq!(moduli_for(128).unwrap(), 2);
        assert!(modulus(moduli_for(1 << 100).unwrap()) / 2 > 1 << 100);
        assert!(moduli_for(u128::MAX / 2).is_err());
    }

    /// Small integers have zero high digits: no cancellation in Horner's
    /// rule.
    #[test]
    fn small_integers_have_zero_high_digits() {
        let garner = Garner::new(16);
        for x in [0i128, 1, -1, 127, -128, 1000, -32767] {
            let residues: Vec<i64> = MODULI
                .iter()
                .map(|&m| i64::from(symmetric_residue(x, m)))
                .collect();
            let d = garner.digits(&residues);
            assert!(d[3..].iter().all(|&v| v == 0), "{x}: {d:?}");
        }
    }
}
