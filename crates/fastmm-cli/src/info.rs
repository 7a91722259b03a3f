//! `fastmm info`: what fastmm sees on this machine and what it would run:
//! the CPU, its caches and the microkernels it supports, the kernel and
//! block sizes `packed` picks per type, the fast algorithms' `auto` rules,
//! and the GPU (or what is missing for one).

use std::fmt::Write as _;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use fastmm::packed::blocking::cache_sizes;
use fastmm::packed::dispatch::KERNEL_ENV;
use fastmm::packed::{default_cpu_kernel, select_kernel, CpuKernel};
use fastmm::strassen::{SumStores, SUM_STORES_ENV};
use fastmm::system::{available_memory_bytes, cpu_model, format_bytes};
use fastmm::threads::available_threads;
use fastmm::tunables::STRASSEN_STREAM_MIN_L3_FRACTION;
use fastmm::{Algorithm, DType, Element, GemmOptions};

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// One JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    cpu: Cpu,
    packed: Vec<PackedChoice>,
    strassen_auto: Vec<AutoRule>,
    /// How the CPU backend stores fresh sums: the policy, and from how
    /// many bytes per pass it streams them.
    sum_stores: SumStoresReport,
    gpu: Gpu,
    tuning: String,
}

#[derive(Serialize)]
struct SumStoresReport {
    policy: &'static str,
    source: String,
    /// None: never.
    stream_from_bytes: Option<usize>,
}

#[derive(Serialize)]
struct Cpu {
    model: String,
    threads: usize,
    available_memory_bytes: Option<u64>,
    l1d_bytes: usize,
    l2_bytes: usize,
    l3_bytes: usize,
    /// (family, supported by this CPU), fastest first.
    kernels: Vec<(String, bool)>,
    /// The family `packed` uses, and why.
    kernel_in_use: String,
    kernel_source: String,
}

#[derive(Serialize)]
struct PackedChoice {
    dtype: &'static str,
    kernel: String,
    mr: usize,
    nr: usize,
    mc: usize,
    kc: usize,
    nc: usize,
    /// MC, KC, NC for a product whose C is larger than L2 (the same where
    /// the rule or the tuning file does not tell them apart).
    mc_large_c: usize,
    kc_large_c: usize,
    nc_large_c: usize,
}

#[derive(Serialize)]
struct AutoRule {
    device: &'static str,
    dtype: &'static str,
    /// Recurse while m, k and n are all at least this.
    threshold: usize,
    /// A first level only from this size.
    start: usize,
    max_levels: usize,
}

#[derive(Serialize)]
struct Gpu {
    /// (library, found).
    libraries: Vec<(String, bool)>,
    device: Option<GpuDevice>,
    /// Why there is no device, when there is none.
    unavailable: Option<String>,
}

#[derive(Serialize)]
struct GpuDevice {
    name: String,
    arch: String,
    multiprocessors: usize,
    memory_bytes: usize,
    driver_version: i32,
    /// The cuda-fast kernel per type under the default options.
    cuda_fast: Vec<(String, String)>,
}

pub fn run(args: &InfoArgs) -> Result<()> {
    let report = gather()?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        text(&report)?
    };
    crate::write_stdout(&text)
}

