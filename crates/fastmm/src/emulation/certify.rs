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
//! whole product runs natively. N moduli are then the fewest with M/2
//! above a bound of every |Σ_p a′_ip·b′_pj| ([`Sums`]): k·2^{2b}, or from
//! the largest 1-norms, about half that on evenly spread magnitudes.
//!
//! **The price.** A certified route can still be slower than the native
//! product: each native fix-up costs hundreds of times an element's share
//! of the native product, and wide ranges take more moduli. Where a
//! device has measured its [`Prices`], [`priced`] turns such a route into
//! [`EmulationRoute::Slower`]: the native product runs instead, as
//! accurate, and no slower.

use super::moduli::{moduli_for, modulus, MODULI};
use super::scaling::{ldexp, VectorStats, MAGNITUDE_BITS};
use crate::element::DType;
use crate::options::Accuracy;
use crate::tunables::{
    EMULATION_CERTIFICATE_SAMPLE, EMULATION_FIXUP_FRACTION, EMULATION_NATIVE_TAU,
    EMULATION_NORMS_MIN_DEPTH, NATIVE_ERROR_PACKED,
};

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

/// The relative Frobenius error of a device's native classical product
/// on uniform data of depth k, in units of u: λ(k) = max(`flat`,
/// `per_root_k`·√k), or `flat` alone for outputs of fewer than
/// `small_outputs` elements. Measured (docs/results.md, the accuracy
/// table): the CPU's `packed` sums each row's products in short FMA
/// chains, and its error hardly grows with k; cuBLAS's grows as √k on
/// large outputs, and splits k (summing less deep) on small ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NativeError {
    /// The error at small depths, or of small outputs, in units of u.
    pub flat: f64,
    /// Its growth with √k, in units of u.
    pub per_root_k: f64,
    /// Outputs (m·n) below this take `flat` at every depth.
    pub small_outputs: usize,
}

impl NativeError {
    /// λ(k) of an m×k×n product.
    pub fn lambda(self, (m, k, n): (usize, usize, usize)) -> f64 {
        if m.saturating_mul(n) < self.small_outputs {
            return self.flat;
        }
        self.flat.max(self.per_root_k * (k.max(1) as f64).sqrt())
    }

    /// The CPU's `packed`, f32 or f64.
    pub fn packed() -> NativeError {
        NativeError {
            flat: NATIVE_ERROR_PACKED,
            per_root_k: 0.0,
            small_outputs: 0,
        }
    }

    /// cuBLAS sgemm (f32) or dgemm (f64).
    #[cfg(any(feature = "cuda", test))]
    pub fn cublas(dtype: DType) -> NativeError {
        use crate::tunables::{
            NATIVE_ERROR_CUBLAS_SMALL_OUTPUTS, NATIVE_ERROR_DGEMM, NATIVE_ERROR_SGEMM,
        };
        let (flat, per_root_k) = match dtype {
            DType::F64 => NATIVE_ERROR_DGEMM,
            _ => NATIVE_ERROR_SGEMM,
        };
        NativeError {
            flat,
            per_root_k,
            small_outputs: NATIVE_ERROR_CUBLAS_SMALL_OUTPUTS,
        }
    }
}

/// What an emulated product is asked to meet: an accuracy level, and the
/// native product of the device it stands beside (for `native`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    /// The level.
    pub accuracy: Accuracy,
    /// The device's native product.
    pub native: NativeError,
}

impl Goal {
    /// `accuracy` beside the CPU's `packed`.
    pub fn on_cpu(accuracy: Accuracy) -> Goal {
        Goal {
            accuracy,
            native: NativeError::packed(),
        }
    }

    /// `accuracy` beside cuBLAS.
    #[cfg(any(feature = "cuda", test))]
    pub fn on_cublas(accuracy: Accuracy, dtype: DType) -> Goal {
        Goal {
            accuracy,
            native: NativeError::cublas(dtype),
        }
    }
}

/// What the certificate makes every element meet: an error of at most
/// τ·(|A||B|)_ij, or a fixed number of bits per scaled entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// Each element within τ·(|A||B|)_ij, from the fewest moduli that
    /// certify it (then the most bits those moduli hold).
    Tau(f64),
    /// This many bits (at most what the moduli hold at the depth);
    /// elements of non-finite rows or columns, and those whose magnitude
    /// product vanishes, still go native.
    Bits(u32),
}

impl Target {
    /// The target of `goal` for an m×k×n product of `dtype`.
    ///
    /// * `native`: τ = c·λ(k)·u with c = `EMULATION_NATIVE_TAU` and λ(k)
    ///   the native product's measured error ([`NativeError`]). The
    ///   certificate bounds the worst case, every rounding error of the
    ///   scaled entries of one sign; on data of mixed signs they cancel
    ///   like a random walk, and the error met is about a tenth of τ (the
    ///   accuracy tests measure it on every input class), so c leaves the
    ///   emulated error near the native product's. At small depths the
    ///   classical bound is the tighter, and is taken.
    /// * `bound`, `tf32`, `bf16`: the classical bound (k+1)·u at the
    ///   level's unit roundoff.
    pub fn of(goal: Goal, (m, k, n): (usize, usize, usize), dtype: DType) -> Target {
        match goal.accuracy {
            Accuracy::Bits(bits) => Target::Bits(bits.clamp(1, MAX_BITS)),
            // Never looser than the classical bound, which at small
            // depths is the tighter of the two.
            Accuracy::Native => Target::Tau(
                (EMULATION_NATIVE_TAU * goal.native.lambda((m, k, n)) * dtype.unit_roundoff())
                    .min(tau(k, dtype.unit_roundoff())),
            ),
            level => Target::Tau(tau(k, level.unit_roundoff(dtype))),
        }
    }

