#!/usr/bin/env bash
# Session 19, third call: with two k steps per trip in gemm_fast (the
# one-block-per-SM kernels), where does stream-K (whose kernel keeps one
# step per trip) still pay? The new binary with stream-K off (base) and on,
# alternating, cuBLAS in every call.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FASTMM_TUNING=off
OUT=${OUT:-out}
mkdir -p "$OUT"
printf '#!/bin/sh\nFASTMM_CUDA_STREAM_K=off exec %s "$@"\n' "$PWD/target/gpu-bin/fastmm" >/tmp/fastmm-off; chmod +x /tmp/fastmm-off
FASTMM_BASE=/tmp/fastmm-off FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab ROUNDS=2 REPS=10 VARIANTS="sk:FASTMM_CUDA_STREAM_K=on" \
  SHAPES=${SHAPES:-"2048:2048:2048:f32 3072:3072:3072:f32 4096:4096:4096:f32 6144:6144:6144:f32 8192:8192:8192:f32 8192:1024:8192:f32 4096:4096:4096:i32"} \
  scripts/gpu-ab.sh
