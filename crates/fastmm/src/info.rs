//! What fastmm sees on this machine and what it would run: the CPU, its
//! caches and the microkernels it supports, the kernel and blocks
//! `packed` picks per type, the fast algorithms' crossovers per device,
//! the environment and the tuning file, and the GPUs (or what is missing
//! for one). `fastmm info` prints it.

use serde::Serialize;

use crate::config::{Config, TuningState, CPU_KERNEL_ENV, TUNING_ENV};
use crate::context::Context;
use crate::cpu::packed::dispatch::{default_cpu_kernel, is_supported};
use crate::cpu::packed::{blocks_for, parallel_edge, select_kernel};
use crate::element::{DType, Element};
use crate::error::Error;
use crate::options::{
    Algorithm, BlockSizes, CpuKernel, CpuOptions, Device, GemmOptions, SumStores,
};
use crate::system::{available_memory_bytes, available_threads, cache_sizes, cpu_model, GpuInfo};

/// The machine and fastmm's choices on it.
#[derive(Debug, Clone, Serialize)]
pub struct MachineInfo {
    /// The CPU.
    pub cpu: CpuInfo,
    /// `packed`'s kernel and blocks per type.
    pub packed: Vec<PackedChoice>,
    /// Where Strassen/Winograd recurse under `auto`, per device and type.
    pub strassen_auto: Vec<Crossover>,
    /// How CPU Strassen/Winograd store fresh sums by default: passes
    /// writing at least this many bytes stream them (`None`: never).
    pub sum_stream_from_bytes: Option<usize>,
    /// The CUDA libraries fastmm loads, and whether each loads here.
    pub cuda_libraries: Vec<(String, bool)>,
    /// The GPUs.
    pub gpus: Vec<GpuChoices>,
    /// Why there is no GPU, when there is none.
    pub gpu_unavailable: Option<String>,
    /// Where `auto` gets its parameters: the tuning file and what of it
    /// applies here, or the built-in rules.
    pub tuning: String,
    /// `FASTMM_*` variables set but without effect, each with why.
    pub ignored_variables: Vec<String>,
}

/// The CPU.
#[derive(Debug, Clone, Serialize)]
pub struct CpuInfo {
    /// The model string.
    pub model: String,
    /// Hardware threads this process may use.
    pub threads: usize,
    /// Memory the OS reports available, bytes.
    pub available_memory_bytes: Option<u64>,
    /// L1 data cache of a core, bytes.
    pub l1d_bytes: usize,
    /// L2 of a core, bytes.
    pub l2_bytes: usize,
    /// Last-level cache, bytes: the share the blocks are planned for (see
    /// [`crate::system::CacheSizes::l3`]).
    pub l3_bytes: usize,
    /// Last-level cache as the OS gives it, bytes.
    pub l3_total_bytes: usize,
    /// (kernel family, supported by this CPU), fastest first.
    pub kernels: Vec<(CpuKernel, bool)>,
    /// The family `packed` uses unless told otherwise.
    pub kernel_in_use: CpuKernel,
    /// Why that family.
    pub kernel_source: String,
}

/// `packed`'s choice for one type.
#[derive(Debug, Clone, Serialize)]
pub struct PackedChoice {
    /// The type.
    pub dtype: DType,
    /// The microkernel's name.
    pub kernel: String,
    /// Its tile rows.
    pub mr: usize,
    /// Its tile columns.
    pub nr: usize,
    /// MC, KC, NC for a product whose C fits in L2.
    pub blocks: [usize; 3],
    /// MC, KC, NC for a product whose C is larger than L2 (the same where
    /// the rule, the environment or the tuning file do not tell them
    /// apart).
    pub blocks_large_c: [usize; 3],
    /// Products of at least this edge cubed run on several threads.
    pub parallel_from: usize,
}

/// Where the fast algorithms recurse under `auto` on one device for one
/// type.
#[derive(Debug, Clone, Serialize)]
pub struct Crossover {
    /// The device.
    pub device: Device,
    /// The type.
    pub dtype: DType,
    /// Recurse while m, k and n are all at least this.
    pub threshold: usize,
    /// A first level only from this size.
    pub start: usize,
    /// At most this many levels.
    pub max_levels: usize,
}

/// One GPU.
#[derive(Debug, Clone, Serialize)]
pub struct GpuChoices {
    /// Its properties.
    pub info: GpuInfo,
    /// Its architecture, e.g. sm_90.
    pub arch: String,
    /// `cuda-fast`'s kernel per type for a product that fills every SM.
    pub cuda_fast: Vec<(DType, String)>,
}

