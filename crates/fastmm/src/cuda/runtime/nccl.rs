//! NCCL: the communicators of a group of GPUs and the collectives the
//! distributed products queue on them. This is the only module that calls
//! NCCL; the products name members by their processor (rank) and buffers
//! by device address.
//!
//! NCCL is loaded at run time, only when a group has more than one GPU.

use std::ffi::c_void;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;
use cudarc::nccl::{result as nccl, sys as nccl_sys};

use crate::element::DType;
use crate::error::Error;

/// Whether NCCL's library loads, or what to do about it.
pub(crate) fn available() -> Result<(), Error> {
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

/// A failed NCCL call, as the library's typed error.
fn nccl_err(what: &str, e: nccl::NcclError) -> Error {
    Error::Cuda(format!("NCCL: {what}: {:?}", e.0))
}

fn nccl_type(dtype: DType) -> nccl_sys::ncclDataType_t {
    match dtype {
        DType::F32 => nccl_sys::ncclDataType_t::ncclFloat32,
        DType::F64 => nccl_sys::ncclDataType_t::ncclFloat64,
        DType::I32 => nccl_sys::ncclDataType_t::ncclInt32,
        DType::I64 => nccl_sys::ncclDataType_t::ncclInt64,
    }
}

/// An NCCL id: what a group's first member makes and the others join with.
#[cfg(feature = "mpi")]
pub(crate) type GroupId = [u8; 128];

/// A fresh NCCL id, for the first member of a group that spans processes
/// to carry to the others.
#[cfg(feature = "mpi")]
pub(crate) fn new_group_id() -> Result<GroupId, Error> {
    available()?;
    let id = nccl::get_uniqueid().map_err(|e| nccl_err("cannot make a group's id", e))?;
    Ok(id.internal.map(|c| c as u8))
}

/// One NCCL communicator per member of a group that this process holds,
/// with the member's processor. Dropping it destroys them.
pub(crate) struct Communicator {
    handles: Vec<(usize, nccl_sys::ncclComm_t)>,
}

// SAFETY: NCCL communicators may be used from any thread, one call at a
// time; the fabric serialises every use behind its mutex or its `&mut`.
unsafe impl Send for Communicator {}

impl Communicator {
    /// The communicators of a group whose members are all GPUs of this
    /// process: processor `ranks[i]` on the device of ordinal
    /// `ordinals[i]` (distinct GPUs of this host).
    pub(crate) fn connect_all(ranks: &[usize], ordinals: &[i32]) -> Result<Communicator, Error> {
        available()?;
        let mut handles = vec![std::ptr::null_mut(); ordinals.len()];
        // SAFETY: one out-slot per device of `ordinals`, which are
        // distinct GPUs of this host.
        unsafe {
            nccl::comm_init_all(
                handles.as_mut_ptr(),
                ordinals.len() as i32,
                ordinals.as_ptr(),
            )
        }
        .map_err(|e| nccl_err(&format!("cannot connect GPUs {ordinals:?}"), e))?;
        Ok(Communicator {
            handles: ranks.iter().copied().zip(handles).collect(),
        })
    }

    /// This process's member (processor `rank`, member `index` of
    /// `members`) of a group spanning processes, joined with the `id`
    /// its first member made. Blocks until every member has joined, on
    /// the calling thread, whose current context is the member's GPU.
    #[cfg(feature = "mpi")]
    pub(crate) fn join(
        rank: usize,
        (index, members): (usize, usize),
        id: GroupId,
    ) -> Result<Communicator, Error> {
        available()?;
        let mut handle = std::ptr::null_mut();
        let id = nccl_sys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        // SAFETY: an out-pointer to a local; the id came from
        // ncclGetUniqueId on the group's first member, and every member
        // passes its own index once.
        unsafe { nccl::comm_init_rank(&mut handle, members as i32, id, index as i32) }
            .map_err(|e| nccl_err("cannot join a group across processes", e))?;
        Ok(Communicator {
            handles: vec![(rank, handle)],
        })
    }

    /// Processor `rank`'s communicator (a member held here).
    fn of(&self, rank: usize) -> Result<nccl_sys::ncclComm_t, Error> {
        self.handles
            .iter()
            .find(|&&(r, _)| r == rank)
            .map(|&(_, h)| h)
            .ok_or_else(|| {
                Error::InvalidOption(format!("processor {rank} is not a member held here"))
            })
    }

    /// Queues on `stream` member `rank`'s part of an in-place all-gather
    /// of `count` elements of `dtype` per member: its own part at `own`,
    /// inside `buffer`, which receives every part.
    ///
    /// # Safety
    /// `buffer` holds members·count elements of `dtype` on the member's
    /// GPU and `own` is its part; nothing else uses them until `stream`
    /// has passed the gather.
    pub(crate) unsafe fn all_gather(
        &self,
        rank: usize,
        (own, buffer): (CUdeviceptr, CUdeviceptr),
        (count, dtype): (usize, DType),
        stream: &CudaStream,
    ) -> Result<(), Error> {
        let comm = self.of(rank)?;
        // SAFETY: the caller's contract.
        unsafe {
            nccl::all_gather(
                own as *const c_void,
                buffer as *mut c_void,
                count,
                nccl_type(dtype),
                comm,
                stream.cu_stream() as nccl_sys::cudaStream_t,
            )
        }
        .map(|_| ())
        .map_err(|e| nccl_err("cannot queue an all-gather", e))
    }

    /// Queues on `stream` member `rank`'s part of a broadcast of `count`
    /// elements of `dtype` in place at `buffer` from member `root_index`.
    ///
    /// # Safety
    /// `buffer` holds `count` elements of `dtype` on the member's GPU,
    /// used by nothing else until `stream` has passed the broadcast.
    pub(crate) unsafe fn broadcast(
        &self,
        rank: usize,
        buffer: CUdeviceptr,
        (count, dtype): (usize, DType),
        root_index: usize,
        stream: &CudaStream,
    ) -> Result<(), Error> {
        let comm = self.of(rank)?;
        let ptr = buffer as *mut c_void;
        // SAFETY: the caller's contract.
        unsafe {
            nccl::broadcast(
                ptr,
                ptr,
                count,
                nccl_type(dtype),
                root_index as i32,
                comm,
                stream.cu_stream() as nccl_sys::cudaStream_t,
            )
        }
        .map(|_| ())
        .map_err(|e| nccl_err("cannot queue a broadcast", e))
    }

    /// Queues on `stream` member `rank`'s part of a sum of `count`
    /// elements of `dtype` from every member's `send` into the root's
    /// `recv` (`None` on the other members).
    ///
    /// # Safety
    /// `send` (and `recv` on the root) hold `count` elements of `dtype` on
    /// the member's GPU, used by nothing else until `stream` has passed
    /// the reduction.
    pub(crate) unsafe fn reduce_sum(
        &self,
        rank: usize,
        (send, recv): (CUdeviceptr, Option<CUdeviceptr>),
        (count, dtype): (usize, DType),
        root_index: usize,
        stream: &CudaStream,
    ) -> Result<(), Error> {
        let comm = self.of(rank)?;
        let recv = recv.map_or(std::ptr::null_mut(), |p| p as *mut c_void);
        // SAFETY: the caller's contract.
        unsafe {
            nccl::reduce(
                send as *const c_void,
                recv,
                count,
                nccl_type(dtype),
                nccl_sys::ncclRedOp_t::ncclSum,
                root_index as i32,
                comm,
                stream.cu_stream() as nccl_sys::cudaStream_t,
            )
        }
        .map(|_| ())
        .map_err(|e| nccl_err("cannot queue a reduction", e))
    }

    /// The first member whose communicator reports an asynchronous
    /// error, with the error.
    pub(crate) fn async_error(&self) -> Option<(usize, String)> {
        for &(rank, handle) in &self.handles {
            let mut state = nccl_sys::ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator and an out-pointer to a local.
            let asked = unsafe { nccl_sys::ncclCommGetAsyncError(handle, &mut state) };
            for result in [asked, state] {
                if !matches!(
                    result,
                    nccl_sys::ncclResult_t::ncclSuccess | nccl_sys::ncclResult_t::ncclInProgress
                ) {
                    return Some((rank, format!("{result:?}")));
                }
            }
        }
        None
    }

    /// Aborts every member (releases GPUs stuck in a collective).
    pub(crate) fn abort(mut self) {
        for (_, comm) in self.handles.drain(..) {
            // SAFETY: a communicator made by comm_init_all or
            // comm_init_rank, released once.
            let _ = unsafe { nccl::comm_abort(comm) };
        }
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        for (_, comm) in self.handles.drain(..) {
            // SAFETY: a communicator made by comm_init_all or
            // comm_init_rank, released once; a failure cannot be reported
            // from drop.
            let _ = unsafe { nccl::comm_destroy(comm) };
        }
    }
}

/// Runs `queue` (collectives queued on communicators) as one NCCL group:
/// between ncclGroupStart and ncclGroupEnd, ending the group whatever
/// `queue` returned. The first error of `queue`, else the group's.
pub(crate) fn group(queue: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
    nccl::group_start().map_err(|e| nccl_err("cannot start a group", e))?;
    let outcome = queue();
    let ended = nccl::group_end().map_err(|e| nccl_err("a group of collectives failed", e));
    outcome.and(ended.map(|_| ()))
}
