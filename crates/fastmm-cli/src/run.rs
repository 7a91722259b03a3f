//! `fastmm run`: the seeds' experiment driver. It generates seeded random
//! matrices, runs each requested algorithm on its device, times it
//! (median of `--reps` after `--warmup`), verifies every result against
//! the allowance its plan states, and reports a table or JSON.

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fastmm::random::{seeded_rng, try_random_matrix_wide};
use fastmm::system::{available_memory_bytes, format_bytes};
use fastmm::verify::{verify_with_growth, Reference};
use fastmm::{Accuracy, DType, Element, GemmOptions, Matrix, Role, Team, TeamReport, Timing};
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
    /// 2·m·k·n.
    fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.k as f64 * self.n as f64
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
    for _ in 0..args.warmup {
        cluster.matmul(a.as_ref(), b.as_ref(), &opts)?;
    }
    let mut times = Vec::with_capacity(args.reps);
    let mut last = None;
    for _ in 0..args.reps {
        let (c, report) = cluster
            .matmul(a.as_ref(), b.as_ref(), &opts)
            .with_context(|| format!("{label} failed"))?;
        times.push(report.compute_ms);
        last = Some((c, report));
    }
    let (c, report) = last.context("no repetition ran")?;
    let Some(mut c) = c else {
        return Ok(None);
    };
    corrupt_if_asked(args, &mut c);
    // The local products' Strassen levels (a classical distribution), or
    // those run across the ranks (CAPS).
    let growth = fastmm::Context::cpu()
        .plan::<T>((p.m, p.k, p.n), true, &opts)
        .map_or(1.0, |plan| plan.error_growth)
        .max(report.error_growth);
    let verdict = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)?;
    let (pm, pn, pk) = report.grid;
    let kernel = if report.breadth_first {
        format!(
            "{} across {} ranks (CAPS): 1 breadth-first level ({}), then the local algorithm; {} words received per rank, {} of a classical product",
            target.algorithm,
            report.processors,
            match report.processors / 7 {
                1 => "a product per rank".to_string(),
                q => format!("a product per group of {q} ranks, classical within it"),
            },
            report.words_per_processor,
            bound_text(report.bound_ratio())
        )
    } else if report.levels_across > 0 {
        format!(
            "{} across {} ranks (CAPS): {} levels, rows in chunks; {} words received per rank, {} of a classical product",
            target.algorithm,
            report.processors,
            report.levels_across,
            report.words_per_processor,
            bound_text(report.bound_ratio())
        )
    } else {
        format!(
            "distributed {pm}×{pn}×{pk} over {} ranks{}; {} words received per rank, {}",
            report.processors,
            if report.pieces_on_gpus {
                format!(
                    ", pieces on each rank's GPU (NCCL between them; {:.1} ms to stage them, not timed)",
                    report.staging_ms
                )
            } else if report.local_gpus {
                ", pieces in host memory, local products on each rank's GPU".to_string()
            } else {
                String::new()
            },
            report.words_per_processor,
            bound_text(report.bound_ratio())
        )
    };
    let device = format!("mpi:{}", report.processors);
    let record = team_record::<T>(args, p, device, label, times, verdict, kernel, None);
    Ok(Some(Record {
        comm_words: Some(report.words_per_processor),
        comm_bound_ratio: Some(report.bound_ratio()).filter(|r| r.is_finite()),
        ..record
    }))
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
    let shape = (p.m, p.k, p.n);
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
    let mut c = Matrix::filled(p.m, p.n, T::poison());
    let flops = 2.0 * p.m as f64 * p.k as f64 * p.n as f64;
    let mut records: Vec<Record> = Vec::with_capacity(targets.len());
    // A·B's reference, worked out for the first target checked and kept
    // for the others.
    let mut reference: Option<Reference<'_, T>> = None;
    for target in targets {
        if let Some(last) = records.last() {
            progress(&finished(last));
        }
        let label = target.label();
        if let Some(team) = target.team {
            let team = devices.team(team)?;
            let speedup_base = records.first().map(|r: &Record| r.median_ms);
            records.push(run_on_team(
                args,
                p,
                target,
                team,
                (&a, &b),
                base_opts,
                speedup_base,
            )?);
            continue;
        }
        let ctx = devices.get(target.device)?;
        let mut opts = GemmOptions {
            algorithm: target.algorithm,
            ..base_opts
        };
        let plan = ctx
            .plan::<T>(shape, true, &opts)
            .with_context(|| format!("{label} {}", T::DTYPE))?;
        // The schedule the plan chose from the free memory is the one
        // that runs, so the label names what ran.
        if let Some(fast) = &plan.fast {
            opts.variant = Some(fast.variant);
        }
        let multiply = |c: &mut Matrix<T>| -> Result<Timing> {
            c.as_mut_slice().fill(T::poison());
            ctx.gemm_timed(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &opts)
                .with_context(|| format!("{label} failed"))
        };
        for _ in 0..args.warmup {
            multiply(&mut c)?;
        }
        let runs = (0..args.reps)
            .map(|_| multiply(&mut c))
            .collect::<Result<Vec<Timing>>>()?;
        let sorted = |f: &dyn Fn(&Timing) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let times = sorted(&|t| t.compute_ms);
        let median_ms = median(&times);
        let copies = runs[0].upload_ms.is_some();
        let upload_ms = copies.then(|| median(&sorted(&|t| t.upload_ms.unwrap_or(0.0))));
        let download_ms = copies.then(|| median(&sorted(&|t| t.download_ms.unwrap_or(0.0))));
        let end_to_end_ms = copies.then(|| median(&sorted(&Timing::end_to_end_ms)));
        if args.corrupt {
            let wrong = c.get(0, 0).add(T::ONE);
            c.set(0, 0, wrong);
        }
        let reference = match &mut reference {
            Some(kept) => kept,
            empty => empty.insert(Reference::new(a.as_ref(), b.as_ref())?),
        };
        let verdict = reference.check(c.as_ref(), plan.error_growth)?;
        if printable {
            show(args, &format!("C = A·B ({label}, {})", T::DTYPE), &c);
        }
        let speedup = records
            .first()
            .map_or(1.0, |first| first.median_ms / median_ms);
        // An out-of-core product's label says how it streamed: the bytes
        // each way and the share of the time the GPU spent in products.
        let kernel = match &runs[runs.len() / 2].streamed {
            Some(s) => format!(
                "{}; {} up, {} down; products {:.1}% of the time; host staging {:.2} s in, {:.2} s out",
                plan.label(),
                format_bytes(s.upload_bytes.into()),
                format_bytes(s.download_bytes.into()),
                100.0 * s.products_fraction,
                s.staging_seconds.0,
                s.staging_seconds.1
            ),
            None => plan.label(),
        };
        // The emulated product's route: its moduli and bits, and where
        // accuracy sent elements or the whole product to the native path.
        let kernel = match &runs[runs.len() / 2].emulation {
            Some(tally) => format!("{kernel}; {}", tally.label()),
            None => kernel,
        };
        records.push(Record {
            algorithm: label,
            kernel,
            device: target.device.to_string(),
            dtype: T::DTYPE.name(),
            m: p.m,
            k: p.k,
            n: p.n,
            threads: plan.threads,
            tile: plan.tile,
            reps: args.reps,
            median_ms,
            min_ms: times[0],
            max_ms: times[times.len() - 1],
            gflops: flops / (median_ms * 1e6),
            speedup,
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
            levels: plan.fast.as_ref().map(|f| f.levels),
            runs_as: plan.falls_back_to().map(|a| a.to_string()),
            extra_bytes: plan.fast.as_ref().map_or(0, |f| f.workspace_bytes),
            comm_words: None,
            comm_bound_ratio: None,
        });
    }
    if let Some(last) = records.last() {
        progress(&finished(last));
    }
    Ok(records)
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

