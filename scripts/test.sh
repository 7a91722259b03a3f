#!/usr/bin/env bash
# The project's test command: formatting, lints over every feature set,
# the API docs without warnings, then every test in release mode (the
# O(n^3) shape matrix is too slow unoptimised). The CPU tests force each
# microkernel family this machine runs through options, so one run covers
# them all; the layering of the modules is a test too (crates/fastmm/tests/suite/layers.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

# NVRTC (no GPU needed) from PyPI, so that the CUDA kernels' compile test
# runs here and a kernel that does not compile fails the suite.
nvrtc_dir=target/nvrtc-wheel
if ! ls "$nvrtc_dir"/nvidia/cu13/lib/libnvrtc.so.13 >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$nvrtc_dir" "nvidia-cuda-nvrtc==13.0.*"
fi
export LD_LIBRARY_PATH="$PWD/$nvrtc_dir/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FASTMM_REQUIRE_NVRTC=1
# numpy, so that the file tests round-trip through numpy itself (numpy
# writes the inputs and reads C back) instead of skipping those checks.
if ! python3 -c "import numpy" >/dev/null 2>&1; then
  numpy_dir=target/numpy-wheel
  if ! ls "$numpy_dir"/numpy >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check --target "$numpy_dir" "numpy>=1.24"
  fi
  export PYTHONPATH="$PWD/$numpy_dir${PYTHONPATH:+:$PYTHONPATH}"
fi
export FASTMM_REQUIRE_NUMPY=1
# Open MPI and libclang (rsmpi's bindings) for the `mpi` feature, which
# the lints and tests below build: Debian's packages, installed if absent.
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1 \
  || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q openmpi-bin libopenmpi-dev libclang-dev
fi
# Debian's reference BLAS and python3-numpy, which links it: the BLAS
# library's smoke test puts libfastmm_blas in libblas.so.3's place under
# the system's numpy, and forwards the other routines to the reference.
if [ ! -e /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 ] \
  || ! /usr/bin/python3 -c "import numpy" >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libblas3 python3-numpy \
    || { $sudo apt-get update -q && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libblas3 python3-numpy; }
fi
# Open MPI refuses to start as root (CI containers) unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The release profile compiles each crate as one codegen unit (the
# fastest code, for benchmarks); the tests need optimised code, not the
# last percent, and 16 units let the compiler use every core: the
# fresh-clone test command had reached 10 minutes. Every step below uses
# the same profile.
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
# Nor line tables (the profile's debug info, for profiling benchmarks):
# emitting and linking them is build time the tests do not use.
export CARGO_PROFILE_RELEASE_DEBUG=false
# And LLVM's first optimisation level instead of the third: optimised
# enough for the O(n^3) shape matrix (the tests ran 21 + 37 s at the
# third, 29 + 50 s at the first), while the test build took 4m15 instead
# of 5m26–6m32 on two cores, where the test command had passed 10 minutes.
# Rust computes the same at every level (no fast-math, no contraction into
# FMAs, the kernels' intrinsics explicit); the benchmarks and the main job
# build the release profile as it is, and verify every product they run.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=1
# A tuning file left by `fastmm tune` on this machine must not change what
# the tests see; the tuning tests point FASTMM_TUNING at their own files.
export FASTMM_TUNING=off

cargo fmt --all -- --check
# Every target with every feature (CUDA, MPI, the interop conversions and
# the developer tools) in one pass; then the library without CUDA, whose
# code behind `cfg(feature = "cuda")` the first pass cannot see unused.
cargo clippy --workspace --all-targets --release --features fastmm/dev,fastmm/ndarray,fastmm/nalgebra,fastmm/faer,fastmm-cli/mpi -- -D warnings
cargo clippy -p fastmm --release --no-default-features -- -D warnings
# The first lint pass's profile and features, so that the dependencies
# checked there serve the docs too.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet --release --features fastmm/dev,fastmm/ndarray,fastmm/nalgebra,fastmm/faer,fastmm-cli/mpi
# With the interop features, so that their conversions and doc examples
# run in the same build (the build without CUDA is clippy's third set),
# and MPI, whose tests run `mpirun` (tests/mpi.rs).
cargo test --workspace --release --features fastmm/ndarray,fastmm/nalgebra,fastmm/faer,fastmm-cli/mpi
# The Python package, installed as the README says into a virtualenv of
# its own, then its pytest suite (numpy, hypothesis) against numpy itself;
# threadpoolctl, whose limits the package registers with.
venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "numpy>=1.21" "pytest>=7" "hypothesis>=6" "threadpoolctl>=3.5"
# Unoptimised: the package's Rust code is the library's, compiled and
# tested above optimised, and optimisation does not change what
# Rust computes (no fast-math, no contraction into FMAs); these tests check
# the bindings (conversions, dtypes, errors, threads), and the optimised
# build took three of CI's ten minutes on two cores.
# With MPI (installed above), so that device="mpi" runs under mpirun in
# python/tests/test_mpi.py; the package builds the same without it.
CARGO_PROFILE_RELEASE_OPT_LEVEL=0 MATURIN_PEP517_ARGS="--features mpi" \
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check ./python
# libfastmm_blas, which the preload tests put under numpy's own products,
# and libfastmm_cublas: the shared libraries the test build above linked
# its integration tests beside (target/release/deps), the ones those tests
# ran. A `cargo build -p` of the two would resolve fastmm's features
# afresh (without the interop and MPI ones) and compile fastmm once more,
# a minute of CI on two cores.
deps=target/release/deps
FASTMM_BLAS_LIB="$PWD/$deps/libfastmm_blas.so" FASTMM_CUBLAS_LIB="$PWD/$deps/libfastmm_cublas.so" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
