//! One recursion level of each algorithm as data: a list of steps over the
//! quadrants of A, B and C and a few temporaries. The engine runs them; the
//! integer tests prove them exact.
//!
//! Quadrants are X(i, j) with i, j ∈ {0, 1} for X₁₁…X₂₂. A temporary has a
//! slot number and a shape kind: `A` (m/2 × k/2), `B` (k/2 × n/2) or `C`
//! (m/2 × n/2). A slot may change kind between uses once its contents are
//! dead (the frugal schedules do that).

/// Shape of a temporary, in quadrant terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// m/2 × k/2, like a quadrant of A.
    A,
    /// k/2 × n/2, like a quadrant of B.
    B,
    /// m/2 × n/2, like a quadrant of C.
    C,
}

/// A block of one recursion level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loc {
    A(u8, u8),
    B(u8, u8),
    C(u8, u8),
    T(u8, Kind),
}

/// The factor on a destination's old contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Overwrite (never read).
    Zero,
    /// Accumulate.
    One,
    /// Negate and accumulate.
    MinusOne,
    /// The caller's β: the first write of a quadrant of C.
    Beta,
}

/// One step of a level.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    /// dst ← keep·dst + Σ w·src.
    Sum {
        dst: Loc,
        keep: Keep,
        terms: &'static [(i8, Loc)],
    },
    /// c ← α·a·b + keep·c, by recursion.
    Product { a: Loc, b: Loc, c: Loc, keep: Keep },
    /// Sums of one shape (all `Step::Sum`), none reading another's
    /// destination, which a backend may form in one pass over their
    /// sources ([`crate::strassen::backend::Backend::combine_group`]).
    Group(&'static [Step]),
}

/// A level's schedule and what it needs.
#[derive(Debug)]
pub(crate) struct Schedule {
    pub steps: &'static [Step],
    /// Whether the schedule honours a caller's β ≠ 0. The frugal ones use
    /// the quadrants of C as scratch, so they need β = 0.
    pub any_beta: bool,
}

use Keep::{Beta, MinusOne, One, Zero};
use Kind::{A as KA, B as KB, C as KC};
use Loc::{A, B, C, T};

const fn sum(dst: Loc, keep: Keep, terms: &'static [(i8, Loc)]) -> Step {
    Step::Sum { dst, keep, terms }
}

const fn product(a: Loc, b: Loc, c: Loc, keep: Keep) -> Step {
    Step::Product { a, b, c, keep }
}

/// Strassen (1969) with all ten sums and seven products in their own
/// temporaries, then C assembled: 7 products, 18 additions, 17 quarter-size
/// temporaries per level (seed 000's scheme, allocated once per level).
pub(crate) const STRASSEN_TEMPORARIES: Schedule = Schedule {
    any_beta: true,
    steps: &[
        sum(T(0, KB), Zero, &[(1, B(0, 1)), (-1, B(1, 1))]), // S1 = B12 − B22
        sum(T(1, KA), Zero, &[(1, A(0, 0)), (1, A(0, 1))]),  // S2 = A11 + A12
        sum(T(2, KA), Zero, &[(1, A(1, 0)), (1, A(1, 1))]),  // S3 = A21 + A22
        sum(T(3, KB), Zero, &[(1, B(1, 0)), (-1, B(0, 0))]), // S4 = B21 − B11
        sum(T(4, KA), Zero, &[(1, A(0, 0)), (1, A(1, 1))]),  // S5 = A11 + A22
        sum(T(5, KB), Zero, &[(1, B(0, 0)), (1, B(1, 1))]),  // S6 = B11 + B22
        sum(T(6, KA), Zero, &[(1, A(0, 1)), (-1, A(1, 1))]), // S7 = A12 − A22
        sum(T(7, KB), Zero, &[(1, B(1, 0)), (1, B(1, 1))]),  // S8 = B21 + B22
        sum(T(8, KA), Zero, &[(1, A(0, 0)), (-1, A(1, 0))]), // S9 = A11 − A21
        sum(T(9, KB), Zero, &[(1, B(0, 0)), (1, B(0, 1))]),  // S10 = B11 + B12
        product(A(0, 0), T(0, KB), T(10, KC), Zero),         // P1 = A11·S1
        product(T(1, KA), B(1, 1), T(11, KC), Zero),         // P2 = S2·B22
        product(T(2, KA), B(0, 0), T(12, KC), Zero),         // P3 = S3·B11
        product(A(1, 1), T(3, KB), T(13, KC), Zero),         // P4 = A22·S4
        product(T(4, KA), T(5, KB), T(14, KC), Zero),        // P5 = S5·S6
        product(T(6, KA), T(7, KB), T(15, KC), Zero),        // P6 = S7·S8
        product(T(8, KA), T(9, KB), T(16, KC), Zero),        // P7 = S9·S10
        sum(
            C(0, 0),
            Beta,
            &[
                (1, T(14, KC)),
                (1, T(13, KC)),
                (-1, T(11, KC)),
                (1, T(15, KC)),
            ],
        ), // C11 = P5 + P4 − P2 + P6
        sum(C(0, 1), Beta, &[(1, T(10, KC)), (1, T(11, KC))]), // C12 = P1 + P2
        sum(C(1, 0), Beta, &[(1, T(12, KC)), (1, T(13, KC))]), // C21 = P3 + P4
        sum(
            C(1, 1),
            Beta,
            &[
                (1, T(14, KC)),
                (1, T(10, KC)),
                (-1, T(12, KC)),
                (-1, T(16, KC)),
            ],
        ), // C22 = P5 + P1 − P3 − P7
    ],
};

