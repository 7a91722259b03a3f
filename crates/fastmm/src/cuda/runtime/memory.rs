//! Matrices on the GPU in the three memory kinds of seed 002 §10.3: linear
//! device memory, pitched device memory (each row padded to the alignment
//! the driver picks) and managed (unified) memory. Every kind is row-major
//! with a leading dimension in elements, so the kernels see one layout.

use cudarc::driver::sys::{self, CUdeviceptr, CUmemorytype};
use cudarc::driver::{CudaSlice, DevicePtr, PinnedHostSlice, UnifiedSlice};

use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::GpuMemory;

/// Device memory from `cuMemAlloc` or `cuMemAllocPitch`, freed on drop;
/// for buffers that streams other than the GPU's own use (cudarc's slices
/// order their uses by events, which those streams' own events replace).
pub(crate) struct RawDeviceMemory {
    pub ptr: CUdeviceptr,
}

impl RawDeviceMemory {
    /// `bytes` (at least 1) of linear device memory.
    pub fn alloc(gpu: &Gpu, bytes: usize) -> Result<RawDeviceMemory, Error> {
        gpu.bind()?;
        let mut ptr = 0;
        // SAFETY: an out-pointer to a local.
        unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(1)) }
            .result()
            .map_err(|e| cuda_err(&format!("cannot allocate {bytes} bytes on the GPU"), e))?;
        Ok(RawDeviceMemory { ptr })
    }
}

impl Drop for RawDeviceMemory {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemAlloc(Pitch) and is freed once; the
        // free waits for the work using it. A failure to free cannot be
        // reported from drop; it leaks.
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

/// Copies `data` to device address `dst`, synchronously.
///
/// # Safety
/// `dst` addresses at least size_of_val(data) bytes of `gpu`'s memory that
/// nothing else uses meanwhile.
pub(crate) unsafe fn copy_to_device<T: Element>(
    gpu: &Gpu,
    data: &[T],
    dst: CUdeviceptr,
) -> Result<(), Error> {
    gpu.bind()?;
    // SAFETY: the caller's contract covers the destination; the source is
    // a live slice of that many bytes.
    unsafe { sys::cuMemcpyHtoD_v2(dst, data.as_ptr().cast(), std::mem::size_of_val(data)) }
        .result()
        .map_err(|e| cuda_err("a copy to the GPU failed", e))
}

/// Copies device address `src` into `out`, synchronously.
///
/// # Safety
/// `src` addresses at least size_of_val(out) bytes of `gpu`'s memory
/// holding elements of T, not written meanwhile.
pub(crate) unsafe fn copy_to_host<T: Element>(
    gpu: &Gpu,
    src: CUdeviceptr,
    out: &mut [T],
) -> Result<(), Error> {
    gpu.bind()?;
    // SAFETY: the caller's contract covers the source; the destination is
    // a live, exclusively borrowed slice of that many bytes.
    unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), src, std::mem::size_of_val(out)) }
        .result()
        .map_err(|e| cuda_err("a copy from the GPU failed", e))
}

/// Page-locked host memory from `cuMemHostAlloc` (no write-combining, so
/// the host reads it at full speed), freed on drop: a staging buffer the
/// DMA engines reach directly.
pub(crate) struct PinnedStaging {
    ptr: *mut std::ffi::c_void,
    bytes: usize,
}

// SAFETY: the buffer is plain host memory owned by this value; moving it
// to another thread moves that ownership.
unsafe impl Send for PinnedStaging {}

impl PinnedStaging {
    /// `bytes` (at least 1) of page-locked memory, for copies of `gpu`.
    pub fn alloc(gpu: &Gpu, bytes: usize) -> Result<PinnedStaging, Error> {
        Self::alloc_flags(gpu, bytes, 0)
    }

    /// `bytes` (at least 1) of page-locked memory that every GPU's context
    /// copies from at full speed (`CU_MEMHOSTALLOC_PORTABLE`).
    pub fn alloc_portable(gpu: &Gpu, bytes: usize) -> Result<PinnedStaging, Error> {
        Self::alloc_flags(gpu, bytes, sys::CU_MEMHOSTALLOC_PORTABLE)
    }

