//! Every CPU algorithm against independent references, over a matrix of
//! shapes, element types, layouts and options.

use fastmm::info::supports;
use fastmm::random::{random_matrix, random_matrix_full_range, seeded_rng};
use fastmm::verify::{verify, verify_with_growth, Reference};
use fastmm::{
    gemm, matmul_with, Algorithm, Context, CpuKernel, DType, DeviceKind, Element, Error,
    GemmOptions, MatMut, MatRef, Matrix, SumStores, Variant,
};
use proptest::prelude::*;

/// Edge sizes: empty, one, tiny, primes, around powers of two and tiles.
const DIMS: [usize; 13] = [0, 1, 2, 3, 7, 17, 31, 32, 33, 64, 100, 127, 129];

/// The option sets each algorithm runs under: defaults, small tiles (that
/// do not divide most sizes) with 2 and 3 threads, and for the fast
/// algorithms each memory variant with thresholds low enough to recurse.
/// Every microkernel family this CPU runs is forced once for `packed`, and
/// for the fast algorithms' fused variant, whose sums go through each
/// family's own fused driver; every fresh sum is streamed past the caches
/// once (the path the test sizes are too small to take by themselves).
fn option_sets(algorithm: Algorithm) -> Vec<GemmOptions> {
    let base = GemmOptions::new(algorithm);
    let mut sets = vec![base];
    if algorithm.info().uses_tile {
        sets.push(base.tile(16).threads(2));
        sets.push(base.tile(7).threads(3));
    }
    let families = CpuKernel::ALL.iter().copied().filter(|&f| supports(f));
    if algorithm == Algorithm::Packed {
        sets.extend(families.map(|family| base.cpu_kernel(family)));
    } else if algorithm.is_fast() {
        // Thresholds small enough that the shapes below recurse.
        for &variant in Variant::ALL {
            sets.push(base.variant(variant).threshold(4).depth(2));
            sets.push(base.variant(variant).threshold(3).depth(3).threads(2));
        }
        let fused = base.variant(Variant::Fused).threshold(4).depth(2);
        sets.extend(families.map(|family| fused.cpu_kernel(family)));
        for variant in [Variant::Temporaries, Variant::Batched] {
            let streamed = base
                .variant(variant)
                .threshold(4)
                .sum_stores(SumStores::Stream);
            sets.push(streamed.lazy_sums(2));
            sets.push(streamed.threads(2));
        }
    }
    sets
}

/// Exact wrapping reference, written independently of the library: i128
/// accumulation reduced modulo 2^w.
fn reference_exact<T: Element>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Matrix<T> {
    Matrix::from_fn(a.rows(), b.cols(), |i, j| {
        let sum = (0..a.cols()).fold(0i128, |acc, p| {
            acc.wrapping_add(a.get(i, p).to_i128().wrapping_mul(b.get(p, j).to_i128()))
        });
        T::wrap_from_i128(sum)
    })
}

fn check_shape<T: Element>(m: usize, k: usize, n: usize, seed: u64) {
    let mut rng = seeded_rng(seed);
    let a: Matrix<T> = random_matrix_full_range(m, k, &mut rng);
    let b: Matrix<T> = random_matrix_full_range(k, n, &mut rng);
    let exact = T::DTYPE
        .is_integer()
        .then(|| reference_exact(a.as_ref(), b.as_ref()));
    // Floats: one reference for every algorithm and option set.
    let reference =
        (!T::DTYPE.is_integer()).then(|| Reference::new(a.as_ref(), b.as_ref()).unwrap());
    for algorithm in Algorithm::all_for(DeviceKind::Cpu, T::DTYPE) {
        for opts in option_sets(algorithm) {
            let mut c = Matrix::filled(m, n, T::poison());
            gemm(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &opts).unwrap();
            // Integers against the exact reference (stronger than the
            // verifier, which would compute it again for every option set).
            if let Some(exact) = &exact {
                assert_eq!(&c, exact, "{algorithm} {opts:?} {m}×{k}×{n} {}", T::DTYPE);
                continue;
            }
            let growth = Context::cpu()
                .plan(fastmm::Problem::of::<T>((m, k, n)), &opts)
                .unwrap()
                .error_growth;
            let verdict = reference
                .as_ref()
                .expect("a float's reference")
                .check(c.as_ref(), growth)
                .unwrap();
            assert!(
                verdict.ok,
                "{algorithm} {opts:?} {}×{k}×{n} {}: {verdict:?}",
                m,
                T::DTYPE
            );
        }
    }
}

