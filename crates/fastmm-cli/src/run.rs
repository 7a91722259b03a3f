//! `fastmm run`: the seeds' experiment driver. It generates seeded random
//! matrices, runs each requested algorithm on its device, times it
//! (median of `--reps` after `--warmup`), verifies every result against
//! the allowance its plan states, and reports a table or JSON.

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fastmm::random::{seeded_rng, try_random_matrix_wide};
use fastmm::system::{available_memory_bytes, format_bytes};
use fastmm::verify::Reference;
use fastmm::verify::Verdict;
use fastmm::{
    Accuracy, Clock, DType, Element, Executor, Gemm, GemmOptions, Matrix, Plan, Report, Route, Team,
};
use serde::Serialize;

use crate::common::{
    format_ms, machine_line, median, parse_dtypes, AlgoArgs, Devices, Outcome, Target,
};

/// Matrices at most this many rows and columns are printed by `--print`.
const PRINT_MAX_DIM: usize = 8;

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Square size: m = k = n = N (each overridable by -m/-k/-n).
    #[arg(short = 's', long, value_name = "N", default_value_t = 512)]
    pub(crate) size: usize,
    /// Rows of A and C.
    #[arg(short = 'm', value_name = "M")]
    pub(crate) m: Option<usize>,
    /// Columns of A, rows of B.
    #[arg(short = 'k', value_name = "K")]
    pub(crate) k: Option<usize>,
    /// Columns of B and C.
    #[arg(short = 'n', value_name = "N")]
    pub(crate) n: Option<usize>,
    /// Element types: a comma list of f32, f64, i32, i64, or `all`.
    #[arg(short = 'd', long, default_value = "f32")]
    pub(crate) dtype: String,
    /// Algorithms: a comma list (NAME or NAME@DEVICE) or `all` (every
    /// algorithm of --device). Speedups are relative to the first.
    #[arg(short = 'a', long, default_value = "all")]
    pub(crate) algo: String,
    #[command(flatten)]
    pub(crate) options: AlgoArgs,
    /// Timed repetitions; the median is reported.
    #[arg(short = 'r', long, default_value_t = 3)]
    pub(crate) reps: usize,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 1)]
    pub(crate) warmup: usize,
    /// Seed of the random matrices: the same seed gives the same A and B.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Floats of A and B span this many decades each way: ±10^u with u
    /// uniform in [−D, D) (0: uniform in [−1, 1), the default). Entries of
    /// one row then differ by up to 10^(2D): the hard inputs of scaled
    /// products such as emulated's.
    #[arg(long, value_name = "D", default_value_t = 0.0)]
    pub(crate) decades: f64,
    /// Print one JSON array of records on stdout instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print A, B and each C (only when all dimensions are at most 8).
    #[arg(long)]
    pub(crate) print: bool,
    /// Corrupt one element of each result before verification, to show that
    /// verification catches it (testing aid).
    #[arg(long, hide = true)]
    pub(crate) corrupt: bool,
    /// Report on stderr when the inputs are ready and as each target
    /// finishes (for long runs).
    #[arg(long)]
    pub(crate) progress: bool,
    /// Under `mpirun -np P`: each product distributed over the P ranks in
    /// the planner's layout (every rank makes the same inputs and keeps
    /// its pieces; the algorithm is each rank's local product, on its
    /// node's GPU r mod G with `--device cuda` or a GPU algorithm), C
    /// collected and verified on rank 0, which prints. Needs a build with
    /// the `mpi` feature.
    #[arg(long)]
    pub(crate) distributed: bool,
    /// With --distributed: memory each rank may use for its pieces and
    /// buffers (e.g. 512M, 4G); the planner takes the fewest words among
    /// the grids that fit, and refuses a product none fits. Default: 90%
    /// of each node's available memory over its ranks.
    #[arg(long, value_name = "BYTES", requires = "distributed")]
    pub(crate) memory_per_rank: Option<String>,
    /// With --distributed: strassen and winograd run their levels across
    /// the ranks (CAPS) where m and k are multiples of P·2^levels and the
    /// temporaries fit, instead of in each rank's local product.
    #[arg(long, requires = "distributed")]
    pub(crate) strassen_across: bool,
}

