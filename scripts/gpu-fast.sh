#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: issue 6's measurements of `cuda-fast`
# against cuBLAS, side by side in one call per shape (kernel time from CUDA
# events, `--reps 10`: median of 10 runs of the median of 5 launches),
# after `fastmm selftest --device cuda` unless SKIP_SELFTEST=1.
#   FASTMM_BIN=target/release/fastmm OUT=dir scripts/gpu-fast.sh
# SHAPES="m:k:n:dtype[:cuda-kernel[:tile]] ..." overrides the target shapes.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-gpu-fast}
mkdir -p "$OUT"
BIN=${FASTMM_BIN:-target/release/fastmm}
REPS=${REPS:-10}
SHAPES=${SHAPES:-"4096:4096:4096:f32 8192:8192:8192:f32 16384:16384:16384:f32 8192:1024:8192:f32 1024:8192:1024:f32 8192:8192:8192:f64:mma 8192:8192:8192:f64:simt 4099:4099:4099:f64:mma"}
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [ -z "${SKIP_SELFTEST:-}" ]; then
  "$BIN" selftest --device cuda >"$OUT/selftest.txt" 2>&1 || status=1
  grep -E "checks|FAIL|fail" "$OUT/selftest.txt" | tail -5
fi
: >"$OUT/runs.jsonl"
for spec in $SHAPES; do
  IFS=: read -r m k n dt kernel tile <<<"$spec"
  "$BIN" run --device cuda --algo cublas,cuda-fast -m "$m" -k "$k" -n "$n" -d "$dt" \
    ${kernel:+--cuda-kernel "$kernel"} ${tile:+--tile "$tile"} --reps "$REPS" --json >>"$OUT/runs.jsonl" 2>>"$OUT/errors.txt" || status=1
  echo >>"$OUT/runs.jsonl"
done
python3 - "$OUT/runs.jsonl" <<'PY' | tee "$OUT/summary.md"
import json, sys
print("| shape (m×k×n) | dtype | kernel | cuBLAS ms | cuda-fast ms [min–max] | TFLOPS | × cuBLAS | ok |")
print("|---|---|---|---|---|---|---|---|")
text, decoder, at = open(sys.argv[1]).read(), json.JSONDecoder(), 0
while True:
    while at < len(text) and text[at].isspace():
        at += 1
    if at >= len(text):
        break
    batch, at = decoder.raw_decode(text, at)
    recs = {r["algorithm"]: r for r in batch}
    cb, fa = recs.get("cublas"), recs.get("cuda-fast")
    if not cb or not fa:
        continue
    flops = 2 * fa["m"] * fa["k"] * fa["n"]
    print(f"| {fa['m']}×{fa['k']}×{fa['n']} | {fa['dtype']} | {fa['kernel']} | {cb['median_ms']:.3f} | "
          f"{fa['median_ms']:.3f} [{fa['min_ms']:.3f}–{fa['max_ms']:.3f}] | {flops / fa['median_ms'] / 1e9:.2f} | "
          f"{cb['median_ms'] / fa['median_ms']:.3f} | {fa['ok'] and cb['ok']} |")
PY
[ -s "$OUT/errors.txt" ] && tail -20 "$OUT/errors.txt"
exit $status
