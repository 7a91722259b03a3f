//! A product measured as users see it, whatever executes it: the
//! operands and C of one problem ([`Product`]), planned and executed on
//! any [`Executor`], repeated and verified against one reference; the
//! timed reports and verdict ([`Measured`]); the row they give
//! ([`Record`], what `--json` prints); and the one table that prints the
//! rows for `run`, `bench`, `demo` and the cluster's rank 0.

use anyhow::{bail, Context as _, Result};
use fastmm::complex::{ComplexForm, ComplexMatrix};
use fastmm::system::format_bytes;
use fastmm::verify::{Reference, Verdict};
use fastmm::{Accuracy, Clock, Element, Executor, Gemm, GemmOptions, Matrix, Plan, Report};
use serde::Serialize;

use crate::common::{format_ms, machine_line, median, Devices};

/// What every row of one run shares: its repetitions and its inputs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inputs {
    /// Timed repetitions (the median is reported).
    pub reps: usize,
    /// Untimed runs before them.
    pub warmup: usize,
    /// The seed of A and B.
    pub seed: u64,
    /// The decades A's and B's floats span each way.
    pub decades: f64,
    /// One element of each C spoiled before it is checked (`--corrupt`).
    pub corrupt: bool,
}

/// One problem's operands, its C, and A·B's reference, shared by the
/// targets that multiply it.
pub(crate) struct Product<'a, T: Element> {
    a: &'a Matrix<T>,
    b: &'a Matrix<T>,
    /// The last product's C.
    pub c: Matrix<T>,
    /// A·B's reference, worked out for the first target checked and kept
    /// for the others.
    reference: Option<Reference<'a, T>>,
}

impl<'a, T: Element> Product<'a, T> {
    /// A·B, its C poisoned until a product writes it.
    pub(crate) fn new(a: &'a Matrix<T>, b: &'a Matrix<T>) -> Result<Self> {
        Ok(Product {
            a,
            b,
            c: Matrix::try_filled(a.rows(), b.cols(), T::poison())?,
            reference: None,
        })
    }

    /// The problem it poses (β = 0).
    pub(crate) fn problem(&self) -> fastmm::Problem {
        fastmm::Problem::of::<T>((self.a.rows(), self.a.cols(), self.b.cols()))
    }

    /// `opts` planned by `x` for this problem; errors name the target
    /// after their own text (a cluster's name the ranks that failed
    /// first).
    pub(crate) fn plan(&self, x: &impl Executor, opts: &GemmOptions, label: &str) -> Result<Plan> {
        x.plan(self.problem(), opts)
            .map_err(|e| anyhow::anyhow!("{e} ({label} {})", T::DTYPE))
    }

    /// `plan` executed `--warmup` times untimed and `--reps` times timed
    /// (the benchmark clock), C poisoned before each.
    pub(crate) fn repeat(
        &mut self,
        inputs: &Inputs,
        x: &impl Executor,
        plan: &Plan,
        label: &str,
    ) -> Result<Vec<Report>> {
        let (a, b) = (self.a.as_ref(), self.b.as_ref());
        let once = |c: &mut Matrix<T>| -> Result<Report> {
            c.fill(T::poison());
            let report = x
                .execute_clocked(plan, Gemm::new(a, b, c.as_mut()), Clock::Benchmark)
                .with_context(|| format!("{label} failed"))?;
            // The plan shown is the plan that ran: only data a plan cannot
            // know (NaN or ∞ under a fast algorithm) changes it.
            if report.plan != *plan && report.plan.algorithm == plan.algorithm {
                bail!(
                    "{label}: {} ran another plan than the one it was given",
                    x.describe()
                );
            }
            Ok(report)
        };
        for _ in 0..inputs.warmup {
            once(&mut self.c)?;
        }
        (0..inputs.reps).map(|_| once(&mut self.c)).collect()
    }

    /// The last C of `reports` against the reference, within the
    /// allowance of the plan that ran (`--corrupt` first spoils it).
    pub(crate) fn check(&mut self, inputs: &Inputs, reports: &[Report]) -> Result<Verdict> {
        corrupt_if_asked(inputs, &mut self.c);
        let growth = reports.last().map_or(1.0, Report::error_growth);
        let reference = match &mut self.reference {
            Some(kept) => kept,
            empty => empty.insert(Reference::new(self.a.as_ref(), self.b.as_ref())?),
        };
        Ok(reference.check(self.c.as_ref(), growth)?)
    }
}

