//! The device as a value, and the one entry point every front end uses.
//!
//! A [`Context`] is one opened device: the CPU, or a CUDA GPU with its
//! context, stream, compiled kernels and cuBLAS handle. Every product,
//! plan and timing goes through one; nothing in the library opens a device
//! behind the caller's back. [`gemm`], [`matmul`] and [`matmul_with`] are
//! the CPU context's products, for callers who need no other device.
//!
//! The boundary is here, once: shape and option checks, β (including
//! "β = 0 never reads C"), empty products, α = 0, and orientation (a
//! column-major C is turned into the row-major problem Cᵀ = Bᵀ·Aᵀ by
//! swapping views), so the algorithms below always see m, n, k ≥ 1, α ≠ 0
//! and rows of C to stream.

#[cfg(feature = "cuda")]
use std::sync::Arc;
use std::time::Instant;

use crate::cpu;
use crate::element::{for_dtype, Element};
use crate::error::Error;
#[cfg(feature = "cuda")]
use crate::executor::Streamed;
use crate::executor::{Clock, Executor, Report, Timing};
use crate::gemm::{Gemm, Problem};
#[cfg(feature = "cuda")]
use crate::matrix::{GpuMatrix, GpuProduct};
use crate::matrix::{MatMut, MatRef, Matrix};
use crate::options::ComplexForm;
#[cfg(feature = "cuda")]
use crate::options::GpuCompletion;
use crate::options::{
    Accuracy, Algorithm, Device, DeviceKind, GemmOptions, GpuOptions, GpuPrecision,
};
use crate::plan::{FastPlan, Plan};
use crate::system::GpuInfo;
use crate::tunables::AUTO_FAST_MIN_DIM;

/// One opened device, on which products run.
///
/// ```
/// use fastmm::{Context, Device, GemmOptions, Algorithm, Matrix, Problem};
/// # fn main() -> Result<(), fastmm::Error> {
/// let cpu = Context::open(Device::Cpu)?;
/// let a = Matrix::<f32>::from_fn(64, 48, |i, j| (i + j) as f32);
/// let b = Matrix::<f32>::from_fn(48, 32, |i, j| (i * j % 5) as f32);
/// let opts = GemmOptions::new(Algorithm::Strassen).threshold(32);
/// let plan = cpu.plan(Problem::of::<f32>((64, 48, 32)), &opts)?;
/// assert_eq!(plan.fast.as_ref().unwrap().levels, 1);
/// let c = cpu.matmul(a.as_ref(), b.as_ref(), &opts)?;
/// assert!(fastmm::verify::verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), plan.error_growth)?.ok);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Context {
    device: Device,
    #[cfg(feature = "cuda")]
    gpu: Option<Arc<crate::cuda::runtime::device::Gpu>>,
    /// Page-locked staging that out-of-core products keep between calls
    /// (pinning costs more than the copies it serves).
    #[cfg(feature = "cuda")]
    staging: Option<Arc<crate::cuda::products::hosted::StagingPools>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({})", self.describe())
    }
}

impl Context {
    /// The host CPU.
    pub fn cpu() -> Context {
        Context {
            device: Device::Cpu,
            #[cfg(feature = "cuda")]
            gpu: None,
            #[cfg(feature = "cuda")]
            staging: None,
        }
    }

    /// Opens `device`: for a GPU, its context, stream and cuBLAS handle
    /// (kernels are compiled on first use and kept with it). Open a GPU
    /// once and reuse the context: opening costs tens to hundreds of
    /// milliseconds.
    ///
    /// # Errors
    /// [`Error::CudaUnavailable`] when a CUDA library, the driver or the
    /// GPU of that ordinal is missing, or fastmm was built without the
    /// `cuda` feature.
    pub fn open(device: Device) -> Result<Context, Error> {
        match device {
            Device::Cpu => Ok(Context::cpu()),
            #[cfg(feature = "cuda")]
            Device::Cuda(ordinal) => {
                let gpu = Arc::new(crate::cuda::runtime::device::Gpu::open(ordinal)?);
                Ok(Context {
                    device,
                    staging: Some(Arc::new(crate::cuda::products::hosted::StagingPools::new(
                        std::slice::from_ref(&gpu),
                    ))),
                    gpu: Some(gpu),
                })
            }
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => Err(Error::CudaUnavailable(
                "fastmm was built without the `cuda` feature".into(),
            )),
        }
    }

