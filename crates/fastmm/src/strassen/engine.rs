//! The recursion, written once for every backend and schedule.
//!
//! At each level, with all of m, k, n at least the threshold and levels
//! left: a very elongated product (largest dimension ≥ 4× the smallest) is
//! first cut in half along its largest dimension, classically; then odd
//! dimensions are peeled (the even core recurses, the leftover row, column
//! and rank-1 update go to the classical product); then the level's
//! schedule runs on the 2×2 quadrants, its products recursing one level
//! down. Below the threshold, or out of levels, the backend's classical
//! product finishes.
//!
//! The engine runs twice: a dry run that records the largest size each
//! temporary slot of each level reaches, and the real run. So the backend
//! allocates all workspace once per product.

use crate::element::Element;
use crate::error::Error;
use crate::strassen::backend::{Backend, Block, Combination, Primitive, Store};
use crate::strassen::schedule::{Keep, Kind, Loc, Product, Schedule, Step};

/// Cut a product classically along a dimension this many times larger than
/// the smallest one before applying a level.
const ELONGATION_SPLIT: usize = 4;

/// The first of the three slots (past every schedule's) of a level that
/// hold the sums and product of a primitive the backend does not fuse.
const PRIMITIVE_SCRATCH_SLOT: usize = 32;

/// What one recursion needs to know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The level schedule (products of a level write C with β = 0 only).
    pub schedule: &'static Schedule,
    /// The schedule for a level whose caller passes β ≠ 0, when `schedule`
    /// cannot honour it.
    pub beta_schedule: &'static Schedule,
    /// Recurse only while m, k and n are all at least this (≥ 2).
    pub threshold: usize,
    /// Apply the top level only when m, k and n are all at least this too:
    /// `auto`'s smallest product worth one level (0 for an explicit
    /// threshold).
    pub start: usize,
    /// At most this many levels.
    pub max_depth: usize,
    /// The `fused` variant: the level's products in primitive form,
    /// composed across levels; `schedule` is then unused.
    pub fused: Option<&'static [Product; 7]>,
    /// In the stored schedules, a sum of A or B blocks with at most this
    /// many terms, read by a product that recurses no further, is not
    /// stored but handed to that product, which forms it while packing
    /// ([`Backend::primitive`]); 0 stores every sum. Only for backends
    /// whose primitive fuses.
    pub lazy_sum_terms: usize,
}

/// Two plans are the same recursion when they name the same static
/// schedules (by address: each is one of the constant tables) and the
/// same numbers.
impl PartialEq for Plan {
    fn eq(&self, other: &Plan) -> bool {
        std::ptr::eq(self.schedule, other.schedule)
            && std::ptr::eq(self.beta_schedule, other.beta_schedule)
            && match (self.fused, other.fused) {
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                (None, None) => true,
                _ => false,
            }
            && (
                self.threshold,
                self.start,
                self.max_depth,
                self.lazy_sum_terms,
            ) == (
                other.threshold,
                other.start,
                other.max_depth,
                other.lazy_sum_terms,
            )
    }
}

/// How many of the most recent groups of held-back primitives a new one
/// may join ([`Engine::issue_pending`]).
const GROUP_SEARCH: usize = 32;

/// Most destination comparisons to place one primitive in one group.
const GROUP_OVERLAP_TESTS: usize = 1024;

/// A weighted sum of equally shaped blocks, Σ wᵢ·blockᵢ.
type Terms<T> = [(T, Block)];

/// A sub-block as (row, col, rows, cols).
type Rect = (usize, usize, usize, usize);

/// One sub-product of a cut: blocks of A, B and C, and whether it adds into
/// C already written by an earlier part (so ignores the caller's β).
#[derive(Debug, Clone, Copy)]
struct Part {
    a: Rect,
    b: Rect,
    c: Rect,
    accumulates: bool,
}

/// How the recursion treats a product at some depth.
enum Cut {
    /// Threshold or depth reached: the classical product (or primitive).
    Leaf,
    /// Too elongated: two halves along the largest dimension, in order.
    Halves([Part; 2]),
    /// A level on the even core, then the peeled leftovers classically:
    /// the rank-1 update of an odd k (accumulating), the last column of
    /// an odd n and the last row of an odd m.
    Level { core: Part, leftovers: Vec<Part> },
}

