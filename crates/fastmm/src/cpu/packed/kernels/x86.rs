//! x86-64 SIMD microkernels, written with `std::arch` intrinsics inside
//! functions compiled with `#[target_feature]`, so the released binary runs
//! on any x86-64 and still uses AVX-512 or AVX2 where the CPU has them (no
//! `-C target-cpu=native`). One macro body serves every element type and
//! instruction set; only the vector operations differ. Floats use fused
//! multiply-adds; integers use the vector low multiplies (`vpmulld`,
//! `vpmullq` from AVX-512DQ, and a three-multiply emulation of the 64-bit
//! low product on AVX2), which give exactly the wrapping result.
//!
//! Tile shapes: AVX-512 has 32 vector registers. The float kernels keep
//! 24 accumulators as MR = 8 rows of three vectors, with three vectors of
//! B̃ and a broadcast of Ã live: per k step 11 loads feed 24 FMAs. The
//! 12×(two vectors) tile needs 14 loads for the same 24 FMAs and ran
//! 25–40% slower on an Ice Lake machine, which retires two 512-bit
//! FMAs per cycle (f32 93–129 against 140–152 GFLOP/s on cache-resident
//! panels); the integer kernels, bound by their multiplies, keep 12×2.
//! AVX2 has 16, so 6×(two vectors) keeps 12 accumulators for f32, i32 and
//! f64, and 4×(two vectors) 8 for the i64 emulation (which needs scratch
//! registers). The f64 6×2 tile needs all 16 registers, and LLVM, given
//! its k loop as intrinsics, kept one accumulator on the stack (a
//! store-to-load chain every k step, 21 GFLOP/s), so that loop is written
//! in assembly (`avx2_f64_6x8_k_loop`); it replaced a 4×2 tile whose
//! eight accumulators only just covered the FMA latency. The AVX-512 float
//! tiles' k loop is assembly too (`avx512_k_loop`), unrolled four steps,
//! for speed where B̃ streams from L2 rather than for registers.
//!
//! Edge tiles (`Microkernel::run_edge`) run the same k loop over only the
//! vectors that hold the valid columns: with NR = 48, a C of 256 columns
//! ends in a panel of 16, which a full tile would compute three times over
//! (12% of all the flops of 256×k×256).

use std::arch::x86_64::*;

use crate::cpu::packed::kernel::Microkernel;
use crate::cpu::packed::panels;
use crate::element::Element;
use crate::matrix::MatRef;

/// How many k steps ahead the kernels prefetch Ã, which streams from L2
/// while B̃'s micro-panel stays in L1 (see `packed::driver`).
const A_PREFETCH_STEPS: usize = 8;

/// How many k steps before the end the kernels pull the C tile into L1.
const C_PREFETCH_STEPS: usize = 32;

fn has_avx512() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("fma")
}

fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// acc += Ã[steps]·B̃[steps] for one micro-tile, with intrinsics: per k
/// step the NR/lanes vectors of B̃, then each row's broadcast of Ã against
/// them. Ã streams from L2, so it is asked for a few steps early
/// (wrapping_add: the hint may point past the panel, which a prefetch
/// tolerates and `add` would not).
macro_rules! intrinsics_k_loop {
    ($steps:expr, $a:expr, $b:expr, $acc:ident, $t:ty, $mr:literal, $nv:literal, $lanes:literal, $ops:ident) => {
        intrinsics_k_loop!(
            $steps,
            $a,
            $b,
            $acc,
            $t,
            $mr,
            $nv,
            $lanes,
            $ops,
            $nv * $lanes
        )
    };
    // The first $nv vectors of a B̃ whose k steps lie $b_stride elements
    // apart (narrower than the panel: the edge kernels).
    ($steps:expr, $a:expr, $b:expr, $acc:ident, $t:ty, $mr:literal, $nv:expr, $lanes:literal, $ops:ident, $b_stride:expr) => {
        for p in $steps {
            let bp = $b.add(p * $b_stride);
            for line in (0..$mr).step_by(64 / std::mem::size_of::<$t>()) {
                _mm_prefetch::<_MM_HINT_T0>(
                    $a.wrapping_add((p + A_PREFETCH_STEPS) * $mr + line).cast(),
                );
            }
            let mut b_row = [$ops::zero(); $nv];
            for v in 0..$nv {
                b_row[v] = $ops::load(bp.add(v * $lanes));
            }
            let ap = $a.add(p * $mr);
            for i in 0..$mr {
                let ai = $ops::splat(*ap.add(i));
                for v in 0..$nv {
                    $acc[i][v] = $ops::fma(ai, b_row[v], $acc[i][v]);
                }
            }
        }
    };
}

