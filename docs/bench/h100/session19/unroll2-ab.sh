#!/usr/bin/env bash
# Session 19 on the lent H100: k_loop with two steps per trip (constant
# shared buffers) against HEAD. 1. the quick check on the new binary,
# 2. HEAD (fastmm-base) and new alternating, cuBLAS in every call.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FASTMM_TUNING=off
OUT=${OUT:-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu.txt"
[ -n "${SKIP_CHECK:-}" ] || { scripts/gpu-quick-check.sh target/gpu-bin/fastmm >"$OUT/quick-check.txt" 2>&1;
  echo "quick check ok: $(grep -c '^ok' "$OUT/quick-check.txt")"; grep FAIL "$OUT/quick-check.txt" | head -5; }
FASTMM_BASE=target/gpu-bin/fastmm-base FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab ROUNDS=${ROUNDS:-2} REPS=10 \
  SHAPES=${SHAPES:-"4096:4096:4096:f32 8192:8192:8192:f32 16384:16384:16384:f32 8192:1024:8192:f32 4096:4096:4096:f64:simt"} \
  scripts/gpu-ab.sh
