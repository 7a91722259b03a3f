//! C ← α·A·B + β·C for matrices in host memory, over every GPU of a team,
//! with the copies hidden behind the products (the cuBLASXt model).
//!
//! B is made resident on every GPU, once: a loader thread copies it in
//! row chunks into page-locked (portable) staging and uploads each chunk
//! to every GPU from there, so the host reads B once whatever the number
//! of GPUs. The rows of A and C are cut into bands, taken dynamically by
//! one worker thread per GPU (a slower GPU takes fewer): the worker stages
//! its band of A, queues its upload, the product and the download of the
//! band of C, and while the GPU works unstages the previous band into C
//! (β applied there) and stages the next. A GPU's first band multiplies
//! chunk by chunk as B arrives, so no GPU waits for all of B.
//!
//! Waits are bounded (see [`CUDA_DISTRIBUTED_WAIT_BASE_SECONDS`]); a
//! failing worker stops the others, and every error names its GPU.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{CudaEvent, CudaStream};

use crate::cuda::device::Gpu;
use crate::cuda::gemm::Operand;
use crate::cuda::memory::{PinnedStaging, RawDeviceMemory};
use crate::cuda::out_of_core::pipeline::{gather, scatter};
use crate::cuda::tunables::{
    CUDA_DISTRIBUTED_POLL, CUDA_DISTRIBUTED_WAIT_BASE_SECONDS,
    CUDA_DISTRIBUTED_WAIT_SECONDS_PER_PFLOP, CUDA_HOSTED_BANDS_PER_GPU, CUDA_HOSTED_BAND_ROWS,
    CUDA_HOSTED_B_CHUNK_BYTES,
};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::GemmOptions;

/// One GPU's part of a host-resident product, times in seconds from the
/// product's start.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Share {
    /// Bands of C it computed.
    pub bands: usize,
    /// When its first band's product was queued (its buffers allocated).
    pub first_band: f64,
    /// Host seconds it spent staging A and unstaging C.
    pub staging: f64,
    /// When its last band landed in C.
    pub finished: f64,
}

/// What a host-resident team product did.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// Seconds from the start (allocations included) to C complete.
    pub seconds: f64,
    /// Each GPU's part.
    pub shares: Vec<Share>,
    /// When the last chunk of B was on every GPU.
    pub b_loaded: f64,
    /// Bytes copied to the GPUs.
    pub upload_bytes: u64,
    /// Bytes copied back.
    pub download_bytes: u64,
}

/// The rows of a band: at most [`CUDA_HOSTED_BAND_ROWS`], and small enough
/// that every GPU gets [`CUDA_HOSTED_BANDS_PER_GPU`] of them.
fn band_rows(m: usize, gpus: usize) -> usize {
    m.div_ceil(gpus * CUDA_HOSTED_BANDS_PER_GPU)
        .clamp(1, CUDA_HOSTED_BAND_ROWS)
}

/// Device bytes a GPU needs: B, and two bands each of A and C.
pub(crate) fn device_bytes<T: Element>((m, k, n): (usize, usize, usize), gpus: usize) -> u128 {
    let rows = band_rows(m, gpus) as u128;
    let (k, n) = (k as u128, n as u128);
    (k * n + 2 * rows * (k + n)) * std::mem::size_of::<T>() as u128
}

/// How long a wait may take before the product is abandoned.
fn patience((m, k, n): (usize, usize, usize), gpus: usize) -> Duration {
    let per_gpu = 2.0 * m as f64 * k as f64 * n as f64 / gpus as f64;
    Duration::from_secs_f64(
        CUDA_DISTRIBUTED_WAIT_BASE_SECONDS
            + CUDA_DISTRIBUTED_WAIT_SECONDS_PER_PFLOP * per_gpu / 1e15,
    )
}

/// Waits for `event` until `deadline`, polling; `gpu` names the device.
fn wait_bounded(event: &CudaEvent, deadline: Instant, gpu: &Gpu) -> Result<(), Error> {
    loop {
        match event.try_is_complete() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => return Err(fault(gpu, "a copy or a product failed", e)),
        }
        if Instant::now() > deadline {
            return Err(Error::Processor {
                processor: format!("cuda:{}", gpu.info().ordinal),
                reason: "did not finish in time; the product was abandoned".into(),
            });
        }
        std::thread::sleep(CUDA_DISTRIBUTED_POLL);
    }
}

