//! A [`Schedule`] run with the CPU standing in for every processor: each
//! worker's stores are host buffers, a broadcast or reduction copies or
//! sums between them, and a local product is the CPU's. The distributed
//! algorithm's logic (layouts, offsets, steps, words) thus runs in CI, on
//! machines without GPUs or MPI, exactly as a backend runs it.

use std::collections::HashMap;

use crate::distributed::schedule::{Op, Region, Schedule, Store};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::GemmOptions;

/// One worker's stores (a rank of an MPI job holds one, the simulated
/// processors one each).
pub(crate) struct Stores<T>(pub HashMap<Store, Vec<T>>);

impl<T: Element> Stores<T> {
    /// Its given pieces of A and B and room for the rest of `rank`'s
    /// stores (poisoned), as `schedule` sizes them.
    pub fn new(schedule: &Schedule, rank: usize, a: Vec<T>, b: Vec<T>) -> Result<Self, Error> {
        let mut stores = HashMap::new();
        for (store, given) in [(Store::A, a), (Store::B, b)] {
            if given.len() != schedule.size(rank, store) {
                return Err(Error::InvalidOption(format!(
                    "rank {rank}'s piece of {store:?} has {} elements, its layout {}",
                    given.len(),
                    schedule.size(rank, store)
                )));
            }
            stores.insert(store, given);
        }
        for store in [Store::C, Store::GatherA, Store::GatherB, Store::Partial] {
            stores.insert(store, vec![T::poison(); schedule.size(rank, store)]);
        }
        Ok(Stores(stores))
    }

    fn store(&self, store: Store) -> &[T] {
        self.0.get(&store).map_or(&[], |v| v.as_slice())
    }

    fn store_mut(&mut self, store: Store) -> Result<&mut Vec<T>, Error> {
        self.0
            .get_mut(&store)
            .ok_or_else(|| Error::InvalidOption(format!("no {store:?} store")))
    }

    /// The elements of a region, in row-major order.
    pub fn read(&self, r: &Region) -> Vec<T> {
        let data = self.store(r.store);
        (0..r.rows)
            .flat_map(|i| data[r.offset + i * r.ld..][..r.cols].iter().copied())
            .collect()
    }

    /// Writes a region's elements, given in row-major order.
    pub fn write(&mut self, r: &Region, values: &[T]) -> Result<(), Error> {
        let data = self.store_mut(r.store)?;
        for i in 0..r.rows {
            data[r.offset + i * r.ld..][..r.cols].copy_from_slice(&values[i * r.cols..][..r.cols]);
        }
        Ok(())
    }

    /// c ← a·b (+ c when accumulating), on the CPU with `opts`.
    pub fn gemm(
        &mut self,
        regions: (&Region, &Region, &Region),
        accumulate: bool,
        opts: &GemmOptions,
    ) -> Result<(), Error> {
        self.gemm_with(regions, accumulate, |a, b, beta, c| {
            super::multiply(T::ONE, a, b, beta, c, opts)
        })
    }

    /// c ← a·b + β·c (β = 1 when accumulating, else 0) by `product`,
    /// given the three regions' views: the CPU's product, or a GPU's.
    pub fn gemm_with(
        &mut self,
        (a, b, c): (&Region, &Region, &Region),
        accumulate: bool,
        product: impl FnOnce(MatRef<'_, T>, MatRef<'_, T>, T, MatMut<'_, T>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut out = std::mem::take(self.store_mut(c.store)?);
        let result = (|| {
            let left = view(self.store(a.store), a)?;
            let right = view(self.store(b.store), b)?;
            let end = c.end();
            let dst = MatMut::from_slice_strided(&mut out[c.offset..end], c.rows, c.cols, c.ld, 1)?;
            let beta = if accumulate { T::ONE } else { T::ZERO };
            product(left, right, beta, dst)
        })();
        *self.store_mut(c.store)? = out;
        result
    }

    /// Takes its piece of C.
    pub fn take_c(&mut self) -> Vec<T> {
        self.0.remove(&Store::C).unwrap_or_default()
    }
}

fn view<'a, T: Element>(data: &'a [T], r: &Region) -> Result<MatRef<'a, T>, Error> {
    MatRef::from_slice_strided(&data[r.offset..r.end()], r.rows, r.cols, r.ld, 1)
}