/// The AVX2 f64 6×8 tile's k loop in assembly: its 12 accumulators, two
/// vectors of B̃ and a broadcast of Ã need all 16 `ymm` registers with two
/// broadcast registers alternating, and LLVM, given the same loop as
/// intrinsics, kept one accumulator on the stack (a store-to-load chain
/// every k step: 21 against 48 GFLOP/s). Same
/// arithmetic and order as `intrinsics_k_loop`; Ã prefetched
/// A_PREFETCH_STEPS ahead as there.
macro_rules! avx2_f64_6x8_k_loop {
    ($steps:expr, $a:expr, $b:expr, $acc:ident, $t:ty, $mr:literal, $nv:literal, $lanes:literal, $ops:ident) => {{
        const { assert!($mr == 6 && $nv == 2 && $lanes == 4) };
        let steps = $steps;
        let mut a_walk: *const f64 = $a.add(steps.start * 6);
        let mut b_walk: *const f64 = $b.add(steps.start * 8);
        let mut count = steps.end - steps.start;
        // SAFETY: the kernel contract gives 6 elements of Ã and 8 of B̃ per
        // k step for every step of the range; the loop reads exactly
        // those (and prefetches, which never fault), writes no memory and
        // leaves the stack alone.
        std::arch::asm!(
            "test {count}, {count}",
            "jz 3f",
            "2:",
            "prefetcht0 [{a} + {ahead}]",
            "vmovupd ymm12, ymmword ptr [{b}]",
            "vmovupd ymm13, ymmword ptr [{b} + 32]",
            "vbroadcastsd ymm14, qword ptr [{a}]",
            "vfmadd231pd ymm0, ymm12, ymm14",
            "vfmadd231pd ymm1, ymm13, ymm14",
            "vbroadcastsd ymm15, qword ptr [{a} + 8]",
            "vfmadd231pd ymm2, ymm12, ymm15",
            "vfmadd231pd ymm3, ymm13, ymm15",
            "vbroadcastsd ymm14, qword ptr [{a} + 16]",
            "vfmadd231pd ymm4, ymm12, ymm14",
            "vfmadd231pd ymm5, ymm13, ymm14",
            "vbroadcastsd ymm15, qword ptr [{a} + 24]",
            "vfmadd231pd ymm6, ymm12, ymm15",
            "vfmadd231pd ymm7, ymm13, ymm15",
            "vbroadcastsd ymm14, qword ptr [{a} + 32]",
            "vfmadd231pd ymm8, ymm12, ymm14",
            "vfmadd231pd ymm9, ymm13, ymm14",
            "vbroadcastsd ymm15, qword ptr [{a} + 40]",
            "vfmadd231pd ymm10, ymm12, ymm15",
            "vfmadd231pd ymm11, ymm13, ymm15",
            "add {a}, 48",
            "add {b}, 64",
            "dec {count}",
            "jnz 2b",
            "3:",
            a = inout(reg) a_walk,
            b = inout(reg) b_walk,
            count = inout(reg) count,
            ahead = const A_PREFETCH_STEPS * 48,
            inout("ymm0") $acc[0][0],
            inout("ymm1") $acc[0][1],
            inout("ymm2") $acc[1][0],
            inout("ymm3") $acc[1][1],
            inout("ymm4") $acc[2][0],
            inout("ymm5") $acc[2][1],
            inout("ymm6") $acc[3][0],
            inout("ymm7") $acc[3][1],
            inout("ymm8") $acc[4][0],
            inout("ymm9") $acc[4][1],
            inout("ymm10") $acc[5][0],
            inout("ymm11") $acc[5][1],
            out("ymm12") _,
            out("ymm13") _,
            out("ymm14") _,
            out("ymm15") _,
            options(nostack, readonly),
        );
        let _ = (a_walk, b_walk, count);
    }};
}

/// One row of the AVX-512 8×(three vectors) tile in one k step: the
/// broadcast of Ã's element `i` of step `s` into register `r`, then its
/// products with the three vectors of B̃ (zmm24–26) into accumulators
/// `c0..c2`. `eb` is the element's size in bytes.
macro_rules! avx512_row {
    ($bcast:literal, $fma:literal, $eb:literal, $s:literal, $i:literal, $r:literal, $c0:literal, $c1:literal, $c2:literal) => {
        concat!(
            $bcast,
            " zmm",
            $r,
            ", [{a} + ",
            $s,
            "*8*",
            $eb,
            " + ",
            $i,
            "*",
            $eb,
            "]\n",
            $fma,
            " zmm",
            $c0,
            ", zmm24, zmm",
            $r,
            "\n",
            $fma,
            " zmm",
            $c1,
            ", zmm25, zmm",
            $r,
            "\n",
            $fma,
            " zmm",
            $c2,
            ", zmm26, zmm",
            $r,
            "\n",
        )
    };
}