    fn alloc_flags(gpu: &Gpu, bytes: usize, flags: u32) -> Result<PinnedStaging, Error> {
        gpu.bind()?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local; the flags are cuMemHostAlloc's
        // (0: plain page-locked memory).
        unsafe { sys::cuMemHostAlloc(&mut ptr, bytes.max(1), flags) }
            .result()
            .map_err(|e| {
                cuda_err(
                    &format!("cannot allocate {bytes} bytes of pinned memory"),
                    e,
                )
            })?;
        Ok(PinnedStaging { ptr, bytes })
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Its address.
    pub fn ptr(&self) -> *mut std::ffi::c_void {
        self.ptr
    }

    /// The first `len` elements as T (`len`·size of T within the buffer).
    ///
    /// # Safety
    /// No copy to or from the buffer may be in flight.
    pub unsafe fn as_mut_slice<T: Element>(&mut self, len: usize) -> &mut [T] {
        assert!(
            len * std::mem::size_of::<T>() <= self.bytes,
            "a staging buffer holds {} bytes",
            self.bytes
        );
        // SAFETY: the allocation holds `bytes` bytes, page-aligned (so
        // aligned for T), borrowed mutably through `self`; every bit
        // pattern is a valid element; the caller guarantees no DMA touches
        // it meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<T>(), len) }
    }
}

impl Drop for PinnedStaging {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once; the
        // owner waits for its copies before dropping it.
        let _ = unsafe { sys::cuMemFreeHost(self.ptr) };
    }
}

enum Storage<T> {
    Linear(CudaSlice<T>),
    // Held for its Drop, which frees the allocation.
    Pitched(#[allow(dead_code)] RawDeviceMemory),
    Managed(UnifiedSlice<T>),
}

/// An m×n row-major matrix on the GPU with leading dimension `ld`.
pub(crate) struct DeviceMatrix<T> {
    pub ptr: CUdeviceptr,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    storage: Storage<T>,
}

/// One end of a 2-D copy: `pitch` bytes between consecutive rows.
#[derive(Clone, Copy)]
enum Side {
    Host {
        ptr: *mut std::ffi::c_void,
        pitch: usize,
    },
    Device {
        ptr: CUdeviceptr,
        pitch: usize,
    },
}

fn host_side<T>(data: &[T], pitch: usize) -> Side {
    // The copy only reads a source; the pointer is mutable for the enum's sake.
    Side::Host {
        ptr: data.as_ptr().cast_mut().cast(),
        pitch,
    }
}

/// `cuMemcpy2D` of `rows` rows of `width` bytes.
///
/// # Safety
/// Both sides address `rows` rows of at least `width` bytes at their
/// pitch, and a host destination is not read or written meanwhile.
unsafe fn copy_2d(gpu: &Gpu, from: Side, to: Side, width: usize, rows: usize) -> Result<(), Error> {
    let parts = |side: Side| match side {
        Side::Host { ptr, pitch } => (CUmemorytype::CU_MEMORYTYPE_HOST, ptr, 0, pitch),
        Side::Device { ptr, pitch } => (
            CUmemorytype::CU_MEMORYTYPE_DEVICE,
            std::ptr::null_mut(),
            ptr,
            pitch,
        ),
    };
    let (src_type, src_host, src_device, src_pitch) = parts(from);
    let (dst_type, dst_host, dst_device, dst_pitch) = parts(to);
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: src_type,
        srcHost: src_host,
        srcDevice: src_device,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host,
        dstDevice: dst_device,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: rows,
    };
    gpu.bind()?;
    // SAFETY: the caller's contract covers both ends of the copy.
    unsafe { sys::cuMemcpy2D_v2(&copy) }
        .result()
        .map_err(|e| cuda_err("a 2-D copy failed", e))
}

/// A matrix staged on the host in row-major order for a copy to or from
/// the GPU: pageable (a `Vec`) or page-locked (`cuMemHostAlloc`), which the
/// DMA engines reach directly.
pub(crate) enum HostBuffer<T> {
    Pageable(Vec<T>),
    Pinned(PinnedHostSlice<T>),
}

impl<T: Element> HostBuffer<T> {
    /// Room for `len` elements (contents unspecified until written).
    pub fn new(gpu: &Gpu, len: usize, pinned: bool) -> Result<HostBuffer<T>, Error> {
        if !pinned {
            return Ok(HostBuffer::Pageable(vec![T::ZERO; len]));
        }
        // Flags 0: plain page-locked memory. cudarc's default adds
        // write-combining, which makes the host's reads of C crawl.
        // SAFETY: every element is written (by `stage` or by a copy from
        // the device) before it is read.
        let slice = unsafe { gpu.ctx.alloc_pinned_with_flags::<T>(len.max(1), 0) }
            .map_err(|e| cuda_err("cannot allocate pinned host memory", e))?;
        Ok(HostBuffer::Pinned(slice))
    }

