//! The distributed classical product of a [`Decomposition`] as plain data: where
//! each worker's pieces of A, B and C lie ([`Layout`]), and the steps of
//! broadcasts, local products and reductions that compute C = A·B from
//! them ([`Schedule`]). Every backend (the CPU standing in for every
//! processor, GPUs through NCCL, MPI ranks) runs the same schedule; this
//! module names none of them.
//!
//! **Pieces.** Worker (x, y, z) of the grid holds A[R_x, D_z,y],
//! B[D_z,x, C_y] and, at the end, C[R_x,z, C_y], each as one contiguous
//! row-major matrix: R_x, C_y and D_z are the planner's parts of m, n and
//! k, D_z,y is part y of D_z cut in pn, D_z,x part x of D_z cut in pm, and
//! R_x,z part z of R_x cut in pk (see [`super::planner`]).
//!
//! **Steps.** D_z is cut at both cuts (A's into pn, B's into pm); each
//! such sub-range is one step. At a step, the piece of A (of B) that the
//! sub-range lies in is broadcast to its row group (column group) if this
//! is its first sub-range, and every worker adds A[R_x, sub]·B[sub, C_y]
//! into its block of C. Broadcasts land in whole-block buffers (a gathered
//! A block, a gathered B block) at fixed offsets, so no step overwrites
//! what another reads: a backend may run step s + 1's communication while
//! step s multiplies. With pk > 1 the blocks are partial sums, reduced
//! over the depth group at the end, row part z to worker (x, y, z).

use std::ops::Range;

use crate::distributed::planner::{part, Decomposition, Grid};

/// A buffer every worker may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Store {
    /// Its piece of A.
    A,
    /// Its piece of B.
    B,
    /// Its piece of C (the output).
    C,
    /// Its row group's block of A, gathered (pn > 1): the pieces side by
    /// side, piece y' at offset rows·start(D_z,y'), each contiguous.
    GatherA,
    /// Its column group's block of B, gathered (pm > 1): one row-major
    /// matrix, piece x' at its rows.
    GatherB,
    /// Its partial sum of C's block (pk > 1).
    Partial,
}

/// A rows×cols row-major block inside one worker's store: element (i, j)
/// at `offset + i·ld + j`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// The store.
    pub store: Store,
    /// Element offset of (0, 0).
    pub offset: usize,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row stride (≥ cols).
    pub ld: usize,
}

impl Region {
    fn whole(store: Store, rows: usize, cols: usize) -> Region {
        Region {
            store,
            offset: 0,
            rows,
            cols,
            ld: cols,
        }
    }

    /// Its elements.
    pub fn elements(&self) -> usize {
        self.rows * self.cols
    }

    /// The elements it reaches past `offset`: offset + the span.
    pub fn end(&self) -> usize {
        match self.rows {
            0 => self.offset,
            r => self.offset + (r - 1) * self.ld + self.cols,
        }
    }
}

/// The part of a global matrix one worker holds, as one contiguous
/// row-major matrix (empty ranges for a worker that holds none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Its rows of the global matrix.
    pub rows: Range<usize>,
    /// Its columns.
    pub cols: Range<usize>,
}

impl Piece {
    /// Its elements.
    pub fn elements(&self) -> usize {
        self.rows.len() * self.cols.len()
    }
}

/// How one matrix is spread: a piece per processor, idle ones empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The global matrix's rows.
    pub rows: usize,
    /// Its columns.
    pub cols: usize,
    /// By rank.
    pub pieces: Vec<Piece>,
}

/// One operation of a [`Schedule`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Every member of `group` but `root` receives `root`'s `src` into its
    /// `dst` (both contiguous, of one length; the root keeps its own).
    Broadcast {
        /// The ranks taking part, in group order.
        group: Vec<usize>,
        /// The sending rank.
        root: usize,
        /// What it sends.
        src: Region,
        /// Where the others put it.
        dst: Region,
    },
    /// On `rank`: c ← a·b, or c ← c + a·b when `accumulate`.
    Gemm {
        /// The worker.
        rank: usize,
        /// Left operand.
        a: Region,
        /// Right operand.
        b: Region,
        /// Output.
        c: Region,
        /// Add into c rather than overwrite it.
        accumulate: bool,
    },
    /// `root`'s `dst` ← the sum over `group` of each member's `src` (both
    /// contiguous, of one length).
    Reduce {
        /// The ranks taking part, in group order.
        group: Vec<usize>,
        /// The receiving rank.
        root: usize,
        /// What each member contributes.
        src: Region,
        /// Where the sum goes.
        dst: Region,
    },
}