/// `run`'s arguments parsed from a command line (without the program and
/// subcommand), so that other commands start from what `run` does.
#[derive(clap::Parser)]
struct RunCommand {
    #[command(flatten)]
    run: RunArgs,
}

impl RunArgs {
    /// The arguments `argv` gives `run`, the rest at their defaults.
    pub(crate) fn from_argv(argv: &[&str]) -> Result<RunArgs> {
        use clap::Parser as _;
        Ok(RunCommand::try_parse_from(std::iter::once("fastmm").chain(argv.iter().copied()))?.run)
    }
}

/// One measured and verified run, as printed by `--json`.
#[derive(Serialize, Debug, Clone)]
pub struct Record {
    pub algorithm: String,
    pub kernel: String,
    pub device: String,
    pub dtype: &'static str,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub threads: usize,
    pub tile: Option<usize>,
    pub reps: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub gflops: f64,
    pub speedup: f64,
    pub rel_error: f64,
    pub bound_ratio: f64,
    pub check: &'static str,
    pub ok: bool,
    /// The accuracy level the product gives (see `fastmm::Plan::accuracy`).
    pub accuracy: String,
    /// The level asked for (`--accuracy`).
    pub accuracy_asked: String,
    /// The precision it carries: its sums, Strassen's levels, or the
    /// emulated product's certificate.
    pub precision: String,
    pub seed: u64,
    /// The decades A's and B's floats span each way (0: uniform in [−1, 1)).
    pub decades: f64,
    /// GPU algorithms: median host→device copy time.
    pub upload_ms: Option<f64>,
    /// GPU algorithms: median device→host copy time.
    pub download_ms: Option<f64>,
    /// GPU algorithms: GFLOP/s counting the copies too (`gflops` is the
    /// kernel alone, between CUDA events).
    pub end_to_end_gflops: Option<f64>,
    /// Strassen/Winograd levels applied (absent for classical algorithms).
    pub levels: Option<usize>,
    /// Strassen/Winograd that applied no level: the classical algorithm
    /// that ran instead (its time is that algorithm's, not a speedup).
    pub runs_as: Option<String>,
    /// Temporary workspace of Strassen/Winograd, in bytes (the packing
    /// buffers of the classical products come on top).
    pub extra_bytes: u64,
    /// On a team: the words the busiest device received.
    pub comm_words: Option<u128>,
    /// On a team: those words over the lower bound for the shape, grid
    /// and memory.
    pub comm_bound_ratio: Option<f64>,
}

pub(crate) struct Problem {
    m: usize,
    k: usize,
    n: usize,
}

impl Problem {
    /// (m, k, n).
    fn shape(&self) -> (usize, usize, usize) {
        (self.m, self.k, self.n)
    }
}

pub fn run(args: &RunArgs) -> Result<Outcome> {
    if args.distributed {
        return run_distributed(args);
    }
    let mut devices = Devices::default();
    let (problem, records) = measure(args, &mut devices)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&records)?);
    } else {
        print_table(args, &problem, &records, &devices);
    }
    let failures = records.iter().filter(|r| !r.ok).count();
    Ok(if failures == 0 {
        Outcome::AllCorrect
    } else {
        Outcome::Failures(failures)
    })
}

#[cfg(not(feature = "mpi"))]
fn run_distributed(_: &RunArgs) -> Result<Outcome> {
    bail!("--distributed runs under MPI: build with `cargo build --release --features mpi` (see the README's cluster section)")
}

/// `run --distributed`: every target and type across the MPI job's ranks;
/// rank 0 verifies and prints, the others stay quiet. A rank that fails
/// names itself and aborts the job: the other ranks, which may be waiting
/// in a collective for it, end too instead of hanging.
#[cfg(feature = "mpi")]
fn run_distributed(args: &RunArgs) -> Result<Outcome> {
    let memory = args
        .memory_per_rank
        .as_deref()
        .map(crate::common::parse_bytes)
        .transpose()?;
    // Every target on a GPU (`--device cuda`, or GPU algorithms): every
    // rank's local products on its own GPU. Otherwise only the GPU
    // algorithms' products go there.
    let gpus = args
        .options
        .targets(&args.algo)?
        .iter()
        .all(|t| matches!(t.device, fastmm::Device::Cuda(_)));
    let mut cluster = fastmm::Cluster::init()?
        .with_strassen_across(args.strassen_across)
        .with_local_gpus(gpus);
    if let Some(bytes) = memory {
        cluster = cluster.with_memory_per_rank(bytes);
    }
    match run_ranks(args, &cluster) {
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            let text = format!("{e:#}");
            crate::common::rank_failed(cluster.rank(), cluster.size(), &text);
            cluster.abort(1)
        }
    }
}

