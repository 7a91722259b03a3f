//! The CPU thread team: results that do not depend on the thread count or
//! on which thread ran which block (a neighbour's busy thread makes the
//! team's threads start late and run unevenly), and the process-wide
//! thread setting.

use std::sync::atomic::{AtomicBool, Ordering};

use fastmm::random::{random_matrix, seeded_rng};
use fastmm::{gemm, num_threads, set_num_threads, Algorithm, Element, GemmOptions, Matrix};

/// Runs `work` while a neighbour thread spins on the CPU, as an idle
/// OpenBLAS or OpenMP worker does after its library's last call.
fn beside_a_spinning_neighbour<R>(work: impl FnOnce() -> R) -> R {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let result = work();
        stop.store(true, Ordering::Relaxed);
        result
    })
}

fn product<T: Element>(a: &Matrix<T>, b: &Matrix<T>, opts: &GemmOptions) -> Matrix<T> {
    let mut c = Matrix::filled(a.rows(), b.cols(), T::from_f64(f64::NAN));
    gemm(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), opts).unwrap();
    c
}

fn bitwise<T: Element>(x: &Matrix<T>, y: &Matrix<T>) -> bool {
    x.rows() == y.rows()
        && x.cols() == y.cols()
        && (0..x.rows()).all(|i| {
            (0..x.cols()).all(|j| x.get(i, j).to_f64().to_bits() == y.get(i, j).to_f64().to_bits())
        })
}

/// Every element's sum runs in one order whatever the team: the same bits
/// on 1 to 4 threads, run after run, alone or beside a busy neighbour.
fn same_bits_on_any_team<T: Element>() {
    let mut rng = seeded_rng(55);
    // Squares through the row pipeline and the column split, bands of
    // C's columns on the direct path (uneven ones included), a prime
    // rectangle with edges in every direction, a short wide one, and
    // small C with long k, whose k runs in slices (one thread takes the
    // direct path on each, a team the slices side by side).
    for (m, k, n) in [
        (1000, 1000, 1000),
        (517, 1031, 263),
        (256, 256, 256),
        (96, 200, 130),
        (300, 50, 81),
        (37, 700, 1100),
        (64, 8192, 48),
        (7, 12011, 5),
    ] {
        let a: Matrix<T> = random_matrix(m, k, &mut rng);
        let b: Matrix<T> = random_matrix(k, n, &mut rng);
        for algorithm in [Algorithm::Packed, Algorithm::Auto] {
            let one = product(&a, &b, &GemmOptions::new(algorithm).threads(1));
            for threads in [2, 3, 4] {
                let opts = GemmOptions::new(algorithm).threads(threads);
                for round in 0..3 {
                    let got = if round == 1 {
                        beside_a_spinning_neighbour(|| product(&a, &b, &opts))
                    } else {
                        product(&a, &b, &opts)
                    };
                    assert!(
                        bitwise(&got, &one),
                        "{} {algorithm} {m}×{k}×{n}: {threads} threads (round {round}) differ from 1",
                        T::DTYPE
                    );
                }
            }
        }
    }
}

#[test]
fn f32_results_do_not_depend_on_the_team() {
    same_bits_on_any_team::<f32>();
}

#[test]
fn f64_results_do_not_depend_on_the_team() {
    same_bits_on_any_team::<f64>();
}

#[test]
fn the_process_thread_setting_applies_and_clears() {
    let before = num_threads();
    set_num_threads(Some(1)).unwrap();
    assert_eq!(num_threads(), 1);
    set_num_threads(Some(7)).unwrap();
    assert_eq!(num_threads(), 7);
    assert!(set_num_threads(Some(0)).is_err());
    assert_eq!(num_threads(), 7, "a refused count changes nothing");
    set_num_threads(None).unwrap();
    assert_eq!(num_threads(), before);
}

/// The size from which `packed` shares a product with the team, forced
/// both ways on small shapes (the default would run them on one thread):
/// the same bits either way, and integers exactly as the naive loops.
fn same_bits_whatever_the_parallel_edge<T: Element>() {
    let mut rng = seeded_rng(56);
    for (m, k, n) in [
        (1, 1, 1),
        (7, 9, 5),
        (33, 17, 65),
        (97, 101, 89),
        (130, 130, 130),
        (161, 2, 161),
    ] {
        let a: Matrix<T> = random_matrix(m, k, &mut rng);
        let b: Matrix<T> = random_matrix(k, n, &mut rng);
        let one = product(&a, &b, &GemmOptions::new(Algorithm::Packed).threads(1));
        for (threads, edge) in [(2, 1), (2, 0), (3, 50), (2, 100_000)] {
            let opts = GemmOptions::new(Algorithm::Packed)
                .threads(threads)
                .parallel_from(edge);
            let got = product(&a, &b, &opts);
            assert!(
                bitwise(&got, &one),
                "{} {m}×{k}×{n}: {threads} threads from {edge}³ differ from 1 thread",
                T::DTYPE
            );
        }
        if T::DTYPE.is_integer() {
            let naive = product(&a, &b, &GemmOptions::new(Algorithm::Naive));
            let exact = (0..m)
                .all(|i| (0..n).all(|j| one.get(i, j).to_i128() == naive.get(i, j).to_i128()));
            assert!(exact, "{} {m}×{k}×{n}: packed differs from naive", T::DTYPE);
        }
    }
}

#[test]
fn forcing_the_parallel_edge_changes_no_result() {
    same_bits_whatever_the_parallel_edge::<f32>();
    same_bits_whatever_the_parallel_edge::<f64>();
    same_bits_whatever_the_parallel_edge::<i32>();
    same_bits_whatever_the_parallel_edge::<i64>();
}
