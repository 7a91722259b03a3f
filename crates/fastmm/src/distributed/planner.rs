//! The decomposition planner: how C = A·B (A m×k, B k×n) is cut over P
//! processors, chosen to move the fewest words, as COSMA does
//! (Kwasniewski et al., SC'19), rather than fixed to a √P×√P grid.
//!
//! **The decomposition.** A grid pm × pn × pk (using pm·pn·pk ≤ P
//! processors) cuts the iteration space {(i, j, l)} of
//! C[i, j] = Σ_l A[i, l]·B[l, j] into boxes: processor (x, y, z)
//! computes rows x, columns y and depth slice z of it, that is the partial
//! product A[x, z]·B[z, y] of C's block (x, y). pk = 1 is the 2D
//! decomposition (SUMMA's), pm = pn = 1 the 1D one over k, and pk > 1 with
//! pm, pn > 1 the 2.5D/3D ones.
//!
//! **The layout and the words moved.** Only the G = pm·pn·pk workers hold
//! data. A's block (x, z) (rows x, depth slice z) is cut along its depth
//! into pn pieces, piece y held by worker (x, y, z); B's block (z, y) is
//! cut along its depth into pm pieces, piece x held by worker (x, y, z).
//! The product broadcasts each piece to the other users of its block (the
//! row group (x, ·, z) for A, the column group (·, y, z) for B), and
//! reduces the pk partial sums of C's block (x, y) over the depth group
//! (x, y, ·), row part z to worker (x, y, z), where C ends. A worker
//! (x, y, z) with an r×c block of C and a depth slice of d receives
//!
//! Q = r·(d − d_y) + c·(d − d_x) + (pk − 1)·r_z·c
//!
//! words (d_y, d_x: its own pieces' depths; r_z: its rows of C), and holds
//! its pieces, the gathered blocks (r·d when pn > 1, d·c when pm > 1), the
//! partial sum (r·c when pk > 1) and its part of C.
//!
//! **Idle processors.** A grid may leave processors idle when that moves
//! fewer words, as COSMA allows, but never more than a fraction
//! [`MAX_IDLE_FRACTION`] of the most the shape can use: an idle processor
//! costs its share of the arithmetic.
//!
//! **The lower bound** (Kwasniewski et al., after Hong and Kung): any
//! schedule on P processors with S words each, starting from a balanced
//! layout, receives per processor at least
//!
//! Q* = 2mnk/(P√S') + S' − (mn + mk + nk)/P, S' = min{S, (mnk/P)^{2/3}}
//!
//! words (0 when negative; with unlimited memory, 3·(mnk/P)^{2/3} less the
//! initial data), P being the workers of the plan's grid. The
//! planner reports both, so every plan's distance from the bound is a
//! number.

use std::ops::Range;

use crate::error::Error;

/// A processor grid: rows of C × columns of C × slices of the depth k.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Parts of m.
    pub pm: usize,
    /// Parts of n.
    pub pn: usize,
    /// Parts of k.
    pub pk: usize,
}

impl Grid {
    /// Processors it uses: pm·pn·pk.
    pub fn processors(self) -> usize {
        self.pm * self.pn * self.pk
    }
}

/// What one processor computes: C[rows, cols] += A[rows, depth]·B[depth, cols].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The processor (0-based; its grid position is (x, y, z) with
    /// rank = (x·pn + y)·pk + z).
    pub rank: usize,
    /// Rows of A and C.
    pub rows: Range<usize>,
    /// Columns of B and C.
    pub cols: Range<usize>,
    /// The slice of k.
    pub depth: Range<usize>,
}

/// A distributed product's decomposition and its cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Decomposition {
    /// (m, k, n).
    pub shape: (usize, usize, usize),
    /// Processors available.
    pub processors: usize,
    /// The grid chosen (it may leave processors idle).
    pub grid: Grid,
    /// Each working processor's box, by rank.
    pub assignments: Vec<Assignment>,
    /// Words the busiest processor receives (see the module's formula).
    pub words_per_processor: u128,
    /// Words all processors receive together.
    pub total_words: u128,
    /// The most words a processor holds at once.
    pub memory_words: u128,
    /// The lower bound Q* on the words per processor for the workers the
    /// grid uses (see the module).
    pub lower_bound: f64,
}

impl Decomposition {
    /// words_per_processor / lower_bound (1 when both are 0; ∞ when only
    /// the bound is).
    pub fn bound_ratio(&self) -> f64 {
        bound_ratio(self.words_per_processor, self.lower_bound)
    }
}

