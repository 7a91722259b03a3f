//! Cache blocking: the MC/KC/NC block sizes of the five-loop driver,
//! derived from the cache hierarchy read at run time (Linux sysfs), in one
//! place, and overridable for tuning.
//!
//! The driver ([`super::driver`]) keeps one KC×NR micro-panel of B̃ in L1
//! while the micro-panels of the MC×KC block Ã stream past it from L2, and
//! the KC×NC block B̃ in L3, shared by the threads. Hence:
//!
//! * **KC**: the two micro-panels one kernel call reads, MR×KC of Ã and
//!   KC×NR of B̃, fill L1 together ([`KC_L1_FRACTION`] of it), so that B̃'s
//!   micro-panel survives the stream of Ã's micro-panels through the ir
//!   loop: KC = L1 / ((MR + NR)·size), between 64 and [`MAX_KC`]. A deeper
//!   KC would halve the passes over C, but on an Ice Lake machine
//!   (two 512-bit FMAs per cycle, so twice the bytes per cycle of Zen 4)
//!   KC = 512 measured 10–15% slower than 192 for f64.
//!   That holds where the core's FMAs would outrun L2: a core that retires
//!   fewer bits of FMA results per cycle ([`fma_bits_per_cycle`]; Zen 4
//!   runs a 512-bit FMA in two halves) has the time to read both
//!   micro-panels from L2, and so has a core whose L2 feeds L1 twice as
//!   fast (Zen 5, [`l2_stream_bytes_per_cycle`]). When the kernel would
//!   need at most the core's L2 streaming budget from them
//!   ([`l2_bytes_per_cycle`] against [`CoreRates`]), KC only makes Ã's
//!   micro-panel fill [`KC_STREAMING_L1_FRACTION`] of L1: KC = L1 /
//!   (2·MR·size), fewer passes over C. `fastmm tune` searches KC per
//!   machine.
//! * **MC**: each thread's Ã takes [`MC_L2_FRACTION`] of L2:
//!   MC = L2·fraction / (KC·size), a multiple of MR.
//! * **NC**: B̃ takes [`NC_L3_FRACTION`] of L3: NC = L3·fraction / (KC·size),
//!   a multiple of NR, so that for most problems B is packed once per KC
//!   step and A once.
//! * **A C larger than L2** (streaming regime only): each KC step then
//!   passes over C in memory, so KC takes
//!   [`KC_STREAMING_LARGE_C_L1_FRACTION`] of L1 and MC
//!   [`MC_LARGE_C_L2_FRACTION`] of L2 (512 and 256 for f64 on Zen 4),
//!   NC staying as for the shallower KC. A C that fits in L2 keeps the
//!   shallower blocks, which leave it room there. Emerald and Sapphire
//!   Rapids stream in this regime only
//!   ([`large_c_l2_stream_bytes_per_cycle`]).
//!
//! L3 is the share [`crate::system::CacheSizes::l3`] of the last-level
//! cache: at most `L3_PER_CPU_MAX` per CPU that shares it.
//!
//! The driver splits each dimension into equal blocks no larger than these
//! ([`balanced_block`]), so k = 1030 runs as 3 steps of 344, not 512 + 512 +
//! 6 with a whole pass over C for 6 columns of A. NC may exceed its
//! size by [`NC_SLACK`] when that saves a second pass over A.
//!
//! `--blocks` and `FASTMM_BLOCKS` override them.

use std::sync::OnceLock;

use crate::options::{BlockSizes, CpuKernel};
use crate::system::CacheSizes;
pub(crate) use crate::tunables::{
    KC_L1_FRACTION, KC_STREAMING_L1_FRACTION, KC_STREAMING_LARGE_C_L1_FRACTION,
    L2_STREAM_MAX_BYTES_PER_CYCLE, L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2, MAX_KC, MC_L2_FRACTION,
    MC_LARGE_C_L2_FRACTION, MC_LARGE_C_L2_FRACTION_WIDE_L2, NC_L3_FRACTION, NC_SLACK,
};

