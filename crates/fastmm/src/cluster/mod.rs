//! Products across the ranks of an MPI job (feature `mpi`): the same
//! decomposition planner ([`crate::distributed::planner`]) and schedule
//! ([`crate::distributed::schedule`]) as a team of GPUs, with ranks as the
//! processors. Each rank holds only its pieces and its buffers; a
//! schedule's broadcast or reduction is an MPI collective on the
//! communicator of its group (made once per product), and its local
//! products run on the rank's CPU.
//!
//! Every rank must call the same functions with the same arguments, in
//! the same order, as MPI requires of collectives.
//!
//! ```no_run
//! # fn main() -> Result<(), fastmm::Error> {
//! use fastmm::{Algorithm, Cluster, GemmOptions, Matrix};
//! let cluster = Cluster::init()?; // under `mpirun -np P`
//! let a = Matrix::<f64>::from_fn(300, 200, |i, j| (i + j) as f64);
//! let b = Matrix::<f64>::from_fn(200, 100, |i, j| (i * j % 7) as f64);
//! let (c, report) = cluster.matmul(a.as_ref(), b.as_ref(), &GemmOptions::new(Algorithm::Packed))?;
//! if let Some(c) = c {
//!     // rank 0 holds C
//!     assert_eq!(c, fastmm::matmul(&a, &b)?);
//!     println!("{} words received by the busiest rank", report.moved.words_per_processor);
//! }
//! # Ok(())
//! # }
//! ```

mod breadth;
mod caps;
mod files;
#[cfg(feature = "cuda")]
mod gpus;
mod wire;

use std::collections::HashMap;

pub use files::ClusterFileReport;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Root};
use mpi::Threading;
use serde::Serialize;

use crate::context::Context;
use crate::cpu::distributed::Stores;
use crate::distributed::planner::{self, Decomposition};
use crate::distributed::schedule::{self, Op, Region, Schedule};
use crate::element::{for_dtype, Element};
use crate::error::Error;
use crate::executor::{Communication, Executor, Report, Timing};
use crate::gemm::{Gemm, Problem};
use crate::matrix::{MatRef, Matrix};
use crate::options::{Device, DeviceKind, GemmOptions};
use crate::plan::{Plan, Route, Spread};
use crate::tunables::{CLUSTER_MEMORY_FRACTION, CLUSTER_PROGRESS_POLL};

/// One broadcast of a step on this rank: its group's communicator, the
/// root's index in it, where a received piece goes (`None` at the root)
/// and the buffer.
type Outgoing<'c, T> = (&'c SimpleCommunicator, i32, Option<Region>, Vec<T>);

/// The ranks of an MPI job, as one value.
pub struct Cluster {
    world: SimpleCommunicator,
    // Bytes each rank may use for its pieces; `None`: what its node has
    // available, shared by the node's ranks.
    memory_per_rank: Option<u64>,
    // Strassen and Winograd run their levels across the ranks (CAPS)
    // where the shape allows, rather than in each rank's local products.
    strassen_across: bool,
    // Local products on the rank's GPU even for algorithms the CPU runs.
    local_gpus: bool,
    // The rank's index among the ranks of its node, which picks its GPU.
    node_rank: usize,
    // Ranks on the rank's node.
    node_size: usize,
    // The rank's GPU, opened at its first GPU product.
    gpu: std::sync::Mutex<Option<Context>>,
    // The rank's GPU as a member of the job's NCCL groups, made at its
    // first product with pieces on the GPUs; its groups are kept.
    #[cfg(feature = "cuda")]
    fabric: std::sync::Mutex<Option<std::sync::Arc<crate::cuda::products::distributed::Fabric>>>,
    // Finalises MPI when the cluster is dropped (after `world`); `None`
    // for a cluster over a subgroup of the job's ranks.
    _universe: Option<Universe>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cluster(rank {} of {})", self.rank(), self.size())
    }
}

