//! cuBLAS's vocabulary as its C headers define it (`cublas_api.h`,
//! `library_types.h`): the enumerations' values this library reads and
//! returns. Nothing here calls anything.

use std::ffi::{c_int, c_void};

/// `cublasStatus_t`.
pub type Status = c_int;
/// `cublasHandle_t`.
pub type Handle = *mut c_void;

/// `CUBLAS_STATUS_SUCCESS`.
pub const SUCCESS: Status = 0;
/// `CUBLAS_STATUS_NOT_INITIALIZED`: no real cuBLAS to hand a call to.
pub const NOT_INITIALIZED: Status = 1;
/// `CUBLAS_STATUS_ALLOC_FAILED`.
pub const ALLOC_FAILED: Status = 3;
/// `CUBLAS_STATUS_INVALID_VALUE`.
pub const INVALID_VALUE: Status = 7;
/// `CUBLAS_STATUS_EXECUTION_FAILED`.
pub const EXECUTION_FAILED: Status = 13;

/// `cublasOperation_t`: `CUBLAS_OP_N`, `_T`, `_C` (and `_CONJG`, the
/// conjugate without transposition, which only complex calls take).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// As stored.
    N,
    /// Transposed.
    T,
    /// Conjugate transposed.
    C,
}

impl Op {
    /// The operation of cuBLAS's value, None for one this library does not
    /// take over (`CUBLAS_OP_CONJG` or an invalid value).
    pub fn from_raw(value: c_int) -> Option<Op> {
        match value {
            0 => Some(Op::N),
            1 => Some(Op::T),
            2 => Some(Op::C),
            _ => None,
        }
    }

    /// Whether the operand is read transposed.
    pub fn transposes(self) -> bool {
        self != Op::N
    }
}

/// `CUBLAS_POINTER_MODE_HOST`: α and β are host scalars.
pub const POINTER_MODE_HOST: c_int = 0;

/// `CUBLAS_DEFAULT_MATH`.
pub const DEFAULT_MATH: c_int = 0;
/// `CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION`, a flag over the
/// mode.
pub const DISALLOW_REDUCED_PRECISION_REDUCTION: c_int = 16;

/// Whether a handle's math mode asks for the type's own arithmetic: the
/// default mode, with or without the flag that forbids reduced-precision
/// reductions. TF32, the deprecated tensor-op mode, pedantic math and
/// cuBLAS's own emulation modes ask for something else, which the
/// caller then gets from cuBLAS.
pub fn math_is_default(mode: c_int) -> bool {
    mode & !DISALLOW_REDUCED_PRECISION_REDUCTION == DEFAULT_MATH
}

/// `cudaDataType_t`'s `CUDA_R_32F`.
pub const R_32F: c_int = 0;
/// `CUDA_R_64F`.
pub const R_64F: c_int = 1;
/// `CUDA_C_32F`.
pub const C_32F: c_int = 4;
/// `CUDA_C_64F`.
pub const C_64F: c_int = 5;

/// `cublasComputeType_t`'s `CUBLAS_COMPUTE_32F`.
pub const COMPUTE_32F: c_int = 68;
/// `CUBLAS_COMPUTE_64F`.
pub const COMPUTE_64F: c_int = 70;

/// The element types a GEMM of this library runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// float.
    S,
    /// double.
    D,
    /// cuComplex.
    C,
    /// cuDoubleComplex.
    Z,
}

impl Kind {
    /// The letter of its cuBLAS routine.
    pub fn letter(self) -> char {
        match self {
            Kind::S => 's',
            Kind::D => 'd',
            Kind::C => 'c',
            Kind::Z => 'z',
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Kind::S => 4,
            Kind::D | Kind::C => 8,
            Kind::Z => 16,
        }
    }

    /// Whether its elements are complex.
    pub fn complex(self) -> bool {
        matches!(self, Kind::C | Kind::Z)
    }

    /// The kind of a `cublasGemmEx`-family call whose three types are
    /// `types` and whose compute type is `compute`, where that is exactly
    /// the type's own product (`CUBLAS_COMPUTE_32F` for the 32-bit types,
    /// `_64F` for the 64-bit ones); None for mixed, reduced or
    /// fast-compute calls, which stay cuBLAS's.
    pub fn of_ex(types: [c_int; 3], compute: c_int) -> Option<Kind> {
        if types[1] != types[0] || types[2] != types[0] {
            return None;
        }
        match (types[0], compute) {
            (R_32F, COMPUTE_32F) => Some(Kind::S),
            (R_64F, COMPUTE_64F) => Some(Kind::D),
            (C_32F, COMPUTE_32F) => Some(Kind::C),
            (C_64F, COMPUTE_64F) => Some(Kind::Z),
            _ => None,
        }
    }
}
