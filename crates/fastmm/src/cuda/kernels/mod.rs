//! The kernels and their launch. The CUDA C sources sit beside these
//! modules (`*.cu`, `*.cuh`), compiled at run time by
//! [`crate::cuda::runtime::compile`]. [`operand`] is the GPU matrix and
//! product value every launch takes; [`gemm`] the classical products
//! (SIMT and mma tiles, cuBLAS through [`cublas`], the emulated and
//! byte-plane products); [`int8`] the INT8 steps those two share;
//! [`emulated`] and [`bytes`] their pipelines; [`complex`] interleaved
//! complex matrices to and from real planes; [`fused`] the fused
//! Strassen kernel.

pub(crate) mod bytes;
pub(crate) mod complex;
pub(crate) mod cublas;
pub(crate) mod emulated;
pub(crate) mod fused;
pub(crate) mod gemm;
pub(crate) mod int8;
pub(crate) mod operand;
pub(crate) mod transpose;
