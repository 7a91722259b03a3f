#![no_main]
//! Arbitrary bytes as CSV, TSV or whitespace-separated text of each
//! element type, with the format's delimiter or ';' (all chosen by the
//! first byte): an error naming the line, or a matrix that round-trips.

mod common;

use fastmm::io::{Format, ReadOptions};
use fastmm::DType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, text)) = data.split_first() else {
        return;
    };
    let format = match (choice >> 2) & 3 {
        0 => Format::Csv,
        1 => Format::Tsv,
        _ => Format::Text,
    };
    let dtype = DType::ALL[usize::from(choice & 3)];
    let opts = ReadOptions {
        dtype: Some(dtype),
        delimiter: (choice & 16 != 0).then_some(';'),
        ..Default::default()
    };
    common::check(format, text, opts);
});
