//! Every algorithm of a device over the shape matrix, each output
//! pre-filled with poison (NaN for floats), each result checked; on a GPU
//! also every memory kind, the host↔device round trips, `cuda-fast`'s
//! last-wave schedules and every kind of out-of-core schedule. This is how
//! GPU correctness is proven on a GPU machine (CI has none); `fastmm
//! selftest` prints it.

use crate::context::Context;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::{MatMut, MatRef, Matrix};
use crate::options::{
    Algorithm, DeviceKind, FastOptions, GemmOptions, GpuMemory, GpuOptions, Variant,
};
use crate::random::{random_matrix, seeded_rng, SeededRng};
use crate::team::{Role, Team};
use crate::verify::verify_with_growth;

/// (m, k, n): empty-adjacent, tiny, primes, rectangles, 32 ± 1 around the
/// GPU tile and the CPU microkernel edges, and deep narrow products.
pub(crate) const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (1, 7, 1),
    (2, 3, 5),
    (13, 1, 11),
    (31, 32, 33),
    (32, 32, 32),
    (33, 31, 65),
    (97, 89, 101),
    (64, 300, 17),
    (130, 65, 129),
    // Deep and narrow: cuda-fast splits k (k slices of 552 and of 1032).
    (33, 1100, 47),
    (130, 2049, 5),
    // cuda-fast's interior path (whole 128×256, 256×128 and 128×128
    // tiles, 16-byte rows) with a partial last k step, and with split-K.
    (264, 148, 264),
    (264, 2056, 264),
];

/// Threshold n₀ of `strassen`/`winograd` in the selftest: the shapes from
/// 31 up recurse one to three levels, odd sizes peeled.
const SELFTEST_STRASSEN_THRESHOLD: usize = 16;

/// One row of the report: what was checked, how many cases passed, and
/// each failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The algorithm, options and type (or the property) checked.
    pub what: String,
    /// Cases that passed.
    pub passed: usize,
    /// One line per case that failed.
    pub failures: Vec<String>,
}

impl Check {
    fn new(what: String) -> Check {
        Check {
            what,
            passed: 0,
            failures: Vec::new(),
        }
    }

    /// Whether every case passed.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Checks as they complete: kept, and each shown to a caller's callback
/// (a self-test on a GPU takes minutes).
struct Rows<'f> {
    rows: Vec<Check>,
    each: &'f mut dyn FnMut(&Check),
}

impl<'f> Rows<'f> {
    fn new(each: &'f mut dyn FnMut(&Check)) -> Rows<'f> {
        Rows {
            rows: Vec::new(),
            each,
        }
    }

    fn push(&mut self, row: Check) {
        (self.each)(&row);
        self.rows.push(row);
    }

    fn extend(&mut self, rows: impl IntoIterator<Item = Check>) {
        for row in rows {
            self.push(row);
        }
    }
}

/// Runs the self-test of `ctx`'s device for the algorithms in `only`
/// (every algorithm of the device when `None`), calling `each` with every
/// check as it completes. The checks that belong to no one algorithm
/// (round trips, schedules, out of core) run only in the whole self-test;
/// the hard inputs of `emulated` run when it is selected.
pub fn run_reporting(
    ctx: &Context,
    only: Option<&[Algorithm]>,
    each: &mut dyn FnMut(&Check),
) -> Result<Vec<Check>, Error> {
    let kind = ctx.device().kind();
    let selected = |a: Algorithm| only.is_none_or(|list| list.contains(&a));
    #[cfg(feature = "cuda")]
    let whole = only.is_none();
    let mut rows = Rows::new(each);
    let memories: Vec<Option<GpuMemory>> = match kind {
        DeviceKind::Cpu => vec![None],
        DeviceKind::Cuda => {
            #[cfg(feature = "cuda")]
            if whole {
                rows.extend(gpu::round_trips(ctx.gpu()?));
            }
            GpuMemory::ALL.iter().copied().map(Some).collect()
        }
    };
    for algorithm in Algorithm::all_on(kind).filter(|&a| selected(a)) {
        for (label, opts) in option_sets(algorithm, kind, &memories) {
            for &dtype in &DType::ALL {
                rows.extend(check_dtype(ctx, dtype, &label, &opts, SHAPES));
            }
        }
    }
    let emulated = Algorithm::Emulated.runs_on(kind) && selected(Algorithm::Emulated);
    if only.is_none() || emulated {
        rows.push(accuracy_checks(ctx));
    }
    if emulated {
        rows.push(emulation_checks::<f32>(ctx));
        rows.push(emulation_checks::<f64>(ctx));
    }
    #[cfg(feature = "cuda")]
    if kind == DeviceKind::Cuda && emulated {
        rows.push(gpu::int8_kernel_checks(ctx));
        rows.push(gpu::emulation_twin_checks::<f32>(ctx));
        rows.push(gpu::emulation_twin_checks::<f64>(ctx));
        rows.push(gpu::strided_batch_checks::<f32>(ctx));
        rows.push(gpu::strided_batch_checks::<f64>(ctx));
        rows.push(gpu::strided_auto_checks(ctx));
        rows.push(gpu::karatsuba_checks::<f32>(ctx));
        rows.push(gpu::karatsuba_checks::<f64>(ctx));
    }
    // Complex products of interleaved GPU-resident operands: cuBLAS's own,
    // and fastmm's real products of their split parts (the emulated one,
    // a SIMT kernel that copies transposed planes, and auto's choice).
    #[cfg(feature = "cuda")]
    if kind == DeviceKind::Cuda {
        let algorithms = [
            Algorithm::Cublas,
            Algorithm::Emulated,
            Algorithm::CudaFast,
            Algorithm::Auto,
        ];
        for algorithm in algorithms.into_iter().filter(|&a| selected(a)) {
            rows.push(gpu::resident_complex_checks::<f32>(ctx, algorithm));
            rows.push(gpu::resident_complex_checks::<f64>(ctx, algorithm));
        }
    }
    #[cfg(feature = "cuda")]
    if kind == DeviceKind::Cuda && whole {
        for &dtype in &DType::ALL {
            rows.push(crate::element::for_dtype!(dtype, T => gpu::resident_view_checks::<T>(ctx)));
        }
        rows.extend(gpu::schedule_checks(ctx)?);
        rows.extend(gpu::out_of_core_checks(ctx));
    }
    Ok(rows.rows)
}

/// Shapes of the accuracy matrix: a tile edge off by one at a short
/// depth, and a deep product whose native error and moduli differ.
const ACCURACY_SHAPES: [(usize, usize, usize); 2] = [(17, 256, 13), (64, 4096, 48)];

/// The accuracy matrix of the device ([`crate::audit`]): its products,
/// the emulated product and `auto` at every level, over every input
/// class, each judged by the level it gives beside the native product.
fn accuracy_checks(ctx: &Context) -> Check {
    use crate::options::{Accuracy, GpuPrecision};
    let kind = ctx.device().kind();
    let mut products: Vec<GemmOptions> = Vec::new();
    for algorithm in Algorithm::all_on(kind) {
        let opts = GemmOptions::new(algorithm);
        products.push(match algorithm {
            a if a.is_fast() => opts.threshold(SELFTEST_STRASSEN_THRESHOLD).depth(2),
            _ => opts,
        });
    }
    if kind == DeviceKind::Cuda {
        for (precision, level) in [
            (GpuPrecision::Tf32, Accuracy::Tf32),
            (GpuPrecision::Bf16, Accuracy::Bf16),
        ] {
            products.push(GemmOptions {
                gpu: GpuOptions {
                    precision: Some(precision),
                    ..GemmOptions::new(Algorithm::Cublas).accuracy(level).gpu
                },
                ..GemmOptions::new(Algorithm::Cublas).accuracy(level)
            });
        }
    }
    for level in Accuracy::LEVELS.into_iter().chain([Accuracy::Bits(20)]) {
        products.push(GemmOptions::new(Algorithm::Emulated).accuracy(level));
        products.push(GemmOptions::new(Algorithm::Auto).accuracy(level));
    }
    let mut row = Check::new(format!(
        "accuracy: {} products × {} input classes × {:?}, each within the level it gives",
        products.len(),
        crate::accuracy::InputClass::ALL.len(),
        ACCURACY_SHAPES
    ));
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for shape in ACCURACY_SHAPES {
            let rows = match dtype {
                DType::F32 => audit_rows::<f32>(ctx, shape, &products),
                DType::F64 => audit_rows::<f64>(ctx, shape, &products),
                _ => audit_rows::<i32>(ctx, shape, &products),
            };
            match rows {
                Ok(rows) => {
                    for r in rows {
                        match r.why {
                            None => row.passed += 1,
                            Some(why) => row.failures.push(format!(
                                "{} {:?} {} {} (gives {}, {}): {why}",
                                r.dtype, r.shape, r.class, r.label, r.given, r.precision
                            )),
                        }
                    }
                }
                Err(e) => row.failures.push(format!("{dtype} {shape:?}: {e}")),
            }
        }
    }
    row
}

/// The audit of the products T takes (cuBLAS and `bits:N` are for floats,
/// cuBLAS's tensor-core modes for f32).
fn audit_rows<T: Element>(
    ctx: &Context,
    shape: (usize, usize, usize),
    products: &[GemmOptions],
) -> Result<Vec<crate::audit::Row>, Error> {
    let runs: Vec<GemmOptions> = products
        .iter()
        .copied()
        .filter(|o| o.algorithm.supports(T::DTYPE))
        .filter(|o| o.gpu.precision.is_none() || T::DTYPE == DType::F32)
        .filter(|o| {
            !T::DTYPE.is_integer() || !matches!(o.accuracy, crate::options::Accuracy::Bits(_))
        })
        .collect();
    crate::audit::audit::<T>(
        ctx,
        shape,
        &crate::accuracy::InputClass::ALL,
        &runs,
        11,
        usize::MAX,
    )
}

/// Shapes a team checks beside [`SHAPES`]: empty ones (the boundary's),
/// ones large enough that every grid of up to 8 processors cuts each
/// dimension, and ones whose Strassen levels run across 2, 3 or 4
/// processors (m and k multiples of 12·2²; a peeled column or a shorter
/// m makes leaves gather blocks of B spanning several chunks per
/// processor).
pub(crate) const TEAM_SHAPES: &[(usize, usize, usize)] = &[
    (0, 3, 4),
    (3, 0, 4),
    (4, 3, 0),
    (257, 129, 300),
    (300, 500, 250),
    (96, 48, 50),
    (48, 96, 40),
];