/// What a product across the ranks did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterReport {
    /// The grid, pm×pn×pk.
    pub grid: (usize, usize, usize),
    /// Ranks.
    pub processors: usize,
    /// Milliseconds from the start (all ranks ready) to the last rank
    /// done, communication included; distributing and collecting not.
    pub compute_ms: f64,
    /// What moved between the ranks (words counted from the product's
    /// collectives, their lower bound, levels across, whether the local
    /// products and the pieces were on the ranks' GPUs): the one
    /// description of traffic every executor's report uses.
    pub moved: Communication,
    /// The factor by which those levels may raise the classical error
    /// bound (1 for none).
    pub error_growth: f64,
    /// Milliseconds the slowest rank took to copy its pieces of A and B
    /// to its GPU and its piece of C back (not in `compute_ms`; 0 where
    /// the pieces stay in host memory).
    pub staging_ms: f64,
}

impl Executor for Cluster {
    fn describe(&self) -> String {
        format!("{} MPI ranks", self.size())
    }

    fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        Cluster::plan(self, problem, opts)
    }

    /// A cluster's time is its own clock's (all ranks ready to the last
    /// done) whatever the clock asked.
    fn execute_clocked<T: Element>(
        &self,
        plan: &Plan,
        product: Gemm<'_, T>,
        _clock: crate::executor::Clock,
    ) -> Result<Report, Error> {
        Cluster::execute(self, plan, product)
    }
}

impl ClusterReport {
    /// The report of a product with an empty dimension on `processors`
    /// ranks: nothing moved, nothing multiplied.
    fn empty(processors: usize) -> ClusterReport {
        ClusterReport::measured((1, 1, 1), processors, (0.0, 0, 0), 0.0)
    }

    /// The report of a classical product on `processors` ranks in
    /// `grid`, from its timing and words (slowest rank's milliseconds,
    /// most and total words received) and the plan's lower bound; nothing
    /// across, no GPU.
    fn measured(
        grid: (usize, usize, usize),
        processors: usize,
        (compute_ms, most, total): (f64, u64, u64),
        lower_bound: f64,
    ) -> ClusterReport {
        ClusterReport {
            grid,
            processors,
            compute_ms,
            moved: Communication {
                words_per_processor: u128::from(most),
                total_words: u128::from(total),
                lower_bound,
                ..Communication::default()
            },
            error_growth: 1.0,
            staging_ms: 0.0,
        }
    }
}

impl Cluster {
    /// Joins the MPI job (`MPI_Init`); a process started without
    /// `mpirun` is a job of one rank.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] when MPI was initialised already in this
    /// process.
    pub fn init() -> Result<Cluster, Error> {
        // Funnelled: a product's local multiplications run on helper
        // threads while the main thread drives the broadcasts; only the
        // main thread calls MPI.
        let (universe, threading) = mpi::initialize_with_threading(Threading::Funneled)
            .ok_or_else(|| {
                Error::InvalidOption("MPI is already initialised in this process".into())
            })?;
        if threading < Threading::Funneled {
            return Err(Error::Unsupported {
                algorithm: "a product across MPI ranks",
                what: format!("an MPI without funnelled threads ({threading:?})"),
            });
        }
        let world = universe.world();
        let node = world.split_shared(world.rank());
        let (node_rank, node_size) = (node.rank() as usize, node.size() as usize);
        Ok(Cluster {
            world,
            memory_per_rank: None,
            strassen_across: false,
            local_gpus: false,
            node_rank,
            node_size,
            gpu: std::sync::Mutex::new(None),
            #[cfg(feature = "cuda")]
            fabric: std::sync::Mutex::new(None),
            _universe: Some(universe),
        })
    }

    /// The ranks of `comm` (a subgroup of this cluster's, made by a
    /// collective split) as a cluster of their own, with the same memory,
    /// GPUs and node layout; its products are classical (no levels
    /// across).
    fn subgroup(&self, comm: SimpleCommunicator) -> Cluster {
        let gpu = self.gpu.lock().expect("GPU lock").clone();
        Cluster {
            world: comm,
            memory_per_rank: self.memory_per_rank,
            strassen_across: false,
            local_gpus: self.local_gpus,
            // The job's node layout: each rank keeps its GPU.
            node_rank: self.node_rank,
            node_size: self.node_size,
            gpu: std::sync::Mutex::new(gpu),
            #[cfg(feature = "cuda")]
            fabric: std::sync::Mutex::new(None),
            _universe: None,
        }
    }

    /// The same cluster, each rank allowed `bytes` for its pieces and
    /// buffers (rather than its node's available memory over the node's
    /// ranks). Every rank must give the same value.
    pub fn with_memory_per_rank(mut self, bytes: u64) -> Cluster {
        self.memory_per_rank = Some(bytes);
        self
    }

