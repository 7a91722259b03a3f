//! The accuracy audit: products × accuracy levels × input classes on one
//! device, each product's errors measured against the exact product
//! beside the device's native product's, and judged by the level the
//! product gives ([`crate::Plan::accuracy`]).
//!
//! * `native`: the relative Frobenius error and the largest
//!   |Ĉ − C|/(|A||B|) each within [`NATIVE_RATIO`] of the native product's
//!   (integers: exact).
//! * `bound`, `tf32`, `bf16`: every element within the verifier's
//!   classical bound 2·(k+1)·u·(|A||B|)_ij at the level's unit roundoff;
//!   with Strassen's or Winograd's levels, grown by the plan's allowance
//!   and norm-wise (their sums mix rows and columns of different scales).
//! * `bits:N` promises a precision, not a bound: measured, never failed.
//!
//! `auto` must moreover give a level that meets the one asked for. The CI
//! runs the CPU's matrix (the emulated product's twin included); `fastmm
//! selftest --device cuda` and `fastmm accuracy` run it on a GPU.

use serde::Serialize;

use crate::accuracy::{Errors, InputClass, Reference, NATIVE_RATIO};
use crate::complex::{ComplexForm, ComplexMatrix};
use crate::context::Context;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::Matrix;
use crate::options::{Accuracy, Algorithm, GemmOptions};
use crate::verify::FLOAT_TOLERANCE_FACTOR;

/// One product of the audit on one input class.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The element type; of the parts, for a complex product.
    pub dtype: DType,
    /// A complex product's form (its real products are `algorithm`'s);
    /// `None` for a real product.
    pub form: Option<ComplexForm>,
    /// (m, k, n).
    pub shape: (usize, usize, usize),
    /// The inputs.
    pub class: InputClass,
    /// The product as asked: `ALGO:LEVEL`.
    pub label: String,
    /// The algorithm that ran (`auto` resolved).
    pub algorithm: Algorithm,
    /// The level asked for.
    pub asked: Accuracy,
    /// The level the product gives.
    pub given: Accuracy,
    /// What it carried: the plan's precision, or the emulated product's
    /// moduli and bits as it ran.
    pub precision: String,
    /// Its errors.
    pub errors: Errors,
    /// The native product's errors on the same inputs.
    pub native: Errors,
    /// `errors` over `native`, the larger of the two ratios.
    #[serde(serialize_with = "crate::accuracy::serialize_measure")]
    pub ratio: f64,
    /// Whether the errors meet the level given, and (for `auto`) the
    /// level given meets the one asked.
    pub ok: bool,
    /// Why not, when not.
    pub why: Option<String>,
    /// The product's time (on a GPU the kernels'), milliseconds.
    pub ms: f64,
}

/// The native product of a device for T at the `native` level.
pub fn native_options<T: Element>(ctx: &Context) -> GemmOptions {
    GemmOptions::new(Algorithm::auto_for(ctx.device().kind(), T::DTYPE)).accuracy(Accuracy::Native)
}

/// Whether `errors` meet `level`, given the native product's errors, the
/// depth, the plan's error growth and whether Strassen's levels ran;
/// `Err` says why not.
pub fn meets(
    level: Accuracy,
    errors: &Errors,
    native: &Errors,
    (dtype, k): (DType, usize),
    (growth, fast_levels): (f64, bool),
) -> Result<(), String> {
    if dtype.is_integer() {
        return if errors.relative_frobenius == 0.0 {
            Ok(())
        } else {
            Err(format!(
                "integers not exact: error {:.1e}",
                errors.relative_frobenius
            ))
        };
    }
    if !errors.relative_frobenius.is_finite() && native.relative_frobenius.is_finite() {
        return Err("a non-finite result where the native product's is finite".into());
    }
    match level {
        Accuracy::Native => {
            if errors.within(native) {
                Ok(())
            } else {
                Err(format!(
                    "{:.2}× the native product's errors (at most {NATIVE_RATIO}×)",
                    errors.ratio_to(native)
                ))
            }
        }
        Accuracy::Bits(_) => Ok(()),
        level => {
            let u = dtype.unit_roundoff();
            let unit = (level.unit_roundoff(dtype) / u).max(growth);
            let gamma = FLOAT_TOLERANCE_FACTOR * (k as f64 + 1.0) * u * unit;
            let (measured, how) = if fast_levels {
                (errors.max_normwise, "norm-wise")
            } else {
                (errors.max_scaled, "componentwise")
            };
            if measured <= gamma {
                Ok(())
            } else {
                Err(format!(
                    "{how} error {measured:.2e} beyond the {level} bound {gamma:.2e}"
                ))
            }
        }
    }
}

