//! C ← α·A·B + β·C for matrices in host memory, over every GPU of a team,
//! with the copies hidden behind the products (the cuBLASXt model).
//!
//! B is made resident on every GPU, once: a loader thread copies it in
//! row chunks into page-locked (portable) staging and uploads each chunk
//! to every GPU from there, so the host reads B once whatever the number
//! of GPUs. The rows of A and C are cut into bands, taken dynamically by
//! one worker thread per GPU (a slower GPU takes fewer; the first and the
//! last G bands are short, so that the GPUs start early and finish
//! together): the worker stages
//! its band of A, queues its upload, the product and the download of the
//! band of C, and while the GPU works unstages the previous band into C
//! (β applied there) and stages the next. A GPU's first band multiplies
//! chunk by chunk as B arrives, so no GPU waits for all of B.
//!
//! Waits are bounded (see [`distributed_patience`]); a
//! failing worker stops the others, and every error names its GPU.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use crate::cuda::kernels::gemm::{DeviceGemm, Operand};
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::host_copy::{gather, scatter};
use crate::cuda::runtime::memory::{PinnedStaging, RawDeviceMemory};
use crate::cuda::runtime::transfer::{download_async, upload_2d_async, upload_async};
use crate::cuda::tunables::{
    distributed_patience, CUDA_DISTRIBUTED_POLL, CUDA_HOSTED_BANDS_PER_GPU, CUDA_HOSTED_BAND_ROWS,
    CUDA_HOSTED_B_CHUNK_BYTES, CUDA_HOSTED_EDGE_BAND_DIVISOR, CUDA_HOSTED_MIN_BAND_ROWS,
    CUDA_HOSTED_STAGING_BUFFERS, CUDA_HOSTED_STAGING_BYTES, CUDA_OUT_OF_CORE_ALIGN,
};
use crate::element::Element;
use crate::error::Error;
use crate::gemm::Gemm;
use crate::matrix::{MatMut, MatRef};
use crate::options::GemmOptions;
use crate::system::format_bytes;

/// One GPU's part of a host-resident product, times in seconds from the
/// product's start.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Share {
    /// Bands of C it computed.
    pub bands: usize,
    /// When its first band's product was queued (its buffers allocated).
    pub first_band: f64,
    /// Host seconds it spent copying A into staging.
    pub gather: f64,
    /// Host seconds it spent copying staging into C.
    pub scatter: f64,
    /// Seconds its products took on the GPU (CUDA events), the time the
    /// copies and the start did not hide being the rest.
    pub products: f64,
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

/// How a host-resident product is cut: bands of at most `rows` rows of A
/// and C, which the GPUs take in turn, and B loaded in chunks of
/// `chunk_rows` rows, by which each GPU's first band multiplies as B
/// arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bands {
    /// Rows of a full band.
    pub rows: usize,
    /// Rows of B per chunk.
    pub chunk_rows: usize,
}

impl Bands {
    /// The cut of an m×k×n product of T over `gpus` GPUs that may each
    /// use `budget` bytes: bands of [`band_rows`], or fewer rows (a
    /// multiple of [`CUDA_OUT_OF_CORE_ALIGN`]) where B and two bands each
    /// of A and C would not fit; `None` where not even bands of
    /// [`CUDA_HOSTED_MIN_BAND_ROWS`] rows (or the preferred ones, if fewer)
    /// fit.
    pub fn within<T: Element>(
        (m, k, n): (usize, usize, usize),
        gpus: usize,
        budget: u64,
    ) -> Option<Bands> {
        let preferred = band_rows(m, gpus);
        let words = u128::from(budget) / std::mem::size_of::<T>() as u128;
        let (k128, n128) = (k as u128, n as u128);
        let room = words.checked_sub(k128 * n128)? / (2 * (k128 + n128));
        let rows = if room >= preferred as u128 {
            preferred
        } else {
            let room = room as usize;
            if room >= CUDA_OUT_OF_CORE_ALIGN {
                room - room % CUDA_OUT_OF_CORE_ALIGN
            } else {
                room
            }
        };
        let chunk_bytes = n.max(1) * std::mem::size_of::<T>();
        (rows >= preferred.min(CUDA_HOSTED_MIN_BAND_ROWS)).then(|| Bands {
            rows,
            chunk_rows: (CUDA_HOSTED_B_CHUNK_BYTES / chunk_bytes).clamp(1, k.max(1)),
        })
    }