    /// The τ an element's need is computed for (∞ for a fixed number of
    /// bits: every finite element with a nonzero magnitude product then
    /// needs one bit).
    pub fn tau(self) -> f64 {
        match self {
            Target::Tau(t) => t,
            Target::Bits(_) => f64::INFINITY,
        }
    }

    /// The bits a typical element needs, or the fixed bits. With evenly
    /// spread magnitudes ν^A_i + ν^B_j ≈ 2k and 2⁻¹²·G_ij ≈ k in the
    /// bound's units, so b ≈ log₂ 2/τ; the 7-bit magnitudes' floors and the
    /// widest elements add a little: ⌈log₂ 2.5/τ⌉ (the twin's histograms
    /// at k = 16384, the native level beside cuBLAS: every uniform or
    /// cancelling element needed exactly that, f32 and f64).
    pub fn typical_bits(self) -> u32 {
        self.typical_need().ceil().max(0.0) as u32
    }

    /// [`Target::typical_bits`] before it is rounded up: log₂ 2.5/τ.
    pub fn typical_need(self) -> f64 {
        match self {
            Target::Tau(t) => (2.5 / t).log2(),
            Target::Bits(bits) => f64::from(bits),
        }
    }
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
    // the monotone condition (so any guess gives the same answer); an
    // unbounded allowance (a fixed number of bits) guesses one bit.
    let guess = (p / allowed).log2().ceil();
    let mut b = if guess.is_finite() {
        guess.clamp(1.0, MAX_BITS as f64) as i32
    } else if guess < 0.0 {
        1
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

/// A safety factor on the largest norms in the moduli's bound: the norms
/// are sums of up to [`crate::tunables::EMULATION_K_CHUNK`] terms rounded
/// in f64 (relative error below 2^17·2^−53), and the bound's own f64
/// arithmetic adds a few roundings more.
const SUMS_SLACK: f64 = 1.0 + 1.0 / (1u64 << 20) as f64;

/// What bounds every exact integer sum |Σ_p a′_ip·b′_pj| of a product at
/// b bits, and so sets its moduli: its depth k and, where known, the
/// largest 1-norm ν (in units of 2^E, [`VectorStats::norm`]) of A's rows
/// and of B's columns.
///
/// Every scaled entry has |x′| ≤ 2^b, so k·2^{2b} bounds each sum. A
/// row's entries are |a′_ip| ≤ |a_ip|·2^{b−1−E_i} + ½, so
/// Σ_p |a′_ip| ≤ 2^{b−1}·ν^A_i + k/2 and, with |b′_pj| ≤ 2^b,
///
/// |Σ_p a′_ip·b′_pj| ≤ 2^{2b−1}·ν^A_i + 2^{b−1}·k,
///
/// and the same with B's column norm. The largest sum over (i, j) is
/// then at most the smaller of the two bounds at the largest ν^A and the
/// largest ν^B. Uniform data in [−1, 1) has ν ≈ k, a bound of about
/// k·2^{2b−1}: a bit of the product, which is often a modulus.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sums {
    /// The depth k.
    pub k: usize,
    /// min(max_i ν^A_i, max_j ν^B_j), or ∞ where not known.
    norm: f64,
}

impl Sums {
    /// The bound from the depth alone.
    pub fn depth(k: usize) -> Sums {
        Sums {
            k,
            norm: f64::INFINITY,
        }
    }

    /// The bound from the depth and the largest norms of A's rows and
    /// B's columns (a NaN counts as unknown), from a depth of
    /// [`EMULATION_NORMS_MIN_DEPTH`] on; shallower products take the
    /// depth's bound alone, whose spare bits keep them near exact-rounded
    /// (a native product of few terms is, and the `native` level is
    /// measured against it).
    pub fn with_norms(k: usize, rows: f64, cols: f64) -> Sums {
        let norm = rows.min(cols);
        Sums {
            k,
            norm: if norm >= 0.0 && k >= EMULATION_NORMS_MIN_DEPTH {
                norm
            } else {
                f64::INFINITY
            },
        }
    }

    /// The bound from the norms at any depth (the tests' own).
    #[cfg(test)]
    fn with_norms_at_any_depth(k: usize, rows: f64, cols: f64) -> Sums {
        Sums {
            k,
            norm: rows.min(cols),
        }
    }

