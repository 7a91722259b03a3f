//! Runs a [`Schedule`] with three host threads and three streams, as
//! cuBLASXt does, so that copies hide behind the products:
//!
//! - the *feeder* copies each panel of A or B, in chunks, from the host
//!   matrix into page-locked staging buffers and from there to its GPU slot
//!   on the upload stream, after the product that last read the slot;
//! - the *issuer* (the calling thread) queues each product on the GPU's
//!   own stream once its panels' uploads are queued, and after the
//!   download of the tile that last held its C slot;
//! - the *drainer* copies each finished C tile, in chunks, to staging
//!   buffers on the download stream and from there into C (with β).
//!
//! The threads hand each other CUDA events in schedule order over
//! channels; a stream only ever waits on an event already recorded, so
//! the GPU cannot deadlock, and a thread that fails drops its channels,
//! which stops the others.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use super::plan::{Block, Operand as Input, Schedule};
use crate::cuda::kernels::gemm::{DeviceGemm, Operand};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::host_copy::{gather, scatter};
use crate::cuda::runtime::memory::{PinnedStaging, RawDeviceMemory};
use crate::cuda::runtime::transfer::{download_async, upload_async};
use crate::cuda::tunables::{CUDA_OUT_OF_CORE_CHUNKS, CUDA_OUT_OF_CORE_CHUNK_BYTES};
use crate::element::Element;
use crate::error::Error;
use crate::gemm::Gemm;
use crate::matrix::{MatMut, MatRef};

/// GPU buffers of a plan: slots of A, B and C.
pub(super) struct Slots {
    a: Vec<RawDeviceMemory>,
    b: Vec<RawDeviceMemory>,
    c: Vec<RawDeviceMemory>,
}

impl Slots {
    /// Allocates `counts` slots of `bytes` each for A, B and C.
    pub fn alloc(gpu: &Gpu, counts: [usize; 3], bytes: [usize; 3]) -> Result<Slots, Error> {
        let many = |count: usize, bytes: usize| {
            (0..count)
                .map(|_| RawDeviceMemory::alloc(gpu, bytes))
                .collect::<Result<Vec<_>, Error>>()
        };
        Ok(Slots {
            a: many(counts[0], bytes[0])?,
            b: many(counts[1], bytes[1])?,
            c: many(counts[2], bytes[2])?,
        })
    }
}

/// What the pipeline measured.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Measured {
    /// Sum of the products' times on the GPU (CUDA events), ms.
    pub products_ms: f64,
    /// Seconds the feeder spent copying A and B into staging.
    pub gather_seconds: f64,
    /// Seconds the drainer spent copying staging into C.
    pub scatter_seconds: f64,
}

/// Why a stage stopped.
enum Stop {
    /// Another stage stopped first (its channel closed).
    Upstream,
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Failed(e)
    }
}

/// Events received in schedule order, kept by index.
struct Inbox {
    from: Receiver<Arc<CudaEvent>>,
    got: Vec<Arc<CudaEvent>>,
}

impl Inbox {
    fn new(from: Receiver<Arc<CudaEvent>>) -> Inbox {
        Inbox {
            from,
            got: Vec::new(),
        }
    }

    /// Event `index`, waiting for its sender to record it.
    fn get(&mut self, index: usize) -> Result<&CudaEvent, Stop> {
        while self.got.len() <= index {
            self.got.push(self.from.recv().map_err(|_| Stop::Upstream)?);
        }
        Ok(&self.got[index])
    }
}

fn record(stream: &CudaStream, flags: CUevent_flags) -> Result<Arc<CudaEvent>, Error> {
    stream
        .record_event(Some(flags))
        .map(Arc::new)
        .map_err(|e| cuda_err("cannot record an event", e))
}

/// An event the host waits on without spinning a core (the copy threads'
/// cores do the staging).
fn record_for_host(stream: &CudaStream) -> Result<Arc<CudaEvent>, Error> {
    record(stream, CUevent_flags::CU_EVENT_BLOCKING_SYNC)
}

fn record_for_streams(stream: &CudaStream) -> Result<Arc<CudaEvent>, Error> {
    record(stream, CUevent_flags::CU_EVENT_DISABLE_TIMING)
}

fn wait(stream: &CudaStream, event: &CudaEvent) -> Result<(), Error> {
    stream
        .wait(event)
        .map_err(|e| cuda_err("a stream cannot wait for an event", e))
}

