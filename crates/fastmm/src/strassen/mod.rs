//! `strassen` and `winograd`: fast matrix multiplication, written once.
//!
//! One level splits each operand into 2×2 quadrants and forms C from 7
//! products of sums of quadrants instead of 8 products: Strassen's scheme
//! (18 additions) or Winograd's variant (15). Each product recurses while
//! m, k and n are all at least the threshold n₀ and levels remain, so a
//! product of n ≥ n₀ costs 7/8 of the classical flops per level, plus
//! O(n²) additions.
//!
//! * [`schedule`] holds each level as data: the steps over quadrants and
//!   temporaries, per algorithm and memory variant.
//! * [`engine`] runs them over any [`Backend`]: splitting elongated
//!   products, peeling odd dimensions, sizing the workspace in a dry run
//!   and allocating it once per product.
//! * [`cpu`] is the CPU backend, with `packed` as its classical product.
//!
//! **Variants.** `temporaries` keeps every sum and product of a level in its
//! own quarter-size temporary (17 for Strassen, 15 for Winograd), as in
//! seed 000. `frugal` follows seed 003's schedules: products go straight
//! into quadrants of C, so a level needs 3 (Strassen) or 2 (Winograd)
//! temporaries; it needs β = 0, so a call with β ≠ 0 runs its top level
//! with `temporaries` and the levels below (always β = 0) frugally.
//! `fused` stores nothing: every product is a
//! [`Backend::primitive`] call, which the CPU backend runs in `packed` with
//! the sums formed during packing and each tile added into all of its
//! destinations, and the GPU backend in `kernels/fused.cu`, which forms the
//! sums while staging its tiles and runs each group of products with
//! disjoint destinations as one launch ([`Backend::primitives`]); C is
//! first scaled by β once.
//!
//! **Workspace.** Σ over levels ℓ ≥ 1 of (temporaries per level) × (m/2^ℓ ×
//! k/2^ℓ, k/2^ℓ × n/2^ℓ or m/2^ℓ × n/2^ℓ) elements; [`workspace`] computes
//! it exactly for a given product.
//!
//! **Exactness.** Over the integers (wrapping, a ring) both algorithms give
//! exactly the classical product. Over floats each level adds rounding
//! error; see docs/benchmarks.md for the measured growth, which sets
//! [`crate::tunables::STRASSEN_AUTO_MAX_LEVELS_F32`] and `_F64`.

pub mod backend;
mod cpu;
pub(crate) mod engine;
pub(crate) mod schedule;

use std::fmt;
use std::str::FromStr;

pub use backend::{Backend, Block, Store};
pub use cpu::{SumStores, SUM_STORES_ENV};
pub use engine::Report;

use crate::algo::{Algorithm, GemmOptions};
use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::threads::run_in_pool;
use crate::tunables::{
    L2_STREAM_MAX_BYTES_PER_CYCLE, STRASSEN_AUTO_MAX_LEVELS_F32, STRASSEN_AUTO_MAX_LEVELS_F64,
    STRASSEN_AUTO_START_4_BYTE, STRASSEN_AUTO_START_4_BYTE_SLOW_FMA, STRASSEN_AUTO_START_8_BYTE,
    STRASSEN_AUTO_THRESHOLD, STRASSEN_BATCHED_MAX_MEMORY_FRACTION, STRASSEN_LAZY_SUM_TERMS,
    STRASSEN_MAX_LEVELS, STRASSEN_SLOW_FMA_BITS_PER_CYCLE,
};
use engine::Plan;
use schedule::Schedule;

/// Which 7-product scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Strassen (1969): 18 additions per level.
    Strassen,
    /// Winograd's variant: 15 additions per level.
    Winograd,
}

