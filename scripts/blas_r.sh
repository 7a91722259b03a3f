#!/usr/bin/env bash
# R's `%*%` on the system's BLAS and on libfastmm_blas, unchanged R code:
# median of 5 products of two n×n random matrices in one Rscript per
# library, alternating the libraries round by round. fastmm comes in by
# the preload (`fastmm exec`, no root needed; Debian's R puts the system
# library directory ahead of LD_LIBRARY_PATH, so a directory there does
# not work); with --alternative (root), by switching Debian's
# libblas.so.3 alternative, as README's one-line install does, and back.
#
#   bash scripts/blas_r.sh [--sizes 1024,2048,4096] [--rounds 3] [--alternative]
#
# Needs r-base-core (and, to compare with OpenBLAS, libopenblas0-pthread).
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=2048 rounds=3 alternative=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --alternative) alternative=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v Rscript >/dev/null || { echo "Rscript not found (apt-get install r-base-core)" >&2; exit 1; }
cargo build --release --quiet -p fastmm-blas -p fastmm-cli
lib="$PWD/target/release/libfastmm_blas.so"
bench=$(mktemp --suffix .R)
trap 'rm -f "$bench"' EXIT
cat > "$bench" <<'R'
n <- as.integer(Sys.getenv("N")); reps <- 5
set.seed(1); a <- matrix(runif(n * n), n); b <- matrix(runif(n * n), n)
c <- a %*% b
t <- replicate(reps, system.time(c <- a %*% b)[["elapsed"]])
# Four rows against R's own loop-free sum in long double where available.
ref <- t(sapply(1:4, function(i) colSums(a[i, ] * b)))
cat(sprintf("%.2f %.3g\n", 1000 * median(t), max(abs(c[1:4, ] - ref)) / max(abs(ref))))
R
link=libblas.so.3-x86_64-linux-gnu
system=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)
echo "# system BLAS: $system; R $(Rscript -e 'cat(R.version.string)'); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
run() { # $1: which (system | fastmm), $2: n
  if [ "$1" = system ]; then
    N=$2 Rscript "$bench"
  elif [ "$alternative" = 1 ]; then
    update-alternatives --install /usr/lib/x86_64-linux-gnu/libblas.so.3 "$link" "$lib" 5 >/dev/null
    update-alternatives --set "$link" "$lib" >/dev/null
    N=$2 Rscript "$bench"
    update-alternatives --set "$link" "$system" >/dev/null
  else
    N=$2 target/release/fastmm exec -- Rscript "$bench"
  fi
}
echo "n round system_ms fastmm_ms fastmm/system rel_err_system rel_err_fastmm"
for n in ${sizes//,/ }; do
  for r in $(seq "$rounds"); do
    read -r s se <<<"$(run system "$n")"
    read -r f fe <<<"$(run fastmm "$n")"
    echo "$n $r $s $f $(python3 -c "print(f'{$s / $f:.2f}')") $se $fe"
  done
done
