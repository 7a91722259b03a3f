#!/bin/bash
# Session 20: f64 SIMT kernels with A's shared tile stored by rows (cp.async
# straight into place) against the HEAD binary (A through per-thread slots,
# stored transposed). Quick correctness pass on the new binary first, then
# A/B with cuBLAS in every call. Run on the lent H100 with both binaries
# carried under target/gpu-bin/.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export FASTMM_TUNING=off
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
bash scripts/gpu-quick-check.sh target/gpu-bin/fastmm > $OUT/quick-check.txt 2>&1
echo "quick check: $(grep -c '^ok' $OUT/quick-check.txt) ok, $(grep -c '^FAIL' $OUT/quick-check.txt) failed"
grep FAIL $OUT/quick-check.txt | head -5
FASTMM_BASE=target/gpu-bin/fastmm-base FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab ROUNDS=${ROUNDS:-2} \
  SHAPES=${SHAPES:-"8192:8192:8192:f64:simt 4096:4096:4096:f64:simt 2048:2048:2048:f64:simt 1024:1024:1024:f64:simt"} \
  bash scripts/gpu-ab.sh