/// One k step `s` (of the four an iteration unrolls) of the AVX-512 8×(three
/// vectors) tile: Ã's line A_PREFETCH_STEPS ahead asked for, B̃'s three
/// vectors loaded (192 bytes a step for both types), the eight rows.
macro_rules! avx512_step {
    ($bcast:literal, $fma:literal, $eb:literal, $s:literal) => {
        concat!(
            "prefetcht0 [{a} + ",
            $s,
            "*8*",
            $eb,
            " + {ahead}]\n",
            "vmovups zmm24, [{b} + ",
            $s,
            "*192]\n",
            "vmovups zmm25, [{b} + ",
            $s,
            "*192 + 64]\n",
            "vmovups zmm26, [{b} + ",
            $s,
            "*192 + 128]\n",
            avx512_row!($bcast, $fma, $eb, $s, 0, "27", "0", "1", "2"),
            avx512_row!($bcast, $fma, $eb, $s, 1, "28", "3", "4", "5"),
            avx512_row!($bcast, $fma, $eb, $s, 2, "27", "6", "7", "8"),
            avx512_row!($bcast, $fma, $eb, $s, 3, "28", "9", "10", "11"),
            avx512_row!($bcast, $fma, $eb, $s, 4, "27", "12", "13", "14"),
            avx512_row!($bcast, $fma, $eb, $s, 5, "28", "15", "16", "17"),
            avx512_row!($bcast, $fma, $eb, $s, 6, "27", "18", "19", "20"),
            avx512_row!($bcast, $fma, $eb, $s, 7, "28", "21", "22", "23"),
        )
    };
}

/// The AVX-512 8×(three vectors) tiles' k loop in assembly, four steps an
/// iteration, then single steps. The same instructions as
/// `intrinsics_k_loop` in the same order per accumulator (so the same
/// bits), but where B̃'s micro-panel streams from L2 (the deep blocks of
/// large products) LLVM's one-step loop ran 3–6% slower than this one
/// (8×24 f64 on an Emerald Rapids core, paired alternating runs of a
/// 2048×2048×512 block pass): the unrolled loop carries fewer uops per
/// FMA, so the out-of-order window reaches further ahead of the L2 loads.
macro_rules! avx512_k_loop {
    ($steps:expr, $a:expr, $b:expr, $acc:ident, $t:ty, $bcast:literal, $fma:literal, $eb:literal) => {{
        let steps = $steps;
        let mut a_walk: *const $t = $a.add(steps.start * 8);
        let mut b_walk: *const $t = $b.add(steps.start * 3 * (64 / $eb));
        let mut quads = (steps.end - steps.start) / 4;
        let mut singles = (steps.end - steps.start) % 4;
        // SAFETY: the kernel contract gives 8 elements of Ã and three
        // vectors of B̃ per k step for every step of the range; the loop
        // reads exactly those (and prefetches, which never fault), writes
        // no memory and leaves the stack alone.
        std::arch::asm!(
            "test {quads}, {quads}",
            "jz 3f",
            "2:",
            avx512_step!($bcast, $fma, $eb, 0),
            avx512_step!($bcast, $fma, $eb, 1),
            avx512_step!($bcast, $fma, $eb, 2),
            avx512_step!($bcast, $fma, $eb, 3),
            concat!("add {a}, 4*8*", $eb),
            "add {b}, 4*192",
            "dec {quads}",
            "jnz 2b",
            "3:",
            "test {singles}, {singles}",
            "jz 5f",
            "4:",
            avx512_step!($bcast, $fma, $eb, 0),
            concat!("add {a}, 8*", $eb),
            "add {b}, 192",
            "dec {singles}",
            "jnz 4b",
            "5:",
            a = inout(reg) a_walk,
            b = inout(reg) b_walk,
            quads = inout(reg) quads,
            singles = inout(reg) singles,
            ahead = const A_PREFETCH_STEPS * 8 * $eb,
            inout("zmm0") $acc[0][0],
            inout("zmm1") $acc[0][1],
            inout("zmm2") $acc[0][2],
            inout("zmm3") $acc[1][0],
            inout("zmm4") $acc[1][1],
            inout("zmm5") $acc[1][2],
            inout("zmm6") $acc[2][0],
            inout("zmm7") $acc[2][1],
            inout("zmm8") $acc[2][2],
            inout("zmm9") $acc[3][0],
            inout("zmm10") $acc[3][1],
            inout("zmm11") $acc[3][2],
            inout("zmm12") $acc[4][0],
            inout("zmm13") $acc[4][1],
            inout("zmm14") $acc[4][2],
            inout("zmm15") $acc[5][0],
            inout("zmm16") $acc[5][1],
            inout("zmm17") $acc[5][2],
            inout("zmm18") $acc[6][0],
            inout("zmm19") $acc[6][1],
            inout("zmm20") $acc[6][2],
            inout("zmm21") $acc[7][0],
            inout("zmm22") $acc[7][1],
            inout("zmm23") $acc[7][2],
            out("zmm24") _,
            out("zmm25") _,
            out("zmm26") _,
            out("zmm27") _,
            out("zmm28") _,
            options(nostack, readonly),
        );
        let _ = (a_walk, b_walk, quads, singles);
    }};
}

/// `avx512_k_loop` for f64 (the 8×24 tile).
macro_rules! avx512_f64_8x24_k_loop {
    ($steps:expr, $a:expr, $b:expr, $acc:ident, $t:ty, $mr:literal, $nv:literal, $lanes:literal, $ops:ident) => {{
        const { assert!($mr == 8 && $nv == 3 && $lanes == 8) };
        avx512_k_loop!($steps, $a, $b, $acc, f64, "vbroadcastsd", "vfmadd231pd", 8)
    }};
}