/// Winograd's variant with every sum and product in its own temporary:
/// 7 products, 15 additions (the sums S2, S4, T2, T4 and U2…U4 reuse earlier
/// ones), 15 quarter-size temporaries per level.
pub(crate) const WINOGRAD_TEMPORARIES: Schedule = Schedule {
    any_beta: true,
    steps: &[
        sum(T(0, KA), Zero, &[(1, A(1, 0)), (1, A(1, 1))]), // S1 = A21 + A22
        sum(T(1, KA), Zero, &[(1, T(0, KA)), (-1, A(0, 0))]), // S2 = S1 − A11
        sum(T(2, KA), Zero, &[(1, A(0, 0)), (-1, A(1, 0))]), // S3 = A11 − A21
        sum(T(3, KA), Zero, &[(1, A(0, 1)), (-1, T(1, KA))]), // S4 = A12 − S2
        sum(T(4, KB), Zero, &[(1, B(0, 1)), (-1, B(0, 0))]), // T1 = B12 − B11
        sum(T(5, KB), Zero, &[(1, B(1, 1)), (-1, T(4, KB))]), // T2 = B22 − T1
        sum(T(6, KB), Zero, &[(1, B(1, 1)), (-1, B(0, 1))]), // T3 = B22 − B12
        sum(T(7, KB), Zero, &[(1, T(5, KB)), (-1, B(1, 0))]), // T4 = T2 − B21
        product(A(0, 0), B(0, 0), T(8, KC), Zero),          // P1 = A11·B11
        product(A(0, 1), B(1, 0), T(9, KC), Zero),          // P2 = A12·B21
        product(T(3, KA), B(1, 1), T(10, KC), Zero),        // P3 = S4·B22
        product(A(1, 1), T(7, KB), T(11, KC), Zero),        // P4 = A22·T4
        product(T(0, KA), T(4, KB), T(12, KC), Zero),       // P5 = S1·T1
        product(T(1, KA), T(5, KB), T(13, KC), Zero),       // P6 = S2·T2
        product(T(2, KA), T(6, KB), T(14, KC), Zero),       // P7 = S3·T3
        sum(T(13, KC), One, &[(1, T(8, KC))]),              // U2 = P1 + P6
        sum(T(14, KC), One, &[(1, T(13, KC))]),             // U3 = U2 + P7
        sum(T(13, KC), One, &[(1, T(12, KC))]),             // U4 = U2 + P5
        sum(C(0, 0), Beta, &[(1, T(8, KC)), (1, T(9, KC))]), // C11 = U1 = P1 + P2
        sum(C(0, 1), Beta, &[(1, T(13, KC)), (1, T(10, KC))]), // C12 = U5 = U4 + P3
        sum(C(1, 0), Beta, &[(1, T(14, KC)), (-1, T(11, KC))]), // C21 = U6 = U3 − P4
        sum(C(1, 1), Beta, &[(1, T(14, KC)), (1, T(12, KC))]), // C22 = U7 = U3 + P5
    ],
};

