//! Several devices as one value: a [`Team`] of GPUs of one host (driven
//! by this one process, through NCCL), or the CPU standing in for every
//! processor. A product on a team follows the decomposition planner
//! ([`crate::distributed::planner`]) and its schedule
//! ([`crate::distributed::schedule`]); its operands are [`DistMatrix`]
//! values, spread over the devices in the plan's layout, that a caller can
//! keep between products.
//!
//! ```
//! use fastmm::{GemmOptions, Algorithm, Matrix, Role, Team};
//! # fn main() -> Result<(), fastmm::Error> {
//! // The CPU standing in for 4 processors (GPUs: Team::open).
//! let team = Team::simulated(4)?;
//! let a = Matrix::<i64>::from_fn(30, 20, |i, j| (i + 2 * j) as i64);
//! let b = Matrix::<i64>::from_fn(20, 10, |i, j| (i * j % 7) as i64);
//! let plan = team.decompose::<i64>((30, 20, 10))?;
//! let da = team.distribute(&plan, Role::A, a.as_ref())?;
//! let db = team.distribute(&plan, Role::B, b.as_ref())?;
//! let (dc, report) = team.multiply(&da, &db, &GemmOptions::new(Algorithm::Naive))?;
//! assert_eq!(team.collect(&dc)?, fastmm::matmul(&a, &b)?);
//! assert_eq!(report.moved.words_per_processor, plan.words_per_processor);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::context::Context;
use crate::distributed::planner::{self, Decomposition};
use crate::distributed::schedule::{self, Layout, Schedule};
use crate::element::for_dtype;
use crate::element::Element;
use crate::error::Error;
#[cfg(feature = "cuda")]
use crate::executor::GpuShare;
use crate::executor::{Communication, Executor, Report, Timing};
use crate::gemm::{Gemm, Problem};
use crate::matrix::{MatMut, MatRef, Matrix};
use crate::options::{Device, DeviceList, GemmOptions};
use crate::plan::{AcrossPlan, Plan, Route, Spread};

/// Which operand of a product a distributed matrix is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    /// The left operand.
    A,
    /// The right operand.
    B,
    /// The product.
    C,
}

/// Several devices that run one product together.
pub struct Team {
    contexts: Vec<Context>,
    backend: Backend,
}

enum Backend {
    /// The CPU stands in for every processor.
    Simulated,
    #[cfg(feature = "cuda")]
    Gpus(Arc<crate::cuda::products::distributed::Fabric>),
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Team({})", self.describe())
    }
}

/// What a product of distributed matrices ([`Team::multiply`]) did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TeamReport {
    /// The grid, pm×pn×pk.
    pub grid: (usize, usize, usize),
    /// Devices in the team.
    pub processors: usize,
    /// Milliseconds from the first operation to the last device done
    /// (communication included; distributing and collecting are not).
    pub compute_ms: f64,
    /// What moved between the devices, counted from the operations run:
    /// the one description of traffic every executor's report uses.
    pub moved: Communication,
}

/// A matrix spread over a team's devices in a plan's layout: each device
/// holds one contiguous row-major piece.
pub struct DistMatrix<T: Element> {
    schedule: Arc<Schedule>,
    role: Role,
    pieces: Pieces<T>,
}

enum Pieces<T> {
    Host(Vec<Vec<T>>),
    #[cfg(feature = "cuda")]
    Gpu(Vec<Option<GpuPiece>>),
}

/// One device's piece in its memory.
#[cfg(feature = "cuda")]
struct GpuPiece {
    // Dropped first, while `gpu` keeps the context alive (bound in Drop).
    memory: crate::cuda::runtime::memory::RawDeviceMemory,
    gpu: Arc<crate::cuda::runtime::device::Gpu>,
}

#[cfg(feature = "cuda")]
impl Drop for GpuPiece {
    fn drop(&mut self) {
        // The free needs the piece's context current; a failure to bind
        // leaves the free to fail, and the memory leaks (drop cannot
        // report it).
        let _ = self.gpu.bind();
    }
}

impl<T: Element> std::fmt::Debug for DistMatrix<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.shape();
        write!(
            f,
            "DistMatrix({rows}×{cols} {} as {:?} over {} processors)",
            T::DTYPE,
            self.role,
            self.schedule.plan.processors
        )
    }
}

impl<T: Element> DistMatrix<T> {
    /// (rows, cols) of the whole matrix.
    pub fn shape(&self) -> (usize, usize) {
        let layout = self.layout();
        (layout.rows, layout.cols)
    }

    /// Which operand of its plan it is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The plan whose layout it has.
    pub fn plan(&self) -> &Decomposition {
        &self.schedule.plan
    }

    /// Which part each device holds.
    pub fn layout(&self) -> &Layout {
        match self.role {
            Role::A => &self.schedule.a,
            Role::B => &self.schedule.b,
            Role::C => &self.schedule.c,
        }
    }
}