/// The analytical sizes for a kernel of `mr`×`nr` elements of `elem_size`
/// bytes on a CPU with these caches and a core of these rates with the
/// kernel's vectors (see module docs and [`CoreRates::of`]), for a product
/// whose C takes `c_bytes` (0 where no product is in view).
pub(crate) fn analytical_blocks(
    caches: CacheSizes,
    elem_size: usize,
    mr: usize,
    nr: usize,
    core: CoreRates,
    c_bytes: usize,
) -> BlockSizes {
    let needs = l2_bytes_per_cycle(mr, nr, core.fma_bits_per_cycle);
    let streams_from_l2 = needs <= core.l2_stream_bytes_per_cycle as f64;
    let large_c_streams = needs <= core.large_c_l2_stream_bytes_per_cycle as f64;
    let ((num, den), panel_rows) = if streams_from_l2 {
        (KC_STREAMING_L1_FRACTION, mr)
    } else {
        (KC_L1_FRACTION, mr + nr)
    };
    let kc_for = |(num, den): (usize, usize), panel_rows: usize| {
        round_down(caches.l1d * num / den / (panel_rows * elem_size), 8).clamp(64, MAX_KC)
    };
    // How many kc-deep lines of elements fill `fraction` of a cache,
    // in whole micro-panels of `unit`.
    let lines_in = |kc: usize, bytes: usize, (num, den): (usize, usize), unit: usize| {
        round_down(bytes * num / den / (kc * elem_size), unit).max(unit)
    };
    let kc = kc_for((num, den), panel_rows);
    let nc = lines_in(kc, caches.l3, NC_L3_FRACTION, nr);
    if large_c_streams && c_bytes > caches.l2 {
        let kc = kc_for(KC_STREAMING_LARGE_C_L1_FRACTION, mr);
        let mc = lines_in(kc, caches.l2, core.large_c_mc_l2_fraction, mr);
        return BlockSizes { mc, kc, nc };
    }
    let mc = lines_in(kc, caches.l2, MC_L2_FRACTION, mr);
    BlockSizes { mc, kc, nc }
}

/// The size of each of the equal blocks that cover `extent` in blocks of at
/// most `max + max·slack` (the slack lets 4096 rows stay one block of an
/// MC of 4092, and 8192 two, instead of adding a block of 4), rounded
/// up to a multiple of `unit`; at least `unit`.
///
/// `slack` is a fraction (numerator, denominator).
pub(crate) fn balanced_block(
    extent: usize,
    max: usize,
    unit: usize,
    slack: (usize, usize),
) -> usize {
    let max = max.max(unit);
    let stretched = max + max * slack.0 / slack.1;
    let blocks = extent.div_ceil(stretched).max(1);
    extent.div_ceil(blocks).div_ceil(unit).max(1) * unit
}

/// Bytes per cycle an `mr`×`nr` kernel reads from its two micro-panels
/// when it runs at a core's FMA rate of `fma_bits_per_cycle`: (MR + NR)
/// elements per k step, a step taking MR·NR·size·8 / fma_bits cycles (the
/// element size cancels out).
pub(crate) fn l2_bytes_per_cycle(mr: usize, nr: usize, fma_bits_per_cycle: usize) -> f64 {
    ((mr + nr) * fma_bits_per_cycle) as f64 / (8 * mr * nr) as f64
}

/// What the blocking rule needs to know of one core, for one kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CoreRates {
    /// Bits of FMA results retired per cycle ([`fma_bits_per_cycle`]).
    pub fma_bits_per_cycle: usize,
    /// Bytes per cycle a kernel may read from L2 and still keep its FMAs
    /// busy ([`l2_stream_bytes_per_cycle`]).
    pub l2_stream_bytes_per_cycle: usize,
    /// The same where C is larger than L2
    /// ([`large_c_l2_stream_bytes_per_cycle`]).
    pub large_c_l2_stream_bytes_per_cycle: usize,
    /// The fraction of L2 a thread's Ã block takes when C is larger than
    /// L2 (streaming regime): [`MC_LARGE_C_L2_FRACTION`], or
    /// [`MC_LARGE_C_L2_FRACTION_WIDE_L2`] on a core with the wide L2.
    pub large_c_mc_l2_fraction: (usize, usize),
}

