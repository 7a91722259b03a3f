//! `strassen` and `winograd`: exact over the integers for every schedule,
//! shape and layout; within the float bound; the workspace report.

use fastmm::random::{random_matrix, random_matrix_full_range, seeded_rng};
use fastmm::verify::verify_with_growth;
use fastmm::{gemm, Algorithm, Context, Element, FastPlan, GemmOptions, MatMut, Matrix, Variant};

const FAST: [Algorithm; 2] = [Algorithm::Strassen, Algorithm::Winograd];

/// Every memory schedule, and the stored ones with operand sums of up to
/// 2 or 4 blocks left for the leaf products to form while packing.
const SCHEDULES: [(Variant, usize); 7] = [
    (Variant::Temporaries, 0),
    (Variant::Frugal, 0),
    (Variant::Fused, 0),
    (Variant::Batched, 0),
    (Variant::Temporaries, 4),
    (Variant::Frugal, 2),
    (Variant::Frugal, 4),
];

/// The options of one algorithm and schedule.
fn fast(algorithm: Algorithm, (variant, lazy_sums): (Variant, usize)) -> GemmOptions {
    GemmOptions::new(algorithm)
        .variant(variant)
        .lazy_sums(lazy_sums)
}

/// Exact wrapping reference computed with the naive algorithm.
fn classical<T: Element>(
    alpha: T,
    a: &Matrix<T>,
    b: &Matrix<T>,
    beta: T,
    c0: &Matrix<T>,
) -> Matrix<T> {
    let mut c = c0.clone();
    gemm(
        alpha,
        a.as_ref(),
        b.as_ref(),
        beta,
        c.as_mut(),
        &GemmOptions::new(Algorithm::Naive),
    )
    .unwrap();
    c
}

/// Every schedule, at thresholds from "recurse to the bottom" to "one
/// level", over odd, even, prime and elongated shapes, for β = 0 (over a
/// poisoned C) and for α, β ≠ 0: bit-for-bit the classical wrapping result.
fn exact_over_shapes<T: Element>() {
    let shapes = [
        (2, 2, 2),
        (3, 3, 3),
        (4, 4, 4),
        (5, 7, 3),
        (8, 8, 8),
        (16, 15, 17),
        (31, 37, 29),
        (64, 64, 64),
        (97, 61, 131),
        (128, 9, 130),
        (9, 140, 11),
        (150, 40, 12),
        (1, 50, 50),
    ];
    let mut rng = seeded_rng(31);
    for &(m, k, n) in &shapes {
        let a: Matrix<T> = random_matrix_full_range(m, k, &mut rng);
        let b: Matrix<T> = random_matrix_full_range(k, n, &mut rng);
        let c0: Matrix<T> = random_matrix_full_range(m, n, &mut rng);
        let alpha = T::from_i64(3);
        let beta = T::from_i64(-2);
        let want_ab = classical(T::ONE, &a, &b, T::ZERO, &c0);
        let want_update = classical(alpha, &a, &b, beta, &c0);
        for algorithm in FAST {
            for schedule in SCHEDULES {
                let variant = format!("{schedule:?}");
                for (threshold, depth) in [(2, 4), (3, 2), (8, 10), (16, 1)] {
                    let opts = fast(algorithm, schedule).threshold(threshold).depth(depth);
                    let mut c = Matrix::filled(m, n, T::poison());
                    gemm(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &opts).unwrap();
                    assert_eq!(
                        c, want_ab,
                        "{algorithm} {variant} n0={threshold} depth={depth} {m}×{k}×{n}"
                    );
                    let mut c = c0.clone();
                    gemm(alpha, a.as_ref(), b.as_ref(), beta, c.as_mut(), &opts).unwrap();
                    assert_eq!(
                        c, want_update,
                        "{algorithm} {variant} C ← 3AB − 2C n0={threshold} {m}×{k}×{n}"
                    );
                }
            }
        }
    }
}

#[test]
fn exact_over_shapes_i32() {
    exact_over_shapes::<i32>();
}

#[test]
fn exact_over_shapes_i64() {
    exact_over_shapes::<i64>();
}

