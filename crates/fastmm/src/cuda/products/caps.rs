//! Strassen and Winograd across a team's GPUs: CAPS's depth-first steps
//! (Ballard, Demmel, Holtz, Lipshitz, Schwartz, SPAA 2012) with the
//! classical distribution below them.
//!
//! The one recursion engine ([`crate::strassen::engine`]) runs over a
//! backend whose every matrix (A, B, C and the temporaries) is spread by
//! rows in chunks over the GPUs ([`RowChunks`]). Each level's sums are
//! then local: every GPU runs the same combination on its own rows, with
//! the single-GPU backend's kernels. A leaf product, C_blk ← α·A_blk·B_blk
//! plus β·C_blk, gathers B_blk on every GPU (its rows copied into one
//! buffer, an in-place NCCL all-gather on the communication streams,
//! reordered into global row order when a GPU holds several chunks of it)
//! and multiplies each GPU's rows of A_blk by it with the single-GPU classical
//! product. Each GPU thus runs 7^L products of (h/G)×h×h for leaves of
//! height h: the flops of L Strassen levels, spread evenly whatever G is,
//! against (7/4)^L·k·n·(G−1)/G words received per GPU.
//!
//! Everything is queued without waiting; the host then waits with the
//! team's deadline, and a failure aborts the communicators.

use std::time::Instant;

use crate::cuda::kernels::gemm::{ClassicalGemm, Operand};
use crate::cuda::products::distributed::Fabric;
use crate::cuda::products::strassen::CudaBackend;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::memory::{copy_to_device, copy_to_host, RawDeviceMemory};
use crate::cuda::tunables::{distributed_patience, CUDA_CAPS_START, CUDA_CAPS_THRESHOLD};
use crate::element::Element;
use crate::error::Error;
use crate::gemm::Gemm;
use crate::matrix::{MatMut, MatRef};
use crate::options::{GemmOptions, Variant};
use crate::strassen::across::{self, Recursion, RowChunks};
use crate::strassen::backend::{Backend, Block, Combination, Store};
use crate::strassen::{engine, Crossover, Scheme};

/// What a product across the GPUs did.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Seconds from the first operation queued to the last GPU done
    /// (copies from and to the host not included).
    pub seconds: f64,
    /// Words each GPU received.
    pub words: Vec<u128>,
    /// Levels across the GPUs.
    pub levels: usize,
    /// Bytes copied to the GPUs.
    pub upload_bytes: u64,
    /// Bytes copied back.
    pub download_bytes: u64,
}

/// Where the recursion across GPUs stops: an explicit threshold, else
/// [`CUDA_CAPS_THRESHOLD`] (a first level from [`CUDA_CAPS_START`]).
pub(crate) fn crossover(opts: &GemmOptions) -> Crossover {
    Crossover::given(&opts.fast).unwrap_or(Crossover {
        threshold: CUDA_CAPS_THRESHOLD,
        start: CUDA_CAPS_START,
    })
}

