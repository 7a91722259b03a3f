//! `libfastmm_cublas`: a preloaded interposer that runs an unchanged
//! program's cuBLAS GEMM calls (PyTorch's, CuPy's, a CUDA program's) on
//! fastmm's executor where fastmm's plan for them is faster at the same
//! accuracy, and hands every other call to the real cuBLAS unchanged:
//!
//! ```text
//! LD_PRELOAD=libfastmm_cublas.so python3 script.py
//! ```
//!
//! A thin front end (docs/design.md, "Writing a front end"): no dispatch
//! of its own, only the executor's plan. Layers: [`types`] (cuBLAS's
//! vocabulary) and [`call`] (a call's arguments checked and turned into
//! the executor's views, pure and tested against a reference twin) at the
//! bottom; [`real`] (the real cuBLAS's definitions) and [`settings`]
//! beside them; [`takeover`] (the caller's handle read, the plan asked,
//! the product run on the caller's stream) above; the exported names
//! ([`exports`]) on top.
//!
//! Intercepted, in both API widths: `cublas{S,D,C,Z}gemm_v2`,
//! `cublas{S,D,C,Z}gemmStridedBatched`, `cublasGemmEx`,
//! `cublasGemmStridedBatchedEx` and `cublasGemmBatchedEx` (their
//! exact-type cases). The status returned is cuBLAS's for what happened:
//! a product fastmm runs reports its failures, one it declines returns
//! what cuBLAS returns.

pub mod call;
pub mod exports;
pub mod real;
pub mod settings;
pub mod takeover;
pub mod types;