    /// The device it runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The GPU's properties (`None` on the CPU).
    pub fn gpu_info(&self) -> Option<&GpuInfo> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            return Some(gpu.info());
        }
        None
    }

    /// One line: "cpu: AMD EPYC 9454P (2 threads)" or "cuda:0: NVIDIA
    /// H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, driver 13000)".
    pub fn describe(&self) -> String {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            let info = gpu.info();
            return format!(
                "{}: {} ({}, {} SMs, {}, driver {})",
                self.device,
                info.name,
                gpu.arch(),
                info.multiprocessors,
                crate::system::format_bytes(info.total_memory as u128),
                info.driver_version
            );
        }
        format!(
            "cpu: {} ({} threads)",
            crate::system::cpu_model(),
            crate::system::available_threads()
        )
    }

    /// Free and total memory of the GPU now, in bytes (`None` on the CPU).
    pub fn gpu_memory(&self) -> Result<Option<(usize, usize)>, Error> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            return gpu.memory_info().map(Some);
        }
        Ok(None)
    }

    /// The opened GPU, shared (`None` on the CPU).
    #[cfg(feature = "cuda")]
    pub(crate) fn gpu_arc(&self) -> Option<Arc<crate::cuda::runtime::device::Gpu>> {
        self.gpu.clone()
    }

    /// The opened GPU with the staging its out-of-core products keep, or
    /// an error naming the device that is not one.
    #[cfg(all(feature = "cuda", feature = "selftest"))]
    #[allow(clippy::type_complexity)]
    pub(crate) fn gpu_and_staging(
        &self,
    ) -> Result<
        (
            &Arc<crate::cuda::runtime::device::Gpu>,
            &crate::cuda::products::hosted::StagingPools,
        ),
        Error,
    > {
        match (&self.gpu, &self.staging) {
            (Some(gpu), Some(pools)) => Ok((gpu, pools)),
            _ => Err(Error::InvalidOption(format!(
                "{} is not a CUDA device",
                self.device
            ))),
        }
    }

    /// The opened GPU, or an error naming the device that is not one.
    #[cfg(feature = "cuda")]
    pub(crate) fn gpu(&self) -> Result<&crate::cuda::runtime::device::Gpu, Error> {
        self.gpu
            .as_deref()
            .ok_or_else(|| Error::InvalidOption(format!("{} is not a CUDA device", self.device)))
    }

    /// `opts` for T on this device: its algorithm checked against the
    /// device, `auto` resolved.
    fn resolve<T: Element>(&self, opts: &GemmOptions) -> Result<GemmOptions, Error> {
        opts.validate()?;
        let kind = self.device.kind();
        if !opts.algorithm.runs_on(kind) {
            let other = match kind {
                DeviceKind::Cpu => "a CUDA device",
                DeviceKind::Cuda => "the CPU",
            };
            return Err(Error::Unsupported {
                algorithm: opts.algorithm.name(),
                what: format!("{} (it runs on {other})", self.device),
            });
        }
        let algorithm = match opts.algorithm {
            Algorithm::Auto => Algorithm::auto_for(kind, T::DTYPE),
            algorithm => algorithm,
        };
        Ok(GemmOptions { algorithm, ..*opts })
    }

    /// `opts`, or its classical base when a fast algorithm would meet a
    /// NaN or an infinity: Strassen's and Winograd's sums mix blocks, so
    /// one ∞ in A would give ∞ − ∞ = NaN in blocks of C that the classical
    /// product (and numpy) leave finite. The scan reads A and B once,
    /// O(mk + kn) against the product's O(mkn), and only for fast
    /// algorithms on floats.
    pub(crate) fn ieee_safe<T: Element>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        beta_is_zero: bool,
        opts: GemmOptions,
        planned: Option<&FastPlan>,
    ) -> Result<GemmOptions, Error> {
        if !opts.algorithm.is_fast() || T::DTYPE.is_integer() {
            return Ok(opts);
        }
        // A product that applies no level is its base product already (the
        // plan, when not given, is a dry run, cheaper than the scan).
        let fast = match planned {
            Some(fast) => Some(fast.clone()),
            None => {
                let shape = (a.rows(), a.cols(), b.cols());
                self.plan_typed::<T>(shape, beta_is_zero, &opts)?.fast
            }
        };
        Ok(match fast {
            Some(fast) if fast.levels > 0 && !(all_finite(a) && all_finite(b)) => GemmOptions {
                algorithm: fast.base,
                ..opts
            },
            _ => opts,
        })
    }

    /// What `problem` would run with `opts` here: the kernel, threads,
    /// recursion, workspace, error allowance and out-of-core plan, without
    /// running it (see [`Executor::plan`]).
    pub fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        for_dtype!(problem.dtype, T => {
            self.plan_typed::<T>(problem.shape(), !problem.reads_c, opts)
        })
    }

    /// [`Context::plan`] of an m×k×n product of T.
    pub(crate) fn plan_typed<T: Element>(
        &self,
        shape: (usize, usize, usize),
        beta_is_zero: bool,
        opts: &GemmOptions,
    ) -> Result<Plan, Error> {
        let opts = self.resolve_for::<T>(opts, shape, beta_is_zero)?;
        self.plan_resolved::<T>(shape, beta_is_zero, &opts)
    }

    /// `opts` resolved ([`Context::resolve`]), and `auto` decided for
    /// this shape: the fastest product that meets the accuracy level
    /// asked for ([`GemmOptions::accuracy`]), by measured rules.
    ///
    /// * An algorithm asked for by name runs as asked, whatever the level
    ///   (its plan says the level it gives); so does a cuBLAS mode asked
    ///   for (`gpu_precision`). `bits:N` is the emulated product's
    ///   (integers: the classical product, exact at every level).
    /// * On a GPU, floats: at `tf32` or `bf16`, cuBLAS in that mode for
    ///   f32 (the tensor cores' fastest product within the level). Else
    ///   the emulated product past its measured crossovers for the level
    ///   ([`crate::emulation::auto_emulates`]); integers past theirs.
    /// * Winograd, where its measured crossover gives it a level (see
    ///   `STRASSEN_AUTO_*` and the tuning file), at relaxed levels and for
    ///   integers only: its sums mix rows and columns of different
    ///   scales, and its errors broke the `native` level by orders of
    ///   magnitude on scaled and zero-row inputs (the accuracy tests).
    /// * Else the device's classical product.
    pub(crate) fn resolve_for<T: Element>(
        &self,
        opts: &GemmOptions,
        (m, k, n): (usize, usize, usize),
        beta_is_zero: bool,
    ) -> Result<GemmOptions, Error> {
        let resolved = self.resolve::<T>(opts)?;
        let float = !T::DTYPE.is_integer();
        // An algorithm asked for by name runs as asked; its plan says the
        // level it gives.
        if opts.algorithm != Algorithm::Auto {
            return Ok(resolved);
        }
        let with = |algorithm: Algorithm| GemmOptions {
            algorithm,
            ..resolved
        };
        let on_gpu = self.device.kind() == DeviceKind::Cuda;
        if on_gpu && float {
            if matches!(opts.gpu.precision, Some(p) if p != GpuPrecision::Fp32) {
                return Ok(with(Algorithm::Cublas));
            }
            let mode = match opts.accuracy {
                Accuracy::Tf32 => Some(GpuPrecision::Tf32),
                Accuracy::Bf16 => Some(GpuPrecision::Bf16),
                _ => None,
            };
            if let (Some(mode), crate::element::DType::F32) = (mode, T::DTYPE) {
                return Ok(GemmOptions {
                    gpu: GpuOptions {
                        precision: Some(mode),
                        ..with(Algorithm::Cublas).gpu
                    },
                    ..with(Algorithm::Cublas)
                });
            }
        }
        if float && matches!(opts.accuracy, Accuracy::Bits(_)) {
            return Ok(with(Algorithm::Emulated));
        }
        if on_gpu && crate::emulation::auto_emulates(T::DTYPE, opts.accuracy, (m, k, n)) {
            return Ok(with(Algorithm::Emulated));
        }
        if float && opts.accuracy == Accuracy::Native {
            return Ok(resolved);
        }
        if m.min(k).min(n) < AUTO_FAST_MIN_DIM {
            return Ok(resolved);
        }
        let fast = GemmOptions {
            algorithm: Algorithm::Winograd,
            ..resolved
        };
        let plan = self.plan_resolved::<T>((m, k, n), beta_is_zero, &fast)?;
        Ok(match plan.fast {
            Some(f) if f.levels > 0 => fast,
            _ => resolved,
        })
    }

    /// [`Context::plan`] of resolved options.
    pub(crate) fn plan_resolved<T: Element>(
        &self,
        shape: (usize, usize, usize),
        beta_is_zero: bool,
        opts: &GemmOptions,
    ) -> Result<Plan, Error> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.gpu {
            return crate::plan::on_cuda::<T>(gpu, shape, beta_is_zero, opts);
        }
        crate::plan::on_cpu::<T>(shape, beta_is_zero, opts)
    }

    /// [`Context::plan`] for these operands: the plan of what will run,
    /// which differs only where a fast algorithm meets NaN or ∞ and runs
    /// its classical base (see [`Context::gemm`]).
    pub fn plan_for<T: Element>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        beta_is_zero: bool,
        opts: &GemmOptions,
    ) -> Result<Plan, Error> {
        let shape = (a.rows(), a.cols(), b.cols());
        let resolved = self.resolve_for::<T>(opts, shape, beta_is_zero)?;
        let safe = self.ieee_safe(a, b, beta_is_zero, resolved, None)?;
        self.plan_typed::<T>(shape, beta_is_zero, &safe)
    }

    /// General matrix multiply: **C ← α·A·B + β·C**.
    ///
    /// A is m×k, B is k×n, C is m×n; any of m, n, k may be 0. All three may
    /// be arbitrary strided views (transposes included). When β = 0, C is
    /// overwritten without being read, so NaN or garbage in C never
    /// reaches the result. Integer types wrap (see [`crate::Element`]).
    ///
    /// NaN and ±∞ in A or B propagate by IEEE rules, as in numpy; a fast
    /// algorithm (Strassen, Winograd), whose sums would turn an ∞ into
    /// NaN where the classical product has none, runs its classical base
    /// instead for such inputs.
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] when A's columns differ from B's rows,
    /// [`Error::OutputShape`] when C is not m×n, [`Error::InvalidOption`]
    /// for options no algorithm can use, [`Error::Unsupported`] for an
    /// algorithm this device or type does not run, and CUDA errors.
    pub fn gemm<T: Element>(
        &self,
        alpha: T,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        beta: T,
        c: MatMut<'_, T>,
        opts: &GemmOptions,
    ) -> Result<(), Error> {
        self.run(
            Gemm {
                alpha,
                a,
                b,
                beta,
                c,
            },
            opts,
            false,
        )
        .map(|_| ())
    }

    /// [`Context::gemm`], timed: on a GPU the copies apart from the kernels
    /// (see [`Timing`]).
    pub fn gemm_timed<T: Element>(
        &self,
        alpha: T,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        beta: T,
        c: MatMut<'_, T>,
        opts: &GemmOptions,
    ) -> Result<Timing, Error> {
        self.run(
            Gemm {
                alpha,
                a,
                b,
                beta,
                c,
            },
            opts,
            true,
        )
    }

    /// C = A·B for any views, in a new matrix.
    pub fn matmul<T: Element>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        opts: &GemmOptions,
    ) -> Result<Matrix<T>, Error> {
        crate::matrix::check_product_shapes(a, b, (a.rows(), b.cols()))?;
        let mut c = Matrix::try_filled(a.rows(), b.cols(), T::ZERO)?;
        self.gemm(T::ONE, a, b, T::ZERO, c.as_mut(), opts)?;
        Ok(c)
    }

    /// Runs `plan` on `product` (see [`Executor::execute`]).
    pub fn execute<T: Element>(&self, plan: &Plan, product: Gemm<'_, T>) -> Result<Report, Error> {
        self.execute_clocked(plan, product, Clock::Once)
    }

    /// [`Context::execute`] with the clock a benchmark asks for.
    pub fn execute_clocked<T: Element>(
        &self,
        plan: &Plan,
        product: Gemm<'_, T>,
        clock: Clock,
    ) -> Result<Report, Error> {
        product.check_plan(plan)?;
        if plan.spread.is_some() || plan.device != self.device {
            return Err(Error::InvalidOption(format!(
                "a plan for {} cannot run on {}",
                plan.spread
                    .as_ref()
                    .map_or_else(|| plan.device.to_string(), |_| "several processors".into()),
                self.device
            )));
        }
        let (timing, fell_back) = self.run_resolved(
            product,
            &plan.options,
            plan.fast.as_ref(),
            clock == Clock::Benchmark,
        )?;
        let plan = match fell_back {
            // The classical base that ran instead, planned (only here,
            // where the operands held NaN or ∞).
            Some(base) => {
                let p = plan.problem;
                for_dtype!(p.dtype, U => self.plan_resolved::<U>(p.shape(), !p.reads_c, &base))?
            }
            None => plan.clone(),
        };
        Ok(Report::new(plan, timing))
    }

    /// The boundary, then the device.
    fn run<T: Element>(
        &self,
        product: Gemm<'_, T>,
        opts: &GemmOptions,
        timed: bool,
    ) -> Result<Timing, Error> {
        product.check_shapes()?;
        let product = match self.direct_on_cpu(product, opts)? {
            None => return Ok(Timing::default()),
            Some(product) => product,
        };
        let problem = product.problem();
        let opts = self.resolve_for::<T>(opts, problem.shape(), !problem.reads_c)?;
        let (timing, _) = self.run_resolved(product, &opts, None, timed)?;
        Ok(timing)
    }

    /// A small product that `opts` resolve to `packed` on this CPU and
    /// that `packed` runs on its direct path, run there at once with the
    /// choices resolved once per type (`cpu::packed::plain`): the same
    /// kernel, KC and layout as the full path, without resolving them
    /// again. Returns the product untouched for anything else.
    fn direct_on_cpu<'a, T: Element>(
        &self,
        product: Gemm<'a, T>,
        opts: &GemmOptions,
    ) -> Result<Option<Gemm<'a, T>>, Error> {
        let (m, k, n) = product.shape();
        // What `resolve_for` resolves to `packed` without a plan: `packed`
        // asked for, or `auto` at `native` on floats or below the fast
        // algorithms' smallest edge; default CPU choices.
        let packed = match opts.algorithm {
            Algorithm::Packed => true,
            Algorithm::Auto => {
                opts.accuracy == Accuracy::Native
                    && (!T::DTYPE.is_integer() || m.min(k).min(n) < AUTO_FAST_MIN_DIM)
            }
            _ => false,
        };
        if self.device != Device::Cpu
            || !packed
            || opts.cpu != crate::options::CpuOptions::default()
            || m == 0
            || n == 0
            || k == 0
            || product.alpha == T::ZERO
        {
            return Ok(Some(product));
        }
        // The layout `run_resolved` normalises to: a column-major C is the
        // transposed product of a row-major one.
        let flip = product.c.col_stride() != 1 && product.c.row_stride() == 1;
        let (a, b) = match flip {
            true => (product.b.t(), product.a.t()),
            false => (product.a, product.b),
        };
        // Bands of C's columns on the threads where the product is large
        // enough to share, else the direct path on this thread; the size
        // is asked first, so that a small product pays nothing more.
        let shape = (a.rows(), a.cols(), b.cols());
        let banded = match crate::cpu::packed::may_band::<T>(shape) {
            true => {
                crate::cpu::packed::bands::<T>(opts, shape, b.col_stride() == 1 || b.cols() == 1)
            }
            false => None,
        };
        let (members, direct, kc) = match banded {
            Some(banded) => banded,
            None => match crate::cpu::packed::plain::direct_for(&a, &b) {
                Some((direct, kc)) => (1, direct, kc),
                None => return Ok(Some(product)),
            },
        };
        opts.validate()?;
        opts.check_interrupt()?;
        let product = if flip { product.t() } else { product };
        let Gemm {
            alpha,
            a,
            b,
            beta,
            c,
        } = product;
        match members {
            1 => direct(alpha, a, b, beta, c, kc),
            _ => crate::cpu::packed::on_bands(members, (direct, kc), (alpha, a, b, beta, c)),
        }
        Ok(None)
    }

    /// A product whose shapes are checked and whose options are resolved
    /// for its shape: empty products and α = 0, the IEEE rule of the fast
    /// algorithms (with the recursion `planned`, else planned where the
    /// rule needs it), orientation, then the device. Returns the timing and, where
    /// a fast algorithm met NaN or ∞ and ran its classical base instead,
    /// the base's options.
    fn run_resolved<T: Element>(
        &self,
        mut product: Gemm<'_, T>,
        opts: &GemmOptions,
        planned: Option<&FastPlan>,
        timed: bool,
    ) -> Result<(Timing, Option<GemmOptions>), Error> {
        opts.check_interrupt()?;
        // The clock only when asked: two reads cost a tenth of a 32³
        // product on a VM.
        let start = timed.then(Instant::now);
        let elapsed_ms =
            |start: Option<Instant>| start.map_or(0.0, |s| s.elapsed().as_secs_f64() * 1e3);
        let (m, k, n) = product.shape();
        if m == 0 || n == 0 {
            return Ok((Timing::default(), None));
        }
        if k == 0 || product.alpha == T::ZERO {
            product.c.scale_by(product.beta);
            let timing = Timing {
                compute_ms: elapsed_ms(start),
                ..Timing::default()
            };
            return Ok((timing, None));
        }
        let safe = self.ieee_safe(product.a, product.b, !product.reads_c(), *opts, planned)?;
        let fell_back = (safe.algorithm != opts.algorithm).then_some(safe);
        let opts = &safe;
        // Layouts are normalised here: a column-major C is the transposed
        // product of a row-major one.
        let product = if product.c.col_stride() != 1 && product.c.row_stride() == 1 {
            product.t()
        } else {
            product
        };
        #[cfg(feature = "cuda")]
        if let (Some(gpu), Some(pools)) = (&self.gpu, &self.staging) {
            let timing = on_gpu((gpu, pools), product, opts, timed)?;
            return Ok((timing, fell_back));
        }
        let _ = timed;
        let Gemm {
            alpha,
            a,
            b,
            beta,
            c,
        } = product;
        let emulation = if opts.algorithm == Algorithm::Emulated {
            Some(crate::emulation::gemm_reference(
                alpha,
                a,
                b,
                beta,
                c,
                crate::emulation::Goal::on_cpu(opts.accuracy),
            )?)
        } else {
            cpu::multiply(alpha, a, b, beta, c, opts)?;
            None
        };
        let timing = Timing {
            compute_ms: elapsed_ms(start),
            emulation,
            ..Timing::default()
        };
        Ok((timing, fell_back))
    }
}

