//! Rows spread over P processors in chunks, the layout of the fast
//! algorithms across processors (CAPS's depth-first steps, Ballard et al.,
//! SPAA 2012).
//!
//! Global row r belongs to processor (r div c) mod P, at its local row
//! (r div cP)·c + r mod c, for a chunk of c rows. Every matrix of the
//! recursion (A, B, C and the temporaries) is spread this way, with its
//! own row stride. A block whose first row and height are multiples of cP
//! is then rows R/P .. (R + H)/P of every processor, in the same order:
//! the recursion's sums are local, element for element, and only the
//! classical products at the leaves communicate (each processor gathers
//! the leaf's block of B and multiplies its own rows of A by it).
//!
//! [`recursion`] walks the recursion once without running it and finds
//! the largest chunk every block is aligned to, or says that none is.

use crate::element::Element;
use crate::error::Error;
use crate::strassen::backend::{Backend, Block};
use crate::strassen::engine::{self, Plan};

/// Rows in chunks of `chunk`, dealt round-robin to `parts` processors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowChunks {
    /// Processors.
    pub parts: usize,
    /// Rows per chunk.
    pub chunk: usize,
}

impl RowChunks {
    /// (processor, local row) of global row `r`.
    pub fn place(&self, r: usize) -> (usize, usize) {
        let t = r / self.chunk;
        (
            t % self.parts,
            (t / self.parts) * self.chunk + r % self.chunk,
        )
    }

    /// The chunks of a matrix of `rows` rows that processor `q` holds, as
    /// (first global row, first local row, rows), in local order.
    pub fn chunks_of(&self, rows: usize, q: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let (c, p) = (self.chunk, self.parts);
        (0..rows.div_ceil(c))
            .skip(q)
            .step_by(p)
            .map(move |t| (t * c, (t / p) * c, c.min(rows - t * c)))
    }

    /// Local rows of a matrix of `rows` global rows on processor `q`.
    pub fn local_rows(&self, rows: usize, q: usize) -> usize {
        self.chunks_of(rows, q).map(|(_, _, h)| h).sum()
    }

    /// The same block on every processor, in local rows (the block must
    /// be aligned: first row and height multiples of chunk·parts).
    pub fn local(&self, block: Block) -> Block {
        debug_assert!(block.row.is_multiple_of(self.chunk * self.parts));
        debug_assert!(block.rows.is_multiple_of(self.chunk * self.parts));
        Block {
            row: block.row / self.parts,
            rows: block.rows / self.parts,
            ..block
        }
    }
}

/// What a recursion across processors needs, found by walking it once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recursion {
    /// Levels it applies.
    pub levels: usize,
    /// The layout every block is aligned to (the largest chunk).
    pub layout: RowChunks,
    /// The temporaries' capacities, in elements of the whole matrices.
    pub capacities: Vec<usize>,
    /// Elements of the largest block of B a leaf product gathers.
    pub largest_gather: usize,
    /// Whether some gathered block spans more than one chunk per
    /// processor, so that its gathered rows need reordering.
    pub reorders: bool,
}

/// Records what the recursion names, running nothing.
struct Probe {
    gcd: usize,
    capacities: Vec<usize>,
    gathers: Vec<(usize, usize)>,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Probe {
    fn see(&mut self, block: &Block) {
        if block.rows > 0 && block.cols > 0 {
            self.gcd = gcd(gcd(self.gcd, block.row), block.rows);
        }
    }
}

impl<T: Element> Backend<T> for Probe {
    fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
        self.capacities = capacities.to_vec();
        Ok(())
    }

    fn gemm(&mut self, _: T, a: Block, b: Block, _: T, c: Block) -> Result<(), Error> {
        for block in [&a, &b, &c] {
            self.see(block);
        }
        if a.cols > 0 {
            self.gathers.push((b.rows, b.cols));
        }
        Ok(())
    }

    fn combine(&mut self, _: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
        self.see(&dst);
        for (_, block) in terms {
            self.see(block);
        }
        Ok(())
    }
}

