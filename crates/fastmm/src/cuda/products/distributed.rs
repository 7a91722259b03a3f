//! A distributed [`Schedule`] on the GPUs of one host: NCCL moves the
//! pieces, each GPU multiplies its blocks with the single-GPU products.
//!
//! **Streams.** Each GPU has its own stream for communication beside the
//! one its products run on. A step's broadcasts are queued, as one NCCL
//! group, on the communication streams; each GPU's product stream waits
//! for that step's event and queues its products. The host issues every
//! step without waiting, so step s + 1's broadcasts run while step s
//! multiplies (the schedule never lets one overwrite what another reads).
//! The reductions of a 3-D grid wait for the products.
//!
//! **Faults.** The host waits for the GPUs with a deadline (see
//! [`distributed_patience`]), polling the events and every
//! communicator's asynchronous error; a failure or a timeout aborts the
//! communicators (NCCL's way to release GPUs stuck in a collective) and
//! reports the GPU, never hangs.
//!
//! **Members.** A fabric holds the GPUs of one process, each standing for
//! one processor (rank) of the schedule: every processor for a team of
//! this host's GPUs, one for a process of an MPI job. A group whose
//! members are all here connects itself (`ncclCommInitAll`); a group that
//! spans processes is joined with an id its first member made and the
//! caller carried to the others ([`Fabric::join`]), and the fabric runs
//! only its own processors' operations.
//!
//! NCCL is loaded at run time, only when a group has more than one GPU, and
//! NVLink multicast (NVLS) is not used: `Team` sets `NCCL_NVLS_ENABLE=0`
//! unless the caller chose.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use crate::cuda::kernels::gemm::{DeviceGemm, Operand};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::memory::RawDeviceMemory;
#[cfg(feature = "mpi")]
pub(crate) use crate::cuda::runtime::nccl::GroupId;
use crate::cuda::runtime::nccl::{self, Communicator};
use crate::cuda::tunables::{distributed_patience, CUDA_DISTRIBUTED_POLL};
use crate::distributed::schedule::{Op, Region, Schedule, Store};
use crate::element::Element;
use crate::error::Error;
use crate::options::GemmOptions;

impl Drop for Fabric {
    fn drop(&mut self) {
        let comms = std::mem::take(self.communicators.get_mut().expect("communicator lock"));
        // Every group in one order (the map's), on every process, so that
        // no two wait on each other.
        let release = move || comms.into_iter().for_each(|(_, comm)| drop(comm));
        #[cfg(feature = "mpi")]
        if self.ranks.len() < self.processors {
            // Groups span processes: a member that died would hold the
            // release forever, so it runs on a helper thread that this one
            // stops waiting for; one still stuck is left to the process's
            // end.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                release();
                let _ = tx.send(());
            });
            let patience = crate::tunables::CLUSTER_GPU_RELEASE_PATIENCE;
            if rx.recv_timeout(patience).is_err() {
                eprintln!(
                    "fastmm: processor {:?}'s NCCL groups were not released within {:.0} s \
                     (another member is gone); leaving them to the process's end",
                    self.ranks,
                    patience.as_secs_f64()
                );
            }
            return;
        }
        release();
    }
}

/// The GPUs of a process, the processors they stand for, their
/// communication streams and their NCCL communicators, made on first use
/// for each group and kept.
pub(crate) struct Fabric {
    gpus: Vec<Arc<Gpu>>,
    // The processor each GPU stands for (by slot: its index in `gpus`).
    ranks: Vec<usize>,
    // Processors in the schedules this fabric runs, here or elsewhere.
    processors: usize,
    comm_streams: Vec<Arc<CudaStream>>,
    // Ordered by group: released in that order on every process (NCCL's
    // destroy waits for the group's other processes, so two processes
    // releasing two shared groups in opposite orders would wait forever).
    communicators: Mutex<BTreeMap<Vec<usize>, Communicator>>,
    staging: crate::cuda::products::hosted::StagingPools,
    // One distributed product at a time: two would interleave their
    // collectives on the same communicators in different orders.
    running: Mutex<()>,
}

