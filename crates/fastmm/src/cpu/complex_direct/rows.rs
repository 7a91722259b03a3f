//! Small complex products whose right operand has interleaved rows, in
//! AVX-512 registers: C ← α·A·B + β·C, rows of C from rows of B.
//!
//! A row of interleaved B is a vector of (re, im) pairs. For a tile of R
//! rows of C and one vector of B's columns, `x[r]` sums Aᵣ(i, p)·B(p, ·)
//! and `y[r]` Aᵢ(i, p)·B(p, ·) over the depth: their lanes hold Σ AᵣBᵣ,
//! Σ AᵣBᵢ and Σ AᵢBᵣ, Σ AᵢBᵢ — the classical form's four real sums, kept
//! apart and each accumulated in the depth's order (a fused multiply-add
//! per step, as `packed`'s kernels do). Then x ∓ swap(y) in one rounding
//! gives the element, and α, β are applied per element as
//! the parent module's combining pass applies them. So the sums and
//! the bound are those of the stacked real product this replaces where it
//! is small: no copy, no workspace, no second product, no pass over a
//! buffer. The loop of `complex_direct` is its reference twin
//! (`tests/suite/complex_direct.rs` compares them).

use crate::element::{DType, Element};
use crate::matrix::{MatMut, MatRef};

/// Whether [`product`] runs here for T: an x86-64 CPU with AVX-512F, f32
/// or f64. Asked once per process.
pub(crate) fn available<T: Element>() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static AVX512: std::sync::LazyLock<bool> =
            std::sync::LazyLock::new(|| is_x86_feature_detected!("avx512f"));
        matches!(T::DTYPE, DType::F32 | DType::F64) && *AVX512
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// C ← α·A·B + β·C where `br`, B's real view, has interleaved rows (its
/// imaginary view the element after each, column stride 2), shapes
/// checked by the caller, [`available`] for T. False (nothing written)
/// where it is not.
pub(crate) fn product<T: Element>(
    alpha: [T; 2],
    a: (MatRef<'_, T>, MatRef<'_, T>),
    br: MatRef<'_, T>,
    beta: [T; 2],
    c: (MatMut<'_, T>, MatMut<'_, T>),
) -> bool {
    if !available::<T>() || br.col_stride() != 2 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let args = Args::new(alpha, a, br, beta, c);
        match T::DTYPE {
            // SAFETY: AVX-512F is present (`available`); T is f64, so its
            // views' elements are f64 at the same addresses; `Args::new`
            // took the views' shapes and strides, which the kernel keeps
            // within.
            DType::F64 => unsafe { avx512::rows_f64(&args.cast::<f64>()) },
            // SAFETY: as above, T being f32.
            DType::F32 => unsafe { avx512::rows_f32(&args.cast::<f32>()) },
            DType::I32 | DType::I64 => return false,
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (alpha, a, beta, c);
        false
    }
}

/// The views as addresses and strides (in elements), for the kernels.
#[derive(Clone, Copy)]
struct Args<T> {
    /// m, k, n.
    shape: (usize, usize, usize),
    alpha: [T; 2],
    beta: [T; 2],
    /// A's real and imaginary parts, with (row, column) strides each.
    a: [(*const T, (isize, isize)); 2],
    /// B's real part; its rows lie `ldb` apart, its parts interleaved.
    b: *const T,
    ldb: isize,
    /// C's real and imaginary parts, with (row, column) strides each.
    c: [(*mut T, (isize, isize)); 2],
}

impl<T: Element> Args<T> {
    fn new(
        alpha: [T; 2],
        (ar, ai): (MatRef<'_, T>, MatRef<'_, T>),
        br: MatRef<'_, T>,
        beta: [T; 2],
        (mut cr, mut ci): (MatMut<'_, T>, MatMut<'_, T>),
    ) -> Args<T> {
        let at = |v: &MatRef<'_, T>| (v.row_stride() as isize, v.col_stride() as isize);
        let (sr, si) = (at(&cr.rb()), at(&ci.rb()));
        Args {
            shape: (ar.rows(), ar.cols(), br.cols()),
            alpha,
            beta,
            a: [(ar.as_ptr(), at(&ar)), (ai.as_ptr(), at(&ai))],
            b: br.as_ptr(),
            ldb: br.row_stride() as isize,
            c: [(cr.as_mut_ptr(), sr), (ci.as_mut_ptr(), si)],
        }
    }

