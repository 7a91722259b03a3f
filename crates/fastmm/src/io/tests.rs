//! Round trips through every format and type, and one test per kind of
//! malformed input: each must be an `Error::File` naming the place, never
//! a panic or an allocation of the declared size.

use super::*;
use crate::complex::ComplexMatrix;
use crate::element::DType;
use std::path::PathBuf;

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
                ..Default::default()
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

fn complex_samples() -> Vec<AnyMatrix> {
    let c64 = ComplexMatrix::new(
        Matrix::from_fn(3, 2, |i, j| (i as f32 - 1.0) * 0.1 + j as f32),
        Matrix::from_fn(3, 2, |i, j| -(i as f32) * 1e-7 + j as f32 * 1e30),
    )
    .unwrap();
    let c128 = ComplexMatrix::new(
        Matrix::from_fn(2, 4, |i, j| (i as f64).sin() * 1e300 + j as f64 / 3.0),
        Matrix::from_fn(2, 4, |i, j| if i == j { -0.0 } else { (j as f64).exp() }),
    )
    .unwrap();
    let special = ComplexMatrix::new(
        Matrix::from_vec(1, 3, vec![f64::INFINITY, -1.0, 5e-324]).unwrap(),
        Matrix::from_vec(1, 3, vec![-2.0, f64::NEG_INFINITY, 0.0]).unwrap(),
    )
    .unwrap();
    vec![
        AnyMatrix::C64(c64),
        AnyMatrix::C128(c128),
        AnyMatrix::C128(special),
        AnyMatrix::C128(ComplexMatrix::try_zeros(0, 0).unwrap()),
    ]
}

#[test]
fn complex_matrices_round_trip_through_npy_mtx_and_text() {
    let dir = dir();
    for (n, m) in complex_samples().into_iter().enumerate() {
        for ext in ["npy", "csv", "tsv", "txt", "mtx"] {
            let path = dir.join(format!("z{n}.{ext}"));
            write_matrix(&path, &m).unwrap();
            let opts = ReadOptions::new().dtype(m.dtype());
            let back = read_matrix(&path, &opts).unwrap();
            // An empty text file holds no value to say it is complex.
            if m.shape() != (0, 0) || ext == "npy" || ext == "mtx" {
                assert!(back.is_complex(), "{ext} {n}");
                // Matrix Market reads complex128; text reads as asked.
                assert_eq!(back.to(m.dtype()).unwrap(), m, "{ext} {n}");
            }
        }
        let raw = write_matrix(&dir.join(format!("z{n}.bin")), &m).unwrap_err();
        assert!(
            raw.to_string().contains("a raw file holds a real matrix"),
            "{raw}"
        );
    }
}