/// The recursion across every GPU of `fabric` that an m×k×n product with
/// `opts` would run, in the first memory schedule that fits every GPU's
/// budget, with that schedule; `None` where it does not apply: not a fast
/// algorithm, one GPU, no level, blocks that no row chunking aligns (m and
/// k must be multiples of G·2^levels, with no odd size peeled), or pieces
/// and temporaries that do not fit every GPU's budget in any memory
/// schedule.
pub(crate) fn fitting<T: Element>(
    fabric: &Fabric,
    shape: (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Result<Option<(Variant, engine::Plan, Recursion)>, Error> {
    let Some(scheme) = Scheme::of(opts.algorithm) else {
        return Ok(None);
    };
    let gpus = fabric.gpus();
    let parts = gpus.len();
    if parts < 2 {
        return Ok(None);
    }
    opts.fast
        .check_on(opts.algorithm, crate::options::DeviceKind::Cuda)?;
    let variants = match opts.fast.variant {
        Some(variant) => vec![variant],
        // The GPU's fastest schedule where it fits, else the frugal one.
        None => vec![Variant::Batched, Variant::Frugal],
    };
    for variant in variants {
        let plan = crate::strassen::plan(scheme, variant, crossover(opts), T::DTYPE, opts, 0);
        let Some(recursion) = across::recursion::<T>(plan, parts, beta_is_zero, shape) else {
            return Ok(None);
        };
        let need = bytes_per_gpu::<T>(&recursion, shape);
        let mut fits = true;
        for gpu in gpus {
            fits &= need <= u128::from(crate::cuda::products::out_of_core::budget(gpu, opts)?);
        }
        if fits {
            return Ok(Some((variant, plan, recursion)));
        }
    }
    Ok(None)
}

/// Device bytes each GPU needs: its rows of A, B and C, its share of the
/// temporaries, and the gathered leaf block (twice when reordered).
fn bytes_per_gpu<T: Element>(r: &Recursion, (m, k, n): (usize, usize, usize)) -> u128 {
    let rows = |total: usize| r.layout.local_rows(total, 0) as u128;
    let temps: u128 = r
        .capacities
        .iter()
        .map(|&cap| cap.div_ceil(r.layout.parts) as u128)
        .sum();
    let gathers = r.largest_gather as u128 * if r.reorders { 2 } else { 1 };
    (rows(m) * k as u128 + rows(k) * n as u128 + rows(m) * n as u128 + temps + gathers)
        * std::mem::size_of::<T>() as u128
}

/// One GPU's rows of a host matrix in device memory.
struct Piece {
    memory: RawDeviceMemory,
    ld: usize,
}

fn placed<T>(gpu: &Gpu, rows: usize, ld: usize) -> Result<Piece, Error> {
    let memory =
        RawDeviceMemory::alloc(gpu, rows * ld * std::mem::size_of::<T>()).map_err(|e| {
            Error::Processor {
                processor: gpu.label(),
                reason: e.to_string(),
            }
        })?;
    Ok(Piece { memory, ld })
}

/// Rows first..first + count of a view whose rows are contiguous and
/// adjacent, as one slice.
fn contiguous_rows<'a, T: Element>(
    m: MatRef<'a, T>,
    first: usize,
    count: usize,
) -> Option<&'a [T]> {
    if m.col_stride() != 1 || (m.row_stride() != m.cols() && count > 1) || count == 0 {
        return None;
    }
    // SAFETY: the view covers rows×cols elements at unit column stride
    // and row stride cols, so rows first..first+count are count·cols
    // adjacent elements inside it.
    Some(unsafe { std::slice::from_raw_parts(m.as_ptr().add(first * m.cols()), count * m.cols()) })
}

/// Copies GPU q's chunks of `m` into its piece.
fn upload<T: Element>(
    gpu: &Gpu,
    layout: &RowChunks,
    q: usize,
    m: MatRef<'_, T>,
    piece: &Piece,
) -> Result<u64, Error> {
    let elem = std::mem::size_of::<T>();
    let mut bytes = 0;
    for (first, local, rows) in layout.chunks_of(m.rows(), q) {
        let dst = piece.memory.ptr + (local * piece.ld * elem) as u64;
        let owned;
        let data = match contiguous_rows(m, first, rows) {
            Some(slice) => slice,
            None => {
                owned = (first..first + rows)
                    .flat_map(|i| (0..m.cols()).map(move |j| m.get(i, j)))
                    .collect::<Vec<T>>();
                &owned
            }
        };
        // SAFETY: the piece holds local_rows·ld elements and this chunk's
        // rows·cols (cols = ld) start at its local row.
        unsafe { copy_to_device(gpu, data, dst)? };
        bytes += std::mem::size_of_val(data) as u64;
    }
    Ok(bytes)
}

/// Copies GPU q's chunks of C from its piece into `c`.
fn download<T: Element>(
    gpu: &Gpu,
    layout: &RowChunks,
    q: usize,
    piece: &Piece,
    c: &mut MatMut<'_, T>,
) -> Result<u64, Error> {
    let elem = std::mem::size_of::<T>();
    let cols = c.cols();
    let mut bytes = 0;
    let mut staging = Vec::new();
    for (first, local, rows) in layout.chunks_of(c.rows(), q) {
        let src = piece.memory.ptr + (local * piece.ld * elem) as u64;
        let direct = c.col_stride() == 1 && (c.row_stride() == cols || rows == 1);
        if direct {
            // SAFETY: as in `contiguous_rows`, for the exclusively borrowed
            // output: rows first..first+rows are rows·cols adjacent
            // elements of it.
            let out = unsafe {
                std::slice::from_raw_parts_mut(c.as_mut_ptr().add(first * cols), rows * cols)
            };
            // SAFETY: the piece holds this chunk's rows·cols elements at
            // its local row, written by the product.
            unsafe { copy_to_host(gpu, src, out)? };
        } else {
            staging.resize(rows * cols, T::ZERO);
            // SAFETY: as above, into a host buffer of that size.
            unsafe { copy_to_host(gpu, src, &mut staging)? };
            for i in 0..rows {
                for j in 0..cols {
                    c.set(first + i, j, staging[i * cols + j]);
                }
            }
        }
        bytes += (rows * cols * elem) as u64;
    }
    Ok(bytes)
}

