//! CAPS's breadth-first step (Ballard et al., SPAA 2012) across 7 ranks:
//! the seven products of one Strassen or Winograd level run at once, one
//! per rank, instead of one after another on every rank (the depth-first
//! steps of [`super::caps`]).
//!
//! With A (m×k) and B (k×n) of even sizes split into quadrants, rank r
//! holds rows `part(m/2, 7, r)` of the top and of the bottom half of A,
//! and likewise of B (over k/2): the same rows of every quadrant, so the
//! sums S_i = Σ w·A(x, y) and T_i = Σ w·B(x, y) of the scheme's table
//! ([`Scheme::products`]) are local row by row. Rank i gathers S_i and
//! T_i whole from everyone's rows, multiplies Q_i = S_i·T_i with the
//! local algorithm (its own levels below this one), and sends every rank
//! its rows of Q_i; each rank then forms its rows of C(x, y) = Σ w·Q_i.
//!
//! Rank i receives 6/7 of S_i and of T_i and every rank 6/7 of its rows
//! of the Q's, about (mk + kn + mn)/4·6/7 words per rank with m, k, n
//! each split once: fewer than the depth-first step's gathers of B's
//! blocks, at the price of every S_i and T_i on its rank at once — the
//! memory by which CAPS chooses the step.

use std::ops::Range;

use mpi::traits::{Communicator, CommunicatorCollectives};

use super::{wire, Cluster, ClusterReport};
use crate::context::Context;
use crate::distributed::planner::part;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef, Matrix};
use crate::options::GemmOptions;
use crate::strassen::Scheme;

/// Ranks a breadth-first step spreads its seven products over.
pub(super) const BREADTH_RANKS: usize = 7;

/// C on rank 0 (`None` elsewhere) and the report.
type Product<T> = (Option<Matrix<T>>, ClusterReport);

/// Rows `rows` of the half of `m` that starts at row `half_start`, every
/// column, row-major.
fn rows_of<T: Element>(m: MatRef<'_, T>, half_start: usize, rows: &Range<usize>) -> Vec<T> {
    let mut out = Vec::with_capacity(rows.len() * m.cols());
    for i in rows.clone() {
        out.extend((0..m.cols()).map(|j| m.get(half_start + i, j)));
    }
    out
}

/// Σ w·X(x, y) over `terms`, on local rows: `halves[x]` holds this rank's
/// rows of the top (x = 0) or bottom (x = 1) half of X, `width` columns
/// each, and quadrant column y covers columns y·(width/2)…; returns the
/// rows × width/2 sum.
fn local_sum<T: Element>(terms: &[(i8, (u8, u8))], halves: [&[T]; 2], width: usize) -> Vec<T> {
    let half = width / 2;
    let rows = halves[0].len().checked_div(width).unwrap_or(0);
    let mut out = vec![T::ZERO; rows * half];
    for &(w, (x, y)) in terms {
        let src = halves[x as usize];
        for i in 0..rows {
            let from = &src[i * width + y as usize * half..][..half];
            let to = &mut out[i * half..][..half];
            for (o, &v) in to.iter_mut().zip(from) {
                *o = if w > 0 { o.add(v) } else { o.sub(v) };
            }
        }
    }
    out
}

