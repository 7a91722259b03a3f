//! Complex products by Ozaki scheme II with Karatsuba on the residues: the
//! CPU's `emulated` complex product at the `native` level, and the
//! reference twin of a GPU one.
//!
//! Each complex row of A is scaled by one power of two (its largest real
//! or imaginary magnitude sets E_i), each complex column of B likewise, so
//! that the real and the imaginary parts of an element share one scale.
//! Modulo each m, the residues of the scaled parts multiply by Karatsuba,
//! which is exact in modular arithmetic (unlike the 3M form in floating
//! point, it has no cancellation to fear):
//!
//! P₁ = Aᵣ·Bᵣ, P₂ = Aᵢ·Bᵢ, P₃ = (Aᵣ + Aᵢ mod m)·(Bᵣ + Bᵢ mod m),
//! Re ≡ P₁ − P₂ and Im ≡ P₃ − P₁ − P₂ (mod m):
//!
//! three INT8 products per modulus where four real emulated products take
//! four. Both parts are sums of 2k products of scaled entries, bounded as
//! the real product's of depth 2k ([`super::certify::Sums`], from the
//! complex rows' and columns' norms), so the moduli are that product's,
//! and one Garner reconstruction per part gives each exactly.
//!
//! **The certificate.** The real part is the real product [Aᵣ −Aᵢ]·[Bᵣ; Bᵢ]
//! of depth 2k, whose scaled entries are those above; its error bound is
//! the real one with the complex rows' and columns' 1-norms (over both
//! parts) and depth 2k, against (|Aᵣ||Bᵣ| + |Aᵢ||Bᵢ|)ᵢⱼ, bounded below by
//! the INT8 product of the magnitudes [Âᵣ Âᵢ]·[B̂ᵣ; B̂ᵢ]; the imaginary
//! part's against [Âᵣ Âᵢ]·[B̂ᵢ; B̂ᵣ]. An element needs the more of its two
//! parts' bits; the route, the moduli and the native fix-ups are then the
//! real product's ([`super::certify`]).

use super::certify::{bits_needed, route, settle, EmulationRoute, Goal, Sums, Target};
use super::moduli::{symmetric_residue, Garner, MODULI};
use super::reference::{int8_product, unscale};
use super::scaling::{magnitude, scaled, VectorStats};
use super::Tally;
use crate::element::{dot2, Element};
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::tunables::EMULATION_K_CHUNK;

/// A complex matrix's two parts.
type Parts<'a, T> = (MatRef<'a, T>, MatRef<'a, T>);

/// Whether [`gemm_complex`] takes a product of depth k: both parts' INT8
/// sums (of 2k magnitudes in the certificate) must stay exact.
pub(crate) fn takes_depth(k: usize) -> bool {
    2 * k <= EMULATION_K_CHUNK
}