/// The self-test of a [`Team`]: every algorithm of its devices' kind over
/// the shapes of one device and of a team in every type, each product distributed
/// by the planner and checked as on one device (outputs poisoned, the
/// error bound or exact equality, α and β), and the words each product
/// moved equal to its plan's.
///
/// `only` selects algorithms (all when `None`); the distributed operands'
/// check runs with the whole self-test only. `each` sees every check as
/// it completes.
pub fn run_team_reporting(
    team: &Team,
    only: Option<&[Algorithm]>,
    each: &mut dyn FnMut(&Check),
) -> Result<Vec<Check>, Error> {
    run_team_over(team, only, &team_shapes(), each)
}

/// [`run_team_reporting`] over `shapes`.
pub(crate) fn run_team_over(
    team: &Team,
    only: Option<&[Algorithm]>,
    shapes: &[(usize, usize, usize)],
    each: &mut dyn FnMut(&Check),
) -> Result<Vec<Check>, Error> {
    let kind = team.devices()[0].kind();
    let mut rows = Rows::new(each);
    let selected = |a: Algorithm| only.is_none_or(|list| list.contains(&a));
    for algorithm in Algorithm::all_on(kind).filter(|&a| selected(a)) {
        let opts = GemmOptions {
            fast: FastOptions {
                threshold: Some(SELFTEST_STRASSEN_THRESHOLD),
                ..GemmOptions::new(algorithm).fast
            },
            ..GemmOptions::new(algorithm)
        };
        for &dtype in &DType::ALL {
            let row = match dtype {
                DType::F32 => check_team::<f32>(team, &opts, shapes),
                DType::F64 => check_team::<f64>(team, &opts, shapes),
                DType::I32 => check_team::<i32>(team, &opts, shapes),
                DType::I64 => check_team::<i64>(team, &opts, shapes),
            };
            rows.extend(row);
        }
    }
    if only.is_some() {
        return Ok(rows.rows);
    }
    rows.push(check_team_words(team, shapes));
    Ok(rows.rows)
}

/// The shapes of the team self-test.
pub(crate) fn team_shapes() -> Vec<(usize, usize, usize)> {
    SHAPES.iter().chain(TEAM_SHAPES).copied().collect()
}

/// The distributed operands' check: every shape's exact integer product
/// through the plan's layout, the words moved equal to the plan's.
pub(crate) fn check_team_words(team: &Team, shapes: &[(usize, usize, usize)]) -> Check {
    let kind = team.devices()[0].kind();
    let mut words = Check::new(format!(
        "distributed operands: exact, words = the plan's, on {} processors",
        team.size()
    ));
    let opts = GemmOptions::new(Algorithm::all_on(kind).next().unwrap_or_default());
    for &(m, k, n) in shapes.iter().filter(|&&(m, k, n)| m * k * n > 0) {
        let a = small_int_matrix::<i32>(m, k, 1);
        let b = small_int_matrix::<i32>(k, n, 2);
        // Operands distributed in the plan's layout (a GPU team's products
        // of host matrices stream instead, moving no words between GPUs).
        let outcome = team.decompose::<i32>((m, k, n)).and_then(|plan| {
            let da = team.distribute(&plan, Role::A, a.as_ref())?;
            let db = team.distribute(&plan, Role::B, b.as_ref())?;
            let (dc, report) = team.multiply(&da, &db, &opts)?;
            let exact = team.collect(&dc)? == crate::context::matmul(&a, &b)?;
            Ok((report, plan, exact))
        });
        match outcome {
            Ok((_, _, false)) => words
                .failures
                .push(format!("{m}×{k}×{n}: the distributed product differs")),
            Ok((report, plan, true))
                if report.moved.words_per_processor == plan.words_per_processor =>
            {
                words.passed += 1
            }
            Ok((report, plan, _)) => words.failures.push(format!(
                "{m}×{k}×{n}: {} words, the plan {}",
                report.moved.words_per_processor, plan.words_per_processor
            )),
            Err(e) => words.failures.push(format!("{m}×{k}×{n}: {e}")),
        }
    }
    words
}

fn check_team<T: Element>(
    team: &Team,
    opts: &GemmOptions,
    shapes: &[(usize, usize, usize)],
) -> Option<Check> {
    let ctx = team.context(0);
    ctx.plan(crate::gemm::Problem::of::<T>((1, 1, 1)), opts)
        .ok()?;
    let mut row = Check::new(format!(
        "{} {} on {} devices",
        opts.algorithm,
        T::DTYPE,
        team.size()
    ));
    let mut rng = seeded_rng(13);
    for &shape in shapes {
        // Each device's product is at most the whole one: its plan's
        // allowance bounds theirs.
        let growth = ctx
            .plan(crate::gemm::Problem::of::<T>(shape), opts)
            .map_or(1.0, |plan| plan.error_growth);
        check_shape::<T>(
            &mut row,
            shape,
            "",
            growth,
            &mut rng,
            |alpha, a, b, beta, c| team.gemm(alpha, a, b, beta, c, opts).map(|_| ()),
        );
    }
    Some(row)
}

fn check_dtype(
    ctx: &Context,
    dtype: DType,
    label: &str,
    opts: &GemmOptions,
    shapes: &[(usize, usize, usize)],
) -> Option<Check> {
    match dtype {
        DType::F32 => check_algorithm::<f32>(ctx, label, opts, shapes),
        DType::F64 => check_algorithm::<f64>(ctx, label, opts, shapes),
        DType::I32 => check_algorithm::<i32>(ctx, label, opts, shapes),
        DType::I64 => check_algorithm::<i64>(ctx, label, opts, shapes),
    }
}

/// Small integers: every product and sum is exact in f32 and f64 too, so
/// the α/β check compares exactly against the CPU naive product.
fn small_int_matrix<T: Element>(rows: usize, cols: usize, salt: usize) -> Matrix<T> {
    Matrix::from_fn(rows, cols, |i, j| {
        T::from_i64(((i * 7 + j * 3 + salt) % 9) as i64 - 4)
    })
}

/// The option sets each algorithm is checked under, with their labels:
/// every memory kind, pinned staging, the precision modes and the kernel
/// families for the classical GPU algorithms; every memory schedule (and
/// on the GPU a second base) for the fast ones.
fn option_sets(
    algorithm: Algorithm,
    kind: DeviceKind,
    memories: &[Option<GpuMemory>],
) -> Vec<(String, GemmOptions)> {
    let plain = GemmOptions {
        fast: FastOptions {
            threshold: Some(SELFTEST_STRASSEN_THRESHOLD),
            ..GemmOptions::new(algorithm).fast
        },
        ..GemmOptions::new(algorithm)
    };
    if algorithm.is_fast() {
        let mut sets: Vec<(String, GemmOptions)> = [
            Variant::Temporaries,
            Variant::Frugal,
            Variant::Batched,
            Variant::Fused,
        ]
        .into_iter()
        .map(|variant| (format!("{algorithm} {variant}"), plain.variant(variant)))
        .collect();
        if kind == DeviceKind::Cuda {
            sets.push((
                format!("{algorithm} frugal base cuda-naive"),
                plain.variant(Variant::Frugal).base(Algorithm::CudaNaive),
            ));
        }
        return sets;
    }
    let sets: Vec<(String, GemmOptions)> = memories
        .iter()
        .map(|&memory| {
            let label = match memory {
                Some(memory) => format!("{algorithm} {memory}"),
                None => algorithm.to_string(),
            };
            (
                label,
                GemmOptions {
                    gpu: GpuOptions {
                        memory,
                        ..plain.gpu
                    },
                    ..plain
                },
            )
        })
        .collect();
    #[cfg(feature = "cuda")]
    if kind == DeviceKind::Cuda {
        return [sets, gpu::classical_option_sets(algorithm, plain)].concat();
    }
    sets
}

/// One shape of a row: C ← A·B with β = 0 over poison (C must be written
/// everywhere and never read), verified within `growth` of the classical
/// bound; then C ← 2·A·B − 3·C on small integers, compared bit for bit
/// with the naive product; for floats, inputs holding ∞ and NaN, whose
/// product must have NaN and ∞ exactly where the naive product has them.
fn check_shape<T: Element>(
    row: &mut Check,
    (m, k, n): (usize, usize, usize),
    what: &str,
    growth: f64,
    rng: &mut SeededRng,
    multiply: impl Fn(T, MatRef<'_, T>, MatRef<'_, T>, T, MatMut<'_, T>) -> Result<(), Error>,
) {
    let label = format!(
        "{m}×{k}×{n}{}{what}",
        if what.is_empty() { "" } else { " " }
    );
    let a: Matrix<T> = random_matrix(m, k, rng);
    let b: Matrix<T> = random_matrix(k, n, rng);
    let mut c = Matrix::filled(m, n, T::poison());
    let outcome = multiply(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut())
        .and_then(|()| verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth));
    match outcome {
        Ok(verdict) if verdict.ok => row.passed += 1,
        Ok(verdict) => row.failures.push(format!(
            "{label} β=0: relative error {:.2e} ({:.2}× its bound)",
            verdict.rel_error, verdict.bound_ratio
        )),
        Err(e) => row.failures.push(format!("{label} β=0: {e}")),
    }
    let a: Matrix<T> = small_int_matrix(m, k, 1);
    let b: Matrix<T> = small_int_matrix(k, n, 2);
    let c0: Matrix<T> = small_int_matrix(m, n, 3);
    let (alpha, beta) = (T::from_i64(2), T::from_i64(-3));
    let mut expected = c0.clone();
    let mut c = c0;
    let outcome = Context::cpu()
        .gemm(
            alpha,
            a.as_ref(),
            b.as_ref(),
            beta,
            expected.as_mut(),
            &GemmOptions::new(Algorithm::Naive),
        )
        .and_then(|()| multiply(alpha, a.as_ref(), b.as_ref(), beta, c.as_mut()));
    match outcome {
        Ok(()) if c == expected => row.passed += 1,
        Ok(()) => row
            .failures
            .push(format!("{label} α=2 β=-3: differs from the naive product")),
        Err(e) => row.failures.push(format!("{label} α=2 β=-3: {e}")),
    }
    if T::DTYPE.is_integer() || m * k * n == 0 {
        return;
    }
    let mut a: Matrix<T> = random_matrix(m, k, rng);
    let mut b: Matrix<T> = random_matrix(k, n, rng);
    a.set(m / 2, 0, T::from_f64(f64::INFINITY));
    b.set(k - 1, n - 1, T::from_f64(f64::NAN));
    let mut c = Matrix::filled(m, n, T::poison());
    let outcome = Context::cpu()
        .matmul(a.as_ref(), b.as_ref(), &GemmOptions::new(Algorithm::Naive))
        .and_then(|naive| {
            multiply(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut())?;
            let verdict = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)?;
            Ok((naive, verdict))
        });
    let class = |x: T| {
        let x = x.to_f64();
        (x.is_nan(), x.is_infinite().then_some(x > 0.0))
    };
    match outcome {
        Ok((naive, verdict))
            if verdict.ok
                && naive
                    .as_slice()
                    .iter()
                    .zip(c.as_slice())
                    .all(|(&want, &got)| class(want) == class(got)) =>
        {
            row.passed += 1
        }
        Ok(_) => row.failures.push(format!(
            "{label} NaN/∞ inputs: NaN or ∞ where the naive product has none, or the reverse"
        )),
        Err(e) => row.failures.push(format!("{label} NaN/∞ inputs: {e}")),
    }
}

