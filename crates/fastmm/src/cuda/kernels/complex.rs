//! Interleaved complex matrices to and from split real planes on the GPU
//! (`complex.cu`), around fastmm's real products of a complex product.
//! The arithmetic is the CPU twin's ([`crate::complex`]): copies, 3M's
//! sums Aᵣ + Aᵢ, and the combinations, each rounded once.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::cuda::kernels::operand::to_i32;
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::element::Element;
use crate::error::Error;

/// The most blocks a grid's y extent takes; rows past it are strided.
const MAX_GRID_Y: usize = 65535;

/// One thread per column, 256 per block, a block row per matrix row up to
/// [`MAX_GRID_Y`].
fn config((rows, cols): (usize, usize)) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            cols.div_ceil(256) as u32,
            rows.clamp(1, MAX_GRID_Y) as u32,
            1,
        ),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn function<T: Element>(gpu: &Gpu, entry: usize) -> Result<cudarc::driver::CudaFunction, Error> {
    let key = KernelKey {
        source: KernelSource::Complex,
        dtype: T::DTYPE,
        tile: 0,
    };
    gpu.entry_function(key, KernelSource::COMPLEX_ENTRIES[entry])
}

/// Where split planes go: the real and imaginary parts and, for 3M, their
/// sum (0: none), each `ld` elements between rows.
#[derive(Clone, Copy)]
pub(crate) struct Planes {
    pub re: CUdeviceptr,
    pub im: CUdeviceptr,
    pub sum: CUdeviceptr,
    pub ld: usize,
}

/// The rows×cols complex matrix at `src` (rows `lds` complex elements
/// apart) split into `planes`, queued on the GPU's stream.
pub(crate) fn split<T: Element>(
    gpu: &Gpu,
    (src, lds): (CUdeviceptr, usize),
    (rows, cols): (usize, usize),
    planes: Planes,
) -> Result<(), Error> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let f = function::<T>(gpu, 0)?;
    let (ri, ci) = (to_i32("rows", rows)?, to_i32("cols", cols)?);
    let (lds, ldd) = (lds as i64, planes.ld as i64);
    let mut launch = gpu.stream.launch_builder(&f);
    launch
        .arg(&ri)
        .arg(&ci)
        .arg(&src)
        .arg(&lds)
        .arg(&planes.re)
        .arg(&planes.im)
        .arg(&planes.sum)
        .arg(&ldd);
    // SAFETY: (int, int, const ELEM*, long long, ELEM*, ELEM*, ELEM*, long
    // long), ELEM being T: src addresses rows×cols complex elements (pairs
    // of T) with rows lds pairs apart; each plane (sum only when not null)
    // holds rows rows of ldd ≥ cols elements of T, none overlapping src or
    // another; the grid covers every column and strides the rows.
    unsafe { launch.launch(config((rows, cols))) }
        .map(|_| ())
        .map_err(|e| cuda_err("complex split kernel launch failed", e))
}

/// C (rows×cols complex elements at `c`, rows `ldc` apart) from the real
/// planes `re` and `im` (rows `ldp` apart): as they are, or with 3M's P₂
/// (`p2` not 0) from P₁ in `re` and P₃ in `im`: (P₁ − P₂, P₃ − P₁ − P₂).
pub(crate) fn combine<T: Element>(
    gpu: &Gpu,
    (rows, cols): (usize, usize),
    (re, im, p2, ldp): (CUdeviceptr, CUdeviceptr, CUdeviceptr, usize),
    (c, ldc): (CUdeviceptr, usize),
) -> Result<(), Error> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let f = function::<T>(gpu, 1)?;
    let (ri, ci) = (to_i32("rows", rows)?, to_i32("cols", cols)?);
    let (ldp, ldc) = (ldp as i64, ldc as i64);
    let mut launch = gpu.stream.launch_builder(&f);
    launch
        .arg(&ri)
        .arg(&ci)
        .arg(&re)
        .arg(&im)
        .arg(&p2)
        .arg(&ldp)
        .arg(&c)
        .arg(&ldc);
    // SAFETY: (int, int, const ELEM*, const ELEM*, const ELEM*, long long,
    // ELEM*, long long), ELEM being T: re, im and (when not null) p2 hold
    // rows rows of ldp ≥ cols elements of T; c addresses rows×cols complex
    // elements with rows ldc pairs apart, overlapping none of them; the
    // grid covers every column and strides the rows.
    unsafe { launch.launch(config((rows, cols))) }
        .map(|_| ())
        .map_err(|e| cuda_err("complex combine kernel launch failed", e))
}
