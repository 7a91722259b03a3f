//! The emulated product on the CPU, step by step as the GPU takes it:
//! the reference twin and test oracle of the GPU kernels, and the CPU's
//! own `emulated` algorithm (slow: its INT8 products are scalar loops).

use rayon::prelude::*;

use super::certify::{
    bits_needed, certificate_depth, route, settle, wants_full_depth, EmulationRoute, Goal, Sums,
    Target,
};
use super::moduli::{symmetric_residue, Garner, MODULI};
use super::scaling::{col_stats, ldexp, magnitude, row_stats, scaled, VectorStats};
use super::Tally;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::tunables::EMULATION_K_CHUNK;

/// An INT8 product with INT32 sums, as the tensor cores compute it: rows
/// of `a` (m×k) against rows of `bt` (n×k), both k-contiguous, k at most
/// [`EMULATION_K_CHUNK`] so that no sum overflows.
pub(super) fn int8_product(a: &[i8], bt: &[i8], m: usize, n: usize, k: usize) -> Vec<i32> {
    int8_product_to(a, bt, (m, n, k), k)
}

/// As [`int8_product`] over the first `depth` ≤ k of the depth only.
fn int8_product_to(
    a: &[i8],
    bt: &[i8],
    (m, n, k): (usize, usize, usize),
    depth: usize,
) -> Vec<i32> {
    debug_assert!(k <= EMULATION_K_CHUNK && depth <= k);
    let mut out = vec![0i32; m * n];
    out.par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            let ai = &a[i * k..][..depth];
            for (j, c) in row.iter_mut().enumerate() {
                let bj = &bt[j * k..][..depth];
                *c = ai
                    .iter()
                    .zip(bj)
                    .fold(0i32, |s, (&x, &y)| s + i32::from(x) * i32::from(y));
            }
        });
    out
}

/// C ← α·A·B + β·C by Ozaki scheme II, as the GPU computes it: scaling,
/// the certificate's magnitude product and histogram, the route, INT8
/// residue products, Garner's reconstruction, the scaling back, and the
/// native recomputation of uncertified elements (or of everything, where
/// the route says so). β = 0 never reads C. Depths beyond
/// 2¹⁶ (`EMULATION_K_CHUNK`) run in slices of k added with β = 1, as on the
/// GPU. Floats meet `goal` (the certificate's `Target`); integers
/// are exact whatever it says. Returns the routes taken.
///
/// # Errors
/// Mismatched shapes.
pub fn gemm_reference<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    goal: Goal,
) -> Result<Tally, Error> {
    crate::matrix::check_product_shapes(a, b, c.shape())?;
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    if T::DTYPE.is_integer() {
        return super::bytes::gemm_bytes(alpha, a, b, beta, c);
    }
    super::check_float::<T>()?;
    let mut tally = Tally::default();
    if m == 0 || n == 0 {
        return Ok(tally);
    }
    let mut beta = beta;
    let mut p0 = 0;
    loop {
        let depth = (k - p0).min(EMULATION_K_CHUNK);
        let (sa, sb) = (a.submatrix(0, p0, m, depth), b.submatrix(p0, 0, depth, n));
        tally.add(
            slice(alpha, sa, sb, beta, c.rb_mut(), goal),
            [0; super::Phase::COUNT],
        );
        p0 += depth;
        beta = T::ONE;
        if p0 >= k {
            return Ok(tally);
        }
    }
}