#[cfg(feature = "mpi")]
fn run_ranks(args: &RunArgs, cluster: &fastmm::Cluster) -> Result<Outcome> {
    // Every rank makes its inputs from the same arguments (the seed too).
    let line: Vec<String> = std::env::args().skip(1).collect();
    cluster.check_same("arguments", &line)?;
    let problem = problem_of(args)?;
    let targets = args.options.targets(&args.algo)?;
    let base_opts = args.options.options()?;
    let mut records = Vec::new();
    for dtype in parse_dtypes(&args.dtype)? {
        for target in targets.iter().filter(|t| t.algorithm.supports(dtype)) {
            let record = match dtype {
                DType::F32 => run_on_cluster::<f32>(args, &problem, target, cluster, base_opts),
                DType::F64 => run_on_cluster::<f64>(args, &problem, target, cluster, base_opts),
                DType::I32 => run_on_cluster::<i32>(args, &problem, target, cluster, base_opts),
                DType::I64 => run_on_cluster::<i64>(args, &problem, target, cluster, base_opts),
            }?;
            records.extend(record);
        }
    }
    if cluster.rank() != 0 {
        return Ok(Outcome::AllCorrect);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&records)?);
    } else {
        print_table(args, &problem, &records, &Devices::default());
    }
    let failures = records.iter().filter(|r| !r.ok).count();
    Ok(if failures == 0 {
        Outcome::AllCorrect
    } else {
        Outcome::Failures(failures)
    })
}

/// One target across the ranks: the same inputs on every rank (the seed),
/// the product timed from all ranks ready to the last done; rank 0's
/// record (`None` on the others).
#[cfg(feature = "mpi")]
fn run_on_cluster<T: Element>(
    args: &RunArgs,
    p: &Problem,
    target: &Target,
    cluster: &fastmm::Cluster,
    base_opts: GemmOptions,
) -> Result<Option<Record>> {
    let mut rng = seeded_rng(args.seed);
    let a: Matrix<T> = try_random_matrix_wide(p.m, p.k, args.decades, &mut rng)?;
    let b: Matrix<T> = try_random_matrix_wide(p.k, p.n, args.decades, &mut rng)?;
    let opts = GemmOptions {
        algorithm: target.algorithm,
        ..base_opts
    };
    let label = format!("{}@mpi", target.algorithm);
    // The cluster's errors name the ranks that failed.
    let plan = cluster.plan(fastmm::Problem::of::<T>(p.shape()), &opts)?;
    let mut product = Product {
        a: &a,
        b: &b,
        c: Matrix::try_filled(p.m, p.n, T::poison())?,
        reference: None,
    };
    let reports = product.repeat(args, cluster, &plan, &label)?;
    // Rank 0 holds C.
    if cluster.rank() != 0 {
        return Ok(None);
    }
    let verdict = product.check(args, &reports)?;
    let measured = Measured {
        reports,
        verdict,
        hosted: None,
    };
    Ok(Some(measured.into_record(args, label, None)))
}

/// The problem `args` names, checked.
fn problem_of(args: &RunArgs) -> Result<Problem> {
    let problem = Problem {
        m: args.m.unwrap_or(args.size),
        k: args.k.unwrap_or(args.size),
        n: args.n.unwrap_or(args.size),
    };
    for (name, value) in [("m", problem.m), ("k", problem.k), ("n", problem.n)] {
        if value == 0 {
            bail!("size {name} must be at least 1");
        }
    }
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    Ok(problem)
}