/// Whether this CPU runs the `packed` kernels of `family`.
pub fn supports(family: CpuKernel) -> bool {
    is_supported(family)
}

/// `packed`'s kernel and blocks for T: of `family` when given, else the
/// default; an error where the CPU lacks the family.
pub fn packed_choice<T: Element>(family: Option<CpuKernel>) -> Result<PackedChoice, Error> {
    let kernel = select_kernel::<T>(family)?;
    let opts = GemmOptions {
        cpu: CpuOptions {
            kernel: family,
            ..GemmOptions::new(Algorithm::Packed).cpu
        },
        ..GemmOptions::new(Algorithm::Packed)
    };
    let fitted = |(m, n)| -> Result<[usize; 3], Error> {
        let b = blocks_for(kernel, &opts, (m, n))?.fitted(kernel.mr, kernel.nr);
        Ok([b.mc, b.kc, b.nc])
    };
    Ok(PackedChoice {
        dtype: T::DTYPE,
        kernel: kernel.name.to_string(),
        mr: kernel.mr,
        nr: kernel.nr,
        blocks: fitted((0, 0))?,
        // usize::MAX × usize::MAX saturates: a C beyond any L2.
        blocks_large_c: fitted((usize::MAX, usize::MAX))?,
        parallel_from: parallel_edge::<T>(&opts),
    })
}

/// The built-in rule's `packed` blocks for an m×n C of T with the kernel
/// of `family` (else the default), ignoring the environment and the tuning
/// file: where `fastmm tune` starts its search. Returns the kernel's name
/// too, which tuned blocks are recorded against.
pub fn analytical_blocks<T: Element>(
    family: Option<CpuKernel>,
    (m, n): (usize, usize),
) -> Result<(String, BlockSizes), Error> {
    let kernel = select_kernel::<T>(family)?;
    let c_bytes = m.saturating_mul(n).saturating_mul(std::mem::size_of::<T>());
    Ok((
        kernel.name.to_string(),
        kernel
            .analytical_blocks_for(c_bytes)
            .fitted(kernel.mr, kernel.nr),
    ))
}

/// The tile edge `tiled` and `parallel` use when neither an option nor the
/// tuning file gives one.
pub const DEFAULT_TILE: usize = crate::tunables::DEFAULT_TILE;

/// Where `auto` recurses on `ctx`'s device for every type.
fn crossovers(ctx: &Context) -> Result<Vec<Crossover>, Error> {
    let opts = GemmOptions::new(Algorithm::Winograd);
    let mut rows = Vec::new();
    for &dtype in &DType::ALL {
        // A product large enough for every crossover: its plan names them.
        let plan = ctx.plan(crate::gemm::Problem::new((1, 1, 1), dtype), &opts)?;
        let fast = plan.fast.expect("winograd plans a recursion");
        rows.push(Crossover {
            device: ctx.device(),
            dtype,
            threshold: fast.threshold,
            start: fast.start.max(fast.threshold),
            max_levels: fast.max_levels,
        });
    }
    Ok(rows)
}

/// What of the tuning file applies here, in one line.
pub fn tuning_summary(gpu_names: &[String]) -> String {
    let config = Config::get();
    let path = config
        .tuning_path()
        .map_or(String::new(), |p| p.display().to_string());
    match config.tuning() {
        TuningState::Disabled => format!("built-in rules ({TUNING_ENV}=off or no home directory)"),
        TuningState::Missing => format!("built-in rules (no {path}; `fastmm tune` writes one)"),
        TuningState::Invalid(e) => format!("built-in rules; the tuning file is unusable: {e}"),
        TuningState::Loaded(file) => {
            let mut parts = Vec::new();
            match (&file.cpu, config.tuned_cpu()) {
                (Some(_), Some(cpu)) => {
                    let types: Vec<&str> = DType::ALL
                        .into_iter()
                        .filter(|&d| cpu.of(d).is_some())
                        .map(DType::name)
                        .collect();
                    parts.push(format!(
                        "CPU section applies (threads {}, tile {}, types {})",
                        cpu.threads.map_or("-".into(), |t| t.to_string()),
                        cpu.tile.map_or("-".into(), |t| t.to_string()),
                        if types.is_empty() {
                            "-".into()
                        } else {
                            types.join("/")
                        }
                    ));
                }
                (Some(other), None) => {
                    parts.push(format!("CPU section is for {} (ignored)", other.model))
                }
                _ => {}
            }
            if let Some(cuda) = &file.cuda {
                if gpu_names.contains(&cuda.gpu) {
                    parts.push(format!(
                        "CUDA section applies to {} (tile {})",
                        cuda.gpu,
                        cuda.tile.map_or("-".into(), |t| t.to_string())
                    ));
                } else {
                    parts.push(format!(
                        "CUDA section is for {} (no such GPU here)",
                        cuda.gpu
                    ));
                }
            }
            if parts.is_empty() {
                parts.push("no sections".into());
            }
            format!("{path}: {}", parts.join("; "))
        }
    }
}

