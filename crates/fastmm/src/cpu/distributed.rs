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
        (a, b, c): (&Region, &Region, &Region),
        accumulate: bool,
        opts: &GemmOptions,
    ) -> Result<(), Error> {
        let mut out = std::mem::take(self.store_mut(c.store)?);
        let result = (|| {
            let left = view(self.store(a.store), a)?;
            let right = view(self.store(b.store), b)?;
            let end = c.end();
            let dst = MatMut::from_slice_strided(&mut out[c.offset..end], c.rows, c.cols, c.ld, 1)?;
            let beta = if accumulate { T::ONE } else { T::ZERO };
            super::multiply(T::ONE, left, right, beta, dst, opts)
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
    use std::collections::HashMap;

    use crate::element::Element;
    use crate::error::Error;
    use crate::matrix::{MatMut, MatRef};
    use crate::options::{GemmOptions, Variant};
    use crate::strassen::across::{self, RowChunks};
    use crate::strassen::backend::{Backend, Block, Store};
    use crate::strassen::{engine, Scheme};

    /// A store of one processor: its rows, row-major, and their stride.
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    enum Key {
        A,
        B,
        C,
        Temp(usize),
    }

    /// The processors' stores, the words each received, and the options
    /// of the classical products.
    struct Cyclic<'o, T> {
        layout: RowChunks,
        stores: Vec<HashMap<Key, Vec<T>>>,
        ld: [usize; 3],
        words: Vec<u128>,
        opts: &'o GemmOptions,
    }

    fn unaligned(what: String) -> Error {
        Error::Unsupported {
            algorithm: "strassen across processors",
            what,
        }
    }

    impl<T: Element> Cyclic<'_, T> {
        /// (store, first element, local rows, row stride) of `block` on
        /// every processor.
        fn local(&self, block: &Block) -> Result<(Key, usize, usize, usize), Error> {
            let whole = self.layout.parts * self.layout.chunk;
            if !block.row.is_multiple_of(whole) || !block.rows.is_multiple_of(whole) {
                return Err(unaligned(format!(
                    "a block at row {} of {} rows, chunks of {whole} rows",
                    block.row, block.rows
                )));
            }
            let (key, ld) = match block.store {
                Store::A => (Key::A, self.ld[0]),
                Store::B => (Key::B, self.ld[1]),
                Store::C => (Key::C, self.ld[2]),
                Store::Temp { id, ld } => (Key::Temp(id), ld),
            };
            let local = self.layout.local(*block);
            Ok((key, local.row * ld + local.col, local.rows, ld))
        }

        /// Processor `q`'s rows of `block`, row-major.
        fn read(&self, q: usize, block: &Block) -> Result<Vec<T>, Error> {
            let (key, at, rows, ld) = self.local(block)?;
            let data = &self.stores[q][&key];
            Ok((0..rows)
                .flat_map(|i| data[at + i * ld..][..block.cols].iter().copied())
                .collect())
        }
    }

    impl<T: Element> Backend<T> for Cyclic<'_, T> {
        fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
            for stores in &mut self.stores {
                for (id, &capacity) in capacities.iter().enumerate() {
                    // A temporary of R·ld elements, R a multiple of P (its
                    // blocks are aligned, or refused before any access),
                    // holds R/P local rows.
                    stores.insert(
                        Key::Temp(id),
                        vec![T::ZERO; capacity.div_ceil(self.layout.parts)],
                    );
                }
            }
            Ok(())
        }

        fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error> {
            let p = self.layout.parts;
            // B's block gathered in global row order.
            let (b_key, _, _, b_ld) = self.local(&b)?;
            let mut whole = vec![T::ZERO; b.rows * b.cols];
            for r in 0..b.rows {
                let (q, local) = self.layout.place(b.row + r);
                let src = &self.stores[q][&b_key][local * b_ld + b.col..][..b.cols];
                whole[r * b.cols..][..b.cols].copy_from_slice(src);
            }
            let right = MatRef::from_slice(&whole, b.rows, b.cols)?;
            let (a_key, a_at, rows, a_ld) = self.local(&a)?;
            let (c_key, c_at, _, c_ld) = self.local(&c)?;
            for q in 0..p {
                self.words[q] += ((b.rows - b.rows / p) * b.cols) as u128;
                let left_data = self.stores[q][&a_key].clone();
                let left = MatRef::from_slice_strided(&left_data[a_at..], rows, a.cols, a_ld, 1)?;
                let out = self.stores[q].get_mut(&c_key).expect("allocated");
                let dst = MatMut::from_slice_strided(&mut out[c_at..], rows, c.cols, c_ld, 1)?;
                crate::cpu::multiply(alpha, left, right, beta, dst, self.opts)?;
            }
            Ok(())
        }

        fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
            for q in 0..self.layout.parts {
                let sources: Vec<(T, Vec<T>)> = terms
                    .iter()
                    .map(|(w, block)| Ok((*w, self.read(q, block)?)))
                    .collect::<Result<_, Error>>()?;
                let (key, at, rows, ld) = self.local(&dst)?;
                let out = self.stores[q].get_mut(&key).expect("allocated");
                for i in 0..rows {
                    for j in 0..dst.cols {
                        let x = &mut out[at + i * ld + j];
                        let mut v = if keep == T::ZERO {
                            T::ZERO
                        } else {
                            keep.mul(*x)
                        };
                        for (w, src) in &sources {
                            v = v.add(w.mul(src[i * dst.cols + j]));
                        }
                        *x = v;
                    }
                }
            }
            Ok(())
        }
    }

    /// Processor q's rows of `m` in `layout`, row-major.
    fn rows_of<T: Element>(m: MatRef<'_, T>, q: usize, layout: &RowChunks) -> Vec<T> {
        let mut local = Vec::with_capacity(layout.local_rows(m.rows(), q) * m.cols());
        for (first, _, rows) in layout.chunks_of(m.rows(), q) {
            for i in first..first + rows {
                local.extend((0..m.cols()).map(|j| m.get(i, j)));
            }
        }
        local
    }

    /// C ← α·A·B + β·C with `opts.algorithm` (Strassen or Winograd) across
    /// `parts` simulated processors, the classical products below running
    /// `base`; returns the words each received and the levels run. m, k,
    /// n ≥ 1, and some row chunking must align every block the recursion
    /// names ([`across::recursion`]; m and k multiples of parts·2^levels at
    /// least): otherwise [`Error::Unsupported`] before C is touched.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn multiply<T: Element>(
        parts: usize,
        alpha: T,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        beta: T,
        mut c: MatMut<'_, T>,
        opts: &GemmOptions,
        base: &GemmOptions,
    ) -> Result<(Vec<u128>, usize), Error> {
        let scheme = Scheme::of(opts.algorithm).ok_or_else(|| Error::Unsupported {
            algorithm: opts.algorithm.name(),
            what: "a fast recursion across processors (Strassen or Winograd only)".into(),
        })?;
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let plan = crate::strassen::plan(
            scheme,
            Variant::Temporaries,
            super::super::strassen::crossover(opts, T::DTYPE),
            T::DTYPE,
            opts,
            0,
        );
        let layout = across::recursion::<T>(plan, parts, beta == T::ZERO, (m, k, n))
            .ok_or_else(|| {
                unaligned(format!(
                    "{m}×{k}×{n} on {parts} processors: no row chunking aligns every block of the recursion (m and k must be multiples of {parts}·2^levels, with no odd size peeled)"
                ))
            })?
            .layout;
        let mut backend = Cyclic {
            layout,
            stores: (0..parts)
                .map(|q| {
                    HashMap::from([
                        (Key::A, rows_of(a, q, &layout)),
                        (Key::B, rows_of(b, q, &layout)),
                        (Key::C, rows_of(c.rb(), q, &layout)),
                    ])
                })
                .collect(),
            ld: [k, n, n],
            words: vec![0; parts],
            opts: base,
        };
        let report = engine::run(&mut backend, plan, alpha, beta, (m, k, n))?;
        for q in 0..parts {
            let local = &backend.stores[q][&Key::C];
            for (first, at, rows) in layout.chunks_of(m, q) {
                for i in 0..rows {
                    for j in 0..n {
                        c.set(first + i, j, local[(at + i) * n + j]);
                    }
                }
            }
        }
        Ok((backend.words, report.levels))
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::matrix::Matrix;
        use crate::options::Algorithm;

        /// Aligned shapes: exact integers, the classical product's words
        /// times (7/4)^levels; unaligned ones refused with C untouched.
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
                    let (words, levels) = multiply(
                        parts,
                        2,
                        a.as_ref(),
                        b.as_ref(),
                        -1,
                        c.as_mut(),
                        &opts,
                        &base,
                    )
                    .unwrap();
                    assert_eq!(c, expected, "{algorithm} {m}×{k}×{n} on {parts}");
                    assert!(words.iter().all(|&w| w == words[0] && w > 0), "{words:?}");
                    assert!(levels >= 1);
                }
                let a = Matrix::<i64>::filled(30, 30, 1);
                let mut c = Matrix::<i64>::filled(30, 30, 7);
                let refused = multiply(4, 1, a.as_ref(), a.as_ref(), 0, c.as_mut(), &opts, &base);
                assert!(
                    matches!(refused, Err(Error::Unsupported { .. })),
                    "{refused:?}"
                );
                assert_eq!(c, Matrix::filled(30, 30, 7));
            }
        }
    }
}