/// `avx512_k_loop` for f32 (the 8×48 tile).
macro_rules! avx512_f32_8x48_k_loop {
    ($steps:expr, $a:expr, $b:expr, $acc:ident, $t:ty, $mr:literal, $nv:literal, $lanes:literal, $ops:ident) => {{
        const { assert!($mr == 8 && $nv == 3 && $lanes == 16) };
        avx512_k_loop!($steps, $a, $b, $acc, f32, "vbroadcastss", "vfmadd231ps", 4)
    }};
}

/// Defines one microkernel. `$ops` names a module of `#[inline]` vector
/// operations compiled with the same features: `zero`, `load`, `store`,
/// `splat`, `fma(a, b, acc) = acc + a·b` and `mul`. An optional last
/// argument names the macro that runs the k loop (`intrinsics_k_loop`
/// unless a tile needs its registers placed by hand).
macro_rules! simd_kernel {
    ($name:ident, $t:ty, $mr:literal, $nv:literal, $lanes:literal, $label:literal, $features:literal, $detect:path, $ops:ident) => {
        simd_kernel!(
            $name,
            $t,
            $mr,
            $nv,
            $lanes,
            $label,
            $features,
            $detect,
            $ops,
            intrinsics_k_loop
        );
    };
    ($name:ident, $t:ty, $mr:literal, $nv:literal, $lanes:literal, $label:literal, $features:literal, $detect:path, $ops:ident, $k_loop:ident) => {
        #[doc = concat!("`", $label, "` kernel for ", stringify!($t), ".")]
        pub struct $name;

        impl $name {
            #[target_feature(enable = $features)]
            #[allow(clippy::needless_range_loop)]
            unsafe fn compute(
                kc: usize,
                a: *const $t,
                b: *const $t,
                beta: $t,
                dests: &[($t, *mut $t)],
                rs_c: isize,
                cs_c: isize,
            ) {
                const NR: usize = $nv * $lanes;
                let beta_is_zero = beta == <$t as Element>::ZERO;
                // SAFETY (whole body): the Microkernel::run contract — MR·kc
                // elements at `a`, kc·NR at `b`, and an MR×NR tile at `c`
                // with strides (rs_c, cs_c) — bounds every access below.
                unsafe {
                    // Ask for the C tile twice: into L2 now, and into L1
                    // shortly before the update, so that the update neither
                    // waits on memory nor evicts the panels while the
                    // products run. β ≠ 0 reads the tile; either way it is
                    // written, and a store miss stalls on the line's
                    // read-for-ownership.
                    let tail = kc.saturating_sub(C_PREFETCH_STEPS);
                    let mut acc = [[$ops::zero(); $nv]; $mr];
                    // Every line of every row of each destination tile:
                    // the last column too, as a row that does not start on
                    // a line (C from the system allocator starts 16 bytes
                    // past one) spans one line more. Constant trip counts,
                    // so the loops unroll into straight prefetches.
                    macro_rules! prefetch_c_tiles {
                        ($hint:ident) => {
                            for &(_, c) in dests {
                                for i in 0..$mr {
                                    let row = c.offset(i as isize * rs_c);
                                    let mut j = 0;
                                    while j < NR {
                                        _mm_prefetch::<$hint>(row.offset(j as isize * cs_c).cast());
                                        j += 64 / std::mem::size_of::<$t>();
                                    }
                                    _mm_prefetch::<$hint>(
                                        row.offset((NR - 1) as isize * cs_c).cast(),
                                    );
                                }
                            }
                        };
                    }
                    prefetch_c_tiles!(_MM_HINT_T1);
                    $k_loop!(0..tail, a, b, acc, $t, $mr, $nv, $lanes, $ops);
                    prefetch_c_tiles!(_MM_HINT_T0);
                    $k_loop!(tail..kc, a, b, acc, $t, $mr, $nv, $lanes, $ops);
                    let beta_v = $ops::splat(beta);
                    for &(alpha, c) in dests {
                        let alpha_v = $ops::splat(alpha);
                        // α = 1 (every plain product) skips MR·NV
                        // multiplies on the FMA pipes per tile.
                        let unscaled = alpha == <$t as Element>::ONE;
                        if cs_c == 1 {
                            for i in 0..$mr {
                                let row = c.offset(i as isize * rs_c);
                                for v in 0..$nv {
                                    let dst = row.add(v * $lanes);
                                    let product = if unscaled {
                                        acc[i][v]
                                    } else {
                                        $ops::mul(alpha_v, acc[i][v])
                                    };
                                    let merged = if beta_is_zero {
                                        product
                                    } else {
                                        $ops::fma(beta_v, $ops::load(dst), product)
                                    };
                                    $ops::store(dst, merged);
                                }
                            }
                        } else {
                            let mut tile = [<$t as Element>::ZERO; $mr * NR];
                            for i in 0..$mr {
                                for v in 0..$nv {
                                    $ops::store(
                                        tile.as_mut_ptr().add(i * NR + v * $lanes),
                                        $ops::mul(alpha_v, acc[i][v]),
                                    );
                                }
                            }
                            crate::cpu::packed::kernel::merge_tile(
                                &tile,
                                NR,
                                ($mr, NR),
                                <$t as Element>::ONE,
                                beta,
                                (c, rs_c, cs_c),
                            );
                        }
                    }
                }
            }
        }

        impl $name {
            /// scratch ← α·Ã·B̃ in the first NV of the tile's $nv vectors of
            /// columns, rows NR apart: the edge tiles' kernel
            /// (`Microkernel::run_edge`), which needs no C prefetches.
            #[target_feature(enable = $features)]
            #[allow(clippy::needless_range_loop)]
            unsafe fn compute_columns<const NV: usize>(
                kc: usize,
                alpha: $t,
                a: *const $t,
                b: *const $t,
                scratch: *mut $t,
            ) {
                const NR: usize = $nv * $lanes;
                // SAFETY: the run_edge contract: MR·kc elements at `a`,
                // kc·NR at `b`, and an MR×NR tile at `scratch`, of which
                // the first NV·lanes ≤ NR columns of each row are written.
                unsafe {
                    let mut acc = [[$ops::zero(); NV]; $mr];
                    intrinsics_k_loop!(0..kc, a, b, acc, $t, $mr, NV, $lanes, $ops, NR);
                    let alpha_v = $ops::splat(alpha);
                    for i in 0..$mr {
                        for v in 0..NV {
                            $ops::store(
                                scratch.add(i * NR + v * $lanes),
                                $ops::mul(alpha_v, acc[i][v]),
                            );
                        }
                    }
                }
            }

            /// `Microkernel::run_direct` on the first NV of the tile's $nv
            /// vectors of columns: A broadcast from its own rows (the
            /// pointers of rows past `rows` repeat the last row, so that
            /// every read is in bounds and their sums are dropped), B's
            /// rows loaded where they lie.
            #[target_feature(enable = $features)]
            #[allow(clippy::needless_range_loop)]
            unsafe fn compute_direct<const NV: usize, const PARTIAL: bool>(
                kc: usize,
                alpha: $t,
                (a, rs_a, cs_a): (*const $t, isize, isize),
                (b, rs_b): (*const $t, isize),
                beta: $t,
                (c, rs_c, cs_c): (*mut $t, isize, isize),
                (rows, cols): (usize, usize),
            ) {
                const NR: usize = $nv * $lanes;
                // Elements of the last vector: all its lanes unless
                // PARTIAL, whose masked loads and stores stop at `cols`.
                let tail = cols - (NV - 1) * $lanes;
                // SAFETY (whole body): the run_direct contract bounds
                // every access: A's rows below `rows` kc deep, B's kc rows
                // of `cols` elements (NV vectors, the last one masked when
                // PARTIAL), and C's rows×cols elements.
                unsafe {
                    let mut acc = [[$ops::zero(); NV]; $mr];
                    let mut a_rows = [a; $mr];
                    for i in 0..$mr {
                        a_rows[i] = a.offset(i.min(rows - 1) as isize * rs_a);
                    }
                    for p in 0..kc {
                        let bp = b.offset(p as isize * rs_b);
                        let mut b_row = [$ops::zero(); NV];
                        for v in 0..NV {
                            let at = bp.add(v * $lanes);
                            b_row[v] = if PARTIAL && v == NV - 1 {
                                $ops::load_first(at, tail)
                            } else {
                                $ops::load(at)
                            };
                        }
                        let at = p as isize * cs_a;
                        for i in 0..$mr {
                            let ai = $ops::splat(*a_rows[i].offset(at));
                            for v in 0..NV {
                                acc[i][v] = $ops::fma(ai, b_row[v], acc[i][v]);
                            }
                        }
                    }
                    let alpha_v = $ops::splat(alpha);
                    let unscaled = alpha == <$t as Element>::ONE;
                    let scaled = |x| if unscaled { x } else { $ops::mul(alpha_v, x) };
                    if cs_c == 1 {
                        let beta_is_zero = beta == <$t as Element>::ZERO;
                        let beta_v = $ops::splat(beta);
                        for i in 0..rows {
                            let row = c.offset(i as isize * rs_c);
                            for v in 0..NV {
                                let dst = row.add(v * $lanes);
                                let product = scaled(acc[i][v]);
                                let last = PARTIAL && v == NV - 1;
                                let merged = if beta_is_zero {
                                    product
                                } else if last {
                                    $ops::fma(beta_v, $ops::load_first(dst, tail), product)
                                } else {
                                    $ops::fma(beta_v, $ops::load(dst), product)
                                };
                                if last {
                                    $ops::store_first(dst, tail, merged);
                                } else {
                                    $ops::store(dst, merged);
                                }
                            }
                        }
                    } else {
                        let mut tile = [<$t as Element>::ZERO; $mr * NR];
                        for i in 0..rows {
                            for v in 0..NV {
                                $ops::store(
                                    tile.as_mut_ptr().add(i * NR + v * $lanes),
                                    scaled(acc[i][v]),
                                );
                            }
                        }
                        crate::cpu::packed::kernel::merge_tile(
                            &tile,
                            NR,
                            (rows, cols),
                            <$t as Element>::ONE,
                            beta,
                            (c, rs_c, cs_c),
                        );
                    }
                }
            }

            #[target_feature(enable = $features)]
            fn pack_with_features(src: MatRef<'_, $t>, width: usize, dst: &mut [$t]) {
                panels::pack_panels(src, width, dst);
            }
        }

        // SAFETY: `compute` touches exactly the memory of the contract, and
        // `run` is only called where `is_available` holds, so the target
        // features `compute` was compiled for are present.
        unsafe impl Microkernel<$t> for $name {
            const MR: usize = $mr;
            const NR: usize = $nv * $lanes;
            const NAME: &'static str = $label;

            const DIRECT: bool = true;
            const LANES: usize = $lanes;

            fn is_available() -> bool {
                $detect()
            }

            #[inline]
            unsafe fn run_direct(
                kc: usize,
                alpha: $t,
                a: (*const $t, isize, isize),
                b: (*const $t, isize),
                beta: $t,
                c: (*mut $t, isize, isize),
                (rows, cols): (usize, usize),
            ) {
                debug_assert!((1..=$mr).contains(&rows) && (1..=Self::NR).contains(&cols));
                // SAFETY (each arm): forwarded contract, which includes
                // `is_available()`; NV·lanes ≥ cols columns are computed,
                // the last vector masked to `cols` when it is partial.
                unsafe {
                    macro_rules! with {
                        ($vectors:literal, $partial:literal) => {
                            Self::compute_direct::<$vectors, $partial>(
                                kc,
                                alpha,
                                a,
                                b,
                                beta,
                                c,
                                (rows, cols),
                            )
                        };
                    }
                    match (cols.div_ceil($lanes), cols % $lanes != 0) {
                        (1, false) if $nv > 1 => with!(1, false),
                        (1, true) if $nv > 1 => with!(1, true),
                        (2, false) if $nv > 2 => with!(2, false),
                        (2, true) if $nv > 2 => with!(2, true),
                        (_, false) => with!($nv, false),
                        (_, true) => with!($nv, true),
                    }
                }
            }

            #[inline]
            fn pack(src: MatRef<'_, $t>, width: usize, dst: &mut [$t]) {
                assert!(
                    Self::is_available(),
                    "{} packing without its CPU features",
                    $label
                );
                // SAFETY: the features `pack_with_features` was compiled for
                // are present (asserted above).
                unsafe { Self::pack_with_features(src, width, dst) }
            }

            #[inline]
            unsafe fn run(
                kc: usize,
                alpha: $t,
                a: *const $t,
                b: *const $t,
                beta: $t,
                (c, rs_c, cs_c): (*mut $t, isize, isize),
            ) {
                // SAFETY: forwarded contract, which includes `is_available()`.
                unsafe { Self::compute(kc, a, b, beta, &[(alpha, c)], rs_c, cs_c) }
            }

            #[inline]
            unsafe fn run_multi(
                kc: usize,
                a: *const $t,
                b: *const $t,
                beta: $t,
                dests: &[($t, *mut $t)],
                rs_c: isize,
                cs_c: isize,
            ) {
                // SAFETY: forwarded contract, which includes `is_available()`.
                unsafe { Self::compute(kc, a, b, beta, dests, rs_c, cs_c) }
            }

            #[inline]
            unsafe fn run_edge(
                kc: usize,
                alpha: $t,
                a: *const $t,
                b: *const $t,
                scratch: *mut $t,
                cols: usize,
            ) {
                debug_assert!((1..=Self::NR).contains(&cols));
                // SAFETY (each arm): forwarded contract, which includes
                // `is_available()`; NV·lanes ≥ cols columns are computed.
                unsafe {
                    match cols.div_ceil($lanes) {
                        1 if $nv > 1 => Self::compute_columns::<1>(kc, alpha, a, b, scratch),
                        2 if $nv > 2 => Self::compute_columns::<2>(kc, alpha, a, b, scratch),
                        _ => <Self as Microkernel<$t>>::run(
                            kc,
                            alpha,
                            a,
                            b,
                            <$t as Element>::ZERO,
                            (scratch, Self::NR as isize, 1),
                        ),
                    }
                }
            }
        }
    };
}

