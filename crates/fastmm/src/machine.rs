//! The executor value every front end holds: [`Machine`], one enum over
//! what runs products (one device, the GPUs of one host, the ranks of an
//! MPI job), itself an [`Executor`]. A front end opens one from the
//! user's device text, plans and executes through it, and never asks
//! which kind it holds: what differs between the kinds (who holds the
//! result, whether a resident twin of a streamed plan exists) is a
//! question the machine answers.
//!
//! ```
//! use fastmm::{Executor, Gemm, GemmOptions, Machine, Matrix, Problem};
//! # fn main() -> Result<(), fastmm::Error> {
//! let machine = Machine::open("cpu")?;
//! let a = Matrix::<f64>::from_fn(30, 20, |i, j| (i + j) as f64);
//! let b = Matrix::<f64>::from_fn(20, 10, |i, j| (i * j % 5) as f64);
//! let plan = machine.plan(Problem::of::<f64>((30, 20, 10)), &GemmOptions::default())?;
//! let mut c = Matrix::zeros(30, 10);
//! let report = machine.execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()))?;
//! assert_eq!(report.plan, plan);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

#[cfg(feature = "mpi")]
use crate::cluster::Cluster;
use crate::context::Context;
use crate::element::Element;
use crate::error::Error;
use crate::executor::{Clock, Executor, Report};
use crate::gemm::{Gemm, Problem};
use crate::matrix::{MatMut, MatRef};
use crate::options::{ComplexForm, Device, DeviceKind, DeviceList, GemmOptions};
use crate::plan::{Plan, Route};
use crate::team::Team;

/// What runs products, held as one value: clone it freely (the devices
/// behind it are shared, opened once).
#[derive(Clone)]
pub enum Machine {
    /// One device: the CPU or one GPU.
    Device(Context),
    /// The GPUs of one host, one process driving them (or the CPU standing
    /// in for several processors: [`Team::simulated`]).
    Team(Arc<Team>),
    /// The ranks of an MPI job: every rank calls each product with the
    /// same A and B, and rank 0 holds C. MPI's communicators belong to
    /// the thread that opened the cluster: the machine may travel, but
    /// its products run on that thread only (elsewhere a typed error).
    #[cfg(feature = "mpi")]
    Cluster(Arc<OnItsThread<Cluster>>),
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Machine({})", self.name())
    }
}

impl From<Context> for Machine {
    fn from(ctx: Context) -> Machine {
        Machine::Device(ctx)
    }
}

impl From<Team> for Machine {
    fn from(team: Team) -> Machine {
        Machine::Team(Arc::new(team))
    }
}

#[cfg(feature = "mpi")]
impl From<Cluster> for Machine {
    fn from(cluster: Cluster) -> Machine {
        Machine::Cluster(Arc::new(OnItsThread::new(cluster)))
    }
}

/// A value that only the thread which made it may use: it may be moved
/// and shared (a machine lives in caches and crosses `Send` bounds), but
/// [`OnItsThread::get`] answers an error on any other thread, and a drop
/// elsewhere leaks the value rather than run its destructor there. For
/// MPI's communicators, which rsmpi marks neither `Send` nor `Sync`.
#[cfg(feature = "mpi")]
pub struct OnItsThread<T> {
    owner: std::thread::ThreadId,
    value: std::mem::ManuallyDrop<T>,
}

// SAFETY: the value is reached only through `get`, which checks that the
// caller is the thread that made it, and dropped only on that thread
// (see `Drop`); other threads hold the wrapper but never touch the value.
#[cfg(feature = "mpi")]
unsafe impl<T> Send for OnItsThread<T> {}
// SAFETY: as for `Send`: a shared reference from another thread cannot
// reach the value.
#[cfg(feature = "mpi")]
unsafe impl<T> Sync for OnItsThread<T> {}

#[cfg(feature = "mpi")]
impl<T> OnItsThread<T> {
    fn new(value: T) -> OnItsThread<T> {
        OnItsThread {
            owner: std::thread::current().id(),
            value: std::mem::ManuallyDrop::new(value),
        }
    }

    /// The value, on the thread that made it.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] on any other thread.
    pub fn get(&self) -> Result<&T, Error> {
        if std::thread::current().id() != self.owner {
            return Err(Error::InvalidOption(
                "an MPI cluster runs its products on the thread that joined the job".into(),
            ));
        }
        Ok(&self.value)
    }
}

#[cfg(feature = "mpi")]
impl<T> Drop for OnItsThread<T> {
    fn drop(&mut self) {
        if std::thread::current().id() == self.owner {
            // SAFETY: dropped once, here, on the thread that owns it; the
            // field is not used again.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.value) }
        }
    }
}