    /// The same cluster, Strassen and Winograd run across the ranks
    /// (CAPS: on 7·q ranks a breadth-first step where the sizes
    /// are even and its share fits, else depth-first steps where m and k
    /// align and the rows and temporaries fit), rather than as each
    /// rank's local product under
    /// the classical distribution (the default: on two ranks sharing a
    /// 2-core machine, 4096³ f64 took 930 ms with one level across
    /// against 697 ms, the levels' sums competing for one memory bus).
    /// Every rank must give the same value.
    pub fn with_strassen_across(mut self, on: bool) -> Cluster {
        self.strassen_across = on;
        self
    }

    /// The same cluster, every local product on the rank's GPU (GPU
    /// r mod G of its node for the node's r-th rank, G GPUs), whatever the
    /// algorithm; without it only the GPU algorithms (`cublas`,
    /// `cuda-fast`, …) run there. The pieces stay in host memory: each
    /// step's product copies them in and C back (out of core where they
    /// exceed the GPU). Every rank must give the same value.
    pub fn with_local_gpus(mut self, on: bool) -> Cluster {
        self.local_gpus = on;
        self
    }

    /// The rank's GPU where `opts` runs its local products there (asked
    /// for, or an algorithm the CPU does not run), opened once.
    fn local_gpu(&self, opts: &GemmOptions) -> Result<Option<Context>, Error> {
        if !self.local_gpus && opts.algorithm.runs_on(DeviceKind::Cpu) {
            return Ok(None);
        }
        let mut slot = self.gpu.lock().expect("GPU lock");
        if let Some(ctx) = slot.as_ref() {
            return Ok(Some(ctx.clone()));
        }
        #[cfg(feature = "cuda")]
        let count = crate::cuda::runtime::device::device_count()?;
        #[cfg(not(feature = "cuda"))]
        let count = 0;
        if count == 0 {
            return Err(Error::CudaUnavailable(format!(
                "rank {} runs {} on its GPU, and its node has none",
                self.rank(),
                opts.algorithm
            )));
        }
        let ctx = Context::open(Device::Cuda(self.node_rank % count))?;
        *slot = Some(ctx.clone());
        Ok(Some(ctx))
    }

    /// Words of T every rank may hold, collectively: the least over the
    /// ranks of their allowance ([`Cluster::with_memory_per_rank`], or
    /// [`CLUSTER_MEMORY_FRACTION`] of the node's available memory over
    /// the node's ranks); `None` where no rank's OS says. The least, so
    /// that every rank plans the same grid.
    fn memory_words<T: Element>(&self) -> Option<u128> {
        let mine = self.memory_per_rank.unwrap_or_else(|| {
            let node = self.world.split_shared(self.world.rank());
            crate::system::available_memory_bytes().map_or(u64::MAX, |bytes| {
                let (num, den) = CLUSTER_MEMORY_FRACTION;
                (bytes / den * num) / node.size().max(1) as u64
            })
        });
        self.least_words::<T>(mine)
    }

    /// The least over the ranks of `mine` bytes, in words of T (`None`
    /// where every rank gave `u64::MAX`: no limit known). Collective.
    fn least_words<T: Element>(&self, mine: u64) -> Option<u128> {
        let mut least = u64::MAX;
        self.world
            .all_reduce_into(&mine, &mut least, SystemOperation::min());
        (least != u64::MAX).then(|| u128::from(least) / std::mem::size_of::<T>() as u128)
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    /// Ranks in the job.
    pub fn size(&self) -> usize {
        self.world.size() as usize
    }

    /// Ends every rank of the job (`MPI_Abort`) with `code`: what a rank
    /// that failed calls, so that the others, perhaps waiting for it in a
    /// collective, do not hang.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    /// The decomposition of an (m, k, n) product of T over the ranks: the
    /// grid with the fewest words received per rank among those whose
    /// pieces and buffers fit every rank's memory (so a 3-D grid, which
    /// replicates C's partial sums, only where memory allows).
    /// Collective: every rank must call it.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when no grid's pieces fit, on every rank,
    /// before anything is allocated.
    pub fn decompose<T: Element>(
        &self,
        shape: (usize, usize, usize),
    ) -> Result<Decomposition, Error> {
        planner::plan(shape, self.size(), self.memory_words::<T>())
    }

    /// What `problem` would run with `opts` across the ranks (see
    /// [`Executor::plan`]): Strassen's or Winograd's levels across the
    /// ranks where asked for ([`Cluster::with_strassen_across`]) and they
    /// apply and fit, else the decomposition with the fewest words
    /// received per rank among those whose pieces fit every rank's
    /// memory; and the product each rank runs on its blocks.
    /// Collective: every rank calls it with the same arguments.
    pub fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        for_dtype!(problem.dtype, T => self.plan_typed::<T>(problem, opts))
    }

