//! Floating-point products from exact integer ones: Ozaki scheme II
//! (Ozaki, Uchino and Imamura; Uchino, Ozaki and Imamura, SC'25), the
//! arithmetic of the `emulated` algorithm on INT8 matrix engines, here as
//! plain Rust: the reference twin and test oracle of the GPU kernels.
//!
//! 1. **Scaling** (`scaling.rs`): row i of A by 2^{b−1−E_i} and column j of
//!    B by 2^{b−1−F_j}, rounded to integers of at most b bits.
//! 2. **Certificate** (`certify.rs`): the fewest bits b for which the
//!    truncation error of every element, bounded from the rows' and
//!    columns' norms, stays within the classical product's bound
//!    (k+1)·u·(|A||B|)_ij, with (|A||B|)_ij bounded from below by one
//!    INT8 product of 7-bit magnitudes. Elements no b certifies (NaN, ∞,
//!    magnitudes that cancel) are recomputed natively, or the whole
//!    product is, past an allowance.
//! 3. **Residues** (`moduli.rs`): the scaled integers modulo N pairwise
//!    coprime moduli m_l ≤ 256, in the symmetric range of an i8; one INT8
//!    product with INT32 sums per modulus (exact while k·128² < 2³¹,
//!    longer depths in chunks).
//! 4. **Reconstruction**: Garner's mixed radix with balanced digits gives
//!    the exact integer Σ_p a′_ip·b′_pj (|·| < M/2 with M = Π m_l), which
//!    is rounded once and scaled back by 2^{E_i+F_j+2−2b}.
//!
//! Integers (i32, i64) need no scaling or certificate: their wrapping
//! products are exact sums of INT8 products of their bytes (`bytes.rs`).

use serde::Serialize;

pub(crate) mod bytes;
pub(crate) mod certify;
pub(crate) mod complex;
pub(crate) mod moduli;
pub(crate) mod reference;
pub(crate) mod scaling;

pub(crate) use certify::{EmulationRoute, Goal};
pub(crate) use reference::gemm_reference;

/// Ozaki scheme II takes f32 and f64; the `emulated` algorithm gives
/// integers to the byte planes (`bytes.rs`).
///
/// # Errors
/// [`crate::Error::Unsupported`] for integer types.
pub fn check_float<T: crate::element::Element>() -> Result<(), crate::error::Error> {
    if T::DTYPE.is_integer() {
        return Err(crate::error::Error::Unsupported {
            algorithm: "emulated (Ozaki scheme II)",
            what: format!("{} (integers take the byte planes)", T::DTYPE),
        });
    }
    Ok(())
}

/// Whether `auto` on a GPU takes the emulated product for this type,
/// accuracy level and shape: floats whose every dimension reaches the
/// measured crossover of the level (`EMULATION_AUTO_MIN_DIM_*`: the
/// `native` level takes more moduli, so its crossovers lie further out),
/// integers whose m and n reach theirs and whose k reaches
/// `EMULATION_AUTO_MIN_K_INT`. Floats' accuracy is certified per product
/// and integers are exact, so the rule only has to be about speed.
pub fn auto_emulates(
    dtype: crate::element::DType,
    accuracy: crate::options::Accuracy,
    (m, k, n): (usize, usize, usize),
) -> bool {
    use crate::element::DType;
    use crate::options::Accuracy;
    use crate::tunables::{
        EMULATION_AUTO_MIN_DIM_F32, EMULATION_AUTO_MIN_DIM_F64, EMULATION_AUTO_MIN_DIM_I32,
        EMULATION_AUTO_MIN_DIM_I64, EMULATION_AUTO_MIN_K_INT, EMULATION_NATIVE_AUTO_MIN_DIM_F32,
        EMULATION_NATIVE_AUTO_MIN_DIM_F64,
    };
    let native = accuracy == Accuracy::Native;
    match dtype {
        DType::F32 if native => m.min(k).min(n) >= EMULATION_NATIVE_AUTO_MIN_DIM_F32,
        DType::F64 if native => m.min(k).min(n) >= EMULATION_NATIVE_AUTO_MIN_DIM_F64,
        DType::F32 => m.min(k).min(n) >= EMULATION_AUTO_MIN_DIM_F32,
        DType::F64 => m.min(k).min(n) >= EMULATION_AUTO_MIN_DIM_F64,
        DType::I32 => m.min(n) >= EMULATION_AUTO_MIN_DIM_I32 && k >= EMULATION_AUTO_MIN_K_INT,
        DType::I64 => m.min(n) >= EMULATION_AUTO_MIN_DIM_I64 && k >= EMULATION_AUTO_MIN_K_INT,
    }
}

