//! The accuracy certificate: how many bits each element of C needs so
//! that the emulated product is within the classical product's error
//! bound, and the choice of bits and moduli for a whole product.
//!
//! **The bound.** Row i of A is scaled with exponent E_i, column j of B
//! with F_j (see [`super::scaling`]); each entry is off by at most half a
//! unit, 2^{E_i−b} and 2^{F_j−b}. So the exact integer product, scaled
//! back, differs from (AB)_ij by at most
//!
//! U_ij(b) = 2^{E_i+F_j}·(2^{−b}·(ν^A_i + ν^B_j) + 2^{−2b}·k),
//!
//! with ν the 1-norms in units of 2^E ([`super::scaling::VectorStats::norm`]).
//! The classical product's bound is (k+1)·u·(|A||B|)_ij. A lower bound of
//! (|A||B|)_ij comes from one more INT8 product, of the magnitudes
//! â = ⌊|a|·2^{6−E}⌋ and b̂ (in 0..=127): (|A||B|)_ij ≥ 2^{E_i+F_j−12}·G_ij
//! with G = Â·B̂. An element is certified at b bits when
//!
//! 2^{−b}·(ν^A_i + ν^B_j) + 2^{−2b}·k ≤ τ·2^{−12}·G_ij,  τ = (k+1)·u.
//!
//! The rounding of the exact integer to a float (and of α·x, and to f32)
//! adds at most 3u·|C|; with it the error stays within the verifier's
//! 2·(k+1)·u·(|A||B|)_ij for every k ≥ 1.
//!
//! G may sum only the first part of the depth ([`certificate_depth`]):
//! every term is nonnegative, so a partial sum is still a lower bound.
//!
//! **The choice.** Each element's fewest bits are counted in a histogram;
//! the product takes the fewest bits b that certify all but at most
//! m·n/256 (`EMULATION_FIXUP_FRACTION`) elements, and those few are recomputed
//! natively. Where no b that the moduli allow does that (entries whose
//! magnitudes cancel across rows and columns, NaN or ∞ in many rows), the
//! whole product runs natively. N moduli are then the fewest with
//! M/2 > k·2^{2b}, which bounds every |Σ_p a′_ip·b′_pj|.

use super::moduli::{moduli_for, modulus, MODULI};
use super::scaling::{ldexp, VectorStats, MAGNITUDE_BITS};
use crate::tunables::{EMULATION_CERTIFICATE_SAMPLE, EMULATION_FIXUP_FRACTION};

/// The need of an element that no number of bits certifies (a NaN or ∞ in
/// its row of A or column of B, or a magnitude lower bound of 0).
pub const UNCERTIFIED: u8 = u8::MAX;

/// The most bits a scaled entry may have: |x′| ≤ 2^62 converts to an i64.
pub const MAX_BITS: u32 = 62;

/// A safety factor on the norms, which are sums rounded in f64.
pub const NORM_SLACK: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;

/// τ = (k+1)·u: the classical product's bound per unit of (|A||B|)_ij.
pub fn tau(k: usize, unit_roundoff: f64) -> f64 {
    (k as f64 + 1.0) * unit_roundoff
}

/// The fewest bits b (1 to [`MAX_BITS`]) that certify element (i, j),
/// from its row's and column's statistics and the magnitude product
/// G_ij; 0 where the row or the column is zero (C_ij is then exactly 0);
/// [`UNCERTIFIED`] where none does.
pub fn bits_needed(row: &VectorStats, col: &VectorStats, g: f64, k: usize, tau: f64) -> u8 {
    if !row.finite || !col.finite {
        return UNCERTIFIED;
    }
    if !row.scales() || !col.scales() {
        return 0;
    }
    if g <= 0.0 {
        return UNCERTIFIED;
    }
    let p = (row.norm + col.norm) * NORM_SLACK;
    let allowed = tau * ldexp(g, -2 * (MAGNITUDE_BITS - 1));
    let kf = k as f64;
    let fits = |b: i32| ldexp(p, -b) + ldexp(kf, -2 * b) <= allowed;
    // A first guess from the first term alone, then the exact minimum of
    // the monotone condition (so any guess gives the same answer).
    let guess = (p / allowed).log2().ceil();
    let mut b = if guess.is_finite() {
        guess.clamp(1.0, MAX_BITS as f64) as i32
    } else {
        MAX_BITS as i32
    };
    while b > 1 && fits(b - 1) {
        b -= 1;
    }
    while b <= MAX_BITS as i32 && !fits(b) {
        b += 1;
    }
    if b > MAX_BITS as i32 {
        UNCERTIFIED
    } else {
        b as u8
    }
}

