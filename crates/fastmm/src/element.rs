//! Element types and their arithmetic.
//!
//! fastmm multiplies `f32`, `f64`, `i32` and `i64` matrices. Integer products
//! use *wrapping* arithmetic in the element type, exactly as numpy's
//! `int32 @ int32` does: every sum and product is taken modulo 2^32 (or
//! 2^64). Because the integers modulo 2^w form a ring, any algorithm that is
//! correct over a ring (classical, Strassen, Winograd) gives bit-identical
//! integer results whatever its summation order.

use std::fmt::{Debug, Display};
use std::str::FromStr;

use crate::error::Error;

/// The element types fastmm supports, as a runtime value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE-754 binary32.
    F32,
    /// IEEE-754 binary64.
    F64,
    /// 32-bit two's-complement integer with wrapping arithmetic.
    I32,
    /// 64-bit two's-complement integer with wrapping arithmetic.
    I64,
}

impl DType {
    /// All supported element types, in display order.
    pub const ALL: [DType; 4] = [DType::F32, DType::F64, DType::I32, DType::I64];

    /// Lower-case name, as accepted on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
        }
    }

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// Whether results of this type are compared exactly.
    pub fn is_integer(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// The largest finite value, as an f64.
    pub fn largest(self) -> f64 {
        match self {
            DType::F32 => f32::MAX as f64,
            DType::F64 => f64::MAX,
            DType::I32 => i32::MAX as f64,
            DType::I64 => i64::MAX as f64,
        }
    }

    /// Unit roundoff u = 2^-p of the float type, 0 for integers.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F32 => f32::EPSILON as f64 / 2.0,
            DType::F64 => f64::EPSILON / 2.0,
            DType::I32 | DType::I64 => 0.0,
        }
    }
}

/// a + b as an unevaluated sum (s, e) with s = fl(a + b) (Knuth's
/// TwoSum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let v = s - a;
    (s, (a - (s - v)) + (b - v))
}

/// Σ x_p·y_p as an unevaluated sum hi + lo, as accurate as if computed in
/// twice f64's precision and then rounded (Ogita, Rump and Oishi's Dot2:
/// error-free products by the fused multiply-add, error-free sums by
/// TwoSum): the reference products are measured against, and the
/// emulated twin's native elements, which must be no less accurate than
/// any native product.
///
/// Where a term or the sum is not finite, the plain sum's IEEE answer
/// (an ∞ term has a NaN rounding error, which must not turn ∞ into NaN).
pub(crate) fn dot2(pairs: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let (mut hi, mut lo, mut plain) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in pairs {
        let p = x * y;
        let pe = x.mul_add(y, -p);
        let (s, se) = two_sum(hi, p);
        hi = s;
        lo += se + pe;
        plain += p;
    }
    let (s, e) = two_sum(hi, lo);
    if s.is_finite() && e.is_finite() {
        (s, e)
    } else {
        (plain, 0.0)
    }
}

impl Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for DType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        DType::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| Error::UnknownDType(s.to_string()))
    }
}

/// A matrix element: one of f32, f64, i32, i64.
///
/// `add` and `mul` wrap for integers and round for floats. Float kernels use
/// separate multiply and add (`acc + a * b`), never a libm `mul_add`, which
/// without a hardware FMA target feature is a slow function call.
pub trait Element:
    sealed::Sealed + DeviceScalar + Copy + Send + Sync + Debug + Display + PartialEq + Default + 'static
{
    /// The runtime tag of this type.
    const DTYPE: DType;
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;

    /// `self + rhs`, wrapping for integers.
    fn add(self, rhs: Self) -> Self;
    /// `self - rhs`, wrapping for integers.
    fn sub(self, rhs: Self) -> Self;
    /// `self * rhs`, wrapping for integers.
    fn mul(self, rhs: Self) -> Self;
    /// `self + a * b`, wrapping for integers; two roundings for floats.
    #[inline(always)]
    fn add_product(self, a: Self, b: Self) -> Self {
        self.add(a.mul(b))
    }
    /// Nearest f64 (exact for f32, i32; rounded for large i64).
    fn to_f64(self) -> f64;
    /// Conversion from f64 (rounding for floats, saturating truncation for integers).
    fn from_f64(x: f64) -> Self;
    /// Conversion from i64 (rounding for floats, wrapping for i32).
    fn from_i64(x: i64) -> Self;
    /// Exact value for integers (unused for floats, which return their truncation).
    fn to_i128(self) -> i128;
    /// The value modulo 2^w for integers (truncation for floats).
    fn wrap_from_i128(x: i128) -> Self;
    /// A value to pre-fill outputs with before a β = 0 product: NaN for
    /// floats (it would propagate if C were read), `MIN` for integers.
    fn poison() -> Self;
}

/// What the CUDA backend needs of an element: that cudarc may copy it to
/// and from the device and pass it as a kernel argument. Without the `cuda`
/// feature it asks nothing.
#[cfg(feature = "cuda")]
pub trait DeviceScalar: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits {}
/// What the CUDA backend needs of an element (nothing without `cuda`).
#[cfg(not(feature = "cuda"))]
pub trait DeviceScalar {}

impl DeviceScalar for f32 {}
impl DeviceScalar for f64 {}
impl DeviceScalar for i32 {}
impl DeviceScalar for i64 {}

macro_rules! impl_float {
    ($t:ty, $tag:expr) => {
        impl Element for $t {
            const DTYPE: DType = $tag;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self + rhs
            }
            #[inline(always)]
            fn sub(self, rhs: Self) -> Self {
                self - rhs
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self * rhs
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn wrap_from_i128(x: i128) -> Self {
                x as $t
            }
            fn poison() -> Self {
                <$t>::NAN
            }
        }
    };
}

macro_rules! impl_int {
    ($t:ty, $tag:expr) => {
        impl Element for $t {
            const DTYPE: DType = $tag;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self.wrapping_add(rhs)
            }
            #[inline(always)]
            fn sub(self, rhs: Self) -> Self {
                self.wrapping_sub(rhs)
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self.wrapping_mul(rhs)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn wrap_from_i128(x: i128) -> Self {
                x as $t
            }
            fn poison() -> Self {
                <$t>::MIN
            }
        }
    };
}

/// Only the four types above are elements: packed kernels reinterpret raw
/// workspace bytes as elements, which is sound only for plain-old-data types
/// in which every bit pattern is a value.
mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

impl_float!(f32, DType::F32);
impl_float!(f64, DType::F64);
impl_int!(i32, DType::I32);
impl_int!(i64, DType::I64);

/// Runs `$body` with the type name `$T` bound to the element type of
/// `$dtype` (a [`DType`] value): the one place a runtime type becomes a
/// compile-time one.
macro_rules! for_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::element::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::element::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::element::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::element::DType::I64 => {
                type $T = i64;
                $body
            }
        }
    };
}
pub(crate) use for_dtype;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_arithmetic_wraps() {
        assert_eq!(i32::MAX.add(1), i32::MIN);
        assert_eq!(0i32.add_product(65536, 65536), 0);
        assert_eq!(i64::MIN.sub(1), i64::MAX);
        assert_eq!(i32::wrap_from_i128(1i128 << 32 | 5), 5);
    }

    #[test]
    fn dtype_parses_case_insensitively() {
        assert_eq!("F64".parse::<DType>().unwrap(), DType::F64);
        assert!(matches!(
            "f16".parse::<DType>(),
            Err(Error::UnknownDType(_))
        ));
    }
}