/// Runs `schedule` on the host: `a` and `b` are each rank's pieces (the
/// schedule's layouts); returns each rank's piece of C and the words each
/// rank received. Local products run with `opts` on the CPU.
pub(crate) fn run<T: Element>(
    schedule: &Schedule,
    a: Vec<Vec<T>>,
    b: Vec<Vec<T>>,
    opts: &GemmOptions,
) -> Result<(Vec<Vec<T>>, Vec<u128>), Error> {
    let procs = schedule.plan.processors;
    if a.len() != procs || b.len() != procs {
        return Err(Error::InvalidOption(format!(
            "{} and {} pieces for {procs} processors",
            a.len(),
            b.len()
        )));
    }
    let mut workers = Vec::with_capacity(procs);
    for (rank, (a, b)) in a.into_iter().zip(b).enumerate() {
        workers.push(Stores::new(schedule, rank, a, b)?);
    }
    let mut words = vec![0u128; procs];
    for op in schedule.in_order() {
        for (rank, w) in op.received() {
            words[rank] += w;
        }
        match op {
            Op::Broadcast {
                group,
                root,
                src,
                dst,
            } => {
                let values = workers[*root].read(src);
                for &r in group.iter().filter(|&&r| r != *root) {
                    workers[r].write(dst, &values)?;
                }
            }
            Op::Reduce {
                group,
                root,
                src,
                dst,
            } => {
                let mut sum = workers[group[0]].read(src);
                for &r in &group[1..] {
                    for (s, v) in sum.iter_mut().zip(workers[r].read(src)) {
                        *s = s.add(v);
                    }
                }
                workers[*root].write(dst, &sum)?;
            }
            Op::Gemm {
                rank,
                a,
                b,
                c,
                accumulate,
            } => workers[*rank].gemm((a, b, c), *accumulate, opts)?,
        }
    }
    let c = workers.iter_mut().map(Stores::take_c).collect();
    Ok((c, words))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::planner::plan;
    use crate::distributed::schedule::{build, Layout};
    use crate::matrix::Matrix;
    use crate::options::Algorithm;

    fn pieces<T: Element>(m: &Matrix<T>, layout: &Layout) -> Vec<Vec<T>> {
        layout
            .pieces
            .iter()
            .map(|p| {
                p.rows
                    .clone()
                    .flat_map(|i| p.cols.clone().map(move |j| (i, j)))
                    .map(|(i, j)| m.get(i, j))
                    .collect()
            })
            .collect()
    }

    /// On every shape and processor count, the simulated processors'
    /// integer product equals the one-processor product exactly, and
    /// receives the planner's words.
    #[test]
    fn simulated_product_is_exact() {
        let opts = GemmOptions::new(Algorithm::Naive);
        for (m, k, n) in [
            (1, 1, 1),
            (2, 3, 5),
            (7, 5, 3),
            (17, 31, 13),
            (40, 3, 40),
            (3, 40, 3),
            (1, 97, 1),
            (33, 33, 33),
        ] {
            let a = Matrix::<i64>::from_fn(m, k, |i, j| ((i * 31 + j * 17) % 23) as i64 - 11);
            let b = Matrix::<i64>::from_fn(k, n, |i, j| ((i * 13 + j * 7) % 19) as i64 - 9);
            let mut expected = Matrix::<i64>::zeros(m, n);
            crate::cpu::multiply(1, a.as_ref(), b.as_ref(), 0, expected.as_mut(), &opts).unwrap();
            for p in 1..=9 {
                let pl = plan((m, k, n), p, None).unwrap();
                let s = build(&pl);
                let (c, words) = run(&s, pieces(&a, &s.a), pieces(&b, &s.b), &opts).unwrap();
                for (piece, got) in s.c.pieces.iter().zip(&c) {
                    let mut at = 0;
                    for i in piece.rows.clone() {
                        for j in piece.cols.clone() {
                            assert_eq!(got[at], expected.get(i, j), "({m}, {k}, {n}) on {p}");
                            at += 1;
                        }
                    }
                }
                assert_eq!(words, s.received());
            }
        }
    }
}