/// Strassen in the order of seed 003's recursive GPU scheme (its figure
/// 2.2.8): each product goes straight into a quadrant of C or into one
/// product temporary, so a level needs three quarter-size temporaries (a
/// sum of A, a sum of B, a product) instead of seventeen. Needs β = 0.
pub(crate) const STRASSEN_FRUGAL: Schedule = Schedule {
    any_beta: false,
    steps: &[
        sum(T(0, KA), Zero, &[(1, A(1, 0)), (-1, A(0, 0))]), // A21 − A11
        sum(T(1, KB), Zero, &[(1, B(0, 0)), (1, B(0, 1))]),  // B11 + B12
        product(T(0, KA), T(1, KB), C(1, 1), Zero),          // C22 = M6
        sum(T(0, KA), Zero, &[(1, A(0, 1)), (-1, A(1, 1))]), // A12 − A22
        sum(T(1, KB), Zero, &[(1, B(1, 0)), (1, B(1, 1))]),  // B21 + B22
        product(T(0, KA), T(1, KB), C(0, 0), Zero),          // C11 = M7
        sum(T(0, KA), Zero, &[(1, A(0, 0)), (1, A(1, 1))]),  // A11 + A22
        sum(T(1, KB), Zero, &[(1, B(0, 0)), (1, B(1, 1))]),  // B11 + B22
        product(T(0, KA), T(1, KB), T(2, KC), Zero),         // M1
        sum(C(0, 0), One, &[(1, T(2, KC))]),                 // C11 += M1
        sum(C(1, 1), One, &[(1, T(2, KC))]),                 // C22 += M1
        sum(T(0, KA), Zero, &[(1, A(1, 0)), (1, A(1, 1))]),  // A21 + A22
        product(T(0, KA), B(0, 0), C(1, 0), Zero),           // C21 = M2
        sum(C(1, 1), One, &[(-1, C(1, 0))]),                 // C22 −= M2
        sum(T(1, KB), Zero, &[(1, B(1, 0)), (-1, B(0, 0))]), // B21 − B11
        product(A(1, 1), T(1, KB), T(2, KC), Zero),          // M4
        sum(C(0, 0), One, &[(1, T(2, KC))]),                 // C11 += M4
        sum(C(1, 0), One, &[(1, T(2, KC))]),                 // C21 += M4
        sum(T(1, KB), Zero, &[(1, B(0, 1)), (-1, B(1, 1))]), // B12 − B22
        product(A(0, 0), T(1, KB), C(0, 1), Zero),           // C12 = M3
        sum(C(1, 1), One, &[(1, C(0, 1))]),                  // C22 += M3
        sum(T(0, KA), Zero, &[(1, A(0, 0)), (1, A(0, 1))]),  // A11 + A12
        product(T(0, KA), B(1, 1), T(2, KC), Zero),          // M5
        sum(C(0, 0), One, &[(-1, T(2, KC))]),                // C11 −= M5
        sum(C(0, 1), One, &[(1, T(2, KC))]),                 // C12 += M5
    ],
};

