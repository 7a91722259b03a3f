//! One way to run a product, whatever runs it: one device ([`Context`]),
//! the devices of one host ([`Team`]) or the ranks of an MPI job
//! (`Cluster`, feature `mpi`). Each is an [`Executor`]: it plans a
//! [`Problem`] into a [`Plan`], then executes that plan on a [`Gemm`] (the
//! product's operands) and answers with a [`Report`] — the same three
//! types for every executor, so a front end holds one executor and one
//! table printer.
//!
//! ```
//! use fastmm::{Context, Executor, Gemm, GemmOptions, Matrix, Problem, Team};
//! # fn main() -> Result<(), fastmm::Error> {
//! let a = Matrix::<f64>::from_fn(60, 40, |i, j| (i + 2 * j) as f64);
//! let b = Matrix::<f64>::from_fn(40, 30, |i, j| (i * j % 7) as f64);
//! /// Plans and runs C = A·B on any executor; returns C and its time.
//! fn product(x: &impl Executor, a: &Matrix<f64>, b: &Matrix<f64>) -> Result<(Matrix<f64>, f64), fastmm::Error> {
//!     let plan = x.plan(Problem::of::<f64>((a.rows(), a.cols(), b.cols())), &GemmOptions::default())?;
//!     let mut c = Matrix::zeros(a.rows(), b.cols());
//!     let report = x.execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()))?;
//!     Ok((c, report.timing.compute_ms))
//! }
//! let (one, _) = product(&Context::cpu(), &a, &b)?;
//! let (four, _) = product(&Team::simulated(4)?, &a, &b)?;
//! assert_eq!(one, four);
//! # Ok(())
//! # }
//! ```
//!
//! [`Context`]: crate::Context
//! [`Team`]: crate::Team

use serde::Serialize;

use crate::element::Element;
use crate::error::Error;
use crate::gemm::{Gemm, Problem};
use crate::matrix::{MatMut, MatRef};
use crate::options::{ComplexForm, GemmOptions};
use crate::plan::{Plan, Route};

impl<T: Element> Gemm<'_, T> {
    /// Checks that this product is the one `plan` was made for: the
    /// shapes, the type, and C not read where the plan does not read it.
    pub fn check_plan(&self, plan: &Plan) -> Result<(), Error> {
        self.check_shapes()?;
        let mine = self.problem();
        let planned = plan.problem;
        if mine.shape() != planned.shape() || mine.dtype != planned.dtype {
            return Err(Error::InvalidOption(format!(
                "a plan for {planned} cannot run a product of {mine}"
            )));
        }
        if mine.reads_c && !planned.reads_c {
            return Err(Error::InvalidOption(format!(
                "a plan for {planned} with β = 0 cannot run a product that reads C (β ≠ 0): plan it with `Problem::reading_c(true)`"
            )));
        }
        Ok(())
    }
}

/// How a GPU product of host matrices streamed through the GPU when they
/// exceeded its budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Streamed {
    /// Bytes copied to the GPU (A and B, as often as they streamed).
    pub upload_bytes: u64,
    /// Bytes copied back (C once).
    pub download_bytes: u64,
    /// The share of the time the GPU spent in products (what the copies
    /// did not hide is the rest).
    pub products_fraction: f64,
    /// Host seconds spent copying A and B into page-locked staging, and
    /// staging into C (each on its own thread, overlapping the rest).
    pub staging_seconds: (f64, f64),
}

/// Where the time of one product went, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timing {
    /// The product: on the CPU its wall time; on a GPU in one piece the
    /// kernels alone between CUDA events (for β = 0 the median of
    /// back-to-back runs after a warm-up, free of the idle gaps the copies
    /// leave); out of core the whole streamed product, copies overlapped;
    /// on a team or cluster from the first operation to the last
    /// processor done, communication included.
    pub compute_ms: f64,
    /// GPU in one piece: host → device copies of A, B (and C when β ≠ 0);
    /// a team's or cluster's pieces: placing A and B on the processors.
    pub upload_ms: Option<f64>,
    /// GPU in one piece: device → host copy of C; pieces: gathering C.
    pub download_ms: Option<f64>,
    /// GPU out of core: how it streamed.
    pub streamed: Option<Streamed>,
    /// The `emulated` algorithm: the route its pieces took (moduli, bits,
    /// elements or pieces computed natively).
    pub emulation: Option<crate::emulation::Tally>,
}

impl Timing {
    /// The product with its copies: what a caller waits for.
    pub fn end_to_end_ms(&self) -> f64 {
        self.compute_ms + self.upload_ms.unwrap_or(0.0) + self.download_ms.unwrap_or(0.0)
    }
}

/// One GPU's part of a host-resident product on a team; times in
/// milliseconds from the product's start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct GpuShare {
    /// Bands of C it computed (taken dynamically).
    pub bands: usize,
    /// When its first product was queued (its buffers allocated).
    pub first_band_ms: f64,
    /// Host time it spent staging bands of A and unstaging bands of C.
    pub staging_ms: f64,
    /// GPU time of its products (CUDA events): the rest of `finished_ms`
    /// is what the copies and the start did not hide.
    pub products_ms: f64,
    /// When its last band was in C.
    pub finished_ms: f64,
}

