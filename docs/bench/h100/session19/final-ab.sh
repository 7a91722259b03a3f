#!/usr/bin/env bash
# Session 19, last call: the issue-6 shapes, the session's start (bf57b62,
# fastmm-base) and end (fastmm) binaries alternating, cuBLAS in every call,
# --reps 10 (each the median of 5 back-to-back launches).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FASTMM_TUNING=off
OUT=${OUT:-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUT/gpu.txt"
FASTMM_BASE=target/gpu-bin/fastmm-base FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab ROUNDS=1 REPS=10 \
  SHAPES=${SHAPES:-"4096:4096:4096:f32 8192:8192:8192:f32 16384:16384:16384:f32 8192:1024:8192:f32 1024:8192:1024:f32 3072:3072:3072:f32 8192:8192:8192:f64 8192:8192:8192:f64:simt"} \
  scripts/gpu-ab.sh
