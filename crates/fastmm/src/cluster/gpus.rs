//! Products across ranks whose pieces live on their GPUs. Each rank copies
//! its pieces of A and B to its GPU once; the schedule's broadcasts and
//! reductions are NCCL collectives between the ranks' GPUs, run by the
//! same executor as a team of one host's GPUs ([`Fabric`]) holding only
//! this rank's GPU; its piece of C comes back once. MPI carries only each
//! group's NCCL id, from its first member to the others.
//!
//! Where the pieces do not fit every rank's GPU, or a node has more ranks
//! than GPUs (NCCL takes one GPU per member of a group), the ranks keep
//! them in host memory (the caller's other path): every rank learns what
//! every other found, so all make the same choice.

use std::sync::Arc;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use super::{received_by, Cluster, ClusterReport, Operand, Source};
use crate::context::Context;
use crate::cuda::products::distributed::Fabric;
use crate::cuda::runtime::transfer;
use crate::distributed::planner;
use crate::distributed::schedule::{self, Schedule};
use crate::element::Element;
use crate::error::Error;
use crate::options::GemmOptions;
use crate::tunables::{CLUSTER_GPU_JOIN_PATIENCE, CLUSTER_GPU_MEMORY_FRACTION};

impl Cluster {
    /// The distributed product of (m, k, n) ≥ 1 operands, this rank's
    /// pieces of which `source` gives, with them on `ctx`'s GPU: the schedule,
    /// this rank's piece of C and the report; `None` where the pieces do
    /// not fit every rank's GPU or two ranks of a node share one (the
    /// same answer on every rank). `fixed`: the plan to follow, where its
    /// pieces fit every rank's GPU.
    /// Collective.
    pub(super) fn product_on_gpus<T: Element>(
        &self,
        shape: (usize, usize, usize),
        source: &Source<'_, T>,
        opts: &GemmOptions,
        ctx: &Context,
        fixed: Option<&planner::Decomposition>,
    ) -> Result<Option<(Schedule, Vec<T>, ClusterReport)>, Error> {
        let crowded_here = u8::from(self.node_size > crate::cuda::runtime::device::device_count()?);
        let mut crowded = 0u8;
        self.world
            .all_reduce_into(&crowded_here, &mut crowded, SystemOperation::max());
        if crowded > 0 {
            return Ok(None);
        }
        let free = ctx.gpu_memory()?.map_or(0, |(free, _)| free as u64);
        let (num, den) = CLUSTER_GPU_MEMORY_FRACTION;
        let on_gpus = self.least_words::<T>(free / den * num);
        let in_host = self.memory_words::<T>();
        let memory = match (on_gpus, in_host) {
            (Some(g), Some(h)) => Some(g.min(h)),
            (g, h) => g.or(h),
        };
        let plan = match fixed {
            Some(plan) if memory.is_none_or(|words| plan.memory_words <= words) => Ok(plan.clone()),
            Some(_) => return Ok(None),
            None => planner::plan(shape, self.size(), memory),
        };
        let plan = match plan {
            Ok(plan) => plan,
            Err(Error::OutOfMemory { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let schedule = schedule::build(&plan);
        let me = self.rank();
        let gpu = ctx
            .gpu_arc()
            .ok_or_else(|| Error::CudaUnavailable("a rank's GPU context holds no GPU".into()))?;
        let fabric = self.fabric(&gpu)?;
        self.join_groups(&fabric, &schedule)?;

        let staged = Instant::now();
        let upload = |operand: Operand, piece: &schedule::Piece| {
            let mut memory = None;
            source(operand, piece, &mut |view| {
                memory = Some(transfer::upload_view(&gpu, view)?);
                Ok(())
            })?;
            memory.ok_or_else(|| Error::InvalidOption("a piece's source gave nothing".into()))
        };
        let da = upload(Operand::A, &schedule.a.pieces[me])?;
        let db = upload(Operand::B, &schedule.b.pieces[me])?;
        let mut staging = staged.elapsed();
        let words = received_by(&schedule, me);
        // Timed from every rank's stores allocated (the barrier) to this
        // rank's GPU done.
        let mut ready = || {
            self.world.barrier();
            Ok(())
        };
        // SAFETY: `da` and `db` hold this rank's pieces of A and B (the
        // schedule's sizes, row-major as it lays them out) on the
        // fabric's one GPU, and nothing writes them until `run` returns.
        let ran =
            unsafe { fabric.run_after::<T>(&schedule, &[da.ptr], &[db.ptr], opts, &mut ready) };
        let (mut c, report) = ran?;
        let mine_ms = report.seconds * 1e3;

        let back = Instant::now();
        let len = schedule.c.pieces[me].elements();
        let mine = match c.pop().flatten() {
            // SAFETY: the executor's C store of this rank holds its piece
            // of C, `len` elements, and the run is over.
            Some(dc) => unsafe { transfer::download_vec::<T>(&gpu, &dc, len)? },
            None => Vec::new(),
        };
        staging += back.elapsed();
        let timing = self.timing_and_words(mine_ms, words as u64);
        let staging_mine = staging.as_secs_f64() * 1e3;
        let mut staging_ms = 0.0;
        self.world
            .all_reduce_into(&staging_mine, &mut staging_ms, SystemOperation::max());
        let grid = (plan.grid.pm, plan.grid.pn, plan.grid.pk);
        Ok(Some((schedule, mine, {
            let mut report = ClusterReport::measured(grid, self.size(), timing, plan.lower_bound);
            report.moved.local_gpus = true;
            report.moved.pieces_on_gpus = true;
            report.staging_ms = staging_ms;
            report
        })))
    }

    /// This rank's GPU as a member of the job's groups, made once.
    fn fabric(&self, gpu: &Arc<crate::cuda::runtime::device::Gpu>) -> Result<Arc<Fabric>, Error> {
        let mut slot = self.fabric.lock().expect("fabric lock");
        if let Some(fabric) = slot.as_ref() {
            return Ok(Arc::clone(fabric));
        }
        // NVLink multicast (NVLS) can put GPUs that other jobs share out of
        // service, and broadcasts and reductions do not need it: off
        // unless the caller chose (read by NCCL when a group connects).
        if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
            std::env::set_var("NCCL_NVLS_ENABLE", "0");
        }
        let fabric = Arc::new(Fabric::member(Arc::clone(gpu), self.rank(), self.size())?);
        *slot = Some(Arc::clone(&fabric));
        Ok(fabric)
    }

    /// Joins every group of `schedule` that this rank's GPU takes part in
    /// and has not joined: the group's first member makes an NCCL id, an
    /// MPI broadcast in the group's communicator carries it to the others,
    /// and each joins. Collective (the communicators are split on every
    /// rank); every rank walks its groups in the schedule's order, so two
    /// groups never wait on each other.
    fn join_groups(&self, fabric: &Fabric, schedule: &Schedule) -> Result<(), Error> {
        let comms = self.communicators(schedule);
        for group in fabric.unconnected(schedule) {
            let comm = comms.get(&group).ok_or_else(|| {
                Error::InvalidOption(format!(
                    "rank {} has no communicator for {group:?}",
                    self.rank()
                ))
            })?;
            let mut id = if comm.rank() == 0 {
                Fabric::new_group_id()?
            } else {
                [0u8; 128]
            };
            comm.process_at_rank(0).broadcast_into(&mut id[..]);
            fabric.join(&group, id, CLUSTER_GPU_JOIN_PATIENCE)?;
        }
        Ok(())
    }
}
