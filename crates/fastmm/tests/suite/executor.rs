//! The executor interface: one plan/execute contract for one device and a
//! team, checked through code that knows only `impl Executor`. The same
//! products (shapes 0, 1, primes and rectangles; strided and transposed
//! views; α and β; C pre-filled with NaN) give the same integers exactly
//! on every executor; a plan runs only the product it was made for; the
//! plan a report names is the one that ran.

use fastmm::verify::verify_with_growth;
use fastmm::{
    Algorithm, Context, DType, Element, Error, Executor, Gemm, GemmOptions, Matrix, Problem, Route,
    Team,
};

/// C ← α·A·B + β·C on `x`, planned then executed; the report's plan
/// must be the plan given (no NaN here, so nothing falls back).
fn product<T: Element>(
    x: &impl Executor,
    (alpha, a, b, beta): (T, fastmm::MatRef<'_, T>, fastmm::MatRef<'_, T>, T),
    c: &mut Matrix<T>,
    opts: &GemmOptions,
) -> Result<fastmm::Report, Error> {
    let gemm = Gemm::new(a, b, c.as_mut()).alpha(alpha).beta(beta);
    let plan = x.plan(gemm.problem(), opts)?;
    assert_eq!(plan.problem, gemm.problem());
    let report = x.execute(&plan, gemm)?;
    assert_eq!(report.plan, plan, "{}", x.describe());
    Ok(report)
}

fn int_matrix(rows: usize, cols: usize, seed: i64) -> Matrix<i64> {
    Matrix::from_fn(rows, cols, |i, j| {
        ((i as i64 * 7 + j as i64 * 3 + seed) % 11) - 5
    })
}

/// Every executor gives the one-device product of the same integers,
/// bit for bit, over the shape matrix, with α, β, views and a NaN-free
/// β = 0 overwrite.
#[test]
fn every_executor_gives_the_same_integers() {
    let cpu = Context::cpu();
    let teams: Vec<Team> = [1, 2, 3, 4]
        .iter()
        .map(|&p| Team::simulated(p).unwrap())
        .collect();
    let shapes = [
        (0, 3, 4),
        (3, 0, 4),
        (1, 1, 1),
        (5, 7, 11),
        (13, 2, 17),
        (31, 29, 8),
        (64, 64, 64),
    ];
    for (m, k, n) in shapes {
        let a = int_matrix(m, k, 1);
        // B stored transposed: a strided view.
        let bt = int_matrix(n, k, 2);
        let b = bt.as_ref().t();
        for (alpha, beta) in [(1i64, 0i64), (3, -2), (0, 5)] {
            for algorithm in [Algorithm::Auto, Algorithm::Naive, Algorithm::Strassen] {
                let opts = GemmOptions::new(algorithm).threshold(8);
                let mut want = int_matrix(m, n, 3);
                product(&cpu, (alpha, a.as_ref(), b, beta), &mut want, &opts).unwrap();
                for team in &teams {
                    let mut got = int_matrix(m, n, 3);
                    let report =
                        product(team, (alpha, a.as_ref(), b, beta), &mut got, &opts).unwrap();
                    assert_eq!(
                        got,
                        want,
                        "{algorithm} {m}×{k}×{n} α={alpha} β={beta} on {}",
                        team.describe()
                    );
                    assert!(report.communication.is_some());
                }
            }
        }
    }
}

/// Floats through the interface: C pre-filled with NaN and β = 0 is
/// overwritten, the result within the plan's allowance, on a context and
/// on teams; a transposed C (column-major) too.
#[test]
fn floats_within_the_plans_allowance_on_every_executor() {
    let cpu = Context::cpu();
    let team = Team::simulated(3).unwrap();
    for (m, k, n) in [(1, 1, 1), (17, 23, 19), (40, 96, 72)] {
        let a = Matrix::<f64>::from_fn(m, k, |i, j| ((i * 13 + j * 7) % 17) as f64 / 7.0 - 1.1);
        let b = Matrix::<f64>::from_fn(k, n, |i, j| ((i * 5 + j * 11) % 19) as f64 / 9.0 - 0.9);
        for opts in [
            GemmOptions::default(),
            GemmOptions::new(Algorithm::Winograd).threshold(16),
        ] {
            let mut c = Matrix::filled(m, n, f64::NAN);
            let report = product(&cpu, (1.0, a.as_ref(), b.as_ref(), 0.0), &mut c, &opts).unwrap();
            let verdict =
                verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), report.error_growth())
                    .unwrap();
            assert!(verdict.ok, "{m}×{k}×{n} on the CPU: {verdict:?}");
            // Column-major C: the transposed view of a row-major matrix.
            let mut ct = Matrix::filled(n, m, f64::NAN);
            let gemm = Gemm::new(a.as_ref(), b.as_ref(), ct.as_mut().t());
            let plan = team.plan(gemm.problem(), &opts).unwrap();
            let report = team.execute(&plan, gemm).unwrap();
            let tc = Matrix::from_fn(m, n, |i, j| ct.get(j, i));
            let verdict =
                verify_with_growth(a.as_ref(), b.as_ref(), tc.as_ref(), report.error_growth())
                    .unwrap();
            assert!(verdict.ok, "{m}×{k}×{n} on a team: {verdict:?}");
        }
    }
}

