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
