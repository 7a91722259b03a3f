#!/usr/bin/env bash
# The cuBLAS interposer under an unchanged torch/CuPy script, beside the
# same script run plainly, in one process each on the same GPU:
#
#   bash scripts/cublas-interposer.sh [N] [REPS]        (default 16384, 5)
#
# FASTMM_CUBLAS_LIB names the interposer (default:
# target/release/libfastmm_cublas.so); its per-call log and summary go to
# ${LOG:-/tmp/fastmm-cublas.log}. Prints one JSON line per call and label
# (plain, fastmm), then the log's summary.
#
# Beside GEMMul8's hook (its src/hook.cu preloaded the same way): set
# GEMMUL8_HOOK to a built libgemmul8.so, or GEMMUL8_DIR to a copy of
# GEMMul8's sources and the hook is built from it into $PEER_BUILD (its
# gemmul8.cu and hook.cu compiled side by side, 5–10 minutes under nvcc:
# build it once, with no GPU if need be — GPU_ARCH=90 and an nvcc on PATH,
# e.g. PyPI's nvidia-cuda-nvcc, -nvvm, -crt and -cccl 13.0.* with
# nvidia-cublas and nvidia-cuda-runtime, then carry the library). The hook
# then runs the f64 and f32 calls once per
# configuration in GEMMUL8_CONFIGS, "D-moduli:mode:S-moduli:mode" with mode
# acc or fast (default: 14:acc:7:acc 14:fast:7:fast 15:acc:6:fast
# 13:fast:8:acc), each labelled with its configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-16384}; REPS=${2:-5}
LIB=$(realpath "${FASTMM_CUBLAS_LIB:-target/release/libfastmm_cublas.so}")
LOG=${LOG:-/tmp/fastmm-cublas.log}
[ -f "$LIB" ] || { echo "$LIB does not exist: cargo build --release -p fastmm-cublas" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
python3 scripts/cublas_script.py "$N" "$REPS" plain
rm -f "$LOG"
FASTMM_CUBLAS_LOG="$LOG" LD_PRELOAD="$LIB${LD_PRELOAD:+:$LD_PRELOAD}" \
  python3 scripts/cublas_script.py "$N" "$REPS" fastmm
grep -A20 "summary:" "$LOG" || true
hook=${GEMMUL8_HOOK:-}
if [ -z "$hook" ] && [ -n "${GEMMUL8_DIR:-}" ]; then
  build=${PEER_BUILD:-/tmp/fastmm-gemmul8-peer}
  hook=$build/libgemmul8_hook.so
  if [ ! -f "$hook" ]; then
    mkdir -p "$build"
    export PATH=$PATH:/usr/local/cuda/bin
    arch=${GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '. ')}
    flags=(-std=c++20 -O3 -diag-suppress 177 -Xcompiler -fPIC -gencode "arch=compute_$arch,code=sm_$arch")
    start=$(date +%s)
    nvcc "${flags[@]}" -c "$GEMMUL8_DIR/src/hook.cu" -o "$build/hook.o" &
    nvcc "${flags[@]}" -c "$GEMMUL8_DIR/src/gemmul8.cu" -o "$build/gemmul8.o"
    wait
    nvcc -shared -o "$hook" "$build/gemmul8.o" "$build/hook.o" -lcublas -lcublasLt -lcudart -ldl
    echo "# built $hook for sm_$arch in $(( $(date +%s) - start )) s"
  fi
fi
if [ -n "$hook" ]; then
  for cfg in ${GEMMUL8_CONFIGS:-14:acc:7:acc 14:fast:7:fast 15:acc:6:fast 13:fast:8:acc}; do
    IFS=: read -r dm dmode sm smode <<< "$cfg"
    GEMMUL8_NUM_MOD_D=$dm GEMMUL8_FASTMODE_D=$([ "$dmode" = fast ] && echo 1 || echo 0) \
    GEMMUL8_NUM_MOD_S=$sm GEMMUL8_FASTMODE_S=$([ "$smode" = fast ] && echo 1 || echo 0) \
    LD_PRELOAD="$(realpath "$hook")${LD_PRELOAD:+:$LD_PRELOAD}" \
      python3 scripts/cublas_script.py "$N" "$REPS" "gemmul8 d$dm-$dmode s$sm-$smode" f64,f32
  done
fi
