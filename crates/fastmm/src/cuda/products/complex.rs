//! Complex products on the GPU between the two layouts. Host split parts
//! with cuBLAS's own complex GEMM: interleaved once into host buffers (the
//! layout cuBLAS, numpy and torch store complex numbers in), uploaded, one
//! cgemm/zgemm (or its 3M form) run, C downloaded and split back. And
//! GPU-resident interleaved operands with fastmm's real products: split
//! into planes on the GPU, multiplied, and interleaved back.

use std::collections::HashMap;
use std::time::Instant;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, DevicePtr};

use crate::cuda::kernels::complex::{self as complex_kernels, Planes};
use crate::cuda::kernels::emulated::{ComplexGemm, EmulatedGemm};
use crate::cuda::kernels::gemm::{DeviceGemm, Operand};
use crate::cuda::products::in_core::{finish, multiply_resident_batch};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::memory::{DeviceMatrix, HostBuffer};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{Algorithm, ComplexForm, GemmOptions, GpuCompletion, GpuMemory};

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

/// Complex products of GPU-resident interleaved operands (shapes, leading
/// dimensions and pointers of `products` in complex elements, C
/// row-major) as fastmm's real products of their split parts, with the
/// resolved real options `real`: the operands split once into planes (a
/// broadcast operand once), three or four batches of real products by
/// `form` ([`crate::complex::multiply`]'s steps), and each C interleaved
/// from their planes; queued on `gpu`'s stream after the caller's (with
/// [`GpuCompletion::OnStream`]) and then waited for or ordered before it.
/// The classical form of the emulated product runs as Karatsuba on the
/// residues ([`EmulatedGemm::run_complex`], three INT8 products per
/// modulus where four real products take four each) on the planes.
/// Returns the host milliseconds from the first split to that point, and
/// the emulated products' routes.
pub(crate) fn multiply_resident_split<T: Element>(
    gpu: &Gpu,
    form: ComplexForm,
    products: &[DeviceGemm<T>],
    real: &GemmOptions,
    completion: GpuCompletion,
) -> Result<(f64, Option<crate::emulation::Tally>), Error> {
    let Some(first) = products.first() else {
        return Ok((0.0, None));
    };
    let start = Instant::now();
    if let GpuCompletion::OnStream(stream) = completion {
        gpu.order_after(stream)?;
    }
    let queued = queue_split(gpu, form, first.shape, products, real);
    // What was queued is waited for, or ordered before the caller's
    // stream, on a failure too: the caller may free the operands next.
    // The planes are freed in stream order as they drop, after it.
    let tally = match queued {
        Ok((_planes, tally)) => finish(gpu, completion).map(|()| tally),
        Err(e) => gpu.synchronize().and(Err(e)),
    }?;
    Ok((start.elapsed().as_secs_f64() * 1e3, tally))
}

/// The distinct operands of one side of a batch (a broadcast operand once)
/// and each product's index among them.
fn distinct(operands: impl Iterator<Item = Operand>) -> (Vec<Operand>, Vec<usize>) {
    let mut seen: HashMap<(u64, usize, bool), usize> = HashMap::new();
    let mut unique = Vec::new();
    let index = operands
        .map(|o| {
            *seen.entry((o.ptr, o.ld, o.trans)).or_insert_with(|| {
                unique.push(o);
                unique.len() - 1
            })
        })
        .collect();
    (unique, index)
}

/// One side's planes: `parts` planes (real, imaginary and, for 3M, their
/// sum) of each distinct operand, stored as its storage is (a transposed
/// view stays one), part after part, so that a part's planes of the batch
/// lie at a fixed distance (one strided-batch launch where the real
/// product takes one).
struct SideParts<T> {
    buffer: CudaSlice<T>,
    /// Elements of one plane.
    plane: usize,
    /// Planes of one part (the distinct operands).
    count: usize,
    /// The operands' (logical) rows and columns.
    shape: (usize, usize),
}

impl<T: Element> SideParts<T> {
    /// The operands of one side split into planes, queued on `gpu`.
    fn split(
        gpu: &Gpu,
        operands: &[Operand],
        (rows, cols): (usize, usize),
        parts: usize,
    ) -> Result<SideParts<T>, Error> {
        let plane = rows * cols;
        // SAFETY: the split kernels below write every element of every
        // plane (ld = the storage's columns, every row) before any read.
        let buffer = unsafe {
            gpu.stream
                .alloc::<T>((parts * operands.len() * plane).max(1))
        }
        .map_err(|e| cuda_err("cannot allocate the planes of complex operands", e))?;
        let sides = SideParts {
            buffer,
            plane,
            count: operands.len(),
            shape: (rows, cols),
        };
        for (u, o) in operands.iter().enumerate() {
            // A transposed view's storage is its transpose, row-major.
            let storage = if o.trans { (cols, rows) } else { (rows, cols) };
            debug_assert_eq!(storage.0 * storage.1, plane);
            let at = |part: usize| sides.ptr(gpu, part, u);
            let planes = Planes {
                re: at(0),
                im: at(1),
                sum: if parts > 2 { at(2) } else { 0 },
                ld: storage.1,
            };
            complex_kernels::split::<T>(gpu, (o.ptr, o.ld), storage, planes)?;
        }
        Ok(sides)
    }

