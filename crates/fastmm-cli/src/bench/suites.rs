//! Built-in suites: one per experiment of the seeds, each a sweep sized
//! to finish in minutes on a laptop-class CPU (or an H100 for the GPU
//! ones), with a `--quick` version sized for CI.

use anyhow::{bail, Result};

use super::axes::AxisKind;
use super::{parse_shapes, Sweep};
use crate::common::{thread_counts, Placement, Target};
use crate::run::RunArgs;

/// One built-in experiment.
struct Suite {
    name: &'static str,
    /// The seed experiment it replays.
    source: &'static str,
    summary: &'static str,
    algorithms: &'static str,
    dtype: &'static str,
    sizes: &'static str,
    quick_sizes: &'static str,
    /// Swept options: (axis, full values, quick values); `THREADS` stands
    /// for 1, 2, 4, … up to the hardware threads.
    axes: &'static [(AxisKind, &'static str, &'static str)],
    /// Options fixed for every point.
    fixed: &'static [(AxisKind, &'static str)],
    baseline: &'static str,
    reps: usize,
    gpu: bool,
}

/// Stands for the thread counts of this machine in a suite's axes.
const THREADS: &str = "THREADS";

const SUITES: &[Suite] = &[
    Suite {
        name: "seed-000-strassen",
        source: "seed 000 Table 2.1, Figures 2.2–2.3",
        summary: "hybrid Strassen (n₀ = 128 over the naive loops) against the naive loops, one thread; packed for scale",
        algorithms: "naive,strassen,packed",
        dtype: "f64",
        sizes: "256..2048x2",
        quick_sizes: "64..256x2",
        axes: &[],
        fixed: &[
            (AxisKind::Threads, "1"),
            (AxisKind::Base, "naive"),
            (AxisKind::Threshold, "128"),
        ],
        baseline: "naive",
        reps: 3,
        gpu: false,
    },
    Suite {
        name: "seed-000-strassen-gpu",
        source: "seed 000 §5, Tables and Figures 5.1–5.2",
        summary: "GPU Strassen over the shared-memory kernel and over cuBLAS, n₀ 512 and 1024, against both",
        algorithms: "cuda-tiled,cublas,strassen@cuda",
        dtype: "f32",
        sizes: "1024..8192x2",
        quick_sizes: "256,512",
        axes: &[
            (AxisKind::Base, "cuda-tiled,cublas", "cuda-tiled,cublas"),
            (AxisKind::Threshold, "512,1024", "128"),
        ],
        fixed: &[],
        baseline: "cuda-tiled",
        reps: 5,
        gpu: true,
    },
    Suite {
        name: "seed-001-int32",
        source: "seed 001 (numba notebook)",
        summary: "int32 rectangular products: loops against the naive and shared-memory CUDA kernels, with and without copies",
        algorithms: "ikj,parallel,cuda-naive,cuda-tiled",
        dtype: "i32",
        sizes: "1000x700x1300,2000x1500x2500,3000x2000x4000",
        quick_sizes: "100x70x130,200x150x250",
        axes: &[],
        fixed: &[],
        baseline: "ikj",
        reps: 3,
        gpu: true,
    },
    Suite {
        name: "seed-002-ladder",
        source: "seed 002 §4–7, Figures 4–18",
        summary: "the CPU optimisation ladder: naive, loop interchange, tiling, threads, and packed",
        algorithms: "naive,ikj,tiled,parallel,packed",
        dtype: "f32",
        sizes: "500,1000,2000",
        quick_sizes: "64,128,256",
        axes: &[],
        fixed: &[],
        baseline: "naive",
        reps: 3,
        gpu: false,
    },
    Suite {
        name: "seed-002-threads",
        source: "seed 002 §7–9, Figures 19–23",
        summary: "speedup and efficiency against the thread count",
        algorithms: "parallel,packed",
        dtype: "f32",
        sizes: "1000,2000",
        quick_sizes: "128,256",
        axes: &[(AxisKind::Threads, THREADS, THREADS)],
        fixed: &[],
        baseline: "parallel",
        reps: 3,
        gpu: false,
    },
    Suite {
        name: "seed-002-tiles",
        source: "seed 002 §6.4 (tile size in powers of two; 256 chosen)",
        summary: "tile-size sweep of the tiled and parallel loops",
        algorithms: "tiled,parallel",
        dtype: "f32",
        sizes: "1024",
        quick_sizes: "128",
        axes: &[(AxisKind::Tile, "16..512x2", "8..64x2")],
        fixed: &[],
        baseline: "tiled",
        reps: 3,
        gpu: false,
    },
    Suite {
        name: "seed-002-cuda",
        source: "seed 002 §10, Figures 37–47",
        summary: "CUDA global-memory and shared-memory kernels in device, pitched and unified memory; speedup over the CPU loop and efficiency per SM",
        algorithms: "ikj,cuda-naive,cuda-tiled",
        dtype: "f32",
        sizes: "1000,2000,3000",
        quick_sizes: "128,256",
        axes: &[(
            AxisKind::GpuMemory,
            "device,pitched,managed",
            "device,pitched,managed",
        )],
        fixed: &[],
        baseline: "ikj",
        reps: 3,
        gpu: true,
    },
    Suite {
        name: "seed-003-strassen-vs-naive",
        source: "seed 003 §3, Figures 3.1–3.3",
        summary: "Strassen and Winograd recursing down to 16 over the naive loops, against the naive loops, n = 2 … 1024, one thread",
        algorithms: "naive,strassen,winograd",
        dtype: "f64",
        sizes: "2..1024x2",
        quick_sizes: "2..128x2",
        axes: &[],
        fixed: &[
            (AxisKind::Threads, "1"),
            (AxisKind::Base, "naive"),
            (AxisKind::Threshold, "16"),
            (AxisKind::Depth, "10"),
        ],
        baseline: "naive",
        reps: 3,
        gpu: false,
    },
    Suite {
        name: "seed-003-depth",
        source: "seed 003 §2.2, Figure 2.2.10",
        summary: "time against the number of Strassen/Winograd levels",
        algorithms: "packed,strassen,winograd",
        dtype: "f64",
        sizes: "2048",
        quick_sizes: "256",
        axes: &[(AxisKind::Depth, "1..4+1", "1..3+1")],
        fixed: &[(AxisKind::Threshold, "16")],
        baseline: "packed",
        reps: 3,
        gpu: false,
    },
    Suite {
        name: "seed-003-blocks",
        source: "seed 003 §2.1–2.2, Figure 2.2.11 (block sizes of the product by parts)",
        summary: "the blocks of A (MC rows) and of B (NC columns) that packed multiplies at a time, at KC = 256",
        algorithms: "packed",
        dtype: "f64",
        sizes: "2048",
        quick_sizes: "256",
        axes: &[(
            AxisKind::Blocks,
            "24,256,256;48,256,256;96,256,256;192,256,256;96,256,1024;96,256,4096;192,256,4096",
            "24,256,256;96,256,256;96,256,1024",
        )],
        fixed: &[],
        baseline: "packed",
        reps: 3,
        gpu: false,
    },
    Suite {
        name: "seed-004-tiles",
        source: "seed 004 Tables 1–2",
        summary: "serial against the naive CUDA kernel, and the shared-memory kernel with tiles 8–70 (70×70 exceeds 1024 threads per block: refused, not timed)",
        algorithms: "naive,cuda-naive,cuda-tiled",
        dtype: "f32",
        sizes: "400,600,800",
        quick_sizes: "400",
        axes: &[(AxisKind::Tile, "8,16,20,32,70", "16,32,70")],
        fixed: &[],
        baseline: "naive",
        reps: 5,
        gpu: true,
    },
];