impl Executor for Context {
    fn describe(&self) -> String {
        Context::describe(self)
    }

    fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        Context::plan(self, problem, opts)
    }

    fn execute_clocked<T: Element>(
        &self,
        plan: &Plan,
        product: Gemm<'_, T>,
        clock: Clock,
    ) -> Result<Report, Error> {
        Context::execute_clocked(self, plan, product, clock)
    }

    fn complex_product<T: Element>(
        &self,
        a: (MatRef<'_, T>, MatRef<'_, T>),
        b: (MatRef<'_, T>, MatRef<'_, T>),
        c: (MatMut<'_, T>, MatMut<'_, T>),
        form: ComplexForm,
        opts: &GemmOptions,
    ) -> Option<Result<Report, Error>> {
        // The CPU's emulated complex product at the classical form
        // (`native`): Karatsuba on the residues, three INT8 products per
        // modulus where four real emulated products take four.
        let karatsuba = self.device == Device::Cpu
            && opts.algorithm == Algorithm::Emulated
            && form == ComplexForm::Classical
            && !T::DTYPE.is_integer()
            && crate::emulation::complex::takes_depth(a.0.cols());
        if karatsuba {
            let start = Instant::now();
            let run = || -> Result<Report, Error> {
                let ((m, k), n) = (a.0.shape(), b.0.cols());
                let mut plan = self.plan(Problem::of::<T>((m, k, n)), opts)?;
                plan.kernel += "; complex: Karatsuba on the residues";
                let goal = crate::emulation::Goal::on_cpu(opts.accuracy);
                let tally = crate::emulation::complex::gemm_complex(a, b, c, goal)?;
                Ok(Report::new(
                    plan,
                    Timing {
                        compute_ms: start.elapsed().as_secs_f64() * 1e3,
                        emulation: Some(tally),
                        ..Timing::default()
                    },
                ))
            };
            return Some(run());
        }
        #[cfg(feature = "cuda")]
        return self.gpu_complex_product(a, b, c, form, opts);
        #[cfg(not(feature = "cuda"))]
        None
    }

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
        // Where the four real products would be `packed`'s, as in
        // `direct_on_cpu`, and at the classical form.
        let packed = match opts.algorithm {
            Algorithm::Packed => true,
            Algorithm::Auto => opts.accuracy == Accuracy::Native,
            _ => false,
        };
        if self.device != Device::Cpu
            || T::DTYPE.is_integer()
            || form != ComplexForm::Classical
            || !packed
            || opts.cpu != crate::options::CpuOptions::default()
        {
            return None;
        }
        let route = crate::cpu::complex_direct::route(a, b, opts)?;
        let run = || -> Result<(), Error> {
            opts.validate()?;
            opts.check_interrupt()?;
            crate::cpu::complex_direct::classical(route, opts, alpha, a, b, beta, c)
        };
        Some(run())
    }
}

