#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: two fastmm binaries (A = FASTMM_BASE,
# B = FASTMM_BIN), each as cuBLAS + cuda-fast in one call per shape,
# alternating A, B, A, B so both see the same clocks; optional environment
# per variant (VARIANTS="name:ENV=V,ENV2=W ...", B only). Prints a table of
# each call's cuda-fast/cuBLAS ratio.
#   FASTMM_BASE=... FASTMM_BIN=... OUT=dir SHAPES="m:k:n:dtype[:kernel[:tile]] ..." scripts/gpu-ab.sh
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-gpu-ab}
mkdir -p "$OUT"
REPS=${REPS:-10}
ROUNDS=${ROUNDS:-2}
VARIANTS=${VARIANTS:-"new:"}
: >"$OUT/runs.jsonl"
call() { # label bin env spec
  local label=$1 bin=$2 envs=$3 spec=$4 m k n dt kernel tile
  IFS=: read -r m k n dt kernel tile <<<"$spec"
  local line
  line=$(env ${envs//,/ } "$bin" run --device cuda --algo cublas,cuda-fast -m "$m" -k "$k" -n "$n" -d "$dt" \
    ${kernel:+--cuda-kernel "$kernel"} ${tile:+--tile "$tile"} --reps "$REPS" --json 2>>"$OUT/errors.txt" | tr -d '\n')
  echo "{\"label\":\"$label\",\"runs\":${line:-null}}" >>"$OUT/runs.jsonl"
}
for spec in $SHAPES; do
  for round in $(seq "$ROUNDS"); do
    call base "$FASTMM_BASE" "" "$spec"
    for v in $VARIANTS; do call "${v%%:*}" "$FASTMM_BIN" "${v#*:}" "$spec"; done
  done
done
python3 - "$OUT/runs.jsonl" <<'PY' | tee "$OUT/summary.md"
import json, sys
print("| label | shape | dtype | kernel | cuBLAS ms | cuda-fast ms | × cuBLAS | ok |")
print("|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    rec = json.loads(line)
    runs = rec["runs"] or []
    r = {x["algorithm"]: x for x in runs}
    cb, fa = r.get("cublas"), r.get("cuda-fast")
    if not cb or not fa:
        print(f"| {rec['label']} | failed | | | | | | |"); continue
    print(f"| {rec['label']} | {fa['m']}×{fa['k']}×{fa['n']} | {fa['dtype']} | {fa['kernel']} | {cb['median_ms']:.3f} | "
          f"{fa['median_ms']:.3f} | {cb['median_ms'] / fa['median_ms']:.3f} | {fa['ok'] and cb['ok']} |")
PY
[ -s "$OUT/errors.txt" ] && tail -20 "$OUT/errors.txt"
exit 0