fn fault(gpu: &Gpu, what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Processor {
        processor: format!("cuda:{}", gpu.info().ordinal),
        reason: format!("{what}: {e:?}"),
    }
}

fn named(gpu: &Gpu, e: Error) -> Error {
    match e {
        Error::Processor { .. } | Error::Interrupted => e,
        other => Error::Processor {
            processor: format!("cuda:{}", gpu.info().ordinal),
            reason: other.to_string(),
        },
    }
}

fn record(stream: &CudaStream, gpu: &Gpu) -> Result<Arc<CudaEvent>, Error> {
    stream
        .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
        .map(Arc::new)
        .map_err(|e| fault(gpu, "cannot record an event", e))
}

fn wait_on(stream: &CudaStream, event: &CudaEvent, gpu: &Gpu) -> Result<(), Error> {
    stream
        .wait(event)
        .map_err(|e| fault(gpu, "a stream cannot wait for an event", e))
}

/// Queues a copy of `bytes` from page-locked host memory to the device.
///
/// # Safety
/// `src` is page-locked host memory of at least `bytes`, and `dst` device
/// memory of `gpu` of at least `bytes`, neither used otherwise until the
/// copy completes.
unsafe fn upload(
    gpu: &Gpu,
    stream: &CudaStream,
    src: *const std::ffi::c_void,
    dst: u64,
    bytes: usize,
) -> Result<(), Error> {
    gpu.bind()?;
    // SAFETY: the caller's contract covers both ends.
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream.cu_stream()) }
        .result()
        .map_err(|e| fault(gpu, "an upload failed", e))
}

/// Queues a copy of `bytes` from the device to page-locked host memory.
///
/// # Safety
/// As [`upload`], the other way.
unsafe fn download(
    gpu: &Gpu,
    stream: &CudaStream,
    src: u64,
    dst: *mut std::ffi::c_void,
    bytes: usize,
) -> Result<(), Error> {
    gpu.bind()?;
    // SAFETY: the caller's contract covers both ends.
    unsafe { sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, stream.cu_stream()) }
        .result()
        .map_err(|e| fault(gpu, "a download failed", e))
}

