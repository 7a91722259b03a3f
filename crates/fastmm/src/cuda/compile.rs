//! Run-time compilation of the CUDA C kernels with NVRTC: one PTX module
//! per (kernel, element type, tile), for the device's compute capability,
//! with the tile and the types passed as `-D` defines.

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

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
}

impl KernelSource {
    /// Every kernel source, for the compile test.
    pub const ALL: [KernelSource; 3] = [
        KernelSource::Naive,
        KernelSource::Tiled,
        KernelSource::Combine,
    ];

    /// The CUDA C text.
    pub fn text(self) -> &'static str {
        match self {
            KernelSource::Naive => include_str!("kernels/naive.cu"),
            KernelSource::Tiled => include_str!("kernels/tiled.cu"),
            KernelSource::Combine => include_str!("kernels/combine.cu"),
        }
    }

    /// The `extern "C"` entry point.
    pub fn entry(self) -> &'static str {
        match self {
            KernelSource::Naive => "gemm_naive",
            KernelSource::Tiled => "gemm_tiled",
            KernelSource::Combine => "combine",
        }
    }

    /// The name of the define that carries the tile (thread block) edge.
    fn tile_define(self) -> &'static str {
        match self {
            KernelSource::Naive => "BLOCK",
            KernelSource::Tiled => "TILE",
            KernelSource::Combine => "ROWS_PER_BLOCK",
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

/// Compiles one kernel variant to PTX for `arch` (e.g. `sm_90`). Needs
/// NVRTC but no GPU.
pub fn compile(key: KernelKey, arch: &'static str) -> Result<Ptx, Error> {
    if !nvrtc_available() {
        return Err(Error::CudaUnavailable(
            "the NVRTC library (libnvrtc) was not found on the loader path".into(),
        ));
    }
    let options = CompileOptions {
        arch: Some(arch),
        options: vec![
            format!("-DELEM={}", key.dtype.cuda_type()),
            format!("-DACC={}", key.dtype.cuda_accumulator()),
            format!("-D{}={}", key.source.tile_define(), key.tile),
        ],
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