/// The report of this machine, with every GPU the driver reports.
pub fn report() -> Result<MachineInfo, Error> {
    let caches = cache_sizes();
    let config = Config::get();
    let kernel_in_use = default_cpu_kernel()?;
    let cpu = CpuInfo {
        model: cpu_model(),
        threads: available_threads(),
        available_memory_bytes: available_memory_bytes(),
        l1d_bytes: caches.l1d,
        l2_bytes: caches.l2,
        l3_bytes: caches.l3,
        l3_total_bytes: caches.l3_total,
        kernels: CpuKernel::ALL
            .iter()
            .map(|&k| (k, is_supported(k)))
            .collect(),
        kernel_in_use,
        kernel_source: match config.cpu_kernel()? {
            Some(forced) => format!("forced by {CPU_KERNEL_ENV}={forced}"),
            None => "the fastest this CPU supports".to_string(),
        },
    };
    let packed = vec![
        packed_choice::<f32>(None)?,
        packed_choice::<f64>(None)?,
        packed_choice::<i32>(None)?,
        packed_choice::<i64>(None)?,
    ];
    let mut strassen_auto = crossovers(&Context::cpu())?;
    let (gpus, gpu_unavailable) = gpus();
    for gpu in &gpus {
        let ctx = Context::open(Device::Cuda(gpu.info.ordinal))?;
        strassen_auto.extend(crossovers(&ctx)?);
    }
    let names: Vec<String> = gpus.iter().map(|g| g.info.name.clone()).collect();
    Ok(MachineInfo {
        cpu,
        packed,
        strassen_auto,
        sum_stream_from_bytes: Some(crate::cpu::strassen::backend::stream_min_bytes(
            SumStores::Auto,
        ))
        .filter(|&b| b != usize::MAX),
        cuda_libraries: cuda_libraries(),
        gpus,
        gpu_unavailable,
        tuning: tuning_summary(&names),
        ignored_variables: config.ignored().to_vec(),
    })
}

fn cuda_libraries() -> Vec<(String, bool)> {
    #[cfg(feature = "cuda")]
    return crate::cuda::runtime::device::libraries()
        .into_iter()
        .map(|(name, found)| (name.to_string(), found))
        .collect();
    #[cfg(not(feature = "cuda"))]
    Vec::new()
}

/// Every GPU, or why there is none.
fn gpus() -> (Vec<GpuChoices>, Option<String>) {
    #[cfg(feature = "cuda")]
    {
        use crate::cuda::kernels::gemm::fast::FastConfig;
        let count = match crate::cuda::runtime::device::device_count() {
            Ok(0) => return (Vec::new(), Some("the driver reports no GPU".into())),
            Ok(count) => count,
            Err(e) => return (Vec::new(), Some(e.to_string())),
        };
        let mut reports = Vec::new();
        for ordinal in 0..count {
            let opened = Context::open(Device::Cuda(ordinal)).and_then(|ctx| {
                let gpu = ctx.gpu()?;
                let mut cuda_fast = Vec::new();
                for &dtype in &DType::ALL {
                    let opts = GemmOptions::new(Algorithm::CudaFast);
                    // The kernel for a product large enough to fill every SM.
                    let config = FastConfig::resolve(&opts, dtype, gpu, (8192, 8192))?;
                    cuda_fast.push((dtype, config.describe()));
                }
                Ok(GpuChoices {
                    info: gpu.info().clone(),
                    arch: gpu.arch().to_string(),
                    cuda_fast,
                })
            });
            match opened {
                Ok(report) => reports.push(report),
                Err(e) => return (reports, Some(format!("cuda:{ordinal}: {e}"))),
            }
        }
        (reports, None)
    }
    #[cfg(not(feature = "cuda"))]
    (
        Vec::new(),
        Some("fastmm was built without the `cuda` feature".into()),
    )
}
