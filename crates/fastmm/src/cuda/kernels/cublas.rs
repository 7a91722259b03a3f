//! cuBLAS: sgemm and dgemm, and the tensor-core modes of f32 data, through
//! the row-major swap C = A·B ⇔ Cᵀ = Bᵀ·Aᵀ; and its complex products
//! (cgemm, zgemm and their 3M forms) on interleaved operands, likewise.

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};

use crate::cuda::kernels::operand::{to_i32, DeviceGemm, Operand};
use crate::cuda::runtime::blas::{
    complex_gemm as blas_complex_gemm, gemm_ex, BlasMatrix, GemmEx, StridedBatch,
};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::options::{ComplexForm, GpuPrecision};

/// c ← α·a·b + β·c with `cublasGemmEx`: sgemm's and dgemm's arithmetic,
/// or for f32 data a tensor-core `precision` (a and b then hold operands
/// of that precision's type, converted by [`to_half`] for the 16-bit
/// modes; c stays f32). cuBLAS is column-major: row-major C = A·B is
/// column-major Cᵀ = Bᵀ·Aᵀ, which is the same memory, so B goes first and
/// a row-major operand is not transposed; an operand that is a transposed
/// view (column-major) is read with cuBLAS's transpose. C is row-major.
pub(crate) fn gemm<T: Element>(
    gpu: &Gpu,
    precision: GpuPrecision,
    product: DeviceGemm<T>,
) -> Result<(), Error> {
    gemm_batched(gpu, precision, product, (1, (0, 0, 0)))
}

/// `count` products of [`gemm`]'s kind in one strided-batch call: the
/// i-th reads A, B and C `i·strides` elements after `product`'s (a
/// stride of 0 repeats that operand). cuBLAS runs them as one launch.
pub(crate) fn gemm_batched<T: Element>(
    gpu: &Gpu,
    precision: GpuPrecision,
    DeviceGemm {
        shape: (m, k, n),
        alpha,
        a,
        b,
        beta,
        c,
    }: DeviceGemm<T>,
    (count, (stride_a, stride_b, stride_c)): (usize, (usize, usize, usize)),
) -> Result<(), Error> {
    let (m, k, n) = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
    let count = to_i32("batch", count)?;
    let stride = |what: &str, s: usize| {
        i64::try_from(s).map_err(|_| Error::Unsupported {
            algorithm: "cublas",
            what: format!("a batch stride of {s} elements ({what})"),
        })
    };
    let batch = StridedBatch {
        count,
        // The row-major swap: cuBLAS's A is our B.
        strides: (
            stride("B", stride_b)?,
            stride("A", stride_a)?,
            stride("C", stride_c)?,
        ),
    };
    use cudarc::cublas::sys::{cublasComputeType_t as Compute, cudaDataType as Data};
    let (operands, result, compute) = match (T::DTYPE, precision) {
        (DType::F64, _) => (
            Data::CUDA_R_64F,
            Data::CUDA_R_64F,
            Compute::CUBLAS_COMPUTE_64F,
        ),
        (DType::F32, GpuPrecision::Fp32) => (
            Data::CUDA_R_32F,
            Data::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F,
        ),
        (DType::F32, GpuPrecision::Tf32) => (
            Data::CUDA_R_32F,
            Data::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F_FAST_TF32,
        ),
        (DType::F32, GpuPrecision::Bf16) => (
            Data::CUDA_R_16BF,
            Data::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F,
        ),
        (DType::F32, GpuPrecision::F16) => (
            Data::CUDA_R_16F,
            Data::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F,
        ),
        (DType::I32 | DType::I64, _) => unreachable!("refused by ClassicalGemm::resolve"),
    };
    if c.trans {
        return Err(Error::Unsupported {
            algorithm: "cublas",
            what: "a transposed output (C is written row-major)".into(),
        });
    }
    let (lda, ldb, ldc) = (
        to_i32("lda", a.ld)?,
        to_i32("ldb", b.ld)?,
        to_i32("ldc", c.ld)?,
    );
    // α and β in the compute type's scalar: f64 for dgemm, else f32.
    let scalars = [alpha.to_f64(), beta.to_f64()];
    let singles = scalars.map(|x| x as f32);
    let (alpha, beta): (*const std::ffi::c_void, *const std::ffi::c_void) = match T::DTYPE {
        DType::F64 => (
            (&scalars[0] as *const f64).cast(),
            (&scalars[1] as *const f64).cast(),
        ),
        _ => (
            (&singles[0] as *const f32).cast(),
            (&singles[1] as *const f32).cast(),
        ),
    };
    let call = GemmEx {
        // The row-major swap: cuBLAS's A is our B.
        transposed: (b.trans, a.trans),
        dims: (n, m, k),
        alpha,
        a: BlasMatrix {
            ptr: b.ptr,
            dtype: operands,
            ld: ldb,
        },
        b: BlasMatrix {
            ptr: a.ptr,
            dtype: operands,
            ld: lda,
        },
        beta,
        c: BlasMatrix {
            ptr: c.ptr,
            dtype: result,
            ld: ldc,
        },
        compute,
        batch,
    };
    // SAFETY: for each of the `count` products, a and b address m×k and
    // k×n matrices of the operand type (row-major, or column-major where
    // transposed, which the op flags say), c an m×n matrix of the
    // result type, with these leading dimensions, at the caller's strides
    // (its contract: no two products' C share an element); α and β point
    // to host scalars of the compute type that outlive the call. Row-major
    // C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first, n × m.
    unsafe { gemm_ex(gpu, &call, "cublasGemmEx failed") }
}