/// Runs, times and verifies every algorithm × dtype that `args` names, on
/// one problem, opening the devices they run on in `devices`: the records
/// `run` prints (and `bench` and `tune` collect).
pub(crate) fn measure(args: &RunArgs, devices: &mut Devices) -> Result<(Problem, Vec<Record>)> {
    let problem = problem_of(args)?;
    let targets = args.options.targets(&args.algo)?;
    let dtypes = parse_dtypes(&args.dtype)?;
    let base_opts = args.options.options()?;
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for dtype in dtypes {
        // An algorithm that does not take this type (cuBLAS and emulated
        // take floats) is left out of its rows, with a note.
        let (targets, unsupported): (Vec<Target>, Vec<Target>) =
            targets.iter().partition(|t| t.algorithm.supports(dtype));
        skipped.extend(unsupported.iter().map(|t| format!("{} {dtype}", t.label())));
        if targets.is_empty() {
            continue;
        }
        check_memory(&problem, dtype)?;
        let typed = match dtype {
            DType::F32 => run_typed::<f32>(args, &problem, &targets, base_opts, devices),
            DType::F64 => run_typed::<f64>(args, &problem, &targets, base_opts, devices),
            DType::I32 => run_typed::<i32>(args, &problem, &targets, base_opts, devices),
            DType::I64 => run_typed::<i64>(args, &problem, &targets, base_opts, devices),
        };
        records.extend(typed?);
    }
    if !skipped.is_empty() {
        let note = format!(
            "{} (cublas and emulated multiply floats; integers are exact natively)",
            skipped.join(", ")
        );
        if records.is_empty() {
            bail!("nothing to run: {note}");
        }
        eprintln!("note: skipped {note}");
    }
    Ok((problem, records))
}

/// Refuses, before allocating anything, a problem whose matrices (plus the
/// verification's O(m + k + n) vectors) would not fit in available memory.
fn check_memory(p: &Problem, dtype: DType) -> Result<()> {
    let (m, k, n) = (p.m as u128, p.k as u128, p.n as u128);
    let elements = m * k + k * n + m * n;
    let verification = (m + k + n) * 8 * 4;
    let needed = elements * dtype.size_bytes() as u128 + verification;
    let fits_address_space = usize::try_from(elements).is_ok();
    match available_memory_bytes() {
        Some(available) if needed > available as u128 => bail!(
            "{}×{}×{} {} needs {} for A, B, C and verification, but only {} of memory is available",
            p.m,
            p.k,
            p.n,
            dtype,
            format_bytes(needed),
            format_bytes(available as u128)
        ),
        _ if !fits_address_space => bail!(
            "{}×{}×{} {} needs {}, more than this machine can address",
            p.m,
            p.k,
            p.n,
            dtype,
            format_bytes(needed)
        ),
        _ => Ok(()),
    }
}

fn run_typed<T: Element>(
    args: &RunArgs,
    p: &Problem,
    targets: &[Target],
    base_opts: GemmOptions,
    devices: &mut Devices,
) -> Result<Vec<Record>> {
    let started = std::time::Instant::now();
    let progress = |what: &str| {
        if args.progress {
            eprintln!("[{:7.1} s] {what}", started.elapsed().as_secs_f64());
        }
    };
    let mut rng = seeded_rng(args.seed);
    let a: Matrix<T> = try_random_matrix_wide(p.m, p.k, args.decades, &mut rng)?;
    let b: Matrix<T> = try_random_matrix_wide(p.k, p.n, args.decades, &mut rng)?;
    progress(&format!(
        "inputs {}×{}×{} {} ready",
        p.m,
        p.k,
        p.n,
        T::DTYPE
    ));
    let printable = args.print && [p.m, p.k, p.n].iter().all(|&d| d <= PRINT_MAX_DIM);
    if printable {
        show(args, &format!("A ({})", T::DTYPE), &a);
        show(args, &format!("B ({})", T::DTYPE), &b);
    }
    let mut product = Product {
        a: &a,
        b: &b,
        c: Matrix::try_filled(p.m, p.n, T::poison())?,
        // A·B's reference, worked out for the first target checked and
        // kept for the others.
        reference: None,
    };
    let mut records: Vec<Record> = Vec::with_capacity(targets.len());
    for target in targets {
        if let Some(last) = records.last() {
            progress(&finished(last));
        }
        let opts = GemmOptions {
            algorithm: target.algorithm,
            ..base_opts
        };
        let label = target.label();
        let speedup_base = records.first().map(|r: &Record| r.median_ms);
        let record = match target.team {
            Some(spec) => {
                let team = devices.team(spec)?;
                on_team(args, &label, team, &opts, &mut product)?
            }
            None => {
                let ctx = devices.get(target.device)?;
                let plan = ctx
                    .plan(fastmm::Problem::of::<T>(p.shape()), &opts)
                    .with_context(|| format!("{label} {}", T::DTYPE))?;
                let reports = product.repeat(args, ctx, &plan, &label)?;
                let verdict = product.check(args, &reports)?;
                Measured {
                    reports,
                    verdict,
                    hosted: None,
                }
            }
        };
        if printable {
            show(
                args,
                &format!("C = A·B ({label}, {})", T::DTYPE),
                &product.c,
            );
        }
        records.push(record.into_record(args, label, speedup_base));
    }
    if let Some(last) = records.last() {
        progress(&finished(last));
    }
    Ok(records)
}

