//! Small complex products in one pass (`cpu::complex_direct`, taken by
//! `complex::gemm` on the CPU under default options): against the same
//! product as four planned real products (options that skip the one-pass
//! path), for f32 and f64, interleaved storage as a BLAS passes it (odd
//! leading dimensions), transposed views, split planes, complex α and β,
//! β = 0 over a NaN-filled C, and shapes from empty to past the direct
//! path; and exactly on Gaussian integers.

use fastmm::complex::{gemm, ComplexForm, SplitMut, SplitRef};
use fastmm::random::seeded_rng;
use fastmm::{Context, Element, GemmOptions, MatMut, MatRef};
use rand::Rng;

/// Column-major interleaved storage of a rows×cols complex matrix with
/// leading dimension ld (in complex elements), as a BLAS receives it.
struct Interleaved<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
    ld: usize,
}

impl<T: Element> Interleaved<T> {
    fn random(rows: usize, cols: usize, extra: usize, rng: &mut impl Rng, ints: bool) -> Self {
        let ld = (rows + extra).max(1);
        let len = 2 * ld * cols.max(1);
        let data = (0..len)
            .map(|_| match ints {
                true => T::from_i64(rng.random_range(-4..=4)),
                false => T::from_f64(rng.random_range(-1.0..1.0)),
            })
            .collect();
        Interleaved {
            data,
            rows,
            cols,
            ld,
        }
    }

    /// The stored matrix's parts, transposed when `t`.
    fn split(&self, t: bool) -> SplitRef<'_, T> {
        let view = |offset: usize| {
            let v = MatRef::from_slice_strided(
                &self.data[offset..],
                self.rows,
                self.cols,
                2,
                2 * self.ld,
            )
            .expect("inside the storage");
            if t {
                v.t()
            } else {
                v
            }
        };
        SplitRef {
            re: view(0),
            im: view(1),
        }
    }

    fn split_mut(&mut self) -> SplitMut<'_, T> {
        let (rows, cols, ld) = (self.rows, self.cols, self.ld);
        let base = self.data.as_mut_ptr();
        // SAFETY: element (i, j) of the real view is data[2i + 2j·ld], of
        // the imaginary view the element after it: disjoint, inside data
        // (2·ld·cols elements, ld ≥ rows), borrowed mutably for the views'
        // lifetime.
        unsafe {
            SplitMut {
                re: MatMut::from_raw_parts(base, rows, cols, 2, 2 * ld),
                im: MatMut::from_raw_parts(base.add(1), rows, cols, 2, 2 * ld),
            }
        }
    }
}

/// The largest |x − y| over the stored numbers (NaN padding, the same in
/// both, ignored).
fn differ<T: Element>(x: &Interleaved<T>, y: &Interleaved<T>) -> f64 {
    x.data
        .iter()
        .zip(&y.data)
        .map(|(p, q)| (p.to_f64() - q.to_f64()).abs())
        .fold(0.0, f64::max)
}

