//! CAPS's breadth-first step (Ballard et al., SPAA 2012) across 7·q
//! ranks: the seven products of one Strassen or Winograd level run at
//! once, one per group of q ranks, instead of one after another on every
//! rank (the depth-first steps of [`super::caps`]).
//!
//! With A (m×k) and B (k×n) of even sizes split into quadrants, rank r
//! holds rows `part(m/2, P, r)` of the top and of the bottom half of A,
//! and likewise of B (over k/2): the same rows of every quadrant, so the
//! sums S_i = Σ w·A(x, y) and T_i = Σ w·B(x, y) of the scheme's table
//! ([`Scheme::products`]) are local row by row. Group i multiplies
//! Q_i = S_i·T_i: on its one rank (q = 1) with the local algorithm (its
//! own levels below this one), S_i and T_i whole there; on q ranks as a
//! classical distributed product whose plan every rank of the job fixes
//! alike beforehand, so each member receives only its pieces of S_i and
//! T_i, straight from the ranks that formed their rows. Each rank then
//! receives its rows of every Q_i from the members holding them and forms
//! its rows of C(x, y) = Σ w·Q_i.
//!
//! On 7 ranks, rank i receives 6/7 of S_i and of T_i and every rank 6/7
//! of its rows of the Q's, about (mk + kn + mn)/4·6/7 words per rank with
//! m, k, n each split once: fewer than the depth-first steps' gathers of
//! B's blocks, at the price of S_i, T_i and Q_i whole on its rank — the
//! memory by which CAPS chooses the step. On 7·q ranks a member holds its
//! pieces of the group's plan (chosen for the memory left after the
//! rows), and receives (S_i + T_i)/q words or so, the group product's
//! words, and its rows of the Q's.

use std::ops::Range;

use mpi::topology::Color;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::{received_by, wire, Cluster, ClusterReport, Operand};
use crate::context::Context;
use crate::distributed::planner::{self, part, Decomposition};
use crate::distributed::schedule::{self, Piece};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef, Matrix};
use crate::options::GemmOptions;
use crate::strassen::Scheme;

/// Groups of ranks a breadth-first step spreads its seven products over:
/// it runs on 7·q ranks, q per product.
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

/// The rows two ranges share, as (first, end); first ≥ end where none.
fn overlap(x: &Range<usize>, y: &Range<usize>) -> (usize, usize) {
    (x.start.max(y.start), x.end.min(y.end))
}

