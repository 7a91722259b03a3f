//! Device discovery and the opened GPU: which CUDA libraries load, which
//! GPUs are there, and a [`Gpu`] value that holds one device's context,
//! stream, compiled kernels and cuBLAS handle. cudarc panics when a library
//! is missing, so presence is checked before any call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::cublas::CudaBlas;
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUdeviceptr, CUfunction_attribute_enum};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr};

use crate::cuda::runtime::compile::{self, KernelKey};
use crate::cuda::runtime::cuda_err;
use crate::cuda::tunables::{
    CUDA_CUBLAS_WORKSPACE_BYTES, CUDA_POOL_RELEASE_THRESHOLD, CUDA_WORKSPACE_GRANULE,
    CUDA_WORKSPACE_KEEP_FRACTION,
};
use crate::error::Error;
use crate::system::GpuInfo;

/// An opened GPU: its context and stream, its compiled kernels (compiled at
/// first use and kept for the process) and a cuBLAS handle made on demand.
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    info: GpuInfo,
    /// Shared with the GPU's lanes ([`Gpu::lane`]): a kernel is compiled
    /// and loaded once per context.
    modules: Arc<Mutex<HashMap<KernelKey, Arc<CudaModule>>>>,
    functions: Arc<Mutex<HashMap<(KernelKey, &'static str), CudaFunction>>>,
    /// The cuBLAS handle, on this stream, and the workspace it was given.
    blas: Mutex<Option<(CudaBlas, CudaSlice<u8>)>>,
    /// Scratch memory of this stream kept from call to call
    /// ([`Gpu::workspace`]).
    scratch: Mutex<Option<CudaSlice<u8>>>,
}