impl Plan {
    fn cut(&self, level: usize, (m, k, n): (usize, usize, usize)) -> Cut {
        let smallest = m.min(k).min(n);
        if level >= self.max_depth
            || smallest < self.threshold
            || (level == 0 && smallest < self.start)
        {
            return Cut::Leaf;
        }
        let part = |a: Rect, b: Rect, c: Rect, accumulates| Part {
            a,
            b,
            c,
            accumulates,
        };
        let largest = m.max(k).max(n);
        if largest >= ELONGATION_SPLIT * smallest {
            return Cut::Halves(if m == largest {
                let h = m / 2;
                [
                    part((0, 0, h, k), (0, 0, k, n), (0, 0, h, n), false),
                    part((h, 0, m - h, k), (0, 0, k, n), (h, 0, m - h, n), false),
                ]
            } else if n == largest {
                let h = n / 2;
                [
                    part((0, 0, m, k), (0, 0, k, h), (0, 0, m, h), false),
                    part((0, 0, m, k), (0, h, k, n - h), (0, h, m, n - h), false),
                ]
            } else {
                let h = k / 2;
                [
                    part((0, 0, m, h), (0, 0, h, n), (0, 0, m, n), false),
                    part((0, h, m, k - h), (h, 0, k - h, n), (0, 0, m, n), true),
                ]
            });
        }
        let (me, ke, ne) = (m & !1, k & !1, n & !1);
        let mut leftovers = Vec::new();
        if ke < k {
            leftovers.push(part((0, ke, me, 1), (ke, 0, 1, ne), (0, 0, me, ne), true));
        }
        if ne < n {
            leftovers.push(part((0, 0, m, k), (0, ne, k, 1), (0, ne, m, 1), false));
        }
        if me < m {
            leftovers.push(part((me, 0, 1, k), (0, 0, k, ne), (me, 0, 1, ne), false));
        }
        Cut::Level {
            core: part((0, 0, me, ke), (0, 0, ke, ne), (0, 0, me, ne), false),
            leftovers,
        }
    }
}

/// What a product used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recursed {
    /// Recursion levels applied (0: the classical product ran).
    pub levels: usize,
    /// Elements of temporary workspace, all levels together.
    pub workspace_elements: usize,
}

struct Engine<'b, T: Element, B: Backend<T>> {
    plan: Plan,
    alpha: T,
    /// None during the dry run.
    backend: Option<&'b mut B>,
    /// ids[level][slot]: the temporary of that slot at that level.
    ids: Vec<Vec<Option<usize>>>,
    capacities: Vec<usize>,
    levels: usize,
    /// The fused variant's primitives, held back for a backend that runs
    /// them in groups ([`Backend::GROUPS_PRIMITIVES`]).
    pending: Vec<Primitive<T>>,
}

/// C ← α·A·B + β·C on `backend`, for A m×k and B k×n.
pub(crate) fn run<T: Element, B: Backend<T>>(
    backend: &mut B,
    plan: Plan,
    alpha: T,
    beta: T,
    (m, k, n): (usize, usize, usize),
) -> Result<Recursed, Error> {
    let mut dry = Engine::<T, B>::new(plan, alpha, None);
    dry.top(operands(m, k, n), beta)?;
    let report = dry.report();
    backend.allocate(&dry.capacities)?;
    // The real run walks the same tree, so it meets the same slots in the
    // same order, at the sizes the dry run recorded.
    let mut engine = Engine::<T, B>::new(plan, alpha, Some(backend));
    engine.ids = dry.ids;
    engine.capacities = dry.capacities;
    engine.top(operands(m, k, n), beta)?;
    Ok(report)
}

/// The levels and workspace a product would use on backend type B,
/// without running it (the schedule depends on whether β is 0).
pub(crate) fn dry_run<T: Element, B: Backend<T>>(
    plan: Plan,
    beta_is_zero: bool,
    (m, k, n): (usize, usize, usize),
) -> Recursed {
    let beta = if beta_is_zero { T::ZERO } else { T::ONE };
    let mut dry = Engine::<T, B>::new(plan, T::ONE, None);
    dry.top(operands(m, k, n), beta)
        .expect("a dry run calls no backend");
    dry.report()
}

fn operands(m: usize, k: usize, n: usize) -> (Block, Block, Block) {
    (
        Block::whole(Store::A, m, k),
        Block::whole(Store::B, k, n),
        Block::whole(Store::C, m, n),
    )
}

