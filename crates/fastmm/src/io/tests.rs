//! Round trips through every format and type, and one test per kind of
//! malformed input: each must be an `Error::File` naming the place, never
//! a panic or an allocation of the declared size.

use super::*;
use crate::element::DType;

fn dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fastmm-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn samples() -> Vec<AnyMatrix> {
    vec![
        AnyMatrix::F32(Matrix::from_fn(3, 5, |i, j| {
            (i as f32 - 1.5) * 0.1 + j as f32 * 1e-7
        })),
        AnyMatrix::F64(Matrix::from_fn(4, 2, |i, j| {
            (i as f64).sin() * 1e300 + j as f64 / 3.0
        })),
        AnyMatrix::I32(Matrix::from_fn(2, 3, |i, j| i32::MIN + (i * 3 + j) as i32)),
        AnyMatrix::I64(Matrix::from_fn(1, 4, |_, j| i64::MAX - j as i64)),
        AnyMatrix::F64(Matrix::from_fn(0, 0, |_, _| 0.0)),
        AnyMatrix::I32(Matrix::from_fn(1, 1, |_, _| -7)),
    ]
}

#[test]
fn every_format_round_trips_every_type() {
    let dir = dir();
    for (n, m) in samples().into_iter().enumerate() {
        for ext in ["npy", "bin", "csv", "tsv", "mtx"] {
            let path = dir.join(format!("m{n}.{ext}"));
            write_matrix(&path, &m).unwrap();
            let opts = ReadOptions {
                dtype: Some(m.dtype()),
                shape: Some(m.shape()),
                max_bytes: None,
            };
            let back = read_matrix(&path, &opts).unwrap();
            // Matrix Market reads integers as i64 and reals as f64.
            let back = back.to(m.dtype()).unwrap();
            if m.shape() == (0, 0) || ext != "mtx" || m.shape().0 > 0 {
                assert_eq!(back, m, "{ext} {n}");
            }
        }
    }
}

#[test]
fn npy_reads_fortran_order_big_endian_and_vectors() {
    let dir = dir();
    // A 2×3 f8 array in Fortran order, big-endian, written by hand.
    let header = "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    for v in [1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0] {
        bytes.extend_from_slice(&v.to_be_bytes());
    }
    let path = dir.join("fortran.npy");
    std::fs::write(&path, &bytes).unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    let expected = Matrix::from_fn(2, 3, |i, j| (i * 3 + j + 1) as f64);
    assert_eq!(m, AnyMatrix::F64(expected));

    let header = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    for v in [7i32, 8, 9] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    let path = dir.join("vector.npy");
    std::fs::write(&path, &bytes).unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        m,
        AnyMatrix::I32(Matrix::from_fn(3, 1, |i, _| 7 + i as i32))
    );
}

#[test]
fn matrix_market_coordinate_and_symmetric_are_made_dense() {
    let dir = dir();
    let path = dir.join("coo.mtx");
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate real general\n% a comment\n3 2 3\n1 1 1.5\n3 2 -2\n1 1 0.5\n",
    )
    .unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    let mut expected = Matrix::filled(3, 2, 0.0);
    expected.set(0, 0, 2.0);
    expected.set(2, 1, -2.0);
    assert_eq!(m, AnyMatrix::F64(expected));

    std::fs::write(
        &path,
        "%%MatrixMarket matrix array integer symmetric\n2 2\n1\n2\n3\n",
    )
    .unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        m,
        AnyMatrix::I64(Matrix::from_vec(2, 2, vec![1, 2, 2, 3]).unwrap())
    );
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate pattern skew-symmetric\n2 2 1\n2 1\n",
    )
    .unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        m,
        AnyMatrix::I64(Matrix::from_vec(2, 2, vec![0, -1, 1, 0]).unwrap())
    );
}

/// Writes `content` to a file named `name` and returns the error message
/// of reading it, which must name the file.
fn failure(name: &str, content: &[u8], opts: ReadOptions) -> String {
    let path = dir().join(name);
    std::fs::write(&path, content).unwrap();
    let err = read_matrix(&path, &opts).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::File { .. }), "{text}");
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(!text.contains('\n'), "one line: {text}");
    text
}

