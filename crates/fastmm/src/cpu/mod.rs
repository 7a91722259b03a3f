//! The CPU backend: the seeds' ladder ([`naive`], [`ikj`], [`tiled`],
//! [`parallel`]), the BLIS-style [`packed`] GEMM, and the CPU backend of
//! the fast algorithms ([`strassen`]), and a distributed schedule run
//! with the CPU standing in for every processor ([`distributed`]); small
//! complex products in one pass ([`complex_direct`]).
//!
//! [`multiply`] hands each algorithm one contract: **C ← α·A·B + β·C** for
//! views of matching shape with m, n, k ≥ 1 and α ≠ 0, where β = 0 never
//! reads C. Empty shapes, orientation and option checks are handled once,
//! at the boundary ([`crate::context`]), so the modules below never see
//! them. The simple algorithms apply β in a first pass and then accumulate
//! C += α·A·B.

pub(crate) mod complex_direct;
pub(crate) mod distributed;
pub(crate) mod ikj;
pub(crate) mod naive;
pub(crate) mod packed;
pub(crate) mod parallel;
pub(crate) mod strassen;
pub(crate) mod tiled;

use crate::config::Config;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{Algorithm, GemmOptions};
use crate::system::available_threads;
use crate::tunables::DEFAULT_TILE;

/// The worker threads a CPU algorithm runs on: the option, else
/// [`num_threads`]; 1 for the single-threaded ones.
pub(crate) fn threads(opts: &GemmOptions) -> usize {
    if opts.algorithm.info().uses_threads {
        opts.threads.unwrap_or_else(num_threads)
    } else {
        1
    }
}

/// The CPU threads a product runs on when its options name none: the
/// process's setting ([`set_num_threads`]), else the environment's
/// (`FASTMM_NUM_THREADS`, else `OMP_NUM_THREADS`), else the tuning
/// file's, else every hardware thread the process may use. A product may
/// still take fewer where more would not pay (small products run on one).
pub fn num_threads() -> usize {
    let config = Config::get();
    crate::threads::default_threads()
        .or_else(|| config.threads().ok().flatten())
        .or_else(|| config.tuned_cpu().and_then(|t| t.threads))
        .unwrap_or_else(available_threads)
}

/// Sets the CPU threads of every later product whose options name none,
/// for the whole process (as `torch.set_num_threads` and threadpoolctl's
/// limits do); `None` returns to the environment's or the built-in
/// choice. More threads than the hardware's are allowed (they share its
/// cores).
pub fn set_num_threads(threads: Option<usize>) -> Result<(), Error> {
    if threads == Some(0) {
        return Err(Error::InvalidOption(
            "thread count must be at least 1".into(),
        ));
    }
    crate::threads::set_default_threads(threads);
    Ok(())
}

/// The tile edge of `tiled` and `parallel`: the option, else the tuning
/// file's, else [`DEFAULT_TILE`]; `None` for untiled algorithms.
pub(crate) fn tile(opts: &GemmOptions) -> Option<usize> {
    opts.algorithm.info().uses_tile.then(|| {
        opts.tile
            .or_else(|| Config::get().tuned_cpu().and_then(|t| t.tile))
            .unwrap_or(DEFAULT_TILE)
    })
}

/// C ← α·A·B + β·C with the CPU algorithm of `opts` (`auto` resolved by the
/// caller). The caller (the boundary) guarantees matching shapes, m, n,
/// k ≥ 1, α ≠ 0 and valid options.
pub(crate) fn multiply<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    // A FASTMM_NUM_THREADS that does not parse is reported here, by the
    // first product that would have used it.
    Config::get().threads()?;
    let tile = tile(opts).unwrap_or(DEFAULT_TILE);
    match opts.algorithm {
        Algorithm::Naive => {
            c.rb_mut().scale_by(beta);
            naive::accumulate(alpha, a, b, c);
        }
        Algorithm::Ikj => {
            c.rb_mut().scale_by(beta);
            ikj::accumulate(alpha, a, b, c);
        }
        Algorithm::Tiled => {
            c.rb_mut().scale_by(beta);
            tiled::accumulate(alpha, a, b, c, tile);
        }
        Algorithm::Parallel => {
            c.rb_mut().scale_by(beta);
            parallel::accumulate(alpha, a, b, c, tile, threads(opts))?;
        }
        // Packed folds β into its first microkernel call.
        Algorithm::Packed | Algorithm::Auto => packed::multiply(alpha, a, b, beta, c, opts)?,
        Algorithm::Strassen | Algorithm::Winograd => {
            strassen::multiply(alpha, a, b, beta, c, opts)?
        }
        // The reference twin (a fast algorithm's leaves may run it; the
        // boundary runs it itself to report its route).
        Algorithm::Emulated => {
            crate::emulation::gemm_reference(
                alpha,
                a,
                b,
                beta,
                c,
                crate::emulation::Goal::on_cpu(opts.accuracy),
            )?;
        }
        other => {
            return Err(Error::Unsupported {
                algorithm: other.name(),
                what: "the CPU (it runs on a CUDA device)".into(),
            })
        }
    }
    Ok(())
}
