//! The INT8 steps the emulated and the byte-plane products share: room
//! on the GPU that the kernels write in full, events at the boundaries of
//! their phases, and the INT8 products (INT32 sums) through cuBLAS in
//! tiles.

use cudarc::cublas::sys::{cublasComputeType_t, cudaDataType};
use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{CudaEvent, CudaSlice, DevicePtr};

use crate::cuda::kernels::operand::to_i32;
use crate::cuda::runtime::blas::{gemm_ex, BlasMatrix, GemmEx, StridedBatch};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::CUDA_EMULATION_INT8_TILE;
use crate::emulation::Phase;
use crate::error::Error;

/// The most rows one launch covers (a grid's y extent).
pub(crate) const MAX_GRID_Y: usize = 65535;

/// Room for `len` values that the kernels or cuBLAS write in full before
/// anything reads them (so no memset: at n = 16384 the INT32 planes alone
/// are gigabytes).
pub(crate) fn alloc_written<V: cudarc::driver::DeviceRepr>(
    gpu: &Gpu,
    len: usize,
    what: &str,
) -> Result<CudaSlice<V>, Error> {
    // SAFETY: every caller's buffer is written in full (the split writes
    // every column of its planes, padding included; cuBLAS every element
    // of C it is given; the need kernel every element; the statistics'
    // last kernel every vector's exponent, norm and state) before any read.
    unsafe { gpu.retrying(|| gpu.stream.alloc::<V>(len.max(1))) }
        .map_err(|e| cuda_err(&format!("cannot allocate the emulated product's {what}"), e))
}

/// Events at the boundaries of the phases on the GPU's stream: the time
/// from one mark to the next is the earlier mark's phase.
pub(crate) struct Clock {
    marks: Vec<(Phase, CudaEvent)>,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock { marks: Vec::new() }
    }

    /// Starts `phase` at this point of the stream.
    pub(crate) fn mark(&mut self, gpu: &Gpu, phase: Phase) -> Result<(), Error> {
        let event = gpu
            .stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| cuda_err("cannot record an event", e))?;
        self.marks.push((phase, event));
        Ok(())
    }

    /// Ends the last phase and waits for it; each phase's time in µs.
    pub(crate) fn finish(mut self, gpu: &Gpu) -> Result<[u64; Phase::COUNT], Error> {
        self.mark(gpu, Phase::Accumulate)?;
        let (_, last) = self.marks.last().expect("a mark was just recorded");
        last.synchronize()
            .map_err(|e| cuda_err("cannot wait for the emulated product", e))?;
        let mut us = [0u64; Phase::COUNT];
        for pair in self.marks.windows(2) {
            let ms = pair[0]
                .1
                .elapsed_ms(&pair[1].1)
                .map_err(|e| cuda_err("cannot read the event timer", e))?;
            let slot = Phase::ALL.iter().position(|&p| p == pair[0].0).unwrap_or(0);
            us[slot] += (f64::from(ms) * 1e3).round() as u64;
        }
        Ok(us)
    }
}

pub(crate) fn ptr<V>(gpu: &Gpu, s: &CudaSlice<V>) -> CUdeviceptr {
    s.device_ptr(&gpu.stream).0
}

pub(crate) fn launch_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| cuda_err(&format!("emulated product: {what} launch failed"), e)
}

/// C (rows×np INT32, ld np) = A (rows×kp INT8) · Bᵀ (B n×kp INT8), both
/// k-contiguous, in tiles of C at most [`CUDA_EMULATION_INT8_TILE`] on a
/// side (cuBLAS picks faster kernels for them than for one large call).
pub(crate) fn int8_product(
    gpu: &Gpu,
    (rows, n, kp, np): (usize, usize, usize, usize),
    a: CUdeviceptr,
    bt: CUdeviceptr,
    c: CUdeviceptr,
) -> Result<(), Error> {
    int8_product_part(gpu, (rows, n, kp, np), (0, kp), false, a, bt, c)
}