/// Declares a module of vector operations compiled for `$features`.
macro_rules! vector_ops {
    ($module:ident, $features:literal, $t:ty, $v:ty,
     zero: $zero:expr, load: $load:expr, store: $store:expr, splat: $splat:expr,
     fma: $fma:expr, mul: $mul:expr, load_first: $load_first:expr, store_first: $store_first:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use std::arch::x86_64::*;

            #[target_feature(enable = $features)]
            #[inline]
            pub(super) fn zero() -> $v {
                $zero
            }
            /// # Safety
            /// `p` points to a full vector of readable elements.
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) unsafe fn load(p: *const $t) -> $v {
                // SAFETY: forwarded to the caller; unaligned load.
                unsafe { $load(p) }
            }
            /// # Safety
            /// `p` points to a full vector of writable elements.
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) unsafe fn store(p: *mut $t, x: $v) {
                // SAFETY: forwarded to the caller; unaligned store.
                unsafe { $store(p, x) }
            }
            /// The first `count` elements at `p` (1 ≤ count ≤ lanes), the
            /// other lanes zero: a masked load, which reads and faults on
            /// nothing past them.
            ///
            /// # Safety
            /// `p` points to `count` readable elements.
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) unsafe fn load_first(p: *const $t, count: usize) -> $v {
                // SAFETY: forwarded to the caller; the mask covers `count`.
                unsafe { $load_first(p, count) }
            }
            /// Writes the first `count` lanes of `x` to `p` (1 ≤ count ≤
            /// lanes), a masked store that touches nothing past them.
            ///
            /// # Safety
            /// `p` points to `count` writable elements.
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) unsafe fn store_first(p: *mut $t, count: usize, x: $v) {
                // SAFETY: forwarded to the caller; the mask covers `count`.
                unsafe { $store_first(p, count, x) }
            }
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) fn splat(x: $t) -> $v {
                $splat(x)
            }
            /// acc + a·b.
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) fn fma(a: $v, b: $v, acc: $v) -> $v {
                $fma(a, b, acc)
            }
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) fn mul(a: $v, b: $v) -> $v {
                $mul(a, b)
            }
        }
    };
}

