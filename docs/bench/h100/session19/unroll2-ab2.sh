#!/usr/bin/env bash
# Session 19, second call: the plain kernel (stream-K off) in both binaries
# at 4096 and 8192, 16384 once more, and ncu's stall summary of the
# stream-K kernel (4096^3) in both.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FASTMM_TUNING=off
OUT=${OUT:-out}
mkdir -p "$OUT"
for b in fastmm fastmm-base; do
  printf '#!/bin/sh\nFASTMM_CUDA_STREAM_K=off exec %s "$@"\n' "$PWD/target/gpu-bin/$b" >/tmp/$b-off; chmod +x /tmp/$b-off
done
FASTMM_BASE=/tmp/fastmm-base-off FASTMM_BIN=/tmp/fastmm-off OUT=$OUT/ab-off ROUNDS=2 REPS=10 \
  SHAPES="4096:4096:4096:f32 8192:8192:8192:f32" scripts/gpu-ab.sh
FASTMM_BASE=target/gpu-bin/fastmm-base FASTMM_BIN=target/gpu-bin/fastmm OUT=$OUT/ab16k ROUNDS=1 REPS=5 \
  SHAPES="16384:16384:16384:f32" scripts/gpu-ab.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
M=smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size
for b in fastmm-base fastmm; do
  for kern in gemm_fast_stream gemm_fast; do
    [ $kern = gemm_fast ] && E=FASTMM_CUDA_STREAM_K=off || E=FASTMM_CUDA_STREAM_K=on
    env $E $NCU --clock-control none --kernel-name "regex:^$kern\$" --launch-count 1 --metrics $M \
      target/gpu-bin/$b run --device cuda --algo cuda-fast -s 4096 -d f32 --reps 1 --warmup 0 --cuda-kernel simt 2>&1 \
      | grep -E "^  gemm|stalled|issue_active|inst_executed|duration|registers|grid" | sed "s/^/$b $kern: /" | tee -a $OUT/ncu-stream.txt
  done
done