/// What moved between the processors of a team or cluster, counted from
/// the operations that ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Communication {
    /// Words the busiest processor received.
    pub words_per_processor: u128,
    /// Words all processors received.
    pub total_words: u128,
    /// The lower bound on the words per processor of a classical product
    /// of this shape and memory (0 where the route has none: Strassen's
    /// levels across, host-resident bands).
    pub lower_bound: f64,
    /// Strassen or Winograd levels run across the processors.
    pub levels_across: usize,
    /// Whether those levels were a breadth-first step (seven products on
    /// seven ranks at once) rather than depth-first steps.
    pub breadth_first: bool,
    /// Host-resident products on GPUs: each GPU's part.
    pub shares: Vec<GpuShare>,
    /// Host-resident products: when B was on every GPU, ms from the start.
    pub b_loaded_ms: Option<f64>,
    /// Bytes copied from host memory to the devices.
    pub upload_bytes: u64,
    /// Bytes copied back.
    pub download_bytes: u64,
    /// Cluster: whether the local products ran on the ranks' GPUs.
    pub local_gpus: bool,
    /// Cluster: whether the pieces lived on the ranks' GPUs, NCCL moving
    /// them (rather than in host memory, MPI moving them).
    pub pieces_on_gpus: bool,
}

impl Communication {
    /// words_per_processor / lower_bound (1 when both are 0, ∞ when only
    /// the bound is).
    pub fn bound_ratio(&self) -> f64 {
        crate::distributed::planner::bound_ratio(self.words_per_processor, self.lower_bound)
    }
}

/// What an executed plan did: the plan that ran, where the time went and,
/// across processors, what moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The plan that ran: the one given, except where a fast algorithm met
    /// NaN or ∞ in A or B and ran its classical base instead (see
    /// [`crate::Context::gemm`]); then the base's plan.
    pub plan: Plan,
    /// Where the time went.
    pub timing: Timing,
    /// A team or cluster: what moved between the processors.
    pub communication: Option<Communication>,
}

impl Report {
    /// The report of `plan` with `timing` and nothing moved.
    pub fn new(plan: Plan, timing: Timing) -> Report {
        Report {
            plan,
            timing,
            communication: None,
        }
    }

    /// GFLOP/s of the product over `compute_ms`.
    pub fn gflops(&self) -> f64 {
        self.plan.problem.flops() / (self.timing.compute_ms * 1e6)
    }

    /// How far the result's error may exceed the classical rounding bound
    /// (the plan's allowance, for [`crate::verify::verify_with_growth`]).
    pub fn error_growth(&self) -> f64 {
        self.plan.error_growth
    }

