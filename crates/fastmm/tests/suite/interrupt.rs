//! An [`Interrupt`] stops a product between blocks with
//! `Error::Interrupted`, and a lowered one changes nothing.

use std::time::Duration;

use fastmm::{gemm, Algorithm, Context, Error, GemmOptions, Interrupt, Matrix};

#[test]
fn a_raised_interrupt_stops_every_algorithm_before_it_starts() {
    let stop = Interrupt::leak();
    let a = Matrix::<f64>::from_fn(300, 200, |i, j| ((i * 7 + j) % 11) as f64);
    let b = Matrix::<f64>::from_fn(200, 250, |i, j| ((i + 3 * j) % 5) as f64);
    let expected = fastmm::matmul(&a, &b).unwrap();
    for algorithm in [
        Algorithm::Auto,
        Algorithm::Packed,
        Algorithm::Tiled,
        Algorithm::Strassen,
        Algorithm::Winograd,
    ] {
        let opts = GemmOptions::new(algorithm).threshold(64).interrupt(stop);
        let mut c = Matrix::filled(300, 250, f64::NAN);
        stop.raise();
        assert_eq!(
            gemm(1.0, a.as_ref(), b.as_ref(), 0.0, c.as_mut(), &opts),
            Err(Error::Interrupted),
            "{algorithm}"
        );
        stop.clear();
        gemm(1.0, a.as_ref(), b.as_ref(), 0.0, c.as_mut(), &opts).unwrap();
        assert_eq!(c, expected, "{algorithm}");
    }
}

#[test]
fn a_long_packed_product_stops_between_panels_of_k() {
    // Above INTERRUPTIBLE_MNK, so `packed` runs panels of k and checks in
    // between: raised during the first panel, it stops at the second.
    let n = 4200;
    let a = Matrix::<f32>::from_fn(n, n, |i, j| ((i + j) % 3) as f32);
    let stop = Interrupt::leak();
    let opts = GemmOptions::new(Algorithm::Packed).interrupt(stop);
    let mut c = Matrix::zeros(n, n);
    let outcome = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            stop.raise();
        });
        Context::cpu().gemm(1.0, a.as_ref(), a.as_ref(), 0.0, c.as_mut(), &opts)
    });
    assert_eq!(outcome, Err(Error::Interrupted));
}

#[test]
fn interrupts_compare_by_flag() {
    let (x, y) = (Interrupt::leak(), Interrupt::leak());
    assert_eq!(x, x);
    assert_ne!(x, y);
    assert_eq!(
        GemmOptions::new(Algorithm::Packed).interrupt(x),
        GemmOptions::new(Algorithm::Packed).interrupt(x)
    );
    assert!(!x.is_raised());
    x.raise();
    assert!(x.is_raised() && !y.is_raised());
    assert_eq!(format!("{x:?}"), "Interrupt(raised: true)");
}