fn shape_matrix<T: Element>() {
    for &m in &DIMS {
        for &n in &DIMS {
            for &k in &[0, 1, 3, 17, 33, 129] {
                check_shape::<T>(m, k, n, (m * 1000 + n * 10 + k) as u64);
            }
        }
    }
    for &(m, k, n) in &[
        (100, 127, 129),
        (129, 100, 31),
        (1, 257, 1),
        (257, 1, 3),
        (3, 64, 300),
    ] {
        check_shape::<T>(m, k, n, 7);
    }
}

#[test]
fn shape_matrix_f32() {
    shape_matrix::<f32>();
}

#[test]
fn shape_matrix_f64() {
    shape_matrix::<f64>();
}

#[test]
fn shape_matrix_i32_exact() {
    shape_matrix::<i32>();
}

#[test]
fn shape_matrix_i64_exact() {
    shape_matrix::<i64>();
}

/// C ← αAB + βC, checked exactly with small integers.
#[test]
fn alpha_and_beta_follow_blas() {
    let mut rng = seeded_rng(3);
    let (m, k, n) = (13, 9, 11);
    let a: Matrix<i64> = random_matrix(m, k, &mut rng);
    let b: Matrix<i64> = random_matrix(k, n, &mut rng);
    let c0: Matrix<i64> = random_matrix(m, n, &mut rng);
    let ab = reference_exact(a.as_ref(), b.as_ref());
    for algorithm in Algorithm::all_for(DeviceKind::Cpu, DType::I64) {
        for (alpha, beta) in [(1, 0), (3, 2), (-2, 1), (0, 5), (0, 0)] {
            let mut c = c0.clone();
            gemm(
                alpha,
                a.as_ref(),
                b.as_ref(),
                beta,
                c.as_mut(),
                &GemmOptions::new(algorithm),
            )
            .unwrap();
            let want = Matrix::from_fn(m, n, |i, j| alpha * ab.get(i, j) + beta * c0.get(i, j));
            assert_eq!(c, want, "{algorithm} α={alpha} β={beta}");
        }
    }
}

/// β = 0 must overwrite C without reading it; β ≠ 0 must propagate NaN.
#[test]
fn beta_zero_never_reads_c() {
    let mut rng = seeded_rng(4);
    let a: Matrix<f64> = random_matrix(33, 17, &mut rng);
    let b: Matrix<f64> = random_matrix(17, 31, &mut rng);
    for algorithm in Algorithm::all_on(DeviceKind::Cpu) {
        let opts = GemmOptions::new(algorithm).tile(8);
        let mut c = Matrix::filled(33, 31, f64::NAN);
        gemm(1.0, a.as_ref(), b.as_ref(), 0.0, c.as_mut(), &opts).unwrap();
        assert!(c.as_slice().iter().all(|x| x.is_finite()), "{algorithm}");
        assert!(verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap().ok);

        let mut c = Matrix::filled(33, 31, f64::NAN);
        gemm(1.0, a.as_ref(), b.as_ref(), 1.0, c.as_mut(), &opts).unwrap();
        assert!(
            c.as_slice().iter().all(|x| x.is_nan()),
            "{algorithm}: β=1 must read C"
        );

        // k = 0: C ← βC, and with β = 0 that is exactly zero.
        let empty_a = Matrix::<f64>::zeros(33, 0);
        let empty_b = Matrix::<f64>::zeros(0, 31);
        let mut c = Matrix::filled(33, 31, f64::NAN);
        gemm(
            1.0,
            empty_a.as_ref(),
            empty_b.as_ref(),
            0.0,
            c.as_mut(),
            &opts,
        )
        .unwrap();
        assert!(c.as_slice().iter().all(|&x| x == 0.0), "{algorithm}");
    }
}

