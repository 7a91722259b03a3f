//! Strassen and Winograd across the ranks: CAPS's depth-first steps
//! (Ballard, Demmel, Holtz, Lipshitz, Schwartz, SPAA 2012) with the
//! classical product below them — the recursion and its backend written
//! once ([`crate::cpu::distributed::caps`]), each rank holding one
//! processor's rows and exchanging the leaves' blocks of B by MPI
//! all-gathers.
//!
//! Every matrix of the recursion is spread by rows in chunks over the
//! ranks, so the levels' sums are local; each leaf product gathers its
//! block of B on every rank and multiplies the rank's rows of A by it.
//! Each rank runs 7^L products of (h/P)×h×h for leaves of height h, and
//! receives (7/4)^L·k·n·(P−1)/P words over the L levels.
//!
//! On 7·q ranks, a breadth-first step ([`super::breadth`]) runs instead
//! where the sizes are even and its larger share fits the memory per
//! rank: CAPS's choice between the two steps by memory.

use mpi::traits::{Communicator, CommunicatorCollectives};

use super::{wire, Cluster, ClusterReport};
use crate::cpu::distributed::caps::{self, Exchange};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatRef, Matrix};
use crate::options::GemmOptions;
use crate::plan::{AcrossPlan, Route};
use crate::strassen::{across, engine, Scheme};

/// C on rank 0 (`None` elsewhere) and the report.
type Product<T> = (Option<Matrix<T>>, ClusterReport);

/// The all-gather of the rows of a leaf's block of B over every rank.
struct AllGather<'w> {
    world: &'w mpi::topology::SimpleCommunicator,
}

impl<T: Element> Exchange<T> for AllGather<'_> {
    fn all_gather(&mut self, mine: Vec<Vec<T>>) -> Result<Vec<Vec<T>>, Error> {
        let mine = mine.into_iter().next().unwrap_or_default();
        let parts = self.world.size() as usize;
        let len = mine.len();
        let mut all = vec![T::ZERO; len * parts];
        // Aligned blocks give every rank as many rows: equal counts.
        wire::all_gather(self.world, &mine, &mut all);
        Ok(all
            .chunks(len.max(1))
            .take(parts)
            .map(<[T]>::to_vec)
            .collect())
    }
}

impl Cluster {
    /// How Strassen or Winograd would run across the ranks for an m×k×n
    /// product with `opts`: breadth-first where the ranks and memory allow
    /// (it moves fewer words), else depth-first steps; `None` where not
    /// asked for ([`Cluster::with_strassen_across`]), or where neither
    /// applies or fits. Collective.
    pub(super) fn across_route<T: Element>(
        &self,
        shape: (usize, usize, usize),
        opts: &GemmOptions,
    ) -> Result<Option<(Route, AcrossPlan)>, Error> {
        if Scheme::of(opts.algorithm).is_none() || !self.strassen_across || self.size() < 2 {
            return Ok(None);
        }
        if self.size().is_multiple_of(super::breadth::BREADTH_RANKS) {
            if let Some(group) = self.breadth_first_fit::<T>(shape)? {
                let route = Route::Across {
                    levels: 1,
                    breadth_first: true,
                };
                return Ok(Some((route, AcrossPlan::BreadthFirst { group })));
            }
        }
        Ok(self
            .depth_first_fit::<T>(shape, opts)?
            .map(|(plan, recursion)| {
                let route = Route::Across {
                    levels: recursion.levels,
                    breadth_first: false,
                };
                (route, AcrossPlan::DepthFirst { plan, recursion })
            }))
    }

