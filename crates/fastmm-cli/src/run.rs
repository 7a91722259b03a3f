//! `fastmm run`: the seeds' experiment driver. It generates seeded random
//! matrices, runs each requested algorithm on its device, times it
//! (median of `--reps` after `--warmup`), verifies every result against
//! the allowance its plan states, and reports a table or JSON.

use anyhow::{bail, Result};
use clap::Args;
use fastmm::random::{seeded_rng, try_seeded_matrix_wide};
use fastmm::{DType, Element, GemmOptions, Machine, Matrix};

use crate::common::{check_memory, parse_types, AlgoArgs, Devices, Outcome, RunType, Target};
use crate::measurement::{
    complex_record, finished, print_table, Inputs, Measured, Product, Record,
};
use fastmm::complex::ComplexMatrix;

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
    /// Element types: a comma list of f32, f64, i32, i64, c64 and c128
    /// (complex: four real products at `native`, 3M at relaxed levels), or
    /// `all` (the four real types).
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
    /// What every row of this run shares.
    pub(crate) fn inputs(&self) -> Inputs {
        Inputs {
            reps: self.reps,
            warmup: self.warmup,
            seed: self.seed,
            decades: self.decades,
            corrupt: self.corrupt,
        }
    }

    /// The arguments `argv` gives `run`, the rest at their defaults.
    pub(crate) fn from_argv(argv: &[&str]) -> Result<RunArgs> {
        use clap::Parser as _;
        Ok(RunCommand::try_parse_from(std::iter::once("fastmm").chain(argv.iter().copied()))?.run)
    }
}

/// (m, k, n).
type Shape = (usize, usize, usize);

pub fn run(args: &RunArgs) -> Result<Outcome> {
    if args.distributed {
        return run_distributed(args);
    }
    let mut devices = Devices::default();
    let (shape, records) = measure(args, &mut devices)?;
    report(args, shape, &records, &devices)
}

/// `records` printed as JSON or as the table; failures counted.
fn report(args: &RunArgs, shape: Shape, records: &[Record], devices: &Devices) -> Result<Outcome> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(records)?);
    } else {
        print_table(&args.inputs(), shape, records, devices);
    }
    Ok(Outcome::of_failures(
        records.iter().filter(|r| !r.ok).count(),
    ))
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
    let machine = Machine::from(cluster);
    let Some(cluster) = machine.cluster() else {
        bail!("the MPI job's cluster is out of reach on this thread");
    };
    match run_ranks(args, &machine, cluster) {
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            let text = format!("{e:#}");
            crate::common::rank_failed(cluster.rank(), cluster.size(), &text);
            cluster.abort(1)
        }
    }
}

#[cfg(feature = "mpi")]
fn run_ranks(args: &RunArgs, machine: &Machine, cluster: &fastmm::Cluster) -> Result<Outcome> {
    // Every rank makes its inputs from the same arguments (the seed too).
    let line: Vec<String> = std::env::args().skip(1).collect();
    cluster.check_same("arguments", &line)?;
    let mut ranks = Devices::all_on(machine.clone());
    let (shape, records) = measure(args, &mut ranks)?;
    if cluster.rank() != 0 {
        return Ok(Outcome::AllCorrect);
    }
    report(args, shape, &records, &Devices::default())
}

/// The shape `args` names, checked.
fn shape_of(args: &RunArgs) -> Result<Shape> {
    let shape = (
        args.m.unwrap_or(args.size),
        args.k.unwrap_or(args.size),
        args.n.unwrap_or(args.size),
    );
    for (name, value) in [("m", shape.0), ("k", shape.1), ("n", shape.2)] {
        if value == 0 {
            bail!("size {name} must be at least 1");
        }
    }
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    Ok(shape)
}

