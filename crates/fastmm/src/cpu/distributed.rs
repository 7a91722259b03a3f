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

/// Every worker's stores.
struct Workers<T> {
    stores: Vec<HashMap<Store, Vec<T>>>,
}

impl<T: Element> Workers<T> {
    fn store(&self, rank: usize, store: Store) -> &[T] {
        self.stores[rank].get(&store).map_or(&[], |v| v.as_slice())
    }

    fn store_mut(&mut self, rank: usize, store: Store) -> Result<&mut Vec<T>, Error> {
        self.stores[rank]
            .get_mut(&store)
            .ok_or_else(|| Error::InvalidOption(format!("rank {rank} has no {store:?} store")))
    }

    /// The elements of a contiguous region, in order.
    fn read(&self, rank: usize, r: &Region) -> Vec<T> {
        let data = self.store(rank, r.store);
        (0..r.rows)
            .flat_map(|i| data[r.offset + i * r.ld..][..r.cols].iter().copied())
            .collect()
    }

    fn write(&mut self, rank: usize, r: &Region, values: &[T]) -> Result<(), Error> {
        let data = self.store_mut(rank, r.store)?;
        for i in 0..r.rows {
            data[r.offset + i * r.ld..][..r.cols].copy_from_slice(&values[i * r.cols..][..r.cols]);
        }
        Ok(())
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
    let mut workers = Workers {
        stores: (0..procs).map(|_| HashMap::new()).collect(),
    };
    for (rank, (a, b)) in a.into_iter().zip(b).enumerate() {
        for (store, given) in [(Store::A, a), (Store::B, b)] {
            if given.len() != schedule.size(rank, store) {
                return Err(Error::InvalidOption(format!(
                    "rank {rank}'s piece of {store:?} has {} elements, its layout {}",
                    given.len(),
                    schedule.size(rank, store)
                )));
            }
            workers.stores[rank].insert(store, given);
        }
        for store in [Store::C, Store::GatherA, Store::GatherB, Store::Partial] {
            let len = schedule.size(rank, store);
            workers.stores[rank].insert(store, vec![T::poison(); len]);
        }
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
                let values = workers.read(*root, src);
                for &r in group.iter().filter(|&&r| r != *root) {
                    workers.write(r, dst, &values)?;
                }
            }
            Op::Reduce {
                group,
                root,
                src,
                dst,
            } => {
                let mut sum = workers.read(group[0], src);
                for &r in &group[1..] {
                    for (s, v) in sum.iter_mut().zip(workers.read(r, src)) {
                        *s = s.add(v);
                    }
                }
                workers.write(*root, dst, &sum)?;
            }
            Op::Gemm {
                rank,
                a,
                b,
                c,
                accumulate,
            } => {
                let mut out = std::mem::take(workers.store_mut(*rank, c.store)?);
                let result = (|| {
                    let left = view(workers.store(*rank, a.store), a)?;
                    let right = view(workers.store(*rank, b.store), b)?;
                    let end = c.end();
                    let dst = MatMut::from_slice_strided(
                        &mut out[c.offset..end],
                        c.rows,
                        c.cols,
                        c.ld,
                        1,
                    )?;
                    let beta = if *accumulate { T::ONE } else { T::ZERO };
                    super::multiply(T::ONE, left, right, beta, dst, opts)
                })();
                *workers.store_mut(*rank, c.store)? = out;
                result?;
            }
        }
    }
    let c = workers
        .stores
        .iter_mut()
        .map(|s| s.remove(&Store::C).unwrap_or_default())
        .collect();
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
