//! The reference BLAS's argument rules for `?gemm`, and CBLAS's, as plain
//! values: which argument is illegal (its 1-based position, as `xerbla`
//! reports it), and how a product's storage reads once the arguments are
//! legal.

/// How op(X) is formed from the stored X.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// X.
    None,
    /// Xᵀ.
    Transpose,
    /// Xᴴ (Xᵀ for real types).
    ConjTranspose,
}

impl Op {
    /// The Fortran character (`N`, `T`, `C`, either case).
    pub fn from_char(c: u8) -> Option<Op> {
        match c.to_ascii_uppercase() {
            b'N' => Some(Op::None),
            b'T' => Some(Op::Transpose),
            b'C' => Some(Op::ConjTranspose),
            _ => None,
        }
    }

    /// CBLAS's enum values (111, 112, 113).
    pub fn from_cblas(value: i32) -> Option<Op> {
        match value {
            111 => Some(Op::None),
            112 => Some(Op::Transpose),
            113 => Some(Op::ConjTranspose),
            _ => None,
        }
    }

    /// Whether op(X) is X.
    pub fn is_none(self) -> bool {
        self == Op::None
    }
}

/// A column-major product C (m×n) ← α·op(A)·op(B) + β·C with op(A) m×k,
/// op(B) k×n, each operand stored with its leading dimension: the
/// reference BLAS's view of its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// op(A).
    pub op_a: Op,
    /// op(B).
    pub op_b: Op,
    /// Rows of C.
    pub m: i64,
    /// Columns of C.
    pub n: i64,
    /// The inner dimension.
    pub k: i64,
    /// A's leading dimension.
    pub lda: i64,
    /// B's leading dimension.
    pub ldb: i64,
    /// C's leading dimension.
    pub ldc: i64,
}

impl Call {
    /// The Fortran `?gemm`'s check: `Err(position)` of the first illegal
    /// argument (1: TRANSA, 2: TRANSB, 3: M, 4: N, 5: K, 8: LDA, 10: LDB,
    /// 13: LDC), else the call.
    #[allow(clippy::too_many_arguments)]
    pub fn fortran(
        transa: u8,
        transb: u8,
        m: i64,
        n: i64,
        k: i64,
        lda: i64,
        ldb: i64,
        ldc: i64,
    ) -> Result<Call, i64> {
        let op_a = Op::from_char(transa).ok_or(1)?;
        let op_b = Op::from_char(transb).ok_or(2)?;
        let call = Call {
            op_a,
            op_b,
            m,
            n,
            k,
            lda,
            ldb,
            ldc,
        };
        let (rows_a, rows_b) = call.stored_rows();
        first_illegal([
            (m < 0, 3),
            (n < 0, 4),
            (k < 0, 5),
            (lda < rows_a.max(1), 8),
            (ldb < rows_b.max(1), 10),
            (ldc < m.max(1), 13),
        ])?;
        Ok(call)
    }

    /// CBLAS's check for `order` (101 row-major, 102 column-major):
    /// `Err(position)` of the first illegal argument, counted as CBLAS
    /// counts them (1: Order, 2: TransA, 3: TransB, 4: M, 5: N, 6: K, 9:
    /// lda, 11: ldb, 14: ldc), else the column-major call it is. A
    /// row-major C = op(A)·op(B) is the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ
    /// over the same storage.
    #[allow(clippy::too_many_arguments)]
    pub fn cblas(
        order: i32,
        transa: i32,
        transb: i32,
        m: i64,
        n: i64,
        k: i64,
        lda: i64,
        ldb: i64,
        ldc: i64,
    ) -> Result<(Call, bool), i64> {
        let row_major = match order {
            101 => true,
            102 => false,
            _ => return Err(1),
        };
        let op_a = Op::from_cblas(transa).ok_or(2)?;
        let op_b = Op::from_cblas(transb).ok_or(3)?;
        // The stored operands' leading dimensions as the caller's layout
        // counts them.
        let (need_a, need_b, need_c) = match row_major {
            true => (
                if op_a.is_none() { k } else { m },
                if op_b.is_none() { n } else { k },
                n,
            ),
            false => (
                if op_a.is_none() { m } else { k },
                if op_b.is_none() { k } else { n },
                m,
            ),
        };
        first_illegal([
            (m < 0, 4),
            (n < 0, 5),
            (k < 0, 6),
            (lda < need_a.max(1), 9),
            (ldb < need_b.max(1), 11),
            (ldc < need_c.max(1), 14),
        ])?;
        let call = match row_major {
            true => Call {
                op_a: op_b,
                op_b: op_a,
                m: n,
                n: m,
                k,
                lda: ldb,
                ldb: lda,
                ldc,
            },
            false => Call {
                op_a,
                op_b,
                m,
                n,
                k,
                lda,
                ldb,
                ldc,
            },
        };
        Ok((call, row_major))
    }

    /// Rows of the stored A and B (column-major): op(A) is m×k, so A is
    /// m×k or k×m; op(B) is k×n, so B is k×n or n×k.
    pub fn stored_rows(&self) -> (i64, i64) {
        (
            if self.op_a.is_none() { self.m } else { self.k },
            if self.op_b.is_none() { self.k } else { self.n },
        )
    }

    /// The stored A's and B's (rows, columns), column-major.
    pub fn stored_shapes(&self) -> ((usize, usize), (usize, usize)) {
        let (m, n, k) = (self.m as usize, self.n as usize, self.k as usize);
        (
            if self.op_a.is_none() { (m, k) } else { (k, m) },
            if self.op_b.is_none() { (k, n) } else { (n, k) },
        )
    }
}

/// The position of the first check that failed, in the order given (the
/// reference reports only the first).
fn first_illegal<const N: usize>(checks: [(bool, i64); N]) -> Result<(), i64> {
    match checks.into_iter().find(|(illegal, _)| *illegal) {
        Some((_, position)) => Err(position),
        None => Ok(()),
    }
}

/// The reference `xerbla`'s message for `routine` (`DGEMM`,
/// `cblas_dgemm`) and the argument at `position`.
pub fn illegal(routine: &str, position: i64) -> String {
    if routine.starts_with("cblas_") {
        format!("Parameter {position} to routine {routine} was incorrect")
    } else {
        format!(" ** On entry to {routine:<6} parameter number {position:2} had an illegal value")
    }
}
