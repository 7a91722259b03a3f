//! Every constant of the CUDA backend in one place: the tunables, the
//! geometry the kernel sources fix, and the developer switches that
//! override some of them in `dev` builds (`crate::config`).

use crate::config::{Config, StreamK};
use crate::element::DType;
use crate::emulation::certify::Prices;
use crate::error::Error;

/// Default tile edge of `cuda-tiled`: 32×32 = 1024 threads, the most a
/// block may have, and the seeds' choice (seed 002 §10.5 sweeps 2–32).
pub(crate) const CUDA_DEFAULT_TILE: usize = 32;

/// Thread block edge of `cuda-naive` (16×16 = 256 threads).
pub(crate) const CUDA_NAIVE_BLOCK: usize = 16;

/// Back-to-back launches timed per GPU product (β = 0), after one untimed:
/// the median is the kernel time. The GPU idles during the host copies
/// between products and drops its clocks; one launch after such a gap timed
/// cuBLAS at 1024 at half of torch's back-to-back figure on the H100.
pub(crate) const CUDA_TIMED_LAUNCHES: usize = 5;

/// ...unless the untimed launch took at least this long: its clocks have
/// settled, and one timed launch follows. cuBLAS at 65536 runs 10.6 s per
/// launch on an H200, so six launches per repetition were a minute.
pub(crate) const CUDA_TIMED_LONG_LAUNCH_MS: f64 = 500.0;

/// Rows per 32-wide thread block of the GPU linear-combination kernel
/// (32×8 = 256 threads, each one element: coalesced along rows).
pub(crate) const CUDA_COMBINE_ROWS_PER_BLOCK: usize = 8;

/// Strassen/Winograd on a GPU, f32, recurse while m, k and n are
/// all at least this (`--threshold auto`)... On the H100 over cuBLAS with
/// the `batched` variant: one level at
/// 4096 1.04×, at 6144 0.97× (its 3072³ products run cuBLAS below its
/// best), at 8192 1.11× and two levels there (2048³ products) 1.15×; two
/// at 16384 1.18×.
pub(crate) const CUDA_STRASSEN_AUTO_THRESHOLD: usize = 4096;

/// ...applying a first level only from this size, which skips the
/// losing 6144.
pub(crate) const CUDA_STRASSEN_AUTO_START: usize = 8192;

/// The same for f64 (first level and recursion): cuBLAS's dgemm runs at
/// 57–62 TFLOPS on the H100's FP64 tensor cores, so additions weigh more;
/// `batched` at 8192 measured 1.10× with one level (4096³ products) and
/// 1.05× with two.
pub(crate) const CUDA_STRASSEN_AUTO_THRESHOLD_F64: usize = 8192;

/// The same for integers, whose base is `cuda-fast` (cuBLAS has no integer
/// GEMM): recurse from 8192, as measured with the `frugal` variant (not
/// re-measured with `batched`).
pub(crate) const CUDA_STRASSEN_AUTO_THRESHOLD_INT: usize = 8192;

/// `cuda-fast` splits k only into slices at least this deep: a shallower
/// slice spends more on writing and adding its m×n partial than on its
/// products.
pub(crate) const CUDA_SPLIT_K_MIN_DEPTH: usize = 512;

/// Tile rows of C that consecutive blocks of `cuda-fast` walk down before
/// moving one tile column right (the `RASTER_GROUP` define of
/// `kernels/block_common.cuh`): the blocks resident at once then share a
/// few panels of A and B in L2. 16 and 32 measured no different from 8 at
/// 16384 on the H100.
pub(crate) const CUDA_RASTER_GROUP: usize = 8;

/// `cuda-fast` runs the tiles of a last, partly empty wave of blocks as a
/// separate split-K product (see `cuda::gemm::WaveTail`) when they can
/// be split into at least this many k slices: with s slices the tail
/// costs about 1/s of a wave instead of a whole one.
pub(crate) const CUDA_WAVE_TAIL_MIN_SLICES: usize = 2;