/// Rows `rows`, columns `cols` of a row-major matrix `width` wide, as one
/// row-major block.
fn block_of<T: Element>(m: &[T], width: usize, rows: Range<usize>, cols: &Range<usize>) -> Vec<T> {
    let mut out = Vec::with_capacity(rows.len() * cols.len());
    for i in rows {
        out.extend_from_slice(&m[i * width + cols.start..i * width + cols.end]);
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
    /// Whether the breadth-first step fits an m×k×n product of T: the
    /// ranks a multiple of seven, m, k and n even, and every rank's rows,
    /// sums and received products within its memory; `Some` with the
    /// group's classical plan (`None` inside for groups of one rank).
    /// Collective.
    pub(super) fn breadth_first_fit<T: Element>(
        &self,
        (m, k, n): (usize, usize, usize),
    ) -> Result<Option<Option<Decomposition>>, Error> {
        let parts = self.size();
        if parts == 0
            || !parts.is_multiple_of(BREADTH_RANKS)
            || m % 2 != 0
            || k % 2 != 0
            || n % 2 != 0
        {
            return Ok(None);
        }
        let q = parts / BREADTH_RANKS;
        let (h, d, w) = (m / 2, k / 2, n / 2);
        let me = self.rank();
        let ra = part(h, parts, me);
        let rb = part(d, parts, me);
        // Words held at the peak outside the group's product: rows of A,
        // B and C, one S and T formed at a time, and the Q rows received.
        let rows_held = (2 * ra.len() * k + 2 * rb.len() * n + 2 * ra.len() * n) as u128
            + (ra.len() * d + rb.len() * w) as u128
            + (BREADTH_RANKS * ra.len() * w) as u128;
        let memory = self.memory_words::<T>();
        // The group's product: on one rank, S_g, T_g and Q_g whole; on q,
        // the classical plan for the memory left, fixed here on every
        // rank of the job (the least memory over all of them) so that
        // every rank knows which pieces of S_i and T_i each member of
        // group i takes.
        if q == 1 {
            if memory.is_some_and(|words| rows_held + (h * d + d * w + h * w) as u128 > words) {
                return Ok(None);
            }
            return Ok(Some(None));
        }
        let left = match memory {
            Some(words) if words <= rows_held => return Ok(None),
            Some(words) => Some(words - rows_held),
            None => None,
        };
        match planner::plan((h, d, w), q, left) {
            Ok(plan) => Ok(Some(Some(plan))),
            Err(Error::OutOfMemory { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// C = A·B by one breadth-first step across 7·q ranks, with A and B
    /// given whole on every rank; `None`, touching nothing, for a rank
    /// count not a multiple of 7, an odd size, or where a rank's share
    /// exceeds the memory per rank. C comes back whole on rank 0.
    /// Collective.
    pub(super) fn matmul_breadth_first<T: Element>(
        &self,
        scheme: Scheme,
        (a, b): (MatRef<'_, T>, MatRef<'_, T>),
        opts: &GemmOptions,
        group_plan: Option<&Decomposition>,
    ) -> Result<Option<Product<T>>, Error> {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let parts = self.size();
        let q = parts / BREADTH_RANKS;
        let (h, d, w) = (m / 2, k / 2, n / 2);
        let me = self.rank();
        let (group, member) = (me / q, me % q);
        let rows_a = |r: usize| part(h, parts, r);
        let rows_b = |r: usize| part(d, parts, r);
        let (ra, rb) = (rows_a(me), rows_b(me));
        let group_schedule = group_plan.map(schedule::build);
        let whole = |rows: usize, cols: usize| Piece {
            rows: 0..rows,
            cols: 0..cols,
        };
        // Member j's pieces of S (h×d), T (d×w) and Q (h×w).
        let piece_of = |operand: usize, j: usize| match &group_schedule {
            Some(s) => [&s.a, &s.b, &s.c][operand].pieces[j].clone(),
            None => [whole(h, d), whole(d, w), whole(h, w)][operand].clone(),
        };
        let cpu = Context::cpu();
        let local_growth = cpu
            .plan(crate::gemm::Problem::of::<T>((h, d, w)), opts)?
            .error_growth;
        let a_rows = [rows_of(a, 0, &ra), rows_of(a, h, &ra)];
        let b_rows = [rows_of(b, 0, &rb), rows_of(b, d, &rb)];
        let table = scheme.products();
        let world = &self.world;
        let mut words = 0u128;

        world.barrier();
        let start = std::time::Instant::now();
        // Each member of group i receives its pieces of S_i and T_i, each
        // rank sending the rows of them it formed: a gather to each
        // member in turn, every rank walking the members in one order.
        let mut s_piece = Vec::new();
        let mut t_piece = Vec::new();
        for (i, product) in table.iter().enumerate() {
            let sums = [
                (local_sum(product.a, [&a_rows[0], &a_rows[1]], k), d),
                (local_sum(product.b, [&b_rows[0], &b_rows[1]], n), w),
            ];
            for j in 0..q {
                let target = i * q + j;
                for (operand, (sum, width)) in sums.iter().enumerate() {
                    let piece = piece_of(operand, j);
                    let rows_from = |r: usize| if operand == 0 { rows_a(r) } else { rows_b(r) };
                    if target != me {
                        let mine = rows_from(me);
                        let (lo, hi) = overlap(&mine, &piece.rows);
                        if lo < hi {
                            let block = block_of(
                                sum,
                                *width,
                                lo - mine.start..hi - mine.start,
                                &piece.cols,
                            );
                            wire::send(&world.process_at_rank(target as i32), &block);
                        }
                        continue;
                    }
                    let cols = piece.cols.len();
                    let mut held = vec![T::ZERO; piece.elements()];
                    for r in 0..parts {
                        let theirs = rows_from(r);
                        let (lo, hi) = overlap(&theirs, &piece.rows);
                        if lo >= hi {
                            continue;
                        }
                        let to = &mut held
                            [(lo - piece.rows.start) * cols..(hi - piece.rows.start) * cols];
                        if r == me {
                            to.copy_from_slice(&block_of(
                                sum,
                                *width,
                                lo - theirs.start..hi - theirs.start,
                                &piece.cols,
                            ));
                        } else {
                            wire::receive(&world.process_at_rank(r as i32), to);
                            words += to.len() as u128;
                        }
                    }
                    if operand == 0 {
                        s_piece = held;
                    } else {
                        t_piece = held;
                    }
                }
            }
        }
        // This member's piece of Q_g = S_g·T_g: on the rank (q = 1, with
        // the local algorithm's own levels), or across the group's ranks
        // (classical, each with the local algorithm) by the plan fixed
        // above.
        let q_piece = match &group_plan {
            None => {
                let mut product = vec![T::ZERO; h * w];
                cpu.gemm(
                    T::ONE,
                    MatRef::from_slice(&s_piece, h, d)?,
                    MatRef::from_slice(&t_piece, d, w)?,
                    T::ZERO,
                    MatMut::from_slice(&mut product, h, w)?,
                    opts,
                )?;
                product
            }
            Some(plan) => {
                let groupmates = world
                    .split_by_color_with_key(Color::with_value(group as i32), member as i32)
                    .ok_or_else(|| Error::InvalidOption("a rank left out of a split".into()))?;
                let sub = self.subgroup(groupmates);
                let held = [piece_of(0, member), piece_of(1, member)];
                let source =
                    |operand: Operand,
                     p: &Piece,
                     take: &mut dyn FnMut(MatRef<'_, T>) -> Result<(), Error>| {
                        let (index, values) = match operand {
                            Operand::A => (0, &s_piece),
                            Operand::B => (1, &t_piece),
                        };
                        if *p != held[index] {
                            return Err(Error::InvalidOption(format!(
                                "a group product asked for {p:?}, and its member holds {:?}",
                                held[index]
                            )));
                        }
                        take(MatRef::from_slice(values, p.rows.len(), p.cols.len())?)
                    };
                let (schedule, mine, _) = sub.product((h, d, w), &source, opts, Some(plan))?;
                words += received_by(&schedule, member);
                mine
            }
        };
        drop((s_piece, t_piece));
        // Every rank's rows of every Q: a gather to each rank in turn,
        // each member sending the rows of its piece of Q_i that the rank
        // holds of C.
        let mut q_rows: Vec<Vec<T>> = Vec::with_capacity(table.len());
        let mine_of_q = piece_of(2, member);
        for r in 0..parts {
            let theirs = rows_a(r);
            if r != me {
                let (lo, hi) = overlap(&theirs, &mine_of_q.rows);
                if lo < hi {
                    let rows = lo - mine_of_q.rows.start..hi - mine_of_q.rows.start;
                    let width = mine_of_q.cols.len();
                    wire::send(
                        &world.process_at_rank(r as i32),
                        &q_piece[rows.start * width..rows.end * width],
                    );
                }
                continue;
            }
            for i in 0..table.len() {
                let mut rows = vec![T::ZERO; theirs.len() * w];
                for j in 0..q {
                    let from = i * q + j;
                    let piece = piece_of(2, j);
                    let (lo, hi) = overlap(&theirs, &piece.rows);
                    if lo >= hi {
                        continue;
                    }
                    let width = piece.cols.len();
                    let block = if from == me {
                        q_piece[(lo - piece.rows.start) * width..(hi - piece.rows.start) * width]
                            .to_vec()
                    } else {
                        let mut block = vec![T::ZERO; (hi - lo) * width];
                        wire::receive(&world.process_at_rank(from as i32), &mut block);
                        words += block.len() as u128;
                        block
                    };
                    for (x, row) in block.chunks(width.max(1)).enumerate() {
                        let at = (lo - theirs.start + x) * w + piece.cols.start;
                        rows[at..at + width].copy_from_slice(row);
                    }
                }
                q_rows.push(rows);
            }
        }
        drop(q_piece);
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
        let timing = self.timing_and_words(mine_ms, words as u64);

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
        let classical = self.decompose::<T>((m, k, n)).ok();
        let bound = classical.map_or(0.0, |p| p.lower_bound);
        Ok(Some((c, {
            let mut report = ClusterReport::measured((parts, 1, 1), parts, timing, bound);
            report.moved.levels_across = 1;
            report.moved.breadth_first = true;
            report.error_growth = scheme.error_growth(1) * local_growth;
            report
        })))
    }
}
