//! The CUDA backend: device discovery ([`device`]), run-time compilation of
//! the CUDA C kernels in `kernels/` with NVRTC ([`compile`]), the three
//! memory kinds of the seeds ([`memory`]) and the timed products ([`gemm`]).
//!
//! Built with the `cuda` feature (on by default): cudarc loads libcuda,
//! libnvrtc and libcublas at run time, so the binary builds and runs on
//! machines without CUDA and reports what is missing when a GPU is asked for.

pub mod compile;
pub mod device;
pub(crate) mod fused;
pub mod gemm;
pub mod memory;
pub mod out_of_core;
pub mod precision;
pub(crate) mod strassen;

pub use device::{libraries, Gpu, GpuInfo};
pub use gemm::{multiply_once, multiply_timed, FastKernel, GpuTimes};
pub use memory::{round_trip, GpuMemory};
pub use precision::GpuPrecision;
pub use strassen::default_variant;

/// A failed CUDA driver, cuBLAS or NVRTC call, as the library's typed error.
pub(crate) fn cuda_err(what: &str, e: impl std::fmt::Debug) -> crate::error::Error {
    crate::error::Error::Cuda(format!("{what}: {e:?}"))
}
