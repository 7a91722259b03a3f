#!/usr/bin/env bash
# fastmm's emulated product beside GEMMul8 (the public Ozaki-II library)
# and cuBLAS, on the GPU machine, in one process: same inputs, same error
# measure (scripts/gemmul8_peer.py says which).
#
#   GEMMUL8_DIR=.peers/GEMMul8 bash scripts/gemmul8-peer.sh --sizes 16384 --dtypes f64,f32
#
# GEMMUL8_DIR is a copy of GEMMul8's sources (its include/ and src/); none
# of it is kept in this tree. Only the two real INT8 products the driver
# calls are compiled (crates/fastmm-peers/cuda/gemmul8_peer.cu, under a
# minute). fastmm comes from the wheel under target/wheels (maturin build
# --release -m python/Cargo.toml), installed into a private folder, or
# from the Python environment when no wheel is there. The arguments go to
# gemmul8_peer.py.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GEMMUL8_DIR:?set GEMMUL8_DIR to a copy of GEMMul8 (its include/ and src/)}"
build=${PEER_BUILD:-/tmp/fastmm-gemmul8-peer}
mkdir -p "$build"
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '. ')
lib=$build/libgemmul8_peer.so
if [ ! -f "$lib" ] || [ crates/fastmm-peers/cuda/gemmul8_peer.cu -nt "$lib" ]; then
  start=$(date +%s)
  nvcc -std=c++20 -O3 -diag-suppress 177 -Xcompiler -fPIC -shared \
    -gencode "arch=compute_$arch,code=sm_$arch" \
    -I"$GEMMUL8_DIR/include" -I"$GEMMUL8_DIR/src" \
    crates/fastmm-peers/cuda/gemmul8_peer.cu -o "$lib" -lcublas -lcublasLt -lcudart
  echo "# built $lib for sm_$arch in $(( $(date +%s) - start )) s"
fi
# The newest wheel: pip refuses two builds of one version side by side.
wheel=$(ls -t target/wheels/fastmm-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ]; then
  site=$build/site
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" "$wheel"
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
PYTHONUNBUFFERED=1 python3 scripts/gemmul8_peer.py --lib "$lib" "$@"
