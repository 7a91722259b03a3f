//! Run-time compilation of the CUDA C kernels with NVRTC: one PTX module
//! per (kernel, element type, tile), for the device's compute capability,
//! with the tile and the types passed as `-D` defines. Compiled PTX is kept
//! per process (by [`crate::cuda::Gpu`]) and on disk ([`cached_ptx`]).

use std::fs;
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use crate::cuda::tunables::simt_micro_tile;
use crate::cuda::tunables::{
    self, CUDA_MBAR_BK, CUDA_MBAR_STAGES, CUDA_RASTER_GROUP, MBAR_MICRO_TILE,
};
use crate::element::DType;
use crate::error::Error;

/// A CUDA C kernel of `src/cuda/kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelSource {
    /// `naive.cu`: one thread per element of C, global memory only.
    Naive,
    /// `tiled.cu`: square shared-memory tiles.
    Tiled,
    /// `combine.cu`: dst ← keep·dst + Σ wᵢ·srcᵢ, the fast algorithms' additions.
    Combine,
    /// `combine_group.cu`: several such combinations over shared sources
    /// in one pass (the `batched` schedules' groups).
    CombineGroup,
    /// `convert.cu`: f32 → bf16 (tile 1) or f16 (tile 0), for cuBLAS's
    /// reduced-precision modes.
    Convert,
    /// `fast.cu`: register-blocked tiles (tile = TM, the micro-tile rows;
    /// its columns TN follow from the type and TM).
    Fast,
    /// `fast_ring.cu`: `Fast`'s tiles staged through a ring of `cp.async`
    /// buffers, for operands whose rows are not 16-byte aligned (tile = TM).
    FastRing,
    /// `fast_stream.cu`: `Fast`'s tiles with the last waves shared out over
    /// the SMs by k steps (stream-K), and its fix-up kernel
    /// ([`KernelSource::STREAM_FIXUP_ENTRY`]) (tile = TM).
    FastStream,
    /// `fast_ring.cu` built with `RING_MBARRIERS` (sm_90+): f64 8×8
    /// micro-tiles (128×128 block tiles, one block per SM), the ring's
    /// buffers handed between threads by mbarriers instead of a block
    /// barrier per k step; any operands (tile = TM = 8).
    FastMbar,
    /// `fast_mma.cu`: f64 on the FP64 tensor cores (`mma.sync` m16n8k8,
    /// sm_90+), 128×128 tiles (tile = STAGES, the cp.async pipeline depth).
    FastMma,
    /// `fused.cu`: the Strassen primitive with its operand sums formed
    /// while staging and its result added into several blocks of C, for a
    /// group of products in one launch (tile = TM, as for `Fast`).
    Fused,
    /// `emulated.cu`: the emulated product's statistics, splitting,
    /// certificate, CRT accumulation and fix-ups
    /// ([`KernelSource::EMULATED_ENTRIES`]; tile unused, 0).
    Emulated,
    /// `bytes.cu`: the integer `emulated` product's byte planes and their
    /// combination ([`KernelSource::BYTES_ENTRIES`]; tile unused, 0).
    Bytes,
    /// `transpose.cu`: a transposed (column-major) view copied row-major,
    /// for the products that read row-major operands only (tile unused, 0).
    Transpose,
    /// `complex.cu`: interleaved complex matrices split into real planes
    /// and combined back from the real products
    /// ([`KernelSource::COMPLEX_ENTRIES`]; tile unused, 0).
    Complex,
    /// `int8_wgmma.cu`: the emulated product's INT8 products (INT32 sums)
    /// on Hopper's warpgroup MMA with tensor-memory copies, built for
    /// sm_90a (tile = CLUSTER, blocks that share B's copies: 1 or 2; the
    /// key's type is I32, the sums').
    Int8Wgmma,
}

