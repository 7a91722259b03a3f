//! Transposed views copied row-major on the GPU (`transpose.cu`), for the
//! products that read row-major operands only (the tile kernels and the
//! fast algorithms' additions). cuBLAS and the INT8 pipelines read the
//! views in place and never come here.

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};

use crate::cuda::kernels::operand::{to_i32, Operand};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::element::Element;
use crate::error::Error;

/// The most blocks a grid's y extent takes.
const MAX_GRID_Y: usize = 65535;

/// The rows×cols matrix `src` (a transposed view: column-major with
/// `src.ld` elements between columns) copied, bit for bit, into new
/// row-major memory with rows `cols` elements apart, queued on the GPU's
/// stream. The copy is freed in stream order when it drops.
pub(crate) fn row_major_copy<T: Element>(
    gpu: &Gpu,
    src: Operand,
    (rows, cols): (usize, usize),
) -> Result<CudaSlice<T>, Error> {
    debug_assert!(src.trans, "a row-major operand needs no copy");
    if rows.div_ceil(32) > MAX_GRID_Y {
        return Err(Error::Unsupported {
            algorithm: "CUDA",
            what: format!(
                "a transposed view of {rows} rows (the copy's grid covers {} rows)",
                32 * MAX_GRID_Y
            ),
        });
    }
    let (ri, ci) = (to_i32("rows", rows)?, to_i32("cols", cols)?);
    let f = gpu.function(KernelKey {
        source: KernelSource::Transpose,
        dtype: T::DTYPE,
        tile: 0,
    })?;
    // SAFETY: the kernel below writes every one of the rows·cols elements
    // before anything reads the copy.
    let copy = unsafe { gpu.stream.alloc::<T>((rows * cols).max(1)) }
        .map_err(|e| cuda_err("cannot allocate a row-major copy of a transposed view", e))?;
    if rows == 0 || cols == 0 {
        return Ok(copy);
    }
    let dst = copy.device_ptr(&gpu.stream).0;
    let (lds, ldd) = (src.ld as i64, cols as i64);
    let config = LaunchConfig {
        grid_dim: (cols.div_ceil(32) as u32, rows.div_ceil(32) as u32, 1),
        block_dim: (32, 8, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = gpu.stream.launch_builder(&f);
    launch
        .arg(&ri)
        .arg(&ci)
        .arg(&src.ptr)
        .arg(&lds)
        .arg(&dst)
        .arg(&ldd);
    // SAFETY: (int, int, const ELEM*, long long, ELEM*, long long), ELEM
    // being T: src addresses a column-major rows×cols matrix of T with
    // this ld (the caller's operand), dst rows·cols elements of T; the
    // grid covers every element and its y extent was checked above.
    unsafe { launch.launch(config) }
        .map(|_| copy)
        .map_err(|e| cuda_err("transpose kernel launch failed", e))
}
