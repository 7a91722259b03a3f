//! CAPS's breadth-first step (Ballard et al., SPAA 2012) across 7·q
//! ranks: the seven products of one Strassen or Winograd level run at
//! once, one per group of q ranks, instead of one after another on every
//! rank (the depth-first steps of [`super::caps`]).
//!
//! With A (m×k) and B (k×n) of even sizes split into quadrants, rank r
//! holds rows `part(m/2, P, r)` of the top and of the bottom half of A,
//! and likewise of B (over k/2): the same rows of every quadrant, so the
//! sums S_i = Σ w·A(x, y) and T_i = Σ w·B(x, y) of the scheme's table
//! ([`Scheme::products`]) are local row by row. Group i gathers S_i and
//! T_i whole on each of its ranks (the j-th rank of every group sends its
//! rows to the j-th rank of group i, then the group's ranks share what
//! they received), multiplies Q_i = S_i·T_i — on its one rank with the
//! local algorithm (its own levels below this one), or across its q ranks
//! as a classical distributed product —, and group i's first rank sends
//! every rank its rows of Q_i; each rank then forms its rows of
//! C(x, y) = Σ w·Q_i.
//!
//! On 7 ranks, rank i receives 6/7 of S_i and of T_i and every rank 6/7
//! of its rows of the Q's, about (mk + kn + mn)/4·6/7 words per rank with
//! m, k, n each split once: fewer than the depth-first steps' gathers of
//! B's blocks, at the price of S_i, T_i and Q_i whole on its rank — the
//! memory by which CAPS chooses the step.

use std::ops::Range;