impl KernelSource {
    /// Every kernel source, for the compile test.
    #[cfg(any(test, feature = "dev"))]
    pub const ALL: [KernelSource; 16] = [
        KernelSource::Naive,
        KernelSource::Tiled,
        KernelSource::Combine,
        KernelSource::CombineGroup,
        KernelSource::Convert,
        KernelSource::Fast,
        KernelSource::FastRing,
        KernelSource::FastStream,
        KernelSource::FastMbar,
        KernelSource::FastMma,
        KernelSource::Fused,
        KernelSource::Emulated,
        KernelSource::Bytes,
        KernelSource::Transpose,
        KernelSource::Complex,
        KernelSource::Int8Wgmma,
    ];

    /// The entry points of `emulated.cu`.
    pub const EMULATED_ENTRIES: [&'static str; 13] = [
        "emu_stats_rows",
        "emu_cols_max",
        "emu_cols_finish",
        "emu_split",
        "emu_need",
        "emu_accumulate",
        "emu_accumulate_wide",
        "emu_fixup",
        "emu_stats_merge",
        "emu_add_residues",
        "emu_accumulate_complex",
        "emu_accumulate_r8",
        "emu_accumulate_wide_r8",
    ];

    /// The entry points of `complex.cu`.
    pub const COMPLEX_ENTRIES: [&'static str; 2] = ["cx_split", "cx_combine"];

    /// The entry points of `bytes.cu`.
    pub const BYTES_ENTRIES: [&'static str; 2] = ["bytes_split", "bytes_combine"];

    /// The second entry point of `fast_stream.cu`: adds the pieces of the
    /// tiles that stream-K split.
    pub const STREAM_FIXUP_ENTRY: &'static str = "gemm_fast_stream_fixup";

    /// Whether the source is one of the register-blocked SIMT kernels
    /// (simt_tile.cuh: tile = TM, with a `TN` define).
    pub fn is_simt(self) -> bool {
        matches!(
            self,
            KernelSource::Fast
                | KernelSource::FastRing
                | KernelSource::FastStream
                | KernelSource::Fused
        )
    }

    /// Whether the kernel is written for elements of this type.
    #[cfg(any(test, feature = "dev"))]
    pub fn supports(self, dtype: DType) -> bool {
        match self {
            KernelSource::Convert => dtype == DType::F32,
            KernelSource::FastMma | KernelSource::FastMbar => dtype == DType::F64,
            KernelSource::Emulated => !dtype.is_integer(),
            KernelSource::Bytes => dtype.is_integer(),
            KernelSource::Complex => !dtype.is_integer(),
            KernelSource::Int8Wgmma => dtype == DType::I32,
            _ => true,
        }
    }

    /// The `tile` values the library builds this source with for `dtype`
    /// (its variants: the edge of a square block, rows of the combine
    /// block, micro-tile rows, stages, or bf16/half).
    #[cfg(any(test, feature = "dev"))]
    pub fn tiles(self, dtype: DType) -> Vec<usize> {
        use crate::cuda::tunables::simt_micro_tiles;
        use crate::cuda::tunables::{
            CUDA_COMBINE_ROWS_PER_BLOCK, CUDA_DEFAULT_TILE, CUDA_MMA_STAGES, CUDA_NAIVE_BLOCK,
        };
        match self {
            KernelSource::Naive => vec![CUDA_NAIVE_BLOCK],
            KernelSource::Tiled => vec![CUDA_DEFAULT_TILE],
            KernelSource::Combine | KernelSource::CombineGroup => {
                vec![CUDA_COMBINE_ROWS_PER_BLOCK]
            }
            KernelSource::Convert => vec![0, 1],
            KernelSource::Emulated
            | KernelSource::Bytes
            | KernelSource::Transpose
            | KernelSource::Complex => vec![0],
            KernelSource::FastMma => vec![CUDA_MMA_STAGES],
            KernelSource::Int8Wgmma => vec![1, 2],
            KernelSource::FastMbar => vec![MBAR_MICRO_TILE.0],
            _ => simt_micro_tiles(dtype).to_vec(),
        }
    }

    /// Every variant the library builds for `arch`: each source, type and
    /// tile (the tensor-core, mbarrier and bf16 kernels only for sm_90).
    #[cfg(feature = "dev")]
    pub fn variants(arch: &str) -> Vec<KernelKey> {
        let hopper_only = |s: KernelSource| {
            matches!(
                s,
                KernelSource::FastMma
                    | KernelSource::Convert
                    | KernelSource::FastMbar
                    | KernelSource::Emulated
                    | KernelSource::Int8Wgmma
            )
        };
        let mut keys = Vec::new();
        for source in KernelSource::ALL {
            if hopper_only(source) && arch != "sm_90" {
                continue;
            }
            for dtype in DType::ALL.into_iter().filter(|&d| source.supports(d)) {
                keys.extend(source.tiles(dtype).into_iter().map(|tile| KernelKey {
                    source,
                    dtype,
                    tile,
                }));
            }
        }
        keys
    }

    /// The CUDA C text.
    pub fn text(self) -> &'static str {
        match self {
            KernelSource::Naive => include_str!("../kernels/naive.cu"),
            KernelSource::Tiled => include_str!("../kernels/tiled.cu"),
            KernelSource::Combine => include_str!("../kernels/combine.cu"),
            KernelSource::CombineGroup => include_str!("../kernels/combine_group.cu"),
            KernelSource::Convert => include_str!("../kernels/convert.cu"),
            KernelSource::Fast => concat!(
                include_str!("../kernels/block_common.cuh"),
                include_str!("../kernels/simt_tile.cuh"),
                include_str!("../kernels/fast_tile.cuh"),
                include_str!("../kernels/fast.cu")
            ),
            KernelSource::FastStream => concat!(
                include_str!("../kernels/block_common.cuh"),
                include_str!("../kernels/simt_tile.cuh"),
                include_str!("../kernels/fast_tile.cuh"),
                include_str!("../kernels/fast_stream.cu")
            ),
            KernelSource::FastRing | KernelSource::FastMbar => concat!(
                include_str!("../kernels/block_common.cuh"),
                include_str!("../kernels/simt_tile.cuh"),
                include_str!("../kernels/fast_ring.cu")
            ),
            KernelSource::FastMma => concat!(
                include_str!("../kernels/block_common.cuh"),
                include_str!("../kernels/fast_mma.cu")
            ),
            KernelSource::Fused => concat!(
                include_str!("../kernels/block_common.cuh"),
                include_str!("../kernels/simt_tile.cuh"),
                include_str!("../kernels/fused.cu")
            ),
            KernelSource::Emulated => include_str!("../kernels/emulated.cu"),
            KernelSource::Bytes => include_str!("../kernels/bytes.cu"),
            KernelSource::Transpose => include_str!("../kernels/transpose.cu"),
            KernelSource::Complex => include_str!("../kernels/complex.cu"),
            KernelSource::Int8Wgmma => concat!(
                include_str!("../kernels/block_common.cuh"),
                include_str!("../kernels/int8_wgmma.cu")
            ),
        }
    }

    /// The architecture NVRTC builds this source for on a GPU of `arch`:
    /// the warpgroup MMA exists only in sm_90's architecture-specific
    /// target, sm_90a (whose PTX runs on sm_90 GPUs alone).
    pub fn target(self, arch: &'static str) -> &'static str {
        match (self, arch) {
            (KernelSource::Int8Wgmma, "sm_90") => "sm_90a",
            _ => arch,
        }
    }

    /// The `extern "C"` entry point.
    pub fn entry(self) -> &'static str {
        match self {
            KernelSource::Naive => "gemm_naive",
            KernelSource::Tiled => "gemm_tiled",
            KernelSource::Combine => "combine",
            KernelSource::CombineGroup => "combine_group",
            KernelSource::Convert => "to_half",
            KernelSource::Fast => "gemm_fast",
            KernelSource::FastRing | KernelSource::FastMbar => "gemm_fast_ring",
            KernelSource::FastStream => "gemm_fast_stream",
            KernelSource::FastMma => "gemm_fast_mma",
            KernelSource::Fused => "gemm_fused",
            KernelSource::Emulated => "emu_accumulate",
            KernelSource::Bytes => "bytes_combine",
            KernelSource::Transpose => "transpose",
            KernelSource::Complex => "cx_combine",
            KernelSource::Int8Wgmma => "int8_wgmma",
        }
    }

    /// The name of the define that carries the tile (thread block) edge.
    fn tile_define(self) -> &'static str {
        match self {
            KernelSource::Naive => "BLOCK",
            KernelSource::Tiled => "TILE",
            KernelSource::Combine | KernelSource::CombineGroup => "ROWS_PER_BLOCK",
            KernelSource::Convert => "BF16",
            KernelSource::Fast
            | KernelSource::FastRing
            | KernelSource::FastStream
            | KernelSource::FastMbar
            | KernelSource::Fused => "TM",
            KernelSource::FastMma => "STAGES",
            KernelSource::Int8Wgmma => "CLUSTER",
            KernelSource::Emulated => "EMU_TILE",
            KernelSource::Bytes => "BYTES_TILE",
            KernelSource::Transpose => "TRANSPOSE_TILE",
            KernelSource::Complex => "COMPLEX_TILE",
        }
    }
}

