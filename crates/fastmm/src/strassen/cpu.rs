//! The CPU backend: `packed` for the classical products, row-parallel loops
//! for the linear combinations, and one heap buffer per temporary.

use std::marker::PhantomData;

use rayon::prelude::*;

use crate::algo::{Algorithm, GemmOptions};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::packed;
use crate::packed::workspace::{Pool, Workspace};
use crate::strassen::backend::{Backend, Block, Combination, Store};
use crate::tunables::{STRASSEN_GROUP_SPAN_BYTES, STRASSEN_PARALLEL_MIN_ELEMENTS};

/// Raw address and strides of a block, shareable across the pool's
/// threads (the recursion keeps destinations and sources disjoint).
#[derive(Clone, Copy)]
struct Raw<T> {
    ptr: *mut T,
    row_stride: usize,
    col_stride: usize,
}

// SAFETY: a Raw is only dereferenced inside `combine`, where each thread
// writes its own rows of a destination no source overlaps.
unsafe impl<T: Send> Send for Raw<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Raw<T> {}

/// A, B and C of one product, the temporaries, and how to run the classical
/// products.
pub(crate) struct CpuBackend<'a, T: Element> {
    a: Raw<T>,
    b: Raw<T>,
    c: Raw<T>,
    /// One per-thread reusable allocation holding every temporary.
    workspace: Option<Workspace>,
    temps: Vec<Raw<T>>,
    base: GemmOptions,
    _borrows: PhantomData<(MatRef<'a, T>, MatMut<'a, T>)>,
}

impl<'a, T: Element> CpuBackend<'a, T> {
    pub(crate) fn new(
        a: MatRef<'a, T>,
        b: MatRef<'a, T>,
        mut c: MatMut<'a, T>,
        base: GemmOptions,
    ) -> Self {
        CpuBackend {
            a: Raw {
                ptr: a.as_ptr().cast_mut(),
                row_stride: a.row_stride(),
                col_stride: a.col_stride(),
            },
            b: Raw {
                ptr: b.as_ptr().cast_mut(),
                row_stride: b.row_stride(),
                col_stride: b.col_stride(),
            },
            c: Raw {
                ptr: c.as_mut_ptr(),
                row_stride: c.row_stride(),
                col_stride: c.col_stride(),
            },
            workspace: None,
            temps: Vec::new(),
            base,
            _borrows: PhantomData,
        }
    }

    /// Address and strides of a block.
    fn raw(&mut self, block: Block) -> Raw<T> {
        let store = match block.store {
            Store::A => self.a,
            Store::B => self.b,
            Store::C => self.c,
            Store::Temp { id, ld } => Raw {
                row_stride: ld,
                ..self.temps[id]
            },
        };
        Raw {
            // wrapping_add: only an address; it is inside the store by the
            // engine's construction and dereferenced only within the block.
            ptr: store
                .ptr
                .wrapping_add(block.row * store.row_stride + block.col * store.col_stride),
            ..store
        }
    }

    /// A read view of a block.
    ///
    /// # Safety
    /// Nothing writes the block while the view lives.
    unsafe fn read(&mut self, block: Block) -> MatRef<'a, T> {
        let raw = self.raw(block);
        // SAFETY: the block lies inside A, B, C or a temporary (the engine
        // builds every block from the operands' shapes and the dry run's
        // capacities), all of which outlive 'a; the caller rules out writes.
        unsafe {
            MatRef::from_raw_parts(
                raw.ptr,
                block.rows,
                block.cols,
                raw.row_stride,
                raw.col_stride,
            )
        }
    }

    /// A write view of a block.
    ///
    /// # Safety
    /// Nothing else reads or writes the block while the view lives, and the
    /// block is of C or of a temporary.
    unsafe fn write(&mut self, block: Block) -> MatMut<'a, T> {
        debug_assert!(!matches!(block.store, Store::A | Store::B));
        let raw = self.raw(block);
        // SAFETY: as in `read`; C's view was checked injective when it was
        // made, temporaries are contiguous, and the caller rules out other
        // access.
        unsafe {
            MatMut::from_raw_parts(
                raw.ptr,
                block.rows,
                block.cols,
                raw.row_stride,
                raw.col_stride,
            )
        }
    }
}