/// `words` / `bound`: 1 when both are 0, ∞ when only the bound is.
pub fn bound_ratio(words: u128, bound: f64) -> f64 {
    match (words, bound) {
        (0, _) => 1.0,
        (_, b) if b <= 0.0 => f64::INFINITY,
        (q, b) => q as f64 / b,
    }
}

/// Part r of `len` cut in `parts` (sizes differ by at most one).
pub fn part(len: usize, parts: usize, r: usize) -> Range<usize> {
    let cut = |i: usize| (len as u128 * i as u128 / parts as u128) as usize;
    cut(r)..cut(r + 1)
}

/// The lower bound Q* (words per processor) for (m, k, n) on `processors`
/// with `memory` words each (`None`: unlimited).
pub fn lower_bound(
    (m, k, n): (usize, usize, usize),
    processors: usize,
    memory: Option<u128>,
) -> f64 {
    let (m, k, n, p) = (m as f64, k as f64, n as f64, processors.max(1) as f64);
    // The cube a processor would hold with unlimited memory; more memory
    // than that does not help, less forces more traffic.
    let cube = (m * n * k / p).powf(2.0 / 3.0);
    let s = memory.map_or(cube, |s| (s as f64).min(cube));
    if s <= 0.0 {
        return 0.0;
    }
    (2.0 * m * n * k / (p * s.sqrt()) + s - (m * n + m * k + n * k) / p).max(0.0)
}

/// The most processors a grid may leave idle, as a fraction of the most
/// the shape can use (1/8: on 7 processors every one works; on 13 a
/// 12-worker grid may win).
pub const MAX_IDLE_FRACTION: (usize, usize) = (1, 8);

/// (words received, words held) of worker (x, y, z) of `grid` (see the
/// module's formulas).
pub fn worker_cost(
    (m, k, n): (usize, usize, usize),
    grid: Grid,
    (x, y, z): (usize, usize, usize),
) -> (u128, u128) {
    let r = part(m, grid.pm, x).len() as u128;
    let c = part(n, grid.pn, y).len() as u128;
    let depth = part(k, grid.pk, z).len();
    let d = depth as u128;
    let own_a = r * part(depth, grid.pn, y).len() as u128;
    let own_b = c * part(depth, grid.pm, x).len() as u128;
    let rows_c = part(r as usize, grid.pk, z).len() as u128;
    let received = (r * d - own_a) + (c * d - own_b) + (grid.pk as u128 - 1) * rows_c * c;
    let gathered = if grid.pn > 1 { r * d } else { 0 } + if grid.pm > 1 { d * c } else { 0 };
    let partial = if grid.pk > 1 { r * c } else { 0 };
    (received, own_a + own_b + gathered + partial + rows_c * c)
}

/// (words received, words held) of `grid`'s busiest worker in each.
fn cost(shape: (usize, usize, usize), grid: Grid) -> (u128, u128) {
    let mut worst = (0, 0);
    for x in 0..grid.pm {
        for y in 0..grid.pn {
            for z in 0..grid.pk {
                let (words, held) = worker_cost(shape, grid, (x, y, z));
                worst = (worst.0.max(words), worst.1.max(held));
            }
        }
    }
    worst
}

/// Every grid of at most `processors` workers that (m, k, n) can use (no
/// part empty) and that leaves at most [`MAX_IDLE_FRACTION`] of the usable
/// processors idle.
pub fn candidate_grids((m, k, n): (usize, usize, usize), processors: usize) -> Vec<Grid> {
    let mut grids = Vec::new();
    for pm in 1..=processors.min(m.max(1)) {
        for pn in 1..=(processors / pm).min(n.max(1)) {
            for pk in 1..=(processors / (pm * pn)).min(k.max(1)) {
                grids.push(Grid { pm, pn, pk });
            }
        }
    }
    let most = grids.iter().map(|g| g.processors()).max().unwrap_or(1);
    let (idle, of) = MAX_IDLE_FRACTION;
    let least = most - most * idle / of;
    grids.retain(|g| g.processors() >= least);
    grids
}

