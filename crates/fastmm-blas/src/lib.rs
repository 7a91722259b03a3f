//! `libfastmm_blas`: the GEMM entry points of the reference BLAS
//! (`sgemm_`, `dgemm_`, `cgemm_`, `zgemm_`, and their ILP64 `*_64_`
//! twins) and of CBLAS (`cblas_?gemm`, row and column major, LP64 and
//! ILP64), over fastmm's executor value, so that programs written for a
//! BLAS run on fastmm unchanged.
//!
//! A thin front end (docs/design.md, "Writing a front end"): the
//! arguments are checked as the reference BLAS checks them (an illegal
//! one is reported `xerbla`'s way and leaves C untouched), the column- or
//! row-major operands become strided views, and the product runs on the
//! [`fastmm::Machine`] the settings name ([`settings`]): no dispatch of
//! its own.
//!
//! Layers: [`settings`] (read once from the environment) and [`args`]
//! (the reference's checks) at the bottom; [`product`] (views and the
//! executor's call) above them; the exported symbols ([`fortran`],
//! [`cblas`]) on top, beside [`forward`], which hands every other BLAS
//! symbol to the library this one stands in for.

pub mod args;
pub mod cblas;
pub mod fortran;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub mod forward;
pub mod product;
pub mod settings;
pub mod team;
