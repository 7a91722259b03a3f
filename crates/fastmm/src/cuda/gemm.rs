//! C ← α·A·B + β·C on the GPU: the seeds' kernels and cuBLAS, timed with
//! CUDA events, with the transfers timed apart.

use std::time::Instant;

use cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchArgs, LaunchConfig, PushKernelArg};

use crate::algo::{Algorithm, GemmOptions};
use crate::cuda::compile::{KernelKey, KernelSource};
use crate::cuda::cuda_err;
use crate::cuda::device::Gpu;
use crate::cuda::memory::{DeviceMatrix, HostBuffer};
use crate::cuda::precision::GpuPrecision;
use crate::cuda::strassen::CudaBackend;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::strassen::Scheme;
use crate::tunables::{
    CUDA_COMBINE_ROWS_PER_BLOCK, CUDA_DEFAULT_TILE, CUDA_MMA_STAGES, CUDA_NAIVE_BLOCK,
    CUDA_RASTER_GROUP, CUDA_SPLIT_K_MIN_DEPTH, CUDA_STREAM_K_FULL_WAVES, CUDA_STREAM_K_MAX_WAVES,
    CUDA_STREAM_K_MAX_WAVES_ONE_BLOCK, CUDA_TIMED_LAUNCHES, CUDA_WAVE_TAIL_MAX_WAVES,
    CUDA_WAVE_TAIL_MIN_SLICES,
};

/// Where the time of one GPU product went, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuTimes {
    /// Host → device copies of A, B (and C when β ≠ 0) from row-major host
    /// buffers (pageable, or page-locked with `gpu_pinned`), host clock.
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
        Algorithm::CudaTiled => opts
            .tile
            .or_else(|| crate::tuning::tile(crate::algo::Device::Cuda))
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

/// The classical base of `cuda-strassen`/`cuda-winograd` when none is
/// given: cuBLAS for floats, `cuda-fast` for integers (cuBLAS has no
/// integer GEMM).
pub fn default_gpu_base(dtype: DType) -> Algorithm {
    if dtype.is_integer() {
        Algorithm::CudaFast
    } else {
        Algorithm::Cublas
    }
}

/// Threads per block of `cuda-fast` (`THREADS` in `kernels/fast.cu`).
const CUDA_FAST_THREADS: u32 = 256;

/// Split-K slices of `cuda-fast` are multiples of this (the smallest `BK`
/// of its kernels), which keeps every slice's rows 16-byte aligned; a
/// kernel with a deeper BK runs a slice's last partial step on its guarded
/// path.
const CUDA_FAST_BK: usize = 8;

/// How `cuda-fast` lays the tiles of one product over the GPU's resident
/// blocks (`blocks_per_sm` per SM), decided per launch by [`FastSchedule::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FastSchedule {
    /// One block per tile of C.
    Tiles,
    /// Too few tiles to fill the SMs: k is split into this many slices,
    /// each written to a workspace and then added into C.
    SplitK(usize),
    /// Many waves of tiles whose last one would leave most SMs idle: those
    /// tiles run as a separate split-K product.
    WaveTail(WaveTail),
    /// The last waves' tiles shared out over one wave of blocks by k steps
    /// (`kernels/fast_stream.cu`).
    StreamK(StreamK),
}

/// Stream-K for the SIMT kernel: the first `sk_first` tiles (in the
/// grouped order) run one per block; the `sk_tiles` after them, those of a
/// partial last wave and of [`CUDA_STREAM_K_FULL_WAVES`] whole ones, are
/// ⌈k/BK⌉ units each, split evenly over `workers` blocks (one wave). A
/// worker's range may begin and end inside tiles; those pieces go to a
/// workspace and a fix-up kernel adds each split tile's pieces in a fixed
/// order. Against whole tiles the last waves then take (sk_tiles /
/// workers) tiles' time instead of ⌈sk_tiles / workers⌉.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamK {
    /// Tiles that run whole, one per block, before the shared ones.
    pub sk_first: usize,
    /// Tiles shared out.
    pub sk_tiles: usize,
    /// Blocks they are shared among.
    pub workers: usize,
}

/// The tiles of a last, nearly empty wave of `cuda-fast` blocks, run as a
/// split-K product of their own (a "data-parallel + split-K" hybrid, as
/// CUTLASS's stream-K offers): with s slices they cost about 1/s of a
/// wave instead of a whole one. In the grouped block order
/// (`kernels/block_common.cuh`) the last tiles are the last columns of the
/// last strip of [`CUDA_RASTER_GROUP`] tile rows, so the tail is taken as
/// a rectangle reaching C's bottom-right corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaveTail {
    /// Grouped index of the tail's first tile: blocks of the main launch
    /// from here on return at once.
    pub first_tile: usize,
    /// The tail's top-left tile (tile row, tile column).
    pub origin: (usize, usize),
    /// Its tiles.
    pub tiles: usize,
    /// The k slices each of its tiles is split into.
    pub slices: usize,
}

impl FastSchedule {
    /// The schedule of an m×k×n product in tiles of `(rows, cols)` on `sms`
    /// multiprocessors holding `blocks_per_sm` blocks each; `wave_tail`
    /// allows [`FastSchedule::WaveTail`].
    ///
    /// Split-K: when the tiles of C leave SMs idle, as many slices as fill
    /// one wave of resident blocks without starting a second, each at least
    /// `CUDA_SPLIT_K_MIN_DEPTH` deep. A partial second wave would leave
    /// most SMs idle while it runs: 64 tiles in 5 slices on 132 SMs at two
    /// blocks each is 320 blocks, 1.2 waves.
    ///
    /// Wave tail: with w = tiles mod (resident blocks) ≠ 0 the last wave
    /// holds w tiles. The tail is the fewest whole columns of the last
    /// strip that cover w tiles, so the other tiles take one wave fewer; it
    /// is split into as many slices as its tiles fit one wave, at least
    /// `CUDA_WAVE_TAIL_MIN_SLICES` and each at least
    /// `CUDA_SPLIT_K_MIN_DEPTH` deep, when the other tiles take at most
    /// `CUDA_WAVE_TAIL_MAX_WAVES` waves. At 8192² f64 in 128×128 tiles on
    /// 132 SMs: 4096 tiles are 31 waves and 4 tiles; the tail is a strip
    /// of 8 rows, one column, in 16 slices.
    ///
    /// Stream-K, where the kernel has it (`stream_k_waves`: the whole waves
    /// to share out with the partial one, see [`StreamK`]), takes the place
    /// of the wave tail on the same shapes.
    pub fn plan(
        (m, k, n): (usize, usize, usize),
        (rows, cols): (usize, usize),
        sms: usize,
        blocks_per_sm: usize,
        wave_tail: bool,
        stream_k_waves: Option<usize>,
    ) -> FastSchedule {
        let (tiles_m, tiles_n) = (m.div_ceil(rows), n.div_ceil(cols));
        let tiles = tiles_m * tiles_n;
        let sms = sms.max(1);
        let resident = sms * blocks_per_sm.max(1);
        if tiles == 0 {
            return FastSchedule::Tiles;
        }
        if tiles < sms {
            let slices = (resident / tiles).min(k / CUDA_SPLIT_K_MIN_DEPTH);
            return if slices > 1 {
                FastSchedule::SplitK(slices)
            } else {
                FastSchedule::Tiles
            };
        }
        let last_wave = tiles % resident;
        let whole_waves = tiles / resident;
        // Against the one-block kernels' plain path (two k steps per trip;
        // the stream-K kernel has one) stream-K pays over fewer waves.
        let stream_k_max_waves = if blocks_per_sm <= 1 {
            CUDA_STREAM_K_MAX_WAVES_ONE_BLOCK
        } else {
            CUDA_STREAM_K_MAX_WAVES
        };
        if let Some(waves) = stream_k_waves {
            if whole_waves > 0
                && whole_waves <= stream_k_max_waves
                && last_wave != 0
                && k >= CUDA_SPLIT_K_MIN_DEPTH
            {
                let sk_tiles = last_wave + waves.min(whole_waves) * resident;
                return FastSchedule::StreamK(StreamK {
                    sk_first: tiles - sk_tiles,
                    sk_tiles,
                    workers: resident,
                });
            }
        }
        if !wave_tail
            || whole_waves == 0
            || whole_waves > CUDA_WAVE_TAIL_MAX_WAVES
            || last_wave == 0
        {
            return FastSchedule::Tiles;
        }
        let strip_top = (tiles_m - 1) / CUDA_RASTER_GROUP * CUDA_RASTER_GROUP;
        let strip_rows = tiles_m - strip_top;
        let columns = last_wave.div_ceil(strip_rows);
        let tail_tiles = strip_rows * columns;
        let slices = (resident / tail_tiles).min(k / CUDA_SPLIT_K_MIN_DEPTH);
        if columns > tiles_n || slices < CUDA_WAVE_TAIL_MIN_SLICES {
            return FastSchedule::Tiles;
        }
        FastSchedule::WaveTail(WaveTail {
            first_tile: tiles - tail_tiles,
            origin: (strip_top, tiles_n - columns),
            tiles: tail_tiles,
            slices,
        })
    }

    /// What runs, for reports: "", "split-K 4", "wave tail 8 tiles × 16 k slices".
    pub fn describe(self) -> String {
        match self {
            FastSchedule::Tiles => String::new(),
            FastSchedule::SplitK(slices) => format!("split-K {slices}"),
            FastSchedule::WaveTail(tail) => {
                format!("wave tail {} tiles × {} k slices", tail.tiles, tail.slices)
            }
            FastSchedule::StreamK(sk) => {
                format!("stream-K {} tiles over {} blocks", sk.sk_tiles, sk.workers)
            }
        }
    }
}

