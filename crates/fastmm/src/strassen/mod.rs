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
//! * [`engine`] runs them over any [`backend::Backend`]: splitting elongated
//!   products, peeling odd dimensions, sizing the workspace in a dry run
//!   and allocating it once per product.
//! * [`across`] lays the recursion's matrices out by rows over several
//!   processors, so that its levels run across them (CAPS).
//! * The backends live with their devices: `crate::cpu::strassen` (with
//!   `packed` as its classical product) and `crate::cuda::products::strassen`. Each
//!   decides its own crossovers and default variant; the recursion is the
//!   same.
//!
//! **Variants.** `temporaries` keeps every sum and product of a level in its
//! own quarter-size temporary (17 for Strassen, 15 for Winograd), as in
//! seed 000. `frugal` follows seed 003's schedules: products go straight
//! into quadrants of C, so a level needs 3 (Strassen) or 2 (Winograd)
//! temporaries; it needs β = 0, so a call with β ≠ 0 runs its top level
//! with `temporaries` and the levels below (always β = 0) frugally.
//! `fused` stores nothing: every product is a
//! [`backend::Backend::primitive`] call, which the CPU backend runs in `packed` with
//! the sums formed during packing and each tile added into all of its
//! destinations, and the GPU backend in `kernels/fused.cu`, which forms the
//! sums while staging its tiles and runs each group of products with
//! disjoint destinations as one launch ([`backend::Backend::primitives`]); C is
//! first scaled by β once.
//!
//! **Workspace.** Σ over levels ℓ ≥ 1 of (temporaries per level) × (m/2^ℓ ×
//! k/2^ℓ, k/2^ℓ × n/2^ℓ or m/2^ℓ × n/2^ℓ) elements; the engine's dry run
//! computes it exactly for a given product.
//!
//! **Exactness.** Over the integers (wrapping, a ring) both algorithms give
//! exactly the classical product. Over floats each level adds rounding
//! error, bounded by [`Scheme::error_growth`]; the measured growth (docs/results.md)
//! sets [`crate::tunables::STRASSEN_AUTO_MAX_LEVELS_F32`] and `_F64`.

pub(crate) mod across;
pub(crate) mod backend;
pub(crate) mod engine;
pub(crate) mod schedule;

pub(crate) use engine::Recursed;

use crate::element::DType;
use crate::options::{Algorithm, GemmOptions, Variant};
use crate::tunables::{
    STRASSEN_AUTO_MAX_LEVELS_F32, STRASSEN_AUTO_MAX_LEVELS_F64, STRASSEN_MAX_LEVELS,
};
use engine::Plan;
use schedule::Schedule;

/// Which 7-product scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// Strassen (1969): 18 additions per level.
    Strassen,
    /// Winograd's variant: 15 additions per level.
    Winograd,
}

impl Scheme {
    /// The scheme an algorithm runs, if it is a fast one.
    pub(crate) fn of(algorithm: Algorithm) -> Option<Scheme> {
        match algorithm {
            Algorithm::Strassen => Some(Scheme::Strassen),
            Algorithm::Winograd => Some(Scheme::Winograd),
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

    /// The scheme's seven products, each in the primitive's form (sums
    /// of quadrants of A and B, and the quadrants of C it adds to).
    pub(crate) fn products(self) -> &'static [schedule::Product; 7] {
        match self {
            Scheme::Strassen => &schedule::STRASSEN_PRODUCTS,
            Scheme::Winograd => &schedule::WINOGRAD_PRODUCTS,
        }
    }

    /// The factor by which `levels` levels may enlarge the classical float
    /// error bound: Higham's per-level constants, 12 for Strassen and 18
    /// for Winograd (*Accuracy and Stability of Numerical Algorithms*,
    /// §23.2.2), for [`crate::verify::verify_with_growth`].
    pub(crate) fn error_growth(self, levels: usize) -> f64 {
        let per_level: f64 = match self {
            Scheme::Strassen => 12.0,
            Scheme::Winograd => 18.0,
        };
        per_level.powi(levels as i32)
    }
}

/// The most levels in effect: the option, else the accuracy rule for
/// floats (each level multiplies the error; see the tunables) and no limit
/// beyond [`STRASSEN_MAX_LEVELS`] for the exact integer types.
pub(crate) fn max_depth(opts: &GemmOptions, dtype: DType) -> usize {
    opts.fast.depth.unwrap_or(match dtype {
        DType::F32 => STRASSEN_AUTO_MAX_LEVELS_F32,
        DType::F64 => STRASSEN_AUTO_MAX_LEVELS_F64,
        DType::I32 | DType::I64 => STRASSEN_MAX_LEVELS,
    })
}

/// Where a backend's recursion stops, decided by the backend: recurse while
/// m, k and n are all at least `threshold`, and apply a first level only
/// from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Crossover {
    /// Recurse while every dimension is at least this.
    pub threshold: usize,
    /// A first level only from this size (0: from the threshold).
    pub start: usize,
}

impl Crossover {
    /// The crossover `fast` gives (its threshold, and the first level's
    /// size a plan pinned beside it); `None` where the device and type
    /// decide.
    pub(crate) fn given(fast: &crate::options::FastOptions) -> Option<Crossover> {
        fast.threshold.map(|threshold| Crossover {
            threshold,
            start: fast.start.unwrap_or(0),
        })
    }
}

/// The recursion of `scheme` with `variant`, stopping at `crossover`, at
/// most `opts.depth` levels (else the accuracy rule), leaf sums of at most
/// `lazy_sum_terms` terms formed while packing.
pub(crate) fn plan(
    scheme: Scheme,
    variant: Variant,
    crossover: Crossover,
    dtype: DType,
    opts: &GemmOptions,
    lazy_sum_terms: usize,
) -> Plan {
    Plan {
        schedule: scheme.schedule(variant),
        beta_schedule: scheme.schedule(Variant::Temporaries),
        threshold: crossover.threshold,
        start: crossover.start,
        max_depth: max_depth(opts, dtype),
        fused: (variant == Variant::Fused).then(|| scheme.products()),
        lazy_sum_terms,
    }
}

/// What a fast product would use, as its backend resolves it.
pub(crate) struct Explained {
    /// The memory schedule.
    pub variant: Variant,
    /// Where the recursion stops.
    pub crossover: Crossover,
    /// The most terms of a sum formed while packing (CPU; 0: none).
    pub lazy_sums: usize,
    /// The classical product at the leaves.
    pub base: Algorithm,
    /// Levels and workspace.
    pub report: Recursed,
}
