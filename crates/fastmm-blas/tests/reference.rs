//! The exported entry points against a naive column-major reference, as
//! a BLAS caller reaches them: every op pair, shapes 0, 1, odd and prime,
//! leading dimensions above the minimum, α and β (0, 1, others), C full
//! of NaN under β = 0, row- and column-major CBLAS, conjugation, and
//! illegal arguments (C untouched).

use fastmm_blas::{cblas, fortran};

/// Deterministic values in [-1, 1).
fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// op(X)(i, j) of a column-major complex X (re, im per element; real
/// types have im = 0) with leading dimension ld.
fn op_get(x: &[[f64; 2]], ld: usize, op: u8, i: usize, j: usize) -> [f64; 2] {
    match op {
        b'N' => x[i + j * ld],
        b'T' => x[j + i * ld],
        _ => {
            let v = x[j + i * ld];
            [v[0], -v[1]]
        }
    }
}

/// The reference C ← α·op(A)·op(B) + β·C (β = 0: C not read), and the
/// bound on each element's error: k·u·(|α|·Σ|a||b|) + u·|β c| scaled.
#[allow(clippy::too_many_arguments)]
fn reference(
    (ta, tb): (u8, u8),
    (m, n, k): (usize, usize, usize),
    alpha: [f64; 2],
    (a, lda): (&[[f64; 2]], usize),
    (b, ldb): (&[[f64; 2]], usize),
    beta: [f64; 2],
    (c, ldc): (&[[f64; 2]], usize),
) -> Vec<([f64; 2], f64)> {
    let mut out = Vec::new();
    for j in 0..n {
        for i in 0..m {
            let (mut s, mut mag) = ([0.0, 0.0], 0.0);
            for p in 0..k {
                let x = op_get(a, lda, ta, i, p);
                let y = op_get(b, ldb, tb, p, j);
                s[0] += x[0] * y[0] - x[1] * y[1];
                s[1] += x[0] * y[1] + x[1] * y[0];
                mag += (x[0].abs() + x[1].abs()) * (y[0].abs() + y[1].abs());
            }
            let mut v = [
                alpha[0] * s[0] - alpha[1] * s[1],
                alpha[0] * s[1] + alpha[1] * s[0],
            ];
            let mut bound = (alpha[0].abs() + alpha[1].abs()) * mag;
            if beta != [0.0, 0.0] {
                let old = c[i + j * ldc];
                v[0] += beta[0] * old[0] - beta[1] * old[1];
                v[1] += beta[0] * old[1] + beta[1] * old[0];
                bound += (beta[0].abs() + beta[1].abs()) * (old[0].abs() + old[1].abs());
            }
            out.push((v, bound));
        }
    }
    out
}

const SHAPES: &[(usize, usize, usize)] = &[
    (0, 3, 2),
    (3, 0, 2),
    (2, 3, 0),
    (1, 1, 1),
    (7, 5, 3),
    (13, 17, 11),
    (31, 2, 29),
    (64, 65, 63),
];
const SCALARS: &[([f64; 2], [f64; 2])] = &[
    ([1.0, 0.0], [0.0, 0.0]),
    ([0.5, 0.0], [1.0, 0.0]),
    ([-1.5, 0.25], [0.75, -0.5]),
    ([0.0, 0.0], [2.0, 0.0]),
    ([0.0, 0.0], [0.0, 0.0]),
];

/// An entry point under test: (transa, transb, (m, n, k), α, A, lda, B,
/// ldb, β, C, ldc), storage as complex pairs of f64.
type Entry<'a> = dyn Fn(
        u8,
        u8,
        (usize, usize, usize),
        [f64; 2],
        &[[f64; 2]],
        usize,
        &[[f64; 2]],
        usize,
        [f64; 2],
        &mut [[f64; 2]],
        usize,
    ) + 'a;

