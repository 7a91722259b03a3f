//! GPU products larger than GPU memory: seed 003 §2.1's multiplication "by
//! parts", pipelined. C is cut into tiles, A into row panels and B into
//! column panels ([`plan`]); the operand that moves fewer bytes stays on
//! the GPU in as many panels as the budget holds while the other streams
//! through two buffers, and host→device copies, products and device→host
//! copies overlap on three streams with page-locked staging
//! ([`pipeline`]). A, B and C stay where the caller has them — in memory,
//! or mapped from files — and are never copied whole.
//!
//! Where B fits with room for two bands each of A and C, a classical
//! product takes the host-resident pipeline of [`hosted`] on a team of
//! one instead: B crosses once, in chunks that the first band multiplies
//! as they arrive, and A and C cross once each ([`Streaming`]).
//!
//! Each tile's product C_ij ← α·A_i·B_j is any GPU algorithm: a classical
//! one (cuBLAS, `cuda-fast`, `cuda-tiled`, `cuda-naive`) or Strassen or
//! Winograd over one, whose temporaries for the largest tile come off the
//! budget and are kept from tile to tile. β is applied on the host as each
//! tile lands, so β = 0 never reads C.

pub(crate) mod pipeline;
pub(crate) mod plan;

use std::sync::Arc;
use std::time::Instant;

#[cfg(feature = "selftest")]
pub(crate) use plan::Resident;
pub(crate) use plan::Tiling;

use crate::cuda::kernels::gemm::{ClassicalGemm, DeviceGemm, Operand};
use crate::cuda::products::hosted::{self, Bands, StagingPools};
use crate::cuda::products::strassen::CudaBackend;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::{CUDA_OUT_OF_CORE_RESERVE_BYTES, CUDA_OUT_OF_CORE_TILE};
use crate::element::Element;
use crate::error::Error;
use crate::gemm::Gemm;
use crate::options::{Algorithm, FastOptions, GemmOptions, Variant};
use crate::strassen::engine::{self, Plan as Recursion};
use crate::strassen::Scheme;

/// What an out-of-core GPU product did.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// Bytes copied to the GPU (A and B, as often as they streamed).
    pub upload_bytes: u64,
    /// Bytes copied back (C once).
    pub download_bytes: u64,
    /// Seconds from the start (allocations included) to C complete on the
    /// host.
    pub seconds: f64,
    /// Sum of the products' GPU times, seconds: `seconds` less this is
    /// what the copies and the start-up did not hide.
    pub products_seconds: f64,
    /// Host seconds spent copying A and B into page-locked staging, and
    /// staging into C (each on its own thread, overlapping the rest).
    pub staging_seconds: (f64, f64),
}

/// The GPU memory a product may use: `opts.gpu.max_memory`, at most the
/// free memory less a reserve for cuBLAS and the kernels.
pub(crate) fn budget(gpu: &Gpu, opts: &GemmOptions) -> Result<u64, Error> {
    let (free, _) = gpu.memory_info()?;
    let usable = (free as u64).saturating_sub(CUDA_OUT_OF_CORE_RESERVE_BYTES);
    Ok(opts
        .gpu
        .max_memory
        .map_or(usable, |asked| asked.min(usable)))
}

/// Whether an m×k×n product of T with `opts` runs out of core: asked for,
/// or A, B and C together exceed the [`budget`].
pub(crate) fn needed<T: Element>(
    gpu: &Gpu,
    (m, k, n): (usize, usize, usize),
    opts: &GemmOptions,
) -> Result<bool, Error> {
    if opts.gpu.out_of_core {
        return Ok(true);
    }
    let (m, k, n) = (m as u128, k as u128, n as u128);
    let bytes = (m * k + k * n + m * n) * std::mem::size_of::<T>() as u128;
    Ok(bytes > u128::from(budget(gpu, opts)?))
}

/// Refuses what the out-of-core path does not run: an algorithm that is
/// not the GPU's, and the GPU options a streamed product cannot take
/// ([`crate::options::GpuOptions::check_streamed`]).
fn check_options(opts: &GemmOptions) -> Result<(), Error> {
    if !opts.algorithm.runs_on(crate::options::DeviceKind::Cuda)
        || opts.algorithm == Algorithm::Auto
    {
        return Err(Error::InvalidOption(format!(
            "{} is not a GPU algorithm",
            opts.algorithm
        )));
    }
    opts.gpu.check_streamed()
}