/// Environment variable that sets `cuda-fast`'s stream-K: `off`, `on`
/// ([`CUDA_STREAM_K_FULL_WAVES`] whole waves with the partial one) or a
/// number of whole waves.
pub const STREAM_K_ENV: &str = "FASTMM_CUDA_STREAM_K";

/// The whole waves stream-K shares out with the partial last one, or
/// `None` when `FASTMM_CUDA_STREAM_K` turns it off; read once per process,
/// a value other than off, on or a number is an error.
pub fn stream_k_waves() -> Result<Option<usize>, Error> {
    static FROM_ENV: std::sync::OnceLock<Result<Option<usize>, String>> =
        std::sync::OnceLock::new();
    FROM_ENV
        .get_or_init(|| match std::env::var(STREAM_K_ENV) {
            Err(_) => Ok(Some(CUDA_STREAM_K_FULL_WAVES)),
            Ok(text) => parse_stream_k(&text),
        })
        .clone()
        .map_err(Error::InvalidOption)
}

fn parse_stream_k(text: &str) -> Result<Option<usize>, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "off" => Ok(None),
        "on" => Ok(Some(CUDA_STREAM_K_FULL_WAVES)),
        number => number
            .parse()
            .map(Some)
            .map_err(|_| format!("{STREAM_K_ENV}: '{number}' is not off, on or a number of waves")),
    }
}

/// Environment variable that turns `cuda-fast`'s wave-tail split off
/// (`off`) or on (`on`, the default); see [`WaveTail`].
pub const WAVE_TAIL_ENV: &str = "FASTMM_CUDA_WAVE_TAIL";

/// Whether `FASTMM_CUDA_WAVE_TAIL` allows the wave-tail split, read once
/// per process; a value other than on or off is an error.
pub fn wave_tail_enabled() -> Result<bool, Error> {
    static FROM_ENV: std::sync::OnceLock<Result<bool, String>> = std::sync::OnceLock::new();
    switch_from_env(&FROM_ENV, WAVE_TAIL_ENV, true)
}

/// The on/off switch `name` of the environment (`default` when unset),
/// read once into `cell`; a value other than on or off is an error.
fn switch_from_env(
    cell: &'static std::sync::OnceLock<Result<bool, String>>,
    name: &str,
    default: bool,
) -> Result<bool, Error> {
    cell.get_or_init(|| match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(text) => parse_switch(name, &text),
    })
    .clone()
    .map_err(Error::InvalidOption)
}

/// `on`/`1` or `off`/`0` (any case) of the switch `name`.
fn parse_switch(name: &str, text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "on" | "1" => Ok(true),
        "off" | "0" => Ok(false),
        other => Err(format!("{name}: '{other}' is not on or off")),
    }
}

/// Environment variable that turns the f64 8×8 mbarrier kernel of
/// `cuda-fast` off (`off`: f64's TM = 8 runs 8×4 tiles with a block
/// barrier per k step, as before sm_90) or on (`on`, the default on sm_90
/// and later).
pub const MBAR_ENV: &str = "FASTMM_CUDA_MBAR";

/// Whether `FASTMM_CUDA_MBAR` allows the mbarrier kernel, read once per
/// process; a value other than on or off is an error.
pub fn mbarriers_enabled() -> Result<bool, Error> {
    static FROM_ENV: std::sync::OnceLock<Result<bool, String>> = std::sync::OnceLock::new();
    switch_from_env(&FROM_ENV, MBAR_ENV, true)
}

/// Micro-tile (rows, columns) of the mbarrier kernel
/// (`KernelSource::FastMbar`): 64 f64 accumulators in 128 registers, one
/// block of 8 warps per SM, 16·8 = 128 rows and columns per block tile.
pub const MBAR_MICRO_TILE: (usize, usize) = (8, 8);

/// Bytes of dynamic shared memory the mbarrier kernel takes for `dtype`:
/// `CUDA_MBAR_STAGES` stages of BK rows of A's transposed tile (padded by
/// one 16-byte vector) and BK rows of B's.
pub fn mbar_shared_bytes(dtype: DType) -> usize {
    let (tm, tn) = MBAR_MICRO_TILE;
    let size = dtype.size_bytes();
    let padded_rows = 16 * tm + 16 / size;
    crate::tunables::CUDA_MBAR_STAGES
        * crate::tunables::CUDA_MBAR_BK
        * (padded_rows + 16 * tn)
        * size
}

/// The SIMT micro-tiles (TM, the `TM` define of `kernels/fast.cu`; its
/// columns: [`simt_micro_tile`]) the shape rule of `cuda-fast`
/// ([`FastConfig::pick`]) chooses among when no `--tile` is given,
/// smallest block tile first. 4-byte types take 8×16 (128×256 block
/// tiles, one block per SM: cuBLAS's SIMT sgemm tile on Hopper, with the
/// long side along B's contiguous rows; 16×8 was slower everywhere).
/// 8-byte types take 4×4 (64×64), and f64 also 8×4 (128×64; on sm_90
/// and later 8×8 instead, 128×128, see [`FastConfig::mbarriers`]), which
/// measured 17.7–19.2 TFLOPS at 1024–8192 on the H100 against 13.3–14.1
/// for 4×4, but 3.5 against 5.1 at 512. i64 keeps 4×4, as fast as or
/// faster than 8×8 at every size measured: its multiplies are emulated,
/// so the larger tile's extra operand reuse does not pay for its
/// registers.
pub fn simt_shape_tiles(dtype: DType) -> &'static [usize] {
    match dtype {
        DType::F64 => &[4, 8],
        DType::I64 => &[4],
        _ => &[8],
    }
}

/// Rows and columns (TM, TN) of one thread's micro-tile in
/// `kernels/fast.cu` for its `TM`: 4-byte types pair 8 rows with 16
/// columns and 16 rows with 8 (128 accumulators either way); f64 pairs 8
/// rows with 4 (32 accumulators in 64 registers, so two blocks of 8 warps
/// share an SM: 19.2 TFLOPS at 8192 on the H100 against 17.0 for 8×8 with
/// one block); i64 uses square ones.
pub fn simt_micro_tile(dtype: DType, tm: usize) -> (usize, usize) {
    match (dtype, tm) {
        (DType::F32 | DType::I32, 8) => (8, 16),
        (DType::F32 | DType::I32, 16) => (16, 8),
        (DType::F64, 8) => (8, 4),
        _ => (tm, tm),
    }
}

/// Bytes of dynamic shared memory `kernels/fast_ring.cu` takes for
/// `dtype`, micro-tile rows `tm` and `stages` stages: `STAGE_ELEMS`
/// elements per stage, BK rows of A's transposed tile padded by one 16-byte
/// vector and BK rows of B's.
pub fn ring_shared_bytes(dtype: DType, tm: usize, stages: usize) -> usize {
    let (tm, tn) = simt_micro_tile(dtype, tm);
    let size = dtype.size_bytes();
    let bk = if tm * tn > 64 { 16 } else { 8 };
    let padded_rows = 16 * tm + 16 / size;
    stages * bk * (padded_rows + 16 * tn) * size
}

/// The TMs `kernels/fast.cu` is built with for a type, the default first:
/// 8 (8×16) and 16 (16×8) for 4-byte elements, 4 (4×4) and 8 (8×4 for
/// f64, 8×8 for i64) for 8-byte ones (4 × 4 leaves a 4-byte A tile short
/// of one vector per thread; 8 × 16 of 8-byte accumulators would not fit
/// the registers, and i64's 4×8 spilled).
pub fn simt_micro_tiles(dtype: DType) -> [usize; 2] {
    match dtype.size_bytes() {
        4 => [8, 16],
        _ => [4, 8],
    }
}

/// Environment variable that forces the `cuda-fast` kernel family:
/// `auto`, `simt` or `mma` (see [`FastKernel`]).
pub const FAST_KERNEL_ENV: &str = "FASTMM_CUDA_KERNEL";

/// The kernel family of `cuda-fast`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum FastKernel {
    /// `mma` for f64 on sm_90 and later, else `simt`.
    #[default]
    Auto,
    /// `kernels/fast.cu`: FMA units, register-blocked; every type.
    Simt,
    /// `kernels/fast_mma.cu`: f64 on the FP64 tensor cores (sm_90+).
    Mma,
}

impl FastKernel {
    /// Every choice, as accepted by `--cuda-kernel` and `FASTMM_CUDA_KERNEL`.
    pub const ALL: [FastKernel; 3] = [FastKernel::Auto, FastKernel::Simt, FastKernel::Mma];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FastKernel::Auto => "auto",
            FastKernel::Simt => "simt",
            FastKernel::Mma => "mma",
        }
    }

    /// The family that runs `dtype` on `gpu` when `requested` is asked for
    /// (`None`: `FASTMM_CUDA_KERNEL`, else `auto`). Never `Auto`; asking for
    /// `mma` where it cannot run is an error, not a silent fallback.
    pub fn resolve(
        requested: Option<FastKernel>,
        dtype: DType,
        gpu: &Gpu,
    ) -> Result<FastKernel, Error> {
        let requested = match requested {
            Some(choice) => choice,
            None => Self::from_env()?,
        };
        let mma_runs = dtype == DType::F64 && gpu.info().compute_capability >= (9, 0);
        match requested {
            FastKernel::Auto if mma_runs => Ok(FastKernel::Mma),
            FastKernel::Auto | FastKernel::Simt => Ok(FastKernel::Simt),
            FastKernel::Mma if mma_runs => Ok(FastKernel::Mma),
            FastKernel::Mma => Err(Error::Unsupported {
                algorithm: "cuda-fast",
                what: format!(
                    "the mma kernel for {dtype} on compute capability {}.{} (it needs f64 and sm_90+)",
                    gpu.info().compute_capability.0,
                    gpu.info().compute_capability.1
                ),
            }),
        }
    }

    /// `FASTMM_CUDA_KERNEL`, read once per process.
    fn from_env() -> Result<FastKernel, Error> {
        static FROM_ENV: std::sync::OnceLock<Result<FastKernel, String>> =
            std::sync::OnceLock::new();
        FROM_ENV
            .get_or_init(|| match std::env::var(FAST_KERNEL_ENV) {
                Ok(text) => text.parse().map_err(|e: Error| e.to_string()),
                Err(_) => Ok(FastKernel::Auto),
            })
            .clone()
            .map_err(|message| Error::InvalidOption(format!("{FAST_KERNEL_ENV}: {message}")))
    }
}