/// One type's products through `call` (a closure over the entry point
/// taking interleaved storage as f64 pairs converted to the type), each
/// checked against the reference within `unit`·(k + 2) of its magnitude.
fn check_all(complex: bool, unit: f64, call: &Entry<'_>) {
    let ops: &[u8] = if complex { b"NTC" } else { b"NT" };
    let mut seed = 1;
    for &(m, n, k) in SHAPES {
        for &ta in ops {
            for &tb in ops {
                for &(alpha, beta) in SCALARS {
                    let (alpha, beta) = match complex {
                        true => (alpha, beta),
                        false => ([alpha[0], 0.0], [beta[0], 0.0]),
                    };
                    seed += 1;
                    let (ra, ca) = if ta == b'N' { (m, k) } else { (k, m) };
                    let (rb, cb) = if tb == b'N' { (k, n) } else { (n, k) };
                    // Leading dimensions past the minimum: the gap must
                    // be neither read as data nor written.
                    let (lda, ldb, ldc) = (ra.max(1) + 2, rb.max(1) + 1, m.max(1) + 3);
                    let pairs = |len: usize, seed: u64| -> Vec<[f64; 2]> {
                        let v = values(2 * len, seed);
                        (0..len)
                            .map(|i| [v[2 * i], if complex { v[2 * i + 1] } else { 0.0 }])
                            .collect()
                    };
                    let a = pairs(lda * ca.max(1), seed);
                    let b = pairs(ldb * cb.max(1), seed + 1000);
                    let mut c = match beta == [0.0, 0.0] {
                        true => vec![[f64::NAN, f64::NAN]; ldc * n.max(1)],
                        false => pairs(ldc * n.max(1), seed + 2000),
                    };
                    // The gaps between columns of C hold a sentinel.
                    for j in 0..n {
                        for i in m..ldc {
                            c[i + j * ldc] = [7.0, if complex { 7.0 } else { 0.0 }];
                        }
                    }
                    let want = reference(
                        (ta, tb),
                        (m, n, k),
                        alpha,
                        (&a, lda),
                        (&b, ldb),
                        beta,
                        (&c, ldc),
                    );
                    call(
                        ta,
                        tb,
                        (m, n, k),
                        alpha,
                        &a,
                        lda,
                        &b,
                        ldb,
                        beta,
                        &mut c,
                        ldc,
                    );
                    let what = format!(
                        "{} {}{} {m}×{n}×{k} α {alpha:?} β {beta:?}",
                        if complex { "complex" } else { "real" },
                        ta as char,
                        tb as char
                    );
                    for j in 0..n {
                        for i in 0..m {
                            let (v, bound) = want[i + j * m];
                            let got = c[i + j * ldc];
                            for part in 0..2 {
                                let err = (got[part] - v[part]).abs();
                                assert!(
                                    err <= unit * (k as f64 + 2.0) * bound.max(f64::MIN_POSITIVE),
                                    "{what}: C({i},{j}) = {got:?}, want {v:?}"
                                );
                            }
                        }
                        for i in m..ldc {
                            assert_eq!(
                                c[i + j * ldc][0],
                                7.0,
                                "{what}: the gap of column {j} was written"
                            );
                        }
                    }
                }
            }
        }
    }
}

fn to<T: Copy>(x: &[[f64; 2]], f: impl Fn(f64) -> T, complex: bool) -> Vec<T> {
    x.iter()
        .flat_map(|v| {
            if complex {
                vec![f(v[0]), f(v[1])]
            } else {
                vec![f(v[0])]
            }
        })
        .collect()
}

fn back<T: Copy>(dst: &mut [[f64; 2]], src: &[T], f: impl Fn(T) -> f64, complex: bool) {
    for (i, d) in dst.iter_mut().enumerate() {
        *d = match complex {
            true => [f(src[2 * i]), f(src[2 * i + 1])],
            false => [f(src[i]), 0.0],
        };
    }
}

macro_rules! fortran_case {
    ($test:ident, $entry:path, $t:ty, $int:ty, $complex:expr, $unit:expr) => {
        #[test]
        fn $test() {
            check_all($complex, $unit, &|ta,
                                         tb,
                                         (m, n, k),
                                         alpha,
                                         a,
                                         lda,
                                         b,
                                         ldb,
                                         beta,
                                         c,
                                         ldc| {
                let (a, b) = (to(a, |x| x as $t, $complex), to(b, |x| x as $t, $complex));
                let mut cc = to(c, |x| x as $t, $complex);
                let alpha: Vec<$t> = vec![alpha[0] as $t, alpha[1] as $t];
                let beta: Vec<$t> = vec![beta[0] as $t, beta[1] as $t];
                let (m, n, k) = (m as $int, n as $int, k as $int);
                let (lda, ldb, ldc2) = (lda as $int, ldb as $int, ldc as $int);
                // SAFETY: every array is as large as its dimensions say.
                unsafe {
                    $entry(
                        (&ta as *const u8).cast(),
                        (&tb as *const u8).cast(),
                        &m,
                        &n,
                        &k,
                        alpha.as_ptr().cast(),
                        a.as_ptr(),
                        &lda,
                        b.as_ptr(),
                        &ldb,
                        beta.as_ptr().cast(),
                        cc.as_mut_ptr(),
                        &ldc2,
                    )
                };
                back(c, &cc, |x| x as f64, $complex);
            });
        }
    };
}