fn gather() -> Result<Report> {
    let caches = cache_sizes();
    let kernel_in_use = default_cpu_kernel()?;
    let forced = std::env::var(KERNEL_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    let cpu = Cpu {
        model: cpu_model(),
        threads: available_threads(),
        available_memory_bytes: available_memory_bytes(),
        l1d_bytes: caches.l1d,
        l2_bytes: caches.l2,
        l3_bytes: caches.l3,
        kernels: CpuKernel::ALL
            .iter()
            .map(|k| (k.name().to_string(), k.is_supported()))
            .collect(),
        kernel_in_use: kernel_in_use.name().to_string(),
        kernel_source: match forced {
            Some(value) => format!("forced by {KERNEL_ENV}={value}"),
            None => "the fastest this CPU supports".to_string(),
        },
    };
    let packed = vec![
        packed_choice::<f32>()?,
        packed_choice::<f64>()?,
        packed_choice::<i32>()?,
        packed_choice::<i64>()?,
    ];
    let mut strassen_auto = Vec::new();
    for (device, algorithm) in [
        ("cpu", Algorithm::Winograd),
        ("cuda", Algorithm::CudaWinograd),
    ] {
        let opts = GemmOptions::new(algorithm);
        for dtype in DType::ALL {
            strassen_auto.push(AutoRule {
                device,
                dtype: dtype.name(),
                threshold: fastmm::strassen::effective_threshold(&opts, dtype),
                start: fastmm::strassen::effective_start(&opts, dtype),
                max_levels: fastmm::strassen::effective_max_depth(&opts, dtype),
            });
        }
    }
    let policy = SumStores::from_env()?;
    let sum_stores = SumStoresReport {
        policy: policy.name(),
        source: match std::env::var(SUM_STORES_ENV) {
            Ok(value) if !value.trim().is_empty() => format!("forced by {SUM_STORES_ENV}={value}"),
            _ => {
                let (numerator, denominator) = STRASSEN_STREAM_MIN_L3_FRACTION;
                format!("{numerator}/{denominator} of L3")
            }
        },
        stream_from_bytes: Some(policy.min_bytes()).filter(|&b| b != usize::MAX),
    };
    Ok(Report {
        cpu,
        packed,
        strassen_auto,
        sum_stores,
        gpu: gpu(),
        tuning: tuning_summary(),
    })
}

/// Where `auto` gets its parameters: the tuning file and what of it
/// applies here, or the built-in rules.
pub fn tuning_summary() -> String {
    use fastmm::tuning::{self, TuningState};
    let source = tuning::source();
    let path = source
        .path
        .as_ref()
        .map_or(String::new(), |p| p.display().to_string());
    match &source.state {
        TuningState::Disabled => format!("built-in rules ({}=off)", tuning::TUNING_ENV),
        TuningState::Missing => format!("built-in rules (no {path}; `fastmm tune` writes one)"),
        TuningState::Invalid(e) => format!("built-in rules; the tuning file is unusable: {e}"),
        TuningState::Loaded(file) => {
            let mut parts = Vec::new();
            match (&file.cpu, tuning::cpu()) {
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
            match (&file.cuda, tuning::cuda()) {
                (Some(_), Some(cuda)) => parts.push(format!(
                    "CUDA section applies (tile {})",
                    cuda.tile.map_or("-".into(), |t| t.to_string())
                )),
                (Some(other), None) => {
                    parts.push(format!("CUDA section is for {} (ignored here)", other.gpu))
                }
                _ => {}
            }
            if parts.is_empty() {
                parts.push("no sections".into());
            }
            format!("{path}: {}", parts.join("; "))
        }
    }
}

fn packed_choice<T: Element>() -> Result<PackedChoice> {
    let kernel = select_kernel::<T>(None)?;
    let blocks = kernel.default_blocks().fitted(kernel.mr, kernel.nr);
    // usize::MAX × usize::MAX saturates: a C beyond any L2.
    let large_c = kernel
        .default_blocks_for(usize::MAX, usize::MAX)
        .fitted(kernel.mr, kernel.nr);
    Ok(PackedChoice {
        dtype: T::DTYPE.name(),
        kernel: kernel.name.to_string(),
        mr: kernel.mr,
        nr: kernel.nr,
        mc: blocks.mc,
        kc: blocks.kc,
        nc: blocks.nc,
        mc_large_c: large_c.mc,
        kc_large_c: large_c.kc,
        nc_large_c: large_c.nc,
    })
}

fn gpu() -> Gpu {
    let libraries: Vec<(String, bool)> = fastmm::cuda::libraries()
        .into_iter()
        .map(|(name, found)| (name.to_string(), found))
        .collect();
    let opened = fastmm::cuda::Gpu::default_gpu().and_then(|gpu| {
        let info = gpu.info();
        let mut cuda_fast = Vec::new();
        for dtype in DType::ALL {
            let opts = GemmOptions::new(Algorithm::CudaFast);
            // The kernel for a product large enough to fill every SM.
            let config = fastmm::cuda::gemm::FastConfig::resolve(&opts, dtype, gpu, (8192, 8192))?;
            cuda_fast.push((dtype.name().to_string(), config.describe()));
        }
        Ok(GpuDevice {
            name: info.name.clone(),
            arch: gpu.arch().to_string(),
            multiprocessors: info.multiprocessors,
            memory_bytes: info.total_memory,
            driver_version: info.driver_version,
            cuda_fast,
        })
    });
    match opened {
        Ok(device) => Gpu {
            libraries,
            device: Some(device),
            unavailable: None,
        },
        Err(e) => Gpu {
            libraries,
            device: None,
            unavailable: Some(e.to_string()),
        },
    }
}

fn text(r: &Report) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    let c = &r.cpu;
    writeln!(out, "CPU: {} ({} hardware threads)", c.model, c.threads)?;
    if let Some(bytes) = c.available_memory_bytes {
        writeln!(out, "memory available: {}", format_bytes(bytes as u128))?;
    }
    writeln!(
        out,
        "caches: L1d {}, L2 {}, L3 {}",
        format_bytes(c.l1d_bytes as u128),
        format_bytes(c.l2_bytes as u128),
        format_bytes(c.l3_bytes as u128)
    )?;
    let kernels: Vec<String> = c
        .kernels
        .iter()
        .map(|(name, ok)| format!("{name} {}", if *ok { "yes" } else { "no" }))
        .collect();
    writeln!(out, "CPU kernels: {}", kernels.join(", "))?;
    writeln!(
        out,
        "packed uses: {} ({})",
        c.kernel_in_use, c.kernel_source
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<6} {:<22} {:>6} {:>14} {:>22}",
        "dtype", "microkernel", "MR×NR", "MC/KC/NC", "C larger than L2"
    )?;
    for p in &r.packed {
        writeln!(
            out,
            "{:<6} {:<22} {:>6} {:>14} {:>22}",
            p.dtype,
            p.kernel,
            format!("{}×{}", p.mr, p.nr),
            format!("{}/{}/{}", p.mc, p.kc, p.nc),
            format!("{}/{}/{}", p.mc_large_c, p.kc_large_c, p.nc_large_c)
        )?;
    }
    writeln!(out)?;
    writeln!(out, "strassen/winograd --threshold auto:")?;
    writeln!(
        out,
        "{:<6} {:<6} {:>10} {:>11} {:>11}",
        "device", "dtype", "recurse ≥", "first from", "max levels"
    )?;
    for a in &r.strassen_auto {
        writeln!(
            out,
            "{:<6} {:<6} {:>10} {:>11} {:>11}",
            a.device,
            a.dtype,
            a.threshold,
            a.start.max(a.threshold),
            a.max_levels
        )?;
    }
    let streams = match r.sum_stores.stream_from_bytes {
        Some(bytes) => format!(
            "non-temporal stores for passes writing at least {}",
            format_bytes(bytes as u128)
        ),
        None => "never streamed".to_string(),
    };
    writeln!(
        out,
        "cpu sums: {streams} ({}, {})",
        r.sum_stores.policy, r.sum_stores.source
    )?;
    writeln!(out)?;
    let libs: Vec<String> = r
        .gpu
        .libraries
        .iter()
        .map(|(name, ok)| format!("{name} {}", if *ok { "found" } else { "missing" }))
        .collect();
    writeln!(out, "CUDA libraries: {}", libs.join(", "))?;
    match (&r.gpu.device, &r.gpu.unavailable) {
        (Some(d), _) => {
            writeln!(
                out,
                "GPU: {} ({}, {} SMs, {}, driver {})",
                d.name,
                d.arch,
                d.multiprocessors,
                format_bytes(d.memory_bytes as u128),
                d.driver_version
            )?;
            for (dtype, kernel) in &d.cuda_fast {
                writeln!(out, "  cuda-fast {dtype}: {kernel}")?;
            }
        }
        (None, Some(why)) => writeln!(out, "GPU: none ({why})")?,
        (None, None) => writeln!(out, "GPU: none")?,
    }
    writeln!(out)?;
    writeln!(out, "tuning: {}", r.tuning)?;
    Ok(out)
}