#[cfg(feature = "cuda")]
impl Context {
    /// [`Executor::complex_product`] on a GPU: cuBLAS's own complex
    /// products, where `opts` asks for `cublas`.
    fn gpu_complex_product<T: Element>(
        &self,
        a: (MatRef<'_, T>, MatRef<'_, T>),
        b: (MatRef<'_, T>, MatRef<'_, T>),
        c: (MatMut<'_, T>, MatMut<'_, T>),
        form: ComplexForm,
        opts: &GemmOptions,
    ) -> Option<Result<Report, Error>> {
        use crate::element::DType;
        let gpu = self.gpu.as_ref()?;
        // The emulated classical form: Karatsuba on the residues, three
        // INT8 products per modulus, on device memory.
        let karatsuba = opts.algorithm == Algorithm::Emulated
            && form == ComplexForm::Classical
            && matches!(T::DTYPE, DType::F32 | DType::F64)
            && opts
                .gpu
                .memory
                .is_none_or(|m| m == crate::options::GpuMemory::Device);
        if karatsuba {
            return Some(self.gpu_karatsuba(gpu, a, b, c, opts));
        }
        // cuBLAS's complex products run in the parts' own type, on
        // device memory; other options are the real products'.
        let plain = opts.algorithm == Algorithm::Cublas
            && matches!(T::DTYPE, DType::F32 | DType::F64)
            && opts.gpu.precision.is_none_or(|p| p == GpuPrecision::Fp32)
            && opts
                .gpu
                .memory
                .is_none_or(|m| m == crate::options::GpuMemory::Device);
        if !plain {
            return None;
        }
        let ((m, k), n) = (a.0.shape(), b.0.cols());
        // Beyond the GPU's budget (the interleaved B counted twice, to be
        // safe) the real products stream out of core instead.
        match crate::cuda::products::out_of_core::needed::<T>(gpu, (m, 2 * k, 2 * n), opts) {
            Ok(false) => {}
            Ok(true) => return None,
            Err(e) => return Some(Err(e)),
        }
        let run = || -> Result<Report, Error> {
            check_complex_parts(&a, &b, &c)?;
            let mut plan = self.plan(Problem::of::<T>((m, k, n)), opts)?;
            let name = match (T::DTYPE, form) {
                (DType::F32, ComplexForm::Classical) => "cgemm",
                (DType::F32, ComplexForm::Gauss) => "cgemm3m",
                (_, ComplexForm::Classical) => "zgemm",
                (_, ComplexForm::Gauss) => "zgemm3m",
            };
            plan.kernel = format!("cuBLAS {name} on the parts interleaved");
            if m == 0 || n == 0 {
                return Ok(Report::new(plan, Timing::default()));
            }
            if k == 0 {
                let (mut re, mut im) = c;
                re.fill(T::ZERO);
                im.fill(T::ZERO);
                return Ok(Report::new(plan, Timing::default()));
            }
            opts.check_interrupt()?;
            let times = crate::cuda::products::complex::multiply_host(gpu, a, b, c, form, opts)?;
            Ok(Report::new(
                plan,
                Timing {
                    compute_ms: times.kernel_ms,
                    upload_ms: Some(times.upload_ms),
                    download_ms: Some(times.download_ms),
                    ..Timing::default()
                },
            ))
        };
        Some(run())
    }
}

/// The parts of a complex product of A's real part's shape by B's
/// columns: every part of the shape its partner and the product ask.
#[cfg(feature = "cuda")]
fn check_complex_parts<T: Element>(
    a: &(MatRef<'_, T>, MatRef<'_, T>),
    b: &(MatRef<'_, T>, MatRef<'_, T>),
    c: &(MatMut<'_, T>, MatMut<'_, T>),
) -> Result<(), Error> {
    let ((m, k), n) = (a.0.shape(), b.0.cols());
    let shapes = [
        a.1.shape(),
        b.0.shape(),
        b.1.shape(),
        c.0.shape(),
        c.1.shape(),
    ];
    if shapes != [(m, k), (k, n), (k, n), (m, n), (m, n)] {
        return Err(Error::InvalidOption(format!(
            "a complex product of {m}×{k} by {k}×{n} parts has parts of shapes {shapes:?}"
        )));
    }
    Ok(())
}