/// The options each tile runs with: for Strassen/Winograd
/// without a variant, `batched` when its temporaries for the largest tile
/// take at most a quarter of the budget, else `frugal`.
fn tile_options<T: Element>(
    gpu: &Gpu,
    (m, k, n): (usize, usize, usize),
    budget: u64,
    opts: &GemmOptions,
) -> GemmOptions {
    match (Scheme::of(opts.algorithm), opts.fast.variant) {
        (Some(scheme), None) => {
            let batched = GemmOptions {
                fast: FastOptions {
                    variant: Some(Variant::Batched),
                    ..opts.fast
                },
                ..*opts
            };
            let tile = (
                m.min(CUDA_OUT_OF_CORE_TILE),
                k,
                n.min(CUDA_OUT_OF_CORE_TILE),
            );
            let bytes = workspace_bytes::<T>(gpu, scheme, tile, &batched);
            let variant = if bytes <= budget / 4 {
                Variant::Batched
            } else {
                Variant::Frugal
            };
            GemmOptions {
                fast: FastOptions {
                    variant: Some(variant),
                    ..opts.fast
                },
                ..*opts
            }
        }
        _ => *opts,
    }
}

/// Bytes of a fast algorithm's temporaries for one m×k×n tile product,
/// the larger of its β = 0 and accumulating schedules.
fn workspace_bytes<T: Element>(
    gpu: &Gpu,
    scheme: Scheme,
    dims: (usize, usize, usize),
    opts: &GemmOptions,
) -> u64 {
    let variant = opts.fast.variant.unwrap_or_default();
    let elements = [true, false]
        .into_iter()
        .map(|beta_is_zero| {
            crate::cuda::products::strassen::dry_run::<T>(
                &gpu.info().name,
                scheme,
                variant,
                dims,
                beta_is_zero,
                opts,
            )
            .workspace_elements
        })
        .max()
        .unwrap_or(0);
    (elements * std::mem::size_of::<T>()) as u64
}

/// How an out-of-core product on one GPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streaming {
    /// B resident, bands of A and C through two buffers each: the
    /// host-resident pipeline on a team of one. Classical algorithms,
    /// where B and two bands fit.
    Bands(Bands),
    /// Tiles of C, panels of A and B ([`Tiling`]).
    Tiles(Tiling),
}

impl Streaming {
    /// A line for reports.
    pub fn describe<T: Element>(&self, shape: (usize, usize, usize)) -> String {
        match self {
            Streaming::Bands(cut) => cut.describe::<T>(shape),
            Streaming::Tiles(plan) => plan.describe(),
        }
    }

    /// (rows, depth, columns) of its largest product.
    pub fn product_shape(&self, (m, k, n): (usize, usize, usize)) -> (usize, usize, usize) {
        match self {
            Streaming::Bands(cut) => (cut.rows.min(m), k, n),
            Streaming::Tiles(plan) => (plan.tile_rows, plan.depth, plan.tile_cols),
        }
    }
}

/// The route `multiply` would follow for an m×k×n product of T, the
/// budget it was made in, and the options each product runs with. A fast
/// algorithm's temporaries for the largest tile come off the budget
/// first.
pub(crate) fn plan_for<T: Element>(
    gpu: &Gpu,
    shape: (usize, usize, usize),
    opts: &GemmOptions,
) -> Result<(Streaming, u64, GemmOptions), Error> {
    let budget = budget(gpu, opts)?;
    let classical = Scheme::of(opts.algorithm).is_none() && opts.algorithm != Algorithm::Emulated;
    if classical {
        if let Some(cut) = Bands::within::<T>(shape, 1, budget) {
            return Ok((Streaming::Bands(cut), budget, *opts));
        }
    }
    let tile_opts = tile_options::<T>(gpu, shape, budget, opts);
    let temporaries = match Scheme::of(opts.algorithm) {
        Some(scheme) => {
            let (m, k, n) = shape;
            let tile = (
                m.min(CUDA_OUT_OF_CORE_TILE),
                k,
                n.min(CUDA_OUT_OF_CORE_TILE),
            );
            workspace_bytes::<T>(gpu, scheme, tile, &tile_opts)
        }
        None => 0,
    };
    if temporaries >= budget {
        return Err(Error::InvalidOption(format!(
            "{}'s temporaries for one tile need {} of the {} GPU budget; use a classical algorithm or allow more",
            opts.algorithm,
            crate::system::format_bytes(temporaries.into()),
            crate::system::format_bytes(budget.into())
        )));
    }
    let plan = Tiling::new(
        shape,
        std::mem::size_of::<T>(),
        budget - temporaries,
        CUDA_OUT_OF_CORE_TILE,
    )?;
    Ok((Streaming::Tiles(plan), budget, tile_opts))
}

/// The product each tile runs: a classical GPU algorithm, or Strassen or
/// Winograd over one, whose backend keeps its temporaries from tile to
/// tile.
pub(crate) enum TileProduct<'g, T: Element> {
    Classical(ClassicalGemm),
    Fast {
        recursion: Recursion,
        backend: Box<CudaBackend<'g, T>>,
    },
}

