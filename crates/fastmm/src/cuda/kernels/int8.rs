//! The INT8 steps the emulated and the byte-plane products share: room
//! on the GPU that the kernels write in full, events at the boundaries of
//! their phases, and the INT8 products (INT32 sums) through cuBLAS in
//! tiles.

use cudarc::cublas::sys::{cublasComputeType_t, cudaDataType};
use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{CudaEvent, CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};

use crate::config::{Config, Int8Kernels};
use crate::cuda::kernels::operand::to_i32;
use crate::cuda::runtime::blas::{gemm_ex, BlasMatrix, GemmEx, StridedBatch};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::runtime::tensor_map::TensorMap;
use crate::cuda::tunables::{
    CUDA_EMULATION_INT8_KERNELS, CUDA_EMULATION_INT8_TILE, CUDA_WGMMA_STAGES, WGMMA_TILE,
};

impl Int8Kernels {
    /// The own kernel's blocks per cluster, or None for cuBLAS's.
    pub(crate) fn cluster(self) -> Option<usize> {
        match self {
            Int8Kernels::Cublas => None,
            Int8Kernels::Wgmma => Some(1),
            Int8Kernels::WgmmaPairs => Some(2),
        }
    }
}
use crate::element::DType;
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
    int8_product_on(
        gpu,
        int8_kernels(gpu)?,
        (rows, n, kp, np),
        (p0, p1),
        accumulate,
        (a, bt, c),
    )
}

/// [`int8_product_part`] on the kernels named, whatever the configuration
/// chooses (the self-test compares them); operands the own kernel cannot
/// address (rows not 16-byte aligned, C's not 8-byte aligned) go to
/// cuBLAS's.
pub(crate) fn int8_product_on(
    gpu: &Gpu,
    kernels: Int8Kernels,
    (rows, n, kp, np): (usize, usize, usize, usize),
    (p0, p1): (usize, usize),
    accumulate: bool,
    (a, bt, c): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
) -> Result<(), Error> {
    if let Some(cluster) = kernels.cluster() {
        let (a, bt) = (a + p0 as u64, bt + p0 as u64);
        if a.is_multiple_of(16)
            && bt.is_multiple_of(16)
            && kp.is_multiple_of(16)
            && c.is_multiple_of(8)
            && np.is_multiple_of(2)
        {
            let kernel = wgmma_function(gpu, cluster)?;
            return wgmma_product(
                gpu,
                (&kernel, cluster),
                (rows, n, p1 - p0, kp, np),
                (accumulate, 0),
                (a, bt, c),
            );
        }
    }
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

/// What the INT8 products leave for the CRT: their INT32 sums, or (the
/// own kernel's) one residue byte per sum, congruent to it modulo the
/// product's modulus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Planes {
    /// INT32 sums.
    Sums,
    /// Residue bytes.
    Bytes,
}

impl Planes {
    /// What the kernels named leave.
    pub(crate) fn of(kernels: Int8Kernels) -> Planes {
        match kernels {
            Int8Kernels::Cublas => Planes::Sums,
            Int8Kernels::Wgmma | Int8Kernels::WgmmaPairs => Planes::Bytes,
        }
    }

    /// Bytes an entry.
    pub(crate) fn bytes(self) -> usize {
        match self {
            Planes::Sums => 4,
            Planes::Bytes => 1,
        }
    }
}

/// The residues modulo `modulus` (at most 256) of the sums of A·Bᵀ (A
/// rows×kp, Bᵀ n×kp INT8, k-contiguous), one byte each in [−128, 127], into
/// rows rows of ld np bytes at `out`, on the own kernel named (which
/// [`Planes::of`] names for them; cuBLAS's cannot).
pub(crate) fn int8_residues(
    gpu: &Gpu,
    kernels: Int8Kernels,
    (rows, n, kp, np): (usize, usize, usize, usize),
    modulus: u32,
    (a, bt, out): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
) -> Result<(), Error> {
    let Some(cluster) = kernels.cluster() else {
        return Err(Error::Cuda(
            "INT8 residues: cuBLAS's kernels sum only".into(),
        ));
    };
    if !(a.is_multiple_of(16)
        && bt.is_multiple_of(16)
        && kp.is_multiple_of(16)
        && out.is_multiple_of(2)
        && np.is_multiple_of(2))
    {
        return Err(Error::Cuda(
            "INT8 residues: planes not aligned for the own kernel".into(),
        ));
    }
    if !(2..=256).contains(&modulus) {
        return Err(Error::Cuda(format!("INT8 residues: modulus {modulus}")));
    }
    let kernel = wgmma_function(gpu, cluster)?;
    wgmma_product(
        gpu,
        (&kernel, cluster),
        (rows, n, kp, kp, np),
        (false, modulus as i32),
        (a, bt, out),
    )
}

