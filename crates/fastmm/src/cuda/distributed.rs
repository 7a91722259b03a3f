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
//! NCCL is loaded at run time, only when a group has more than one GPU, and
//! NVLink multicast (NVLS) is not used: `Team` sets `NCCL_NVLS_ENABLE=0`
//! unless the caller chose.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};
use cudarc::nccl::{result as nccl, sys as nccl_sys};

use crate::cuda::cuda_err;
use crate::cuda::device::Gpu;
use crate::cuda::gemm::Operand;
use crate::cuda::memory::RawDeviceMemory;
use crate::cuda::tunables::{distributed_patience, CUDA_DISTRIBUTED_POLL};
use crate::distributed::schedule::{Op, Region, Schedule, Store};
use crate::element::{DType, Element};
use crate::error::Error;
use crate::options::GemmOptions;

/// Whether NCCL's library loads, or what to do about it.
pub(crate) fn nccl_available() -> Result<(), Error> {
    // SAFETY: only tries to dlopen the library by its names.
    if unsafe { nccl_sys::is_culib_present() } {
        return Ok(());
    }
    Err(Error::CudaUnavailable(
        "a product over several GPUs needs NCCL, and libnccl.so is not on the loader path \
         (NCCL's packages, pip's nvidia-nccl-cu13 among them, may install only libnccl.so.2: \
         link it as libnccl.so in a directory of LD_LIBRARY_PATH)"
            .into(),
    ))
}

/// One NCCL communicator per member of a group of GPUs.
struct Communicator {
    handles: Vec<nccl_sys::ncclComm_t>,
}

// SAFETY: NCCL communicators may be used from any thread, one call at a
// time; the fabric serialises every use behind its mutex or its `&mut`.
unsafe impl Send for Communicator {}

impl Communicator {
    /// Aborts every member (releases GPUs stuck in a collective).
    fn abort(mut self) {
        for comm in self.handles.drain(..) {
            // SAFETY: a communicator made by comm_init_all, released once.
            let _ = unsafe { nccl::comm_abort(comm) };
        }
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        for comm in self.handles.drain(..) {
            // SAFETY: a communicator made by comm_init_all, released once;
            // a failure cannot be reported from drop.
            let _ = unsafe { nccl::comm_destroy(comm) };
        }
    }
}

fn nccl_err(what: &str, e: nccl::NcclError) -> Error {
    Error::Cuda(format!("NCCL: {what}: {:?}", e.0))
}

