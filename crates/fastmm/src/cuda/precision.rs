//! cuBLAS's tensor-core modes for f32 data: TF32 (operands rounded to a
//! 10-bit mantissa inside the product), and BF16/F16 (operands converted on
//! the device to 16-bit floats, products accumulated in f32). Opt-in, for
//! `cublas` on f32 only, and reported as such in every output.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// The arithmetic of a `cublas` f32 product.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GpuPrecision {
    /// IEEE f32 throughout (sgemm; the default).
    #[default]
    Fp32,
    /// TF32 tensor cores (`CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
    /// Operands in bfloat16, f32 accumulation.
    Bf16,
    /// Operands in IEEE half, f32 accumulation.
    F16,
}

impl GpuPrecision {
    /// Every mode.
    pub const ALL: [GpuPrecision; 4] = [
        GpuPrecision::Fp32,
        GpuPrecision::Tf32,
        GpuPrecision::Bf16,
        GpuPrecision::F16,
    ];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GpuPrecision::Fp32 => "fp32",
            GpuPrecision::Tf32 => "tf32",
            GpuPrecision::Bf16 => "bf16",
            GpuPrecision::F16 => "f16",
        }
    }

    /// Unit roundoff of the operands as the tensor cores see them.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            GpuPrecision::Fp32 => f64::from(f32::EPSILON) / 2.0,
            GpuPrecision::Tf32 | GpuPrecision::F16 => 2f64.powi(-11),
            GpuPrecision::Bf16 => 2f64.powi(-8),
        }
    }

    /// How much larger than f32's the error bound of a product may be: the
    /// ratio of unit roundoffs, for [`crate::verify::verify_with_growth`].
    pub fn error_growth(self) -> f64 {
        self.unit_roundoff() / GpuPrecision::Fp32.unit_roundoff()
    }
}

impl fmt::Display for GpuPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GpuPrecision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        GpuPrecision::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "unknown precision '{s}' (expected fp32, tf32, bf16 or f16)"
                ))
            })
    }
}