fn npy_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn malformed_npy_files_are_errors_with_the_reason() {
    let none = ReadOptions::default();
    let ok_header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }";
    let truncated = failure("truncated.npy", &npy_bytes(ok_header, &[0u8; 24]), none);
    assert!(
        truncated.contains("32 bytes of data) but 24 bytes follow"),
        "{truncated}"
    );
    let wrong_magic = failure("magic.npy", b"NUMPY\x01\x00garbage", none);
    assert!(wrong_magic.contains("not a .npy file"), "{wrong_magic}");
    let cube = failure(
        "cube.npy",
        &npy_bytes(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1), }",
            &[0u8; 8],
        ),
        none,
    );
    assert!(cube.contains("3 dimensions"), "{cube}");
    // A huge declared shape is refused from the file's length, before any
    // allocation of its size.
    let huge = failure(
        "huge.npy",
        &npy_bytes(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4000000000, 4000000000), }",
            &[0u8; 8],
        ),
        none,
    );
    assert!(
        huge.contains("declares 4000000000×4000000000 f64"),
        "{huge}"
    );
    let bytes = failure(
        "u8.npy",
        &npy_bytes(
            "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1), }",
            &[0u8; 1],
        ),
        none,
    );
    assert!(bytes.contains("is not f4, f8, i4 or i8"), "{bytes}");
    // Found by the fuzzer: a version-3 header length of 4 GiB in a short
    // file must be refused before anything reads (or allocates) it.
    let mut long_header = b"\x93NUMPY\x03\x00".to_vec();
    long_header.extend_from_slice(&0xff7b_0076u32.to_le_bytes());
    long_header.extend_from_slice(b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }");
    let long = failure("long-header.npy", &long_header, none);
    assert!(
        long.contains("offset 8: the header declares 4286251126 bytes"),
        "{long}"
    );
    let version = failure("version.npy", b"\x93NUMPY\x09\x00\x10\x00{}", none);
    assert!(version.contains("version 9 is not supported"), "{version}");
    let empty = failure("empty.npy", b"", none);
    assert!(empty.contains("not a .npy file"), "{empty}");
}

#[test]
fn malformed_text_files_are_errors_with_the_line() {
    let none = ReadOptions::default();
    let ragged = failure("ragged.csv", b"1,2,3\n4,5\n", none);
    assert!(
        ragged.contains("line 2: 2 fields, but line 1 has 3"),
        "{ragged}"
    );
    let word = failure("word.csv", b"1,2\n3,x\n", none);
    assert!(
        word.contains("line 2, field 2: 'x' is not a number"),
        "{word}"
    );
    let header = failure("header.csv", b"a,b\n1,2\n", none);
    assert!(
        header.contains("line 1, field 1: 'a' is not a number"),
        "{header}"
    );
    let nan = failure("nan.tsv", b"1\tnan\n", none);
    assert!(nan.contains("'nan' is not a finite number"), "{nan}");
    let inf = failure("inf.csv", b"-inf,1\n", none);
    assert!(inf.contains("'-inf' is not a finite number"), "{inf}");
    let overflow = failure(
        "big.csv",
        b"1,3000000000\n",
        ReadOptions {
            dtype: Some(DType::I32),
            ..Default::default()
        },
    );
    assert!(overflow.contains("is not an i32"), "{overflow}");
    let gap = failure("gap.csv", b"1,2\n\n3,4\n", none);
    assert!(gap.contains("line 2: a blank line inside"), "{gap}");
    let binary = failure("binary.csv", b"1,2\n\xff\xfe\n", none);
    assert!(binary.contains("line 2: not UTF-8"), "{binary}");
}

#[test]
fn malformed_matrix_market_files_are_errors_with_the_line() {
    let none = ReadOptions::default();
    let banner = failure(
        "banner.mtx",
        b"%%MatrixMarket tensor array real general\n1 1\n1\n",
        none,
    );
    assert!(banner.contains("line 1: expected"), "{banner}");
    let complex = failure(
        "complex.mtx",
        b"%%MatrixMarket matrix array complex general\n1 1\n1 0\n",
        none,
    );
    assert!(
        complex.contains("field 'complex' is not supported"),
        "{complex}"
    );
    let short = failure(
        "short.mtx",
        b"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n",
        none,
    );
    assert!(short.contains("truncated: 3 of the 4 values"), "{short}");
    let long = failure(
        "long.mtx",
        b"%%MatrixMarket matrix array real general\n1 1\n1\n2\n",
        none,
    );
    assert!(long.contains("line 4: more than the 1 values"), "{long}");
    let index = failure(
        "index.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n",
        none,
    );
    assert!(index.contains("line 3: row '3' is not in 1..=2"), "{index}");
    let huge = failure(
        "huge.mtx",
        b"%%MatrixMarket matrix array real general\n100000 100000\n1\n",
        none,
    );
    assert!(huge.contains("declares 100000×100000"), "{huge}");
    let dense = failure(
        "dense.mtx",
        b"%%MatrixMarket matrix coordinate real general\n10000000 10000000 1\n1 1 1\n",
        none,
    );
    assert!(
        dense.contains("would not fit in the memory available"),
        "{dense}"
    );
    let missing = failure(
        "missing.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n",
        none,
    );
    assert!(
        missing.contains("truncated: 1 of the 2 entries"),
        "{missing}"
    );
    let nan = failure(
        "nan.mtx",
        b"%%MatrixMarket matrix array real general\n1 1\nNaN\n",
        none,
    );
    assert!(
        nan.contains("line 3: 'NaN' is not a finite number"),
        "{nan}"
    );
    let upper = failure(
        "upper.mtx",
        b"%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n",
        none,
    );
    assert!(upper.contains("above the diagonal"), "{upper}");
}

