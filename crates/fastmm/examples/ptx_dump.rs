//! Writes the PTX of every CUDA kernel variant fastmm compiles (NVRTC, no
//! GPU needed) into a directory, for `ptxas -arch=sm_90 -v` resource reports
//! (scripts/ptxas-report.sh).
//!
//! `cargo run --release -p fastmm --example ptx_dump -- DIR [ARCH]`
//! (ARCH, e.g. `sm_75`, defaults to `sm_90`; the f64 tensor-core kernel and
//! the bf16 conversion, which need newer GPUs, are built for sm_90 only).
//! A third argument keeps only the kernels whose entry name contains it
//! (`ptx_dump DIR sm_90 gemm_fused`), as compiling all of them takes minutes.

use fastmm::cuda::compile::{compile, KernelKey, KernelSource};
use fastmm::tunables::{CUDA_COMBINE_ROWS_PER_BLOCK, CUDA_DEFAULT_TILE, CUDA_NAIVE_BLOCK};
use fastmm::DType;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: ptx_dump DIR")?;
    let arch: &'static str = match std::env::args().nth(2) {
        Some(arch) => Box::leak(arch.into_boxed_str()),
        None => "sm_90",
    };
    let only = std::env::args().nth(3).unwrap_or_default();
    std::fs::create_dir_all(&dir)?;
    for source in KernelSource::ALL {
        if !source.entry().contains(only.as_str()) {
            continue;
        }
        if matches!(
            source,
            KernelSource::FastMma | KernelSource::Convert | KernelSource::FastMbar
        ) && arch != "sm_90"
        {
            continue;
        }
        for dtype in DType::ALL.into_iter().filter(|&d| source.supports(d)) {
            let tiles = match source {
                KernelSource::Naive => vec![CUDA_NAIVE_BLOCK],
                KernelSource::Tiled => vec![CUDA_DEFAULT_TILE],
                KernelSource::Combine | KernelSource::CombineGroup => {
                    vec![CUDA_COMBINE_ROWS_PER_BLOCK]
                }
                KernelSource::Convert => vec![1],
                source if source.is_simt() => fastmm::cuda::gemm::simt_micro_tiles(dtype).to_vec(),
                KernelSource::FastMma => vec![fastmm::tunables::CUDA_MMA_STAGES],
                KernelSource::FastMbar => vec![fastmm::cuda::gemm::MBAR_MICRO_TILE.0],
                _ => unreachable!("every SIMT source is matched above"),
            };
            for tile in tiles {
                let ptx = compile(
                    KernelKey {
                        source,
                        dtype,
                        tile,
                    },
                    arch,
                )?;
                // FastRing and FastMbar share their source and entry point.
                let stem = match source {
                    KernelSource::FastMbar => "gemm_fast_ring_mbarriers",
                    other => other.entry(),
                };
                let path = format!("{dir}/{stem}-{dtype}-{tile}.ptx");
                std::fs::write(&path, ptx.to_src())?;
                println!("{path}");
            }
        }
    }
    Ok(())
}