/// ...and when the other tiles take at most this many waves. On the H100
/// the split gained 7.5% at 4099³ f64 (8 waves), 2.7% and 1.1% at 8192³
/// f64 (31 waves, DMMA and SIMT) and nothing at 16384³ f32 (62 waves):
/// after many waves the blocks no longer finish together, so the last
/// wave's tiles already start spread out (a reading, not a measurement).
pub(crate) const CUDA_WAVE_TAIL_MAX_WAVES: usize = 32;

/// `cuda-fast`'s SIMT kernel shares the tiles of a partial last wave, and
/// of this many whole waves before it, evenly over one wave of resident
/// blocks by k steps (stream-K, `kernels/fast_stream.cu`). On the H100 0
/// and 1 measured alike (f32 4096³ 2.922 and 2.924 ms, 8192³ 22.939 and
/// 22.945; f64 4096³ 7.015 and 7.062), 0 a shade faster with the smaller
/// fix-up. The developer switch `FASTMM_DEV_CUDA_STREAM_K` (`off`, `on`
/// or a number of waves) overrides it, for sweeps.
pub(crate) const CUDA_STREAM_K_FULL_WAVES: usize = 0;

/// ...when the other tiles take at most this many waves. On the H100
/// stream-K gained 2.5% at 8192³ f32 (15 whole waves) but at 8192³ f64
/// SIMT (31 waves of 264 blocks) ran 1.5–2% slower than the wave tail's
/// separate split-K product: after many waves the blocks no longer finish
/// together.
pub(crate) const CUDA_STREAM_K_MAX_WAVES: usize = 16;

/// ...and for the kernels of one block per SM (the 128×256 and 256×128
/// tiles). The plain kernel runs two k steps per trip and the stream-K
/// kernel one (`kernels/simt_tile.cuh`, `k_loop`): on the H100 f32
/// stream-K still gained at 3072³ (2 whole waves, 1.020× against the wave
/// tail's 0.973× cuBLAS) and 4096³ (3, 0.910× against 0.906×), but lost to
/// the plain kernel at 6144³ (8, 0.934× against 0.941×), 8192³ (15, 0.928×
/// against 0.937×) and 8192×1024×8192 (15, 0.894× against 0.902×). (The
/// two-block kernels were not re-measured against their two-step plain
/// kernel, which gained 3% at 8192³ f64 under the wave tail; they keep
/// [`CUDA_STREAM_K_MAX_WAVES`].)
pub(crate) const CUDA_STREAM_K_MAX_WAVES_ONE_BLOCK: usize = 4;

/// Shared-memory stages of `cuda-fast`'s SIMT kernel for operands whose
/// rows are not 16-byte aligned (`kernels/fast_ring.cu`) on GPUs with
/// `cp.async` (sm_80 and later): k steps in flight while one is
/// multiplied. Older GPUs get two. 3 and 4 measured the same on the H100;
/// the developer switch `FASTMM_DEV_CUDA_RING_STAGES` overrides it.
pub(crate) const CUDA_RING_STAGES: usize = 3;

/// k depth of one staged step of `cuda-fast`'s f64 8×8 mbarrier kernel
/// (`KernelSource::FastMbar`): 16 halves the waits and staging per DFMA
/// against 8, measured 1–3% faster at 8192³ on the H100 (4 stages of 16
/// against 6 of 8).
pub(crate) const CUDA_MBAR_BK: usize = 16;

/// Shared-memory stages of that kernel: 4 × 33 KiB. 3, 4 and 6 measured
/// within 1.5% at 8192³ on the H100.
pub(crate) const CUDA_MBAR_STAGES: usize = 4;

/// Shared-memory stages of the f64 tensor-core kernel of `cuda-fast`
/// (`kernels/fast_mma.cu`): three 16 KiB stages fill the 48 KiB a block may
/// use without opting in to more.
pub(crate) const CUDA_MMA_STAGES: usize = 3;

/// Shared-memory stages of `kernels/int8_wgmma.cu`'s ring: 48 KiB each
/// (a 128 × 128-byte slice of A and a 256 × 128-byte one of B), four of
/// them in the 227 KiB a Hopper block may take.
pub(crate) const CUDA_WGMMA_STAGES: usize = 4;