/// As [`int8_product`] over columns p0..p1 of the depth only, added to C
/// where `accumulate` (p0 and p1 multiples of 4).
pub(crate) fn int8_product_part(
    gpu: &Gpu,
    (rows, n, kp, np): (usize, usize, usize, usize),
    (p0, p1): (usize, usize),
    accumulate: bool,
    a: CUdeviceptr,
    bt: CUdeviceptr,
    c: CUdeviceptr,
) -> Result<(), Error> {
    let tile = CUDA_EMULATION_INT8_TILE;
    for i0 in (0..rows).step_by(tile) {
        for j0 in (0..n).step_by(tile) {
            int8_tile(
                gpu,
                (tile.min(rows - i0), tile.min(n - j0), p1 - p0, np),
                (kp, accumulate),
                a + (i0 * kp + p0) as u64,
                bt + (j0 * kp + p0) as u64,
                c + (4 * (i0 * np + j0)) as u64,
                StridedBatch::ONE,
            )?;
        }
    }
    Ok(())
}

/// A strided batch of `count` products [`int8_product_part`] would make,
/// each one tile (rows and n at most [`CUDA_EMULATION_INT8_TILE`]), as one
/// cuBLAS launch: product z's A, Bᵀ and C lie z·`strides` elements (bytes,
/// bytes, INT32) after the first's (0 repeats an operand).
#[allow(clippy::too_many_arguments)]
pub(crate) fn int8_product_batch(
    gpu: &Gpu,
    (rows, n, kp, np): (usize, usize, usize, usize),
    (p0, p1): (usize, usize),
    accumulate: bool,
    (a, bt, c): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
    (count, (sa, sb, sc)): (usize, (usize, usize, usize)),
) -> Result<(), Error> {
    debug_assert!(rows.max(n) <= CUDA_EMULATION_INT8_TILE);
    let batch = StridedBatch {
        count: to_i32("batch", count)?,
        // cuBLAS's A is Bᵀ and its B is A (column-major Cᵀ = Bᵀᵀ·Aᵀ).
        strides: (sb as i64, sa as i64, sc as i64),
    };
    int8_tile(
        gpu,
        (rows, n, p1 - p0, np),
        (kp, accumulate),
        a + p0 as u64,
        bt + p0 as u64,
        c,
        batch,
    )
}

/// One tile of [`int8_product_part`]: C (rows×n of ld np) = A·Bᵀ (+ C
/// where `accumulate`) over depth `depth`, A and Bᵀ rows `ld` apart, for
/// each product of `batch` (strides in cuBLAS's order: Bᵀ, A, C).
/// Column-major that is Cᵀ = op_T(B)·A.
fn int8_tile(
    gpu: &Gpu,
    (rows, n, depth, np): (usize, usize, usize, usize),
    (ld, accumulate): (usize, bool),
    a: CUdeviceptr,
    bt: CUdeviceptr,
    c: CUdeviceptr,
    batch: StridedBatch,
) -> Result<(), Error> {
    let (one, beta) = (1i32, i32::from(accumulate));
    let (ni, ri, ki, ldk, ldc) = (
        to_i32("n", n)?,
        to_i32("rows", rows)?,
        to_i32("k", depth)?,
        to_i32("ld", ld)?,
        to_i32("ldc", np)?,
    );
    let int8 = |ptr| BlasMatrix {
        ptr,
        dtype: cudaDataType::CUDA_R_8I,
        ld: ldk,
    };
    let call = GemmEx {
        transposed: (true, false),
        dims: (ni, ri, ki),
        alpha: (&one as *const i32).cast(),
        a: int8(bt),
        b: int8(a),
        beta: (&beta as *const i32).cast(),
        c: BlasMatrix {
            ptr: c,
            dtype: cudaDataType::CUDA_R_32I,
            ld: ldc,
        },
        compute: cublasComputeType_t::CUBLAS_COMPUTE_32I,
        batch,
    };
    // SAFETY: `bt` holds n rows of `depth` INT8 `ld` apart (column-major
    // depth×n, ld ≥ depth), `a` rows rows likewise, `c` room for rows rows
    // of ld np INT32 (column-major np×rows ⊇ n×rows, read only where
    // accumulating), for each product of the batch at its strides (the
    // caller's contract: no product's C another's); α and β are host i32
    // scalars of the compute type that outlive the call.
    unsafe { gemm_ex(gpu, &call, "cublasGemmEx (INT8) failed") }
}