#[cfg(feature = "cuda")]
impl Context {
    /// The emulated complex product on a GPU by Karatsuba on the residues
    /// ([`crate::cuda::products::complex::multiply_host_emulated`]).
    fn gpu_karatsuba<T: Element>(
        &self,
        gpu: &crate::cuda::runtime::device::Gpu,
        a: (MatRef<'_, T>, MatRef<'_, T>),
        b: (MatRef<'_, T>, MatRef<'_, T>),
        c: (MatMut<'_, T>, MatMut<'_, T>),
        opts: &GemmOptions,
    ) -> Result<Report, Error> {
        let ((m, k), n) = (a.0.shape(), b.0.cols());
        check_complex_parts(&a, &b, &c)?;
        let mut plan = self.plan(Problem::of::<T>((m, k, n)), opts)?;
        plan.kernel += "; complex: Karatsuba on the residues";
        opts.check_interrupt()?;
        let (times, tally) =
            crate::cuda::products::complex::multiply_host_emulated(gpu, a, b, c, opts)?;
        Ok(Report::new(
            plan,
            Timing {
                compute_ms: times.kernel_ms,
                upload_ms: Some(times.upload_ms),
                download_ms: Some(times.download_ms),
                emulation: Some(tally),
                ..Timing::default()
            },
        ))
    }
}

/// GPU memory the library allocated for one matrix
/// ([`Context::alloc_gpu`]), freed when dropped: a product's output that
/// a caller hands on (through DLPack, say) without a copy.
#[cfg(feature = "cuda")]
pub struct GpuBuffer {
    // Held for its own drop, which frees the memory; declared first so
    // that it is dropped while `gpu` still holds the context (bound in
    // `Drop`).
    _memory: crate::cuda::runtime::memory::RawDeviceMemory,
    gpu: Arc<crate::cuda::runtime::device::Gpu>,
    ordinal: usize,
    matrix: GpuMatrix,
    dtype: crate::element::DType,
}

#[cfg(feature = "cuda")]
impl GpuBuffer {
    /// The buffer as a row-major matrix (`ld` = columns).
    pub fn matrix(&self) -> GpuMatrix {
        self.matrix
    }

    /// Its element type.
    pub fn dtype(&self) -> crate::element::DType {
        self.dtype
    }

    /// The ordinal of the GPU it is on.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
}

#[cfg(feature = "cuda")]
impl Drop for GpuBuffer {
    fn drop(&mut self) {
        // The free needs the buffer's context on this thread, which may be
        // any thread (a DLPack consumer's deleter, say). A failure to bind
        // leaves the free to fail too, and the memory leaks: drop cannot
        // report it.
        let _ = self.gpu.bind();
    }
}

#[cfg(feature = "cuda")]
impl std::fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuBuffer({:?} {} on cuda:{})",
            self.matrix, self.dtype, self.ordinal
        )
    }
}

#[cfg(feature = "cuda")]
impl Context {
    /// The ordinal of the GPU whose CUDA context is current on the calling
    /// thread, as a CUDA program left it (the device of the cuBLAS handles
    /// and streams it uses now); None where CUDA is missing or no context
    /// is current. A front end that takes over calls made for another
    /// library opens this GPU's context.
    pub fn current_gpu() -> Option<usize> {
        crate::cuda::runtime::device::current_ordinal()
    }

    /// Whether the caller's raw CUDA stream is capturing work into a
    /// graph (where products that wait on the host cannot run).
    ///
    /// # Safety
    /// `stream` is a live `CUstream` of this context's GPU, or 0.
    pub unsafe fn gpu_stream_is_capturing(&self, stream: usize) -> Result<bool, Error> {
        self.gpu()?;
        // SAFETY: the caller's contract.
        unsafe { crate::cuda::runtime::device::is_capturing(stream) }
    }

    /// Reads `out.len()` 64-bit words of this GPU's memory at `src` (a
    /// batch's array of device pointers, say) after the work queued on the
    /// caller's raw stream, waiting for it.
    ///
    /// # Safety
    /// `stream` is a live `CUstream` of this context's GPU, or 0; `src`
    /// holds `out.len()` words of its memory.
    pub unsafe fn read_gpu_words(
        &self,
        src: u64,
        out: &mut [u64],
        stream: usize,
    ) -> Result<(), Error> {
        self.gpu()?
            .ctx
            .bind_to_thread()
            .map_err(|e| crate::cuda::runtime::cuda_err("cannot bind the GPU's context", e))?;
        // SAFETY: the caller's contract.
        unsafe { crate::cuda::runtime::device::read_words(src, out, stream) }
    }

    /// The raw handle of the CUDA stream this context's products run on
    /// (0 for the legacy default stream), for exchanging data with other
    /// libraries (DLPack's `stream` argument).
    pub fn gpu_stream_handle(&self) -> Result<usize, Error> {
        Ok(self.gpu()?.stream.cu_stream() as usize)
    }

    /// An uninitialised rows×cols matrix of T in this context's GPU memory.
    pub fn alloc_gpu<T: Element>(&self, rows: usize, cols: usize) -> Result<GpuBuffer, Error> {
        let gpu = Arc::clone(self.gpu.as_ref().ok_or_else(|| {
            Error::InvalidOption(format!("{} is not a CUDA device", self.device))
        })?);
        let bytes = rows
            .checked_mul(cols)
            .and_then(|e| e.checked_mul(std::mem::size_of::<T>()))
            .ok_or(Error::SizeOverflow { rows, cols })?;
        let memory = crate::cuda::runtime::memory::RawDeviceMemory::alloc(&gpu, bytes)?;
        let ordinal = match self.device {
            Device::Cuda(ordinal) => ordinal,
            Device::Cpu => unreachable!("only a CUDA context holds a GPU"),
        };
        Ok(GpuBuffer {
            matrix: GpuMatrix::row_major(memory.ptr, (rows, cols), cols),
            _memory: memory,
            gpu,
            ordinal,
            dtype: T::DTYPE,
        })
    }

    /// **C ← α·A·B + β·C** on matrices already in this context's GPU memory,
    /// with no host copy; returns when C is complete, with the time it took
    /// (`compute_ms`, host clock). β = 0 never reads C. `auto` and the
    /// options resolve as for [`Context::gemm`]; the host products' NaN/∞
    /// rule (a fast algorithm meeting ∞ runs its base) needs a pass over A
    /// and B that this path does not make.
    ///
    /// # Safety
    /// Each matrix's elements (see [`GpuMatrix`]) are memory of T on this
    /// context's GPU, valid until the call returns; C overlaps neither A
    /// nor B and no two of its elements share an address; nothing else
    /// writes A, B or C meanwhile (work queued before the call on other
    /// streams is ordered before it by the caller, as DLPack's `stream`
    /// argument does).
    pub unsafe fn gemm_gpu<T: Element>(
        &self,
        alpha: T,
        a: GpuMatrix,
        b: GpuMatrix,
        beta: T,
        c: GpuMatrix,
        opts: &GemmOptions,
    ) -> Result<Timing, Error> {
        // SAFETY: the caller's contract is the batch's, for one product.
        unsafe {
            self.gemm_gpu_batch(
                alpha,
                &[GpuProduct { a, b, c }],
                beta,
                opts,
                GpuCompletion::Complete,
            )
        }
    }

    /// [`Context::plan`] of a strided batch of `count` GPU-resident
    /// products of `problem`'s shape (operands at fixed distances, as
    /// stacked or broadcast arrays give them), as
    /// [`Context::gemm_gpu_batch`] runs one: `auto`'s batch crossovers
    /// apply ([`crate::emulation::auto_emulates_batch`]).
    pub fn plan_gpu_batch(
        &self,
        problem: Problem,
        count: usize,
        opts: &GemmOptions,
    ) -> Result<Plan, Error> {
        let beta_is_zero = !problem.reads_c;
        for_dtype!(problem.dtype, T => {
            let resolved =
                self.resolve_resident::<T>(opts, problem.shape(), beta_is_zero, count)?;
            self.plan_resolved::<T>(problem.shape(), beta_is_zero, &resolved)
        })
    }