impl<'b, T: Element, B: Backend<T>> Engine<'b, T, B> {
    fn new(plan: Plan, alpha: T, backend: Option<&'b mut B>) -> Self {
        Engine {
            plan,
            alpha,
            backend,
            ids: Vec::new(),
            capacities: Vec::new(),
            levels: 0,
            pending: Vec::new(),
        }
    }

    fn report(&self) -> Recursed {
        Recursed {
            levels: self.levels,
            workspace_elements: self.capacities.iter().sum(),
        }
    }

    /// The whole product. The fused variant first applies β to C (one
    /// pass; nothing when β = 1), since its primitives only accumulate.
    fn top(&mut self, (a, b, c): (Block, Block, Block), beta: T) -> Result<(), Error> {
        if self.plan.fused.is_none() {
            return self.multiply(0, (&[(T::ONE, a)], &[(T::ONE, b)], c), beta);
        }
        if beta != T::ONE {
            if let Some(backend) = self.backend.as_deref_mut() {
                backend.combine(beta, c, &[])?;
            }
        }
        self.fused(0, &[(T::ONE, a)], &[(T::ONE, b)], &[(T::ONE, c)])?;
        self.issue_pending()
    }

    /// Runs the held-back primitives in groups: each goes into the first
    /// of the last [`GROUP_SEARCH`] groups that has its shape and none of
    /// whose destinations it overlaps (they all only add into C, which β
    /// has already scaled, so their order does not matter), and the groups
    /// run one after another. The search is bounded so that deep
    /// recursions (thousands of primitives, tens of destinations each)
    /// stay cheap: a group whose destinations would take more than
    /// [`GROUP_OVERLAP_TESTS`] comparisons counts as full.
    fn issue_pending(&mut self) -> Result<(), Error> {
        let pending = std::mem::take(&mut self.pending);
        if self.backend.is_none() {
            return Ok(());
        }
        let mut groups: Vec<(Vec<Primitive<T>>, usize)> = Vec::new();
        for primitive in pending {
            let destinations = primitive.c.len();
            let skip = groups.len().saturating_sub(GROUP_SEARCH);
            let home = groups[skip..].iter().position(|(group, held)| {
                group[0].shape() == primitive.shape()
                    && held * destinations <= GROUP_OVERLAP_TESTS
                    && group.iter().all(|p| !p.writes_overlap(&primitive))
            });
            match home {
                Some(g) => {
                    let (group, held) = &mut groups[skip + g];
                    group.push(primitive);
                    *held += destinations;
                }
                None => groups.push((vec![primitive], destinations)),
            }
        }
        let groups: Vec<Vec<Primitive<T>>> = groups.into_iter().map(|(group, _)| group).collect();
        if let Some(backend) = self.backend.as_deref_mut() {
            for group in &groups {
                backend.primitives(self.alpha, T::ONE, group)?;
            }
        }
        Ok(())
    }

    /// Σ c_k += γ_k·α·(Σ a)(Σ b) at depth `level`, recursing on the
    /// primitive form: the terms of each product's operands and
    /// destinations are the quadrants of the current ones, weighted.
    fn fused(
        &mut self,
        level: usize,
        a: &Terms<T>,
        b: &Terms<T>,
        c: &Terms<T>,
    ) -> Result<(), Error> {
        let cut = |parts: &Part| (sub(a, parts.a), sub(b, parts.b), sub(c, parts.c));
        match self
            .plan
            .cut(level, (a[0].1.rows, a[0].1.cols, b[0].1.cols))
        {
            Cut::Leaf => self.primitive(level, a, b, T::ONE, c),
            Cut::Halves(halves) => {
                for part in &halves {
                    let (a, b, c) = cut(part);
                    self.fused(level, &a, &b, &c)?;
                }
                Ok(())
            }
            Cut::Level { core, leftovers } => {
                let (a2, b2, c2) = cut(&core);
                self.fused_level(level, &a2, &b2, &c2)?;
                for part in &leftovers {
                    let (a, b, c) = cut(part);
                    self.primitive(level, &a, &b, T::ONE, &c)?;
                }
                Ok(())
            }
        }
    }