fortran_case!(
    dgemm_matches_the_reference,
    fortran::dgemm_,
    f64,
    i32,
    false,
    f64::EPSILON
);
fortran_case!(
    sgemm_matches_the_reference,
    fortran::sgemm_,
    f32,
    i32,
    false,
    f32::EPSILON as f64
);
fortran_case!(
    zgemm_matches_the_reference,
    fortran::zgemm_,
    f64,
    i32,
    true,
    f64::EPSILON
);
fortran_case!(
    cgemm_matches_the_reference,
    fortran::cgemm_,
    f32,
    i32,
    true,
    f32::EPSILON as f64
);
fortran_case!(
    dgemm_64_matches_the_reference,
    fortran::dgemm_64_,
    f64,
    i64,
    false,
    f64::EPSILON
);
fortran_case!(
    zgemm_64_matches_the_reference,
    fortran::zgemm_64_,
    f64,
    i64,
    true,
    f64::EPSILON
);

/// CBLAS, column- and row-major: row-major storage is the transposed
/// column-major problem, so the reference is run on the transposes.
#[test]
fn cblas_dgemm_and_zgemm_in_both_orders() {
    for complex in [false, true] {
        for row_major in [false, true] {
            check_all(
                complex,
                f64::EPSILON,
                &|ta, tb, (m, n, k), alpha, a, lda, b, ldb, beta, c, ldc| {
                    let cblas_op = |t: u8| match t {
                        b'N' => 111,
                        b'T' => 112,
                        _ => 113,
                    };
                    // Column-major C = op(A)op(B) is row-major Cᵀ = op(B)ᵀop(A)ᵀ:
                    // the same storage, described row-major, with A and B
                    // trading places and m and n swapped.
                    let (order, ta, tb, m, n, a, lda, b, ldb) = match row_major {
                        false => (102, ta, tb, m, n, a, lda, b, ldb),
                        true => (101, tb, ta, n, m, b, ldb, a, lda),
                    };
                    let (m, n, k) = (m as i32, n as i32, k as i32);
                    let flat = |x: &[[f64; 2]]| to(x, |v| v, complex);
                    let (a, b) = (flat(a), flat(b));
                    let mut cc = flat(c);
                    // SAFETY: every array is as large as its dimensions say.
                    unsafe {
                        match complex {
                            false => cblas::cblas_dgemm(
                                order,
                                cblas_op(ta),
                                cblas_op(tb),
                                m,
                                n,
                                k,
                                alpha[0],
                                a.as_ptr(),
                                lda as i32,
                                b.as_ptr(),
                                ldb as i32,
                                beta[0],
                                cc.as_mut_ptr(),
                                ldc as i32,
                            ),
                            true => cblas::cblas_zgemm(
                                order,
                                cblas_op(ta),
                                cblas_op(tb),
                                m,
                                n,
                                k,
                                alpha.as_ptr().cast(),
                                a.as_ptr().cast(),
                                lda as i32,
                                b.as_ptr().cast(),
                                ldb as i32,
                                beta.as_ptr().cast(),
                                cc.as_mut_ptr().cast(),
                                ldc as i32,
                            ),
                        }
                    }
                    back(c, &cc, |x| x, complex);
                },
            );
        }
    }
}

/// An illegal argument leaves C as it was (and is reported on stderr).
#[test]
fn illegal_arguments_leave_c_untouched() {
    let a = [1.0f64; 16];
    let mut c = [5.0f64; 16];
    // (TRANSA, M, LDA) of a 4×2×2-or-smaller dgemm_ whose other arguments
    // are legal.
    let dgemm = |c: &mut [f64; 16], transa: u8, m: i32, lda: i32| {
        let (n, two, four) = (b'N', 2i32, 4i32);
        // SAFETY: the arrays are larger than any legal reading of these
        // arguments; the illegal ones are refused before any is read.
        unsafe {
            fortran::dgemm_(
                (&transa as *const u8).cast(),
                (&n as *const u8).cast(),
                &m,
                &two,
                &two,
                &1.0,
                a.as_ptr(),
                &lda,
                a.as_ptr(),
                &four,
                &0.0,
                c.as_mut_ptr(),
                &four,
            )
        }
    };
    dgemm(&mut c, b'X', 2, 4);
    dgemm(&mut c, b'N', -1, 4);
    dgemm(&mut c, b'N', 4, 1);
    // SAFETY: as above.
    unsafe {
        cblas::cblas_dgemm(
            101,
            111,
            111,
            2,
            2,
            4,
            1.0,
            a.as_ptr(),
            2,
            a.as_ptr(),
            2,
            0.0,
            c.as_mut_ptr(),
            2,
        );
        cblas::cblas_dgemm(
            7,
            111,
            111,
            2,
            2,
            2,
            1.0,
            a.as_ptr(),
            2,
            a.as_ptr(),
            2,
            0.0,
            c.as_mut_ptr(),
            2,
        );
    }
    assert_eq!(c, [5.0; 16]);
}

