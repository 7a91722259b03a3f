//! A GPU product of host matrices in one piece: A and B (and C when
//! β ≠ 0) uploaded into the memory kind asked for, the product run (timed
//! with CUDA events), C copied back.

use std::collections::HashMap;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, DevicePtr};

use crate::cuda::kernels::cublas::to_half;
use crate::cuda::kernels::gemm::{ClassicalGemm, DeviceGemm, Operand};
use crate::cuda::products::strassen::CudaBackend;
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::memory::{DeviceMatrix, HostBuffer, RawDeviceMemory};
use crate::cuda::tunables::{
    CUDA_BATCH_LANES, CUDA_BATCH_LANES_BELOW_MN, CUDA_TIMED_LAUNCHES, CUDA_TIMED_LONG_LAUNCH_MS,
};
use crate::element::Element;
use crate::error::Error;
use crate::gemm::Gemm;
use crate::matrix::MatRef;
use crate::options::{Algorithm, GemmOptions, GpuCompletion, GpuMemory, GpuPrecision};
use crate::strassen::engine::Plan;
use crate::strassen::Scheme;

/// Where the time of one GPU product went, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GpuTimes {
    /// Host → device copies of A, B (and C when β ≠ 0) from row-major host
    /// buffers (pageable, or page-locked with `gpu_pinned`), host clock.
    pub upload_ms: f64,
    /// The kernel (or cuBLAS call) alone, between two CUDA events: the
    /// median of back-to-back launches when β = 0 (see [`multiply`]).
    pub kernel_ms: f64,
    /// Device → host copy of C, host clock.
    pub download_ms: f64,
    /// The `emulated` algorithm: the routes of the last timed launch.
    pub emulation: Option<crate::emulation::Tally>,
}