/// What a distributed run did.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// Seconds from the first operation queued to the last GPU finished.
    pub seconds: f64,
}

impl Fabric {
    /// A fabric over `gpus` (distinct devices, checked by the caller), GPU
    /// r standing for processor r.
    pub fn new(gpus: Vec<Arc<Gpu>>) -> Result<Fabric, Error> {
        let processors = gpus.len();
        Fabric::with_ranks(gpus, (0..processors).collect(), processors)
    }

    /// A fabric of one GPU standing for processor `rank` of `processors`,
    /// the others in other processes: a process of an MPI job.
    #[cfg(feature = "mpi")]
    pub fn member(gpu: Arc<Gpu>, rank: usize, processors: usize) -> Result<Fabric, Error> {
        if rank >= processors {
            return Err(Error::InvalidOption(format!(
                "processor {rank} of {processors}"
            )));
        }
        Fabric::with_ranks(vec![gpu], vec![rank], processors)
    }

    fn with_ranks(
        gpus: Vec<Arc<Gpu>>,
        ranks: Vec<usize>,
        processors: usize,
    ) -> Result<Fabric, Error> {
        if gpus.is_empty() {
            return Err(Error::InvalidOption("a team needs at least one GPU".into()));
        }
        let comm_streams = gpus
            .iter()
            .map(|gpu| {
                gpu.stream
                    .fork()
                    .map_err(|e| cuda_err("cannot create a communication stream", e))
            })
            .collect::<Result<_, _>>()?;
        Ok(Fabric {
            staging: crate::cuda::products::hosted::StagingPools::new(&gpus),
            gpus,
            ranks,
            processors,
            comm_streams,
            communicators: Mutex::new(BTreeMap::new()),
            running: Mutex::new(()),
        })
    }

    /// The GPUs, by rank.
    pub fn gpus(&self) -> &[Arc<Gpu>] {
        &self.gpus
    }

    /// The page-locked staging that host-resident products keep.
    pub fn staging(&self) -> &crate::cuda::products::hosted::StagingPools {
        &self.staging
    }

    /// The GPU of `slot`, named with its processor where the others live
    /// in other processes.
    fn name(&self, slot: usize) -> String {
        if self.gpus.len() == self.processors {
            self.gpus[slot].label()
        } else {
            format!("{} of rank {}", self.gpus[slot].label(), self.ranks[slot])
        }
    }

    /// The slot of the GPU standing for processor `rank`, if it is here.
    fn slot(&self, rank: usize) -> Option<usize> {
        self.ranks.iter().position(|&r| r == rank)
    }

    /// Makes the communicator of every group `schedule` uses.
    fn connect(&self, schedule: &Schedule) -> Result<(), Error> {
        for op in schedule.in_order() {
            match op {
                Op::Broadcast { group, .. } | Op::Reduce { group, .. } => {
                    self.connect_group(group)?
                }
                Op::Gemm { .. } => {}
            }
        }
        Ok(())
    }

    /// The groups of `schedule`, in its order and once each, that this
    /// fabric takes part in and has not connected: those a process of an
    /// MPI job must [`Fabric::join`] before [`Fabric::run`]. Every
    /// process that runs the same schedules sees the same list for the
    /// groups it shares.
    #[cfg(feature = "mpi")]
    pub(crate) fn unconnected(&self, schedule: &Schedule) -> Vec<Vec<usize>> {
        let comms = self.communicators.lock().expect("communicator lock");
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for op in schedule.in_order() {
            if let Op::Broadcast { group, .. } | Op::Reduce { group, .. } = op {
                let mine = group.iter().any(|&r| self.slot(r).is_some());
                if group.len() > 1 && mine && !comms.contains_key(group) && !groups.contains(group)
                {
                    groups.push(group.clone());
                }
            }
        }
        groups
    }

    /// A fresh NCCL id, for the first member of a group that spans
    /// processes to carry to the others.
    #[cfg(feature = "mpi")]
    pub(crate) fn new_group_id() -> Result<GroupId, Error> {
        nccl::new_group_id()
    }