impl CoreRates {
    /// The rates of this CPU's cores with the vectors of `family`.
    pub(crate) fn of(family: CpuKernel) -> CoreRates {
        let large_c_l2_stream_bytes_per_cycle = large_c_l2_stream_bytes_per_cycle();
        CoreRates {
            fma_bits_per_cycle: fma_bits_per_cycle(family),
            l2_stream_bytes_per_cycle: l2_stream_bytes_per_cycle(),
            large_c_l2_stream_bytes_per_cycle,
            large_c_mc_l2_fraction: if large_c_l2_stream_bytes_per_cycle
                > L2_STREAM_MAX_BYTES_PER_CYCLE
            {
                MC_LARGE_C_L2_FRACTION_WIDE_L2
            } else {
                MC_LARGE_C_L2_FRACTION
            },
        }
    }
}

/// The bytes per cycle a GEMM kernel may stream from this core's L2 and
/// still run at its FMA rate: [`L2_STREAM_MAX_BYTES_PER_CYCLE`] (measured
/// on Zen 4, Zen 3 and Ice Lake, whose L2 fills L1 at 32 bytes per cycle
/// in practice), or [`L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2`] on Zen 5
/// (AMD family 1Ah), whose L2 fills L1 at 64. Read once.
pub(crate) fn l2_stream_bytes_per_cycle() -> usize {
    static WIDE_L2: OnceLock<bool> = OnceLock::new();
    if *WIDE_L2.get_or_init(|| amd_family() == Some(0x1A)) {
        L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2
    } else {
        L2_STREAM_MAX_BYTES_PER_CYCLE
    }
}

/// The same budget for products whose C is larger than L2: as
/// [`l2_stream_bytes_per_cycle`], but the wide budget also on the Golden
/// Cove server cores of Sapphire Rapids and Emerald Rapids (Intel family 6,
/// models 8Fh and CFh), whose L2 fills L1 at 64 bytes per cycle too. There
/// the deep blocks measured faster only where C is large
/// ([`L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2`]). Read once.
pub(crate) fn large_c_l2_stream_bytes_per_cycle() -> usize {
    static WIDE_L2: OnceLock<bool> = OnceLock::new();
    if *WIDE_L2.get_or_init(|| matches!(intel_family_6_model(), Some(0x8F | 0xCF))) {
        L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2
    } else {
        l2_stream_bytes_per_cycle()
    }
}

/// Bits of FMA results one core of this CPU retires per cycle with the
/// vectors of `family`: two full-width FMAs per cycle, except where a table
/// of cores says otherwise. Zen 4 (AMD family 19h with AVX-512) runs a
/// 512-bit FMA as two 256-bit halves, one per cycle. Read once.
pub(crate) fn fma_bits_per_cycle(family: CpuKernel) -> usize {
    static HALF_RATE_512: OnceLock<bool> = OnceLock::new();
    match family {
        CpuKernel::Avx512 if *HALF_RATE_512.get_or_init(|| amd_family() == Some(0x19)) => 512,
        CpuKernel::Avx512 => 2 * 512,
        CpuKernel::Avx2 => 2 * 256,
        // The scalar twin, compiled for baseline x86-64 (SSE2) or the like.
        CpuKernel::Generic => 2 * 128,
    }
}

/// The model number (with its extended bits) of an Intel CPU of family
/// 6, or None on other CPUs.
fn intel_family_6_model() -> Option<u32> {
    let (vendor, eax) = cpu_signature()?;
    let family = (eax >> 8) & 0xF;
    let model = ((eax >> 12) & 0xF0) | ((eax >> 4) & 0xF);
    (&vendor == b"GenuineIntel" && family == 6).then_some(model)
}

/// The family number of an AMD CPU (base plus extended family, as AMD
/// numbers them: 19h for Zen 3 and Zen 4, 1Ah for Zen 5), or None on
/// other CPUs.
fn amd_family() -> Option<u32> {
    let (vendor, eax) = cpu_signature()?;
    let base = (eax >> 8) & 0xF;
    let extended = if base == 0xF { (eax >> 20) & 0xFF } else { 0 };
    (&vendor == b"AuthenticAMD").then_some(base + extended)
}