    /// One fused level on even dimensions: seven primitives, each on the
    /// weighted quadrants of the current terms.
    fn fused_level(
        &mut self,
        level: usize,
        a: &Terms<T>,
        b: &Terms<T>,
        c: &Terms<T>,
    ) -> Result<(), Error> {
        let products = self.plan.fused.expect("the fused variant has products");
        self.levels = self.levels.max(level + 1);
        let (mh, kh, nh) = (a[0].1.rows / 2, a[0].1.cols / 2, b[0].1.cols / 2);
        for product in products {
            let a2 = expand(a, product.a, mh, kh);
            let b2 = expand(b, product.b, kh, nh);
            let c2 = expand(c, product.c, mh, nh);
            self.fused(level + 1, &a2, &b2, &c2)?;
        }
        Ok(())
    }

    /// A leaf of the fused recursion: the backend's primitive, with scratch
    /// temporaries sized for its default implementation when the backend
    /// does not fuse.
    fn primitive(
        &mut self,
        level: usize,
        a: &Terms<T>,
        b: &Terms<T>,
        beta: T,
        c: &Terms<T>,
    ) -> Result<(), Error> {
        let (m, k, n) = (a[0].1.rows, a[0].1.cols, b[0].1.cols);
        let scratch = if B::FUSES_PRIMITIVE {
            [Block::whole(Store::C, 0, 0); 3]
        } else {
            let mut temp = |slot: usize, rows: usize, cols: usize| {
                let id = self.slot(level, slot, rows * cols);
                Block::whole(Store::Temp { id, ld: cols }, rows, cols)
            };
            let first = PRIMITIVE_SCRATCH_SLOT;
            [
                temp(first, m, k),
                temp(first + 1, k, n),
                temp(first + 2, m, n),
            ]
        };
        if B::GROUPS_PRIMITIVES && self.plan.fused.is_some() {
            debug_assert!(
                beta == T::ONE,
                "the fused variant's primitives only accumulate"
            );
            self.pending.push(Primitive {
                a: a.to_vec(),
                b: b.to_vec(),
                c: c.to_vec(),
                scratch,
            });
            return Ok(());
        }
        match self.backend.as_deref_mut() {
            Some(backend) => backend.primitive(self.alpha, a, b, beta, c, scratch),
            None => Ok(()),
        }
    }

    /// c ← α·(Σ a)(Σ b) + β·c at recursion depth `level`, where each
    /// operand is a weighted list of blocks (one block of weight 1 unless
    /// a sum was left for the product to form).
    fn multiply(
        &mut self,
        level: usize,
        (a, b, c): (&Terms<T>, &Terms<T>, Block),
        beta: T,
    ) -> Result<(), Error> {
        let cut = |part: &Part| (sub(a, part.a), sub(b, part.b), c.sub_rect(part.c));
        // A part that adds into C already written by an earlier part of the
        // same cut accumulates; the others apply the caller's β.
        let beta_of = |part: &Part| if part.accumulates { T::ONE } else { beta };
        match self
            .plan
            .cut(level, (a[0].1.rows, a[0].1.cols, b[0].1.cols))
        {
            Cut::Leaf => self.leaf(level, a, b, beta, c),
            Cut::Halves(halves) => {
                for part in &halves {
                    let (a, b, c) = cut(part);
                    self.multiply(level, (&a, &b, c), beta_of(part))?;
                }
                Ok(())
            }
            Cut::Level { core, leftovers } => {
                let (a2, b2, c2) = cut(&core);
                self.level(level, &a2, &b2, beta, c2)?;
                for part in &leftovers {
                    let (a, b, c) = cut(part);
                    self.leaf(level, &a, &b, beta_of(part), c)?;
                }
                Ok(())
            }
        }
    }