    /// Joins `group` (processors, one of them held here) with the `id`
    /// that its first member made, waiting at most `limit` for the other
    /// members (NCCL's join blocks until every member has called it; a
    /// member that never comes is reported, not waited for).
    #[cfg(feature = "mpi")]
    pub(crate) fn join(
        &self,
        group: &[usize],
        id: GroupId,
        limit: std::time::Duration,
    ) -> Result<(), Error> {
        let mine: Vec<(usize, usize)> = group
            .iter()
            .enumerate()
            .filter_map(|(index, &r)| self.slot(r).map(|slot| (index, slot)))
            .collect();
        let [(index, slot)] = mine[..] else {
            return Err(Error::InvalidOption(format!(
                "a group joined across processes holds one member here, not {}",
                mine.len()
            )));
        };
        let gpu = Arc::clone(&self.gpus[slot]);
        let (rank, members) = (self.ranks[slot], group.len());
        let (tx, rx) = std::sync::mpsc::channel();
        // The join runs on a helper thread so that this one can stop
        // waiting; a helper stuck in NCCL is left behind (the caller
        // reports the failure and ends).
        std::thread::spawn(move || {
            let joined = gpu
                .bind()
                .and_then(|()| Communicator::join(rank, (index, members), id));
            let _ = tx.send(joined);
        });
        let communicator = match rx.recv_timeout(limit) {
            Ok(joined) => joined?,
            Err(_) => {
                return Err(Error::Processor {
                    processor: self.name(slot),
                    reason: format!(
                        "the other members of group {group:?} did not join within {:.0} s",
                        limit.as_secs_f64()
                    ),
                })
            }
        };
        let mut comms = self.communicators.lock().expect("communicator lock");
        comms.insert(group.to_vec(), communicator);
        Ok(())
    }

    /// Makes the communicator of `group` (processors), unless it exists,
    /// the group has fewer than two members or none of them here.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a group with members in other
    /// processes that was not joined ([`Fabric::join`]).
    pub(crate) fn connect_group(&self, group: &[usize]) -> Result<(), Error> {
        let mut comms = self.communicators.lock().expect("communicator lock");
        if group.len() < 2 || comms.contains_key(group) {
            return Ok(());
        }
        let slots: Vec<Option<usize>> = group.iter().map(|&r| self.slot(r)).collect();
        if slots.iter().all(Option::is_none) {
            return Ok(());
        }
        let Some(slots) = slots.into_iter().collect::<Option<Vec<usize>>>() else {
            return Err(Error::InvalidOption(format!(
                "group {group:?} has members in other processes and was not joined"
            )));
        };
        let ordinals: Vec<i32> = slots
            .iter()
            .map(|&s| self.gpus[s].info().ordinal as i32)
            .collect();
        comms.insert(group.to_vec(), Communicator::connect_all(group, &ordinals)?);
        Ok(())
    }

    /// Holds the fabric for one distributed product (two would interleave
    /// their collectives on the same communicators in different orders).
    pub(crate) fn exclusive(&self) -> std::sync::MutexGuard<'_, ()> {
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Rank `rank`'s communication stream.
    pub(crate) fn comm_stream(&self, rank: usize) -> &CudaStream {
        &self.comm_streams[rank]
    }

    /// Queues, on every rank's communication stream, the in-place
    /// all-gather of `count` elements of T per rank over all the ranks:
    /// rank r's `buffers[r]` holds its own part at element r·count and
    /// receives every other part at its place.
    ///
    /// # Safety
    /// `buffers[r]` addresses ranks·count elements of T on GPU r that
    /// nothing else uses until the communication streams have passed the
    /// gather.
    pub(crate) unsafe fn all_gather_in_place<T: Element>(
        &self,
        buffers: &[u64],
        count: usize,
    ) -> Result<(), Error> {
        if self.gpus.len() != self.processors {
            return Err(Error::InvalidOption(
                "an all-gather over a team whose processors are not all here".into(),
            ));
        }
        let group: Vec<usize> = (0..self.gpus.len()).collect();
        self.connect_group(&group)?;
        let comms = self.communicators.lock().expect("communicator lock");
        let comm = &comms[&group];
        let elem = std::mem::size_of::<T>() as u64;
        nccl::group(|| {
            // Every member's part is queued even after a failure, so that
            // the group stays whole.
            let mut outcome = Ok(());
            for (rank, &buffer) in buffers.iter().enumerate() {
                let own = buffer + rank as u64 * count as u64 * elem;
                // SAFETY: the caller's contract: ranks·count elements at
                // `buffer`, own part at element rank·count (NCCL's
                // in-place form).
                let queued = unsafe {
                    comm.all_gather(
                        rank,
                        (own, buffer),
                        (count, T::DTYPE),
                        &self.comm_streams[rank],
                    )
                };
                if let Err(e) = queued {
                    outcome = Err(self.on(rank, e));
                }
            }
            outcome
        })
    }