/// The most bits that all the moduli allow at depth k: the largest b
/// with k·2^{2b} < M/2 (M the product of every modulus), at most
/// [`MAX_BITS`]; 0 where none does.
pub fn max_bits(k: usize) -> u32 {
    let half = modulus(MODULI.len()) / 2;
    (1..=MAX_BITS)
        .rev()
        .find(|&b| product_bound(k, b).is_some_and(|bound| bound < half))
        .unwrap_or(0)
}

/// k·2^{2b}, the bound on every |Σ_p a′_ip·b′_pj| at b bits (None past
/// u128).
fn product_bound(k: usize, b: u32) -> Option<u128> {
    let k = k.max(1) as u128;
    if k.leading_zeros() <= 2 * b {
        None
    } else {
        Some(k << (2 * b))
    }
}

/// The moduli of a product of depth k at b bits.
pub fn moduli_for_bits(k: usize, b: u32) -> Option<usize> {
    product_bound(k, b).and_then(|bound| moduli_for(bound).ok())
}

/// The depth of the certificate's first magnitude product: ⌈k/s⌉ rounded
/// up to a multiple of 32 (s = `EMULATION_CERTIFICATE_SAMPLE`) where
/// the log₂ s bits that a partial G costs would typically not cost a
/// modulus, else k.
///
/// Typically: every element needs at least b₀ = ⌈log₂ 1/τ⌉ bits (G·2⁻¹²
/// ≤ 2·min(ν^A_i, ν^B_j) in the bound), and evenly spread magnitudes of
/// mixed signs about two more, so the whole depth is kept where
/// b₀ + 2 + log₂ s bits take more moduli than b₀ + 2.
pub fn certificate_depth(k: usize, unit_roundoff: f64) -> usize {
    let saved = EMULATION_CERTIFICATE_SAMPLE.ilog2();
    let typical = (1.0 / tau(k, unit_roundoff)).log2().ceil().max(0.0) as u32 + 2;
    let pays = match (
        moduli_for_bits(k, typical),
        moduli_for_bits(k, typical + saved),
    ) {
        (Some(full), Some(sampled)) => sampled == full,
        _ => false,
    };
    if !pays {
        return k;
    }
    let depth = k.div_ceil(EMULATION_CERTIFICATE_SAMPLE).div_ceil(32) * 32;
    depth.min(k)
}

/// Whether the certificate should add the rest of the depth to a route
/// found from the first [`certificate_depth`]: where it went native, or
/// where its bits less log₂ s would need fewer moduli.
pub fn wants_full_depth(route: Route, k: usize) -> bool {
    match route {
        Route::Native { .. } => true,
        Route::Emulated { bits, moduli, .. } => {
            let saved = EMULATION_CERTIFICATE_SAMPLE.ilog2();
            bits > saved && moduli_for_bits(k, bits - saved).is_some_and(|fewer| fewer < moduli)
        }
    }
}

/// How a product is computed, decided from the histogram of its
/// elements' needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Emulated with `bits` bits per scaled entry and `moduli` INT8
    /// products; `fixups` elements recomputed natively.
    Emulated {
        /// Bits per scaled entry.
        bits: u32,
        /// Number of moduli (INT8 products).
        moduli: usize,
        /// Elements recomputed natively.
        fixups: u64,
    },
    /// The whole product natively: `uncertified` elements (more than the
    /// allowance) need more bits than the moduli give.
    Native {
        /// Elements that no allowed number of bits certifies.
        uncertified: u64,
    },
}

/// The most elements of an m×n product recomputed natively.
pub fn fixup_allowance(m: usize, n: usize) -> u64 {
    (m as u64 * n as u64) / EMULATION_FIXUP_FRACTION as u64
}