impl Team {
    /// A team of the given GPUs (distinct; one process drives them all).
    /// A single `cpu` is the CPU alone (a team of one).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for an empty list, a device listed twice
    /// or a CPU among GPUs; [`Error::CudaUnavailable`] for an ordinal the
    /// driver does not have.
    pub fn open(devices: &[Device]) -> Result<Team, Error> {
        if devices.is_empty() {
            return Err(Error::InvalidOption(
                "a team needs at least one device".into(),
            ));
        }
        for (i, d) in devices.iter().enumerate() {
            if devices[..i].contains(d) {
                return Err(Error::InvalidOption(format!("{d} is listed twice")));
            }
        }
        if devices == [Device::Cpu] {
            return Team::simulated(1);
        }
        if devices.contains(&Device::Cpu) {
            return Err(Error::InvalidOption(
                "a team is GPUs, or the CPU alone: cpu cannot join GPUs".into(),
            ));
        }
        #[cfg(feature = "cuda")]
        {
            // NVLink multicast (NVLS) can put GPUs that other jobs share out
            // of service, and broadcasts and reductions do not need it: off
            // unless the caller chose (read by NCCL when it connects).
            if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
                std::env::set_var("NCCL_NVLS_ENABLE", "0");
            }
            let contexts = devices
                .iter()
                .map(|&d| Context::open(d))
                .collect::<Result<Vec<_>, _>>()?;
            let gpus = contexts
                .iter()
                .map(|c| c.gpu_arc().expect("a CUDA context holds a GPU"))
                .collect();
            let fabric = crate::cuda::products::distributed::Fabric::new(gpus)?;
            Ok(Team {
                contexts,
                backend: Backend::Gpus(Arc::new(fabric)),
            })
        }
        #[cfg(not(feature = "cuda"))]
        Err(Error::CudaUnavailable(
            "fastmm was built without the `cuda` feature".into(),
        ))
    }

    /// The team of a [`DeviceList`] (`cuda:all`: every GPU).
    pub fn open_list(list: &DeviceList) -> Result<Team, Error> {
        match list {
            DeviceList::AllGpus => Team::all_gpus(),
            DeviceList::Listed(devices) => Team::open(devices),
        }
    }

    /// Every GPU the driver reports (`cuda:all`).
    pub fn all_gpus() -> Result<Team, Error> {
        #[cfg(feature = "cuda")]
        {
            let count = crate::cuda::runtime::device::device_count()?;
            if count == 0 {
                return Err(Error::CudaUnavailable("the driver reports no GPU".into()));
            }
            Team::open(&(0..count).map(Device::Cuda).collect::<Vec<_>>())
        }
        #[cfg(not(feature = "cuda"))]
        Err(Error::CudaUnavailable(
            "fastmm was built without the `cuda` feature".into(),
        ))
    }

    /// The CPU standing in for `processors` processors: each runs its
    /// part of the schedule in turn, and broadcasts and reductions are
    /// copies, counted as a distributed backend's would be. For testing
    /// the distributed algorithm where no GPUs or ranks are.
    pub fn simulated(processors: usize) -> Result<Team, Error> {
        if processors == 0 {
            return Err(Error::InvalidOption(
                "a team needs at least one processor".into(),
            ));
        }
        Ok(Team {
            contexts: vec![Context::cpu(); processors],
            backend: Backend::Simulated,
        })
    }

    /// How many devices.
    pub fn size(&self) -> usize {
        self.contexts.len()
    }

    /// The context of the device of `rank` (the CPU's for every rank of a
    /// simulated team).
    pub fn context(&self, rank: usize) -> &Context {
        &self.contexts[rank]
    }

    /// The devices, by rank.
    pub fn devices(&self) -> Vec<Device> {
        self.contexts.iter().map(|c| c.device()).collect()
    }

    /// One line per device.
    pub fn describe(&self) -> String {
        match self.backend {
            Backend::Simulated => format!(
                "{} simulated processors on {}",
                self.size(),
                self.contexts[0].describe()
            ),
            #[cfg(feature = "cuda")]
            Backend::Gpus(_) => self
                .contexts
                .iter()
                .map(|c| c.describe())
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// The words of `elem` bytes each device can hold for a product (GPUs: the
    /// smallest free memory less the out-of-core reserve; simulated:
    /// unlimited).
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    fn memory_words(&self, elem: usize) -> Result<Option<u128>, Error> {
        match &self.backend {
            Backend::Simulated => Ok(None),
            #[cfg(feature = "cuda")]
            Backend::Gpus(fabric) => {
                let mut least = u64::MAX;
                for gpu in fabric.gpus() {
                    let (free, _) = gpu.memory_info()?;
                    least = least.min(
                        (free as u64)
                            .saturating_sub(crate::cuda::tunables::CUDA_OUT_OF_CORE_RESERVE_BYTES),
                    );
                }
                Ok(Some(u128::from(least) / elem as u128))
            }
        }
    }

    /// The decomposition of an (m, k, n) product of T on this team: the
    /// grid that moves the fewest words within each device's memory.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when no grid's pieces fit the devices.
    pub fn decompose<T: Element>(
        &self,
        shape: (usize, usize, usize),
    ) -> Result<Decomposition, Error> {
        planner::plan(
            shape,
            self.size(),
            self.memory_words(std::mem::size_of::<T>())?,
        )
    }

    fn schedule_of(plan: &Decomposition) -> Result<Arc<Schedule>, Error> {
        let (m, k, n) = plan.shape;
        if m == 0 || k == 0 || n == 0 {
            return Err(Error::Unsupported {
                algorithm: "distributed",
                what: format!("an empty product ({m}×{k}×{n}); Team::gemm takes it"),
            });
        }
        Ok(Arc::new(schedule::build(plan)))
    }

    /// Spreads `m` over the team as operand `role` of `plan`.
    ///
    /// # Errors
    /// [`Error::OutputShape`] when `m` is not that operand's shape, and the
    /// devices' allocation and copy errors.
    pub fn distribute<T: Element>(
        &self,
        plan: &Decomposition,
        role: Role,
        m: MatRef<'_, T>,
    ) -> Result<DistMatrix<T>, Error> {
        self.check_plan(plan)?;
        let schedule = Self::schedule_of(plan)?;
        self.place(schedule, role, m)
    }

    /// The largest block product of `plan`'s workers, (m, k, n).
    fn block(plan: &Decomposition) -> (usize, usize, usize) {
        (
            planner::part(plan.shape.0, plan.grid.pm, 0).len(),
            planner::part(plan.shape.1, plan.grid.pk, 0).len(),
            planner::part(plan.shape.2, plan.grid.pn, 0).len(),
        )
    }

    fn check_plan(&self, plan: &Decomposition) -> Result<(), Error> {
        if plan.processors != self.size() {
            return Err(Error::InvalidOption(format!(
                "a plan for {} processors on a team of {}",
                plan.processors,
                self.size()
            )));
        }
        Ok(())
    }

    fn place<T: Element>(
        &self,
        schedule: Arc<Schedule>,
        role: Role,
        m: MatRef<'_, T>,
    ) -> Result<DistMatrix<T>, Error> {
        let layout = match role {
            Role::A => &schedule.a,
            Role::B => &schedule.b,
            Role::C => &schedule.c,
        };
        if m.shape() != (layout.rows, layout.cols) {
            return Err(Error::OutputShape {
                expected: (layout.rows, layout.cols),
                got: m.shape(),
            });
        }
        let view_of = |p: &crate::distributed::schedule::Piece| {
            m.submatrix(p.rows.start, p.cols.start, p.rows.len(), p.cols.len())
        };
        let pieces = match &self.backend {
            Backend::Simulated => Pieces::Host(
                layout
                    .pieces
                    .iter()
                    .map(|p| Matrix::try_from_view(view_of(p)).map(Matrix::into_vec))
                    .collect::<Result<_, _>>()?,
            ),
            #[cfg(feature = "cuda")]
            Backend::Gpus(fabric) => {
                let mut placed = Vec::with_capacity(layout.pieces.len());
                for (gpu, p) in fabric.gpus().iter().zip(&layout.pieces) {
                    placed.push(upload(gpu, view_of(p))?);
                }
                Pieces::Gpu(placed)
            }
        };
        Ok(DistMatrix {
            schedule,
            role,
            pieces,
        })
    }

    /// C = A·B with A and B distributed as operands A and B of one plan;
    /// C comes back distributed as its operand C. Unlike [`Team::gemm`],
    /// this does not scan the pieces for NaN and ∞ (a fast algorithm
    /// meeting one may give NaN where the classical product does not).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for operands of different plans or roles,
    /// or of another team; [`Error::Processor`] naming the device that
    /// failed or did not finish in time.
    pub fn multiply<T: Element>(
        &self,
        a: &DistMatrix<T>,
        b: &DistMatrix<T>,
        opts: &GemmOptions,
    ) -> Result<(DistMatrix<T>, TeamReport), Error> {
        if a.role != Role::A || b.role != Role::B {
            return Err(Error::InvalidOption(format!(
                "a product takes operands A and B of a plan, not {:?} and {:?}",
                a.role, b.role
            )));
        }
        if !Arc::ptr_eq(&a.schedule, &b.schedule) && a.schedule.plan != b.schedule.plan {
            return Err(Error::InvalidOption(
                "A and B are distributed for different plans".into(),
            ));
        }
        self.check_plan(&a.schedule.plan)?;
        let opts = self.contexts[0].resolve_for::<T>(opts, Self::block(&a.schedule.plan), true)?;
        self.multiply_resolved(a, b, &opts)
    }

    /// [`Team::multiply`] of operands of one plan with options resolved
    /// for its blocks.
    fn multiply_resolved<T: Element>(
        &self,
        a: &DistMatrix<T>,
        b: &DistMatrix<T>,
        opts: &GemmOptions,
    ) -> Result<(DistMatrix<T>, TeamReport), Error> {
        let schedule = Arc::clone(&a.schedule);
        let plan = &schedule.plan;
        opts.check_interrupt()?;
        let words = schedule.received();
        let (pieces, ms) = match (&self.backend, &a.pieces, &b.pieces) {
            (Backend::Simulated, Pieces::Host(pa), Pieces::Host(pb)) => {
                let start = Instant::now();
                let (c, _) = crate::cpu::distributed::run(&schedule, pa.clone(), pb.clone(), opts)?;
                (Pieces::Host(c), start.elapsed().as_secs_f64() * 1e3)
            }
            #[cfg(feature = "cuda")]
            (Backend::Gpus(fabric), Pieces::Gpu(pa), Pieces::Gpu(pb)) => {
                let ptr = |p: &Option<GpuPiece>| p.as_ref().map_or(0, |p| p.memory.ptr);
                let pa: Vec<u64> = pa.iter().map(ptr).collect();
                let pb: Vec<u64> = pb.iter().map(ptr).collect();
                // SAFETY: the pieces were placed by this team for this
                // schedule (their sizes are the layout's), and the borrows
                // of `a` and `b` keep them alive and unwritten.
                let (c, report) = unsafe { fabric.run::<T>(&schedule, &pa, &pb, opts)? };
                let c = c
                    .into_iter()
                    .zip(fabric.gpus())
                    .map(|(memory, gpu)| {
                        memory.map(|memory| GpuPiece {
                            memory,
                            gpu: Arc::clone(gpu),
                        })
                    })
                    .collect();
                (Pieces::Gpu(c), report.seconds * 1e3)
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(Error::InvalidOption(
                    "the operands were distributed by another kind of team".into(),
                ))
            }
        };
        let report = TeamReport {
            grid: (plan.grid.pm, plan.grid.pn, plan.grid.pk),
            processors: plan.processors,
            compute_ms: ms,
            moved: Communication {
                words_per_processor: words.iter().copied().max().unwrap_or(0),
                total_words: words.iter().sum(),
                lower_bound: plan.lower_bound,
                ..Communication::default()
            },
        };
        Ok((
            DistMatrix {
                schedule,
                role: Role::C,
                pieces,
            },
            report,
        ))
    }

    /// The whole of a distributed matrix, in host memory.
    pub fn collect<T: Element>(&self, m: &DistMatrix<T>) -> Result<Matrix<T>, Error> {
        let (rows, cols) = m.shape();
        let mut out = Matrix::try_zeros(rows, cols)?;
        self.collect_into(m, T::ZERO, out.as_mut())?;
        Ok(out)
    }

    /// out ← piece + β·out, piece by piece (β = 0 never reads out).
    fn collect_into<T: Element>(
        &self,
        m: &DistMatrix<T>,
        beta: T,
        mut out: MatMut<'_, T>,
    ) -> Result<(), Error> {
        let layout = m.layout();
        for (rank, piece) in layout.pieces.iter().enumerate() {
            if piece.elements() == 0 {
                continue;
            }
            let data: Vec<T> = match &m.pieces {
                Pieces::Host(p) => p[rank].clone(),
                #[cfg(feature = "cuda")]
                Pieces::Gpu(p) => match &p[rank] {
                    Some(gpu_piece) => download(gpu_piece, piece.elements())?,
                    None => continue,
                },
            };
            let width = piece.cols.len();
            for (i, row) in piece.rows.clone().enumerate() {
                let src = &data[i * width..][..width];
                // A contiguous row of C takes the piece's row in one copy.
                if let (true, Some(dst)) = (beta == T::ZERO, out.row_mut(row)) {
                    dst[piece.cols.clone()].copy_from_slice(src);
                    continue;
                }
                for (&v, col) in src.iter().zip(piece.cols.clone()) {
                    let old = if beta == T::ZERO {
                        T::ZERO
                    } else {
                        beta.mul(out.get(row, col))
                    };
                    out.set(row, col, old.add(v));
                }
            }
        }
        Ok(())
    }

    /// What `problem` would run with `opts` on this team (see
    /// [`Executor::plan`]): the decomposition that moves the fewest words
    /// within each device's memory, the route, and the product each
    /// device runs.
    ///
    /// The route: Strassen and Winograd run their levels across the
    /// devices (CAPS's depth-first steps: rows spread cyclically, the sums
    /// local, the classical products below distributed) where the
    /// recursion's blocks align with the device count and, on GPUs, fit
    /// them. Otherwise, on GPUs, the matrices stay in host memory and
    /// stream through every GPU with the copies hidden behind the products
    /// ([`Route::Bands`]: B resident on each GPU, bands of A and C taken
    /// dynamically, so a slower GPU takes fewer), or where B fits no GPU
    /// the rows split evenly over single-GPU out-of-core products
    /// ([`Route::Rows`]); on a simulated team, A and B are cut into the
    /// decomposition's pieces and multiplied by its schedule
    /// ([`Route::Pieces`]).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when no decomposition's pieces fit the
    /// devices; the options' errors.
    pub fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        for_dtype!(problem.dtype, T => self.plan_typed::<T>(problem, opts, false))
    }

    /// [`Team::plan`] with [`Route::Pieces`] whatever the route would be:
    /// on GPUs, the device-resident product (A and B placed in their
    /// pieces, then multiplied, then C gathered: timed apart).
    pub fn plan_pieces(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        for_dtype!(problem.dtype, T => self.plan_typed::<T>(problem, opts, true))
    }

    fn plan_typed<T: Element>(
        &self,
        problem: Problem,
        opts: &GemmOptions,
        pieces: bool,
    ) -> Result<Plan, Error> {
        let shape = problem.shape();
        let decomposition = self.decompose::<T>(shape)?;
        let ctx = &self.contexts[0];
        // Each device multiplies blocks of the decomposition: `auto` is
        // decided for them.
        let block = Self::block(&decomposition);
        let local = ctx.resolve_for::<T>(opts, block, true)?;
        let (route, options, across) = match pieces || problem.is_empty() {
            true => (Route::Pieces, local, None),
            false => self.route::<T>(problem, local)?,
        };
        let at_least_one = |(m, k, n): (usize, usize, usize)| (m.max(1), k.max(1), n.max(1));
        let mut plan = ctx.plan_resolved::<T>(at_least_one(block), true, &options)?;
        // Each device's product is at most the whole one, and levels
        // across the devices are levels of the same recursion: the whole
        // product's allowance on one device bounds them.
        let whole = ctx.plan_resolved::<T>(at_least_one(shape), true, &options)?;
        plan.error_growth = plan.error_growth.max(whole.error_growth);
        if !T::DTYPE.is_integer() {
            let split = match route {
                Route::Across { .. } => Some("Strassen's levels across the devices".to_string()),
                Route::Pieces if decomposition.grid.pk > 1 => Some(format!(
                    "sums split over {} devices (classical bound)",
                    decomposition.grid.pk
                )),
                _ => None,
            };
            if let Some(split) = split {
                plan.accuracy = crate::options::Accuracy::Bound;
                plan.precision = format!("{}; {split}", plan.precision);
            }
        }
        if !matches!(route, Route::Pieces) {
            plan.options = options;
        }
        plan.problem = problem;
        let grid = decomposition.grid;
        plan.spread = Some(Spread {
            processors: self.devices(),
            grid: (grid.pm, grid.pn, grid.pk),
            words_per_processor: decomposition.words_per_processor,
            lower_bound: decomposition.lower_bound,
            route,
            ranks: false,
            decomposition,
            across,
        });
        Ok(plan)
    }

    /// The route of a product of at least one element with options
    /// resolved, and the options it runs with (a recursion across GPUs in
    /// the memory schedule that fits them).
    fn route<T: Element>(
        &self,
        problem: Problem,
        opts: GemmOptions,
    ) -> Result<(Route, GemmOptions, Option<AcrossPlan>), Error> {
        let shape = problem.shape();
        let beta_is_zero = !problem.reads_c;
        match &self.backend {
            Backend::Simulated => {
                if !opts.algorithm.is_fast() || self.size() < 2 {
                    return Ok((Route::Pieces, opts, None));
                }
                match crate::cpu::distributed::caps::layout::<T>(
                    self.size(),
                    shape,
                    beta_is_zero,
                    &opts,
                ) {
                    Ok((plan, recursion)) => Ok((
                        Route::Across {
                            levels: recursion.levels,
                            breadth_first: false,
                        },
                        opts,
                        Some(AcrossPlan::DepthFirst { plan, recursion }),
                    )),
                    Err(Error::Unsupported { .. }) => Ok((Route::Pieces, opts, None)),
                    Err(e) => Err(e),
                }
            }
            #[cfg(feature = "cuda")]
            Backend::Gpus(fabric) => {
                use crate::cuda::{products::caps, products::hosted, products::out_of_core};
                if let Some((variant, plan, recursion)) =
                    caps::fitting::<T>(fabric, shape, beta_is_zero, &opts)?
                {
                    let pinned = GemmOptions {
                        fast: crate::options::FastOptions {
                            variant: Some(variant),
                            ..opts.fast
                        },
                        ..opts
                    };
                    let levels = recursion.levels;
                    let across = Route::Across {
                        levels,
                        breadth_first: false,
                    };
                    return Ok((
                        across,
                        pinned,
                        Some(AcrossPlan::DepthFirst { plan, recursion }),
                    ));
                }
                let mut budget = u64::MAX;
                for gpu in fabric.gpus() {
                    budget = budget.min(out_of_core::budget(gpu, &opts)?);
                }
                let bands = hosted::Bands::within::<T>(shape, fabric.gpus().len(), budget);
                Ok((
                    if bands.is_some() {
                        Route::Bands
                    } else {
                        Route::Rows
                    },
                    opts,
                    None,
                ))
            }
        }
    }

    /// Runs `plan` on `product` (see [`Executor::execute`]).
    pub fn execute<T: Element>(&self, plan: &Plan, product: Gemm<'_, T>) -> Result<Report, Error> {
        product.check_plan(plan)?;
        let spread = plan
            .spread
            .as_ref()
            .filter(|s| !s.ranks && s.processors == self.devices())
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "a plan for {} cannot run on this team ({})",
                    plan.spread.as_ref().map_or_else(
                        || plan.device.to_string(),
                        |s| format!("{} processors", s.processors.len())
                    ),
                    self.devices()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ))
            })?;
        let mut product = product;
        if plan.problem.is_empty() || product.alpha == T::ZERO {
            product.c.scale_by(product.beta);
            return Ok(Report {
                plan: plan.clone(),
                timing: Timing::default(),
                communication: Some(Communication::default()),
            });
        }
        // The IEEE rule of the one-device products: a fast algorithm that
        // would meet NaN or ∞ runs its classical base, by the route the
        // base takes.
        let safe = self.contexts[0].ieee_safe(
            product.a,
            product.b,
            !product.reads_c(),
            plan.options,
            None,
        )?;
        let base_plan;
        let plan = if safe.algorithm == plan.options.algorithm {
            plan
        } else {
            let replanned = GemmOptions {
                algorithm: safe.algorithm,
                ..plan.options
            };
            let pieces = matches!(spread.route, Route::Pieces);
            base_plan = self.plan_typed::<T>(plan.problem, &replanned, pieces)?;
            &base_plan
        };
        let opts = plan.options;
        opts.check_interrupt()?;
        let spread = plan
            .spread
            .as_ref()
            .ok_or_else(|| Error::InvalidOption("a team's plan spreads the product".into()))?;
        let route = spread.route.clone();
        let (timing, communication) = match route {
            Route::Pieces => self.run_pieces(plan, product)?,
            Route::Across { .. } => {
                let across = spread.across.as_ref().ok_or_else(|| {
                    Error::InvalidOption("a plan across the devices without its recursion".into())
                })?;
                self.run_across(product, &opts, across)?
            }
            #[cfg(feature = "cuda")]
            Route::Bands | Route::Rows => match &self.backend {
                Backend::Gpus(fabric) => {
                    self.gemm_hosted(fabric, route == Route::Bands, product, &opts)?
                }
                Backend::Simulated => return Err(not_gpus(&route)),
            },
            #[cfg(not(feature = "cuda"))]
            Route::Bands | Route::Rows => return Err(not_gpus(&route)),
        };
        Ok(Report {
            plan: plan.clone(),
            timing,
            communication: Some(communication),
        })
    }

    /// [`Route::Pieces`]: A and B placed in the decomposition's pieces,
    /// multiplied by its schedule, C gathered (α and β applied there).
    fn run_pieces<T: Element>(
        &self,
        plan: &Plan,
        Gemm {
            alpha,
            a,
            b,
            beta,
            mut c,
        }: Gemm<'_, T>,
    ) -> Result<(Timing, Communication), Error> {
        let decomposition = plan
            .spread
            .as_ref()
            .map(|s| &s.decomposition)
            .ok_or_else(|| Error::InvalidOption("a team's plan spreads the product".into()))?;
        self.check_plan(decomposition)?;
        let start = Instant::now();
        let schedule = Self::schedule_of(decomposition)?;
        let da = self.place(Arc::clone(&schedule), Role::A, a)?;
        let db = self.place(schedule, Role::B, b)?;
        let placed_ms = start.elapsed().as_secs_f64() * 1e3;
        let (dc, report) = self.multiply_resolved(&da, &db, &plan.options)?;
        drop((da, db));
        let start = Instant::now();
        if alpha == T::ONE {
            self.collect_into(&dc, beta, c)?;
        } else {
            let product = self.collect(&dc)?;
            for i in 0..c.rows() {
                for j in 0..c.cols() {
                    let old = if beta == T::ZERO {
                        T::ZERO
                    } else {
                        beta.mul(c.get(i, j))
                    };
                    c.set(i, j, old.add(alpha.mul(product.get(i, j))));
                }
            }
        }
        let timing = Timing {
            compute_ms: report.compute_ms,
            upload_ms: Some(placed_ms),
            download_ms: Some(start.elapsed().as_secs_f64() * 1e3),
            ..Timing::default()
        };
        Ok((timing, report.moved))
    }

    /// [`Route::Across`]: Strassen's levels across the devices.
    fn run_across<T: Element>(
        &self,
        product: Gemm<'_, T>,
        opts: &GemmOptions,
        across: &AcrossPlan,
    ) -> Result<(Timing, Communication), Error> {
        let (plan, recursion) = match across {
            AcrossPlan::DepthFirst { plan, recursion } => (*plan, recursion),
            #[cfg(feature = "mpi")]
            AcrossPlan::BreadthFirst { .. } => {
                return Err(Error::InvalidOption(
                    "a team runs Strassen's levels across its devices depth-first".into(),
                ))
            }
        };
        let start = Instant::now();
        let (words, levels, (up, down)) = match &self.backend {
            Backend::Simulated => {
                let base = GemmOptions {
                    algorithm: opts.fast.cpu_base(),
                    ..*opts
                };
                let (words, levels) = crate::cpu::distributed::caps::multiply(
                    self.size(),
                    (plan, recursion),
                    product,
                    &base,
                )?;
                (words, levels, (0, 0))
            }
            #[cfg(feature = "cuda")]
            Backend::Gpus(fabric) => {
                let done =
                    crate::cuda::products::caps::run(fabric, (plan, recursion), product, opts)?;
                return Ok((
                    Timing {
                        compute_ms: done.seconds * 1e3,
                        ..Timing::default()
                    },
                    Communication {
                        words_per_processor: done.words.iter().copied().max().unwrap_or(0),
                        total_words: done.words.iter().sum(),
                        levels_across: done.levels,
                        upload_bytes: done.upload_bytes,
                        download_bytes: done.download_bytes,
                        ..Communication::default()
                    },
                ));
            }
        };
        let timing = Timing {
            compute_ms: start.elapsed().as_secs_f64() * 1e3,
            ..Timing::default()
        };
        let communication = Communication {
            words_per_processor: words.iter().copied().max().unwrap_or(0),
            total_words: words.iter().sum(),
            levels_across: levels,
            upload_bytes: up,
            download_bytes: down,
            ..Communication::default()
        };
        Ok((timing, communication))
    }

    /// **C ← α·A·B + β·C** on host matrices (β = 0 never reads C): the
    /// product planned ([`Team::plan`]) and executed.
    pub fn gemm<T: Element>(
        &self,
        alpha: T,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        beta: T,
        c: MatMut<'_, T>,
        opts: &GemmOptions,
    ) -> Result<Report, Error> {
        Executor::run(
            self,
            Gemm {
                alpha,
                a,
                b,
                beta,
                c,
            },
            opts,
        )
    }

    /// [`Route::Bands`] or [`Route::Rows`] on GPUs: the host-resident
    /// pipeline, or the rows split over single-GPU out-of-core products.
    #[cfg(feature = "cuda")]
    fn gemm_hosted<T: Element>(
        &self,
        fabric: &crate::cuda::products::distributed::Fabric,
        bands: bool,
        product: Gemm<'_, T>,
        opts: &GemmOptions,
    ) -> Result<(Timing, Communication), Error> {
        use crate::cuda::{products::hosted, products::out_of_core};
        let gpus = fabric.gpus();
        let (m, k, n) = product.shape();
        let mut budget = u64::MAX;
        for gpu in gpus {
            budget = budget.min(out_of_core::budget(gpu, opts)?);
        }
        let report = |ms: f64, shares: Vec<GpuShare>, b_loaded_ms, up: u64, down: u64| {
            (
                Timing {
                    compute_ms: ms,
                    ..Timing::default()
                },
                Communication {
                    shares,
                    b_loaded_ms,
                    upload_bytes: up,
                    download_bytes: down,
                    ..Communication::default()
                },
            )
        };
        let cut = bands
            .then(|| hosted::Bands::within::<T>((m, k, n), gpus.len(), budget))
            .flatten();
        if let Some(cut) = cut {
            let done = hosted::multiply(gpus, fabric.staging(), cut, product, opts)?;
            let shares = done
                .shares
                .iter()
                .map(|s| GpuShare {
                    bands: s.bands,
                    first_band_ms: s.first_band * 1e3,
                    staging_ms: (s.gather + s.scatter) * 1e3,
                    products_ms: s.products * 1e3,
                    finished_ms: s.finished * 1e3,
                })
                .collect();
            return Ok(report(
                done.seconds * 1e3,
                shares,
                Some(done.b_loaded * 1e3),
                done.upload_bytes,
                done.download_bytes,
            ));
        }
        // Each GPU its even share of the rows, streamed through it.
        let start = Instant::now();
        let mut shares = Vec::with_capacity(gpus.len());
        let Gemm {
            alpha,
            a,
            b,
            beta,
            c,
        } = product;
        let mut rest = c;
        for g in 0..gpus.len() {
            let rows = planner::part(m, gpus.len(), g);
            let (head, tail) = rest.try_split_at_row(rows.len())?;
            shares.push((rows, head));
            rest = tail;
        }
        let results: Vec<Result<out_of_core::Report, Error>> = std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .into_iter()
                .zip(gpus)
                .map(|((rows, c), gpu)| {
                    scope.spawn(move || {
                        if rows.is_empty() {
                            return Ok(None);
                        }
                        let a = a.submatrix(rows.start, 0, rows.len(), k);
                        // Staging pinned for this product only: these
                        // products stream in tiles (B does not fit), which
                        // pin their own.
                        let pools = hosted::StagingPools::new(std::slice::from_ref(gpu));
                        let band = Gemm {
                            alpha,
                            a,
                            b,
                            beta,
                            c,
                        };
                        out_of_core::multiply(gpu, &pools, band, opts)
                            .map(Some)
                            .map_err(|e| Error::Processor {
                                processor: gpu.label(),
                                reason: e.to_string(),
                            })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Cuda("a GPU worker panicked".into())))
                })
                .filter_map(Result::transpose)
                .collect()
        });
        let (mut up, mut down) = (0, 0);
        for r in results {
            let r = r?;
            up += r.upload_bytes;
            down += r.download_bytes;
        }
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let whole = GpuShare {
            bands: 1,
            first_band_ms: 0.0,
            staging_ms: 0.0,
            products_ms: 0.0,
            finished_ms: ms,
        };
        Ok(report(ms, vec![whole; gpus.len()], None, up, down))
    }

    /// A·B of host matrices on the team, as a new matrix.
    pub fn matmul<T: Element>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        opts: &GemmOptions,
    ) -> Result<(Matrix<T>, Report), Error> {
        let mut c = Matrix::try_zeros(a.rows(), b.cols())?;
        let report = self.gemm(T::ONE, a, b, T::ZERO, c.as_mut(), opts)?;
        Ok((c, report))
    }
}

