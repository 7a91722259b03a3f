//! Matrices on the GPU in the three memory kinds of seed 002 §10.3: linear
//! device memory, pitched device memory (each row padded to the alignment
//! the driver picks) and managed (unified) memory. Every kind is row-major
//! with a leading dimension in elements, so the kernels see one layout.

use std::fmt;
use std::str::FromStr;

use cudarc::driver::sys::{self, CUdeviceptr, CUmemorytype};
use cudarc::driver::{CudaSlice, DevicePtr, UnifiedSlice};

use crate::cuda::device::Gpu;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};

/// Where the operands live on the GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GpuMemory {
    /// `cuMemAlloc`: linear device memory (the default).
    #[default]
    Device,
    /// `cuMemAllocPitch`: rows padded so each starts aligned.
    Pitched,
    /// `cuMemAllocManaged`: one address for host and device; pages migrate
    /// on first touch, inside the kernel's time.
    Managed,
}

impl GpuMemory {
    /// Every kind.
    pub const ALL: [GpuMemory; 3] = [GpuMemory::Device, GpuMemory::Pitched, GpuMemory::Managed];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GpuMemory::Device => "device",
            GpuMemory::Pitched => "pitched",
            GpuMemory::Managed => "managed",
        }
    }
}

impl fmt::Display for GpuMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GpuMemory {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        GpuMemory::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "unknown GPU memory '{s}' (expected device, pitched or managed)"
                ))
            })
    }
}

/// A pitched allocation, freed on drop.
struct Pitched {
    ptr: CUdeviceptr,
}

impl Drop for Pitched {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemAllocPitch and is freed once. A
        // failure to free cannot be reported from drop; it leaks.
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

enum Storage<T> {
    Linear(CudaSlice<T>),
    // Held for its Drop, which frees the allocation.
    Pitched(#[allow(dead_code)] Pitched),
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

fn cuda_err(what: &str, e: impl fmt::Debug) -> Error {
    Error::Cuda(format!("{what}: {e:?}"))
}

/// The view's elements in row-major order, contiguous (the staging copy
/// every upload makes: the GPU gets one layout whatever the view's strides).
fn row_major<T: Element>(view: MatRef<'_, T>) -> Vec<T> {
    let mut out = Vec::with_capacity(view.rows() * view.cols());
    for i in 0..view.rows() {
        out.extend((0..view.cols()).map(|j| view.get(i, j)));
    }
    out
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
    gpu.ctx
        .bind_to_thread()
        .map_err(|e| cuda_err("cannot bind the context", e))?;
    // SAFETY: the caller's contract covers both ends of the copy.
    unsafe { sys::cuMemcpy2D_v2(&copy) }
        .result()
        .map_err(|e| cuda_err("a 2-D copy failed", e))
}

impl<T: Element> DeviceMatrix<T> {
    /// Its address and leading dimension.
    pub fn operand(&self) -> crate::cuda::gemm::Operand {
        crate::cuda::gemm::Operand {
            ptr: self.ptr,
            ld: self.ld,
        }
    }

    /// Copies `view` to the GPU (or, with `contents = false`, only
    /// allocates room for it: an output whose old value is never read).
    pub fn upload(
        gpu: &Gpu,
        memory: GpuMemory,
        view: MatRef<'_, T>,
        contents: bool,
    ) -> Result<DeviceMatrix<T>, Error> {
        let (rows, cols) = view.shape();
        let len = rows * cols;
        let host = if contents {
            row_major(view)
        } else {
            Vec::new()
        };
        match memory {
            GpuMemory::Device => {
                let slice = if contents {
                    gpu.stream.clone_htod(&host)
                } else {
                    // SAFETY: an output buffer; the kernel writes every
                    // element before anything reads it.
                    unsafe { gpu.stream.alloc::<T>(len.max(1)) }
                }
                .map_err(|e| cuda_err("cannot copy to the GPU", e))?;
                // One stream runs everything, so the pointer needs no
                // further synchronisation than the stream's own order.
                let ptr = slice.device_ptr(&gpu.stream).0;
                Ok(DeviceMatrix {
                    ptr,
                    rows,
                    cols,
                    ld: cols,
                    storage: Storage::Linear(slice),
                })
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
                let owned = Pitched { ptr };
                if pitch % size != 0 {
                    return Err(Error::Cuda(format!(
                        "pitch {pitch} is not a multiple of the element size {size}"
                    )));
                }
                if contents {
                    let to = Side::Device { ptr, pitch };
                    // SAFETY: the host buffer holds rows·cols elements, the
                    // allocation rows rows of `pitch` bytes.
                    unsafe { copy_2d(gpu, host_side(&host, cols * size), to, cols * size, rows) }?;
                }
                Ok(DeviceMatrix {
                    ptr,
                    rows,
                    cols,
                    ld: pitch / size,
                    storage: Storage::Pitched(owned),
                })
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
                        .copy_from_slice(&host);
                }
                let ptr = slice.device_ptr(&gpu.stream).0;
                Ok(DeviceMatrix {
                    ptr,
                    rows,
                    cols,
                    ld: cols,
                    storage: Storage::Managed(slice),
                })
            }
        }
    }

    /// Copies the matrix back into `out` (any strides, same shape).
    pub fn download(&self, gpu: &Gpu, mut out: MatMut<'_, T>) -> Result<(), Error> {
        debug_assert_eq!(out.shape(), (self.rows, self.cols));
        let (rows, cols) = (self.rows, self.cols);
        let len = rows * cols;
        let host: Vec<T> = match &self.storage {
            Storage::Linear(slice) => gpu
                .stream
                .clone_dtoh(slice)
                .map_err(|e| cuda_err("cannot copy from the GPU", e))?,
            Storage::Pitched(_) => {
                let size = std::mem::size_of::<T>();
                let mut host = vec![T::ZERO; len];
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
                // the host buffer rows·cols elements.
                unsafe { copy_2d(gpu, from, to, cols * size, rows) }?;
                host
            }
            Storage::Managed(slice) => {
                gpu.synchronize()?;
                slice
                    .as_slice()
                    .map_err(|e| cuda_err("cannot map managed memory", e))?[..len]
                    .to_vec()
            }
        };
        for i in 0..rows {
            for j in 0..cols {
                out.set(i, j, host[i * cols + j]);
            }
        }
        Ok(())
    }
}

/// Copies `view` to the GPU in `memory` and back into a new matrix: the
/// host↔device round trip of seed 002 §10.4, for `fastmm selftest`.
pub fn round_trip<T: Element>(
    gpu: &Gpu,
    memory: GpuMemory,
    view: MatRef<'_, T>,
) -> Result<crate::matrix::Matrix<T>, Error> {
    let on_device = DeviceMatrix::upload(gpu, memory, view, true)?;
    let mut back = crate::matrix::Matrix::filled(view.rows(), view.cols(), T::poison());
    on_device.download(gpu, back.as_mut())?;
    Ok(back)
}