/// C ← α·A·B + β·C by the recursion across every GPU of `fabric` that
/// [`fitting`] planned for this shape (Strassen or Winograd): A, B and C
/// copied in, the levels run across the GPUs, C copied back.
pub(crate) fn run<T: Element>(
    fabric: &Fabric,
    (plan, recursion): (engine::Plan, &Recursion),
    Gemm {
        alpha,
        a,
        b,
        beta,
        mut c,
    }: Gemm<'_, T>,
    opts: &GemmOptions,
) -> Result<Outcome, Error> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let layout = recursion.layout;
    let gpus = fabric.gpus();
    let _exclusive = fabric.exclusive();
    let base = crate::cuda::products::strassen::base(opts, T::DTYPE);
    let mut pieces = Vec::with_capacity(gpus.len());
    let mut upload_bytes = 0;
    for (q, gpu) in gpus.iter().enumerate() {
        let pa = placed::<T>(gpu, layout.local_rows(m, q), k)?;
        let pb = placed::<T>(gpu, layout.local_rows(k, q), n)?;
        let pc = placed::<T>(gpu, layout.local_rows(m, q), n)?;
        upload_bytes += upload(gpu, &layout, q, a, &pa)?;
        upload_bytes += upload(gpu, &layout, q, b, &pb)?;
        if beta != T::ZERO {
            upload_bytes += upload(gpu, &layout, q, c.rb(), &pc)?;
        }
        pieces.push([pa, pb, pc]);
    }
    let mut ranks = Vec::with_capacity(gpus.len());
    for (gpu, [pa, pb, pc]) in gpus.iter().zip(&pieces) {
        let operand = |p: &Piece| Operand::row_major(p.memory.ptr, p.ld);
        let classical = ClassicalGemm::resolve::<T>(gpu, base, opts)?;
        ranks.push(CudaBackend::new(
            gpu,
            classical,
            opts,
            (operand(pa), operand(pb), operand(pc)),
        )?);
    }
    let mut across = Across {
        fabric,
        ranks,
        layout,
        largest_gather: recursion.largest_gather,
        reorders: recursion.reorders,
        gather: 0,
        reorder: 0,
        words: vec![0; gpus.len()],
    };
    let start = Instant::now();
    let ran = engine::run(&mut across, plan, alpha, beta, (m, k, n))
        .and_then(|_| fabric.wait_all(distributed_patience((m, k, n), gpus.len()), start));
    if let Err(e) = ran {
        fabric.abort_all();
        return Err(e);
    }
    let seconds = start.elapsed().as_secs_f64();
    let words = std::mem::take(&mut across.words);
    drop(across);
    let mut download_bytes = 0;
    for (q, (gpu, [_, _, pc])) in gpus.iter().zip(&pieces).enumerate() {
        download_bytes += download(gpu, &layout, q, pc, &mut c)?;
    }
    Ok(Outcome {
        seconds,
        words,
        levels: recursion.levels,
        upload_bytes,
        download_bytes,
    })
}

/// The backend across GPUs: one single-GPU backend per GPU over its
/// pieces, blocks translated to local rows.
struct Across<'f, T: Element> {
    fabric: &'f Fabric,
    ranks: Vec<CudaBackend<'f, T>>,
    layout: RowChunks,
    largest_gather: usize,
    reorders: bool,
    /// Temporary ids (on every GPU) of the gathered block and of its
    /// reordered copy.
    gather: usize,
    reorder: usize,
    words: Vec<u128>,
}

impl<T: Element> Across<'_, T> {
    fn local_terms(&self, terms: &[(T, Block)]) -> Vec<(T, Block)> {
        terms
            .iter()
            .map(|&(w, block)| (w, self.layout.local(block)))
            .collect()
    }

    fn processor(&self, q: usize, e: Error) -> Error {
        Error::Processor {
            processor: self.fabric.gpus()[q].label(),
            reason: e.to_string(),
        }
    }

    /// Makes every GPU's `later` stream wait for its `earlier` one.
    fn order_all(&self, comm_first: bool) -> Result<(), Error> {
        for (q, gpu) in self.fabric.gpus().iter().enumerate() {
            let comm = self.fabric.comm_stream(q);
            if comm_first {
                self.fabric.order(q, comm, &gpu.stream)?;
            } else {
                self.fabric.order(q, &gpu.stream, comm)?;
            }
        }
        Ok(())
    }
}