/// An error where floats of `decades` decades each way would overflow
/// `dtype` in a product of depth k: entries reach 10^D, so sums of k
/// products reach k·10^(2D), and every product of them, native or not,
/// would give infinities that no verification can judge.
fn decades_fit(dtype: DType, decades: f64, k: usize) -> Result<()> {
    if dtype.is_integer() || decades <= 0.0 {
        return Ok(());
    }
    let limit = dtype.largest().log10();
    let reach = 2.0 * decades + (k as f64).log10();
    if reach >= limit {
        bail!(
            "--decades {decades} overflows {}: sums of {k} products of entries up to 10^{decades} \
             reach 10^{reach:.1}, beyond its largest value 10^{limit:.1} (at this depth use \
             --decades below {:.1})",
            dtype.name(),
            (limit - (k as f64).log10()) / 2.0
        );
    }
    Ok(())
}

/// A and B of `shape`, seeded: the same on every run (and every rank) with
/// the same arguments.
fn operands<T: Element>(args: &RunArgs, (m, k, n): Shape) -> Result<(Matrix<T>, Matrix<T>)> {
    decades_fit(T::DTYPE, args.decades, k)?;
    let mut rng = seeded_rng(args.seed);
    let a = try_seeded_matrix_wide(m, k, args.decades, &mut rng)?;
    let b = try_seeded_matrix_wide(k, n, args.decades, &mut rng)?;
    Ok((a, b))
}

/// Runs, times and verifies every algorithm × dtype that `args` names, on
/// one problem, opening the devices they run on in `devices`: the records
/// `run` prints (and `bench` and `tune` collect).
/// On the ranks of an MPI job other than 0, no records.
pub(crate) fn measure(args: &RunArgs, devices: &mut Devices) -> Result<(Shape, Vec<Record>)> {
    let shape = shape_of(args)?;
    let targets = args.options.targets(&args.algo)?;
    let dtypes = parse_types(&args.dtype)?;
    let base_opts = args.options.options()?;
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for kind in dtypes {
        let (dtype, parts) = match kind {
            RunType::Real(dtype) => (dtype, 1),
            RunType::Complex(part) => (part, 2),
        };
        // An algorithm that does not take this type (cuBLAS and emulated
        // take floats) is left out of its rows, with a note.
        let (targets, unsupported): (Vec<Target>, Vec<Target>) =
            targets.iter().partition(|t| t.algorithm.supports(dtype));
        skipped.extend(unsupported.iter().map(|t| format!("{} {dtype}", t.label())));
        if targets.is_empty() {
            continue;
        }
        check_memory(shape, dtype, parts)?;
        let typed = match (kind, dtype) {
            (RunType::Complex(_), DType::F32) => {
                run_complex::<f32>(args, shape, &targets, base_opts, devices)
            }
            (RunType::Complex(_), _) => {
                run_complex::<f64>(args, shape, &targets, base_opts, devices)
            }
            (_, DType::F32) => run_typed::<f32>(args, shape, &targets, base_opts, devices),
            (_, DType::F64) => run_typed::<f64>(args, shape, &targets, base_opts, devices),
            (_, DType::I32) => run_typed::<i32>(args, shape, &targets, base_opts, devices),
            (_, DType::I64) => run_typed::<i64>(args, shape, &targets, base_opts, devices),
        };
        records.extend(typed?);
    }
    if !skipped.is_empty() {
        let note = format!(
            "{} (cublas and emulated multiply floats; integers are exact natively)",
            skipped.join(", ")
        );
        if records.is_empty() && devices.holds_results() {
            bail!("nothing to run: {note}");
        }
        if devices.holds_results() {
            eprintln!("note: skipped {note}");
        }
    }
    Ok((shape, records))
}

