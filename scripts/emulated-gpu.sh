#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: the emulated product's measurements
# against GEMMul8 and cuBLAS (docs/results.md, "`emulated` beside
# GEMMul8"). Each part fits one 10-minute call of the lent machine; logs
# go to $OUT (and the peer's JSON records to $OUT/peer.jsonl).
#
#   scripts/emulated-gpu.sh peer      # GEMMul8 (every mode, 13-16 / 6-8
#                                     # moduli) beside fastmm and cuBLAS,
#                                     # 8192 and 16384, f64 and f32
#   scripts/emulated-gpu.sh classes   # the same at 16384 on the hard classes
#                                     # (fastmm's native route and GEMMul8's
#                                     # fastest configurations)
#   scripts/emulated-gpu.sh large     # 32768 (an H200's memory)
#   scripts/emulated-gpu.sh phases    # run's kernel column: the decision's
#                                     # steps, split, INT8 products, CRT
#                                     # at 16384
#   scripts/emulated-gpu.sh ncu       # each emulated kernel's time and
#                                     # DRAM / SM throughput at 8192
#   scripts/emulated-gpu.sh complex   # c128 and c64 beside zgemm and cgemm
#                                     # (SIZE, default 16384)
#   scripts/emulated-gpu.sh selftest  # selftest --device cuda --algo emulated
#   scripts/emulated-gpu.sh int8      # the INT8 products' kernels A/B/C
#                                     # (cuBLAS's, the own wgmma, wgmma in
#                                     # pairs; FASTMM_DEV_CUDA_INT8, so BIN
#                                     # is built with --features fastmm/dev):
#                                     # a smoke run of each, the self-test
#                                     # with the own kernel, then run's
#                                     # phases at 16384 and 8192, alternated
#
# GEMMUL8_DIR names a copy of GEMMul8's sources (default .peers/GEMMul8);
# BIN (default target/release/fastmm) is the binary built on the
# development machine; the peer takes fastmm from the wheel under
# target/wheels.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
export FASTMM_TUNING=off NCCL_NVLS_ENABLE=0
export GEMMUL8_DIR=${GEMMUL8_DIR:-.peers/GEMMul8}
OUT=${OUT:-emulated-gpu}
mkdir -p "$OUT"
bin=${BIN:-target/release/fastmm}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv

# name, seconds, command...: one logged command, the end of its output shown.
step() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  [ $code = 0 ] || status=1
  echo "== $name: exit $code in $((SECONDS - start)) s"
  grep -v "^$" "$OUT/$name.log" | cut -c1-240 | tail -n "${SHOW:-40}"
}
# The peer's command line (timeout runs programs, not shell functions).
peer=(bash scripts/gemmul8-peer.sh --reps 5 --json "$OUT/peer.jsonl")

for part in "$@"; do
  case $part in
  peer) step peer 560 "${peer[@]}" --sizes 16384,8192 --dtypes f64,f32 ;;
  classes)
    step classes 560 "${peer[@]}" --sizes 16384 --dtypes f64,f32 --classes wide,scaled,cancellation \
      --moduli-f64 15,16 --moduli-f32 7,8
    ;;
  large) step large 560 "${peer[@]}" --sizes 32768 --dtypes f64,f32 --moduli-f64 15 --moduli-f32 7 --modes fast ;;
  phases)
    SHOW=12 step phases 400 "$bin" run --device cuda -s 16384 -d f64,f32 --algo cublas,emulated -r 3 --progress
    ;;
  ncu)
    metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread
    for dtype in f64 f32; do
      SHOW=4 step "ncu-$dtype" 200 ncu -k regex:emu_ --metrics "$metrics" --csv \
        "$bin" run --device cuda -s 8192 -d "$dtype" --algo emulated -r 1 --warmup 0
    done
    ;;
  complex)
    SHOW=12 step "complex-${SIZE:-16384}" 560 "$bin" run --device cuda -s "${SIZE:-16384}" -d c128,c64 \
      --algo cublas,emulated -r 3
    ;;
  selftest) SHOW=12 step selftest 500 "$bin" selftest --device cuda --algo emulated ;;
  int8)
    for kernels in wgmma wgmma-pairs; do
      FASTMM_DEV_CUDA_INT8=$kernels SHOW=4 step "int8-smoke-$kernels" 60 \
        "$bin" run --device cuda -s 1000 -d f64,f32 --algo cublas,emulated -r 1
    done
    FASTMM_DEV_CUDA_INT8=wgmma SHOW=12 step int8-selftest 200 "$bin" selftest --device cuda --algo emulated
    for size in 16384 8192; do
      for kernels in cublas wgmma wgmma-pairs cublas wgmma wgmma-pairs; do
        FASTMM_DEV_CUDA_INT8=$kernels SHOW=4 step "int8-$size-$kernels" 120 \
          "$bin" run --device cuda -s "$size" -d f64,f32 --algo cublas,emulated -r 3
      done
    done
    ;;
  *)
    echo "unknown part $part" >&2
    status=2
    ;;
  esac
done
exit $status