/// A stored transposed, B column-major, C column-major or a padded
/// sub-block: every layout gives the same exact integer product, and
/// nothing outside C's view is touched.
#[test]
fn strided_and_transposed_views() {
    let mut rng = seeded_rng(5);
    let (m, k, n) = (37, 29, 41);
    let a: Matrix<i32> = random_matrix_full_range(m, k, &mut rng);
    let b: Matrix<i32> = random_matrix_full_range(k, n, &mut rng);
    let want = reference_exact(a.as_ref(), b.as_ref());
    let a_t = Matrix::from_view(a.as_ref().t()); // k×m storage of Aᵀ
    let b_colmajor: Vec<i32> = (0..n)
        .flat_map(|j| (0..k).map(move |p| (p, j)))
        .map(|(p, j)| b.get(p, j))
        .collect();
    let a_view = a_t.as_ref().t();
    let b_view = MatRef::from_slice_strided(&b_colmajor, k, n, 1, k).unwrap();
    for algorithm in Algorithm::all_for(DeviceKind::Cpu, DType::I32) {
        let opts = GemmOptions::new(algorithm).tile(8).threads(2);

        // Column-major C: the boundary turns it into Cᵀ = BᵀAᵀ.
        let mut c_colmajor = vec![i32::MIN; m * n];
        let c_view = MatMut::from_slice_strided(&mut c_colmajor, m, n, 1, m).unwrap();
        gemm(1, a_view, b_view, 0, c_view, &opts).unwrap();
        let got = MatRef::from_slice_strided(&c_colmajor, m, n, 1, m).unwrap();
        assert_eq!(Matrix::from_view(got), want, "{algorithm}, column-major C");

        // C as an interior block of a larger matrix, with a sentinel border.
        let sentinel = 0x5a5a_5a5a;
        let mut big = Matrix::filled(m + 4, n + 6, sentinel);
        gemm(
            1,
            a_view,
            b_view,
            0,
            big.as_mut().submatrix(2, 3, m, n),
            &opts,
        )
        .unwrap();
        assert_eq!(
            Matrix::from_view(big.as_ref().submatrix(2, 3, m, n)),
            want,
            "{algorithm}, sub-block"
        );
        let touched = (0..m + 4)
            .flat_map(|i| (0..n + 6).map(move |j| (i, j)))
            .filter(|&(i, j)| !(2..2 + m).contains(&i) || !(3..3 + n).contains(&j))
            .any(|(i, j)| big.get(i, j) != sentinel);
        assert!(!touched, "{algorithm} wrote outside C");

        // Both strides non-unit: every other row and column of a buffer.
        let mut sparse = vec![i32::MIN; (2 * m) * (2 * n)];
        let c_view = MatMut::from_slice_strided(&mut sparse, m, n, 4 * n, 2).unwrap();
        gemm(1, a.as_ref(), b.as_ref(), 0, c_view, &opts).unwrap();
        let got = MatRef::from_slice_strided(&sparse, m, n, 4 * n, 2).unwrap();
        assert_eq!(
            Matrix::from_view(got),
            want,
            "{algorithm}, doubly strided C"
        );
    }
}

#[test]
fn bad_shapes_and_options_are_errors() {
    let a = Matrix::<f32>::zeros(3, 4);
    let b = Matrix::<f32>::zeros(5, 2);
    let err = matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::default()).unwrap_err();
    assert_eq!(
        err,
        Error::DimensionMismatch {
            a: (3, 4),
            b: (5, 2)
        }
    );
    assert!(err.to_string().contains("3×4") && err.to_string().contains("5×2"));

    let b = Matrix::<f32>::zeros(4, 2);
    let mut c = Matrix::<f32>::zeros(3, 3);
    let err = gemm(
        1.0,
        a.as_ref(),
        b.as_ref(),
        0.0,
        c.as_mut(),
        &GemmOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::OutputShape {
            expected: (3, 2),
            got: (3, 3)
        }
    );

    for opts in [
        GemmOptions::new(Algorithm::Tiled).tile(0),
        GemmOptions::new(Algorithm::Parallel).threads(0),
    ] {
        assert!(matches!(
            matmul_with(a.as_ref(), b.as_ref(), &opts),
            Err(Error::InvalidOption(_))
        ));
    }
    assert!(matches!(
        "strassen2".parse::<Algorithm>(),
        Err(Error::UnknownAlgorithm(..))
    ));
}

