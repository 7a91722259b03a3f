//! The library's integration tests, one binary: each file is a module, so
//! the generic products they share are compiled once rather than once per
//! test file (eight binaries took about 300 s of compile time in CI).

mod accuracy;
mod algorithms;
mod complex_direct;
mod direct_path;
mod executor;
mod interop;
mod interrupt;
mod layers;
mod packed_kernels;
mod strassen;
mod threads;