/// The CPU's vendor string and its signature (CPUID leaf 1, EAX), or None
/// off x86-64.
fn cpu_signature() -> Option<([u8; 12], u32)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // CPUID and its leaves 0 and 1 exist on every x86-64 CPU (the
        // intrinsic is safe to call).
        let (vendor, signature) = (__cpuid(0), __cpuid(1));
        let mut name = [0u8; 12];
        for (chunk, word) in name
            .chunks_exact_mut(4)
            .zip([vendor.ebx, vendor.edx, vendor.ecx])
        {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        Some((name, signature.eax))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

fn round_down(value: usize, multiple: usize) -> usize {
    value / multiple * multiple
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core whose L2 streams [`L2_STREAM_MAX_BYTES_PER_CYCLE`], with
    /// this FMA rate.
    fn narrow_l2(fma_bits_per_cycle: usize) -> CoreRates {
        CoreRates {
            fma_bits_per_cycle,
            l2_stream_bytes_per_cycle: L2_STREAM_MAX_BYTES_PER_CYCLE,
            large_c_l2_stream_bytes_per_cycle: L2_STREAM_MAX_BYTES_PER_CYCLE,
            large_c_mc_l2_fraction: MC_LARGE_C_L2_FRACTION,
        }
    }

    #[test]
    fn sizes_parse_and_derive() {
        let caches = CacheSizes {
            l1d: 32 << 10,
            l2: 1 << 20,
            l3: 32 << 20,
            l3_total: 32 << 20,
        };
        // Two 512-bit FMAs per cycle: 18.7 bytes per cycle from the
        // panels, so B̃'s micro-panel stays in L1 with Ã's:
        // 32 KiB / ((8 + 48)·4 bytes) = 146 → 144.
        let bs = analytical_blocks(caches, 4, 8, 48, narrow_l2(1024), 0);
        assert_eq!(bs.kc, 144);
        // Ã: half of 1 MiB / (144·4 bytes) = 910 → 904 rows; B̃: a quarter
        // of 32 MiB / (144·4) = 14563 → 14544 columns.
        assert_eq!(bs.mc, 904);
        assert_eq!(bs.nc, 14544);
        assert_eq!(bs.nc % 48, 0);
        assert_eq!(bs.mc % 8, 0);
        // 48 KiB / ((8 + 24)·8 bytes) = 192.
        let ice_lake = CacheSizes {
            l1d: 48 << 10,
            ..caches
        };
        let bs = analytical_blocks(ice_lake, 8, 8, 24, narrow_l2(1024), 0);
        assert_eq!((bs.kc, bs.mc, bs.nc), (192, 336, 5448));
        // A small tile on a large L1 stops at MAX_KC.
        assert_eq!(
            analytical_blocks(ice_lake, 8, 4, 8, narrow_l2(512), 0).kc,
            MAX_KC
        );
        // Zen 4: one 512-bit FMA per cycle, 9.3 and 10.7 bytes per cycle,
        // so both panels stream from L2 and Ã's micro-panel fills half of
        // L1: 16 KiB / (8·4) = 512 for f32, / (8·8) = 256 for f64, with
        // half of L2 for Ã: 512 KiB / (512·4) = 256 rows.
        let zen4 = |size, nr| analytical_blocks(caches, size, 8, nr, narrow_l2(512), 1 << 20);
        assert_eq!((zen4(4, 48).kc, zen4(4, 48).mc), (512, 256));
        assert_eq!((zen4(8, 24).kc, zen4(8, 24).mc), (256, 256));
        // A C larger than L2: Ã's micro-panel fills all of L1 and its block
        // all of L2, NC as before. f64: 32 KiB / (8·8) = 512, 1 MiB /
        // (512·8) = 256 rows; f32 stays at MAX_KC with 1 MiB / (512·4)
        // = 512 rows.
        let zen4_large_c =
            |size, nr| analytical_blocks(caches, size, 8, nr, narrow_l2(512), 8 << 20);
        assert_eq!(
            (
                zen4_large_c(8, 24).kc,
                zen4_large_c(8, 24).mc,
                zen4_large_c(8, 24).nc
            ),
            (512, 256, zen4(8, 24).nc)
        );
        assert_eq!((zen4_large_c(4, 48).kc, zen4_large_c(4, 48).mc), (512, 512));
        // The L1 rule ignores C's size.
        assert_eq!(
            analytical_blocks(ice_lake, 8, 8, 24, narrow_l2(1024), 1 << 30),
            analytical_blocks(ice_lake, 8, 8, 24, narrow_l2(1024), 0)
        );
        // Zen 3's AVX2 6×16 f32 (two 256-bit FMAs, 14.7 bytes per cycle)
        // keeps the L1 rule: 32 KiB / ((6 + 16)·4) = 372 → 368.
        assert_eq!(
            analytical_blocks(caches, 4, 6, 16, narrow_l2(512), 0).kc,
            368
        );
        // Zen 5: two 512-bit FMAs per cycle (18.7 and 21.3 bytes per
        // cycle) but an L2 that fills L1 twice as fast, so the streaming
        // rule: f32 KC 48 KiB / (2·8·4) = 768 → MAX_KC, MC 512 KiB /
        // (512·4) = 256, NC 8 MiB / (512·4) = 4096 → 4080; f64 KC 384, MC
        // 512 KiB / (384·8) = 170 → 168, NC 8 MiB / (384·8) = 2730 → 2712;
        // a C larger than L2: KC 512 and Ã in half of L2, f32 MC 256, f64
        // 128, NC kept.
        let zen5 = |size, nr, c_bytes| {
            let wide_l2 = CoreRates {
                fma_bits_per_cycle: 1024,
                l2_stream_bytes_per_cycle: L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2,
                large_c_l2_stream_bytes_per_cycle: L2_STREAM_MAX_BYTES_PER_CYCLE_WIDE_L2,
                large_c_mc_l2_fraction: MC_LARGE_C_L2_FRACTION_WIDE_L2,
            };
            let bs = analytical_blocks(ice_lake, size, 8, nr, wide_l2, c_bytes);
            (bs.mc, bs.kc, bs.nc)
        };
        assert_eq!(zen5(4, 48, 0), (256, 512, 4080));
        assert_eq!(zen5(8, 24, 0), (168, 384, 2712));
        assert_eq!(zen5(4, 48, 8 << 20), (256, 512, 4080));
        assert_eq!(zen5(8, 24, 8 << 20), (128, 512, 2712));
        assert!((l2_bytes_per_cycle(8, 48, 512) - 9.33).abs() < 0.01);
        assert!((l2_bytes_per_cycle(8, 24, 1024) - 21.33).abs() < 0.01);
        assert_eq!(
            BlockSizes::parse("96, 256,512").unwrap(),
            BlockSizes {
                mc: 96,
                kc: 256,
                nc: 512
            }
        );
        assert!(BlockSizes::parse("96,0,512").is_err());
        assert!(BlockSizes::parse("96,256").is_err());
    }

    #[test]
    fn blocks_are_balanced() {
        let none = (0, 1);
        // k = 1030 in steps of at most 512: three of 344, not 512 + 512 + 6.
        assert_eq!(balanced_block(1030, 512, 1, none), 344);
        assert_eq!(balanced_block(1024, 512, 1, none), 512);
        assert_eq!(balanced_block(100, 512, 1, none), 100);
        // Rounded up to whole micro-panels.
        assert_eq!(balanced_block(4096, 4092, 12, none), 2052);
        // Slack keeps 4096 columns in one block instead of 4092 + 4.
        assert_eq!(balanced_block(4096, 4092, 12, (1, 4)), 4104);
        assert_eq!(balanced_block(8192, 4092, 12, (1, 4)), 4104);
        assert_eq!(balanced_block(20000, 4092, 12, (1, 4)), 5004);
        assert_eq!(balanced_block(0, 256, 8, none), 8);
        assert_eq!(balanced_block(5, 256, 8, none), 8);
        assert_eq!(balanced_block(5, 0, 8, none), 8);
    }
}