impl<T: Element> Backend<T> for Across<'_, T> {
    fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
        let parts = self.layout.parts;
        let mut local: Vec<usize> = capacities.iter().map(|c| c.div_ceil(parts)).collect();
        self.gather = local.len();
        self.reorder = local.len() + 1;
        local.push(self.largest_gather);
        local.push(if self.reorders {
            self.largest_gather
        } else {
            0
        });
        for q in 0..self.ranks.len() {
            self.ranks[q]
                .allocate(&local)
                .map_err(|e| self.processor(q, e))?;
        }
        Ok(())
    }

    fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
        let (dst, terms) = (self.layout.local(dst), self.local_terms(terms));
        for q in 0..self.ranks.len() {
            self.ranks[q]
                .combine(keep, dst, &terms)
                .map_err(|e| self.processor(q, e))?;
        }
        Ok(())
    }

    fn combine_group(&mut self, sums: &[Combination<T>]) -> Result<(), Error> {
        let local: Vec<Combination<T>> = sums
            .iter()
            .map(|sum| Combination {
                keep: sum.keep,
                dst: self.layout.local(sum.dst),
                terms: self.local_terms(&sum.terms),
            })
            .collect();
        for q in 0..self.ranks.len() {
            self.ranks[q]
                .combine_group(&local)
                .map_err(|e| self.processor(q, e))?;
        }
        Ok(())
    }

    fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error> {
        let (la, lc) = (self.layout.local(a), self.layout.local(c));
        if a.cols == 0 {
            for q in 0..self.ranks.len() {
                self.ranks[q]
                    .combine(beta, lc, &[])
                    .map_err(|e| self.processor(q, e))?;
            }
            return Ok(());
        }
        let parts = self.layout.parts;
        let (height, width) = (b.rows, b.cols);
        let own = height / parts;
        let slot = |id: usize, ld: usize, row: usize, rows: usize, cols: usize| Block {
            store: Store::Temp { id, ld },
            row,
            col: 0,
            rows,
            cols,
        };
        // Each GPU's rows of the block at its place in the gather buffer.
        let lb = self.layout.local(b);
        for q in 0..self.ranks.len() {
            self.ranks[q]
                .combine(
                    T::ZERO,
                    slot(self.gather, width, q * own, own, width),
                    &[(T::ONE, lb)],
                )
                .map_err(|e| self.processor(q, e))?;
        }
        self.order_all(false)?;
        let buffers: Vec<u64> = self
            .ranks
            .iter()
            .map(|r| r.operand(slot(self.gather, width, 0, height, width)).ptr)
            .collect();
        // SAFETY: every GPU's gather temporary holds largest_gather ≥
        // height·width elements, and only the communication streams use
        // it until they are ordered before the products below.
        unsafe {
            self.fabric
                .all_gather_in_place::<T>(&buffers, own * width)?
        };
        self.order_all(true)?;
        let chunk = self.layout.chunk;
        let whole = if own == chunk {
            slot(self.gather, width, 0, height, width)
        } else {
            // GPU s's part holds block chunks s, s + G, s + 2G, …: each
            // chunk of c rows is one "row" of c·width elements, moved to
            // its place in global order.
            let per = own / chunk;
            let wide = chunk * width;
            for q in 0..self.ranks.len() {
                for s in 0..parts {
                    let src = slot(self.gather, wide, s * per, per, wide);
                    let dst = Block {
                        col: s * wide,
                        ..slot(self.reorder, parts * wide, 0, per, wide)
                    };
                    self.ranks[q]
                        .combine(T::ZERO, dst, &[(T::ONE, src)])
                        .map_err(|e| self.processor(q, e))?;
                }
            }
            slot(self.reorder, width, 0, height, width)
        };
        for q in 0..self.ranks.len() {
            self.ranks[q]
                .gemm(alpha, la, whole, beta, lc)
                .map_err(|e| self.processor(q, e))?;
            self.words[q] += ((height - own) * width) as u128;
        }
        Ok(())
    }
}