#[test]
fn complex_files_read_as_numpy_and_matrix_market_write_them() {
    let dir = dir();
    // numpy's savetxt of [[1+2j, 3-4j]]: '%.18e' parts and "+-".
    let path = dir.join("savetxt.txt");
    std::fs::write(
        &path,
        " (1.000000000000000000e+00+2.000000000000000000e+00j) (3.000000000000000000e+00+-4.000000000000000000e+00j)\n",
    )
    .unwrap();
    let expected = |rows, cols, pairs: Vec<(f64, f64)>| {
        AnyMatrix::C128(ComplexMatrix::from_pairs(rows, cols, pairs).unwrap())
    };
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(m, expected(1, 2, vec![(1.0, 2.0), (3.0, -4.0)]));
    let as_f32 = read_matrix(&path, &ReadOptions::new().dtype(DType::F32)).unwrap();
    assert_eq!(as_f32.type_name(), "c64");
    let ints = read_matrix(&path, &ReadOptions::new().dtype(DType::I64)).unwrap_err();
    assert!(ints.to_string().contains("cannot be read as i64"), "{ints}");
    // A Hermitian coordinate file (the lower triangle stored, mirrored as
    // conjugates) and a skew-symmetric complex array.
    let path = dir.join("hermitian.mtx");
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate complex hermitian\n% a comment\n2 2 3\n1 1 1.0 0\n2 1 2 3\n2 2 -5 0.0\n",
    )
    .unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        m,
        expected(2, 2, vec![(1.0, 0.0), (2.0, -3.0), (2.0, 3.0), (-5.0, 0.0)])
    );
    let path = dir.join("skew.mtx");
    std::fs::write(
        &path,
        "%%MatrixMarket matrix array complex skew-symmetric\n2 2\n1.5 -2\n",
    )
    .unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        m,
        expected(2, 2, vec![(0.0, 0.0), (-1.5, 2.0), (1.5, -2.0), (0.0, 0.0)])
    );
    // A big-endian, Fortran-order c16 .npy and a c8 vector.
    let header = "{'descr': '>c16', 'fortran_order': True, 'shape': (2, 2), }";
    let data: Vec<u8> = [(1.0f64, -1.0f64), (3.0, -3.0), (2.0, -2.0), (4.0, -4.0)]
        .iter()
        .flat_map(|(re, im)| [re.to_be_bytes(), im.to_be_bytes()].concat())
        .collect();
    let path = dir.join("fortran-complex.npy");
    std::fs::write(&path, npy_bytes(header, &data)).unwrap();
    let m = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        m,
        expected(
            2,
            2,
            vec![(1.0, -1.0), (2.0, -2.0), (3.0, -3.0), (4.0, -4.0)]
        )
    );
    let header = "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }";
    let data: Vec<u8> = [0.5f32, 1.0, 2.0, -0.25, 0.0, 7.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let path = dir.join("vector-complex.npy");
    std::fs::write(&path, npy_bytes(header, &data)).unwrap();
    let array = read_array(&path, None, &ReadOptions::default()).unwrap();
    assert_eq!(array.ndim, 1);
    assert_eq!(array.matrix.shape(), (3, 1));
    let back = dir.join("vector-again.npy");
    write_array(&back, None, &array).unwrap();
    assert_eq!(std::fs::read(&back).unwrap()[128..], data[..]);
    let short = failure(
        "short-complex.npy",
        &npy_bytes(
            "{'descr': '<c16', 'fortran_order': False, 'shape': (2, 2), }",
            &[0u8; 48],
        ),
        ReadOptions::default(),
    );
    assert!(
        short.contains("64 bytes of data) but 48 bytes follow"),
        "{short}"
    );
}

#[test]
fn complex_matrices_convert_and_reshape() {
    let real = AnyMatrix::I32(Matrix::from_vec(1, 2, vec![3, -4]).unwrap());
    let z = real.to_complex(DType::F32).unwrap();
    assert_eq!(z.type_name(), "c64");
    assert_eq!(z.dtype(), DType::F32);
    let wide = z.to(DType::F64).unwrap();
    assert_eq!(
        wide,
        AnyMatrix::C128(ComplexMatrix::from_pairs(1, 2, [(3.0, 0.0), (-4.0, 0.0)]).unwrap())
    );
    assert!(wide.to(DType::I64).is_err());
    let column = wide.reshaped(2, 1).unwrap();
    assert_eq!(column.shape(), (2, 1));
    assert!(real.to_complex(DType::I64).is_err());
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
    assert!(
        bytes.contains("is not f4, f8, i4, i8, c8 or c16"),
        "{bytes}"
    );
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
        ragged.contains("line 2: 2 fields, but the first row has 3"),
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
    let empty = failure("empty-field.csv", b"1,,2\n", none);
    assert!(empty.contains("line 1, field 2: an empty field"), "{empty}");
    let overflow = failure(
        "big.csv",
        b"1,3000000000\n",
        ReadOptions {
            dtype: Some(DType::I32),
            ..Default::default()
        },
    );
    assert!(overflow.contains("is not an i32"), "{overflow}");
    let binary = failure("binary.csv", b"1,2\n\xff\xfe\n", none);
    assert!(binary.contains("line 2: not UTF-8"), "{binary}");
}

