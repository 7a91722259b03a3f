#!/usr/bin/env bash
# The GPU suites of `fastmm bench` and `fastmm tune --device cuda` on the
# lent GPU (see docs/benchmarks.md). Usage: gpu-bench-suites.sh BIN OUT PART
# PART 1: info, seed-004-tiles, seed-002-cuda, seed-001-int32, tune --quick;
# PART 2: seed-000-strassen-gpu and the full GPU tune; PART all: both.
# The result folders come back as one archive (the device tool returns a
# limited number of files).
set -u
bin=$1 out=$2 part=$3
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FASTMM_TUNING=off
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$out/gpu-$part.txt" 2>&1
run() { # name, timeout, args...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$bin" "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - start)) s"
}
if [ "$part" = 1 ] || [ "$part" = all ]; then
  "$bin" info > "$out/info.txt" 2>&1
  for suite in seed-004-tiles seed-002-cuda seed-001-int32; do
    run "$suite" 200 bench --suite "$suite" --out "$out/$suite"
  done
  run tune-quick 120 tune --device cuda --quick --out "$out/tune-quick.toml"
fi
if [ "$part" = 2 ] || [ "$part" = all ]; then
  run seed-000-strassen-gpu 260 bench --suite seed-000-strassen-gpu --out "$out/seed-000-strassen-gpu"
  run tune-cuda 200 tune --device cuda --out "$out/tuning.toml"
fi
cd "$out" && dirs=$(find . -maxdepth 1 -type d -name 'seed-*') && [ -n "$dirs" ] &&
  tar -czf "results-$part.tgz" --remove-files $dirs
ls -la "$out"
