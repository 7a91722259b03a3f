#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: prove the CUDA backend correct and
# measure the GPU tables of docs/results.md. Each part fits one 10-minute
# call of the lent machine; logs and JSON records go to $OUT.
#
#   scripts/gpu-check.sh check     # selftest --device cuda, out-of-core
#                                  # checks, a mapped multiply against numpy
#   scripts/gpu-check.sh results   # cuda-fast, cuBLAS, Strassen/Winograd
#   scripts/gpu-check.sh ooc       # out of core within budgets below the data
#   scripts/gpu-check.sh multi     # every GPU: selftest --device cuda:all, n = 32768
#                                  # device- and host-resident, Winograd across the
#                                  # GPUs, cuBLASXt beside (tile edge swept)
#   scripts/gpu-check.sh multi-big # every GPU at n = 65536 (no one-GPU baseline:
#                                  # its pageable copies alone take minutes)
#   scripts/gpu-check.sh emulated  # the INT8 rate (cuBLAS layouts, cublasLt, torch),
#                                  # emulated against cuBLAS at 16384, 8192 and
#                                  # 8192×1024×8192, wide exponent ranges, power
#
# BIN (default target/release/fastmm) is the binary built on the
# development machine; FASTMM_KERNEL_CACHE may point at PTX compiled there
# (`cargo run --release -p fastmm --features dev --example kernel_cache`).
set -uo pipefail
part=${1:?usage: gpu-check.sh check|results|ooc|multi|multi-big|emulated}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FASTMM_TUNING=off NCCL_NVLS_ENABLE=0
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
bin=${BIN:-target/release/fastmm}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv > "$OUT/nvidia-smi-$part.txt" 2>&1
cat "$OUT/nvidia-smi-$part.txt"

# name, seconds, fastmm arguments...: one logged command, its last lines.
step() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout "$limit" "$bin" "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  [ $code = 0 ] || status=1
  echo "== $name: exit $code in $((SECONDS - start)) s"
  tail -n 3 "$OUT/$name.log"
}

# name, fastmm run arguments...: one JSON record list per name.
record() {
  local name=$1 start=$SECONDS
  shift
  timeout 300 "$bin" run --device cuda --json "$@" > "$OUT/$name.json" 2>> "$OUT/errors.txt"
  local code=$?
  [ $code = 0 ] || status=1
  echo "== $name: exit $code in $((SECONDS - start)) s"
}

case $part in
check)
  step selftest 420 selftest --device cuda
  grep -E "FAIL|selftest:" "$OUT/selftest.log" | tail -n 20
  step ooc-20000-2G 120 run --device cuda --algo cublas,cuda-fast -s 20000 --max-gpu-memory 2G -r 1
  step ooc-f64-forced 120 run --device cuda --algo cublas,cuda-fast -d f64 -m 3000 -k 7000 -n 5000 --out-of-core -r 1
  mkdir -p "$OUT/files"
  python3 scripts/npy_files.py make "$OUT/files" 5 3000 2500 4100
  step multiply-mapped 120 multiply "$OUT/files/a.npy" "$OUT/files/b.npy" -o "$OUT/files/c.npy" \
    --algo cublas --out-of-core --max-gpu-memory 40M --check
  python3 scripts/npy_files.py compare "$OUT/files" "mapped multiply" | tee "$OUT/multiply-compare.txt"
  rm -rf "$OUT/files"
  ;;
results)
  # cuda-fast against cuBLAS: squares and rectangles in f32, f64 on the
  # tensor cores (mma) and on the FMA units (simt).
  for shape in 4096x4096x4096 8192x8192x8192 16384x16384x16384 8192x1024x8192 1024x8192x1024; do
    IFS=x read -r m k n <<< "$shape"
    record "fast-$shape-f32" --algo cublas,cuda-fast -m "$m" -k "$k" -n "$n" -d f32 --reps 5
  done
  record fast-8192-f64 --algo cublas,cuda-fast -s 8192 -d f64 --reps 5
  record fast-8192-f64-simt --algo cuda-fast --cuda-kernel simt --tile 8 -s 8192 -d f64 --reps 3
  # Strassen and Winograd over cuBLAS, `auto` (batched, the measured
  # levels), and three levels at 16384.
  record strassen-8192-f32 --algo cublas,winograd,strassen -s 8192 -d f32 --reps 5
  record strassen-16384-f32 --algo cublas,winograd,strassen -s 16384 -d f32 --reps 3
  record strassen-16384-f32-3 --algo winograd,strassen -s 16384 -d f32 --threshold 2048 --depth 3 --reps 3
  record strassen-8192-f64 --algo cublas,winograd,strassen -s 8192 -d f64 --reps 5
  # The seeds' kernels and cuBLAS's precision modes.
  record seeds-4096-f32 --algo cuda-naive,cuda-tiled,cublas -s 4096 -d f32 --reps 3
  record modes-8192-f32 --algo cublas -s 8192 -d f32 --precision tf32 --reps 3
  ;;
ooc)
  # A, B and C of 32768² f32 are 12 GiB: streamed through budgets of a
  # half and of a sixth of that, against the in-core product; and the
  # same with Strassen per tile.
  record incore-32768-f32 --algo cublas -s 32768 --warmup 0 -r 3
  record ooc-32768-f32-6G --algo cublas,winograd -s 32768 --max-gpu-memory 6G --warmup 0 -r 3
  record ooc-32768-f32-2G --algo cublas -s 32768 --max-gpu-memory 2G --warmup 0 -r 3
  ;;