/// Strassen and Winograd across P processors, with the CPU standing in for
/// each: the one recursion engine over a backend whose every matrix (A, B,
/// C and the temporaries) is spread by rows in chunks, as on a team of
/// GPUs ([`crate::strassen::across`]). A block whose first row and height
/// are multiples of chunk·P is then the same local rows of every
/// processor, so the levels' sums are local (CAPS's depth-first steps,
/// Ballard et al., SPAA 2012), and only the classical products below
/// communicate: each processor gathers the product's block of B and
/// multiplies its rows of A by it.
pub(crate) mod caps {
    use crate::cpu::strassen::backend::CpuBackend;
    use crate::element::Element;
    use crate::error::Error;
    use crate::gemm::Gemm;
    use crate::matrix::{MatMut, MatRef, Matrix};
    use crate::options::{GemmOptions, Variant};
    use crate::strassen::across::{self, RowChunks};
    use crate::strassen::backend::{Backend, Block};
    use crate::strassen::{engine, Scheme};

    /// How a process sees every processor's rows of a block of B: the
    /// processors it holds give theirs, and it gets every processor's
    /// back, by processor (an all-gather). One process standing in for
    /// them all has them already ([`Local`]); an MPI rank exchanges them
    /// with the others.
    pub(crate) trait Exchange<T> {
        /// Every processor's rows, given those of the processors held, in
        /// the order [`Cyclic`] holds them.
        fn all_gather(&mut self, mine: Vec<Vec<T>>) -> Result<Vec<Vec<T>>, Error>;
    }

    /// The exchange of a process that holds every processor.
    pub(crate) struct Local;

    impl<T> Exchange<T> for Local {
        fn all_gather(&mut self, mine: Vec<Vec<T>>) -> Result<Vec<Vec<T>>, Error> {
            Ok(mine)
        }
    }