    fn ptr(&self, gpu: &Gpu, part: usize, unique: usize) -> CUdeviceptr {
        let offset = (part * self.count + unique) * self.plane;
        self.buffer.device_ptr(&gpu.stream).0 + (offset * std::mem::size_of::<T>()) as u64
    }

    /// Part `part` of distinct operand `unique`, which is `o`: a view as
    /// `o` is (a transposed one's planes are its storage's, rows apart).
    fn operand(&self, gpu: &Gpu, part: usize, unique: usize, o: Operand) -> Operand {
        Operand {
            ptr: self.ptr(gpu, part, unique),
            ld: if o.trans { self.shape.0 } else { self.shape.1 },
            trans: o.trans,
        }
    }
}

/// The splits, real products and combinations of
/// [`multiply_resident_split`], queued; the planes they use, to be kept
/// until the stream has passed them, and the emulated products' routes.
type Queued<T> = (Vec<CudaSlice<T>>, Option<crate::emulation::Tally>);

fn queue_split<T: Element>(
    gpu: &Gpu,
    form: ComplexForm,
    (m, k, n): (usize, usize, usize),
    products: &[DeviceGemm<T>],
    real: &GemmOptions,
) -> Result<Queued<T>, Error> {
    let parts = match form {
        ComplexForm::Classical => 2,
        ComplexForm::Gauss => 3,
    };
    let (a_ops, a_index) = distinct(products.iter().map(|p| p.a));
    let (b_ops, b_index) = distinct(products.iter().map(|p| p.b));
    // A transposed view keeps its flag: its planes are read as views too.
    let a_parts = SideParts::<T>::split(gpu, &a_ops, (m, k), parts)?;
    let b_parts = SideParts::<T>::split(gpu, &b_ops, (k, n), parts)?;
    // C's planes: (Cᵣ, Cᵢ) summed in place, or 3M's (P₁, P₃, P₂).
    let outputs = match form {
        ComplexForm::Classical => 2,
        ComplexForm::Gauss => 3,
    };
    let plane = m * n;
    // SAFETY: each plane is written in full by the first real product
    // into it (β = 0) before anything reads it.
    let c_buffer = unsafe {
        gpu.stream
            .alloc::<T>((outputs * products.len() * plane).max(1))
    }
    .map_err(|e| cuda_err("cannot allocate the planes of complex products", e))?;
    let c_base = c_buffer.device_ptr(&gpu.stream).0;
    let c_plane = |out: usize, i: usize| {
        c_base + ((out * products.len() + i) * plane * std::mem::size_of::<T>()) as u64
    };
    // One real product of the batch: part x of A times part y of B into
    // output plane `out`, α·A·B + β·C.
    let batch = |(x, y, out): (usize, usize, usize), alpha: T, beta: T| -> Vec<DeviceGemm<T>> {
        products
            .iter()
            .enumerate()
            .map(|(i, p)| DeviceGemm {
                shape: (m, k, n),
                alpha,
                a: a_parts.operand(gpu, x, a_index[i], p.a),
                b: b_parts.operand(gpu, y, b_index[i], p.b),
                beta,
                c: Operand::row_major(c_plane(out, i), n),
            })
            .collect()
    };
    let (re, im, sum) = (0, 1, 2);
    let mut tally = None;
    if form == ComplexForm::Classical && real.algorithm == Algorithm::Emulated {
        let emulated = EmulatedGemm::resolve::<T>(gpu, real.accuracy)?;
        for (i, p) in products.iter().enumerate() {
            real.check_interrupt()?;
            let part = |sides: &SideParts<T>, x: usize, index: &[usize], o: Operand| {
                sides.operand(gpu, x, index[i], o)
            };
            emulated.run_complex(
                gpu,
                ComplexGemm {
                    shape: (m, k, n),
                    a: (
                        part(&a_parts, re, &a_index, p.a),
                        part(&a_parts, im, &a_index, p.a),
                    ),
                    b: (
                        part(&b_parts, re, &b_index, p.b),
                        part(&b_parts, im, &b_index, p.b),
                    ),
                    beta: T::ZERO,
                    c: (
                        Operand::row_major(c_plane(0, i), n),
                        Operand::row_major(c_plane(1, i), n),
                    ),
                },
            )?;
        }
        tally = Some(emulated.take_tally());
    }
    let own = GpuCompletion::OnStream(gpu.stream.cu_stream() as usize);
    let steps: Vec<((usize, usize, usize), T, T)> = match form {
        // Cᵣ = AᵣBᵣ − AᵢBᵢ, Cᵢ = AᵣBᵢ + AᵢBᵣ, as the CPU twin sums them.
        ComplexForm::Classical => vec![
            ((re, re, 0), T::ONE, T::ZERO),
            ((im, im, 0), T::ZERO.sub(T::ONE), T::ONE),
            ((re, im, 1), T::ONE, T::ZERO),
            ((im, re, 1), T::ONE, T::ONE),
        ],
        // P₁ = AᵣBᵣ, P₃ = (Aᵣ + Aᵢ)(Bᵣ + Bᵢ), P₂ = AᵢBᵢ.
        ComplexForm::Gauss => vec![
            ((re, re, 0), T::ONE, T::ZERO),
            ((sum, sum, 1), T::ONE, T::ZERO),
            ((im, im, 2), T::ONE, T::ZERO),
        ],
    };
    // The Karatsuba products above have already written C's planes.
    let steps = match tally {
        Some(_) => Vec::new(),
        None => steps,
    };
    for (which, alpha, beta) in steps {
        real.check_interrupt()?;
        let (_, routes) = multiply_resident_batch(gpu, &batch(which, alpha, beta), real, own)?;
        tally = crate::emulation::Tally::merged(tally, routes);
    }
    let p2 = |i: usize| match form {
        ComplexForm::Classical => 0,
        ComplexForm::Gauss => c_plane(2, i),
    };
    for (i, p) in products.iter().enumerate() {
        complex_kernels::combine::<T>(
            gpu,
            (m, n),
            (c_plane(0, i), c_plane(1, i), p2(i), n),
            (p.c.ptr, p.c.ld),
        )?;
    }
    Ok((vec![a_parts.buffer, b_parts.buffer, c_buffer], tally))
}