/// One compiled variant: what the process cache is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelKey {
    /// Which source.
    pub source: KernelSource,
    /// Element type.
    pub dtype: DType,
    /// Edge of the square thread block (rows of the 32-wide block for
    /// `Combine`).
    pub tile: usize,
}

/// Whether the NVRTC library can be loaded (cudarc panics on a missing
/// library, so this is asked before any NVRTC call).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the library by its candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Shared-memory stages `kernels/fast_ring.cu` is built with for `arch`:
/// two before sm_80 (no `cp.async`, so a deeper ring hides nothing), else
/// [`crate::cuda::tunables::ring_stages`].
pub(crate) fn ring_stages(arch: &str) -> Result<usize, Error> {
    let generation: u32 = arch
        .trim_start_matches("sm_")
        .parse()
        .map_err(|_| Error::Cuda(format!("unknown architecture {arch}")))?;
    if generation < 80 {
        return Ok(2);
    }
    tunables::ring_stages()
}

/// The `-D` defines of one variant for `arch`.
fn defines(key: KernelKey, arch: &str) -> Result<Vec<String>, Error> {
    let mut defines = vec![
        format!("-DELEM={}", cuda_type(key.dtype)),
        format!("-DACC={}", cuda_accumulator(key.dtype)),
        format!("-D{}={}", key.source.tile_define(), key.tile),
    ];
    if key.source.is_simt() {
        let (_, columns) = simt_micro_tile(key.dtype, key.tile);
        defines.push(format!("-DTN={columns}"));
    }
    if key.source.is_simt() || matches!(key.source, KernelSource::FastMma | KernelSource::Int8Wgmma)
    {
        defines.push(format!("-DRASTER_GROUP={}", CUDA_RASTER_GROUP));
    }
    if key.source == KernelSource::Emulated {
        // Horner's rule of the CRT runs in 128-bit integers.
        defines.push("--device-int128".to_string());
    }
    if key.source == KernelSource::FastRing {
        defines.push(format!("-DSTAGES={}", ring_stages(arch)?));
    }
    if key.source == KernelSource::Int8Wgmma {
        defines.push(format!("-DSTAGES={}", tunables::CUDA_WGMMA_STAGES));
    }
    if key.source == KernelSource::FastMbar {
        let (_, columns) = MBAR_MICRO_TILE;
        defines.extend([
            format!("-DTN={columns}"),
            format!("-DBK={}", CUDA_MBAR_BK),
            format!("-DSTAGES={}", CUDA_MBAR_STAGES),
            format!("-DRASTER_GROUP={}", CUDA_RASTER_GROUP),
            "-DRING_MBARRIERS=1".to_string(),
        ]);
    }
    Ok(defines)
}