/// Text as numpy writes it: `np.savetxt`'s default (space-separated,
/// `%.18e`), a header, a BOM, a trailing delimiter, CRLF line ends, blank
/// lines, comments and IEEE special values.
#[test]
fn text_reads_what_numpy_writes() {
    let read = |name: &str, content: &[u8], opts: ReadOptions| {
        let path = dir().join(name);
        std::fs::write(&path, content).unwrap();
        read_matrix(&path, &opts).unwrap()
    };
    let expected = AnyMatrix::F64(Matrix::from_vec(2, 2, vec![1.0, -2.5, 3e-7, 4.0]).unwrap());
    let savetxt = b"1.000000000000000000e+00 -2.500000000000000000e+00\n3.000000000000000000e-07 4.000000000000000000e+00\n";
    let none = ReadOptions::default();
    for (name, content) in [
        ("savetxt.csv", &savetxt[..]),
        ("savetxt.txt", &savetxt[..]),
        ("savetxt.tsv", &savetxt[..]),
        ("header.csv", b"# a,b\n1,-2.5\n3e-7,4\n"),
        ("bom.csv", b"\xef\xbb\xbf1,-2.5\n3e-7,4\n"),
        ("trailing.csv", b"1,-2.5,\n3e-7,4,\n"),
        ("crlf.csv", b"1, -2.5\r\n\r\n3e-7 ,4 # the second row\r\n\n"),
        ("tabs.tsv", b"1\t-2.5\n3e-7\t4\n"),
        ("spaces.txt", b"  1 \t -2.5\n3e-7    4\n"),
    ] {
        assert_eq!(read(name, content, none), expected, "{name}");
    }
    let semicolons = read("semi.csv", b"1;-2.5\n3e-7;4\n", none.delimiter(';'));
    assert_eq!(semicolons, expected);

    let special = read("special.csv", b"nan,inf\n-inf,NaN\n+Infinity,-0.0\n", none);
    let AnyMatrix::F64(m) = special else {
        panic!("text reads as f64")
    };
    assert!(m.get(0, 0).is_nan() && m.get(1, 1).is_nan());
    assert_eq!(
        (m.get(0, 1), m.get(1, 0), m.get(2, 0)),
        (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY)
    );
    assert!(m.get(2, 1) == 0.0 && m.get(2, 1).is_sign_negative());
    let only_comments = read("comments.csv", b"# nothing\n\n", none);
    assert_eq!(only_comments.shape(), (0, 0));
}

/// Floats are written in their shortest round-trip form, special values
/// as numpy writes them, and read back bit for bit.
#[test]
fn text_writes_floats_as_numpy_prints_them() {
    let m = AnyMatrix::F64(
        Matrix::from_vec(
            2,
            3,
            vec![7.0, 1.5e20, 0.1, f64::NAN, f64::NEG_INFINITY, 1e-5],
        )
        .unwrap(),
    );
    let path = dir().join("repr.csv");
    write_matrix(&path, &m).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "7.0,1.5e+20,0.1\nnan,-inf,1e-05\n"
    );
    let path = dir().join("repr.txt");
    write_matrix(&path, &m).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "7.0 1.5e+20 0.1\nnan -inf 1e-05\n"
    );
    let back = read_matrix(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        encode_matrix(Format::Csv, &back).unwrap(),
        encode_matrix(Format::Csv, &m).unwrap()
    );
}

#[test]
fn npy_keeps_vectors_and_scalars() {
    let dir = dir();
    let column = AnyMatrix::I64(Matrix::from_fn(3, 1, |i, _| i as i64 - 1));
    let row = AnyMatrix::I64(Matrix::from_fn(1, 3, |_, j| j as i64 - 1));
    let path = dir.join("vec.npy");
    for m in [&column, &row] {
        let vector = Array {
            matrix: m.clone(),
            ndim: 1,
        };
        write_array(&path, None, &vector).unwrap();
        let back = read_array(&path, None, &ReadOptions::default()).unwrap();
        assert_eq!(back.ndim, 1);
        assert_eq!(back.matrix, column, "a vector reads as a column");
    }
    let scalar = Array {
        matrix: AnyMatrix::F32(Matrix::filled(1, 1, 2.5)),
        ndim: 0,
    };
    write_array(&path, None, &scalar).unwrap();
    assert_eq!(
        read_array(&path, None, &ReadOptions::default()).unwrap(),
        scalar
    );
    let refused = read_matrix(&path, &ReadOptions::default()).unwrap_err();
    assert!(refused.to_string().contains("not a matrix"), "{refused}");
    let square = Array {
        matrix: AnyMatrix::F32(Matrix::filled(2, 2, 1.0)),
        ndim: 1,
    };
    let err = write_array(&path, None, &square).unwrap_err().to_string();
    assert!(err.contains("cannot be written as a 1-D array"), "{err}");
    // Named formats override the extension.
    let csv = dir.join("named.data");
    write_array(&csv, Some(Format::Csv), &scalar).unwrap();
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "2.5\n");
    assert_eq!("TXT".parse::<Format>().unwrap(), Format::Text);
    assert!("xlsx".parse::<Format>().is_err());
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
    let hermitian = failure(
        "hermitian.mtx",
        b"%%MatrixMarket matrix array real hermitian\n1 1\n1\n",
        none,
    );
    assert!(
        hermitian.contains("symmetry 'hermitian' is not supported"),
        "{hermitian}"
    );
    let field = failure(
        "quaternion.mtx",
        b"%%MatrixMarket matrix array quaternion general\n1 1\n1 0 0 0\n",
        none,
    );
    assert!(
        field.contains("field 'quaternion' is not supported"),
        "{field}"
    );
    let diagonal = failure(
        "diagonal.mtx",
        b"%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 1 2\n",
        none,
    );
    assert!(
        diagonal.contains("line 3: a hermitian matrix's diagonal"),
        "{diagonal}"
    );
    let half = failure(
        "half.mtx",
        b"%%MatrixMarket matrix array complex general\n1 2\n1 0\n2\n",
        none,
    );
    assert!(half.contains("truncated: 1 of the 2 values"), "{half}");
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
    let word = failure(
        "word.mtx",
        b"%%MatrixMarket matrix array real general\n1 1\nNaX\n",
        none,
    );
    assert!(word.contains("line 3: 'NaX' is not a number"), "{word}");
    let upper = failure(
        "upper.mtx",
        b"%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n",
        none,
    );
    assert!(upper.contains("above the diagonal"), "{upper}");
}

