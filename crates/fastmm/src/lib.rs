//! # fastmm
//!
//! Fast, verified dense matrix multiplication **C ← α·A·B + β·C** for
//! `f32`, `f64`, `i32` and `i64`, on the CPU and on NVIDIA GPUs.
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
//! let c = matmul(&a, &b)?; // the automatic algorithm on the CPU
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
//! A device is a value: open it once as a [`Context`]. One device, the
//! GPUs of one host ([`Team`]) and the ranks of an MPI job (`Cluster`,
//! feature `mpi`) are each an [`Executor`]: plan a [`Problem`] once, then
//! execute the [`Plan`] on a [`Gemm`] (the operands) as often as needed;
//! the [`Report`] names the plan that ran, where the time went and the
//! words moved. The same algorithm runs on either device where both
//! implement it:
//!
//! ```no_run
//! use fastmm::{Algorithm, Context, Device, Executor, Gemm, GemmOptions, Matrix, Problem};
//! # fn main() -> Result<(), fastmm::Error> {
//! let gpu = Context::open("cuda:0".parse::<Device>()?)?;
//! let a = Matrix::<f32>::from_fn(8192, 8192, |i, j| ((i + j) % 7) as f32);
//! let opts = GemmOptions::new(Algorithm::Strassen);
//! let plan = gpu.plan(Problem::of::<f32>((8192, 8192, 8192)), &opts)?;
//! println!("{} ({} levels)", plan.kernel, plan.fast.as_ref().map_or(0, |f| f.levels));
//! let mut c = Matrix::zeros(8192, 8192);
//! let report = gpu.execute(&plan, Gemm::new(a.as_ref(), a.as_ref(), c.as_mut()))?;
//! let timing = &report.timing;
//! println!("{:.1} ms on the GPU, {:.1} ms with the copies", timing.compute_ms, timing.end_to_end_ms());
//! # Ok(())
//! # }
//! ```
//!
//! Layers, from the bottom up: the vocabulary ([`Element`], [`Matrix`] and
//! its views, [`Error`], [`GemmOptions`] and the other option types, the
//! environment in [`config`]); the devices' kernels and backends (the CPU
//! ladder and `packed`, the CUDA kernels and cuBLAS, and Strassen's
//! recursion written once over both); and on top the [`Context`] that
//! dispatches a product to its device, with [`verify()`], files in [`io`],
//! the machine report in [`info`] and, with the `selftest` feature, the
//! device check in `selftest`.
//! docs/design.md explains the design.

#![warn(missing_docs)]

// The vocabulary: names nothing above it.
pub mod config;
mod element;
mod error;
mod gemm;
mod matrix;
mod options;
pub mod partial;
pub mod system;
mod tunables;
pub mod tuning;

// Kernels and backends.
mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
mod strassen;
mod threads;

// Services over the vocabulary. `distributed` is the plain data of a
// distributed product (the planner, the schedule), which the CPU and CUDA
// backends run.
pub mod accuracy;
pub mod distributed;
pub mod emulation;
pub mod interop;
pub mod random;
pub mod verify;

// Dispatch and the public API.
pub mod audit;
#[cfg(feature = "mpi")]
mod cluster;
pub mod complex;
mod context;
#[cfg(feature = "dev")]
pub mod dev;
mod executor;
pub mod info;
pub mod io;
mod machine;
mod plan;
#[cfg(feature = "selftest")]
pub mod selftest;
mod team;

#[cfg(feature = "mpi")]
pub use cluster::{Cluster, ClusterFileReport, ClusterReport};
#[cfg(feature = "cuda")]
pub use context::GpuBuffer;
pub use context::{gemm, matmul, matmul_with, Context};
pub use cpu::{num_threads, set_num_threads};
pub use element::{DType, Element};
pub use error::Error;
pub use executor::{Clock, Communication, Executor, GpuShare, Report, Streamed, Timing};
pub use gemm::{Gemm, Problem};
pub use machine::Machine;
#[cfg(feature = "mpi")]
pub use machine::OnItsThread;
pub use matrix::{GpuMatrix, GpuProduct, MatMut, MatRef, Matrix};
pub use options::{
    Accuracy, Algorithm, AlgorithmInfo, BlockSizes, ComplexForm, CpuKernel, CpuOptions, CudaKernel,
    Device, DeviceKind, DeviceList, FastOptions, GemmOptions, GpuCompletion, GpuMemory, GpuOptions,
    GpuPrecision, Interrupt, SumStores, Variant, ALGORITHMS,
};
pub use plan::{FastPlan, OutOfCorePlan, Plan, Route, Spread};
pub use system::GpuInfo;
pub use team::{DistMatrix, Role, Team, TeamReport};
/// One team of threads for the copies of fastmm in a process (see
/// [`shared_team::SYMBOL`]), and running on this copy's own team, for the
/// library that exports it.
pub use threads::{run_on_own_team, shared as shared_team};
pub use verify::{verify, CheckMethod, Verdict};