impl std::fmt::Display for FastKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for FastKernel {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        FastKernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::InvalidOption(format!("cuda kernel '{s}' is not one of auto, simt, mma"))
            })
    }
}

/// A resolved `cuda-fast` configuration: the kernel family and, for the
/// SIMT kernel, its micro-tile rows TM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastConfig {
    /// `Simt` or `Mma` (never `Auto`).
    pub family: FastKernel,
    /// Rows of a thread's micro-tile in `kernels/fast.cu` (columns:
    /// [`simt_micro_tile`]); unused by `Mma`.
    pub tm: usize,
    /// The element type it runs.
    pub dtype: DType,
    /// f64's TM = 8 on sm_90 and later (unless `FASTMM_CUDA_MBAR=off`):
    /// [`MBAR_MICRO_TILE`] micro-tiles in `KernelSource::FastMbar`, whose
    /// threads hand the staged buffers over through mbarriers, instead of
    /// 8×4 ones with a block barrier per k step.
    pub mbarriers: bool,
}

impl FastConfig {
    /// The configurations `opts` lets `cuda-fast` choose among on `gpu`
    /// for `dtype`, smallest block tile first: the family of
    /// `opts.cuda_kernel` (or `FASTMM_CUDA_KERNEL`), and as the SIMT
    /// kernel's TM `opts.tile` alone when given (8 (8×16) or 16 (16×8) for
    /// 4-byte types, 4 or 8 for 8-byte ones), else [`simt_shape_tiles`].
    pub fn candidates(
        opts: &GemmOptions,
        dtype: DType,
        gpu: &Gpu,
    ) -> Result<Vec<FastConfig>, Error> {
        let family = FastKernel::resolve(opts.cuda_kernel, dtype, gpu)?;
        let simt = simt_micro_tiles(dtype);
        let allowed: &[usize] = match family {
            FastKernel::Mma => &[],
            FastKernel::Auto | FastKernel::Simt => &simt,
        };
        let tiles: &[usize] = match opts.tile {
            // Mma's tiles are fixed; its TM is unused.
            None if family == FastKernel::Mma => &simt[..1],
            None => simt_shape_tiles(dtype),
            Some(tm) if allowed.contains(&tm) => {
                std::slice::from_ref(simt.iter().find(|&&t| t == tm).expect("allowed is simt"))
            }
            Some(tm) => {
                return Err(Error::InvalidOption(format!(
                    "cuda-fast {family} for {dtype} takes --tile {} (micro-tile rows), not {tm}",
                    if allowed.is_empty() {
                        "nothing: its tiles are fixed".to_string()
                    } else {
                        format!("{allowed:?}")
                    }
                )))
            }
        };
        let generation: u32 = gpu.arch().trim_start_matches("sm_").parse().unwrap_or(0);
        let mbarriers_here = family == FastKernel::Simt
            && dtype == DType::F64
            && generation >= 90
            && mbarriers_enabled()?;
        Ok(tiles
            .iter()
            .map(|&tm| FastConfig {
                family,
                tm,
                dtype,
                mbarriers: mbarriers_here && tm == MBAR_MICRO_TILE.0,
            })
            .collect())
    }

    /// The shape rule: of `candidates` (smallest block tile first), the
    /// last whose block tiles of an m×n product fill all `sms`
    /// multiprocessors at once, else the first. Larger tiles reuse more
    /// of each operand load but leave SMs idle on small products, where
    /// split-K then has to make up the blocks.
    pub fn pick(candidates: &[FastConfig], shape: (usize, usize), sms: usize) -> FastConfig {
        candidates[FastConfig::pick_index(candidates, shape, sms)]
    }

    /// The index in `candidates` of [`FastConfig::pick`]'s choice.
    fn pick_index(candidates: &[FastConfig], (m, n): (usize, usize), sms: usize) -> usize {
        candidates
            .iter()
            .rposition(|config| {
                let (rows, cols) = config.block_shape();
                m.div_ceil(rows) * n.div_ceil(cols) >= sms
            })
            .unwrap_or(0)
    }

    /// The configuration `cuda-fast` runs for an m×n product on `gpu`
    /// (see [`FastConfig::candidates`] and [`FastConfig::pick`]).
    pub fn resolve(
        opts: &GemmOptions,
        dtype: DType,
        gpu: &Gpu,
        (m, n): (usize, usize),
    ) -> Result<FastConfig, Error> {
        let candidates = FastConfig::candidates(opts, dtype, gpu)?;
        Ok(FastConfig::pick(
            &candidates,
            (m, n),
            gpu.info().multiprocessors,
        ))
    }

    /// Rows and columns of one thread's micro-tile (SIMT kernels).
    pub fn micro_tile(self) -> (usize, usize) {
        if self.mbarriers {
            MBAR_MICRO_TILE
        } else {
            simt_micro_tile(self.dtype, self.tm)
        }
    }

    /// The kernel variant to compile.
    pub fn key(self) -> KernelKey {
        let dtype = self.dtype;
        match self.family {
            FastKernel::Mma => KernelKey {
                source: KernelSource::FastMma,
                dtype,
                tile: CUDA_MMA_STAGES,
            },
            _ if self.mbarriers => KernelKey {
                source: KernelSource::FastMbar,
                dtype,
                tile: self.tm,
            },
            FastKernel::Auto | FastKernel::Simt => KernelKey {
                source: KernelSource::Fast,
                dtype,
                tile: self.tm,
            },
        }
    }

    /// Blocks per SM: the `__launch_bounds__` of `fast.cu` (`MIN_BLOCKS`:
    /// one when the accumulators take over 256 bytes per thread, else two)
    /// and `fast_mma.cu` (one).
    pub fn blocks_per_sm(self) -> usize {
        let (tm, tn) = self.micro_tile();
        match self.family {
            FastKernel::Mma => 1,
            _ if tm * tn * self.dtype.size_bytes() > 256 => 1,
            _ => 2,
        }
    }

    /// The `fast_ring.cu` twin of a SIMT configuration (none for `Mma`,
    /// and none for the mbarrier kernel, a ring itself, which takes
    /// unaligned operands as they are).
    pub fn ring_key(self) -> Option<KernelKey> {
        (self.family != FastKernel::Mma && !self.mbarriers).then_some(KernelKey {
            source: KernelSource::FastRing,
            dtype: self.dtype,
            tile: self.tm,
        })
    }

    /// Dynamic shared memory one block of the `fast_ring.cu` twin takes on
    /// this GPU ([`ring_shared_bytes`]).
    pub fn ring_shared_bytes(self, gpu: &Gpu) -> Result<usize, Error> {
        let stages = crate::cuda::compile::ring_stages(gpu.arch())?;
        Ok(ring_shared_bytes(self.dtype, self.tm, stages))
    }

    /// Dynamic shared memory one block of the main kernel takes: the
    /// mbarrier kernel's ring ([`mbar_shared_bytes`]), else none (static).
    pub fn shared_bytes(self) -> usize {
        if self.mbarriers {
            mbar_shared_bytes(self.dtype)
        } else {
            0
        }
    }

    /// Rows and columns of C one block computes.
    pub fn block_shape(self) -> (usize, usize) {
        let (tm, tn) = self.micro_tile();
        match self.family {
            FastKernel::Mma => (MMA_BLOCK_TILE, MMA_BLOCK_TILE),
            _ => (16 * tm, 16 * tn),
        }
    }

    /// How it lays out an m×k×n product on `gpu` (see [`FastSchedule::plan`])
    /// whose operands' rows are all 16-byte `aligned` or not.
    pub fn schedule(
        self,
        gpu: &Gpu,
        dims: (usize, usize, usize),
        aligned: bool,
    ) -> Result<FastSchedule, Error> {
        Ok(FastSchedule::plan(
            dims,
            self.block_shape(),
            gpu.info().multiprocessors,
            self.blocks_per_sm(),
            wave_tail_enabled()?,
            match self.stream_key() {
                Some(_) if aligned => stream_k_waves()?,
                _ => None,
            },
        ))
    }

    /// The `fast_stream.cu` twin of a SIMT configuration (none for `Mma`
    /// or the mbarrier kernel, whose last waves take the wave-tail split),
    /// which runs aligned operands under a [`FastSchedule::StreamK`].
    pub fn stream_key(self) -> Option<KernelKey> {
        (self.family != FastKernel::Mma && !self.mbarriers).then_some(KernelKey {
            source: KernelSource::FastStream,
            dtype: self.dtype,
            tile: self.tm,
        })
    }

    /// What runs, for reports: e.g. "simt 128x256 tiles, 8x16/thread".
    pub fn describe(self) -> String {
        let (rows, cols) = self.block_shape();
        let per_thread = match self.family {
            FastKernel::Mma => "DMMA m16n8k8".to_string(),
            _ => {
                let (tm, tn) = self.micro_tile();
                let sync = if self.mbarriers { ", mbarriers" } else { "" };
                format!("{tm}x{tn}/thread{sync}")
            }
        };
        format!("{} {rows}x{cols} tiles, {per_thread}", self.family)
    }
}

/// Block tile edge of `kernels/fast_mma.cu` (BM = BN).
const MMA_BLOCK_TILE: usize = 128;