    /// Aborts and forgets every communicator (after a failure, a
    /// communicator may be stuck in a collective).
    pub(crate) fn abort_all(&self) {
        let mut comms = self.communicators.lock().expect("communicator lock");
        for (_, comm) in std::mem::take(&mut *comms) {
            comm.abort();
        }
    }

    /// Runs `schedule` with `a` and `b` the pieces of the processors held
    /// here (by slot: device memory of T, laid out as the schedule says);
    /// returns each slot's piece of C (`None` where it holds none). In a
    /// process of an MPI job, every other process runs the same schedule
    /// at the same time, its groups joined first ([`Fabric::join`]).
    ///
    /// # Safety
    /// `a[s]` and `b[s]` hold at least the schedule's sizes of A and B of
    /// slot s's processor on its GPU, and nothing writes them until this
    /// returns.
    pub unsafe fn run<T: Element>(
        &self,
        schedule: &Schedule,
        a: &[u64],
        b: &[u64],
        opts: &GemmOptions,
    ) -> Result<(Vec<Option<RawDeviceMemory>>, Report), Error> {
        // SAFETY: the caller's contract is `run_after`'s.
        unsafe { self.run_after::<T>(schedule, a, b, opts, &mut || Ok(())) }
    }

    /// [`Fabric::run`], calling `ready` once the stores are allocated and
    /// before the first operation is queued: where a process of an MPI
    /// job waits for the others, so that the report's seconds start with
    /// every process ready.
    ///
    /// # Safety
    /// As [`Fabric::run`].
    pub unsafe fn run_after<T: Element>(
        &self,
        schedule: &Schedule,
        a: &[u64],
        b: &[u64],
        opts: &GemmOptions,
        ready: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<(Vec<Option<RawDeviceMemory>>, Report), Error> {
        let held = self.gpus.len();
        if schedule.plan.processors != self.processors || a.len() != held || b.len() != held {
            return Err(Error::InvalidOption(format!(
                "a schedule for {} processors on a fabric of {} ({held} here)",
                schedule.plan.processors, self.processors
            )));
        }
        let _running = self.exclusive();
        self.connect(schedule)?;
        let elem = std::mem::size_of::<T>();
        // Every store but the given A and B, allocated before anything runs.
        let mut owned: Vec<HashMap<Store, RawDeviceMemory>> = Vec::with_capacity(held);
        for (slot, gpu) in self.gpus.iter().enumerate() {
            let mut stores = HashMap::new();
            for store in [Store::C, Store::GatherA, Store::GatherB, Store::Partial] {
                let len = schedule.size(self.ranks[slot], store);
                if len > 0 {
                    let memory =
                        RawDeviceMemory::alloc(gpu, len * elem).map_err(|e| Error::Processor {
                            processor: self.name(slot),
                            reason: e.to_string(),
                        })?;
                    stores.insert(store, memory);
                }
            }
            owned.push(stores);
        }
        let base = |slot: usize, store: Store| -> u64 {
            match store {
                Store::A => a[slot],
                Store::B => b[slot],
                _ => owned[slot].get(&store).map_or(0, |m| m.ptr),
            }
        };
        let at = |slot: usize, r: &Region| base(slot, r.store) + (r.offset * elem) as u64;

        ready()?;
        let start = Instant::now();
        let issued = self.issue::<T>(schedule, &at, opts);
        let waited = issued.and_then(|backends| {
            let limit = distributed_patience(schedule.plan.shape, self.processors);
            let done = self.wait_all(limit, start);
            drop(backends);
            done
        });
        if let Err(e) = waited {
            self.abort_all();
            return Err(e);
        }
        let seconds = start.elapsed().as_secs_f64();
        let c = owned
            .into_iter()
            .map(|mut stores| stores.remove(&Store::C))
            .collect();
        Ok((c, Report { seconds }))
    }

    /// Queues every operation of `schedule` that a processor held here
    /// takes part in (`at` finds a region of a slot's stores); returns
    /// what must live until the GPUs are done (the fast algorithms'
    /// temporaries).
    fn issue<'s, T: Element>(
        &'s self,
        schedule: &Schedule,
        at: &dyn Fn(usize, &Region) -> u64,
        opts: &GemmOptions,
    ) -> Result<Vec<crate::cuda::products::strassen::CudaBackend<'s, T>>, Error> {
        let mut backends = Vec::new();
        for step in &schedule.steps {
            if !step.comm.is_empty() {
                self.collectives::<T>(&step.comm, at)?;
                for op in &step.compute {
                    if let Some(slot) = op_slot(self, op) {
                        self.order(slot, &self.comm_streams[slot], &self.gpus[slot].stream)?;
                    }
                }
            }
            for op in &step.compute {
                let Op::Gemm {
                    rank,
                    a,
                    b,
                    c,
                    accumulate,
                } = op
                else {
                    continue;
                };
                let Some(slot) = self.slot(*rank) else {
                    continue;
                };
                if c.rows == 0 || c.cols == 0 || a.cols == 0 {
                    continue;
                }
                let operand = |r: &Region| Operand::row_major(at(slot, r), r.ld);
                let beta = if *accumulate { T::ONE } else { T::ZERO };
                let gpu: &'s Gpu = &self.gpus[slot];
                let product = DeviceGemm {
                    shape: (a.rows, a.cols, b.cols),
                    alpha: T::ONE,
                    a: operand(a),
                    b: operand(b),
                    beta,
                    c: operand(c),
                };
                let fast = crate::cuda::products::in_core::issue_resident(gpu, product, opts)
                    .map_err(|e| Error::Processor {
                        processor: self.name(slot),
                        reason: e.to_string(),
                    })?;
                backends.extend(fast);
            }
        }
        if !schedule.finish.is_empty() {
            for slot in 0..self.gpus.len() {
                self.order(slot, &self.gpus[slot].stream, &self.comm_streams[slot])?;
            }
            self.collectives::<T>(&schedule.finish, at)?;
        }
        Ok(backends)
    }

    /// Makes `later` wait for what `earlier` has queued so far, on the GPU
    /// of `slot`.
    pub(crate) fn order(
        &self,
        slot: usize,
        earlier: &CudaStream,
        later: &CudaStream,
    ) -> Result<(), Error> {
        let event = earlier
            .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(|e| self.fault(slot, "cannot record an event", e))?;
        later
            .wait(&event)
            .map_err(|e| self.fault(slot, "cannot order two streams", e))
    }

    fn fault(&self, slot: usize, what: &str, e: impl std::fmt::Debug) -> Error {
        Error::Processor {
            processor: self.name(slot),
            reason: format!("{what}: {e:?}"),
        }
    }

    /// Queues the parts of `ops` (broadcasts or reductions) that the
    /// processors held here play, as one NCCL group.
    fn collectives<T: Element>(
        &self,
        ops: &[Op],
        at: &dyn Fn(usize, &Region) -> u64,
    ) -> Result<(), Error> {
        let comms = self.communicators.lock().expect("communicator lock");
        nccl::group(|| self.queue_collectives::<T>(&comms, ops, at))
    }

    /// The members' parts of `ops` held here, queued (inside an NCCL
    /// group); every part is queued even after a failure, so that the
    /// group stays whole.
    fn queue_collectives<T: Element>(
        &self,
        comms: &BTreeMap<Vec<usize>, Communicator>,
        ops: &[Op],
        at: &dyn Fn(usize, &Region) -> u64,
    ) -> Result<(), Error> {
        let mut outcome = Ok(());
        for op in ops {
            let (group, root) = match op {
                Op::Broadcast { group, root, .. } | Op::Reduce { group, root, .. } => {
                    (group, *root)
                }
                Op::Gemm { .. } => continue,
            };
            if group.len() < 2 || group.iter().all(|&r| self.slot(r).is_none()) {
                continue;
            }
            let comm = &comms[group];
            let root_index = group.iter().position(|&r| r == root).ok_or_else(|| {
                Error::InvalidOption(format!("root {root} outside group {group:?}"))
            })?;
            for &rank in group {
                let Some(slot) = self.slot(rank) else {
                    continue;
                };
                let stream = &self.comm_streams[slot];
                // SAFETY: the regions lie inside stores of this rank's GPU
                // (the schedule's sizes, allocated by `run` or given under
                // its contract), of `count` elements of T each.
                let queued = unsafe {
                    match op {
                        Op::Broadcast { src, dst, .. } => {
                            let region = if rank == root { src } else { dst };
                            comm.broadcast(
                                rank,
                                at(slot, region),
                                (dst.elements(), T::DTYPE),
                                root_index,
                                stream,
                            )
                        }
                        Op::Reduce { src, dst, .. } => comm.reduce_sum(
                            rank,
                            (at(slot, src), (rank == root).then(|| at(slot, dst))),
                            (src.elements(), T::DTYPE),
                            root_index,
                            stream,
                        ),
                        Op::Gemm { .. } => Ok(()),
                    }
                };
                if let Err(e) = queued {
                    outcome = Err(self.on(slot, e));
                }
            }
        }
        outcome
    }

    /// `e`, said of the GPU of `slot`.
    fn on(&self, slot: usize, e: Error) -> Error {
        Error::Processor {
            processor: self.name(slot),
            reason: e.to_string(),
        }
    }

    /// Waits for every GPU's two streams until `limit` after `start`,
    /// watching the communicators for asynchronous errors.
    pub(crate) fn wait_all(&self, limit: std::time::Duration, start: Instant) -> Result<(), Error> {
        let mut pending: Vec<(usize, CudaEvent)> = Vec::new();
        for slot in 0..self.gpus.len() {
            for stream in [&self.gpus[slot].stream, &self.comm_streams[slot]] {
                let event = stream
                    .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(|e| self.fault(slot, "cannot record an event", e))?;
                pending.push((slot, event));
            }
        }
        loop {
            let mut still = Vec::new();
            for (slot, event) in pending {
                match event.try_is_complete() {
                    Ok(true) => {}
                    Ok(false) => still.push((slot, event)),
                    Err(e) => return Err(self.fault(slot, "a product or a transfer failed", e)),
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            self.check_async_errors()?;
            if start.elapsed() > limit {
                let mut late: Vec<String> = pending.iter().map(|(s, _)| self.name(*s)).collect();
                late.dedup();
                return Err(Error::Processor {
                    processor: late.join(", "),
                    reason: format!(
                        "did not finish within {:.0} s; the product was abandoned",
                        limit.as_secs_f64()
                    ),
                });
            }
            std::thread::sleep(CUDA_DISTRIBUTED_POLL);
        }
        for gpu in &self.gpus {
            gpu.synchronize()?;
        }
        Ok(())
    }

    /// The first asynchronous error a communicator reports.
    fn check_async_errors(&self) -> Result<(), Error> {
        let comms = self.communicators.lock().expect("communicator lock");
        for comm in comms.values() {
            if let Some((rank, error)) = comm.async_error() {
                let slot = self.slot(rank).unwrap_or(0);
                return Err(Error::Processor {
                    processor: self.name(slot),
                    reason: format!("NCCL reported: {error}"),
                });
            }
        }
        Ok(())
    }
}

/// The slot of the processor whose product `op` is, if it is held here.
fn op_slot(fabric: &Fabric, op: &Op) -> Option<usize> {
    match op {
        Op::Gemm { rank, .. } => fabric.slot(*rank),
        _ => None,
    }
}
