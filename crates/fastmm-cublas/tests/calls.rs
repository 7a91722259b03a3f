//! The interposer's pure layers, without a GPU: a call's arguments checked
//! as cuBLAS checks them and turned into the executor's views (against a
//! naive twin of cuBLAS's definition), cuBLAS's vocabulary (math modes,
//! `cublasGemmEx`'s types), and the settings read from the environment.

/// [`fastmm_cublas::call`]: the views and what stays cuBLAS's.
mod call {
    use fastmm::GpuMatrix;
    use fastmm_cublas::call::{Batch, Call, RawShape};
    use fastmm_cublas::types::Kind;

    fn raw(ops: (i32, i32), mnk: (i64, i64, i64), lds: (i64, i64, i64)) -> RawShape {
        RawShape { ops, mnk, lds }
    }

    /// Element (i, j) of a view, as the executor reads it.
    fn at(mem: &[f64], base: u64, v: GpuMatrix, i: usize, j: usize) -> f64 {
        let offset = match v.transposed {
            false => i * v.ld + j,
            true => j * v.ld + i,
        };
        mem[(v.ptr - base) as usize / 8 + offset]
    }

    /// The twin: each product of the views, naively, against cuBLAS's
    /// definition on the column-major storage, for every pair of
    /// operations, odd leading dimensions, α, β and a strided batch
    /// (addresses are offsets into one host array).
    #[test]
    fn the_views_multiply_as_cublas_defines() {
        let (m, n, k) = (5usize, 3usize, 4usize);
        for (ta, tb) in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1), (1, 2)] {
            let (ra, ca) = if ta == 0 { (m, k) } else { (k, m) };
            let (rb, cb) = if tb == 0 { (k, n) } else { (n, k) };
            let (lda, ldb, ldc) = (ra + 2, rb + 1, m + 3);
            let (count, stride_a, stride_b, stride_c) = (3usize, lda * ca + 1, 0usize, ldc * n + 2);
            let base = 1u64 << 20;
            let (a0, b0) = (0usize, stride_a * count + 7);
            let c0 = b0 + ldb * cb + 5;
            let len = c0 + stride_c * count + 1;
            let mem: Vec<f64> = (0..len).map(|x| ((x * 37 % 101) as f64) - 50.0).collect();
            let (alpha, beta) = (1.5, -0.5);
            let call = Call::check(
                Kind::D,
                raw(
                    (ta, tb),
                    (m as i64, n as i64, k as i64),
                    (lda as i64, ldb as i64, ldc as i64),
                ),
                (
                    base + 8 * a0 as u64,
                    base + 8 * b0 as u64,
                    base + 8 * c0 as u64,
                ),
                Batch::Strided {
                    count,
                    strides: (stride_a as i64, stride_b as i64, stride_c as i64),
                },
            )
            .unwrap();
            let products = call.products();
            assert_eq!(products.len(), count);
            for (l, p) in products.iter().enumerate() {
                assert!(p.c.transposed && p.a.rows == m && p.b.cols == n);
                for i in 0..m {
                    for j in 0..n {
                        // cuBLAS: op(A)(i, p) = A[i + p·lda] or A[p + i·lda].
                        let a = |q: usize| {
                            let s = a0 + l * stride_a;
                            mem[if ta == 0 {
                                s + i + q * lda
                            } else {
                                s + q + i * lda
                            }]
                        };
                        let b = |q: usize| {
                            let s = b0 + l * stride_b;
                            mem[if tb == 0 {
                                s + q + j * ldb
                            } else {
                                s + j + q * ldb
                            }]
                        };
                        let c = mem[c0 + l * stride_c + i + j * ldc];
                        let want = alpha * (0..k).map(|q| a(q) * b(q)).sum::<f64>() + beta * c;
                        let views = (0..k)
                            .map(|q| at(&mem, base, p.a, i, q) * at(&mem, base, p.b, q, j))
                            .sum::<f64>();
                        let got = alpha * views + beta * at(&mem, base, p.c, i, j);
                        assert_eq!(got, want, "ops {ta}{tb} product {l} ({i}, {j})");
                    }
                }
            }
        }
    }

    /// cuBLAS's refusals and quick returns stay cuBLAS's; so do
    /// conjugates, empty batches and overlapping outputs.
    #[test]
    fn what_stays_cublas() {
        let ok =
            |kind, ops, mnk, lds, batch| Call::check(kind, raw(ops, mnk, lds), (0, 0, 0), batch);
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), Batch::One).is_ok());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (1, 4, 2), Batch::One).is_err());
        assert!(ok(Kind::S, (1, 0), (2, 3, 4), (3, 4, 2), Batch::One).is_err());
        assert!(ok(Kind::S, (0, 1), (2, 3, 4), (2, 2, 2), Batch::One).is_err());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 1), Batch::One).is_err());
        assert!(ok(Kind::S, (0, 0), (-1, 3, 4), (2, 4, 2), Batch::One).is_err());
        assert!(ok(Kind::S, (0, 0), (2, 3, 0), (2, 4, 2), Batch::One).is_err());
        assert!(ok(Kind::S, (0, 0), (0, 3, 4), (1, 4, 1), Batch::One).is_err());
        assert!(ok(Kind::S, (0, 7), (2, 3, 4), (2, 4, 2), Batch::One).is_err());
        // The conjugate: a transposition for real types only.
        assert!(ok(Kind::D, (2, 0), (2, 3, 4), (4, 4, 2), Batch::One).is_ok());
        assert!(ok(Kind::Z, (2, 0), (2, 3, 4), (4, 4, 2), Batch::One).is_err());
        let strided = |count, c| Batch::Strided {
            count,
            strides: (8, 0, c),
        };
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), strided(0, 6)).is_err());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), strided(2, 6)).is_ok());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), strided(2, 5)).is_err());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), strided(1, 0)).is_ok());
        let listed = |cs: &[u64]| Batch::Listed(cs.iter().map(|&c| (0, 0, c)).collect());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), listed(&[48, 0, 24])).is_ok());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), listed(&[0, 23])).is_err());
        assert!(ok(Kind::S, (0, 0), (2, 3, 4), (2, 4, 2), listed(&[])).is_err());
    }
}

