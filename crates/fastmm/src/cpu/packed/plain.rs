//! The direct path resolved once per element type: the kernel the table
//! gives default options, its direct driver, the KC it runs with on a C
//! that fits in L2, and the parallel edge. A small product under default
//! options costs a BLAS call a few tens of nanoseconds, and resolving the
//! same choices on every call (the kernel table's search, the blocks'
//! and the configuration's look-ups, the options' copies) cost as much
//! again as the 8³ product itself. The choices are exactly the full
//! path's ([`super::multiply`]), made once, so a product gives the same
//! bits either way.

use std::sync::OnceLock;

use super::dispatch::DirectFn;
use super::{k_slices, parallel_edge, select_kernel};
use crate::config::Config;
use crate::element::{DType, Element};
use crate::matrix::MatRef;
use crate::options::GemmOptions;
use crate::system::cache_sizes;
use crate::tunables::PACKED_DIRECT_MAX_MNK;

/// One type's resolution, its driver type-erased (restored by
/// [`direct_for`] for the type it was made for).
#[derive(Clone, Copy)]
struct Resolved {
    /// The `DirectFn<T>` of the type's default kernel.
    direct: usize,
    /// Its KC for a C that fits in L2.
    kc: usize,
    /// Products of fewer multiply-adds than this run on one thread.
    one_thread_below: u128,
    /// L2's bytes.
    l2: usize,
}

/// The resolutions, by [`DType`]; None where default options do not
/// take the direct path (no direct kernel, blocks forced by the
/// environment, a configuration error the full path reports).
static RESOLVED: [OnceLock<Option<Resolved>>; 4] = [const { OnceLock::new() }; 4];

fn slot(dtype: DType) -> usize {
    match dtype {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::I32 => 2,
        DType::I64 => 3,
    }
}

fn resolve<T: Element>() -> Option<Resolved> {
    let config = Config::get();
    config.threads().ok()?;
    if config.blocks().ok()?.is_some() {
        return None;
    }
    let kernel = select_kernel::<T>(None).ok()?;
    let direct: DirectFn<T> = kernel.direct?;
    let edge = parallel_edge::<T>(&GemmOptions::default()) as u128;
    Some(Resolved {
        direct: direct as usize,
        // `blocks_for`'s KC for a C within L2 under default options.
        kc: kernel.analytical_blocks_for(0).kc,
        one_thread_below: (edge * edge * edge).max(crate::tunables::PACKED_MIN_MNK),
        l2: cache_sizes().l2,
    })
}

/// The direct driver and KC that default options would run C ← α·A·B +
/// β·C of this shape with (A m×k, B k×n with its rows or its one column
/// contiguous, C as the full path leaves it, m, k, n ≥ 1), where that is the direct path
/// on one thread with k unsliced; None otherwise.
pub(crate) fn direct_for<T: Element>(
    a: &MatRef<'_, T>,
    b: &MatRef<'_, T>,
) -> Option<(DirectFn<T>, usize)> {
    direct_for_shape::<T>(
        (a.rows(), a.cols(), b.cols()),
        b.col_stride() == 1 || b.cols() == 1,
    )
}

/// [`direct_for`] of an m×k×n product whose B has its rows contiguous
/// (or one column) where `b_rows`, before its operands exist.
pub(crate) fn direct_for_shape<T: Element>(
    (m, k, n): (usize, usize, usize),
    b_rows: bool,
) -> Option<(DirectFn<T>, usize)> {
    direct_resolved::<T>((m, k, n), b_rows, true)
}

/// [`direct_for_shape`] of one share of a product that its caller splits
/// over threads itself: the parallel edge does not apply to the share
/// (it is already one thread's), the rest does.
pub(crate) fn direct_for_share<T: Element>(
    (m, k, n): (usize, usize, usize),
    b_rows: bool,
) -> Option<(DirectFn<T>, usize)> {
    direct_resolved::<T>((m, k, n), b_rows, false)
}

fn direct_resolved<T: Element>(
    (m, k, n): (usize, usize, usize),
    b_rows: bool,
    below_edge: bool,
) -> Option<(DirectFn<T>, usize)> {
    let resolved = (*RESOLVED[slot(T::DTYPE)].get_or_init(resolve::<T>))?;
    let mnk = m as u128 * k as u128 * n as u128;
    let fits = mnk <= PACKED_DIRECT_MAX_MNK
        && (!below_edge || mnk < resolved.one_thread_below)
        && b_rows
        && m.saturating_mul(n).saturating_mul(std::mem::size_of::<T>()) <= resolved.l2
        && k_slices::<T>((m, k, n), resolved.kc) == 1;
    // SAFETY: `direct` was made from a `DirectFn<T>` by `resolve::<T>`
    // into the slot of T's DType, which no other element type shares.
    fits.then(|| {
        (
            unsafe { std::mem::transmute::<usize, DirectFn<T>>(resolved.direct) },
            resolved.kc,
        )
    })
}
