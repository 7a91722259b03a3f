//! The product itself, before anything runs it: its operands ([`Gemm`],
//! C ← α·A·B + β·C over views of host memory) and the problem they pose
//! ([`Problem`]: the shape, the type, whether C is read). Both sit in the
//! vocabulary so that the products at every layer, kernels included, take
//! one value instead of five loose arguments.

use serde::Serialize;

use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};

/// The product a plan is for: C ← α·A·B + β·C with A m×k, B k×n and C
/// m×n of `dtype`; `reads_c` when β ≠ 0 (a product that reads C needs it
/// on the device and in its pieces).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Problem {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Columns of B and C.
    pub n: usize,
    /// The element type.
    pub dtype: DType,
    /// Whether C is read (β ≠ 0).
    pub reads_c: bool,
}

impl Problem {
    /// An m×k×n product of `dtype` that overwrites C (β = 0).
    pub fn new((m, k, n): (usize, usize, usize), dtype: DType) -> Problem {
        Problem {
            m,
            k,
            n,
            dtype,
            reads_c: false,
        }
    }

    /// An m×k×n product of T that overwrites C (β = 0).
    pub fn of<T: Element>(shape: (usize, usize, usize)) -> Problem {
        Problem::new(shape, T::DTYPE)
    }

    /// The same product, reading C or not.
    pub fn reading_c(self, reads_c: bool) -> Problem {
        Problem { reads_c, ..self }
    }

    /// (m, k, n).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.m, self.k, self.n)
    }

    /// Whether a dimension is 0 (nothing to multiply; C ← β·C).
    pub fn is_empty(&self) -> bool {
        self.m == 0 || self.k == 0 || self.n == 0
    }

    /// 2·m·k·n.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.k as f64 * self.n as f64
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}×{}×{} {}", self.m, self.k, self.n, self.dtype)
    }
}

/// One product **C ← α·A·B + β·C** over views of host memory: the
/// operands an executor runs a plan on. β = 0 never reads C.
#[derive(Debug)]
pub struct Gemm<'a, T: Element> {
    /// α.
    pub alpha: T,
    /// A, m×k.
    pub a: MatRef<'a, T>,
    /// B, k×n.
    pub b: MatRef<'a, T>,
    /// β.
    pub beta: T,
    /// C, m×n.
    pub c: MatMut<'a, T>,
}

impl<'a, T: Element> Gemm<'a, T> {
    /// C ← A·B.
    pub fn new(a: MatRef<'a, T>, b: MatRef<'a, T>, c: MatMut<'a, T>) -> Gemm<'a, T> {
        Gemm {
            alpha: T::ONE,
            a,
            b,
            beta: T::ZERO,
            c,
        }
    }

    /// The same product with α.
    pub fn alpha(self, alpha: T) -> Gemm<'a, T> {
        Gemm { alpha, ..self }
    }

    /// The same product with β (C is read unless β = 0).
    pub fn beta(self, beta: T) -> Gemm<'a, T> {
        Gemm { beta, ..self }
    }

    /// The problem it is: A's and B's shape, T, and whether C is read.
    pub fn problem(&self) -> Problem {
        Problem::of::<T>(self.shape()).reading_c(self.beta != T::ZERO)
    }

    /// (m, k, n).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.a.rows(), self.a.cols(), self.b.cols())
    }

    /// Whether C is read (β ≠ 0).
    pub fn reads_c(&self) -> bool {
        self.beta != T::ZERO
    }

    /// The same product reborrowed, so that `self` can run it and be used
    /// again.
    pub fn rb_mut(&mut self) -> Gemm<'_, T> {
        Gemm {
            alpha: self.alpha,
            a: self.a,
            b: self.b,
            beta: self.beta,
            c: self.c.rb_mut(),
        }
    }

    /// The transposed product, Cᵀ ← α·Bᵀ·Aᵀ + β·Cᵀ: the same elements
    /// written, with the row and column strides of every view swapped.
    pub fn t(self) -> Gemm<'a, T> {
        Gemm {
            alpha: self.alpha,
            a: self.b.t(),
            b: self.a.t(),
            beta: self.beta,
            c: self.c.t(),
        }
    }

    /// Checks that the operands chain and C has their product's shape.
    pub fn check_shapes(&self) -> Result<(), Error> {
        crate::matrix::check_product_shapes(self.a, self.b, self.c.shape())
    }
}