/// A plan runs only its own product: another shape, another type, β ≠ 0
/// under a plan that does not read C, or another executor's plan are
/// typed errors, and C is untouched.
#[test]
fn a_plan_runs_only_its_own_product() {
    let cpu = Context::cpu();
    let team = Team::simulated(2).unwrap();
    let opts = GemmOptions::default();
    let a = Matrix::<f32>::filled(4, 5, 1.0);
    let b = Matrix::<f32>::filled(5, 6, 1.0);
    let mut c = Matrix::<f32>::filled(4, 6, 7.0);
    let plan = cpu.plan(Problem::of::<f32>((4, 5, 7)), &opts).unwrap();
    let wrong_shape = cpu.execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()));
    assert!(
        matches!(wrong_shape, Err(Error::InvalidOption(_))),
        "{wrong_shape:?}"
    );
    let plan = cpu
        .plan(Problem::new((4, 5, 6), DType::F64), &opts)
        .unwrap();
    let wrong_type = cpu.execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()));
    assert!(
        matches!(wrong_type, Err(Error::InvalidOption(_))),
        "{wrong_type:?}"
    );
    let plan = cpu.plan(Problem::of::<f32>((4, 5, 6)), &opts).unwrap();
    let reads_c = cpu.execute(
        &plan,
        Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()).beta(1.0),
    );
    assert!(
        matches!(reads_c, Err(Error::InvalidOption(_))),
        "{reads_c:?}"
    );
    let team_plan = team.plan(Problem::of::<f32>((4, 5, 6)), &opts).unwrap();
    let on_cpu = cpu.execute(&team_plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()));
    assert!(matches!(on_cpu, Err(Error::InvalidOption(_))), "{on_cpu:?}");
    let on_team = team.execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()));
    assert!(
        matches!(on_team, Err(Error::InvalidOption(_))),
        "{on_team:?}"
    );
    let other_team = Team::simulated(3).unwrap();
    let elsewhere = other_team.execute(&team_plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()));
    assert!(
        matches!(elsewhere, Err(Error::InvalidOption(_))),
        "{elsewhere:?}"
    );
    assert_eq!(c, Matrix::filled(4, 6, 7.0));
    // A plan that reads C runs β = 0 products too.
    let plan = cpu
        .plan(Problem::of::<f32>((4, 5, 6)).reading_c(true), &opts)
        .unwrap();
    cpu.execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()))
        .unwrap();
    assert_eq!(c, Matrix::filled(4, 6, 5.0));
}

/// `execute` runs the plan's choices: `auto` decided once (the plan's
/// algorithm is the report's), the schedule pinned, and only where the
/// operands hold ∞ does a fast plan run its classical base, which the
/// report names.
#[test]
fn the_report_names_the_plan_that_ran() {
    let cpu = Context::cpu();
    let n = 64;
    let opts = GemmOptions::new(Algorithm::Strassen).threshold(16);
    let plan = cpu.plan(Problem::of::<f64>((n, n, n)), &opts).unwrap();
    let fast = plan.fast.clone().expect("a recursion");
    assert!(fast.levels > 0);
    assert_eq!(plan.options.fast.variant, Some(fast.variant));
    let a = Matrix::<f64>::from_fn(n, n, |i, j| (i + j) as f64);
    let mut c = Matrix::filled(n, n, f64::NAN);
    let report = cpu
        .execute(&plan, Gemm::new(a.as_ref(), a.as_ref(), c.as_mut()))
        .unwrap();
    assert_eq!(report.plan, plan);
    let mut inf = a.clone();
    inf.set(3, 4, f64::INFINITY);
    let report = cpu
        .execute(&plan, Gemm::new(inf.as_ref(), a.as_ref(), c.as_mut()))
        .unwrap();
    assert_eq!(report.plan.algorithm, fast.base, "{}", report.describe());
    assert!(report.plan.fast.is_none());
    // The classical product's NaN pattern: row 3 only.
    assert!((0..n).all(|j| c.get(3, j).is_infinite() || c.get(3, j).is_nan()));
    assert!(c.get(2, 0).is_finite());
}

