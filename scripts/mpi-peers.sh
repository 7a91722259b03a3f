#!/usr/bin/env bash
# fastmm's MPI product against ScaLAPACK's pdgemm, side by side in one
# run (issue 42's targets), on this machine:
#
#   speed   P = 2 ranks, one thread each, f64, interleaved rounds (fastmm
#           `run --distributed --reps 3`, then pdgemm over the same ranks
#           with each block size of PDGEMM_NB); medians of the rounds,
#           pdgemm's best block size;
#   volume  Open MPI's own message monitoring (pml_monitoring) counts the
#           bytes every rank receives; per product, maximum over ranks,
#           in words. fastmm's product moves its pieces by collectives
#           (rank 0's collection of C, by point-to-point, is not the
#           product's and is left out); pdgemm's by BLACS point-to-point.
#
# Usage: scripts/mpi-peers.sh [ROUNDS]   (default 5)
# Environment: SPEED_SHAPES, VOLUME_SHAPES (MxKxN lists), VOLUME_RANKS,
# PDGEMM_NB, PDGEMM_OPENBLAS_CORE. Prints two markdown tables; logs under target/mpi-peers/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SPEED_SHAPES=${SPEED_SHAPES:-"4096x4096x4096 16384x512x16384 512x65536x512"}
VOLUME_SHAPES=${VOLUME_SHAPES:-"2048x2048x2048 1999x1013x2003 16384x512x16384 512x65536x512 4096x256x4096 256x4096x256 3000x200x100"}
VOLUME_RANKS=${VOLUME_RANKS:-"2 3 4"}
PDGEMM_NB=${PDGEMM_NB:-"128 256"}
OUT=target/mpi-peers
mkdir -p "$OUT"

need=()
dpkg -s libscalapack-openmpi-dev >/dev/null 2>&1 || need+=(libscalapack-openmpi-dev)
dpkg -s libopenblas0-pthread >/dev/null 2>&1 || need+=(libopenblas0-pthread)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev libclang-dev)
if ((${#need[@]})); then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get install -y "${need[@]}" >"$OUT/apt.log"
fi
# The speed runs use as many ranks as cores, bound one to each (Open MPI's
# default; oversubscribing turns binding off, and unbound ranks cost
# pdgemm 40% here); the volume runs may oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1
# Debian's OpenBLAS runs its AVX2 (Haswell) kernels on Zen 4/5 (and an
# environment may pin them); its AVX-512 ones are 1.6x faster there. Give
# the peer its best unless PDGEMM_OPENBLAS_CORE names another kernel set.
if grep -q avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=${PDGEMM_OPENBLAS_CORE:-SkylakeX}
fi
cargo build --release -q -p fastmm-cli --features mpi
mpicc -O2 -o "$OUT/pdgemm" crates/fastmm-peers/mpi/pdgemm.c -lscalapack-openmpi -lm
FASTMM=target/release/fastmm
ENV="-x OPENBLAS_NUM_THREADS${OPENBLAS_CORETYPE:+ -x OPENBLAS_CORETYPE}"

fastmm_ms() { # P M K N -> median ms of 3
    mpirun -np "$1" $ENV "$FASTMM" run --distributed -m "$2" -k "$3" -n "$4" --algo packed -d f64 \
        --reps 3 --json 2>>"$OUT/fastmm.err" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; assert r["ok"]; print(r["median_ms"])'
}
pdgemm_ms() { # P M K N NB -> median ms of 3
    mpirun -np "$1" $ENV "$OUT/pdgemm" "$2" "$3" "$4" 3 "$5" | tee -a "$OUT/pdgemm.log" |
        sed -n 's/.*median_ms=\([0-9.]*\).* ok$/\1/p'
}
median() { python3 -c 'import sys,statistics; print(statistics.median(map(float,sys.argv[1:])))' "$@"; }

echo "| shape (m×k×n) | P | fastmm ms | pdgemm ms (best nb) | fastmm / pdgemm speed |"
echo "|---|---|---|---|---|"
for s in $SPEED_SHAPES; do
    IFS=x read -r m k n <<<"$s"
    declare -A peer=()
    f=()
    for ((r = 0; r < ROUNDS; r++)); do
        f+=("$(fastmm_ms 2 "$m" "$k" "$n")")
        for nb in $PDGEMM_NB; do peer[$nb]+=" $(pdgemm_ms 2 "$m" "$k" "$n" "$nb")"; done
    done
    fm=$(median "${f[@]}")
    best="" bestnb=""
    for nb in $PDGEMM_NB; do
        # shellcheck disable=SC2086
        pm=$(median ${peer[$nb]})
        if [ -z "$best" ] || python3 -c "import sys; sys.exit(not $pm < $best)"; then best=$pm bestnb=$nb; fi
    done
    unset peer
    printf '| %s | 2 | %.1f | %.1f (%s) | **%.2f×** |\n' "$s" "$fm" "$best" "$bestnb" \
        "$(python3 -c "print($best / $fm)")"
done

# Words each rank receives per product, from Open MPI's monitoring.
words() { # PREFIX KINDS PRODUCTS -> max over ranks
    python3 - "$@" <<'PY'
import collections, glob, sys
prefix, kinds, products = sys.argv[1], sys.argv[2], float(sys.argv[3])
received = collections.Counter()
for name in glob.glob(prefix + ".*.prof"):
    for line in open(name):
        f = line.split("\t")
        if f[0] in kinds and len(f) > 3:
            received[int(f[2])] += int(f[3].split()[0])
print(round(max(received.values(), default=0) / 8 / products))
PY
}
MON="--oversubscribe --mca pml_monitoring_enable 2 --mca pml_monitoring_enable_output 3 --mca pml_monitoring_filename"
echo
echo "| shape (m×k×n) | P | fastmm grid | fastmm words (reported) | fastmm words (measured) | pdgemm grid | pdgemm words (measured) | pdgemm / fastmm |"
echo "|---|---|---|---|---|---|---|---|"
for s in $VOLUME_SHAPES; do
    IFS=x read -r m k n <<<"$s"
    for p in $VOLUME_RANKS; do
        rm -f "$OUT"/f.*.prof "$OUT"/p.*.prof
        # One warm-up and one timed product each.
        rec=$(mpirun -np "$p" $ENV $MON "$PWD/$OUT/f" "$FASTMM" run --distributed -m "$m" -k "$k" -n "$n" \
            --algo packed -d f64 --reps 1 --warmup 1 --json 2>>"$OUT/fastmm.err")
        read -r grid reported < <(python3 -c 'import json,re,sys; r=json.loads(sys.argv[1])[0]; assert r["ok"]; print(re.search(r"distributed (\S+)", r["kernel"]).group(1), r["comm_words"])' "$rec")
        fw=$(words "$OUT/f" I 2)
        line=$(mpirun -np "$p" $ENV $MON "$PWD/$OUT/p" "$OUT/pdgemm" "$m" "$k" "$n" 1 128)
        case $line in *" ok") ;; *) echo "pdgemm failed: $line" >&2; exit 1 ;; esac
        pgrid=$(sed -n 's/.*grid=\([0-9x]*\).*/\1/p' <<<"$line")
        pw=$(words "$OUT/p" EI 2)
        printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$p" "$grid" "$reported" "$fw" "$pgrid" "$pw" \
            "$(python3 -c "print(f'{$pw / $fw:.2f}×' if $fw else '∞ (fastmm moves nothing)')")"
    done
done
