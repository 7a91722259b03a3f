#!/usr/bin/env bash
# Session 19: two k steps per trip for the two-block kernels too (f64 8x4
# and 4x4, i64 4x4; gemm_fast only, no spills). Quick check of f64 and i64
# on the new binary, then the committed binary (fastmm-base) against it.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FASTMM_TUNING=off
OUT=${OUT:-out}
mkdir -p "$OUT"
scripts/gpu-quick-check.sh target/gpu-bin/fastmm >"$OUT/quick-check.txt" 2>&1
echo "quick check ok: $(grep -c '^ok' "$OUT/quick-check.txt") fail: $(grep -c FAIL "$OUT/quick-check.txt")"; grep FAIL "$OUT/quick-check.txt" | head -3
FASTMM_BASE=target/gpu-bin/fastmm-base FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab ROUNDS=2 REPS=10 \
  SHAPES=${SHAPES:-"8192:8192:8192:f64:simt 4096:4096:4096:f64:simt 1000:1000:1000:f64:simt 2048:2048:2048:f64:simt:4"} \
  scripts/gpu-ab.sh
