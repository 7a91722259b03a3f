#!/usr/bin/env bash
# On a GPU machine: cuda-winograd and cuda-strassen against cuBLAS, one call
# per (shape, variant), each side by side with cuBLAS (kernel time between
# CUDA events, --reps R). Writes JSON per call and a markdown summary.
#   FASTMM_BIN=target/release/fastmm OUT=dir SPECS="n:n0:depth ..." \
#   VARIANTS="frugal batched" scripts/gpu-variants.sh
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-gpu-variants}
mkdir -p "$OUT/json"
BIN=${FASTMM_BIN:-target/release/fastmm}
REPS=${REPS:-5}
DTYPE=${DTYPE:-f32}
status=0
for spec in ${SPECS:-8192:8192:1 16384:8192:2}; do
  IFS=: read -r n n0 depth <<<"$spec"
  for variant in ${VARIANTS:-frugal batched}; do
    "$BIN" run --device cuda --json --reps "$REPS" -s "$n" -d "$DTYPE" \
      --algo cublas,cuda-winograd,cuda-strassen --threshold "$n0" --depth "$depth" \
      --variant "$variant" >"$OUT/json/$n-$n0-$depth-$variant.json" 2>>"$OUT/errors.txt" || status=1
  done
done
python3 - "$OUT/json" <<'PY' | tee "$OUT/summary.md"
import json, pathlib, sys
print("| n | levels | variant | cuBLAS ms | Winograd ms | × cuBLAS | Strassen ms | × cuBLAS | Winograd TFLOPS | extra MiB (W) | ok |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json"), key=lambda p: [int(x) if x.isdigit() else x for x in p.stem.split("-")]):
    try:
        recs = {r["algorithm"]: r for r in json.loads(path.read_text())}
    except Exception:
        continue
    cb, wi, st = recs.get("cublas"), recs.get("cuda-winograd"), recs.get("cuda-strassen")
    if not (cb and wi and st):
        continue
    n = wi["n"]
    print(f"| {n} | {wi['levels']} | {path.stem.split('-')[-1]} | {cb['median_ms']:.3f} | {wi['median_ms']:.3f} | "
          f"{cb['median_ms'] / wi['median_ms']:.3f} | {st['median_ms']:.3f} | {cb['median_ms'] / st['median_ms']:.3f} | "
          f"{2 * n**3 / wi['median_ms'] / 1e9:.2f} | {wi['extra_bytes'] / 2**20:.0f} | {cb['ok'] and wi['ok'] and st['ok']} |")
PY
[ -s "$OUT/errors.txt" ] && tail -20 "$OUT/errors.txt"
exit $status
