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
    // Squares through the row pipeline and the column split, a prime
    // rectangle with edges in every direction, and a short wide one.
    for (m, k, n) in [
        (1000, 1000, 1000),
        (517, 1031, 263),
        (256, 256, 256),
        (37, 700, 1100),
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
