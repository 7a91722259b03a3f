#!/usr/bin/env bash
# The out-of-core `fastmm multiply` (files mapped, C written in blocks)
# alone and beside a busy process pinned to CPU 1: the wall time of each
# run, one and two threads, ROUNDS rounds alternating. Issue 55's busy-
# process target: the team beside it at most 1.15x one thread alone.
#   scripts/out-of-core-busy.sh [N] [ROUNDS]   (needs numpy for the inputs)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3072}
rounds=${2:-5}
fastmm=target/release/fastmm
dir=$(mktemp -d)
trap 'kill "${busy:-}" 2>/dev/null || true; rm -rf "$dir"' EXIT
python3 -c "
import numpy as np, sys
r = np.random.default_rng(5)
for name in 'ab':
    np.save(f'$dir/{name}.npy', r.uniform(-1, 1, ($n, $n)))
"
export FASTMM_TUNING=off
one() {
  local start end
  start=$(date +%s.%N)
  "$fastmm" multiply "$dir/a.npy" "$dir/b.npy" -o "$dir/c.npy" --out-of-core -t "$1" >/dev/null
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.3f}')"
}
echo "n=$n f64, seconds: alone (1 thread, 2 threads) | beside a busy process (2, 1)"
for _ in $(seq "$rounds"); do
  t1=$(one 1)
  t2=$(one 2)
  taskset -c 1 python3 -c 'while True: pass' &
  busy=$!
  sleep 0.3
  b2=$(one 2)
  b1=$(one 1)
  kill "$busy"
  wait "$busy" 2>/dev/null || true
  echo "alone $t1 $t2 | busy $b2 $b1 | team / one thread, both beside it $(python3 -c "print(f'{$b2 / $b1:.2f}')"); team beside / one thread alone $(python3 -c "print(f'{$b2 / $t1:.2f}')")"
done
