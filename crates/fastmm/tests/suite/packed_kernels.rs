//! Every SIMD microkernel family against its reference twin (the generic
//! kernel) and an exact reference, over the edges of every blocking level:
//! MR±1, NR±1 and KC±1, with block sizes small enough that MC and NC edges
//! occur too. Families the CPU lacks are reported and skipped.

use fastmm::info::{packed_choice, supports};
use fastmm::random::{random_matrix_full_range, seeded_rng};
use fastmm::verify::verify;
use fastmm::{gemm, Algorithm, BlockSizes, CpuKernel, Element, GemmOptions, Matrix};

const KC: usize = 16;

fn around(x: usize) -> [usize; 3] {
    [x - 1, x, x + 1]
}

fn check_family<T: Element>(family: CpuKernel) {
    let Ok(kernel) = packed_choice::<T>(Some(family)) else {
        eprintln!(
            "skipping {family} for {}: not supported on this CPU",
            T::DTYPE
        );
        return;
    };
    let (mr, nr) = (kernel.mr, kernel.nr);
    let blocks = BlockSizes {
        mc: 2 * mr,
        kc: KC,
        nc: 2 * nr,
    };
    let fast = GemmOptions::new(Algorithm::Packed)
        .cpu_kernel(family)
        .block_sizes(blocks)
        .threads(1);
    let twin = GemmOptions::new(Algorithm::Packed)
        .cpu_kernel(CpuKernel::Generic)
        .threads(1);
    let mut rng = seeded_rng(11);
    let ms = [1, mr - 1, mr, mr + 1, 2 * mr + 1, 4 * mr + 3];
    // nr + nr/2 - 1 leaves an edge panel that fills part of the tile's
    // vectors (the edge kernels compute only those: `run_edge`).
    let ns = [
        1,
        nr - 1,
        nr,
        nr + 1,
        nr + nr / 2 - 1,
        2 * nr + 1,
        4 * nr + 5,
    ];
    for &m in &ms {
        for &n in &ns {
            for k in [1, 2].into_iter().chain(around(KC)).chain(around(2 * KC)) {
                let a: Matrix<T> = random_matrix_full_range(m, k, &mut rng);
                let b: Matrix<T> = random_matrix_full_range(k, n, &mut rng);
                for (alpha, beta) in [(T::ONE, T::ZERO), (T::from_i64(3), T::from_i64(-2))] {
                    let c0: Matrix<T> = random_matrix_full_range(m, n, &mut rng);
                    let mut got = c0.clone();
                    gemm(alpha, a.as_ref(), b.as_ref(), beta, got.as_mut(), &fast).unwrap();
                    let mut want = c0.clone();
                    gemm(alpha, a.as_ref(), b.as_ref(), beta, want.as_mut(), &twin).unwrap();
                    let label = format!(
                        "{} {} {m}×{k}×{n} α={alpha} β={beta}",
                        kernel.kernel,
                        T::DTYPE
                    );
                    if T::DTYPE.is_integer() {
                        assert_eq!(got, want, "{label}");
                    } else if beta == T::ZERO {
                        assert!(
                            verify(a.as_ref(), b.as_ref(), got.as_ref()).unwrap().ok,
                            "{label}"
                        );
                    } else {
                        let scale = (0..m)
                            .flat_map(|i| (0..n).map(move |j| (i, j)))
                            .map(|(i, j)| (got.get(i, j).to_f64() - want.get(i, j).to_f64()).abs())
                            .fold(0.0, f64::max);
                        let bound = 8.0 * (k as f64 + 4.0) * T::DTYPE.unit_roundoff() * 8.0;
                        assert!(scale <= bound, "{label}: max difference {scale} > {bound}");
                    }
                }
            }
        }
    }
}

fn check_all_families<T: Element>() {
    for &family in CpuKernel::ALL {
        check_family::<T>(family);
    }
}

#[test]
fn kernels_f32_match_their_twin() {
    check_all_families::<f32>();
}

#[test]
fn kernels_f64_match_their_twin() {
    check_all_families::<f64>();
}

#[test]
fn kernels_i32_match_their_twin_exactly() {
    check_all_families::<i32>();
}

#[test]
fn kernels_i64_match_their_twin_exactly() {
    check_all_families::<i64>();
}