multi|multi-big)
  # NCCL from the image's pip package, which installs only libnccl.so.2.
  nccl=$(python3 -c 'import glob, site; print(next(f for d in site.getsitepackages() for f in glob.glob(d + "/nvidia/nccl/lib/libnccl.so.2")))')
  mkdir -p "$OUT/nccl" && ln -sf "$nccl" "$OUT/nccl/libnccl.so"
  export LD_LIBRARY_PATH=$OUT/nccl:$LD_LIBRARY_PATH
  gpus=$(nvidia-smi -L | wc -l)
  nvcc -O2 -o "$OUT/cublasxt_sgemm" crates/fastmm-peers/cuda/cublasxt_sgemm.c -lcublas || status=1
  # cuBLASXt over every GPU, tuned as its users would tune it: its tile
  # edge swept (the default, 1024, is its slowest on large products),
  # pinning on (it pins the matrices per call) and the matrices
  # allocated page-locked (PIN 2).
  xt() { # n, reps, blocks...
    local n=$1 reps=$2 block pin
    shift 2
    for block in "$@"; do
      for pin in 1 2; do
        timeout 240 "$OUT/cublasxt_sgemm" -b "$block" "$n" "$reps" "$pin" $(seq 0 $((gpus - 1))) \
          > "$OUT/cublasxt-$n-b$block-p$pin.txt" 2>&1 || status=1
        tail -n 1 "$OUT/cublasxt-$n-b$block-p$pin.txt"
      done
    done
  }
  if [ "$part" = multi ]; then
    step selftest-all 420 selftest --device cuda:all
    grep -E "FAIL|selftest:" "$OUT/selftest-all.log" | tail -n 20
    timeout 400 "$bin" run --device cuda:all --json --algo cublas@cuda:0,cublas,winograd -s 32768 \
      --warmup 1 -r 5 > "$OUT/multi-32768-f32.json" 2>> "$OUT/errors.txt" || status=1
    xt 32768 3 1024 4096 8192
  else
    timeout 400 "$bin" run --device cuda:all --json --algo cublas -s 65536 --warmup 0 -r 2 \
      > "$OUT/multi-65536-f32.json" 2>> "$OUT/errors.txt" || status=1
    xt 65536 2 8192 16384
  fi
  ;;
emulated)
  # The INT8 rate cuBLAS reaches in each layout, and torch's _int_mm.
  nvcc -O2 -o "$OUT/int8_gemm" crates/fastmm-peers/cuda/int8_gemm.c -lcublas -lcublasLt || status=1
  for shape in "16384 16384 16384" "8192 8192 8192" "8192 1024 8192"; do
    timeout 120 "$OUT/int8_gemm" $shape 10 random 12 | tee -a "$OUT/int8-rate.txt" || status=1
  done
  timeout 120 python3 - <<'PY' | tee -a "$OUT/int8-rate.txt"
import torch
n = 16384
a = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
b = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
for name, bb in [("row-major B", b), ("column-major B", b.t().contiguous().t())]:
    torch._int_mm(a, bb)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        start.record(); torch._int_mm(a, bb); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    ms = sorted(times)[5]
    print(f"torch _int_mm {name} n={n} median_ms={ms:.3f} tops={2 * n**3 / ms / 1e9:.1f}")
PY
  # Power, where nvidia-smi reads it, beside the timed products.
  nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm --format=csv -lms 200 > "$OUT/power.csv" 2>&1 &
  smi=$!
  record emulated-16384-f64 --algo cublas,emulated -s 16384 -d f64 --reps 10
  record emulated-16384-f32 --algo cublas,emulated -s 16384 -d f32 --reps 10
  record emulated-8192 --algo cublas,emulated -s 8192 -d f32,f64 --reps 10
  record emulated-8192x1024x8192 --algo cublas,emulated -m 8192 -k 1024 -n 8192 -d f32,f64 --reps 10
  # Entries from 1e-30 to 1e30 (f64), and 1e-15 to 1e15 in f32, whose
  # products would overflow beyond that.
  record emulated-wide-16384-f64 --algo cublas,emulated -s 16384 -d f64 --decades 30 --reps 3
  record emulated-wide-16384-f32 --algo cublas,emulated -s 16384 -d f32 --decades 15 --reps 3
  kill $smi 2>/dev/null
  ;;
*)
  echo "unknown part $part (check, results, ooc, multi, multi-big or emulated)" >&2
  exit 2
  ;;
esac
if [ -n "$(ls "$OUT"/*.json 2>/dev/null)" ]; then
  python3 - "$OUT" <<'PY' | tee "$OUT/summary-$part.md"
import glob, json, os, sys
print("| record | algorithm | dtype | m×k×n | kernel | ms | TFLOPS | e2e TFLOPS | levels | ok |")
print("|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        records = json.load(open(path))
    except Exception as e:
        print(f"| {os.path.basename(path)} | unreadable: {e} |")
        continue
    for r in records:
        e2e = r.get("end_to_end_gflops")
        print(f"| {os.path.basename(path)[:-5]} | {r['algorithm']} | {r['dtype']} | {r['m']}×{r['k']}×{r['n']} "
              f"| {r['kernel'][:70]} | {r['median_ms']:.3f} | {r['gflops']/1e3:.2f} "
              f"| {'' if e2e is None else '%.2f' % (e2e/1e3)} | {r['levels'] if r['levels'] is not None else ''} "
              f"| {'ok' if r['ok'] else 'WRONG'} |")
PY
fi
[ -s "$OUT/errors.txt" ] && tail -n 20 "$OUT/errors.txt"
exit $status