/// One problem's operands, its C, and A·B's reference, shared by the
/// targets that multiply it.
struct Product<'a, T: Element> {
    a: &'a Matrix<T>,
    b: &'a Matrix<T>,
    c: Matrix<T>,
    reference: Option<Reference<'a, T>>,
}

impl<T: Element> Product<'_, T> {
    /// `plan` executed `--warmup` times untimed and `--reps` times timed
    /// (the benchmark clock), C poisoned before each.
    fn repeat(
        &mut self,
        args: &RunArgs,
        x: &impl Executor,
        plan: &Plan,
        label: &str,
    ) -> Result<Vec<Report>> {
        let (a, b) = (self.a.as_ref(), self.b.as_ref());
        let once = |c: &mut Matrix<T>| -> Result<Report> {
            c.as_mut_slice().fill(T::poison());
            x.execute_clocked(plan, Gemm::new(a, b, c.as_mut()), Clock::Benchmark)
                .with_context(|| format!("{label} failed"))
        };
        for _ in 0..args.warmup {
            once(&mut self.c)?;
        }
        (0..args.reps).map(|_| once(&mut self.c)).collect()
    }

    /// The last C of `reports` against the reference, within the
    /// allowance of the plan that ran (`--corrupt` first spoils it).
    fn check(&mut self, args: &RunArgs, reports: &[Report]) -> Result<Verdict> {
        corrupt_if_asked(args, &mut self.c);
        let growth = reports.last().map_or(1.0, Report::error_growth);
        let reference = match &mut self.reference {
            Some(kept) => kept,
            empty => empty.insert(Reference::new(self.a.as_ref(), self.b.as_ref())?),
        };
        Ok(reference.check(self.c.as_ref(), growth)?)
    }
}

/// A target's timed runs and its verdict; on a team of GPUs whose plan
/// keeps the matrices in host memory, that product's runs too (the
/// device-resident product's are `reports`).
struct Measured {
    reports: Vec<Report>,
    verdict: Verdict,
    hosted: Option<Vec<Report>>,
}

