#!/usr/bin/env bash
# The project's test command: formatting, lints, then every test in release
# mode (the O(n^3) shape matrix is too slow unoptimised).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release
