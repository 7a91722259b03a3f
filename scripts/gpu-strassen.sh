#!/usr/bin/env bash
# On a GPU machine: GPU Strassen/Winograd against cuBLAS and seed 000's
# tables. Writes one JSON file per run and a markdown summary to $OUT.
#   FASTMM_BIN=target/release/fastmm scripts/gpu-strassen.sh
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-gpu-strassen}
mkdir -p "$OUT/json"
BIN=${FASTMM_BIN:-target/release/fastmm}
status=0
run() { # name, args...
  local name=$1; shift
  "$BIN" run --device cuda --json --reps 3 "$@" >"$OUT/json/$name.json" 2>>"$OUT/errors.txt" || status=1
}
# Against cuBLAS. Each level halves n, and levels continue while n >= n0:
# n0 = n gives one level, n0 = n/2 two.
for spec in ${FAST_SPECS:-f32:8192:8192 f32:16384:8192 f64:8192:8192 f64:8192:4096 f32:4096:4096 f32:16384:16384}; do
  IFS=: read -r dt n n0 <<<"$spec"
  run "fast-$dt-$n-$n0" -s $n -d $dt --algo cublas,cuda-strassen,cuda-winograd --threshold $n0
done
if [ -n "${SEED_TABLES:-}" ]; then
  # Seed 000: shared-memory kernel vs Strassen over it, n0 = 512.
  for n in 1024 2048 4096 8192; do
    run "seed000-tiled-$n" -s $n -d f32 --algo cuda-tiled,cuda-strassen --base cuda-tiled --threshold 512 --depth 8 --variant temporaries
  done
  # Seed 000: cuBLAS vs Strassen + cuBLAS, n0 = 1024.
  for n in 2048 4096 8192; do
    run "seed000-cublas-$n" -s $n -d f32 --algo cublas,cuda-strassen --threshold 1024 --depth 8 --variant temporaries
  done
fi
python3 - "$OUT/json" <<'PY' | tee "$OUT/summary.md"
import json, sys, glob, os
print("| run | n | dtype | algorithm | kernel | levels | extra MiB | kernel ms | TFLOPS (2n³/t) | × first | rel error | verdict |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    name = os.path.basename(path)[:-5]
    try:
        records = json.load(open(path))
    except Exception as err:
        print(f"| {name} | failed: {err} |"); continue
    for r in records:
        print(f"| {name} | {r['n']} | {r['dtype']} | {r['algorithm']} | {r['kernel']} | {r['levels'] if r['levels'] is not None else '-'} | {r['extra_bytes']/2**20:.0f} | {r['median_ms']:.3f} | {r['gflops']/1e3:.2f} | {r['speedup']:.3f} | {r['rel_error']:.1e} | {'ok' if r['ok'] else 'WRONG'} |")
PY
exit $status