/// C = A·B for complex A (m×k) and B (k×n), each as its real and
/// imaginary parts, by Karatsuba on the residues, every element within
/// `goal` (or computed natively); the route taken.
///
/// # Errors
/// [`Error::Unsupported`] for integer types or a depth [`takes_depth`]
/// refuses; mismatched shapes.
pub(crate) fn gemm_complex<T: Element>(
    (ar, ai): Parts<'_, T>,
    (br, bi): Parts<'_, T>,
    (mut cr, mut ci): (MatMut<'_, T>, MatMut<'_, T>),
    goal: Goal,
) -> Result<Tally, Error> {
    super::check_float::<T>()?;
    let ((m, k), n) = (ar.shape(), br.cols());
    let shapes = [ai.shape(), br.shape(), bi.shape(), cr.shape(), ci.shape()];
    if shapes != [(m, k), (k, n), (k, n), (m, n), (m, n)] {
        return Err(Error::InvalidOption(format!(
            "a complex product of {m}×{k} by {k}×{n} parts has parts of shapes {shapes:?}"
        )));
    }
    if !takes_depth(k) {
        return Err(Error::Unsupported {
            algorithm: "emulated (complex, Karatsuba on residues)",
            what: format!("depth {k} (at most {})", EMULATION_K_CHUNK / 2),
        });
    }
    let mut tally = Tally::default();
    if m == 0 || n == 0 {
        return Ok(tally);
    }
    let depth = 2 * k;
    let target = Target::of(goal, (m, depth, n), T::DTYPE);
    let at = |x: MatRef<'_, T>, i: usize, j: usize| x.get(i, j).to_f64();
    // One scale per complex row of A and column of B: the statistics of
    // the row [Aᵣ Aᵢ] and of the column [Bᵣ; Bᵢ] (a row of Bᵀ's parts).
    let stats = |re: MatRef<'_, T>, im: MatRef<'_, T>| -> Vec<VectorStats> {
        (0..re.rows())
            .map(|v| {
                VectorStats::of(depth, |q| {
                    if q < k {
                        at(re, v, q)
                    } else {
                        at(im, v, q - k)
                    }
                })
            })
            .collect()
    };
    let (rows, cols) = (stats(ar, ai), stats(br.t(), bi.t()));
    // The elements no certificate covers, compensated: Re from the pairs
    // (Aᵣ, Bᵣ) and (−Aᵢ, Bᵢ), Im from (Aᵣ, Bᵢ) and (Aᵢ, Bᵣ).
    let native = |i: usize, j: usize| -> (f64, f64) {
        let re = (0..k)
            .map(|p| (at(ar, i, p), at(br, p, j)))
            .chain((0..k).map(|p| (-at(ai, i, p), at(bi, p, j))));
        let im = (0..k)
            .map(|p| (at(ar, i, p), at(bi, p, j)))
            .chain((0..k).map(|p| (at(ai, i, p), at(br, p, j))));
        (dot2(re).0, dot2(im).0)
    };
    // k-contiguous rows of A's parts and of B's parts' columns, through
    // `f` of the entry and its vector's statistics.
    let lay_a = |f: &dyn Fn(f64, &VectorStats) -> i64, part: MatRef<'_, T>| -> Vec<i64> {
        (0..m * k)
            .map(|x| f(at(part, x / k, x % k), &rows[x / k]))
            .collect()
    };
    let lay_b = |f: &dyn Fn(f64, &VectorStats) -> i64, part: MatRef<'_, T>| -> Vec<i64> {
        (0..n * k)
            .map(|x| f(at(part, x % k, x / k), &cols[x / k]))
            .collect()
    };
    let join = |x: &[i64], y: &[i64], lines: usize| -> Vec<i8> {
        (0..lines)
            .flat_map(|v| x[v * k..][..k].iter().chain(&y[v * k..][..k]))
            .map(|&e| e as i8)
            .collect()
    };

    // The certificate: both parts' magnitude products over depth 2k.
    let mag = |x: f64, s: &VectorStats| i64::from(magnitude(x, s));
    let (mar, mai) = (lay_a(&mag, ar), lay_a(&mag, ai));
    let (mbr, mbi) = (lay_b(&mag, br), lay_b(&mag, bi));
    let mag_a = join(&mar, &mai, m);
    let g_re = int8_product(&mag_a, &join(&mbr, &mbi, n), m, n, depth);
    let g_im = int8_product(&mag_a, &join(&mbi, &mbr, n), m, n, depth);
    let t = target.tau();
    let need: Vec<u8> = (0..m * n)
        .map(|x| {
            let (row, col) = (&rows[x / n], &cols[x % n]);
            let re = bits_needed(row, col, f64::from(g_re[x]), depth, t);
            re.max(bits_needed(row, col, f64::from(g_im[x]), depth, t))
        })
        .collect();
    let mut histogram = [0u64; 256];
    for &v in &need {
        histogram[usize::from(v)] += 1;
    }
    // Both parts' sums are bounded as a real product's of depth 2k whose
    // rows and columns are the complex ones ([`super::certify::Sums`]).
    let widest = |s: &[VectorStats]| s.iter().fold(0.0f64, |w, x| w.max(x.norm));
    let sums = Sums::with_norms(depth, widest(&rows), widest(&cols));
    let chosen = settle(
        route(&histogram, m, sums, n, target),
        &histogram,
        sums,
        target,
    );
    tally.add(chosen, [0; super::Phase::COUNT]);
    let mut store = |i: usize, j: usize, (re, im): (f64, f64)| {
        cr.set(i, j, T::from_f64(re));
        ci.set(i, j, T::from_f64(im));
    };
    let (bits, moduli) = match chosen {
        EmulationRoute::Emulated { bits, moduli, .. } => (bits, moduli),
        EmulationRoute::Native { .. } | EmulationRoute::Slower { .. } => {
            for i in 0..m {
                for j in 0..n {
                    store(i, j, native(i, j));
                }
            }
            return Ok(tally);
        }
    };

    // Scaled integers (exact, |x′| ≤ 2^bits), three INT8 products per
    // modulus, each part's residue reduced into one balanced range.
    let int = |x: f64, s: &VectorStats| scaled(x, s, bits) as i64;
    let (iar, iai) = (lay_a(&int, ar), lay_a(&int, ai));
    let (ibr, ibi) = (lay_b(&int, br), lay_b(&int, bi));
    let mut re_res = vec![vec![0i64; m * n]; moduli];
    let mut im_res = vec![vec![0i64; m * n]; moduli];
    for (l, &md) in MODULI[..moduli].iter().enumerate() {
        let residues =
            |x: &[i64]| -> Vec<i8> { x.iter().map(|&v| symmetric_residue(v.into(), md)).collect() };
        let sum = |x: &[i8], y: &[i8]| -> Vec<i8> {
            x.iter()
                .zip(y)
                .map(|(&u, &v)| symmetric_residue(i128::from(u) + i128::from(v), md))
                .collect()
        };
        let (rar, rai, rbr, rbi) = (
            residues(&iar),
            residues(&iai),
            residues(&ibr),
            residues(&ibi),
        );
        let p1 = int8_product(&rar, &rbr, m, n, k);
        let p2 = int8_product(&rai, &rbi, m, n, k);
        let p3 = int8_product(&sum(&rar, &rai), &sum(&rbr, &rbi), m, n, k);
        for x in 0..m * n {
            let (a, b, c) = (i64::from(p1[x]), i64::from(p2[x]), i64::from(p3[x]));
            re_res[l][x] = (a - b).rem_euclid(i64::from(md));
            im_res[l][x] = (c - a - b).rem_euclid(i64::from(md));
        }
    }
    let garner = Garner::new(moduli);
    let (mut re, mut im) = (vec![0i64; moduli], vec![0i64; moduli]);
    for (i, row) in rows.iter().enumerate() {
        for (j, col) in cols.iter().enumerate() {
            let x = i * n + j;
            if u32::from(need[x]) > bits {
                store(i, j, native(i, j));
                continue;
            }
            for l in 0..moduli {
                re[l] = re_res[l][x];
                im[l] = im_res[l][x];
            }
            let part = |r: &[i64]| unscale(garner.reconstruct(r), row, col, bits);
            store(i, j, (part(&re), part(&im)));
        }
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;
    use crate::options::Accuracy;
    use rand::{Rng, SeedableRng};

    type Complex<T> = (Matrix<T>, Matrix<T>);

    fn random<T: Element>(
        rows: usize,
        cols: usize,
        seed: u64,
        entry: fn(&mut rand_pcg::Pcg64Mcg) -> f64,
    ) -> Complex<T> {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let mut part = || Matrix::<T>::from_fn(rows, cols, |_, _| T::from_f64(entry(&mut rng)));
        (part(), part())
    }

    /// The product, each part's largest error over the classical bound of
    /// the complex product (2k+1)·u·(|Aᵣ||Bᵣ| + |Aᵢ||Bᵢ|) (and the
    /// imaginary part's magnitudes), against Dot2 sums.
    fn worst_ratio<T: Element>(a: &Complex<T>, b: &Complex<T>, accuracy: Accuracy) -> (f64, Tally) {
        let ((m, k), n) = (a.0.shape(), b.0.cols());
        let mut c = (
            Matrix::<T>::filled(m, n, T::from_f64(f64::NAN)),
            Matrix::<T>::filled(m, n, T::from_f64(f64::NAN)),
        );
        let tally = gemm_complex(
            (a.0.as_ref(), a.1.as_ref()),
            (b.0.as_ref(), b.1.as_ref()),
            (c.0.as_mut(), c.1.as_mut()),
            Goal::on_cpu(accuracy),
        )
        .unwrap();
        let u = T::DTYPE.unit_roundoff();
        let g = |x: &Matrix<T>, i, j| x.get(i, j).to_f64();
        let mut worst = 0.0f64;
        for i in 0..m {
            for j in 0..n {
                let re = dot2(
                    (0..k)
                        .map(|p| (g(&a.0, i, p), g(&b.0, p, j)))
                        .chain((0..k).map(|p| (-g(&a.1, i, p), g(&b.1, p, j)))),
                )
                .0;
                let im = dot2(
                    (0..k)
                        .map(|p| (g(&a.0, i, p), g(&b.1, p, j)))
                        .chain((0..k).map(|p| (g(&a.1, i, p), g(&b.0, p, j)))),
                )
                .0;
                let mag_re: f64 = (0..k)
                    .map(|p| {
                        (g(&a.0, i, p) * g(&b.0, p, j)).abs()
                            + (g(&a.1, i, p) * g(&b.1, p, j)).abs()
                    })
                    .sum();
                let mag_im: f64 = (0..k)
                    .map(|p| {
                        (g(&a.0, i, p) * g(&b.1, p, j)).abs()
                            + (g(&a.1, i, p) * g(&b.0, p, j)).abs()
                    })
                    .sum();
                // The verifier's allowance at depth 2k.
                let gamma = 2.0 * (2.0 * k as f64 + 1.0) * u;
                for (got, want, mag) in [(g(&c.0, i, j), re, mag_re), (g(&c.1, i, j), im, mag_im)] {
                    assert!(got.is_finite(), "({i}, {j}) not written");
                    let err = (got - want).abs();
                    // Below the smallest normal the rounding is absolute.
                    let allowed = gamma * mag + f64::from(f32::MIN_POSITIVE);
                    worst = worst.max(err / allowed);
                }
            }
        }
        (worst, tally)
    }

    fn uniform(rng: &mut rand_pcg::Pcg64Mcg) -> f64 {
        rng.random_range(-1.0..1.0)
    }

    fn wide(rng: &mut rand_pcg::Pcg64Mcg) -> f64 {
        let x = 10f64.powf(rng.random_range(-3.0..3.0));
        if rng.random_bool(0.5) {
            x
        } else {
            -x
        }
    }

    fn small_integer(rng: &mut rand_pcg::Pcg64Mcg) -> f64 {
        f64::from(rng.random_range(-16i32..=16))
    }

    /// Over the shape matrix (empty, one, odd, primes, rectangles) and
    /// the hard classes, both types, every element is within the native
    /// level's bound (and so the classical one), the route emulated where
    /// the data allow.
    #[test]
    fn karatsuba_on_residues_is_within_the_native_bound() {
        for (m, k, n) in [
            (1, 1, 1),
            (0, 3, 2),
            (3, 0, 2),
            (2, 5, 3),
            (17, 31, 13),
            (8, 64, 9),
            (33, 129, 7),
        ] {
            for (class, entry) in [("uniform", uniform as fn(&mut _) -> f64), ("wide", wide)] {
                let seed = (m * 1000 + k * 10 + n) as u64;
                let (a, b) = (
                    random::<f64>(m, k, seed, entry),
                    random::<f64>(k, n, seed + 1, entry),
                );
                let (ratio, tally) = worst_ratio(&a, &b, Accuracy::Native);
                assert!(ratio <= 1.0, "f64 {m}×{k}×{n} {class}: {ratio} {tally:?}");
                let (a, b) = (
                    random::<f32>(m, k, seed, entry),
                    random::<f32>(k, n, seed + 1, entry),
                );
                let (ratio, tally) = worst_ratio(&a, &b, Accuracy::Native);
                assert!(ratio <= 1.0, "f32 {m}×{k}×{n} {class}: {ratio} {tally:?}");
                if m * n > 0 && k > 0 && class == "uniform" {
                    assert_eq!((tally.emulated, tally.native), (1, 0), "{m}×{k}×{n}");
                }
            }
        }
    }

    /// Small integers give exact products, whatever the route.
    #[test]
    fn integer_valued_complex_products_are_exact() {
        let (a, b) = (
            random::<f64>(19, 40, 5, small_integer),
            random::<f64>(40, 11, 6, small_integer),
        );
        let ((m, k), n) = (a.0.shape(), b.0.cols());
        let mut c = (Matrix::<f64>::zeros(m, n), Matrix::<f64>::zeros(m, n));
        gemm_complex(
            (a.0.as_ref(), a.1.as_ref()),
            (b.0.as_ref(), b.1.as_ref()),
            (c.0.as_mut(), c.1.as_mut()),
            Goal::on_cpu(Accuracy::Native),
        )
        .unwrap();
        for i in 0..m {
            for j in 0..n {
                let (mut re, mut im) = (0.0, 0.0);
                for p in 0..k {
                    let (xr, xi, yr, yi) =
                        (a.0.get(i, p), a.1.get(i, p), b.0.get(p, j), b.1.get(p, j));
                    re += xr * yr - xi * yi;
                    im += xr * yi + xi * yr;
                }
                assert_eq!((c.0.get(i, j), c.1.get(i, j)), (re, im), "({i}, {j})");
            }
        }
    }

    /// A NaN or ∞ in a row of A sends that row's elements to the native
    /// sums, which carry it; the rest stay emulated and exact-rounded.
    #[test]
    fn non_finite_rows_go_native() {
        let (mut a, b) = (
            random::<f64>(6, 10, 7, uniform),
            random::<f64>(10, 5, 8, uniform),
        );
        a.1.set(2, 3, f64::NAN);
        let mut c = (Matrix::<f64>::zeros(6, 5), Matrix::<f64>::zeros(6, 5));
        let tally = gemm_complex(
            (a.0.as_ref(), a.1.as_ref()),
            (b.0.as_ref(), b.1.as_ref()),
            (c.0.as_mut(), c.1.as_mut()),
            Goal::on_cpu(Accuracy::Native),
        )
        .unwrap();
        assert!((0..5).all(|j| c.0.get(2, j).is_nan() && c.1.get(2, j).is_nan()));
        assert!((0..6)
            .filter(|&i| i != 2)
            .all(|i| (0..5).all(|j| c.0.get(i, j).is_finite())));
        // Five elements are uncertified: fixed up, or (beyond the
        // allowance of so small a product) the whole product native.
        assert!(tally.native == 1 || tally.fixups == 5, "{tally:?}");
    }

    #[test]
    fn depths_beyond_a_slice_and_integers_are_refused() {
        assert!(takes_depth(EMULATION_K_CHUNK / 2) && !takes_depth(EMULATION_K_CHUNK / 2 + 1));
        let (a, b) = (
            random::<f64>(2, 3, 1, uniform),
            random::<f64>(4, 2, 2, uniform),
        );
        let mut c = (Matrix::<f64>::zeros(2, 2), Matrix::<f64>::zeros(2, 2));
        let wrong = gemm_complex(
            (a.0.as_ref(), a.1.as_ref()),
            (b.0.as_ref(), b.1.as_ref()),
            (c.0.as_mut(), c.1.as_mut()),
            Goal::on_cpu(Accuracy::Native),
        );
        assert!(wrong.is_err());
    }
}