    /// A batch of [`Context::gemm_gpu`]'s products, all of one shape: C ←
    /// α·A·B + β·C for each. The plan is made once; the products are
    /// queued on the GPU's stream with no wait between them (cuBLAS runs a
    /// batch whose operands lie at fixed distances as one strided-batch
    /// launch), then waited for once or, with
    /// [`GpuCompletion::OnStream`], ordered on the caller's stream.
    /// Operands may repeat across products (a broadcast A or B); outputs
    /// may not.
    ///
    /// # Safety
    /// As [`Context::gemm_gpu`], for every product; and no output overlaps
    /// another product's operands (checked for the outputs among
    /// themselves: their spans must be disjoint). With
    /// [`GpuCompletion::OnStream`], the work that makes A, B and C is that
    /// stream's or ordered before it, and "until the call returns" becomes
    /// "until that stream has passed the point where the call left it":
    /// memory freed earlier must not be reused by work not ordered after
    /// it (as torch's caching allocator guarantees for tensors of that
    /// stream).
    pub unsafe fn gemm_gpu_batch<T: Element>(
        &self,
        alpha: T,
        products: &[GpuProduct],
        beta: T,
        opts: &GemmOptions,
        completion: GpuCompletion,
    ) -> Result<Timing, Error> {
        let gpu = self.gpu()?;
        let Some(shape) = check_batch(products, std::mem::size_of::<T>())? else {
            return Ok(Timing::default());
        };
        let device = device_batch(products, alpha, beta);
        // A strided batch runs as one (its steps one launch over the
        // batch), which moves `auto`'s crossovers.
        let strided = match crate::cuda::kernels::gemm::DeviceGemm::strided(&device) {
            Some(_) => device.len(),
            None => 1,
        };
        let opts = self.resolve_resident::<T>(opts, shape, beta == T::ZERO, strided)?;
        opts.check_interrupt()?;
        if nothing_to_multiply(shape, opts.algorithm)? {
            return Ok(Timing::default());
        }
        let (ms, emulation) = crate::cuda::products::in_core::multiply_resident_batch(
            gpu, &device, &opts, completion,
        )?;
        Ok(Timing {
            compute_ms: ms,
            emulation,
            ..Timing::default()
        })
    }

    /// [`Context::resolve_for`] for GPU-resident operands: the 16-bit
    /// modes convert host operands on upload, so on resident f32 operands
    /// `auto` at `bf16` takes TF32, the fastest product there that meets
    /// the level; a strided batch of `strided` products (1: none) takes
    /// the emulated product past the batches' own crossovers
    /// ([`crate::emulation::auto_emulates_batch`]).
    fn resolve_resident<T: Element>(
        &self,
        opts: &GemmOptions,
        shape: (usize, usize, usize),
        beta_is_zero: bool,
        strided: usize,
    ) -> Result<GemmOptions, Error> {
        let mut resolved = self.resolve_for::<T>(opts, shape, beta_is_zero)?;
        if opts.algorithm == Algorithm::Auto
            && matches!(opts.gpu.precision, None | Some(GpuPrecision::Fp32))
            && crate::emulation::auto_emulates_batch(T::DTYPE, opts.accuracy, shape, strided)
        {
            resolved.algorithm = Algorithm::Emulated;
        }
        if opts.algorithm == Algorithm::Auto
            && matches!(
                resolved.gpu.precision,
                Some(GpuPrecision::Bf16 | GpuPrecision::F16)
            )
        {
            resolved.gpu.precision = Some(GpuPrecision::Tf32);
        }
        Ok(resolved)
    }

    /// Complex products **C ← A·B** on matrices in this context's GPU
    /// memory stored interleaved, each element a (real, imaginary) pair of
    /// T (complex64 for f32 parts, complex128 for f64, as numpy, torch and
    /// CUDA store them). Shapes, leading dimensions and the matrices of
    /// [`GpuMatrix`] count complex elements; transposed views are read in
    /// place; a transposed C is written as the row-major Cᵀ = Bᵀ·Aᵀ.
    ///
    /// `form` is the complex product's: [`ComplexForm::Classical`] (four
    /// real products' worth, the complex product's componentwise bound, the
    /// `native` level) or [`ComplexForm::Gauss`] (three, 3M: a weaker bound
    /// on the imaginary part; see [`crate::complex`]). The algorithm
    /// chooses who multiplies:
    /// * `cublas`: cuBLAS's own complex products on the interleaved
    ///   matrices, cgemm/zgemm or cgemm3m/zgemm3m;
    /// * fastmm's algorithms (`emulated`, `winograd`, ...): the operands
    ///   split into real planes on the GPU once (a broadcast operand once),
    ///   fastmm's real products of them at the options' level, and C
    ///   interleaved from their results ([`crate::complex::multiply`]'s
    ///   steps, with GPU memory for the planes: two or three per operand,
    ///   two or three per product); the emulated product at the classical
    ///   form multiplies the planes by Karatsuba on the residues, three
    ///   INT8 products per modulus;
    /// * `auto`: the split parts where `auto` would give the real products
    ///   to anything but cuBLAS in the parts' own type (the emulated
    ///   product on large shapes, TF32 at `tf32`), else cuBLAS's complex
    ///   product, which is as fast as its real ones with no split.
    ///
    /// Completion as [`Context::gemm_gpu_batch`].
    ///
    /// # Safety
    /// As [`Context::gemm_gpu_batch`], for memory of complex elements of
    /// T's parts.
    pub unsafe fn gemm_gpu_complex_batch<T: Element>(
        &self,
        products: &[GpuProduct],
        form: ComplexForm,
        opts: &GemmOptions,
        completion: GpuCompletion,
    ) -> Result<Timing, Error> {
        let gpu = self.gpu()?;
        if !matches!(
            T::DTYPE,
            crate::element::DType::F32 | crate::element::DType::F64
        ) {
            return Err(Error::Unsupported {
                algorithm: opts.algorithm.name(),
                what: format!("complex products with {} parts", T::DTYPE),
            });
        }
        opts.validate()?;
        opts.check_interrupt()?;
        let Some(shape) = check_batch(products, 2 * std::mem::size_of::<T>())? else {
            return Ok(Timing::default());
        };
        let real = self.resolve_resident::<T>(opts, shape, true, 1)?;
        let split = splits_complex(opts.algorithm, &real);
        if !split
            && matches!(
                opts.gpu.precision,
                Some(GpuPrecision::Tf32 | GpuPrecision::Bf16 | GpuPrecision::F16)
            )
        {
            return Err(Error::InvalidOption(
                "cuBLAS's complex products run in the parts' own type; a tensor-core precision applies to real f32 products (fastmm's algorithms run complex products as real ones)".into(),
            ));
        }
        if nothing_to_multiply(shape, opts.algorithm)? {
            return Ok(Timing::default());
        }
        // (A transposed C needs no conjugation: the transpose of a product
        // of complex matrices is the product of their transposes.)
        let device = device_batch(products, T::ONE, T::ZERO);
        let (ms, emulation) = match split {
            true => crate::cuda::products::complex::multiply_resident_split(
                gpu, form, &device, &real, completion,
            )?,
            false => (
                crate::cuda::products::in_core::multiply_complex_resident(
                    gpu, form, &device, opts, completion,
                )?,
                None,
            ),
        };
        Ok(Timing {
            compute_ms: ms,
            emulation,
            ..Timing::default()
        })
    }
}