/// How a level uses memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variant {
    /// Every sum and product of a level in its own temporary (seed 000).
    Temporaries,
    /// Products straight into C, 2–3 temporaries per level (seed 003).
    /// The default where `batched`'s temporaries do not fit
    /// ([`cpu_default_variant`], `cuda::default_variant`).
    #[default]
    Frugal,
    /// No temporaries: each product's operand sums are formed while the
    /// backend packs (or loads) its tiles, and its result is added into
    /// every C block it feeds (Huang et al., SC16). Levels compose: two
    /// levels are 49 primitives over sums of up to 4 blocks.
    Fused,
    /// Every sum and product stored, as in `Temporaries`, with a level's
    /// sums in three groups (those of A, those of B, C's quadrants) that a
    /// backend forms in one pass each, reading every source once: the GPU
    /// moves 27–29 quarter blocks per level instead of 45–54.
    Batched,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 4] = [
        Variant::Temporaries,
        Variant::Frugal,
        Variant::Fused,
        Variant::Batched,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Temporaries => "temporaries",
            Variant::Frugal => "frugal",
            Variant::Fused => "fused",
            Variant::Batched => "batched",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "unknown variant '{s}' (expected temporaries, frugal, fused or batched)"
                ))
            })
    }
}

impl Scheme {
    /// The scheme an algorithm runs, if it is a fast one.
    pub fn of(algorithm: Algorithm) -> Option<Scheme> {
        match algorithm {
            Algorithm::Strassen | Algorithm::CudaStrassen => Some(Scheme::Strassen),
            Algorithm::Winograd | Algorithm::CudaWinograd => Some(Scheme::Winograd),
            _ => None,
        }
    }

    fn schedule(self, variant: Variant) -> &'static Schedule {
        match (self, variant) {
            (Scheme::Strassen, Variant::Temporaries) => &schedule::STRASSEN_TEMPORARIES,
            (Scheme::Strassen, Variant::Frugal) => &schedule::STRASSEN_FRUGAL,
            (Scheme::Winograd, Variant::Temporaries) => &schedule::WINOGRAD_TEMPORARIES,
            (Scheme::Winograd, Variant::Frugal) => &schedule::WINOGRAD_FRUGAL,
            (Scheme::Strassen, Variant::Batched) => &schedule::STRASSEN_BATCHED,
            (Scheme::Winograd, Variant::Batched) => &schedule::WINOGRAD_BATCHED,
            (_, Variant::Fused) => self.schedule(Variant::Frugal),
        }
    }

    fn products(self) -> &'static [schedule::Product; 7] {
        match self {
            Scheme::Strassen => &schedule::STRASSEN_PRODUCTS,
            Scheme::Winograd => &schedule::WINOGRAD_PRODUCTS,
        }
    }
}

/// The threshold n₀ in effect: the option, else the tuning file's, else
/// the measured crossover.
pub fn effective_threshold(opts: &GemmOptions, dtype: DType) -> usize {
    let tuned = crate::tuning::strassen(opts.algorithm.device(), dtype);
    opts.threshold
        .or(tuned.map(|(threshold, _)| threshold))
        .unwrap_or(match (opts.algorithm.device(), dtype) {
            (crate::algo::Device::Cpu, _) => STRASSEN_AUTO_THRESHOLD,
            (crate::algo::Device::Cuda, DType::F64) => {
                crate::tunables::CUDA_STRASSEN_AUTO_THRESHOLD_F64
            }
            (crate::algo::Device::Cuda, DType::F32) => {
                crate::tunables::CUDA_STRASSEN_AUTO_THRESHOLD
            }
            (crate::algo::Device::Cuda, _) => crate::tunables::CUDA_STRASSEN_AUTO_THRESHOLD_INT,
        })
}

