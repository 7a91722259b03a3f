#!/usr/bin/env bash
# The BLAS call's own cost at small sizes: a C loop over dgemm_ (zgemm_, cgemm_)
# against a BLAS (default Debian's OpenBLAS, one thread) and against
# libfastmm_blas preloaded over it.
#
#   bash scripts/blas_small.sh [BLAS_DIR] [SIZES] [d|s|z|c]
#     BLAS_DIR: holds the libblas.so.3 to link (default
#               /usr/lib/x86_64-linux-gnu/openblas-pthread)
#     SIZES:    default "2 4 8 16 32"
#     d|s|z|c:  dgemm_ (default), sgemm_, zgemm_ or cgemm_
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/usr/lib/x86_64-linux-gnu/openblas-pthread}
SIZES=${2:-2 4 8 16 32}
TYPE=${3:-d}
LIB=$(realpath "${FASTMM_BLAS_LIB:-target/release/libfastmm_blas.so}")
OUT=$(mktemp -d)
cc -O2 scripts/blas_small.c -o "$OUT/small" -L"$DIR" -l:libblas.so.3 -Wl,-rpath,"$DIR"
echo "n   ${TYPE}gemm_: BLAS ns   libfastmm_blas ns"
for n in $SIZES; do
  reps=$(( n <= 16 ? 200000 : 20000 ))
  theirs=$(OPENBLAS_NUM_THREADS=1 "$OUT/small" "$n" "$reps" "$TYPE")
  mine=$(LD_PRELOAD="$LIB" "$OUT/small" "$n" "$reps" "$TYPE")
  printf "%-3s %9s %18s\n" "$n" "$theirs" "$mine"
done
rm -rf "$OUT"