/// Whether `auto` on a GPU takes the emulated product for a strided batch
/// of `count` products of one shape (run as one launch per step over the
/// batch, whose fixed costs the products share): where a single product
/// would ([`auto_emulates`]), and for f32 at the `native` level past the
/// batches' own measured crossovers (`EMULATION_NATIVE_AUTO_BATCH_*`).
pub fn auto_emulates_batch(
    dtype: crate::element::DType,
    accuracy: crate::options::Accuracy,
    (m, k, n): (usize, usize, usize),
    count: usize,
) -> bool {
    use crate::tunables::{
        EMULATION_NATIVE_AUTO_BATCH_MIN_COUNT_F32, EMULATION_NATIVE_AUTO_BATCH_MIN_DIM_F32,
        EMULATION_NATIVE_AUTO_BATCH_SMALL_DIM_F32,
    };
    if auto_emulates(dtype, accuracy, (m, k, n)) {
        return true;
    }
    let side = m.min(k).min(n);
    dtype == crate::element::DType::F32
        && accuracy == crate::options::Accuracy::Native
        && count >= 2
        && (side >= EMULATION_NATIVE_AUTO_BATCH_MIN_DIM_F32
            || (side >= EMULATION_NATIVE_AUTO_BATCH_SMALL_DIM_F32
                && count >= EMULATION_NATIVE_AUTO_BATCH_MIN_COUNT_F32))
}

/// What the emulated products of one call did, summed over its pieces
/// (out-of-core tiles, a fast algorithm's leaves): the route of each, so
/// that a front end reports where accuracy forced more moduli, native
/// elements or the native product.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Pieces emulated.
    pub emulated: u32,
    /// Pieces that ran natively: their accuracy not certifiable, or
    /// (counted again in `slower`) emulation priced above the native
    /// product.
    pub native: u32,
    /// Of the native pieces, those that emulation would have certified
    /// but at the device's prices would have been slower.
    pub slower: u32,
    /// The most moduli (INT8 products) an emulated piece used.
    pub moduli: usize,
    /// The most bits per scaled entry an emulated piece used.
    pub bits: u32,
    /// Elements recomputed natively inside emulated pieces.
    pub fixups: u64,
    /// GPU time of the emulated pieces' steps, in microseconds, summed
    /// over them: [`Phase::ALL`] order (all zero on the CPU, which does
    /// not time them).
    pub phase_us: [u64; Phase::COUNT],
}

/// A step of an emulated product whose GPU time is reported. The first
/// five are the decision (the sample, the statistics and the
/// certificate); a host wait counts in the step it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The sample's certificate of a central block, before anything
    /// reads the operands whole.
    Sample,
    /// Each row's and column's exponent and norm, and the largest norms'
    /// read-back.
    Statistics,
    /// The magnitude planes.
    Magnitudes,
    /// The magnitudes' INT8 product.
    MagnitudeProduct,
    /// Each element's need and the histogram's read-back.
    Needs,
    /// Scaling and splitting into residue planes.
    Split,
    /// The INT8 products of the residues.
    Products,
    /// CRT accumulation, scaling back and the native fix-ups.
    Accumulate,
}

impl Phase {
    /// How many phases there are.
    pub const COUNT: usize = 8;
    /// Every phase, in the order of [`Tally::phase_us`].
    pub const ALL: [Phase; Phase::COUNT] = [
        Phase::Sample,
        Phase::Statistics,
        Phase::Magnitudes,
        Phase::MagnitudeProduct,
        Phase::Needs,
        Phase::Split,
        Phase::Products,
        Phase::Accumulate,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Sample => "sample",
            Phase::Statistics => "statistics",
            Phase::Magnitudes => "magnitudes",
            Phase::MagnitudeProduct => "magnitude product",
            Phase::Needs => "needs",
            Phase::Split => "split",
            Phase::Products => "INT8 products",
            Phase::Accumulate => "CRT",
        }
    }
}

impl Tally {
    /// Counts one piece's route.
    pub fn add(&mut self, route: EmulationRoute, phase_us: [u64; Phase::COUNT]) {
        for (sum, t) in self.phase_us.iter_mut().zip(phase_us) {
            *sum += t;
        }
        match route {
            EmulationRoute::Emulated {
                bits,
                moduli,
                fixups,
            } => {
                self.emulated += 1;
                self.moduli = self.moduli.max(moduli);
                self.bits = self.bits.max(bits);
                self.fixups += fixups;
            }
            EmulationRoute::Native { .. } => self.native += 1,
            EmulationRoute::Slower { .. } => {
                self.native += 1;
                self.slower += 1;
            }
        }
    }

    /// Two calls' tallies together (None where neither emulated).
    pub fn merged(a: Option<Tally>, b: Option<Tally>) -> Option<Tally> {
        match (a, b) {
            (Some(x), Some(y)) => Some(Tally {
                emulated: x.emulated + y.emulated,
                native: x.native + y.native,
                slower: x.slower + y.slower,
                moduli: x.moduli.max(y.moduli),
                bits: x.bits.max(y.bits),
                fixups: x.fixups + y.fixups,
                phase_us: std::array::from_fn(|i| x.phase_us[i] + y.phase_us[i]),
            }),
            (x, y) => x.or(y),
        }
    }