/// Every target's complex product of seeded complex A and B (parts drawn
/// as the real types' are), each as real products of T on its executor,
/// timed and verified (see [`complex_record`]).
fn run_complex<T: Element>(
    args: &RunArgs,
    (m, k, n): Shape,
    targets: &[Target],
    base_opts: GemmOptions,
    devices: &mut Devices,
) -> Result<Vec<Record>> {
    decades_fit(T::DTYPE, args.decades, k)?;
    let mut rng = seeded_rng(args.seed);
    let mut random = |rows, cols| try_seeded_matrix_wide::<T>(rows, cols, args.decades, &mut rng);
    let a = ComplexMatrix::new(random(m, k)?, random(m, k)?)?;
    let b = ComplexMatrix::new(random(k, n)?, random(k, n)?)?;
    let form = fastmm::complex::ComplexForm::for_level(base_opts.accuracy);
    let inputs = args.inputs();
    let mut records: Vec<Record> = Vec::with_capacity(targets.len());
    for target in targets {
        let opts = GemmOptions {
            algorithm: target.algorithm,
            ..base_opts
        };
        let base = records.first().map(|r| r.median_ms);
        let (machine, label) = devices.machine(target)?;
        let holds_c = machine.holds_results();
        let how = (&opts, form);
        records.extend(complex_record(
            &inputs,
            &machine,
            (&a, &b),
            how,
            (label, holds_c, base),
        )?);
    }
    Ok(records)
}

fn run_typed<T: Element>(
    args: &RunArgs,
    shape: Shape,
    targets: &[Target],
    base_opts: GemmOptions,
    devices: &mut Devices,
) -> Result<Vec<Record>> {
    let started = std::time::Instant::now();
    let prints = devices.holds_results();
    let progress = |what: &str| {
        if args.progress && prints {
            eprintln!("[{:7.1} s] {what}", started.elapsed().as_secs_f64());
        }
    };
    let (a, b) = operands::<T>(args, shape)?;
    let mut product = Product::new(&a, &b)?;
    progress(&format!("inputs {} ready", product.problem()));
    let printable = prints
        && args.print
        && [shape.0, shape.1, shape.2]
            .iter()
            .all(|&d| d <= PRINT_MAX_DIM);
    if printable {
        show(args, &format!("A ({})", T::DTYPE), &a);
        show(args, &format!("B ({})", T::DTYPE), &b);
    }
    let mut records: Vec<Record> = Vec::with_capacity(targets.len());
    for target in targets {
        if let Some(last) = records.last() {
            progress(&finished(last));
        }
        let opts = GemmOptions {
            algorithm: target.algorithm,
            ..base_opts
        };
        let speedup_base = records.first().map(|r: &Record| r.median_ms);
        let (machine, label) = devices.machine(target)?;
        // A cluster's errors name the ranks that failed, first.
        let plan = product.plan(&machine, &opts, &label)?;
        let record = match machine.resident_twin(&plan, &opts)? {
            Some(resident) => {
                beside_resident(args, &label, &machine, (&plan, &resident), &mut product)?
            }
            None => {
                let reports = product.repeat(&args.inputs(), &machine, &plan, &label)?;
                if !machine.holds_results() {
                    continue;
                }
                let verdict = product.check(&args.inputs(), &reports)?;
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
        records.push(record.into_record(&args.inputs(), label, speedup_base));
    }
    if let Some(last) = records.last() {
        progress(&finished(last));
    }
    Ok(records)
}

/// A plan that keeps the matrices in host memory (a team's GPU bands or
/// rows) beside its resident twin (A and B placed in their pieces once
/// per run, the product timed apart): the twin's time is the row's, the
/// host-resident product's its end-to-end figure, and both results are
/// verified.
fn beside_resident<T: Element>(
    args: &RunArgs,
    label: &str,
    machine: &Machine,
    (plan, pieces): (&fastmm::Plan, &fastmm::Plan),
    product: &mut Product<'_, T>,
) -> Result<Measured> {
    let reports = product.repeat(&args.inputs(), machine, pieces, label)?;
    let resident = product.check(&args.inputs(), &reports)?;
    let hosted = product.repeat(&args.inputs(), machine, plan, label)?;
    let streamed = product.check(&args.inputs(), &hosted)?;
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

/// Prints a small matrix; to stderr under `--json`, so stdout stays valid JSON.
fn show<T: Element>(args: &RunArgs, title: &str, m: &Matrix<T>) {
    let text = format!("{title}:\n{m:.4}");
    if args.json {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}