    /// The bound at b bits (None past u128).
    fn at(self, b: u32) -> Option<u128> {
        let depth = product_bound(self.k, b);
        let by_norm = if self.norm.is_finite() {
            let kf = self.k.max(1) as f64;
            let b = b as i32;
            let x = (ldexp(self.norm, 2 * b - 1) + ldexp(kf, b - 1)) * SUMS_SLACK;
            (x < ldexp(1.0, 127)).then(|| x.ceil() as u128)
        } else {
            None
        };
        match (depth, by_norm) {
            (Some(d), Some(v)) => Some(d.min(v)),
            (d, v) => d.or(v),
        }
    }
}

impl From<usize> for Sums {
    fn from(k: usize) -> Sums {
        Sums::depth(k)
    }
}

/// The most bits that all the moduli allow: the largest b whose bound
/// ([`Sums`]; a depth alone is k·2^{2b}) is below M/2 (M the product of
/// every modulus), at most [`MAX_BITS`]; 0 where none does.
pub fn max_bits(sums: impl Into<Sums>) -> u32 {
    let sums = sums.into();
    let half = modulus(MODULI.len()) / 2;
    (1..=MAX_BITS)
        .rev()
        .find(|&b| sums.at(b).is_some_and(|bound| bound < half))
        .unwrap_or(0)
}

/// k·2^{2b}, the bound on every |Σ_p a′_ip·b′_pj| at b bits from the
/// depth alone (None past u128).
fn product_bound(k: usize, b: u32) -> Option<u128> {
    let k = k.max(1) as u128;
    if k.leading_zeros() <= 2 * b {
        None
    } else {
        Some(k << (2 * b))
    }
}

/// The moduli of a product at b bits, its sums bounded by `sums` (a
/// depth, or [`Sums`]).
pub fn moduli_for_bits(sums: impl Into<Sums>, b: u32) -> Option<usize> {
    sums.into().at(b).and_then(|bound| moduli_for(bound).ok())
}

/// The share of the depth that the certificate's first magnitude product
/// sums, in parts of s = `EMULATION_CERTIFICATE_SAMPLE` (s: the whole
/// depth): the fewest parts q < s whose bits would typically not cost a
/// modulus. A sum of nonnegative terms over q/s of the depth is about
/// G·q/s, so a typical element needs log₂(s/q) bits more than
/// [`Target::typical_need`] from it; f64 at the native level beside
/// cuBLAS on uniform data at k = 16384 needs 47.5 bits of the 48 that 14
/// moduli hold: three quarters of the depth cost 0.4 of a bit, a half a
/// whole one.
pub fn certificate_share(sums: impl Into<Sums>, target: Target) -> usize {
    let sums = sums.into();
    let parts = EMULATION_CERTIFICATE_SAMPLE;
    let Some(full) = moduli_for_bits(sums, target.typical_bits()) else {
        return parts;
    };
    let need = target.typical_need();
    (1..parts)
        .find(|&q| {
            let bits = (need + (parts as f64 / q as f64).log2()).ceil();
            bits >= 0.0
                && bits <= MAX_BITS as f64
                && moduli_for_bits(sums, bits as u32) == Some(full)
        })
        .unwrap_or(parts)
}

/// The depth of the certificate's first magnitude product: k·q/s for the
/// [`certificate_share`] q/s, rounded up to a multiple of 32, at most k.
pub fn certificate_depth(sums: impl Into<Sums>, target: Target) -> usize {
    let sums = sums.into();
    let (k, parts) = (sums.k, EMULATION_CERTIFICATE_SAMPLE);
    match certificate_share(sums, target) {
        q if q >= parts => k,
        q => ((k * q).div_ceil(parts).div_ceil(32) * 32).min(k),
    }
}

/// Whether the certificate should add the rest of the depth to a route
/// found from the first [`certificate_depth`]: where it went native, or
/// where its bits less the sample's (⌈log₂ s/q⌉, the most a whole depth
/// typically saves) would need fewer moduli.
pub fn wants_full_depth(route: EmulationRoute, sums: impl Into<Sums>, target: Target) -> bool {
    let sums = sums.into();
    let parts = EMULATION_CERTIFICATE_SAMPLE;
    match route {
        EmulationRoute::Native { .. } | EmulationRoute::Slower { .. } => true,
        EmulationRoute::Emulated { bits, moduli, .. } => {
            let q = certificate_share(sums, target);
            let saved = (parts as f64 / q as f64).log2().ceil() as u32;
            saved > 0
                && bits > saved
                && moduli_for_bits(sums, bits - saved).is_some_and(|fewer| fewer < moduli)
        }
    }
}

/// How a product is computed, decided from the histogram of its
/// elements' needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmulationRoute {
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
    /// The whole product natively: emulation would certify it with
    /// `moduli` INT8 products and `fixups` native elements, but at the
    /// device's [`Prices`] that takes longer than the native product.
    Slower {
        /// The INT8 products the certified route would take.
        moduli: usize,
        /// The elements it would recompute natively.
        fixups: u64,
    },
}

/// A device's measured cost of an emulated product's parts, each in units
/// of the native product of the same shape and type (its whole time, or
/// for a fix-up its time per element of C).
// Only the GPU prices its routes: the CPU twin has no measured prices.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// The certificate: statistics, magnitudes, their INT8 product and
    /// the needs.
    pub certificate: f64,
    /// The split and the CRT's fixed part, whatever the moduli.
    pub fixed: f64,
    /// One modulus: its INT8 product and its share of the split and CRT.
    pub modulus: f64,
    /// One native fix-up, against one element's share of the native
    /// product.
    pub fixup: f64,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl Prices {
    /// The time of `moduli` INT8 products and `fixups` fix-ups among
    /// `elements` elements of C after the certificate, in native
    /// products.
    pub fn after_certificate(&self, moduli: usize, fixups: u64, elements: u64) -> f64 {
        let share = fixups as f64 / elements.max(1) as f64;
        self.fixed + moduli as f64 * self.modulus + share * self.fixup
    }
}

