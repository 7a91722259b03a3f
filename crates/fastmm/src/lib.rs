//! # fastmm
//!
//! Fast, verified dense matrix multiplication **C ← α·A·B + β·C** for
//! `f32`, `f64`, `i32` and `i64`.
//!
//! ```
//! use fastmm::{matmul, Matrix};
//! let a = Matrix::from_fn(2, 3, |i, j| (i + j) as f64);
//! let b = Matrix::from_fn(3, 2, |i, j| (i * j) as f64);
//! let c = matmul(&a, &b).unwrap();
//! assert_eq!(c.get(1, 1), 1.0 * 0.0 + 2.0 * 1.0 + 3.0 * 2.0);
//! ```
//!
//! The BLAS form, views and options:
//!
//! ```
//! use fastmm::{gemm, matmul, verify, Algorithm, GemmOptions, Matrix};
//! # fn main() -> Result<(), fastmm::Error> {
//! let a = Matrix::<f64>::from_fn(300, 200, |i, j| (i + j) as f64);
//! let b = Matrix::<f64>::from_fn(200, 100, |i, j| (i * j % 7) as f64);
//! let c = matmul(&a, &b)?; // automatic algorithm
//! let mut d = Matrix::filled(300, 100, f64::NAN);
//! let opts = GemmOptions::new(Algorithm::Tiled).tile(64);
//! gemm(2.0, a.as_ref(), b.as_ref(), 0.0, d.as_mut(), &opts)?; // D ← 2·A·B, D never read
//! gemm(1.0, b.as_ref().t(), a.as_ref().t(), 0.0, d.as_mut().t(), &opts)?; // Dᵀ ← BᵀAᵀ
//! assert!(verify(a.as_ref(), b.as_ref(), c.as_ref())?.ok);
//! assert_eq!(c, d);
//! # Ok(())
//! # }
//! ```
//!
//! Layers, from the outside in: [`gemm`] normalises every input at the
//! boundary; [`algo`] holds one module per algorithm behind a dispatch
//! table; [`matrix`] provides the owned matrix and strided views;
//! [`verify`] checks any result against A·B.

#![warn(missing_docs)]

pub mod algo;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod element;
pub mod error;
pub mod gemm;
pub mod io;
pub mod matrix;
pub mod packed;
pub mod random;
pub mod strassen;
pub mod system;
pub mod threads;
pub mod tunables;
pub mod tuning;
pub mod verify;

pub use algo::{Algorithm, Device, GemmOptions};
pub use element::{DType, Element};
pub use error::Error;
pub use gemm::{gemm, matmul, matmul_with};
pub use matrix::{MatMut, MatRef, Matrix};
pub use packed::{BlockSizes, CpuKernel};
pub use strassen::{Scheme, Variant};
pub use verify::{verify, CheckMethod, Verdict};
