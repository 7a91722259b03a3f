"""Complex products on the CPU: fastmm.matmul against numpy, in one process.

    python python/benchmarks/complex_cpu.py [--n 4096] [--rounds 5]
        [--types c128,c64] [--sample-rows 64] [--ceiling]

For each type and size, on numpy arrays with standard normal real and
imaginary parts (numpy's interleaved storage, as users have them):

* **numpy** `numpy.matmul` (OpenBLAS `zgemm`/`cgemm` in numpy's wheels);
* **fastmm** `native` (the classical form: four real products of native
  accuracy) and `bound` (Gauss's 3M: three real products, which may take
  Winograd's levels).

The three calls run in interleaved rounds, so that a noisy neighbour or a
warm cache touches each alike; times are the median of `--rounds` rounds
after one warm-up call each, host clock around the whole call (the result
array's allocation included). The speedup is numpy's median over each
row's. Errors are relative Frobenius errors of the first `--sample-rows`
rows of C against the same rows computed in numpy's long double.

`--ceiling` adds one real product of the parts' type (the real parts of
A and B) by numpy and by fastmm's `packed` to the same rounds, and a
second table: what four such products take, the most any form of native
accuracy (four real products) can gain over numpy's complex product, and
the speed per real product that 1.25× would need.
"""

import argparse
import statistics
import time

import numpy as np

import fastmm

_TYPES = {"c64": np.complex64, "c128": np.complex128}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="4096", help="sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--types", default="c128,c64")
    parser.add_argument("--sample-rows", type=int, default=64)
    parser.add_argument("--ceiling", action="store_true")
    args = parser.parse_args()
    ceilings = []
    print(f"numpy {np.__version__}, fastmm {fastmm.__version__}; median of {args.rounds} interleaved rounds")
    print("| type | n | numpy s | fastmm `native` | fastmm `bound` (3M) | error: numpy / native / bound |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for n in (int(x) for x in args.n.split(",")):
        for name in args.types.split(","):
            dtype = _TYPES[name]
            a = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(dtype)
            b = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(dtype)
            calls = {
                "numpy": lambda: np.matmul(a, b),
                "native": lambda: fastmm.matmul(a, b),
                "bound": lambda: fastmm.matmul(a, b, accuracy="bound"),
            }
            timed = dict(calls)
            if args.ceiling:
                x, y = np.ascontiguousarray(a.real), np.ascontiguousarray(b.real)
                timed["numpy real"] = lambda: np.matmul(x, y)
                timed["packed real"] = lambda: fastmm.matmul(x, y, algo="packed")
            results = {key: call() for key, call in timed.items()}
            times = {key: [] for key in timed}
            for _ in range(args.rounds):
                for key, call in timed.items():
                    start = time.perf_counter()
                    call()
                    times[key].append(time.perf_counter() - start)
            rows = min(args.sample_rows, n)
            exact = a[:rows].astype(np.clongdouble) @ b.astype(np.clongdouble)
            scale = np.linalg.norm(exact.astype(np.complex128))

            def error(c):
                return float(np.linalg.norm((c[:rows] - exact).astype(np.complex128)) / scale)

            median = {key: statistics.median(t) for key, t in times.items()}
            cells = [
                f"{median[key]:.3f} s, {median['numpy'] / median[key]:.3f}×"
                for key in ("native", "bound")
            ]
            errors = " / ".join(f"{error(results[key]):.1e}" for key in calls)
            print(f"| {np.dtype(dtype).name} | {n} | {median['numpy']:.3f} | {cells[0]} | {cells[1]} | {errors} |", flush=True)
            if args.ceiling:
                rate = lambda t: 2 * n**3 / t / 1e9  # noqa: E731
                four = 4 * median["packed real"]
                ceilings.append(
                    f"| {np.dtype(dtype).name} | {n} | {median['numpy']:.3f} s | {median['native']:.3f} s | "
                    f"{median['numpy real']:.3f} s ({rate(median['numpy real']):.0f} GFLOP/s) / "
                    f"{median['packed real']:.3f} s ({rate(median['packed real']):.0f} GFLOP/s) | "
                    f"{four:.3f} s, {median['numpy'] / four:.2f}× | {rate(median['numpy'] / 1.25 / 4):.0f} GFLOP/s |"
                )
    if ceilings:
        print()
        print("| type | n | numpy complex | fastmm `native` | one real product: numpy / `packed` | four `packed` products | 1.25× needs, per real product |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(ceilings))


if __name__ == "__main__":
    main()
