#!/usr/bin/env bash
# The project's test command: formatting, lints, then every test in release
# mode (the O(n^3) shape matrix is too slow unoptimised), then the library
# suite again under each CPU kernel family this machine can run, forced
# through FASTMM_CPU_KERNEL, so every kernel is tested on one machine.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release

flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }
kernels=(generic)
if has avx2 && has fma; then kernels+=(avx2); fi
if has avx512f && has avx512dq && has fma; then kernels+=(avx512); fi
for kernel in "${kernels[@]}"; do
  echo "== library tests with FASTMM_CPU_KERNEL=$kernel =="
  FASTMM_CPU_KERNEL=$kernel cargo test -p fastmm --release
done
