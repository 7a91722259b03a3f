//! cuBLAS's GEMM, the one cuBLAS function family the backend calls: one
//! column-major `cublasGemmEx`, or its strided batch, on this GPU's
//! handle, described as a value so that the float products
//! (`kernels::cublas`) and the INT8 products (`kernels::int8`) name no raw
//! cuBLAS call; and for complex operands the same value through cuBLAS's
//! typed complex GEMMs (`cublasCgemm`, `cublasZgemm` and their 3M forms).

use std::ffi::c_void;

use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cudaDataType};
use cudarc::driver::sys::CUdeviceptr;

use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::error::Error;

/// A column-major matrix operand of cuBLAS: device address, element type
/// and leading dimension (in elements).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlasMatrix {
    pub ptr: CUdeviceptr,
    pub dtype: cudaDataType,
    pub ld: i32,
}

/// C (m×n) ← α·op(A)·op(B) + β·C, column-major, op(A) m×k and op(B) k×n;
/// α and β host scalars of `compute`'s scalar type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GemmEx {
    /// Whether A and B are read transposed.
    pub transposed: (bool, bool),
    /// (m, n, k).
    pub dims: (i32, i32, i32),
    pub alpha: *const c_void,
    pub a: BlasMatrix,
    pub b: BlasMatrix,
    pub beta: *const c_void,
    pub c: BlasMatrix,
    pub compute: cublasComputeType_t,
    /// How many products, and the elements from one product's A, B and C
    /// to the next's ([`StridedBatch::ONE`] for a single product).
    pub batch: StridedBatch,
}

/// A strided batch: `count` products whose A, B and C each lie a fixed
/// number of elements after the previous product's (0 repeats one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StridedBatch {
    pub count: i32,
    pub strides: (i64, i64, i64),
}

impl StridedBatch {
    /// One product.
    pub const ONE: StridedBatch = StridedBatch {
        count: 1,
        strides: (0, 0, 0),
    };
}

/// Queues `call` on `gpu`'s stream with its cuBLAS handle (made on first
/// use); a failure is reported as `what`.
///
/// # Safety
/// Every matrix of `call`, in each product of its batch, addresses device
/// memory of `gpu` holding what its dimensions, type and leading dimension
/// describe (C writable, no element of one product's C another's, and C
/// read only where β ≠ 0), untouched by other work until the stream has
/// passed the products; `alpha` and `beta` point to host scalars of the
/// compute type that outlive the call.
pub(crate) unsafe fn gemm_ex(gpu: &Gpu, call: &GemmEx, what: &str) -> Result<(), Error> {
    let op = |t: bool| if t { CUBLAS_OP_T } else { CUBLAS_OP_N };
    let (m, n, k) = call.dims;
    // A single product stays `cublasGemmEx`, whose choice of kernel the
    // measured single products were made with.
    if call.batch.count > 1 {
        let (stride_a, stride_b, stride_c) = call.batch.strides;
        return gpu.with_blas(|blas| {
            // SAFETY: the caller's contract covers every product's pointers.
            unsafe {
                cudarc::cublas::result::gemm_strided_batched_ex(
                    *blas.handle(),
                    op(call.transposed.0),
                    op(call.transposed.1),
                    m,
                    n,
                    k,
                    call.alpha,
                    call.a.ptr as *const c_void,
                    call.a.dtype,
                    call.a.ld,
                    stride_a,
                    call.b.ptr as *const c_void,
                    call.b.dtype,
                    call.b.ld,
                    stride_b,
                    call.beta,
                    call.c.ptr as *mut c_void,
                    call.c.dtype,
                    call.c.ld,
                    stride_c,
                    call.batch.count,
                    call.compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(|e| cuda_err(what, e))
        });
    }
    gpu.with_blas(|blas| {
        // SAFETY: the caller's contract covers every pointer.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *blas.handle(),
                op(call.transposed.0),
                op(call.transposed.1),
                m,
                n,
                k,
                call.alpha,
                call.a.ptr as *const c_void,
                call.a.dtype,
                call.a.ld,
                call.b.ptr as *const c_void,
                call.b.dtype,
                call.b.ld,
                call.beta,
                call.c.ptr as *mut c_void,
                call.c.dtype,
                call.c.ld,
                call.compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| cuda_err(what, e))
    })
}

/// Queues `call`, one complex product (`CUDA_C_32F` or `CUDA_C_64F`
/// operands, α and β complex host scalars of that type), with cuBLAS's
/// typed complex GEMM: `cublasCgemm`/`cublasZgemm`, or with `three_m`
/// their 3M forms `cublasCgemm3m`/`cublasZgemm3m` (one family of calls
/// for both forms; `cublasGemmEx` has no 3M). A batch is refused here
/// (cuBLAS has no strided batch of `cublasZgemm3m`) and queued product by
/// product by the caller.
///
/// # Safety
/// As [`gemm_ex`]; α and β point to `cuComplex` or `cuDoubleComplex`
/// values at those types' alignment (8 and 16 bytes), which cuBLAS's
/// aligned loads need.
pub(crate) unsafe fn complex_gemm(
    gpu: &Gpu,
    call: &GemmEx,
    three_m: bool,
    what: &str,
) -> Result<(), Error> {
    use cudarc::cublas::sys::{
        cuComplex, cuDoubleComplex, cublasCgemm3m, cublasCgemm_v2, cublasZgemm3m, cublasZgemm_v2,
    };
    if call.batch.count != 1 {
        return Err(Error::Unsupported {
            algorithm: "cublas",
            what: "a strided batch of complex products".into(),
        });
    }
    let op = |t: bool| if t { CUBLAS_OP_T } else { CUBLAS_OP_N };
    let (m, n, k) = call.dims;
    let (ta, tb) = (op(call.transposed.0), op(call.transposed.1));
    let (lda, ldb, ldc) = (call.a.ld, call.b.ld, call.c.ld);
    // The two precisions' calls differ only in the element type.
    macro_rules! typed {
        ($element:ty, $classical:ident, $gauss:ident, $h:expr) => {{
            let f = if three_m { $gauss } else { $classical };
            // SAFETY: the caller's contract covers every pointer, and the
            // operands and scalars are of this element type.
            unsafe {
                f(
                    $h,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    call.alpha.cast(),
                    call.a.ptr as *const $element,
                    lda,
                    call.b.ptr as *const $element,
                    ldb,
                    call.beta.cast(),
                    call.c.ptr as *mut $element,
                    ldc,
                )
            }
        }};
    }
    gpu.with_blas(|blas| {
        let h = *blas.handle();
        let status = match call.a.dtype {
            cudaDataType::CUDA_C_32F => typed!(cuComplex, cublasCgemm_v2, cublasCgemm3m, h),
            cudaDataType::CUDA_C_64F => typed!(cuDoubleComplex, cublasZgemm_v2, cublasZgemm3m, h),
            other => {
                return Err(Error::Unsupported {
                    algorithm: "cublas",
                    what: format!("a complex product of {other:?} operands"),
                })
            }
        };
        status.result().map_err(|e| cuda_err(what, e))
    })
}