use mpi::topology::Color;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use super::{received_by, whole_source, wire, Cluster, ClusterReport};
use crate::context::Context;
use crate::distributed::planner::part;
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
    /// C = A·B by one breadth-first step across 7·q ranks, with A and B
    /// given whole on every rank; `None`, touching nothing, for a rank
    /// count not a multiple of 7, an odd size, or where a rank's share
    /// exceeds the memory per rank. C comes back whole on rank 0.
    /// Collective.
    pub(super) fn matmul_breadth_first<T: Element>(
        &self,
        scheme: Scheme,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        opts: &GemmOptions,
    ) -> Result<Option<Product<T>>, Error> {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
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
        let (group, member) = (me / q, me % q);
        let rows_a = |r: usize| part(h, parts, r);
        let rows_b = |r: usize| part(d, parts, r);
        let (ra, rb) = (rows_a(me), rows_b(me));
        // Words held at the peak: rows of A, B and C, one S and T formed
        // at a time, S_g, T_g and Q_g whole, the Q rows received, and a
        // group's pieces and buffers of its product (about twice its
        // share of S_g, T_g and Q_g).
        let group_share = if q > 1 {
            2 * (h * d + d * w + h * w) / q
        } else {
            0
        };
        let need = (2 * ra.len() * k + 2 * rb.len() * n + 2 * ra.len() * n) as u128
            + (ra.len() * d + rb.len() * w) as u128
            + (h * d + d * w + h * w) as u128
            + (BREADTH_RANKS * ra.len() * w) as u128
            + group_share as u128;
        if self.memory_words::<T>().is_some_and(|words| need > words) {
            return Ok(None);
        }
        let cpu = Context::cpu();
        let local_growth = cpu.plan::<T>((h, d, w), true, opts)?.error_growth;
        let a_rows = [rows_of(a, 0, &ra), rows_of(a, h, &ra)];
        let b_rows = [rows_of(b, 0, &rb), rows_of(b, d, &rb)];
        let table = scheme.products();
        let world = &self.world;
        // Group g (ranks g·q…) multiplies product g; the cross
        // communicator of member j holds the j-th rank of every group.
        let split = |color: usize, key: usize| {
            world
                .split_by_color_with_key(Color::with_value(color as i32), key as i32)
                .ok_or_else(|| Error::InvalidOption("a rank left out of a split".into()))
        };
        let groupmates = split(group, member)?;
        let cross = split(member, group)?;
        let mut words = 0u128;

        world.barrier();
        let start = std::time::Instant::now();
        // S_g and T_g whole on every member of group g: across the cross
        // communicator, member j of group g gathers the rows of the other
        // groups' j-th ranks; then the group's members share theirs.
        let mut s_group = vec![T::ZERO; h * d];
        let mut t_group = vec![T::ZERO; d * w];
        let crossed = |g: usize| g * q + member;
        for (i, product) in table.iter().enumerate() {
            let s = local_sum(product.a, [&a_rows[0], &a_rows[1]], k);
            let t = local_sum(product.b, [&b_rows[0], &b_rows[1]], n);
            if i == group {
                s_group[ra.start * d..ra.end * d].copy_from_slice(&s);
                t_group[rb.start * w..rb.end * w].copy_from_slice(&t);
                for g in (0..BREADTH_RANKS).filter(|&g| g != group) {
                    let from = cross.process_at_rank(g as i32);
                    let (sr, tr) = (rows_a(crossed(g)), rows_b(crossed(g)));
                    wire::receive(&from, &mut s_group[sr.start * d..sr.end * d]);
                    wire::receive(&from, &mut t_group[tr.start * w..tr.end * w]);
                    words += (sr.len() * d + tr.len() * w) as u128;
                }
            } else {
                let to = cross.process_at_rank(i as i32);
                wire::send(&to, &s);
                wire::send(&to, &t);
            }
        }
        for root in 0..q {
            // Member `root`'s rows: those of every group's root-th rank.
            let owners: Vec<usize> = (0..BREADTH_RANKS).map(|g| g * q + root).collect();
            let process = groupmates.process_at_rank(root as i32);
            for owner in owners {
                let (sr, tr) = (rows_a(owner), rows_b(owner));
                for part in wire::messages_mut(&mut s_group[sr.start * d..sr.end * d]) {
                    process.broadcast_into(part);
                }
                for part in wire::messages_mut(&mut t_group[tr.start * w..tr.end * w]) {
                    process.broadcast_into(part);
                }
                if root != member {
                    words += (sr.len() * d + tr.len() * w) as u128;
                }
            }
        }
        // Q_g = S_g·T_g: on the rank (q = 1, with the local algorithm's
        // own levels), or across the group's ranks (classical, each with
        // the local algorithm), whole on its first member.
        let q_group = if q == 1 {
            let mut product = vec![T::ZERO; h * w];
            cpu.gemm(
                T::ONE,
                MatRef::from_slice(&s_group, h, d)?,
                MatRef::from_slice(&t_group, d, w)?,
                T::ZERO,
                MatMut::from_slice(&mut product, h, w)?,
                opts,
            )?;
            Some(product)
        } else {
            let sub = self.subgroup(groupmates.duplicate());
            let (s_view, t_view) = (
                MatRef::from_slice(&s_group, h, d)?,
                MatRef::from_slice(&t_group, d, w)?,
            );
            let source = whole_source(s_view, t_view);
            let (schedule, mine, _) = sub.product((h, d, w), &*source, opts)?;
            words += received_by(&schedule, member);
            sub.collect(&schedule, mine)?.map(Matrix::into_vec)
        };
        drop((s_group, t_group));
        // Every rank's rows of every Q: group i's first member sends each
        // rank its rows of Q_i.
        let mut q_rows: Vec<Vec<T>> = Vec::with_capacity(table.len());
        for i in 0..table.len() {
            let root = i * q;
            if root == me {
                let product = q_group.as_deref().unwrap_or_default();
                for r in (0..parts).filter(|&r| r != me) {
                    let rows = rows_a(r);
                    wire::send(
                        &world.process_at_rank(r as i32),
                        &product[rows.start * w..rows.end * w],
                    );
                }
                q_rows.push(product[ra.start * w..ra.end * w].to_vec());
            } else {
                let mut rows = vec![T::ZERO; ra.len() * w];
                wire::receive(&world.process_at_rank(root as i32), &mut rows);
                words += rows.len() as u128;
                q_rows.push(rows);
            }
        }
        drop(q_group);
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
        let classical = self.plan::<T>((m, k, n)).ok();
        let bound = classical.map_or(0.0, |p| p.lower_bound);
        Ok(Some((
            c,
            ClusterReport {
                levels_across: 1,
                breadth_first: true,
                error_growth: scheme.error_growth(1) * local_growth,
                ..ClusterReport::measured((parts, 1, 1), parts, timing, bound)
            },
        )))
    }
}