/// Every product of `products` on every class of `classes`, for an
/// m×k×n product of T on `ctx`, from inputs of `seed`; errors over at
/// most `sample_rows` rows of C (all of them when m is no more).
///
/// # Errors
/// Input generation (the cancellation class wants an even k), a product
/// that fails to run or plan.
pub fn audit<T: Element>(
    ctx: &Context,
    shape: (usize, usize, usize),
    classes: &[InputClass],
    products: &[GemmOptions],
    seed: u64,
    sample_rows: usize,
) -> Result<Vec<Row>, Error> {
    let (m, k, n) = shape;
    let native_opts = native_options::<T>(ctx);
    let mut rows = Vec::new();
    for &class in classes {
        let (a, b) = class.inputs::<T>(shape, seed)?;
        let reference = Reference::of_rows(a.as_ref(), b.as_ref(), sample_rows)?;
        let mut c = Matrix::<T>::try_filled(m, n, T::poison())?;
        ctx.gemm(
            T::ONE,
            a.as_ref(),
            b.as_ref(),
            T::ZERO,
            c.as_mut(),
            &native_opts,
        )?;
        let native = reference.errors(c.as_ref())?;
        for opts in products {
            let plan = ctx.plan_for::<T>(a.as_ref(), b.as_ref(), true, opts)?;
            let mut c = Matrix::<T>::try_filled(m, n, T::poison())?;
            let timing =
                ctx.gemm_timed(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), opts)?;
            let errors = reference.errors(c.as_ref())?;
            let fast_levels = plan.fast.as_ref().is_some_and(|f| f.levels > 0);
            let mut why = meets(
                plan.accuracy,
                &errors,
                &native,
                (T::DTYPE, k),
                (plan.error_growth, fast_levels),
            )
            .err();
            if opts.algorithm == Algorithm::Auto && !opts.accuracy.met_by(plan.accuracy) {
                why = Some(format!(
                    "auto gave {} where {} was asked",
                    plan.accuracy, opts.accuracy
                ));
            }
            let precision = match timing.emulation {
                Some(tally) if !T::DTYPE.is_integer() => tally.label(),
                _ => plan.precision.clone(),
            };
            rows.push(Row {
                dtype: T::DTYPE,
                form: None,
                shape,
                class,
                label: format!("{}:{}", opts.algorithm, opts.accuracy),
                algorithm: plan.algorithm,
                asked: opts.accuracy,
                given: plan.accuracy,
                precision,
                ratio: errors.ratio_to(&native),
                ok: why.is_none(),
                why,
                errors,
                native,
                ms: timing.compute_ms,
            });
        }
    }
    Ok(rows)
}

/// [`audit`] of complex products with parts of T (f32: complex64, f64:
/// complex128): each class's inputs for the real parts and, from the next
/// seed, the imaginary parts; the errors of C = [Cᵣ; Cᵢ] against the exact
/// product of the real embedding, beside the native complex product's
/// (four native real products, as zgemm computes). Each product runs the
/// form of its level ([`ComplexForm::for_level`]): at `native` within
/// [`NATIVE_RATIO`] of the native errors; at a relaxed level, 3M within
/// the level's bound norm-wise and grown fourfold, as its imaginary part
/// is bounded by (|Aᵣ|+|Aᵢ|)(|Bᵣ|+|Bᵢ|) (Higham §23.2.4).
///
/// # Errors
/// As [`audit`].
pub fn audit_complex<T: Element>(
    ctx: &Context,
    shape: (usize, usize, usize),
    classes: &[InputClass],
    products: &[GemmOptions],
    seed: u64,
    sample_rows: usize,
) -> Result<Vec<Row>, Error> {
    crate::emulation::check_float::<T>()?;
    let (m, k, n) = shape;
    let native_opts = native_options::<T>(ctx);
    let run = |a: &ComplexMatrix<T>,
               b: &ComplexMatrix<T>,
               opts: &GemmOptions,
               form: ComplexForm|
     -> Result<(ComplexMatrix<T>, Vec<crate::executor::Report>, f64), Error> {
        let mut c = ComplexMatrix::new(
            Matrix::try_filled(m, n, T::poison())?,
            Matrix::try_filled(m, n, T::poison())?,
        )?;
        let start = std::time::Instant::now();
        let reports = crate::complex::multiply(
            ctx,
            a.as_split(),
            b.as_split(),
            c.as_split_mut(),
            form,
            opts,
        )?;
        Ok((c, reports, start.elapsed().as_secs_f64() * 1e3))
    };
    let mut rows = Vec::new();
    for &class in classes {
        let (ar, br) = class.inputs::<T>(shape, seed)?;
        let (ai, bi) = class.inputs::<T>(shape, seed.wrapping_add(1))?;
        let (a, b) = (ComplexMatrix::new(ar, ai)?, ComplexMatrix::new(br, bi)?);
        let reference =
            Reference::of_rows(a.embedded()?.as_ref(), b.stacked()?.as_ref(), sample_rows)?;
        let (c, _, _) = run(&a, &b, &native_opts, ComplexForm::Classical)?;
        let native = reference.errors(c.stacked()?.as_ref())?;
        for opts in products {
            let form = ComplexForm::for_level(opts.accuracy);
            let (c, reports, ms) = run(&a, &b, opts, form)?;
            let errors = reference.errors(c.stacked()?.as_ref())?;
            let plan = &reports[0].plan;
            let fast_levels = plan.fast.as_ref().is_some_and(|f| f.levels > 0);
            let (growth, normwise) = match form {
                ComplexForm::Classical => (plan.error_growth, fast_levels),
                ComplexForm::Gauss => (4.0 * plan.error_growth, true),
            };
            let given = match form {
                ComplexForm::Classical => plan.accuracy,
                ComplexForm::Gauss => opts.accuracy,
            };
            let mut why = meets(
                given,
                &errors,
                &native,
                (T::DTYPE, 2 * k),
                (growth, normwise),
            )
            .err();
            if opts.algorithm == Algorithm::Auto && !opts.accuracy.met_by(given) {
                why = Some(format!(
                    "auto gave {given} where {} was asked",
                    opts.accuracy
                ));
            }
            rows.push(Row {
                dtype: T::DTYPE,
                form: Some(form),
                shape,
                class,
                label: format!("{}:{}", opts.algorithm, opts.accuracy),
                algorithm: plan.algorithm,
                asked: opts.accuracy,
                given,
                precision: format!("{}; {}", form.name(), plan.precision),
                ratio: errors.ratio_to(&native),
                ok: why.is_none(),
                why,
                errors,
                native,
                ms,
            });
        }
    }
    Ok(rows)
}