vector_ops!(f32x16, "avx512f,avx512dq,fma", f32, __m512,
    zero: _mm512_setzero_ps(), load: |p: *const f32| _mm512_loadu_ps(p), store: |p: *mut f32, x| _mm512_storeu_ps(p, x),
    splat: _mm512_set1_ps, fma: |a, b, acc| _mm512_fmadd_ps(a, b, acc), mul: _mm512_mul_ps,
    load_first: |p: *const f32, n| _mm512_maskz_loadu_ps(super::mask16(n), p), store_first: |p: *mut f32, n, x| _mm512_mask_storeu_ps(p, super::mask16(n), x));
vector_ops!(f64x8, "avx512f,avx512dq,fma", f64, __m512d,
    zero: _mm512_setzero_pd(), load: |p: *const f64| _mm512_loadu_pd(p), store: |p: *mut f64, x| _mm512_storeu_pd(p, x),
    splat: _mm512_set1_pd, fma: |a, b, acc| _mm512_fmadd_pd(a, b, acc), mul: _mm512_mul_pd,
    load_first: |p: *const f64, n| _mm512_maskz_loadu_pd(super::mask8(n), p), store_first: |p: *mut f64, n, x| _mm512_mask_storeu_pd(p, super::mask8(n), x));
vector_ops!(i32x16, "avx512f,avx512dq,fma", i32, __m512i,
    zero: _mm512_setzero_si512(), load: |p: *const i32| _mm512_loadu_si512(p.cast()), store: |p: *mut i32, x| _mm512_storeu_si512(p.cast(), x),
    splat: _mm512_set1_epi32, fma: |a, b, acc| _mm512_add_epi32(_mm512_mullo_epi32(a, b), acc), mul: _mm512_mullo_epi32,
    load_first: |p: *const i32, n| _mm512_maskz_loadu_epi32(super::mask16(n), p), store_first: |p: *mut i32, n, x| _mm512_mask_storeu_epi32(p, super::mask16(n), x));
