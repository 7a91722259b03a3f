//! `cuda-fast`'s kernel configuration: which kernel family runs a type
//! (SIMT tiles or the f64 tensor cores), the micro-tile of a thread, the
//! shape rule that picks a block tile, and the shared memory each variant
//! takes.

use crate::config::Config;
use crate::cuda::kernels::gemm::schedule::FastSchedule;
use crate::cuda::runtime::compile::{ring_stages, KernelKey, KernelSource};
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::{
    mbarriers_enabled, stream_k_waves, wave_tail_enabled, CUDA_MBAR_BK, CUDA_MBAR_STAGES,
    CUDA_MMA_STAGES, MBAR_MICRO_TILE, MMA_BLOCK_TILE,
};
pub(crate) use crate::cuda::tunables::{simt_micro_tile, simt_micro_tiles};
use crate::element::DType;
use crate::error::Error;
use crate::options::{CudaKernel, GemmOptions};

/// Bytes of dynamic shared memory the mbarrier kernel takes for `dtype`:
/// `CUDA_MBAR_STAGES` stages of BK rows of A's transposed tile (padded by
/// one 16-byte vector) and BK rows of B's.
pub(crate) fn mbar_shared_bytes(dtype: DType) -> usize {
    let (tm, tn) = MBAR_MICRO_TILE;
    let size = dtype.size_bytes();
    let padded_rows = 16 * tm + 16 / size;
    CUDA_MBAR_STAGES * CUDA_MBAR_BK * (padded_rows + 16 * tn) * size
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
pub(crate) fn simt_shape_tiles(dtype: DType) -> &'static [usize] {
    match dtype {
        DType::F64 => &[4, 8],
        DType::I64 => &[4],
        _ => &[8],
    }
}

/// Bytes of dynamic shared memory `kernels/fast_ring.cu` takes for
/// `dtype`, micro-tile rows `tm` and `stages` stages: `STAGE_ELEMS`
/// elements per stage, BK rows of A's transposed tile padded by one 16-byte
/// vector and BK rows of B's.
pub(crate) fn ring_shared_bytes(dtype: DType, tm: usize, stages: usize) -> usize {
    let (tm, tn) = simt_micro_tile(dtype, tm);
    let size = dtype.size_bytes();
    let bk = if tm * tn > 64 { 16 } else { 8 };
    let padded_rows = 16 * tm + 16 / size;
    stages * bk * (padded_rows + 16 * tn) * size
}

/// The family that runs `dtype` on `gpu` when `requested` is asked for
/// (`None`: `FASTMM_CUDA_KERNEL`, else `auto`): never `Auto`; asking for
/// `mma` where it cannot run is an error, not a silent fallback.
pub(crate) fn family(
    requested: Option<CudaKernel>,
    dtype: DType,
    gpu: &Gpu,
) -> Result<CudaKernel, Error> {
    let requested = match requested {
        Some(choice) => choice,
        None => Config::get().cuda_kernel()?.unwrap_or_default(),
    };
    let mma_runs = dtype == DType::F64 && gpu.info().compute_capability >= (9, 0);
    match requested {
        CudaKernel::Auto if mma_runs => Ok(CudaKernel::Mma),
        CudaKernel::Auto | CudaKernel::Simt => Ok(CudaKernel::Simt),
        CudaKernel::Mma if mma_runs => Ok(CudaKernel::Mma),
        CudaKernel::Mma => Err(Error::Unsupported {
            algorithm: "cuda-fast",
            what: format!(
                "the mma kernel for {dtype} on compute capability {}.{} (it needs f64 and sm_90+)",
                gpu.info().compute_capability.0,
                gpu.info().compute_capability.1
            ),
        }),
    }
}

/// A resolved `cuda-fast` configuration: the kernel family and, for the
/// SIMT kernel, its micro-tile rows TM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FastConfig {
    /// `Simt` or `Mma` (never `Auto`).
    pub(crate) family: CudaKernel,
    /// Rows of a thread's micro-tile in `kernels/fast.cu` (columns:
    /// [`simt_micro_tile`]); unused by `Mma`.
    pub(crate) tm: usize,
    /// The element type it runs.
    pub(crate) dtype: DType,
    /// f64's TM = 8 on sm_90 and later (unless the developer switch `FASTMM_DEV_CUDA_MBAR=off`):
    /// [`MBAR_MICRO_TILE`] micro-tiles in `KernelSource::FastMbar`, whose
    /// threads hand the staged buffers over through mbarriers, instead of
    /// 8×4 ones with a block barrier per k step.
    pub(crate) mbarriers: bool,
}

