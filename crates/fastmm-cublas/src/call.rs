//! One cuBLAS GEMM call as this library reads it: its arguments checked
//! as cuBLAS checks them, and its column-major operands turned into the
//! executor's strided views ([`fastmm::GpuProduct`]), one per product of
//! a batch. Pure: no CUDA, no cuBLAS, so the mapping is tested on any
//! machine against a reference twin of cuBLAS's definition.

use fastmm::{GpuMatrix, GpuProduct};

use crate::types::{Kind, Op};

/// Where a batch's operands lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Batch {
    /// One product.
    One,
    /// `count` products, each operand `strides` elements (A, B, C) after
    /// the one before (`cublas?gemmStridedBatched`).
    Strided {
        /// Products.
        count: usize,
        /// Elements between consecutive A, B and C.
        strides: (i64, i64, i64),
    },
    /// `count` products whose operands' addresses were read from the
    /// caller's arrays (`cublasGemmBatchedEx`).
    Listed(Vec<(u64, u64, u64)>),
}

/// The integer arguments of a GEMM call, as cuBLAS received them (either
/// API width).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawShape {
    /// transa, transb (`cublasOperation_t`).
    pub ops: (i32, i32),
    /// m, n, k.
    pub mnk: (i64, i64, i64),
    /// lda, ldb, ldc.
    pub lds: (i64, i64, i64),
}

/// A checked GEMM call that this library may take over: C ← α·op(A)·op(B)
/// + β·C, column-major, m, n, k ≥ 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The element type.
    pub kind: Kind,
    /// op(A), op(B).
    pub ops: (Op, Op),
    /// m, n, k.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// The first A, B and C (device addresses), for one or strided
    /// batches.
    pub ptrs: (u64, u64, u64),
    /// lda, ldb, ldc.
    pub lds: (usize, usize, usize),
    /// Where the batch lies.
    pub batch: Batch,
}

/// Why a call stays cuBLAS's before anything about the device is asked.
pub type Declined = &'static str;

impl Call {
    /// The call `shape` describes, or why it stays cuBLAS's: arguments
    /// cuBLAS refuses (its own status then reaches the caller), an empty
    /// product or inner dimension (its quick return), an operation this
    /// library does not run (a conjugate).
    pub fn check(
        kind: Kind,
        shape: RawShape,
        ptrs: (u64, u64, u64),
        batch: Batch,
    ) -> Result<Call, Declined> {
        let (Some(op_a), Some(op_b)) = (Op::from_raw(shape.ops.0), Op::from_raw(shape.ops.1))
        else {
            return Err("an operation cuBLAS refuses or this library does not run");
        };
        let (m, n, k) = shape.mnk;
        let (lda, ldb, ldc) = shape.lds;
        if m < 0 || n < 0 || k < 0 {
            return Err("a negative dimension (cuBLAS refuses it)");
        }
        let rows =
            |op: Op, plain: i64, transposed: i64| if op == Op::N { plain } else { transposed };
        if lda < rows(op_a, m, k).max(1) || ldb < rows(op_b, k, n).max(1) || ldc < m.max(1) {
            return Err("a leading dimension too small (cuBLAS refuses it)");
        }
        if m == 0 || n == 0 || k == 0 {
            return Err("an empty product (cuBLAS's quick return)");
        }
        if kind.complex() && (op_a == Op::C || op_b == Op::C) {
            return Err("a conjugate transposition");
        }
        match &batch {
            Batch::Strided { count: 0, .. } => return Err("an empty batch"),
            Batch::Listed(list) if list.is_empty() => return Err("an empty batch"),
            Batch::Strided { strides, .. } if strides.0 < 0 || strides.1 < 0 || strides.2 < 0 => {
                return Err("a negative stride");
            }
            _ => {}
        }
        let size = |x: i64| {
            usize::try_from(x).map_err(|_| "a dimension beyond this machine's address space")
        };
        let call = Call {
            kind,
            ops: (op_a, op_b),
            m: size(m)?,
            n: size(n)?,
            k: size(k)?,
            ptrs,
            lds: (size(lda)?, size(ldb)?, size(ldc)?),
            batch,
        };
        if !call.outputs_disjoint() {
            return Err("outputs that overlap");
        }
        Ok(call)
    }

    /// Products in the batch.
    pub fn count(&self) -> usize {
        match &self.batch {
            Batch::One => 1,
            Batch::Strided { count, .. } => *count,
            Batch::Listed(list) => list.len(),
        }
    }

    /// Bytes one C spans, from its first element to past its last.
    fn c_span(&self) -> u64 {
        (((self.n - 1) * self.lds.2 + self.m) * self.kind.size()) as u64
    }

    /// Whether no two products write the same bytes (cuBLAS leaves such
    /// a batch undefined; the executor refuses it).
    fn outputs_disjoint(&self) -> bool {
        let span = self.c_span();
        match &self.batch {
            Batch::One => true,
            Batch::Strided { count, strides } => {
                *count == 1 || (strides.2 as u64).saturating_mul(self.kind.size() as u64) >= span
            }
            Batch::Listed(list) => {
                let mut starts: Vec<u64> = list.iter().map(|p| p.2).collect();
                starts.sort_unstable();
                starts.windows(2).all(|w| w[1] - w[0] >= span)
            }
        }
    }

    /// The executor's products: op(A) (m×k), op(B) (k×n) and C (m×n) as
    /// views of the column-major storage. A column-major operand read as
    /// it is stored is a transposed view of its row-major storage; one
    /// read transposed is the row-major matrix of its storage.
    pub fn products(&self) -> Vec<GpuProduct> {
        let (m, n, k) = (self.m, self.n, self.k);
        let (lda, ldb, ldc) = self.lds;
        let view = |ptr: u64, (rows, cols): (usize, usize), ld: usize, op: Op| GpuMatrix {
            ptr,
            rows,
            cols,
            ld,
            transposed: op == Op::N,
        };
        let product = |(a, b, c): (u64, u64, u64)| GpuProduct {
            a: view(a, (m, k), lda, self.ops.0),
            b: view(b, (k, n), ldb, self.ops.1),
            c: view(c, (m, n), ldc, Op::N),
        };
        let size = self.kind.size() as u64;
        match &self.batch {
            Batch::One => vec![product(self.ptrs)],
            Batch::Strided { count, strides } => (0..*count as u64)
                .map(|i| {
                    let at = |base: u64, stride: i64| base + i * stride as u64 * size;
                    product((
                        at(self.ptrs.0, strides.0),
                        at(self.ptrs.1, strides.1),
                        at(self.ptrs.2, strides.2),
                    ))
                })
                .collect(),
            Batch::Listed(list) => list.iter().copied().map(product).collect(),
        }
    }
}
