//! Exact integer products on INT8 matrix engines: the `emulated`
//! algorithm for i32 and i64, here as plain Rust, the reference twin and
//! test oracle of the GPU kernels (`kernels/bytes.cu`).
//!
//! fastmm's integers wrap: C = α·A·B + β·C in Z/2^w (w = 32 or 64). Each
//! entry is cut into D = w/8 *balanced* base-256 digits,
//!
//!   x ≡ Σ_{p<D} d_p·256^p (mod 2^w),  d_p ∈ [−128, 127],
//!
//! taking d_p as the low byte read as a signed byte and carrying the rest
//! (x ← (x − d_p)/256, exact). Then
//!
//!   A·B ≡ Σ_{s<D} 256^s·P_s (mod 2^w),  P_s = Σ_{p+q=s} A_p·B_q,
//!
//! where A_p and B_q are the digit planes (INT8 matrices): the terms with
//! p + q ≥ D vanish modulo 2^w, leaving D(D+1)/2 INT8 products (10 for
//! i32, 36 for i64). Each P_s is an INT32 sum of (s+1)·k products of
//! magnitude at most 128² = 2^14, exact while (s+1)·k·2^14 < 2^31, so
//! deeper products run in slices of [`slice_depth`] added with β = 1.
//! The combination Σ_s 256^s·P_s, α and β are done once per slice in
//! wrapping arithmetic.

use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};

use super::{EmulationRoute, Tally};

/// INT8 products per slice for D digits: the pairs p + q < D.
pub fn products_per_slice(digits: usize) -> usize {
    digits * (digits + 1) / 2
}

/// The deepest slice (a multiple of 16, the GPU planes' padding) whose
/// INT32 sums stay exact for D digits: the largest P_D−1 sums D·k products
/// of at most 2^14, so k < 2^17/D.
pub fn slice_depth(digits: usize) -> usize {
    let bound = (1usize << 17) / digits.max(1);
    // Strictly below the bound: D·k·2^14 ≤ 2^31 − 2^14 < 2^31.
    (bound - 1) / 16 * 16
}

/// The balanced base-256 digits of `x` modulo 2^(8·`digits`), lowest
/// first: Σ d_p·256^p ≡ x, each d_p ∈ [−128, 127].
pub fn split(x: i128, digits: usize) -> Vec<i8> {
    let mask = if digits >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * digits)) - 1
    };
    let mut u = (x as u128) & mask;
    (0..digits)
        .map(|_| {
            let d = (u & 0xFF) as u8 as i8;
            // u − d is a multiple of 256 (mod 2^w): the shift is exact.
            u = (u.wrapping_sub(d as i128 as u128) & mask) >> 8;
            d
        })
        .collect()
}

/// The digit planes of a rows×len set of vectors, `get(v, l)` the entry:
/// plane p holds d_p of every entry, vector by vector.
fn planes<T: Element>(
    (count, len): (usize, usize),
    get: impl Fn(usize, usize) -> T,
    digits: usize,
) -> Vec<Vec<i8>> {
    let mut out = vec![vec![0i8; count * len]; digits];
    for v in 0..count {
        for l in 0..len {
            for (p, d) in split(get(v, l).to_i128(), digits).into_iter().enumerate() {
                out[p][v * len + l] = d;
            }
        }
    }
    out
}

