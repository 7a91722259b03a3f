"""fastmm against numpy.matmul, side by side in one process.

    python python/benchmarks/vs_numpy.py [--rounds 7] [--quick]

Prints one Markdown table: the call overhead at 64×64 f64, f32/f64 from
1024 to 4096 (the automatic algorithm, and `packed`), and i32/i64 at 1024.
Rounds are interleaved (numpy, then fastmm, on the same arrays); the
speedup is numpy's median time over fastmm's, and every fastmm result is
checked against numpy's. numpy's OpenBLAS runs its own choice of kernels:
OPENBLAS_CORETYPE, if the environment forces one, is removed first. As in
fastmm-peers, OpenBLAS's idle threads spin only briefly after a call
(OPENBLAS_THREAD_TIMEOUT) and each contestant starts after a 2 ms pause,
so that neither runs beside the other's spinning threads on a small
machine.
"""

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.pop("OPENBLAS_CORETYPE", None)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")
SETTLE_SECONDS = 0.002

import numpy as np  # noqa: E402

import fastmm  # noqa: E402


def openblas_name():
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            if pool.get("internal_api") == "openblas":
                return f"OpenBLAS {pool.get('version')} ({pool.get('architecture')}, {pool.get('num_threads')} threads)"
    except ImportError:
        pass
    return "numpy's BLAS"


def timed(f, *args, **kwargs):
    time.sleep(SETTLE_SECONDS)
    start = time.perf_counter()
    result = f(*args, **kwargs)
    return time.perf_counter() - start, result


def check(c, a, b):
    ref = np.matmul(a, b)
    if np.issubdtype(ref.dtype, np.integer):
        assert np.array_equal(c, ref), "fastmm's integer product differs from numpy's"
    else:
        bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        error = np.abs(c.astype(np.float64) - ref.astype(np.float64))
        u = np.finfo(ref.dtype).eps / 2
        # Strassen/Winograd are allowed their documented growth; 64 covers
        # two levels of either.
        assert np.all(error <= 64 * (a.shape[1] + 2) * u * bound), "fastmm's product is out of bounds"


def overhead(rounds, calls):
    """Median per-call time of each at 64×64 f64, in µs, over `rounds`
    interleaved batches of `calls` calls."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 64)), rng.standard_normal((64, 64))
    check(fastmm.matmul(a, b), a, b)
    numpy_us, fastmm_us = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            np.matmul(a, b)
        numpy_us.append((time.perf_counter() - start) / calls * 1e6)
        start = time.perf_counter()
        for _ in range(calls):
            fastmm.matmul(a, b)
        fastmm_us.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(numpy_us), statistics.median(fastmm_us)


def product(n, dtype, algo, rounds):
    rng = np.random.default_rng(n)
    if np.issubdtype(dtype, np.integer):
        a = rng.integers(-100, 100, (n, n)).astype(dtype)
        b = rng.integers(-100, 100, (n, n)).astype(dtype)
    else:
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
    _, c = timed(fastmm.matmul, a, b, algo=algo)  # warm-up (and the check)
    check(c, a, b)
    np.matmul(a, b)
    numpy_s, fastmm_s = [], []
    for _ in range(rounds):
        numpy_s.append(timed(np.matmul, a, b)[0])
        fastmm_s.append(timed(fastmm.matmul, a, b, algo=algo)[0])
    return statistics.median(numpy_s), statistics.median(fastmm_s), fastmm.plan(a, b, algo=algo)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="n up to 1024, 3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    print(f"fastmm {fastmm.__version__} against numpy {np.__version__} with {openblas_name()}; "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs; {rounds} interleaved rounds")
    print()
    print("| product | numpy | fastmm | fastmm's kernel | speedup |")
    print("|---|---|---|---|---|")
    numpy_us, fastmm_us = overhead(rounds=max(rounds, 5), calls=2000)
    print(f"| 64×64 f64, per call | {numpy_us:.2f} µs | {fastmm_us:.2f} µs | packed | "
          f"{numpy_us / fastmm_us:.2f}× ({fastmm_us - numpy_us:+.2f} µs) |")
    sizes = [1024] if args.quick else [1024, 2048, 4096]
    cases = [(n, dtype, algo) for dtype in (np.float32, np.float64) for n in sizes
             for algo in ("auto", "packed")]
    cases += [(1024 if not args.quick else 512, dtype, "auto") for dtype in (np.int32, np.int64)]
    for n, dtype, algo in cases:
        integer = np.issubdtype(dtype, np.integer)
        numpy_s, fastmm_s, plan = product(n, dtype, algo, 3 if integer else rounds)
        levels = (plan.get("fast") or {}).get("levels", 0)
        kernel = plan["algorithm"] + (f", {levels} levels" if levels else "")
        print(f"| {n}³ {np.dtype(dtype).name}, algo={algo} | {numpy_s * 1e3:.2f} ms | "
              f"{fastmm_s * 1e3:.2f} ms | {kernel} | {numpy_s / fastmm_s:.2f}× |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