impl Op {
    /// Words each rank receives by this operation, as (rank, words).
    pub fn received(&self) -> Vec<(usize, u128)> {
        match self {
            Op::Broadcast {
                group, root, dst, ..
            } => group
                .iter()
                .filter(|&&r| r != *root)
                .map(|&r| (r, dst.elements() as u128))
                .collect(),
            Op::Reduce {
                group, root, src, ..
            } => vec![(*root, (group.len() as u128 - 1) * src.elements() as u128)],
            Op::Gemm { .. } => Vec::new(),
        }
    }
}

/// One step: its communication, then the products that need it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// Broadcasts (run together, as one group of collectives).
    pub comm: Vec<Op>,
    /// Local products, each after this and every earlier step's
    /// communication.
    pub compute: Vec<Op>,
}

/// The distributed product of a [`Decomposition`].
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The decomposition it runs.
    pub plan: Decomposition,
    /// Where A lies.
    pub a: Layout,
    /// Where B lies.
    pub b: Layout,
    /// Where C ends.
    pub c: Layout,
    /// Elements of each store (indexed by `Store as usize`), by rank.
    pub sizes: Vec<[usize; 6]>,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Reductions after every step's products (pk > 1).
    pub finish: Vec<Op>,
}

impl Schedule {
    /// Elements of `store` on `rank`.
    pub fn size(&self, rank: usize, store: Store) -> usize {
        self.sizes[rank][store as usize]
    }

    /// Words each rank receives over the whole product.
    pub fn received(&self) -> Vec<u128> {
        let mut words = vec![0u128; self.plan.processors];
        let ops = self.steps.iter().flat_map(|s| s.comm.iter());
        for op in ops.chain(self.finish.iter()) {
            for (rank, w) in op.received() {
                words[rank] += w;
            }
        }
        words
    }

    /// Every operation, in an order that respects the dependencies (a
    /// backend that runs one thing at a time runs them so).
    pub fn in_order(&self) -> impl Iterator<Item = &Op> {
        self.steps
            .iter()
            .flat_map(|s| s.comm.iter().chain(s.compute.iter()))
            .chain(self.finish.iter())
    }
}

/// A worker's grid position.
fn position(grid: Grid, rank: usize) -> (usize, usize, usize) {
    (
        rank / (grid.pn * grid.pk),
        rank / grid.pk % grid.pn,
        rank % grid.pk,
    )
}

/// Its rank.
fn rank_of(grid: Grid, (x, y, z): (usize, usize, usize)) -> usize {
    (x * grid.pn + y) * grid.pk + z
}

/// Sub-range `r` of `range` cut in `parts`, in global coordinates.
fn sub(range: &Range<usize>, parts: usize, r: usize) -> Range<usize> {
    let p = part(range.len(), parts, r);
    range.start + p.start..range.start + p.end
}

/// Which of `parts` parts of `len` holds offset `at`.
fn owner(len: usize, parts: usize, at: usize) -> usize {
    (0..parts)
        .find(|&r| part(len, parts, r).contains(&at))
        .expect("an offset inside the range lies in one part")
}

