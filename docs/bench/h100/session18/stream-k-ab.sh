#!/usr/bin/env bash
# Session 18 on the lent H100: stream-K for cuda-fast's SIMT kernel.
# 1. scripts/gpu-quick-check.sh on the new binary (every SIMT type and
#    tile, stream-K shapes included), 2. the same binary with stream-K off
#    (the base) against on (1 whole wave, the default) and 0 whole waves,
#    alternating, cuBLAS in every call (scripts/gpu-ab.sh).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FASTMM_TUNING=off
BIN=${BIN:-target/gpu-bin/fastmm}
OUT=${OUT:-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu.txt"
[ -n "${SKIP_CHECK:-}" ] || scripts/gpu-quick-check.sh "$BIN" >"$OUT/quick-check.txt" 2>&1
grep -c '^ok' "$OUT/quick-check.txt"; grep FAIL "$OUT/quick-check.txt" | head -5
grep stream "$OUT/quick-check.txt" | head -20
printf '#!/bin/sh\nFASTMM_CUDA_STREAM_K=off exec %s "$@"\n' "$PWD/$BIN" >/tmp/fastmm-sk-off
chmod +x /tmp/fastmm-sk-off
FASTMM_BASE=/tmp/fastmm-sk-off FASTMM_BIN=$BIN OUT=$OUT/ab ROUNDS=${ROUNDS:-2} REPS=10 \
  VARIANTS=${VARIANTS:-"sk1:FASTMM_CUDA_STREAM_K=1 sk0:FASTMM_CUDA_STREAM_K=0"} \
  SHAPES=${SHAPES:-"4096:4096:4096:f32 8192:8192:8192:f32 8192:1024:8192:f32 4096:4096:4096:f64:simt 8192:8192:8192:f64:simt 6144:6144:6144:f32"} \
  scripts/gpu-ab.sh
