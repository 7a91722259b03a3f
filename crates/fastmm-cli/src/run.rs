//! `fastmm run`: the seeds' experiment driver. It generates seeded random
//! matrices, runs each requested algorithm, times it (median of `--reps`
//! after `--warmup`), verifies every result and reports a table or JSON.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use fastmm::cuda::GpuPrecision;
use fastmm::packed::select_kernel;
use fastmm::random::{random_matrix, seeded_rng};
use fastmm::strassen::{error_growth, workspace, Scheme};
use fastmm::system::{available_memory_bytes, cpu_model, format_bytes};
use fastmm::verify::verify_with_growth;
use fastmm::{
    gemm, Algorithm, BlockSizes, CpuKernel, DType, Device, Element, GemmOptions, Matrix, Variant,
};

/// Environment variable with default `packed` block sizes, "MC,KC,NC".
const BLOCKS_ENV: &str = "FASTMM_BLOCKS";
use serde::Serialize;

/// Matrices at most this many rows and columns are printed by `--print`.
const PRINT_MAX_DIM: usize = 8;

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Square size: m = k = n = N (each overridable by -m/-k/-n).
    #[arg(short = 's', long, value_name = "N", default_value_t = 512)]
    pub(crate) size: usize,
    /// Rows of A and C.
    #[arg(short = 'm', value_name = "M")]
    pub(crate) m: Option<usize>,
    /// Columns of A, rows of B.
    #[arg(short = 'k', value_name = "K")]
    pub(crate) k: Option<usize>,
    /// Columns of B and C.
    #[arg(short = 'n', value_name = "N")]
    pub(crate) n: Option<usize>,
    /// Element types: a comma list of f32, f64, i32, i64, or `all`.
    #[arg(short = 'd', long, default_value = "f32")]
    pub(crate) dtype: String,
    /// Algorithms: a comma list or `all`. Speedups are relative to the first.
    #[arg(short = 'a', long, default_value = "all")]
    pub(crate) algo: String,
    /// Threads for threaded algorithms (default: all hardware threads).
    #[arg(short = 't', long)]
    pub(crate) threads: Option<usize>,
    /// Tile edge for tiled algorithms; for cuda-fast's SIMT kernel, the
    /// micro-tile rows TM (4-byte types: 8 for 8×16, 16 for 16×8; f64: 4
    /// for 4×4, 8 for 8×4, on sm_90+ 8×8 with mbarriers; i64: 4 or 8,
    /// square; default: chosen per shape, f64's 8 once its tiles fill
    /// every SM, else the first).
    #[arg(long)]
    pub(crate) tile: Option<usize>,
    /// Microkernel family of `packed`: avx512, avx2 or generic (default:
    /// FASTMM_CPU_KERNEL, else the fastest this CPU runs).
    #[arg(long, value_name = "KERNEL")]
    pub(crate) cpu_kernel: Option<String>,
    /// Cache blocks of `packed` as MC,KC,NC (default: FASTMM_BLOCKS, else
    /// derived from the cache sizes).
    #[arg(long, value_name = "MC,KC,NC")]
    pub(crate) blocks: Option<String>,
    /// `strassen`/`winograd`: recurse while m, k and n are all at least
    /// this, or `auto` (the measured crossover).
    #[arg(long, value_name = "N0|auto", default_value = "auto")]
    pub(crate) threshold: String,
    /// `strassen`/`winograd`: most recursion levels (default: the accuracy
    /// rule for floats, unlimited for integers).
    #[arg(long)]
    pub(crate) depth: Option<usize>,
    /// `strassen`/`winograd` memory schedule: temporaries, frugal, fused,
    /// batched, or auto (batched when its temporaries fit: on the CPU in
    /// half the available memory, on the GPU beside A, B and C in its free
    /// memory; else frugal).
    #[arg(long, default_value = "auto")]
    pub(crate) variant: String,
    /// `strassen`/`winograd` on the CPU with temporaries or frugal: operand
    /// sums of at most this many blocks that feed a base-case product are
    /// formed while `packed` packs instead of stored (default: 0, none)
    #[arg(long, value_name = "TERMS")]
    pub(crate) lazy_sums: Option<usize>,
    /// `strassen`/`winograd`: the classical algorithm of the base case
    /// (default: packed on the CPU; cublas on the GPU, cuda-fast for
    /// integers).
    #[arg(long)]
    pub(crate) base: Option<String>,
    /// Where `--algo all` runs: cpu, cuda, or auto (cuda when a GPU is
    /// usable, else cpu with a notice).
    #[arg(long, default_value = "cpu")]
    pub(crate) device: String,
    /// GPU algorithms: where the operands live (device, pitched, managed).
    #[arg(long, default_value = "device")]
    pub(crate) gpu_memory: String,
    /// `cublas` on f32: fp32 (IEEE), or a tensor-core mode: tf32, bf16, f16
    /// (verified against the looser bound of its input precision).
    #[arg(long, default_value = "fp32")]
    pub(crate) precision: String,
    /// `cuda-fast`: kernel family, auto (mma for f64 on sm_90+, else simt),
    /// simt (FMA units) or mma (f64 on the FP64 tensor cores) (default:
    /// `FASTMM_CUDA_KERNEL`, else auto).
    #[arg(long)]
    pub(crate) cuda_kernel: Option<String>,
    /// GPU algorithms: stage the host↔device copies in page-locked
    /// (pinned) memory instead of pageable memory.
    #[arg(long)]
    pub(crate) pinned: bool,
    /// GPU algorithms: the most GPU memory a product may use, e.g. 16G
    /// (default: the free memory). A larger product runs out of core:
    /// streamed through the GPU in tiles, copies overlapping products.
    #[arg(long, value_name = "BYTES")]
    pub(crate) max_gpu_memory: Option<String>,
    /// GPU algorithms: run out of core even when the product fits.
    #[arg(long)]
    pub(crate) out_of_core: bool,
    /// Timed repetitions; the median is reported.
    #[arg(short = 'r', long, default_value_t = 3)]
    pub(crate) reps: usize,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 1)]
    pub(crate) warmup: usize,
    /// Seed of the random matrices: the same seed gives the same A and B.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Print one JSON array of records on stdout instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print A, B and each C (only when all dimensions are at most 8).
    #[arg(long)]
    pub(crate) print: bool,
    /// Corrupt one element of each result before verification, to show that
    /// verification catches it (testing aid).
    #[arg(long, hide = true)]
    pub(crate) corrupt: bool,
}