/// C ← α·A·B + β·C over `gpus`, with m, k, n ≥ 1 and options resolved
/// to a GPU algorithm (the boundary's). Each GPU must hold
/// [`device_bytes`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn multiply<T: Element>(
    gpus: &[Arc<Gpu>],
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<Report, Error> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let start = Instant::now();
    let deadline = start + patience((m, k, n), gpus.len());
    let elem = std::mem::size_of::<T>();
    let rows = band_rows(m, gpus.len());
    let chunk_rows = (CUDA_HOSTED_B_CHUNK_BYTES / (n * elem)).clamp(1, k);
    let chunks: Vec<(usize, usize)> = (0..k)
        .step_by(chunk_rows)
        .map(|r| (r, chunk_rows.min(k - r)))
        .collect();

    // The bands of C, each taken once by whichever worker reaches it.
    let mut bands: Vec<Mutex<Option<MatMut<'_, T>>>> = Vec::new();
    let mut rest = c;
    while rest.rows() > rows {
        let (head, tail) = rest.split_at_row(rows);
        bands.push(Mutex::new(Some(head)));
        rest = tail;
    }
    bands.push(Mutex::new(Some(rest)));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);

    // B on every GPU.
    let b_dev: Vec<RawDeviceMemory> = gpus
        .iter()
        .map(|gpu| RawDeviceMemory::alloc(gpu, k * n * elem).map_err(|e| named(gpu, e)))
        .collect::<Result<_, _>>()?;
    let upload_streams: Vec<Arc<CudaStream>> = gpus
        .iter()
        .map(|gpu| {
            gpu.stream
                .fork()
                .map_err(|e| fault(gpu, "cannot create a stream", e))
        })
        .collect::<Result<_, _>>()?;
    let (senders, receivers): (Vec<Sender<Arc<CudaEvent>>>, Vec<Receiver<Arc<CudaEvent>>>) =
        gpus.iter().map(|_| channel()).unzip();

    let b_loaded = Mutex::new(0.0);
    let outcome: Vec<Result<Share, Error>> = std::thread::scope(|scope| {
        let loader = {
            let (b_dev, upload_streams, chunks, stop) = (&b_dev, &upload_streams, &chunks, &stop);
            let b_loaded = &b_loaded;
            scope.spawn(move || {
                let result = load_b(gpus, b, b_dev, upload_streams, chunks, senders, deadline);
                match &result {
                    Ok(()) => {
                        *b_loaded.lock().expect("timing lock") = start.elapsed().as_secs_f64()
                    }
                    Err(_) => stop.store(true, Ordering::Relaxed),
                }
                result
            })
        };
        let workers: Vec<_> = gpus
            .iter()
            .zip(receivers)
            .zip(&b_dev)
            .map(|((gpu, inbox), b_dev)| {
                let (bands, next, stop, chunks) = (&bands, &next, &stop, &chunks);
                scope.spawn(move || {
                    let work = Worker {
                        gpu,
                        alpha,
                        beta,
                        a,
                        b_dev: b_dev.ptr,
                        n,
                        rows,
                        opts,
                        deadline,
                        start,
                    };
                    let result = work.run(bands, next, stop, inbox, chunks);
                    if result.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        let mut outcomes: Vec<Result<Share, Error>> = workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(Error::Cuda("a GPU worker panicked".into())))
            })
            .collect();
        let loaded = loader
            .join()
            .unwrap_or_else(|_| Err(Error::Cuda("the loader of B panicked".into())));
        if let Err(e) = loaded {
            outcomes.push(Err(e));
        }
        outcomes
    });
    // The first real failure: a worker that stopped because another did
    // reports `Interrupted`, which is the answer only when nothing else
    // failed (the caller's interrupt).
    let (done, failed): (Vec<_>, Vec<_>) = outcome.into_iter().partition(Result::is_ok);
    let mut failed: Vec<Error> = failed.into_iter().filter_map(Result::err).collect();
    failed.sort_by_key(|e| *e == Error::Interrupted);
    if let Some(e) = failed.into_iter().next() {
        return Err(e);
    }
    let done: Vec<Share> = done.into_iter().filter_map(Result::ok).collect();
    opts.check_interrupt()?;
    let g = gpus.len() as u64;
    Ok(Report {
        seconds: start.elapsed().as_secs_f64(),
        shares: done,
        b_loaded: b_loaded.into_inner().unwrap_or(0.0),
        upload_bytes: ((k * n) as u64 * g + (m * k) as u64) * elem as u64,
        download_bytes: (m * n * elem) as u64,
    })
}

/// The loader: B, chunk by chunk, into staging and onto every GPU; each
/// GPU's worker gets one event per chunk.
fn load_b<T: Element>(
    gpus: &[Arc<Gpu>],
    b: MatRef<'_, T>,
    b_dev: &[RawDeviceMemory],
    streams: &[Arc<CudaStream>],
    chunks: &[(usize, usize)],
    senders: Vec<Sender<Arc<CudaEvent>>>,
    deadline: Instant,
) -> Result<(), Error> {
    let n = b.cols();
    let elem = std::mem::size_of::<T>();
    let most = chunks.iter().map(|c| c.1).max().unwrap_or(1) * n * elem;
    // Two buffers: one fills while the other uploads.
    let mut staging = [
        PinnedStaging::alloc_portable(&gpus[0], most)?,
        PinnedStaging::alloc_portable(&gpus[0], most)?,
    ];
    let mut in_flight: [Vec<(usize, Arc<CudaEvent>)>; 2] = [Vec::new(), Vec::new()];
    for (index, &(row, count)) in chunks.iter().enumerate() {
        let slot = index % 2;
        for (g, event) in in_flight[slot].drain(..) {
            wait_bounded(&event, deadline, &gpus[g])?;
        }
        let len = count * n;
        // SAFETY: the buffer's earlier uploads have completed (waited
        // above), and it holds `most` ≥ len elements.
        let host = unsafe { staging[slot].as_mut_slice::<T>(len) };
        gather(b.submatrix(row, 0, count, n), host);
        for (g, gpu) in gpus.iter().enumerate() {
            // SAFETY: the staging buffer is page-locked (portable: every
            // context may copy from it) with `len` elements, and the chunk's
            // rows of B's device copy are written by this copy only.
            unsafe {
                upload(
                    gpu,
                    &streams[g],
                    staging[slot].ptr(),
                    b_dev[g].ptr + (row * n * elem) as u64,
                    len * elem,
                )?
            };
            let event = record(&streams[g], gpu)?;
            in_flight[slot].push((g, Arc::clone(&event)));
            // A worker that stopped has dropped its inbox; the others go on.
            let _ = senders[g].send(event);
        }
    }
    for slot in &mut in_flight {
        for (g, event) in slot.drain(..) {
            wait_bounded(&event, deadline, &gpus[g])?;
        }
    }
    Ok(())
}