    /// One level of the schedule on even dimensions.
    fn level(
        &mut self,
        level: usize,
        a: &Terms<T>,
        b: &Terms<T>,
        beta: T,
        c: Block,
    ) -> Result<(), Error> {
        let schedule = if beta == T::ZERO || self.plan.schedule.any_beta {
            self.plan.schedule
        } else {
            self.plan.beta_schedule
        };
        self.levels = self.levels.max(level + 1);
        let halves = (a[0].1.rows / 2, a[0].1.cols / 2, b[0].1.cols / 2);
        let mut q = Quadrants {
            a,
            b,
            c,
            halves,
            lazy: Vec::new(),
        };
        for step in schedule.steps {
            match *step {
                Step::Sum { dst, keep, terms } => {
                    let keep = keep_value(keep, beta);
                    if let Loc::T(slot, Kind::A | Kind::B) = dst {
                        self.operand_sum(level, &mut q, (slot, dst), keep, terms)?;
                        continue;
                    }
                    let dst = self.resolve(level, &q, dst);
                    let terms: Vec<(T, Block)> = terms
                        .iter()
                        .map(|&(w, loc)| (T::from_i64(w.into()), self.resolve(level, &q, loc)))
                        .collect();
                    if let Some(backend) = self.backend.as_deref_mut() {
                        backend.combine(keep, dst, &terms)?;
                    }
                }
                Step::Product { a, b, c, keep } => {
                    let a = self.operand(level, &q, a);
                    let b = self.operand(level, &q, b);
                    let c = self.resolve(level, &q, c);
                    self.multiply(level + 1, (&a, &b, c), keep_value(keep, beta))?;
                }
                Step::Group(sums) => {
                    // Every sum stored: its temporaries feed products that
                    // may recurse, and the group is formed in one pass.
                    let mut group = Vec::with_capacity(sums.len());
                    for sum in sums {
                        let Step::Sum { dst, keep, terms } = *sum else {
                            unreachable!("a group holds sums only");
                        };
                        let dst = self.resolve(level, &q, dst);
                        let mut weighted = Vec::with_capacity(terms.len());
                        for &(w, loc) in terms {
                            let w = T::from_i64(w.into());
                            weighted.extend(scaled(w, &self.operand(level, &q, loc)));
                        }
                        group.push(Combination {
                            keep: keep_value(keep, beta),
                            dst,
                            terms: weighted,
                        });
                    }
                    if let Some(backend) = self.backend.as_deref_mut() {
                        backend.combine_group(&group)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// T(slot) ← keep·T(slot) + Σ w·term for an A- or B-shaped temporary:
    /// left as a list of blocks of the level's operands for the product to
    /// form while packing, when that product is a leaf and the list has at
    /// most `lazy_sum_terms` terms; else stored (in place when the
    /// temporary already holds the old value). Deeper products would expand
    /// the list again at every level below.
    fn operand_sum(
        &mut self,
        level: usize,
        q: &mut Quadrants<'_, T>,
        (slot, dst): (u8, Loc),
        keep: T,
        terms: &[(i8, Loc)],
    ) -> Result<(), Error> {
        let slot = slot as usize;
        let mut sum: Vec<(T, Block)> = Vec::new();
        if keep != T::ZERO {
            sum.extend(scaled(keep, &self.operand(level, q, dst)));
        }
        for &(w, loc) in terms {
            sum.extend(scaled(T::from_i64(w.into()), &self.operand(level, q, loc)));
        }
        if q.lazy.len() <= slot {
            q.lazy.resize(slot + 1, None);
        }
        let own_temps = self.ids.get(level).map_or(&[][..], Vec::as_slice);
        let is_own_temp = |block: &Block| match block.store {
            Store::Temp { id, .. } => own_temps.contains(&Some(id)),
            _ => false,
        };
        if sum.len() <= self.plan.lazy_sum_terms
            && matches!(self.plan.cut(level + 1, q.halves), Cut::Leaf)
            && !sum.iter().any(|(_, x)| is_own_temp(x))
        {
            // Only blocks of this level's operands, which nothing writes
            // while the level runs.
            q.lazy[slot] = Some(sum);
            return Ok(());
        }
        q.lazy[slot] = None;
        let dst = self.resolve(level, q, dst);
        // The old value, when stored in the destination, stays in place.
        let mut keep = T::ZERO;
        sum.retain(|&(w, x)| {
            let in_place = x == dst;
            if in_place {
                keep = keep.add(w);
            }
            !in_place
        });
        match self.backend.as_deref_mut() {
            Some(backend) => backend.combine(keep, dst, &sum),
            None => Ok(()),
        }
    }

    /// The weighted blocks an operand location stands for: the quadrant of
    /// every term of the level's operand, a sum left unformed, or a block.
    fn operand(&mut self, level: usize, q: &Quadrants<'_, T>, loc: Loc) -> Vec<(T, Block)> {
        let (mh, kh, nh) = q.halves;
        match loc {
            Loc::A(i, j) => sub(q.a, (i as usize * mh, j as usize * kh, mh, kh)),
            Loc::B(i, j) => sub(q.b, (i as usize * kh, j as usize * nh, kh, nh)),
            Loc::T(slot, _) => match q.lazy.get(slot as usize) {
                Some(Some(sum)) => sum.clone(),
                _ => vec![(T::ONE, self.resolve(level, q, loc))],
            },
            Loc::C(..) => vec![(T::ONE, self.resolve(level, q, loc))],
        }
    }

    /// c ← α·(Σ a)(Σ b) + β·c classically: a plain GEMM for single blocks,
    /// else the backend's primitive.
    fn leaf(
        &mut self,
        level: usize,
        a: &Terms<T>,
        b: &Terms<T>,
        beta: T,
        c: Block,
    ) -> Result<(), Error> {
        if let ([(wa, a1)], [(wb, b1)]) = (a, b) {
            if *wa == T::ONE && *wb == T::ONE {
                return match self.backend.as_deref_mut() {
                    Some(backend) => backend.gemm(self.alpha, *a1, *b1, beta, c),
                    None => Ok(()),
                };
            }
        }
        self.primitive(level, a, b, beta, &[(T::ONE, c)])
    }

    /// The block a C location, or a stored temporary, names at this level;
    /// a temporary slot is sized (dry run) or looked up (real run) here.
    fn resolve(&mut self, level: usize, q: &Quadrants<'_, T>, loc: Loc) -> Block {
        let (mh, kh, nh) = q.halves;
        match loc {
            Loc::A(..) | Loc::B(..) => {
                unreachable!("operand quadrants are resolved by `operand`")
            }
            Loc::C(i, j) => q.c.sub(i as usize * mh, j as usize * nh, mh, nh),
            Loc::T(slot, kind) => {
                let (rows, cols) = match kind {
                    Kind::A => (mh, kh),
                    Kind::B => (kh, nh),
                    Kind::C => (mh, nh),
                };
                let id = self.slot(level, slot as usize, rows * cols);
                Block::whole(Store::Temp { id, ld: cols }, rows, cols)
            }
        }
    }

    fn slot(&mut self, level: usize, slot: usize, elements: usize) -> usize {
        if self.ids.len() <= level {
            self.ids.resize(level + 1, Vec::new());
        }
        if self.ids[level].len() <= slot {
            self.ids[level].resize(slot + 1, None);
        }
        let id = *self.ids[level][slot].get_or_insert_with(|| {
            self.capacities.push(0);
            self.capacities.len() - 1
        });
        if self.backend.is_none() {
            self.capacities[id] = self.capacities[id].max(elements);
        }
        debug_assert!(
            elements <= self.capacities[id],
            "the dry run sized every slot"
        );
        id
    }
}

/// The operands of one level, the size of their quadrants, and the sums
/// of this level left for their products to form.
struct Quadrants<'o, T> {
    a: &'o [(T, Block)],
    b: &'o [(T, Block)],
    c: Block,
    /// (m/2, k/2, n/2).
    halves: (usize, usize, usize),
    /// lazy[slot]: the unformed sum an A- or B-shaped temporary stands for.
    lazy: Vec<Option<Vec<(T, Block)>>>,
}

fn keep_value<T: Element>(keep: Keep, beta: T) -> T {
    match keep {
        Keep::Zero => T::ZERO,
        Keep::One => T::ONE,
        Keep::MinusOne => T::ZERO.sub(T::ONE),
        Keep::Beta => beta,
    }
}

/// Every term's weight multiplied by `factor`.
fn scaled<T: Element>(factor: T, terms: &[(T, Block)]) -> impl Iterator<Item = (T, Block)> + '_ {
    terms.iter().map(move |&(w, block)| (factor.mul(w), block))
}

/// The same sub-block of every term.
fn sub<T: Copy>(terms: &[(T, Block)], rect: Rect) -> Vec<(T, Block)> {
    terms
        .iter()
        .map(|&(w, block)| (w, block.sub_rect(rect)))
        .collect()
}

/// Each term's quadrants named by `coefficients`, as (w·coefficient,
/// quadrant (i, j)) with quadrants `rows`×`cols`.
fn expand<T: Element>(
    terms: &Terms<T>,
    coefficients: &[(i8, (u8, u8))],
    rows: usize,
    cols: usize,
) -> Vec<(T, Block)> {
    let mut out = Vec::with_capacity(terms.len() * coefficients.len());
    for &(w, block) in terms {
        for &(coefficient, (i, j)) in coefficients {
            let quadrant = block.sub(i as usize * rows, j as usize * cols, rows, cols);
            out.push((w.mul(T::from_i64(coefficient.into())), quadrant));
        }
    }
    out
}