/// The size from which a first level applies: under `auto`, the tuning
/// file's, else the measured smallest size worth one level (on the CPU by
/// element size, and for 4-byte types by the FMA rate of the kernel
/// family `packed` runs; on the GPU for f32); with an explicit threshold
/// no more than the threshold itself.
pub fn effective_start(opts: &GemmOptions, dtype: DType) -> usize {
    if let (None, Some((_, start))) = (
        opts.threshold,
        crate::tuning::strassen(opts.algorithm.device(), dtype),
    ) {
        return start;
    }
    match (opts.threshold, opts.algorithm.device()) {
        (None, crate::algo::Device::Cpu) if dtype.size_bytes() == 4 => {
            cpu_start_4_byte(opts.cpu_kernel)
        }
        (None, crate::algo::Device::Cpu) => STRASSEN_AUTO_START_8_BYTE,
        (None, crate::algo::Device::Cuda) if dtype == DType::F32 => {
            crate::tunables::CUDA_STRASSEN_AUTO_START
        }
        _ => 0,
    }
}

/// `auto`'s first size for 4-byte types on the CPU: lower where an
/// addition pass costs few of the base kernel's cycles, on a core that
/// retires few FMA bits per cycle or whose caches stream twice as wide as
/// most (Zen 5; see the tunables). A kernel family that is not available
/// keeps the general rule; `packed` reports the error.
fn cpu_start_4_byte(forced: Option<crate::packed::CpuKernel>) -> usize {
    use crate::packed::blocking::{fma_bits_per_cycle, l2_stream_bytes_per_cycle};
    match crate::packed::select_kernel::<f32>(forced) {
        Ok(kernel)
            if fma_bits_per_cycle(kernel.family) <= STRASSEN_SLOW_FMA_BITS_PER_CYCLE
                || l2_stream_bytes_per_cycle() > L2_STREAM_MAX_BYTES_PER_CYCLE =>
        {
            STRASSEN_AUTO_START_4_BYTE_SLOW_FMA
        }
        _ => STRASSEN_AUTO_START_4_BYTE,
    }
}

/// The most levels in effect: the option, else the accuracy rule for
/// floats (each level multiplies the error; see the tunables) and no limit
/// beyond [`STRASSEN_MAX_LEVELS`] for the exact integer types.
pub fn effective_max_depth(opts: &GemmOptions, dtype: DType) -> usize {
    opts.depth.unwrap_or(match dtype {
        DType::F32 => STRASSEN_AUTO_MAX_LEVELS_F32,
        DType::F64 => STRASSEN_AUTO_MAX_LEVELS_F64,
        DType::I32 | DType::I64 => STRASSEN_MAX_LEVELS,
    })
}

/// The most terms of an operand sum left for a leaf product to form while
/// packing (0: every sum stored): the option, else
/// [`STRASSEN_LAZY_SUM_TERMS`]; always 0 where the base is not `packed` on
/// the CPU, the only classical product that forms sums while packing.
pub fn effective_lazy_sums(opts: &GemmOptions) -> usize {
    match (opts.algorithm.device(), opts.base) {
        (crate::algo::Device::Cpu, None | Some(Algorithm::Packed)) => {
            opts.lazy_sums.unwrap_or(STRASSEN_LAZY_SUM_TERMS)
        }
        _ => 0,
    }
}

pub(crate) fn plan<T: Element>(scheme: Scheme, opts: &GemmOptions) -> Plan {
    let variant = opts.variant.unwrap_or_default();
    Plan {
        schedule: scheme.schedule(variant),
        beta_schedule: scheme.schedule(Variant::Temporaries),
        threshold: effective_threshold(opts, T::DTYPE),
        start: effective_start(opts, T::DTYPE),
        max_depth: effective_max_depth(opts, T::DTYPE),
        fused: (variant == Variant::Fused).then(|| scheme.products()),
        lazy_sum_terms: effective_lazy_sums(opts),
    }
}

/// The factor by which `levels` levels of `scheme` may enlarge the classical
/// float error bound: Higham's per-level constants, 12 for Strassen and 18
/// for Winograd (*Accuracy and Stability of Numerical Algorithms*, §23.2.2),
/// for [`crate::verify::verify_with_growth`].
pub fn error_growth(scheme: Scheme, levels: usize) -> f64 {
    let per_level: f64 = match scheme {
        Scheme::Strassen => 12.0,
        Scheme::Winograd => 18.0,
    };
    per_level.powi(levels as i32)
}

