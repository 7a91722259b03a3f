//! Floating-point products from exact integer ones: Ozaki scheme II
//! (Ozaki, Uchino and Imamura; Uchino, Ozaki and Imamura, SC'25), the
//! arithmetic of the `emulated` algorithm on INT8 matrix engines, here as
//! plain Rust: the reference twin and test oracle of the GPU kernels.
//!
//! 1. **Scaling** ([`scaling`]): row i of A by 2^{b−1−E_i} and column j of
//!    B by 2^{b−1−F_j}, rounded to integers of at most b bits.
//! 2. **Certificate** ([`certify`]): the fewest bits b for which the
//!    truncation error of every element, bounded from the rows' and
//!    columns' norms, stays within the classical product's bound
//!    (k+1)·u·(|A||B|)_ij, with (|A||B|)_ij bounded from below by one
//!    INT8 product of 7-bit magnitudes. Elements no b certifies (NaN, ∞,
//!    magnitudes that cancel) are recomputed natively, or the whole
//!    product is, past an allowance.
//! 3. **Residues** ([`moduli`]): the scaled integers modulo N pairwise
//!    coprime moduli m_l ≤ 256, in the symmetric range of an i8; one INT8
//!    product with INT32 sums per modulus (exact while k·128² < 2³¹,
//!    longer depths in chunks).
//! 4. **Reconstruction**: Garner's mixed radix with balanced digits gives
//!    the exact integer Σ_p a′_ip·b′_pj (|·| < M/2 with M = Π m_l), which
//!    is rounded once and scaled back by 2^{E_i+F_j+2−2b}.

pub mod certify;
pub mod moduli;
pub mod reference;
pub mod scaling;

pub use certify::Route;
pub use moduli::{moduli_for, modulus, symmetric_residue, Garner, MODULI};
pub use reference::{gemm_reference, Emulation};