/// A GPU matrix operand: device address of element (0, 0), row-major with
/// `ld` elements between rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Operand {
    pub ptr: CUdeviceptr,
    pub ld: usize,
}

impl Operand {
    /// The operand moved to element (row, col).
    pub fn at<T>(self, row: usize, col: usize) -> Operand {
        Operand {
            ptr: self.ptr + ((row * self.ld + col) * std::mem::size_of::<T>()) as CUdeviceptr,
            ld: self.ld,
        }
    }
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
}

/// A kernel of `kernels/`: each block computes a `block` = (rows, columns)
/// tile of C with `threads` = (x, y) threads.
#[derive(Clone)]
pub(crate) struct TileKernel {
    function: CudaFunction,
    block: (usize, usize),
    threads: (u32, u32),
    /// Blocks of this kernel one SM holds at once (its launch bounds).
    blocks_per_sm: usize,
    /// Dynamic shared memory per block, in bytes (0: static only).
    shared_bytes: u32,
    /// A ring kernel (`fast_ring.cu`): takes operands whose rows are not
    /// 16-byte aligned, and its `vec_ok` speaks of B's rows alone.
    any_alignment: bool,
    /// `cuda-fast`'s SIMT kernels: the twin for operands whose rows are
    /// not 16-byte aligned.
    ring: Option<RingKernel>,
    /// `cuda-fast`'s SIMT kernels: the stream-K twin (`fast_stream.cu`),
    /// compiled on first use.
    stream: Option<KernelKey>,
}

/// `kernels/fast_ring.cu` for one SIMT configuration, compiled on first
/// use (most operands are aligned and never need it).
#[derive(Clone, Copy)]
struct RingKernel {
    key: KernelKey,
    /// Its dynamic shared memory per block, in bytes.
    shared_bytes: usize,
}

pub(crate) fn to_i32(what: &str, v: usize) -> Result<i32, Error> {
    i32::try_from(v).map_err(|_| Error::Unsupported {
        algorithm: "CUDA",
        what: format!("{what} = {v} (CUDA kernels and cuBLAS index with 32-bit ints)"),
    })
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
            Algorithm::Cublas if T::DTYPE.is_integer() => Err(Error::Unsupported {
                algorithm: "cublas",
                what: format!("{} (cuBLAS has no integer GEMM)", T::DTYPE),
            }),
            Algorithm::Cublas => {
                let precision = opts.gpu_precision.unwrap_or_default();
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
                    blocks_per_sm: 1,
                    shared_bytes: 0,
                    any_alignment: false,
                    ring: None,
                    stream: None,
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
                            blocks_per_sm: config.blocks_per_sm(),
                            shared_bytes: shared_bytes as u32,
                            any_alignment: config.mbarriers,
                            ring,
                            stream: config.stream_key(),
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
            other => Err(Error::InvalidOption(format!(
                "{other} is not a classical GPU algorithm (cublas, cuda-fast, cuda-tiled or cuda-naive)"
            ))),
        }
    }

    /// c ← α·a·b + β·c for an m×k `a` and a k×n `b` (β = 0 never reads c),
    /// queued on the GPU's stream.
    #[allow(clippy::too_many_arguments)]
    pub fn run<T: Element>(
        &self,
        gpu: &Gpu,
        (m, k, n): (usize, usize, usize),
        alpha: T,
        a: Operand,
        b: Operand,
        beta: T,
        c: Operand,
    ) -> Result<(), Error> {
        let dims = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
        match self {
            ClassicalGemm::Kernel(kernel) => {
                launch_tile_kernel(gpu, kernel, None, (m, k, n), alpha, a, b, beta, c)
            }
            ClassicalGemm::Fast {
                configs,
                kernels,
                combine,
            } => {
                let chosen = FastConfig::pick_index(configs, (m, n), gpu.info().multiprocessors);
                launch_tile_kernel(
                    gpu,
                    &kernels[chosen],
                    Some(combine),
                    (m, k, n),
                    alpha,
                    a,
                    b,
                    beta,
                    c,
                )
            }
            ClassicalGemm::Cublas(GpuPrecision::Fp32) => {
                cublas_gemm(gpu, dims, alpha, a, b, beta, c)
            }
            ClassicalGemm::Cublas(precision) => {
                cublas_gemm_ex(gpu, *precision, dims, alpha, a, b, beta, c)
            }
        }
    }
}

/// Launches a kernel of `kernels/` for c ← α·a·b + β·c (β = 0 never reads
/// c); `fast` is cuda-fast's combine kernel, whose main kernel takes the
/// alignment flag, the split-K arguments and the wave-tail limit, and
/// runs the [`FastSchedule`] of the product.
#[allow(clippy::too_many_arguments)]
fn launch_tile_kernel<T: Element>(
    gpu: &Gpu,
    kernel: &TileKernel,
    fast: Option<&CudaFunction>,
    (m, k, n): (usize, usize, usize),
    alpha: T,
    a: Operand,
    b: Operand,
    beta: T,
    c: Operand,
) -> Result<(), Error> {
    let aligned = rows_aligned::<T>(&a) && rows_aligned::<T>(&b);
    let schedule = match fast {
        Some(_) => FastSchedule::plan(
            (m, k, n),
            kernel.block,
            gpu.info().multiprocessors,
            kernel.blocks_per_sm,
            wave_tail_enabled()?,
            match kernel.stream {
                Some(_) if aligned => stream_k_waves()?,
                _ => None,
            },
        ),
        None => FastSchedule::Tiles,
    };
    let pass = |dims, slices, tile_limit, a, b, c| {
        launch_pass(
            gpu, kernel, fast, dims, slices, tile_limit, alpha, a, b, beta, c,
        )
    };
    match schedule {
        FastSchedule::Tiles => pass((m, k, n), 1, usize::MAX, a, b, c),
        FastSchedule::SplitK(slices) => pass((m, k, n), slices, usize::MAX, a, b, c),
        FastSchedule::WaveTail(tail) => {
            // The main launch skips the tail's tiles, which are disjoint
            // from its own, so the two passes may run in either order.
            pass((m, k, n), 1, tail.first_tile, a, b, c)?;
            let (row0, col0) = (
                tail.origin.0 * kernel.block.0,
                tail.origin.1 * kernel.block.1,
            );
            pass(
                (m - row0, k, n - col0),
                tail.slices,
                usize::MAX,
                a.at::<T>(row0, 0),
                b.at::<T>(0, col0),
                c.at::<T>(row0, col0),
            )
        }
        FastSchedule::StreamK(plan) => {
            let key = kernel
                .stream
                .expect("stream-K is planned only with its kernel");
            launch_stream_k(gpu, key, kernel, plan, (m, k, n), alpha, a, b, beta, c)
        }
    }
}

/// Whether the rows of contiguous row-major m×k and k×n operands in
/// 16-byte aligned allocations all start on 16-byte boundaries: when k and
/// n are whole vectors of `dtype`.
pub fn contiguous_rows_aligned(dtype: DType, k: usize, n: usize) -> bool {
    let lanes = 16 / dtype.size_bytes();
    k.is_multiple_of(lanes) && n.is_multiple_of(lanes)
}

/// The arguments every kernel of `kernels/` that multiplies begins with:
/// `int m, int n, int k, ELEM alpha, const ELEM* a, long long lda, const
/// ELEM* b, long long ldb, ELEM beta, ELEM* c, long long ldc`.
struct GemmArgs<T> {
    m: i32,
    n: i32,
    k: i32,
    alpha: T,
    a: CUdeviceptr,
    lda: i64,
    b: CUdeviceptr,
    ldb: i64,
    beta: T,
    c: CUdeviceptr,
    ldc: i64,
}

impl<T: Element> GemmArgs<T> {
    fn new(
        (m, k, n): (i32, i32, i32),
        alpha: T,
        a: Operand,
        b: Operand,
        beta: T,
        c: Operand,
    ) -> Self {
        GemmArgs {
            m,
            n,
            k,
            alpha,
            a: a.ptr,
            lda: a.ld as i64,
            b: b.ptr,
            ldb: b.ld as i64,
            beta,
            c: c.ptr,
            ldc: c.ld as i64,
        }
    }

    /// Pushes them, in the kernels' order, onto a launch.
    fn push<'a>(&'a self, launch: &mut LaunchArgs<'a>) {
        launch
            .arg(&self.m)
            .arg(&self.n)
            .arg(&self.k)
            .arg(&self.alpha)
            .arg(&self.a)
            .arg(&self.lda)
            .arg(&self.b)
            .arg(&self.ldb)
            .arg(&self.beta)
            .arg(&self.c)
            .arg(&self.ldc);
    }
}

/// Whether every row of `o` starts on a 16-byte boundary, so that
/// whole-vector loads of its rows are aligned.
fn rows_aligned<T>(o: &Operand) -> bool {
    let lanes = 16 / std::mem::size_of::<T>();
    o.ptr.is_multiple_of(16) && o.ld.is_multiple_of(lanes)
}