    /// The same addresses as U's, T being U.
    fn cast<U: Element>(&self) -> Args<U> {
        debug_assert_eq!(T::DTYPE, U::DTYPE);
        let scalar = |x: [T; 2]| x.map(|v| U::from_f64(v.to_f64()));
        Args {
            shape: self.shape,
            alpha: scalar(self.alpha),
            beta: scalar(self.beta),
            a: self.a.map(|(p, s)| (p.cast::<U>(), s)),
            b: self.b.cast::<U>(),
            ldb: self.ldb,
            c: self.c.map(|(p, s)| (p.cast::<U>(), s)),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::super::scaled;
    use super::Args;

    /// The rows of C in tiles of R rows by one vector of B's columns
    /// (`$lanes` values, half as many elements), the last vector masked.
    macro_rules! rows_kernel {
        ($name:ident, $tile:ident, $t:ty, $v:ty, $mask:ty, $lanes:literal,
         zero: $zero:path, load: $load:path, set1: $set1:path, fma: $fma:path,
         fmaddsub: $fmaddsub:path, swap: $swap:ident, pairs: $pairs:literal, store: $store:path,
         mul: $mul:path, add: $add:path, mask_store: $mask_store:path) => {
            /// # Safety
            /// AVX-512F is present; `args` describes valid views: A m×k,
            /// B k×n with interleaved rows, C m×n, C's parts disjoint from
            /// each other and from A and B.
            #[target_feature(enable = "avx512f")]
            pub(super) unsafe fn $name(args: &Args<$t>) {
                let (m, _, n) = args.shape;
                let mut i = 0;
                while i + 4 <= m {
                    // SAFETY: rows i..i+4 lie in C (the loop's bound);
                    // forwarded to the caller otherwise.
                    unsafe { $tile::<4>(args, i, n) };
                    i += 4;
                }
                while i < m {
                    // SAFETY: as above, row i.
                    unsafe { $tile::<1>(args, i, n) };
                    i += 1;
                }
            }

            /// Rows i..i+R of C, every column.
            ///
            /// # Safety
            /// As the kernel's, and i + R ≤ m.
            #[target_feature(enable = "avx512f")]
            #[inline]
            unsafe fn $tile<const R: usize>(args: &Args<$t>, i: usize, n: usize) {
                const HALF: usize = $lanes / 2;
                let (_, k, _) = args.shape;
                let [(ar, (ar_i, ar_p)), (ai, (ai_i, ai_p))] = args.a;
                let [(cr, (cr_i, cr_j)), (ci, (ci_i, ci_j))] = args.c;
                // C's rows interleaved as B's are (numpy's row-major
                // arrays; the BLAS's columns for Cᵀ): α and β applied in
                // the registers, as `times` and `scaled` apply them element
                // by element (each product and sum one rounding, so the
                // same digits). Decided here, once: C's stores through raw
                // addresses would have the arguments read again per row.
                let fused = cr_j == 2 && ci_j == 2 && cr_i == ci_i && ci == cr.wrapping_add(1);
                let (alpha, beta) = (args.alpha, args.beta);
                let keep_c = beta != [0.0; 2];
                let times = |s: $v, [re, im]: [$t; 2]| {
                    $fmaddsub(
                        $set1(1.0),
                        $mul($set1(re), s),
                        $mul($set1(im), $swap::<$pairs>(s)),
                    )
                };
                let mut j0 = 0;
                while j0 < n {
                    let count = (n - j0).min(HALF);
                    let mask: $mask =
                        (((1u64 << (2 * count)) - 1) & ((1u64 << $lanes) - 1)) as $mask;
                    let (mut x, mut y) = ([$zero(); R], [$zero(); R]);
                    for p in 0..k {
                        // SAFETY: row p < k of B holds n interleaved
                        // elements from `args.b + p·ldb`; the mask reads
                        // the 2·count values of elements j0..j0 + count.
                        let row = unsafe {
                            $load(mask, args.b.offset(p as isize * args.ldb + 2 * j0 as isize))
                        };
                        for r in 0..R {
                            let at = (i + r) as isize;
                            // SAFETY: row i + r < m, column p < k of A's
                            // views, at their strides.
                            let (u, v) = unsafe {
                                (
                                    *ar.offset(at * ar_i + p as isize * ar_p),
                                    *ai.offset(at * ai_i + p as isize * ai_p),
                                )
                            };
                            x[r] = $fma($set1(u), row, x[r]);
                            y[r] = $fma($set1(v), row, y[r]);
                        }
                    }
                    // Even lanes x − swap(y): ΣAᵣBᵣ − ΣAᵢBᵢ; odd lanes
                    // x + swap(y): ΣAᵣBᵢ + ΣAᵢBᵣ; one rounding.
                    let sums: [$v; R] =
                        std::array::from_fn(|r| $fmaddsub($set1(1.0), x[r], $swap::<$pairs>(y[r])));
                    if fused {
                        // Apart from the element path, so that this short
                        // loop unrolls and the sums stay in registers.
                        for (r, &sum) in sums.iter().enumerate() {
                            // SAFETY: row i + r of C holds its elements
                            // j0..j0 + count as 2·count interleaved values
                            // from this address (its column stride 2, the
                            // imaginary part after the real); the mask
                            // touches those alone.
                            unsafe {
                                let to = cr.offset((i + r) as isize * cr_i + 2 * j0 as isize);
                                let mut z = times(sum, alpha);
                                if keep_c {
                                    let c = $load(mask, to);
                                    z = $add(z, times(c, beta));
                                }
                                $mask_store(to, mask, z);
                            }
                        }
                    } else {
                        for (r, &sum) in sums.iter().enumerate() {
                            let at = (i + r) as isize;
                            let mut out = [0.0 as $t; $lanes];
                            // SAFETY: `out` holds $lanes values.
                            unsafe { $store(out.as_mut_ptr(), sum) };
                            for e in 0..count {
                                let j = (j0 + e) as isize;
                                // SAFETY: element (i + r, j) of C's two
                                // disjoint views, inside them.
                                unsafe {
                                    let re = cr.offset(at * cr_i + j * cr_j);
                                    let im = ci.offset(at * ci_i + j * ci_j);
                                    let z =
                                        scaled(alpha, [out[2 * e], out[2 * e + 1]], beta, || {
                                            [*re, *im]
                                        });
                                    (*re, *im) = (z[0], z[1]);
                                }
                            }
                        }
                    }
                    j0 += HALF;
                }
            }
        };
    }

    rows_kernel!(rows_f64, tile_f64, f64, __m512d, __mmask8, 8,
        zero: _mm512_setzero_pd, load: _mm512_maskz_loadu_pd, set1: _mm512_set1_pd,
        fma: _mm512_fmadd_pd, fmaddsub: _mm512_fmaddsub_pd,
        swap: _mm512_permute_pd, pairs: 0x55, store: _mm512_storeu_pd,
        mul: _mm512_mul_pd, add: _mm512_add_pd, mask_store: _mm512_mask_storeu_pd);
    rows_kernel!(rows_f32, tile_f32, f32, __m512, __mmask16, 16,
        zero: _mm512_setzero_ps, load: _mm512_maskz_loadu_ps, set1: _mm512_set1_ps,
        fma: _mm512_fmadd_ps, fmaddsub: _mm512_fmaddsub_ps,
        swap: _mm512_permute_ps, pairs: 0xB1, store: _mm512_storeu_ps,
        mul: _mm512_mul_ps, add: _mm512_add_ps, mask_store: _mm512_mask_storeu_ps);
}
