#![no_main]
//! Arbitrary bytes as a raw file, with a shape and type taken from the
//! first bytes (possibly absurd): an error, or a matrix that round-trips.

mod common;

use fastmm::io::{Format, ReadOptions};
use fastmm::DType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 17 {
        return;
    }
    let rows = u64::from_le_bytes(data[0..8].try_into().unwrap()) as usize;
    let cols = u64::from_le_bytes(data[8..16].try_into().unwrap()) as usize;
    let dtype = DType::ALL[usize::from(data[16] & 3)];
    let opts = ReadOptions {
        dtype: Some(dtype),
        shape: Some((rows, cols)),
        ..Default::default()
    };
    common::check(Format::Raw, &data[17..], opts);
});