/// The GPUs of a team, their communication streams and their NCCL
/// communicators, made on first use for each group and kept.
pub(crate) struct Fabric {
    gpus: Vec<Arc<Gpu>>,
    comm_streams: Vec<Arc<CudaStream>>,
    communicators: Mutex<HashMap<Vec<usize>, Communicator>>,
    staging: crate::cuda::hosted::StagingPools,
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

fn nccl_type(dtype: DType) -> nccl_sys::ncclDataType_t {
    match dtype {
        DType::F32 => nccl_sys::ncclDataType_t::ncclFloat32,
        DType::F64 => nccl_sys::ncclDataType_t::ncclFloat64,
        DType::I32 => nccl_sys::ncclDataType_t::ncclInt32,
        DType::I64 => nccl_sys::ncclDataType_t::ncclInt64,
    }
}

impl Fabric {
    /// A fabric over `gpus` (distinct devices, checked by the caller).
    pub fn new(gpus: Vec<Arc<Gpu>>) -> Result<Fabric, Error> {
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
            staging: crate::cuda::hosted::StagingPools::new(&gpus),
            gpus,
            comm_streams,
            communicators: Mutex::new(HashMap::new()),
            running: Mutex::new(()),
        })
    }

    /// The GPUs, by rank.
    pub fn gpus(&self) -> &[Arc<Gpu>] {
        &self.gpus
    }

    /// The page-locked staging that host-resident products keep.
    pub fn staging(&self) -> &crate::cuda::hosted::StagingPools {
        &self.staging
    }

    fn name(&self, rank: usize) -> String {
        self.gpus[rank].label()
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

    /// Makes the communicator of `group` (ranks), unless it exists or the
    /// group has fewer than two members.
    pub(crate) fn connect_group(&self, group: &[usize]) -> Result<(), Error> {
        let mut comms = self.communicators.lock().expect("communicator lock");
        if group.len() < 2 || comms.contains_key(group) {
            return Ok(());
        }
        nccl_available()?;
        let ordinals: Vec<i32> = group
            .iter()
            .map(|&r| self.gpus[r].info().ordinal as i32)
            .collect();
        let mut handles = vec![std::ptr::null_mut(); group.len()];
        // SAFETY: one out-slot per device of `ordinals`, which are
        // distinct GPUs of this host.
        unsafe { nccl::comm_init_all(handles.as_mut_ptr(), group.len() as i32, ordinals.as_ptr()) }
            .map_err(|e| nccl_err(&format!("cannot connect GPUs {ordinals:?}"), e))?;
        comms.insert(group.to_vec(), Communicator { handles });
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
        let group: Vec<usize> = (0..self.gpus.len()).collect();
        self.connect_group(&group)?;
        let comms = self.communicators.lock().expect("communicator lock");
        let comm = &comms[&group];
        let elem = std::mem::size_of::<T>() as u64;
        nccl::group_start().map_err(|e| nccl_err("cannot start a group", e))?;
        let mut outcome = Ok(());
        for (rank, &buffer) in buffers.iter().enumerate() {
            let stream = self.comm_streams[rank].cu_stream() as nccl_sys::cudaStream_t;
            let own = buffer + rank as u64 * count as u64 * elem;
            // SAFETY: the caller's contract: ranks·count elements at
            // `buffer`, own part at element rank·count (NCCL's in-place
            // form).
            let queued = unsafe {
                nccl::all_gather(
                    own as *const std::ffi::c_void,
                    buffer as *mut std::ffi::c_void,
                    count,
                    nccl_type(T::DTYPE),
                    comm.handles[rank],
                    stream,
                )
            };
            if let Err(e) = queued {
                outcome = Err(nccl_err(
                    &format!("cannot queue an all-gather on {}", self.name(rank)),
                    e,
                ));
            }
        }
        let ended = nccl::group_end().map_err(|e| nccl_err("a group of collectives failed", e));
        outcome.and(ended.map(|_| ()))
    }

    /// Aborts and forgets every communicator (after a failure, a
    /// communicator may be stuck in a collective).
    pub(crate) fn abort_all(&self) {
        let mut comms = self.communicators.lock().expect("communicator lock");
        for (_, comm) in comms.drain() {
            comm.abort();
        }
    }

    /// Runs `schedule` with `a` and `b` each rank's pieces (device memory
    /// of T, laid out as the schedule says); returns each rank's piece of C
    /// (`None` for a rank that holds none).
    ///
    /// # Safety
    /// `a[r]` and `b[r]` hold at least the schedule's sizes of A and B on
    /// GPU r, and nothing writes them until this returns.
    pub unsafe fn run<T: Element>(
        &self,
        schedule: &Schedule,
        a: &[u64],
        b: &[u64],
        opts: &GemmOptions,
    ) -> Result<(Vec<Option<RawDeviceMemory>>, Report), Error> {
        let procs = self.gpus.len();
        if schedule.plan.processors != procs || a.len() != procs || b.len() != procs {
            return Err(Error::InvalidOption(format!(
                "a schedule for {} processors on {procs} GPUs",
                schedule.plan.processors
            )));
        }
        let _running = self.exclusive();
        self.connect(schedule)?;
        let elem = std::mem::size_of::<T>();
        // Every store but the given A and B, allocated before anything runs.
        let mut owned: Vec<HashMap<Store, RawDeviceMemory>> = Vec::with_capacity(procs);
        for (rank, gpu) in self.gpus.iter().enumerate() {
            let mut stores = HashMap::new();
            for store in [Store::C, Store::GatherA, Store::GatherB, Store::Partial] {
                let len = schedule.size(rank, store);
                if len > 0 {
                    let memory =
                        RawDeviceMemory::alloc(gpu, len * elem).map_err(|e| Error::Processor {
                            processor: self.name(rank),
                            reason: e.to_string(),
                        })?;
                    stores.insert(store, memory);
                }
            }
            owned.push(stores);
        }
        let base = |rank: usize, store: Store| -> u64 {
            match store {
                Store::A => a[rank],
                Store::B => b[rank],
                _ => owned[rank].get(&store).map_or(0, |m| m.ptr),
            }
        };
        let at = |rank: usize, r: &Region| base(rank, r.store) + (r.offset * elem) as u64;

        let start = Instant::now();
        let issued = self.issue::<T>(schedule, &at, opts);
        let waited = issued.and_then(|backends| {
            let limit = distributed_patience(schedule.plan.shape, procs);
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

    /// Queues every operation of `schedule`; returns what must live until
    /// the GPUs are done (the fast algorithms' temporaries).
    fn issue<'s, T: Element>(
        &'s self,
        schedule: &Schedule,
        at: &dyn Fn(usize, &Region) -> u64,
        opts: &GemmOptions,
    ) -> Result<Vec<crate::cuda::strassen::CudaBackend<'s, T>>, Error> {
        let mut backends = Vec::new();
        for step in &schedule.steps {
            if !step.comm.is_empty() {
                self.collectives::<T>(&step.comm, at)?;
                for op in &step.compute {
                    if let Op::Gemm { rank, .. } = op {
                        self.order(*rank, &self.comm_streams[*rank], &self.gpus[*rank].stream)?;
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
                if c.rows == 0 || c.cols == 0 || a.cols == 0 {
                    continue;
                }
                let operand = |r: &Region| Operand {
                    ptr: at(*rank, r),
                    ld: r.ld,
                };
                let beta = if *accumulate { T::ONE } else { T::ZERO };
                let gpu: &'s Gpu = &self.gpus[*rank];
                let fast = crate::cuda::product::issue_resident(
                    gpu,
                    T::ONE,
                    (operand(a), operand(b)),
                    beta,
                    operand(c),
                    (a.rows, a.cols, b.cols),
                    opts,
                )
                .map_err(|e| Error::Processor {
                    processor: self.name(*rank),
                    reason: e.to_string(),
                })?;
                backends.extend(fast);
            }
        }
        if !schedule.finish.is_empty() {
            for rank in 0..self.gpus.len() {
                self.order(rank, &self.gpus[rank].stream, &self.comm_streams[rank])?;
            }
            self.collectives::<T>(&schedule.finish, at)?;
        }
        Ok(backends)
    }

    /// Makes `later` wait for what `earlier` has queued so far, on `rank`.
    pub(crate) fn order(
        &self,
        rank: usize,
        earlier: &CudaStream,
        later: &CudaStream,
    ) -> Result<(), Error> {
        let event = earlier
            .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(|e| self.fault(rank, "cannot record an event", e))?;
        later
            .wait(&event)
            .map_err(|e| self.fault(rank, "cannot order two streams", e))
    }

    fn fault(&self, rank: usize, what: &str, e: impl std::fmt::Debug) -> Error {
        Error::Processor {
            processor: self.name(rank),
            reason: format!("{what}: {e:?}"),
        }
    }

    /// Queues `ops` (broadcasts or reductions) as one NCCL group.
    fn collectives<T: Element>(
        &self,
        ops: &[Op],
        at: &dyn Fn(usize, &Region) -> u64,
    ) -> Result<(), Error> {
        let comms = self.communicators.lock().expect("communicator lock");
        let dtype = nccl_type(T::DTYPE);
        nccl::group_start().map_err(|e| nccl_err("cannot start a group", e))?;
        let mut outcome = Ok(());
        for op in ops {
            let (group, root) = match op {
                Op::Broadcast { group, root, .. } | Op::Reduce { group, root, .. } => {
                    (group, *root)
                }
                Op::Gemm { .. } => continue,
            };
            if group.len() < 2 {
                continue;
            }
            let comm = &comms[group];
            let root_index = group
                .iter()
                .position(|&r| r == root)
                .expect("root in group") as i32;
            for (member, &rank) in group.iter().enumerate() {
                let stream = self.comm_streams[rank].cu_stream() as nccl_sys::cudaStream_t;
                // SAFETY: the regions lie inside stores of this rank's GPU
                // (the schedule's sizes, allocated by `run` or given under
                // its contract), of `count` elements of T each.
                let queued = unsafe {
                    match op {
                        Op::Broadcast { src, dst, .. } => {
                            let region = if rank == root { src } else { dst };
                            let ptr = at(rank, region) as *mut std::ffi::c_void;
                            nccl::broadcast(
                                ptr,
                                ptr,
                                dst.elements(),
                                dtype,
                                root_index,
                                comm.handles[member],
                                stream,
                            )
                        }
                        Op::Reduce { src, dst, .. } => {
                            let recv = if rank == root {
                                at(rank, dst) as *mut std::ffi::c_void
                            } else {
                                std::ptr::null_mut()
                            };
                            nccl::reduce(
                                at(rank, src) as *const std::ffi::c_void,
                                recv,
                                src.elements(),
                                dtype,
                                nccl_sys::ncclRedOp_t::ncclSum,
                                root_index,
                                comm.handles[member],
                                stream,
                            )
                        }
                        Op::Gemm { .. } => unreachable!("skipped above"),
                    }
                };
                if let Err(e) = queued {
                    outcome = Err(nccl_err(
                        &format!("cannot queue a collective on {}", self.name(rank)),
                        e,
                    ));
                }
            }
        }
        let ended = nccl::group_end().map_err(|e| nccl_err("a group of collectives failed", e));
        outcome.and(ended.map(|_| ()))
    }

    /// Waits for every GPU's two streams until `limit` after `start`,
    /// watching the communicators for asynchronous errors.
    pub(crate) fn wait_all(&self, limit: std::time::Duration, start: Instant) -> Result<(), Error> {
        let mut pending: Vec<(usize, CudaEvent)> = Vec::new();
        for rank in 0..self.gpus.len() {
            for stream in [&self.gpus[rank].stream, &self.comm_streams[rank]] {
                let event = stream
                    .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(|e| self.fault(rank, "cannot record an event", e))?;
                pending.push((rank, event));
            }
        }
        loop {
            let mut still = Vec::new();
            for (rank, event) in pending {
                match event.try_is_complete() {
                    Ok(true) => {}
                    Ok(false) => still.push((rank, event)),
                    Err(e) => return Err(self.fault(rank, "a product or a transfer failed", e)),
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            self.check_async_errors()?;
            if start.elapsed() > limit {
                let mut late: Vec<String> = pending.iter().map(|(r, _)| self.name(*r)).collect();
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
        for (group, comm) in comms.iter() {
            for (member, &handle) in comm.handles.iter().enumerate() {
                let mut state = nccl_sys::ncclResult_t::ncclSuccess;
                // SAFETY: a live communicator and an out-pointer to a local.
                let asked = unsafe { nccl_sys::ncclCommGetAsyncError(handle, &mut state) };
                for result in [asked, state] {
                    if !matches!(
                        result,
                        nccl_sys::ncclResult_t::ncclSuccess
                            | nccl_sys::ncclResult_t::ncclInProgress
                    ) {
                        return Err(self.fault(group[member], "NCCL reported", result));
                    }
                }
            }
        }
        Ok(())
    }
}