/// Whether a GPU-resident batch of `shape` has nothing to multiply (C
/// empty); an empty inner dimension with a non-empty C is refused, as the
/// kernels take k ≥ 1.
#[cfg(feature = "cuda")]
fn nothing_to_multiply(
    (m, k, n): (usize, usize, usize),
    algorithm: Algorithm,
) -> Result<bool, Error> {
    if m == 0 || n == 0 {
        return Ok(true);
    }
    if k == 0 {
        return Err(Error::Unsupported {
            algorithm: algorithm.name(),
            what: "an empty inner dimension on GPU-resident operands".into(),
        });
    }
    Ok(false)
}

/// Whether complex GPU-resident operands asked for with `asked` run as
/// fastmm's real products of split parts (resolved as `real`) rather than
/// cuBLAS's complex product: `cublas` never, fastmm's algorithms always,
/// `auto` where its real products would not be cuBLAS's in the parts' own
/// type (cuBLAS's complex product is as fast as its real ones, with no
/// split).
#[cfg(feature = "cuda")]
fn splits_complex(asked: Algorithm, real: &GemmOptions) -> bool {
    match asked {
        Algorithm::Cublas => false,
        Algorithm::Auto => {
            real.algorithm != Algorithm::Cublas
                || !matches!(real.gpu.precision, None | Some(GpuPrecision::Fp32))
        }
        _ => true,
    }
}

/// A batch's shape (m, k, n), `None` for an empty batch: every product
/// of that shape with valid leading dimensions, the outputs of one layout
/// and apart from each other (elements of `item` bytes).
#[cfg(feature = "cuda")]
fn check_batch(
    products: &[GpuProduct],
    item: usize,
) -> Result<Option<(usize, usize, usize)>, Error> {
    let Some(first) = products.first() else {
        return Ok(None);
    };
    let shape = (first.a.rows, first.a.cols, first.b.cols);
    for p in products {
        check_gpu_product(p, shape)?;
        if p.c.transposed != first.c.transposed {
            return Err(Error::InvalidOption(
                "a batch's outputs share one layout: row-major, or all transposed views".into(),
            ));
        }
    }
    check_disjoint_outputs(products, item)?;
    Ok(Some(shape))
}

/// A checked batch as the kernels take it, each product C ← α·A·B + β·C
/// with a row-major C: the batch shares one shape, so its outputs share
/// one layout, and a transposed C is the row-major Cᵀ = Bᵀ·Aᵀ.
#[cfg(feature = "cuda")]
fn device_batch<T: Element>(
    products: &[GpuProduct],
    alpha: T,
    beta: T,
) -> Vec<crate::cuda::kernels::gemm::DeviceGemm<T>> {
    let operand = |m: GpuMatrix| crate::cuda::kernels::gemm::Operand {
        ptr: m.ptr,
        ld: m.ld,
        trans: m.transposed,
    };
    products
        .iter()
        .map(|p| {
            let (a, b, c) = match p.c.transposed {
                false => (p.a, p.b, p.c),
                true => (p.b.t(), p.a.t(), p.c.t()),
            };
            crate::cuda::kernels::gemm::DeviceGemm {
                shape: (a.rows, a.cols, b.cols),
                alpha,
                a: operand(a),
                b: operand(b),
                beta,
                c: operand(c),
            }
        })
        .collect()
}

/// One GPU-resident product's shapes against the batch's (m, k, n), and
/// its leading dimensions.
#[cfg(feature = "cuda")]
fn check_gpu_product(p: &GpuProduct, (m, k, n): (usize, usize, usize)) -> Result<(), Error> {
    let GpuProduct { a, b, c } = *p;
    if a.cols != b.rows {
        return Err(Error::DimensionMismatch {
            a: (a.rows, a.cols),
            b: (b.rows, b.cols),
        });
    }
    if (a.rows, a.cols, b.cols) != (m, k, n) {
        return Err(Error::InvalidOption(format!(
            "a batch's products share one shape: {}×{}×{} beside {m}×{k}×{n}",
            a.rows, a.cols, b.cols
        )));
    }
    if (c.rows, c.cols) != (a.rows, b.cols) {
        return Err(Error::OutputShape {
            expected: (a.rows, b.cols),
            got: (c.rows, c.cols),
        });
    }
    for (name, m) in [("A", a), ("B", b), ("C", c)] {
        if !m.ld_ok() {
            let line = match m.transposed {
                false => format!("its {} columns", m.cols),
                true => format!("its {} rows (a transposed view)", m.rows),
            };
            return Err(Error::InvalidOption(format!(
                "{name}'s leading dimension {} is below {line}",
                m.ld
            )));
        }
    }
    Ok(())
}

/// That no two outputs of a batch share memory: their spans, sorted by
/// address, do not overlap.
#[cfg(feature = "cuda")]
fn check_disjoint_outputs(products: &[GpuProduct], item: usize) -> Result<(), Error> {
    let mut spans: Vec<(u64, u64)> = products
        .iter()
        .map(|p| (p.c.ptr, p.c.ptr + p.c.extent(item)))
        .filter(|(start, end)| end > start)
        .collect();
    spans.sort_unstable();
    match spans.windows(2).any(|w| w[1].0 < w[0].1) {
        true => Err(Error::InvalidOption(
            "two products of a batch write overlapping outputs".into(),
        )),
        false => Ok(()),
    }
}

/// A GPU product of host matrices: in one piece, or out of core, streamed
/// in tiles, when A, B and C exceed the GPU memory budget.
#[cfg(feature = "cuda")]
fn on_gpu<T: Element>(
    (gpu, pools): (
        &Arc<crate::cuda::runtime::device::Gpu>,
        &crate::cuda::products::hosted::StagingPools,
    ),
    product: Gemm<'_, T>,
    opts: &GemmOptions,
    timed: bool,
) -> Result<Timing, Error> {
    use crate::cuda::{products::in_core, products::out_of_core};
    if out_of_core::needed::<T>(gpu, product.shape(), opts)? {
        let report = out_of_core::multiply(gpu, pools, product, opts)?;
        return Ok(Timing {
            compute_ms: report.seconds * 1e3,
            upload_ms: None,
            download_ms: None,
            streamed: Some(Streamed {
                upload_bytes: report.upload_bytes,
                download_bytes: report.download_bytes,
                products_fraction: report.products_seconds / report.seconds,
                staging_seconds: report.staging_seconds,
            }),
            emulation: None,
        });
    }
    let times = in_core::multiply(gpu, product, opts, timed)?;
    Ok(Timing {
        compute_ms: times.kernel_ms,
        upload_ms: Some(times.upload_ms),
        download_ms: Some(times.download_ms),
        streamed: None,
        emulation: times.emulation,
    })
}

/// General matrix multiply on the CPU: **C ← α·A·B + β·C** (see
/// [`Context::gemm`]).
pub fn gemm<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    Context::cpu().gemm(alpha, a, b, beta, c, opts)
}

/// C = A·B on the CPU with the automatic algorithm, in a new matrix.
pub fn matmul<T: Element>(a: &Matrix<T>, b: &Matrix<T>) -> Result<Matrix<T>, Error> {
    matmul_with(a.as_ref(), b.as_ref(), &GemmOptions::default())
}

/// C = A·B on the CPU for any views, with explicit options, in a new
/// matrix.
pub fn matmul_with<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    opts: &GemmOptions,
) -> Result<Matrix<T>, Error> {
    Context::cpu().matmul(a, b, opts)
}