/// `route` as priced: a certified route whose remaining work (with the
/// certificate, where `with_certificate`, as before it has run) costs at
/// least the native product on `elements` elements of C becomes
/// [`EmulationRoute::Slower`]; any other route stays.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn priced(
    route: EmulationRoute,
    elements: u64,
    prices: &Prices,
    with_certificate: bool,
) -> EmulationRoute {
    let EmulationRoute::Emulated { moduli, fixups, .. } = route else {
        return route;
    };
    let certificate = if with_certificate {
        prices.certificate
    } else {
        0.0
    };
    match certificate + prices.after_certificate(moduli, fixups, elements) {
        cost if cost >= 1.0 => EmulationRoute::Slower { moduli, fixups },
        _ => route,
    }
}

/// The cheapest emulated route that the needs counted in `histogram`
/// allow for `target` (any number of bits, each taking the fewest moduli
/// that hold it and fixing up every element that needs more), with its
/// cost at `prices` in native products (the certificate counted where
/// `with_certificate`), or None where no number of bits has moduli.
/// Unlike [`route`] it knows no fix-up allowance: it answers whether
/// emulation of any kind can beat the native product, which a route
/// over the allowance may still do and one under it may not.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn cheapest(
    histogram: &[u64; 256],
    sums: impl Into<Sums>,
    target: Target,
    prices: &Prices,
    with_certificate: bool,
) -> Option<(EmulationRoute, f64)> {
    let sums = sums.into();
    let elements = histogram.iter().sum::<u64>();
    let certificate = if with_certificate {
        prices.certificate
    } else {
        0.0
    };
    let top = max_bits(sums);
    let bits = match target {
        Target::Bits(bits) => {
            let bits = bits.min(top).max(1);
            bits..=bits
        }
        Target::Tau(_) => 1..=top,
    };
    bits.filter_map(|b| {
        let moduli = moduli_for_bits(sums, b)?;
        let fixups = histogram[b as usize + 1..].iter().sum::<u64>();
        let cost = certificate + prices.after_certificate(moduli, fixups, elements);
        let route = EmulationRoute::Emulated {
            bits: b,
            moduli,
            fixups,
        };
        Some((route, cost))
    })
    .min_by(|x, y| x.1.total_cmp(&y.1))
}

/// What the certificate of a central sample block says before the rest
/// of the certificate runs (`histogram`: the sample's needs over the whole
/// depth, `sample` its rows and columns, `sums` the whole product's, each
/// of its fix-ups standing for `scale` of the whole's): the native route
/// where more than `native_share` times the sample's fix-up allowance is
/// uncertified (wide exponent ranges, NaN or ∞ in many rows);
/// [`EmulationRoute::Slower`] where emulation cannot beat the native
/// product once the certificate is paid — no route of any bits does
/// ([`cheapest`]), or the route the whole certificate would settle on,
/// priced as [`priced`] prices it there, with the certificate still to
/// pay. None where the whole certificate should decide.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn sample_verdict(
    histogram: &[u64; 256],
    (rows, cols): (usize, usize),
    sums: impl Into<Sums>,
    target: Target,
    prices: &Prices,
    (native_share, scale): (u64, u64),
) -> Option<EmulationRoute> {
    let sums = sums.into();
    let found = settle(
        route(histogram, rows, sums, cols, target),
        histogram,
        sums,
        target,
    );
    if let EmulationRoute::Native { uncertified } = found {
        if uncertified > native_share * fixup_allowance(rows, cols) {
            return Some(found);
        }
    }
    let slower = |moduli, fixups: u64| EmulationRoute::Slower {
        moduli,
        fixups: fixups.saturating_mul(scale),
    };
    // Emulation of any kind (past the fix-up allowance too) dearer than
    // native on the sample: at a share of fix-ups that the whole product
    // would show as well, the whole certificate would only find a route
    // that loses.
    if let Some((EmulationRoute::Emulated { moduli, fixups, .. }, cost)) =
        cheapest(histogram, sums, target, prices, true)
    {
        if cost >= 1.0 {
            return Some(slower(moduli, fixups));
        }
    }
    // The route the whole certificate would take from the same needs,
    // dearer than native with the certificate still to run: the whole
    // would find it too, after paying for it.
    let elements = rows as u64 * cols as u64;
    match priced(found, elements, prices, true) {
        EmulationRoute::Slower { moduli, fixups } => Some(slower(moduli, fixups)),
        _ => None,
    }
}

impl EmulationRoute {
    /// An emulated route's bits, moduli and native fix-ups (None for the
    /// native route).
    pub fn emulated(self) -> Option<(u32, usize, u64)> {
        match self {
            EmulationRoute::Emulated {
                bits,
                moduli,
                fixups,
            } => Some((bits, moduli, fixups)),
            EmulationRoute::Native { .. } | EmulationRoute::Slower { .. } => None,
        }
    }
}