/// Rows and columns of C per block of `kernels/int8_wgmma.cu` (its BM,
/// BN) and the bytes of depth per stage (BK).
pub(crate) const WGMMA_TILE: (usize, usize, usize) = (128, 256, 128);

/// Largest tile edge of C in a GPU out-of-core product: an 8192×k×8192
/// product keeps cuBLAS at its large-size rate while a tile's transfers
/// (one 8192-wide panel) take a fraction of its compute.
pub(crate) const CUDA_OUT_OF_CORE_TILE: usize = 8192;

/// Smallest tile edge the GPU out-of-core planner tries before it splits
/// k instead.
pub(crate) const CUDA_OUT_OF_CORE_MIN_TILE: usize = 512;

/// Tile edges of a GPU out-of-core product are rounded to this many
/// elements, so that every tile but the last is aligned for the kernels'
/// vector loads.
pub(crate) const CUDA_OUT_OF_CORE_ALIGN: usize = 128;

/// Bytes of each page-locked staging buffer of a GPU out-of-core product:
/// large enough that each copy runs at the link's rate, small enough that
/// filling one (a host copy) overlaps the DMA of the others.
pub(crate) const CUDA_OUT_OF_CORE_CHUNK_BYTES: usize = 64 << 20;

/// Staging buffers for uploads and for downloads.
pub(crate) const CUDA_OUT_OF_CORE_CHUNKS: usize = 4;

/// GPU memory kept free beyond an out-of-core product's buffers when the
/// budget is the free memory: cuBLAS's workspace and the kernels' modules.
pub(crate) const CUDA_OUT_OF_CORE_RESERVE_BYTES: u64 = 1 << 30;

// Geometry fixed by the kernel sources (their defines must agree).

/// Threads per block of `cuda-fast` (`THREADS` in `kernels/fast.cu`).
pub(crate) const CUDA_FAST_THREADS: u32 = 256;

/// Split-K slices of `cuda-fast` are multiples of this (the smallest `BK`
/// of its kernels), which keeps every slice's rows 16-byte aligned; a
/// kernel with a deeper BK runs a slice's last partial step on its guarded
/// path.
pub(crate) const CUDA_FAST_BK: usize = 8;

/// Micro-tile (rows, columns) of the mbarrier kernel
/// (`KernelSource::FastMbar`): 64 f64 accumulators in 128 registers, one
/// block of 8 warps per SM, 16·8 = 128 rows and columns per block tile.
pub(crate) const MBAR_MICRO_TILE: (usize, usize) = (8, 8);

/// Block tile edge of `kernels/fast_mma.cu` (BM = BN).
pub(crate) const MMA_BLOCK_TILE: usize = 128;

/// The whole waves stream-K shares out with the partial last one
/// ([`CUDA_STREAM_K_FULL_WAVES`], or the developer switch), or `None`
/// where the switch turns stream-K off.
pub(crate) fn stream_k_waves() -> Result<Option<usize>, Error> {
    Ok(match Config::get().dev()?.stream_k {
        None | Some(StreamK::On) => Some(CUDA_STREAM_K_FULL_WAVES),
        Some(StreamK::Waves(waves)) => Some(waves),
        Some(StreamK::Off) => None,
    })
}

/// Whether the wave-tail split may run (on unless a developer switch turns
/// it off).
pub(crate) fn wave_tail_enabled() -> Result<bool, Error> {
    Ok(Config::get().dev()?.wave_tail.unwrap_or(true))
}

/// Whether f64's micro-tile rows 8 run the 8×8 mbarrier kernel on sm_90
/// and later (on unless a developer switch turns it off).
pub(crate) fn mbarriers_enabled() -> Result<bool, Error> {
    Ok(Config::get().dev()?.mbarriers.unwrap_or(true))
}

/// Stages of the cp.async ring on sm_80 and later: [`CUDA_RING_STAGES`],
/// or the developer switch.
pub(crate) fn ring_stages() -> Result<usize, Error> {
    Ok(Config::get().dev()?.ring_stages.unwrap_or(CUDA_RING_STAGES))
}