/// The route of an m×k×n product whose elements' needs are counted in
/// `histogram` (index = bits needed, [`UNCERTIFIED`] last).
pub fn route(histogram: &[u64; 256], m: usize, k: usize, n: usize) -> Route {
    let allowance = fixup_allowance(m, n);
    let top = max_bits(k);
    // above[b] = the elements that need more than b bits.
    let mut above = histogram.iter().sum::<u64>();
    for b in 0..=top {
        above -= histogram[b as usize];
        if b >= 1 && above <= allowance {
            if let Some(moduli) = moduli_for_bits(k, b) {
                return Route::Emulated {
                    bits: b,
                    moduli,
                    fixups: above,
                };
            }
        }
    }
    Route::Native { uncertified: above }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(norm: f64) -> VectorStats {
        VectorStats {
            exponent: 0,
            norm,
            finite: true,
        }
    }

    /// The need is the exact minimum of the condition, for any data.
    #[test]
    fn the_need_is_the_fewest_bits_that_satisfy_the_bound() {
        let u = f64::from(f32::EPSILON) / 2.0;
        for k in [1usize, 2, 7, 100, 16384, 1 << 20] {
            for (na, nb, g) in [
                (1.0, 1.0, 4096.0),
                (k as f64, k as f64 / 3.0, 1000.0 * k as f64),
                (1.5, 2.0 * k as f64, 64.0),
            ] {
                let t = tau(k, u);
                let b = bits_needed(&stats(na), &stats(nb), g, k, t);
                assert!(b != UNCERTIFIED && b >= 1);
                let allowed = t * g / 4096.0;
                let lhs = |b: i32| ldexp((na + nb) * NORM_SLACK, -b) + ldexp(k as f64, -2 * b);
                assert!(lhs(b as i32) <= allowed, "k {k}: {b}");
                assert!(b == 1 || lhs(b as i32 - 1) > allowed, "k {k}: {b}");
            }
        }
        let t = tau(10, 1e-16);
        assert_eq!(bits_needed(&stats(0.0), &stats(3.0), 0.0, 10, t), 0);
        assert_eq!(
            bits_needed(&stats(3.0), &stats(3.0), 0.0, 10, t),
            UNCERTIFIED
        );
        let nan = VectorStats {
            exponent: 0,
            norm: 0.0,
            finite: false,
        };
        assert_eq!(bits_needed(&nan, &stats(0.0), 0.0, 10, t), UNCERTIFIED);
        // Too tight for 62 bits.
        assert_eq!(
            bits_needed(&stats(1e30), &stats(1.0), 1.0, 10, t),
            UNCERTIFIED
        );
    }

    #[test]
    fn bits_and_moduli_follow_the_depth() {
        let half = modulus(16) / 2;
        for k in [1usize, 2, 3, 1000, 16384, 65536, 1 << 30] {
            let b = max_bits(k);
            assert!((1..=MAX_BITS).contains(&b));
            assert!((k as u128) << (2 * b) < half);
            assert!(b == MAX_BITS || ((k as u128) << (2 * b + 2)) >= half);
            let n = moduli_for_bits(k, b).unwrap();
            assert!(modulus(n) / 2 > (k as u128) << (2 * b));
        }
        // f32 at k = 16384 with 13 bits: 6 moduli; f64 at 42 bits: 13.
        assert_eq!(moduli_for_bits(16384, 13), Some(6));
        assert_eq!(moduli_for_bits(16384, 42), Some(13));
    }

    #[test]
    fn the_first_certificate_depth_is_a_quarter_in_whole_32s_where_it_pays() {
        let u64_ = f64::EPSILON / 2.0;
        for (k, depth) in [
            (1, 1),
            (31, 31),
            (32, 32),
            (100, 32),
            (129, 64),
            (16384, 4096),
        ] {
            assert_eq!(certificate_depth(k, u64_), depth, "k = {k}");
        }
        // f32 at k = 16384: typically 12 bits (5 moduli); 14 would take 6.
        let u32_ = f64::from(f32::EPSILON) / 2.0;
        assert_eq!(certificate_depth(16384, u32_), 16384);
        assert_eq!(certificate_depth(8192, u32_), 2048);
    }

    #[test]
    fn the_whole_depth_runs_only_where_two_bits_could_save_a_modulus() {
        let k = 16384;
        let native = Route::Native { uncertified: 9 };
        assert!(wants_full_depth(native, k));
        // f64 at n = 16384: 43 bits and 41 bits both take 13 moduli.
        let at = |bits| Route::Emulated {
            bits,
            moduli: moduli_for_bits(k, bits).unwrap(),
            fixups: 0,
        };
        assert_eq!(moduli_for_bits(k, 43), moduli_for_bits(k, 41));
        assert!(!wants_full_depth(at(43), k));
        // f32: 14 bits take 6 moduli, 12 bits 5.
        assert_eq!(moduli_for_bits(k, 14), Some(6));
        assert_eq!(moduli_for_bits(k, 12), Some(5));
        assert!(wants_full_depth(at(14), k));
        assert!(!wants_full_depth(at(2), k));
    }

    #[test]
    fn the_route_takes_the_fewest_bits_within_the_allowance() {
        let mut h = [0u64; 256];
        // 64×64 = 4096 elements: at most 16 fix-ups.
        h[10] = 4000;
        h[20] = 80;
        h[30] = 10;
        h[UNCERTIFIED as usize] = 6;
        match route(&h, 64, 100, 64) {
            Route::Emulated {
                bits,
                moduli,
                fixups,
            } => {
                assert_eq!((bits, fixups), (20, 16));
                assert_eq!(Some(moduli), moduli_for_bits(100, 20));
            }
            r => panic!("{r:?}"),
        }
        h[UNCERTIFIED as usize] = 17;
        assert_eq!(route(&h, 64, 100, 64), Route::Native { uncertified: 17 });
        // All zeros: one bit, nothing fixed up.
        let mut z = [0u64; 256];
        z[0] = 9;
        assert!(matches!(
            route(&z, 3, 5, 3),
            Route::Emulated {
                bits: 1,
                fixups: 0,
                ..
            }
        ));
    }
}