/// One measured and verified run, as printed by `--json`.
#[derive(Serialize, Debug, Clone)]
pub struct Record {
    pub algorithm: &'static str,
    pub kernel: String,
    pub device: &'static str,
    pub dtype: &'static str,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub threads: usize,
    pub tile: Option<usize>,
    pub reps: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub gflops: f64,
    pub speedup: f64,
    pub rel_error: f64,
    pub bound_ratio: f64,
    pub check: &'static str,
    pub ok: bool,
    pub seed: u64,
    /// GPU algorithms: median host→device copy time.
    pub upload_ms: Option<f64>,
    /// GPU algorithms: median device→host copy time.
    pub download_ms: Option<f64>,
    /// GPU algorithms: GFLOP/s counting the copies too (`gflops` is the
    /// kernel alone, between CUDA events).
    pub end_to_end_gflops: Option<f64>,
    /// Strassen/Winograd levels applied (absent for classical algorithms).
    pub levels: Option<usize>,
    /// Temporary workspace of Strassen/Winograd, in bytes (the packing
    /// buffers of the classical products come on top).
    pub extra_bytes: u64,
}

/// How a run ended when no input error stopped it.
pub enum Outcome {
    AllCorrect,
    Failures(usize),
}

pub(crate) struct Problem {
    m: usize,
    k: usize,
    n: usize,
}

pub fn run(args: &RunArgs) -> Result<Outcome> {
    let (problem, records) = measure(args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&records)?);
    } else {
        print_table(args, &problem, &records);
    }
    let failures = records.iter().filter(|r| !r.ok).count();
    Ok(if failures == 0 {
        Outcome::AllCorrect
    } else {
        Outcome::Failures(failures)
    })
}