    /// One line for a report: "13 moduli, 42 bits", with the native
    /// elements or pieces where there were any.
    pub fn label(&self) -> String {
        let pieces = self.emulated + self.native;
        if self.emulated == 0 {
            return if pieces == 0 {
                "nothing to emulate".into()
            } else if self.slower == self.native {
                "native: emulation certified but slower here".into()
            } else {
                "native: accuracy not certifiable by emulation".into()
            };
        }
        let mut s = format!("{} moduli, {} bits", self.moduli, self.bits);
        if self.fixups > 0 {
            s += &format!(", {} elements native", self.fixups);
        }
        if self.native > 0 {
            s += &format!(", {} of {pieces} pieces native", self.native);
        }
        let total: u64 = self.phase_us.iter().sum();
        if total > 0 {
            let shares: Vec<String> = Phase::ALL
                .iter()
                .zip(self.phase_us)
                .filter(|&(_, t)| t > 0)
                .map(|(p, t)| format!("{} {:.0}%", p.name(), 100.0 * t as f64 / total as f64))
                .collect();
            s += &format!(" ({})", shares.join(", "));
        }
        s
    }
}

#[cfg(test)]
mod tally_tests {
    use super::{EmulationRoute, Phase, Tally};

    /// The label names the steps that took time, in the phases' order,
    /// each with its share; a step of no time is left out.
    #[test]
    fn the_label_gives_each_timed_step_its_share() {
        let mut tally = Tally::default();
        let mut us = [0u64; Phase::COUNT];
        for (phase, t) in [
            (Phase::Statistics, 10),
            (Phase::MagnitudeProduct, 30),
            (Phase::Products, 50),
            (Phase::Accumulate, 10),
        ] {
            us[Phase::ALL.iter().position(|&p| p == phase).unwrap()] = t;
        }
        let route = EmulationRoute::Emulated {
            bits: 48,
            moduli: 14,
            fixups: 0,
        };
        tally.add(route, us);
        assert_eq!(
            tally.label(),
            "14 moduli, 48 bits (statistics 10%, magnitude product 30%, INT8 products 50%, CRT 10%)"
        );
    }
}

#[cfg(test)]
mod auto_tests {
    use crate::element::DType;
    use crate::options::Accuracy;

    fn auto_emulates(dtype: DType, shape: (usize, usize, usize)) -> bool {
        super::auto_emulates(dtype, Accuracy::Bound, shape)
    }

    #[test]
    fn auto_emulates_past_the_measured_crossovers_only() {
        assert!(auto_emulates(DType::F32, (8192, 8192, 8192)));
        assert!(!auto_emulates(DType::F32, (8192, 1024, 8192)));
        assert!(!auto_emulates(DType::F64, (8192, 8192, 8192)));
        assert!(auto_emulates(DType::F64, (16384, 16384, 20000)));
        // Integers: i32 from 1024 (1.35× cuda-fast on an H200), i64 from
        // m, n ≥ 2048 (0.99× at 1024³, 2.38× at 8192×1024×8192).
        assert!(auto_emulates(DType::I32, (1024, 1024, 1024)));
        assert!(!auto_emulates(DType::I32, (1023, 4096, 4096)));
        assert!(!auto_emulates(DType::I32, (4096, 512, 4096)));
        assert!(auto_emulates(DType::I64, (8192, 1024, 8192)));
        assert!(!auto_emulates(DType::I64, (1024, 1024, 1024)));
        assert!(auto_emulates(DType::I64, (16384, 16384, 16384)));
    }

    #[test]
    fn strided_f32_batches_emulate_past_their_own_crossovers() {
        use super::auto_emulates_batch as batch;
        let native = Accuracy::Native;
        let cube = |n| (n, n, n);
        // One product follows the single products' rule, 4096 at native.
        assert!(!batch(DType::F32, native, cube(3072), 1));
        assert!(batch(DType::F32, native, cube(4096), 1));
        // From 3072 any batch; from 2048 sixteen products or more.
        assert!(batch(DType::F32, native, cube(3072), 2));
        assert!(!batch(DType::F32, native, (3072, 3071, 3072), 2));
        assert!(!batch(DType::F32, native, cube(2048), 15));
        assert!(batch(DType::F32, native, cube(2048), 16));
        assert!(batch(DType::F32, native, (2048, 8192, 2048), 64));
        assert!(!batch(DType::F32, native, (2047, 2048, 2048), 64));
        assert!(!batch(DType::F32, native, cube(1536), 256));
        // No batch rule for f64 (15 moduli) or the other levels.
        assert!(!batch(DType::F64, native, cube(8192), 64));
        assert!(!batch(DType::F32, Accuracy::Tf32, cube(4096), 64));
        assert!(!batch(DType::F32, Accuracy::Bound, cube(4096), 64));
    }
}