/// The reference's argument rules as plain values ([`fastmm_blas::args`]):
/// which position `xerbla` names, and the call a legal CBLAS call is.
mod arguments {
    use fastmm_blas::args::{illegal, Call, Op};

    #[test]
    fn the_reference_positions() {
        let ok = Call::fortran(b'N', b't', 3, 4, 5, 3, 4, 3).unwrap();
        assert_eq!((ok.op_a, ok.op_b), (Op::None, Op::Transpose));
        assert_eq!(Call::fortran(b'X', b'N', 1, 1, 1, 1, 1, 1), Err(1));
        assert_eq!(Call::fortran(b'N', b'Y', 1, 1, 1, 1, 1, 1), Err(2));
        assert_eq!(Call::fortran(b'N', b'N', -1, 1, 1, 1, 1, 1), Err(3));
        assert_eq!(Call::fortran(b'N', b'N', 1, -1, 1, 1, 1, 1), Err(4));
        assert_eq!(Call::fortran(b'N', b'N', 1, 1, -1, 1, 1, 1), Err(5));
        // A is m×k: lda ≥ m; Aᵀ stored k×m: lda ≥ k.
        assert_eq!(Call::fortran(b'N', b'N', 4, 1, 2, 3, 2, 4), Err(8));
        assert_eq!(
            Call::fortran(b'T', b'N', 4, 1, 2, 2, 2, 4).map(|_| ()),
            Ok(())
        );
        assert_eq!(Call::fortran(b'N', b'N', 4, 1, 2, 4, 1, 4), Err(10));
        assert_eq!(Call::fortran(b'N', b'N', 4, 1, 2, 4, 2, 3), Err(13));
        // Empty products still need leading dimensions of at least 1.
        assert_eq!(Call::fortran(b'N', b'N', 0, 0, 0, 0, 1, 1), Err(8));
        assert!(Call::fortran(b'N', b'N', 0, 0, 0, 1, 1, 1).is_ok());
    }

    #[test]
    fn cblas_row_major_is_the_transposed_column_major_call() {
        let (call, row_major) = Call::cblas(101, 111, 112, 3, 4, 5, 5, 5, 4).unwrap();
        assert!(row_major);
        assert_eq!((call.m, call.n, call.k), (4, 3, 5));
        assert_eq!((call.op_a, call.op_b), (Op::Transpose, Op::None));
        assert_eq!((call.lda, call.ldb), (5, 5));
        assert_eq!(Call::cblas(100, 111, 111, 1, 1, 1, 1, 1, 1), Err(1));
        assert_eq!(Call::cblas(101, 1, 111, 1, 1, 1, 1, 1, 1), Err(2));
        assert_eq!(Call::cblas(101, 111, 1, 1, 1, 1, 1, 1, 1), Err(3));
        // Row-major A (m×k) needs lda ≥ k.
        assert_eq!(Call::cblas(101, 111, 111, 3, 4, 5, 4, 4, 4), Err(9));
        assert_eq!(Call::cblas(101, 111, 111, 3, 4, 5, 5, 3, 4), Err(11));
        assert_eq!(Call::cblas(101, 111, 111, 3, 4, 5, 5, 4, 3), Err(14));
        assert_eq!(Call::cblas(102, 111, 111, 3, 4, 5, 2, 5, 3), Err(9));
    }

    #[test]
    fn messages_read_as_the_references() {
        assert_eq!(
            illegal("DGEMM", 8),
            " ** On entry to DGEMM  parameter number  8 had an illegal value"
        );
        assert_eq!(
            illegal("cblas_zgemm", 14),
            "Parameter 14 to routine cblas_zgemm was incorrect"
        );
    }
}

/// The team this library offers the process's other copies of fastmm.
mod team {
    /// The export has the name and type the other copies look up.
    #[test]
    fn the_export_is_the_protocols() {
        let runner: fastmm::shared_team::Runner = fastmm_blas::team::fastmm_shared_team_v1;
        let _ = runner;
        assert_eq!(fastmm::shared_team::SYMBOL, "fastmm_shared_team_v1");
    }
}