/// The most elements of an m×n product recomputed natively.
pub fn fixup_allowance(m: usize, n: usize) -> u64 {
    (m as u64 * n as u64) / EMULATION_FIXUP_FRACTION as u64
}

/// The route of an m×k×n product whose elements' needs are counted in
/// `histogram` (index = bits needed, [`UNCERTIFIED`] last), for
/// `target`, its sums bounded by `sums` (its depth k, or [`Sums`]): the
/// fewest bits that certify all but the allowance (for
/// [`wants_full_depth`]); [`settle`] then widens it.
pub fn route(
    histogram: &[u64; 256],
    m: usize,
    sums: impl Into<Sums>,
    n: usize,
    target: Target,
) -> EmulationRoute {
    let sums = sums.into();
    let allowance = fixup_allowance(m, n);
    if let Target::Bits(bits) = target {
        let bits = bits.min(max_bits(sums)).max(1);
        let above = histogram[bits as usize + 1..].iter().sum::<u64>();
        return match moduli_for_bits(sums, bits) {
            Some(moduli) if above <= allowance => EmulationRoute::Emulated {
                bits,
                moduli,
                fixups: above,
            },
            _ => EmulationRoute::Native { uncertified: above },
        };
    }
    let top = max_bits(sums);
    // above[b] = the elements that need more than b bits.
    let mut above = histogram.iter().sum::<u64>();
    for b in 0..=top {
        above -= histogram[b as usize];
        if b >= 1 && above <= allowance {
            if let Some(moduli) = moduli_for_bits(sums, b) {
                return EmulationRoute::Emulated {
                    bits: b,
                    moduli,
                    fixups: above,
                };
            }
        }
    }
    EmulationRoute::Native { uncertified: above }
}

