//! The small products' path: the microkernel straight on A and B, with
//! no packing (BLIS's "sup" kernels, OpenBLAS's small-matrix kernels).
//!
//! Packing pays for itself by making every kernel call read contiguous
//! panels from the cache level the blocks target; for a product whose
//! operands already sit in L1 or L2 it only costs time. At 64³ f32,
//! packing A (a transpose into column panels) and B took a quarter of a
//! 3.4 µs product. Here the kernel broadcasts A's elements from A's own
//! rows (any strides) and loads B's rows where they lie, so B must have
//! contiguous rows; a last column panel that ends inside a vector is read
//! and written with masked loads and stores, so nothing is copied. Loops: the packed
//! loops' KC steps of k (C accumulates across them), then NR-wide column
//! panels of B, whose kc×NR block stays in cache while every MR-row panel
//! of A streams past it.

use crate::cpu::packed::blocking::balanced_block;
use crate::cpu::packed::kernel::Microkernel;
use crate::element::Element;
use crate::matrix::{MatMut, MatRef};

/// C ← α·A·B + β·C with kernel K on the caller's thread, k cut in equal
/// steps of at most `kc`, as the packed loops cut it
/// ([`balanced_block`]), so that each element's sum runs in the same
/// order on this path and on theirs: a product gives the same bits on
/// one thread (here) and on several (packed). B's columns must be
/// contiguous (`col_stride == 1`, or one column); m, n and k at least 1.
pub(crate) fn gemm_direct<T: Element, K: Microkernel<T>>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    kc: usize,
) {
    let (m, k) = a.shape();
    let n = b.cols();
    assert!(
        m > 0 && n > 0 && k > 0 && (b.col_stride() == 1 || n == 1) && kc > 0,
        "the direct path takes non-empty products with contiguous rows of B"
    );
    assert!(
        K::is_available(),
        "kernel {} dispatched on a CPU without its features",
        K::NAME
    );
    let (rs_a, cs_a) = (a.row_stride() as isize, a.col_stride() as isize);
    let rs_b = b.row_stride() as isize;
    let (rs_c, cs_c) = (c.row_stride() as isize, c.col_stride() as isize);
    // One block where k fits (what `balanced_block` gives then), without
    // its divisions: a tenth of a 2³ product's time.
    let kc = if k <= kc {
        k
    } else {
        balanced_block(k, kc, 1, (0, 1))
    };
    let c_ptr = c.as_mut_ptr();
    for pc in (0..k).step_by(kc) {
        let kb = kc.min(k - pc);
        let beta_here = if pc == 0 { beta } else { T::ONE };
        for (j0, cols) in column_panels(n, K::NR, K::LANES) {
            // SAFETY: (pc, j0) is inside B (pc < k, j0 < n).
            let b_ptr = unsafe { b.as_ptr().offset(pc as isize * rs_b + j0 as isize) };
            for i0 in (0..m).step_by(K::MR) {
                let rows = K::MR.min(m - i0);
                // SAFETY: rows ≤ MR rows of A from i0 and kb columns from
                // pc lie inside A; B's kb rows from `b_ptr` each hold the
                // `cols` elements from j0 the kernel reads (j0 + cols ≤ n,
                // contiguous); the rows×cols tile of C at (i0, j0) lies
                // inside the exclusive view `c`; K's features were
                // asserted above.
                unsafe {
                    K::run_direct(
                        kb,
                        alpha,
                        (
                            a.as_ptr().offset(i0 as isize * rs_a + pc as isize * cs_a),
                            rs_a,
                            cs_a,
                        ),
                        (b_ptr, rs_b),
                        beta_here,
                        (
                            c_ptr.offset(i0 as isize * rs_c + j0 as isize * cs_c),
                            rs_c,
                            cs_c,
                        ),
                        (rows, cols),
                    )
                };
            }
        }
    }
}

