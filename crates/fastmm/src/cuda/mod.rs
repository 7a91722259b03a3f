//! The CUDA backend: device discovery and the opened GPU ([`device`]),
//! run-time compilation of the CUDA C kernels in `kernels/` with NVRTC
//! ([`compile`]), the memory kinds of the seeds ([`memory`]), the classical
//! products ([`gemm`]), a product of host matrices in one piece
//! ([`product`]) or streamed in tiles ([`out_of_core`]), and the GPU backend
//! of Strassen/Winograd ([`strassen`], [`fused`]), and the `emulated`
//! algorithm's INT8 pipeline ([`emulated`]). Its constants are in
//! [`tunables`].
//!
//! Built with the `cuda` feature (on by default): cudarc loads libcuda,
//! libnvrtc and libcublas at run time, so the binary builds and runs on
//! machines without CUDA and reports what is missing when a GPU is asked for.

pub(crate) mod bytes;
pub(crate) mod caps;
pub(crate) mod compile;
pub(crate) mod cublas;
pub(crate) mod device;
pub(crate) mod distributed;
pub(crate) mod emulated;
pub(crate) mod fused;
pub(crate) mod gemm;
pub(crate) mod host_copy;
pub(crate) mod hosted;
pub(crate) mod memory;
pub(crate) mod operand;
pub(crate) mod out_of_core;
pub(crate) mod product;
pub(crate) mod strassen;
pub(crate) mod transfer;
pub(crate) mod tunables;

/// A failed CUDA driver, cuBLAS or NVRTC call, as the library's typed error.
pub(crate) fn cuda_err(what: &str, e: impl std::fmt::Debug) -> crate::error::Error {
    crate::error::Error::Cuda(format!("{what}: {e:?}"))
}
