#!/usr/bin/env bash
# The project's test command: formatting, lints, then every test in release
# mode (the O(n^3) shape matrix is too slow unoptimised), then the library
# suite again under each CPU kernel family this machine can run, forced
# through FASTMM_CPU_KERNEL, so every kernel is tested on one machine, and
# the Strassen suites with every fresh sum streamed (FASTMM_SUM_STORES),
# the path the test sizes are too small to take by themselves.
set -euo pipefail
cd "$(dirname "$0")/.."

# NVRTC (no GPU needed) from PyPI, so that the CUDA kernels' compile test
# runs here and a kernel that does not compile fails the suite.
nvrtc_dir=target/nvrtc-wheel
if ! ls "$nvrtc_dir"/nvidia/cu13/lib/libnvrtc.so.13 >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$nvrtc_dir" "nvidia-cuda-nvrtc==13.0.*"
fi
export LD_LIBRARY_PATH="$PWD/$nvrtc_dir/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FASTMM_REQUIRE_NVRTC=1
# A tuning file left by `fastmm tune` on this machine must not change what
# the tests see; the tuning tests point FASTMM_TUNING at their own files.
export FASTMM_TUNING=off

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
echo "== strassen tests with FASTMM_SUM_STORES=stream =="
FASTMM_SUM_STORES=stream cargo test -p fastmm --release --test strassen --test algorithms