vector_ops!(i64x8, "avx512f,avx512dq,fma", i64, __m512i,
    zero: _mm512_setzero_si512(), load: |p: *const i64| _mm512_loadu_si512(p.cast()), store: |p: *mut i64, x| _mm512_storeu_si512(p.cast(), x),
    splat: _mm512_set1_epi64, fma: |a, b, acc| _mm512_add_epi64(_mm512_mullo_epi64(a, b), acc), mul: _mm512_mullo_epi64,
    load_first: |p: *const i64, n| _mm512_maskz_loadu_epi64(super::mask8(n), p), store_first: |p: *mut i64, n, x| _mm512_mask_storeu_epi64(p, super::mask8(n), x));
vector_ops!(f32x8, "avx2,fma", f32, __m256,
    zero: _mm256_setzero_ps(), load: |p: *const f32| _mm256_loadu_ps(p), store: |p: *mut f32, x| _mm256_storeu_ps(p, x),
    splat: _mm256_set1_ps, fma: |a, b, acc| _mm256_fmadd_ps(a, b, acc), mul: _mm256_mul_ps,
    load_first: |p: *const f32, n| _mm256_maskload_ps(p, super::lanes32(n)), store_first: |p: *mut f32, n, x| _mm256_maskstore_ps(p, super::lanes32(n), x));