/// Whether every element of `m` is finite: line by line along its
/// contiguous direction, without stopping early, so that the loop
/// vectorises (an element-wise early exit over the strided iterator took
/// 12 µs of a 4 µs 64³ product).
fn all_finite<T: Element>(m: MatRef<'_, T>) -> bool {
    if m.rows() == 0 || m.cols() == 0 {
        return true;
    }
    let lines = if m.row(0).is_some() { m } else { m.t() };
    if lines.row(0).is_none() {
        return m.iter().all(|x| x.to_f64().is_finite());
    }
    (0..lines.rows()).all(|i| {
        lines.row(i).is_some_and(|line| {
            !line
                .iter()
                .fold(false, |bad, &x| bad | !x.to_f64().is_finite())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty C is nothing to do; an empty depth beside a non-empty C is
    /// refused with the algorithm's name.
    #[cfg(feature = "cuda")]
    #[test]
    fn an_empty_resident_batch_is_settled_before_the_gpu() {
        assert!(nothing_to_multiply((0, 5, 3), Algorithm::Cublas).unwrap());
        assert!(nothing_to_multiply((4, 0, 0), Algorithm::Cublas).unwrap());
        assert!(!nothing_to_multiply((4, 5, 3), Algorithm::Cublas).unwrap());
        let refused = nothing_to_multiply((4, 0, 3), Algorithm::Emulated);
        assert!(matches!(
            refused,
            Err(Error::Unsupported {
                algorithm: "emulated",
                ..
            })
        ));
    }

    /// Every choice of who multiplies complex GPU-resident operands.
    #[cfg(feature = "cuda")]
    #[test]
    fn complex_resident_operands_split_unless_cublas_would_run_the_parts() {
        let real = |algorithm, precision| GemmOptions {
            gpu: GpuOptions {
                precision,
                ..GemmOptions::new(algorithm).gpu
            },
            ..GemmOptions::new(algorithm)
        };
        let cublas = real(Algorithm::Cublas, None);
        let tf32 = real(Algorithm::Cublas, Some(GpuPrecision::Tf32));
        let emulated = real(Algorithm::Emulated, None);
        // auto: cuBLAS's complex product where the parts would be sgemm's.
        assert!(!splits_complex(Algorithm::Auto, &cublas));
        assert!(!splits_complex(
            Algorithm::Auto,
            &real(Algorithm::Cublas, Some(GpuPrecision::Fp32))
        ));
        assert!(splits_complex(Algorithm::Auto, &emulated));
        assert!(splits_complex(Algorithm::Auto, &tf32));
        assert!(splits_complex(
            Algorithm::Auto,
            &real(Algorithm::Winograd, None)
        ));
        // Asked by name: cuBLAS's own, or fastmm's real products.
        assert!(!splits_complex(Algorithm::Cublas, &cublas));
        for algorithm in [
            Algorithm::Emulated,
            Algorithm::CudaFast,
            Algorithm::Winograd,
        ] {
            assert!(splits_complex(algorithm, &real(algorithm, None)));
        }
    }

    /// A batch on GPU-resident operands is checked before any GPU is
    /// touched: one shape, leading dimensions, and outputs apart.
    #[cfg(feature = "cuda")]
    #[test]
    fn a_gpu_batch_is_checked_at_the_boundary() {
        let m = |ptr, rows, cols, ld| GpuMatrix::row_major(ptr, (rows, cols), ld);
        let product = |c_ptr| GpuProduct {
            a: m(0, 4, 3, 3),
            b: m(1 << 20, 3, 5, 5),
            c: m(c_ptr, 4, 5, 8),
        };
        assert!(check_gpu_product(&product(1 << 21), (4, 3, 5)).is_ok());
        assert!(check_gpu_product(&product(1 << 21), (4, 3, 6)).is_err());
        let narrow = GpuProduct {
            c: m(1 << 21, 4, 5, 4),
            ..product(0)
        };
        assert!(check_gpu_product(&narrow, (4, 3, 5)).is_err());
        // C spans (3·8 + 5)·4 = 116 bytes: 116 apart is disjoint, 112 not.
        let apart = [product(1 << 21), product((1 << 21) + 116)];
        assert!(check_disjoint_outputs(&apart, 4).is_ok());
        let overlapping = [product(1 << 21), product((1 << 21) + 112)];
        assert!(check_disjoint_outputs(&overlapping, 4).is_err());
        assert!(check_disjoint_outputs(&[product(7), product(7)], 4).is_err());
        // Complex64 elements are 8 bytes: the same C spans 232 bytes.
        assert!(check_disjoint_outputs(&apart, 8).is_err());
        let complex_apart = [product(1 << 21), product((1 << 21) + 232)];
        assert!(check_disjoint_outputs(&complex_apart, 8).is_ok());
    }

    /// Transposed views (column-major GPU matrices) at the boundary: their
    /// leading dimension spans a column, their span is measured by
    /// columns, and `t()` is an involution that swaps the shape.
    #[cfg(feature = "cuda")]
    #[test]
    fn transposed_gpu_matrices_are_checked_by_their_columns() {
        // A 4×3 matrix stored as the transpose of a 3×4 row-major one
        // with rows 6 apart: element (i, j) at j·6 + i.
        let a = GpuMatrix::row_major(0, (3, 4), 6).t();
        assert_eq!((a.rows, a.cols, a.transposed), (4, 3, true));
        assert_eq!(a.t(), GpuMatrix::row_major(0, (3, 4), 6));
        assert!(a.ld_ok());
        // Two whole columns of 6 and the 4 elements of the last: 16 f32.
        assert_eq!(a.extent(4), 64);
        assert_eq!(GpuMatrix { rows: 0, ..a }.extent(4), 0);
        let b = GpuMatrix::row_major(1 << 20, (3, 5), 5);
        let c = GpuMatrix::row_major(1 << 21, (4, 5), 5);
        assert!(check_gpu_product(&GpuProduct { a, b, c }, (4, 3, 5)).is_ok());
        // A column of 4 rows does not fit in a leading dimension of 3.
        let short = GpuMatrix { ld: 3, ..a };
        assert!(!short.ld_ok());
        let err = check_gpu_product(&GpuProduct { a: short, b, c }, (4, 3, 5)).unwrap_err();
        assert!(err.to_string().contains("transposed"), "{err}");
        // A transposed C: its span is by columns as well.
        let ct = GpuMatrix::row_major(1 << 21, (5, 4), 4).t();
        assert!(check_gpu_product(&GpuProduct { a, b, c: ct }, (4, 3, 5)).is_ok());
        assert_eq!(ct.extent(8), 8 * 20);
    }

    /// Front ends share a context between threads (the Python bindings
    /// release the GIL around products).
    #[test]
    fn a_context_is_shared_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Context>();
        let ctx = Context::cpu();
        let a = Matrix::<i64>::from_fn(40, 30, |i, j| (i * j) as i64 - 7);
        let want = ctx.matmul(a.as_ref(), a.as_ref().t(), &GemmOptions::default());
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let got = ctx.matmul(a.as_ref(), a.as_ref().t(), &GemmOptions::default());
                    assert_eq!(got, want);
                });
            }
        });
    }

    #[test]
    fn algorithms_run_only_on_their_devices_and_auto_resolves_per_device() {
        let cpu = Context::cpu();
        let a = Matrix::<f32>::zeros(4, 4);
        let mut c = Matrix::<f32>::zeros(4, 4);
        let err = cpu
            .gemm(
                1.0,
                a.as_ref(),
                a.as_ref(),
                0.0,
                c.as_mut(),
                &GemmOptions::new(Algorithm::Cublas),
            )
            .unwrap_err();
        assert!(
            matches!(err, Error::Unsupported { algorithm: "cublas", ref what } if what.contains("cpu")),
            "{err}"
        );
        let plan = cpu
            .plan(Problem::of::<f32>((4, 4, 4)), &GemmOptions::default())
            .unwrap();
        assert_eq!(plan.algorithm, Algorithm::Packed);
        assert_eq!(plan.device, Device::Cpu);
        assert_eq!(plan.error_growth, 1.0);
        assert_eq!(
            Algorithm::auto_for(DeviceKind::Cuda, crate::DType::I32),
            Algorithm::CudaFast
        );
    }
}