/// One slice of depth at most [`EMULATION_K_CHUNK`]; its route.
fn slice<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    goal: Goal,
) -> EmulationRoute {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let target = Target::of(goal, (m, k, n), T::DTYPE);
    let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
    let store = |c: &mut MatMut<'_, T>, i: usize, j: usize, product: f64| {
        let value = if beta == 0.0 {
            alpha * product
        } else {
            alpha * product + beta * c.get(i, j).to_f64()
        };
        c.set(i, j, T::from_f64(value));
    };
    // Elements the certificate does not cover, no less accurate than any
    // native product (compensated).
    let native = |i: usize, j: usize| -> f64 {
        crate::element::dot2((0..k).map(|p| (a.get(i, p).to_f64(), b.get(p, j).to_f64()))).0
    };
    // 1. Statistics of rows and columns; 2. the magnitude product.
    let rows = row_stats(a);
    let cols = col_stats(b);
    let widest = |stats: &[VectorStats]| stats.iter().fold(0.0f64, |w, s| w.max(s.norm));
    let sums = Sums::with_norms(k, widest(&rows), widest(&cols));
    let mag_a: Vec<i8> = (0..m * k)
        .map(|x| magnitude(a.get(x / k, x % k).to_f64(), &rows[x / k]))
        .collect();
    let mag_bt: Vec<i8> = (0..n * k)
        .map(|x| magnitude(b.get(x % k, x / k).to_f64(), &cols[x / k]))
        .collect();
    // 3. Every element's need, counted: from the first part of the depth,
    // then the whole where that could pay.
    let t = target.tau();
    let certify = |depth: usize| {
        let g = int8_product_to(&mag_a, &mag_bt, (m, n, k), depth);
        let need: Vec<u8> = (0..m * n)
            .map(|x| bits_needed(&rows[x / n], &cols[x % n], g[x] as f64, k, t))
            .collect();
        let mut histogram = [0u64; 256];
        for &v in &need {
            histogram[v as usize] += 1;
        }
        (need, histogram, route(&histogram, m, sums, n, target))
    };
    let first = certificate_depth(sums, target);
    let (mut need, mut histogram, mut route) = certify(first);
    if first < k && wants_full_depth(route, sums, target) {
        (need, histogram, route) = certify(k);
    }
    let route = settle(route, &histogram, sums, target);
    let (bits, moduli) = match route {
        EmulationRoute::Emulated { bits, moduli, .. } => (bits, moduli),
        EmulationRoute::Native { .. } | EmulationRoute::Slower { .. } => {
            for i in 0..m {
                for j in 0..n {
                    store(&mut c, i, j, native(i, j));
                }
            }
            return route;
        }
    };

    // 4. Scaled integers (exact in an f64, |x′| ≤ 2^bits ≤ 2^62).
    let int_a: Vec<i64> = (0..m * k)
        .map(|x| scaled(a.get(x / k, x % k).to_f64(), &rows[x / k], bits) as i64)
        .collect();
    let int_bt: Vec<i64> = (0..n * k)
        .map(|x| scaled(b.get(x % k, x / k).to_f64(), &cols[x / k], bits) as i64)
        .collect();

    // 5. One INT8 product per modulus.
    let products: Vec<Vec<i32>> = MODULI[..moduli]
        .iter()
        .map(|&md| {
            let ra: Vec<i8> = int_a
                .iter()
                .map(|&x| symmetric_residue(x.into(), md))
                .collect();
            let rb: Vec<i8> = int_bt
                .iter()
                .map(|&x| symmetric_residue(x.into(), md))
                .collect();
            int8_product(&ra, &rb, m, n, k)
        })
        .collect();

    // 6. Reconstruction and scaling back; uncertified elements natively.
    let garner = Garner::new(moduli);
    let mut residues = vec![0i64; moduli];
    for (i, row) in rows.iter().enumerate() {
        for (j, col) in cols.iter().enumerate() {
            let x = i * n + j;
            if need[x] as u32 > bits {
                store(&mut c, i, j, native(i, j));
                continue;
            }
            for (l, r) in residues.iter_mut().enumerate() {
                *r = i64::from(products[l][x]);
            }
            let exact = garner.reconstruct(&residues);
            store(&mut c, i, j, unscale(exact, row, col, bits));
        }
    }
    route
}