/// [`fastmm_cublas::types`].
mod types {
    use fastmm_cublas::types::{
        math_is_default, Kind, Op, COMPUTE_32F, COMPUTE_64F, C_64F, R_32F, R_64F,
    };

    #[test]
    fn math_modes_and_ex_types() {
        assert!(math_is_default(0));
        assert!(math_is_default(16));
        // TF32, tensor-op, pedantic, and TF32 with the flag.
        for mode in [1, 2, 3, 19, 8] {
            assert!(!math_is_default(mode), "{mode}");
        }
        assert_eq!(Kind::of_ex([R_32F; 3], COMPUTE_32F), Some(Kind::S));
        assert_eq!(Kind::of_ex([C_64F; 3], COMPUTE_64F), Some(Kind::Z));
        // Fast TF32 compute, mixed types, f32 at 64-bit compute.
        assert_eq!(Kind::of_ex([R_32F; 3], 77), None);
        assert_eq!(Kind::of_ex([R_32F, R_32F, R_64F], COMPUTE_32F), None);
        assert_eq!(Kind::of_ex([R_32F; 3], COMPUTE_64F), None);
        assert_eq!(Op::from_raw(3), None);
        assert!(Op::from_raw(2).unwrap().transposes());
    }
}

/// [`fastmm_cublas::settings`].
mod settings {
    use fastmm::{Accuracy, Algorithm};
    use fastmm_cublas::settings::from_values;

    #[test]
    fn defaults_switches_and_bad_values() {
        let table = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let s = from_values(&table(&[]));
        assert!(s.enabled && !s.logs());
        assert_eq!(s.opts.accuracy, Accuracy::Native);
        assert_eq!(s.opts.algorithm, Algorithm::Auto);
        let s = from_values(&table(&[
            ("FASTMM_CUBLAS", "off"),
            ("FASTMM_CUBLAS_LOG", "1"),
        ]));
        assert!(!s.enabled && s.logs());
        let s = from_values(&table(&[
            ("FASTMM_ACCURACY", "bound"),
            ("FASTMM_CUBLAS_ALGO", "emulated"),
        ]));
        assert_eq!(s.opts.accuracy, Accuracy::Bound);
        assert_eq!(s.opts.algorithm, Algorithm::Emulated);
        let s = from_values(&table(&[("FASTMM_ACCURACY", "nonsense")]));
        assert_eq!(s.opts.accuracy, Accuracy::Native);
    }
}