    fn plan_typed<T: Element>(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        let shape = problem.shape();
        let asked = (shape, problem.reads_c, T::DTYPE.name(), chosen(opts));
        self.check_same("products (shape, type or options)", &asked)?;
        let (across, across_plan) = match problem.is_empty() {
            true => (None, None),
            false => self.across_route::<T>(shape, opts)?.unzip(),
        };
        let decomposition = match (self.decompose::<T>(shape), &across) {
            (Ok(decomposition), _) => decomposition,
            // Levels across need no classical decomposition; the
            // unconstrained one records the grid and its lower bound.
            (Err(Error::OutOfMemory { .. }), Some(_)) => planner::plan(shape, self.size(), None)?,
            (Err(e), _) => return Err(e),
        };
        let gpu = self.agree("open a GPU for its local products", self.local_gpu(opts))?;
        let ctx = gpu.unwrap_or_else(Context::cpu);
        let grid = decomposition.grid;
        let block = (
            planner::part(shape.0, grid.pm, 0).len().max(1),
            planner::part(shape.1, grid.pk, 0).len().max(1),
            planner::part(shape.2, grid.pn, 0).len().max(1),
        );
        let local = ctx.resolve_for::<T>(opts, block, true)?;
        let mut plan = ctx.plan_resolved::<T>(block, true, &local)?;
        plan.options = local;
        // The whole product's allowance on one device bounds the local
        // products' (and levels across are levels of the same recursion).
        let whole = (shape.0.max(1), shape.1.max(1), shape.2.max(1));
        let mut growth = ctx.plan_resolved::<T>(whole, true, &local)?.error_growth;
        if let (Some(Route::Across { levels, .. }), Some(scheme)) =
            (&across, crate::strassen::Scheme::of(local.algorithm))
        {
            growth = growth.max(scheme.error_growth(*levels));
        }
        // A breadth-first step multiplies its level's growth by that of
        // the half-size products each group runs on the CPU: planned here,
        // so that the plan's allowance is the one the product is held to.
        if let (
            Some(Route::Across {
                breadth_first: true,
                ..
            }),
            Some(scheme),
        ) = (&across, crate::strassen::Scheme::of(local.algorithm))
        {
            let half = (
                (shape.0 / 2).max(1),
                (shape.1 / 2).max(1),
                (shape.2 / 2).max(1),
            );
            let halves = Context::cpu().plan(Problem::of::<T>(half), &local)?;
            growth = growth.max(scheme.error_growth(1) * halves.error_growth);
        }
        plan.error_growth = plan.error_growth.max(growth);
        if !T::DTYPE.is_integer() && (across.is_some() || grid.pk > 1) {
            plan.accuracy = crate::options::Accuracy::Bound;
            plan.precision = format!(
                "{}; {}",
                plan.precision,
                match across {
                    Some(_) => "Strassen's levels across the ranks".to_string(),
                    None => format!("sums split over {} ranks (classical bound)", grid.pk),
                }
            );
        }
        plan.problem = problem;
        plan.spread = Some(Spread {
            processors: vec![plan.device; self.size()],
            grid: (grid.pm, grid.pn, grid.pk),
            words_per_processor: decomposition.words_per_processor,
            lower_bound: decomposition.lower_bound,
            route: across.unwrap_or(Route::Pieces),
            ranks: true,
            decomposition,
            across: across_plan,
        });
        Ok(plan)
    }