/// B's n columns as panels of at most `nr` (a multiple of `lanes`):
/// (first column, width). The vectors are shared out evenly, so that no
/// panel is much narrower than the others: 64 columns of a 48-wide f32
/// kernel are two panels of 32, not 48 and a 16 whose one vector per k
/// step feeds eight multiply-adds on nine loads. Each element's sum runs
/// in the same order whatever its panel.
fn column_panels(n: usize, nr: usize, lanes: usize) -> impl Iterator<Item = (usize, usize)> {
    let vectors = n.div_ceil(lanes);
    let panels = vectors.div_ceil(nr / lanes);
    // One panel without the divisions (small products pay for them).
    let (base, wider) = match panels {
        1 => (vectors, 0),
        _ => (vectors / panels, vectors % panels),
    };
    (0..panels).scan(0, move |j0, p| {
        let width = (base + usize::from(p < wider)) * lanes;
        let panel = (*j0, width.min(n - *j0));
        *j0 += width;
        Some(panel)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::naive;
    use crate::cpu::packed::dispatch::kernels;
    use crate::matrix::Matrix;

    /// Small integers, so that every sum is exact in every type and the
    /// comparison with the naive product is exact.
    fn data<T: Element>(rows: usize, cols: usize, salt: usize) -> Matrix<T> {
        Matrix::from_fn(rows, cols, |i, j| {
            T::from_i64(((i * 7 + j * 3 + salt) % 19) as i64 - 9)
        })
    }

    /// Every direct kernel of T this CPU runs, over tile edges (MR ± 1,
    /// NR ± 1, one vector ± 1), k steps (KC ± 1), A stored either way, B
    /// as a block of a wider matrix, C row- and column-major, β = 0 over
    /// NaN and β ≠ 0: exactly the naive product.
    fn check<T: Element>() {
        const KC: usize = 8;
        for kernel in kernels::<T>().iter().filter(|k| (k.is_available)()) {
            let Some(direct) = kernel.direct else {
                continue;
            };
            let (mr, nr) = (kernel.mr, kernel.nr);
            let lanes = 64 / std::mem::size_of::<T>();
            let ms = [1, mr - 1, mr, mr + 1, 2 * mr + 3];
            let ns = [
                1,
                lanes - 1,
                lanes,
                lanes + 1,
                nr - 1,
                nr,
                nr + 1,
                2 * nr + 5,
            ];
            for &m in &ms {
                for &n in &ns {
                    for k in [1, KC - 1, KC, KC + 1, 2 * KC + 1] {
                        let a = data::<T>(m, k, 1);
                        let at = data::<T>(k, m, 2);
                        let wide = data::<T>(k, n + 5, 3);
                        let b = wide.as_ref().submatrix(0, 2, k, n);
                        for a_view in [a.as_ref(), at.as_ref().t()] {
                            for (alpha, beta) in
                                [(T::ONE, T::ZERO), (T::from_i64(2), T::from_i64(-3))]
                            {
                                let c0 = data::<T>(m, n, 4);
                                let mut want = c0.clone();
                                want.as_mut().scale_by(beta);
                                naive::accumulate(alpha, a_view, b, want.as_mut());
                                let start = if beta == T::ZERO { T::poison() } else { T::ONE };
                                let mut got = Matrix::filled(m, n, start);
                                if beta != T::ZERO {
                                    got = c0.clone();
                                }
                                direct(alpha, a_view, b, beta, got.as_mut(), KC);
                                assert!(got == want, "{} {m}×{k}×{n} row-major C", kernel.name);
                                let mut ct = Matrix::filled(n, m, start);
                                if beta != T::ZERO {
                                    ct = Matrix::from_view(c0.as_ref().t());
                                }
                                direct(alpha, a_view, b, beta, ct.as_mut().t(), KC);
                                assert!(
                                    Matrix::from_view(ct.as_ref().t()) == want,
                                    "{} {m}×{k}×{n} column-major C",
                                    kernel.name
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn direct_kernels_match_the_naive_product_f32() {
        check::<f32>();
    }

    #[test]
    fn direct_kernels_match_the_naive_product_f64() {
        check::<f64>();
    }

    #[test]
    fn direct_kernels_match_the_naive_product_i32() {
        check::<i32>();
    }

    #[test]
    fn direct_kernels_match_the_naive_product_i64() {
        check::<i64>();
    }

    /// `len` elements of T that end where an inaccessible page begins, so
    /// that reading or writing one element past them faults.
    struct Guarded<T> {
        base: *mut libc::c_void,
        bytes: usize,
        data: *mut T,
    }

    impl<T: Element> Guarded<T> {
        fn new(values: &[T]) -> Guarded<T> {
            let page = 4096;
            let len = std::mem::size_of_val(values);
            let bytes = (len.div_ceil(page) + 1) * page;
            // SAFETY: a fresh anonymous private mapping; the last page is
            // then made inaccessible and the data copied just before it.
            unsafe {
                let base = libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(base, libc::MAP_FAILED, "mmap");
                let guard = base.cast::<u8>().add(bytes - page);
                assert_eq!(libc::mprotect(guard.cast(), page, libc::PROT_NONE), 0);
                let data = guard.sub(len).cast::<T>();
                std::ptr::copy_nonoverlapping(values.as_ptr(), data, values.len());
                Guarded { base, bytes, data }
            }
        }
    }

    impl<T> Drop for Guarded<T> {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`, unmapped once.
            unsafe { libc::munmap(self.base, self.bytes) };
        }
    }

    /// A last column panel that ends inside a vector is read and written
    /// with masked accesses: B's and C's last rows end at an inaccessible
    /// page, and every direct kernel still runs without a fault and gives
    /// the naive product.
    fn masked_edges<T: Element>() {
        for kernel in kernels::<T>().iter().filter(|k| (k.is_available)()) {
            let Some(direct) = kernel.direct else {
                continue;
            };
            let lanes = 64 / std::mem::size_of::<T>();
            for (m, k, n) in [
                (3, 5, 1),
                (kernel.mr + 1, 7, lanes + 3),
                (2, 4, kernel.nr - 1),
            ] {
                let a = data::<T>(m, k, 1);
                let b = data::<T>(k, n, 2);
                let mut want = Matrix::filled(m, n, T::ZERO);
                naive::accumulate(T::ONE, a.as_ref(), b.as_ref(), want.as_mut());
                let b_guarded = Guarded::new(b.as_slice());
                let c_guarded = Guarded::new(&vec![T::poison(); m * n]);
                // SAFETY: each mapping holds the k×n and m×n row-major
                // elements copied into it and outlives the views.
                let (b_view, c_view) = unsafe {
                    (
                        MatRef::from_raw_parts(b_guarded.data.cast_const(), k, n, n, 1),
                        MatMut::from_raw_parts(c_guarded.data, m, n, n, 1),
                    )
                };
                direct(T::ONE, a.as_ref(), b_view, T::ZERO, c_view, 64);
                // SAFETY: as above; the product is finished.
                let got = unsafe { std::slice::from_raw_parts(c_guarded.data, m * n) };
                assert!(got == want.as_slice(), "{} {m}×{k}×{n}", kernel.name);
            }
        }
    }

    #[test]
    fn direct_kernels_mask_the_last_vector() {
        masked_edges::<f32>();
        masked_edges::<f64>();
        masked_edges::<i32>();
        masked_edges::<i64>();
    }

    /// The panels cover every column once, in order, each at most NR
    /// wide and whole vectors but the last, and never more of them than
    /// NR-wide panels would need.
    #[test]
    fn column_panels_cover_the_columns_evenly() {
        for (nr, lanes) in [(48, 16), (24, 8), (32, 16), (16, 8), (4, 1), (8, 4)] {
            for n in 1..200 {
                let panels: Vec<_> = column_panels(n, nr, lanes).collect();
                assert_eq!(panels.len(), n.div_ceil(nr), "n = {n}, NR = {nr}");
                let mut next = 0;
                for (i, &(j0, cols)) in panels.iter().enumerate() {
                    assert_eq!(j0, next);
                    assert!(cols >= 1 && cols <= nr);
                    if i + 1 < panels.len() {
                        assert_eq!(cols % lanes, 0);
                    }
                    next += cols;
                }
                assert_eq!(next, n);
            }
        }
        assert_eq!(
            column_panels(64, 48, 16).collect::<Vec<_>>(),
            [(0, 32), (32, 32)]
        );
    }

    /// The generic kernel's `run_direct` (the twin) on the same driver.
    #[test]
    fn the_reference_twin_runs_the_direct_driver() {
        use crate::cpu::packed::kernels::generic::Generic;
        let a = data::<f64>(9, 13, 1);
        let b = data::<f64>(13, 11, 2);
        let mut want = Matrix::filled(9, 11, 0.0);
        naive::accumulate(1.0, a.as_ref(), b.as_ref(), want.as_mut());
        let mut got = Matrix::filled(9, 11, f64::NAN);
        gemm_direct::<f64, Generic<f64, 4, 4>>(1.0, a.as_ref(), b.as_ref(), 0.0, got.as_mut(), 5);
        assert_eq!(got, want);
    }
}
