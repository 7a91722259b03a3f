#!/bin/bash
# Warp-stall reasons per SASS instruction of the f32 SIMT kernel (8x16,
# 4096^3, stream-K off so the whole product is one gemm_fast launch) and
# the stall summary of cuBLAS's sgemm in the same process. Run on the lent
# H100 with the binary carried at target/gpu-bin/fastmm.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export FASTMM_TUNING=off FASTMM_CUDA_STREAM_K=off
BIN=${BIN:-target/gpu-bin/fastmm}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
N=${N:-4096}
STALLS=smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
for who in ours cublas; do
  if [ $who = ours ]; then K='regex:^gemm_fast$'; A=cuda-fast; else K='regex:xmma|cutlass|sgemm|sm90|sm80'; A=cublas; fi
  $NCU --clock-control none --kernel-name "$K" --launch-count 1 \
    --metrics $STALLS --section SourceCounters --section WarpStateStats -o $OUT/stalls-$who \
    $BIN run --device cuda --algo $A -s $N -d f32 --reps 1 --warmup 0 --cuda-kernel simt > $OUT/ncu-run-$who.log 2>&1
  echo "ncu $who rc $?"; tail -3 $OUT/ncu-run-$who.log
  $NCU --import $OUT/stalls-$who.ncu-rep --page details > $OUT/details-$who.txt 2>&1
  $NCU --import $OUT/stalls-$who.ncu-rep --page source --print-source sass --csv > $OUT/sass-$who.csv 2>$OUT/source-err-$who.txt
  echo "source rc $? $(wc -c < $OUT/sass-$who.csv) bytes"; head -c 400 $OUT/source-err-$who.txt
  grep -E "gemm|xmma|stalled|issue_active|inst_executed|duration|registers|grid_size|block_size" $OUT/details-$who.txt | head -40
  gzip $OUT/sass-$who.csv; rm -f $OUT/stalls-$who.ncu-rep
done
