//! A whole host matrix to the GPU, or a device buffer back to the host,
//! through two page-locked buffers in turn: while the DMA engine copies
//! one band of rows, the CPU's threads gather the next into the other
//! ([`host_copy`]). Pageable copies go through the driver's own small
//! staging, one thread, at a fraction of the link's speed; a piece of an
//! MPI rank (gigabytes) is staged this way once per product.

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaEvent, CudaStream, DriverError};
use rayon::prelude::*;

use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::host_copy;
use crate::cuda::runtime::memory::{PinnedStaging, RawDeviceMemory};
use crate::cuda::tunables::CUDA_TRANSFER_BAND_BYTES;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};

/// Rows per band of a matrix of `cols` columns of T.
fn band_rows<T>(cols: usize) -> usize {
    (CUDA_TRANSFER_BAND_BYTES / (cols.max(1) * std::mem::size_of::<T>())).max(1)
}

/// Two page-locked buffers of `bytes` each and the event of the last copy
/// that used each.
struct Pair {
    buffers: [PinnedStaging; 2],
    last: [Option<CudaEvent>; 2],
}

impl Pair {
    fn new(gpu: &Gpu, bytes: usize) -> Result<Pair, Error> {
        Ok(Pair {
            buffers: [
                PinnedStaging::alloc(gpu, bytes)?,
                PinnedStaging::alloc(gpu, bytes)?,
            ],
            last: [None, None],
        })
    }

    /// Waits until no copy uses buffer `slot`.
    fn settle(&mut self, slot: usize) -> Result<(), Error> {
        if let Some(event) = self.last[slot].take() {
            event
                .synchronize()
                .map_err(|e| cuda_err("a staged copy failed", e))?;
        }
        Ok(())
    }

    fn mark(&mut self, gpu: &Gpu, slot: usize) -> Result<(), Error> {
        let event = gpu
            .stream
            .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(|e| cuda_err("cannot record an event", e))?;
        self.last[slot] = Some(event);
        Ok(())
    }
}

/// `view` copied to new device memory on `gpu`, row-major (room for one
/// byte where it is empty).
pub(crate) fn upload_view<T: Element>(
    gpu: &Gpu,
    view: MatRef<'_, T>,
) -> Result<RawDeviceMemory, Error> {
    let (rows, cols) = view.shape();
    let elem = std::mem::size_of::<T>();
    let memory = RawDeviceMemory::alloc(gpu, rows * cols * elem)?;
    if rows == 0 || cols == 0 {
        return Ok(memory);
    }
    let band = band_rows::<T>(cols).min(rows);
    let mut pair = Pair::new(gpu, band * cols * elem)?;
    let queued = (|| {
        for (index, start) in (0..rows).step_by(band).enumerate() {
            let (slot, height) = (index % 2, band.min(rows - start));
            pair.settle(slot)?;
            // SAFETY: the last copy from this buffer has completed.
            let out = unsafe { pair.buffers[slot].as_mut_slice::<T>(height * cols) };
            host_copy::gather(view.submatrix(start, 0, height, cols), out);
            let dst = memory.ptr + (start * cols * elem) as u64;
            gpu.bind()?;
            // SAFETY: `height` rows of `cols` elements fit the buffer and,
            // from row `start`, the device memory; the buffer is not
            // touched again until its event has passed.
            unsafe {
                upload_async(
                    &gpu.stream,
                    pair.buffers[slot].ptr(),
                    dst,
                    height * cols * elem,
                )
            }
            .map_err(|e| cuda_err("a copy to the GPU failed", e))?;
            pair.mark(gpu, slot)?;
        }
        Ok(())
    })();
    // Every copy done (or failed) before the buffers are freed.
    let done = gpu.synchronize();
    queued.and(done).map(|()| memory)
}

/// The first `len` elements of T of `src` on `gpu`, copied to the host.
///
/// # Safety
/// `src` is on `gpu` and holds at least `len` elements of T, not written
/// meanwhile.
pub(crate) unsafe fn download_vec<T: Element>(
    gpu: &Gpu,
    src: &RawDeviceMemory,
    len: usize,
) -> Result<Vec<T>, Error> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        what: "a piece copied back from the GPU".into(),
        needed: format!("{} bytes", len * std::mem::size_of::<T>()),
        available: "less in host memory".into(),
    })?;
    out.resize(len, T::ZERO);
    if len == 0 {
        return Ok(out);
    }
    let elem = std::mem::size_of::<T>();
    let band = (CUDA_TRANSFER_BAND_BYTES / elem).max(1).min(len);
    let mut pair = Pair::new(gpu, band * elem)?;
    let bands: Vec<(usize, usize)> = (0..len)
        .step_by(band)
        .map(|start| (start, band.min(len - start)))
        .collect();
    // SAFETY: the bands lie inside `src` (the caller's contract).
    let copied = unsafe {
        download_bands(gpu, src.ptr, elem, &bands, &mut pair, |pair, slot, band| {
            unpack(pair, slot, band, &mut out)
        })
    };
    let done = gpu.synchronize();
    copied.and(done).map(|()| out)
}

