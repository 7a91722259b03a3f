#!/usr/bin/env bash
# Session 21 (2026-11-24), on the lent H100, from the repository root, with
# target/gpu-bin/fastmm-base = commit 0bcfb7d's release binary (stripped)
# and target/gpu-bin/fastmm = the same with the temporary 8x8 switch
# (FASTMM_EXP_F64_8X8 in simt_micro_tile, since removed). Logs under $OUT.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH FASTMM_TUNING=off
nvcc -O3 -arch=sm_90 scripts/probes/cublaslt_simt_dgemm.cu -lcublasLt -lcublas -o /tmp/lt
nvcc -O3 -arch=sm_90 scripts/probes/fma_peak.cu -o /tmp/fma
smi() { nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 >"$OUT/smi-$1.csv" & }
smi lt; P=$!; /tmp/lt 8192 >"$OUT/cublaslt-simt-dgemm.log" 2>&1; kill $P
smi fast; P=$!
target/gpu-bin/fastmm-base run --device cuda --algo cublas,cuda-fast --cuda-kernel simt -s 8192 -d f64 --reps 20 \
  >"$OUT/fastmm-8192-f64-simt.log" 2>&1
kill $P
smi fma; P=$!; /tmp/fma >"$OUT/fma-peak.log" 2>&1; kill $P
ncu --metrics launch__registers_per_thread,launch__block_size,launch__grid_size,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum \
  /tmp/lt 4096 >"$OUT/cublaslt-ncu-4096.log" 2>&1
FASTMM_BASE=target/gpu-bin/fastmm-base FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab ROUNDS=2 \
  VARIANTS="e88:FASTMM_EXP_F64_8X8=1" \
  SHAPES="8192:8192:8192:f64:simt:8 4096:4096:4096:f64:simt:8 2048:2048:2048:f64:simt:8" bash scripts/gpu-ab.sh
