//! The microkernels: a portable reference twin and the x86-64 SIMD family.

pub mod generic;
#[cfg(target_arch = "x86_64")]
pub mod x86;