impl<T: Element> Backend<T> for CpuBackend<'_, T> {
    fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
        // Reused across products: no allocation, and no page faults, once a
        // thread has run a product this large. Every schedule writes a
        // temporary before reading it, so old contents never matter.
        let mut workspace = Workspace::take_from::<T>(Pool::Fast, capacities);
        self.temps = workspace
            .split::<T>(capacities)
            .into_iter()
            .map(|buffer| Raw {
                ptr: buffer.as_mut_ptr(),
                row_stride: 0,
                col_stride: 1,
            })
            .collect();
        self.workspace = Some(workspace);
        Ok(())
    }

    fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error> {
        // SAFETY: the engine never lets a product's destination overlap its
        // operands, and runs one step at a time.
        let (a, b, c) = unsafe { (self.read(a), self.read(b), self.write(c)) };
        if a.cols() == 0 {
            crate::algo::apply_beta(beta, c);
            return Ok(());
        }
        crate::algo::multiply(alpha, a, b, beta, c, &self.base)
    }

    const FUSES_PRIMITIVE: bool = true;

    /// Fused: the sums are formed while `packed` packs its panels, and each
    /// microkernel tile is added into every destination (Huang et al.,
    /// "Strassen's Algorithm Reloaded", SC16), so no sum or product is
    /// stored.
    fn primitive(
        &mut self,
        alpha: T,
        a: &[(T, Block)],
        b: &[(T, Block)],
        beta: T,
        c: &[(T, Block)],
        _scratch: [Block; 3],
    ) -> Result<(), Error> {
        debug_assert_eq!(self.base.algorithm, Algorithm::Packed, "validated");
        // SAFETY: the engine's destinations are disjoint blocks of C that
        // overlap no A or B term (those are blocks of A and B), and nothing
        // else runs during the call.
        unsafe {
            let a: Vec<(T, MatRef<'_, T>)> = a.iter().map(|&(w, x)| (w, self.read(x))).collect();
            let b: Vec<(T, MatRef<'_, T>)> = b.iter().map(|&(w, x)| (w, self.read(x))).collect();
            let mut c: Vec<(T, MatMut<'_, T>)> =
                c.iter().map(|&(w, x)| (w, self.write(x))).collect();
            packed::multiply_fused(alpha, &a, &b, beta, &mut c, &self.base)
        }
    }

    /// One pass over the rows: each row is cut into spans of
    /// [`STRASSEN_GROUP_SPAN_BYTES`], and every sum of the group is formed
    /// on a span before the next, so each source span comes from memory
    /// once and from L1 for the other sums that read it.
    fn combine_group(&mut self, sums: &[Combination<T>]) -> Result<(), Error> {
        let Some(first) = sums.first() else {
            return Ok(());
        };
        let (rows, cols) = (first.dst.rows, first.dst.cols);
        let one_shape = sums.iter().all(|sum| {
            (sum.dst.rows, sum.dst.cols) == (rows, cols)
                && sum
                    .terms
                    .iter()
                    .all(|(_, t)| (t.rows, t.cols) == (rows, cols))
        });
        if !one_shape {
            for sum in sums {
                self.combine(sum.keep, sum.dst, &sum.terms)?;
            }
            return Ok(());
        }
        let raw: Vec<RawCombination<T>> = sums
            .iter()
            .map(|sum| {
                let terms = sum.terms.iter().map(|&(w, t)| (w, self.raw(t))).collect();
                (sum.keep, self.raw(sum.dst), terms)
            })
            .collect();
        let span = (STRASSEN_GROUP_SPAN_BYTES / std::mem::size_of::<T>()).max(1);
        let row = |i: usize| {
            for first in (0..cols).step_by(span) {
                let end = (first + span).min(cols);
                for (keep, out, sources) in &raw {
                    // SAFETY: row i < rows and [first, end) ⊂ 0..cols of
                    // every block (one shape); no destination overlaps a
                    // source of the group (the engine's contract) or
                    // another destination, and each call of `row` writes
                    // only row i.
                    unsafe { combine_span(*keep, *out, sources, i, (first, end)) }
                }
            }
        };
        if rows * cols * sums.len() >= STRASSEN_PARALLEL_MIN_ELEMENTS {
            (0..rows).into_par_iter().for_each(row);
        } else {
            (0..rows).for_each(row);
        }
        Ok(())
    }

    fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
        let (rows, cols) = (dst.rows, dst.cols);
        let out = self.raw(dst);
        let sources: Vec<(T, Raw<T>)> = terms.iter().map(|&(w, t)| (w, self.raw(t))).collect();
        let row = |i: usize| {
            // SAFETY: row i < rows of the destination and of every source
            // (all rows×cols); the destination overlaps no source, and each
            // call writes only its own row.
            unsafe { combine_row(keep, out, &sources, i, cols) }
        };
        if rows * cols >= STRASSEN_PARALLEL_MIN_ELEMENTS {
            (0..rows).into_par_iter().for_each(row);
        } else {
            (0..rows).for_each(row);
        }
        Ok(())
    }
}

/// A [`Combination`] resolved to memory: (keep, destination, weighted sources).
type RawCombination<T> = (T, Raw<T>, Vec<(T, Raw<T>)>);

/// Row i of dst ← keep·dst + Σ w·src, one pass per term so each pass is a
/// simple vectorisable loop over a row that stays in L1.
///
/// # Safety
/// Row i of `out` (cols elements) is writable and touched by no one else;
/// row i of each source is readable and does not overlap it.
unsafe fn combine_row<T: Element>(
    keep: T,
    out: Raw<T>,
    sources: &[(T, Raw<T>)],
    i: usize,
    cols: usize,
) {
    // SAFETY: the caller's contract, for columns 0..cols.
    unsafe { combine_span(keep, out, sources, i, (0, cols)) }
}

/// Columns [first, end) of row i of dst ← keep·dst + Σ w·src.
///
/// # Safety
/// Those elements of row i of `out` are writable and touched by no one
/// else; the same elements of row i of each source are readable and do
/// not overlap them.
unsafe fn combine_span<T: Element>(
    keep: T,
    out: Raw<T>,
    sources: &[(T, Raw<T>)],
    i: usize,
    (first, end): (usize, usize),
) {
    let cols = end - first;
    let at = |raw: Raw<T>, j: usize| {
        raw.ptr
            .wrapping_add(i * raw.row_stride + (first + j) * raw.col_stride)
    };
    let contiguous = out.col_stride == 1 && sources.iter().all(|(_, s)| s.col_stride == 1);
    // SAFETY (whole body): per the contract, every address formed below is
    // inside the span of row i of its block.
    unsafe {
        if contiguous {
            let dst = std::slice::from_raw_parts_mut(at(out, 0), cols);
            let mut rest = sources;
            if keep == T::ZERO && sources.is_empty() {
                dst.fill(T::ZERO);
            } else if keep == T::ZERO {
                let (w, first) = sources[0];
                let src = std::slice::from_raw_parts(at(first, 0), cols);
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = w.mul(s);
                }
                rest = &sources[1..];
            } else if keep != T::ONE {
                for d in dst.iter_mut() {
                    *d = keep.mul(*d);
                }
            }
            for &(w, source) in rest {
                let src = std::slice::from_raw_parts(at(source, 0), cols);
                if w == T::ONE {
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d = d.add(s);
                    }
                } else if w == T::ZERO.sub(T::ONE) {
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d = d.sub(s);
                    }
                } else {
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d = d.add(w.mul(s));
                    }
                }
            }
            return;
        }
        for j in 0..cols {
            let d = at(out, j);
            let mut value = if keep == T::ZERO {
                T::ZERO
            } else {
                keep.mul(*d)
            };
            for &(w, source) in sources {
                value = value.add(w.mul(*at(source, j)));
            }
            *d = value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::{random_matrix_full_range, seeded_rng};
    use crate::strassen::engine::{self, Plan};
    use crate::strassen::schedule;
    use crate::Matrix;

    /// The CPU backend with its fusion hidden, so the engine sizes scratch
    /// and `Backend::primitive`'s default (sums in workspace) runs: the path
    /// a backend without a fused kernel takes.
    struct Unfused<'a>(CpuBackend<'a, i64>);

    impl Backend<i64> for Unfused<'_> {
        fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
            self.0.allocate(capacities)
        }
        fn gemm(
            &mut self,
            alpha: i64,
            a: Block,
            b: Block,
            beta: i64,
            c: Block,
        ) -> Result<(), Error> {
            self.0.gemm(alpha, a, b, beta, c)
        }
        fn combine(&mut self, keep: i64, dst: Block, terms: &[(i64, Block)]) -> Result<(), Error> {
            self.0.combine(keep, dst, terms)
        }
    }

    #[test]
    fn the_default_primitive_forms_sums_in_workspace_exactly() {
        let mut rng = seeded_rng(41);
        for (m, k, n) in [(37, 41, 29), (64, 64, 64), (20, 90, 23)] {
            let a: Matrix<i64> = random_matrix_full_range(m, k, &mut rng);
            let b: Matrix<i64> = random_matrix_full_range(k, n, &mut rng);
            let c0: Matrix<i64> = random_matrix_full_range(m, n, &mut rng);
            let mut want = c0.clone();
            crate::gemm(
                3,
                a.as_ref(),
                b.as_ref(),
                -2,
                want.as_mut(),
                &GemmOptions::new(Algorithm::Naive),
            )
            .unwrap();
            for products in [&schedule::STRASSEN_PRODUCTS, &schedule::WINOGRAD_PRODUCTS] {
                let plan = Plan {
                    schedule: &schedule::STRASSEN_FRUGAL,
                    beta_schedule: &schedule::STRASSEN_TEMPORARIES,
                    threshold: 4,
                    start: 0,
                    max_depth: 3,
                    fused: Some(products),
                    lazy_sum_terms: 0,
                };
                let mut got = c0.clone();
                let base = GemmOptions::new(Algorithm::Packed);
                let mut backend =
                    Unfused(CpuBackend::new(a.as_ref(), b.as_ref(), got.as_mut(), base));
                let report = engine::run(&mut backend, plan, 3, -2, (m, k, n)).unwrap();
                assert!(
                    report.levels >= 2 && report.workspace_elements > 0,
                    "{report:?}"
                );
                drop(backend);
                assert_eq!(got, want, "{m}×{k}×{n}");
            }
        }
    }

    /// The CPU backend taking the fused variant's primitives in groups, as
    /// the GPU's does: checks each group's contract and records its size.
    struct Grouped<'a> {
        inner: CpuBackend<'a, i64>,
        sizes: Vec<usize>,
    }

    impl Backend<i64> for Grouped<'_> {
        const FUSES_PRIMITIVE: bool = true;
        const GROUPS_PRIMITIVES: bool = true;
        fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
            self.inner.allocate(capacities)
        }
        fn gemm(
            &mut self,
            alpha: i64,
            a: Block,
            b: Block,
            beta: i64,
            c: Block,
        ) -> Result<(), Error> {
            self.inner.gemm(alpha, a, b, beta, c)
        }
        fn combine(&mut self, keep: i64, dst: Block, terms: &[(i64, Block)]) -> Result<(), Error> {
            self.inner.combine(keep, dst, terms)
        }
        fn primitive(
            &mut self,
            alpha: i64,
            a: &[(i64, Block)],
            b: &[(i64, Block)],
            beta: i64,
            c: &[(i64, Block)],
            scratch: [Block; 3],
        ) -> Result<(), Error> {
            self.inner.primitive(alpha, a, b, beta, c, scratch)
        }
        fn primitives(
            &mut self,
            alpha: i64,
            beta: i64,
            group: &[crate::strassen::backend::Primitive<i64>],
        ) -> Result<(), Error> {
            for (i, p) in group.iter().enumerate() {
                assert_eq!(p.shape(), group[0].shape(), "one shape per group");
                for q in &group[..i] {
                    assert!(!p.writes_overlap(q), "destinations overlap: {p:?} {q:?}");
                }
                self.primitive(alpha, &p.a, &p.b, beta, &p.c, p.scratch)?;
            }
            self.sizes.push(group.len());
            Ok(())
        }
    }

    #[test]
    fn grouped_primitives_have_disjoint_destinations_and_give_the_exact_product() {
        let mut rng = seeded_rng(43);
        for (m, k, n) in [(64, 64, 64), (37, 41, 29), (20, 90, 23), (33, 32, 65)] {
            let a: Matrix<i64> = random_matrix_full_range(m, k, &mut rng);
            let b: Matrix<i64> = random_matrix_full_range(k, n, &mut rng);
            let c0: Matrix<i64> = random_matrix_full_range(m, n, &mut rng);
            let mut want = c0.clone();
            crate::gemm(
                3,
                a.as_ref(),
                b.as_ref(),
                -2,
                want.as_mut(),
                &GemmOptions::new(Algorithm::Naive),
            )
            .unwrap();
            let schemes = [&schedule::STRASSEN_PRODUCTS, &schedule::WINOGRAD_PRODUCTS];
            // Two levels, and four (thousands of primitives, up to 81
            // destinations each: the bounded search).
            for (products, max_depth) in schemes.into_iter().flat_map(|s| [(s, 2), (s, 4)]) {
                let plan = Plan {
                    schedule: &schedule::STRASSEN_FRUGAL,
                    beta_schedule: &schedule::STRASSEN_TEMPORARIES,
                    threshold: 4,
                    start: 0,
                    max_depth,
                    fused: Some(products),
                    lazy_sum_terms: 0,
                };
                let mut got = c0.clone();
                let base = GemmOptions::new(Algorithm::Packed);
                let mut backend = Grouped {
                    inner: CpuBackend::new(a.as_ref(), b.as_ref(), got.as_mut(), base),
                    sizes: Vec::new(),
                };
                let report = engine::run(&mut backend, plan, 3, -2, (m, k, n)).unwrap();
                let sizes = std::mem::take(&mut backend.sizes);
                drop(backend);
                assert_eq!(got, want, "{m}×{k}×{n}");
                if (m, k, n, max_depth) == (64, 64, 64, 2) {
                    // Two levels, 49 products: C's top-left sixteenth takes
                    // 16 of them (Strassen: 4 × 4), so at least 16 groups;
                    // grouping must fold the 49 into far fewer launches.
                    assert_eq!(report.levels, 2);
                    assert_eq!(sizes.iter().sum::<usize>(), 49, "{sizes:?}");
                    assert!(sizes.len() < 30, "{} groups: {sizes:?}", sizes.len());
                }
            }
        }
    }
}
