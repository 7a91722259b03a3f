//! What a product will run, asked before it runs: the kernel, the threads,
//! Strassen's variant, levels and workspace, the error-growth allowance
//! of its result, on a GPU whether and how it streams out of core, and on
//! several devices or ranks how the product is spread over them. Every
//! executor ([`crate::Executor`]) answers with this one type, and runs
//! the plan it is given: front ends label their output with it and verify
//! against its allowance, so they never recompute the library's choices.

use serde::Serialize;

use crate::cpu;
use crate::cpu::packed::{blocks_for, select_kernel};
use crate::distributed::planner;
use crate::element::Element;
use crate::error::Error;
use crate::gemm::Problem;
use crate::options::{
    Accuracy, Algorithm, Device, DeviceKind, FastOptions, GemmOptions, GpuPrecision, Variant,
};
use crate::strassen::{max_depth, Explained, Scheme};
use crate::system::format_bytes;

/// How a product is spread over the processors of a team or a cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Route {
    /// A and B cut into pieces in the decomposition's layout, one per
    /// processor; the schedule's broadcasts and reductions between them;
    /// C gathered from its pieces.
    Pieces,
    /// Strassen's or Winograd's levels across the processors (CAPS's
    /// depth-first steps: rows spread cyclically, the sums local), the
    /// classical products below distributed.
    Across {
        /// Levels run across the processors.
        levels: usize,
        /// One breadth-first step (the seven products on seven groups of
        /// ranks at once) rather than depth-first steps.
        breadth_first: bool,
    },
    /// GPUs of one host, matrices in host memory: B on every GPU, bands of
    /// A and C streamed through them, taken dynamically.
    Bands,
    /// GPUs of one host where B fits none of them: the rows split evenly,
    /// each GPU streaming its share out of core.
    Rows,
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Route::Pieces => write!(f, "pieces"),
            Route::Across {
                levels,
                breadth_first,
            } => write!(
                f,
                "{levels} level{} across (CAPS{})",
                if *levels == 1 { "" } else { "s" },
                if *breadth_first {
                    ", breadth-first"
                } else {
                    ""
                }
            ),
            Route::Bands => write!(f, "host-resident bands"),
            Route::Rows => write!(f, "rows out of core"),
        }
    }
}

/// A product spread over several processors: who, the decomposition the
/// planner chose ([`crate::distributed::planner`]) and the route.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// The processors: a team's devices, or one entry per rank.
    pub processors: Vec<Device>,
    /// The grid, pm×pn×pk.
    pub grid: (usize, usize, usize),
    /// Words the busiest processor receives in the decomposition.
    pub words_per_processor: u128,
    /// The lower bound on those words for this shape and memory.
    pub lower_bound: f64,
    /// How the product runs over them.
    pub route: Route,
    /// Ranks of an MPI job rather than devices of one process.
    pub ranks: bool,
    /// The decomposition itself (its pieces and their owners).
    #[serde(skip)]
    pub decomposition: planner::Decomposition,
    /// For [`Route::Across`], the recursion as planned, which the product
    /// runs without working it out again.
    #[serde(skip)]
    pub(crate) across: Option<AcrossPlan>,
}

/// Strassen's or Winograd's levels across processors as the plan found
/// them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AcrossPlan {
    /// Depth-first steps: the recursion, and its walk (the row layout
    /// every block aligns to, the temporaries, the largest gather).
    DepthFirst {
        plan: crate::strassen::engine::Plan,
        recursion: crate::strassen::across::Recursion,
    },
    /// One breadth-first step over seven groups of ranks: the groups'
    /// classical decomposition (`None` for groups of one rank).
    #[cfg(feature = "mpi")]
    BreadthFirst {
        group: Option<planner::Decomposition>,
    },
}