fn host_wait(event: &CudaEvent) -> Result<(), Error> {
    event
        .synchronize()
        .map_err(|e| cuda_err("a copy failed", e))
}

/// A rows×cols block cut into pieces of at most `bytes` that are each
/// contiguous in the block's row-major order (so one copy moves each):
/// runs of whole rows, or, when one row is larger, segments of a row.
fn pieces(rows: usize, cols: usize, elem: usize, bytes: usize) -> Vec<Block> {
    let row_bytes = cols.max(1) * elem;
    if row_bytes <= bytes {
        let per = bytes / row_bytes;
        return (0..rows)
            .step_by(per)
            .map(|row| Block {
                row,
                col: 0,
                rows: per.min(rows - row),
                cols,
            })
            .collect();
    }
    let per = (bytes / elem).max(1);
    (0..rows)
        .flat_map(|row| {
            (0..cols).step_by(per).map(move |col| Block {
                row,
                col,
                rows: 1,
                cols: per.min(cols - col),
            })
        })
        .collect()
}

fn submatrix<'a, T: Element>(m: MatRef<'a, T>, b: Block) -> MatRef<'a, T> {
    m.submatrix(b.row, b.col, b.rows, b.cols)
}

/// The feeder: every upload of the schedule, in order.
fn feed<T: Element>(
    gpu: &Gpu,
    stream: &CudaStream,
    (schedule, slots): (&Schedule, &Slots),
    (a, b): (MatRef<'_, T>, MatRef<'_, T>),
    (mut staging, staging_bytes): (Vec<PinnedStaging>, usize),
    (products, ready): (Receiver<Arc<CudaEvent>>, Sender<Arc<CudaEvent>>),
) -> Result<f64, Stop> {
    let elem = std::mem::size_of::<T>();
    let mut gathering = 0.0;
    let mut products = Inbox::new(products);
    let mut in_flight: Vec<Option<Arc<CudaEvent>>> = vec![None; staging.len()];
    let mut next = 0;
    let result = (|| -> Result<(), Stop> {
        for upload in &schedule.uploads {
            if let Some(task) = upload.after_task {
                wait(stream, products.get(task)?)?;
            }
            let (view, slot) = match upload.operand {
                Input::A => (submatrix(a, upload.block), &slots.a[upload.slot]),
                Input::B => (submatrix(b, upload.block), &slots.b[upload.slot]),
            };
            let (rows, cols) = view.shape();
            for piece in pieces(rows, cols, elem, staging_bytes) {
                if let Some(event) = in_flight[next].take() {
                    host_wait(&event)?;
                }
                let buffer = &mut staging[next];
                // SAFETY: the buffer's last copy is complete (waited on
                // above), and the piece fits it (at most `staging_bytes`).
                let host = unsafe { buffer.as_mut_slice::<T>(piece.elements()) };
                let started = std::time::Instant::now();
                gather(submatrix(view, piece), host);
                gathering += started.elapsed().as_secs_f64();
                let bytes = piece.elements() * elem;
                let offset = ((piece.row * cols + piece.col) * elem) as u64;
                gpu.bind()?;
                // SAFETY: the slot holds the panel (rows·cols elements at
                // its depth and width, `Tiling::device_bytes`), the staging
                // buffer `bytes` bytes; the buffer is not touched again
                // until the event recorded next completes.
                unsafe { upload_async(stream, buffer.ptr(), slot.ptr + offset, bytes) }
                    .map_err(|e| cuda_err("a copy to the GPU failed", e))?;
                in_flight[next] = Some(record_for_host(stream)?);
                next = (next + 1) % staging.len();
            }
            ready
                .send(record_for_streams(stream)?)
                .map_err(|_| Stop::Upstream)?;
        }
        Ok(())
    })();
    // The staging buffers are freed when this returns: their copies first.
    let drained = stream
        .synchronize()
        .map_err(|e| cuda_err("a copy to the GPU failed", e));
    result?;
    drained?;
    Ok(gathering)
}

/// A finished tile: its index, and the event after its last product.
type Finished = (usize, Arc<CudaEvent>);

