#!/usr/bin/env bash
# Registers, shared memory and spills of every CUDA kernel for sm_90, without
# a GPU: NVRTC (nvidia-cuda-nvrtc wheel) writes the PTX, ptxas from the
# nvidia-cuda-nvcc wheel reports. Installs both wheels under target/ if absent.
set -euo pipefail
cd "$(dirname "$0")/.."
for wheel in nvrtc nvcc; do
  dir=target/$wheel-wheel
  [ -d "$dir/nvidia" ] || python3 -m pip install --quiet --disable-pip-version-check --target "$dir" "nvidia-cuda-$wheel==13.0.*"
done
export LD_LIBRARY_PATH="$PWD/target/nvrtc-wheel/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=target/ptx
cargo run --release --quiet -p fastmm --features dev --example ptx_dump -- "$out" >/dev/null
for ptx in "$out"/*.ptx; do
  echo "== $(basename "$ptx" .ptx)"
  target/nvcc-wheel/nvidia/cu13/bin/ptxas -arch=sm_90 -v "$ptx" -o /dev/null 2>&1 | grep -E "registers|spill|smem" | sed 's/^ptxas info *: //'
done
