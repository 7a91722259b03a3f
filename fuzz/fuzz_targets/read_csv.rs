#![no_main]
//! Arbitrary bytes as CSV or TSV of each element type (chosen by the first
//! byte): an error naming the line, or a matrix that round-trips.

mod common;

use fastmm::io::{Format, ReadOptions};
use fastmm::DType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, text)) = data.split_first() else {
        return;
    };
    let format = if choice & 4 == 0 {
        Format::Csv
    } else {
        Format::Tsv
    };
    let dtype = DType::ALL[usize::from(choice & 3)];
    let opts = ReadOptions {
        dtype: Some(dtype),
        ..Default::default()
    };
    common::check(format, text, opts);
});