/// c ← α·a·b + β·c for complex matrices stored interleaved (each element
/// a (real, imaginary) pair of T: complex64 for f32, complex128 for f64,
/// as numpy, torch and CUDA store them), with cuBLAS's own complex
/// product: `form` Classical is cgemm/zgemm (the complex product's own
/// componentwise bound), Gauss their 3M forms. The shape and leading
/// dimensions count complex elements (α and β are real here); layouts as
/// [`gemm`]'s.
pub(crate) fn complex_gemm<T: Element>(
    gpu: &Gpu,
    form: ComplexForm,
    DeviceGemm {
        shape: (m, k, n),
        alpha,
        a,
        b,
        beta,
        c,
    }: DeviceGemm<T>,
) -> Result<(), Error> {
    use cudarc::cublas::sys::{cublasComputeType_t as Compute, cudaDataType as Data};
    let (data, compute) = match T::DTYPE {
        DType::F32 => (Data::CUDA_C_32F, Compute::CUBLAS_COMPUTE_32F),
        DType::F64 => (Data::CUDA_C_64F, Compute::CUBLAS_COMPUTE_64F),
        other => {
            return Err(Error::Unsupported {
                algorithm: "cublas",
                what: format!("complex products with {other} parts"),
            })
        }
    };
    if c.trans {
        return Err(Error::Unsupported {
            algorithm: "cublas",
            what: "a transposed output (C is written row-major)".into(),
        });
    }
    let (m, k, n) = (to_i32("m", m)?, to_i32("k", k)?, to_i32("n", n)?);
    let (lda, ldb, ldc) = (
        to_i32("lda", a.ld)?,
        to_i32("ldb", b.ld)?,
        to_i32("ldc", c.ld)?,
    );
    // α and β as complex host scalars of the parts' type, in cuBLAS's own
    // types: cuDoubleComplex is 16-byte aligned, and cuBLAS reads it with
    // aligned loads (an f64 pair at an 8-byte boundary crashed the
    // process on a complex128 product).
    use cudarc::cublas::sys::{double2, float2};
    let complex64 = |x: T| float2 {
        x: x.to_f64() as f32,
        y: 0.0,
    };
    let complex128 = |x: T| double2 {
        x: x.to_f64(),
        y: 0.0,
    };
    let (singles, doubles) = (
        [complex64(alpha), complex64(beta)],
        [complex128(alpha), complex128(beta)],
    );
    let (alpha, beta): (*const std::ffi::c_void, *const std::ffi::c_void) = match T::DTYPE {
        DType::F64 => (
            (&doubles[0] as *const double2).cast(),
            (&doubles[1] as *const double2).cast(),
        ),
        _ => (
            (&singles[0] as *const float2).cast(),
            (&singles[1] as *const float2).cast(),
        ),
    };
    let matrix = |ptr, ld| BlasMatrix {
        ptr,
        dtype: data,
        ld,
    };
    let call = GemmEx {
        // The row-major swap: cuBLAS's A is our B.
        transposed: (b.trans, a.trans),
        dims: (n, m, k),
        alpha,
        a: matrix(b.ptr, ldb),
        b: matrix(a.ptr, lda),
        beta,
        c: matrix(c.ptr, ldc),
        compute,
        batch: StridedBatch::ONE,
    };
    // SAFETY: a and b address m×k and k×n interleaved complex matrices of
    // T's parts (row-major, or column-major where transposed, as the op
    // flags say), c an m×n one, with these leading dimensions in complex
    // elements (the caller's contract); α and β point to complex host
    // scalars that outlive the call. Row-major C = A·B is column-major
    // Cᵀ = Bᵀ·Aᵀ: B first, n × m.
    unsafe {
        blas_complex_gemm(
            gpu,
            &call,
            form == ComplexForm::Gauss,
            "cuBLAS's complex product failed",
        )
    }
}

/// A contiguous f32 matrix of `len` elements at `src`, converted on the GPU
/// to bfloat16 (`bf16`) or IEEE half.
pub(crate) fn to_half(
    gpu: &Gpu,
    src: Operand,
    len: usize,
    bf16: bool,
) -> Result<CudaSlice<u16>, Error> {
    let f = gpu.function(KernelKey {
        source: KernelSource::Convert,
        dtype: DType::F32,
        tile: usize::from(bf16),
    })?;
    // SAFETY: every element is written by the kernel below before use.
    let out = unsafe { gpu.stream.alloc::<u16>(len.max(1)) }
        .map_err(|e| cuda_err("cannot allocate 16-bit operands", e))?;
    let dst = out.device_ptr(&gpu.stream).0;
    let n = len as i64;
    let threads = 256;
    let config = LaunchConfig {
        grid_dim: (len.div_ceil(threads) as u32, 1, 1),
        block_dim: (threads as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&n).arg(&src.ptr).arg(&dst);
    // SAFETY: `src` holds `len` contiguous f32 (a fresh upload, ld = cols),
    // `dst` room for `len` u16; the signature is (long long, float*, ushort*).
    unsafe { launch.launch(config) }
        .map(|_| out)
        .map_err(|e| cuda_err("conversion kernel launch failed", e))
}