/// The drainer: every finished tile, in order, into C.
fn drain<T: Element>(
    gpu: &Gpu,
    stream: &CudaStream,
    (schedule, slots): (&Schedule, &Slots),
    (mut c, beta): (MatMut<'_, T>, T),
    (mut staging, staging_bytes): (Vec<PinnedStaging>, usize),
    (finished, downloaded): (Receiver<Finished>, Sender<Arc<CudaEvent>>),
) -> Result<f64, Stop> {
    let elem = std::mem::size_of::<T>();
    let mut scattering = 0.0;
    // Copies in flight: (buffer, its event, the rows of C it holds).
    let mut pending: VecDeque<(usize, Arc<CudaEvent>, Block)> = VecDeque::new();
    let mut next = 0;
    let mut land = |pending: &mut VecDeque<(usize, Arc<CudaEvent>, Block)>,
                    staging: &mut Vec<PinnedStaging>|
     -> Result<(), Stop> {
        if let Some((buffer, event, rows)) = pending.pop_front() {
            host_wait(&event)?;
            // SAFETY: the buffer's copy is complete (waited on above).
            let host = unsafe { staging[buffer].as_mut_slice::<T>(rows.elements()) };
            let started = std::time::Instant::now();
            scatter(
                host,
                c.rb_mut()
                    .submatrix(rows.row, rows.col, rows.rows, rows.cols),
                beta,
            );
            scattering += started.elapsed().as_secs_f64();
        }
        Ok(())
    };
    let result = (|| -> Result<(), Stop> {
        for (expected, (tile_index, product)) in finished.iter().enumerate() {
            debug_assert_eq!(tile_index, expected, "tiles finish in order");
            wait(stream, &product)?;
            let tile = schedule.tiles[tile_index];
            let slot = &slots.c[tile.slot];
            let (rows, cols) = (tile.block.rows, tile.block.cols);
            for piece in pieces(rows, cols, elem, staging_bytes) {
                if pending.len() == staging.len() {
                    land(&mut pending, &mut staging)?;
                }
                let bytes = piece.elements() * elem;
                let offset = ((piece.row * cols + piece.col) * elem) as u64;
                gpu.bind()?;
                // SAFETY: the slot holds the tile (rows·cols elements), the
                // buffer `bytes` bytes and no other copy: buffers are used
                // in turn and the oldest was landed above when all were
                // busy.
                unsafe { download_async(stream, slot.ptr + offset, staging[next].ptr(), bytes) }
                    .map_err(|e| cuda_err("a copy from the GPU failed", e))?;
                let block = Block {
                    row: tile.block.row + piece.row,
                    col: tile.block.col + piece.col,
                    ..piece
                };
                pending.push_back((next, record_for_host(stream)?, block));
                next = (next + 1) % staging.len();
            }
            // The slot may take its next tile once these copies are done;
            // the issuer may have stopped, which ends the loop below.
            let _ = downloaded.send(record_for_streams(stream)?);
        }
        while !pending.is_empty() {
            land(&mut pending, &mut staging)?;
        }
        Ok(())
    })();
    let drained = stream
        .synchronize()
        .map_err(|e| cuda_err("a copy from the GPU failed", e));
    result?;
    drained?;
    Ok(scattering)
}

/// C ← α·A·B + β·C by `schedule` on `slots`, each product by `product`.
pub(super) fn execute<T: Element>(
    gpu: &Gpu,
    product: &mut super::TileProduct<'_, T>,
    schedule: &Schedule,
    slots: &Slots,
    Gemm {
        alpha,
        a,
        b,
        beta,
        c,
    }: Gemm<'_, T>,
) -> Result<Measured, Error> {
    let new_stream = || {
        gpu.ctx
            .new_stream()
            .map_err(|e| cuda_err("cannot create a stream", e))
    };
    let (upload_stream, download_stream) = (new_stream()?, new_stream()?);
    // Page-locking costs about as much as a copy, so small products get
    // buffers no larger than their largest panel or tile.
    let elem = std::mem::size_of::<T>();
    let largest = |blocks: &mut dyn Iterator<Item = Block>| {
        blocks.map(|b| b.elements() * elem).max().unwrap_or(elem)
    };
    let staging = |largest: usize| {
        let bytes = largest.min(CUDA_OUT_OF_CORE_CHUNK_BYTES);
        let count = largest.div_ceil(bytes).clamp(1, CUDA_OUT_OF_CORE_CHUNKS);
        let buffers = (0..count)
            .map(|_| PinnedStaging::alloc(gpu, bytes))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok::<_, Error>((buffers, bytes))
    };
    let up_staging = staging(largest(&mut schedule.uploads.iter().map(|u| u.block)))?;
    let down_staging = staging(largest(&mut schedule.tiles.iter().map(|t| t.block)))?;
    let (products_tx, products_rx) = channel();
    let (ready_tx, ready_rx) = channel();
    let (finished_tx, finished_rx) = channel();
    let (downloaded_tx, downloaded_rx) = channel();
    let compute = &gpu.stream;
    let (issued, fed, drained) = std::thread::scope(|scope| {
        let feeder = scope.spawn(|| {
            feed(
                gpu,
                &upload_stream,
                (schedule, slots),
                (a, b),
                up_staging,
                (products_rx, ready_tx),
            )
        });
        let drainer = scope.spawn(|| {
            drain(
                gpu,
                &download_stream,
                (schedule, slots),
                (c, beta),
                down_staging,
                (finished_rx, downloaded_tx),
            )
        });
        // Moved in, so that the issuer's channel ends close when it returns.
        let issued = (move || -> Result<Measured, Stop> {
            let mut ready = Inbox::new(ready_rx);
            let mut downloaded = Inbox::new(downloaded_rx);
            let mut timings = Vec::with_capacity(schedule.tasks.len());
            for task in &schedule.tasks {
                wait(compute, ready.get(task.a_upload)?)?;
                wait(compute, ready.get(task.b_upload)?)?;
                let tile = schedule.tiles[task.tile];
                if let (false, Some(before)) = (task.accumulate, tile.after_tile) {
                    wait(compute, downloaded.get(before)?)?;
                }
                let (rows, depth, cols) = task.dims;
                let start = record(compute, CUevent_flags::CU_EVENT_DEFAULT)?;
                product.run(
                    gpu,
                    DeviceGemm {
                        shape: (rows, depth, cols),
                        alpha,
                        a: Operand::row_major(slots.a[task.a_slot].ptr, depth),
                        b: Operand::row_major(slots.b[task.b_slot].ptr, cols),
                        beta: if task.accumulate { T::ONE } else { T::ZERO },
                        c: Operand::row_major(slots.c[tile.slot].ptr, cols),
                    },
                )?;
                let end = record(compute, CUevent_flags::CU_EVENT_DEFAULT)?;
                // The feeder stops listening after its last upload.
                let _ = products_tx.send(end.clone());
                if task.last {
                    finished_tx
                        .send((task.tile, end.clone()))
                        .map_err(|_| Stop::Upstream)?;
                }
                timings.push((start, end));
            }
            drop(finished_tx);
            let mut products_ms = 0.0;
            for (start, end) in &timings {
                products_ms += f64::from(
                    start
                        .elapsed_ms(end)
                        .map_err(|e| cuda_err("cannot read the event timer", e))?,
                );
            }
            Ok(Measured {
                products_ms,
                ..Measured::default()
            })
        })();
        // A failed issuer has closed its channels, which stops the feeder
        // and the drainer.
        let fed = feeder.join();
        let drained = drainer.join();
        (issued, fed, drained)
    });
    gpu.synchronize()?;
    let joined = |outcome: std::thread::Result<Result<f64, Stop>>| match outcome {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    let (fed, drained) = (joined(fed), joined(drained));
    // The first stage that failed on its own names the error.
    for outcome in [
        issued.as_ref().err(),
        fed.as_ref().err(),
        drained.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    {
        if let Stop::Failed(e) = outcome {
            return Err(e.clone());
        }
    }
    match (issued, fed, drained) {
        (Ok(measured), Ok(gather_seconds), Ok(scatter_seconds)) => Ok(Measured {
            gather_seconds,
            scatter_seconds,
            ..measured
        }),
        _ => Err(Error::Cuda(
            "the out-of-core pipeline stopped without an error".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_contiguous_cover_the_block_and_fit_the_buffer() {
        for (rows, cols, bytes) in [
            (10, 7, 4 * 21),
            (10, 7, 4 * 20),
            (3, 100, 4 * 30),
            (1, 1, 4),
            (5, 5, 1000),
        ] {
            let parts = pieces(rows, cols, 4, bytes);
            let mut next = 0;
            for p in &parts {
                assert!(p.elements() * 4 <= bytes);
                assert!(p.cols == cols || p.rows == 1, "{p:?}");
                // Contiguous and in order in the row-major block.
                assert_eq!(p.row * cols + p.col, next);
                next += p.elements();
            }
            assert_eq!(next, rows * cols);
        }
        // A row larger than the buffer is cut into segments.
        assert_eq!(pieces(2, 100, 4, 4 * 30).len(), 8);
    }
}