    /// `view` in row-major order, in a new buffer, copied in parallel
    /// bands (a 32768² f64 operand is 8 GiB: one thread took seconds).
    pub fn stage(gpu: &Gpu, view: MatRef<'_, T>, pinned: bool) -> Result<HostBuffer<T>, Error> {
        let len = view.rows() * view.cols();
        let mut buffer = HostBuffer::new(gpu, len, pinned)?;
        if len > 0 {
            super::host_copy::gather(view, &mut buffer.as_mut_slice()?[..len]);
        }
        Ok(buffer)
    }

    pub fn as_slice(&self) -> Result<&[T], Error> {
        match self {
            HostBuffer::Pageable(v) => Ok(v),
            HostBuffer::Pinned(p) => p
                .as_slice()
                .map_err(|e| cuda_err("cannot read pinned memory", e)),
        }
    }

    pub fn as_mut_slice(&mut self) -> Result<&mut [T], Error> {
        match self {
            HostBuffer::Pageable(v) => Ok(v),
            HostBuffer::Pinned(p) => p
                .as_mut_slice()
                .map_err(|e| cuda_err("cannot write pinned memory", e)),
        }
    }

    /// Writes the first rows·cols elements into `out` (row-major), in
    /// parallel bands.
    pub fn unstage(&self, out: MatMut<'_, T>) -> Result<(), Error> {
        let len = out.rows() * out.cols();
        if len > 0 {
            super::host_copy::scatter(&self.as_slice()?[..len], out, T::ZERO);
        }
        Ok(())
    }
}

impl<T: Element> DeviceMatrix<T> {
    /// A rows×cols row-major matrix (ld = cols) in `memory`, which it
    /// holds and frees.
    pub fn from_raw(memory: RawDeviceMemory, (rows, cols): (usize, usize)) -> DeviceMatrix<T> {
        DeviceMatrix {
            ptr: memory.ptr,
            rows,
            cols,
            ld: cols,
            storage: Storage::Pitched(memory),
        }
    }

    /// Copies a staged rows×cols matrix to the GPU (or, with `None`, only
    /// allocates room for it: an output whose old value is never read).
    pub fn upload(
        gpu: &Gpu,
        memory: GpuMemory,
        (rows, cols): (usize, usize),
        staged: Option<&HostBuffer<T>>,
    ) -> Result<DeviceMatrix<T>, Error> {
        let len = rows * cols;
        let contents = staged.is_some();
        let host: &[T] = match staged {
            Some(buffer) => &buffer.as_slice()?[..len],
            None => &[],
        };
        let (ptr, ld, storage) = match memory {
            GpuMemory::Device => {
                let slice = gpu
                    .retrying(|| match staged {
                        Some(HostBuffer::Pinned(pinned)) => gpu.stream.clone_htod(pinned),
                        Some(HostBuffer::Pageable(v)) => gpu.stream.clone_htod(v),
                        // SAFETY: an output buffer; the kernel writes every
                        // element before anything reads it.
                        None => unsafe { gpu.stream.alloc::<T>(len.max(1)) },
                    })
                    .map_err(|e| cuda_err("cannot copy to the GPU", e))?;
                // One stream runs everything, so the pointer needs no
                // further synchronisation than the stream's own order.
                let ptr = slice.device_ptr(&gpu.stream).0;
                (ptr, cols, Storage::Linear(slice))
            }
            GpuMemory::Pitched => {
                let size = std::mem::size_of::<T>();
                let (mut ptr, mut pitch) = (0, 0);
                // SAFETY: out-pointers to locals; the element size is 4 or 8
                // bytes, as cuMemAllocPitch requires.
                unsafe {
                    sys::cuMemAllocPitch_v2(
                        &mut ptr,
                        &mut pitch,
                        (cols * size).max(1),
                        rows.max(1),
                        size as u32,
                    )
                }
                .result()
                .map_err(|e| cuda_err("cannot allocate pitched memory", e))?;
                let owned = RawDeviceMemory { ptr };
                if pitch % size != 0 {
                    return Err(Error::Cuda(format!(
                        "pitch {pitch} is not a multiple of the element size {size}"
                    )));
                }
                if contents {
                    let to = Side::Device { ptr, pitch };
                    // SAFETY: the host buffer holds rows·cols elements, the
                    // allocation rows rows of `pitch` bytes.
                    unsafe { copy_2d(gpu, host_side(host, cols * size), to, cols * size, rows) }?;
                }
                (ptr, pitch / size, Storage::Pitched(owned))
            }
            GpuMemory::Managed => {
                let bytes = len * std::mem::size_of::<T>();
                let (free, _) = gpu.memory_info()?;
                // Never ask for more managed memory than the card has free:
                // oversubscribing it can hang the GPU.
                if bytes > free {
                    return Err(Error::Cuda(format!(
                        "{bytes} bytes of managed memory asked for but only {free} free on the GPU"
                    )));
                }
                if !gpu.info().managed_memory {
                    return Err(Error::Unsupported {
                        algorithm: "managed memory",
                        what: format!("GPU {}", gpu.info().name),
                    });
                }
                // SAFETY: every element is written below (or by the kernel,
                // for an output) before it is read.
                let mut slice = unsafe { gpu.ctx.alloc_unified::<T>(len.max(1), true) }
                    .map_err(|e| cuda_err("cannot allocate managed memory", e))?;
                if contents {
                    slice
                        .as_mut_slice()
                        .map_err(|e| cuda_err("cannot map managed memory", e))?[..len]
                        .copy_from_slice(host);
                }
                let ptr = slice.device_ptr(&gpu.stream).0;
                (ptr, cols, Storage::Managed(slice))
            }
        };
        Ok(DeviceMatrix {
            ptr,
            rows,
            cols,
            ld,
            storage,
        })
    }