/// Winograd's variant in the schedule of Douglas et al. that seed 003 shows
/// (its figures 2.2.7 and 2.2.9): two temporaries per level, one holding
/// sums of A and later a product, one holding sums of B. Needs β = 0.
pub(crate) const WINOGRAD_FRUGAL: Schedule = Schedule {
    any_beta: false,
    steps: &[
        sum(T(0, KA), Zero, &[(1, A(0, 0)), (-1, A(1, 0))]), // S3 = A11 − A21
        sum(T(1, KB), Zero, &[(1, B(1, 1)), (-1, B(0, 1))]), // T3 = B22 − B12
        product(T(0, KA), T(1, KB), C(1, 0), Zero),          // C21 = P7
        sum(T(0, KA), Zero, &[(1, A(1, 0)), (1, A(1, 1))]),  // S1 = A21 + A22
        sum(T(1, KB), Zero, &[(1, B(0, 1)), (-1, B(0, 0))]), // T1 = B12 − B11
        product(T(0, KA), T(1, KB), C(1, 1), Zero),          // C22 = P5
        sum(T(0, KA), One, &[(-1, A(0, 0))]),                // S2 = S1 − A11
        sum(T(1, KB), MinusOne, &[(1, B(1, 1))]),            // T2 = B22 − T1
        product(T(0, KA), T(1, KB), C(0, 0), Zero),          // C11 = P6
        sum(T(0, KA), MinusOne, &[(1, A(0, 1))]),            // S4 = A12 − S2
        product(T(0, KA), B(1, 1), C(0, 1), Zero),           // C12 = P3
        sum(C(0, 1), One, &[(1, C(1, 1))]),                  // C12 = P3 + P5
        product(A(0, 0), B(0, 0), T(0, KC), Zero),           // T = P1
        sum(C(0, 1), One, &[(1, C(0, 0)), (1, T(0, KC))]),   // C12 = U5 (final)
        sum(C(0, 0), One, &[(1, C(1, 0)), (1, T(0, KC))]),   // C11 = U3 = P1 + P6 + P7
        sum(T(1, KB), One, &[(-1, B(1, 0))]),                // T4 = T2 − B21
        product(A(1, 1), T(1, KB), C(1, 0), Zero),           // C21 = P4
        sum(C(1, 0), MinusOne, &[(1, C(0, 0))]),             // C21 = U3 − P4 (final)
        sum(C(1, 1), One, &[(1, C(0, 0))]),                  // C22 = U3 + P5 (final)
        product(A(0, 1), B(1, 0), C(0, 0), Zero),            // C11 = P2
        sum(C(0, 0), One, &[(1, T(0, KC))]),                 // C11 = P1 + P2 (final)
    ],
};

/// Strassen with every sum and product stored, the sums formed in three
/// groups of one pass each: the five sums of A (read A's four quadrants
/// once, write five), the five of B, and after the seven products the
/// four quadrants of C from them. A backend that fuses a group moves
/// 9 + 9 + 11 quarter blocks per level (+4 reads of C when β ≠ 0)
/// instead of the 54 of the 18 separate additions. 17 temporaries.
pub(crate) const STRASSEN_BATCHED: Schedule = Schedule {
    any_beta: true,
    steps: &[
        Step::Group(&[
            sum(T(0, KA), Zero, &[(1, A(0, 0)), (1, A(1, 1))]), // M1: A11 + A22
            sum(T(1, KA), Zero, &[(1, A(1, 0)), (1, A(1, 1))]), // M2: A21 + A22
            sum(T(2, KA), Zero, &[(1, A(0, 0)), (1, A(0, 1))]), // M5: A11 + A12
            sum(T(3, KA), Zero, &[(1, A(1, 0)), (-1, A(0, 0))]), // M6: A21 − A11
            sum(T(4, KA), Zero, &[(1, A(0, 1)), (-1, A(1, 1))]), // M7: A12 − A22
        ]),
        Step::Group(&[
            sum(T(5, KB), Zero, &[(1, B(0, 0)), (1, B(1, 1))]), // M1: B11 + B22
            sum(T(6, KB), Zero, &[(1, B(0, 1)), (-1, B(1, 1))]), // M3: B12 − B22
            sum(T(7, KB), Zero, &[(1, B(1, 0)), (-1, B(0, 0))]), // M4: B21 − B11
            sum(T(8, KB), Zero, &[(1, B(0, 0)), (1, B(0, 1))]), // M6: B11 + B12
            sum(T(9, KB), Zero, &[(1, B(1, 0)), (1, B(1, 1))]), // M7: B21 + B22
        ]),
        product(T(0, KA), T(5, KB), T(10, KC), Zero), // M1
        product(T(1, KA), B(0, 0), T(11, KC), Zero),  // M2
        product(A(0, 0), T(6, KB), T(12, KC), Zero),  // M3
        product(A(1, 1), T(7, KB), T(13, KC), Zero),  // M4
        product(T(2, KA), B(1, 1), T(14, KC), Zero),  // M5
        product(T(3, KA), T(8, KB), T(15, KC), Zero), // M6
        product(T(4, KA), T(9, KB), T(16, KC), Zero), // M7
        Step::Group(&[
            sum(
                C(0, 0),
                Beta,
                &[
                    (1, T(10, KC)),
                    (1, T(13, KC)),
                    (-1, T(14, KC)),
                    (1, T(16, KC)),
                ],
            ), // C11 = M1 + M4 − M5 + M7
            sum(C(0, 1), Beta, &[(1, T(12, KC)), (1, T(14, KC))]), // C12 = M3 + M5
            sum(C(1, 0), Beta, &[(1, T(11, KC)), (1, T(13, KC))]), // C21 = M2 + M4
            sum(
                C(1, 1),
                Beta,
                &[
                    (1, T(10, KC)),
                    (-1, T(11, KC)),
                    (1, T(12, KC)),
                    (1, T(15, KC)),
                ],
            ), // C22 = M1 − M2 + M3 + M6
        ]),
    ],
};