impl Machine {
    /// The machine `text` names: `cpu`, `cuda`, `cuda:N` (one device),
    /// `cuda:0,1` or `cuda:all` (a team of GPUs), and with feature `mpi`,
    /// `mpi` (the ranks of the job this process belongs to, MPI started
    /// here with the cluster's defaults; [`Machine::from`] a configured
    /// [`Cluster`] for more).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for text that names none;
    /// [`Error::CudaUnavailable`] for a GPU this process cannot open.
    pub fn open(text: &str) -> Result<Machine, Error> {
        #[cfg(feature = "mpi")]
        if text.trim().eq_ignore_ascii_case("mpi") {
            return Ok(Cluster::init()?.into());
        }
        Machine::open_list(&text.parse()?)
    }

    /// The machine of a parsed device list: one device, or a team.
    ///
    /// # Errors
    /// As [`Machine::open`].
    pub fn open_list(list: &DeviceList) -> Result<Machine, Error> {
        match list {
            DeviceList::Listed(devices) if devices.len() == 1 => {
                Ok(Context::open(devices[0])?.into())
            }
            _ => Ok(Team::open_list(list)?.into()),
        }
    }

    /// The name a front end prints beside its results: the device
    /// (`cpu`, `cuda:0`), the team's list (`cuda:0,1`), or `mpi`.
    pub fn name(&self) -> String {
        match self {
            Machine::Device(ctx) => ctx.device().to_string(),
            Machine::Team(team) => match team.devices().as_slice() {
                [Device::Cpu] => "cpu".into(),
                devices => DeviceList::Listed(devices.to_vec()).to_string(),
            },
            #[cfg(feature = "mpi")]
            Machine::Cluster(_) => "mpi".into(),
        }
    }

    /// C ← α·A·B + β·C without a report: on one device the convenience
    /// path of [`Context::gemm`] (options resolved, no plan labels built:
    /// a small product costs a microsecond less), elsewhere
    /// [`Executor::run`]. For front ends that answer nothing but C (a
    /// BLAS).
    ///
    /// # Errors
    /// As [`Executor::run`].
    pub fn multiply<T: Element>(
        &self,
        product: Gemm<'_, T>,
        opts: &GemmOptions,
    ) -> Result<(), Error> {
        match self {
            Machine::Device(ctx) => {
                let Gemm {
                    alpha,
                    a,
                    b,
                    beta,
                    c,
                } = product;
                ctx.gemm(alpha, a, b, beta, c, opts)
            }
            _ => self.run(product, opts).map(|_| ()),
        }
    }

    /// The one device's context, for what only one device does (its GPU's
    /// stream, arrays already on it); `None` for a team or cluster.
    pub fn context(&self) -> Option<&Context> {
        match self {
            Machine::Device(ctx) => Some(ctx),
            _ => None,
        }
    }

    /// The plan of `count` products of one shape: on one GPU one strided
    /// batch ([`Context::plan_gpu_batch`], whose `auto` has crossovers of
    /// its own), elsewhere each product's plan.
    ///
    /// # Errors
    /// As [`Executor::plan`].
    pub fn plan_batch(
        &self,
        problem: Problem,
        count: usize,
        opts: &GemmOptions,
    ) -> Result<Plan, Error> {
        match self {
            #[cfg(feature = "cuda")]
            Machine::Device(ctx) if count > 1 && ctx.device().kind() == DeviceKind::Cuda => {
                ctx.plan_gpu_batch(problem, count, opts)
            }
            _ => {
                let _ = count;
                self.plan(problem, opts)
            }
        }
    }

    /// The cluster, on the thread that joined the job (for what only an
    /// MPI job does: its rank, aborting it); `None` for another machine
    /// or on another thread.
    #[cfg(feature = "mpi")]
    pub fn cluster(&self) -> Option<&Cluster> {
        match self {
            Machine::Cluster(cluster) => cluster.get().ok(),
            _ => None,
        }
    }

    /// Whether this process receives C: everywhere but the ranks of a
    /// cluster other than 0 (which run their parts and return).
    pub fn holds_results(&self) -> bool {
        match self {
            Machine::Device(_) | Machine::Team(_) => true,
            #[cfg(feature = "mpi")]
            Machine::Cluster(cluster) => cluster.get().is_ok_and(|c| c.rank() == 0),
        }
    }

    /// Whether its products must run on the thread that made it (an MPI
    /// job's communicators): a front end then neither hands them to a
    /// helper thread nor stops one rank of a collective half-way.
    pub fn bound_to_its_thread(&self) -> bool {
        match self {
            Machine::Device(_) | Machine::Team(_) => false,
            #[cfg(feature = "mpi")]
            Machine::Cluster(_) => true,
        }
    }

    /// Whether the products run on this process's CPU alone (no GPU, no
    /// other process): a caller may then wait by polling rather than by
    /// sleeping, the product being as short as a few microseconds.
    pub fn cpu_only(&self) -> bool {
        match self {
            Machine::Device(ctx) => ctx.device() == Device::Cpu,
            Machine::Team(team) => team.devices().iter().all(|d| *d == Device::Cpu),
            #[cfg(feature = "mpi")]
            Machine::Cluster(_) => false,
        }
    }