/// Copies each band (first element, count) of T (`elem` bytes each) of
/// `src` into a buffer of `pair`, band b's copy queued before band b − 1
/// is handed to `place` with its buffer's slot.
///
/// # Safety
/// Every band lies inside `src`, on `gpu`, not written meanwhile, and
/// fits a buffer of `pair`.
unsafe fn download_bands(
    gpu: &Gpu,
    src: CUdeviceptr,
    elem: usize,
    bands: &[(usize, usize)],
    pair: &mut Pair,
    mut place: impl FnMut(&mut Pair, usize, (usize, usize)) -> Result<(), Error>,
) -> Result<(), Error> {
    for (index, &(start, count)) in bands.iter().enumerate() {
        let slot = index % 2;
        pair.settle(slot)?;
        gpu.bind()?;
        // SAFETY: `count` elements from element `start` lie inside `src`
        // and fit the buffer (the caller's contract), which no copy uses
        // (settled above).
        unsafe {
            download_async(
                &gpu.stream,
                src + (start * elem) as u64,
                pair.buffers[slot].ptr(),
                count * elem,
            )
        }
        .map_err(|e| cuda_err("a copy from the GPU failed", e))?;
        pair.mark(gpu, slot)?;
        if index > 0 {
            place(pair, 1 - slot, bands[index - 1])?;
        }
    }
    match bands.len() {
        0 => Ok(()),
        len => place(pair, (len - 1) % 2, bands[len - 1]),
    }
}

/// The rows×cols row-major matrix at `src` on `gpu` (ld = cols) copied
/// into `out`, band by band through the two page-locked buffers: band
/// b's copy is queued before band b − 1 is scattered into `out` by the
/// CPU's threads.
///
/// # Safety
/// `src` is on `gpu`, holds out.rows()·out.cols() elements of T, and is
/// not written meanwhile.
pub(crate) unsafe fn download_view<T: Element>(
    gpu: &Gpu,
    src: CUdeviceptr,
    mut out: MatMut<'_, T>,
) -> Result<(), Error> {
    let (rows, cols) = out.shape();
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let elem = std::mem::size_of::<T>();
    let band = band_rows::<T>(cols).min(rows);
    let mut pair = Pair::new(gpu, band * cols * elem)?;
    // Bands of whole rows, in elements.
    let bands: Vec<(usize, usize)> = (0..rows)
        .step_by(band)
        .map(|start| (start * cols, band.min(rows - start) * cols))
        .collect();
    let place = |pair: &mut Pair, slot: usize, (start, count): (usize, usize)| {
        pair.settle(slot)?;
        // SAFETY: its copy has completed, and none other is queued into it.
        let from = unsafe { pair.buffers[slot].as_mut_slice::<T>(count) };
        let (row, height) = (start / cols, count / cols);
        host_copy::scatter(from, out.rb_mut().submatrix(row, 0, height, cols), T::ZERO);
        Ok(())
    };
    // SAFETY: the rows lie inside `src` (the caller's contract).
    let copied = unsafe { download_bands(gpu, src, elem, &bands, &mut pair, place) };
    let done = gpu.synchronize();
    copied.and(done)
}

/// Waits for buffer `slot`'s copy, then moves its `count` elements into
/// `out` from `start`, in parallel.
fn unpack<T: Element>(
    pair: &mut Pair,
    slot: usize,
    (start, count): (usize, usize),
    out: &mut [T],
) -> Result<(), Error> {
    pair.settle(slot)?;
    // SAFETY: its copy has completed, and none other is queued into it.
    let from = unsafe { pair.buffers[slot].as_mut_slice::<T>(count) };
    let to = &mut out[start..start + count];
    let chunk = (1 << 18).min(count).max(1);
    to.par_chunks_mut(chunk)
        .zip(from.par_chunks(chunk))
        .for_each(|(to, from)| to.copy_from_slice(from));
    Ok(())
}

/// Queues a copy of `bytes` bytes from host memory at `src` to device
/// memory at `dst` on `stream`, in the calling thread's bound context.
///
/// # Safety
/// `src` is page-locked host memory of at least `bytes`, `dst` device
/// memory of the stream's GPU of at least `bytes`, and neither is used
/// otherwise until the copy completes.
pub(crate) unsafe fn upload_async(
    stream: &CudaStream,
    src: *const std::ffi::c_void,
    dst: CUdeviceptr,
    bytes: usize,
) -> Result<(), DriverError> {
    // SAFETY: the caller's contract covers both ends.
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream.cu_stream()) }.result()
}

/// Queues a copy of `bytes` bytes from device memory at `src` to host
/// memory at `dst` on `stream`, in the calling thread's bound context.
///
/// # Safety
/// As [`upload_async`], the other way.
pub(crate) unsafe fn download_async(
    stream: &CudaStream,
    src: CUdeviceptr,
    dst: *mut std::ffi::c_void,
    bytes: usize,
) -> Result<(), DriverError> {
    // SAFETY: the caller's contract covers both ends.
    unsafe { sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, stream.cu_stream()) }.result()
}

/// Queues a copy of `rows` rows of `width` bytes from page-locked host
/// memory at `(src, src_pitch)` to device memory at `(dst, dst_pitch)` on
/// `stream`, in the calling thread's bound context.
///
/// # Safety
/// As [`upload_async`], for every row of both sides.
pub(crate) unsafe fn upload_2d_async(
    stream: &CudaStream,
    (src, src_pitch): (*const std::ffi::c_void, usize),
    (dst, dst_pitch): (CUdeviceptr, usize),
    (width, rows): (usize, usize),
) -> Result<(), DriverError> {
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: src,
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: rows,
    };
    // SAFETY: the caller's contract covers both ends; the descriptor is
    // read during the call only.
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }.result()
}