/// The two launches of a [`StreamK`] schedule (`kernels/fast_stream.cu`):
/// the tiles and workers, then the fix-up that adds the split tiles'
/// pieces into c with α and β. A and B rows are 16-byte aligned.
#[allow(clippy::too_many_arguments)]
fn launch_stream_k<T: Element>(
    gpu: &Gpu,
    key: KernelKey,
    kernel: &TileKernel,
    plan: StreamK,
    (m, k, n): (usize, usize, usize),
    alpha: T,
    a: Operand,
    b: Operand,
    beta: T,
    c: Operand,
) -> Result<(), Error> {
    let (mi, ki, ni) = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
    let (block_rows, block_cols) = kernel.block;
    let tiles_m = to_i32("tile rows", m.div_ceil(block_rows))?;
    let tiles_n = to_i32("tile columns", n.div_ceil(block_cols))?;
    let sk_first = to_i32("whole tiles", plan.sk_first)?;
    let sk_tiles = to_i32("stream-K tiles", plan.sk_tiles)?;
    let workers = to_i32("stream-K blocks", plan.workers)?;
    let grid = to_i32("stream-K grid", plan.sk_first + plan.workers)?;
    // Two slots of one tile's accumulators per worker (ACC is as wide as
    // T for every type).
    let slots = 2 * plan.workers * block_rows * block_cols;
    // SAFETY: a worker writes a slot whole before the fix-up, which runs
    // after it on the same stream, reads it.
    let partials = unsafe { gpu.stream.alloc::<T>(slots) }
        .map_err(|e| cuda_err("cannot allocate the stream-K workspace", e))?;
    let partials_ptr = partials.device_ptr(&gpu.stream).0;
    let args = GemmArgs::new((mi, ki, ni), alpha, a, b, beta, c);
    let vec_ok = 1i32;
    let main = gpu.entry_function(key, key.source.entry())?;
    let mut launch = gpu.stream.launch_builder(&main);
    args.push(&mut launch);
    launch
        .arg(&vec_ok)
        .arg(&tiles_m)
        .arg(&tiles_n)
        .arg(&sk_first)
        .arg(&sk_tiles)
        .arg(&workers)
        .arg(&partials_ptr);
    let config = |blocks: i32| LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (kernel.threads.0, kernel.threads.1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the arguments match gemm_fast_stream's signature (int ×3,
    // ELEM, pointer, long long, pointer, long long, ELEM, pointer, long
    // long, int vec_ok, int ×5, ACC pointer); every row of A and B is
    // 16-byte aligned (the caller's schedule), the operands address m×k,
    // k×n and m×n row-major blocks with those leading dimensions, the
    // tile grid is C's, and the workspace holds 2·workers tiles.
    unsafe { launch.launch(config(grid)) }.map_err(|e| cuda_err("stream-K launch failed", e))?;
    let fixup = gpu.entry_function(key, KernelSource::STREAM_FIXUP_ENTRY)?;
    let mut launch = gpu.stream.launch_builder(&fixup);
    launch
        .arg(&args.m)
        .arg(&args.n)
        .arg(&args.k)
        .arg(&args.alpha)
        .arg(&args.beta)
        .arg(&args.c)
        .arg(&args.ldc)
        .arg(&tiles_m)
        .arg(&tiles_n)
        .arg(&sk_first)
        .arg(&sk_tiles)
        .arg(&workers)
        .arg(&partials_ptr);
    // SAFETY: the arguments match gemm_fast_stream_fixup's signature (int
    // ×3, ELEM ×2, pointer, long long, int ×5, ACC pointer), with the same
    // plan as the launch before it on this stream, whose pieces it reads.
    unsafe { launch.launch(config(sk_tiles)) }
        .map_err(|e| cuda_err("stream-K fix-up launch failed", e))?;
    Ok(())
}

/// One launch of a kernel of `kernels/` (and, with split-K, the combine
/// that adds its slices into c): c ← α·a·b + β·c over k in `slices`
/// slices; blocks from grouped index `tile_limit` on skip their tiles.
#[allow(clippy::too_many_arguments)]
fn launch_pass<T: Element>(
    gpu: &Gpu,
    kernel: &TileKernel,
    fast: Option<&CudaFunction>,
    (m, k, n): (usize, usize, usize),
    slices: usize,
    tile_limit: usize,
    alpha: T,
    a: Operand,
    b: Operand,
    beta: T,
    c: Operand,
) -> Result<(), Error> {
    let (mi, ki, ni) = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
    let (block_rows, block_cols) = kernel.block;
    let grid_y = m.div_ceil(block_rows);
    if grid_y > gpu.info().max_grid_y {
        return Err(Error::Unsupported {
            algorithm: "CUDA kernels",
            what: format!(
                "{m} rows in blocks of {block_rows} (grid y {grid_y} over the device's {})",
                gpu.info().max_grid_y
            ),
        });
    }
    let aligned = rows_aligned::<T>(&a) && rows_aligned::<T>(&b);
    // Unaligned operands would put fast.cu on its synchronous scalar
    // loads in every step: its fast_ring.cu twin copies them
    // asynchronously instead, and needs only B aligned for its vectors.
    let ring = match (fast, kernel.ring) {
        (Some(_), Some(ring)) if !aligned => Some(ring),
        _ => None,
    };
    let (function, shared_bytes, vec_ok) = match ring {
        Some(ring) => {
            let function = gpu.function_with_shared(ring.key, ring.shared_bytes, "cuda-fast")?;
            (
                function,
                ring.shared_bytes as u32,
                rows_aligned::<T>(&b) as i32,
            )
        }
        None if kernel.any_alignment => (
            kernel.function.clone(),
            kernel.shared_bytes,
            rows_aligned::<T>(&b) as i32,
        ),
        None => (kernel.function.clone(), kernel.shared_bytes, aligned as i32),
    };
    let k_slice = k.div_ceil(slices).div_ceil(CUDA_FAST_BK) * CUDA_FAST_BK;
    let slices = k.div_ceil(k_slice);
    // Split-K: the slices go to a workspace, one m×n block each,
    // and are then added into C with α and β.
    let workspace = if slices > 1 {
        // SAFETY: every slice is written whole by the kernel
        // (β = 0 on the workspace) before the combine reads it.
        let buffer = unsafe { gpu.stream.alloc::<T>(slices * m * n) }
            .map_err(|e| cuda_err("cannot allocate the split-K workspace", e))?;
        Some(buffer)
    } else {
        None
    };
    let (target, kernel_alpha, kernel_beta) = match &workspace {
        Some(buffer) => (
            Operand {
                ptr: buffer.device_ptr(&gpu.stream).0,
                ld: n,
            },
            T::ONE,
            T::ZERO,
        ),
        None => (c, alpha, beta),
    };
    let args = GemmArgs::new((mi, ki, ni), kernel_alpha, a, b, kernel_beta, target);
    let config = LaunchConfig {
        grid_dim: (n.div_ceil(block_cols) as u32, grid_y as u32, slices as u32),
        block_dim: (kernel.threads.0, kernel.threads.1, 1),
        shared_mem_bytes: shared_bytes,
    };
    let k_slice_i = to_i32("k slice", k_slice)?;
    let tile_limit_i = tile_limit.min(i32::MAX as usize) as i32;
    let c_slice = (m * n) as i64;
    let mut launch = gpu.stream.launch_builder(&function);
    args.push(&mut launch);
    if fast.is_some() {
        launch
            .arg(&vec_ok)
            .arg(&k_slice_i)
            .arg(&c_slice)
            .arg(&tile_limit_i);
    }
    // SAFETY: the arguments match the kernel's signature (int ×3,
    // ELEM, pointer, long long, pointer, long long, ELEM,
    // pointer, long long, and for cuda-fast `int vec_ok`, `int
    // k_slice`, `long long c_slice`, `int tile_limit`, which only
    // makes blocks return early; `vec_ok` is true only when
    // every row of A and B (fast_ring.cu: of B) starts 16-byte
    // aligned; fast_ring.cu's dynamic shared memory is the size
    // its stages take and was allowed above; with split-K
    // the target holds `slices` m×n blocks c_slice apart), and
    // the caller's operands address m×k, k×n and m×n row-major
    // blocks with those leading dimensions.
    unsafe { launch.launch(config) }.map_err(|e| cuda_err("kernel launch failed", e))?;
    if let (Some(combine), Some(buffer)) = (fast, &workspace) {
        let base = buffer.device_ptr(&gpu.stream).0;
        let size = std::mem::size_of::<T>() as u64;
        let terms: Vec<(T, Operand)> = (0..slices)
            .map(|s| {
                let ptr = base + (s * m * n) as u64 * size;
                (alpha, Operand { ptr, ld: n })
            })
            .collect();
        // SAFETY: C is the caller's m×n block; each term is one
        // m×n slice of the workspace, which C does not overlap.
        unsafe { launch_combine(gpu, combine, beta, c, (m, n), &terms) }?;
    }
    Ok(())
}

/// C ← α·A·B + β·C with a GPU algorithm on host matrices: uploads A and B
/// (and C if β ≠ 0) into `opts.gpu_memory`, runs, and copies C back.
/// β = 0 never reads C. Shapes are checked by the caller (the boundary).
/// With β = 0 the product runs once untimed and then
/// [`CUDA_TIMED_LAUNCHES`] times (see [`GpuTimes::kernel_ms`]); see
/// [`multiply_once`] for a single run.
pub fn multiply_timed<T: Element>(
    gpu: &Gpu,
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<GpuTimes, Error> {
    multiply_on_device(gpu, alpha, a, b, beta, c, opts, true)
}

/// [`multiply_timed`] with the product run once: the library's path.
pub fn multiply_once<T: Element>(
    gpu: &Gpu,
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<GpuTimes, Error> {
    multiply_on_device(gpu, alpha, a, b, beta, c, opts, false)
}

#[allow(clippy::too_many_arguments)]
fn multiply_on_device<T: Element>(
    gpu: &Gpu,
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
    median_of_launches: bool,
) -> Result<GpuTimes, Error> {
    let (m, k) = a.shape();
    let n = b.cols();
    // Compile (or fetch) the kernels and check their blocks before any copy.
    let scheme = Scheme::of(opts.algorithm);
    let base = match scheme {
        Some(_) => opts.base.unwrap_or_else(|| default_gpu_base(T::DTYPE)),
        None => opts.algorithm,
    };
    let precision = opts.gpu_precision.unwrap_or_default();
    if precision != GpuPrecision::Fp32 && opts.algorithm != Algorithm::Cublas {
        return Err(Error::InvalidOption(format!(
            "precision {precision} is a cuBLAS mode: it applies to cublas, not {}",
            opts.algorithm
        )));
    }
    let classical = ClassicalGemm::resolve::<T>(gpu, base, opts)?;
    let memory = opts.gpu_memory.unwrap_or_default();
    let beta_is_zero = beta == T::ZERO;
    // Asked before the upload: the default schedule's temporaries must fit
    // beside A, B and C.
    let resolved;
    let opts = match scheme {
        Some(scheme) => {
            resolved = GemmOptions {
                variant: Some(crate::cuda::strassen::default_variant::<T>(
                    gpu,
                    scheme,
                    (m, k, n),
                    beta_is_zero,
                    opts,
                )?),
                ..*opts
            };
            &resolved
        }
        None => opts,
    };

    // Staging into row-major host buffers (page-locked with `gpu_pinned`)
    // is a layout step outside the timings; the copies are timed.
    let pinned = opts.gpu_pinned;
    let staged_a = HostBuffer::stage(gpu, a, pinned)?;
    let staged_b = HostBuffer::stage(gpu, b, pinned)?;
    let mut staged_c = if beta_is_zero {
        HostBuffer::new(gpu, m * n, pinned)?
    } else {
        HostBuffer::stage(gpu, c.rb(), pinned)?
    };
    let start = Instant::now();
    let da = DeviceMatrix::upload(gpu, memory, (m, k), Some(&staged_a))?;
    let db = DeviceMatrix::upload(gpu, memory, (k, n), Some(&staged_b))?;
    let dc = DeviceMatrix::upload(gpu, memory, (m, n), (!beta_is_zero).then_some(&staged_c))?;
    let (mut oa, mut ob, oc) = (da.operand(), db.operand(), dc.operand());
    // The 16-bit modes take 16-bit operands: converted on the device, as
    // part of the upload (the data the tensor cores read).
    let halves = match precision {
        GpuPrecision::Bf16 | GpuPrecision::F16 => {
            let bf16 = precision == GpuPrecision::Bf16;
            let half_a = to_half(gpu, oa, m * k, bf16)?;
            let half_b = to_half(gpu, ob, k * n, bf16)?;
            oa = Operand {
                ptr: half_a.device_ptr(&gpu.stream).0,
                ld: k,
            };
            ob = Operand {
                ptr: half_b.device_ptr(&gpu.stream).0,
                ld: n,
            };
            Some((half_a, half_b))
        }
        _ => None,
    };
    gpu.synchronize()?;
    let upload_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut fast = match scheme {
        Some(scheme) => Some((
            scheme,
            CudaBackend::<T>::new(gpu, classical.clone(), opts, (oa, ob, oc))?,
        )),
        None => None,
    };
    let mut launch_once = || -> Result<(), Error> {
        match &mut fast {
            Some((scheme, backend)) => {
                let plan = crate::strassen::plan::<T>(*scheme, opts);
                crate::strassen::engine::run(backend, plan, alpha, beta, (m, k, n)).map(|_| ())
            }
            None => classical.run(gpu, (m, k, n), alpha, oa, ob, beta, oc),
        }
    };
    // With β = 0 a product is idempotent, so it runs once to warm the clocks
    // and caches (and, for the fast algorithms, to allocate their
    // temporaries) and then CUDA_TIMED_LAUNCHES times back to back: kernel
    // time is the median of those, free of the idle gaps the copies leave.
    // With β ≠ 0 each run changes C, so exactly one runs.
    let timed_launches = if beta_is_zero && median_of_launches {
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
    drop(fast);
    drop(halves);

    let start = Instant::now();
    dc.download(gpu, &mut staged_c)?;
    let download_ms = start.elapsed().as_secs_f64() * 1e3;
    staged_c.unstage(c)?;
    Ok(GpuTimes {
        upload_ms,
        kernel_ms,
        download_ms,
    })
}

/// The leading dimensions of A, B and C as cuBLAS's 32-bit ints.
fn leading_dims(a: Operand, b: Operand, c: Operand) -> Result<(i32, i32, i32), Error> {
    Ok((
        to_i32("lda", a.ld)?,
        to_i32("ldb", b.ld)?,
        to_i32("ldc", c.ld)?,
    ))
}

/// cuBLAS is column-major: row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ,
/// which is the same memory, so B goes first and nothing is transposed.
fn cublas_gemm<T: Element>(
    gpu: &Gpu,
    (m, k, n): (i32, i32, i32),
    alpha: T,
    a: Operand,
    b: Operand,
    beta: T,
    c: Operand,
) -> Result<(), Error> {
    let (lda, ldb, ldc) = leading_dims(a, b, c)?;
    gpu.with_blas(|blas| {
        let handle = *blas.handle();
        // SAFETY: the device pointers address row-major m×k, k×n and m×n
        // blocks with these leading dimensions, of the element type
        // matched below; α and β are read from host memory.
        // Row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ: B first, n × m.
        macro_rules! column_major_gemm {
            ($call:path, $t:ty, $alpha:expr, $beta:expr) => {{
                let (alpha, beta): ($t, $t) = ($alpha, $beta);
                $call(
                    handle,
                    CUBLAS_OP_N,
                    CUBLAS_OP_N,
                    n,
                    m,
                    k,
                    &alpha,
                    b.ptr as *const $t,
                    ldb,
                    a.ptr as *const $t,
                    lda,
                    &beta,
                    c.ptr as *mut $t,
                    ldc,
                )
            }};
        }
        let status = unsafe {
            match T::DTYPE {
                DType::F32 => column_major_gemm!(
                    cudarc::cublas::result::sgemm,
                    f32,
                    alpha.to_f64() as f32,
                    beta.to_f64() as f32
                ),
                DType::F64 => column_major_gemm!(
                    cudarc::cublas::result::dgemm,
                    f64,
                    alpha.to_f64(),
                    beta.to_f64()
                ),
                DType::I32 | DType::I64 => unreachable!("refused by ClassicalGemm::resolve"),
            }
        };
        status.map_err(|e| cuda_err("cuBLAS gemm failed", e))
    })
}

/// A contiguous f32 matrix of `len` elements at `src`, converted on the GPU
/// to bfloat16 (`bf16`) or IEEE half.
fn to_half(gpu: &Gpu, src: Operand, len: usize, bf16: bool) -> Result<CudaSlice<u16>, Error> {
    let f = gpu.function(KernelKey {
        source: KernelSource::Convert,
        dtype: DType::F32,
        tile: usize::from(bf16),
    })?;
    // SAFETY: every element is written by the kernel below before use.
    let out = unsafe { gpu.stream.alloc::<u16>(len.max(1)) }
        .map_err(|e| cuda_err("cannot allocate 16-bit operands", e))?;
    let dst = out.device_ptr(&gpu.stream).0;
    let n = len as i64;
    let threads = 256;
    let config = LaunchConfig {
        grid_dim: (len.div_ceil(threads) as u32, 1, 1),
        block_dim: (threads as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&n).arg(&src.ptr).arg(&dst);
    // SAFETY: `src` holds `len` contiguous f32 (a fresh upload, ld = cols),
    // `dst` room for `len` u16; the signature is (long long, float*, ushort*).
    unsafe { launch.launch(config) }
        .map(|_| out)
        .map_err(|e| cuda_err("conversion kernel launch failed", e))
}

/// `cublasGemmEx` in a tensor-core mode, row-major through the same swap as
/// [`cublas_gemm`]; C and α, β stay f32.
#[allow(clippy::too_many_arguments)]
fn cublas_gemm_ex<T: Element>(
    gpu: &Gpu,
    precision: GpuPrecision,
    (m, k, n): (i32, i32, i32),
    alpha: T,
    a: Operand,
    b: Operand,
    beta: T,
    c: Operand,
) -> Result<(), Error> {
    use cudarc::cublas::sys::{
        cublasComputeType_t as Compute, cublasGemmAlgo_t, cudaDataType as Data,
    };
    let (operands, compute) = match precision {
        GpuPrecision::Tf32 => (Data::CUDA_R_32F, Compute::CUBLAS_COMPUTE_32F_FAST_TF32),
        GpuPrecision::Bf16 => (Data::CUDA_R_16BF, Compute::CUBLAS_COMPUTE_32F),
        GpuPrecision::F16 => (Data::CUDA_R_16F, Compute::CUBLAS_COMPUTE_32F),
        GpuPrecision::Fp32 => (Data::CUDA_R_32F, Compute::CUBLAS_COMPUTE_32F),
    };
    let (lda, ldb, ldc) = leading_dims(a, b, c)?;
    let (alpha, beta) = (alpha.to_f64() as f32, beta.to_f64() as f32);
    gpu.with_blas(|blas| {
        // SAFETY: A and B hold row-major m×k and k×n matrices of the
        // operand type, C an m×n f32 matrix, with these leading dimensions;
        // α and β are f32 in host memory, as the f32 compute types want.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *blas.handle(),
                CUBLAS_OP_N,
                CUBLAS_OP_N,
                n,
                m,
                k,
                (&alpha as *const f32).cast(),
                b.ptr as *const std::ffi::c_void,
                operands,
                ldb,
                a.ptr as *const std::ffi::c_void,
                operands,
                lda,
                (&beta as *const f32).cast(),
                c.ptr as *mut std::ffi::c_void,
                Data::CUDA_R_32F,
                ldc,
                compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| cuda_err("cublasGemmEx failed", e))
    })
}

/// Terms one launch of the combine kernel adds.
const COMBINE_TERMS_PER_LAUNCH: usize = 4;

/// The grid of the elementwise kernels of `combine.cu` and
/// `combine_group.cu` over a rows×cols block: one thread per element,
/// blocks of 32 × `CUDA_COMBINE_ROWS_PER_BLOCK`.
pub(crate) fn combine_launch_config(rows: usize, cols: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            cols.div_ceil(32) as u32,
            rows.div_ceil(CUDA_COMBINE_ROWS_PER_BLOCK) as u32,
            1,
        ),
        block_dim: (32, CUDA_COMBINE_ROWS_PER_BLOCK as u32, 1),
        shared_mem_bytes: 0,
    }
}

/// dst ← keep·dst + Σ wᵢ·srcᵢ over a rows×cols block with `combine.cu`
/// (`combine`, compiled for T), four terms per launch; keep = 0 never
/// reads dst.
///
/// # Safety
/// `dst` and every source address rows×cols blocks with their leading
/// dimensions, of element type T, and dst overlaps no source.
pub(crate) unsafe fn launch_combine<T: Element>(
    gpu: &Gpu,
    combine: &CudaFunction,
    keep: T,
    dst: Operand,
    (rows, cols): (usize, usize),
    terms: &[(T, Operand)],
) -> Result<(), Error> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (rows_i, cols_i) = (to_i32("rows", rows)?, to_i32("cols", cols)?);
    let config = combine_launch_config(rows, cols);
    let mut keep = keep;
    let mut chunks: Vec<&[(T, Operand)]> = terms.chunks(COMBINE_TERMS_PER_LAUNCH).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    let ldd = dst.ld as i64;
    for chunk in chunks {
        let mut ptrs = [dst.ptr; COMBINE_TERMS_PER_LAUNCH];
        let mut lds = [0i64; COMBINE_TERMS_PER_LAUNCH];
        let mut weights = [T::ZERO; COMBINE_TERMS_PER_LAUNCH];
        for (t, &(w, source)) in chunk.iter().enumerate() {
            ptrs[t] = source.ptr;
            lds[t] = source.ld as i64;
            weights[t] = w;
        }
        let count = chunk.len() as i32;
        let mut launch = gpu.stream.launch_builder(combine);
        launch
            .arg(&rows_i)
            .arg(&cols_i)
            .arg(&keep)
            .arg(&dst.ptr)
            .arg(&ldd)
            .arg(&count);
        for t in 0..COMBINE_TERMS_PER_LAUNCH {
            launch.arg(&ptrs[t]).arg(&lds[t]).arg(&weights[t]);
        }
        // SAFETY: the arguments match `combine`'s signature; the blocks are
        // the caller's (contract above); unused term slots are never read
        // (count).
        unsafe { launch.launch(config) }
            .map_err(|e| cuda_err("combine kernel launch failed", e))?;
        // Later chunks add onto what the first wrote.
        keep = T::ONE;
    }
    Ok(())
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

    #[test]
    fn the_shape_rule_takes_the_largest_tile_that_fills_every_sm() {
        let simt = |dtype: DType, tm| FastConfig {
            family: FastKernel::Simt,
            tm,
            dtype,
            mbarriers: false,
        };
        let f64_tiles: Vec<FastConfig> = simt_shape_tiles(DType::F64)
            .iter()
            .map(|&tm| simt(DType::F64, tm))
            .collect();
        let h100_sms = 132;
        // 8×4's 128×64 tiles: 16·32 = 512 blocks fill 132 SMs; 8·16 = 128
        // do not.
        let cases = [
            ((2048, 2048), 8),
            ((8192, 8192), 8),
            ((1024, 1024), 4),
            ((8192, 128), 4),
            ((1408, 768), 8), // 11 · 12 = 132 blocks: exactly one wave
            ((1408, 704), 4), // 11 · 11 = 121
            ((1, 1), 4),
        ];
        for ((m, n), tm) in cases {
            assert_eq!(
                FastConfig::pick(&f64_tiles, (m, n), h100_sms).tm,
                tm,
                "{m}x{n}"
            );
        }
        // One candidate (a forced --tile, or a type with one tile) is
        // always the pick.
        for dtype in [DType::F32, DType::I32, DType::I64] {
            let only: Vec<FastConfig> = simt_shape_tiles(dtype)
                .iter()
                .map(|&tm| simt(dtype, tm))
                .collect();
            assert_eq!(only.len(), 1, "{dtype}");
            for shape in [(1, 1), (16384, 16384)] {
                assert_eq!(FastConfig::pick(&only, shape, h100_sms), only[0]);
            }
        }
        // Every tile the rule may pick is one the kernel is built with.
        for dtype in [DType::F32, DType::F64, DType::I32, DType::I64] {
            for tm in simt_shape_tiles(dtype) {
                assert!(simt_micro_tiles(dtype).contains(tm), "{dtype} {tm}");
            }
        }
    }

    #[test]
    fn the_mbarrier_configuration_is_one_block_of_128_by_128_with_no_twins() {
        let config = FastConfig {
            family: FastKernel::Simt,
            tm: MBAR_MICRO_TILE.0,
            dtype: DType::F64,
            mbarriers: true,
        };
        assert_eq!(config.micro_tile(), (8, 8));
        assert_eq!(config.block_shape(), (128, 128));
        assert_eq!(config.blocks_per_sm(), 1);
        assert_eq!(config.key().source, KernelSource::FastMbar);
        // A ring itself: no unaligned twin, and the wave tail instead of
        // stream-K.
        assert!(config.ring_key().is_none() && config.stream_key().is_none());
        // 4 stages × 16 k × (130 + 128) doubles: 132 KiB, within the
        // H100's 227 KiB per block.
        assert_eq!(config.shared_bytes(), 4 * 16 * 258 * 8);
        assert!(config.shared_bytes() <= 227 * 1024);
        assert!(config.describe().contains("8x8/thread, mbarriers"));
        let barrier = FastConfig {
            mbarriers: false,
            ..config
        };
        assert_eq!(barrier.block_shape(), (128, 64));
        assert_eq!(barrier.shared_bytes(), 0);
        assert_eq!(barrier.key().source, KernelSource::Fast);
    }

    /// The tile (row, column) of grouped block index `id` on a tiles_m ×
    /// tiles_n grid: `raster_tile` of `kernels/block_common.cuh`.
    fn grouped_tile(id: usize, (tiles_m, tiles_n): (usize, usize)) -> (usize, usize) {
        let per_group = CUDA_RASTER_GROUP * tiles_n;
        let first_row = id / per_group * CUDA_RASTER_GROUP;
        let rows = (tiles_m - first_row).min(CUDA_RASTER_GROUP);
        let in_group = id % per_group;
        (first_row + in_group % rows, in_group / rows)
    }

    #[test]
    fn the_wave_tail_of_8192_squared_dmma_is_one_column_in_16_slices() {
        // H100: 132 SMs, one 128×128 block each.
        let plan = FastSchedule::plan((8192, 8192, 8192), (128, 128), 132, 1, true, None);
        assert_eq!(
            plan,
            FastSchedule::WaveTail(WaveTail {
                first_tile: 4088,
                origin: (56, 63),
                tiles: 8,
                slices: 16,
            })
        );
        assert_eq!(plan.describe(), "wave tail 8 tiles × 16 k slices");
        let off = FastSchedule::plan((8192, 8192, 8192), (128, 128), 132, 1, false, None);
        assert_eq!(off, FastSchedule::Tiles);
        // 16384² f32 in 128×256 tiles: 62 whole waves, past the most.
        let many = FastSchedule::plan((16384, 16384, 16384), (128, 256), 132, 1, true, None);
        assert_eq!(many, FastSchedule::Tiles);
        // 4096²: 512 tiles, a last wave of 116 (15 columns, 120 tiles).
        let full = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, None);
        assert_eq!(full, FastSchedule::Tiles);
        // Exact waves: 132 × 2 tiles.
        let exact = FastSchedule::plan((128 * 132, 64, 512), (128, 256), 132, 1, true, None);
        assert_eq!(exact, FastSchedule::Tiles);
        // Too shallow to split: k below two slices of the minimum depth.
        let shallow = FastSchedule::plan((16384, 1000, 16384), (128, 256), 132, 1, true, None);
        assert_eq!(shallow, FastSchedule::Tiles);
        // Few tiles: split-K as before (6 tiles, 22 fill the SMs, k allows 4).
        let few = FastSchedule::plan((264, 2056, 264), (128, 256), 132, 1, true, None);
        assert_eq!(few, FastSchedule::SplitK(4));
        assert_eq!(few.describe(), "split-K 4");
        let one = FastSchedule::plan((264, 148, 264), (128, 256), 132, 1, true, None);
        assert_eq!(one, FastSchedule::Tiles);
    }

    #[test]
    fn stream_k_shares_the_partial_wave_and_one_whole_one_where_the_wave_tail_would_not() {
        // H100, f32 128×256 tiles, one block per SM: 4096² is 512 tiles,
        // 3 waves and 116; the wave tail cannot split 116 tiles.
        let plan = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, Some(1));
        assert_eq!(
            plan,
            FastSchedule::StreamK(StreamK {
                sk_first: 264,
                sk_tiles: 248,
                workers: 132,
            })
        );
        assert_eq!(plan.describe(), "stream-K 248 tiles over 132 blocks");
        // With no whole wave added only the partial one; never more whole
        // waves than there are.
        let partial = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, Some(0));
        assert!(matches!(partial, FastSchedule::StreamK(sk) if sk.sk_tiles == 116));
        let all = FastSchedule::plan((4096, 4096, 4096), (128, 256), 132, 1, true, Some(9));
        assert!(matches!(all, FastSchedule::StreamK(sk) if sk.sk_first == 0 && sk.sk_tiles == 512));
        // Past the most waves, exact waves, shallow k and few tiles: as
        // without stream-K.
        for (dims, expected) in [
            ((16384, 16384, 16384), FastSchedule::Tiles),
            // One block per SM: the plain kernel (two k steps per trip)
            // from 5 whole waves on; 6144² is 8 waves and 96 tiles, 8192²
            // 15 and 68 (neither a wave tail: more than half a wave).
            ((6144, 6144, 6144), FastSchedule::Tiles),
            ((8192, 8192, 8192), FastSchedule::Tiles),
            ((8192, 1024, 8192), FastSchedule::Tiles),
            ((128 * 132, 4096, 512), FastSchedule::Tiles),
            ((4096, 500, 4096), FastSchedule::Tiles),
            ((264, 2056, 264), FastSchedule::SplitK(4)),
        ] {
            let plan = FastSchedule::plan(dims, (128, 256), 132, 1, true, Some(1));
            assert_eq!(plan, expected, "{dims:?}");
        }
        // Where the wave tail applies, stream-K takes its place up to its
        // own most waves: 8192² in 128×64 tiles is 31 waves of 264 and 8
        // tiles, 8192×4096 15 and 136.
        let many = FastSchedule::plan((8192, 8192, 8192), (128, 64), 132, 2, true, Some(0));
        assert!(matches!(many, FastSchedule::WaveTail(_)), "{many:?}");
        let half = FastSchedule::plan((8192, 8192, 4096), (128, 64), 132, 2, true, Some(0));
        assert!(
            matches!(half, FastSchedule::StreamK(sk) if sk.sk_tiles == 136),
            "{half:?}"
        );
    }

    #[test]
    fn the_stream_k_switch_takes_off_on_or_waves() {
        assert_eq!(parse_stream_k("off"), Ok(None));
        assert_eq!(parse_stream_k(" ON "), Ok(Some(CUDA_STREAM_K_FULL_WAVES)));
        assert_eq!(parse_stream_k("2"), Ok(Some(2)));
        let err = parse_stream_k("lots").unwrap_err();
        assert!(err.contains(STREAM_K_ENV) && err.contains("lots"), "{err}");
    }

    /// kernels/fast_stream.cu's arithmetic, transcribed: worker g's units
    /// [start(g), start(g + 1)) of sk_tiles × steps.
    fn stream_start(g: usize, total: usize, workers: usize) -> usize {
        total * g / workers
    }

    /// The kernel's worker of unit u (the fix-up's inverse of stream_start).
    fn stream_worker(u: usize, total: usize, workers: usize) -> usize {
        ((u + 1) * workers - 1) / total
    }

    #[test]
    fn stream_k_pieces_cover_every_unit_once_and_the_fixup_finds_each() {
        // The workers' loop of gemm_fast_stream and the slot rule of
        // gemm_fast_stream_fixup, transcribed from the kernel: every unit
        // of every shared tile is computed exactly once; each split tile's
        // pieces are in the slots the fix-up reads, no slot is written
        // twice, and a tile the fix-up skips was stored whole.
        let mut cases = 0;
        for workers in [1, 3, 7, 132, 264] {
            for steps in [1, 2, 5, 16, 69, 256] {
                for sk_tiles in [1, 2, 5, 116, 248, 300] {
                    let total = sk_tiles * steps;
                    let mut covered = vec![0u32; total];
                    let mut whole = vec![false; sk_tiles];
                    // (tile, slot) of each partial piece.
                    let mut pieces: Vec<(usize, usize)> = Vec::new();
                    for g in 0..workers {
                        let (first, end) = (
                            stream_start(g, total, workers),
                            stream_start(g + 1, total, workers),
                        );
                        let mut u = first;
                        while u < end {
                            let (tile, s0) = (u / steps, u % steps);
                            let s1 = steps.min(s0 + (end - u));
                            for count in &mut covered[tile * steps + s0..tile * steps + s1] {
                                *count += 1;
                            }
                            if s0 == 0 && s1 == steps {
                                whole[tile] = true;
                            } else {
                                pieces.push((tile, 2 * g + usize::from(u != first)));
                            }
                            u += s1 - s0;
                        }
                    }
                    let what = format!("{workers} workers, {steps} steps, {sk_tiles} tiles");
                    assert!(covered.iter().all(|&c| c == 1), "{what}");
                    let mut slots: Vec<usize> = pieces.iter().map(|&(_, slot)| slot).collect();
                    slots.sort_unstable();
                    slots.dedup();
                    assert_eq!(slots.len(), pieces.len(), "{what}: a slot written twice");
                    for (tile, &stored_whole) in whole.iter().enumerate() {
                        let unit0 = tile * steps;
                        let g0 = stream_worker(unit0, total, workers);
                        let g1 = stream_worker(unit0 + steps - 1, total, workers);
                        if g0 == g1 {
                            assert!(stored_whole, "{what}: tile {tile} skipped but split");
                            continue;
                        }
                        let mut read: Vec<(usize, usize)> = (g0..=g1)
                            .filter(|&g| {
                                stream_start(g, total, workers)
                                    < stream_start(g + 1, total, workers)
                            })
                            .map(|g| {
                                let slot =
                                    2 * g + usize::from(stream_start(g, total, workers) < unit0);
                                (tile, slot)
                            })
                            .collect();
                        let mut written: Vec<(usize, usize)> =
                            pieces.iter().filter(|p| p.0 == tile).copied().collect();
                        read.sort_unstable();
                        written.sort_unstable();
                        assert_eq!(read, written, "{what}: tile {tile}");
                        assert!(!stored_whole, "{what}: tile {tile}");
                    }
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 5 * 6 * 6);
    }

    #[test]
    fn the_wave_tail_switch_takes_on_or_off_and_names_itself_otherwise() {
        for (text, expected) in [("on", true), (" OFF ", false), ("1", true), ("0", false)] {
            assert_eq!(parse_switch(WAVE_TAIL_ENV, text), Ok(expected), "{text}");
        }
        let err = parse_switch(WAVE_TAIL_ENV, "maybe").unwrap_err();
        assert!(
            err.contains(WAVE_TAIL_ENV) && err.contains("maybe"),
            "{err}"
        );
    }

    #[test]
    fn a_wave_tail_is_exactly_the_last_grouped_tiles_and_saves_a_wave() {
        let mut tails = 0;
        for sms in [7, 16, 132] {
            for blocks_per_sm in [1, 2] {
                for tiles_m in 1..40 {
                    for tiles_n in 1..40 {
                        let (rows, cols) = (128, 64);
                        // A partial last tile row and column, as at odd shapes.
                        let dims = (tiles_m * rows - 5, 4096, tiles_n * cols - 3);
                        let plan =
                            FastSchedule::plan(dims, (rows, cols), sms, blocks_per_sm, true, None);
                        let FastSchedule::WaveTail(tail) = plan else {
                            continue;
                        };
                        tails += 1;
                        let tiles = tiles_m * tiles_n;
                        let resident = sms * blocks_per_sm;
                        let what = format!("{tiles_m}×{tiles_n} tiles, {resident} resident");
                        assert_eq!(tail.first_tile + tail.tiles, tiles, "{what}");
                        assert_eq!(
                            tail.first_tile.div_ceil(resident),
                            tiles / resident,
                            "{what}"
                        );
                        assert!(tiles / resident <= CUDA_WAVE_TAIL_MAX_WAVES, "{what}");
                        assert!(tail.slices >= CUDA_WAVE_TAIL_MIN_SLICES, "{what}");
                        assert!(tail.slices * tail.tiles <= resident, "{what}");
                        let (top, left) = tail.origin;
                        assert_eq!((tiles_m - top) * (tiles_n - left), tail.tiles, "{what}");
                        for id in 0..tiles {
                            let (row, col) = grouped_tile(id, (tiles_m, tiles_n));
                            let in_rectangle = row >= top && col >= left;
                            assert_eq!(in_rectangle, id >= tail.first_tile, "{what}, id {id}");
                        }
                    }
                }
            }
        }
        assert!(tails > 100, "only {tails} shapes had a wave tail");
    }

    #[test]
    fn ring_shared_memory_mirrors_the_kernel_layout() {
        // fast_ring.cu: STAGES x BK x (BM + VEC + BN) elements.
        // f32 8x16: BM 128, BN 256, BK 16, VEC 4.
        assert_eq!(
            ring_shared_bytes(DType::F32, 8, 3),
            3 * 16 * (128 + 4 + 256) * 4
        );
        // f64 8x4: BM 128, BN 64, BK 8, VEC 2; two blocks of four stages
        // fit an H100 SM's 228 KiB.
        assert_eq!(ring_shared_bytes(DType::F64, 8, 4), 4 * 8 * (130 + 64) * 8);
        assert!(2 * ring_shared_bytes(DType::F64, 8, 4) < 228 * 1024);
        // i64 4x4: BM 64, BN 64, BK 8.
        assert_eq!(ring_shared_bytes(DType::I64, 4, 2), 2 * 8 * (66 + 64) * 8);
        // Every default ring fits the 99 KiB a block may opt in to on
        // sm_86/sm_89, and the two-stage rings the 64 KiB of sm_75.
        for dtype in DType::ALL {
            for tm in simt_micro_tiles(dtype) {
                let stages = crate::tunables::CUDA_RING_STAGES;
                assert!(
                    ring_shared_bytes(dtype, tm, stages) <= 99 * 1024,
                    "{dtype} {tm}"
                );
                assert!(ring_shared_bytes(dtype, tm, 2) <= 64 * 1024, "{dtype} {tm}");
            }
        }
    }

    #[test]
    fn ring_stages_follow_the_architecture() {
        // (With FASTMM_CUDA_RING_STAGES set, sm_90 gets that instead.)
        use crate::cuda::compile::ring_stages;
        assert_eq!(ring_stages("sm_75").unwrap(), 2);
        assert_eq!(
            ring_stages("sm_90").unwrap(),
            crate::tunables::CUDA_RING_STAGES
        );
        assert!(ring_stages("compute_x").is_err());
    }
}