#[test]
fn raw_files_need_a_shape_and_the_exact_length() {
    let sized = ReadOptions {
        dtype: Some(DType::F32),
        shape: Some((2, 2)),
        max_bytes: None,
    };
    let short = failure("short.bin", &[0u8; 12], sized);
    assert!(
        short.contains("needs 16 bytes, but the file has 12"),
        "{short}"
    );
    let unshaped = failure("unshaped.raw", &[0u8; 16], ReadOptions::default());
    assert!(
        unshaped.contains("needs its shape and element type"),
        "{unshaped}"
    );
    let huge = failure(
        "huge.bin",
        &[0u8; 16],
        ReadOptions {
            dtype: Some(DType::F64),
            shape: Some((usize::MAX, 2)),
            max_bytes: None,
        },
    );
    assert!(huge.contains("too many to address"), "{huge}");
    let unknown = read_matrix(Path::new("matrix.xlsx"), &ReadOptions::default()).unwrap_err();
    assert!(unknown.to_string().contains("unknown format"), "{unknown}");
}

#[test]
fn conversions_refuse_to_change_values() {
    let ints = AnyMatrix::I64(Matrix::from_vec(1, 2, vec![1 << 53, (1 << 53) + 1]).unwrap());
    let err = ints.to(DType::F64).unwrap_err();
    assert!(
        err.contains("element (0, 1) = 9007199254740993 is not exactly a f64"),
        "{err}"
    );
    let halves = AnyMatrix::F64(Matrix::from_vec(1, 2, vec![2.0, 2.5]).unwrap());
    assert!(halves
        .to(DType::I32)
        .unwrap_err()
        .contains("element (0, 1)"));
    let big = AnyMatrix::I64(Matrix::from_vec(1, 1, vec![1 << 40]).unwrap());
    assert!(big.to(DType::I32).is_err());
    assert_eq!(
        big.to(DType::F64).unwrap(),
        AnyMatrix::F64(Matrix::from_vec(1, 1, vec![(1u64 << 40) as f64]).unwrap())
    );
    let tenth = AnyMatrix::F64(Matrix::from_vec(1, 1, vec![0.1]).unwrap());
    assert_eq!(
        tenth.to(DType::F32).unwrap(),
        AnyMatrix::F32(Matrix::from_vec(1, 1, vec![0.1f32]).unwrap())
    );
    assert_eq!(promote(DType::F32, DType::F64), DType::F64);
    assert_eq!(promote(DType::I32, DType::I64), DType::I64);
    assert_eq!(promote(DType::I32, DType::F32), DType::F64);
    assert_eq!(promote(DType::I64, DType::I64), DType::I64);
}

#[test]
fn a_failed_write_leaves_no_partial_file() {
    let dir = dir().join("no-such-dir");
    let path = dir.join("c.npy");
    let err = write_matrix(&path, &samples()[0]).unwrap_err();
    assert!(err.to_string().contains("cannot write"), "{err}");
    assert!(!path.exists());
}

#[test]
fn a_mapped_output_is_renamed_when_kept_and_removed_otherwise() {
    let dir = dir();
    for ext in ["npy", "bin"] {
        let path = dir.join(format!("mapped.{ext}"));
        let _ = std::fs::remove_file(&path);
        let expected = Matrix::from_fn(3, 4, |i, j| (i * 10 + j) as f64 - 0.5);
        let value = out_of_core::write_through_map::<f64, _>(&path, (3, 4), |mut c| {
            for i in 0..3 {
                for j in 0..4 {
                    c.set(i, j, expected.get(i, j));
                }
            }
            Ok((7, true))
        })
        .unwrap();
        assert_eq!(value, 7);
        let opts = ReadOptions {
            dtype: Some(DType::F64),
            shape: Some((3, 4)),
            max_bytes: None,
        };
        assert_eq!(
            read_matrix(&path, &opts).unwrap(),
            AnyMatrix::F64(expected.clone())
        );
        // Not kept (a failed check) or failed: the old file stays, and no
        // temporary is left beside it.
        out_of_core::write_through_map::<f64, _>(&path, (3, 4), |mut c| {
            c.fill(0.0);
            Ok(((), false))
        })
        .unwrap();
        let failed = out_of_core::write_through_map::<f64, _>(&path, (3, 4), |_| {
            Err::<((), bool), _>(Error::InvalidOption("stop".into()))
        });
        assert!(failed.is_err());
        assert_eq!(read_matrix(&path, &opts).unwrap(), AnyMatrix::F64(expected));
        let leftovers = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                let name = name.to_string_lossy();
                name.starts_with(".mapped") && name.ends_with(".partial")
            })
            .count();
        assert_eq!(leftovers, 0);
    }
}