/// One target on a team: A and B distributed once in the plan's layout,
/// the distributed product timed (communication included, distributing
/// and collecting not), C collected and verified. Strassen and Winograd
/// run their levels across the devices where they apply (`Team::gemm`
/// reports it), timed the same way.
fn run_on_team<T: Element>(
    args: &RunArgs,
    p: &Problem,
    target: &Target,
    team: &Team,
    (a, b): (&Matrix<T>, &Matrix<T>),
    base_opts: GemmOptions,
    speedup_base: Option<f64>,
) -> Result<Record> {
    let label = target.label();
    let shape = (p.m, p.k, p.n);
    let opts = GemmOptions {
        algorithm: target.algorithm,
        ..base_opts
    };
    // Each device's product is at most the whole one: the one-device plan's
    // allowance bounds theirs (and the levels across devices are levels of
    // the same recursion).
    let growth = team
        .context(0)
        .plan::<T>(shape, true, &opts)
        .map_or(1.0, |plan| plan.error_growth);
    let hosted = |c: &mut Matrix<T>| -> Result<(TeamReport, f64)> {
        c.as_mut_slice().fill(T::poison());
        let start = std::time::Instant::now();
        let report = team
            .gemm(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &opts)
            .with_context(|| format!("{label} on host matrices failed"))?;
        Ok((report, start.elapsed().as_secs_f64() * 1e3))
    };
    let mut c = Matrix::try_filled(p.m, p.n, T::poison())?;
    if target.algorithm.is_fast() {
        let (first, first_ms) = hosted(&mut c)?;
        if first.levels_across > 0 {
            let mut runs = vec![(first, first_ms)];
            if args.warmup > 0 {
                runs.clear();
                for _ in 1..args.warmup {
                    hosted(&mut c)?;
                }
            }
            while runs.len() < args.reps {
                runs.push(hosted(&mut c)?);
            }
            corrupt_if_asked(args, &mut c);
            let verdict = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)?;
            let report = runs
                .last()
                .map(|r| r.0.clone())
                .context("no repetition ran")?;
            let mut walls: Vec<f64> = runs.iter().map(|r| r.1).collect();
            walls.sort_by(f64::total_cmp);
            let times: Vec<f64> = runs.iter().map(|r| r.0.compute_ms).collect();
            let kernel = format!(
                "{} across {} devices (CAPS): {} levels, rows in chunks, sums local; {} words received per device",
                target.algorithm, report.processors, report.levels_across, report.words_per_processor
            );
            let record = team_record::<T>(
                args,
                p,
                team_devices(team),
                label,
                times,
                verdict,
                kernel,
                speedup_base,
            );
            return Ok(Record {
                end_to_end_gflops: Some(p.flops() / (median(&walls) * 1e6)),
                levels: Some(report.levels_across),
                comm_words: Some(report.words_per_processor),
                comm_bound_ratio: None,
                ..record
            });
        }
    }
    let plan = team
        .plan::<T>(shape)
        .with_context(|| format!("{label} {}", T::DTYPE))?;
    let da = team.distribute(&plan, Role::A, a.as_ref())?;
    let db = team.distribute(&plan, Role::B, b.as_ref())?;
    let multiply = || {
        team.multiply(&da, &db, &opts)
            .with_context(|| format!("{label} failed"))
    };
    for _ in 0..args.warmup {
        multiply()?;
    }
    let mut runs = Vec::with_capacity(args.reps);
    let mut last = None;
    for _ in 0..args.reps {
        let (c, report) = multiply()?;
        runs.push(report);
        last = Some(c);
    }
    let report = runs.last().cloned().context("no repetition ran")?;
    let times: Vec<f64> = runs.iter().map(|r| r.compute_ms).collect();
    c = team.collect(&last.context("no repetition ran")?)?;
    corrupt_if_asked(args, &mut c);
    let mut verdict = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)?;
    drop((da, db));
    // The same product of host matrices (`Team::gemm`): on GPUs streamed
    // through all of them, copies included; its result verified too. The
    // warm-up also pins the team's staging buffers, which it keeps.
    for _ in 0..args.warmup {
        hosted(&mut c)?;
    }
    let mut walls = Vec::with_capacity(args.reps);
    let mut shares = Vec::new();
    let mut b_loaded_ms = None;
    for _ in 0..args.reps {
        let (r, ms) = hosted(&mut c)?;
        walls.push(ms);
        shares = r.shares;
        b_loaded_ms = r.b_loaded_ms;
    }
    walls.sort_by(f64::total_cmp);
    let hosted_ms = (!walls.is_empty()).then(|| median(&walls));
    if hosted_ms.is_some() {
        let second = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)?;
        if !second.ok || second.bound_ratio > verdict.bound_ratio {
            verdict = second;
        }
    }
    let (pm, pn, pk) = report.grid;
    let kernel = format!(
        "distributed {pm}×{pn}×{pk} over {} devices; {} words received per device, {}{}",
        report.processors,
        report.words_per_processor,
        bound_text(report.bound_ratio()),
        match shares.len() {
            0 => String::new(),
            _ => format!(
                "; host-resident (e2e){}: per device bands/first product/staging/products/done ms {}",
                b_loaded_ms.map_or(String::new(), |ms| format!(
                    ", B on every GPU at {ms:.0} ms"
                )),
                shares
                    .iter()
                    .map(|s| format!(
                        "{}/{:.0}/{:.0}/{:.0}/{:.0}",
                        s.bands, s.first_band_ms, s.staging_ms, s.products_ms, s.finished_ms
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    );
    let record = team_record::<T>(
        args,
        p,
        team_devices(team),
        label,
        times,
        verdict,
        kernel,
        speedup_base,
    );
    Ok(Record {
        end_to_end_gflops: hosted_ms.map(|ms| p.flops() / (ms * 1e6)),
        comm_words: Some(report.words_per_processor),
        comm_bound_ratio: Some(report.bound_ratio()).filter(|r| r.is_finite()),
        ..record
    })
}

/// Words over their lower bound, for the kernel column.
fn bound_text(ratio: f64) -> String {
    if ratio.is_finite() {
        format!("{ratio:.2}× the lower bound")
    } else {
        "the lower bound is 0 here".into()
    }
}

/// A team's devices, comma-separated.
fn team_devices(team: &Team) -> String {
    team.devices()
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// `--corrupt`: one wrong element, to show that verification catches it.
fn corrupt_if_asked<T: Element>(args: &RunArgs, c: &mut Matrix<T>) {
    if args.corrupt && c.rows() > 0 && c.cols() > 0 {
        let wrong = c.get(0, 0).add(T::ONE);
        c.set(0, 0, wrong);
    }
}

/// A team's row: the median of `times` (ms) and the verdict.
#[allow(clippy::too_many_arguments)]
fn team_record<T: Element>(
    args: &RunArgs,
    p: &Problem,
    device: String,
    label: String,
    mut times: Vec<f64>,
    verdict: fastmm::verify::Verdict,
    kernel: String,
    speedup_base: Option<f64>,
) -> Record {
    times.sort_by(f64::total_cmp);
    let median_ms = median(&times);
    // A team's sums are split over its depth groups (and Strassen's
    // levels across devices): the classical bound, for floats.
    let asked = args
        .options
        .options()
        .map(|o| o.accuracy)
        .unwrap_or_default();
    let (given, precision) = if T::DTYPE.is_integer() {
        (Accuracy::Native, "exact (wrapping integer sums)")
    } else {
        (
            Accuracy::Bound,
            "sums split over the team (classical bound)",
        )
    };
    Record {
        algorithm: label,
        kernel,
        device,
        dtype: T::DTYPE.name(),
        m: p.m,
        k: p.k,
        n: p.n,
        threads: 1,
        tile: None,
        reps: times.len(),
        median_ms,
        min_ms: times.first().copied().unwrap_or(f64::NAN),
        max_ms: times.last().copied().unwrap_or(f64::NAN),
        gflops: p.flops() / (median_ms * 1e6),
        speedup: speedup_base.map_or(1.0, |base| base / median_ms),
        rel_error: verdict.rel_error,
        bound_ratio: verdict.bound_ratio,
        check: verdict.method.name(),
        ok: verdict.ok,
        accuracy: given.to_string(),
        accuracy_asked: asked.to_string(),
        precision: precision.to_string(),
        seed: args.seed,
        decades: args.decades,
        upload_ms: None,
        download_ms: None,
        end_to_end_gflops: None,
        levels: None,
        runs_as: None,
        extra_bytes: 0,
        comm_words: None,
        comm_bound_ratio: None,
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