/// Bytes of freed memory the device's stream-ordered pool keeps mapped
/// across synchronisations (see `device::keep_pool_memory`): all of it.
pub(crate) const CUDA_POOL_RELEASE_THRESHOLD: u64 = u64::MAX;

/// Strassen and Winograd across a team's GPUs recurse while m, k and n
/// are all at least this (an explicit `--threshold` replaces it): a leaf
/// of 8192 gives each of 4 GPUs a 2048×8192×8192 product, which cuBLAS
/// runs at full rate, and an all-gather of 8192² elements that NVLink
/// moves in well under a tenth of that product's time.
pub(crate) const CUDA_CAPS_THRESHOLD: usize = 8192;

/// ...and apply a first level only from this size (the single GPU's
/// Strassen gains 1.18× at 8192, so a team's first level, whose leaves
/// split over the GPUs, needs twice that).
pub(crate) const CUDA_CAPS_START: usize = 16384;

/// A distributed product's wait for its GPUs gives up after this many
/// seconds plus [`CUDA_DISTRIBUTED_WAIT_SECONDS_PER_PFLOP`] per 10¹⁵
/// operations of the busiest GPU (then the communicators are aborted and
/// the GPUs that did not finish named): generous enough for a slow GPU,
/// bounded so that a lost peer never hangs the caller.
pub(crate) const CUDA_DISTRIBUTED_WAIT_BASE_SECONDS: f64 = 120.0;

/// See [`CUDA_DISTRIBUTED_WAIT_BASE_SECONDS`]: 1000 s per 10¹⁵ operations
/// is a GPU running at 1 TFLOPS, far below any the product runs on.
pub(crate) const CUDA_DISTRIBUTED_WAIT_SECONDS_PER_PFLOP: f64 = 1000.0;

/// How long a product over several GPUs may wait for them: the base and
/// the allowance per operation above, for (m, k, n) shared by `gpus`.
pub(crate) fn distributed_patience(
    (m, k, n): (usize, usize, usize),
    gpus: usize,
) -> std::time::Duration {
    let per_gpu = 2.0 * m as f64 * k as f64 * n as f64 / gpus.max(1) as f64;
    std::time::Duration::from_secs_f64(
        CUDA_DISTRIBUTED_WAIT_BASE_SECONDS
            + CUDA_DISTRIBUTED_WAIT_SECONDS_PER_PFLOP * per_gpu / 1e15,
    )
}

/// How often that wait polls the GPUs' events and the communicators'
/// asynchronous errors.
pub(crate) const CUDA_DISTRIBUTED_POLL: std::time::Duration = std::time::Duration::from_micros(200);

/// A host-resident product over several GPUs cuts the rows of A and C in
/// bands of at most this many rows (4096 rows of a 65536-wide f32 matrix
/// are 1 GiB: a product of 0.7 s on one GPU, against 0.1–0.2 s of host
/// staging for its A and C bands, so the staging hides behind it).
pub(crate) const CUDA_HOSTED_BAND_ROWS: usize = 4096;

/// ... and in at least this many bands per GPU, so that a faster GPU can
/// take more of them.
pub(crate) const CUDA_HOSTED_BANDS_PER_GPU: usize = 4;

/// The last band each GPU takes is this many times shorter than the
/// others, so that the product's tail (the last band's C copied out
/// through host staging) is short and the GPUs finish together: at
/// n = 65536 on 4 H200s the last full band's copy-out took about 0.1 s
/// after the GPUs were done. (The first bands are full: they multiply
/// chunk by chunk as B and their A arrive.)
pub(crate) const CUDA_HOSTED_EDGE_BAND_DIVISOR: usize = 4;

/// Bands of fewer rows than this (where the budget allows no more) run
/// slower than the tiled out-of-core plan: a band's product has to hide
/// its share of B's loading, which takes a band of about
/// 2·(FLOP/s)/(host bytes/s) rows (3600 at 53 TFLOPS and 29 GB/s).
pub(crate) const CUDA_HOSTED_MIN_BAND_ROWS: usize = 1024;

/// B goes to the GPUs in row chunks of about this many bytes: a GPU's
/// first band multiplies chunk by chunk as they arrive.
pub(crate) const CUDA_HOSTED_B_CHUNK_BYTES: usize = 512 << 20;

