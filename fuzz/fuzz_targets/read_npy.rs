#![no_main]
//! Arbitrary bytes as a .npy file: an error or a matrix that round-trips.

mod common;

use fastmm::io::{Format, ReadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::check(Format::Npy, data, ReadOptions::default());
});