/// Strassen's or Winograd's recursion as a product will run it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FastPlan {
    /// The memory schedule (the default resolved).
    pub variant: Variant,
    /// Recurse while m, k and n are all at least this.
    pub threshold: usize,
    /// Apply a first level only from this size (at most the threshold
    /// when given explicitly).
    pub start: usize,
    /// At most this many levels.
    pub max_levels: usize,
    /// The levels this product applies (0: the base product alone runs).
    pub levels: usize,
    /// Bytes of temporaries, all levels together (the base products'
    /// packing buffers come on top).
    pub workspace_bytes: u64,
    /// The classical product at the leaves.
    pub base: Algorithm,
    /// CPU: operand sums of at most this many terms formed while packing.
    pub lazy_sums: usize,
}

/// How a GPU product of host matrices larger than its budget streams.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutOfCorePlan {
    /// The GPU memory it is planned in, bytes.
    pub budget_bytes: u64,
    /// The cut: tiles, the resident operand, buffers.
    pub description: String,
    /// One tile product's (rows, depth, columns).
    pub tile: (usize, usize, usize),
}

/// What a product C ← α·A·B + β·C will run ([`crate::Executor::plan`]):
/// the product, the options resolved, the local product each device runs,
/// and for a team or cluster how the product is spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The product planned; [`crate::Executor::execute`] takes only a
    /// product of this shape and type.
    pub problem: Problem,
    /// The options that run: the caller's, with `auto` decided for this
    /// shape and the memory schedule chosen.
    #[serde(skip)]
    pub options: GemmOptions,
    /// Over several processors: the decomposition and route (`None`: one
    /// device runs the whole product).
    pub spread: Option<Spread>,
    /// The device (a team's or cluster's first).
    pub device: Device,
    /// The algorithm (`auto` resolved).
    pub algorithm: Algorithm,
    /// What computes the inner loop: the microkernel and its blocks, the
    /// GPU kernel and its schedule, the recursion and its base.
    pub kernel: String,
    /// CPU threads (1 on a GPU and for the single-threaded algorithms).
    pub threads: usize,
    /// Tile edge of the tiled algorithms.
    pub tile: Option<usize>,
    /// Strassen/Winograd: the recursion.
    pub fast: Option<FastPlan>,
    /// How far the result's error may exceed the classical rounding bound
    /// ([`crate::verify::verify_with_growth`]): Strassen's per-level growth,
    /// or the input rounding of a reduced-precision cuBLAS mode.
    pub error_growth: f64,
    /// The accuracy level asked for ([`GemmOptions::accuracy`]).
    pub accuracy_asked: Accuracy,
    /// The accuracy level this product gives: `native` for the device's
    /// native product, integers (exact) and the emulated product at
    /// `native`; `bound` for the other classical products and for
    /// Strassen's levels; a cuBLAS mode's own level; the emulated
    /// product's as asked.
    pub accuracy: Accuracy,
    /// The precision the product carries: its arithmetic, Strassen's
    /// levels, or the emulated product's certificate and the moduli and
    /// bits it typically takes at this depth (the run's tally says what
    /// it took).
    pub precision: String,
    /// GPU: the out-of-core plan, when the product will stream.
    pub out_of_core: Option<OutOfCorePlan>,
}

impl Plan {
    /// The classical algorithm a Strassen/Winograd product runs instead,
    /// when it applies no level (its base, on every block).
    pub fn falls_back_to(&self) -> Option<Algorithm> {
        self.fast
            .as_ref()
            .filter(|fast| fast.levels == 0 && self.out_of_core.is_none())
            .map(|fast| fast.base)
    }

    /// The kernel, with the out-of-core plan when there is one.
    pub fn label(&self) -> String {
        match &self.out_of_core {
            Some(ooc) => format!(
                "{}; out of core in {}: {}",
                self.kernel,
                format_bytes(ooc.budget_bytes.into()),
                ooc.description
            ),
            None => self.kernel.clone(),
        }
    }
}