/// 64-bit FNV-1a: a hash that stays the same across builds and Rust
/// versions, so cache file names do too.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in part.iter().chain(&[0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The cache file of a variant: keyed by the source text, the defines,
/// the architecture and the driver version (a new driver may want new PTX).
fn cache_file(
    dir: &Path,
    key: KernelKey,
    arch: &str,
    driver_version: i32,
) -> Result<PathBuf, Error> {
    let defines = defines(key, arch)?.join(" ");
    let hash = fnv1a(&[
        key.source.text().as_bytes(),
        defines.as_bytes(),
        arch.as_bytes(),
        &driver_version.to_le_bytes(),
    ]);
    Ok(dir.join(format!("{}-{arch}-{hash:016x}.ptx", key.source.entry())))
}

/// The PTX of a variant: from the on-disk cache when it holds it, else
/// compiled and stored there (a cache that cannot be read or written is
/// skipped: it only saves time).
pub fn cached_ptx(
    cache: Option<&Path>,
    key: KernelKey,
    arch: &'static str,
    driver_version: i32,
) -> Result<Ptx, Error> {
    let Some(dir) = cache else {
        return compile(key, arch);
    };
    let file = cache_file(dir, key, arch, driver_version)?;
    if let Ok(text) = fs::read_to_string(&file) {
        if text.contains(&format!(".entry {}", key.source.entry())) {
            return Ok(Ptx::from_src(text));
        }
    }
    let ptx = compile(key, arch)?;
    // Written whole, so a concurrent reader never sees half a file; a
    // cache that cannot be written only costs the next run a compile.
    let _ = fs::create_dir_all(dir)
        .map_err(|e| Error::File {
            file: dir.display().to_string(),
            reason: e.to_string(),
        })
        .and_then(|()| crate::partial::write_whole(&file, ptx.to_src().as_bytes()));
    Ok(ptx)
}

