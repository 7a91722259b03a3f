//! The CPU's direct path resolved once (`cpu::packed::plain`, taken by
//! `Context::gemm` for small products under default options) gives the
//! bits of the full path (`Context::gemm_timed`, which resolves every
//! choice again), for every element type, row- and column-major C,
//! transposed operands, α and β (β = 0 over a NaN-filled C), shapes
//! 1 to 384³ and a long k that the full path slices.

use fastmm::random::{random_matrix_full_range, seeded_rng};
use fastmm::{Algorithm, Context, Element, GemmOptions, MatMut, Matrix};

/// C, or its transposed view (a column-major C).
fn view<T: Element>(c: &mut Matrix<T>, col_c: bool) -> MatMut<'_, T> {
    if col_c {
        c.as_mut().t()
    } else {
        c.as_mut()
    }
}

fn check<T: Element>() {
    let ctx = Context::cpu();
    let mut rng = seeded_rng(23);
    let shapes = [
        (1, 1, 1),
        (2, 3, 1),
        (1, 5, 7),
        (7, 9, 15),
        (8, 8, 8),
        (13, 7, 29),
        (33, 65, 17),
        (64, 64, 64),
        (100, 120, 50),
        (384, 384, 384),
        (1, 300, 1),
        (300, 2, 5),
        (8, 8192, 8),
    ];
    for (m, k, n) in shapes {
        for (trans_a, trans_b, col_c) in [
            (false, false, false),
            (true, false, false),
            (false, true, true),
            (true, true, true),
            (false, false, true),
        ] {
            // Stored transposes, read through transposed views.
            let a_store: Matrix<T> = match trans_a {
                false => random_matrix_full_range(m, k, &mut rng),
                true => random_matrix_full_range(k, m, &mut rng),
            };
            let b_store: Matrix<T> = match trans_b {
                false => random_matrix_full_range(k, n, &mut rng),
                true => random_matrix_full_range(n, k, &mut rng),
            };
            let a = if trans_a {
                a_store.as_ref().t()
            } else {
                a_store.as_ref()
            };
            let b = if trans_b {
                b_store.as_ref().t()
            } else {
                b_store.as_ref()
            };
            let c_store: Matrix<T> = match col_c {
                false => random_matrix_full_range(m, n, &mut rng),
                true => random_matrix_full_range(n, m, &mut rng),
            };

            let nan = T::from_f64(f64::NAN);
            for (alpha, beta) in [(T::ONE, T::ZERO), (T::from_i64(3), T::from_i64(-2))] {
                for opts in [GemmOptions::default(), GemmOptions::new(Algorithm::Packed)] {
                    let start = |c: &Matrix<T>| {
                        let mut c = c.clone();
                        if beta == T::ZERO && !T::DTYPE.is_integer() {
                            c.as_mut().fill(nan);
                        }
                        c
                    };
                    let mut direct = start(&c_store);
                    ctx.gemm(alpha, a, b, beta, view(&mut direct, col_c), &opts)
                        .unwrap();
                    let mut full = start(&c_store);
                    ctx.gemm_timed(alpha, a, b, beta, view(&mut full, col_c), &opts)
                        .unwrap();
                    assert!(
                        direct.as_slice() == full.as_slice(),
                        "{} {m}×{k}×{n} transposed ({trans_a}, {trans_b}), column-major C {col_c}, {:?}",
                        T::DTYPE,
                        opts.algorithm
                    );
                }
            }
        }
    }
}

#[test]
fn the_direct_path_gives_the_full_paths_bits() {
    check::<f32>();
    check::<f64>();
    check::<i32>();
    check::<i64>();
}
