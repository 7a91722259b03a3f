//! Strassen and Winograd on the CPU: the recursion of [`crate::strassen`]
//! over the CPU backend ([`backend`]), with `packed` (or any CPU algorithm
//! given as the base) for the classical products, and the CPU's own
//! crossovers and default memory schedule.

pub(crate) mod backend;

use crate::config::Config;
use crate::cpu::packed::blocking::{fma_bits_per_cycle, l2_stream_bytes_per_cycle};
use crate::cpu::packed::select_kernel;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{Algorithm, CpuKernel, DeviceKind, GemmOptions, Variant};
use crate::strassen::engine::{self, Plan};
use crate::strassen::{Crossover, Explained, Recursed, Scheme};
use crate::threads::run_in_pool;
use crate::tunables::{
    L2_STREAM_MAX_BYTES_PER_CYCLE, STRASSEN_AUTO_START_4_BYTE, STRASSEN_AUTO_START_4_BYTE_SLOW_FMA,
    STRASSEN_AUTO_START_8_BYTE, STRASSEN_AUTO_THRESHOLD, STRASSEN_BATCHED_MAX_MEMORY_FRACTION,
    STRASSEN_LAZY_SUM_TERMS, STRASSEN_SLOW_FMA_BITS_PER_CYCLE,
};
use backend::CpuBackend;

/// Where the recursion stops on the CPU: an explicit threshold (applying a
/// first level from it too), else the tuning file's crossover, else the
/// measured one: recurse from [`STRASSEN_AUTO_THRESHOLD`], a first level
/// from [`STRASSEN_AUTO_START_8_BYTE`] for 8-byte types and, for 4-byte
/// types, from a size that depends on the kernel `packed` runs
/// ([`start_4_byte`]).
pub(crate) fn crossover(opts: &GemmOptions, dtype: DType) -> Crossover {
    if let Some(given) = Crossover::given(&opts.fast) {
        return given;
    }
    if let Some((threshold, start)) = Config::get()
        .tuned_cpu_type(dtype)
        .and_then(|t| t.strassen())
    {
        return Crossover { threshold, start };
    }
    Crossover {
        threshold: STRASSEN_AUTO_THRESHOLD,
        start: match dtype.size_bytes() {
            4 => start_4_byte(opts.cpu.kernel),
            _ => STRASSEN_AUTO_START_8_BYTE,
        },
    }
}

/// `auto`'s first size for 4-byte types: lower where an addition pass
/// costs few of the base kernel's cycles, on a core that retires few FMA
/// bits per cycle or whose caches stream twice as wide as most (see the
/// tunables). A kernel family that is not available keeps the general
/// rule; `packed` reports the error.
fn start_4_byte(forced: Option<CpuKernel>) -> usize {
    match select_kernel::<f32>(forced) {
        Ok(kernel)
            if fma_bits_per_cycle(kernel.family) <= STRASSEN_SLOW_FMA_BITS_PER_CYCLE
                || l2_stream_bytes_per_cycle() > L2_STREAM_MAX_BYTES_PER_CYCLE =>
        {
            STRASSEN_AUTO_START_4_BYTE_SLOW_FMA
        }
        _ => STRASSEN_AUTO_START_4_BYTE,
    }
}

/// The most terms of an operand sum left for a leaf product to form while
/// packing (0: every sum stored): the option, else
/// [`STRASSEN_LAZY_SUM_TERMS`]; 0 where the base is not `packed`, the only
/// classical product that forms sums while packing.
fn lazy_sums(opts: &GemmOptions) -> usize {
    match opts.fast.cpu_base() {
        Algorithm::Packed => opts.fast.lazy_sums.unwrap_or(STRASSEN_LAZY_SUM_TERMS),
        _ => 0,
    }
}

/// The recursion for `variant`.
fn plan<T: Element>(scheme: Scheme, variant: Variant, opts: &GemmOptions) -> Plan {
    crate::strassen::plan(
        scheme,
        variant,
        crossover(opts, T::DTYPE),
        T::DTYPE,
        opts,
        lazy_sums(opts),
    )
}