/// Compiles one kernel variant to PTX for `arch` (e.g. `sm_90`). Needs
/// NVRTC but no GPU.
pub fn compile(key: KernelKey, arch: &'static str) -> Result<Ptx, Error> {
    compile_at(key, arch, Optimisation::Full)
}

/// How hard NVVM optimises a compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Optimisation {
    /// What products run.
    Full,
    /// NVRTC's `--Ofast-compile=max`: the same preprocessing, templates,
    /// static assertions and code generation, with the optimiser cut
    /// short. The fused kernel of one type took 19.3 s at `Full` and
    /// 0.18 s here (NVRTC 13.0, one core); the compile tests use it to
    /// check every variant's source, and the GPU machines' self-test
    /// runs what `Full` builds.
    #[cfg_attr(not(test), allow(dead_code))]
    Quick,
}

fn compile_at(key: KernelKey, arch: &'static str, level: Optimisation) -> Result<Ptx, Error> {
    if !nvrtc_available() {
        return Err(Error::CudaUnavailable(
            "the NVRTC library (libnvrtc) was not found on the loader path".into(),
        ));
    }
    let arch = key.source.target(arch);
    let mut flags = defines(key, arch)?;
    if level == Optimisation::Quick {
        flags.push("--Ofast-compile=max".to_string());
    }
    let options = CompileOptions {
        arch: Some(arch),
        options: flags,
        name: Some(format!("{}.cu", key.source.entry())),
        ..Default::default()
    };
    compile_ptx_with_opts(key.source.text(), options).map_err(|e| {
        Error::Cuda(format!(
            "NVRTC could not compile {} for {} {arch} tile {}: {e}",
            key.source.entry(),
            key.dtype,
            key.tile
        ))
    })
}

/// The NVRTC architecture name of a compute capability, e.g. (9, 0) → `sm_90`.
pub fn arch_name(major: i32, minor: i32) -> &'static str {
    // NVRTC wants a 'static str; the set of real architectures is small.
    match (major, minor) {
        (5, 0) => "sm_50",
        (5, 2) => "sm_52",
        (6, 0) => "sm_60",
        (6, 1) => "sm_61",
        (7, 0) => "sm_70",
        (7, 5) => "sm_75",
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (10, 3) => "sm_103",
        (12, 0) => "sm_120",
        // An unknown newer device: PTX for the newest target this table
        // knows runs there through the driver's JIT.
        _ => "sm_90",
    }
}