/// The route as it runs: an emulated route certified at b bits takes the
/// most bits its moduli hold under `sums` (the same INT8 products, so
/// more accuracy at no cost), and fixes up only the elements that need
/// more than those. A fixed number of bits stays as asked.
pub fn settle(
    found: EmulationRoute,
    histogram: &[u64; 256],
    sums: impl Into<Sums>,
    target: Target,
) -> EmulationRoute {
    let sums = sums.into();
    match (found, target) {
        (
            EmulationRoute::Emulated {
                bits, moduli: n, ..
            },
            Target::Tau(_),
        ) => {
            let widest = (bits..=MAX_BITS)
                .take_while(|&b| moduli_for_bits(sums, b).is_some_and(|m| m <= n))
                .last()
                .unwrap_or(bits);
            EmulationRoute::Emulated {
                bits: widest,
                moduli: n,
                fixups: histogram[widest as usize + 1..].iter().sum(),
            }
        }
        (route, _) => route,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(k: usize, u: f64) -> Target {
        Target::Tau(tau(k, u))
    }

    fn stats(norm: f64) -> VectorStats {
        VectorStats {
            exponent: 0,
            norm,
            finite: true,
        }
    }

    /// The sample condemns a product whose settled route loses once the
    /// certificate is paid even where a route of more moduli would not
    /// (the whole certificate would go native all the same), keeps one
    /// whose needs emulation serves, and sends a mostly uncertified one
    /// native.
    #[test]
    fn the_sample_decides_as_the_whole_certificate_would() {
        let prices = Prices {
            certificate: 0.057,
            fixed: 0.036,
            modulus: 0.038,
            fixup: 600.0,
        };
        let (k, side) = (4096usize, 256usize);
        let target = bound(k, f64::from(f32::EPSILON) / 2.0);
        let elements = (side * side) as u64;
        let verdict = |h: &[u64; 256]| sample_verdict(h, (side, side), k, target, &prices, (4, 16));
        // 0.2% of the elements need 30 bits, the rest 20: the fewest bits
        // within the allowance (1/256) fix up 131 elements, 1.2 native
        // products' worth at these prices, while 30 bits for all would
        // cost about half a native product.
        let mut h = [0u64; 256];
        h[20] = elements - 131;
        h[30] = 131;
        let (cheap, cost) = cheapest(&h, k, target, &prices, true).expect("some route");
        assert!(cost < 1.0, "{cheap:?} {cost}");
        match verdict(&h) {
            Some(EmulationRoute::Slower { fixups, .. }) => assert_eq!(fixups, 131 * 16),
            other => panic!("{other:?}"),
        }
        // Every element at 20 bits: the whole certificate decides.
        let mut h = [0u64; 256];
        h[20] = elements;
        assert_eq!(verdict(&h), None);
        // A tenth uncertified: native at once.
        let mut h = [0u64; 256];
        h[20] = elements - elements / 10;
        h[UNCERTIFIED as usize] = elements / 10;
        assert_eq!(
            verdict(&h),
            Some(EmulationRoute::Native {
                uncertified: elements / 10
            })
        );
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

    /// The norms' bound holds for the scaled integers of any data, the
    /// depth's too, and is never looser than the depth's.
    #[test]
    fn the_norms_bound_every_integer_sum() {
        use super::super::scaling::{scaled, VectorStats};
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        for (k, spread) in [(1usize, 0), (7, 3), (64, 0), (257, 40), (1000, 1)] {
            for bits in [1u32, 2, 7, 20, 40, 53] {
                // Entries near their vectors' largest magnitudes (the
                // worst case of the norms) or over wide ranges.
                let draw = |rng: &mut rand_pcg::Pcg64| {
                    let e: i32 = rng.random_range(0..=spread);
                    let x: f64 = rng.random_range(0.9..2.0);
                    if rng.random::<bool>() {
                        -ldexp(x, -e)
                    } else {
                        ldexp(x, -e)
                    }
                };
                let a: Vec<Vec<f64>> = (0..5)
                    .map(|_| (0..k).map(|_| draw(&mut rng)).collect())
                    .collect();
                let b: Vec<Vec<f64>> = (0..4)
                    .map(|_| (0..k).map(|_| draw(&mut rng)).collect())
                    .collect();
                let stats = |v: &Vec<f64>| VectorStats::of(k, |p| v[p]);
                let (sa, sb): (Vec<_>, Vec<_>) =
                    (a.iter().map(stats).collect(), b.iter().map(stats).collect());
                let widest = |s: &[VectorStats]| s.iter().fold(0.0f64, |w, x| w.max(x.norm));
                let sums = Sums::with_norms_at_any_depth(k, widest(&sa), widest(&sb));
                let mut largest = 0u128;
                for (x, s) in a.iter().zip(&sa) {
                    for (y, t) in b.iter().zip(&sb) {
                        let dot: i128 = (0..k)
                            .map(|p| scaled(x[p], s, bits) as i128 * scaled(y[p], t, bits) as i128)
                            .sum();
                        largest = largest.max(dot.unsigned_abs());
                    }
                }
                let bound = sums.at(bits).unwrap();
                assert!(largest <= bound, "k {k}, {bits} bits: {largest} > {bound}");
                assert!(bound <= Sums::depth(k).at(bits).unwrap());
                assert!(largest <= Sums::depth(k).at(bits).unwrap());
            }
        }
    }

    /// Uniform data at k = 16384 (ν ≈ k) holds a bit more per modulus
    /// count: f64 at the native level beside cuBLAS typically needs 48
    /// bits, 14 moduli under the norms' bound and 15 under the depth's;
    /// f32's 19 bits stay at 7 moduli either way.
    #[test]
    fn the_norms_bound_saves_a_modulus_on_uniform_data() {
        let k = 16384;
        let uniform = Sums::with_norms(k, k as f64 * 1.02, k as f64 * 1.03);
        assert_eq!(moduli_for_bits(k, 48), Some(15));
        assert_eq!(moduli_for_bits(uniform, 48), Some(14));
        assert_eq!(moduli_for_bits(k, 19), Some(7));
        assert_eq!(moduli_for_bits(uniform, 19), Some(7));
        assert!(max_bits(uniform) >= max_bits(k));
        // The widest norms (2k, every entry at its vector's top) bound no
        // better than the depth; an unknown norm is the depth's bound.
        let top = Sums::with_norms(k, 2.0 * k as f64, 2.0 * k as f64);
        assert_eq!(moduli_for_bits(top, 48), Some(15));
        assert_eq!(
            Sums::with_norms(k, f64::NAN, 3.0),
            Sums::with_norms(k, 3.0, 3.0)
        );
        assert_eq!(Sums::with_norms(k, f64::NAN, f64::NAN), Sums::depth(k));
        // Shallow products keep the depth's bound.
        assert_eq!(Sums::with_norms(255, 3.0, 3.0), Sums::depth(255));
        // A route widens to the most bits its moduli hold under the bound.
        let mut h = [0u64; 256];
        h[48] = 1000;
        let target = Target::Tau(1e-14);
        assert_eq!(
            settle(route(&h, 32, uniform, 32, target), &h, uniform, target),
            EmulationRoute::Emulated {
                bits: 48,
                moduli: 14,
                fixups: 0
            }
        );
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
            assert_eq!(certificate_depth(k, bound(k, u64_)), depth, "k = {k}");
        }
        // f32 at k = 16384: typically 11.3 bits, 12 (5 moduli); from a
        // quarter or a half 13 or 14 would take 6, from three quarters 12.
        let u32_ = f64::from(f32::EPSILON) / 2.0;
        assert_eq!(certificate_depth(16384, bound(16384, u32_)), 12288);
        assert_eq!(certificate_depth(8192, bound(8192, u32_)), 2048);
        // At the native level beside cuBLAS: f32 typically 19 bits (7
        // moduli, which hold 20 but not 21), so half the depth; f64 48
        // (15 moduli hold 51), a quarter.
        use crate::element::DType;
        let native = |dtype| {
            Target::of(
                Goal::on_cublas(Accuracy::Native, dtype),
                (16384, 16384, 16384),
                dtype,
            )
        };
        assert_eq!(native(DType::F32).typical_bits(), 19);
        assert_eq!(certificate_depth(16384, native(DType::F32)), 8192);
        assert_eq!(native(DType::F64).typical_bits(), 48);
        assert_eq!(certificate_depth(16384, native(DType::F64)), 4096);
        // With the norms of uniform data f64 takes 14 moduli, which hold
        // 48 bits and no more: three quarters of the depth.
        let uniform = Sums::with_norms(16384, 16384.0, 16384.0);
        assert_eq!(certificate_depth(uniform, native(DType::F64)), 12288);
        assert_eq!(certificate_depth(uniform, native(DType::F32)), 8192);
    }

    #[test]
    fn the_whole_depth_runs_only_where_the_sample_could_save_a_modulus() {
        let k = 16384;
        let f64_bound = bound(k, f64::EPSILON / 2.0);
        let native = EmulationRoute::Native { uncertified: 9 };
        assert!(wants_full_depth(native, k, f64_bound));
        // f64 at n = 16384: 43 bits and 41 bits both take 13 moduli.
        let at = |bits| EmulationRoute::Emulated {
            bits,
            moduli: moduli_for_bits(k, bits).unwrap(),
            fixups: 0,
        };
        assert_eq!(moduli_for_bits(k, 43), moduli_for_bits(k, 41));
        assert!(!wants_full_depth(at(43), k, f64_bound));
        // 45 bits take 14 moduli, 43 bits 13: the whole depth may save one.
        assert_eq!(moduli_for_bits(k, 45), Some(14));
        assert_eq!(moduli_for_bits(k, 43), Some(13));
        assert!(wants_full_depth(at(45), k, f64_bound));
        assert!(!wants_full_depth(at(2), k, f64_bound));
        // f32 at the bound level sums the whole depth at once: no second
        // pass, whatever it found.
        let f32_bound = bound(k, f64::from(f32::EPSILON) / 2.0);
        assert!(!wants_full_depth(at(14), k, f32_bound));
    }

    #[test]
    fn the_route_takes_the_fewest_bits_within_the_allowance() {
        let any = Target::Tau(1e-6);
        let mut h = [0u64; 256];
        // 64×64 = 4096 elements: at most 16 fix-ups.
        h[10] = 4000;
        h[20] = 80;
        h[30] = 10;
        h[UNCERTIFIED as usize] = 6;
        match route(&h, 64, 100, 64, any) {
            EmulationRoute::Emulated {
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
        assert_eq!(
            route(&h, 64, 100, 64, any),
            EmulationRoute::Native { uncertified: 17 }
        );
        // All zeros: one bit, nothing fixed up.
        let mut z = [0u64; 256];
        z[0] = 9;
        assert!(matches!(
            route(&z, 3, 5, 3, any),
            EmulationRoute::Emulated {
                bits: 1,
                fixups: 0,
                ..
            }
        ));
    }

    #[test]
    fn levels_set_the_target_and_native_follows_the_device() {
        use crate::element::DType;
        let k = 16384;
        let u = DType::F32.unit_roundoff();
        let bound = Target::of(Goal::on_cpu(Accuracy::Bound), (k, k, k), DType::F32);
        assert_eq!(bound, Target::Tau(tau(k, u)));
        let tf32 = Target::of(Goal::on_cpu(Accuracy::Tf32), (k, k, k), DType::F32);
        assert_eq!(tf32, Target::Tau(tau(k, 2f64.powi(-11))));
        // f64 at tf32: TF32's unit roundoff too.
        let tf32_64 = Target::of(Goal::on_cpu(Accuracy::Tf32), (k, k, k), DType::F64);
        assert_eq!(tf32_64, tf32);
        let cpu = Target::of(Goal::on_cpu(Accuracy::Native), (k, k, k), DType::F32).tau();
        let gpu = Target::of(
            Goal::on_cublas(Accuracy::Native, DType::F32),
            (k, k, k),
            DType::F32,
        )
        .tau();
        assert!(
            cpu < bound.tau() / 100.0 && gpu < bound.tau() / 10.0,
            "{cpu} {gpu}"
        );
        // cuBLAS's error grows as √k and packed's does not; a small output
        // (split k) takes the flat error.
        assert!(gpu > cpu);
        let small = Target::of(
            Goal::on_cublas(Accuracy::Native, DType::F32),
            (64, k, 48),
            DType::F32,
        );
        assert_eq!(small.tau(), cpu);
        assert_eq!(
            Target::of(Goal::on_cpu(Accuracy::Bits(70)), (k, k, k), DType::F64),
            Target::Bits(MAX_BITS)
        );
        assert_eq!(Target::Bits(20).tau(), f64::INFINITY);
    }

    #[test]
    fn an_unbounded_allowance_needs_one_bit_and_vanishing_magnitudes_none_certify() {
        let s = stats(100.0);
        assert_eq!(bits_needed(&s, &s, 1000.0, 100, f64::INFINITY), 1);
        assert_eq!(bits_needed(&s, &s, 0.0, 100, f64::INFINITY), UNCERTIFIED);
    }

    #[test]
    fn a_route_takes_the_most_bits_its_moduli_hold() {
        let k = 16384;
        let mut h = [0u64; 256];
        h[18] = 1000;
        h[22] = 3;
        h[UNCERTIFIED as usize] = 1;
        let target = Target::Tau(1e-6);
        let found = route(&h, 32, k, 32, target);
        // 18 bits take 7 moduli at this depth, which hold 20.
        assert_eq!(
            found,
            EmulationRoute::Emulated {
                bits: 18,
                moduli: 7,
                fixups: 4
            }
        );
        let settled = settle(found, &h, k, target);
        assert_eq!(
            settled,
            EmulationRoute::Emulated {
                bits: 20,
                moduli: 7,
                fixups: 4
            }
        );
        assert_eq!(moduli_for_bits(k, 21), Some(8));
        // A fixed number of bits stays, its elements past it fixed up,
        // or native beyond the allowance.
        let fixed = route(&h, 32, k, 32, Target::Bits(20));
        assert_eq!(
            fixed,
            EmulationRoute::Emulated {
                bits: 20,
                moduli: 7,
                fixups: 4
            }
        );
        assert_eq!(settle(fixed, &h, k, Target::Bits(20)), fixed);
        assert_eq!(
            route(&h, 32, k, 32, Target::Bits(17)),
            EmulationRoute::Native { uncertified: 1004 }
        );
    }

    /// A priced route: native stays native; a cheap emulated route stays;
    /// one whose moduli or fix-ups cost the native product's time becomes
    /// `Slower`, with the certificate counted only before it has run.
    #[test]
    fn a_route_dearer_than_native_goes_native() {
        let prices = Prices {
            certificate: 0.1,
            fixed: 0.1,
            modulus: 0.05,
            fixup: 1000.0,
        };
        let elements = 1 << 20;
        let emulated = |moduli, fixups| EmulationRoute::Emulated {
            bits: 40,
            moduli,
            fixups,
        };
        let native = EmulationRoute::Native { uncertified: 9 };
        assert_eq!(priced(native, elements, &prices, true), native);
        // 0.1 + 0.1 + 14·0.05 = 0.9.
        assert_eq!(
            priced(emulated(14, 0), elements, &prices, true),
            emulated(14, 0)
        );
        // 0.9 + 200/2^20·1000 ≈ 1.09 before the certificate; 0.99 after.
        assert_eq!(
            priced(emulated(14, 200), elements, &prices, true),
            EmulationRoute::Slower {
                moduli: 14,
                fixups: 200
            }
        );
        assert_eq!(
            priced(emulated(14, 200), elements, &prices, false),
            emulated(14, 200)
        );
        // Moduli alone: 0.1 + 17·0.05 = 0.95 after, 1.05 before.
        assert!(matches!(
            priced(emulated(17, 0), elements, &prices, true),
            EmulationRoute::Slower { .. }
        ));
        assert_eq!(
            priced(emulated(17, 0), elements, &prices, false),
            emulated(17, 0)
        );
        assert_eq!(
            EmulationRoute::Slower {
                moduli: 3,
                fixups: 1
            }
            .emulated(),
            None
        );
    }

    /// The cheapest route weighs moduli against fix-ups over every number
    /// of bits, past the allowance; a fixed number of bits is the only
    /// choice.
    #[test]
    fn the_cheapest_route_weighs_moduli_against_fixups() {
        let prices = Prices {
            certificate: 0.1,
            fixed: 0.1,
            modulus: 0.05,
            fixup: 1000.0,
        };
        let k = 4096;
        let top = max_bits(k);
        // 2^20 elements: most need 10 bits, 300 need 20, 100 no bits.
        let mut h = [0u64; 256];
        h[10] = (1 << 20) - 400;
        h[20] = 300;
        h[UNCERTIFIED as usize] = 100;
        let (route, cost) = cheapest(&h, k, bound(k, 1e-8), &prices, false).unwrap();
        let EmulationRoute::Emulated {
            bits,
            moduli,
            fixups,
        } = route
        else {
            panic!("{route:?}");
        };
        // 20 bits (100 fix-ups) beats 10 bits (400) by 300/2^20·1000 ≈
        // 0.29 native products, more than its extra moduli.
        assert_eq!((bits, fixups), (20, 100));
        assert_eq!(moduli, moduli_for_bits(k, 20).unwrap());
        let expect = 0.1 + moduli as f64 * 0.05 + 100.0 / f64::from(1 << 20) * 1000.0;
        assert!((cost - expect).abs() < 1e-12);
        let (with, _) = cheapest(&h, k, bound(k, 1e-8), &prices, true).unwrap();
        assert_eq!(with, route);
        assert!(cheapest(&h, k, bound(k, 1e-8), &prices, true).unwrap().1 > cost);
        // A fixed number of bits: that one, all above it fixed up.
        let (fixed, _) = cheapest(&h, k, Target::Bits(12), &prices, false).unwrap();
        assert_eq!(
            fixed,
            EmulationRoute::Emulated {
                bits: 12,
                moduli: moduli_for_bits(k, 12).unwrap(),
                fixups: 400
            }
        );
        assert!(
            cheapest(&h, k, Target::Bits(99), &prices, false).is_some_and(
                |(r, _)| matches!(r, EmulationRoute::Emulated { bits, .. } if bits == top)
            )
        );
        // All elements beyond every number of bits: fix-ups everywhere.
        let mut wide = [0u64; 256];
        wide[UNCERTIFIED as usize] = 1000;
        assert!(
            cheapest(&wide, k, bound(k, 1e-8), &prices, false)
                .unwrap()
                .1
                > 1.0
        );
    }
}