/// The levels and temporary workspace a product C ← αAB + βC of A m×k
/// and B k×n would use, without running it.
pub fn workspace<T: Element>(
    scheme: Scheme,
    (m, k, n): (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Report {
    let beta = if beta_is_zero { T::ZERO } else { T::ONE };
    // The backend type only tells the dry run whether the Strassen
    // primitive is native (no scratch) or needs workspace.
    #[cfg(feature = "cuda")]
    if opts.algorithm.device() == crate::algo::Device::Cuda {
        return engine::dry_run::<T, crate::cuda::strassen::CudaBackend<'static, T>>(
            plan::<T>(scheme, opts),
            beta,
            (m, k, n),
        );
    }
    let cpu_opts = GemmOptions {
        variant: Some(cpu_default_variant::<T>(
            scheme,
            (m, k, n),
            beta_is_zero,
            opts,
        )),
        ..*opts
    };
    engine::dry_run::<T, cpu::CpuBackend<'static, T>>(plan::<T>(scheme, &cpu_opts), beta, (m, k, n))
}

/// The memory schedule `strassen`/`winograd` run on the CPU for C ← αAB +
/// βC (A m×k, B k×n) when `opts` names none: `batched`, the fastest on
/// dev-turin since its sums are formed a cache line at a time (1.04–1.13×
/// `frugal` at 4096–8192, docs/benchmarks.md), when its temporaries take at
/// most [`STRASSEN_BATCHED_MAX_MEMORY_FRACTION`] of the memory the OS has
/// available, else `frugal`, which needs 2–3 temporaries per level; where
/// the OS does not say, `frugal`. An explicit variant is returned as given.
pub fn cpu_default_variant<T: Element>(
    scheme: Scheme,
    (m, k, n): (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Variant {
    if let Some(variant) = opts.variant {
        return variant;
    }
    let batched = GemmOptions {
        variant: Some(Variant::Batched),
        ..*opts
    };
    let temporaries = workspace::<T>(scheme, (m, k, n), beta_is_zero, &batched).workspace_elements;
    if temporaries == 0 {
        // No level runs: nothing to fit, and no need to ask the OS.
        return Variant::Batched;
    }
    let bytes = temporaries.saturating_mul(std::mem::size_of::<T>()) as u128;
    let (numerator, denominator) = STRASSEN_BATCHED_MAX_MEMORY_FRACTION;
    match crate::system::available_memory_bytes() {
        Some(free) if bytes * denominator as u128 <= free as u128 * numerator as u128 => {
            Variant::Batched
        }
        _ => Variant::Frugal,
    }
}

/// C ← α·A·B + β·C with `scheme`, classical products by `packed`. The
/// caller (the boundary in [`crate::gemm`]) guarantees matching shapes,
/// m, n, k ≥ 1, α ≠ 0 and valid options.
pub(crate) fn multiply<T: Element>(
    scheme: Scheme,
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    let shape = (a.rows(), a.cols(), b.cols());
    let opts = &GemmOptions {
        variant: Some(cpu_default_variant::<T>(
            scheme,
            shape,
            beta == T::ZERO,
            opts,
        )),
        ..*opts
    };
    let plan = plan::<T>(scheme, opts);
    let base = GemmOptions {
        algorithm: opts.base.unwrap_or(Algorithm::Packed),
        ..*opts
    };
    let threads = opts.effective_threads();
    let stores = SumStores::from_env()?;
    let run = move || {
        let mut backend = cpu::CpuBackend::new(a, b, c, base, stores);
        engine::run(&mut backend, plan, alpha, beta, shape).map(|_| ())
    };
    if threads == 1 {
        run()
    } else {
        run_in_pool(threads, run)?
    }
}
