//! What a device must provide for the fast algorithms: the classical
//! product on blocks, linear combinations of blocks, and room for
//! temporaries. The recursion ([`super::engine`]) only ever names blocks;
//! each backend resolves them to its own memory.

use crate::element::Element;
use crate::error::Error;

/// The matrix a block lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// The left operand.
    A,
    /// The right operand.
    B,
    /// The output.
    C,
    /// Temporary `id`, stored row-major with row stride `ld`.
    Temp {
        /// Which temporary (an index into the capacities given to
        /// [`Backend::allocate`]).
        id: usize,
        /// Its row stride, in elements.
        ld: usize,
    },
}

/// A rows×cols block of a [`Store`] whose top-left element is (row, col).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Where it lives.
    pub store: Store,
    /// Row of its first element.
    pub row: usize,
    /// Column of its first element.
    pub col: usize,
    /// Its height.
    pub rows: usize,
    /// Its width.
    pub cols: usize,
}

impl Block {
    /// The whole of an m×n operand.
    pub fn whole(store: Store, rows: usize, cols: usize) -> Block {
        Block {
            store,
            row: 0,
            col: 0,
            rows,
            cols,
        }
    }

    /// The block (row, col, rows, cols) inside this one.
    pub fn sub_rect(self, (row, col, rows, cols): (usize, usize, usize, usize)) -> Block {
        self.sub(row, col, rows, cols)
    }

    /// The rows×cols block at (row, col) inside this one.
    pub fn sub(self, row: usize, col: usize, rows: usize, cols: usize) -> Block {
        debug_assert!(row + rows <= self.rows && col + cols <= self.cols);
        Block {
            store: self.store,
            row: self.row + row,
            col: self.col + col,
            rows,
            cols,
        }
    }
}

/// One linear combination of a [`Backend::combine_group`]:
/// dst ← keep·dst + Σ w·term.
#[derive(Debug, Clone, PartialEq)]
pub struct Combination<T> {
    /// Factor on the destination's old contents (0: never read).
    pub keep: T,
    /// Where it goes.
    pub dst: Block,
    /// The weighted sources.
    pub terms: Vec<(T, Block)>,
}

/// One Strassen primitive of a [`Backend::primitives`] group:
/// M = (Σ wᵢAᵢ)(Σ vⱼBⱼ) added into each destination (γ_k, C_k).
#[derive(Debug, Clone, PartialEq)]
pub struct Primitive<T> {
    /// The weighted blocks of A summed into the left operand.
    pub a: Vec<(T, Block)>,
    /// The weighted blocks of B summed into the right operand.
    pub b: Vec<(T, Block)>,
    /// The destinations and their weights γ_k.
    pub c: Vec<(T, Block)>,
    /// Room for the default [`Backend::primitive`] (see there).
    pub scratch: [Block; 3],
}

impl<T> Primitive<T> {
    /// Its (m, k, n).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.a[0].1.rows, self.a[0].1.cols, self.b[0].1.cols)
    }

    /// Whether a destination of `self` overlaps one of `other`'s.
    pub fn writes_overlap(&self, other: &Primitive<T>) -> bool {
        self.c
            .iter()
            .any(|(_, mine)| other.c.iter().any(|(_, theirs)| mine.overlaps(theirs)))
    }
}

impl Block {
    /// Whether the two blocks share an element.
    pub fn overlaps(&self, other: &Block) -> bool {
        self.store == other.store
            && self.row < other.row + other.rows
            && other.row < self.row + self.rows
            && self.col < other.col + other.cols
            && other.col < self.col + self.cols
    }
}

/// A device the fast algorithms run on.
///
/// Every call names blocks of A, B, C or of the temporaries. The recursion
/// guarantees that the destination of a call never overlaps one of its
/// sources, and never writes A or B.
pub trait Backend<T: Element> {
    /// Called once per product, before any other call: makes room for
    /// temporary `i` of `capacities[i]` elements.
    fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error>;

    /// **c ← α·a·b + β·c** with the classical algorithm (β = 0 never
    /// reads c).
    fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error>;

    /// **dst ← keep·dst + Σ wᵢ·srcᵢ**; keep = 0 never reads dst (and with
    /// no terms, dst ← keep·dst).
    fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error>;

    /// Several combinations at once, each **dst ← keep·dst + Σ wᵢ·srcᵢ**:
    /// all blocks of one shape, and no destination among the sources of
    /// another (each reads only its own, through keep). A backend may form
    /// them in one pass that reads every source once; the default runs
    /// them one by one.
    fn combine_group(&mut self, sums: &[Combination<T>]) -> Result<(), Error> {
        for sum in sums {
            self.combine(sum.keep, sum.dst, &sum.terms)?;
        }
        Ok(())
    }

    /// Whether [`Backend::primitive`] is native. When it is not, the engine
    /// sizes the `scratch` that the default implementation needs.
    const FUSES_PRIMITIVE: bool = false;

    /// The Strassen primitive: **M = (Σ wᵢAᵢ)(Σ vⱼBⱼ), then
    /// C_k ← β·C_k + γ_k·α·M** for each destination (γ_k, C_k); β = 0 never
    /// reads C_k. All A terms have one shape, all B terms another, and the
    /// destinations are disjoint blocks of C or of C-shaped temporaries.
    ///
    /// The default forms the sums in `scratch` (an A-shaped, a B-shaped and
    /// a C-shaped temporary; a single term of weight 1 is used in place),
    /// multiplies them classically and adds the product into each
    /// destination. A backend that fuses the sums into its own packing or
    /// tile loads overrides it and sets [`Backend::FUSES_PRIMITIVE`].
    fn primitive(
        &mut self,
        alpha: T,
        a: &[(T, Block)],
        b: &[(T, Block)],
        beta: T,
        c: &[(T, Block)],
        scratch: [Block; 3],
    ) -> Result<(), Error> {
        let [a_sum, b_sum, product] = scratch;
        let left = match a {
            [(w, block)] if *w == T::ONE => *block,
            _ => {
                self.combine(T::ZERO, a_sum, a)?;
                a_sum
            }
        };
        let right = match b {
            [(w, block)] if *w == T::ONE => *block,
            _ => {
                self.combine(T::ZERO, b_sum, b)?;
                b_sum
            }
        };
        if let [(gamma, dest)] = c {
            if *gamma == T::ONE {
                return self.gemm(alpha, left, right, beta, *dest);
            }
        }
        self.gemm(alpha, left, right, T::ZERO, product)?;
        for &(gamma, dest) in c {
            self.combine(beta, dest, &[(gamma, product)])?;
        }
        Ok(())
    }

    /// Whether the engine should hand the fused variant's primitives over
    /// in groups ([`Backend::primitives`]) rather than one at a time.
    const GROUPS_PRIMITIVES: bool = false;

    /// Several primitives of one shape whose destinations are pairwise
    /// disjoint, each **C_k ← β·C_k + γ_k·α·M** as in
    /// [`Backend::primitive`]; no destination is read by another member,
    /// so a backend may run them concurrently. The default runs them in
    /// order.
    fn primitives(&mut self, alpha: T, beta: T, group: &[Primitive<T>]) -> Result<(), Error> {
        for p in group {
            self.primitive(alpha, &p.a, &p.b, beta, &p.c, p.scratch)?;
        }
        Ok(())
    }
}