/// `--list-suites`: one Markdown row per suite.
pub fn listing() -> String {
    let mut out = String::from("| suite | device | replays | what |\n|---|---|---|---|\n");
    for s in SUITES {
        out += &format!(
            "| {} | {} | {} | {} |\n",
            s.name,
            if s.gpu { "cuda" } else { "cpu" },
            s.source,
            s.summary
        );
    }
    out
}

/// This machine's thread counts for a suite's axis.
fn thread_list() -> String {
    thread_counts()
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The sweep of suite `name` (quick or full), over `defaults` for the
/// options a suite does not set (seed, warm-up, …).
pub fn sweep(name: &str, quick: bool, defaults: &RunArgs) -> Result<Sweep> {
    let Some(suite) = SUITES.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = SUITES.iter().map(|s| s.name).collect();
        bail!(
            "unknown suite '{name}' (expected one of {})",
            names.join(", ")
        );
    };
    if suite.gpu {
        if let Err(e) = fastmm::Context::open(fastmm::Device::Cuda(0)) {
            bail!("suite {name} runs on a GPU, and none is usable: {e}");
        }
    }
    let mut run = defaults.clone();
    run.dtype = suite.dtype.to_string();
    run.reps = if quick { 1 } else { suite.reps };
    run.warmup = 1;
    for &(kind, value) in suite.fixed {
        kind.apply(&mut run, value)?;
    }
    let axes = suite
        .axes
        .iter()
        .map(|&(kind, full, short)| {
            let values = if quick { short } else { full };
            if values == THREADS {
                kind.parse(&thread_list())
            } else {
                kind.parse(values)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Sweep {
        title: suite.name.to_string(),
        source: Some(suite.source.to_string()),
        shapes: parse_shapes(if quick {
            suite.quick_sizes
        } else {
            suite.sizes
        })?,
        targets: Target::parse_list(suite.algorithms, Placement::AUTO)?,
        axes,
        baseline: suite.baseline.to_string(),
        run,
        openblas: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn every_suite_resolves() {
        let defaults = Wrapper::parse_from(["x"]).run;
        for suite in SUITES.iter().filter(|s| !s.gpu) {
            for quick in [true, false] {
                let sweep = sweep(suite.name, quick, &defaults).unwrap();
                assert!(!sweep.shapes.is_empty());
                assert!(sweep.targets.iter().any(|t| t.label() == suite.baseline));
            }
        }
        assert!(sweep("seed-999", true, &defaults).is_err());
        assert!(thread_list().ends_with(&fastmm::system::available_threads().to_string()));
    }
}
