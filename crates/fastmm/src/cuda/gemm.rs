//! C ← α·A·B + β·C on the GPU: the seeds' kernels and cuBLAS, timed with
//! CUDA events, with the transfers timed apart.

use std::time::Instant;

use cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::algo::{Algorithm, GemmOptions};
use crate::cuda::compile::{KernelKey, KernelSource};
use crate::cuda::device::Gpu;
use crate::cuda::memory::DeviceMatrix;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::tunables::{CUDA_DEFAULT_TILE, CUDA_NAIVE_BLOCK, CUDA_TIMED_LAUNCHES};

/// Where the time of one GPU product went, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuTimes {
    /// Host → device copies of A, B (and C when β ≠ 0), host clock.
    pub upload_ms: f64,
    /// The kernel (or cuBLAS call) alone, between two CUDA events: the
    /// median of back-to-back launches when β = 0 (see [`multiply_timed`]).
    pub kernel_ms: f64,
    /// Device → host copy of C, host clock.
    pub download_ms: f64,
}

impl GpuTimes {
    /// Upload, kernel and download together.
    pub fn end_to_end_ms(&self) -> f64 {
        self.upload_ms + self.kernel_ms + self.download_ms
    }
}

fn cuda_err(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Cuda(format!("{what}: {e:?}"))
}

