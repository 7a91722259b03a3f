//! The accuracy matrix on the CPU: every algorithm × accuracy level over
//! the input classes, each result's errors against the exact product
//! (double-f64), judged by the level it gives beside `packed`'s errors on
//! the same inputs — at `native` within 2× of them. The emulated product
//! runs as its CPU twin, with the same certificate as on a GPU (for the
//! CPU's native product). `auto` must give the level asked for.

use fastmm::accuracy::InputClass;
use fastmm::audit::{audit, audit_complex, Row};
use fastmm::complex::ComplexForm;
use fastmm::{Accuracy, Algorithm, Context, Element, Error, GemmOptions, Matrix};

/// Shapes: one element, a tile edge off by one, and a depth where the
/// native product's error and the emulated product's moduli differ from
/// the short one's (the cancellation class wants an even k).
const SHAPES: [(usize, usize, usize); 3] = [(1, 2, 1), (17, 256, 13), (12, 2048, 9)];

/// Every algorithm the CPU runs, at the default level, with Strassen and
/// Winograd forced to two levels; the emulated product and `auto` at
/// every level.
fn products(integer: bool) -> Vec<GemmOptions> {
    let mut out: Vec<GemmOptions> = Algorithm::all_on(fastmm::DeviceKind::Cpu)
        .map(|a| {
            let opts = GemmOptions::new(a);
            if a.is_fast() {
                opts.threshold(4).depth(2)
            } else {
                opts
            }
        })
        .collect();
    let mut levels = Accuracy::LEVELS.to_vec();
    if !integer {
        levels.push(Accuracy::Bits(20));
    }
    for level in levels {
        out.push(GemmOptions::new(Algorithm::Emulated).accuracy(level));
        out.push(GemmOptions::new(Algorithm::Auto).accuracy(level));
    }
    out
}

fn matrix<T: Element>() -> Result<Vec<Row>, Error> {
    let ctx = Context::cpu();
    let products = products(T::DTYPE.is_integer());
    let mut rows = Vec::new();
    for shape in SHAPES {
        rows.extend(audit::<T>(
            &ctx,
            shape,
            &InputClass::ALL,
            &products,
            7,
            usize::MAX,
        )?);
    }
    Ok(rows)
}