/// The recursion of `plan` for an (m, k, n) product across `parts`
/// processors: `None` when it applies no level, or when no chunk aligns
/// every block it names to `parts` (an odd dimension peeled, say); m and k
/// must then be multiples of parts·2^levels at least.
pub(crate) fn recursion<T: Element>(
    plan: Plan,
    parts: usize,
    beta_is_zero: bool,
    (m, k, n): (usize, usize, usize),
) -> Option<Recursion> {
    if parts == 0 || m == 0 || k == 0 || n == 0 {
        return None;
    }
    let mut probe = Probe {
        gcd: gcd(m, k),
        capacities: Vec::new(),
        gathers: Vec::new(),
    };
    let beta = if beta_is_zero { T::ZERO } else { T::ONE };
    let report = engine::run::<T, Probe>(&mut probe, plan, T::ONE, beta, (m, k, n)).ok()?;
    if report.levels == 0 || !probe.gcd.is_multiple_of(parts) {
        return None;
    }
    let layout = RowChunks {
        parts,
        chunk: probe.gcd / parts,
    };
    Some(Recursion {
        levels: report.levels,
        layout,
        capacities: probe.capacities,
        largest_gather: probe.gathers.iter().map(|&(r, c)| r * c).max().unwrap_or(0),
        reorders: probe.gathers.iter().any(|&(r, _)| r != probe.gcd),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::DType;
    use crate::options::{Algorithm, GemmOptions, Variant};
    use crate::strassen::{Crossover, Scheme};

    fn plan(threshold: usize, depth: usize) -> Plan {
        let opts = GemmOptions::new(Algorithm::Winograd).depth(depth);
        crate::strassen::plan(
            Scheme::Winograd,
            Variant::Batched,
            Crossover {
                threshold,
                start: 0,
            },
            DType::F32,
            &opts,
            0,
        )
    }

    #[test]
    fn every_row_has_one_place_and_chunks_cover_the_rows() {
        for (parts, chunk, rows) in [(1, 1, 5), (3, 1, 10), (4, 2, 17), (2, 8, 32), (3, 4, 7)] {
            let layout = RowChunks { parts, chunk };
            let mut seen = vec![false; rows];
            for q in 0..parts {
                let mut next_local = 0;
                for (first, local, h) in layout.chunks_of(rows, q) {
                    assert_eq!(local, next_local, "local rows are dense");
                    next_local += h;
                    for i in 0..h {
                        assert_eq!(layout.place(first + i), (q, local + i));
                        assert!(!seen[first + i]);
                        seen[first + i] = true;
                    }
                }
                assert_eq!(layout.local_rows(rows, q), next_local);
            }
            assert!(seen.iter().all(|&s| s), "{parts} {chunk} {rows}");
        }
    }

    /// The reordering of a gathered block on GPUs: processor s's j-th
    /// chunk of an aligned block is the block's chunk j·P + s.
    #[test]
    fn a_processors_chunks_of_a_block_interleave() {
        let layout = RowChunks { parts: 3, chunk: 2 };
        let (first, height) = (12, 18);
        for s in 0..3 {
            let mine: Vec<usize> = (first..first + height)
                .filter(|&r| layout.place(r).0 == s)
                .collect();
            for (j, piece) in mine.chunks(2).enumerate() {
                assert_eq!(piece[0], first + (j * 3 + s) * 2);
                let local = layout.local(Block {
                    store: crate::strassen::backend::Store::B,
                    row: first,
                    col: 0,
                    rows: height,
                    cols: 1,
                });
                assert_eq!(layout.place(piece[0]).1, local.row + j * 2);
            }
        }
    }

    #[test]
    fn the_largest_aligned_chunk_is_found() {
        // 32768 on 4 processors, two levels: leaves of 8192 rows, so
        // chunks of 2048 and each gathered block one chunk per processor.
        let r = recursion::<f32>(plan(4096, 2), 4, true, (32768, 32768, 32768)).unwrap();
        assert_eq!((r.levels, r.layout.chunk, r.reorders), (2, 2048, false));
        assert_eq!(r.largest_gather, 8192 * 8192);
        // m = 2k: the gathered blocks of B are the shorter ones.
        let r = recursion::<f32>(plan(16, 2), 2, true, (128, 64, 64)).unwrap();
        assert_eq!((r.layout.chunk, r.reorders), (8, false));
        // A block taller than one chunk per processor needs reordering.
        let r = recursion::<f32>(plan(16, 1), 2, true, (64, 128, 64)).unwrap();
        assert_eq!((r.layout.chunk, r.reorders), (16, true));
        // The self-test's team shapes on 2, 3 and 4 processors.
        for parts in 2..=4 {
            // A peeled column multiplies a taller block of B: reordered.
            let shapes = [
                ((96, 48, 50), true),
                ((96, 48, 64), false),
                ((48, 96, 40), true),
            ];
            for (shape, reorders) in shapes {
                let r = recursion::<f32>(plan(16, 2), parts, false, shape).unwrap();
                assert_eq!(
                    (r.levels, r.reorders),
                    (2, reorders),
                    "{shape:?} on {parts}"
                );
            }
        }
        // An odd dimension peeled, too few rows, or no level: none.
        assert!(recursion::<f32>(plan(16, 2), 4, true, (66, 64, 64)).is_none());
        assert!(recursion::<f32>(plan(16, 3), 3, true, (64, 64, 64)).is_none());
        assert!(recursion::<f32>(plan(1024, 2), 2, true, (64, 64, 64)).is_none());
    }
}