/// `opts` with what the plan chose for the fast recursion pinned: the
/// memory schedule (from the free memory, say), the crossover (from the
/// tuning file or the device's measured one), the most levels and the
/// lazy sums, so that the product runs the recursion its plan names and
/// decides none of it again.
fn pinned(opts: &GemmOptions, fast: Option<&FastPlan>) -> GemmOptions {
    let Some(fast) = fast else {
        return *opts;
    };
    GemmOptions {
        fast: FastOptions {
            variant: Some(fast.variant),
            threshold: Some(fast.threshold),
            start: Some(fast.start),
            depth: Some(fast.max_levels),
            lazy_sums: Some(fast.lazy_sums),
            ..opts.fast
        },
        ..*opts
    }
}

/// The fast algorithm's plan from its backend's resolution, in bytes of T.
pub(crate) fn fast_plan<T: Element>(explained: &Explained, opts: &GemmOptions) -> FastPlan {
    FastPlan {
        variant: explained.variant,
        threshold: explained.crossover.threshold,
        start: explained.crossover.start,
        max_levels: max_depth(opts, T::DTYPE),
        levels: explained.report.levels,
        workspace_bytes: (explained.report.workspace_elements * std::mem::size_of::<T>()) as u64,
        base: explained.base,
        lazy_sums: explained.lazy_sums,
    }
}

/// What a fast algorithm that applies no level runs instead: "= packed:
/// no level below n₀ = 2048", or below its first size where `auto` starts
/// later.
fn fallback_label(fast: &FastPlan) -> String {
    if fast.start > fast.threshold {
        format!(
            "= {}: no level below {} (then n₀ = {})",
            fast.base, fast.start, fast.threshold
        )
    } else {
        format!("= {}: no level below n₀ = {}", fast.base, fast.threshold)
    }
}

/// "n0=2048 from 4096": where a recursion stops, for labels.
fn crossover_label(fast: &FastPlan) -> String {
    if fast.start > fast.threshold {
        format!("n0={} from {}", fast.threshold, fast.start)
    } else {
        format!("n0={}", fast.threshold)
    }
}

/// The growth allowance of a product: fast algorithms by their levels,
/// cuBLAS's reduced-precision modes by their input rounding.
pub(crate) fn error_growth(fast: Option<&FastPlan>, opts: &GemmOptions) -> f64 {
    let levels = fast.map_or(1.0, |fast| {
        Scheme::of(opts.algorithm).map_or(1.0, |scheme| scheme.error_growth(fast.levels))
    });
    let precision = match opts.algorithm {
        Algorithm::Cublas => opts.gpu.precision.unwrap_or_default(),
        _ => GpuPrecision::Fp32,
    };
    levels * precision.error_growth()
}

/// The level a product gives and the precision it carries (see
/// [`Plan::accuracy`]); `native` names the algorithm that is the
/// device's native product for T, and `goal` the emulated product's
/// certificate goal on this device.
pub(crate) fn accuracy_given<T: Element>(
    opts: &GemmOptions,
    fast: Option<&FastPlan>,
    native: Algorithm,
    goal: crate::emulation::Goal,
    (m, k, n): (usize, usize, usize),
) -> (Accuracy, String) {
    let dtype = T::DTYPE;
    if dtype.is_integer() {
        return (Accuracy::Native, "exact (wrapping integer sums)".into());
    }
    let levels = fast.map_or(0, |f| f.levels);
    let algorithm = match fast {
        Some(f) if f.levels == 0 => f.base,
        _ => opts.algorithm,
    };
    if levels > 0 {
        return (
            Accuracy::Bound,
            format!(
                "{levels} {} level{} over {} ({dtype} sums)",
                opts.algorithm,
                if levels == 1 { "" } else { "s" },
                fast.map_or(native, |f| f.base)
            ),
        );
    }
    match algorithm {
        Algorithm::Emulated => {
            use crate::emulation::certify::{max_bits, moduli_for_bits, Sums, Target};
            let target = Target::of(goal, (m, k, n), dtype);
            let what = match target {
                Target::Tau(tau) => format!("every element certified within {tau:.1e}·(|A||B|)_ij"),
                Target::Bits(bits) => format!("{bits} bits per scaled entry"),
            };
            // Uniform data in [−1, 1): every row's and column's norm ≈ k.
            let uniform = Sums::with_norms(k, k as f64, k as f64);
            let typical = target.typical_bits().min(max_bits(uniform));
            let moduli = moduli_for_bits(uniform, typical).map_or(String::new(), |n| {
                format!("; uniform data: about {n} moduli")
            });
            (opts.accuracy, format!("Ozaki scheme II, {what}{moduli}"))
        }
        Algorithm::Cublas => {
            let precision = opts.gpu.precision.unwrap_or_default();
            let sums = match (precision, dtype) {
                (GpuPrecision::Fp32, _) => format!("{dtype} products and sums"),
                (p, _) => format!("{p} inputs, f32 sums"),
            };
            (Accuracy::of_precision(precision), sums)
        }
        a if a == native => (
            Accuracy::Native,
            format!("{dtype} FMA sums (the native product)"),
        ),
        _ => (Accuracy::Bound, format!("{dtype} sums (classical)")),
    }
}

