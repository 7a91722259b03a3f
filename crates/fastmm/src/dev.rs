//! Developer tools, in builds with the `dev` feature only: the ceilings of
//! the CPU microkernels, and the PTX of every CUDA kernel variant for
//! `ptxas` resource reports. Their interfaces may change with the kernels.

use crate::cpu::packed::select_kernel;
use crate::element::Element;
use crate::options::CpuKernel;

/// One line per microkernel of T in `family` (none where the CPU lacks
/// it): GFLOP/s on cache-resident panels at several depths, and as the
/// driver runs it, Ã streaming from an L2-sized block into tiles of a
/// 2048-wide C. The best of five runs of about 2 GFLOP each.
pub fn microkernel_report<T: Element>(family: CpuKernel) -> Vec<String> {
    let Ok(kernel) = select_kernel::<T>(Some(family)) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    let calls_for = |kc: usize| 2_000_000_000 / (kernel.mr * kernel.nr * kc);
    for kc in [128, 256, 384] {
        let best = (0..5)
            .map(|_| kernel.microkernel_gflops(kc, calls_for(kc)))
            .fold(0.0, f64::max);
        lines.push(format!(
            "{:<4} {:<16} kc={kc:<4} {best:8.1} GFLOP/s",
            T::DTYPE,
            kernel.name
        ));
    }
    let blocks = kernel.analytical_blocks();
    let (kc, panels) = (blocks.kc, blocks.mc.div_ceil(kernel.mr));
    let best = (0..5)
        .map(|_| kernel.streaming_gflops(kc, panels, 2048, calls_for(kc)))
        .fold(0.0, f64::max);
    lines.push(format!(
        "{:<4} {:<16} kc={kc:<4} {best:8.1} GFLOP/s streaming {panels} panels of Ã",
        T::DTYPE,
        kernel.name
    ));
    lines
}

/// Compiles every CUDA kernel variant whose entry name contains `only`
/// for `arch` (e.g. `sm_90`; the tensor-core, mbarrier and bf16 kernels
/// are built for sm_90 only) with NVRTC, no GPU needed, and writes each
/// PTX into `dir`; returns the files written.
#[cfg(feature = "cuda")]
pub fn ptx_dump(
    dir: &std::path::Path,
    arch: &'static str,
    only: &str,
) -> Result<Vec<std::path::PathBuf>, crate::Error> {
    use crate::cuda::compile::{compile, KernelSource};
    let mut written = Vec::new();
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::Error::InvalidOption(format!("{}: {e}", dir.display())))?;
    for key in KernelSource::variants(arch) {
        if !key.source.entry().contains(only) {
            continue;
        }
        let ptx = compile(key, arch)?;
        // FastRing and FastMbar share their source and entry point.
        let stem = match key.source {
            KernelSource::FastMbar => "gemm_fast_ring_mbarriers",
            other => other.entry(),
        };
        let path = dir.join(format!("{stem}-{}-{}.ptx", key.dtype, key.tile));
        std::fs::write(&path, ptx.to_src())
            .map_err(|e| crate::Error::InvalidOption(format!("{}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

/// Compiles every CUDA kernel variant the library builds for `arch` into
/// the kernel cache `dir`, as a GPU with driver version `driver_version`
/// (e.g. 13000) would look them up: a GPU machine given this directory as
/// `FASTMM_KERNEL_CACHE` loads them instead of compiling. Returns how many
/// variants are cached.
#[cfg(feature = "cuda")]
pub fn warm_kernel_cache(
    dir: &std::path::Path,
    arch: &'static str,
    driver_version: i32,
) -> Result<usize, crate::Error> {
    use crate::cuda::compile::{cached_ptx, KernelSource};
    let variants = KernelSource::variants(arch);
    for &key in &variants {
        cached_ptx(Some(dir), key, arch, driver_version)?;
    }
    let count = variants.len();
    Ok(count)
}