    /// The contexts of the GPUs this process drives (none on the CPU or
    /// for a cluster, whose GPUs are the ranks').
    pub fn gpus(&self) -> Vec<&Context> {
        let gpu = |c: &&Context| c.device().kind() == DeviceKind::Cuda;
        match self {
            Machine::Device(ctx) => std::iter::once(ctx).filter(gpu).collect(),
            Machine::Team(team) => (0..team.size())
                .map(|r| team.context(r))
                .filter(gpu)
                .collect(),
            #[cfg(feature = "mpi")]
            Machine::Cluster(_) => Vec::new(),
        }
    }

    /// Where `plan` streams host-resident matrices through the devices
    /// (a team's GPU bands or rows), the plan of the same product with
    /// A, B and C resident in the devices' memory in pieces: the
    /// distributed product's own time, which a benchmark shows beside
    /// the streamed one. `None` for every other plan.
    ///
    /// # Errors
    /// As [`Executor::plan`].
    pub fn resident_twin(&self, plan: &Plan, opts: &GemmOptions) -> Result<Option<Plan>, Error> {
        let hosted = plan
            .spread
            .as_ref()
            .is_some_and(|s| matches!(s.route, Route::Bands | Route::Rows));
        match self {
            Machine::Team(team) if hosted => Ok(Some(team.plan_pieces(plan.problem, opts)?)),
            _ => Ok(None),
        }
    }
}

impl Executor for Machine {
    fn describe(&self) -> String {
        match self {
            Machine::Device(ctx) => ctx.describe(),
            Machine::Team(team) => team.describe(),
            #[cfg(feature = "mpi")]
            Machine::Cluster(cluster) => match cluster.get() {
                Ok(cluster) => cluster.describe(),
                Err(_) => "MPI ranks (reached from another thread)".into(),
            },
        }
    }

    fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        match self {
            Machine::Device(ctx) => ctx.plan(problem, opts),
            Machine::Team(team) => team.plan(problem, opts),
            #[cfg(feature = "mpi")]
            Machine::Cluster(cluster) => cluster.get()?.plan(problem, opts),
        }
    }

    fn execute_clocked<T: Element>(
        &self,
        plan: &Plan,
        product: Gemm<'_, T>,
        clock: Clock,
    ) -> Result<Report, Error> {
        match self {
            Machine::Device(ctx) => ctx.execute_clocked(plan, product, clock),
            Machine::Team(team) => team.execute_clocked(plan, product, clock),
            #[cfg(feature = "mpi")]
            Machine::Cluster(cluster) => cluster.get()?.execute_clocked(plan, product, clock),
        }
    }

    fn complex_product<T: Element>(
        &self,
        a: (MatRef<'_, T>, MatRef<'_, T>),
        b: (MatRef<'_, T>, MatRef<'_, T>),
        c: (MatMut<'_, T>, MatMut<'_, T>),
        form: ComplexForm,
        opts: &GemmOptions,
    ) -> Option<Result<Report, Error>> {
        match self {
            Machine::Device(ctx) => ctx.complex_product(a, b, c, form, opts),
            Machine::Team(team) => team.complex_product(a, b, c, form, opts),
            #[cfg(feature = "mpi")]
            Machine::Cluster(cluster) => match cluster.get() {
                Ok(cluster) => cluster.complex_product(a, b, c, form, opts),
                Err(e) => Some(Err(e)),
            },
        }
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
        match self {
            Machine::Device(ctx) => ctx.complex_direct(alpha, a, b, beta, c, form, opts),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;

    /// Every kind reachable without a GPU plans, runs exactly its plan,
    /// and agrees with the CPU's product.
    #[test]
    fn every_machine_runs_its_plan() {
        let a = Matrix::<i64>::from_fn(37, 29, |i, j| (i as i64 * 7 - j as i64 * 3) % 11);
        let b = Matrix::<i64>::from_fn(29, 41, |i, j| (i as i64 + 2 * j as i64) % 13 - 6);
        let mut expected = Matrix::zeros(37, 41);
        crate::cpu::naive::accumulate(1, a.as_ref(), b.as_ref(), expected.as_mut());
        let machines = [
            Machine::open("cpu").unwrap(),
            Team::simulated(4).unwrap().into(),
            Machine::open_list(&DeviceList::Listed(vec![Device::Cpu])).unwrap(),
        ];
        for machine in machines {
            assert!(machine.holds_results() && machine.cpu_only() && machine.gpus().is_empty());
            for algorithm in ["auto", "naive", "packed", "strassen"] {
                let opts = GemmOptions::new(algorithm.parse().unwrap());
                let plan = machine
                    .plan(Problem::of::<i64>((37, 29, 41)), &opts)
                    .unwrap();
                let mut c = Matrix::from_fn(37, 41, |_, _| i64::MIN);
                let report = machine
                    .execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()))
                    .unwrap();
                assert_eq!(report.plan, plan, "{machine:?} {algorithm}");
                assert_eq!(c, expected, "{machine:?} {algorithm}");
                assert_eq!(machine.resident_twin(&plan, &opts).unwrap(), None);
            }
        }
        assert!(Machine::open("nonsense").is_err());
    }
}
