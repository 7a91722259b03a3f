#!/usr/bin/env bash
# GPU out-of-core products on the lent GPU (docs/benchmarks.md).
# Usage: gpu-out-of-core.sh BIN OUT PART
# PART check: selftest --device cuda, small streamed products under tight
#   budgets, and `fastmm multiply` of mapped .npy files compared with numpy;
# PART bench: the out-of-core product at n = 90000 f32 (A, B, C 97.2 GB:
#   1.2× an 80 GB card); PART incore: in-core cuBLAS sgemm (square 32768,
#   the tile's shape, 16384) to compare with. Each fits one 10-minute call.
set -u
bin=$1 out=$2 part=$3
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FASTMM_TUNING=off
{ nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  nproc; free -g; } > "$out/machine-$part.txt" 2>&1
run() { # name, timeout, args...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$bin" "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - start)) s"
  tail -n 4 "$out/$name.log"
}
if [ "$part" = check ]; then
  run selftest 480 selftest --device cuda
  grep -E "out of core|selftest:" "$out/selftest.log"
  run ooc-20000-2G 200 run --device cuda --algo cublas -s 20000 --max-gpu-memory 2G -r 3
  run ooc-16384-forced 200 run --device cuda --algo cublas,cuda-fast -s 16384 --out-of-core -r 3
  run ooc-f64-12000x30000x9000 200 run --device cuda --algo cublas -d f64 -m 12000 -k 30000 -n 9000 --max-gpu-memory 3G -r 2
  mkdir -p "$out/files" && cd "$out/files" && python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(5)
np.save("a.npy", rng.uniform(-1, 1, (3000, 2500)).astype(np.float32))
np.save("b.npy", np.asfortranarray(rng.uniform(-1, 1, (2500, 4100)).astype(np.float32)))
PY
  cd - > /dev/null
  run multiply-mapped 200 multiply "$out/files/a.npy" "$out/files/b.npy" -o "$out/files/c.npy" --algo cublas --out-of-core --max-gpu-memory 40M --check
  python3 - "$out/files" <<'PY' > "$out/multiply-compare.txt" 2>&1
import sys, numpy as np
d = sys.argv[1]
a, b, c = (np.load(f"{d}/{x}.npy") for x in "abc")
ref = a.astype(np.float64) @ b.astype(np.float64)
print("shape", c.shape, c.dtype, "max relative error", np.abs(c - ref).max() / np.abs(ref).max())
PY
  cat "$out/multiply-compare.txt"
  rm -rf "$out/files"
fi
if [ "$part" = incore ]; then
  run incore-32768 200 run --device cuda --algo cublas -s 32768 -r 3 --warmup 0 --json
  run incore-tile-8192x90000x8192 200 run --device cuda --algo cublas -m 8192 -k 90000 -n 8192 -r 3 --warmup 0 --json
  run incore-16384 200 run --device cuda --algo cublas -s 16384 -r 3 --warmup 0 --json
fi
if [ "$part" = bench ]; then
  run ooc-90000 560 run --device cuda --algo cublas -s 90000 --warmup 0 -r 2 --json
fi
ls -la "$out"