/// Host staging of a host-resident product over several GPUs moves pieces
/// of about this many bytes through rings of page-locked buffers...
pub(crate) const CUDA_HOSTED_STAGING_BYTES: usize = 64 << 20;

/// ... of this many buffers each (one ring per GPU for A, one for C, one
/// shared ring for B), kept by the team between products: pinning memory
/// costs more than copying it (whole-band buffers, 5 GiB pinned per
/// product at n = 32768, took 3 s before the first product on 2 H200s).
pub(crate) const CUDA_HOSTED_STAGING_BUFFERS: usize = 4;

/// The share of the GPU's free memory an emulated product's temporaries
/// (residue planes, INT32 products, the certificate's needs) may take; the
/// rest is headroom for cuBLAS's workspace and the pool's rounding. Rows
/// of C are processed in blocks that fit.
pub(crate) const CUDA_EMULATION_MEMORY_FRACTION: f64 = 0.8;

/// What an emulated product's parts cost on a GPU against cuBLAS's native
/// product of the same shape and type (see
/// [`crate::emulation::certify::priced`]). Measured on the lent H100 at
/// 16384³ (2026-12-07, docs/results.md, issue 77): f64 certificate 11.9 ms,
/// split and CRT 13.0 ms and 6.0 ms a modulus of dgemm's 157 ms; f32 9.3,
/// 5.8 and 6.2 of sgemm's 162 ms; a native fix-up about 530 ns at k =
/// 16384 (f64, 900× an element's share of dgemm) and 71–215 ns at k =
/// 4096–8192 (f32, 450–680× sgemm's). The fix-up prices are rounded up,
/// so that a doubtful route goes native: as accurate, and no slower.
pub(crate) fn emulation_prices(dtype: DType) -> Prices {
    match dtype {
        DType::F64 => Prices {
            certificate: 0.076,
            fixed: 0.083,
            modulus: 0.038,
            fixup: 900.0,
        },
        _ => Prices {
            certificate: 0.057,
            fixed: 0.036,
            modulus: 0.038,
            fixup: 600.0,
        },
    }
}

/// The largest extent, in rows and in columns of C, of one INT8 product
/// call of the emulated product: larger products are issued as tiles of at
/// most this size. On an H100 (cuBLAS 13.0, random bytes) the default
/// heuristic ran 16384³ at 773 TOPS as one call and at 1483 TOPS as four
/// 8192 × 16384 × 8192 calls (8192³ as one call: 1367).
pub(crate) const CUDA_EMULATION_INT8_TILE: usize = 8192;

/// The kernels that multiply the emulated product's INT8 planes on an
/// sm_90 GPU (others take cuBLAS's): cuBLAS's until the own kernel
/// (`FASTMM_DEV_CUDA_INT8=wgmma`) is measured beside them.
pub(crate) const CUDA_EMULATION_INT8_KERNELS: crate::config::Int8Kernels =
    crate::config::Int8Kernels::Cublas;

/// Bytes per band of a whole matrix staged to or from the GPU through two
/// page-locked buffers ([`crate::cuda::runtime::transfer`]): large enough that each
/// copy runs at the link's speed, small enough that gathering one band
/// while the other copies keeps both busy.
pub(crate) const CUDA_TRANSFER_BAND_BYTES: usize = 64 << 20;

/// Rows and columns (TM, TN) of one thread's micro-tile in
/// `kernels/fast.cu` for its `TM`: 4-byte types pair 8 rows with 16
/// columns and 16 rows with 8 (128 accumulators either way); f64 pairs 8
/// rows with 4 (32 accumulators in 64 registers, so two blocks of 8 warps
/// share an SM: 19.2 TFLOPS at 8192 on the H100 against 17.0 for 8×8 with
/// one block); i64 uses square ones.
pub(crate) fn simt_micro_tile(dtype: DType, tm: usize) -> (usize, usize) {
    match (dtype, tm) {
        (DType::F32 | DType::I32, 8) => (8, 16),
        (DType::F32 | DType::I32, 16) => (16, 8),
        (DType::F64, 8) => (8, 4),
        _ => (tm, tm),
    }
}