/// The CUDA C type of an element.
fn cuda_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I32 => "int",
        DType::I64 => "long long",
    }
}

/// The CUDA C type the kernels accumulate in: the element type for floats,
/// and the unsigned type of the same width for integers, whose overflow is
/// defined to wrap (signed overflow is undefined in C++).
fn cuda_accumulator(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I32 => "unsigned int",
        DType::I64 => "unsigned long long",
    }
}

#[cfg(test)]
mod tests {
    //! The CUDA kernels compile with NVRTC for Hopper (sm_90) in every
    //! variant the library can ask for. NVRTC needs no GPU; CI installs it
    //! from the `nvidia-cuda-nvrtc` wheel and sets FASTMM_REQUIRE_NVRTC=1,
    //! so a missing library fails there instead of skipping. They compile
    //! at NVRTC's fast-compile level ([`Optimisation::Quick`]), which
    //! checks the same source a hundred times faster.
    use super::*;

    fn nvrtc_or_skip() -> bool {
        if nvrtc_available() {
            return true;
        }
        assert!(
            std::env::var(crate::config::REQUIRE_NVRTC_ENV).as_deref() != Ok("1"),
            "FASTMM_REQUIRE_NVRTC=1 but libnvrtc is not on the loader path"
        );
        eprintln!("skipped: libnvrtc not found (set LD_LIBRARY_PATH to an NVRTC 13 install)");
        false
    }

    /// Every kernel in every variant for Hopper, and fast.cu and
    /// fast_ring.cu for Turing too: fast.cu stages B with cp.async from
    /// sm_80 and through registers before, fast_ring.cu copies
    /// synchronously before sm_80 (in a two-stage ring); both paths must
    /// build.
    #[test]
    fn the_plain_simt_kernels_compile_for_sm90() {
        every_kernel_compiles_for("sm_90", |s| {
            matches!(s, KernelSource::Fast | KernelSource::FastRing)
        });
    }

    #[test]
    fn the_stream_k_kernels_compile_for_sm90() {
        every_kernel_compiles_for("sm_90", |s| s == KernelSource::FastStream);
    }

    // The fused kernels take longest: one test per pair of types.
    #[test]
    fn the_fused_float_kernels_compile_for_sm90() {
        every_kernel_compiles_for_types("sm_90", |s| s == KernelSource::Fused, |d| !d.is_integer());
    }

    #[test]
    fn the_fused_integer_kernels_compile_for_sm90() {
        every_kernel_compiles_for_types("sm_90", |s| s == KernelSource::Fused, DType::is_integer);
    }

    #[test]
    fn the_other_kernels_compile_for_sm90() {
        every_kernel_compiles_for("sm_90", |s| !s.is_simt());
    }

    #[test]
    fn the_architecture_dependent_kernels_compile_for_sm75() {
        every_kernel_compiles_for("sm_75", |s| {
            matches!(s, KernelSource::Fast | KernelSource::FastRing)
        });
    }

    /// The sources `chosen` picks, for `arch`: several tests, so that
    /// they compile in parallel (every source is in one of the sm_90
    /// tests).
    fn every_kernel_compiles_for(arch: &'static str, chosen: fn(KernelSource) -> bool) {
        every_kernel_compiles_for_types(arch, chosen, |_| true);
    }