/// C ← A·B for complex A (m×k) and B (k×n) given as split parts on the
/// host (shapes checked by the caller), by the emulated product's
/// Karatsuba on the residues ([`EmulatedGemm::run_complex`]) at `opts`'
/// accuracy: the four parts uploaded as they are (no interleaving), C's
/// parts written only once the product is done. Returns the times and
/// the route.
pub(crate) fn multiply_host_emulated<T: Element>(
    gpu: &Gpu,
    a: (MatRef<'_, T>, MatRef<'_, T>),
    b: (MatRef<'_, T>, MatRef<'_, T>),
    c: (MatMut<'_, T>, MatMut<'_, T>),
    opts: &GemmOptions,
) -> Result<(ComplexTimes, crate::emulation::Tally), Error> {
    let ((m, k), n) = (a.0.shape(), b.0.cols());
    let pinned = opts.gpu.pinned;
    let emulated = EmulatedGemm::resolve::<T>(gpu, opts.accuracy)?;
    let stage = |x: MatRef<'_, T>| HostBuffer::stage(gpu, x, pinned);
    let staged = [stage(a.0)?, stage(a.1)?, stage(b.0)?, stage(b.1)?];
    let start = Instant::now();
    let shapes = [(m, k), (m, k), (k, n), (k, n)];
    let mut parts = Vec::with_capacity(6);
    for (s, shape) in staged.iter().zip(shapes) {
        parts.push(DeviceMatrix::upload(
            gpu,
            GpuMemory::Device,
            shape,
            Some(s),
        )?);
    }
    for _ in 0..2 {
        parts.push(DeviceMatrix::<T>::upload(
            gpu,
            GpuMemory::Device,
            (m, n),
            None,
        )?);
    }
    gpu.synchronize()?;
    let upload_ms = start.elapsed().as_secs_f64() * 1e3;
    let op = |d: &DeviceMatrix<T>| Operand::row_major(d.ptr, d.ld);
    let product = ComplexGemm {
        shape: (m, k, n),
        a: (op(&parts[0]), op(&parts[1])),
        b: (op(&parts[2]), op(&parts[3])),
        beta: T::ZERO,
        c: (op(&parts[4]), op(&parts[5])),
    };
    opts.check_interrupt()?;
    let launched = Instant::now();
    let ran = emulated.run_complex(gpu, product);
    // Waited for on a failure too: the buffers are freed next.
    let synced = gpu.synchronize();
    ran.and(synced)?;
    let kernel_ms = launched.elapsed().as_secs_f64() * 1e3;
    let downloaded = Instant::now();
    let (mut re, mut im) = c;
    for (d, out) in [(&parts[4], re.rb_mut()), (&parts[5], im.rb_mut())] {
        let mut host = HostBuffer::new(gpu, m * n, pinned)?;
        d.download(gpu, &mut host)?;
        host.unstage(out)?;
    }
    let download_ms = downloaded.elapsed().as_secs_f64() * 1e3;
    Ok((
        ComplexTimes {
            upload_ms,
            kernel_ms,
            download_ms,
        },
        emulated.take_tally(),
    ))
}