    /// Runs `plan` on `product` (see [`Executor::execute`]): A and B given
    /// whole on every rank (each takes only its pieces); C written on rank
    /// 0 only, and left as it was on the others. Collective.
    pub fn execute<T: Element>(&self, plan: &Plan, product: Gemm<'_, T>) -> Result<Report, Error> {
        product.check_plan(plan)?;
        let spread = plan
            .spread
            .as_ref()
            .filter(|s| s.ranks && s.processors.len() == self.size())
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "a plan for {} cannot run across these {} ranks",
                    plan.spread.as_ref().map_or_else(
                        || plan.device.to_string(),
                        |s| format!("{} processors", s.processors.len())
                    ),
                    self.size()
                ))
            })?;
        let Gemm {
            alpha,
            a,
            b,
            beta,
            mut c,
        } = product;
        let mut report = Report {
            plan: plan.clone(),
            timing: Timing::default(),
            communication: Some(Communication::default()),
        };
        if plan.problem.is_empty() || alpha == T::ZERO {
            if self.rank() == 0 {
                c.scale_by(beta);
            }
            return Ok(report);
        }
        let opts = &plan.options;
        let (whole, done) = match spread.route {
            Route::Across { .. } => {
                let across = spread.across.as_ref().ok_or_else(|| {
                    Error::InvalidOption("a plan across the ranks without its recursion".into())
                })?;
                self.matmul_across((a, b), opts, Some(across))?
                    .ok_or_else(|| Error::Unsupported {
                        algorithm: opts.algorithm.name(),
                        what: "Strassen's levels across the ranks".into(),
                    })?
            }
            _ => {
                let source = whole_source(a, b);
                let shape = plan.problem.shape();
                let fixed = Some(&spread.decomposition);
                let (schedule, mine, done) = self.product(shape, &*source, opts, fixed)?;
                (self.collect(&schedule, mine)?, done)
            }
        };
        if let Some(ab) = whole {
            c.scale_by(beta);
            for i in 0..c.rows() {
                for j in 0..c.cols() {
                    let v = alpha.mul(ab.get(i, j)).add(c.get(i, j));
                    c.set(i, j, v);
                }
            }
        }
        report.plan.error_growth = report.plan.error_growth.max(done.error_growth);
        report.timing.compute_ms = done.compute_ms;
        if done.moved.pieces_on_gpus {
            report.timing.upload_ms = Some(done.staging_ms);
        }
        report.communication = Some(done.moved);
        Ok(report)
    }

    /// C = A·B with A and B given whole on every rank (each takes only
    /// its pieces); C comes back whole on rank 0 (`None` elsewhere).
    ///
    /// # Errors
    /// [`Error::DimensionMismatch`] for operands that do not chain; the
    /// local products' errors.
    pub fn matmul<T: Element>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        opts: &GemmOptions,
    ) -> Result<(Option<Matrix<T>>, ClusterReport), Error> {
        if a.cols() != b.rows() {
            return Err(Error::DimensionMismatch {
                a: a.shape(),
                b: b.shape(),
            });
        }
        let shape = (a.rows(), a.cols(), b.cols());
        let product = (shape, T::DTYPE.name(), chosen(opts));
        self.check_same("products (shape, type or options)", &product)?;
        let (m, _, n) = shape;
        if shape.0 == 0 || shape.1 == 0 || shape.2 == 0 {
            let report = ClusterReport::empty(self.size());
            let c = (self.rank() == 0).then(|| Matrix::zeros(m, n));
            return Ok((c, report));
        }
        if let Some(done) = self.matmul_across((a, b), opts, None)? {
            return Ok(done);
        }
        let source = whole_source(a, b);
        let (schedule, mine, report) = self.product(shape, &*source, opts, None)?;
        let c = self.collect(&schedule, mine)?;
        Ok((c, report))
    }

    /// The distributed product of (m, k, n) ≥ 1 operands, this rank's
    /// pieces of which `source` gives: the schedule, this rank's piece of
    /// C (row-major, its piece of `schedule.c`) and the report. `fixed`:
    /// the plan to follow (the same on every rank), rather than the
    /// memory's choice — for pieces handed out before the product.
    fn product<T: Element>(
        &self,
        shape: (usize, usize, usize),
        source: &Source<'_, T>,
        opts: &GemmOptions,
        fixed: Option<&Decomposition>,
    ) -> Result<(Schedule, Vec<T>, ClusterReport), Error> {
        // Agreed: a rank without the GPU it needs must not leave the
        // others waiting in the product's first collective.
        let gpu = self.agree("open a GPU for its local products", self.local_gpu(opts))?;
        #[cfg(feature = "cuda")]
        if let Some(ctx) = &gpu {
            if let Some(done) = self.product_on_gpus(shape, source, opts, ctx, fixed)? {
                return Ok(done);
            }
        }
        let plan = match fixed {
            Some(plan) => plan.clone(),
            None => self.decompose::<T>(shape)?,
        };
        let schedule = schedule::build(&plan);
        let me = self.rank();
        let mut stores = Stores::new(
            &schedule,
            me,
            piece_vec(source, Operand::A, &schedule.a.pieces[me])?,
            piece_vec(source, Operand::B, &schedule.b.pieces[me])?,
        )?;
        let gpu = &gpu;
        let comms = self.communicators(&schedule);
        let words = received_by(&schedule, me);
        self.world.barrier();
        let start = Instant::now();
        // Step s + 1's broadcasts run while step s multiplies: the
        // schedule lands every broadcast in its own part of a gather
        // buffer, which no earlier step's product reads.
        let mut arrived = Vec::new();
        if let Some(first) = schedule.steps.first() {
            let mut buffers = self.outgoing(&first.comm, &comms, &stores);
            self.broadcast_while(&mut buffers, || Ok(()))?;
            arrived = buffers;
        }
        for (s, step) in schedule.steps.iter().enumerate() {
            for (_, _, dst, values) in arrived.drain(..) {
                if let Some(dst) = dst {
                    stores.write(&dst, &values)?;
                }
            }
            let mut buffers = match schedule.steps.get(s + 1) {
                Some(next) => self.outgoing(&next.comm, &comms, &stores),
                None => Vec::new(),
            };
            let stores = &mut stores;
            self.broadcast_while(&mut buffers, move || {
                for op in &step.compute {
                    if let Op::Gemm {
                        rank,
                        a,
                        b,
                        c,
                        accumulate,
                    } = op
                    {
                        if *rank != me {
                            continue;
                        }
                        match &gpu {
                            Some(ctx) => {
                                stores.gemm_with((a, b, c), *accumulate, |a, b, beta, c| {
                                    ctx.gemm(T::ONE, a, b, beta, c, opts)
                                })?
                            }
                            None => stores.gemm((a, b, c), *accumulate, opts)?,
                        }
                    }
                }
                Ok(())
            })?;
            arrived = buffers;
        }
        for op in &schedule.finish {
            let Op::Reduce {
                group,
                root,
                src,
                dst,
            } = op
            else {
                continue;
            };
            let Some(comm) = comms.get(group) else {
                continue;
            };
            let target = comm.process_at_rank(index_in(group, *root));
            let mine = stores.read(src);
            if me == *root {
                let mut sum = vec![T::ZERO; mine.len()];
                wire::reduce_sum(&target, &mine, Some(&mut sum));
                stores.write(dst, &sum)?;
            } else {
                wire::reduce_sum(&target, &mine, None);
            }
        }
        let mine_ms = start.elapsed().as_secs_f64() * 1e3;
        let timing = self.timing_and_words(mine_ms, words as u64);
        let mine = stores.take_c();
        let grid = (plan.grid.pm, plan.grid.pn, plan.grid.pk);
        Ok((schedule, mine, {
            let mut report = ClusterReport::measured(grid, self.size(), timing, plan.lower_bound);
            report.moved.local_gpus = gpu.is_some();
            report
        }))
    }

    /// The slowest rank's milliseconds, and the most and the total words
    /// received, from each rank's own (collective).
    fn timing_and_words(&self, mine_ms: f64, words: u64) -> (f64, u64, u64) {
        let mut compute_ms = 0.0;
        self.world
            .all_reduce_into(&mine_ms, &mut compute_ms, SystemOperation::max());
        let (mut most, mut total) = (0u64, 0u64);
        self.world
            .all_reduce_into(&words, &mut most, SystemOperation::max());
        self.world
            .all_reduce_into(&words, &mut total, SystemOperation::sum());
        (compute_ms, most, total)
    }

    /// This rank's part of a step's broadcasts: for each group it belongs
    /// to, (communicator, root's index in it, where a received piece goes
    /// — `None` at the root —, the buffer: the root's piece, or room for
    /// it).
    fn outgoing<'c, T: Element>(
        &self,
        ops: &[Op],
        comms: &'c HashMap<Vec<usize>, SimpleCommunicator>,
        stores: &Stores<T>,
    ) -> Vec<Outgoing<'c, T>> {
        let me = self.rank();
        ops.iter()
            .filter_map(|op| match op {
                Op::Broadcast {
                    group,
                    root,
                    src,
                    dst,
                } => comms.get(group).map(|comm| {
                    let root_index = index_in(group, *root);
                    if me == *root {
                        (comm, root_index, None, stores.read(src))
                    } else {
                        (comm, root_index, Some(*dst), vec![T::ZERO; dst.elements()])
                    }
                }),
                _ => None,
            })
            .collect()
    }

    /// Runs `work` on a helper thread while this thread starts the
    /// broadcasts of `buffers` (non-blocking) and drives them: Open MPI
    /// moves a large message only while its ranks call into MPI, so this
    /// thread tests the requests every [`CLUSTER_PROGRESS_POLL`] until
    /// the work is done, then waits for what is left. Only this thread
    /// calls MPI (the job runs at `MPI_THREAD_FUNNELED`).
    fn broadcast_while<T: Element>(
        &self,
        buffers: &mut [Outgoing<'_, T>],
        work: impl FnOnce() -> Result<(), Error> + Send,
    ) -> Result<(), Error> {
        if buffers.is_empty() {
            return work();
        }
        mpi::request::scope(|scope| {
            let mut pending: Vec<_> = buffers
                .iter_mut()
                .flat_map(|(comm, root, _, values)| {
                    let root = comm.process_at_rank(*root);
                    wire::messages_mut(values)
                        .map(move |part| root.immediate_broadcast_into(scope, part))
                })
                .collect();
            let queue = &mut pending;
            let done = std::thread::scope(|threads| {
                let worker = threads.spawn(work);
                while !worker.is_finished() {
                    *queue = std::mem::take(queue)
                        .into_iter()
                        .filter_map(|request| request.test().err())
                        .collect();
                    std::thread::sleep(CLUSTER_PROGRESS_POLL);
                }
                worker.join().unwrap_or_else(|_| {
                    Err(Error::InvalidOption("a local product panicked".into()))
                })
            });
            for request in pending {
                request.wait();
            }
            done
        })
    }

    /// Checks, collectively, that every rank holds the same `value` (its
    /// hash: SipHash with fixed keys, the same on every rank); `what`
    /// names it in the error. Every rank sees every rank's hash, so all
    /// return the same result and none is left waiting in a later
    /// collective.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the ranks that differ from rank 0.
    pub fn check_same<H: std::hash::Hash>(&self, what: &str, value: &H) -> Result<(), Error> {
        use std::hash::Hasher;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        value.hash(&mut hasher);
        let mine = hasher.finish();
        let mut all = vec![0u64; self.size()];
        self.world.all_gather_into(&mine, &mut all[..]);
        let differ: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|&(_, &h)| h != all[0])
            .map(|(rank, _)| rank.to_string())
            .collect();
        if differ.is_empty() {
            return Ok(());
        }
        Err(Error::InvalidOption(format!(
            "the ranks were given different {what}: rank(s) {} differ from rank 0",
            differ.join(", ")
        )))
    }

    /// Every rank's `result` made one answer: `Ok` on every rank when all
    /// succeeded, else an error on every rank — a rank that failed alone
    /// keeps its own; where several failed, each names them all (with its
    /// own reason), so that any one rank's message names every failed
    /// rank; the others name the ranks that could not `what`.
    /// Collective.
    pub(super) fn agree<X>(&self, what: &str, result: Result<X, Error>) -> Result<X, Error> {
        let mine = u8::from(result.is_err());
        let mut all = vec![0u8; self.size()];
        self.world.all_gather_into(&mine, &mut all[..]);
        let failed: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|(_, &f)| f != 0)
            .map(|(r, _)| r.to_string())
            .collect();
        match result {
            Err(e) if failed.len() > 1 => Err(Error::Processor {
                processor: format!("rank(s) {}", failed.join(", ")),
                reason: format!("could not {what} (here: {e})"),
            }),
            Err(e) => Err(e),
            Ok(_) if !failed.is_empty() => Err(Error::Processor {
                processor: format!("rank(s) {}", failed.join(", ")),
                reason: format!("could not {what}"),
            }),
            Ok(x) => Ok(x),
        }
    }

    /// The communicator of every group of two or more ranks that
    /// `schedule` uses and this rank belongs to. Every rank walks the
    /// same groups in the same order (each split is collective).
    fn communicators(&self, schedule: &Schedule) -> HashMap<Vec<usize>, SimpleCommunicator> {
        let mut groups: Vec<&Vec<usize>> = Vec::new();
        for op in schedule.in_order() {
            if let Op::Broadcast { group, .. } | Op::Reduce { group, .. } = op {
                if group.len() > 1 && !groups.contains(&group) {
                    groups.push(group);
                }
            }
        }
        let me = self.rank();
        let mut comms = HashMap::new();
        for group in groups {
            let member = group.contains(&me);
            let color = if member {
                Color::with_value(0)
            } else {
                Color::undefined()
            };
            // Ranks keep their order in the group: key = index in it.
            let key = group.iter().position(|&r| r == me).unwrap_or(0) as i32;
            if let Some(comm) = self.world.split_by_color_with_key(color, key) {
                comms.insert(group.clone(), comm);
            }
        }
        comms
    }

    /// C whole on rank 0, from every rank's piece.
    fn collect<T: Element>(
        &self,
        schedule: &Schedule,
        mine: Vec<T>,
    ) -> Result<Option<Matrix<T>>, Error> {
        let layout = &schedule.c;
        let me = self.rank();
        if me != 0 {
            wire::send(&self.world.process_at_rank(0), &mine);
            return Ok(None);
        }
        let mut c = Matrix::try_zeros(layout.rows, layout.cols)?;
        for (rank, piece) in layout.pieces.iter().enumerate() {
            if piece.elements() == 0 {
                continue;
            }
            let data = if rank == 0 {
                mine.clone()
            } else {
                let mut data = vec![T::ZERO; piece.elements()];
                wire::receive(&self.world.process_at_rank(rank as i32), &mut data);
                data
            };
            let width = piece.cols.len();
            for (i, row) in piece.rows.clone().enumerate() {
                for (j, col) in piece.cols.clone().enumerate() {
                    c.set(row, col, data[i * width + j]);
                }
            }
        }
        Ok(Some(c))
    }
}