impl FastConfig {
    /// The configurations `opts` lets `cuda-fast` choose among on `gpu`
    /// for `dtype`, smallest block tile first: the family of
    /// `opts.gpu.kernel` (or `FASTMM_CUDA_KERNEL`), and as the SIMT
    /// kernel's TM `opts.tile` alone when given (8 (8×16) or 16 (16×8) for
    /// 4-byte types, 4 or 8 for 8-byte ones), else [`simt_shape_tiles`].
    pub(crate) fn candidates(
        opts: &GemmOptions,
        dtype: DType,
        gpu: &Gpu,
    ) -> Result<Vec<FastConfig>, Error> {
        let family = family(opts.gpu.kernel, dtype, gpu)?;
        let simt = simt_micro_tiles(dtype);
        let allowed: &[usize] = match family {
            CudaKernel::Mma => &[],
            CudaKernel::Auto | CudaKernel::Simt => &simt,
        };
        let tiles: &[usize] = match opts.tile {
            // Mma's tiles are fixed; its TM is unused.
            None if family == CudaKernel::Mma => &simt[..1],
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
        let mbarriers_here = family == CudaKernel::Simt
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
    pub(crate) fn pick(candidates: &[FastConfig], shape: (usize, usize), sms: usize) -> FastConfig {
        candidates[FastConfig::pick_index(candidates, shape, sms)]
    }

    /// The index in `candidates` of [`FastConfig::pick`]'s choice.
    pub(crate) fn pick_index(
        candidates: &[FastConfig],
        (m, n): (usize, usize),
        sms: usize,
    ) -> usize {
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
    pub(crate) fn resolve(
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
    pub(crate) fn micro_tile(self) -> (usize, usize) {
        if self.mbarriers {
            MBAR_MICRO_TILE
        } else {
            simt_micro_tile(self.dtype, self.tm)
        }
    }

    /// The kernel variant to compile.
    pub(crate) fn key(self) -> KernelKey {
        let dtype = self.dtype;
        match self.family {
            CudaKernel::Mma => KernelKey {
                source: KernelSource::FastMma,
                dtype,
                tile: CUDA_MMA_STAGES,
            },
            _ if self.mbarriers => KernelKey {
                source: KernelSource::FastMbar,
                dtype,
                tile: self.tm,
            },
            CudaKernel::Auto | CudaKernel::Simt => KernelKey {
                source: KernelSource::Fast,
                dtype,
                tile: self.tm,
            },
        }
    }

    /// Blocks per SM: the `__launch_bounds__` of `fast.cu` (`MIN_BLOCKS`:
    /// one when the accumulators take over 256 bytes per thread, else two)
    /// and `fast_mma.cu` (one).
    pub(crate) fn blocks_per_sm(self) -> usize {
        let (tm, tn) = self.micro_tile();
        match self.family {
            CudaKernel::Mma => 1,
            _ if tm * tn * self.dtype.size_bytes() > 256 => 1,
            _ => 2,
        }
    }

    /// The `fast_ring.cu` twin of a SIMT configuration (none for `Mma`,
    /// and none for the mbarrier kernel, a ring itself, which takes
    /// unaligned operands as they are).
    pub(crate) fn ring_key(self) -> Option<KernelKey> {
        (self.family != CudaKernel::Mma && !self.mbarriers).then_some(KernelKey {
            source: KernelSource::FastRing,
            dtype: self.dtype,
            tile: self.tm,
        })
    }

    /// Dynamic shared memory one block of the `fast_ring.cu` twin takes on
    /// this GPU ([`ring_shared_bytes`]).
    pub(crate) fn ring_shared_bytes(self, gpu: &Gpu) -> Result<usize, Error> {
        let stages = ring_stages(gpu.arch())?;
        Ok(ring_shared_bytes(self.dtype, self.tm, stages))
    }

    /// Dynamic shared memory one block of the main kernel takes: the
    /// mbarrier kernel's ring ([`mbar_shared_bytes`]), else none (static).
    pub(crate) fn shared_bytes(self) -> usize {
        if self.mbarriers {
            mbar_shared_bytes(self.dtype)
        } else {
            0
        }
    }

    /// Rows and columns of C one block computes.
    pub(crate) fn block_shape(self) -> (usize, usize) {
        let (tm, tn) = self.micro_tile();
        match self.family {
            CudaKernel::Mma => (MMA_BLOCK_TILE, MMA_BLOCK_TILE),
            _ => (16 * tm, 16 * tn),
        }
    }

    /// How it lays out an m×k×n product on `gpu` (see [`FastSchedule::plan`])
    /// whose operands' rows are all 16-byte `aligned` or not.
    pub(crate) fn schedule(
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
    pub(crate) fn stream_key(self) -> Option<KernelKey> {
        (self.family != CudaKernel::Mma && !self.mbarriers).then_some(KernelKey {
            source: KernelSource::FastStream,
            dtype: self.dtype,
            tile: self.tm,
        })
    }

    /// What runs, for reports: e.g. "simt 128x256 tiles, 8x16/thread".
    pub(crate) fn describe(self) -> String {
        let (rows, cols) = self.block_shape();
        let per_thread = match self.family {
            CudaKernel::Mma => "DMMA m16n8k8".to_string(),
            _ => {
                let (tm, tn) = self.micro_tile();
                let sync = if self.mbarriers { ", mbarriers" } else { "" };
                format!("{tm}x{tn}/thread{sync}")
            }
        };
        format!("{} {rows}x{cols} tiles, {per_thread}", self.family)
    }
}

/// Whether the rows of contiguous row-major m×k and k×n operands in
/// 16-byte aligned allocations all start on 16-byte boundaries: when k and
/// n are whole vectors of `dtype`.
pub(crate) fn contiguous_rows_aligned(dtype: DType, k: usize, n: usize) -> bool {
    let lanes = 16 / dtype.size_bytes();
    k.is_multiple_of(lanes) && n.is_multiple_of(lanes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_rule_takes_the_largest_tile_that_fills_every_sm() {
        let simt = |dtype: DType, tm| FastConfig {
            family: CudaKernel::Simt,
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
            family: CudaKernel::Simt,
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
                let stages = crate::cuda::tunables::CUDA_RING_STAGES;
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
        use crate::cuda::runtime::compile::ring_stages;
        // (A `dev` build given FASTMM_DEV_CUDA_RING_STAGES gets that on
        // sm_90 instead.)
        assert_eq!(ring_stages("sm_75").unwrap(), 2);
        assert_eq!(
            ring_stages("sm_90").unwrap(),
            crate::cuda::tunables::CUDA_RING_STAGES
        );
        assert!(ring_stages("compute_x").is_err());
    }
}