/// C ← α·A·B + β·C with a GPU algorithm on host matrices: uploads A and B
/// (and C if β ≠ 0) into `opts.gpu.memory`, runs, and copies C back.
/// β = 0 never reads C. Shapes are checked by the caller (the boundary);
/// `opts.algorithm` is resolved (not `auto`). With β = 0 and `timed`, the
/// product runs once untimed and then [`CUDA_TIMED_LAUNCHES`] times, or
/// once when the untimed run took [`CUDA_TIMED_LONG_LAUNCH_MS`] (see
/// [`GpuTimes::kernel_ms`]); else once.
pub(crate) fn multiply<T: Element>(
    gpu: &Gpu,
    Gemm {
        alpha,
        a,
        b,
        beta,
        c,
    }: Gemm<'_, T>,
    opts: &GemmOptions,
    timed: bool,
) -> Result<GpuTimes, Error> {
    let (m, k) = a.shape();
    let n = b.cols();
    let beta_is_zero = beta == T::ZERO;
    let (fast_plan, classical) = prepare::<T>(gpu, (m, k, n), beta_is_zero, opts)?;
    let precision = opts.gpu.precision.unwrap_or_default();
    let memory = opts.gpu.memory.unwrap_or_default();

    // Device memory without `gpu_pinned` takes the banded copies: two
    // page-locked bands in turn, one gathered by the CPU's threads while
    // the other crosses the link (pageable copies ran at 3.6 GB/s on an
    // H100 host, a 32768² f64 operand in 2.4 s); their time, gathering
    // included, is the upload's. Otherwise staging into row-major host
    // buffers (page-locked with `gpu_pinned`) is a layout step outside
    // the timings, and the copies are timed.
    let pinned = opts.gpu.pinned;
    let banded = memory == GpuMemory::Device && !pinned;
    let stage = |view: MatRef<'_, T>| match banded {
        true => Ok(None),
        false => HostBuffer::stage(gpu, view, pinned).map(Some),
    };
    let (staged_a, staged_b) = (stage(a)?, stage(b)?);
    let mut staged_c = match (banded, beta_is_zero) {
        (true, _) => None,
        (false, true) => Some(HostBuffer::new(gpu, m * n, pinned)?),
        (false, false) => stage(c.rb())?,
    };
    let start = Instant::now();
    let (da, db, dc) = match banded {
        true => {
            let up = |view: MatRef<'_, T>| -> Result<DeviceMatrix<T>, Error> {
                Ok(DeviceMatrix::from_raw(
                    crate::cuda::runtime::transfer::upload_view(gpu, view)?,
                    view.shape(),
                ))
            };
            let dc = match beta_is_zero {
                true => DeviceMatrix::from_raw(
                    RawDeviceMemory::alloc(gpu, m * n * std::mem::size_of::<T>())?,
                    (m, n),
                ),
                false => up(c.rb())?,
            };
            (up(a)?, up(b)?, dc)
        }
        false => (
            DeviceMatrix::upload(gpu, memory, (m, k), staged_a.as_ref())?,
            DeviceMatrix::upload(gpu, memory, (k, n), staged_b.as_ref())?,
            DeviceMatrix::upload(
                gpu,
                memory,
                (m, n),
                staged_c.as_ref().filter(|_| !beta_is_zero),
            )?,
        ),
    };
    let (mut oa, mut ob, oc) = (Operand::from(&da), Operand::from(&db), Operand::from(&dc));
    // The 16-bit modes take 16-bit operands: converted on the device, as
    // part of the upload (the data the tensor cores read).
    let halves = match precision {
        GpuPrecision::Bf16 | GpuPrecision::F16 => {
            let bf16 = precision == GpuPrecision::Bf16;
            let half_a = to_half(gpu, oa, m * k, bf16)?;
            let half_b = to_half(gpu, ob, k * n, bf16)?;
            oa = Operand::row_major(half_a.device_ptr(&gpu.stream).0, k);
            ob = Operand::row_major(half_b.device_ptr(&gpu.stream).0, n);
            Some((half_a, half_b))
        }
        _ => None,
    };
    gpu.synchronize()?;
    let upload_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut fast = match fast_plan {
        Some(plan) => Some((
            plan,
            CudaBackend::<T>::new(gpu, classical.clone(), opts, (oa, ob, oc))?,
        )),
        None => None,
    };
    let mut launch_once = || -> Result<(), Error> {
        // Each launch reports its own routes.
        let _ = classical.take_emulation_tally();
        match &mut fast {
            Some((plan, backend)) => {
                crate::strassen::engine::run(backend, *plan, alpha, beta, (m, k, n)).map(|_| ())
            }
            None => classical.run(
                gpu,
                DeviceGemm {
                    shape: (m, k, n),
                    alpha,
                    a: oa,
                    b: ob,
                    beta,
                    c: oc,
                },
            ),
        }
    };
    // With β = 0 a product is idempotent, so it runs once to warm the clocks
    // and caches (and, for the fast algorithms, to allocate their
    // temporaries) and then CUDA_TIMED_LAUNCHES times back to back: kernel
    // time is the median of those, free of the idle gaps the copies leave.
    // A warm-up as long as CUDA_TIMED_LONG_LAUNCH_MS has settled the clocks
    // itself, and one more launch is timed. With β ≠ 0 each run changes C,
    // so exactly one runs.
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let record = || {
        gpu.stream
            .record_event(timing)
            .map_err(|e| cuda_err("cannot record an event", e))
    };
    let timed_launches = if beta_is_zero && timed {
        let begin = record()?;
        launch_once()?;
        let end = record()?;
        gpu.synchronize()?;
        let warm_ms = begin
            .elapsed_ms(&end)
            .map_err(|e| cuda_err("cannot read the event timer", e))?;
        if f64::from(warm_ms) >= CUDA_TIMED_LONG_LAUNCH_MS {
            1
        } else {
            CUDA_TIMED_LAUNCHES
        }
    } else {
        1
    };
    let mut events = Vec::with_capacity(timed_launches);
    for _ in 0..timed_launches {
        let begin = record()?;
        launch_once()?;
        events.push((begin, record()?));
    }
    gpu.synchronize()?;
    let mut kernel_times = events
        .iter()
        .map(|(begin, end)| {
            begin
                .elapsed_ms(end)
                .map(f64::from)
                .map_err(|e| cuda_err("cannot read the event timer", e))
        })
        .collect::<Result<Vec<f64>, Error>>()?;
    kernel_times.sort_by(f64::total_cmp);
    let kernel_ms = kernel_times[kernel_times.len() / 2];
    let emulation = classical.take_emulation_tally();
    drop(fast);
    drop(halves);

    let start = Instant::now();
    match staged_c.as_mut() {
        Some(staged) => {
            dc.download(gpu, staged)?;
            let download_ms = start.elapsed().as_secs_f64() * 1e3;
            staged.unstage(c)?;
            return Ok(GpuTimes {
                upload_ms,
                kernel_ms,
                download_ms,
                emulation,
            });
        }
        // SAFETY: dc is this GPU's m×n row-major C (ld n), which the
        // product has finished writing (synchronised above).
        None => unsafe { crate::cuda::runtime::transfer::download_view(gpu, dc.ptr, c)? },
    }
    let download_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(GpuTimes {
        upload_ms,
        kernel_ms,
        download_ms,
        emulation,
    })
}