/// The levels and temporary workspace of C ← αAB + βC (A m×k, B k×n)
/// with `variant`, without running it.
fn dry_run<T: Element>(
    scheme: Scheme,
    variant: Variant,
    shape: (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Recursed {
    engine::dry_run::<T, CpuBackend<'static, T>>(
        plan::<T>(scheme, variant, opts),
        beta_is_zero,
        shape,
    )
}

/// The memory schedule for C ← αAB + βC when `opts` names none: `batched`,
/// the fastest where its temporaries fit (docs/results.md), when they take
/// at most [`STRASSEN_BATCHED_MAX_MEMORY_FRACTION`] of the memory the OS
/// has available, else `frugal`, which needs 2–3 temporaries per level;
/// where the OS does not say, `frugal`. An explicit variant is returned as
/// given.
pub(crate) fn variant<T: Element>(
    scheme: Scheme,
    shape: (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Variant {
    if let Some(variant) = opts.fast.variant {
        return variant;
    }
    let temporaries =
        dry_run::<T>(scheme, Variant::Batched, shape, beta_is_zero, opts).workspace_elements;
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

/// [`Explained`] for C ← αAB + βC of `opts.algorithm` (Strassen or Winograd).
pub(crate) fn explain<T: Element>(
    shape: (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Explained {
    let scheme = Scheme::of(opts.algorithm).expect("a fast algorithm");
    let variant = variant::<T>(scheme, shape, beta_is_zero, opts);
    Explained {
        variant,
        crossover: crossover(opts, T::DTYPE),
        lazy_sums: match variant {
            Variant::Fused => 0,
            _ => lazy_sums(opts),
        },
        base: opts.fast.cpu_base(),
        report: dry_run::<T>(scheme, variant, shape, beta_is_zero, opts),
    }
}

/// C ← α·A·B + β·C with Strassen or Winograd (`opts.algorithm`) on the
/// CPU. The caller (the boundary) guarantees matching shapes, m, n, k ≥ 1,
/// α ≠ 0 and valid options.
pub(crate) fn multiply<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    opts.fast.check_on(opts.algorithm, DeviceKind::Cpu)?;
    let scheme = Scheme::of(opts.algorithm).expect("a fast algorithm");
    let shape = (a.rows(), a.cols(), b.cols());
    let variant = variant::<T>(scheme, shape, beta == T::ZERO, opts);
    let plan = plan::<T>(scheme, variant, opts);
    let base = GemmOptions {
        algorithm: opts.fast.cpu_base(),
        ..*opts
    };
    if dry_run::<T>(scheme, variant, shape, beta == T::ZERO, opts).levels == 0 {
        // No level applies: the base product alone, without the recursion's
        // pool and workspace (tens of µs, more than a small product).
        return crate::cpu::multiply(alpha, a, b, beta, c, &base);
    }
    let threads = crate::cpu::threads(opts);
    let stores = opts.fast.sum_stores.unwrap_or_default();
    let run = move || {
        let mut backend = CpuBackend::new(a, b, c, base, stores);
        engine::run(&mut backend, plan, alpha, beta, shape).map(|_| ())
    };
    if threads == 1 {
        run()
    } else {
        run_in_pool(threads, run)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels<T: Element>(n: usize, opts: &GemmOptions) -> usize {
        explain::<T>((n, n, n), true, &opts.variant(Variant::Frugal))
            .report
            .levels
    }

    /// `auto` on the CPU: base products of at least 2048/2 = 1024, a first
    /// level only from 4096 (8-byte types) or, for 4-byte types, 4096 on a
    /// core of at most 512 FMA bits per cycle (AVX2, Zen 4) or with a wide
    /// L2 (Zen 5) and 6144 on others; f32 at most two levels (accuracy),
    /// f64 four.
    #[test]
    fn auto_recurses_from_the_measured_crossovers() {
        let cpu = GemmOptions::new(Algorithm::Winograd);
        let kernel = select_kernel::<f32>(None).unwrap();
        let f32_start = if fma_bits_per_cycle(kernel.family) <= 512
            || l2_stream_bytes_per_cycle() > L2_STREAM_MAX_BYTES_PER_CYCLE
        {
            4096
        } else {
            6144
        };
        assert_eq!(crossover(&cpu, DType::F32).start, f32_start);
        for (n, f64_levels, f32_levels_once_started) in [
            (2048, 0, 0),
            (3071, 0, 0),
            (3072, 0, 0),
            (4095, 0, 0),
            (4096, 2, 2),
            (6143, 2, 2),
            (6144, 2, 2),
            (8192, 3, 2),
        ] {
            let f32_levels = if n >= f32_start {
                f32_levels_once_started
            } else {
                0
            };
            assert_eq!(levels::<f64>(n, &cpu), f64_levels, "f64 n = {n}");
            assert_eq!(levels::<f32>(n, &cpu), f32_levels, "f32 n = {n}");
        }
        // The rule follows the kernel family it is given.
        let generic = cpu.cpu_kernel(CpuKernel::Generic);
        assert_eq!(crossover(&generic, DType::F32).start, 4096);
        // An explicit threshold is the whole rule.
        assert_eq!(levels::<f64>(2048, &cpu.threshold(2048)), 1);
    }

    #[test]
    fn cpu_options_are_checked_before_anything_runs() {
        let check = |opts: &GemmOptions| opts.fast.check_on(opts.algorithm, DeviceKind::Cpu);
        let bad = |opts: GemmOptions| matches!(check(&opts), Err(Error::InvalidOption(_)));
        assert!(bad(
            GemmOptions::new(Algorithm::Strassen).base(Algorithm::Cublas)
        ));
        assert!(bad(GemmOptions::new(Algorithm::Winograd)
            .variant(Variant::Fused)
            .base(Algorithm::Naive)));
        assert!(check(&GemmOptions::new(Algorithm::Winograd).base(Algorithm::Tiled)).is_ok());
    }
}