/// C ← α·A·B + β·C for i32 or i64 (wrapping), through digit planes and
/// INT32 sums exactly as the GPU computes them; β = 0 never reads C.
/// Returns the route (one piece per slice of k).
///
/// # Errors
/// Mismatched shapes; float element types (see
/// [`super::reference::gemm_reference`]).
pub fn gemm_bytes<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
) -> Result<Tally, Error> {
    crate::matrix::check_product_shapes(a, b, c.shape())?;
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    if !T::DTYPE.is_integer() {
        return Err(Error::Unsupported {
            algorithm: "emulated (byte planes)",
            what: format!("{} (floats take Ozaki scheme II)", T::DTYPE),
        });
    }
    // One digit per byte.
    let digits = std::mem::size_of::<T>();
    let mut tally = Tally::default();
    if m == 0 || n == 0 {
        return Ok(tally);
    }
    let width = 8 * digits as u32;
    let route = EmulationRoute::Emulated {
        bits: width,
        moduli: products_per_slice(digits),
        fixups: 0,
    };
    let ap = planes((m, k), |i, l| a.get(i, l), digits);
    // B by columns: vector j is column j (k-contiguous, as on the GPU).
    let bp = planes((n, k), |j, l| b.get(l, j), digits);
    let depth = slice_depth(digits);
    let mut beta = beta;
    let mut p0 = 0;
    loop {
        let p1 = (p0 + depth).min(k);
        for i in 0..m {
            for j in 0..n {
                let mut sum: u128 = 0;
                for s in 0..digits {
                    let mut plane: i32 = 0;
                    for p in 0..=s {
                        let (x, y) = (&ap[p][i * k..], &bp[s - p][j * k..]);
                        for l in p0..p1 {
                            let term = i32::from(x[l]) * i32::from(y[l]);
                            plane = plane.checked_add(term).ok_or_else(|| {
                                Error::Cuda(format!(
                                    "an INT32 sum of the byte planes overflowed at slice depth {depth}"
                                ))
                            })?;
                        }
                    }
                    sum = sum.wrapping_add((i128::from(plane) as u128) << (8 * s));
                }
                let product = T::wrap_from_i128(sum as i128);
                let value = if beta == T::ZERO {
                    alpha.mul(product)
                } else {
                    alpha.mul(product).add(beta.mul(c.get(i, j)))
                };
                c.set(i, j, value);
            }
        }
        tally.add(route, [0; super::Phase::COUNT]);
        p0 = p1;
        beta = T::ONE;
        if p0 >= k {
            return Ok(tally);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;

    #[test]
    fn digits_are_balanced_bytes_that_sum_back_modulo_the_width() {
        let samples: [i128; 12] = [
            0,
            1,
            -1,
            127,
            128,
            -128,
            -129,
            255,
            i32::MAX as i128,
            i32::MIN as i128,
            i64::MAX as i128,
            i64::MIN as i128,
        ];
        for digits in [4usize, 8] {
            let modulus = 1i128 << (8 * digits);
            for &x in &samples {
                let d = split(x, digits);
                assert_eq!(d.len(), digits);
                let back: i128 = d
                    .iter()
                    .enumerate()
                    .map(|(p, &v)| i128::from(v) << (8 * p))
                    .sum();
                assert_eq!(
                    back.rem_euclid(modulus),
                    x.rem_euclid(modulus),
                    "{x} in {digits}"
                );
            }
        }
        for digits in [4usize, 8] {
            let x = -128 * ((1i128 << (8 * digits)) - 1) / 255;
            assert!(split(x, digits).iter().all(|&d| d == -128));
        }
        // Small values are their own digit, the rest zero.
        assert_eq!(split(-5, 4), vec![-5, 0, 0, 0]);
        assert_eq!(split(200, 4), vec![-56, 1, 0, 0]);
    }

    #[test]
    fn slices_keep_every_int32_sum_exact() {
        for digits in [4usize, 8] {
            let depth = slice_depth(digits);
            assert_eq!(depth % 16, 0);
            // The worst sum: D products per column, each (−128)².
            let worst = digits as i64 * depth as i64 * (1 << 14);
            assert!(worst <= i64::from(i32::MAX), "{digits}: {worst}");
            assert!((digits as i64) * (depth as i64 + 16) * (1 << 14) > i64::from(i32::MAX));
        }
        assert_eq!(products_per_slice(4), 10);
        assert_eq!(products_per_slice(8), 36);
    }

    /// Integers whose digits are all −128 where `worst`, else spread over
    /// the whole range (wrapping products of huge values).
    fn matrix<T: Element>(rows: usize, cols: usize, seed: u64, worst: bool) -> Matrix<T> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Matrix::from_fn(rows, cols, |_, _| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if worst {
                // −128·Σ_p 256^p: every digit −128, every digit product
                // 2^14, the INT32 sums at their largest.
                let digits = std::mem::size_of::<T>();
                T::wrap_from_i128(-128 * ((1i128 << (8 * digits)) - 1) / 255)
            } else {
                T::wrap_from_i128(state as i64 as i128)
            }
        })
    }

    fn wrapping_reference<T: Element>(
        alpha: T,
        a: &Matrix<T>,
        b: &Matrix<T>,
        beta: T,
        c: &Matrix<T>,
    ) -> Matrix<T> {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        Matrix::from_fn(m, n, |i, j| {
            let mut sum = T::ZERO;
            for l in 0..k {
                sum = sum.add(a.get(i, l).mul(b.get(l, j)));
            }
            alpha.mul(sum).add(beta.mul(c.get(i, j)))
        })
    }

    fn agrees_with_the_wrapping_product<T: Element>() {
        let digits = std::mem::size_of::<T>();
        // 0, 1, primes, rectangles, and one deeper than a slice (two
        // slices, the second short) on a thin product.
        let deep = slice_depth(digits) + 3;
        for (m, k, n) in [
            (0, 3, 2),
            (1, 1, 1),
            (3, 0, 2),
            (2, 3, 5),
            (7, 13, 11),
            (2, deep, 3),
        ] {
            for worst in [false, true] {
                let a = matrix::<T>(m, k, 1, worst);
                let b = matrix::<T>(k, n, 2, worst);
                let c0 = matrix::<T>(m, n, 3, false);
                for (alpha, beta) in [
                    (T::ONE, T::ZERO),
                    (T::from_i64(-3), T::from_i64(7)),
                    (T::wrap_from_i128(i64::MIN as i128), T::ONE),
                ] {
                    let want = wrapping_reference(alpha, &a, &b, beta, &c0);
                    let mut c = c0.clone();
                    let tally =
                        gemm_bytes(alpha, a.as_ref(), b.as_ref(), beta, c.as_mut()).expect("runs");
                    assert!(c == want, "{m}×{k}×{n} worst {worst} {}", T::DTYPE);
                    if m * n > 0 {
                        assert_eq!(tally.moduli, products_per_slice(digits));
                        assert_eq!(
                            tally.emulated as usize,
                            k.div_ceil(slice_depth(digits)).max(1)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn i32_products_are_exact_modulo_2_to_the_32() {
        agrees_with_the_wrapping_product::<i32>();
    }

    #[test]
    fn i64_products_are_exact_modulo_2_to_the_64() {
        agrees_with_the_wrapping_product::<i64>();
    }

    #[test]
    fn floats_are_refused() {
        let a = Matrix::<f32>::zeros(2, 2);
        let mut c = Matrix::<f32>::zeros(2, 2);
        assert!(matches!(
            gemm_bytes(1.0, a.as_ref(), a.as_ref(), 0.0, c.as_mut()),
            Err(Error::Unsupported { .. })
        ));
    }
}