/// x·2^{E_i+F_j+2−2b}: the exact integer product scaled back, rounded
/// once to f64 (then once more where the result is subnormal).
pub fn unscale(x: i128, row: &VectorStats, col: &VectorStats, bits: u32) -> f64 {
    ldexp(x as f64, row.exponent + col.exponent + 2 - 2 * bits as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;
    use crate::options::Accuracy;
    use crate::verify::verify;
    use rand::{Rng, SeedableRng};

    fn check_at<T: Element>(a: &Matrix<T>, b: &Matrix<T>, accuracy: Accuracy) -> Tally {
        let mut c = Matrix::<T>::filled(a.rows(), b.cols(), T::from_f64(f64::NAN));
        let e = gemm_reference(
            T::from_f64(1.0),
            a.as_ref(),
            b.as_ref(),
            T::from_f64(0.0),
            c.as_mut(),
            Goal::on_cpu(accuracy),
        )
        .unwrap();
        let v = verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap();
        assert!(
            v.ok,
            "{}×{}×{} {:?}: bound ratio {}",
            a.rows(),
            a.cols(),
            b.cols(),
            e,
            v.bound_ratio
        );
        e
    }

    /// [`check_at`] at both named levels an emulated product certifies
    /// against the classical bound or tighter; the native level's tally.
    fn check<T: Element>(a: &Matrix<T>, b: &Matrix<T>) -> Tally {
        check_at(a, b, Accuracy::Bound);
        check_at(a, b, Accuracy::Native)
    }

    /// Random data of every shape of the matrix, f32 and f64, within the
    /// native bound; integers held in floats come back exactly.
    #[test]
    fn random_products_are_within_the_native_bound() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        for (m, k, n) in [
            (1, 1, 1),
            (2, 3, 5),
            (7, 1, 3),
            (5, 17, 8),
            (9, 31, 2),
            (33, 64, 17),
            (16, 127, 16),
        ] {
            let a = Matrix::<f64>::from_fn(m, k, |_, _| rng.random_range(-1.0..1.0));
            let b = Matrix::<f64>::from_fn(k, n, |_, _| rng.random_range(-1.0..1.0));
            let e = check(&a, &b);
            assert!(e.emulated == 1 && e.fixups == 0, "{e:?}");
            let a32 = Matrix::<f32>::from_fn(m, k, |i, j| a.get(i, j) as f32);
            let b32 = Matrix::<f32>::from_fn(k, n, |i, j| b.get(i, j) as f32);
            let e32 = check(&a32, &b32);
            assert!(
                e32.emulated == 1 && e32.moduli < e.moduli,
                "f32 {e32:?}, f64 {e:?}"
            );
            let ai = Matrix::<f64>::from_fn(m, k, |_, _| rng.random_range(-100i32..100) as f64);
            let bi = Matrix::<f64>::from_fn(k, n, |_, _| rng.random_range(-100i32..100) as f64);
            let mut c = Matrix::<f64>::zeros(m, n);
            gemm_reference(
                1.0,
                ai.as_ref(),
                bi.as_ref(),
                0.0,
                c.as_mut(),
                Goal::on_cpu(Accuracy::Native),
            )
            .unwrap();
            for i in 0..m {
                for j in 0..n {
                    let exact: f64 = (0..k).map(|p| ai.get(i, p) * bi.get(p, j)).sum();
                    assert_eq!(c.get(i, j), exact);
                }
            }
        }
    }

    /// Wide exponent ranges (1e−30 to 1e30 within every row and column),
    /// zero rows and columns, subnormals, NaN and ∞: every element within
    /// the bound or IEEE's answer, through more bits, fix-ups or the
    /// native route.
    #[test]
    fn hard_inputs_stay_within_the_bound() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
        let (m, k, n) = (24, 40, 20);
        let wide = |rng: &mut rand_pcg::Pcg64| {
            let e: f64 = rng.random_range(-30.0..30.0);
            let s = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            s * 10f64.powf(e)
        };
        let a = Matrix::<f64>::from_fn(m, k, |_, _| wide(&mut rng));
        let b = Matrix::<f64>::from_fn(k, n, |_, _| wide(&mut rng));
        check(&a, &b);
        let a32 = Matrix::<f32>::from_fn(m, k, |i, j| a.get(i, j) as f32);
        let b32 = Matrix::<f32>::from_fn(k, n, |i, j| b.get(i, j) as f32);
        check(&a32, &b32);

        // Zero rows and columns, subnormals, and one NaN, one ∞.
        let mut a = Matrix::<f64>::from_fn(m, k, |_, _| rng.random_range(-1.0..1.0));
        let mut b = Matrix::<f64>::from_fn(k, n, |_, _| rng.random_range(-1.0..1.0));
        for p in 0..k {
            a.set(3, p, 0.0);
            b.set(p, 4, 0.0);
            a.set(5, p, rng.random_range(-1.0..1.0) * 1e-310);
            b.set(p, 6, rng.random_range(-1.0..1.0) * 1e-300);
        }
        a.set(7, 2, f64::NAN);
        b.set(9, 8, f64::INFINITY);
        let e = check(&a, &b);
        // The NaN's row and the ∞'s column: 20 + 24 − 1 elements natively,
        // more than 24·20/256 allow, so the whole product runs natively.
        assert_eq!((e.emulated, e.native), (0, 1), "{e:?}");
        a.set(7, 2, 0.5);
        b.set(9, 8, 0.5);
        let e = check(&a, &b);
        assert_eq!((e.emulated, e.native), (1, 0), "{e:?}");

        // Magnitudes that cancel: a row's large entries meet a column's
        // small ones, so the row/column scaling loses the products that
        // matter; the certificate sees it and takes more bits.
        let mut a = Matrix::<f64>::from_fn(4, 8, |_, p| if p < 4 { 1e20 } else { 1.0 });
        let b = Matrix::<f64>::from_fn(8, 4, |p, _| if p < 4 { 1e-20 } else { 1.0 });
        check(&a, &b);
        a.set(0, 0, 1e300);
        check(&a, &b);
    }

    /// A depth beyond one INT8 product's runs in slices added with β = 1,
    /// each certified: two routes, the product within the bound.
    #[test]
    fn deep_products_run_in_slices() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(13);
        let k = EMULATION_K_CHUNK + 4465;
        let a = Matrix::<f32>::from_fn(2, k, |_, _| rng.random_range(-1.0..1.0));
        let b = Matrix::<f32>::from_fn(k, 3, |_, _| rng.random_range(-1.0..1.0));
        let t = check(&a, &b);
        assert_eq!((t.emulated, t.native), (2, 0), "{t:?}");
    }

    /// α, β and a strided, transposed C, against the product of the
    /// parts.
    #[test]
    fn alpha_beta_and_views() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(9);
        let a = Matrix::<f64>::from_fn(6, 9, |_, _| rng.random_range(-1.0..1.0));
        let b = Matrix::<f64>::from_fn(9, 5, |_, _| rng.random_range(-1.0..1.0));
        let c0 = Matrix::<f64>::from_fn(5, 6, |_, _| rng.random_range(-1.0..1.0));
        let mut c = c0.clone();
        gemm_reference(
            2.0,
            a.as_ref(),
            b.as_ref(),
            -0.5,
            c.as_mut().t(),
            Goal::on_cpu(Accuracy::Native),
        )
        .unwrap();
        let mut p = Matrix::<f64>::zeros(6, 5);
        gemm_reference(
            1.0,
            a.as_ref(),
            b.as_ref(),
            0.0,
            p.as_mut(),
            Goal::on_cpu(Accuracy::Native),
        )
        .unwrap();
        for i in 0..6 {
            for j in 0..5 {
                let want = 2.0 * p.get(i, j) - 0.5 * c0.get(j, i);
                assert!((c.get(j, i) - want).abs() <= 1e-14, "({i}, {j})");
            }
        }
        let mut empty = Matrix::<f64>::zeros(0, 5);
        gemm_reference(
            1.0,
            Matrix::<f64>::zeros(0, 9).as_ref(),
            b.as_ref(),
            0.0,
            empty.as_mut(),
            Goal::on_cpu(Accuracy::Native),
        )
        .unwrap();
        // k = 0: C = β·C.
        let mut c = Matrix::<f64>::filled(2, 2, 4.0);
        gemm_reference(
            1.0,
            Matrix::<f64>::zeros(2, 0).as_ref(),
            Matrix::<f64>::zeros(0, 2).as_ref(),
            0.5,
            c.as_mut(),
            Goal::on_cpu(Accuracy::Native),
        )
        .unwrap();
        assert_eq!(c.as_slice(), &[2.0; 4]);
        // Integers take the byte planes: exact, wrapping.
        let i = Matrix::<i32>::from_fn(2, 2, |r, c| [[i32::MAX, 3], [-7, i32::MIN]][r][c]);
        let mut ci = Matrix::<i32>::filled(2, 2, 5);
        gemm_reference(
            1,
            i.as_ref(),
            i.as_ref(),
            1,
            ci.as_mut(),
            Goal::on_cpu(Accuracy::Native),
        )
        .unwrap();
        let want = |r: usize, c: usize| {
            (0..2)
                .fold(0i32, |s, l| {
                    s.wrapping_add(i.get(r, l).wrapping_mul(i.get(l, c)))
                })
                .wrapping_add(5)
        };
        for (r, c) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            assert_eq!(ci.get(r, c), want(r, c));
        }
    }
}
