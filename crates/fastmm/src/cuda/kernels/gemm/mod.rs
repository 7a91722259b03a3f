//! The classical GPU products, resolved once and run on device operands:
//! the seeds' kernels (`cuda-naive`, `cuda-tiled`), fastmm's own
//! (`cuda-fast`: its configuration in [`fast`], its schedules in
//! [`schedule`]), and cuBLAS ([`cublas`]); every kernel goes through one
//! launch path ([`launch`]).

pub(crate) mod fast;
pub(crate) mod launch;
pub(crate) mod schedule;

use cudarc::driver::CudaFunction;

pub(crate) use crate::cuda::kernels::cublas;
pub(crate) use crate::cuda::kernels::operand::{to_i32, DeviceGemm, Operand};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::{
    CUDA_COMBINE_ROWS_PER_BLOCK, CUDA_DEFAULT_TILE, CUDA_FAST_THREADS, CUDA_NAIVE_BLOCK,
};
use crate::element::{DType, Element};
use crate::error::Error;
use crate::options::{Algorithm, GemmOptions, GpuPrecision};
use fast::FastConfig;
use launch::launch_tile_kernel;

/// The tile edge `algorithm` runs with on this GPU, or a typed error if the
/// block it implies does not fit the device (checked before any launch: an
/// oversized block would fail to launch, and seed 004's timings of such a
/// failed launch were reported as results).
pub(crate) fn checked_tile<T: Element>(
    gpu: &Gpu,
    algorithm: Algorithm,
    opts: &GemmOptions,
) -> Result<usize, Error> {
    let tile = match algorithm {
        Algorithm::CudaTiled => opts
            .tile
            .or_else(|| {
                crate::config::Config::get()
                    .tuned_cuda(&gpu.info().name)
                    .and_then(|t| t.tile)
            })
            .unwrap_or(CUDA_DEFAULT_TILE),
        _ => CUDA_NAIVE_BLOCK,
    };
    let info = gpu.info();
    check_block(
        tile,
        std::mem::size_of::<T>(),
        algorithm == Algorithm::CudaTiled,
        (info.max_threads_per_block, info.max_shared_per_block),
        &info.name,
    )?;
    Ok(tile)
}

/// Whether a `tile`×`tile` thread block (staging two tiles of elements of
/// `elem_size` bytes in shared memory when `uses_shared`) fits a device's
/// (threads per block, shared bytes per block).
fn check_block(
    tile: usize,
    elem_size: usize,
    uses_shared: bool,
    (max_threads, max_shared): (usize, usize),
    device: &str,
) -> Result<(), Error> {
    let threads = tile * tile;
    if tile == 0 || threads > max_threads {
        return Err(Error::InvalidOption(format!(
            "tile {tile} needs {threads} threads per block but {device} allows at most {max_threads}"
        )));
    }
    let shared = 2 * threads * elem_size;
    if uses_shared && shared > max_shared {
        return Err(Error::InvalidOption(format!(
            "tile {tile} needs {shared} bytes of shared memory per block but {device} allows {max_shared}"
        )));
    }
    Ok(())
}

/// The classical product `auto` stands for on a GPU, and the base of
/// Strassen/Winograd there when none is given: cuBLAS for floats,
/// `cuda-fast` for integers (cuBLAS has no integer GEMM).
pub(crate) fn default_base(dtype: DType) -> Algorithm {
    Algorithm::auto_for(crate::options::DeviceKind::Cuda, dtype)
}

/// A classical GPU product, resolved once (kernel compiled, block checked)
/// and then run on any operands: the plain algorithms and the base case of
/// the GPU Strassen/Winograd.
#[derive(Clone)]
pub(crate) enum ClassicalGemm {
    /// cuda-naive or cuda-tiled.
    Kernel(TileKernel),
    /// cuda-fast: each configuration its shape rule may pick and its
    /// compiled kernel (`kernels[i]` runs `configs[i]`), and the combine
    /// kernel that adds split-K slices.
    Fast {
        configs: Vec<FastConfig>,
        kernels: Vec<TileKernel>,
        combine: CudaFunction,
    },
    /// cuBLAS, in a precision mode (f32 data only for the non-fp32 ones).
    Cublas(GpuPrecision),
    /// Ozaki scheme II on the INT8 tensor cores (f32 and f64).
    Emulated(std::sync::Arc<crate::cuda::kernels::emulated::EmulatedGemm>),
    /// `emulated` on i32 and i64: INT8 products of byte planes.
    Bytes(std::sync::Arc<crate::cuda::kernels::bytes::BytesGemm>),
}