    /// Copies the matrix into `out` (row-major, at least rows·cols long).
    pub fn download(&self, gpu: &Gpu, out: &mut HostBuffer<T>) -> Result<(), Error> {
        let (rows, cols) = (self.rows, self.cols);
        let len = rows * cols;
        match &self.storage {
            Storage::Linear(slice) => {
                let result = match out {
                    HostBuffer::Pageable(v) => gpu.stream.memcpy_dtoh(slice, &mut v[..]),
                    HostBuffer::Pinned(p) => gpu.stream.memcpy_dtoh(slice, p),
                };
                result.map_err(|e| cuda_err("cannot copy from the GPU", e))?;
                gpu.synchronize()?;
            }
            Storage::Pitched(_) => {
                let size = std::mem::size_of::<T>();
                let host = out.as_mut_slice()?;
                assert!(host.len() >= len, "the host buffer holds the matrix");
                gpu.synchronize()?;
                let from = Side::Device {
                    ptr: self.ptr,
                    pitch: self.ld * size,
                };
                let to = Side::Host {
                    ptr: host.as_mut_ptr().cast(),
                    pitch: cols * size,
                };
                // SAFETY: the allocation holds rows rows of `ld` elements,
                // the host buffer at least rows·cols elements.
                unsafe { copy_2d(gpu, from, to, cols * size, rows) }?;
            }
            Storage::Managed(slice) => {
                gpu.synchronize()?;
                let data = slice
                    .as_slice()
                    .map_err(|e| cuda_err("cannot map managed memory", e))?;
                out.as_mut_slice()?[..len].copy_from_slice(&data[..len]);
            }
        }
        Ok(())
    }
}

/// Copies `view` to the GPU in `memory` and back into a new matrix, staged
/// in pageable or page-locked host memory: the host↔device round trip of
/// seed 002 §10.4, for `fastmm selftest`.
#[cfg(feature = "selftest")]
pub fn round_trip<T: Element>(
    gpu: &Gpu,
    memory: GpuMemory,
    view: MatRef<'_, T>,
    pinned: bool,
) -> Result<crate::matrix::Matrix<T>, Error> {
    let shape = view.shape();
    let staged = HostBuffer::stage(gpu, view, pinned)?;
    let on_device = DeviceMatrix::upload(gpu, memory, shape, Some(&staged))?;
    let mut returned = HostBuffer::new(gpu, shape.0 * shape.1, pinned)?;
    on_device.download(gpu, &mut returned)?;
    let mut back = crate::matrix::Matrix::filled(shape.0, shape.1, T::poison());
    returned.unstage(back.as_mut())?;
    Ok(back)
}