#[test]
fn verification_rejects_a_single_wrong_element() {
    let mut rng = seeded_rng(6);
    for (m, k, n) in [(50, 60, 70), (700, 700, 700)] {
        let a: Matrix<f32> = random_matrix(m, k, &mut rng);
        let b: Matrix<f32> = random_matrix(k, n, &mut rng);
        let mut c = matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::default()).unwrap();
        assert!(verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap().ok);
        // The last row, where an edge-tile bug would show.
        let (i, j) = (m - 1, n / 2);
        c.set(i, j, c.get(i, j) + 0.5);
        let verdict = verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap();
        assert!(!verdict.ok, "{m}×{k}×{n}: {verdict:?}");
        c.set(i, j, f32::NAN);
        assert!(!verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap().ok);
    }
    // Integers above the full-check size: Freivalds in Z/2^32.
    let a: Matrix<i32> = random_matrix_full_range(700, 700, &mut rng);
    let b: Matrix<i32> = random_matrix_full_range(700, 700, &mut rng);
    let mut c = matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::default()).unwrap();
    assert!(verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap().ok);
    c.set(345, 123, c.get(345, 123).wrapping_add(1 << 30));
    assert!(!verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap().ok);
}

/// Terms beyond f32's range: f32 arithmetic may meet +∞ and −∞ on the way
/// to a sum that is finite in f64, and give NaN; the verifier accepts any
/// non-finite value there, and still a finite one only within the bound.
#[test]
fn verification_accepts_what_overflowing_terms_give() {
    let a = Matrix::<f32>::from_vec(1, 2, vec![1e30, 1e30]).unwrap();
    let b = Matrix::<f32>::from_vec(2, 2, vec![1e30, 1.0, -1e30, 2.0]).unwrap();
    let c = matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::new(Algorithm::Naive)).unwrap();
    assert!(c.get(0, 0).is_nan());
    assert!(verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap().ok);
    let mut wrong = c.clone();
    wrong.set(0, 1, f32::INFINITY);
    assert!(!verify(a.as_ref(), b.as_ref(), wrong.as_ref()).unwrap().ok);
}

/// The IEEE class of a value: NaN, the infinity of a sign, or finite.
fn ieee_class(x: f64) -> i8 {
    match x {
        x if x.is_nan() => 2,
        x if x.is_infinite() => x.signum() as i8,
        _ => 0,
    }
}

/// NaN and ±∞ in the inputs propagate as in the classical product (and
/// numpy) for every CPU algorithm and option set, fast algorithms
/// included; the verifier accepts exactly that, below and above the
/// full-check size, and still catches a wrong element.
#[test]
fn nan_and_infinity_propagate_and_verify() {
    let mut rng = seeded_rng(9);
    for (m, k, n) in [(37, 41, 43), (700, 600, 650)] {
        let mut a: Matrix<f64> = random_matrix(m, k, &mut rng);
        let mut b: Matrix<f64> = random_matrix(k, n, &mut rng);
        a.set(3, 5, f64::INFINITY);
        a.set(m - 2, 1, f64::NAN);
        b.set(k - 1, 7, f64::NEG_INFINITY);
        b.set(5, n - 3, 0.0); // ∞·0 = NaN in C(3, n−3)
        let reference =
            matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::new(Algorithm::Naive)).unwrap();
        assert!(reference.get(3, 0).is_infinite() && reference.get(3, n - 3).is_nan());
        let algorithms: Vec<Algorithm> = if m < 100 {
            Algorithm::all_on(DeviceKind::Cpu).collect()
        } else {
            vec![Algorithm::Packed, Algorithm::Strassen, Algorithm::Winograd]
        };
        for algorithm in algorithms {
            for opts in option_sets(algorithm) {
                let c = matmul_with(a.as_ref(), b.as_ref(), &opts).unwrap();
                for i in 0..m {
                    for j in 0..n {
                        assert_eq!(
                            ieee_class(c.get(i, j)),
                            ieee_class(reference.get(i, j)),
                            "{algorithm} {opts:?} ({i}, {j}) of {m}×{k}×{n}"
                        );
                    }
                }
                let verdict = verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap();
                assert!(
                    verdict.ok && verdict.rel_error < 1e-12,
                    "{algorithm}: {verdict:?}"
                );
            }
        }
        let c = reference;
        for (i, j, wrong) in [
            (3, 0, 1.0),              // ∞ made finite
            (3, n - 3, 0.0),          // NaN made finite
            (m / 2, n / 2, f64::NAN), // a finite element made NaN
            (m - 1, 2, f64::INFINITY),
        ] {
            let mut bad = c.clone();
            bad.set(i, j, wrong);
            let verdict = verify(a.as_ref(), b.as_ref(), bad.as_ref()).unwrap();
            assert!(!verdict.ok, "{m}×{k}×{n}: ({i}, {j}) = {wrong} passed");
        }
    }
    // Overflow: finite f32 inputs whose product exceeds f32's range must
    // give ±∞, and that is correct.
    let a = Matrix::from_vec(1, 2, vec![3e38f32, 3e38]).unwrap();
    let b = Matrix::from_vec(2, 2, vec![2.0f32, -1.0, 2.0, -1.0]).unwrap();
    let c = matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::default()).unwrap();
    assert_eq!(c.as_slice(), &[f32::INFINITY, f32::NEG_INFINITY]);
    assert!(verify(a.as_ref(), b.as_ref(), c.as_ref()).unwrap().ok);
}