/// The CUDA libraries the backend loads, and whether each one loads here.
pub fn libraries() -> [(&'static str, bool); 3] {
    // Looked for once per process: each look tries to dlopen every
    // candidate name of each library, a search of the loader's path per
    // missing name (milliseconds, which a front end that asks on every
    // call, as the cuBLAS interposer does, would pay each time).
    static FOUND: std::sync::OnceLock<[(&'static str, bool); 3]> = std::sync::OnceLock::new();
    // SAFETY: each look only tries to dlopen the library by its names.
    *FOUND.get_or_init(|| unsafe {
        [
            ("libcuda (driver)", cudarc::driver::sys::is_culib_present()),
            ("libnvrtc", cudarc::nvrtc::sys::is_culib_present()),
            ("libcublas", cudarc::cublas::sys::is_culib_present()),
        ]
    })
}

/// How many GPUs the driver reports, or what is missing for any.
pub(crate) fn device_count() -> Result<usize, Error> {
    let missing: Vec<&str> = libraries()
        .into_iter()
        .filter(|(_, present)| !present)
        .map(|(name, _)| name)
        .collect();
    if !missing.is_empty() {
        return Err(Error::CudaUnavailable(format!(
            "{} not found on the loader path (set LD_LIBRARY_PATH, e.g. /usr/local/cuda/lib64)",
            missing.join(", ")
        )));
    }
    CudaContext::device_count()
        .map(|count| count.max(0) as usize)
        .map_err(|e| Error::CudaUnavailable(format!("no usable CUDA driver or GPU ({e:?})")))
}

/// The ordinal of the GPU whose context is current on the calling thread
/// (as a CUDA program's runtime left it: the device its cuBLAS handles
/// and streams belong to); None where CUDA is missing or no context is
/// current.
pub(crate) fn current_ordinal() -> Option<usize> {
    use cudarc::driver::sys;
    if !libraries().iter().all(|&(_, present)| present) {
        return None;
    }
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one handle through a valid pointer.
    unsafe { sys::cuCtxGetCurrent(&mut ctx) }.result().ok()?;
    if ctx.is_null() {
        return None;
    }
    let mut device: sys::CUdevice = 0;
    // SAFETY: writes one int through a valid pointer; a context is current.
    unsafe { sys::cuCtxGetDevice(&mut device) }.result().ok()?;
    usize::try_from(device).ok()
}

/// Whether the caller's `stream` (a raw `CUstream`, 0 the legacy default
/// stream) is capturing work into a CUDA graph.
///
/// # Safety
/// `stream` is a live stream of the current context, or 0.
pub(crate) unsafe fn is_capturing(stream: usize) -> Result<bool, Error> {
    use cudarc::driver::sys;
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the caller's stream (contract); one status written.
    unsafe { sys::cuStreamIsCapturing(stream as sys::CUstream, &mut status) }
        .result()
        .map_err(|e| cuda_err("cannot ask whether a stream is capturing", e))?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// Copies `out.len()` words from device address `src`, after the work
/// queued on the caller's `stream`, and waits for them.
///
/// # Safety
/// `stream` is a live stream of the current context, or 0; `src` holds
/// `out.len()` words of device memory that work on it may read.
pub(crate) unsafe fn read_words(src: u64, out: &mut [u64], stream: usize) -> Result<(), Error> {
    use cudarc::driver::sys;
    let bytes = std::mem::size_of_val(out);
    let stream = stream as sys::CUstream;
    // SAFETY: `out` holds `bytes` writable bytes, the source as many
    // (contract); pageable memory, so the copy completes before the
    // stream's synchronisation returns.
    unsafe { sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), src, bytes, stream) }
        .result()
        .map_err(|e| cuda_err("cannot read device words", e))?;
    // SAFETY: the caller's stream (contract).
    unsafe { sys::cuStreamSynchronize(stream) }
        .result()
        .map_err(|e| cuda_err("cannot wait for the caller's stream", e))
}

impl Gpu {
    /// Opens GPU `ordinal`, or explains what is missing.
    pub fn open(ordinal: usize) -> Result<Gpu, Error> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::CudaUnavailable(format!(
                "GPU {ordinal} requested but the driver reports {count} device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| cuda_err("cannot open the GPU", e))?;
        let attribute = |a: Attr| -> Result<usize, Error> {
            ctx.attribute(a)
                .map(|v| v.max(0) as usize)
                .map_err(|e| cuda_err("cannot read a device attribute", e))
        };
        let mut driver_version = 0;
        // SAFETY: writes one int through a valid pointer.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(|e| cuda_err("cannot read the driver version", e))?;
        let info = GpuInfo {
            ordinal,
            name: ctx
                .name()
                .map_err(|e| cuda_err("cannot read the device name", e))?,
            compute_capability: ctx
                .compute_capability()
                .map_err(|e| cuda_err("cannot read the compute capability", e))?,
            multiprocessors: attribute(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            total_memory: ctx
                .total_mem()
                .map_err(|e| cuda_err("cannot read the memory size", e))?,
            max_threads_per_block: attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_shared_per_block: attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            max_shared_per_block_optin: attribute(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            max_grid_y: attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            managed_memory: attribute(Attr::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? != 0,
            driver_version,
        };
        if ctx.has_async_alloc() {
            keep_pool_memory(&ctx)?;
        }
        let stream = ctx.default_stream();
        Ok(Gpu {
            ctx,
            stream,
            info,
            modules: Arc::new(Mutex::new(HashMap::new())),
            functions: Arc::new(Mutex::new(HashMap::new())),
            blas: Mutex::new(None),
            scratch: Mutex::new(None),
        })
    }

    /// The same GPU on a stream of its own that starts after the work
    /// queued so far on this one: its kernels and context shared, its
    /// cuBLAS handle its own (made on first use, on that stream). Products
    /// queued on several lanes from several threads run concurrently.
    pub(crate) fn lane(&self) -> Result<Gpu, Error> {
        let stream = self
            .stream
            .fork()
            .map_err(|e| cuda_err("cannot create a stream", e))?;
        Ok(Gpu {
            ctx: Arc::clone(&self.ctx),
            stream,
            info: self.info.clone(),
            modules: Arc::clone(&self.modules),
            functions: Arc::clone(&self.functions),
            blas: Mutex::new(None),
            scratch: Mutex::new(None),
        })
    }

    /// The scratch memory of this GPU's stream, held by one caller at a
    /// time until the returned value drops; the work queued meanwhile may
    /// use it, and later work on the stream may reuse it after that work
    /// in stream order. Kept from call to call: the stream-ordered pool
    /// maps its memory afresh (about a millisecond per gigabyte, H200) for
    /// most requests that differ from the block it last freed, which left
    /// the GPU idle between an emulated batch's steps.
    pub(crate) fn workspace(&self) -> Workspace<'_> {
        Workspace {
            gpu: self,
            held: self.scratch.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// What the GPU is.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Its device name, as errors give it: "cuda:N".
    pub fn label(&self) -> String {
        format!("cuda:{}", self.info.ordinal)
    }

    /// The device memory a product may take now, and the total, in bytes:
    /// the driver's free memory and what the stream-ordered pool holds
    /// unused. The pool keeps freed memory (see `keep_pool_memory`), which
    /// the driver counts as taken; an allocation that finds the driver
    /// short gets it back ([`Gpu::retrying`]).
    pub fn memory_info(&self) -> Result<(usize, usize), Error> {
        let (free, total) = self
            .ctx
            .mem_get_info()
            .map_err(|e| cuda_err("cannot read free memory", e))?;
        let pool = device_pool(&self.ctx)?;
        let reserved = pool_attribute(pool, PoolBytes::Reserved)?;
        let used = pool_attribute(pool, PoolBytes::Used)?;
        let idle = usize::try_from(reserved.saturating_sub(used)).unwrap_or(usize::MAX);
        Ok((free.saturating_add(idle).min(total), total))
    }

    /// `alloc`, tried again once after the pool's unused memory goes back
    /// to the driver where the first try ran out of memory: memory freed
    /// in blocks smaller than the request is not reusable for it.
    pub(crate) fn retrying<R>(
        &self,
        mut alloc: impl FnMut() -> Result<R, cudarc::driver::DriverError>,
    ) -> Result<R, cudarc::driver::DriverError> {
        use cudarc::driver::sys::CUresult;
        match alloc() {
            Err(e) if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                self.stream.synchronize()?;
                let pool = device_pool(&self.ctx).map_err(|_| e)?;
                // SAFETY: the device's own pool; trimming frees only
                // memory no allocation holds, after the stream's frees.
                unsafe { cudarc::driver::sys::cuMemPoolTrimTo(pool, 0) }.result()?;
                alloc()
            }
            other => other,
        }
    }

    /// The NVRTC architecture of this GPU.
    pub fn arch(&self) -> &'static str {
        let (major, minor) = self.info.compute_capability;
        compile::arch_name(major, minor)
    }

    /// The kernel for `key`, compiled on first use.
    pub(crate) fn function(&self, key: KernelKey) -> Result<CudaFunction, Error> {
        self.entry_function(key, key.source.entry())
    }

    /// Entry point `entry` of the module compiled for `key` (a source may
    /// hold more than one kernel), compiled and loaded on first use.
    pub(crate) fn entry_function(
        &self,
        key: KernelKey,
        entry: &'static str,
    ) -> Result<CudaFunction, Error> {
        let mut cache = self.functions.lock().expect("kernel cache lock");
        if let Some(f) = cache.get(&(key, entry)) {
            return Ok(f.clone());
        }
        let module = {
            let mut modules = self.modules.lock().expect("module cache lock");
            match modules.get(&key) {
                Some(module) => module.clone(),
                None => {
                    let ptx = compile::cached_ptx(
                        crate::config::Config::get()
                            .kernel_cache()
                            .map(|p| p.as_path()),
                        key,
                        self.arch(),
                        self.info.driver_version,
                    )?;
                    let module = self
                        .ctx
                        .load_module(ptx)
                        .map_err(|e| cuda_err("cannot load a compiled module", e))?;
                    modules.insert(key, module.clone());
                    module
                }
            }
        };
        let f = module
            .load_function(entry)
            .map_err(|e| cuda_err("cannot find the kernel in its module", e))?;
        cache.insert((key, entry), f.clone());
        Ok(f)
    }

    /// The kernel for `key` (see [`Gpu::function`]), allowed `bytes` of
    /// dynamic shared memory per block; a GPU that cannot give a block that
    /// much is refused as unsupported by `algorithm`.
    pub(crate) fn function_with_shared(
        &self,
        key: KernelKey,
        bytes: usize,
        algorithm: &'static str,
    ) -> Result<CudaFunction, Error> {
        let limit = self.info.max_shared_per_block_optin;
        if bytes > limit {
            return Err(Error::Unsupported {
                algorithm,
                what: format!(
                    "{} ({} for {} needs {bytes} bytes of shared memory per block; the GPU allows {limit})",
                    self.info.name,
                    key.source.entry(),
                    key.dtype
                ),
            });
        }
        let function = self.function(key)?;
        function
            .set_attribute(
                CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .map_err(|e| cuda_err("cannot raise a kernel's shared memory", e))?;
        Ok(function)
    }

    /// Runs `f` with this GPU's cuBLAS handle, created on first use.
    pub(crate) fn with_blas<R>(
        &self,
        f: impl FnOnce(&CudaBlas) -> Result<R, Error>,
    ) -> Result<R, Error> {
        // cuBLAS runs on the thread's current context, which is another
        // GPU's when one thread drives several (a team's products).
        self.bind()?;
        let mut blas = self.blas.lock().expect("cuBLAS handle lock");
        if blas.is_none() {
            *blas = Some(self.new_blas()?);
        }
        f(&blas.as_ref().expect("created above").0)
    }

    /// A cuBLAS handle on this GPU's stream with a workspace of
    /// [`CUDA_CUBLAS_WORKSPACE_BYTES`] of its own (as PyTorch gives its
    /// handles): without one, cuBLAS leaves out the kernels that need it.
    fn new_blas(&self) -> Result<(CudaBlas, CudaSlice<u8>), Error> {
        let blas = CudaBlas::new(self.stream.clone())
            .map_err(|e| cuda_err("cannot create a cuBLAS handle", e))?;
        // SAFETY: cuBLAS writes the workspace before it reads it.
        let workspace = unsafe { self.stream.alloc::<u8>(CUDA_CUBLAS_WORKSPACE_BYTES) }
            .map_err(|e| cuda_err("cannot allocate cuBLAS's workspace", e))?;
        let (ptr, guard) = workspace.device_ptr(&self.stream);
        // SAFETY: a live handle, and device memory of this GPU of the size
        // given, kept beside the handle for as long as it lives.
        unsafe {
            cudarc::cublas::sys::cublasSetWorkspace_v2(
                *blas.handle(),
                ptr as *mut std::ffi::c_void,
                CUDA_CUBLAS_WORKSPACE_BYTES,
            )
        }
        .result()
        .map_err(|e| cuda_err("cannot give cuBLAS its workspace", e))?;
        drop(guard);
        // The handle is dropped before its workspace (tuple order).
        Ok((blas, workspace))
    }

    /// Makes this GPU's context current on the calling thread, as raw
    /// driver calls need (cudarc's own calls do it themselves).
    pub(crate) fn bind(&self) -> Result<(), Error> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_err("cannot bind the context", e))
    }

    /// Makes the CUDA stream `other` (a raw `CUstream` of this GPU's
    /// context; 0 is the legacy default stream) wait for the work queued
    /// on this GPU's stream so far, through an event; the host does not
    /// wait.
    pub(crate) fn order_before(&self, other: usize) -> Result<(), Error> {
        let event = self
            .stream
            .record_event(None)
            .map_err(|e| cuda_err("cannot record an event", e))?;
        // SAFETY: `event` is alive here (destroying it once the wait is
        // queued is allowed: CUDA releases it when it completes); `other`
        // is a stream of this context, the caller's contract.
        unsafe { self.wait_on(other, event.cu_event()) }
            .map_err(|e| cuda_err("cannot order a stream after fastmm's", e))
    }

    /// Makes this GPU's stream wait for the work queued so far on the CUDA
    /// stream `other` (as [`Gpu::order_before`], the other way round).
    pub(crate) fn order_after(&self, other: usize) -> Result<(), Error> {
        use cudarc::driver::sys;
        self.bind()?;
        let event = self
            .ctx
            .new_event(None)
            .map_err(|e| cuda_err("cannot create an event", e))?;
        // SAFETY: a live event of this context, recorded on `other`, a
        // stream of this context (the caller's contract).
        unsafe { cudarc::driver::result::event::record(event.cu_event(), other as sys::CUstream) }
            .map_err(|e| cuda_err("cannot record an event on the caller's stream", e))?;
        self.stream
            .wait(&event)
            .map_err(|e| cuda_err("cannot order fastmm's stream after the caller's", e))
    }

    /// Queues on the raw stream `stream` a wait for the raw `event`.
    ///
    /// # Safety
    /// `event` is a live event and `stream` a live stream of this GPU's
    /// context.
    unsafe fn wait_on(
        &self,
        stream: usize,
        event: cudarc::driver::sys::CUevent,
    ) -> Result<(), cudarc::driver::DriverError> {
        use cudarc::driver::sys;
        self.ctx.bind_to_thread()?;
        // SAFETY: the caller's contract.
        unsafe {
            cudarc::driver::result::stream::wait_event(
                stream as sys::CUstream,
                event,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
    }

    /// Waits for the stream and reports any error a kernel raised.
    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(|e| cuda_err("a kernel or copy failed", e))?;
        self.ctx
            .check_err()
            .map_err(|e| cuda_err("the CUDA context reported an error", e))
    }
}

/// A GPU's scratch memory, held ([`Gpu::workspace`]).
pub(crate) struct Workspace<'g> {
    gpu: &'g Gpu,
    held: MutexGuard<'g, Option<CudaSlice<u8>>>,
}

impl Workspace<'_> {
    /// The bytes held now.
    pub(crate) fn capacity(&self) -> usize {
        self.held.as_ref().map_or(0, CudaSlice::len)
    }

    /// The device address of at least `bytes` bytes, valid for the work
    /// queued on the stream while this is held. The first `keep` bytes
    /// are those the last reservation left there (copied on the stream
    /// where the memory grows); the rest are undefined.
    pub(crate) fn reserve(&mut self, bytes: usize, keep: usize) -> Result<CUdeviceptr, Error> {
        if self.capacity() < bytes {
            let size = bytes.next_multiple_of(CUDA_WORKSPACE_GRANULE);
            // The kept prefix waits in a buffer of its own while the old
            // memory goes back (in stream order, after the work that used
            // it) so that the pool may hand it out again: old and new
            // scratch are never held together, which the budgets that
            // count the held bytes as available assume.
            let keep = keep.min(self.capacity());
            let staged = match (keep, self.held.take()) {
                (0, _) | (_, None) => None,
                (keep, Some(old)) => {
                    // SAFETY: written in full by the copy below before any
                    // read.
                    let mut stage =
                        unsafe { self.gpu.retrying(|| self.gpu.stream.alloc::<u8>(keep)) }
                            .map_err(|e| cuda_err("cannot stage the kept GPU scratch", e))?;
                    self.gpu
                        .stream
                        .memcpy_dtod(&old.slice(..keep), &mut stage)
                        .map_err(|e| cuda_err("cannot copy GPU scratch", e))?;
                    Some(stage)
                }
            };
            // SAFETY: scratch that its users write before they read, but
            // for the kept prefix, copied below in stream order.
            let mut grown = unsafe { self.gpu.retrying(|| self.gpu.stream.alloc::<u8>(size)) }
                .map_err(|e| {
                    cuda_err(&format!("cannot allocate {size} bytes of GPU scratch"), e)
                })?;
            if let Some(stage) = staged {
                self.gpu
                    .stream
                    .memcpy_dtod(&stage, &mut grown.slice_mut(..keep))
                    .map_err(|e| cuda_err("cannot copy GPU scratch", e))?;
            }
            *self.held = Some(grown);
        }
        let held = self
            .held
            .as_ref()
            .ok_or_else(|| Error::Cuda("GPU scratch missing after its reservation".into()))?;
        Ok(held.device_ptr(&self.gpu.stream).0)
    }
}

impl Drop for Workspace<'_> {
    /// Scratch beyond a share of the GPU's memory goes back to the pool (in
    /// stream order), where the other products may use it.
    fn drop(&mut self) {
        let limit = (self.gpu.info.total_memory as f64 * CUDA_WORKSPACE_KEEP_FRACTION) as usize;
        if self.capacity() > limit {
            *self.held = None;
        }
    }
}

/// Keeps the memory that products free in the device's stream-ordered
/// pool (where cudarc's slices come from) instead of returning it to the
/// driver at every synchronisation, the pool's default: a fast product's
/// gigabytes of temporaries would otherwise be unmapped after each product
/// and mapped again by the next, milliseconds each time. The pool still
/// reuses what it holds; the memory goes back when the process ends.
fn keep_pool_memory(ctx: &CudaContext) -> Result<(), Error> {
    use cudarc::driver::sys;
    let pool = device_pool(ctx)?;
    let mut threshold = CUDA_POOL_RELEASE_THRESHOLD;
    // SAFETY: the attribute takes a cuuint64_t, which `threshold` is.
    unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    }
    .result()
    .map_err(|e| cuda_err("cannot set the memory pool's release threshold", e))
}

/// The device's default stream-ordered memory pool, where cudarc's slices
/// come from.
fn device_pool(ctx: &CudaContext) -> Result<cudarc::driver::sys::CUmemoryPool, Error> {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: an out-pointer to a local, and a device of this driver.
    unsafe { sys::cuDeviceGetMemPool(&mut pool, ctx.cu_device()) }
        .result()
        .map_err(|e| cuda_err("cannot read the device's memory pool", e))?;
    Ok(pool)
}

/// Which of a pool's byte counts [`pool_attribute`] reads.
#[derive(Clone, Copy)]
enum PoolBytes {
    /// Mapped by the pool, in use or not.
    Reserved,
    /// Held by live allocations.
    Used,
}

/// One of `pool`'s byte counts, now.
fn pool_attribute(pool: cudarc::driver::sys::CUmemoryPool, which: PoolBytes) -> Result<u64, Error> {
    use cudarc::driver::sys::CUmemPool_attribute as A;
    let attribute = match which {
        PoolBytes::Reserved => A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
        PoolBytes::Used => A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
    };
    let mut value: u64 = 0;
    // SAFETY: both attributes are a cuuint64_t, which `value` is.
    unsafe {
        cudarc::driver::sys::cuMemPoolGetAttribute(pool, attribute, (&mut value as *mut u64).cast())
    }
    .result()
    .map_err(|e| cuda_err("cannot read the memory pool's size", e))?;
    Ok(value)
}
