//! Writes the PTX of every CUDA kernel variant fastmm compiles (NVRTC, no
//! GPU needed) into a directory, for `ptxas -arch=sm_90 -v` resource reports
//! (scripts/ptxas-report.sh).
//!
//! `cargo run --release -p fastmm --example ptx_dump -- DIR`

use fastmm::cuda::compile::{compile, KernelKey, KernelSource};
use fastmm::tunables::{CUDA_COMBINE_ROWS_PER_BLOCK, CUDA_DEFAULT_TILE, CUDA_NAIVE_BLOCK};
use fastmm::DType;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: ptx_dump DIR")?;
    std::fs::create_dir_all(&dir)?;
    for source in KernelSource::ALL {
        for dtype in DType::ALL.into_iter().filter(|&d| source.supports(d)) {
            let tiles = match source {
                KernelSource::Naive => vec![CUDA_NAIVE_BLOCK],
                KernelSource::Tiled => vec![CUDA_DEFAULT_TILE],
                KernelSource::Combine => vec![CUDA_COMBINE_ROWS_PER_BLOCK],
                KernelSource::Convert => vec![1],
                KernelSource::Fast => fastmm::cuda::gemm::simt_micro_tiles(dtype).to_vec(),
                KernelSource::FastMma => vec![fastmm::tunables::CUDA_MMA_STAGES],
            };
            for tile in tiles {
                let ptx = compile(
                    KernelKey {
                        source,
                        dtype,
                        tile,
                    },
                    "sm_90",
                )?;
                let path = format!("{dir}/{}-{dtype}-{tile}.ptx", source.entry());
                std::fs::write(&path, ptx.to_src())?;
                println!("{path}");
            }
        }
    }
    Ok(())
}