    /// As [`every_kernel_compiles_for`], for the types `types` picks.
    fn every_kernel_compiles_for_types(
        arch: &'static str,
        chosen: fn(KernelSource) -> bool,
        types: fn(DType) -> bool,
    ) {
        if !nvrtc_or_skip() {
            return;
        }
        for source in KernelSource::ALL {
            if !chosen(source) {
                continue;
            }
            let tiles: &[usize] = match source {
                KernelSource::Naive => &[crate::cuda::tunables::CUDA_NAIVE_BLOCK],
                KernelSource::Tiled => &[1, 2, 3, 8, 16, 31, 32],
                KernelSource::Combine | KernelSource::CombineGroup => {
                    &[crate::cuda::tunables::CUDA_COMBINE_ROWS_PER_BLOCK]
                }
                KernelSource::Convert => &[0, 1],
                KernelSource::Emulated
                | KernelSource::Bytes
                | KernelSource::Transpose
                | KernelSource::Complex => &[0],
                // Every TM of some type; each type builds its own.
                source if source.is_simt() => &[4, 8, 16],
                KernelSource::FastMma => &[2, 3],
                KernelSource::Int8Wgmma => &[1, 2],
                KernelSource::FastMbar => &[crate::cuda::tunables::MBAR_MICRO_TILE.0],
                _ => unreachable!("every SIMT source is matched above"),
            };
            for dtype in DType::ALL
                .into_iter()
                .filter(|&d| source.supports(d) && types(d))
            {
                // Every variant the library builds is among those compiled here.
                for built in source.tiles(dtype) {
                    assert!(tiles.contains(&built), "{source:?} {dtype} tile {built}");
                }
                for &tile in tiles {
                    if source.is_simt()
                        && !crate::cuda::tunables::simt_micro_tiles(dtype).contains(&tile)
                    {
                        continue;
                    }
                    let key = KernelKey {
                        source,
                        dtype,
                        tile,
                    };
                    {
                        let ptx = compile_at(key, arch, Optimisation::Quick).unwrap_or_else(|e| {
                            panic!("{source:?} {dtype} tile {tile} {arch}: {e}")
                        });
                        let text = ptx.to_src();
                        assert!(
                            text.contains(&format!(".entry {}", source.entry())),
                            "{source:?} {dtype} tile {tile} {arch}: no entry point in the PTX"
                        );
                        let entries: &[&str] = match source {
                            KernelSource::Emulated => &KernelSource::EMULATED_ENTRIES,
                            KernelSource::Bytes => &KernelSource::BYTES_ENTRIES,
                            KernelSource::Complex => &KernelSource::COMPLEX_ENTRIES,
                            _ => &[],
                        };
                        for entry in entries {
                            assert!(
                                text.contains(&format!(".entry {entry}")),
                                "{dtype}: no {entry} in the PTX"
                            );
                        }
                        if source == KernelSource::FastStream {
                            assert!(
                                text.contains(&format!(
                                    ".entry {}",
                                    KernelSource::STREAM_FIXUP_ENTRY
                                )),
                                "{dtype} tile {tile} {arch}: no stream-K fix-up in the PTX"
                            );
                        }
                        assert!(
                            text.contains(&format!(".target {arch}")),
                            "PTX not built for {arch}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_kernel_that_does_not_compile_is_a_typed_error() {
        if !nvrtc_or_skip() {
            return;
        }
        // A tile of 0 makes the shared arrays zero-sized: NVRTC rejects it.
        let key = KernelKey {
            source: KernelSource::Tiled,
            dtype: DType::F32,
            tile: 0,
        };
        match compile(key, "sm_90") {
            Err(Error::Cuda(message)) => assert!(message.contains("gemm_tiled"), "{message}"),
            other => panic!("expected a compile error, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn compiled_ptx_is_cached_on_disk_per_variant() {
        if !nvrtc_or_skip() {
            return;
        }
        let dir = std::env::temp_dir().join(format!("fastmm-kernel-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = KernelKey {
            source: KernelSource::Tiled,
            dtype: DType::I64,
            tile: 8,
        };
        let first = cached_ptx(Some(&dir), key, "sm_90", 13000).expect("compiles");
        let files: Vec<_> = std::fs::read_dir(&dir).expect("cache dir made").collect();
        assert_eq!(files.len(), 1, "one file per variant");
        let second = cached_ptx(Some(&dir), key, "sm_90", 13000).expect("read back");
        assert_eq!(first.to_src(), second.to_src());
        // Another driver version or tile is another file.
        cached_ptx(Some(&dir), key, "sm_90", 13010).expect("compiles");
        cached_ptx(Some(&dir), KernelKey { tile: 16, ..key }, "sm_90", 13000).expect("compiles");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
