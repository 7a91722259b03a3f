//! The CUDA backend, in three layers, each naming only those below it
//! (checked by `tests/suite/layers.rs`):
//!
//! - [`runtime`]: the opened GPU and device discovery, run-time
//!   compilation of the CUDA C kernels with NVRTC, memory and copies, and
//!   NCCL's communicators: the only code that calls cudarc's raw (`sys`)
//!   driver, NCCL and cuBLAS functions.
//! - [`kernels`]: the kernels and their launch: the operand and product
//!   value they take, the classical products (SIMT, mma, cuBLAS), the INT8
//!   pipelines of the emulated and byte-plane products, the fused Strassen
//!   kernel.
//! - [`products`]: what runs a product of host or resident matrices: in
//!   one piece, out of core, Strassen/Winograd, and across several GPUs.
//!
//! Their constants are in [`tunables`]. Built with the `cuda` feature (on
//! by default): cudarc loads libcuda, libnvrtc, libcublas and libnccl at
//! run time, so the binary builds and runs on machines without CUDA and
//! reports what is missing when a GPU is asked for.

pub(crate) mod kernels;
pub(crate) mod products;
pub(crate) mod runtime;
pub(crate) mod tunables;