/// Runs, times and verifies every algorithm × dtype that `args` names, on
/// one problem: the records `run` prints (and `bench` collects).
pub(crate) fn measure(args: &RunArgs) -> Result<(Problem, Vec<Record>)> {
    let problem = Problem {
        m: args.m.unwrap_or(args.size),
        k: args.k.unwrap_or(args.size),
        n: args.n.unwrap_or(args.size),
    };
    for (name, value) in [("m", problem.m), ("k", problem.k), ("n", problem.n)] {
        if value == 0 {
            bail!("size {name} must be at least 1");
        }
    }
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let device = resolve_device(&args.device)?;
    let algorithms = Algorithm::parse_list_on(&args.algo, device)?;
    let dtypes = parse_dtypes(&args.dtype)?;
    let blocks = match args
        .blocks
        .clone()
        .or_else(|| std::env::var(BLOCKS_ENV).ok())
    {
        Some(text) => Some(BlockSizes::parse(&text)?),
        None => None,
    };
    let base_opts = GemmOptions {
        threads: args.threads,
        tile: args.tile,
        cpu_kernel: args
            .cpu_kernel
            .as_deref()
            .map(str::parse::<CpuKernel>)
            .transpose()?,
        block_sizes: blocks,
        variant: match args.variant.trim() {
            auto if auto.eq_ignore_ascii_case("auto") => None,
            name => Some(
                name.parse::<Variant>()
                    .map_err(|e| anyhow::anyhow!("{e}, or auto"))?,
            ),
        },
        threshold: parse_threshold(&args.threshold)?,
        depth: args.depth,
        lazy_sums: args.lazy_sums,
        base: args
            .base
            .as_deref()
            .map(str::parse::<Algorithm>)
            .transpose()?,
        gpu_memory: Some(args.gpu_memory.parse()?),
        gpu_pinned: args.pinned,
        gpu_max_memory: args
            .max_gpu_memory
            .as_deref()
            .map(crate::multiply::parse_bytes)
            .transpose()?,
        gpu_out_of_core: args.out_of_core,
        gpu_precision: Some(args.precision.parse()?),
        cuda_kernel: args
            .cuda_kernel
            .as_deref()
            .map(str::parse::<fastmm::cuda::FastKernel>)
            .transpose()?,
        ..Default::default()
    };
    base_opts.validate()?;
    for &dtype in &dtypes {
        check_memory(&problem, dtype)?;
    }

    let mut records = Vec::new();
    for &dtype in &dtypes {
        let typed = match dtype {
            DType::F32 => run_typed::<f32>(args, &problem, &algorithms, base_opts),
            DType::F64 => run_typed::<f64>(args, &problem, &algorithms, base_opts),
            DType::I32 => run_typed::<i32>(args, &problem, &algorithms, base_opts),
            DType::I64 => run_typed::<i64>(args, &problem, &algorithms, base_opts),
        };
        records.extend(typed?);
    }
    Ok((problem, records))
}

/// The device `--algo all` stands for. `cuda` must be usable (the error
/// names what is missing); `auto` falls back to the CPU with a notice.
fn resolve_device(text: &str) -> Result<Device> {
    match text.trim().to_ascii_lowercase().as_str() {
        "cpu" => Ok(Device::Cpu),
        "cuda" => {
            fastmm::cuda::Gpu::default_gpu()?;
            Ok(Device::Cuda)
        }
        "auto" => match fastmm::cuda::Gpu::default_gpu() {
            Ok(_) => Ok(Device::Cuda),
            Err(e) => {
                eprintln!("notice: running on the CPU ({e})");
                Ok(Device::Cpu)
            }
        },
        other => bail!("unknown device '{other}' (expected cpu, cuda or auto)"),
    }
}

fn parse_threshold(text: &str) -> Result<Option<usize>> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    match text.parse::<usize>() {
        Ok(n0) => Ok(Some(n0)),
        Err(_) => bail!("--threshold '{text}' is neither a size nor 'auto'"),
    }
}

pub(crate) fn parse_dtypes(list: &str) -> Result<Vec<DType>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        if name.eq_ignore_ascii_case("all") {
            out.extend(DType::ALL);
        } else {
            out.push(name.parse()?);
        }
    }
    Ok(out)
}

