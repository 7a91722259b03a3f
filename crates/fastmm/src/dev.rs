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
///
/// For floats each run is paired with a run of the family's FMA ceiling
/// (independent register-only FMAs, as many as the kernel has
/// accumulators), and the line gives the median of the kernel's share of
/// it: the clock of a shared or virtual machine can move by half within
/// seconds, so only a ceiling measured beside the kernel says how close
/// the kernel is to the core's limit.
pub fn microkernel_report<T: Element>(family: CpuKernel) -> Vec<String> {
    let Ok(kernel) = select_kernel::<T>(Some(family)) else {
        return Vec::new();
    };
    let is_f64 = T::DTYPE == crate::DType::F64;
    let is_float = !T::DTYPE.is_integer();
    let calls_for = |kc: usize| 2_000_000_000 / (kernel.mr * kernel.nr * kc);
    let paired = |run: &dyn Fn() -> f64| -> (f64, Option<f64>) {
        let mut best = 0.0f64;
        let mut shares = Vec::new();
        for _ in 0..5 {
            let ceiling = is_float
                .then(|| fma_ceiling_gflops(family, is_f64))
                .flatten();
            let got = run();
            best = best.max(got);
            if let Some(ceiling) = ceiling {
                shares.push(got / ceiling);
            }
        }
        shares.sort_by(f64::total_cmp);
        (best, shares.get(shares.len() / 2).copied())
    };
    let share_text = |share: Option<f64>| match share {
        Some(s) => format!(" ({:.0}% of the FMA ceiling)", 100.0 * s),
        None => String::new(),
    };
    let mut lines = Vec::new();
    for kc in [128, 256, 384] {
        let (best, share) = paired(&|| kernel.microkernel_gflops(kc, calls_for(kc)));
        lines.push(format!(
            "{:<4} {:<16} kc={kc:<4} {best:8.1} GFLOP/s{}",
            T::DTYPE,
            kernel.name,
            share_text(share)
        ));
    }
    let blocks = kernel.analytical_blocks();
    let (kc, panels) = (blocks.kc, blocks.mc.div_ceil(kernel.mr));
    let (best, share) = paired(&|| kernel.streaming_gflops(kc, panels, 2048, calls_for(kc)));
    lines.push(format!(
        "{:<4} {:<16} kc={kc:<4} {best:8.1} GFLOP/s streaming {panels} panels of Ã{}",
        T::DTYPE,
        kernel.name,
        share_text(share)
    ));
    lines
}

/// GFLOP/s of one thread running only independent vector FMAs on
/// registers for the family's widest vectors (24 accumulators on
/// AVX-512, 12 on AVX2, as the kernels have), about 0.5 GFLOP; `None`
/// for the generic family or where the CPU lacks the instructions.
pub fn fma_ceiling_gflops(family: CpuKernel, f64_lanes: bool) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let iterations: u64 = 1 << 18;
        let (fmas_per_iteration, lanes) = match family {
            CpuKernel::Avx512 if is_x86_feature_detected!("avx512f") => (24.0, 16.0),
            CpuKernel::Avx2
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") =>
            {
                (12.0, 8.0)
            }
            _ => return None,
        };
        let lanes = if f64_lanes { lanes / 2.0 } else { lanes };
        let start = std::time::Instant::now();
        // SAFETY: the features each loop needs were detected just above;
        // the loops touch registers only.
        unsafe {
            match (family, f64_lanes) {
                (CpuKernel::Avx512, true) => ceiling::avx512_pd(iterations),
                (CpuKernel::Avx512, false) => ceiling::avx512_ps(iterations),
                (_, true) => ceiling::avx2_pd(iterations),
                (_, false) => ceiling::avx2_ps(iterations),
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        Some(iterations as f64 * fmas_per_iteration * lanes * 2.0 / seconds / 1e9)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (family, f64_lanes);
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod ceiling {
    /// A loop of independent `$fma acc, x, y` on registers, one per
    /// accumulator and iteration. The accumulators start at zero, so no
    /// value is ever subnormal; every vector register is declared
    /// clobbered (all are caller-saved in the C ABI).
    macro_rules! fma_loop {
        ($name:ident, $feature:literal, $zero:literal, $fma:literal, $reg:literal, $x:literal, $y:literal, [$($i:literal),*]) => {
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $name(iterations: u64) {
                // SAFETY: registers only, and every one written is
                // declared clobbered; the caller checked the features.
                unsafe {
                    std::arch::asm!(
                        concat!($zero, " ", $reg, $x, ", ", $reg, $x, ", ", $reg, $x),
                        concat!($zero, " ", $reg, $y, ", ", $reg, $y, ", ", $reg, $y),
                        $(concat!($zero, " ", $reg, $i, ", ", $reg, $i, ", ", $reg, $i),)*
                        "2:",
                        $(concat!($fma, " ", $reg, $i, ", ", $reg, $x, ", ", $reg, $y),)*
                        "dec rcx",
                        "jnz 2b",
                        inout("rcx") iterations => _,
                        clobber_abi("C"),
                        options(nostack, nomem),
                    );
                }
            }
        };
    }

    fma_loop!(
        avx512_pd,
        "avx512f",
        "vxorpd",
        "vfmadd231pd",
        "zmm",
        "24",
        "25",
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
    );
    fma_loop!(
        avx512_ps,
        "avx512f",
        "vxorps",
        "vfmadd231ps",
        "zmm",
        "24",
        "25",
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
    );
    fma_loop!(
        avx2_pd,
        "avx2,fma",
        "vxorpd",
        "vfmadd231pd",
        "ymm",
        "12",
        "13",
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    );
    fma_loop!(
        avx2_ps,
        "avx2,fma",
        "vxorps",
        "vfmadd231ps",
        "ymm",
        "12",
        "13",
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    );
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
    use crate::cuda::runtime::compile::{compile, KernelSource};
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
    use crate::cuda::runtime::compile::{cached_ptx, KernelSource};
    let variants = KernelSource::variants(arch);
    for &key in &variants {
        cached_ptx(Some(dir), key, arch, driver_version)?;
    }
    let count = variants.len();
    Ok(count)
}