/// Transposed and strided operands, and a strided sub-block of C whose
/// surroundings must stay untouched.
#[test]
fn views_and_layouts_are_exact() {
    let mut rng = seeded_rng(32);
    let (m, k, n) = (45, 38, 51);
    let at: Matrix<i64> = random_matrix_full_range(k, m, &mut rng);
    let b: Matrix<i64> = random_matrix_full_range(k, n, &mut rng);
    let a = Matrix::from_view(at.as_ref().t());
    let want = classical(1, &a, &b, 0, &Matrix::zeros(m, n));
    for algorithm in FAST {
        for schedule in SCHEDULES {
            let variant = format!("{schedule:?}");
            let opts = fast(algorithm, schedule).threshold(4).threads(2);
            // A as a transposed view; C as every other column of a wider buffer.
            let mut buffer = vec![-77i64; m * 2 * n];
            let c = MatMut::from_slice_strided(&mut buffer, m, n, 2 * n, 2).unwrap();
            gemm(1, at.as_ref().t(), b.as_ref(), 0, c, &opts).unwrap();
            for i in 0..m {
                for j in 0..n {
                    assert_eq!(
                        buffer[i * 2 * n + 2 * j],
                        want.get(i, j),
                        "{algorithm} {variant} ({i},{j})"
                    );
                    assert_eq!(
                        buffer[i * 2 * n + 2 * j + 1],
                        -77,
                        "{algorithm} {variant} gap ({i},{j})"
                    );
                }
            }
            // Column-major C (the boundary turns it into Cᵀ = BᵀAᵀ).
            let mut ct = Matrix::filled(n, m, i64::MIN);
            gemm(1, a.as_ref(), b.as_ref(), 0, ct.as_mut().t(), &opts).unwrap();
            assert_eq!(
                Matrix::from_view(ct.as_ref().t()),
                want,
                "{algorithm} {variant} column-major C"
            );
        }
    }
}

/// Floats: within the verification bound at one and two levels, and β = 0
/// never lets NaN in C through.
#[test]
fn floats_pass_verification() {
    let mut rng = seeded_rng(33);
    for &(m, k, n) in &[(130, 129, 131), (256, 256, 256), (77, 200, 95)] {
        let a: Matrix<f64> = random_matrix(m, k, &mut rng);
        let b: Matrix<f64> = random_matrix(k, n, &mut rng);
        let a32 = Matrix::from_fn(m, k, |i, j| a.get(i, j) as f32);
        let b32 = Matrix::from_fn(k, n, |i, j| b.get(i, j) as f32);
        for algorithm in FAST {
            for schedule in SCHEDULES {
                let variant = format!("{schedule:?}");
                for depth in [1, 2] {
                    let opts = fast(algorithm, schedule).threshold(16).depth(depth);
                    let mut c = Matrix::filled(m, n, f64::NAN);
                    gemm(1.0, a.as_ref(), b.as_ref(), 0.0, c.as_mut(), &opts).unwrap();
                    let plan = Context::cpu()
                        .plan(fastmm::Problem::of::<f64>((m, k, n)), &opts)
                        .unwrap();
                    assert_eq!(plan.fast.as_ref().unwrap().levels, depth);
                    // Higham's per-level constants: 12 for Strassen, 18 for Winograd.
                    let per_level: f64 = match algorithm {
                        Algorithm::Strassen => 12.0,
                        _ => 18.0,
                    };
                    assert_eq!(plan.error_growth, per_level.powi(depth as i32));
                    let growth = plan.error_growth;
                    let verdict =
                        verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth).unwrap();
                    assert!(
                        verdict.ok,
                        "{algorithm} {variant} depth {depth} f64: {verdict:?}"
                    );
                    let mut c = Matrix::filled(m, n, f32::NAN);
                    gemm(1.0, a32.as_ref(), b32.as_ref(), 0.0, c.as_mut(), &opts).unwrap();
                    let verdict =
                        verify_with_growth(a32.as_ref(), b32.as_ref(), c.as_ref(), growth).unwrap();
                    assert!(
                        verdict.ok,
                        "{algorithm} {variant} depth {depth} f32: {verdict:?}"
                    );
                }
            }
        }
    }
}

/// The recursion of an n³ f64 product with `opts` on the CPU, as planned.
fn planned(shape: (usize, usize, usize), beta_is_zero: bool, opts: &GemmOptions) -> FastPlan {
    Context::cpu()
        .plan(
            fastmm::Problem::of::<f64>(shape).reading_c(!beta_is_zero),
            opts,
        )
        .unwrap()
        .fast
        .expect("a fast algorithm plans a recursion")
}

/// The plan's workspace in elements of f64.
fn elements(plan: &FastPlan) -> usize {
    plan.workspace_bytes as usize / 8
}