impl Executor for Team {
    fn describe(&self) -> String {
        Team::describe(self)
    }

    fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        Team::plan(self, problem, opts)
    }

    /// A team's time is its own clock's whatever the clock asked.
    fn execute_clocked<T: Element>(
        &self,
        plan: &Plan,
        product: Gemm<'_, T>,
        _clock: crate::executor::Clock,
    ) -> Result<Report, Error> {
        Team::execute(self, plan, product)
    }
}

/// A GPU route asked of a team that is not GPUs.
fn not_gpus(route: &Route) -> Error {
    Error::InvalidOption(format!("the route `{route}` runs on a team of GPUs"))
}

#[cfg(feature = "cuda")]
fn upload<T: Element>(
    gpu: &Arc<crate::cuda::runtime::device::Gpu>,
    view: MatRef<'_, T>,
) -> Result<Option<GpuPiece>, Error> {
    if view.rows() == 0 || view.cols() == 0 {
        return Ok(None);
    }
    let memory = crate::cuda::runtime::transfer::upload_view(gpu, view)?;
    Ok(Some(GpuPiece {
        memory,
        gpu: Arc::clone(gpu),
    }))
}

#[cfg(feature = "cuda")]
fn download<T: Element>(piece: &GpuPiece, len: usize) -> Result<Vec<T>, Error> {
    // SAFETY: the piece holds `len` elements of T on its GPU.
    unsafe { crate::cuda::runtime::transfer::download_vec(&piece.gpu, &piece.memory, len) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Algorithm;

    #[test]
    fn bad_device_lists_are_typed_errors() {
        assert!(matches!(Team::open(&[]), Err(Error::InvalidOption(_))));
        assert!(matches!(
            Team::open(&[Device::Cuda(0), Device::Cuda(0)]),
            Err(Error::InvalidOption(_))
        ));
        assert!(matches!(
            Team::open(&[Device::Cuda(0), Device::Cpu]),
            Err(Error::InvalidOption(_))
        ));
        assert!(matches!(Team::simulated(0), Err(Error::InvalidOption(_))));
        assert_eq!(Team::open(&[Device::Cpu]).unwrap().size(), 1);
    }

    /// α, β and empty shapes at the boundary; NaN-filled C with β = 0.
    #[test]
    fn gemm_on_a_simulated_team() {
        let opts = GemmOptions::new(Algorithm::Naive);
        for p in [1, 2, 3, 5, 8] {
            let team = Team::simulated(p).unwrap();
            for (m, k, n) in [(0, 3, 4), (3, 0, 4), (1, 1, 1), (9, 4, 7), (16, 31, 2)] {
                let a = Matrix::<f64>::from_fn(m, k, |i, j| (i as f64) - 0.5 * j as f64);
                let b = Matrix::<f64>::from_fn(k, n, |i, j| 1.0 + (i * j % 3) as f64);
                let expected = crate::context::matmul(&a, &b).unwrap();
                let mut c = Matrix::filled(m, n, f64::NAN);
                team.gemm(1.0, a.as_ref(), b.as_ref(), 0.0, c.as_mut(), &opts)
                    .unwrap();
                assert_eq!(c, expected, "{m}×{k}×{n} on {p}");
                let mut c2 = Matrix::filled(m, n, 1.0);
                team.gemm(2.0, a.as_ref(), b.as_ref(), -1.0, c2.as_mut(), &opts)
                    .unwrap();
                for i in 0..m {
                    for j in 0..n {
                        assert_eq!(c2.get(i, j), 2.0 * expected.get(i, j) - 1.0);
                    }
                }
            }
        }
    }

    /// The team self-test with the CPU as 3 processors (a grid that cuts
    /// unevenly): every CPU algorithm, every type, every shape but the
    /// largest.
    #[cfg(feature = "selftest")]
    #[test]
    fn simulated_team_selftest_passes() {
        // The team's own paths with the blocked and fast local products;
        // the scalar ladder (naive, ikj, tiled) only changes each block's
        // local product, which the algorithms' shape matrix tests.
        let team = Team::simulated(3).unwrap();
        let local = [
            Algorithm::Parallel,
            Algorithm::Packed,
            Algorithm::Strassen,
            Algorithm::Winograd,
        ];
        // Without 264×2056×264, cuda-fast's split-K interior shape: two
        // thirds of the shapes' multiply-adds, which made this the
        // library's longest unit test by far on two cores, while the
        // team's grids, gathers and peeled edges are the other shapes'
        // too. The CLI's team self-test keeps every shape.
        let shapes: Vec<_> = crate::selftest::team_shapes()
            .into_iter()
            .filter(|&(m, k, n)| m * k * n < 100_000_000)
            .collect();
        let mut rows =
            crate::selftest::run_team_over(&team, Some(&local), &shapes, &mut |_| {}).unwrap();
        rows.push(crate::selftest::check_team_words(&team, &shapes));
        assert!(rows.len() > 10);
        for row in &rows {
            assert!(row.ok(), "{}: {:?}", row.what, row.failures);
            assert!(row.passed > 0, "{}", row.what);
        }
    }

    /// Strassen and Winograd run their levels across the processors where
    /// the blocks align (a 1D grid, the classical products' gathers
    /// counted), and on each block where they do not; both within the
    /// fast algorithms' error bound.
    #[test]
    fn fast_algorithms_across_a_simulated_team() {
        for algorithm in [Algorithm::Strassen, Algorithm::Winograd] {
            let opts = GemmOptions::new(algorithm).threshold(16);
            for (p, n, across) in [
                (2, 64, true),
                (4, 128, true),
                (8, 128, true),
                (3, 50, false),
            ] {
                let team = Team::simulated(p).unwrap();
                let a = Matrix::<f64>::from_fn(n, n, |i, j| ((i * 3 + j) % 7) as f64 - 3.0);
                let b = Matrix::<f64>::from_fn(n, n, |i, j| ((i + 5 * j) % 9) as f64 - 4.0);
                let (c, report) = team.matmul(a.as_ref(), b.as_ref(), &opts).unwrap();
                assert_eq!(
                    c,
                    crate::context::matmul(&a, &b).unwrap(),
                    "{algorithm} on {p}"
                );
                let route = &report.plan.spread.as_ref().unwrap().route;
                assert_eq!(
                    matches!(route, Route::Across { levels, .. } if *levels > 0),
                    across,
                    "{algorithm} on {p}: {route}"
                );
                let moved = report.communication.unwrap();
                assert_eq!(moved.levels_across > 0, across, "{algorithm} on {p}");
                assert!(moved.words_per_processor > 0);
                // The plan carries the recursion the product ran: the
                // levels it reports are the planned walk's.
                let spread = report.plan.spread.as_ref().unwrap();
                match &spread.across {
                    Some(AcrossPlan::DepthFirst { recursion, .. }) => {
                        assert!(across, "{algorithm} on {p}");
                        assert_eq!(recursion.levels, moved.levels_across);
                    }
                    None => assert!(!across, "{algorithm} on {p}"),
                    #[cfg(feature = "mpi")]
                    Some(other) => panic!("a team planned {other:?}"),
                }
            }
        }
    }

    /// Eight processors (the scaling issue's G = 8, simulated): a cube
    /// takes the 2×2×2 grid, its product is exact and moves the plan's
    /// words, within 1.2× of the lower bound.
    #[test]
    fn eight_processors_take_a_cube_grid() {
        let team = Team::simulated(8).unwrap();
        let n = 96;
        let plan = team.decompose::<i64>((n, n, n)).unwrap();
        assert_eq!(
            (plan.grid.pm, plan.grid.pn, plan.grid.pk),
            (2, 2, 2),
            "{plan:?}"
        );
        let a = Matrix::<i64>::from_fn(n, n, |i, j| ((i * 7 + j) % 13) as i64 - 6);
        let b = Matrix::<i64>::from_fn(n, n, |i, j| ((i + 3 * j) % 11) as i64 - 5);
        let da = team.distribute(&plan, Role::A, a.as_ref()).unwrap();
        let db = team.distribute(&plan, Role::B, b.as_ref()).unwrap();
        let (dc, report) = team
            .multiply(&da, &db, &GemmOptions::new(Algorithm::Naive))
            .unwrap();
        assert_eq!(
            team.collect(&dc).unwrap(),
            crate::context::matmul(&a, &b).unwrap()
        );
        assert_eq!(report.moved.words_per_processor, plan.words_per_processor);
        let ratio = report.moved.bound_ratio();
        assert!(ratio <= 1.2, "{ratio}");
    }

    #[test]
    fn operands_of_different_plans_are_refused() {
        let team = Team::simulated(2).unwrap();
        let opts = GemmOptions::new(Algorithm::Naive);
        let a = Matrix::<i32>::filled(4, 6, 1);
        let b = Matrix::<i32>::filled(6, 4, 1);
        let p1 = team.decompose::<i32>((4, 6, 4)).unwrap();
        let da = team.distribute(&p1, Role::A, a.as_ref()).unwrap();
        let db = team.distribute(&p1, Role::B, b.as_ref()).unwrap();
        assert!(matches!(
            team.multiply(&db, &da, &opts),
            Err(Error::InvalidOption(_))
        ));
        assert!(matches!(
            team.distribute(&p1, Role::A, b.as_ref()),
            Err(Error::OutputShape { .. })
        ));
        let other = Team::simulated(3).unwrap();
        assert!(matches!(
            other.multiply(&da, &db, &opts),
            Err(Error::InvalidOption(_))
        ));
        let (c, _) = team.multiply(&da, &db, &opts).unwrap();
        assert_eq!(team.collect(&c).unwrap(), Matrix::filled(4, 4, 6));
    }
}