/// The TMs `kernels/fast.cu` is built with for a type, the default first:
/// 8 (8×16) and 16 (16×8) for 4-byte elements, 4 (4×4) and 8 (8×4 for
/// f64, 8×8 for i64) for 8-byte ones (4 × 4 leaves a 4-byte A tile short
/// of one vector per thread; 8 × 16 of 8-byte accumulators would not fit
/// the registers, and i64's 4×8 spilled).
pub(crate) fn simt_micro_tiles(dtype: DType) -> [usize; 2] {
    match dtype.size_bytes() {
        4 => [8, 16],
        _ => [4, 8],
    }
}

/// Streams (each driven by a host thread of its own) over which a batch
/// of GPU-resident products runs when it is not one cuBLAS strided-batch
/// launch and its products are smaller than
/// [`CUDA_BATCH_LANES_BELOW_MN`]: the emulated product waits on its
/// certificate once per product and its kernels are short at small sizes,
/// so products on separate streams fill the gaps of one another. On an
/// H200, emulated f32 at `native`, 4 lanes against one call per product:
/// 64 × 2048³ 46.0 against 51.2 ms, 16 × 4096³ 33.2 against 34.8 ms.
pub(crate) const CUDA_BATCH_LANES: usize = 4;

/// The m·n from which a batch's products run one after another on one
/// stream: there one product fills the GPU, and 8 × 8192³ emulated f32
/// ran 3% slower on 4 lanes (91.8 against 89.1 ms, H200), its products'
/// workspaces and memory traffic competing.
pub(crate) const CUDA_BATCH_LANES_BELOW_MN: usize = 8192 * 8192;

/// GPU scratch ([`crate::cuda::runtime::device::Gpu::workspace`]) grows
/// in steps of 2 MiB, the pool's page.
pub(crate) const CUDA_WORKSPACE_GRANULE: usize = 2 << 20;

/// A GPU's scratch is kept after a call while it holds at most this share
/// of the GPU's memory (12.3 GiB of an H200's 140 for 64 emulated f32
/// products of 2048³); more goes back to the pool, for the other products.
pub(crate) const CUDA_WORKSPACE_KEEP_FRACTION: f64 = 0.25;

/// The workspace each cuBLAS handle is given: 32 MiB, PyTorch's size on
/// Hopper. Without one, 64 × 2048³ strided-batch sgemm ran 1% slower in
/// torch itself (21.20 against 20.99 ms, `CUBLAS_WORKSPACE_CONFIG=:0:0`,
/// H200).
pub(crate) const CUDA_CUBLAS_WORKSPACE_BYTES: usize = 32 << 20;

#[cfg(test)]
mod tests {
    use super::emulation_prices;
    use crate::element::DType;
    use crate::emulation::certify::{priced, EmulationRoute};

    /// The H100's prices against the rows they were measured from
    /// (docs/results.md, issue 77, `auto` against cuBLAS): the routes that
    /// ran slower than the native product price at or above it, those
    /// that ran faster below it.
    #[test]
    fn the_measured_prices_send_the_measured_losses_native() {
        // (type, n, moduli, native fix-ups, emulation ran faster).
        let rows = [
            (DType::F64, 16384, 14, 0, true),
            (DType::F64, 16384, 16, 117_210, false),
            (DType::F32, 16384, 7, 42, true),
            (DType::F32, 4096, 8, 632, true),
            (DType::F32, 8192, 8, 0, true),
            (DType::F32, 16384, 8, 0, true),
            (DType::F32, 4096, 8, 35_389, false),
            (DType::F32, 8192, 8, 7_003, true),
            (DType::F32, 16384, 8, 364, true),
        ];
        for (dtype, n, moduli, fixups, faster) in rows {
            let route = EmulationRoute::Emulated {
                bits: 20,
                moduli,
                fixups,
            };
            let elements = (n * n) as u64;
            let kept = priced(route, elements, &emulation_prices(dtype), true) == route;
            assert_eq!(
                kept, faster,
                "{dtype} n = {n}, {moduli} moduli, {fixups} fix-ups"
            );
        }
    }
}