/// A kernel of `kernels/`: each block computes a `block` = (rows, columns)
/// tile of C with `threads` = (x, y) threads.
#[derive(Clone)]
pub(crate) struct TileKernel {
    function: CudaFunction,
    block: (usize, usize),
    threads: (u32, u32),
    /// Dynamic shared memory per block, in bytes (0: static only).
    shared_bytes: u32,
    /// A ring kernel (`fast_ring.cu`): takes operands whose rows are not
    /// 16-byte aligned, and its `vec_ok` speaks of B's rows alone.
    any_alignment: bool,
    /// `cuda-fast`'s SIMT kernels: the twin for operands whose rows are
    /// not 16-byte aligned.
    ring: Option<RingKernel>,
    /// `cuda-fast`: the configuration the kernel runs, which plans its
    /// schedules (and names its stream-K twin, `fast_stream.cu`, compiled
    /// on first use).
    config: Option<FastConfig>,
}

/// `kernels/fast_ring.cu` for one SIMT configuration, compiled on first
/// use (most operands are aligned and never need it).
#[derive(Clone, Copy)]
struct RingKernel {
    key: KernelKey,
    /// Its dynamic shared memory per block, in bytes.
    shared_bytes: usize,
}

impl ClassicalGemm {
    /// Resolves `algorithm` (cuda-naive, cuda-tiled or cublas) for T on
    /// this GPU: compiles the kernel, checks its block against the device,
    /// refuses what cannot run (integers on cuBLAS).
    pub fn resolve<T: Element>(
        gpu: &Gpu,
        algorithm: Algorithm,
        opts: &GemmOptions,
    ) -> Result<ClassicalGemm, Error> {
        match algorithm {
            Algorithm::Auto => Self::resolve::<T>(gpu, default_base(T::DTYPE), opts),
            Algorithm::Cublas if T::DTYPE.is_integer() => Err(Error::Unsupported {
                algorithm: "cublas",
                what: format!("{} (cuBLAS has no integer GEMM)", T::DTYPE),
            }),
            Algorithm::Cublas => {
                let precision = opts.gpu.precision.unwrap_or_default();
                if precision != GpuPrecision::Fp32 && T::DTYPE != DType::F32 {
                    return Err(Error::InvalidOption(format!(
                        "precision {precision} takes f32 data, not {}",
                        T::DTYPE
                    )));
                }
                Ok(ClassicalGemm::Cublas(precision))
            }
            Algorithm::CudaNaive | Algorithm::CudaTiled => {
                let tile = checked_tile::<T>(gpu, algorithm, opts)?;
                let source = if algorithm == Algorithm::CudaNaive {
                    KernelSource::Naive
                } else {
                    KernelSource::Tiled
                };
                let function = gpu.function(KernelKey {
                    source,
                    dtype: T::DTYPE,
                    tile,
                })?;
                Ok(ClassicalGemm::Kernel(TileKernel {
                    function,
                    block: (tile, tile),
                    threads: (tile as u32, tile as u32),
                    shared_bytes: 0,
                    any_alignment: false,
                    ring: None,
                    config: None,
                }))
            }
            Algorithm::CudaFast => {
                let configs = FastConfig::candidates(opts, T::DTYPE, gpu)?;
                let kernels = configs
                    .iter()
                    .map(|config| {
                        let ring = match config.ring_key() {
                            Some(key) => Some(RingKernel {
                                key,
                                shared_bytes: config.ring_shared_bytes(gpu)?,
                            }),
                            None => None,
                        };
                        let shared_bytes = config.shared_bytes();
                        let function = if shared_bytes > 0 {
                            gpu.function_with_shared(config.key(), shared_bytes, "cuda-fast")?
                        } else {
                            gpu.function(config.key())?
                        };
                        Ok(TileKernel {
                            function,
                            block: config.block_shape(),
                            threads: (CUDA_FAST_THREADS, 1),
                            shared_bytes: shared_bytes as u32,
                            any_alignment: config.mbarriers,
                            ring,
                            config: Some(*config),
                        })
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                let combine = gpu.function(KernelKey {
                    source: KernelSource::Combine,
                    dtype: T::DTYPE,
                    tile: CUDA_COMBINE_ROWS_PER_BLOCK,
                })?;
                Ok(ClassicalGemm::Fast {
                    configs,
                    kernels,
                    combine,
                })
            }
            Algorithm::Emulated if T::DTYPE.is_integer() => Ok(ClassicalGemm::Bytes(
                std::sync::Arc::new(crate::cuda::kernels::bytes::BytesGemm::resolve::<T>(gpu)?),
            )),
            Algorithm::Emulated => Ok(ClassicalGemm::Emulated(std::sync::Arc::new(
                crate::cuda::kernels::emulated::EmulatedGemm::resolve::<T>(gpu, opts.accuracy)?,
            ))),
            other => Err(Error::InvalidOption(format!(
                "{other} is not a classical GPU algorithm (cublas, cuda-fast, cuda-tiled, cuda-naive or emulated)"
            ))),
        }
    }

    /// c ← α·a·b + β·c for an m×k `a` and a k×n `b` (β = 0 never reads c),
    /// queued on the GPU's stream.
    pub fn run<T: Element>(&self, gpu: &Gpu, product: DeviceGemm<T>) -> Result<(), Error> {
        let (m, _, n) = product.shape;
        match self {
            ClassicalGemm::Kernel(kernel) => launch_tile_kernel(gpu, kernel, None, product),
            ClassicalGemm::Fast {
                configs,
                kernels,
                combine,
            } => {
                let chosen = FastConfig::pick_index(configs, (m, n), gpu.info().multiprocessors);
                launch_tile_kernel(gpu, &kernels[chosen], Some(combine), product)
            }
            ClassicalGemm::Cublas(precision) => cublas::gemm(gpu, *precision, product),
            ClassicalGemm::Emulated(emulated) => emulated.run(gpu, product),
            ClassicalGemm::Bytes(bytes) => bytes.run(gpu, product),
        }
    }

    /// Whether [`ClassicalGemm::run`] reads A and B as transposed views
    /// (column-major operands) in place: cuBLAS (its op flags) and the
    /// INT8 pipelines (their splits read rows or columns alike) do; the
    /// tile kernels read row-major operands only.
    pub fn takes_transposed(&self) -> bool {
        matches!(
            self,
            ClassicalGemm::Cublas(_) | ClassicalGemm::Emulated(_) | ClassicalGemm::Bytes(_)
        )
    }

    /// The emulated product's routes since the last call (None for the
    /// other products).
    pub fn take_emulation_tally(&self) -> Option<crate::emulation::Tally> {
        match self {
            ClassicalGemm::Emulated(emulated) => Some(emulated.take_tally()),
            ClassicalGemm::Bytes(bytes) => Some(bytes.take_tally()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_beyond_the_device_limits_are_refused_before_launch() {
        // H100: 1024 threads and 48 KiB of static shared memory per block.
        let h100 = (1024, 48 * 1024);
        for tile in [1, 2, 16, 31, 32] {
            assert!(
                check_block(tile, 8, true, h100, "H100").is_ok(),
                "tile {tile}"
            );
        }
        // Seed 004's 70×70 block: 4900 threads, refused instead of timed.
        for tile in [0, 33, 70] {
            let err = check_block(tile, 4, true, h100, "H100").unwrap_err();
            assert!(
                matches!(err, Error::InvalidOption(ref m) if m.contains("threads")),
                "{err}"
            );
        }
        // A device with little shared memory refuses on that count.
        let small = (1024, 8 * 1024);
        let err = check_block(32, 8, true, small, "small").unwrap_err();
        assert!(err.to_string().contains("shared memory"), "{err}");
        assert!(check_block(32, 8, false, small, "small").is_ok());
    }
}