/// Dynamic shared memory of `kernels/int8_wgmma.cu`: its ring, a KiB to
/// align it to the swizzle's atoms, and two mbarriers a stage.
fn wgmma_shared_bytes() -> usize {
    let (bm, bn, bk) = WGMMA_TILE;
    CUDA_WGMMA_STAGES * ((bm + bn) * bk + 16) + 1024
}

/// The kernels that multiply INT8 planes on this GPU: the own kernel on
/// sm_90, cuBLAS's elsewhere ([`CUDA_EMULATION_INT8_KERNELS`]; the
/// developer switch `FASTMM_DEV_CUDA_INT8` forces either, the own kernel
/// on another GPU being an error). It follows from the configuration and
/// the device alone.
pub(crate) fn int8_kernels(gpu: &Gpu) -> Result<Int8Kernels, Error> {
    let hopper = gpu.arch() == "sm_90";
    let (chosen, forced) = match Config::get().dev()?.int8 {
        Some(kernels) => (kernels, true),
        None => (CUDA_EMULATION_INT8_KERNELS, false),
    };
    match (chosen, hopper, forced) {
        (Int8Kernels::Wgmma | Int8Kernels::WgmmaPairs, false, true) => Err(Error::Unsupported {
            algorithm: "emulated",
            what: format!(
                "{} (the warpgroup-MMA INT8 kernel needs an sm_90 GPU)",
                gpu.info().name
            ),
        }),
        (Int8Kernels::Wgmma | Int8Kernels::WgmmaPairs, false, false) => Ok(Int8Kernels::Cublas),
        (kernels, _, _) => Ok(kernels),
    }
}

/// `kernels/int8_wgmma.cu` in clusters of `cluster` blocks, compiled once
/// per context and allowed its shared memory.
fn wgmma_function(gpu: &Gpu, cluster: usize) -> Result<CudaFunction, Error> {
    let key = KernelKey {
        source: KernelSource::Int8Wgmma,
        dtype: DType::I32,
        tile: cluster,
    };
    gpu.function_with_shared(key, wgmma_shared_bytes(), "emulated")
}

/// C (rows×n INT32 of ld np) = A·Bᵀ (+ C where `accumulate`) over
/// `depth` bytes, A's and Bᵀ's rows `ld` bytes apart, in one launch of
/// `kernels/int8_wgmma.cu` (blocks of 128 × 256 of C); with a modulus
/// m > 0 (and no accumulation) C is instead rows×n bytes of ld np, the
/// sums' residues modulo m in [−128, 127].
fn wgmma_product(
    gpu: &Gpu,
    (kernel, cluster): (&CudaFunction, usize),
    (rows, n, depth, ld, np): (usize, usize, usize, usize, usize),
    (accumulate, modulus): (bool, i32),
    (a, bt, c): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
) -> Result<(), Error> {
    debug_assert!(modulus == 0 || !accumulate);
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let (bm, bn, _) = WGMMA_TILE;
    let map_a = TensorMap::bytes_128b_swizzled(a, (rows, depth, ld), bm as u32)?;
    // In pairs each block copies half of B's rows (and multicasts them).
    let map_b = TensorMap::bytes_128b_swizzled(bt, (n, depth, ld), (bn / cluster) as u32)?;
    let (ri, ni, ki) = (to_i32("rows", rows)?, to_i32("n", n)?, to_i32("k", depth)?);
    let (ldc, acc) = (np as i64, i32::from(accumulate));
    // One block (a cluster's blocks) per tile (per `cluster` tiles down
    // a column of tiles), along x.
    let blocks = rows.div_ceil(bm).div_ceil(cluster) * cluster * n.div_ceil(bn);
    let config = LaunchConfig {
        grid_dim: (
            u32::try_from(blocks)
                .ok()
                .filter(|&b| b < 1 << 31)
                .ok_or_else(|| Error::Cuda(format!("{rows}×{n} is beyond one INT8 launch")))?,
            1,
            1,
        ),
        block_dim: (384, 1, 1),
        shared_mem_bytes: wgmma_shared_bytes() as u32,
    };
    let mut launch = gpu.stream.launch_builder(kernel);
    launch
        .arg(&map_a)
        .arg(&map_b)
        .arg(&ri)
        .arg(&ni)
        .arg(&ki)
        .arg(&c)
        .arg(&ldc)
        .arg(&acc)
        .arg(&modulus);
    // SAFETY: (TensorMap, TensorMap, int, int, int, int*, long long, int,
    // int):
    // the maps describe rows (n) rows of `depth` bytes, `ld` apart, at a
    // (bt), which the caller's planes hold; c has rows rows of ld np ≥ n
    // INT32 (bytes where a modulus is given), 8-byte (2-byte) aligned with
    // np even (checked by the callers), read only where accumulating; the
    // kernel stores inside rows×n only.
    unsafe { launch.launch(config) }
        .map(|_| ())
        .map_err(launch_err("INT8 product"))
}