fn assert_all_met(rows: &[Row]) {
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.ok)
        .map(|r| {
            format!(
                "{} {:?} {} {}: {}",
                r.dtype,
                r.shape,
                r.class,
                r.label,
                r.why.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn every_cpu_algorithm_meets_the_level_it_gives_on_every_input_class() {
    for rows in [matrix::<f32>().unwrap(), matrix::<f64>().unwrap()] {
        assert_all_met(&rows);
        // The matrix is not vacuous: the native level is held to the
        // native product's errors, Strassen's levels ran and gave `bound`,
        // and the emulated product at `native` gave `native`.
        let at = |label: &'static str| rows.iter().filter(move |r| r.label == label);
        assert!(at("winograd:native").all(|r| r.given == Accuracy::Bound || r.shape.0 < 4));
        assert!(at("emulated:native").all(|r| r.given == Accuracy::Native));
        assert!(at("auto:native").all(|r| r.algorithm == Algorithm::Packed));
        assert!(at("emulated:bound").any(|r| r.ratio > 2.0));
    }
}

#[test]
fn complex_products_meet_their_level_and_3m_only_a_relaxed_one() {
    // Complex64 and complex128 over every class: four real products at
    // `native` within 2× of the native complex product's errors, 3M at the
    // relaxed levels within their bound norm-wise.
    let ctx = Context::cpu();
    let mut products: Vec<GemmOptions> = [Algorithm::Packed, Algorithm::Naive]
        .map(GemmOptions::new)
        .to_vec();
    products.push(GemmOptions::new(Algorithm::Winograd).threshold(4).depth(2));
    for level in Accuracy::LEVELS {
        products.push(GemmOptions::new(Algorithm::Emulated).accuracy(level));
        products.push(GemmOptions::new(Algorithm::Auto).accuracy(level));
    }
    for shape in [(1, 2, 1), (17, 256, 13)] {
        let c64 = audit_complex::<f32>(&ctx, shape, &InputClass::ALL, &products, 7, usize::MAX);
        let c128 = audit_complex::<f64>(&ctx, shape, &InputClass::ALL, &products, 7, usize::MAX);
        for rows in [c64.unwrap(), c128.unwrap()] {
            assert_all_met(&rows);
            let forms = |level| rows.iter().filter(move |r| r.asked == level);
            assert!(forms(Accuracy::Native).all(|r| r.form == Some(ComplexForm::Classical)));
            assert!(forms(Accuracy::Bound).all(|r| r.form == Some(ComplexForm::Gauss)));
            // Gaussian integers with exact partial sums: exact at `native`
            // and `bound` (3M's sums of parts included).
            assert!(rows
                .iter()
                .filter(|r| r.class == InputClass::Integer)
                .filter(|r| matches!(r.asked, Accuracy::Native | Accuracy::Bound))
                .all(|r| r.errors.relative_frobenius == 0.0));
            // Why `native` never runs 3M: on rows and columns of different
            // scales its imaginary part misses the componentwise bound by
            // orders of magnitude.
            if shape.1 > 2 {
                assert!(rows.iter().any(|r| r.class == InputClass::Scaled
                    && r.form == Some(ComplexForm::Gauss)
                    && r.ratio > 1e3));
            }
        }
    }
    // Integer parts are refused: complex products are of floats.
    assert!(audit_complex::<i32>(&ctx, (2, 2, 2), &InputClass::ALL, &products, 7, 4).is_err());
}

#[test]
fn integers_are_exact_at_every_level() {
    for rows in [matrix::<i32>().unwrap(), matrix::<i64>().unwrap()] {
        assert_all_met(&rows);
        assert!(rows.iter().all(|r| r.errors.relative_frobenius == 0.0));
    }
}

#[test]
fn auto_gives_each_level_asked_for_at_every_size() {
    let cpu = Context::cpu();
    for n in [1, 64, 255, 256, 2048, 4096, 8192, 16384] {
        for level in Accuracy::LEVELS {
            let opts = GemmOptions::new(Algorithm::Auto).accuracy(level);
            for plan in [
                cpu.plan(fastmm::Problem::of::<f32>((n, n, n)), &opts)
                    .unwrap(),
                cpu.plan(fastmm::Problem::of::<f64>((n, n, n)), &opts)
                    .unwrap(),
            ] {
                assert!(level.met_by(plan.accuracy), "{n} {level}: {plan:?}");
                assert_eq!(plan.accuracy_asked, level);
            }
        }
        // The default is `native`: the CPU's native product, never
        // Strassen's levels, for floats; integers stay free to take them.
        let default = cpu
            .plan(
                fastmm::Problem::of::<f32>((n, n, n)),
                &GemmOptions::default(),
            )
            .unwrap();
        assert_eq!(default.algorithm, Algorithm::Packed, "{n}");
        assert_eq!(default.accuracy, Accuracy::Native);
    }
    let relaxed = GemmOptions::new(Algorithm::Auto).accuracy(Accuracy::Bound);
    let plan = cpu
        .plan(fastmm::Problem::of::<f64>((8192, 8192, 8192)), &relaxed)
        .unwrap();
    assert_eq!(plan.algorithm, Algorithm::Winograd);
    assert_eq!(plan.accuracy, Accuracy::Bound);
    let ints = cpu
        .plan(
            fastmm::Problem::of::<i64>((8192, 8192, 8192)),
            &GemmOptions::default(),
        )
        .unwrap();
    assert_eq!(ints.algorithm, Algorithm::Winograd);
    assert_eq!(ints.accuracy, Accuracy::Native);
}

#[test]
fn bits_are_a_precision_of_the_emulated_product_and_named_algorithms_run_as_asked() {
    let cpu = Context::cpu();
    let a = Matrix::<f64>::from_fn(8, 8, |i, j| (i * 8 + j) as f64 / 64.0);
    // An algorithm asked for by name runs, and says what it gives.
    let bits = GemmOptions::new(Algorithm::Packed).accuracy(Accuracy::Bits(20));
    let plan = cpu
        .plan(fastmm::Problem::of::<f64>((8, 8, 8)), &bits)
        .unwrap();
    assert_eq!(
        (plan.algorithm, plan.accuracy),
        (Algorithm::Packed, Accuracy::Native)
    );
    assert!(!plan.accuracy_asked.met_by(plan.accuracy));
    let naive = GemmOptions::new(Algorithm::Naive);
    assert_eq!(
        cpu.plan(fastmm::Problem::of::<f64>((8, 8, 8)), &naive)
            .unwrap()
            .accuracy,
        Accuracy::Bound
    );
    let auto = GemmOptions::new(Algorithm::Auto).accuracy(Accuracy::Bits(20));
    let plan = cpu
        .plan(fastmm::Problem::of::<f64>((8, 8, 8)), &auto)
        .unwrap();
    assert_eq!(
        (plan.algorithm, plan.accuracy),
        (Algorithm::Emulated, Accuracy::Bits(20))
    );
    let timing = cpu
        .gemm_timed(
            1.0,
            a.as_ref(),
            a.as_ref(),
            0.0,
            Matrix::zeros(8, 8).as_mut(),
            &auto,
        )
        .unwrap();
    assert_eq!(timing.emulation.unwrap().bits, 20);
    for bad in ["bits:0", "bits:63", "bits:x", "exact"] {
        assert!(bad.parse::<Accuracy>().is_err(), "{bad}");
    }
    for level in Accuracy::LEVELS.into_iter().chain([Accuracy::Bits(33)]) {
        assert_eq!(level.to_string().parse::<Accuracy>().unwrap(), level);
    }
}
