//! Peers that fastmm is measured against from more than one tool: OpenBLAS
//! through numpy in a child process, shared by `fastmm-peers` and
//! `fastmm bench --peers`.

pub mod numpy;