fn check<T: Element>(unit: f64) {
    let ctx = Context::cpu();
    let fast = GemmOptions::default();
    // Options off the defaults: the complex product as planned real
    // products, the one-pass path skipped.
    let mut planned = GemmOptions::default();
    planned.cpu.parallel_from = Some(1 << 20);
    let mut rng = seeded_rng(31);
    let shapes = [
        (0, 3, 2),
        (3, 0, 2),
        (2, 3, 0),
        (1, 1, 1),
        (2, 2, 2),
        (3, 5, 2),
        (4, 4, 4),
        (5, 7, 3),
        (8, 8, 8),
        (7, 9, 15),
        (16, 16, 16),
        (13, 29, 31),
        (33, 17, 65),
        (64, 64, 64),
        (1, 300, 1),
        (100, 3, 7),
        // Past the direct path: the one real product on `packed`'s
        // threads.
        (128, 128, 128),
        (150, 200, 97),
    ];
    let nan = T::from_f64(f64::NAN);
    let scalars = [
        ([T::ONE, T::ZERO], [T::ZERO, T::ZERO]),
        (
            [T::from_f64(2.0), T::from_f64(-1.0)],
            [T::from_f64(0.5), T::from_f64(0.25)],
        ),
        ([T::from_f64(-1.5), T::ZERO], [T::ZERO, T::ZERO]),
    ];
    for (m, k, n) in shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            for extra in [0, 3] {
                for ints in [false, true] {
                    let (sa, sb) = match (ta, tb) {
                        (false, false) => ((m, k), (k, n)),
                        (true, false) => ((k, m), (k, n)),
                        (false, true) => ((m, k), (n, k)),
                        (true, true) => ((k, m), (n, k)),
                    };
                    let a = Interleaved::<T>::random(sa.0, sa.1, extra, &mut rng, ints);
                    let b = Interleaved::<T>::random(sb.0, sb.1, extra + 1, &mut rng, ints);
                    let c0 = Interleaved::<T>::random(m, n, extra, &mut rng, ints);
                    for (alpha, beta) in scalars {
                        let start = || {
                            let mut c = Interleaved {
                                data: c0.data.clone(),
                                ..c0
                            };
                            if beta == [T::ZERO; 2] {
                                c.data.iter_mut().for_each(|x| *x = nan);
                            }
                            c
                        };
                        let run = |opts: &GemmOptions| {
                            let mut c = start();
                            let (a, b) = (a.split(ta), b.split(tb));
                            let form = ComplexForm::Classical;
                            gemm(&ctx, alpha, a, b, beta, c.split_mut(), form, opts).map(|()| c)
                        };
                        let one_pass = run(&fast).expect("one pass");
                        let four = run(&planned).expect("planned");
                        let what = format!(
                            "{:?} {m}×{k}×{n} t=({ta},{tb}) ld+{extra} ints={ints} α={:?} β={:?}",
                            T::DTYPE,
                            alpha.map(|x| x.to_f64()),
                            beta.map(|x| x.to_f64())
                        );
                        // Only the stored elements of C are compared: the
                        // padding rows stay as they were (NaN where β = 0
                        // filled them, in both).
                        let d = differ(&one_pass, &four);
                        match ints {
                            // Gaussian integers: exact either way.
                            true => assert!(d == 0.0, "{what}: differ by {d}"),
                            // Within the classical bound of each (|α| ≤ 2.3,
                            // |β| ≤ 0.6, entries below 1): 2·(k+2)·u·scale.
                            false => {
                                let scale = 2.3 * (2 * k) as f64 + 0.6 * 2.0 + 1.0;
                                let bound = 2.0 * (k as f64 + 2.0) * unit * scale;
                                assert!(d <= bound, "{what}: differ by {d} > {bound}");
                            }
                        }
                        // β = 0 ignored the NaN in every element of C.
                        if beta == [T::ZERO; 2] {
                            for j in 0..n {
                                for i in 0..m {
                                    let at = 2 * (i + j * one_pass.ld);
                                    assert!(
                                        !one_pass.data[at].to_f64().is_nan()
                                            && !one_pass.data[at + 1].to_f64().is_nan(),
                                        "{what}: NaN left at ({i}, {j})"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn one_pass_complex_products_match_the_planned_ones_f64() {
    check::<f64>(f64::EPSILON / 2.0);
}

#[test]
fn one_pass_complex_products_match_the_planned_ones_f32() {
    check::<f32>(f32::EPSILON as f64 / 2.0);
}

/// The one-pass path shares larger products among threads, each a band of
/// C's columns: every count gives the same bits (each element is the same
/// sum in the same order), for both layouts, α and β.
fn same_bits_on_any_threads<T: Element>() {
    let ctx = Context::cpu();
    let mut rng = seeded_rng(77);
    let shapes = [
        (40, 40, 40),
        (33, 50, 71),
        (64, 64, 64),
        (96, 17, 130),
        (130, 96, 9),
    ];
    let scalars = [
        ([T::ONE, T::ZERO], [T::ZERO, T::ZERO]),
        (
            [T::from_f64(0.75), T::from_f64(-1.25)],
            [T::from_f64(-0.5), T::from_f64(2.0)],
        ),
    ];
    for (m, k, n) in shapes {
        for (ta, tb) in [(false, false), (true, true)] {
            let sa = if ta { (k, m) } else { (m, k) };
            let sb = if tb { (n, k) } else { (k, n) };
            let a = Interleaved::<T>::random(sa.0, sa.1, 1, &mut rng, false);
            let b = Interleaved::<T>::random(sb.0, sb.1, 2, &mut rng, false);
            let c0 = Interleaved::<T>::random(m, n, 3, &mut rng, false);
            for (alpha, beta) in scalars {
                let run = |threads: usize| {
                    let mut c = Interleaved {
                        data: c0.data.clone(),
                        ..c0
                    };
                    let opts = GemmOptions::default().threads(threads);
                    let form = ComplexForm::Classical;
                    let (a, b) = (a.split(ta), b.split(tb));
                    gemm(&ctx, alpha, a, b, beta, c.split_mut(), form, &opts).expect("product");
                    c.data
                        .iter()
                        .map(|x| x.to_f64().to_bits())
                        .collect::<Vec<_>>()
                };
                let one = run(1);
                for threads in [2, 3, 5] {
                    assert!(
                        run(threads) == one,
                        "{:?} {m}×{k}×{n} t=({ta},{tb}) on {threads} threads",
                        T::DTYPE
                    );
                }
            }
        }
    }
}

#[test]
fn shared_complex_products_give_the_same_bits_f64() {
    same_bits_on_any_threads::<f64>();
}

#[test]
fn shared_complex_products_give_the_same_bits_f32() {
    same_bits_on_any_threads::<f32>();
}