impl<'g, T: Element> TileProduct<'g, T> {
    fn resolve(gpu: &'g Gpu, opts: &GemmOptions) -> Result<TileProduct<'g, T>, Error> {
        Ok(match Scheme::of(opts.algorithm) {
            Some(scheme) => {
                opts.fast
                    .check_on(opts.algorithm, crate::options::DeviceKind::Cuda)?;
                let base = crate::cuda::products::strassen::base(opts, T::DTYPE);
                let classical = ClassicalGemm::resolve::<T>(gpu, base, opts)?;
                let nowhere = Operand::row_major(0, 0);
                let variant = opts.fast.variant.unwrap_or_default();
                TileProduct::Fast {
                    recursion: crate::cuda::products::strassen::plan::<T>(
                        &gpu.info().name,
                        scheme,
                        variant,
                        opts,
                    ),
                    backend: Box::new(CudaBackend::new(
                        gpu,
                        classical,
                        opts,
                        (nowhere, nowhere, nowhere),
                    )?),
                }
            }
            None => TileProduct::Classical(ClassicalGemm::resolve::<T>(gpu, opts.algorithm, opts)?),
        })
    }

    /// c ← α·a·b + β·c for an m×k `a` and a k×n `b` on the GPU's stream.
    pub(crate) fn run(&mut self, gpu: &Gpu, product: DeviceGemm<T>) -> Result<(), Error> {
        match self {
            TileProduct::Classical(gemm) => gemm.run(gpu, product),
            TileProduct::Fast { recursion, backend } => {
                let DeviceGemm {
                    shape,
                    alpha,
                    a,
                    b,
                    beta,
                    c,
                } = product;
                backend.retarget((a, b, c));
                engine::run(backend.as_mut(), *recursion, alpha, beta, shape).map(|_| ())
            }
        }
    }
}

/// C ← α·A·B + β·C on the GPU within the [`budget`], for host matrices
/// of any size (β = 0 never reads C), by the [`Streaming`] of [`plan_for`];
/// `pools` keeps the page-locked staging of the bands route between
/// products. The caller checks shapes; m, k and n are at least 1.
pub(crate) fn multiply<T: Element>(
    gpu: &Arc<Gpu>,
    pools: &StagingPools,
    product: Gemm<'_, T>,
    opts: &GemmOptions,
) -> Result<Report, Error> {
    match plan_for::<T>(gpu, product.shape(), opts)? {
        (Streaming::Tiles(plan), _, tile_opts) => multiply_planned(gpu, plan, product, &tile_opts),
        (Streaming::Bands(cut), _, opts) => multiply_in_bands(gpu, pools, cut, product, &opts),
    }
}

/// [`multiply`] by the bands route with a given cut: for tests with small
/// bands and chunks.
pub(crate) fn multiply_in_bands<T: Element>(
    gpu: &Arc<Gpu>,
    pools: &StagingPools,
    cut: Bands,
    product: Gemm<'_, T>,
    opts: &GemmOptions,
) -> Result<Report, Error> {
    check_options(opts)?;
    product.check_shapes()?;
    let done = hosted::multiply(std::slice::from_ref(gpu), pools, cut, product, opts)?;
    let share = done.shares.first().copied().unwrap_or_default();
    Ok(Report {
        upload_bytes: done.upload_bytes,
        download_bytes: done.download_bytes,
        seconds: done.seconds,
        products_seconds: share.products,
        staging_seconds: (share.gather, share.scatter),
    })
}

/// [`multiply`] by a given plan (checked against the operands): for
/// tests of every kind of schedule on small matrices, and for sweeps.
pub(crate) fn multiply_planned<T: Element>(
    gpu: &Gpu,
    plan: Tiling,
    operands: Gemm<'_, T>,
    opts: &GemmOptions,
) -> Result<Report, Error> {
    let start = Instant::now();
    check_options(opts)?;
    operands.check_shapes()?;
    let (m, k, n) = operands.shape();
    plan.check((m, k, n), std::mem::size_of::<T>())?;
    let mut product = TileProduct::<T>::resolve(gpu, opts)?;
    let schedule = plan.schedule();
    let elem = std::mem::size_of::<T>();
    let (rows, cols, depth) = (plan.tile_rows, plan.tile_cols, plan.depth);
    let slots = pipeline::Slots::alloc(
        gpu,
        [plan.slots.a, plan.slots.b, plan.slots.c],
        [rows * depth * elem, depth * cols * elem, rows * cols * elem],
    )?;
    let measured = pipeline::execute(gpu, &mut product, &schedule, &slots, operands)?;
    drop(product);
    drop(slots);
    Ok(Report {
        upload_bytes: schedule.upload_elements() * elem as u64,
        download_bytes: (m * n * elem) as u64,
        seconds: start.elapsed().as_secs_f64(),
        products_seconds: measured.products_ms / 1e3,
        staging_seconds: (measured.gather_seconds, measured.scatter_seconds),
    })
}