/// One GPU's share of a host-resident product.
struct Worker<'a, T: Element> {
    gpu: &'a Gpu,
    alpha: T,
    beta: T,
    a: MatRef<'a, T>,
    b_dev: u64,
    n: usize,
    rows: usize,
    opts: &'a GemmOptions,
    deadline: Instant,
    start: Instant,
}

/// A band in flight on a GPU slot.
struct InFlight<'c, T: Element> {
    c: MatMut<'c, T>,
    downloaded: Arc<CudaEvent>,
    slot: usize,
}

impl<T: Element> Worker<'_, T> {
    /// Takes bands until none are left; returns how many it computed.
    fn run<'c>(
        &self,
        bands: &[Mutex<Option<MatMut<'c, T>>>],
        next: &AtomicUsize,
        stop: &AtomicBool,
        inbox: Receiver<Arc<CudaEvent>>,
        chunks: &[(usize, usize)],
    ) -> Result<Share, Error> {
        let gpu = self.gpu;
        let mut share = Share::default();
        let k = self.a.cols();
        let (rows, n, elem) = (self.rows, self.n, std::mem::size_of::<T>());
        let a_dev = [
            RawDeviceMemory::alloc(gpu, rows * k * elem).map_err(|e| named(gpu, e))?,
            RawDeviceMemory::alloc(gpu, rows * k * elem).map_err(|e| named(gpu, e))?,
        ];
        let c_dev = [
            RawDeviceMemory::alloc(gpu, rows * n * elem).map_err(|e| named(gpu, e))?,
            RawDeviceMemory::alloc(gpu, rows * n * elem).map_err(|e| named(gpu, e))?,
        ];
        let mut a_host = [
            PinnedStaging::alloc(gpu, rows * k * elem)?,
            PinnedStaging::alloc(gpu, rows * k * elem)?,
        ];
        let mut c_host = [
            PinnedStaging::alloc(gpu, rows * n * elem)?,
            PinnedStaging::alloc(gpu, rows * n * elem)?,
        ];
        let up = gpu
            .stream
            .fork()
            .map_err(|e| fault(gpu, "cannot create a stream", e))?;
        let down = gpu
            .stream
            .fork()
            .map_err(|e| fault(gpu, "cannot create a stream", e))?;
        // Per slot: the upload that last filled it, the product that last
        // read its A and wrote its C.
        let mut uploaded: [Option<Arc<CudaEvent>>; 2] = [None, None];
        let mut multiplied: [Option<Arc<CudaEvent>>; 2] = [None, None];
        let mut previous: Option<InFlight<'c, T>> = None;
        let mut count = 0;
        let mut b_ready = false;
        // Temporaries of fast algorithms, each kept until its product ran.
        let mut backends: Vec<(Arc<CudaEvent>, Vec<_>)> = Vec::new();
        let mut issued = Vec::new();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(Error::Interrupted);
            }
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(band) = bands.get(index) else { break };
            let c = band
                .lock()
                .expect("band lock")
                .take()
                .expect("each band is taken once");
            self.opts.check_interrupt()?;
            let slot = count % 2;
            let band_rows = c.rows();
            let a_band = self.a.submatrix(index * rows, 0, band_rows, k);
            if let Some(event) = uploaded[slot].take() {
                wait_bounded(&event, self.deadline, gpu)?;
            }
            let staging = Instant::now();
            // SAFETY: the slot's last upload has completed (waited above).
            gather(a_band, unsafe {
                a_host[slot].as_mut_slice::<T>(band_rows * k)
            });
            share.staging += staging.elapsed().as_secs_f64();
            if let Some(event) = &multiplied[slot] {
                wait_on(&up, event, gpu)?;
            }
            // SAFETY: page-locked staging of band_rows·k elements to the
            // slot's device buffer of that size, which the product that read
            // it last has finished with (the stream waits above).
            unsafe {
                upload(
                    gpu,
                    &up,
                    a_host[slot].ptr(),
                    a_dev[slot].ptr,
                    band_rows * k * elem,
                )?
            };
            let up_done = record(&up, gpu)?;
            uploaded[slot] = Some(Arc::clone(&up_done));
            wait_on(&gpu.stream, &up_done, gpu)?;
            let a_op = Operand {
                ptr: a_dev[slot].ptr,
                ld: k,
            };
            let c_op = Operand {
                ptr: c_dev[slot].ptr,
                ld: n,
            };
            if !b_ready {
                // The first band: chunk by chunk, as B arrives.
                for (i, &(row, depth)) in chunks.iter().enumerate() {
                    let event = inbox.recv().map_err(|_| Error::Interrupted)?;
                    wait_on(&gpu.stream, &event, gpu)?;
                    let accumulate = if i == 0 { T::ZERO } else { T::ONE };
                    issued.extend(
                        crate::cuda::product::issue_resident(
                            gpu,
                            self.alpha,
                            (
                                a_op.at::<T>(0, row),
                                Operand {
                                    ptr: self.b_dev + (row * n * elem) as u64,
                                    ld: n,
                                },
                            ),
                            accumulate,
                            c_op,
                            (band_rows, depth, n),
                            self.opts,
                        )
                        .map_err(|e| named(gpu, e))?,
                    );
                }
                b_ready = true;
            } else {
                issued.extend(
                    crate::cuda::product::issue_resident(
                        gpu,
                        self.alpha,
                        (
                            a_op,
                            Operand {
                                ptr: self.b_dev,
                                ld: n,
                            },
                        ),
                        T::ZERO,
                        c_op,
                        (band_rows, k, n),
                        self.opts,
                    )
                    .map_err(|e| named(gpu, e))?,
                );
            }
            if count == 0 {
                share.first_band = self.start.elapsed().as_secs_f64();
            }
            let product_done = record(&gpu.stream, gpu)?;
            multiplied[slot] = Some(Arc::clone(&product_done));
            wait_on(&down, &product_done, gpu)?;
            // SAFETY: the slot's C buffer holds band_rows·n elements written
            // by the product waited for above; its staging buffer was last
            // read by the host when the band two back was unstaged.
            unsafe {
                download(
                    gpu,
                    &down,
                    c_dev[slot].ptr,
                    c_host[slot].ptr(),
                    band_rows * n * elem,
                )?
            };
            let downloaded = record(&down, gpu)?;
            // While the GPU works on this band, the previous one lands in C.
            if let Some(done) = previous.take() {
                share.staging += self.unstage(done, &mut c_host)?;
            }
            previous = Some(InFlight {
                c,
                downloaded,
                slot,
            });
            count += 1;
            backends.retain(|(event, _)| !event.is_complete());
            if !issued.is_empty() {
                backends.push((product_done, std::mem::take(&mut issued)));
            }
        }
        if let Some(done) = previous.take() {
            share.staging += self.unstage(done, &mut c_host)?;
        }
        if !b_ready {
            // No band reached this GPU: drain its share of B's events so
            // the loader is not left with a full channel (it never blocks,
            // but its uploads must finish before B's memory is freed).
            while inbox.recv().is_ok() {}
        }
        gpu.synchronize().map_err(|e| named(gpu, e))?;
        drop(backends);
        share.bands = count;
        share.finished = self.start.elapsed().as_secs_f64();
        Ok(share)
    }

    /// Waits for a band's download and copies it into C (with β); returns
    /// the seconds the copy took.
    fn unstage(
        &self,
        done: InFlight<'_, T>,
        c_host: &mut [PinnedStaging; 2],
    ) -> Result<f64, Error> {
        wait_bounded(&done.downloaded, self.deadline, self.gpu)?;
        let start = Instant::now();
        let len = done.c.rows() * done.c.cols();
        // SAFETY: the download into this buffer has completed (waited
        // above) and the next one into it is queued only after this
        // returns.
        let src = unsafe { c_host[done.slot].as_mut_slice::<T>(len) };
        scatter(src, done.c, self.beta);
        Ok(start.elapsed().as_secs_f64())
    }
}