    /// Device bytes a GPU needs: B, and two bands each of A and C.
    pub fn device_bytes<T: Element>(&self, (_, k, n): (usize, usize, usize)) -> u128 {
        let (rows, k, n) = (self.rows as u128, k as u128, n as u128);
        (k * n + 2 * rows * (k + n)) * std::mem::size_of::<T>() as u128
    }

    /// A line for reports.
    pub fn describe<T: Element>(&self, (m, k, n): (usize, usize, usize)) -> String {
        format!(
            "B resident; bands of {} of A's and C's {m} rows through 2 buffers each; B loaded in chunks of {} rows; GPU buffers {}",
            self.rows.min(m),
            self.chunk_rows.min(k),
            format_bytes(self.device_bytes::<T>((m, k, n)))
        )
    }
}

/// The preferred rows of a band: at most [`CUDA_HOSTED_BAND_ROWS`], and
/// few enough that every GPU gets [`CUDA_HOSTED_BANDS_PER_GPU`] of them.
fn band_rows(m: usize, gpus: usize) -> usize {
    m.div_ceil(gpus * CUDA_HOSTED_BANDS_PER_GPU)
        .clamp(1, CUDA_HOSTED_BAND_ROWS)
}

/// The bands of m rows over `gpus` GPUs, in the order they are taken:
/// contiguous, covering 0..m once, none longer than `full`. Where m
/// allows, the last `gpus` bands are [`CUDA_HOSTED_EDGE_BAND_DIVISOR`]
/// times shorter than the ones before, so that the GPUs finish together,
/// and those before are a multiple of `gpus` in number (GPUs of one speed
/// then take as many each: one band more on half of them cost 15% at
/// n = 32768 on 4 H200s). The first bands are full: a GPU's first band
/// multiplies chunk by chunk as B arrives, and the longer it is, the more
/// of B's loading its products hide.
fn bands(m: usize, gpus: usize, full: usize) -> Vec<std::ops::Range<usize>> {
    let edge = full / CUDA_HOSTED_EDGE_BAND_DIVISOR;
    let even = |from: usize, to: usize, rows: usize| {
        let len = to - from;
        let count = len.div_ceil(rows.max(1)).next_multiple_of(gpus).min(len);
        (0..count).map(move |i| {
            let part = crate::distributed::planner::part(to - from, count, i);
            from + part.start..from + part.end
        })
    };
    if edge == 0 || m < gpus * edge + gpus * full {
        return even(0, m, full).collect();
    }
    let tail = m - gpus * edge;
    even(0, tail, full).chain(even(tail, m, edge)).collect()
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
                processor: gpu.label(),
                reason: "did not finish in time; the product was abandoned".into(),
            });
        }
        std::thread::sleep(CUDA_DISTRIBUTED_POLL);
    }
}

fn fault(gpu: &Gpu, what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Processor {
        processor: gpu.label(),
        reason: format!("{what}: {e:?}"),
    }
}