/// The plan of an m×k×n product of T on the CPU; `opts.algorithm` is
/// resolved and runs on the CPU.
pub(crate) fn on_cpu<T: Element>(
    (m, k, n): (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Result<Plan, Error> {
    let fast = match Scheme::of(opts.algorithm) {
        Some(_) => {
            opts.fast.check_on(opts.algorithm, DeviceKind::Cpu)?;
            let explained = cpu::strassen::explain::<T>((m, k, n), beta_is_zero, opts);
            Some(fast_plan::<T>(&explained, opts))
        }
        None => None,
    };
    let kernel = match (&fast, opts.algorithm) {
        (Some(fast), _) if fast.levels == 0 => fallback_label(fast),
        (Some(fast), _) => {
            let base = match fast.base {
                Algorithm::Packed => {
                    let kernel = select_kernel::<T>(opts.cpu.kernel)?;
                    kernel.name.to_string()
                }
                other => other.to_string(),
            };
            let lazy = match fast.lazy_sums {
                0 => String::new(),
                terms => format!(" lazy≤{terms}"),
            };
            format!("{}{lazy} {} + {base}", fast.variant, crossover_label(fast))
        }
        (None, Algorithm::Packed) => {
            let kernel = select_kernel::<T>(opts.cpu.kernel)?;
            // The library's own matrices have contiguous rows.
            match cpu::packed::Path::of(kernel, opts, (m, k, n), true)? {
                cpu::packed::Path::Tiny => "tiled (too small to pack)".to_string(),
                cpu::packed::Path::Direct => format!("{} direct (unpacked)", kernel.name),
                cpu::packed::Path::Packed(_) => {
                    let blocks = blocks_for(kernel, opts, (m, n))?.fitted(kernel.mr, kernel.nr);
                    format!("{} {blocks}", kernel.name)
                }
            }
        }
        (None, Algorithm::Emulated) if T::DTYPE.is_integer() => {
            let digits = std::mem::size_of::<T>();
            format!(
                "byte planes reference: {digits} balanced digits, {} INT8 products in scalar loops",
                crate::emulation::bytes::products_per_slice(digits)
            )
        }
        (None, Algorithm::Emulated) => {
            "Ozaki scheme II reference: INT8 residue products in scalar loops".to_string()
        }
        (None, _) => "scalar".to_string(),
    };
    // A fast algorithm that applies no level runs its base product alone,
    // on the threads that product takes.
    let runs_packed_alone = opts.algorithm == Algorithm::Packed
        || fast
            .as_ref()
            .is_some_and(|f| f.levels == 0 && f.base == Algorithm::Packed);
    let (accuracy, precision) = accuracy_given::<T>(
        opts,
        fast.as_ref(),
        Algorithm::Packed,
        crate::emulation::Goal::on_cpu(opts.accuracy),
        (m, k, n),
    );
    Ok(Plan {
        problem: Problem::of::<T>((m, k, n)).reading_c(!beta_is_zero),
        options: pinned(opts, fast.as_ref()),
        spread: None,
        device: Device::Cpu,
        algorithm: opts.algorithm,
        kernel,
        threads: if runs_packed_alone {
            match cpu::packed::Path::of(
                select_kernel::<T>(opts.cpu.kernel)?,
                opts,
                (m, k, n),
                true,
            )? {
                cpu::packed::Path::Packed(threads) => threads,
                cpu::packed::Path::Tiny | cpu::packed::Path::Direct => 1,
            }
        } else {
            cpu::threads(opts)
        },
        tile: cpu::tile(opts),
        error_growth: error_growth(fast.as_ref(), opts),
        accuracy_asked: opts.accuracy,
        accuracy,
        precision,
        fast,
        out_of_core: None,
    })
}

#[cfg(feature = "cuda")]
pub(crate) use gpu::on_cuda;

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use crate::cuda::kernels::gemm::fast::{contiguous_rows_aligned, FastConfig};
    use crate::cuda::kernels::gemm::{checked_tile, default_base};
    use crate::cuda::products::out_of_core;
    use crate::cuda::runtime::device::Gpu;
    use crate::element::DType;

    /// The plan of an m×k×n product of T on `gpu` as the library runs it
    /// on host matrices (contiguous, aligned device copies); the
    /// algorithm is resolved and runs on a GPU.
    pub(crate) fn on_cuda<T: Element>(
        gpu: &Gpu,
        (m, k, n): (usize, usize, usize),
        beta_is_zero: bool,
        opts: &GemmOptions,
    ) -> Result<Plan, Error> {
        if opts.algorithm == Algorithm::Cublas && T::DTYPE.is_integer() {
            return Err(Error::Unsupported {
                algorithm: "cublas",
                what: format!("{} (cuBLAS has no integer GEMM)", T::DTYPE),
            });
        }
        let precision = opts.gpu.precision.unwrap_or_default();
        if precision != GpuPrecision::Fp32
            && (opts.algorithm != Algorithm::Cublas || T::DTYPE != DType::F32)
        {
            return Err(Error::InvalidOption(format!(
                "precision {precision} is a cuBLAS mode for f32 data, not {} on {}",
                opts.algorithm,
                T::DTYPE
            )));
        }
        let streamed = out_of_core::needed::<T>(gpu, (m, k, n), opts)?;
        let (out_of_core, tile_opts, tile_shape) = if streamed {
            let (route, budget, tile_opts) = out_of_core::plan_for::<T>(gpu, (m, k, n), opts)?;
            let tile = route.product_shape((m, k, n));
            (
                Some(OutOfCorePlan {
                    budget_bytes: budget,
                    description: route.describe::<T>((m, k, n)),
                    tile,
                }),
                GemmOptions {
                    gpu: crate::options::GpuOptions {
                        out_of_core: false,
                        ..tile_opts.gpu
                    },
                    ..tile_opts
                },
                tile,
            )
        } else {
            (None, *opts, (m, k, n))
        };
        let fast = match Scheme::of(tile_opts.algorithm) {
            Some(_) => {
                tile_opts
                    .fast
                    .check_on(tile_opts.algorithm, DeviceKind::Cuda)?;
                let explained = if streamed {
                    // Each tile runs the variant the out-of-core plan chose.
                    let scheme = Scheme::of(tile_opts.algorithm).expect("a fast algorithm");
                    let variant = tile_opts.fast.variant.unwrap_or_default();
                    Explained {
                        variant,
                        crossover: crate::cuda::products::strassen::crossover(
                            &gpu.info().name,
                            &tile_opts,
                            T::DTYPE,
                        ),
                        lazy_sums: 0,
                        base: crate::cuda::products::strassen::base(&tile_opts, T::DTYPE),
                        report: crate::cuda::products::strassen::dry_run::<T>(
                            &gpu.info().name,
                            scheme,
                            variant,
                            tile_shape,
                            true,
                            &tile_opts,
                        ),
                    }
                } else {
                    crate::cuda::products::strassen::explain::<T>(
                        gpu,
                        tile_shape,
                        beta_is_zero,
                        &tile_opts,
                    )?
                };
                Some(fast_plan::<T>(&explained, &tile_opts))
            }
            None => None,
        };
        let memory = format!(
            "{}{}",
            opts.gpu.memory.unwrap_or_default(),
            if opts.gpu.pinned { " pinned" } else { "" }
        );
        let kernel = match &fast {
            Some(fast) if fast.levels == 0 && !streamed => fallback_label(fast),
            Some(fast) => {
                let base = match fast.variant {
                    Variant::Fused => "fused kernel (cuda-fast simt tiles)".to_string(),
                    _ => fast.base.to_string(),
                };
                format!(
                    "{} {} + {base} {memory}",
                    fast.variant,
                    crossover_label(fast)
                )
            }
            None => classical_label::<T>(gpu, &tile_opts, tile_shape, &memory)?,
        };
        let (accuracy, precision) = accuracy_given::<T>(
            opts,
            fast.as_ref(),
            default_base(T::DTYPE),
            crate::emulation::Goal::on_cublas(opts.accuracy, T::DTYPE),
            tile_shape,
        );
        Ok(Plan {
            problem: Problem::of::<T>((m, k, n)).reading_c(!beta_is_zero),
            options: pinned(opts, fast.as_ref()),
            spread: None,
            device: Device::Cuda(gpu.info().ordinal),
            algorithm: opts.algorithm,
            kernel,
            threads: 1,
            tile: match opts.algorithm {
                Algorithm::CudaTiled | Algorithm::CudaNaive => {
                    Some(checked_tile::<T>(gpu, opts.algorithm, opts)?)
                }
                _ => None,
            },
            error_growth: error_growth(fast.as_ref(), opts),
            accuracy_asked: opts.accuracy,
            accuracy,
            precision,
            fast,
            out_of_core,
        })
    }

    /// What a classical GPU product of m×k×n runs.
    fn classical_label<T: Element>(
        gpu: &Gpu,
        opts: &GemmOptions,
        (m, k, n): (usize, usize, usize),
        memory: &str,
    ) -> Result<String, Error> {
        let algorithm = match opts.algorithm {
            Algorithm::Auto => default_base(T::DTYPE),
            other => other,
        };
        Ok(match algorithm {
            Algorithm::CudaFast => {
                let config = FastConfig::resolve(opts, T::DTYPE, gpu, (m, n))?;
                // The library's device matrices are contiguous (ld =
                // columns) in aligned allocations.
                let aligned = contiguous_rows_aligned(T::DTYPE, k, n);
                let schedule = match config.schedule(gpu, (m, k, n), aligned)?.describe() {
                    s if s.is_empty() => s,
                    s => format!(", {s}"),
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
            Algorithm::Cublas if T::DTYPE == DType::F64 => {
                format!("cuBLAS dgemm {} {memory}", gpu.arch())
            }
            Algorithm::Emulated if T::DTYPE.is_integer() => {
                let digits = std::mem::size_of::<T>();
                format!(
                    "byte planes: {digits} balanced digits, {} INT8 tensor-core products (cuBLAS) + combine kernel {} {memory}",
                    crate::emulation::bytes::products_per_slice(digits),
                    gpu.arch()
                )
            }
            Algorithm::Emulated => {
                format!(
                    "Ozaki scheme II: INT8 tensor cores (cuBLAS) + CRT kernels {} {memory}",
                    gpu.arch()
                )
            }
            Algorithm::Cublas => format!(
                "cuBLAS sgemm {} {} {memory}",
                opts.gpu.precision.unwrap_or_default(),
                gpu.arch()
            ),
            other => {
                let tile = checked_tile::<T>(gpu, other, opts)?;
                format!("{tile}x{tile} {} {memory}", gpu.arch())
            }
        })
    }
}