/// Winograd with every sum and product stored, its sums expanded into
/// three groups of one pass each (S1…S4 from A's quadrants, T1…T4 from
/// B's, then C's quadrants from P1…P7): 8 + 8 + 11 quarter blocks moved
/// per level by a backend that fuses a group, against 45 for the 15
/// chained additions. 15 temporaries.
pub(crate) const WINOGRAD_BATCHED: Schedule = Schedule {
    any_beta: true,
    steps: &[
        Step::Group(&[
            sum(T(0, KA), Zero, &[(1, A(1, 0)), (1, A(1, 1))]), // S1 = A21 + A22
            sum(T(1, KA), Zero, &[(1, A(1, 0)), (1, A(1, 1)), (-1, A(0, 0))]), // S2 = S1 − A11
            sum(T(2, KA), Zero, &[(1, A(0, 0)), (-1, A(1, 0))]), // S3 = A11 − A21
            sum(
                T(3, KA),
                Zero,
                &[(1, A(0, 1)), (-1, A(1, 0)), (-1, A(1, 1)), (1, A(0, 0))],
            ), // S4 = A12 − S2
        ]),
        Step::Group(&[
            sum(T(4, KB), Zero, &[(1, B(0, 1)), (-1, B(0, 0))]), // T1 = B12 − B11
            sum(T(5, KB), Zero, &[(1, B(1, 1)), (-1, B(0, 1)), (1, B(0, 0))]), // T2 = B22 − T1
            sum(T(6, KB), Zero, &[(1, B(1, 1)), (-1, B(0, 1))]), // T3 = B22 − B12
            sum(
                T(7, KB),
                Zero,
                &[(1, B(1, 1)), (-1, B(0, 1)), (1, B(0, 0)), (-1, B(1, 0))],
            ), // T4 = T2 − B21
        ]),
        product(A(0, 0), B(0, 0), T(8, KC), Zero), // P1 = A11·B11
        product(A(0, 1), B(1, 0), T(9, KC), Zero), // P2 = A12·B21
        product(T(3, KA), B(1, 1), T(10, KC), Zero), // P3 = S4·B22
        product(A(1, 1), T(7, KB), T(11, KC), Zero), // P4 = A22·T4
        product(T(0, KA), T(4, KB), T(12, KC), Zero), // P5 = S1·T1
        product(T(1, KA), T(5, KB), T(13, KC), Zero), // P6 = S2·T2
        product(T(2, KA), T(6, KB), T(14, KC), Zero), // P7 = S3·T3
        Step::Group(&[
            sum(C(0, 0), Beta, &[(1, T(8, KC)), (1, T(9, KC))]), // C11 = P1 + P2
            sum(
                C(0, 1),
                Beta,
                &[
                    (1, T(8, KC)),
                    (1, T(13, KC)),
                    (1, T(12, KC)),
                    (1, T(10, KC)),
                ],
            ), // C12 = U5 = P1 + P6 + P5 + P3
            sum(
                C(1, 0),
                Beta,
                &[
                    (1, T(8, KC)),
                    (1, T(13, KC)),
                    (1, T(14, KC)),
                    (-1, T(11, KC)),
                ],
            ), // C21 = U6 = P1 + P6 + P7 − P4
            sum(
                C(1, 1),
                Beta,
                &[
                    (1, T(8, KC)),
                    (1, T(13, KC)),
                    (1, T(14, KC)),
                    (1, T(12, KC)),
                ],
            ), // C22 = U7 = P1 + P6 + P7 + P5
        ]),
    ],
};