#[test]
fn verification_walks_transposed_views_along_their_storage() {
    let mut rng = seeded_rng(8);
    // Floats above the full-check size and the parallel matrix-vector
    // size: sampled lines and Freivalds over views whose columns are the
    // contiguous dimension (Aᵀ, Bᵀ and Cᵀ stored).
    let (m, k, n) = (1100, 1000, 300);
    let at: Matrix<f64> = random_matrix(k, m, &mut rng);
    let bt: Matrix<f64> = random_matrix(n, k, &mut rng);
    let (a, b) = (at.as_ref().t(), bt.as_ref().t());
    let c = matmul_with(a, b, &GemmOptions::default()).unwrap();
    let mut ct = Matrix::from_view(c.as_ref().t());
    let verdict = verify(a, b, ct.as_ref().t()).unwrap();
    assert!(verdict.ok, "{verdict:?}");
    assert_eq!(verdict.method, fastmm::verify::CheckMethod::Randomized);
    let same = verify(
        Matrix::from_view(a).as_ref(),
        Matrix::from_view(b).as_ref(),
        c.as_ref(),
    )
    .unwrap();
    assert!(same.ok, "{same:?}");
    // An element off its row and column samples: Freivalds sees it.
    let (i, j) = (m / 2 + 1, n / 2 + 1);
    ct.set(j, i, ct.get(j, i) + 0.5);
    assert!(!verify(a, b, ct.as_ref().t()).unwrap().ok);
    // Integers in Z/2^64, the same views: exact Freivalds.
    let at: Matrix<i64> = random_matrix_full_range(700, 700, &mut rng);
    let bt: Matrix<i64> = random_matrix_full_range(700, 700, &mut rng);
    let (a, b) = (at.as_ref().t(), bt.as_ref().t());
    let c = matmul_with(a, b, &GemmOptions::default()).unwrap();
    let mut ct = Matrix::from_view(c.as_ref().t());
    assert!(verify(a, b, ct.as_ref().t()).unwrap().ok);
    ct.set(123, 345, ct.get(123, 345).wrapping_add(1));
    assert!(!verify(a, b, ct.as_ref().t()).unwrap().ok);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random shapes, tiles, threads and layouts (A and B possibly
    /// transposed), exact integer comparison.
    #[test]
    fn random_problems_match_reference(
        m in 0usize..40, k in 0usize..40, n in 0usize..40,
        tile in 1usize..20, threads in 1usize..4,
        a_transposed: bool, b_transposed: bool, seed: u64,
    ) {
        let mut rng = seeded_rng(seed);
        let a_store: Matrix<i64> = random_matrix_full_range(if a_transposed { k } else { m }, if a_transposed { m } else { k }, &mut rng);
        let b_store: Matrix<i64> = random_matrix_full_range(if b_transposed { n } else { k }, if b_transposed { k } else { n }, &mut rng);
        let a = if a_transposed { a_store.as_ref().t() } else { a_store.as_ref() };
        let b = if b_transposed { b_store.as_ref().t() } else { b_store.as_ref() };
        let want = reference_exact(a, b);
        for algorithm in Algorithm::all_for(DeviceKind::Cpu, DType::I64) {
            let opts = GemmOptions::new(algorithm).tile(tile).threads(threads);
            let got = matmul_with(a, b, &opts).unwrap();
            prop_assert_eq!(&got, &want, "{}", algorithm);
        }
    }
}

/// `auto` at a relaxed accuracy level is decided per shape: the
/// classical product below Winograd's measured crossover, Winograd (with
/// at least one level) above it; integers (exact at every level) take it
/// at the default level too.
#[test]
fn auto_runs_winograd_where_its_crossover_gives_a_level() {
    let cpu = Context::cpu();
    let opts = GemmOptions::new(Algorithm::Auto).accuracy(fastmm::Accuracy::Bound);
    let small = cpu
        .plan(fastmm::Problem::of::<f64>((1000, 1000, 1000)), &opts)
        .unwrap();
    assert_eq!(small.algorithm, Algorithm::Packed);
    assert_eq!(small.error_growth, 1.0);
    let large = cpu
        .plan(fastmm::Problem::of::<f64>((8192, 8192, 8192)), &opts)
        .unwrap();
    assert_eq!(large.algorithm, Algorithm::Winograd);
    assert!(large.fast.as_ref().is_some_and(|f| f.levels >= 1));
    assert!(large.error_growth > 1.0);
    let exact = cpu
        .plan(
            fastmm::Problem::of::<i64>((8192, 8192, 8192)),
            &GemmOptions::default(),
        )
        .unwrap();
    assert_eq!(exact.algorithm, Algorithm::Winograd);
}

/// A [`Reference`] gives the verdicts of `verify_with_growth`, bit for bit:
/// kept (full checks), not kept (sampled), integers, wrong elements, NaN
/// and a fast algorithm's growth.
#[test]
fn a_reference_gives_the_verdicts_of_verify() {
    fn agree<T: Element>(m: usize, k: usize, n: usize) {
        let mut rng = seeded_rng((m * 31 + k * 7 + n) as u64);
        let a: Matrix<T> = random_matrix_full_range(m, k, &mut rng);
        let b: Matrix<T> = random_matrix_full_range(k, n, &mut rng);
        let reference = Reference::new(a.as_ref(), b.as_ref()).unwrap();
        let good =
            matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::new(Algorithm::Packed)).unwrap();
        let mut wrong = good.clone();
        if m * n > 0 {
            let x = wrong.get(m / 2, n / 2);
            wrong.set(m / 2, n / 2, x.add(T::from_f64(1.0)));
        }
        let mut nan = good.clone();
        if m * n > 0 && !T::DTYPE.is_integer() {
            nan.set(0, n - 1, T::from_f64(f64::NAN));
        }
        for c in [&good, &wrong, &nan] {
            for growth in [1.0, 40.0] {
                let once = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth).unwrap();
                let kept = reference.check(c.as_ref(), growth).unwrap();
                assert_eq!(
                    (
                        once.method,
                        once.ok,
                        once.rel_error.to_bits(),
                        once.bound_ratio.to_bits()
                    ),
                    (
                        kept.method,
                        kept.ok,
                        kept.rel_error.to_bits(),
                        kept.bound_ratio.to_bits()
                    ),
                    "{} {m}×{k}×{n} growth {growth}",
                    T::DTYPE
                );
            }
        }
        let bad_shape = Matrix::<T>::filled(m + 1, n, T::ZERO);
        assert!(matches!(
            reference.check(bad_shape.as_ref(), 1.0),
            Err(Error::OutputShape { .. })
        ));
    }
    for (m, k, n) in [
        (0, 3, 4),
        (1, 1, 1),
        (17, 33, 9),
        (64, 100, 31),
        (2100, 1, 2100),
        (700, 700, 700),
    ] {
        agree::<f32>(m, k, n);
        agree::<f64>(m, k, n);
        agree::<i32>(m, k, n);
        agree::<i64>(m, k, n);
    }
    let a = Matrix::<f64>::filled(3, 4, 1.0);
    let b = Matrix::<f64>::filled(5, 2, 1.0);
    assert!(matches!(
        Reference::new(a.as_ref(), b.as_ref()),
        Err(Error::DimensionMismatch { .. })
    ));
}
