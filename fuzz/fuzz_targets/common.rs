//! Shared by the targets: a file that parses must encode and parse back
//! to the same matrix.

use fastmm::io::{encode_matrix, parse_matrix, AnyMatrix, Format, ReadOptions};

/// A reader may allocate at most this for a matrix the file does not
/// bound (libFuzzer's memory limit is 2 GiB).
pub const MAX_BYTES: u64 = 64 << 20;

pub fn check(format: Format, data: &[u8], opts: ReadOptions) {
    let opts = ReadOptions {
        max_bytes: Some(MAX_BYTES),
        ..opts
    };
    let Ok(m) = parse_matrix(format, data, &opts) else {
        return;
    };
    round_trip(format, &m, &opts);
}

fn round_trip(format: Format, m: &AnyMatrix, opts: &ReadOptions) {
    let bytes = encode_matrix(format, m).expect("a parsed matrix encodes");
    // Written with the format's own delimiter, so read back with it.
    let opts = ReadOptions {
        dtype: Some(m.dtype()),
        shape: Some(m.shape()),
        delimiter: None,
        ..*opts
    };
    let back = parse_matrix(format, &bytes, &opts).expect("an encoded matrix parses");
    let back = back.to(m.dtype()).expect("same type");
    // Compared as encodings, so NaN payloads (binary formats carry them)
    // compare bit for bit. Text cannot hold m×0 matrices: they come back
    // 0×0.
    if m.shape().1 > 0 || format == Format::Npy || format == Format::Raw {
        let again = encode_matrix(format, &back).expect("encodes again");
        assert!(
            again == bytes,
            "round trip through {format:?}: {m:?} came back as {back:?}"
        );
    }
}