/// What a GPU product will run, prepared before any copy: the fast
/// algorithm's recursion (its schedule chosen so that its temporaries fit
/// beside A, B and C) and the classical product under it, its kernels
/// compiled or fetched and their blocks checked.
fn prepare<T: Element>(
    gpu: &Gpu,
    (m, k, n): (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Result<(Option<Plan>, ClassicalGemm), Error> {
    let scheme = Scheme::of(opts.algorithm);
    let fast_plan = match scheme {
        Some(scheme) => {
            opts.fast
                .check_on(opts.algorithm, crate::options::DeviceKind::Cuda)?;
            let variant = crate::cuda::products::strassen::variant::<T>(
                gpu,
                scheme,
                (m, k, n),
                beta_is_zero,
                opts,
            )?;
            Some(crate::cuda::products::strassen::plan::<T>(
                &gpu.info().name,
                scheme,
                variant,
                opts,
            ))
        }
        None => None,
    };
    let base = match scheme {
        Some(_) => crate::cuda::products::strassen::base(opts, T::DTYPE),
        None => opts.algorithm,
    };
    let precision = opts.gpu.precision.unwrap_or_default();
    if precision != GpuPrecision::Fp32 && opts.algorithm != Algorithm::Cublas {
        return Err(Error::InvalidOption(format!(
            "precision {precision} is a cuBLAS mode: it applies to cublas, not {}",
            opts.algorithm
        )));
    }
    Ok((fast_plan, ClassicalGemm::resolve::<T>(gpu, base, opts)?))
}

/// C ← α·A·B + β·C on row-major operands already in this GPU's memory,
/// queued on the GPU's stream and not waited for: the fast algorithms'
/// temporaries live in the backend returned, to be dropped only once the
/// stream has passed the product. The checks of [`multiply_resident_batch`]
/// are the caller's.
pub(crate) fn issue_resident<'g, T: Element>(
    gpu: &'g Gpu,
    product: DeviceGemm<T>,
    opts: &GemmOptions,
) -> Result<Option<CudaBackend<'g, T>>, Error> {
    let prepared = prepare::<T>(gpu, product.shape, product.beta == T::ZERO, opts)?;
    issue_prepared(gpu, &prepared, product, opts)
}

/// [`issue_resident`] with the product already prepared.
fn issue_prepared<'g, T: Element>(
    gpu: &'g Gpu,
    (fast_plan, classical): &(Option<Plan>, ClassicalGemm),
    product: DeviceGemm<T>,
    opts: &GemmOptions,
) -> Result<Option<CudaBackend<'g, T>>, Error> {
    let DeviceGemm {
        shape,
        alpha,
        a,
        b,
        beta,
        c,
    } = product;
    match fast_plan {
        Some(plan) => {
            let mut fast = CudaBackend::<T>::new(gpu, classical.clone(), opts, (a, b, c))?;
            crate::strassen::engine::run(&mut fast, *plan, alpha, beta, shape)?;
            Ok(Some(fast))
        }
        None => {
            classical.run(gpu, product)?;
            Ok(None)
        }
    }
}

/// The options a product of GPU-resident operands refuses: the 16-bit
/// cuBLAS modes and memory kinds, which are for host operands.
fn check_resident(opts: &GemmOptions) -> Result<(), Error> {
    if matches!(
        opts.gpu.precision.unwrap_or_default(),
        GpuPrecision::Bf16 | GpuPrecision::F16
    ) {
        return Err(Error::InvalidOption(
            "the 16-bit cuBLAS modes convert host operands on upload; a product of GPU-resident operands runs in their own type (or TF32)".into(),
        ));
    }
    if opts
        .gpu
        .memory
        .is_some_and(|memory| memory != GpuMemory::Device)
    {
        return Err(Error::InvalidOption(
            "GPU-resident operands are where they are: a memory kind applies to host operands"
                .into(),
        ));
    }
    Ok(())
}