/// The choices in `opts` that every rank must share, as text (the whole
/// options also hold per-process state, such as an interrupt).
fn chosen(opts: &GemmOptions) -> String {
    format!(
        "{:?}",
        (
            opts.algorithm,
            opts.fast.threshold,
            opts.fast.depth,
            opts.fast.variant,
            opts.fast.base,
            opts.threads,
        )
    )
}

/// An operand of a product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operand {
    A,
    B,
}

/// Where this rank's pieces of A and B come from: hands the piece of an
/// operand, as a view, to a consumer (from matrices given whole, or from
/// the lines of files mapped for it).
type Source<'s, T> = dyn Fn(
        Operand,
        &schedule::Piece,
        &mut dyn FnMut(MatRef<'_, T>) -> Result<(), Error>,
    ) -> Result<(), Error>
    + 's;

/// The source of pieces of `a` and `b` given whole.
fn whole_source<'m, T: Element>(a: MatRef<'m, T>, b: MatRef<'m, T>) -> Box<Source<'m, T>> {
    Box::new(move |operand, p, take| {
        let m = match operand {
            Operand::A => a,
            Operand::B => b,
        };
        take(m.submatrix(p.rows.start, p.cols.start, p.rows.len(), p.cols.len()))
    })
}

/// The piece of `operand` that `source` gives, row-major.
fn piece_vec<T: Element>(
    source: &Source<'_, T>,
    operand: Operand,
    p: &schedule::Piece,
) -> Result<Vec<T>, Error> {
    let mut out = Vec::new();
    source(operand, p, &mut |view| {
        out = Matrix::try_from_view(view)?.into_vec();
        Ok(())
    })?;
    Ok(out)
}

/// Words `rank` receives in `schedule`'s collectives.
fn received_by(schedule: &Schedule, rank: usize) -> u128 {
    schedule
        .in_order()
        .flat_map(Op::received)
        .filter(|&(r, _)| r == rank)
        .map(|(_, w)| w)
        .sum()
}

fn index_in(group: &[usize], rank: usize) -> i32 {
    group
        .iter()
        .position(|&r| r == rank)
        .expect("root in group") as i32
}
