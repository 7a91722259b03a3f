#!/bin/bash
# Session 20, final binary: A/B against the HEAD binary on the f64 SIMT
# shapes whose kernels changed (stream-K's one-step 8x4 loop, the 4x4
# tiles) and one that did not (8192^3, the two-step 8x4 loop), then the
# quick correctness pass. Both binaries carried under target/gpu-bin/.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export FASTMM_TUNING=off
FASTMM_BASE=target/gpu-bin/fastmm-base FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab ROUNDS=2 \
  SHAPES="4096:4096:4096:f64:simt 2048:2048:2048:f64:simt 1024:1024:1024:f64:simt 1000:1000:1000:f64:simt 8192:8192:8192:f64:simt 4096:4096:4096:i64:simt" \
  bash scripts/gpu-ab.sh
bash scripts/gpu-quick-check.sh target/gpu-bin/fastmm > $OUT/quick-check.txt 2>&1
echo "quick check: $(grep -c '^ok' $OUT/quick-check.txt) ok, $(grep -c '^FAIL' $OUT/quick-check.txt) failed"