fn named(gpu: &Gpu, e: Error) -> Error {
    match e {
        Error::Processor { .. } | Error::Interrupted => e,
        other => Error::Processor {
            processor: gpu.label(),
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
    unsafe { upload_async(stream, src, dst, bytes) }.map_err(|e| fault(gpu, "an upload failed", e))
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
    unsafe { download_async(stream, src, dst, bytes) }
        .map_err(|e| fault(gpu, "a download failed", e))
}

/// Queues a copy of `rows` rows of `width` bytes from page-locked host
/// memory at `(src, src_pitch)` to device memory at `(dst, dst_pitch)`.
///
/// # Safety
/// As [`upload`], for every row of both sides.
unsafe fn upload_2d(
    gpu: &Gpu,
    stream: &CudaStream,
    (src, src_pitch): (*const std::ffi::c_void, usize),
    (dst, dst_pitch): (u64, usize),
    (width, rows): (usize, usize),
) -> Result<(), Error> {
    gpu.bind()?;
    // SAFETY: the caller's contract covers both ends.
    unsafe { upload_2d_async(stream, (src, src_pitch), (dst, dst_pitch), (width, rows)) }
        .map_err(|e| fault(gpu, "an upload failed", e))
}

/// An event with timing, for the products' GPU time.
fn record_timed(stream: &CudaStream, gpu: &Gpu) -> Result<CudaEvent, Error> {
    stream
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(|e| fault(gpu, "cannot record an event", e))
}

/// C ← α·A·B + β·C over `gpus` cut as `cut` says, with m, k, n ≥ 1 and
/// options resolved to a GPU algorithm (the boundary's). Each GPU must
/// hold [`Bands::device_bytes`].
pub(crate) fn multiply<T: Element>(
    gpus: &[Arc<Gpu>],
    pools: &StagingPools,
    cut: Bands,
    Gemm {
        alpha,
        a,
        b,
        beta,
        c,
    }: Gemm<'_, T>,
    opts: &GemmOptions,
) -> Result<Report, Error> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let start = Instant::now();
    let deadline = start + distributed_patience((m, k, n), gpus.len());
    let elem = std::mem::size_of::<T>();
    let (rows, chunk_rows) = (cut.rows.clamp(1, m), cut.chunk_rows.clamp(1, k));
    let chunks: Vec<(usize, usize)> = (0..k)
        .step_by(chunk_rows)
        .map(|r| (r, chunk_rows.min(k - r)))
        .collect();

    // The bands of C with their first rows, each taken once by whichever
    // worker reaches it.
    let mut taken: Vec<Mutex<Option<Band<'_, T>>>> = Vec::new();
    let mut rest = c;
    for range in bands(m, gpus.len(), rows) {
        let (head, tail) = rest.split_at_row(range.len());
        taken.push(Mutex::new(Some((range.start, head))));
        rest = tail;
    }
    let bands = taken;
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
    // One channel per GPU: the loader's event for each chunk of B.
    let (senders, receivers): (Vec<Sender<Chunk>>, Vec<Receiver<Chunk>>) =
        gpus.iter().map(|_| channel()).unzip();

    let b_loaded = Mutex::new(0.0);
    let outcome: Vec<Result<Share, Error>> = std::thread::scope(|scope| {
        let loader = {
            let (b_dev, upload_streams, chunks, stop) = (&b_dev, &upload_streams, &chunks, &stop);
            let b_loaded = &b_loaded;
            scope.spawn(move || {
                let result = load_b(
                    gpus,
                    (b, b_dev),
                    (upload_streams, senders),
                    chunks,
                    &pools.portable,
                    deadline,
                );
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
            .zip(&pools.per_gpu)
            .map(|(((gpu, inbox), b_dev), pool)| {
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
                        pool,
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

/// Page-locked staging buffers kept between products (pinning memory
/// costs about a second per few GiB, more than a product's copies): one
/// pool per GPU, and one of portable buffers that every GPU copies from.
pub(crate) struct StagingPools {
    per_gpu: Vec<Mutex<Vec<PinnedStaging>>>,
    portable: Mutex<Vec<PinnedStaging>>,
    // Bound when the pools drop, so that the buffers' frees have a context.
    gpu: Arc<Gpu>,
}

impl StagingPools {
    /// Empty pools for `gpus` (at least one).
    pub fn new(gpus: &[Arc<Gpu>]) -> StagingPools {
        StagingPools {
            per_gpu: gpus.iter().map(|_| Mutex::new(Vec::new())).collect(),
            portable: Mutex::new(Vec::new()),
            gpu: Arc::clone(&gpus[0]),
        }
    }
}

impl Drop for StagingPools {
    fn drop(&mut self) {
        // cuMemFreeHost needs a current context; a failure to bind leaves
        // the buffers to the process's exit (drop cannot report it).
        let _ = self.gpu.bind();
    }
}

/// A ring of page-locked buffers, each reused once the copy that last
/// used it has completed.
struct Ring<'p> {
    buffers: Vec<PinnedStaging>,
    busy: Vec<Option<Arc<CudaEvent>>>,
    next: usize,
    home: &'p Mutex<Vec<PinnedStaging>>,
}

impl<'p> Ring<'p> {
    /// [`CUDA_HOSTED_STAGING_BUFFERS`] buffers of at least `bytes`, from
    /// `home` where it has them.
    fn take(
        home: &'p Mutex<Vec<PinnedStaging>>,
        bytes: usize,
        alloc: impl Fn(usize) -> Result<PinnedStaging, Error>,
    ) -> Result<Ring<'p>, Error> {
        let mut kept = home.lock().expect("staging pool lock");
        let mut buffers = Vec::with_capacity(CUDA_HOSTED_STAGING_BUFFERS);
        while buffers.len() < CUDA_HOSTED_STAGING_BUFFERS {
            match kept.iter().position(|b| b.bytes() >= bytes) {
                Some(i) => buffers.push(kept.swap_remove(i)),
                None => buffers.push(alloc(bytes)?),
            }
        }
        Ok(Ring {
            busy: vec![None; buffers.len()],
            buffers,
            next: 0,
            home,
        })
    }

    /// The next buffer, once its last copy has completed.
    fn next(&mut self, deadline: Instant, gpu: &Gpu) -> Result<usize, Error> {
        let i = self.next;
        self.next = (i + 1) % self.buffers.len();
        if let Some(event) = self.busy[i].take() {
            wait_bounded(&event, deadline, gpu)?;
        }
        Ok(i)
    }

    /// Waits for every copy.
    fn settle(&mut self, deadline: Instant, gpu: &Gpu) -> Result<(), Error> {
        for event in self.busy.iter_mut().filter_map(Option::take) {
            wait_bounded(&event, deadline, gpu)?;
        }
        Ok(())
    }
}

impl Drop for Ring<'_> {
    fn drop(&mut self) {
        // Buffers whose copies may still run are not reused (freeing one
        // waits for them); the others go back to the pool.
        if self.busy.iter().all(Option::is_none) {
            if let Ok(mut kept) = self.home.lock() {
                kept.append(&mut self.buffers);
            }
        }
    }
}

/// Rows of a `cols`-wide matrix of T per staging piece.
fn piece_rows<T>(cols: usize) -> usize {
    (CUDA_HOSTED_STAGING_BYTES / (cols.max(1) * std::mem::size_of::<T>())).max(1)
}

/// The loader: B, piece by piece, into staging and onto every GPU; each
/// GPU's worker gets one event per chunk of `chunks`.
fn load_b<T: Element>(
    gpus: &[Arc<Gpu>],
    (b, b_dev): (MatRef<'_, T>, &[RawDeviceMemory]),
    (streams, senders): (&[Arc<CudaStream>], Vec<Sender<Arc<CudaEvent>>>),
    chunks: &[(usize, usize)],
    pool: &Mutex<Vec<PinnedStaging>>,
    deadline: Instant,
) -> Result<(), Error> {
    let n = b.cols();
    let elem = std::mem::size_of::<T>();
    let rows = piece_rows::<T>(n);
    let mut ring = Ring::take(pool, rows * n * elem, |bytes| {
        PinnedStaging::alloc_portable(&gpus[0], bytes)
    })?;
    // Per buffer, the uploads of every GPU from it (the ring waits for the
    // last one recorded; each GPU's stream runs its uploads in order, so
    // waiting for each GPU's means waiting for them all).
    let mut uploads: Vec<Vec<(usize, Arc<CudaEvent>)>> = vec![Vec::new(); ring.buffers.len()];
    for &(first, count) in chunks {
        for row in (first..first + count).step_by(rows) {
            let take = rows.min(first + count - row);
            let i = ring.next(deadline, &gpus[0])?;
            for (g, event) in uploads[i].drain(..) {
                wait_bounded(&event, deadline, &gpus[g])?;
            }
            let len = take * n;
            // SAFETY: every copy from this buffer has completed (waited
            // above), and it holds at least `len` elements.
            gather(b.submatrix(row, 0, take, n), unsafe {
                ring.buffers[i].as_mut_slice::<T>(len)
            });
            for (g, gpu) in gpus.iter().enumerate() {
                // SAFETY: the buffer is page-locked and portable, holding
                // `len` elements; these rows of B's device copy are written
                // by this copy only.
                unsafe {
                    upload(
                        gpu,
                        &streams[g],
                        ring.buffers[i].ptr(),
                        b_dev[g].ptr + (row * n * elem) as u64,
                        len * elem,
                    )?
                };
                uploads[i].push((g, record(&streams[g], gpu)?));
            }
        }
        for (g, stream) in streams.iter().enumerate() {
            // A worker that stopped has dropped its inbox; the others go on.
            let _ = senders[g].send(record(stream, &gpus[g])?);
        }
    }
    for (i, list) in uploads.iter_mut().enumerate() {
        for (g, event) in list.drain(..) {
            wait_bounded(&event, deadline, &gpus[g])?;
        }
        ring.busy[i] = None;
    }
    ring.settle(deadline, &gpus[0])
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
    pool: &'a Mutex<Vec<PinnedStaging>>,
}

/// A band of C and its first row in C.
type Band<'c, T> = (usize, MatMut<'c, T>);

/// The event of a chunk of B on one GPU.
type Chunk = Arc<CudaEvent>;

/// Pieces of C downloaded into a ring's buffers and not yet in C, in
/// order: (buffer, its download, where it goes).
type Landing<'c, T> = VecDeque<(usize, Arc<CudaEvent>, MatMut<'c, T>)>;

/// A band whose product is queued, for the drainer.
struct Finished<'c, T: Element> {
    c: MatMut<'c, T>,
    slot: usize,
    product: Arc<CudaEvent>,
}

impl<T: Element> Worker<'_, T> {
    /// Takes bands until none are left, with a drainer thread copying
    /// finished bands into C.
    fn run<'c>(
        &self,
        bands: &[Mutex<Option<Band<'c, T>>>],
        next: &AtomicUsize,
        stop: &AtomicBool,
        inbox: Receiver<Arc<CudaEvent>>,
        chunks: &[(usize, usize)],
    ) -> Result<Share, Error> {
        let gpu = self.gpu;
        let k = self.a.cols();
        let (rows, n, elem) = (self.rows, self.n, std::mem::size_of::<T>());
        let device = |bytes: usize| RawDeviceMemory::alloc(gpu, bytes).map_err(|e| named(gpu, e));
        let a_dev = [device(rows * k * elem)?, device(rows * k * elem)?];
        let c_dev = [device(rows * n * elem)?, device(rows * n * elem)?];
        let stream = || {
            gpu.stream
                .fork()
                .map_err(|e| fault(gpu, "cannot create a stream", e))
        };
        let (up, down) = (stream()?, stream()?);
        let (to_drain, drain_inbox) = channel::<Finished<'c, T>>();
        let (freed, freed_inbox) = channel::<Arc<CudaEvent>>();
        let c_ptrs = [c_dev[0].ptr, c_dev[1].ptr];
        std::thread::scope(|scope| {
            let drainer = scope.spawn(|| {
                let result = self.drain(drain_inbox, freed, &down, c_ptrs);
                if result.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                result
            });
            let issued = self.issue(
                (bands, next, stop),
                (inbox, chunks),
                (&a_dev, &c_dev),
                &up,
                to_drain,
                freed_inbox,
            );
            let drained = drainer
                .join()
                .unwrap_or_else(|_| Err(Error::Cuda("a drainer panicked".into())));
            let (mut share, staging) = match (issued, drained) {
                (Err(e), _) if e != Error::Interrupted => return Err(e),
                (_, Err(e)) => return Err(e),
                (Err(e), Ok(_)) => return Err(e),
                (Ok(share), Ok(staging)) => (share, staging),
            };
            gpu.synchronize().map_err(|e| named(gpu, e))?;
            share.scatter += staging;
            share.finished = self.start.elapsed().as_secs_f64();
            Ok(share)
        })
    }

    /// Stages rows `first..first + rows` and columns `col..col + depth` of
    /// A, piece by piece through the ring, and queues their uploads on
    /// `up` into the same place of a band slot of k columns at `dst`
    /// (a 2-D copy when `depth` < k). Returns the host seconds gathering.
    fn stage(
        &self,
        ring: &mut Ring<'_>,
        up: &CudaStream,
        dst: u64,
        (first, rows): (usize, usize),
        (col, depth): (usize, usize),
    ) -> Result<f64, Error> {
        let gpu = self.gpu;
        let (k, elem) = (self.a.cols(), std::mem::size_of::<T>());
        let capacity = ring
            .buffers
            .iter()
            .map(PinnedStaging::bytes)
            .min()
            .unwrap_or(0);
        let per_piece = (capacity / (depth * elem)).max(1);
        let mut seconds = 0.0;
        for row in (0..rows).step_by(per_piece) {
            let take = per_piece.min(rows - row);
            let i = ring.next(self.deadline, gpu)?;
            let started = Instant::now();
            // SAFETY: the buffer's last upload has completed (`next` waited
            // for it), and it holds `capacity` ≥ take·depth elements' bytes.
            gather(self.a.submatrix(first + row, col, take, depth), unsafe {
                ring.buffers[i].as_mut_slice::<T>(take * depth)
            });
            seconds += started.elapsed().as_secs_f64();
            let at = dst + ((row * k + col) * elem) as u64;
            // SAFETY: page-locked staging of take·depth elements, row-major,
            // into rows row..row + take and columns col..col + depth of the
            // slot (k columns, `Bands::device_bytes`), which the product
            // that last read them has finished with (the caller's stream
            // wait).
            unsafe {
                if depth == k {
                    upload(gpu, up, ring.buffers[i].ptr(), at, take * k * elem)?
                } else {
                    upload_2d(
                        gpu,
                        up,
                        (ring.buffers[i].ptr(), depth * elem),
                        (at, k * elem),
                        (depth * elem, take),
                    )?
                }
            };
            ring.busy[i] = Some(record(up, gpu)?);
        }
        Ok(seconds)
    }

    /// The issuing side: stages each band of A it takes, queues its upload
    /// and product, and hands the band to the drainer. A GPU's first band
    /// goes chunk by chunk of B's rows: the columns of A that meet a chunk
    /// are staged and multiplied as soon as that chunk of B is on the GPU,
    /// so the product starts after one chunk rather than after the band
    /// and all of B.
    #[allow(clippy::type_complexity)]
    fn issue<'c>(
        &self,
        (bands, next, stop): (&[Mutex<Option<Band<'c, T>>>], &AtomicUsize, &AtomicBool),
        (inbox, chunks): (Receiver<Arc<CudaEvent>>, &[(usize, usize)]),
        (a_dev, c_dev): (&[RawDeviceMemory; 2], &[RawDeviceMemory; 2]),
        up: &CudaStream,
        to_drain: Sender<Finished<'c, T>>,
        freed: Receiver<Arc<CudaEvent>>,
    ) -> Result<Share, Error> {
        let gpu = self.gpu;
        let k = self.a.cols();
        let (n, elem) = (self.n, std::mem::size_of::<T>());
        let mut share = Share::default();
        let per_piece = piece_rows::<T>(k);
        let mut ring = Ring::take(self.pool, per_piece * k * elem, |bytes| {
            PinnedStaging::alloc(gpu, bytes)
        })?;
        // Per slot, the product that last read its A.
        let mut multiplied: [Option<Arc<CudaEvent>>; 2] = [None, None];
        let mut count = 0;
        let mut b_ready = false;
        // Temporaries of fast algorithms, each kept until its product ran.
        let mut backends: Vec<(Arc<CudaEvent>, Vec<_>)> = Vec::new();
        // Each product's start and end on the GPU.
        let mut timings: Vec<(CudaEvent, CudaEvent)> = Vec::new();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(Error::Interrupted);
            }
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(band) = bands.get(index) else { break };
            let (first_row, c) = band
                .lock()
                .expect("band lock")
                .take()
                .expect("each band is taken once");
            self.opts.check_interrupt()?;
            let slot = count % 2;
            let band_rows = c.rows();
            if let Some(event) = &multiplied[slot] {
                wait_on(up, event, gpu)?;
            }
            let a_op = Operand::row_major(a_dev[slot].ptr, k);
            let c_op = Operand::row_major(c_dev[slot].ptr, n);
            let b_at = |row: usize| Operand::row_major(self.b_dev + (row * n * elem) as u64, n);
            let mut issued = Vec::new();
            let parts: Vec<(usize, usize)> = if b_ready {
                vec![(0, k)]
            } else {
                chunks.to_vec()
            };
            for (i, &(row, depth)) in parts.iter().enumerate() {
                share.gather += self.stage(
                    &mut ring,
                    up,
                    a_dev[slot].ptr,
                    (first_row, band_rows),
                    (row, depth),
                )?;
                let uploaded = record(up, gpu)?;
                wait_on(&gpu.stream, &uploaded, gpu)?;
                if i == 0 && count >= 2 {
                    // The drainer has queued the download of the band that
                    // last held this slot's C.
                    let event = freed.recv().map_err(|_| Error::Interrupted)?;
                    wait_on(&gpu.stream, &event, gpu)?;
                }
                if !b_ready {
                    let event = inbox.recv().map_err(|_| Error::Interrupted)?;
                    wait_on(&gpu.stream, &event, gpu)?;
                }
                let beta = if i == 0 { T::ZERO } else { T::ONE };
                let started = record_timed(&gpu.stream, gpu)?;
                issued.extend(
                    crate::cuda::products::in_core::issue_resident(
                        gpu,
                        DeviceGemm {
                            shape: (band_rows, depth, n),
                            alpha: self.alpha,
                            a: a_op.at::<T>(0, row),
                            b: b_at(row),
                            beta,
                            c: c_op,
                        },
                        self.opts,
                    )
                    .map_err(|e| named(gpu, e))?,
                );
                timings.push((started, record_timed(&gpu.stream, gpu)?));
                if count == 0 && i == 0 {
                    share.first_band = self.start.elapsed().as_secs_f64();
                }
            }
            b_ready = true;
            let product = record(&gpu.stream, gpu)?;
            multiplied[slot] = Some(Arc::clone(&product));
            to_drain
                .send(Finished {
                    c,
                    slot,
                    product: Arc::clone(&product),
                })
                .map_err(|_| Error::Interrupted)?;
            count += 1;
            backends.retain(|(event, _)| !event.is_complete());
            if !issued.is_empty() {
                backends.push((product, issued));
            }
        }
        drop(to_drain);
        if !b_ready {
            // No band reached this GPU: B's uploads must still finish
            // before its memory is freed; the loader waits for them.
            while inbox.recv().is_ok() {}
        }
        ring.settle(self.deadline, gpu)?;
        gpu.synchronize().map_err(|e| named(gpu, e))?;
        drop(backends);
        for (started, ended) in &timings {
            share.products += f64::from(
                started
                    .elapsed_ms(ended)
                    .map_err(|e| fault(gpu, "cannot read the event timer", e))?,
            ) / 1e3;
        }
        share.bands = count;
        Ok(share)
    }

    /// The draining side: each finished band, piece by piece, down into
    /// staging and from there into C (β applied); tells the issuer when a
    /// slot's last download is queued. Returns its host copy seconds.
    fn drain(
        &self,
        inbox: Receiver<Finished<'_, T>>,
        freed: Sender<Arc<CudaEvent>>,
        down: &CudaStream,
        c_dev: [u64; 2],
    ) -> Result<f64, Error> {
        let gpu = self.gpu;
        let (n, elem) = (self.n, std::mem::size_of::<T>());
        let per_piece = piece_rows::<T>(n);
        let mut ring = Ring::take(self.pool, per_piece * n * elem, |bytes| {
            PinnedStaging::alloc(gpu, bytes)
        })?;
        let mut seconds = 0.0;
        // Pieces downloaded and not yet in C, in order.
        let mut pending: Landing<'_, T> = VecDeque::new();
        let mut land = |pending: &mut Landing<'_, T>, ring: &mut Ring<'_>| -> Result<(), Error> {
            if let Some((i, event, dst)) = pending.pop_front() {
                wait_bounded(&event, self.deadline, gpu)?;
                let start = Instant::now();
                let len = dst.rows() * dst.cols();
                // SAFETY: the download into this buffer has completed
                // (waited above); the ring reuses it only after this.
                scatter(
                    unsafe { ring.buffers[i].as_mut_slice::<T>(len) },
                    dst,
                    self.beta,
                );
                seconds += start.elapsed().as_secs_f64();
                ring.busy[i] = None;
            }
            Ok(())
        };
        for band in inbox {
            wait_on(down, &band.product, gpu)?;
            let mut rest = band.c;
            let mut row = 0;
            while rest.rows() > 0 {
                let take = per_piece.min(rest.rows());
                let (piece, tail) = rest.split_at_row(take);
                rest = tail;
                if pending.len() == ring.buffers.len() {
                    land(&mut pending, &mut ring)?;
                }
                let i = ring.next;
                ring.next = (i + 1) % ring.buffers.len();
                // SAFETY: the buffer holds per_piece·n elements and no copy
                // uses it (its piece landed in C above); the slot's C rows
                // were written by the product the stream waited for.
                unsafe {
                    download(
                        gpu,
                        down,
                        c_dev[band.slot] + (row * n * elem) as u64,
                        ring.buffers[i].ptr(),
                        take * n * elem,
                    )?
                };
                let event = record(down, gpu)?;
                ring.busy[i] = Some(Arc::clone(&event));
                pending.push_back((i, event, piece));
                row += take;
            }
            // The slot's C may be overwritten once these downloads ran.
            let _ = freed.send(record(down, gpu)?);
        }
        while !pending.is_empty() {
            land(&mut pending, &mut ring)?;
        }
        Ok(seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_cover_the_rows_once_in_order_and_are_short_at_the_end() {
        for gpus in 1..=8 {
            for m in [
                1, 2, 3, 7, 100, 1023, 4096, 5000, 32768, 65535, 65536, 200_003,
            ] {
                let full = band_rows(m, gpus);
                let list = bands(m, gpus, full);
                assert_eq!(list.first().map(|r| r.start), Some(0), "m {m} G {gpus}");
                assert_eq!(list.last().map(|r| r.end), Some(m), "m {m} G {gpus}");
                for pair in list.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start, "m {m} G {gpus}");
                }
                assert!(list.iter().all(|r| !r.is_empty() && r.len() <= full));
                if m >= 1000 {
                    assert_eq!(list.len() % gpus, 0, "m {m} G {gpus}: {} bands", list.len());
                }
                let edge = full / CUDA_HOSTED_EDGE_BAND_DIVISOR;
                if edge > 0 && m >= gpus * edge + gpus * full {
                    for r in &list[list.len() - gpus..] {
                        assert!(r.len() <= edge, "m {m} G {gpus}: edge band {r:?}");
                    }
                    // The first bands are full (or as near as an even cut
                    // of the rows before the edge allows).
                    for r in &list[..gpus] {
                        assert!(r.len() > edge, "m {m} G {gpus}: first band {r:?}");
                    }
                    assert!(list.len() >= 2 * gpus);
                }
            }
        }
        // 65536 rows on 4 GPUs: 16 bands of 3840, 4 of 1024.
        let lens: Vec<usize> = bands(65536, 4, 4096).iter().map(|r| r.len()).collect();
        let mut want = vec![3840; 16];
        want.extend([1024; 4]);
        assert_eq!(lens, want);
        // A smaller cut: 32768 rows on one GPU in bands of 3968.
        let list = bands(32768, 1, 3968);
        assert!(list.iter().all(|r| r.len() <= 3968));
        assert_eq!(list.last().map(|r| r.len()), Some(992));
    }

    #[test]
    fn bands_within_a_budget_fit_it_or_are_refused() {
        let gib = 1u64 << 30;
        // n = 32768 f32 on one GPU: 6 GiB holds B (4 GiB) and two bands
        // of 4096 rows of A and C exactly; a little less gets 3968 rows.
        let shape = (32768, 32768, 32768);
        let cut = Bands::within::<f32>(shape, 1, 6 * gib).expect("fits");
        assert_eq!(cut.rows, 4096);
        assert_eq!(cut.device_bytes::<f32>(shape), u128::from(6 * gib));
        let cut = Bands::within::<f32>(shape, 1, 6 * gib - 1).expect("fits");
        assert_eq!(cut.rows, 3968);
        assert!(cut.device_bytes::<f32>(shape) <= u128::from(6 * gib - 1));
        // B's chunks: 512 MiB of 32768 f32 columns are 4096 rows.
        assert_eq!(cut.chunk_rows, 4096);
        // B alone does not fit 4 GiB; bands below the minimum are refused.
        assert_eq!(Bands::within::<f32>(shape, 1, 4 * gib), None);
        let least = (4 * gib) + 2 * 1024 * 65536 * 4;
        assert_eq!(
            Bands::within::<f32>(shape, 1, least).map(|c| c.rows),
            Some(1024)
        );
        assert_eq!(Bands::within::<f32>(shape, 1, least - 1), None);
        // Small products take their preferred bands whenever they fit.
        for (m, k, n) in [(1, 1, 1), (7, 3, 5), (1100, 900, 1300)] {
            let preferred = band_rows(m, 2);
            let need = (k * n + 2 * preferred * (k + n)) * 8;
            let cut = Bands::within::<f64>((m, k, n), 2, need as u64).expect("fits");
            assert_eq!(cut.rows, preferred);
            assert!(cut.chunk_rows >= 1 && cut.chunk_rows <= k);
            assert_eq!(Bands::within::<f64>((m, k, n), 2, need as u64 - 1), None);
        }
    }
}