vector_ops!(f64x4, "avx2,fma", f64, __m256d,
    zero: _mm256_setzero_pd(), load: |p: *const f64| _mm256_loadu_pd(p), store: |p: *mut f64, x| _mm256_storeu_pd(p, x),
    splat: _mm256_set1_pd, fma: |a, b, acc| _mm256_fmadd_pd(a, b, acc), mul: _mm256_mul_pd,
    load_first: |p: *const f64, n| _mm256_maskload_pd(p, super::lanes64(n)), store_first: |p: *mut f64, n, x| _mm256_maskstore_pd(p, super::lanes64(n), x));
vector_ops!(i32x8, "avx2,fma", i32, __m256i,
    zero: _mm256_setzero_si256(), load: |p: *const i32| _mm256_loadu_si256(p.cast()), store: |p: *mut i32, x| _mm256_storeu_si256(p.cast(), x),
    splat: _mm256_set1_epi32, fma: |a, b, acc| _mm256_add_epi32(_mm256_mullo_epi32(a, b), acc), mul: _mm256_mullo_epi32,
    load_first: |p: *const i32, n| _mm256_maskload_epi32(p, super::lanes32(n)), store_first: |p: *mut i32, n, x| _mm256_maskstore_epi32(p, super::lanes32(n), x));
vector_ops!(i64x4, "avx2,fma", i64, __m256i,
    zero: _mm256_setzero_si256(), load: |p: *const i64| _mm256_loadu_si256(p.cast()), store: |p: *mut i64, x| _mm256_storeu_si256(p.cast(), x),
    splat: _mm256_set1_epi64x, fma: |a, b, acc| _mm256_add_epi64(super::mullo_epi64_avx2(a, b), acc), mul: super::mullo_epi64_avx2,
    load_first: |p: *const i64, n| _mm256_maskload_epi64(p, super::lanes64(n)), store_first: |p: *mut i64, n, x| _mm256_maskstore_epi64(p, super::lanes64(n), x));

/// The mask of the first `count` of 16 lanes (1 ≤ count ≤ 16).
#[inline(always)]
fn mask16(count: usize) -> __mmask16 {
    (u32::MAX >> (32 - count)) as __mmask16
}

/// The mask of the first `count` of 8 lanes (1 ≤ count ≤ 8).
#[inline(always)]
fn mask8(count: usize) -> __mmask8 {
    (u32::MAX >> (32 - count)) as __mmask8
}

/// AVX2's mask of the first `count` of eight 32-bit lanes (1 ≤ count ≤
/// 8): all ones in a lane below `count`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn lanes32(count: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(count as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// AVX2's mask of the first `count` of four 64-bit lanes (1 ≤ count ≤ 4).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn lanes64(count: usize) -> __m256i {
    _mm256_cmpgt_epi64(
        _mm256_set1_epi64x(count as i64),
        _mm256_setr_epi64x(0, 1, 2, 3),
    )
}

/// Low 64 bits of each 64×64-bit lane product, which AVX2 lacks:
/// a·b mod 2^64 = lo(a)·lo(b) + 2^32·(hi(a)·lo(b) + lo(a)·hi(b)).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn mullo_epi64_avx2(a: __m256i, b: __m256i) -> __m256i {
    let low = _mm256_mul_epu32(a, b);
    let cross = _mm256_add_epi64(
        _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), b),
        _mm256_mul_epu32(a, _mm256_srli_epi64::<32>(b)),
    );
    _mm256_add_epi64(low, _mm256_slli_epi64::<32>(cross))
}

simd_kernel!(
    Avx512F32,
    f32,
    8,
    3,
    16,
    "avx512 8x48",
    "avx512f,avx512dq,fma",
    has_avx512,
    f32x16,
    avx512_f32_8x48_k_loop
);
simd_kernel!(
    Avx512F64,
    f64,
    8,
    3,
    8,
    "avx512 8x24",
    "avx512f,avx512dq,fma",
    has_avx512,
    f64x8,
    avx512_f64_8x24_k_loop
);
simd_kernel!(
    Avx512I32,
    i32,
    12,
    2,
    16,
    "avx512 12x32",
    "avx512f,avx512dq,fma",
    has_avx512,
    i32x16
);
simd_kernel!(
    Avx512I64,
    i64,
    12,
    2,
    8,
    "avx512 12x16",
    "avx512f,avx512dq,fma",
    has_avx512,
    i64x8
);
simd_kernel!(
    Avx2F32,
    f32,
    6,
    2,
    8,
    "avx2 6x16",
    "avx2,fma",
    has_avx2,
    f32x8
);
simd_kernel!(
    Avx2F64,
    f64,
    6,
    2,
    4,
    "avx2 6x8",
    "avx2,fma",
    has_avx2,
    f64x4,
    avx2_f64_6x8_k_loop
);
simd_kernel!(
    Avx2I32,
    i32,
    6,
    2,
    8,
    "avx2 6x16",
    "avx2,fma",
    has_avx2,
    i32x8
);
simd_kernel!(Avx2I64, i64, 4, 2, 4, "avx2 4x8", "avx2,fma", has_avx2, i64x4);
