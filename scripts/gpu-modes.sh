#!/usr/bin/env bash
# On a GPU machine: cuBLAS's precision modes and pinned vs pageable
# transfers, side by side; and the on-disk kernel cache (a second process
# finds the PTX the first compiled). Output: a markdown table on stdout.
#   FASTMM_BIN=target/release/fastmm scripts/gpu-modes.sh [n]
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=${FASTMM_BIN:-target/release/fastmm}
N=${1:-8192}
tmp=$(mktemp -d)
status=0
for p in fp32 tf32 bf16 f16; do
  "$BIN" run --device cuda --algo cublas --precision $p -s "$N" -d f32 --reps 3 --json >"$tmp/prec-$p.json" || status=1
done
for pinned in "" --pinned; do
  "$BIN" run --device cuda --algo cublas -s "$N" -d f32 --reps 3 --json $pinned >"$tmp/xfer${pinned}.json" || status=1
done
export FASTMM_KERNEL_CACHE="$tmp/cache"
for i in 1 2; do
  start=$(date +%s%N)
  "$BIN" run --device cuda --algo cuda-tiled,cuda-naive -s 64 --reps 1 --warmup 0 >/dev/null || status=1
  echo "kernel cache: process $i took $(( ($(date +%s%N) - start) / 1000000 )) ms; files: $(ls "$tmp/cache" | wc -l)"
done
python3 - "$tmp" <<'PY'
import json, sys, glob, os
print("| run | kernel | kernel ms | TFLOPS | upload ms | download ms | rel error | verdict |")
print("|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    for r in json.load(open(path)):
        print(f"| {os.path.basename(path)[:-5]} | {r['kernel']} | {r['median_ms']:.3f} | {r['gflops']/1e3:.1f} | {r['upload_ms']:.1f} | {r['download_ms']:.1f} | {r['rel_error']:.1e} | {'ok' if r['ok'] else 'WRONG'} |")
PY
exit $status