/// `--corrupt`: one wrong element, to show that verification catches it.
fn corrupt_if_asked<T: Element>(inputs: &Inputs, c: &mut Matrix<T>) {
    if inputs.corrupt && c.rows() > 0 && c.cols() > 0 {
        let wrong = c.get(0, 0).add(T::ONE);
        c.set(0, 0, wrong);
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

/// A target's timed runs and its verdict; on a team of GPUs whose plan
/// keeps the matrices in host memory, that product's runs too (the
/// device-resident product's are `reports`).
pub(crate) struct Measured {
    pub reports: Vec<Report>,
    pub verdict: Verdict,
    pub hosted: Option<Vec<Report>>,
}

impl Measured {
    /// The table's row: medians of the runs, the plan that ran.
    pub(crate) fn into_record(
        self,
        inputs: &Inputs,
        label: String,
        speedup_base: Option<f64>,
    ) -> Record {
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
        let device = device_of(plan);
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
            reps: inputs.reps,
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
            seed: inputs.seed,
            decades: inputs.decades,
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

/// Where a plan runs: its device, its team's GPUs, or `mpi:P`.
fn device_of(plan: &Plan) -> String {
    match &plan.spread {
        Some(spread) if spread.ranks => format!("mpi:{}", spread.processors.len()),
        Some(spread) => spread
            .processors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
        None => plan.device.to_string(),
    }
}

/// A finished target, for `--progress`.
pub(crate) fn finished(r: &Record) -> String {
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

/// The table of `records`, under a line that names the problem, the
/// inputs and the machine: one printer for every executor's rows.
pub(crate) fn print_table(
    inputs: &Inputs,
    (m, k, n): (usize, usize, usize),
    records: &[Record],
    devices: &Devices,
) {
    println!(
        "fastmm run: C = A·B with A {}×{}, B {}×{}; seed {}, median of {} after {} warm-up; {}",
        m,
        k,
        k,
        n,
        inputs.seed,
        inputs.reps,
        inputs.warmup,
        machine_line(devices.gpus())
    );
    if !devices.gpus().is_empty() {
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

/// A complex product C = A·B of `form` on `x`, run `--warmup` times and
/// timed `--reps` times on the host clock (a GPU's include the copies of
/// each real product's parts), C poisoned before each; its last C checked
/// through the real embedding when `holds_c` (an MPI job's rank 0, or a
/// single process). The row it gives, or `None` where C is elsewhere.
pub(crate) fn complex_record<T: Element>(
    inputs: &Inputs,
    x: &impl Executor,
    (a, b): (&ComplexMatrix<T>, &ComplexMatrix<T>),
    (opts, form): (&GemmOptions, ComplexForm),
    (label, holds_c, speedup_base): (String, bool, Option<f64>),
) -> Result<Option<Record>> {
    let ((m, k), n) = (a.shape(), b.shape().1);
    let mut c = ComplexMatrix::try_zeros(m, n)?;
    let once = |c: &mut ComplexMatrix<T>| -> Result<(f64, Vec<Report>)> {
        let mut parts = c.as_split_mut();
        parts.re.fill(T::poison());
        parts.im.fill(T::poison());
        let start = std::time::Instant::now();
        let reports = fastmm::complex::multiply(x, a.as_split(), b.as_split(), parts, form, opts)
            .with_context(|| format!("{label} failed"))?;
        Ok((start.elapsed().as_secs_f64() * 1e3, reports))
    };
    for _ in 0..inputs.warmup {
        once(&mut c)?;
    }
    let mut runs = (0..inputs.reps)
        .map(|_| once(&mut c))
        .collect::<Result<Vec<_>>>()?;
    if !holds_c {
        return Ok(None);
    }
    if inputs.corrupt && m > 0 && n > 0 {
        let mut parts = c.as_split_mut();
        let wrong = parts.re.get(0, 0).add(T::ONE);
        parts.re.set(0, 0, wrong);
    }
    let plan = runs[0].1[0].plan.clone();
    let verdict = fastmm::complex::verify(a, b, &c, plan.error_growth, form)?;
    runs.sort_by(|x, y| x.0.total_cmp(&y.0));
    let times: Vec<f64> = runs.iter().map(|r| r.0).collect();
    let median_ms = median(&times);
    let flops = 8.0 * m as f64 * k as f64 * n as f64;
    let name = if T::DTYPE == fastmm::DType::F32 {
        "c64"
    } else {
        "c128"
    };
    let middle = &runs[runs.len() / 2].1;
    Ok(Some(Record {
        algorithm: label,
        // One report is the executor's own complex product (cuBLAS's).
        kernel: match middle.len() {
            1 => middle[0].describe(),
            _ => format!("{} real products: {}", form.name(), middle[0].describe()),
        },
        device: device_of(&plan),
        dtype: name,
        m,
        k,
        n,
        threads: plan.threads,
        tile: plan.tile,
        reps: inputs.reps,
        median_ms,
        min_ms: times[0],
        max_ms: times[times.len() - 1],
        gflops: flops / (median_ms * 1e6),
        speedup: speedup_base.map_or(1.0, |base| base / median_ms),
        rel_error: verdict.rel_error,
        bound_ratio: verdict.bound_ratio,
        check: verdict.method.name(),
        ok: verdict.ok,
        // 3M meets a relaxed level only (normwise): the level asked.
        accuracy: match form {
            ComplexForm::Classical => plan.accuracy.to_string(),
            ComplexForm::Gauss => format!("{} (3m)", plan.accuracy_asked),
        },
        accuracy_asked: plan.accuracy_asked.to_string(),
        precision: format!("{}; {}", form.name(), plan.precision),
        seed: inputs.seed,
        decades: inputs.decades,
        upload_ms: None,
        download_ms: None,
        end_to_end_gflops: None,
        levels: plan.fast.as_ref().map(|f| f.levels),
        runs_as: plan.falls_back_to().map(|a| a.to_string()),
        extra_bytes: plan.fast.as_ref().map_or(0, |f| f.workspace_bytes),
        comm_words: None,
        comm_bound_ratio: None,
    }))
}