    /// The depth-first recursion across the ranks, where it applies (at
    /// least one level, blocks that a row chunking aligns) and its rows,
    /// temporaries and gathered blocks fit the memory per rank.
    /// Collective.
    fn depth_first_fit<T: Element>(
        &self,
        (m, k, n): (usize, usize, usize),
        opts: &GemmOptions,
    ) -> Result<Option<(engine::Plan, across::Recursion)>, Error> {
        let parts = self.size();
        let Ok((plan, recursion)) = caps::layout::<T>(parts, (m, k, n), true, opts) else {
            return Ok(None);
        };
        if recursion.levels == 0 {
            return Ok(None);
        }
        let layout = recursion.layout;
        // Rows of A, B and C, the temporaries' share, and the largest
        // gathered block of B with its parts.
        let me = self.rank();
        let local = |rows: usize, cols: usize| (layout.local_rows(rows, me) * cols) as u128;
        let temporaries: u128 = recursion
            .capacities
            .iter()
            .map(|&c| c.div_ceil(parts) as u128)
            .sum();
        let need = local(m, k)
            + local(k, n)
            + local(m, n)
            + temporaries
            + 2 * recursion.largest_gather as u128;
        if self.memory_words::<T>().is_some_and(|words| need > words) {
            return Ok(None);
        }
        Ok(Some((plan, recursion)))
    }

    /// C = A·B by Strassen or Winograd across the ranks, with A and B
    /// given whole on every rank, by `planned` (an executed plan's), else
    /// by the route [`Cluster::across_route`] finds now; `None`, touching
    /// nothing, where none is planned and it finds none. C comes back
    /// whole on rank 0.
    pub(super) fn matmul_across<T: Element>(
        &self,
        (a, b): (MatRef<'_, T>, MatRef<'_, T>),
        opts: &GemmOptions,
        planned: Option<&AcrossPlan>,
    ) -> Result<Option<Product<T>>, Error> {
        let Some(scheme) = Scheme::of(opts.algorithm) else {
            return Ok(None);
        };
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let parts = self.size();
        let found;
        let across = match planned {
            Some(across) => across,
            None => match self.across_route::<T>((m, k, n), opts)? {
                Some((_, across)) => {
                    found = across;
                    &found
                }
                None => return Ok(None),
            },
        };
        let (plan, recursion) = match across {
            AcrossPlan::BreadthFirst { group } => {
                return self.matmul_breadth_first(scheme, (a, b), opts, group.as_ref());
            }
            AcrossPlan::DepthFirst { plan, recursion } => (*plan, recursion),
        };
        let layout = recursion.layout;
        let me = self.rank();
        let rows = vec![[
            caps::rows_of(a, me, &layout),
            caps::rows_of(b, me, &layout),
            vec![T::ZERO; layout.local_rows(m, me) * n],
        ]];
        let base = GemmOptions {
            algorithm: crate::options::Algorithm::Packed,
            ..*opts
        };
        self.world.barrier();
        let start = std::time::Instant::now();
        let (mut c_rows, words, levels) = caps::run_held(
            (plan, layout),
            vec![me],
            rows,
            (m, k, n),
            (T::ONE, T::ZERO),
            &base,
            AllGather { world: &self.world },
        )?;
        let mine_ms = start.elapsed().as_secs_f64() * 1e3;
        let timing = self.timing_and_words(mine_ms, words[0] as u64);
        let mine = c_rows.pop().unwrap_or_default();
        let c = if me == 0 {
            let mut c = Matrix::try_zeros(m, n)?;
            for q in 0..parts {
                let data = if q == 0 {
                    mine.clone()
                } else {
                    let mut data = vec![T::ZERO; layout.local_rows(m, q) * n];
                    wire::receive(&self.world.process_at_rank(q as i32), &mut data);
                    data
                };
                for (first, at, height) in layout.chunks_of(m, q) {
                    for i in 0..height {
                        for j in 0..n {
                            c.set(first + i, j, data[(at + i) * n + j]);
                        }
                    }
                }
            }
            Some(c)
        } else {
            wire::send(&self.world.process_at_rank(0), &mine);
            None
        };
        let classical = self.decompose::<T>((m, k, n)).ok();
        let bound = classical.map_or(0.0, |p| p.lower_bound);
        Ok(Some((c, {
            let mut report = ClusterReport::measured((parts, 1, 1), parts, timing, bound);
            report.moved.levels_across = levels;
            report.error_growth = scheme.error_growth(levels);
            report
        })))
    }
}