/// Entry (i, j) of A (true) or B of a hard input.
type EntryFn = dyn Fn(usize, usize, bool, &mut SeededRng) -> f64;

/// Shapes of the emulated algorithm's hard inputs: odd, prime, and deep
/// enough for thousands of terms per sum.
const EMULATION_SHAPES: &[(usize, usize, usize)] =
    &[(1, 1, 1), (33, 64, 17), (97, 89, 101), (130, 2049, 129)];

/// The emulated algorithm on inputs that defeat a plain row/column
/// scaling, each verified within the classical bound and its route
/// reported: entries from 1e−30 to 1e30 within every row and column,
/// zero rows and columns, subnormals, a row's large entries meeting a
/// column's small ones, and one NaN and one ∞.
fn emulation_checks<T: Element>(ctx: &Context) -> Check {
    let mut row = Check::new(format!("emulated hard inputs {}", T::DTYPE));
    let mut rng = seeded_rng(41);
    let opts = GemmOptions::new(Algorithm::Emulated);
    // f32's range: subnormals from 1e−40, the wide entries to 1e±30.
    let tiny = if T::DTYPE == DType::F32 {
        1e-40
    } else {
        1e-310
    };
    for &(m, k, n) in EMULATION_SHAPES {
        let cases: [(&str, Box<EntryFn>); 5] = [
            (
                "1e±30",
                Box::new(|_, _, _, rng: &mut SeededRng| {
                    let e: f64 = rand::Rng::random_range(rng, -30.0..30.0);
                    let sign = if rand::Rng::random_bool(rng, 0.5) {
                        1.0
                    } else {
                        -1.0
                    };
                    sign * 10f64.powf(e)
                }),
            ),
            (
                "zero rows and columns",
                Box::new(|i, j, is_a, rng: &mut SeededRng| {
                    let zero = if is_a { i % 3 == 1 } else { j % 4 == 2 };
                    if zero {
                        0.0
                    } else {
                        rand::Rng::random_range(rng, -1.0..1.0)
                    }
                }),
            ),
            (
                "subnormals",
                Box::new(move |i, _, is_a, rng: &mut SeededRng| {
                    let x: f64 = rand::Rng::random_range(rng, -1.0..1.0);
                    if is_a && i % 2 == 0 {
                        x * tiny
                    } else {
                        x
                    }
                }),
            ),
            (
                "large meets small",
                Box::new(|i, j, is_a, rng: &mut SeededRng| {
                    let x: f64 = rand::Rng::random_range(rng, 0.5..1.0);
                    // A's first columns are 1e20 times its others; B's
                    // first rows 1e−20 times its others.
                    match (is_a, if is_a { j } else { i } < 4) {
                        (true, true) => x * 1e20,
                        (false, true) => x * 1e-20,
                        _ => x,
                    }
                }),
            ),
            (
                "NaN and ∞",
                Box::new(|_, _, _, rng: &mut SeededRng| rand::Rng::random_range(rng, -1.0..1.0)),
            ),
        ];
        for (name, entry) in cases.iter() {
            let label = format!("{m}×{k}×{n} {name}");
            let mut a = Matrix::<T>::from_fn(m, k, |i, j| T::from_f64(entry(i, j, true, &mut rng)));
            let mut b =
                Matrix::<T>::from_fn(k, n, |i, j| T::from_f64(entry(i, j, false, &mut rng)));
            if *name == "NaN and ∞" {
                a.set(m / 2, k / 2, T::from_f64(f64::NAN));
                b.set(k - 1, 0, T::from_f64(f64::INFINITY));
            }
            let mut c = Matrix::filled(m, n, T::poison());
            let outcome = ctx
                .gemm_timed(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &opts)
                .and_then(|timing| {
                    let verdict = crate::verify::verify(a.as_ref(), b.as_ref(), c.as_ref())?;
                    Ok((timing, verdict))
                });
            match outcome {
                Ok((timing, verdict)) if verdict.ok && timing.emulation.is_some() => {
                    row.passed += 1
                }
                Ok((timing, verdict)) => row.failures.push(format!(
                    "{label}: {:.2}× its bound, route {}",
                    verdict.bound_ratio,
                    timing
                        .emulation
                        .map_or("not reported".into(), |t| t.label())
                )),
                Err(e) => row.failures.push(format!("{label}: {e}")),
            }
        }
    }
    row
}

