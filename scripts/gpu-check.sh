#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: prove the CUDA backend correct
# (`fastmm selftest --device cuda`) and time it against cuBLAS and, where
# PyTorch is installed, torch.matmul in fp32. Logs go to $OUT (default ./gpu-check).
#   FASTMM_BIN=target/release/fastmm scripts/gpu-check.sh [sizes...]
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
BIN=${FASTMM_BIN:-target/release/fastmm}
SIZES=${*:-1024 4096 8192}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.txt"
"$BIN" selftest --device cuda 2>&1 | tee "$OUT/selftest.txt" || status=1
for n in $SIZES; do
  for dt in f32 f64; do
    "$BIN" run --device cuda --algo cublas,cuda-fast,cuda-tiled,cuda-naive -s "$n" -d $dt --reps 5 --json \
      >"$OUT/run-$n-$dt.json" 2>>"$OUT/errors.txt" || status=1
  done
done
if [ -n "${SEED_TABLES:-}" ]; then
  # Seed 002 §10.5: global (device), pitched and unified (managed) memory,
  # and the tile sweep of the shared-memory kernel.
  for n in 512 1024 2048 4096 5000; do
    for mem in device pitched managed; do
      "$BIN" run --device cuda --algo cuda-tiled,cuda-naive --gpu-memory $mem -s $n -d f32 --reps 3 --json \
        >"$OUT/run-mem-$n-$mem.json" 2>>"$OUT/errors.txt" || status=1
    done
  done
  for tile in 2 4 8 16 32; do
    "$BIN" run --device cuda --algo cuda-tiled --tile $tile -s 2048 -d f32 --reps 3 --json \
      >"$OUT/run-tile-$tile.json" 2>>"$OUT/errors.txt" || status=1
  done
fi
python3 - "$OUT" $SIZES <<'PY' | tee "$OUT/summary.md"
import json, sys, glob, os
out, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
torch_ms = {}
try:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    for n in sizes:
        a = torch.rand(n, n, device="cuda") * 2 - 1; b = torch.rand(n, n, device="cuda") * 2 - 1
        for _ in range(3): a @ b
        times = []
        for _ in range(11):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); a @ b; e.record(); torch.cuda.synchronize(); times.append(s.elapsed_time(e))
        torch_ms[n] = sorted(times)[len(times) // 2]
except Exception as err:
    print(f"torch: {err}")
print("| n | dtype | algorithm | kernel | kernel ms | TFLOPS | upload ms | download ms | end-to-end TFLOPS | verdict | vs torch fp32 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(out, "run-*.json"))):
    for r in json.load(open(path)):
        n = r["n"]
        vs = ""
        if r["dtype"] == "f32" and n in torch_ms:
            vs = "%.3f×" % (torch_ms[n] / r["median_ms"])
        print(f"| {n} | {r['dtype']} | {r['algorithm']} | {r['kernel']} | {r['median_ms']:.3f} | {r['gflops']/1e3:.2f} | {r['upload_ms']:.1f} | {r['download_ms']:.1f} | {r['end_to_end_gflops']/1e3:.2f} | {'ok' if r['ok'] else 'WRONG'} | {vs} |")
for n, ms in torch_ms.items():
    print(f"| {n} | f32 | torch.matmul (tf32 off) | | {ms:.3f} | {2*n**3/ms/1e9:.2f} | | | | | 1.000× |")
PY
exit $status
