#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: the accuracy levels' measurements
# (docs/results.md, "Accuracy"). Each part fits one 10-minute call of the
# lent machine; logs go to $OUT.
#
#   scripts/accuracy-gpu.sh calibrate  # cuBLAS's own errors against k (the
#                                      # native level's λ), the emulated
#                                      # product's error and time per bits
#   scripts/accuracy-gpu.sh peer       # the split-TF32 peer beside sgemm and TF32
#   scripts/accuracy-gpu.sh targets    # f32/f64 at native: emulated against
#                                      # cuBLAS at 16384 and the crossovers
#   scripts/accuracy-gpu.sh relaxed    # auto at tf32 and bound, f32 16384
#   scripts/accuracy-gpu.sh audit      # every input class at 16384, f32 and f64
#                                      # (DTYPES=f64 for one type)
#   scripts/accuracy-gpu.sh torch      # fastmm.matmul on torch tensors at 16384
#                                      # against torch.matmul (needs the wheel in
#                                      # target/wheels)
#   scripts/accuracy-gpu.sh selftest   # selftest --device cuda (the accuracy
#                                      # matrix included)
#
# BIN (default target/release/fastmm) is the binary built on the
# development machine.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FASTMM_TUNING=off NCCL_NVLS_ENABLE=0
OUT=${OUT:-accuracy-gpu}
mkdir -p "$OUT"
bin=${BIN:-target/release/fastmm}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv

# name, seconds, fastmm arguments...: one logged command, its output shown.
step() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout "$limit" "$bin" "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  [ $code = 0 ] || status=1
  echo "== $name: exit $code in $((SECONDS - start)) s"
  grep -v "^$" "$OUT/$name.log" | cut -c1-220 | tail -n "${SHOW:-40}"
}

for part in "$@"; do
  case $part in
  calibrate)
    step cal-f32 300 accuracy --device cuda -d f32 --shapes 1024,4096,16384 \
      --classes uniform,cancellation --sample-rows 16 \
      --products cublas,emulated:bits:16,emulated:bits:20,emulated:bits:24
    step cal-f64 300 accuracy --device cuda -d f64 --shapes 1024,4096,16384 \
      --classes uniform,cancellation --sample-rows 16 \
      --products cublas,emulated:bits:47,emulated:bits:51,emulated:bits:55
    for bits in 12 20 24; do
      step "time-f32-bits$bits" 120 run --device cuda -s 16384 -d f32 --algo cublas,emulated \
        --accuracy "bits:$bits" -r 3
    done
    for bits in 47 51 55; do
      step "time-f64-bits$bits" 120 run --device cuda -s 16384 -d f64 --algo cublas,emulated \
        --accuracy "bits:$bits" -r 3
    done
    ;;
  peer)
    nvcc -O2 -o "$OUT/split_tf32" crates/fastmm-peers/cuda/split_tf32.cu -lcublas || status=1
    for n in 8192 16384; do
      "$OUT/split_tf32" "$n" 5 | tee -a "$OUT/peer.log" || status=1
    done
    ;;
  targets)
    # f32 and f64 at the native level: emulated (and auto) against cuBLAS
    # at the target size and around the crossovers.
    SHOW=12
    for shape in f32:2048 f32:4096 f32:16384 f64:12288 f64:16384; do
      dtype=${shape%:*} n=${shape#*:}
      step "native-$dtype-$n" 200 run --device cuda -s "$n" -d "$dtype" \
        --algo cublas,emulated,auto -r 7
    done
    ;;
  relaxed)
    SHOW=12
    step relaxed-f32-16384 180 run --device cuda -s 16384 -d f32 --algo cublas,auto --accuracy tf32 -r 5
    step bound-f32-16384 180 run --device cuda -s 16384 -d f32 --algo auto --accuracy bound -r 5
    ;;
  audit)
    # Every input class at 16384: the native products, the emulated
    # product at native, TF32 beside them (errors over 16 sampled rows).
    # DTYPES=f64 runs one type (both take longer than one call allows).
    SHOW=60 step audit-16384 560 accuracy --device cuda -d "${DTYPES:-f32,f64}" --shapes 16384 --sample-rows 16 \
      --products cublas,emulated:native,auto:native,cublas:tf32
    ;;
  torch)
    python3 -m pip install -q --no-index --no-deps --target /tmp/site target/wheels/*.whl \
      && PYTHONPATH=/tmp/site python3 scripts/torch_accuracy.py 16384 | tee "$OUT/torch.log" \
      || status=1
    ;;
  selftest)
    SHOW=20 step selftest 560 selftest --device cuda
    ;;
  *)
    echo "unknown part $part"
    status=2
    ;;
  esac
done
exit $status