/// C ← α·A·B + β·C on operands already in this GPU's memory (the
/// caller's, DLPack tensors' say; A and B row-major or transposed views, C
/// row-major), for a batch of products of one
/// shape and one α and β: prepared once and queued on the GPU's stream
/// without a wait between them. A strided batch of the classical product
/// runs as one cuBLAS launch, one of the emulated product as one launch
/// per step over as many products as memory holds; other batches below
/// [`CUDA_BATCH_LANES_BELOW_MN`] run on several lanes; otherwise each
/// product is queued in turn (the emulated product still waits on its own
/// certificate). `completion` says whether the host then waits, or
/// whether the products run as on the caller's stream (after its work,
/// and, with one stream and no temporaries, before its later work without
/// a host wait).
/// Returns the milliseconds the call took, host clock, and the emulated
/// products' routes (for the emulated and byte-plane products). β = 0 never reads
/// C. The checks of shapes and of the outputs' independence are the
/// caller's; the 16-bit cuBLAS modes and memory kinds other than device
/// memory are for host operands, converted or placed on upload, and
/// refused here.
pub(crate) fn multiply_resident_batch<T: Element>(
    gpu: &Gpu,
    products: &[DeviceGemm<T>],
    opts: &GemmOptions,
    completion: GpuCompletion,
) -> Result<(f64, Option<crate::emulation::Tally>), Error> {
    check_resident(opts)?;
    let Some(first) = products.first() else {
        return Ok((0.0, None));
    };
    let start = Instant::now();
    let prepared = prepare::<T>(gpu, first.shape, first.beta == T::ZERO, opts)?;
    if let GpuCompletion::OnStream(stream) = completion {
        gpu.order_after(stream)?;
    }
    // Transposed views run in place where the product reads them (cuBLAS,
    // the INT8 pipelines); elsewhere they are copied row-major once, on
    // this stream, and the copies freed in its order after the products.
    let takes_views = prepared.0.is_none() && prepared.1.takes_transposed();
    let (copied, _copies) = match takes_views || !products.iter().any(DeviceGemm::any_transposed) {
        true => (None, Vec::new()),
        false => {
            let (rewritten, copies) = with_row_major_operands(gpu, products)?;
            (Some(rewritten), copies)
        }
    };
    let products = copied.as_deref().unwrap_or(products);
    match (&prepared, DeviceGemm::strided(products)) {
        ((None, ClassicalGemm::Cublas(precision)), Some(strides)) => {
            crate::cuda::kernels::cublas::gemm_batched(
                gpu,
                *precision,
                *first,
                (products.len(), strides),
            )?;
            finish(gpu, completion)?;
        }
        ((None, ClassicalGemm::Emulated(emulated)), Some(strides)) if products.len() > 1 => {
            let queued = emulated.run_strided(gpu, *first, (products.len(), strides));
            // What was queued is waited for on a failure too: the caller
            // may free the operands next.
            match queued {
                Ok(()) => finish(gpu, completion)?,
                Err(e) => return gpu.synchronize().and(Err(e)),
            }
        }
        _ if products.len() == 1 || first.shape.0 * first.shape.2 >= CUDA_BATCH_LANES_BELOW_MN => {
            run_lane(gpu, &prepared, products, opts, completion)?
        }
        _ => {
            if copied.is_some() {
                // The lanes' streams read the copies made on this one.
                gpu.synchronize()?;
            }
            let lanes = CUDA_BATCH_LANES.min(products.len());
            let gpus = (0..lanes)
                .map(|_| gpu.lane())
                .collect::<Result<Vec<_>, Error>>()?;
            let part = products.len().div_ceil(lanes);
            let prepared = &prepared;
            let outcomes: Vec<Result<(), Error>> = std::thread::scope(|scope| {
                let workers: Vec<_> = gpus
                    .iter()
                    .zip(products.chunks(part))
                    .map(|(lane, share)| {
                        scope.spawn(move || {
                            run_lane(lane, prepared, share, opts, GpuCompletion::Complete)
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|w| {
                        w.join()
                            .unwrap_or_else(|_| Err(Error::Cuda("a GPU lane panicked".into())))
                    })
                    .collect()
            });
            outcomes.into_iter().collect::<Result<Vec<()>, Error>>()?;
        }
    }
    // The routes are decided on the host as the products are queued, so
    // the tally is whole even where the caller's stream is still running.
    Ok((
        start.elapsed().as_secs_f64() * 1e3,
        prepared.1.take_emulation_tally(),
    ))
}

/// Complex products of GPU-resident interleaved operands with cuBLAS's own
/// complex GEMM (`form`: cgemm/zgemm, or their 3M forms), queued on
/// `gpu`'s stream one after another (after the caller's stream's work,
/// with [`GpuCompletion::OnStream`]), then waited for or ordered before
/// that stream; returns the host milliseconds from the first queued to
/// that point.
pub(crate) fn multiply_complex_resident<T: Element>(
    gpu: &Gpu,
    form: crate::options::ComplexForm,
    products: &[DeviceGemm<T>],
    opts: &GemmOptions,
    completion: GpuCompletion,
) -> Result<f64, Error> {
    check_resident(opts)?;
    let start = Instant::now();
    if let GpuCompletion::OnStream(stream) = completion {
        gpu.order_after(stream)?;
    }
    let queued = products.iter().try_for_each(|product| {
        opts.check_interrupt()?;
        crate::cuda::kernels::cublas::complex_gemm(gpu, form, *product)
    });
    // What was queued is waited for, or ordered before the caller's
    // stream, on a failure too: the caller may free the operands next.
    let finished = match queued {
        Ok(()) => finish(gpu, completion),
        Err(e) => gpu.synchronize().and(Err(e)),
    };
    finished?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// `products` with each transposed view of A or B copied row-major, once
/// per distinct view (a broadcast operand is copied once), queued on
/// `gpu`'s stream; the copies are returned to be kept until the stream has
/// passed the products (they are freed in stream order when they drop).
#[allow(clippy::type_complexity)]
fn with_row_major_operands<T: Element>(
    gpu: &Gpu,
    products: &[DeviceGemm<T>],
) -> Result<(Vec<DeviceGemm<T>>, Vec<CudaSlice<T>>), Error> {
    let mut copies: Vec<CudaSlice<T>> = Vec::new();
    let mut made: HashMap<(u64, usize, (usize, usize)), Operand> = HashMap::new();
    let mut row_major = |o: Operand, shape: (usize, usize)| -> Result<Operand, Error> {
        if !o.trans {
            return Ok(o);
        }
        if let Some(&copy) = made.get(&(o.ptr, o.ld, shape)) {
            return Ok(copy);
        }
        let copy = crate::cuda::kernels::transpose::row_major_copy::<T>(gpu, o, shape)?;
        let operand = Operand::row_major(copy.device_ptr(&gpu.stream).0, shape.1);
        copies.push(copy);
        made.insert((o.ptr, o.ld, shape), operand);
        Ok(operand)
    };
    let rewritten = products
        .iter()
        .map(|p| {
            let (m, k, n) = p.shape;
            Ok(DeviceGemm {
                a: row_major(p.a, (m, k))?,
                b: row_major(p.b, (k, n))?,
                ..*p
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok((rewritten, copies))
}

/// Queues `products` on `gpu`'s stream one after another and waits for
/// them, or, where `completion` asks and no product keeps temporaries,
/// orders the caller's stream after them; the fast algorithms'
/// temporaries are kept until the stream has passed them, on failure too.
fn run_lane<T: Element>(
    gpu: &Gpu,
    prepared: &(Option<Plan>, ClassicalGemm),
    products: &[DeviceGemm<T>],
    opts: &GemmOptions,
    completion: GpuCompletion,
) -> Result<(), Error> {
    let mut backends = Vec::new();
    let issued = products.iter().try_for_each(|&product| {
        opts.check_interrupt()?;
        backends.push(issue_prepared(gpu, prepared, product, opts)?);
        Ok(())
    });
    let waited = match (&issued, backends.iter().all(Option::is_none)) {
        (Ok(()), true) => finish(gpu, completion),
        _ => gpu.synchronize(),
    };
    drop(backends);
    issued.and(waited)
}

/// The end of a call whose queued work holds no temporaries: the host
/// waits for it, or the caller's stream is ordered after it.
pub(crate) fn finish(gpu: &Gpu, completion: GpuCompletion) -> Result<(), Error> {
    match completion {
        GpuCompletion::Complete => gpu.synchronize(),
        GpuCompletion::OnStream(stream) => gpu.order_before(stream),
    }
}
