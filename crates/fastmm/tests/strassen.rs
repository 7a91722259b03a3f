//! `strassen` and `winograd`: exact over the integers for every schedule,
//! shape and layout; within the float bound; the workspace report.

use fastmm::random::{random_matrix, random_matrix_full_range, seeded_rng};
use fastmm::strassen::{error_growth, workspace, Scheme};
use fastmm::verify::verify_with_growth;
use fastmm::{gemm, Algorithm, Element, GemmOptions, MatMut, Matrix, Variant};

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
                    let growth = error_growth(Scheme::of(algorithm).unwrap(), depth);
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

/// The dry run's report: levels as the rule says, and the frugal schedules
/// need less workspace than the temporaries ones (exact sizes for a square
/// power of two).
#[test]
fn workspace_report_matches_the_schedules() {
    let n = 256;
    let opts = |variant| {
        GemmOptions::new(Algorithm::Strassen)
            .variant(variant)
            .threshold(64)
    };
    let q = |level: usize| (n >> level) * (n >> level);
    // Levels at n = 256, 128, 64; sub-products of 32 are classical.
    let temporaries = workspace::<f64>(
        Scheme::Strassen,
        (n, n, n),
        true,
        &opts(Variant::Temporaries),
    );
    assert_eq!(temporaries.levels, 3);
    assert_eq!(temporaries.workspace_elements, 17 * (q(1) + q(2) + q(3)));
    let frugal = workspace::<f64>(Scheme::Strassen, (n, n, n), true, &opts(Variant::Frugal));
    assert_eq!(frugal.levels, 3);
    assert_eq!(frugal.workspace_elements, 3 * (q(1) + q(2) + q(3)));
    let winograd = workspace::<f64>(Scheme::Winograd, (n, n, n), true, &opts(Variant::Frugal));
    assert_eq!(winograd.workspace_elements, 2 * (q(1) + q(2) + q(3)));
    // Fused: no temporaries at all.
    // Batched stores what temporaries does: 17 (Strassen) and 15
    // (Winograd) quarter blocks per level.
    let batched = workspace::<f64>(Scheme::Strassen, (n, n, n), false, &opts(Variant::Batched));
    assert_eq!(batched.workspace_elements, 17 * (q(1) + q(2) + q(3)));
    let batched = workspace::<f64>(Scheme::Winograd, (n, n, n), false, &opts(Variant::Batched));
    assert_eq!(batched.workspace_elements, 15 * (q(1) + q(2) + q(3)));
    let fused = workspace::<f64>(Scheme::Strassen, (n, n, n), false, &opts(Variant::Fused));
    assert_eq!((fused.levels, fused.workspace_elements), (3, 0));
    // β ≠ 0: the top level falls back to the temporaries schedule.
    let with_beta = workspace::<f64>(Scheme::Winograd, (n, n, n), false, &opts(Variant::Frugal));
    assert_eq!(with_beta.workspace_elements, 15 * q(1) + 2 * (q(2) + q(3)));
    // Sums left to the leaf products' packing need no temporary: at the
    // bottom level only the C-shaped ones remain (1 for both schemes).
    let lazy =
        |scheme| workspace::<f64>(scheme, (n, n, n), true, &opts(Variant::Frugal).lazy_sums(4));
    assert_eq!(
        lazy(Scheme::Strassen).workspace_elements,
        3 * (q(1) + q(2)) + q(3)
    );
    assert_eq!(
        lazy(Scheme::Winograd).workspace_elements,
        2 * (q(1) + q(2)) + q(3)
    );
    // Depth 0 and small products are classical, with no workspace.
    let classical = workspace::<f64>(
        Scheme::Strassen,
        (n, n, n),
        true,
        &opts(Variant::Frugal).depth(0),
    );
    assert_eq!((classical.levels, classical.workspace_elements), (0, 0));
    let small = workspace::<f64>(
        Scheme::Strassen,
        (63, 500, 500),
        true,
        &opts(Variant::Frugal),
    );
    assert_eq!(small.levels, 0);
}

