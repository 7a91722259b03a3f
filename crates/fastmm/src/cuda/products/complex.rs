//! A complex product of host matrices with cuBLAS's own complex GEMM: the
//! split parts interleaved once into host buffers (the layout cuBLAS,
//! numpy and torch store complex numbers in), uploaded, one cgemm/zgemm
//! (or its 3M form) run, C downloaded and split back into its parts.

use std::time::Instant;

use crate::cuda::kernels::gemm::{DeviceGemm, Operand};
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::memory::{DeviceMatrix, HostBuffer};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{ComplexForm, GemmOptions, GpuMemory};

/// Milliseconds of the three phases of one product.
pub(crate) struct ComplexTimes {
    pub upload_ms: f64,
    pub kernel_ms: f64,
    pub download_ms: f64,
}

/// `(re, im)` interleaved row by row into a new host buffer of
/// rows × 2·cols elements.
fn interleaved<T: Element>(
    gpu: &Gpu,
    (re, im): (MatRef<'_, T>, MatRef<'_, T>),
    pinned: bool,
) -> Result<HostBuffer<T>, Error> {
    let (rows, cols) = re.shape();
    let mut buffer = HostBuffer::new(gpu, 2 * rows * cols, pinned)?;
    let out = buffer.as_mut_slice()?;
    for i in 0..rows {
        let line = &mut out[2 * i * cols..][..2 * cols];
        for (j, pair) in line.chunks_exact_mut(2).enumerate() {
            pair[0] = re.get(i, j);
            pair[1] = im.get(i, j);
        }
    }
    Ok(buffer)
}

/// C ← A·B for complex A (m×k) and B (k×n) given as split parts on the
/// host (shapes checked by the caller), with cuBLAS's complex product of
/// `form` on `gpu`. C's parts are written only once the product is done.
pub(crate) fn multiply_host<T: Element>(
    gpu: &Gpu,
    a: (MatRef<'_, T>, MatRef<'_, T>),
    b: (MatRef<'_, T>, MatRef<'_, T>),
    c: (MatMut<'_, T>, MatMut<'_, T>),
    form: ComplexForm,
    opts: &GemmOptions,
) -> Result<ComplexTimes, Error> {
    let ((m, k), n) = (a.0.shape(), b.0.cols());
    let pinned = opts.gpu.pinned;
    let staged_a = interleaved(gpu, a, pinned)?;
    let staged_b = interleaved(gpu, b, pinned)?;
    let start = Instant::now();
    let da = DeviceMatrix::upload(gpu, GpuMemory::Device, (m, 2 * k), Some(&staged_a))?;
    let db = DeviceMatrix::upload(gpu, GpuMemory::Device, (k, 2 * n), Some(&staged_b))?;
    let dc = DeviceMatrix::<T>::upload(gpu, GpuMemory::Device, (m, 2 * n), None)?;
    gpu.synchronize()?;
    let upload_ms = start.elapsed().as_secs_f64() * 1e3;
    // A pitched allocation's rows hold whole complex elements only when
    // its leading dimension (in parts) is even.
    let complex = |d: &DeviceMatrix<T>| match d.ld % 2 {
        0 => Ok(Operand::row_major(d.ptr, d.ld / 2)),
        _ => Err(Error::Cuda(format!(
            "an odd pitch of {} elements for complex rows",
            d.ld
        ))),
    };
    let product = DeviceGemm {
        shape: (m, k, n),
        alpha: T::ONE,
        a: complex(&da)?,
        b: complex(&db)?,
        beta: T::ZERO,
        c: complex(&dc)?,
    };
    opts.check_interrupt()?;
    let launched = Instant::now();
    let ran = crate::cuda::kernels::cublas::complex_gemm(gpu, form, product);
    // Waited for on a failure too: the buffers are freed next.
    let synced = gpu.synchronize();
    ran.and(synced)?;
    let kernel_ms = launched.elapsed().as_secs_f64() * 1e3;
    let downloaded = Instant::now();
    let mut host = HostBuffer::new(gpu, 2 * m * n, pinned)?;
    dc.download(gpu, &mut host)?;
    let download_ms = downloaded.elapsed().as_secs_f64() * 1e3;
    let data = host.as_slice()?;
    let (mut re, mut im) = c;
    for i in 0..m {
        for (j, pair) in data[2 * i * n..][..2 * n].chunks_exact(2).enumerate() {
            re.set(i, j, pair[0]);
            im.set(i, j, pair[1]);
        }
    }
    Ok(ComplexTimes {
        upload_ms,
        kernel_ms,
        download_ms,
    })
}