/// Every shape of `shapes` with `opts` in `ctx`; `None` for a type the
/// options do not run (their plan says so).
fn check_algorithm<T: Element>(
    ctx: &Context,
    label: &str,
    opts: &GemmOptions,
    shapes: &[(usize, usize, usize)],
) -> Option<Check> {
    // A type or option the device does not run is not a failure: the
    // plan refuses it with a typed error, which the tests check.
    ctx.plan(crate::gemm::Problem::of::<T>((1, 1, 1)), opts)
        .ok()?;
    let mut row = Check::new(format!("{label} {}", T::DTYPE));
    let mut rng = seeded_rng(11);
    for &shape in shapes {
        // Fast algorithms may exceed the classical float bound by their
        // per-level growth factor, reduced-precision modes by the ratio of
        // unit roundoffs: the plan's allowance.
        match ctx.plan(crate::gemm::Problem::of::<T>(shape), opts) {
            Ok(plan) => check_shape::<T>(
                &mut row,
                shape,
                "",
                plan.error_growth,
                &mut rng,
                |alpha, a, b, beta, c| ctx.gemm(alpha, a, b, beta, c, opts),
            ),
            Err(e) => row
                .failures
                .push(format!("{}×{}×{}: {e}", shape.0, shape.1, shape.2)),
        }
    }
    Some(row)
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use crate::complex::{ComplexForm, ComplexMatrix};
    use crate::cuda::kernels::gemm::fast::{contiguous_rows_aligned, simt_micro_tiles, FastConfig};
    use crate::cuda::kernels::gemm::schedule::FastSchedule;
    use crate::cuda::products::hosted::Bands;
    use crate::cuda::products::out_of_core::plan::Slots;
    use crate::cuda::products::out_of_core::{
        multiply_in_bands, multiply_planned, Resident, Tiling,
    };
    use crate::cuda::runtime::device::Gpu;
    use crate::cuda::runtime::memory::round_trip;
    use crate::matrix::{GpuMatrix, GpuProduct};
    use crate::options::{CudaKernel, GpuPrecision};

    /// The extra option sets of a classical GPU algorithm: pinned staging,
    /// cuBLAS's precision modes, and `cuda-fast`'s kernel families forced
    /// (mma runs f64 only) with the SIMT kernel's other micro-tiles.
    pub(super) fn classical_option_sets(
        algorithm: Algorithm,
        plain: GemmOptions,
    ) -> Vec<(String, GemmOptions)> {
        let mut sets = vec![(
            format!("{algorithm} device pinned"),
            GemmOptions {
                gpu: GpuOptions {
                    pinned: true,
                    ..plain.gpu
                },
                ..plain
            },
        )];
        if algorithm == Algorithm::Cublas {
            sets.extend(
                GpuPrecision::ALL
                    .iter()
                    .filter(|&&p| p != GpuPrecision::Fp32)
                    .map(|&precision| {
                        (
                            format!("{algorithm} {precision}"),
                            GemmOptions {
                                gpu: GpuOptions {
                                    precision: Some(precision),
                                    ..plain.gpu
                                },
                                ..plain
                            },
                        )
                    }),
            );
        }
        if algorithm == Algorithm::CudaFast {
            for (family, tile) in [
                (CudaKernel::Simt, None),
                (CudaKernel::Simt, Some(8)),
                (CudaKernel::Simt, Some(16)),
                (CudaKernel::Mma, None),
            ] {
                let label = match tile {
                    Some(tm) => format!("{algorithm} {family} tile {tm}"),
                    None => format!("{algorithm} {family}"),
                };
                sets.push((
                    label,
                    GemmOptions {
                        tile,
                        gpu: GpuOptions {
                            kernel: Some(family),
                            ..plain.gpu
                        },
                        ..plain
                    },
                ));
            }
        }
        sets
    }

    pub(super) fn round_trips(gpu: &Gpu) -> Vec<Check> {
        let mut rows = Vec::new();
        for &memory in GpuMemory::ALL {
            for pinned in [false, true] {
                let host = if pinned { "pinned" } else { "pageable" };
                let mut row = Check::new(format!("round trip {host} host↔{memory}"));
                let mut rng = seeded_rng(7);
                for &(m, _, n) in SHAPES {
                    let a: Matrix<f64> = random_matrix(m, n, &mut rng);
                    match round_trip(gpu, memory, a.as_ref(), pinned) {
                        Ok(back) if back == a => row.passed += 1,
                        Ok(_) => row.failures.push(format!("{m}×{n}: data changed")),
                        Err(e) => row.failures.push(format!("{m}×{n}: {e}")),
                    }
                    // A transposed (strided) view arrives in row-major order too.
                    match round_trip(gpu, memory, a.as_ref().t(), pinned) {
                        Ok(back) if back == Matrix::from_view(a.as_ref().t()) => row.passed += 1,
                        Ok(_) => row
                            .failures
                            .push(format!("{n}×{m} transposed: data changed")),
                        Err(e) => row.failures.push(format!("{n}×{m} transposed: {e}")),
                    }
                }
                rows.push(row);
            }
        }
        rows
    }

    /// A matrix uploaded to device memory: row-major, or, when `transposed`,
    /// its transpose uploaded row-major and read back as a transposed view
    /// (column-major), as torch's `w.mT` is.
    fn resident<T: Element>(
        gpu: &Gpu,
        m: &Matrix<T>,
        transposed: bool,
    ) -> Result<(crate::cuda::runtime::memory::DeviceMatrix<T>, GpuMatrix), Error> {
        use crate::cuda::runtime::memory::{DeviceMatrix, HostBuffer};
        let view = match transposed {
            false => m.as_ref(),
            true => m.as_ref().t(),
        };
        let staged = HostBuffer::stage(gpu, view, false)?;
        let memory = DeviceMatrix::upload(gpu, GpuMemory::Device, view.shape(), Some(&staged))?;
        let matrix = GpuMatrix::row_major(memory.ptr, view.shape(), memory.ld);
        Ok((memory, if transposed { matrix.t() } else { matrix }))
    }

    /// C of a resident product, read back (transposed back when `c` was
    /// uploaded as a transposed view).
    fn read_back<T: Element>(
        gpu: &Gpu,
        memory: &crate::cuda::runtime::memory::DeviceMatrix<T>,
        transposed: bool,
    ) -> Result<Matrix<T>, Error> {
        use crate::cuda::runtime::memory::HostBuffer;
        let mut host = HostBuffer::new(gpu, memory.rows * memory.cols, false)?;
        memory.download(gpu, &mut host)?;
        let mut back = Matrix::filled(memory.rows, memory.cols, T::poison());
        host.unstage(back.as_mut())?;
        Ok(match transposed {
            false => back,
            true => Matrix::from_view(back.as_ref().t()),
        })
    }

    /// `count` products C_i = A_i·B of GPU-resident operands, each given
    /// row-major or as a transposed view by `(ta, tb, tc)`, B shared by
    /// the batch (a broadcast operand), C pre-filled with the poison value.
    fn resident_batch<T: Element>(
        ctx: &Context,
        a: &[Matrix<T>],
        b: &Matrix<T>,
        (ta, tb, tc): (bool, bool, bool),
        opts: &GemmOptions,
    ) -> Result<Vec<Matrix<T>>, Error> {
        let gpu = ctx.gpu()?;
        let (m, n) = (a[0].rows(), b.cols());
        let (_b_memory, b_matrix) = resident(gpu, b, tb)?;
        let mut held = Vec::new();
        let mut products = Vec::new();
        for a in a {
            let (a_memory, a_matrix) = resident(gpu, a, ta)?;
            let (c_memory, c_matrix) = resident(gpu, &Matrix::filled(m, n, T::poison()), tc)?;
            products.push(GpuProduct {
                a: a_matrix,
                b: b_matrix,
                c: c_matrix,
            });
            held.push((a_memory, c_memory));
        }
        // SAFETY: every matrix is this GPU's memory of T, allocated above
        // and alive until the reads below; the outputs are separate
        // allocations, apart from each other and from A and B.
        unsafe {
            ctx.gemm_gpu_batch(
                T::ONE,
                &products,
                T::ZERO,
                opts,
                crate::options::GpuCompletion::Complete,
            )
        }?;
        held.iter()
            .map(|(_, c_memory)| read_back(gpu, c_memory, tc))
            .collect()
    }

    /// Products of GPU-resident operands given as transposed views (A, B,
    /// both, a transposed C, all three), in batches that share B, against
    /// the same batch of row-major operands: bit for bit where the views
    /// are copied row-major first (the tile kernels, the fast algorithms)
    /// or read by the INT8 pipelines (the same planes); cuBLAS, whose
    /// transposed kernels may sum in another order, the emulated product,
    /// which may route to it, and a fast algorithm writing a transposed C
    /// (its recursion splits Cᵀ = Bᵀ·Aᵀ), bit for bit or within the plan's
    /// bound.
    /// Shapes of one, a tile edge off by one, primes, rectangles.
    pub(super) fn resident_view_checks<T: Element>(ctx: &Context) -> Check {
        let mut row = Check::new(format!("GPU-resident transposed views {}", T::DTYPE));
        let mut rng = seeded_rng(47);
        let algorithms = [
            Algorithm::Cublas,
            Algorithm::Emulated,
            Algorithm::CudaFast,
            Algorithm::CudaTiled,
            Algorithm::Strassen,
        ];
        let layouts = [
            (true, false, false),
            (false, true, false),
            (true, true, false),
            (false, false, true),
            (true, true, true),
        ];
        for algorithm in algorithms {
            if algorithm == Algorithm::Cublas && T::DTYPE.is_integer() {
                continue;
            }
            let opts = GemmOptions {
                fast: crate::options::FastOptions {
                    threshold: Some(16),
                    ..GemmOptions::new(algorithm).fast
                },
                ..GemmOptions::new(algorithm)
            };
            for &(m, k, n) in &[
                (1, 1, 1),
                (1, 9, 7),
                (33, 17, 65),
                (65, 300, 31),
                (257, 129, 130),
            ] {
                let a: Vec<Matrix<T>> = (0..3).map(|_| random_matrix(m, k, &mut rng)).collect();
                let b: Matrix<T> = random_matrix(k, n, &mut rng);
                let want = match resident_batch(ctx, &a, &b, (false, false, false), &opts) {
                    Ok(want) => want,
                    Err(e) => {
                        row.failures
                            .push(format!("{algorithm} {m}×{k}×{n} row-major: {e}"));
                        continue;
                    }
                };
                for layout in layouts {
                    let label = format!("{algorithm} {m}×{k}×{n} transposed {layout:?}");
                    let got = match resident_batch(ctx, &a, &b, layout, &opts) {
                        Ok(got) => got,
                        Err(e) => {
                            row.failures.push(format!("{label}: {e}"));
                            continue;
                        }
                    };
                    let bitwise = got.iter().zip(&want).all(|(g, w)| {
                        g.as_ref()
                            .iter()
                            .zip(w.as_ref().iter())
                            .all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits())
                    });
                    // A transposed C is the product Cᵀ = Bᵀ·Aᵀ, whose
                    // Strassen recursion splits other blocks.
                    let reordered = matches!(algorithm, Algorithm::Cublas | Algorithm::Emulated)
                        || (layout.2 && crate::strassen::Scheme::of(algorithm).is_some());
                    let growth = ctx
                        .plan(crate::gemm::Problem::of::<T>((m, k, n)), &opts)
                        .map_or(1.0, |plan| plan.error_growth);
                    let bounded = || {
                        got.iter().zip(&a).all(|(c, a)| {
                            verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)
                                .is_ok_and(|v| v.ok)
                        })
                    };
                    match bitwise || (reordered && bounded()) {
                        true => row.passed += 1,
                        false => row.failures.push(format!(
                            "{label}: differs from the row-major product{}",
                            if reordered { " beyond the bound" } else { "" }
                        )),
                    }
                }
            }
        }
        row
    }

    /// A complex matrix in device memory, interleaved: row-major, or, when
    /// `transposed`, its transpose uploaded row-major and read as a
    /// transposed view; the matrix counts complex elements.
    fn resident_complex<T: Element>(
        gpu: &Gpu,
        x: &ComplexMatrix<T>,
        transposed: bool,
    ) -> Result<(crate::cuda::runtime::memory::DeviceMatrix<T>, GpuMatrix), Error> {
        let (rows, cols) = x.shape();
        let stored = match transposed {
            false => Matrix::from_fn(rows, 2 * cols, |i, j| part(x.get(i, j / 2), j)),
            true => Matrix::from_fn(cols, 2 * rows, |i, j| part(x.get(j / 2, i), j)),
        };
        let (memory, real) = resident(gpu, &stored, false)?;
        if !real.ld.is_multiple_of(2) {
            return Err(Error::Cuda(format!(
                "an odd pitch of {} elements for complex rows",
                real.ld
            )));
        }
        let matrix = GpuMatrix {
            ptr: real.ptr,
            rows,
            cols,
            ld: real.ld / 2,
            transposed,
        };
        Ok((memory, matrix))
    }

    /// The real part of an interleaved pair at even columns, the imaginary
    /// at odd ones.
    fn part<T: Element>((re, im): (T, T), column: usize) -> T {
        if column.is_multiple_of(2) {
            re
        } else {
            im
        }
    }

    /// A complex C of `shape` read back from interleaved device memory.
    fn read_back_complex<T: Element>(
        gpu: &Gpu,
        memory: &crate::cuda::runtime::memory::DeviceMatrix<T>,
        (rows, cols): (usize, usize),
        transposed: bool,
    ) -> Result<ComplexMatrix<T>, Error> {
        let stored = read_back(gpu, memory, false)?;
        let at = |i: usize, j: usize, imaginary: usize| match transposed {
            false => stored.get(i, 2 * j + imaginary),
            true => stored.get(j, 2 * i + imaginary),
        };
        ComplexMatrix::new(
            Matrix::from_fn(rows, cols, |i, j| at(i, j, 0)),
            Matrix::from_fn(rows, cols, |i, j| at(i, j, 1)),
        )
    }

    /// Complex products of GPU-resident interleaved operands with
    /// `algorithm` (`cublas`: cgemm/zgemm, cgemm3m/zgemm3m; fastmm's: real
    /// products of the parts split on the GPU): Gaussian integers exact in both
    /// forms and floats within each form's bound, row-major and
    /// transposed views of A, B and C, batches sharing B, outputs
    /// pre-filled with the poison value; shapes of one, primes, rectangles.
    pub(super) fn resident_complex_checks<T: Element>(
        ctx: &Context,
        algorithm: Algorithm,
    ) -> Check {
        let mut row = Check::new(format!(
            "GPU-resident complex ({}) {}",
            algorithm.name(),
            T::DTYPE
        ));
        let mut rng = seeded_rng(59);
        let layouts = [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (false, false, true),
            (true, true, true),
        ];
        let shapes = [(1, 1, 1), (1, 9, 7), (33, 17, 65), (257, 129, 130)];
        for form in [ComplexForm::Classical, ComplexForm::Gauss] {
            for &(m, k, n) in &shapes {
                for integers in [true, false] {
                    let mut draw = |rows, cols| -> Result<ComplexMatrix<T>, Error> {
                        let part = |rng: &mut SeededRng| match integers {
                            true => Matrix::from_fn(rows, cols, |_, _| {
                                T::from_f64(rand::Rng::random_range(rng, -8i32..=8) as f64)
                            }),
                            false => random_matrix::<T>(rows, cols, rng),
                        };
                        ComplexMatrix::new(part(&mut rng), part(&mut rng))
                    };
                    let drawn = (0..2).map(|_| draw(m, k)).collect::<Result<Vec<_>, _>>();
                    let (a, b) = match drawn.and_then(|a| Ok((a, draw(k, n)?))) {
                        Ok(ab) => ab,
                        Err(e) => {
                            row.failures.push(format!("{m}×{k}×{n}: {e}"));
                            continue;
                        }
                    };
                    for layout in layouts {
                        let label = format!(
                            "{} {m}×{k}×{n} {} layout {layout:?}",
                            form.name(),
                            if integers { "integers" } else { "floats" }
                        );
                        match complex_batch(ctx, &a, &b, layout, (form, algorithm)) {
                            Err(e) => row.failures.push(format!("{label}: {e}")),
                            Ok(got) => {
                                let checked = got.iter().zip(&a).try_for_each(|(c, a)| {
                                    let want = crate::complex::ComplexMatrix::new(
                                        exact_product(a.re(), b.re(), a.im(), b.im(), true),
                                        exact_product(a.re(), b.im(), a.im(), b.re(), false),
                                    )?;
                                    let ok = match integers {
                                        true => c == &want,
                                        false => crate::complex::verify(a, &b, c, 1.0, form)?.ok,
                                    };
                                    match ok {
                                        true => Ok(()),
                                        false => Err(Error::InvalidOption(
                                            "differs from the product beyond its bound".into(),
                                        )),
                                    }
                                });
                                match checked {
                                    Ok(()) => row.passed += 1,
                                    Err(e) => row.failures.push(format!("{label}: {e}")),
                                }
                            }
                        }
                    }
                }
            }
        }
        row
    }

    /// x·y ∓ z·w in f64 (exact for the small integers the checks draw),
    /// rounded to T: the real part (−) or the imaginary (+) of a complex
    /// product.
    fn exact_product<T: Element>(
        x: &Matrix<T>,
        y: &Matrix<T>,
        z: &Matrix<T>,
        w: &Matrix<T>,
        minus: bool,
    ) -> Matrix<T> {
        let dot = |p: &Matrix<T>, q: &Matrix<T>, i: usize, j: usize| -> f64 {
            (0..p.cols())
                .map(|l| p.get(i, l).to_f64() * q.get(l, j).to_f64())
                .sum()
        };
        Matrix::from_fn(x.rows(), y.cols(), |i, j| {
            let second = dot(z, w, i, j);
            T::from_f64(dot(x, y, i, j) + if minus { -second } else { second })
        })
    }

    /// C_i = A_i·B for interleaved complex operands on the GPU, B shared,
    /// each operand row-major or a transposed view by `(ta, tb, tc)`, in
    /// `form` with `algorithm`.
    fn complex_batch<T: Element>(
        ctx: &Context,
        a: &[ComplexMatrix<T>],
        b: &ComplexMatrix<T>,
        (ta, tb, tc): (bool, bool, bool),
        (form, algorithm): (ComplexForm, Algorithm),
    ) -> Result<Vec<ComplexMatrix<T>>, Error> {
        let gpu = ctx.gpu()?;
        let ((m, _), n) = (a[0].shape(), b.shape().1);
        let poison = ComplexMatrix::new(
            Matrix::filled(m, n, T::poison()),
            Matrix::filled(m, n, T::poison()),
        )?;
        let (_b_memory, b_matrix) = resident_complex(gpu, b, tb)?;
        let mut held = Vec::new();
        let mut products = Vec::new();
        for a in a {
            let (a_memory, a_matrix) = resident_complex(gpu, a, ta)?;
            let (c_memory, c_matrix) = resident_complex(gpu, &poison, tc)?;
            products.push(GpuProduct {
                a: a_matrix,
                b: b_matrix,
                c: c_matrix,
            });
            held.push((a_memory, c_memory));
        }
        let opts = GemmOptions::new(algorithm);
        // SAFETY: every matrix is this GPU's memory of interleaved complex
        // elements of T's parts, allocated above and alive until the reads
        // below; the outputs are separate allocations, apart from each
        // other and from A and B.
        unsafe {
            ctx.gemm_gpu_complex_batch::<T>(
                &products,
                form,
                &opts,
                crate::options::GpuCompletion::Complete,
            )
        }?;
        held.iter()
            .map(|(_, c_memory)| read_back_complex(gpu, c_memory, (m, n), tc))
            .collect()
    }

    /// cuda-fast's schedules for the last waves of tiles, for every kernel
    /// that may run them, on shapes sized to this GPU's SMs so that they
    /// happen: the wave-tail split (the last, nearly empty wave run as a
    /// split-K product) on operands whose rows are not 16-byte aligned (the
    /// ring kernel) or with the tensor-core kernel, and stream-K (the last
    /// waves shared out by k steps) on aligned ones. Two tile columns (the
    /// last partial, and for the wave tail n odd), k = 1100 (a partial last
    /// k step), and the fewest tile rows (the last partial) from half a
    /// wave of resident blocks up that give the schedule. A shape that does
    /// not get it fails the row rather than passing untested.
    pub(super) fn schedule_checks(ctx: &Context) -> Result<Vec<Check>, Error> {
        let gpu = ctx.gpu()?;
        let mut rows = Vec::new();
        for &dtype in &DType::ALL {
            let simt = simt_micro_tiles(dtype).map(|tm| (CudaKernel::Simt, Some(tm)));
            let mma = (dtype == DType::F64).then_some((CudaKernel::Mma, None));
            for (family, tile) in simt.into_iter().chain(mma) {
                let opts = GemmOptions {
                    tile,
                    gpu: GpuOptions {
                        kernel: Some(family),
                        ..GemmOptions::new(Algorithm::CudaFast).gpu
                    },
                    ..GemmOptions::new(Algorithm::CudaFast)
                };
                // One candidate each (the tile is given), whatever the shape.
                let config = FastConfig::resolve(&opts, dtype, gpu, (1, 1))?;
                let (tile_rows, tile_cols) = config.block_shape();
                let resident = gpu.info().multiprocessors * config.blocks_per_sm();
                let lanes = 16 / dtype.size_bytes();
                let mut kinds = vec![("wave tail", 2 * tile_cols - 3)];
                if config.stream_key().is_some() {
                    kinds.push(("stream-K", 2 * tile_cols - lanes));
                }
                for (kind, n) in kinds {
                    let k = 1100;
                    let aligned = contiguous_rows_aligned(dtype, k, n);
                    let shape = (resident / 2 + 1..2 * resident)
                        .map(|tiles_m| (tiles_m * tile_rows - 5, k, n))
                        .find(|&dims| {
                            matches!(
                                (kind, config.schedule(gpu, dims, aligned)),
                                ("wave tail", Ok(FastSchedule::WaveTail(_)))
                                    | ("stream-K", Ok(FastSchedule::StreamK(_)))
                            )
                        });
                    let label = match tile {
                        Some(tm) => format!("cuda-fast {family} tile {tm} {kind}"),
                        None => format!("cuda-fast {family} {kind}"),
                    };
                    match shape {
                        Some(shape) => rows.extend(check_dtype(
                            ctx,
                            dtype,
                            &format!("{label} {}×{}×{}", shape.0, shape.1, shape.2),
                            &opts,
                            &[shape],
                        )),
                        None => {
                            let mut row = Check::new(format!("{label} {dtype}"));
                            row.failures
                                .push(format!("no shape found with a {kind} schedule"));
                            rows.push(row);
                        }
                    }
                }
            }
        }
        Ok(rows)
    }

    /// The GPU's out-of-core product under every kind of schedule, built by
    /// hand on the shape matrix (tiles of about a third of m and half of
    /// n): one step; all of B resident; A resident in fewer slots than
    /// panels; k split in three and accumulated; one buffer each. Each
    /// over NaN with β = 0, and exactly on small integers with α = 2,
    /// β = −3; for cuBLAS and cuda-fast, and for Strassen and Winograd per
    /// tile (recursing from 16). Then the planner itself through the
    /// context, with a budget of a third of A, B and C.
    /// Strided batches of the emulated product (each operand one
    /// allocation, the products at fixed distances in it, run as one launch
    /// per step over the batch) against the same products one call each:
    /// bit for bit, since each product takes the route it takes alone. The
    /// batches mix routes (a row of wide exponents, which needs more
    /// moduli; a NaN, which needs the native product; a zero A), share B or
    /// not, read A transposed or not, and overwrite C (pre-filled with the
    /// poison value) or add to it (β = 1); where C is overwritten, the
    /// products without a NaN are also held to the bound against the f64
    /// product.
    pub(super) fn strided_batch_checks<T: Element>(ctx: &Context) -> Check {
        let mut row = Check::new(format!(
            "GPU-resident strided batches, emulated {}",
            T::DTYPE
        ));
        let mut rng = seeded_rng(53);
        let opts = GemmOptions::new(Algorithm::Emulated);
        let count = 5;
        for &(m, k, n) in &[
            (1, 1, 1),
            (2, 9, 7),
            (33, 17, 65),
            (65, 300, 31),
            (130, 257, 129),
        ] {
            let a: Vec<Matrix<T>> = (0..count)
                .map(|z| {
                    let x: Matrix<T> = random_matrix(m, k, &mut rng);
                    Matrix::from_fn(m, k, |i, p| match z {
                        1 => {
                            T::from_f64(x.get(i, p).to_f64() * 2f64.powi((i * 7 % 41) as i32 - 20))
                        }
                        3 if i + p == 0 => T::from_f64(f64::NAN),
                        4 => T::ZERO,
                        _ => x.get(i, p),
                    })
                })
                .collect();
            let b: Vec<Matrix<T>> = (0..count).map(|_| random_matrix(k, n, &mut rng)).collect();
            let c0: Matrix<T> = random_matrix(count * m, n, &mut rng);
            for (share_b, trans_a, beta) in [
                (false, false, T::ZERO),
                (true, false, T::ZERO),
                (false, true, T::ONE),
                (true, true, T::ONE),
            ] {
                let label = format!(
                    "{m}×{k}×{n}{}{}{}",
                    if share_b { " B shared" } else { "" },
                    if trans_a { " A transposed" } else { "" },
                    if beta == T::ONE { " β = 1" } else { "" }
                );
                match strided_batch(ctx, (&a, &b, &c0), (share_b, trans_a, beta), &opts) {
                    Ok((batched, single)) => {
                        let same = batched.as_ref().iter().zip(single.as_ref().iter());
                        let differ = same
                            .enumerate()
                            .find(|(_, (x, y))| x.to_f64().to_bits() != y.to_f64().to_bits());
                        match differ {
                            Some((e, _)) => row.failures.push(format!(
                                "{label}: product {} differs from its single product at ({}, {})",
                                e / n / m,
                                e / n % m,
                                e % n
                            )),
                            None => row.passed += 1,
                        }
                        // β = 1 adds C's own rounding, which the bound
                        // of the product alone does not cover.
                        for z in [0, 1, 2, 4].into_iter().filter(|_| beta == T::ZERO) {
                            let c = Matrix::from_fn(m, n, |i, j| batched.get(z * m + i, j));
                            let bz = &b[if share_b { 0 } else { z }];
                            match verify_with_growth(a[z].as_ref(), bz.as_ref(), c.as_ref(), 1.0) {
                                Ok(v) if v.ok => row.passed += 1,
                                Ok(v) => row.failures.push(format!("{label}: product {z}: {v:?}")),
                                Err(e) => row.failures.push(format!("{label}: product {z}: {e}")),
                            }
                        }
                    }
                    Err(e) => row.failures.push(format!("{label}: {e}")),
                }
            }
        }
        row
    }

    /// `auto` at `native` on strided f32 batches on either side of its
    /// batch rule ([`crate::emulation::auto_emulates_batch`]: 16 products
    /// of 2048³ emulated, 15 not): the batch's C bit for bit that of the
    /// product the rule names, forced, and apart from the other's.
    pub(super) fn strided_auto_checks(ctx: &Context) -> Check {
        let mut row = Check::new("auto on GPU-resident strided batches f32".into());
        let mut rng = seeded_rng(59);
        let side = crate::tunables::EMULATION_NATIVE_AUTO_BATCH_SMALL_DIM_F32;
        let most = crate::tunables::EMULATION_NATIVE_AUTO_BATCH_MIN_COUNT_F32;
        let a: Matrix<f32> = random_matrix(most * side, side, &mut rng);
        let b: Matrix<f32> = random_matrix(most * side, side, &mut rng);
        for count in [most, most - 1] {
            let shape = (side, side, side);
            let emulates = crate::emulation::auto_emulates_batch(
                DType::F32,
                crate::options::Accuracy::Native,
                shape,
                count,
            );
            let (named, other) = match emulates {
                true => (Algorithm::Emulated, Algorithm::Cublas),
                false => (Algorithm::Cublas, Algorithm::Emulated),
            };
            let label = format!("{count} × {side}³ ({named})");
            let run = |algorithm| {
                stacked_batch(ctx, (&a, &b), (count, shape), &GemmOptions::new(algorithm))
            };
            match (run(Algorithm::Auto), run(named), run(other)) {
                (Ok(auto), Ok(forced), Ok(apart)) => {
                    let bits = |x: &Matrix<f32>| -> Vec<u32> {
                        x.as_ref().iter().map(|v| v.to_bits()).collect()
                    };
                    let (auto, forced, apart) = (bits(&auto), bits(&forced), bits(&apart));
                    match (auto == forced, auto != apart) {
                        (true, true) => row.passed += 1,
                        (false, _) => row.failures.push(format!("{label}: auto is not {named}")),
                        (true, false) => row.failures.push(format!(
                            "{label}: {named} and {other} agree bit for bit, so auto's choice is not shown"
                        )),
                    }
                }
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                    row.failures.push(format!("{label}: {e}"))
                }
            }
        }
        row
    }

    /// C_z = A_z·B_z for z < `count`, A_z and B_z the z-th `m`×`k` and
    /// `k`×`n` blocks of rows of `a` and `b`, as one strided batch over
    /// GPU-resident copies (C pre-filled with NaN), read back stacked.
    fn stacked_batch(
        ctx: &Context,
        (a, b): (&Matrix<f32>, &Matrix<f32>),
        (count, (m, k, n)): (usize, (usize, usize, usize)),
        opts: &GemmOptions,
    ) -> Result<Matrix<f32>, Error> {
        let gpu = ctx.gpu()?;
        let (_a_memory, a_all) = resident(gpu, a, false)?;
        let (_b_memory, b_all) = resident(gpu, b, false)?;
        let (c_memory, c_all) = resident(gpu, &Matrix::filled(count * m, n, f32::NAN), false)?;
        let at = |x: GpuMatrix, z: usize, (rows, cols): (usize, usize)| {
            GpuMatrix::row_major(x.ptr + (z * rows * x.ld * 4) as u64, (rows, cols), x.ld)
        };
        let batch: Vec<GpuProduct> = (0..count)
            .map(|z| GpuProduct {
                a: at(a_all, z, (m, k)),
                b: at(b_all, z, (k, n)),
                c: at(c_all, z, (m, n)),
            })
            .collect();
        // SAFETY: every matrix lies in this GPU's memory of f32 allocated
        // above and alive until the read below; the Cs are disjoint rows
        // of their own allocation, apart from A and B.
        unsafe {
            ctx.gemm_gpu_batch(
                1.0f32,
                &batch,
                0.0,
                opts,
                crate::options::GpuCompletion::Complete,
            )
        }?;
        read_back(gpu, &c_memory, false)
    }

    /// The products C_z = A_z·B_z (+ β·C_z) of `strided_batch_checks` in
    /// one call over operands stacked in one allocation each (B_0 for
    /// every product where `share_b`, A_zᵀ stacked and read as views where
    /// `trans_a`), and the same products one call each into a second C:
    /// both Cs, stacked, read back.
    #[allow(clippy::type_complexity)]
    fn strided_batch<T: Element>(
        ctx: &Context,
        (a, b, c0): (&[Matrix<T>], &[Matrix<T>], &Matrix<T>),
        (share_b, trans_a, beta): (bool, bool, T),
        opts: &GemmOptions,
    ) -> Result<(Matrix<T>, Matrix<T>), Error> {
        let gpu = ctx.gpu()?;
        let (count, m, k, n) = (a.len(), a[0].rows(), a[0].cols(), b[0].cols());
        let size = std::mem::size_of::<T>() as u64;
        let stacked_a = match trans_a {
            false => Matrix::from_fn(count * m, k, |r, p| a[r / m].get(r % m, p)),
            true => Matrix::from_fn(count * k, m, |r, i| a[r / k].get(i, r % k)),
        };
        let stacked_b = Matrix::from_fn(count * k, n, |r, j| b[r / k].get(r % k, j));
        let start = match beta == T::ONE {
            true => c0.clone(),
            false => Matrix::filled(count * m, n, T::poison()),
        };
        let (_a_memory, a_all) = resident(gpu, &stacked_a, false)?;
        let (_b_memory, b_all) = resident(gpu, &stacked_b, false)?;
        let (c_batched, c_all) = resident(gpu, &start, false)?;
        let (c_single, c_one) = resident(gpu, &start, false)?;
        let product = |z: usize, c: GpuMatrix| {
            let a = match trans_a {
                false => GpuMatrix::row_major(
                    a_all.ptr + z as u64 * m as u64 * a_all.ld as u64 * size,
                    (m, k),
                    a_all.ld,
                ),
                true => GpuMatrix::row_major(
                    a_all.ptr + z as u64 * k as u64 * a_all.ld as u64 * size,
                    (k, m),
                    a_all.ld,
                )
                .t(),
            };
            let zb = if share_b { 0 } else { z as u64 };
            GpuProduct {
                a,
                b: GpuMatrix::row_major(
                    b_all.ptr + zb * k as u64 * b_all.ld as u64 * size,
                    (k, n),
                    b_all.ld,
                ),
                c: GpuMatrix::row_major(
                    c.ptr + z as u64 * m as u64 * c.ld as u64 * size,
                    (m, n),
                    c.ld,
                ),
            }
        };
        let batch: Vec<GpuProduct> = (0..count).map(|z| product(z, c_all)).collect();
        // SAFETY: every matrix lies in this GPU's memory of T allocated
        // above and alive until the reads below; the Cs are disjoint rows
        // of their own allocations, apart from A and B.
        unsafe {
            ctx.gemm_gpu_batch(
                T::ONE,
                &batch,
                beta,
                opts,
                crate::options::GpuCompletion::Complete,
            )
        }?;
        for z in 0..count {
            // SAFETY: as above, one product per call.
            unsafe {
                ctx.gemm_gpu_batch(
                    T::ONE,
                    &[product(z, c_one)],
                    beta,
                    opts,
                    crate::options::GpuCompletion::Complete,
                )
            }?;
        }
        Ok((
            read_back(gpu, &c_batched, false)?,
            read_back(gpu, &c_single, false)?,
        ))
    }

    /// The emulated product's INT8 products on its own kernel against
    /// cuBLAS's on the same planes (sm_90, where the own kernel runs):
    /// INT32 sums equal, at shapes one off its 128 × 256 × 128 tiles,
    /// depths that are not a stage's, a later part of the depth added to
    /// C, random bytes past the depth in every row (neither may read
    /// them) and columns of C past n (neither may write them), alone and
    /// in clusters of two; and its residue bytes (modulo 256 alone, 251
    /// in pairs, the whole depth) congruent to cuBLAS's sums and within
    /// a byte's range.
    pub(super) fn int8_kernel_checks(ctx: &Context) -> Check {
        let mut row = Check::new("INT8 products: own kernel = cuBLAS's".into());
        let gpu = match ctx.gpu() {
            Ok(gpu) => gpu,
            Err(e) => {
                row.failures.push(e.to_string());
                return row;
            }
        };
        if gpu.arch() != "sm_90" {
            return row;
        }
        let mut rng = seeded_rng(71);
        for &(rows, n, depth, p0) in &[
            (1, 1, 4, 0),
            (127, 255, 124, 0),
            (128, 256, 128, 0),
            (129, 257, 132, 0),
            (300, 520, 1028, 0),
            (3, 700, 4100, 0),
            (257, 129, 2000, 512),
            (64, 64, 64, 32),
        ] {
            let label = format!("{rows}×{n}×{depth} from {p0}");
            match int8_kernels_agree(gpu, (rows, n, depth, p0), &mut rng) {
                Ok(None) => row.passed += 1,
                Ok(Some(at)) => row.failures.push(format!("{label}: {at}")),
                Err(e) => row.failures.push(format!("{label}: {e}")),
            }
        }
        row
    }

    /// One case of [`int8_kernel_checks`]: where the two kernels' C
    /// differ first, or None.
    fn int8_kernels_agree(
        gpu: &Gpu,
        (rows, n, depth, p0): (usize, usize, usize, usize),
        rng: &mut SeededRng,
    ) -> Result<Option<String>, Error> {
        use crate::config::Int8Kernels;
        use crate::cuda::kernels::int8::int8_product_on;
        use crate::cuda::runtime::cuda_err;
        use cudarc::driver::DevicePtr;
        let kp = (depth + 20).next_multiple_of(16);
        let np = n.next_multiple_of(16) + 2;
        let mut bytes = |len: usize| -> Vec<i8> {
            (0..len)
                .map(|_| rand::Rng::random_range(rng, -128i32..128) as i8)
                .collect()
        };
        let (a, bt) = (bytes(rows * kp), bytes(n * kp));
        let c0: Vec<i32> = bytes(rows * np).into_iter().map(i32::from).collect();
        let up_err = |e| cuda_err("cannot copy the INT8 check's operands", e);
        let a = gpu.stream.clone_htod(&a).map_err(up_err)?;
        let bt = gpu.stream.clone_htod(&bt).map_err(up_err)?;
        let mut results = Vec::new();
        for kernels in [
            Int8Kernels::Wgmma,
            Int8Kernels::WgmmaPairs,
            Int8Kernels::Cublas,
        ] {
            let c = gpu.stream.clone_htod(&c0).map_err(up_err)?;
            let ptrs = (
                a.device_ptr(&gpu.stream).0,
                bt.device_ptr(&gpu.stream).0,
                c.device_ptr(&gpu.stream).0,
            );
            int8_product_on(gpu, kernels, (rows, n, kp, np), (p0, depth), p0 > 0, ptrs)?;
            results.push(
                gpu.stream
                    .clone_dtoh(&c)
                    .map_err(|e| cuda_err("cannot read the INT8 check's C", e))?,
            );
        }
        for (own, name) in [(0, "the own kernel"), (1, "the own kernel in pairs")] {
            if let Some(x) = (0..rows * np).find(|&x| results[own][x] != results[2][x]) {
                return Ok(Some(format!(
                    "C({}, {}) = {} on {name}, {} on cuBLAS's",
                    x / np,
                    x % np,
                    results[own][x],
                    results[2][x]
                )));
            }
        }
        if p0 > 0 {
            return Ok(None);
        }
        // Over the whole depth C was overwritten: cuBLAS's C is the sums.
        let sums: Vec<i64> = results[2].iter().map(|&x| i64::from(x)).collect();
        for (kernels, modulus) in [(Int8Kernels::Wgmma, 256u32), (Int8Kernels::WgmmaPairs, 251)] {
            let junk: Vec<i8> = vec![0x5a; rows * np];
            let out = gpu.stream.clone_htod(&junk).map_err(up_err)?;
            crate::cuda::kernels::int8::int8_residues(
                gpu,
                kernels,
                (rows, n, kp, np),
                modulus,
                (
                    a.device_ptr(&gpu.stream).0,
                    bt.device_ptr(&gpu.stream).0,
                    out.device_ptr(&gpu.stream).0,
                ),
            )?;
            let got = gpu
                .stream
                .clone_dtoh(&out)
                .map_err(|e| cuda_err("cannot read the INT8 check's residues", e))?;
            let bad = (0..rows * np).find(|&x| {
                let (i, j) = (x / np, x % np);
                match j < n {
                    true => (sums[i * np + j] - i64::from(got[x])) % i64::from(modulus) != 0,
                    false => got[x] != 0x5a,
                }
            });
            if let Some(x) = bad {
                return Ok(Some(format!(
                    "{kernels:?}: residue ({}, {}) modulo {modulus} = {}, the sum {}",
                    x / np,
                    x % np,
                    got[x],
                    sums[x]
                )));
            }
        }
        Ok(None)
    }

    /// The GPU's emulated product against its CPU twin: where both took
    /// the same route with no native fix-ups, every step is exact or
    /// rounded the same way, so C must agree bit for bit; where the routes
    /// differ (a need at a threshold, the norms summed in another order),
    /// both must be within the bound.
    pub(super) fn emulation_twin_checks<T: Element>(ctx: &Context) -> Check {
        let mut row = Check::new(format!("emulated GPU = CPU twin {}", T::DTYPE));
        let mut rng = seeded_rng(43);
        let opts = GemmOptions::new(Algorithm::Emulated);
        for &(m, k, n) in EMULATION_SHAPES
            .iter()
            .chain(&[(264, 2056, 264), (1, 70000, 3)])
        {
            let label = format!("{m}×{k}×{n}");
            let a: Matrix<T> = random_matrix(m, k, &mut rng);
            let b: Matrix<T> = random_matrix(k, n, &mut rng);
            let mut gpu_c = Matrix::filled(m, n, T::poison());
            let mut cpu_c = Matrix::filled(m, n, T::poison());
            let outcome = ctx
                .gemm_timed(
                    T::ONE,
                    a.as_ref(),
                    b.as_ref(),
                    T::ZERO,
                    gpu_c.as_mut(),
                    &opts,
                )
                .and_then(|timing| {
                    let twin = crate::emulation::gemm_reference(
                        T::ONE,
                        a.as_ref(),
                        b.as_ref(),
                        T::ZERO,
                        cpu_c.as_mut(),
                        crate::emulation::Goal::on_cublas(opts.accuracy, T::DTYPE),
                    )?;
                    Ok((timing.emulation, twin))
                });
            match outcome {
                Ok((Some(gpu), cpu)) if gpu == cpu && gpu.fixups == 0 => {
                    let differ = (0..m * n).find(|&x| {
                        gpu_c.get(x / n, x % n).to_f64().to_bits()
                            != cpu_c.get(x / n, x % n).to_f64().to_bits()
                    });
                    match differ {
                        None => row.passed += 1,
                        Some(x) => row.failures.push(format!(
                            "{label} ({}): C({}, {}) = {:e} on the GPU, {:e} in the twin",
                            gpu.label(),
                            x / n,
                            x % n,
                            gpu_c.get(x / n, x % n).to_f64(),
                            cpu_c.get(x / n, x % n).to_f64()
                        )),
                    }
                }
                Ok((gpu, cpu)) => {
                    let both = crate::verify::verify(a.as_ref(), b.as_ref(), gpu_c.as_ref())
                        .and_then(|g| {
                            crate::verify::verify(a.as_ref(), b.as_ref(), cpu_c.as_ref())
                                .map(|c| g.ok && c.ok)
                        });
                    match (gpu, both) {
                        (Some(_), Ok(true)) => row.passed += 1,
                        (gpu, Ok(_)) => row.failures.push(format!(
                            "{label}: routes {} (GPU) and {} (twin), not both within the bound",
                            gpu.map_or("not reported".into(), |t| t.label()),
                            cpu.label()
                        )),
                        (_, Err(e)) => row.failures.push(format!("{label}: {e}")),
                    }
                }
                Err(e) => row.failures.push(format!("{label}: {e}")),
            }
        }
        row
    }

    /// The emulated complex product of host parts on the GPU (Karatsuba
    /// on the residues) against its CPU twin
    /// ([`crate::emulation::complex`]): on one route, with no native
    /// fix-ups, C must agree bit for bit; otherwise both must be within
    /// the classical form's bound. Gaussian integers exact; rows scaled
    /// over 2^±40; a depth past one slice (verified alone, beyond the
    /// twin's); C pre-filled with the poison value.
    pub(super) fn karatsuba_checks<T: Element>(ctx: &Context) -> Check {
        use crate::complex::{ComplexForm, ComplexMatrix};
        let mut row = Check::new(format!("emulated GPU complex = CPU twin {}", T::DTYPE));
        let mut rng = seeded_rng(61);
        let opts = GemmOptions::new(Algorithm::Emulated);
        let deep = crate::tunables::EMULATION_K_CHUNK / 2 + 33;
        for &(m, k, n) in EMULATION_SHAPES.iter().chain(&[(64, deep, 48)]) {
            for class in ["uniform", "integers", "scaled rows"] {
                let label = format!("{m}×{k}×{n} {class}");
                let mut part = |rows: usize, cols: usize, scaled: bool| -> Matrix<T> {
                    let mut x: Matrix<T> = match class {
                        "integers" => Matrix::from_fn(rows, cols, |_, _| {
                            T::from_f64(rand::Rng::random_range(&mut rng, -8i32..=8) as f64)
                        }),
                        _ => random_matrix(rows, cols, &mut rng),
                    };
                    if scaled && class == "scaled rows" {
                        for i in 0..rows {
                            let s = 2f64.powi((i as i32 * 37) % 81 - 40);
                            for j in 0..cols {
                                x.set(i, j, T::from_f64(x.get(i, j).to_f64() * s));
                            }
                        }
                    }
                    x
                };
                let a = ComplexMatrix::new(part(m, k, true), part(m, k, true));
                let b = ComplexMatrix::new(part(k, n, false), part(k, n, false));
                let (a, b) = match (a, b) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => {
                        row.failures.push(format!("{label}: {e}"));
                        continue;
                    }
                };
                let poison = || Matrix::filled(m, n, T::poison());
                let mut gpu_c = match ComplexMatrix::new(poison(), poison()) {
                    Ok(c) => c,
                    Err(e) => {
                        row.failures.push(format!("{label}: {e}"));
                        continue;
                    }
                };
                let ran = crate::complex::multiply(
                    ctx,
                    a.as_split(),
                    b.as_split(),
                    gpu_c.as_split_mut(),
                    ComplexForm::Classical,
                    &opts,
                );
                let gpu_tally = match ran {
                    Ok(reports) => reports.first().and_then(|r| r.timing.emulation),
                    Err(e) => {
                        row.failures.push(format!("{label}: {e}"));
                        continue;
                    }
                };
                let Some(gpu_tally) = gpu_tally else {
                    row.failures
                        .push(format!("{label}: no emulated route reported"));
                    continue;
                };
                let within = |c: &ComplexMatrix<T>| {
                    crate::complex::verify(&a, &b, c, 1.0, ComplexForm::Classical).map(|v| v.ok)
                };
                let exact = |c: &ComplexMatrix<T>| -> bool {
                    (0..m * n).all(|x| {
                        let (i, j) = (x / n, x % n);
                        let (mut re, mut im) = (0.0, 0.0);
                        for p in 0..k {
                            let (ar, ai) = (a.re().get(i, p).to_f64(), a.im().get(i, p).to_f64());
                            let (br, bi) = (b.re().get(p, j).to_f64(), b.im().get(p, j).to_f64());
                            re += ar * br - ai * bi;
                            im += ar * bi + ai * br;
                        }
                        c.re().get(i, j).to_f64() == re && c.im().get(i, j).to_f64() == im
                    })
                };
                if !crate::emulation::complex::takes_depth(k) {
                    match within(&gpu_c) {
                        Ok(true) if class != "integers" || exact(&gpu_c) => row.passed += 1,
                        Ok(_) => row
                            .failures
                            .push(format!("{label} ({}): beyond the bound", gpu_tally.label())),
                        Err(e) => row.failures.push(format!("{label}: {e}")),
                    }
                    continue;
                }
                let mut cpu_c = match ComplexMatrix::new(poison(), poison()) {
                    Ok(c) => c,
                    Err(e) => {
                        row.failures.push(format!("{label}: {e}"));
                        continue;
                    }
                };
                let twin = {
                    let c = cpu_c.as_split_mut();
                    crate::emulation::complex::gemm_complex(
                        (a.re().as_ref(), a.im().as_ref()),
                        (b.re().as_ref(), b.im().as_ref()),
                        (c.re, c.im),
                        crate::emulation::Goal::on_cublas(opts.accuracy, T::DTYPE),
                    )
                };
                let cpu_tally = match twin {
                    Ok(t) => t,
                    Err(e) => {
                        row.failures.push(format!("{label}: twin: {e}"));
                        continue;
                    }
                };
                let same = |x: &Matrix<T>, y: &Matrix<T>| {
                    (0..m * n).all(|e| {
                        x.get(e / n, e % n).to_f64().to_bits()
                            == y.get(e / n, e % n).to_f64().to_bits()
                    })
                };
                let route = |t: &crate::emulation::Tally| (t.emulated, t.native, t.moduli, t.bits);
                let agree = route(&gpu_tally) == route(&cpu_tally)
                    && gpu_tally.fixups == 0
                    && cpu_tally.fixups == 0;
                let ok = match agree {
                    true => Ok(same(gpu_c.re(), cpu_c.re()) && same(gpu_c.im(), cpu_c.im())),
                    false => within(&gpu_c).and_then(|g| within(&cpu_c).map(|c| g && c)),
                };
                match ok {
                    Ok(true) if class != "integers" || exact(&gpu_c) => row.passed += 1,
                    Ok(_) => row.failures.push(format!(
                        "{label}: GPU {} and twin {}: {}",
                        gpu_tally.label(),
                        cpu_tally.label(),
                        match agree {
                            true => "C differs",
                            false => "not both within the bound",
                        }
                    )),
                    Err(e) => row.failures.push(format!("{label}: {e}")),
                }
            }
        }
        row
    }

    pub(super) fn out_of_core_checks(ctx: &Context) -> Vec<Check> {
        let mut rows = Vec::new();
        for algorithm in [Algorithm::Strassen, Algorithm::Winograd] {
            let opts = GemmOptions {
                fast: FastOptions {
                    threshold: Some(SELFTEST_STRASSEN_THRESHOLD),
                    ..GemmOptions::new(algorithm).fast
                },
                ..GemmOptions::new(algorithm)
            };
            for &dtype in &DType::ALL {
                rows.extend(planned_checks_of(ctx, dtype, &opts));
            }
        }
        for algorithm in [Algorithm::Cublas, Algorithm::CudaFast] {
            let opts = GemmOptions::new(algorithm);
            for &dtype in &DType::ALL {
                rows.extend(planned_checks_of(ctx, dtype, &opts));
                let shape = (1100, 900, 1300);
                let (m, k, n) = shape;
                let bytes = ((m * k + k * n + m * n) * dtype.size_bytes()) as u64;
                let budgeted = GemmOptions {
                    gpu: GpuOptions {
                        max_memory: Some(bytes / 3),
                        ..opts.gpu
                    },
                    ..opts
                };
                rows.extend(check_dtype(
                    ctx,
                    dtype,
                    &format!("{algorithm} out of core, a third of the bytes"),
                    &budgeted,
                    &[shape],
                ));
            }
        }
        rows
    }

    fn planned_checks_of(ctx: &Context, dtype: DType, opts: &GemmOptions) -> Option<Check> {
        match dtype {
            DType::F32 => planned_checks::<f32>(ctx, opts),
            DType::F64 => planned_checks::<f64>(ctx, opts),
            DType::I32 => planned_checks::<i32>(ctx, opts),
            DType::I64 => planned_checks::<i64>(ctx, opts),
        }
    }

    /// The hand-built schedules of [`out_of_core_checks`] for one type.
    fn planned_checks<T: Element>(ctx: &Context, opts: &GemmOptions) -> Option<Check> {
        if opts.algorithm == Algorithm::Cublas && T::DTYPE.is_integer() {
            return None;
        }
        let gpu = ctx.gpu().ok()?;
        let mut row = Check::new(format!(
            "{} out of core, planned {}",
            opts.algorithm,
            T::DTYPE
        ));
        let elem = std::mem::size_of::<T>();
        let mut rng = seeded_rng(13);
        // The tiles run the variant the planner would give them.
        let tile_opts = GemmOptions {
            fast: FastOptions {
                variant: Some(opts.fast.variant.unwrap_or(Variant::Frugal)),
                ..opts.fast
            },
            ..*opts
        };
        for &(m, k, n) in SHAPES {
            let (rows, cols) = (m.div_ceil(3), n.div_ceil(2));
            let whole = Tiling::one_step((m, k, n), elem);
            let tiled = |resident, depth, slots| Tiling {
                tile_rows: rows,
                tile_cols: cols,
                depth,
                resident,
                slots,
                ..whole
            };
            let plans = [
                ("one step", whole),
                (
                    "B resident",
                    tiled(Resident::B, k, Slots { a: 2, b: 2, c: 2 }),
                ),
                (
                    "A resident in 2 slots",
                    tiled(Resident::A, k, Slots { a: 2, b: 2, c: 2 }),
                ),
                (
                    "k in 3 slices",
                    tiled(Resident::B, k.div_ceil(3), Slots { a: 2, b: 2, c: 2 }),
                ),
                (
                    "one buffer each",
                    tiled(Resident::B, k, Slots { a: 1, b: 1, c: 1 }),
                ),
            ];
            // A fast algorithm's tiles recurse at most as deep as the whole.
            let growth = match ctx.plan(crate::gemm::Problem::of::<T>((m, k, n)), &tile_opts) {
                Ok(plan) => plan.error_growth,
                Err(e) => {
                    row.failures.push(format!("{m}×{k}×{n}: {e}"));
                    continue;
                }
            };
            for (what, plan) in plans {
                check_shape::<T>(
                    &mut row,
                    (m, k, n),
                    what,
                    growth,
                    &mut rng,
                    |alpha, a, b, beta, c| {
                        // The boundary's rule for NaN and ∞ (a fast
                        // algorithm runs its base), as `Context::gemm`
                        // applies it before it reaches these schedules.
                        let opts = ctx.ieee_safe(a, b, beta == T::ZERO, tile_opts, None)?;
                        let product = crate::gemm::Gemm {
                            alpha,
                            a,
                            b,
                            beta,
                            c,
                        };
                        multiply_planned(gpu, plan, product, &opts).map(|_| ())
                    },
                );
            }
            if crate::strassen::Scheme::of(opts.algorithm).is_none() {
                // The bands route: B resident, loaded in chunks of a third
                // of k (the first band staged and multiplied chunk by
                // chunk, its A in 2-D copies), bands of a third of m.
                let (shared, pools) = ctx.gpu_and_staging().ok()?;
                let cut = Bands {
                    rows: m.div_ceil(3),
                    chunk_rows: k.div_ceil(3),
                };
                check_shape::<T>(
                    &mut row,
                    (m, k, n),
                    "bands of a third, B in chunks of a third",
                    growth,
                    &mut rng,
                    |alpha, a, b, beta, c| {
                        let opts = ctx.ieee_safe(a, b, beta == T::ZERO, *opts, None)?;
                        let product = crate::gemm::Gemm {
                            alpha,
                            a,
                            b,
                            beta,
                            c,
                        };
                        multiply_in_bands(shared, pools, cut, product, &opts).map(|_| ())
                    },
                );
            }
        }
        Some(row)
    }
}