impl Cluster {
    /// C = A·B by one breadth-first step across exactly
    /// [`BREADTH_RANKS`] ranks, with A and B given whole on every rank;
    /// `None`, touching nothing, for another rank count, an odd size, or
    /// where a rank's share (its rows, the S and T it gathers, its Q and
    /// the Q rows it receives) exceeds the memory per rank. C comes back
    /// whole on rank 0. Collective.
    pub(super) fn matmul_breadth_first<T: Element>(
        &self,
        scheme: Scheme,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        opts: &GemmOptions,
    ) -> Result<Option<Product<T>>, Error> {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let parts = self.size();
        if parts != BREADTH_RANKS || m % 2 != 0 || k % 2 != 0 || n % 2 != 0 {
            return Ok(None);
        }
        let (h, d, w) = (m / 2, k / 2, n / 2);
        let me = self.rank();
        let rows_a = |r: usize| part(h, parts, r);
        let rows_b = |r: usize| part(d, parts, r);
        let (ra, rb) = (rows_a(me), rows_b(me));
        // Words held at the peak: rows of A, B and C, one S and T formed
        // at a time, S_i, T_i and Q_i whole, and the Q rows received.
        let need = (2 * ra.len() * k + 2 * rb.len() * n + 2 * ra.len() * n) as u128
            + (ra.len() * d + rb.len() * w) as u128
            + (h * d + d * w + h * w) as u128
            + (BREADTH_RANKS * ra.len() * w) as u128;
        if self.memory_words::<T>().is_some_and(|words| need > words) {
            return Ok(None);
        }
        let cpu = Context::cpu();
        let local_growth = cpu.plan::<T>((h, d, w), true, opts)?.error_growth;
        let a_rows = [rows_of(a, 0, &ra), rows_of(a, h, &ra)];
        let b_rows = [rows_of(b, 0, &rb), rows_of(b, d, &rb)];
        let table = scheme.products();
        let world = &self.world;
        let mut words = 0u128;

        world.barrier();
        let start = std::time::Instant::now();
        // Rank i gathers S_i and T_i: each rank forms its rows of them and
        // sends them; rank i places them (its own too).
        let mut s_mine = vec![T::ZERO; h * d];
        let mut t_mine = vec![T::ZERO; d * w];
        for (i, product) in table.iter().enumerate() {
            let s = local_sum(product.a, [&a_rows[0], &a_rows[1]], k);
            let t = local_sum(product.b, [&b_rows[0], &b_rows[1]], n);
            if i == me {
                s_mine[ra.start * d..ra.end * d].copy_from_slice(&s);
                t_mine[rb.start * w..rb.end * w].copy_from_slice(&t);
                for r in (0..parts).filter(|&r| r != me) {
                    let from = world.process_at_rank(r as i32);
                    let (sr, tr) = (rows_a(r), rows_b(r));
                    wire::receive(&from, &mut s_mine[sr.start * d..sr.end * d]);
                    wire::receive(&from, &mut t_mine[tr.start * w..tr.end * w]);
                    words += (sr.len() * d + tr.len() * w) as u128;
                }
            } else {
                let to = world.process_at_rank(i as i32);
                wire::send(&to, &s);
                wire::send(&to, &t);
            }
        }
        // Q_me = S_me·T_me, with the local algorithm's own levels.
        let mut q_mine = vec![T::ZERO; h * w];
        {
            cpu.gemm(
                T::ONE,
                MatRef::from_slice(&s_mine, h, d)?,
                MatRef::from_slice(&t_mine, d, w)?,
                T::ZERO,
                MatMut::from_slice(&mut q_mine, h, w)?,
                opts,
            )?;
        }
        drop((s_mine, t_mine));
        // Every rank's rows of every Q: rank i sends each its rows of Q_i.
        let mut q_rows: Vec<Vec<T>> = Vec::with_capacity(table.len());
        for i in 0..table.len() {
            if i == me {
                for r in (0..parts).filter(|&r| r != me) {
                    let rows = rows_a(r);
                    wire::send(
                        &world.process_at_rank(r as i32),
                        &q_mine[rows.start * w..rows.end * w],
                    );
                }
                q_rows.push(q_mine[ra.start * w..ra.end * w].to_vec());
            } else {
                let mut rows = vec![T::ZERO; ra.len() * w];
                wire::receive(&world.process_at_rank(i as i32), &mut rows);
                words += rows.len() as u128;
                q_rows.push(rows);
            }
        }
        drop(q_mine);
        // C(x, y) = Σ w·Q_i on this rank's rows: [top rows; bottom rows],
        // n columns each.
        let mut c_rows = vec![T::ZERO; 2 * ra.len() * n];
        for (product, q) in table.iter().zip(&q_rows) {
            for &(sign, (x, y)) in product.c {
                for i in 0..ra.len() {
                    let row = (x as usize * ra.len() + i) * n + y as usize * w;
                    let to = &mut c_rows[row..row + w];
                    for (o, &v) in to.iter_mut().zip(&q[i * w..(i + 1) * w]) {
                        *o = if sign > 0 { o.add(v) } else { o.sub(v) };
                    }
                }
            }
        }
        let mine_ms = start.elapsed().as_secs_f64() * 1e3;
        let (compute_ms, most, total) = self.timing_and_words(mine_ms, words as u64);

        let c = if me == 0 {
            let mut c = Matrix::try_zeros(m, n)?;
            for r in 0..parts {
                let rows = rows_a(r);
                let data = if r == 0 {
                    std::mem::take(&mut c_rows)
                } else {
                    let mut data = vec![T::ZERO; 2 * rows.len() * n];
                    wire::receive(&world.process_at_rank(r as i32), &mut data);
                    data
                };
                for (x, half) in [0, h].into_iter().enumerate() {
                    for (i, row) in rows.clone().enumerate() {
                        for j in 0..n {
                            c.set(half + row, j, data[(x * rows.len() + i) * n + j]);
                        }
                    }
                }
            }
            Some(c)
        } else {
            wire::send(&world.process_at_rank(0), &c_rows);
            None
        };
        let classical = self.plan::<T>((m, k, n)).ok();
        Ok(Some((
            c,
            ClusterReport {
                grid: (parts, 1, 1),
                processors: parts,
                compute_ms,
                words_per_processor: u128::from(most),
                total_words: u128::from(total),
                lower_bound: classical.map_or(0.0, |p| p.lower_bound),
                levels_across: 1,
                breadth_first: true,
                error_growth: scheme.error_growth(1) * local_growth,
                local_gpus: false,
                pieces_on_gpus: false,
                staging_ms: 0.0,
            },
        )))
    }
}