/// The plan's report: levels as the rule says, and the frugal schedules
/// need less workspace than the temporaries ones (exact sizes for a square
/// power of two).
#[test]
fn workspace_report_matches_the_schedules() {
    let n = 256;
    let cube = (n, n, n);
    let opts = |algorithm, variant| GemmOptions::new(algorithm).variant(variant).threshold(64);
    let strassen = |variant| opts(Algorithm::Strassen, variant);
    let winograd = |variant| opts(Algorithm::Winograd, variant);
    let q = |level: usize| (n >> level) * (n >> level);
    // Levels at n = 256, 128, 64; sub-products of 32 are classical.
    let temporaries = planned(cube, true, &strassen(Variant::Temporaries));
    assert_eq!(temporaries.levels, 3);
    assert_eq!(elements(&temporaries), 17 * (q(1) + q(2) + q(3)));
    let frugal = planned(cube, true, &strassen(Variant::Frugal));
    assert_eq!(frugal.levels, 3);
    assert_eq!(elements(&frugal), 3 * (q(1) + q(2) + q(3)));
    let frugal = planned(cube, true, &winograd(Variant::Frugal));
    assert_eq!(elements(&frugal), 2 * (q(1) + q(2) + q(3)));
    // Batched stores what temporaries does: 17 (Strassen) and 15
    // (Winograd) quarter blocks per level.
    let batched = planned(cube, false, &strassen(Variant::Batched));
    assert_eq!(elements(&batched), 17 * (q(1) + q(2) + q(3)));
    let batched = planned(cube, false, &winograd(Variant::Batched));
    assert_eq!(elements(&batched), 15 * (q(1) + q(2) + q(3)));
    // Fused: no temporaries at all.
    let fused = planned(cube, false, &strassen(Variant::Fused));
    assert_eq!((fused.levels, elements(&fused)), (3, 0));
    // β ≠ 0: the top level falls back to the temporaries schedule.
    let with_beta = planned(cube, false, &winograd(Variant::Frugal));
    assert_eq!(elements(&with_beta), 15 * q(1) + 2 * (q(2) + q(3)));
    // Sums left to the leaf products' packing need no temporary: at the
    // bottom level only the C-shaped ones remain (1 for both schemes).
    let lazy = planned(cube, true, &strassen(Variant::Frugal).lazy_sums(4));
    assert_eq!(lazy.lazy_sums, 4);
    assert_eq!(elements(&lazy), 3 * (q(1) + q(2)) + q(3));
    let lazy = planned(cube, true, &winograd(Variant::Frugal).lazy_sums(4));
    assert_eq!(elements(&lazy), 2 * (q(1) + q(2)) + q(3));
    // Depth 0 and small products are classical, with no workspace.
    let classical = planned(cube, true, &strassen(Variant::Frugal).depth(0));
    assert_eq!((classical.levels, elements(&classical)), (0, 0));
    let small = planned((63, 500, 500), true, &strassen(Variant::Frugal));
    assert_eq!(small.levels, 0);
}

/// The CPU's default schedule: `batched` when its temporaries take at
/// most half the available memory, else `frugal`; a named one as given.
#[test]
fn the_cpu_default_variant_fits_the_memory() {
    let auto = GemmOptions::new(Algorithm::Winograd).threshold(64);
    let small = (256, 256, 256);
    // 2^21 squared f64: 15 quarter blocks of 8 TiB each at the top level.
    let huge = (1 << 21, 1 << 21, 1 << 21);
    for shape in [small, huge] {
        for &variant in Variant::ALL {
            assert_eq!(
                planned(shape, true, &auto.variant(variant)).variant,
                variant
            );
        }
    }
    assert_eq!(planned(huge, true, &auto).variant, Variant::Frugal);
    let expected_small = match fastmm::system::available_memory_bytes() {
        Some(_) => Variant::Batched,
        None => Variant::Frugal,
    };
    let plan = planned(small, true, &auto);
    assert_eq!(plan.variant, expected_small);
    // The workspace report follows it.
    let q = 128 * 128;
    if expected_small == Variant::Batched {
        assert_eq!(elements(&plan), 15 * (q + q / 4 + q / 16));
    }
}

#[test]
fn a_threshold_below_two_is_an_error() {
    let a = Matrix::<f64>::zeros(4, 4);
    let mut c = Matrix::<f64>::zeros(4, 4);
    let opts = GemmOptions::new(Algorithm::Strassen).threshold(1);
    assert!(gemm(1.0, a.as_ref(), a.as_ref(), 0.0, c.as_mut(), &opts).is_err());
}

/// Any classical algorithm can be the base case (the seeds' experiments use
/// naive), except under the fused variant, which needs packed's packing.
#[test]
fn any_classical_base_is_exact() {
    let mut rng = seeded_rng(34);
    let (m, k, n) = (41, 36, 29);
    let a: Matrix<i32> = random_matrix_full_range(m, k, &mut rng);
    let b: Matrix<i32> = random_matrix_full_range(k, n, &mut rng);
    let want = classical(1, &a, &b, 0, &Matrix::zeros(m, n));
    for algorithm in FAST {
        for base in [
            Algorithm::Naive,
            Algorithm::Ikj,
            Algorithm::Tiled,
            Algorithm::Parallel,
        ] {
            for variant in [Variant::Temporaries, Variant::Frugal] {
                let opts = GemmOptions::new(algorithm)
                    .variant(variant)
                    .threshold(4)
                    .base(base)
                    .tile(5);
                let mut c = Matrix::filled(m, n, i32::MIN);
                gemm(1, a.as_ref(), b.as_ref(), 0, c.as_mut(), &opts).unwrap();
                assert_eq!(c, want, "{algorithm} {variant} over {base}");
            }
            let fused = GemmOptions::new(algorithm)
                .variant(Variant::Fused)
                .base(base);
            let mut c = Matrix::zeros(m, n);
            assert!(gemm(1, a.as_ref(), b.as_ref(), 0, c.as_mut(), &fused).is_err());
        }
        let recursive = GemmOptions::new(algorithm).base(Algorithm::Winograd);
        let mut c = Matrix::zeros(m, n);
        assert!(gemm(1, a.as_ref(), b.as_ref(), 0, c.as_mut(), &recursive).is_err());
    }
}