/// One product of a level in the Strassen primitive's form: M = (Σ over
/// `a` of w·A(i, j))(Σ over `b` of w·B(i, j)), then C(i, j) += w·M for each
/// entry of `c`. Seven of them make a level of the `fused` variant, which
/// composes them across levels instead of storing anything.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Product {
    pub a: &'static [(i8, (u8, u8))],
    pub b: &'static [(i8, (u8, u8))],
    pub c: &'static [(i8, (u8, u8))],
}

const fn p(
    a: &'static [(i8, (u8, u8))],
    b: &'static [(i8, (u8, u8))],
    c: &'static [(i8, (u8, u8))],
) -> Product {
    Product { a, b, c }
}

/// Strassen's seven products (Huang et al., "Strassen's Algorithm
/// Reloaded", SC16, use this form).
pub(crate) const STRASSEN_PRODUCTS: [Product; 7] = [
    p(
        &[(1, (0, 0)), (1, (1, 1))],
        &[(1, (0, 0)), (1, (1, 1))],
        &[(1, (0, 0)), (1, (1, 1))],
    ), // M1
    p(
        &[(1, (1, 0)), (1, (1, 1))],
        &[(1, (0, 0))],
        &[(1, (1, 0)), (-1, (1, 1))],
    ), // M2
    p(
        &[(1, (0, 0))],
        &[(1, (0, 1)), (-1, (1, 1))],
        &[(1, (0, 1)), (1, (1, 1))],
    ), // M3
    p(
        &[(1, (1, 1))],
        &[(1, (1, 0)), (-1, (0, 0))],
        &[(1, (0, 0)), (1, (1, 0))],
    ), // M4
    p(
        &[(1, (0, 0)), (1, (0, 1))],
        &[(1, (1, 1))],
        &[(-1, (0, 0)), (1, (0, 1))],
    ), // M5
    p(
        &[(1, (1, 0)), (-1, (0, 0))],
        &[(1, (0, 0)), (1, (0, 1))],
        &[(1, (1, 1))],
    ), // M6
    p(
        &[(1, (0, 1)), (-1, (1, 1))],
        &[(1, (1, 0)), (1, (1, 1))],
        &[(1, (0, 0))],
    ), // M7
];

/// Winograd's seven products with their sums expanded (S2 = A21 + A22 −
/// A11, S4 = A11 + A12 − A21 − A22, T2 = B11 − B12 + B22, T4 = B11 − B12 −
/// B21 + B22): fewer additions only when sums are stored and reused, so in
/// this form it reads more terms than Strassen's.
pub(crate) const WINOGRAD_PRODUCTS: [Product; 7] = [
    p(
        &[(1, (0, 0))],
        &[(1, (0, 0))],
        &[(1, (0, 0)), (1, (0, 1)), (1, (1, 0)), (1, (1, 1))],
    ), // P1
    p(&[(1, (0, 1))], &[(1, (1, 0))], &[(1, (0, 0))]), // P2
    p(
        &[(1, (0, 0)), (1, (0, 1)), (-1, (1, 0)), (-1, (1, 1))],
        &[(1, (1, 1))],
        &[(1, (0, 1))],
    ), // P3 = S4·B22
    p(
        &[(1, (1, 1))],
        &[(1, (0, 0)), (-1, (0, 1)), (-1, (1, 0)), (1, (1, 1))],
        &[(-1, (1, 0))],
    ), // P4 = A22·T4
    p(
        &[(1, (1, 0)), (1, (1, 1))],
        &[(1, (0, 1)), (-1, (0, 0))],
        &[(1, (0, 1)), (1, (1, 1))],
    ), // P5
    p(
        &[(1, (1, 0)), (1, (1, 1)), (-1, (0, 0))],
        &[(1, (0, 0)), (-1, (0, 1)), (1, (1, 1))],
        &[(1, (0, 1)), (1, (1, 0)), (1, (1, 1))],
    ), // P6 = S2·T2
    p(
        &[(1, (0, 0)), (-1, (1, 0))],
        &[(1, (1, 1)), (-1, (0, 1))],
        &[(1, (1, 0)), (1, (1, 1))],
    ), // P7
];