/// Threads share packed blocks and split C by columns or, when C is
/// narrow, by rows, or split k when C is small and k long (the last two
/// shapes); every split, with blocks small enough that each thread sees
/// several of them, must give the exact product, for β = 0 over a poisoned
/// C and for α, β ≠ 0.
#[test]
fn threaded_splits_are_exact() {
    let mut rng = seeded_rng(12);
    for &family in CpuKernel::ALL.iter().filter(|&&f| supports(f)) {
        let kernel = packed_choice::<i64>(Some(family)).unwrap();
        let blocks = BlockSizes {
            mc: 3 * kernel.mr,
            kc: 20,
            nc: 2 * kernel.nr,
        };
        let shapes = [
            (70, 70, 70),
            (301, 90, 17),
            (23, 75, 331),
            (129, 64, 129),
            (37, 401, 45),
            (9, 1201, 31),
        ];
        for (m, k, n) in shapes {
            let a: Matrix<i64> = random_matrix_full_range(m, k, &mut rng);
            let b: Matrix<i64> = random_matrix_full_range(k, n, &mut rng);
            let want =
                fastmm::matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::new(Algorithm::Naive))
                    .unwrap();
            for threads in [2, 3, 4] {
                let opts = GemmOptions::new(Algorithm::Packed)
                    .cpu_kernel(family)
                    .block_sizes(blocks)
                    .threads(threads);
                let mut got = Matrix::filled(m, n, i64::MIN);
                gemm(1, a.as_ref(), b.as_ref(), 0, got.as_mut(), &opts).unwrap();
                assert_eq!(
                    got, want,
                    "{} {m}×{k}×{n} on {threads} threads",
                    kernel.kernel
                );
                let c0: Matrix<i64> = random_matrix_full_range(m, n, &mut rng);
                let mut want_update = c0.clone();
                let naive = GemmOptions::new(Algorithm::Naive);
                gemm(3, a.as_ref(), b.as_ref(), -2, want_update.as_mut(), &naive).unwrap();
                let mut got_update = c0.clone();
                gemm(3, a.as_ref(), b.as_ref(), -2, got_update.as_mut(), &opts).unwrap();
                assert_eq!(
                    got_update, want_update,
                    "{} C ← 3AB − 2C, {m}×{k}×{n} on {threads} threads",
                    kernel.kernel
                );
            }
        }
    }
}

#[test]
fn forcing_an_unsupported_or_unknown_kernel_is_an_error() {
    assert!("neon9".parse::<CpuKernel>().is_err());
    for &family in CpuKernel::ALL {
        let supported = supports(family);
        assert_eq!(
            packed_choice::<f64>(Some(family)).is_ok(),
            supported,
            "{family}"
        );
    }
    assert!(supports(CpuKernel::Generic));
}

/// The multithreaded row pipeline (tasks of many (jc, pc) steps taken in
/// order, B̃ in two buffers used in turn) run many times with tiny blocks
/// and more threads than cores, so that threads overtake one another: any
/// task that ran before what it waits for would change the exact result.
#[test]
fn row_pipeline_is_exact_under_contention() {
    let mut rng = seeded_rng(13);
    let kernel = packed_choice::<i64>(None).unwrap();
    let blocks = BlockSizes {
        mc: 2 * kernel.mr,
        kc: 7,
        nc: kernel.nr,
    };
    // At least 4 row panels per thread for 8 threads, the pipeline's condition.
    let (m, k, n) = (40 * kernel.mr + 3, 97, 5 * kernel.nr + 1);
    let a: Matrix<i64> = random_matrix_full_range(m, k, &mut rng);
    let b: Matrix<i64> = random_matrix_full_range(k, n, &mut rng);
    let c0: Matrix<i64> = random_matrix_full_range(m, n, &mut rng);
    let mut want = c0.clone();
    gemm(
        5,
        a.as_ref(),
        b.as_ref(),
        7,
        want.as_mut(),
        &GemmOptions::new(Algorithm::Naive),
    )
    .unwrap();
    for threads in [2, 5, 8] {
        let opts = GemmOptions::new(Algorithm::Packed)
            .block_sizes(blocks)
            .threads(threads);
        for round in 0..20 {
            let mut got = c0.clone();
            gemm(5, a.as_ref(), b.as_ref(), 7, got.as_mut(), &opts).unwrap();
            assert_eq!(got, want, "{threads} threads, round {round}");
        }
    }
}
