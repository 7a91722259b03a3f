#!/usr/bin/env bash
# On a host with NVIDIA GPUs and Open MPI: products across MPI ranks whose
# pieces live on their GPUs (docs/results.md, "Cluster (MPI): ranks with
# GPUs"). Parts run in the order given; logs and JSON records go to $OUT.
#
#   NP=4 scripts/mpi-gpu.sh smoke big base
#
#   smoke  every type, cublas and cuda-fast, 1031×997×2053 on NP ranks
#   big    n = 32768 f32 cublas on NP ranks (medians of 5 after a warm-up)
#   base   the same product on one GPU, for the ratio
#   files  `multiply A.npy B.npy -o C.npy --distributed` against numpy
#   fault  rank 1 killed mid-product: the job must end, naming it
#   repeat REPEAT (default 8) short jobs: each must end (ranks release
#          their NCCL groups at exit) within 60 s
#
# BIN (default target/release/fastmm) is a build with the `mpi` feature
# (`cargo build --release -p fastmm-cli --features mpi`); the host's
# libmpi.so.40 must match the one it was linked against.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: mpi-gpu.sh smoke|big|base|files|fault ..." >&2; exit 2; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVLink multicast can take GPUs that other jobs share out of service.
export FASTMM_TUNING=off NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=${OUT:-mpi-gpu}
NP=${NP:-$(nvidia-smi -L | wc -l)}
mkdir -p "$OUT"
bin=$(realpath "${BIN:-target/release/fastmm}")
status=0
# NCCL from the image's pip package, which installs only libnccl.so.2.
nccl=$(python3 -c 'import glob, site; print(next(f for d in site.getsitepackages() for f in glob.glob(d + "/nvidia/nccl/lib/libnccl.so.2")))')
mkdir -p "$OUT/nccl" && ln -sf "$nccl" "$OUT/nccl/libnccl.so"
export LD_LIBRARY_PATH=$PWD/$OUT/nccl:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpus.txt"

# name, seconds, ranks, fastmm arguments...: one job under mpirun.
job() {
  local name=$1 limit=$2 ranks=$3 start=$SECONDS
  shift 3
  timeout "$limit" mpirun --bind-to none --oversubscribe -np "$ranks" \
    -x LD_LIBRARY_PATH -x FASTMM_TUNING -x NCCL_NVLS_ENABLE "$bin" "$@" \
    > "$OUT/$name.log" 2>&1
  local code=$?
  [ $code = 0 ] || status=1
  echo "== $name: exit $code in $((SECONDS - start)) s"
  tail -n 6 "$OUT/$name.log"
}

for part in "$@"; do
  case $part in
  smoke)
    job smoke 300 "$NP" run --distributed -m 1031 -k 997 -n 2053 --algo cublas,cuda-fast \
      --dtype all --reps 1 --warmup 0
    ;;
  big)
    job big-"$NP" 420 "$NP" run --distributed --memory-per-rank 64G --algo cublas -s 32768 \
      -d f32 --reps 5 --warmup 1
    ;;
  base)
    start=$SECONDS
    timeout 300 "$bin" run --device cuda:0 --algo cublas -s 32768 -d f32 --reps 5 --warmup 1 \
      > "$OUT/base.log" 2>&1 || status=1
    echo "== base: in $((SECONDS - start)) s"
    tail -n 6 "$OUT/base.log"
    ;;
  files)
    mkdir -p "$OUT/files"
    python3 scripts/npy_files.py make "$OUT/files" 7 6000 5000 7000
    job files 300 "$NP" multiply "$OUT/files/a.npy" "$OUT/files/b.npy" -o "$OUT/files/c.npy" \
      --distributed --algo cublas
    python3 scripts/npy_files.py compare "$OUT/files" "distributed multiply" | tee "$OUT/files-compare.txt"
    rm -rf "$OUT/files"
    ;;
  fault)
    # A long product, rank 1 killed after 20 s: every rank must be gone
    # within 30 s of it, and mpirun must name the rank.
    start=$SECONDS
    mpirun --bind-to none --oversubscribe -np "$NP" -x LD_LIBRARY_PATH -x FASTMM_TUNING \
      -x NCCL_NVLS_ENABLE "$bin" run --distributed --algo cublas -s 16384 --reps 400 \
      > "$OUT/fault.log" 2>&1 &
    launcher=$!
    sleep 20
    victim=$(pgrep -f "^$bin run --distributed" | sort -n | sed -n 2p)
    echo "killing pid $victim"
    kill -9 "$victim"
    killed=$SECONDS
    for _ in $(seq 60); do
      kill -0 "$launcher" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$launcher" 2>/dev/null; then
      echo "== fault: the job still ran 60 s after the kill"
      kill -9 "$launcher"
      status=1
    else
      echo "== fault: job ended $((SECONDS - killed)) s after the kill ($((SECONDS - start)) s in all)"
    fi
    grep -i -m 3 "rank\|process" "$OUT/fault.log"
    ;;
  repeat)
    ended=0
    for i in $(seq "${REPEAT:-8}"); do
      start=$SECONDS
      timeout 60 mpirun --bind-to none --oversubscribe -np "$NP" -x LD_LIBRARY_PATH \
        -x FASTMM_TUNING -x NCCL_NVLS_ENABLE "$bin" run --distributed --algo cublas -s 8192 \
        --reps 1 --warmup 0 > "$OUT/repeat.log" 2>&1
      code=$?
      [ $code = 0 ] && ended=$((ended + 1))
      echo "repeat $i: exit $code in $((SECONDS - start)) s"
    done
    echo "== repeat: $ended of ${REPEAT:-8} jobs ended cleanly"
    [ "$ended" = "${REPEAT:-8}" ] || status=1
    ;;
  *)
    echo "unknown part $part" >&2
    status=2
    ;;
  esac
done
exit $status