/// Refuses, before allocating anything, a problem whose matrices (plus the
/// verification's O(m + k + n) vectors) would not fit in available memory.
fn check_memory(p: &Problem, dtype: DType) -> Result<()> {
    let (m, k, n) = (p.m as u128, p.k as u128, p.n as u128);
    let elements = m * k + k * n + m * n;
    let verification = (m + k + n) * 8 * 4;
    let needed = elements * dtype.size_bytes() as u128 + verification;
    let fits_address_space = usize::try_from(elements).is_ok();
    match available_memory_bytes() {
        Some(available) if needed > available as u128 => bail!(
            "{}×{}×{} {} needs {} for A, B, C and verification, but only {} of memory is available",
            p.m,
            p.k,
            p.n,
            dtype,
            format_bytes(needed),
            format_bytes(available as u128)
        ),
        _ if !fits_address_space => bail!(
            "{}×{}×{} {} needs {}, more than this machine can address",
            p.m,
            p.k,
            p.n,
            dtype,
            format_bytes(needed)
        ),
        _ => Ok(()),
    }
}

fn run_typed<T: Element>(
    args: &RunArgs,
    p: &Problem,
    algorithms: &[Algorithm],
    base_opts: GemmOptions,
) -> Result<Vec<Record>> {
    let mut rng = seeded_rng(args.seed);
    let a: Matrix<T> = random_matrix(p.m, p.k, &mut rng);
    let b: Matrix<T> = random_matrix(p.k, p.n, &mut rng);
    let printable = args.print && [p.m, p.k, p.n].iter().all(|&d| d <= PRINT_MAX_DIM);
    if printable {
        show(args, &format!("A ({})", T::DTYPE), &a);
        show(args, &format!("B ({})", T::DTYPE), &b);
    }
    let mut c = Matrix::filled(p.m, p.n, T::poison());
    let flops = 2.0 * p.m as f64 * p.k as f64 * p.n as f64;
    let mut records: Vec<Record> = Vec::with_capacity(algorithms.len());
    for &algorithm in algorithms {
        let mut opts = GemmOptions {
            algorithm,
            ..base_opts
        };
        // The default memory schedule depends on the free memory:
        // resolved here, so the label and the report name what runs (out
        // of core on the GPU, per tile, by the out-of-core plan).
        if let (Some(scheme), Device::Cpu) = (Scheme::of(algorithm), algorithm.device()) {
            opts.variant = Some(fastmm::strassen::cpu_default_variant::<T>(
                scheme,
                (p.m, p.k, p.n),
                true,
                &opts,
            ));
        }
        if let (Some(scheme), Device::Cuda) = (Scheme::of(algorithm), algorithm.device()) {
            let gpu = fastmm::cuda::Gpu::default_gpu()?;
            let streamed = fastmm::cuda::out_of_core::needed::<T>(gpu, (p.m, p.k, p.n), &opts)?;
            opts.variant = if streamed {
                opts.variant
            } else {
                Some(fastmm::cuda::default_variant::<T>(
                    gpu,
                    scheme,
                    (p.m, p.k, p.n),
                    true,
                    &opts,
                )?)
            };
        }
        let opts = opts;
        // (compute ms, upload ms, download ms) of one run; the CPU has no
        // copies, and an out-of-core GPU product overlaps them with its
        // products, so its time is the whole product's (its report kept).
        let mut out_of_core = None;
        let mut multiply = |c: &mut Matrix<T>| -> Result<(f64, f64, f64)> {
            c.as_mut_slice().fill(T::poison());
            if algorithm.device() == Device::Cuda {
                let gpu = fastmm::cuda::Gpu::default_gpu()?;
                opts.validate()?;
                let shape = (p.m, p.k, p.n);
                if fastmm::cuda::out_of_core::needed::<T>(gpu, shape, &opts)? {
                    let report = fastmm::cuda::out_of_core::multiply(
                        gpu,
                        T::ONE,
                        a.as_ref(),
                        b.as_ref(),
                        T::ZERO,
                        c.as_mut(),
                        &opts,
                    )
                    .with_context(|| format!("{algorithm} out of core failed"))?;
                    let ms = report.seconds * 1e3;
                    out_of_core = Some(report);
                    return Ok((ms, 0.0, 0.0));
                }
                let t = fastmm::cuda::multiply_timed(
                    gpu,
                    T::ONE,
                    a.as_ref(),
                    b.as_ref(),
                    T::ZERO,
                    c.as_mut(),
                    &opts,
                )
                .with_context(|| format!("{algorithm} failed"))?;
                return Ok((t.kernel_ms, t.upload_ms, t.download_ms));
            }
            let start = Instant::now();
            gemm(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &opts)
                .with_context(|| format!("{algorithm} failed"))?;
            Ok((start.elapsed().as_secs_f64() * 1e3, 0.0, 0.0))
        };
        for _ in 0..args.warmup {
            multiply(&mut c)?;
        }
        let runs = (0..args.reps)
            .map(|_| multiply(&mut c))
            .collect::<Result<Vec<_>>>()?;
        let out_of_core = out_of_core.take();
        let sorted = |f: fn(&(f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let times = sorted(|r| r.0);
        let median_ms = median(&times);
        let on_gpu = algorithm.device() == Device::Cuda && out_of_core.is_none();
        let upload_ms = on_gpu.then(|| median(&sorted(|r| r.1)));
        let download_ms = on_gpu.then(|| median(&sorted(|r| r.2)));
        let end_to_end_ms = on_gpu.then(|| median(&sorted(|r| r.0 + r.1 + r.2)));
        if args.corrupt {
            let wrong = c.get(0, 0).add(T::ONE);
            c.set(0, 0, wrong);
        }
        let fast = Scheme::of(algorithm)
            .map(|scheme| workspace::<T>(scheme, (p.m, p.k, p.n), true, &opts));
        let growth = error_growth_of::<T>(&opts, (p.m, p.k, p.n));
        let verdict = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)?;
        if printable {
            show(args, &format!("C = A·B ({algorithm}, {})", T::DTYPE), &c);
        }
        let speedup = records
            .first()
            .map_or(1.0, |first| first.median_ms / median_ms);
        records.push(Record {
            algorithm: algorithm.name(),
            kernel: match &out_of_core {
                Some(report) => out_of_core_label::<T>(report)?,
                None => kernel_label::<T>(&opts, (p.m, p.k, p.n))?,
            },
            device: algorithm.device().name(),
            dtype: T::DTYPE.name(),
            m: p.m,
            k: p.k,
            n: p.n,
            threads: opts.effective_threads(),
            tile: opts.effective_tile(),
            reps: args.reps,
            median_ms,
            min_ms: times[0],
            max_ms: times[times.len() - 1],
            gflops: flops / (median_ms * 1e6),
            speedup,
            rel_error: verdict.rel_error,
            bound_ratio: verdict.bound_ratio,
            check: verdict.method.name(),
            ok: verdict.ok,
            seed: args.seed,
            upload_ms,
            download_ms,
            end_to_end_gflops: end_to_end_ms.map(|ms| flops / (ms * 1e6)),
            levels: fast.map(|report| report.levels),
            extra_bytes: fast.map_or(0, |report| {
                (report.workspace_elements * std::mem::size_of::<T>()) as u64
            }),
        });
    }
    Ok(records)
}

/// How far the error of `opts`'s algorithm on an m×k×n product may exceed
/// the classical rounding bound: fast algorithms by their levels' growth,
/// cuBLAS's reduced-precision modes by their input rounding.
pub(crate) fn error_growth_of<T: Element>(
    opts: &GemmOptions,
    (m, k, n): (usize, usize, usize),
) -> f64 {
    let fast = Scheme::of(opts.algorithm).map_or(1.0, |scheme| {
        error_growth(scheme, workspace::<T>(scheme, (m, k, n), true, opts).levels)
    });
    let precision = if opts.algorithm == Algorithm::Cublas {
        opts.gpu_precision.unwrap_or_default()
    } else {
        GpuPrecision::Fp32
    };
    fast * precision.error_growth()
}

/// The kernel of an out-of-core GPU product's tiles and how it streamed:
/// the plan, the bytes each way, and the share of the time the GPU spent
/// in products (what the copies did not hide is the rest).
fn out_of_core_label<T: Element>(report: &fastmm::cuda::out_of_core::Report) -> Result<String> {
    let plan = &report.plan;
    let tile = kernel_label::<T>(
        &GemmOptions {
            gpu_out_of_core: false,
            ..report.tile_options
        },
        (plan.tile_rows, plan.depth, plan.tile_cols),
    )?;
    Ok(format!(
        "{tile}; out of core in {}: {}; {} up, {} down; products {:.1}% of the time; host staging {:.2} s in, {:.2} s out",
        format_bytes(report.budget.into()),
        plan.describe(),
        format_bytes(report.upload_bytes.into()),
        format_bytes(report.download_bytes.into()),
        100.0 * report.products_seconds / report.seconds,
        report.staging_seconds.0,
        report.staging_seconds.1
    ))
}

/// What computes the inner loop of an m×k×n product: the packed
/// microkernel and its block sizes, the GPU kernel the shape rule picks
/// (and how its tiles are scheduled), or "scalar" for the loops compiled
/// for the baseline target.
fn kernel_label<T: Element>(
    opts: &GemmOptions,
    (m, k, n): (usize, usize, usize),
) -> Result<String> {
    if opts.algorithm.device() == Device::Cuda {
        let gpu = fastmm::cuda::Gpu::default_gpu()?;
        let memory = format!(
            "{}{}",
            opts.gpu_memory.unwrap_or_default(),
            if opts.gpu_pinned { " pinned" } else { "" }
        );
        if Scheme::of(opts.algorithm).is_some() {
            let base = opts
                .base
                .unwrap_or_else(|| fastmm::cuda::gemm::default_gpu_base(T::DTYPE));
            let threshold = fastmm::strassen::effective_threshold(opts, T::DTYPE);
            let start = match fastmm::strassen::effective_start(opts, T::DTYPE) {
                start if start > threshold => format!(" from {start}"),
                _ => String::new(),
            };
            let variant = opts.variant.unwrap_or_default();
            // The fused variant's products are all fused-kernel launches.
            let base = match variant {
                Variant::Fused => "fused kernel (cuda-fast simt tiles)".to_string(),
                _ => base.to_string(),
            };
            return Ok(format!("{variant} n0={threshold}{start} + {base} {memory}"));
        }
        return Ok(match opts.algorithm {
            Algorithm::CudaFast => {
                let config = fastmm::cuda::gemm::FastConfig::resolve(opts, T::DTYPE, gpu, (m, n))?;
                // run's device matrices are contiguous (ld = columns) from
                // aligned allocations.
                let aligned = fastmm::cuda::gemm::contiguous_rows_aligned(T::DTYPE, k, n);
                let schedule = config.schedule(gpu, (m, k, n), aligned)?.describe();
                let schedule = if schedule.is_empty() {
                    String::new()
                } else {
                    format!(", {schedule}")
                };
                let ring = if config.ring_key().is_some() && !aligned {
                    ", cp.async ring (rows not 16-byte aligned)"
                } else {
                    ""
                };
                format!(
                    "{}{schedule}{ring} {} {memory}",
                    config.describe(),
                    gpu.arch()
                )
            }
            // The precision modes apply to sgemm only; f64 runs dgemm.
            Algorithm::Cublas if T::DTYPE == DType::F64 => {
                format!("cuBLAS dgemm {} {memory}", gpu.arch())
            }
            Algorithm::Cublas => format!(
                "cuBLAS sgemm {} {} {memory}",
                opts.gpu_precision.unwrap_or_default(),
                gpu.arch()
            ),
            other => {
                let tile = fastmm::cuda::gemm::checked_tile::<T>(gpu, other, opts)?;
                format!("{tile}x{tile} {} {memory}", gpu.arch())
            }
        });
    }
    if Scheme::of(opts.algorithm).is_some() {
        let packed = kernel_label::<T>(
            &GemmOptions {
                algorithm: Algorithm::Packed,
                ..*opts
            },
            (m, k, n),
        )?;
        let kernel = packed.split(' ').take(2).collect::<Vec<_>>().join(" ");
        let base = match opts.base.unwrap_or(Algorithm::Packed) {
            Algorithm::Packed => kernel,
            other => other.to_string(),
        };
        let variant = opts.variant.unwrap_or_default();
        let lazy = match fastmm::strassen::effective_lazy_sums(opts) {
            terms if terms > 0 && variant != Variant::Fused => format!(" lazy≤{terms}"),
            _ => String::new(),
        };
        let threshold = fastmm::strassen::effective_threshold(opts, T::DTYPE);
        let start = match fastmm::strassen::effective_start(opts, T::DTYPE) {
            start if start > threshold => format!(" from {start}"),
            _ => String::new(),
        };
        return Ok(format!("{variant}{lazy} n0={threshold}{start} + {base}"));
    }
    if opts.algorithm != Algorithm::Packed {
        return Ok("scalar".into());
    }
    let kernel = select_kernel::<T>(opts.cpu_kernel)?;
    let b = opts
        .block_sizes
        .unwrap_or_else(|| kernel.default_blocks_for(m, n))
        .fitted(kernel.mr, kernel.nr);
    Ok(format!("{} {}/{}/{}", kernel.name, b.mc, b.kc, b.nc))
}

pub(crate) fn median(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Prints a small matrix; to stderr under `--json`, so stdout stays valid JSON.
fn show<T: Element>(args: &RunArgs, title: &str, m: &Matrix<T>) {
    let text = format!("{title}:\n{m:.4}");
    if args.json {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

fn print_table(args: &RunArgs, p: &Problem, records: &[Record]) {
    println!(
        "fastmm run: C = A·B with A {}×{}, B {}×{}; seed {}, median of {} after {} warm-up; CPU: {} ({} threads)",
        p.m,
        p.k,
        p.k,
        p.n,
        args.seed,
        args.reps,
        args.warmup,
        cpu_model(),
        fastmm::threads::available_threads()
    );
    if records.iter().any(|r| r.device == "cuda") {
        if let Ok(gpu) = fastmm::cuda::Gpu::default_gpu() {
            let info = gpu.info();
            println!(
                "GPU: {} ({}, {} SMs, {}, driver {}); GFLOP/s is the kernel alone (CUDA events), e2e counts the copies too",
                info.name,
                gpu.arch(),
                info.multiprocessors,
                format_bytes(info.total_memory as u128),
                info.driver_version
            );
        }
    }
    println!(
        "{:<10} {:<34} {:<5} {:>7} {:>5} {:>6} {:>10} {:>11} {:>9} {:>9} {:>8} {:>10} {:>10} {:<10} verdict",
        "algorithm",
        "kernel",
        "dtype",
        "threads",
        "tile",
        "levels",
        "extra mem",
        "median ms",
        "GFLOP/s",
        "e2e",
        "speedup",
        "rel error",
        "err/bound",
        "check",
    );
    for r in records {
        println!(
            "{:<10} {:<34} {:<5} {:>7} {:>5} {:>6} {:>10} {:>11} {:>9.2} {:>9} {:>7.2}x {:>10.2e} {:>10.2e} {:<10} {}",
            r.algorithm,
            r.kernel,
            r.dtype,
            r.threads,
            r.tile.map_or("-".to_string(), |t| t.to_string()),
            r.levels.map_or("-".to_string(), |l| l.to_string()),
            if r.levels.is_some() {
                format_bytes(r.extra_bytes.into())
            } else {
                "-".to_string()
            },
            format_ms(r.median_ms),
            r.gflops,
            r.end_to_end_gflops
                .map_or("-".to_string(), |g| format!("{g:.2}")),
            r.speedup,
            r.rel_error,
            r.bound_ratio,
            r.check,
            if r.ok { "ok" } else { "WRONG" }
        );
    }
}

/// Milliseconds with about four significant digits, so microsecond runs
/// do not print as 0.000.
pub(crate) fn format_ms(ms: f64) -> String {
    match ms {
        ms if ms >= 100.0 => format!("{ms:.1}"),
        ms if ms >= 1.0 => format!("{ms:.3}"),
        ms => format!("{ms:.5}"),
    }
}
