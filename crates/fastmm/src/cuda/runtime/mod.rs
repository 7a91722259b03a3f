//! The GPU runtime: the opened device ([`device`]), NVRTC ([`compile`]),
//! memory kinds and copies ([`memory`], [`transfer`], [`host_copy`]) and
//! NCCL ([`nccl`]). The rest of the backend reaches the driver, NCCL and
//! cuBLAS's handles through these modules only.

pub(crate) mod blas;
pub(crate) mod compile;
pub(crate) mod device;
pub(crate) mod host_copy;
pub(crate) mod memory;
pub(crate) mod nccl;
pub(crate) mod tensor_map;
pub(crate) mod transfer;

/// A failed CUDA driver, cuBLAS or NVRTC call, as the library's typed error.
pub(crate) fn cuda_err(what: &str, e: impl std::fmt::Debug) -> crate::error::Error {
    crate::error::Error::Cuda(format!("{what}: {e:?}"))
}