impl Measured {
    /// The table's row: medians of the runs, the plan that ran.
    fn into_record(self, args: &RunArgs, label: String, speedup_base: Option<f64>) -> Record {
        let Measured {
            reports,
            verdict,
            hosted,
        } = self;
        let sorted = |reports: &[Report], f: &dyn Fn(&Report) -> f64| {
            let mut v: Vec<f64> = reports.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let times = sorted(&reports, &|r| r.timing.compute_ms);
        let median_ms = median(&times);
        let middle = &reports[reports.len() / 2];
        let plan = &middle.plan;
        let problem = plan.problem;
        let flops = problem.flops();
        let copies = middle.timing.upload_ms.is_some();
        let upload_ms =
            copies.then(|| median(&sorted(&reports, &|r| r.timing.upload_ms.unwrap_or(0.0))));
        let download_ms =
            copies.then(|| median(&sorted(&reports, &|r| r.timing.download_ms.unwrap_or(0.0))));
        // What a caller waits for: the product with its copies, or on a
        // team of GPUs the host-resident product.
        let end_to_end_ms = match &hosted {
            Some(runs) => Some(median(&sorted(runs, &|r| r.timing.compute_ms))),
            None => copies.then(|| median(&sorted(&reports, &|r| r.timing.end_to_end_ms()))),
        };
        let kernel = match &hosted {
            Some(runs) => format!(
                "{}; host-resident (e2e): {}",
                middle.describe(),
                runs[runs.len() / 2].describe()
            ),
            None => middle.describe(),
        };
        let device = match &plan.spread {
            Some(spread) if spread.ranks => format!("mpi:{}", spread.processors.len()),
            Some(spread) => spread
                .processors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
            None => plan.device.to_string(),
        };
        let moved = middle.communication.as_ref();
        let levels = match moved {
            Some(m) if m.levels_across > 0 => Some(m.levels_across),
            _ => plan.fast.as_ref().map(|f| f.levels),
        };
        Record {
            algorithm: label,
            kernel,
            device,
            dtype: problem.dtype.name(),
            m: problem.m,
            k: problem.k,
            n: problem.n,
            threads: plan.threads,
            tile: plan.tile,
            reps: args.reps,
            median_ms,
            min_ms: times[0],
            max_ms: times[times.len() - 1],
            gflops: flops / (median_ms * 1e6),
            speedup: speedup_base.map_or(1.0, |base| base / median_ms),
            rel_error: verdict.rel_error,
            bound_ratio: verdict.bound_ratio,
            check: verdict.method.name(),
            ok: verdict.ok,
            accuracy: plan.accuracy.to_string(),
            accuracy_asked: plan.accuracy_asked.to_string(),
            precision: plan.precision.clone(),
            seed: args.seed,
            decades: args.decades,
            upload_ms,
            download_ms,
            end_to_end_gflops: end_to_end_ms.map(|ms| flops / (ms * 1e6)),
            levels,
            runs_as: plan.falls_back_to().map(|a| a.to_string()),
            extra_bytes: plan.fast.as_ref().map_or(0, |f| f.workspace_bytes),
            comm_words: moved.map(|m| m.words_per_processor),
            comm_bound_ratio: moved
                .map(|m| m.bound_ratio())
                .filter(|r| r.is_finite() && moved.is_some_and(|m| m.lower_bound > 0.0)),
        }
    }
}

/// A finished target, for `--progress`.
fn finished(r: &Record) -> String {
    format!(
        "{}: median {:.3} ms ({:.1} GFLOP/s){}, {}",
        r.algorithm,
        r.median_ms,
        r.gflops,
        r.end_to_end_gflops
            .map_or(String::new(), |g| format!(", e2e {g:.1} GFLOP/s")),
        if r.ok {
            "verified"
        } else {
            "FAILED verification"
        }
    )
}

/// One target on a team, by the route its plan takes. Where that keeps
/// the matrices in host memory (GPUs' bands or rows), the device-resident
/// product (A and B placed in their pieces once per run, the product
/// timed apart) runs too: its time is the row's, the host-resident
/// product's its end-to-end figure, and both results are verified.
fn on_team<T: Element>(
    args: &RunArgs,
    label: &str,
    team: &Team,
    opts: &GemmOptions,
    product: &mut Product<'_, T>,
) -> Result<Measured> {
    let problem = fastmm::Problem::of::<T>((product.a.rows(), product.a.cols(), product.b.cols()));
    let plan = team
        .plan(problem, opts)
        .with_context(|| format!("{label} {}", T::DTYPE))?;
    let hosted = plan
        .spread
        .as_ref()
        .is_some_and(|s| matches!(s.route, Route::Bands | Route::Rows));
    if !hosted {
        let reports = product.repeat(args, team, &plan, label)?;
        let verdict = product.check(args, &reports)?;
        return Ok(Measured {
            reports,
            verdict,
            hosted: None,
        });
    }
    let pieces = team.plan_pieces(problem, opts)?;
    let reports = product.repeat(args, team, &pieces, label)?;
    let resident = product.check(args, &reports)?;
    let hosted = product.repeat(args, team, &plan, label)?;
    let streamed = product.check(args, &hosted)?;
    // The worse of the two verdicts.
    let verdict = if !streamed.ok || (resident.ok && streamed.bound_ratio > resident.bound_ratio) {
        streamed
    } else {
        resident
    };
    Ok(Measured {
        reports,
        verdict,
        hosted: Some(hosted),
    })
}

/// `--corrupt`: one wrong element, to show that verification catches it.
fn corrupt_if_asked<T: Element>(args: &RunArgs, c: &mut Matrix<T>) {
    if args.corrupt && c.rows() > 0 && c.cols() > 0 {
        let wrong = c.get(0, 0).add(T::ONE);
        c.set(0, 0, wrong);
    }
}

/// Prints a small matrix; to stderr under `--json`, so stdout stays valid JSON.
fn show<T: Element>(args: &RunArgs, title: &str, m: &Matrix<T>) {
    let text = format!("{title}:\n{m:.4}");
    if args.json {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

/// The level given, and the one asked where the product (an algorithm
/// asked for by name) gives a looser one: "bound (asked native)".
fn accuracy_cell(r: &Record) -> String {
    let met = match (
        r.accuracy.parse::<Accuracy>(),
        r.accuracy_asked.parse::<Accuracy>(),
    ) {
        (Ok(given), Ok(asked)) => asked.met_by(given),
        _ => true,
    };
    if met {
        r.accuracy.clone()
    } else {
        format!("{} (asked {})", r.accuracy, r.accuracy_asked)
    }
}

pub(crate) fn print_table(args: &RunArgs, p: &Problem, records: &[Record], devices: &Devices) {
    println!(
        "fastmm run: C = A·B with A {}×{}, B {}×{}; seed {}, median of {} after {} warm-up; {}",
        p.m,
        p.k,
        p.k,
        p.n,
        args.seed,
        args.reps,
        args.warmup,
        machine_line(devices.gpus())
    );
    if devices.gpus().next().is_some() {
        println!("GPU GFLOP/s is the kernel alone (CUDA events); e2e counts the copies too");
    }
    // (header, right-aligned): columns sized to their longest entry, so a
    // long kernel label never shifts the columns after it.
    let columns: [(&str, bool); 16] = [
        ("algorithm", false),
        ("kernel", false),
        ("dtype", false),
        ("accuracy", false),
        ("threads", true),
        ("tile", true),
        ("levels", true),
        ("extra mem", true),
        ("median ms", true),
        ("GFLOP/s", true),
        ("e2e", true),
        ("speedup", true),
        ("rel error", true),
        ("err/bound", true),
        ("check", false),
        ("verdict", false),
    ];
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.algorithm.clone(),
                r.kernel.clone(),
                r.dtype.to_string(),
                accuracy_cell(r),
                r.threads.to_string(),
                r.tile.map_or_else(dash, |t| t.to_string()),
                r.levels.map_or_else(dash, |l| l.to_string()),
                match r.levels {
                    Some(levels) if levels > 0 => format_bytes(r.extra_bytes.into()),
                    _ => dash(),
                },
                format_ms(r.median_ms),
                format!("{:.2}", r.gflops),
                r.end_to_end_gflops.map_or_else(dash, |g| format!("{g:.2}")),
                match &r.runs_as {
                    // The same computation as its base: no speedup to claim.
                    Some(base) => format!("= {base}"),
                    None => format!("{:.2}x", r.speedup),
                },
                format!("{:.2e}", r.rel_error),
                format!("{:.2e}", r.bound_ratio),
                r.check.to_string(),
                if r.ok { "ok" } else { "WRONG" }.to_string(),
            ]
        })
        .collect();
    let width = |i: usize| {
        rows.iter()
            .map(|row| row[i].chars().count())
            .chain([columns[i].0.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns.len()).map(width).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
                match columns[i].1 {
                    true => format!("{pad}{cell}"),
                    false if i + 1 == cells.len() => cell.clone(),
                    false => format!("{cell}{pad}"),
                }
            })
            .collect();
        println!("{}", padded.join("  "));
    };
    line(columns.iter().map(|(h, _)| h.to_string()).collect());
    for row in rows {
        line(row);
    }
}
