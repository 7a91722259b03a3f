#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: a quick correctness pass over cuda-fast's
# SIMT kernels (every type and micro-tile, odd, split-K and stream-K
# shapes: the last three give 1.x to 3.x waves of tiles on an H100), each
# product verified by `fastmm run`; a minute, against the full
# `fastmm selftest --device cuda`'s five. Prints one line per product.
#   scripts/gpu-quick-check.sh [FASTMM_BIN]
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=${1:-target/release/fastmm}
for dt in f32 i32 f64 i64; do
 for tile in "" 8 16 4; do
  case "$dt:$tile" in f32:4|i32:4|f64:16|i64:16) continue;; esac
  for s in 1:1:1 7:13:5 33:17:65 127:129:255 1000:77:333 257:1023:513 1025:1031:1027 129:4096:130 512:16384:512 4001:1100:4092 3001:1100:2300 1001:1100:2300; do
   IFS=: read -r m k n <<<"$s"
   out=$($B run --device cuda --algo cuda-fast --cuda-kernel simt ${tile:+--tile $tile} -m $m -k $k -n $n -d $dt --reps 1 --json 2>&1)
   kernel=$(echo "$out" | grep -o '"kernel": "[^"]*"' | head -1)
   echo "$out" | grep -q '"ok": true' && echo "ok $dt t=$tile $s $kernel" || echo "FAIL $dt t=$tile $s $out"
  done
 done
done