#[test]
fn raw_files_need_a_shape_and_the_exact_length() {
    let sized = ReadOptions::new().dtype(DType::F32).shape(2, 2);
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
            ..Default::default()
        },
    );
    assert!(huge.contains("too many to address"), "{huge}");
    let unknown = read_matrix(Path::new("matrix.xlsx"), &ReadOptions::default()).unwrap_err();
    assert!(unknown.to_string().contains("unknown format"), "{unknown}");
}

#[test]
fn conversions_refuse_to_change_values() {
    let ints = AnyMatrix::I64(Matrix::from_vec(1, 2, vec![1 << 53, (1 << 53) + 1]).unwrap());
    let err = ints.to(DType::F64).unwrap_err().to_string();
    assert!(
        err.contains("element (0, 1) = 9007199254740993 is not exactly a f64"),
        "{err}"
    );
    let halves = AnyMatrix::F64(Matrix::from_vec(1, 2, vec![2.0, 2.5]).unwrap());
    assert!(halves
        .to(DType::I32)
        .unwrap_err()
        .to_string()
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
            ..Default::default()
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

/// Every rectangle of a C-order and of a Fortran-order file, mapped by its
/// lines alone, reads as the same rectangle of the whole matrix, and maps
/// only the lines that hold it.
#[test]
fn parts_of_files_map_only_their_lines() {
    use super::out_of_core::MatrixFile;
    let dir = dir();
    let (rows, cols) = (7usize, 5usize);
    let value = |i: usize, j: usize| (i * 10 + j) as i64;
    for fortran in [false, true] {
        let header = format!(
            "{{'descr': '<i8', 'fortran_order': {}, 'shape': ({rows}, {cols}), }}",
            if fortran { "True" } else { "False" }
        );
        let mut data = Vec::new();
        let (outer, inner) = if fortran { (cols, rows) } else { (rows, cols) };
        for o in 0..outer {
            for i in 0..inner {
                let v = if fortran { value(i, o) } else { value(o, i) };
                data.extend_from_slice(&v.to_le_bytes());
            }
        }
        let path = dir.join(format!("parts-{fortran}.npy"));
        std::fs::write(&path, npy_bytes(&header, &data)).unwrap();
        let file = MatrixFile::open(&path, None).unwrap();
        assert_eq!(
            (file.rows, file.cols, file.column_major),
            (rows, cols, fortran)
        );
        for r in [0..0, 0..1, 2..5, 6..7, 0..7] {
            for c in [0..0, 1..2, 0..5, 3..5] {
                let part = file.map_part(r.clone(), c.clone()).unwrap();
                let view = part.view::<i64>().unwrap();
                assert_eq!(view.shape(), (r.len(), c.len()));
                for (i, row) in r.clone().enumerate() {
                    for (j, col) in c.clone().enumerate() {
                        assert_eq!(view.get(i, j), value(row, col), "{fortran} {r:?} {c:?}");
                    }
                }
                let lines = if fortran { c.len() } else { r.len() };
                let want = if r.is_empty() || c.is_empty() {
                    0
                } else {
                    lines * inner * 8
                };
                assert_eq!(part.mapped_bytes(), want, "{fortran} {r:?} {c:?}");
            }
        }
        assert!(file.map_part(0..8, 0..1).is_err());
        assert!(file.map_part(0..1, 4..6).is_err());
        assert!(file.map_part(0..1, 0..1).unwrap().view::<f64>().is_err());
    }
}