/// The grid that moves the fewest words for (m, k, n) on `processors`,
/// within `memory` words per processor (`None`: unlimited); ties go to the
/// grid that uses more processors, then to fewer depth slices (each adds
/// a reduction), then to the squarer blocks.
///
/// # Errors
/// [`Error::InvalidOption`] for no processors, and
/// [`Error::OutOfMemory`] when no grid's blocks fit `memory`.
pub fn plan(
    shape: (usize, usize, usize),
    processors: usize,
    memory: Option<u128>,
) -> Result<Decomposition, Error> {
    if processors == 0 {
        return Err(Error::InvalidOption(
            "a distributed product needs at least one processor".into(),
        ));
    }
    let (m, k, n) = shape;
    let mut best: Option<(Grid, u128, u128)> = None;
    let mut least_held = u128::MAX;
    for grid in candidate_grids(shape, processors) {
        let (words, held) = cost(shape, grid);
        least_held = least_held.min(held);
        if memory.is_some_and(|s| held > s) {
            continue;
        }
        let key = |g: Grid, w: u128| {
            let (r, c) = (part(m, g.pm, 0).len(), part(n, g.pn, 0).len());
            (w, usize::MAX - g.processors(), g.pk, r.abs_diff(c))
        };
        if best.is_none_or(|(g, w, _)| key(grid, words) < key(g, w)) {
            best = Some((grid, words, held));
        }
    }
    let Some((grid, words, held)) = best else {
        return Err(Error::OutOfMemory {
            what: format!("a {m}×{k}×{n} product on {processors} processors"),
            needed: format!("{least_held} words on each of them at best"),
            available: format!("{} words each", memory.unwrap_or(0)),
        });
    };
    let mut assignments = Vec::with_capacity(grid.processors());
    for x in 0..grid.pm {
        for y in 0..grid.pn {
            for z in 0..grid.pk {
                assignments.push(Assignment {
                    rank: (x * grid.pn + y) * grid.pk + z,
                    rows: part(m, grid.pm, x),
                    cols: part(n, grid.pn, y),
                    depth: part(k, grid.pk, z),
                });
            }
        }
    }
    let total_words = assignments
        .iter()
        .map(|a| {
            let z = a.rank % grid.pk;
            let y = a.rank / grid.pk % grid.pn;
            let x = a.rank / (grid.pk * grid.pn);
            worker_cost(shape, grid, (x, y, z)).0
        })
        .sum();
    Ok(Decomposition {
        shape,
        processors,
        grid,
        assignments,
        words_per_processor: words,
        total_words,
        memory_words: held,
        lower_bound: lower_bound(shape, grid.processors(), memory),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (i, j, l) of the iteration space lies in exactly one box.
    fn assert_partition(plan: &Decomposition) {
        let (m, k, n) = plan.shape;
        let mut count = vec![0u8; m * n * k];
        for a in &plan.assignments {
            for i in a.rows.clone() {
                for j in a.cols.clone() {
                    for l in a.depth.clone() {
                        count[(i * n + j) * k + l] += 1;
                    }
                }
            }
        }
        assert!(count.iter().all(|&c| c == 1), "{plan:?}");
        let mut ranks: Vec<usize> = plan.assignments.iter().map(|a| a.rank).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..plan.grid.processors()).collect::<Vec<_>>());
        assert!(plan.grid.processors() <= plan.processors);
    }

    #[test]
    fn every_element_of_c_is_computed_exactly_once() {
        for (m, k, n) in [
            (1, 1, 1),
            (7, 5, 3),
            (17, 31, 13),
            (40, 3, 40),
            (3, 40, 3),
            (0, 4, 4),
            (4, 0, 4),
        ] {
            for processors in 1..=12 {
                let plan = plan((m, k, n), processors, None).unwrap();
                assert_partition(&plan);
                assert!(
                    plan.words_per_processor as f64 >= plan.lower_bound - 1e-9,
                    "{plan:?}"
                );
            }
        }
    }

    #[test]
    fn the_grid_follows_the_shape() {
        let grid = |shape, p| plan(shape, p, None).unwrap().grid;
        // Square: 2D for 4, 3D for 8.
        assert_eq!(
            grid((4096, 4096, 4096), 4),
            Grid {
                pm: 2,
                pn: 2,
                pk: 1
            }
        );
        assert_eq!(
            grid((4096, 4096, 4096), 8),
            Grid {
                pm: 2,
                pn: 2,
                pk: 2
            }
        );
        // Large C, small k: split C only. Small C, large k: split k only.
        assert_eq!(
            grid((65536, 512, 65536), 4),
            Grid {
                pm: 2,
                pn: 2,
                pk: 1
            }
        );
        assert_eq!(
            grid((512, 65536, 512), 4),
            Grid {
                pm: 1,
                pn: 1,
                pk: 4
            }
        );
        // Tall and skinny: split the rows.
        assert_eq!(
            grid((65536, 512, 512), 4),
            Grid {
                pm: 4,
                pn: 1,
                pk: 1
            }
        );
    }

    #[test]
    fn volumes_against_the_lower_bound() {
        let n = 32768;
        // On 8, the 2×2×2 grid meets the bound; on 4 the 2×2 one is
        // within 1.2×; on 2 no grid is (the bound is loose for small P).
        let ratio = |p| plan((n, n, n), p, None).unwrap().bound_ratio();
        assert!((ratio(8) - 1.0).abs() < 1e-6, "{}", ratio(8));
        assert!(ratio(4) <= 1.2, "{}", ratio(4));
        assert!(ratio(2) > 1.2 && ratio(2) < 1.3, "{}", ratio(2));
        // Memory beyond (mnk/P)^{2/3} words does not lower the bound (a
        // GPU's 35 Gwords once made it 0 for this shape).
        let unlimited = lower_bound((n, n, n), 2, None);
        for words in [1u128 << 30, 35 << 30, 1 << 40] {
            assert_eq!(lower_bound((n, n, n), 2, Some(words)), unlimited);
        }
        assert!(lower_bound((n, n, n), 2, Some(1 << 20)) > unlimited);
        // Exact words on 4 processors, 2×2: each worker holds half of its
        // n/2 × n block of A and of its n × n/2 block of B, and receives
        // the other halves.
        let four = plan((n, n, n), 4, None).unwrap();
        let quarter = (n as u128 * n as u128) / 4;
        assert_eq!(four.words_per_processor, 2 * quarter);
        assert_eq!(four.total_words, 8 * quarter);
    }

    #[test]
    fn memory_limits_the_grid() {
        let n = 8192;
        // The 2×2×2 grid's blocks are also the smallest any grid of 8 has:
        // with exactly its memory the plan stands, with a word less
        // nothing fits, which is a typed error rather than a plan.
        let free = plan((n, n, n), 8, None).unwrap();
        assert_eq!(
            plan((n, n, n), 8, Some(free.memory_words)).unwrap(),
            Decomposition {
                lower_bound: lower_bound(
                    (n, n, n),
                    free.grid.processors(),
                    Some(free.memory_words)
                ),
                ..free.clone()
            }
        );
        assert!(matches!(
            plan((n, n, n), 8, Some(free.memory_words - 1)),
            Err(Error::OutOfMemory { .. })
        ));
        // Under any limit, the plan fits it and moves no more than any grid
        // that fits (checked against every candidate grid).
        for (shape, p) in [
            ((37, 41, 43), 8),
            ((200, 30, 200), 5),
            ((64, 4096, 64), 6),
            ((9, 9, 9), 12),
        ] {
            let free = plan(shape, p, None).unwrap();
            for limit in [
                free.memory_words,
                free.memory_words * 2,
                free.memory_words * 9 / 10,
            ] {
                let fitting = (1..=p)
                    .flat_map(|pm| {
                        (1..=p).flat_map(move |pn| (1..=p).map(move |pk| Grid { pm, pn, pk }))
                    })
                    .filter(|g| candidate_grids(shape, p).contains(g))
                    .map(|g| cost(shape, g))
                    .filter(|&(_, held)| held <= limit)
                    .map(|(words, _)| words)
                    .min();
                match (plan(shape, p, Some(limit)), fitting) {
                    (Ok(tight), Some(best)) => {
                        assert!(tight.memory_words <= limit);
                        assert_eq!(tight.words_per_processor, best, "{shape:?} on {p}, {limit}");
                        assert_partition(&tight);
                    }
                    (Err(Error::OutOfMemory { .. }), None) => {}
                    (outcome, best) => {
                        panic!("{shape:?} on {p}, {limit}: {outcome:?} against {best:?}")
                    }
                }
            }
        }

        assert!(matches!(
            plan((4, 4, 4), 0, None),
            Err(Error::InvalidOption(_))
        ));
    }

    #[test]
    fn parts_are_balanced_and_contiguous() {
        for len in [0, 1, 7, 100, 101] {
            for parts in 1..=9 {
                let pieces: Vec<_> = (0..parts).map(|r| part(len, parts, r)).collect();
                assert_eq!(pieces[0].start, 0);
                assert_eq!(pieces[parts - 1].end, len);
                assert!(pieces.windows(2).all(|w| w[0].end == w[1].start));
                let (min, max) = pieces.iter().fold((usize::MAX, 0), |(lo, hi), p| {
                    (lo.min(p.len()), hi.max(p.len()))
                });
                assert!(max - min <= 1);
            }
        }
    }
}