/// The CPU's default schedule: `batched` when its temporaries take at
/// most half the available memory, else `frugal`; a named one as given.
#[test]
fn the_cpu_default_variant_fits_the_memory() {
    use fastmm::strassen::cpu_default_variant;
    let auto = GemmOptions::new(Algorithm::Winograd).threshold(64);
    let small = (256, 256, 256);
    // 2^21 squared f64: 15 quarter blocks of 8 TiB each at the top level.
    let huge = (1 << 21, 1 << 21, 1 << 21);
    for shape in [small, huge] {
        for variant in Variant::ALL {
            let named = auto.variant(variant);
            assert_eq!(
                cpu_default_variant::<f64>(Scheme::Winograd, shape, true, &named),
                variant
            );
        }
    }
    assert_eq!(
        cpu_default_variant::<f64>(Scheme::Winograd, huge, true, &auto),
        Variant::Frugal
    );
    let expected_small = match fastmm::system::available_memory_bytes() {
        Some(_) => Variant::Batched,
        None => Variant::Frugal,
    };
    assert_eq!(
        cpu_default_variant::<f64>(Scheme::Winograd, small, true, &auto),
        expected_small
    );
    // The workspace report follows it.
    let q = 128 * 128;
    let report = workspace::<f64>(Scheme::Winograd, small, true, &auto);
    if expected_small == Variant::Batched {
        assert_eq!(report.workspace_elements, 15 * (q + q / 4 + q / 16));
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

/// The GPU fast algorithms share the CPU's recursion; what differs is
/// checked without a GPU: their options, their `auto` levels, and their
/// workspace.
#[cfg(feature = "cuda")]
#[test]
fn gpu_fast_algorithms_plan_without_a_gpu() {
    use fastmm::{DType, Error};
    let bad = |opts: GemmOptions| matches!(opts.validate(), Err(Error::InvalidOption(_)));
    assert!(bad(
        GemmOptions::new(Algorithm::CudaStrassen).base(Algorithm::Packed)
    ));
    assert!(bad(
        GemmOptions::new(Algorithm::Strassen).base(Algorithm::Cublas)
    ));
    // The fused variant runs its own kernel on the GPU: no base, and no
    // workspace at any depth.
    assert!(GemmOptions::new(Algorithm::CudaWinograd)
        .variant(Variant::Fused)
        .validate()
        .is_ok());
    assert!(bad(GemmOptions::new(Algorithm::CudaWinograd)
        .variant(Variant::Fused)
        .base(Algorithm::Cublas)));
    let fused = GemmOptions::new(Algorithm::CudaStrassen)
        .variant(Variant::Fused)
        .threshold(16);
    let report = workspace::<f32>(Scheme::Strassen, (130, 97, 129), true, &fused);
    assert_eq!((report.levels, report.workspace_elements), (2, 0));
    assert!(bad(
        GemmOptions::new(Algorithm::CudaWinograd).base(Algorithm::CudaStrassen)
    ));
    assert!(GemmOptions::new(Algorithm::CudaStrassen)
        .base(Algorithm::CudaTiled)
        .validate()
        .is_ok());

    // auto on the GPU: f32 recurses while n ≥ 4096 but starts only from
    // 8192 (at most two levels: accuracy); f64 and integers from 8192.
    let gpu = GemmOptions::new(Algorithm::CudaWinograd);
    let levels = |n: usize, dtype: DType| match dtype {
        DType::F64 => workspace::<f64>(Scheme::Winograd, (n, n, n), true, &gpu).levels,
        DType::I32 => workspace::<i32>(Scheme::Winograd, (n, n, n), true, &gpu).levels,
        _ => workspace::<f32>(Scheme::Winograd, (n, n, n), true, &gpu).levels,
    };
    for (n, f32_levels, f64_levels, i32_levels) in [
        (4096, 0, 0, 0),
        (6144, 0, 0, 0),
        (8192, 2, 1, 1),
        (12288, 2, 1, 1),
        (16384, 2, 2, 2),
        (32768, 2, 3, 3),
    ] {
        assert_eq!(levels(n, DType::F32), f32_levels, "f32 {n}");
        assert_eq!(levels(n, DType::F64), f64_levels, "f64 {n}");
        assert_eq!(levels(n, DType::I32), i32_levels, "i32 {n}");
    }
    // auto on the CPU: base products of at least 2048/2 = 1024, and a first
    // level only from 4096 (8-byte types) or, for 4-byte types, 4096 on a
    // core of at most 512 FMA bits per cycle (AVX2, Zen 4) or with a wide
    // L2 (Zen 5) and 6144 on others; f32 at most two levels (accuracy),
    // f64 four.
    let cpu = GemmOptions::new(Algorithm::Winograd);
    let cpu_levels = |n: usize, dtype: DType| match dtype {
        DType::F64 => workspace::<f64>(Scheme::Winograd, (n, n, n), true, &cpu).levels,
        _ => workspace::<f32>(Scheme::Winograd, (n, n, n), true, &cpu).levels,
    };
    let kernel = fastmm::packed::select_kernel::<f32>(None).unwrap();
    let wide_l2 = fastmm::packed::blocking::l2_stream_bytes_per_cycle()
        > fastmm::tunables::L2_STREAM_MAX_BYTES_PER_CYCLE;
    let f32_start = if fastmm::packed::blocking::fma_bits_per_cycle(kernel.family) <= 512 || wide_l2
    {
        4096
    } else {
        6144
    };
    assert_eq!(
        fastmm::strassen::effective_start(&cpu, DType::F32),
        f32_start
    );
    for (n, f64_levels, f32_levels_once_started) in [
        (2048, 0, 0),
        (3071, 0, 0),
        (3072, 0, 0),
        (4095, 0, 0),
        (4096, 2, 2),
        (6143, 2, 2),
        (6144, 2, 2),
        (8192, 3, 2),
    ] {
        let f32_levels = if n >= f32_start {
            f32_levels_once_started
        } else {
            0
        };
        assert_eq!(cpu_levels(n, DType::F64), f64_levels, "f64 n = {n}");
        assert_eq!(cpu_levels(n, DType::F32), f32_levels, "f32 n = {n}");
    }
    // The rule follows the kernel family it is given.
    let generic = cpu.cpu_kernel(fastmm::packed::CpuKernel::Generic);
    assert_eq!(
        fastmm::strassen::effective_start(&generic, DType::F32),
        4096
    );
    // An explicit threshold is the whole rule.
    let explicit = cpu.threshold(2048);
    assert_eq!(
        workspace::<f64>(Scheme::Winograd, (2048, 2048, 2048), true, &explicit).levels,
        1
    );

    // Frugal Winograd at one level, n = 8192: Douglas's two temporaries of
    // 4096² (the H100 run reported 128 MiB of f32).
    let frugal = gpu.variant(Variant::Frugal).threshold(8192);
    let report = workspace::<f32>(Scheme::Winograd, (8192, 8192, 8192), true, &frugal);
    assert_eq!(report.workspace_elements, 2 * 4096 * 4096, "{report:?}");
    // Batched at one level: 15 of them (the H100 run reported 960 MiB).
    let batched = gpu.variant(Variant::Batched).threshold(8192);
    let report = workspace::<f32>(Scheme::Winograd, (8192, 8192, 8192), true, &batched);
    assert_eq!(report.workspace_elements, 15 * 4096 * 4096, "{report:?}");
}