/// A plan pins what it chose for the recursion (schedule, crossover, most
/// levels, lazy sums) in the options it runs with: planning those options
/// again gives the same recursion, so executing the plan decides nothing
/// of it again, whatever the tuning or the free memory say by then.
#[test]
fn a_plan_pins_its_recursion() {
    let cpu = Context::cpu();
    for (algorithm, dtype, shape) in [
        (Algorithm::Strassen, DType::F64, (600, 520, 700)),
        (Algorithm::Winograd, DType::F32, (4100, 4097, 4099)),
        (Algorithm::Strassen, DType::I64, (256, 300, 290)),
    ] {
        let plan = cpu
            .plan(Problem::new(shape, dtype), &GemmOptions::new(algorithm))
            .unwrap();
        let fast = plan.fast.clone().expect("a recursion");
        let pinned = plan.options.fast;
        assert_eq!(pinned.variant, Some(fast.variant));
        assert_eq!(pinned.threshold, Some(fast.threshold));
        assert_eq!(pinned.start, Some(fast.start));
        assert_eq!(pinned.depth, Some(fast.max_levels));
        assert_eq!(pinned.lazy_sums, Some(fast.lazy_sums));
        let again = cpu.plan(plan.problem, &plan.options).unwrap();
        assert_eq!(again.fast, plan.fast, "{algorithm} {dtype}");
        assert_eq!(again.kernel, plan.kernel, "{algorithm} {dtype}");
    }
    let shape = (130, 70, 90);
    let (a, b) = (int_matrix(130, 70, 1), int_matrix(70, 90, 2));
    let opts = GemmOptions::new(Algorithm::Strassen).threshold(16);
    let mut c = Matrix::filled(shape.0, shape.2, i64::MIN);
    let report = product(&cpu, (1, a.as_ref(), b.as_ref(), 0), &mut c, &opts).unwrap();
    assert!(report.plan.fast.as_ref().is_some_and(|f| f.levels > 0));
    let mut expected = Matrix::filled(shape.0, shape.2, i64::MIN);
    let naive = GemmOptions::new(Algorithm::Naive);
    product(&cpu, (1, a.as_ref(), b.as_ref(), 0), &mut expected, &naive).unwrap();
    assert_eq!(c, expected);
}

/// A team's plan states its route and decomposition, and its report the
/// words it moved: the decomposition's for pieces; Strassen's levels
/// across where the blocks align.
#[test]
fn a_team_plan_states_its_route_and_its_report_the_words() {
    let team = Team::simulated(4).unwrap();
    let classical = team
        .plan(
            Problem::of::<i64>((40, 40, 40)),
            &GemmOptions::new(Algorithm::Naive),
        )
        .unwrap();
    let spread = classical.spread.clone().expect("spread over the team");
    assert_eq!(spread.route, Route::Pieces);
    assert_eq!(spread.processors.len(), 4);
    let a = int_matrix(40, 40, 4);
    let mut c = Matrix::filled(40, 40, i64::MIN);
    let report = team
        .execute(&classical, Gemm::new(a.as_ref(), a.as_ref(), c.as_mut()))
        .unwrap();
    let moved = report.communication.clone().expect("words moved");
    assert_eq!(moved.words_per_processor, spread.words_per_processor);
    assert!(report.timing.upload_ms.is_some() && report.timing.download_ms.is_some());
    assert!(
        report.describe().starts_with("distributed "),
        "{}",
        report.describe()
    );
    assert_eq!(c, fastmm::matmul(&a, &a).unwrap());

    let across = team
        .plan(
            Problem::of::<i64>((64, 64, 64)),
            &GemmOptions::new(Algorithm::Winograd).threshold(8),
        )
        .unwrap();
    let route = across.spread.clone().unwrap().route;
    assert!(
        matches!(route, Route::Across { levels, .. } if levels > 0),
        "{route}"
    );
    let a = int_matrix(64, 64, 5);
    let mut c = Matrix::filled(64, 64, 0);
    let report = team
        .execute(&across, Gemm::new(a.as_ref(), a.as_ref(), c.as_mut()))
        .unwrap();
    assert!(report.communication.as_ref().unwrap().levels_across > 0);
    assert!(
        report.describe().contains("(CAPS)"),
        "{}",
        report.describe()
    );
    assert_eq!(c, fastmm::matmul(&a, &a).unwrap());
}

/// The runtime type and the generic one plan alike.
#[test]
fn a_problem_of_a_runtime_type_plans_as_the_generic_one() {
    let cpu = Context::cpu();
    for dtype in DType::ALL {
        let opts = GemmOptions::new(Algorithm::Winograd);
        let plan = cpu
            .plan(Problem::new((300, 200, 100), dtype), &opts)
            .unwrap();
        assert_eq!(plan.problem.dtype, dtype);
        let typed = match dtype {
            DType::F32 => cpu.plan(Problem::of::<f32>((300, 200, 100)), &opts),
            DType::F64 => cpu.plan(Problem::of::<f64>((300, 200, 100)), &opts),
            DType::I32 => cpu.plan(Problem::of::<i32>((300, 200, 100)), &opts),
            DType::I64 => cpu.plan(Problem::of::<i64>((300, 200, 100)), &opts),
        }
        .unwrap();
        assert_eq!(plan, typed);
    }
}