/// The tile edge `algorithm` runs with on this GPU, or a typed error if the
/// block it implies does not fit the device (checked before any launch: an
/// oversized block would fail to launch, and seed 004's timings of such a
/// failed launch were reported as results).
pub fn checked_tile<T: Element>(
    gpu: &Gpu,
    algorithm: Algorithm,
    opts: &GemmOptions,
) -> Result<usize, Error> {
    let tile = match algorithm {
        Algorithm::CudaTiled => opts.tile.unwrap_or(CUDA_DEFAULT_TILE),
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

/// C ← α·A·B + β·C with a GPU algorithm on host matrices: uploads A and B
/// (and C if β ≠ 0) into `opts.gpu_memory`, runs, and copies C back.
/// β = 0 never reads C. Shapes are checked by the caller (the boundary).
pub fn multiply_timed<T: Element>(
    gpu: &Gpu,
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<GpuTimes, Error> {
    let (m, k) = a.shape();
    let n = b.cols();
    for (name, dim) in [("m", m), ("k", k), ("n", n)] {
        if dim > i32::MAX as usize {
            return Err(Error::Unsupported {
                algorithm: opts.algorithm.name(),
                what: format!("{name} = {dim} (CUDA kernels index with 32-bit ints)"),
            });
        }
    }
    if opts.algorithm == Algorithm::Cublas && T::DTYPE.is_integer() {
        return Err(Error::Unsupported {
            algorithm: "cublas",
            what: format!("{} (cuBLAS has no integer GEMM)", T::DTYPE),
        });
    }
    // Compile (or fetch) the kernel and check its block before any copy.
    let kernel = match opts.algorithm {
        Algorithm::CudaNaive | Algorithm::CudaTiled => {
            let tile = checked_tile::<T>(gpu, opts.algorithm, opts)?;
            let source = if opts.algorithm == Algorithm::CudaNaive {
                KernelSource::Naive
            } else {
                KernelSource::Tiled
            };
            let grid_y = m.div_ceil(tile);
            if grid_y > gpu.info().max_grid_y {
                return Err(Error::Unsupported {
                    algorithm: opts.algorithm.name(),
                    what: format!(
                        "{m} rows with tile {tile} (grid y {grid_y} over the device's {})",
                        gpu.info().max_grid_y
                    ),
                });
            }
            let f = gpu.function(KernelKey {
                source,
                dtype: T::DTYPE,
                tile,
            })?;
            Some((f, tile))
        }
        _ => None,
    };
    let memory = opts.gpu_memory.unwrap_or_default();
    let beta_is_zero = beta == T::ZERO;

    let start = Instant::now();
    let da = DeviceMatrix::upload(gpu, memory, a, true)?;
    let db = DeviceMatrix::upload(gpu, memory, b, true)?;
    let dc = DeviceMatrix::upload(gpu, memory, c.rb(), !beta_is_zero)?;
    gpu.synchronize()?;
    let upload_ms = start.elapsed().as_secs_f64() * 1e3;

    let launch_once = || -> Result<(), Error> {
        match &kernel {
            Some((f, tile)) => {
                let tile = *tile;
                let (mi, ni, ki) = (m as i32, n as i32, k as i32);
                let (lda, ldb, ldc) = (da.ld as i64, db.ld as i64, dc.ld as i64);
                let config = LaunchConfig {
                    grid_dim: (n.div_ceil(tile) as u32, m.div_ceil(tile) as u32, 1),
                    block_dim: (tile as u32, tile as u32, 1),
                    shared_mem_bytes: 0,
                };
                let mut launch = gpu.stream.launch_builder(f);
                launch
                    .arg(&mi)
                    .arg(&ni)
                    .arg(&ki)
                    .arg(&alpha)
                    .arg(&da.ptr)
                    .arg(&lda)
                    .arg(&db.ptr)
                    .arg(&ldb)
                    .arg(&beta)
                    .arg(&dc.ptr)
                    .arg(&ldc);
                // SAFETY: the arguments match the kernel's signature (int ×3,
                // ELEM, pointer, long long, pointer, long long, ELEM,
                // pointer, long long), and the pointers address m×k, k×n and
                // m×n row-major matrices with those leading dimensions.
                unsafe { launch.launch(config) }
                    .map(|_| ())
                    .map_err(|e| cuda_err("kernel launch failed", e))
            }
            None => cublas_gemm(gpu, alpha, &da, &db, beta, &dc, (m, k, n)),
        }
    };
    // With β = 0 a launch is idempotent, so it runs once to warm the clocks
    // and caches and then CUDA_TIMED_LAUNCHES times back to back: kernel
    // time is the median of those, free of the idle gaps the copies leave.
    // With β ≠ 0 each launch changes C, so exactly one runs.
    let timed_launches = if beta_is_zero {
        launch_once()?;
        CUDA_TIMED_LAUNCHES
    } else {
        1
    };
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let record = || {
        gpu.stream
            .record_event(timing)
            .map_err(|e| cuda_err("cannot record an event", e))
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

    let start = Instant::now();
    dc.download(gpu, c)?;
    let download_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(GpuTimes {
        upload_ms,
        kernel_ms,
        download_ms,
    })
}

/// cuBLAS is column-major: row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ,
/// which is the same memory, so B goes first and nothing is transposed.
fn cublas_gemm<T: Element>(
    gpu: &Gpu,
    alpha: T,
    a: &DeviceMatrix<T>,
    b: &DeviceMatrix<T>,
    beta: T,
    c: &DeviceMatrix<T>,
    (m, k, n): (usize, usize, usize),
) -> Result<(), Error> {
    let dims = |v: usize| {
        i32::try_from(v).map_err(|_| Error::Unsupported {
            algorithm: "cublas",
            what: format!("a dimension or leading dimension of {v}"),
        })
    };
    let (mi, ki, ni) = (dims(m)?, dims(k)?, dims(n)?);
    let (lda, ldb, ldc) = (dims(a.ld)?, dims(b.ld)?, dims(c.ld)?);
    gpu.with_blas(|blas| {
        let handle = *blas.handle();
        // SAFETY: the device pointers address row-major m×k, k×n and m×n
        // matrices with these leading dimensions, of the element type
        // matched below; α and β are read from host memory.
        let status = unsafe {
            match T::DTYPE {
                DType::F32 => {
                    let (alpha, beta) = (alpha.to_f64() as f32, beta.to_f64() as f32);
                    cudarc::cublas::result::sgemm(
                        handle,
                        CUBLAS_OP_N,
                        CUBLAS_OP_N,
                        ni,
                        mi,
                        ki,
                        &alpha,
                        b.ptr as *const f32,
                        ldb,
                        a.ptr as *const f32,
                        lda,
                        &beta,
                        c.ptr as *mut f32,
                        ldc,
                    )
                }
                DType::F64 => {
                    let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
                    cudarc::cublas::result::dgemm(
                        handle,
                        CUBLAS_OP_N,
                        CUBLAS_OP_N,
                        ni,
                        mi,
                        ki,
                        &alpha,
                        b.ptr as *const f64,
                        ldb,
                        a.ptr as *const f64,
                        lda,
                        &beta,
                        c.ptr as *mut f64,
                        ldc,
                    )
                }
                DType::I32 | DType::I64 => unreachable!("integers are refused before upload"),
            }
        };
        status.map_err(|e| cuda_err("cuBLAS gemm failed", e))
    })
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