/// The schedule of `plan`. The plan's m, k and n are at least 1 (an empty
/// product is the boundary's).
pub fn build(plan: &Decomposition) -> Schedule {
    let (m, k, n) = plan.shape;
    debug_assert!(m > 0 && k > 0 && n > 0, "empty products do not distribute");
    let grid = plan.grid;
    let procs = plan.processors;
    let empty = Piece {
        rows: 0..0,
        cols: 0..0,
    };
    let mut a = vec![empty.clone(); procs];
    let mut b = vec![empty.clone(); procs];
    let mut c = vec![empty; procs];
    let mut sizes = vec![[0usize; 6]; procs];
    for rank in 0..grid.processors() {
        let (x, y, z) = position(grid, rank);
        let rows = part(m, grid.pm, x);
        let cols = part(n, grid.pn, y);
        let depth = part(k, grid.pk, z);
        a[rank] = Piece {
            rows: rows.clone(),
            cols: sub(&depth, grid.pn, y),
        };
        b[rank] = Piece {
            rows: sub(&depth, grid.pm, x),
            cols: cols.clone(),
        };
        c[rank] = Piece {
            rows: sub(&rows, grid.pk, z),
            cols: cols.clone(),
        };
        let (r, w, d) = (rows.len(), cols.len(), depth.len());
        let size = &mut sizes[rank];
        size[Store::A as usize] = a[rank].elements();
        size[Store::B as usize] = b[rank].elements();
        size[Store::C as usize] = c[rank].elements();
        size[Store::GatherA as usize] = if grid.pn > 1 { r * d } else { 0 };
        size[Store::GatherB as usize] = if grid.pm > 1 { d * w } else { 0 };
        size[Store::Partial as usize] = if grid.pk > 1 { r * w } else { 0 };
    }

    let mut steps: Vec<Step> = Vec::new();
    for z in 0..grid.pk {
        let depth = part(k, grid.pk, z);
        let d = depth.len();
        let mut cuts: Vec<usize> = (0..grid.pn)
            .map(|i| part(d, grid.pn, i).start)
            .chain((0..grid.pm).map(|i| part(d, grid.pm, i).start))
            .chain([d])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        for (s, cut) in cuts.windows(2).enumerate() {
            let (lo, hi) = (cut[0], cut[1]);
            if steps.len() <= s {
                steps.push(Step::default());
            }
            let step = &mut steps[s];
            let ya = owner(d, grid.pn, lo);
            let xb = owner(d, grid.pm, lo);
            let pa = part(d, grid.pn, ya);
            let pb = part(d, grid.pm, xb);
            for x in 0..grid.pm {
                let r = part(m, grid.pm, x).len();
                if grid.pn > 1 && lo == pa.start {
                    step.comm.push(Op::Broadcast {
                        group: (0..grid.pn).map(|y| rank_of(grid, (x, y, z))).collect(),
                        root: rank_of(grid, (x, ya, z)),
                        src: Region::whole(Store::A, r, pa.len()),
                        dst: Region {
                            offset: r * pa.start,
                            ..Region::whole(Store::GatherA, r, pa.len())
                        },
                    });
                }
            }
            for y in 0..grid.pn {
                let w = part(n, grid.pn, y).len();
                if grid.pm > 1 && lo == pb.start {
                    step.comm.push(Op::Broadcast {
                        group: (0..grid.pm).map(|x| rank_of(grid, (x, y, z))).collect(),
                        root: rank_of(grid, (xb, y, z)),
                        src: Region::whole(Store::B, pb.len(), w),
                        dst: Region {
                            offset: pb.start * w,
                            ..Region::whole(Store::GatherB, pb.len(), w)
                        },
                    });
                }
            }
            for x in 0..grid.pm {
                for y in 0..grid.pn {
                    let r = part(m, grid.pm, x).len();
                    let w = part(n, grid.pn, y).len();
                    let left = if grid.pn == 1 || ya == y {
                        Region {
                            store: Store::A,
                            offset: lo - pa.start,
                            rows: r,
                            cols: hi - lo,
                            ld: pa.len(),
                        }
                    } else {
                        Region {
                            store: Store::GatherA,
                            offset: r * pa.start + (lo - pa.start),
                            rows: r,
                            cols: hi - lo,
                            ld: pa.len(),
                        }
                    };
                    let right = if grid.pm == 1 || xb == x {
                        Region {
                            store: Store::B,
                            offset: (lo - pb.start) * w,
                            rows: hi - lo,
                            cols: w,
                            ld: w,
                        }
                    } else {
                        Region {
                            store: Store::GatherB,
                            offset: lo * w,
                            rows: hi - lo,
                            cols: w,
                            ld: w,
                        }
                    };
                    let out = if grid.pk > 1 {
                        Store::Partial
                    } else {
                        Store::C
                    };
                    step.compute.push(Op::Gemm {
                        rank: rank_of(grid, (x, y, z)),
                        a: left,
                        b: right,
                        c: Region::whole(out, r, w),
                        accumulate: s > 0,
                    });
                }
            }
        }
    }

    let mut finish = Vec::new();
    if grid.pk > 1 {
        for x in 0..grid.pm {
            for y in 0..grid.pn {
                let r = part(m, grid.pm, x).len();
                let w = part(n, grid.pn, y).len();
                for z in 0..grid.pk {
                    let rows = part(r, grid.pk, z);
                    if rows.is_empty() {
                        continue;
                    }
                    finish.push(Op::Reduce {
                        group: (0..grid.pk).map(|z| rank_of(grid, (x, y, z))).collect(),
                        root: rank_of(grid, (x, y, z)),
                        src: Region {
                            offset: rows.start * w,
                            ..Region::whole(Store::Partial, rows.len(), w)
                        },
                        dst: Region::whole(Store::C, rows.len(), w),
                    });
                }
            }
        }
    }

    let layout = |rows, cols, pieces| Layout { rows, cols, pieces };
    Schedule {
        plan: plan.clone(),
        a: layout(m, k, a),
        b: layout(k, n, b),
        c: layout(m, n, c),
        sizes,
        steps,
        finish,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::planner::{plan, worker_cost};

    fn shapes() -> Vec<(usize, usize, usize)> {
        vec![
            (1, 1, 1),
            (2, 3, 5),
            (7, 5, 3),
            (17, 31, 13),
            (40, 3, 40),
            (3, 40, 3),
            (64, 64, 64),
            (1, 97, 1),
        ]
    }

    /// Every region lies inside its store, and the pieces of each matrix
    /// tile it exactly.
    #[test]
    fn regions_fit_and_pieces_tile() {
        for shape in shapes() {
            for p in 1..=9 {
                let s = build(&plan(shape, p, None).unwrap());
                let fits = |rank: usize, r: &Region| {
                    assert!(r.cols <= r.ld || r.rows <= 1, "{r:?}");
                    assert!(r.end() <= s.size(rank, r.store), "{shape:?} {p} {r:?}");
                };
                for op in s.in_order() {
                    match op {
                        Op::Broadcast {
                            group,
                            root,
                            src,
                            dst,
                        } => {
                            assert_eq!(src.elements(), dst.elements());
                            assert!(group.contains(root));
                            fits(*root, src);
                            group
                                .iter()
                                .filter(|&r| r != root)
                                .for_each(|&r| fits(r, dst));
                        }
                        Op::Reduce {
                            group,
                            root,
                            src,
                            dst,
                        } => {
                            assert_eq!(src.elements(), dst.elements());
                            assert!(group.contains(root));
                            group.iter().for_each(|&r| fits(r, src));
                            fits(*root, dst);
                        }
                        Op::Gemm { rank, a, b, c, .. } => {
                            assert_eq!((a.rows, a.cols, b.cols), (c.rows, b.rows, c.cols));
                            for r in [a, b, c] {
                                fits(*rank, r);
                            }
                        }
                    }
                }
                for layout in [&s.a, &s.b, &s.c] {
                    let mut count = vec![0u8; layout.rows * layout.cols];
                    for piece in &layout.pieces {
                        for i in piece.rows.clone() {
                            for j in piece.cols.clone() {
                                count[i * layout.cols + j] += 1;
                            }
                        }
                    }
                    assert!(count.iter().all(|&c| c == 1), "{shape:?} on {p}");
                }
            }
        }
    }

    /// The words the operations move are the planner's, rank by rank.
    #[test]
    fn received_words_match_the_planner() {
        for shape in shapes().into_iter().chain([(32768, 32768, 32768)]) {
            for p in 1..=9 {
                let pl = plan(shape, p, None).unwrap();
                let s = build(&pl);
                let words = s.received();
                for (rank, &w) in words.iter().enumerate() {
                    let expected = if rank < pl.grid.processors() {
                        worker_cost(shape, pl.grid, position(pl.grid, rank)).0
                    } else {
                        0
                    };
                    assert_eq!(w, expected, "{shape:?} on {p}, rank {rank}");
                }
                assert_eq!(words.iter().max().copied(), Some(pl.words_per_processor));
                assert_eq!(words.iter().sum::<u128>(), pl.total_words);
            }
        }
    }
}