    /// The processors this process holds, each its local rows of A, B, C
    /// and the temporaries as a CPU Strassen backend (whose sums and
    /// products run on local blocks), the words each received, and the
    /// options of the classical products.
    struct Cyclic<'a, T: Element, X> {
        layout: RowChunks,
        locals: Vec<CpuBackend<'a, T>>,
        words: Vec<u128>,
        base: GemmOptions,
        exchange: X,
    }

    fn unaligned(what: String) -> Error {
        Error::Unsupported {
            algorithm: "strassen across processors",
            what,
        }
    }

    impl<T: Element, X> Cyclic<'_, T, X> {
        /// `block` in every processor's local rows, checked aligned.
        fn local(&self, block: Block) -> Result<Block, Error> {
            let whole = self.layout.parts * self.layout.chunk;
            if !block.row.is_multiple_of(whole) || !block.rows.is_multiple_of(whole) {
                return Err(unaligned(format!(
                    "a block at row {} of {} rows, chunks of {whole} rows",
                    block.row, block.rows
                )));
            }
            Ok(self.layout.local(block))
        }
    }

    impl<T: Element, X: Exchange<T>> Backend<T> for Cyclic<'_, T, X> {
        fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
            // A temporary of R·ld elements, R a multiple of P (its blocks
            // are aligned, or refused before any access), holds R/P local
            // rows.
            let local: Vec<usize> = capacities
                .iter()
                .map(|c| c.div_ceil(self.layout.parts))
                .collect();
            for backend in &mut self.locals {
                backend.allocate(&local)?;
            }
            Ok(())
        }

        fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error> {
            let p = self.layout.parts;
            let (la, lb, lc) = (self.local(a)?, self.local(b)?, self.local(c)?);
            // B's block gathered in global row order.
            let mine = self
                .locals
                .iter_mut()
                .map(|backend| {
                    // SAFETY: only read here; nothing writes during the copy.
                    let view = unsafe { backend.read(lb) };
                    Matrix::try_from_view(view).map(Matrix::into_vec)
                })
                .collect::<Result<Vec<_>, Error>>()?;
            let parts = self.exchange.all_gather(mine)?;
            let mut whole = Vec::with_capacity(b.rows * b.cols);
            for r in 0..b.rows {
                let (q, local) = self.layout.place(b.row + r);
                whole.extend_from_slice(&parts[q][(local - lb.row) * b.cols..][..b.cols]);
            }
            let right = MatRef::from_slice(&whole, b.rows, b.cols)?;
            for (h, backend) in self.locals.iter_mut().enumerate() {
                self.words[h] += ((b.rows - b.rows / p) * b.cols) as u128;
                // SAFETY: the engine never lets a product's destination
                // overlap its operands, and runs one step at a time.
                let (left, dst) = unsafe { (backend.read(la), backend.write(lc)) };
                crate::cpu::multiply(alpha, left, right, beta, dst, &self.base)?;
            }
            Ok(())
        }

        fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
            let dst = self.local(dst)?;
            let terms = terms
                .iter()
                .map(|&(w, t)| Ok((w, self.local(t)?)))
                .collect::<Result<Vec<_>, Error>>()?;
            for backend in &mut self.locals {
                backend.combine(keep, dst, &terms)?;
            }
            Ok(())
        }
    }

    /// Processor q's rows of `m` in `layout`, row-major.
    pub(crate) fn rows_of<T: Element>(m: MatRef<'_, T>, q: usize, layout: &RowChunks) -> Vec<T> {
        let mut local = Vec::with_capacity(layout.local_rows(m.rows(), q) * m.cols());
        for (first, _, rows) in layout.chunks_of(m.rows(), q) {
            for i in first..first + rows {
                local.extend((0..m.cols()).map(|j| m.get(i, j)));
            }
        }
        local
    }

    /// The recursion across `parts` processors for C ← α·A·B + β·C with
    /// `opts.algorithm` (Strassen or Winograd): its plan, and the layout
    /// that aligns every block it names with the levels and temporaries,
    /// the same on every process.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a classical algorithm, or where no row
    /// chunking aligns the recursion (m and k multiples of parts·2^levels
    /// at least, no odd size peeled).
    pub(crate) fn layout<T: Element>(
        parts: usize,
        (m, k, n): (usize, usize, usize),
        beta_is_zero: bool,
        opts: &GemmOptions,
    ) -> Result<(engine::Plan, across::Recursion), Error> {
        let scheme = Scheme::of(opts.algorithm).ok_or_else(|| Error::Unsupported {
            algorithm: opts.algorithm.name(),
            what: "a fast recursion across processors (Strassen or Winograd only)".into(),
        })?;
        let plan = crate::strassen::plan(
            scheme,
            Variant::Temporaries,
            super::super::strassen::crossover(opts, T::DTYPE),
            T::DTYPE,
            opts,
            0,
        );
        let recursion = across::recursion::<T>(plan, parts, beta_is_zero, (m, k, n))
            .ok_or_else(|| {
                unaligned(format!(
                    "{m}×{k}×{n} on {parts} processors: no row chunking aligns every block of the recursion (m and k must be multiples of {parts}·2^levels, with no odd size peeled)"
                ))
            })?;
        Ok((plan, recursion))
    }

    /// The recursion of [`layout`] run by the processors `held` (their
    /// rows of A, B and C given in that order, row-major, as [`rows_of`]
    /// makes them), the other processors' rows of B's blocks obtained
    /// through `exchange`; the classical products below run `base`.
    /// Returns the held processors' rows of C, the words each received,
    /// and the levels run.
    #[allow(clippy::type_complexity)]
    pub(crate) fn run_held<T: Element, X: Exchange<T>>(
        (plan, layout): (engine::Plan, RowChunks),
        held: Vec<usize>,
        mut rows: Vec<[Vec<T>; 3]>,
        (m, k, n): (usize, usize, usize),
        (alpha, beta): (T, T),
        base: &GemmOptions,
        exchange: X,
    ) -> Result<(Vec<Vec<T>>, Vec<u128>, usize), Error> {
        let stores = base.fast.sum_stores.unwrap_or_default();
        let locals = held
            .iter()
            .zip(rows.iter_mut())
            .map(|(&q, [a, b, c])| {
                Ok(CpuBackend::new(
                    MatRef::from_slice(a, layout.local_rows(m, q), k)?,
                    MatRef::from_slice(b, layout.local_rows(k, q), n)?,
                    MatMut::from_slice(c, layout.local_rows(m, q), n)?,
                    *base,
                    stores,
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let mut backend = Cyclic {
            layout,
            words: vec![0; locals.len()],
            locals,
            base: *base,
            exchange,
        };
        let report = engine::run(&mut backend, plan, alpha, beta, (m, k, n))?;
        let words = std::mem::take(&mut backend.words);
        // The local backends borrow the rows: done with them.
        drop(backend);
        Ok((
            rows.into_iter().map(|[_, _, c]| c).collect(),
            words,
            report.levels,
        ))
    }

    /// C ← α·A·B + β·C by the recursion `layout` planned for this shape
    /// (Strassen or Winograd) across `parts` simulated processors, the
    /// classical products below running `base`; returns the words each
    /// received and the levels run. m, k, n ≥ 1.
    pub(crate) fn multiply<T: Element>(
        parts: usize,
        (plan, recursion): (engine::Plan, &across::Recursion),
        Gemm {
            alpha,
            a,
            b,
            beta,
            mut c,
        }: Gemm<'_, T>,
        base: &GemmOptions,
    ) -> Result<(Vec<u128>, usize), Error> {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let layout = recursion.layout;
        let rows = (0..parts)
            .map(|q| {
                [
                    rows_of(a, q, &layout),
                    rows_of(b, q, &layout),
                    rows_of(c.rb(), q, &layout),
                ]
            })
            .collect();
        let (locals, words, levels) = run_held(
            (plan, layout),
            (0..parts).collect(),
            rows,
            (m, k, n),
            (alpha, beta),
            base,
            Local,
        )?;
        for (q, local) in locals.iter().enumerate() {
            for (first, at, rows) in layout.chunks_of(m, q) {
                for i in 0..rows {
                    for j in 0..n {
                        c.set(first + i, j, local[(at + i) * n + j]);
                    }
                }
            }
        }
        Ok((words, levels))
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::matrix::Matrix;
        use crate::options::Algorithm;

        /// Aligned shapes: exact integers, the classical product's words
        /// times (7/4)^levels; unaligned ones refused when planned.
        #[test]
        fn strassen_across_simulated_processors() {
            let base = GemmOptions::new(Algorithm::Naive);
            for algorithm in [Algorithm::Strassen, Algorithm::Winograd] {
                let opts = GemmOptions::new(algorithm).threshold(8);
                for (parts, (m, k, n)) in [(2, (32, 32, 32)), (4, (64, 32, 17)), (3, (48, 24, 24))]
                {
                    let a = Matrix::<i64>::from_fn(m, k, |i, j| ((i * 7 + j * 3) % 11) as i64 - 5);
                    let b = Matrix::<i64>::from_fn(k, n, |i, j| ((i * 5 + j) % 13) as i64 - 6);
                    let mut expected = Matrix::<i64>::filled(m, n, 3);
                    crate::cpu::multiply(2, a.as_ref(), b.as_ref(), -1, expected.as_mut(), &base)
                        .unwrap();
                    let mut c = Matrix::<i64>::filled(m, n, 3);
                    let product = Gemm::new(a.as_ref(), b.as_ref(), c.as_mut())
                        .alpha(2)
                        .beta(-1);
                    let (plan, recursion) = layout::<i64>(parts, (m, k, n), false, &opts).unwrap();
                    let (words, levels) =
                        multiply(parts, (plan, &recursion), product, &base).unwrap();
                    assert_eq!(c, expected, "{algorithm} {m}×{k}×{n} on {parts}");
                    assert!(words.iter().all(|&w| w == words[0] && w > 0), "{words:?}");
                    assert!(levels >= 1);
                }
                let refused = layout::<i64>(4, (30, 30, 30), true, &opts);
                assert!(
                    matches!(refused, Err(Error::Unsupported { .. })),
                    "{refused:?}"
                );
            }
        }
    }
}