    /// One line for a table: what ran ([`Plan::label`]), how it streamed
    /// out of core, the emulated product's route, and across processors
    /// the decomposition or route with the words moved.
    pub fn describe(&self) -> String {
        use crate::system::format_bytes;
        let mut label = self.plan.label();
        if let Some(s) = &self.timing.streamed {
            label += &format!(
                "; {} up, {} down; products {:.1}% of the time; host staging {:.2} s in, {:.2} s out",
                format_bytes(s.upload_bytes.into()),
                format_bytes(s.download_bytes.into()),
                100.0 * s.products_fraction,
                s.staging_seconds.0,
                s.staging_seconds.1
            );
        }
        if let Some(tally) = &self.timing.emulation {
            label += &format!("; {}", tally.label());
        }
        let (Some(spread), Some(moved)) = (&self.plan.spread, &self.communication) else {
            return label;
        };
        let count = spread.processors.len();
        let who = if spread.ranks { "rank" } else { "device" };
        let bound = match moved.bound_ratio() {
            r if r.is_finite() => format!("{r:.2}× the lower bound"),
            _ => "the lower bound is 0 here".into(),
        };
        let (pm, pn, pk) = spread.grid;
        match spread.route {
            Route::Pieces => format!(
                "distributed {pm}×{pn}×{pk} over {count} {who}s{}; {} words received per {who}, {bound}; each: {label}",
                if moved.pieces_on_gpus {
                    format!(
                        ", pieces on each rank's GPU (NCCL between them; {:.1} ms to stage them, not timed)",
                        self.timing.upload_ms.unwrap_or(0.0)
                    )
                } else if moved.local_gpus {
                    ", pieces in host memory, local products on each rank's GPU".to_string()
                } else {
                    String::new()
                },
                moved.words_per_processor
            ),
            Route::Across { .. } if moved.breadth_first => format!(
                "{} across {count} {who}s (CAPS): 1 breadth-first level ({}), then the local algorithm; {} words received per {who}, {bound} of a classical product",
                self.plan.algorithm,
                match count / 7 {
                    1 => format!("a product per {who}"),
                    q => format!("a product per group of {q} {who}s, classical within it"),
                },
                moved.words_per_processor
            ),
            Route::Across { .. } => format!(
                "{} across {count} {who}s (CAPS): {} levels, rows in chunks, sums local; {} words received per {who}{}; below: {label}",
                self.plan.algorithm,
                moved.levels_across,
                moved.words_per_processor,
                if moved.lower_bound > 0.0 {
                    format!(", {bound} of a classical product")
                } else {
                    String::new()
                }
            ),
            Route::Bands => format!(
                "host-resident over {count} GPUs{}: per device bands/first product/staging/products/done ms {}; each: {label}",
                moved.b_loaded_ms.map_or(String::new(), |ms| format!(", B on every GPU at {ms:.0} ms")),
                moved
                    .shares
                    .iter()
                    .map(|s| format!(
                        "{}/{:.0}/{:.0}/{:.0}/{:.0}",
                        s.bands, s.first_band_ms, s.staging_ms, s.products_ms, s.finished_ms
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Route::Rows => format!(
                "rows split over {count} GPUs, each streaming its share out of core ({} up, {} down); each: {label}",
                format_bytes(moved.upload_bytes.into()),
                format_bytes(moved.download_bytes.into())
            ),
        }
    }
}

/// How an execution takes its time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Clock {
    /// The product runs once, timed as it runs.
    #[default]
    Once,
    /// A benchmark's clock: on one GPU with β = 0, after the product the
    /// kernels run again back to back and `compute_ms` is their median
    /// (see [`Timing::compute_ms`]); elsewhere as `Once`.
    Benchmark,
}

/// What runs products: plan a problem once, then execute the plan on
/// operands as often as needed. [`crate::Context`] (one device),
/// [`crate::Team`] (the devices of one host) and `Cluster` (MPI ranks)
/// implement it.
///
/// `execute` runs the plan it is given: the algorithm `auto` chose, the
/// memory schedule, the decomposition and route over processors are the
/// plan's, and nothing is decided again (the one exception is data the
/// plan cannot know: a fast algorithm whose operands hold NaN or ∞ runs
/// its classical base, and the report says so).
pub trait Executor {
    /// One line naming what runs the products.
    fn describe(&self) -> String;

    /// What `problem` would run with `opts` here, without running it.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] and [`Error::Unsupported`] for options or
    /// algorithms this executor cannot run for this type;
    /// [`Error::OutOfMemory`] for a product no decomposition fits.
    fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error>;

    /// Runs `plan` on `product`, which must be the plan's problem.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a product of another shape or type
    /// than the plan's, or a plan of another executor; the product's own
    /// errors.
    fn execute<T: Element>(&self, plan: &Plan, product: Gemm<'_, T>) -> Result<Report, Error> {
        self.execute_clocked(plan, product, Clock::Once)
    }

    /// [`Executor::execute`] with the clock a benchmark asks for.
    fn execute_clocked<T: Element>(
        &self,
        plan: &Plan,
        product: Gemm<'_, T>,
        clock: Clock,
    ) -> Result<Report, Error>;

    /// Plans `product` with `opts` and executes the plan.
    fn run<T: Element>(&self, product: Gemm<'_, T>, opts: &GemmOptions) -> Result<Report, Error> {
        product.check_shapes()?;
        let plan = self.plan(product.problem(), opts)?;
        self.execute(&plan, product)
    }

    /// A complex product C ← A·B (A m×k, B k×n, each as its real and
    /// imaginary parts, C's parts written) that this executor runs as one
    /// product of its own where `opts` asks for one: a GPU [`crate::Context`]
    /// given `cublas` runs cuBLAS's complex GEMM on the parts interleaved
    /// (cgemm/zgemm for [`ComplexForm::Classical`], their 3M forms for
    /// [`ComplexForm::Gauss`]). `None` where it has none: the complex
    /// product is then made of real products ([`crate::complex::multiply`]
    /// asks this first).
    fn complex_product<T: Element>(
        &self,
        a: (MatRef<'_, T>, MatRef<'_, T>),
        b: (MatRef<'_, T>, MatRef<'_, T>),
        c: (MatMut<'_, T>, MatMut<'_, T>),
        form: ComplexForm,
        opts: &GemmOptions,
    ) -> Option<Result<Report, Error>> {
        let _ = (a, b, c, form, opts);
        None
    }

    /// A complex product C ← α·A·B + β·C (α, β as (re, im); β = 0 never
    /// reads C) small enough that this executor runs it at once, with no
    /// plan and no report: on the CPU, at the classical form where the
    /// real products would be `packed`'s and small (`packed`'s direct path
    /// for interleaved A, else
    /// `COMPLEX_DIRECT_LOOP_MAX_VOLUME` in the tunables). `None` where it has
    /// no such path ([`crate::complex::gemm`] asks this first).
    #[allow(clippy::too_many_arguments)]
    fn complex_direct<T: Element>(
        &self,
        alpha: [T; 2],
        a: (MatRef<'_, T>, MatRef<'_, T>),
        b: (MatRef<'_, T>, MatRef<'_, T>),
        beta: [T; 2],
        c: (MatMut<'_, T>, MatMut<'_, T>),
        form: ComplexForm,
        opts: &GemmOptions,
    ) -> Option<Result<(), Error>> {
        let _ = (alpha, a, b, beta, c, form, opts);
        None
    }
}
