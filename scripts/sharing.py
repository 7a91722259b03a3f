#!/usr/bin/env python3
"""fastmm's CPU products beside the libraries and processes a Python user
runs them with: the measurements behind docs/results.md, "Sharing the
machine" (issue 55's targets).

Three tables, each from one process:

neighbours (numpy, mkl, torch): for each type, size and fastmm thread
count t, fastmm's median time

  standalone   back to back, the neighbour idle for a while
  after        right after one call of the neighbour, in a run of fastmm
               calls (pause, fastmm, fastmm, neighbour, timed fastmm: the
               pause lets every idle worker of the neighbour go to sleep,
               the two calls warm fastmm up again)
  interleaved  neighbour, fastmm, neighbour, fastmm, ...

and the ratios standalone/after and standalone/interleaved (the target:
at least 0.9). The neighbour's own standalone and interleaved medians
stand beside them.

busy: a process spinning on the first CPU for the whole measurement;
fastmm's default team and one thread, with the ratio of the team's time
to the one-thread time (the target: at most 1.15).

three-way (--three-way): fastmm `auto` and `packed`, MKL and numpy in
interleaved rounds (each round runs each once, in turn), the speed of
each and `auto` over the better of MKL and numpy (the target: at least
1.0), with each product's error.

Neighbours: numpy (its OpenBLAS; an idle worker spins, yielding, for
about 2^28 cycles after a call), mkl (cblas_?gemm of the `mkl` pip wheel
through ctypes; its OpenMP workers spin for KMP_BLOCKTIME, 200 ms), torch
(torch.mm on CPU tensors, where torch is installed; OpenMP workers).
--quiet-neighbours runs the same with every neighbour told not to spin
(OPENBLAS_THREAD_TIMEOUT=4, KMP_BLOCKTIME=0, OMP_WAIT_POLICY=PASSIVE),
which separates what a spinning neighbour costs from anything else.

  python3 scripts/sharing.py [--sizes 64,128,256,512,1024,2048]
      [--dtypes f32,f64] [--threads 1,2] [--neighbours numpy,mkl,torch,busy]
      [--reps 15] [--algo auto] [--quiet-neighbours] [--three-way]
      [--json FILE]

Times are medians in ms. "error" is the relative Frobenius error against
numpy's float64 product of the same inputs.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import multiprocessing
import os
import re
import sys
import time

QUIET = {"OPENBLAS_THREAD_TIMEOUT": "4", "KMP_BLOCKTIME": "0", "OMP_WAIT_POLICY": "PASSIVE"}

if "--quiet-neighbours" in sys.argv and os.environ.get("FASTMM_SHARING_QUIET") != "1":
    # The libraries read these once, when loaded: start again with them set.
    os.environ.update(QUIET, FASTMM_SHARING_QUIET="1")
    os.execv(sys.executable, [sys.executable, *sys.argv])

import numpy as np  # noqa: E402

import fastmm  # noqa: E402

# Long enough that every library's idle workers have gone to sleep (OpenBLAS
# spins for 2^28 cycles, 0.13 s at 2.1 GHz; Intel OpenMP for 200 ms).
PAUSE = 0.3


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def timed(f):
    start = time.perf_counter()
    f()
    return (time.perf_counter() - start) * 1e3


def reps_for(n, reps, dtype):
    """Fewer repetitions where one product takes long; more, up to 20
    times, where it takes microseconds, so that a median of single calls
    is not a handful of timer-sized samples."""
    flops = 2.0 * n**3 * (2 if dtype == np.float64 else 1)
    if flops > 2e9:
        return max(5, min(reps, int(reps * 2e9 / flops)))
    return reps * max(1, min(20, int(1e8 / flops)))


class Mkl:
    """MKL's cblas_?gemm through ctypes (the `mkl` pip wheel's libmkl_rt)."""

    def __init__(self):
        prefix = os.path.dirname(os.path.dirname(sys.executable))
        paths = glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*"))
        if not paths:
            raise OSError("no libmkl_rt in this environment (pip install mkl)")
        self.lib = ctypes.CDLL(paths[0])
        get_version = getattr(self.lib, "MKL_Get_Version_String", None)
        self.version = "MKL"
        if get_version is not None:
            buffer = ctypes.create_string_buffer(256)
            get_version(buffer, 256)
            text = buffer.value.decode(errors="replace")
            found = re.search(r"Version ([0-9.]+)", text)
            self.version = f"MKL {found.group(1)}" if found else text

    def matmul(self, a, b, c):
        m, k = a.shape
        n = b.shape[1]
        gemm, ctype = (
            (self.lib.cblas_sgemm, ctypes.c_float)
            if a.dtype == np.float32
            else (self.lib.cblas_dgemm, ctypes.c_double)
        )
        ptr = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        # Row-major (101), no transposes (111).
        gemm(101, 111, 111, m, n, k, ctype(1.0), ptr(a), k, ptr(b), n, ctype(0.0), ptr(c), n)
        return c


def numpy_label():
    config = np.show_config(mode="dicts") if hasattr(np, "show_config") else {}
    try:
        blas = config["Build Dependencies"]["blas"]
        return f"numpy {np.__version__} ({blas['name']} {blas['version']})"
    except (KeyError, TypeError):
        return f"numpy {np.__version__}"


def neighbour(name, a, b):
    """The neighbour's product as a call, and its label; None when absent."""
    if name == "numpy":
        return (lambda: a @ b), numpy_label()
    if name == "mkl":
        try:
            mkl = Mkl()
        except OSError as e:
            print(f"skipping mkl: {e}", file=sys.stderr)
            return None
        c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
        return (lambda: mkl.matmul(a, b, c)), f"{mkl.version} (cblas)"
    if name == "torch":
        try:
            import torch
        except ImportError:
            print("skipping torch: not installed", file=sys.stderr)
            return None
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return (lambda: torch.mm(ta, tb)), f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    raise ValueError(f"unknown neighbour {name}")


def relative_error(c, a, b):
    exact = a.astype(np.float64) @ b.astype(np.float64)
    return float(np.linalg.norm(np.asarray(c, dtype=np.float64) - exact) / np.linalg.norm(exact))


def measure_neighbour(a, b, peer, threads, reps, algo):
    fast = lambda: fastmm.matmul(a, b, algo=algo, threads=threads)  # noqa: E731
    for _ in range(2):
        fast()
        peer()
    time.sleep(PAUSE)
    row = {"standalone": median([timed(fast) for _ in range(reps)])}
    time.sleep(PAUSE)
    row["peer standalone"] = median([timed(peer) for _ in range(reps)])
    after = []
    for _ in range(max(5, reps // 2)):
        time.sleep(PAUSE)
        fast()
        fast()
        peer()
        after.append(timed(fast))
    row["after"] = median(after)
    mine, theirs = [], []
    for _ in range(reps):
        theirs.append(timed(peer))
        mine.append(timed(fast))
    row["interleaved"] = median(mine)
    row["peer interleaved"] = median(theirs)
    row["error"] = relative_error(fast(), a, b)
    return row


def spin_pinned(cpu, stop):
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        pass


def measure_busy(a, b, reps, cpu, algo):
    team = lambda: fastmm.matmul(a, b, algo=algo)  # noqa: E731
    one = lambda: fastmm.matmul(a, b, algo=algo, threads=1)  # noqa: E731
    for _ in range(2):
        team()
        one()
    row = {"one alone": median([timed(one) for _ in range(reps)])}
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=spin_pinned, args=(cpu, stop))
    spinner.start()
    try:
        time.sleep(0.2)
        teams, ones = [], []
        for _ in range(reps):
            teams.append(timed(team))
            ones.append(timed(one))
        row["team busy"] = median(teams)
        row["one busy"] = median(ones)
    finally:
        stop.set()
        spinner.join(5)
        if spinner.is_alive():
            spinner.terminate()
    return row


def three_way(a, b, reps):
    """fastmm auto and packed, MKL, numpy: each once per round, in turn."""
    contestants = {
        "auto": lambda: fastmm.matmul(a, b),
        "packed": lambda: fastmm.matmul(a, b, algo="packed"),
    }
    try:
        mkl = Mkl()
        c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
        contestants["mkl"] = lambda: mkl.matmul(a, b, c)
    except OSError as e:
        print(f"skipping mkl: {e}", file=sys.stderr)
    contestants["numpy"] = lambda: a @ b
    times = {name: [] for name in contestants}
    for f in contestants.values():
        f()
    for r in range(reps):
        names = list(contestants)
        for name in names[r % len(names):] + names[: r % len(names)]:
            times[name].append(timed(contestants[name]))
    row = {name: median(t) for name, t in times.items()}
    row["errors"] = {name: relative_error(np.array(f()), a, b) for name, f in contestants.items()}
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,128,256,512,1024,2048")
    parser.add_argument("--dtypes", default="f32,f64")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--neighbours", default="numpy,mkl,torch,busy")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument(
        "--algo", default="auto",
        help="fastmm's algorithm in the neighbour and busy tables (e.g. winograd)",
    )
    parser.add_argument("--quiet-neighbours", action="store_true")
    parser.add_argument("--three-way", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    dtypes = [{"f32": np.float32, "f64": np.float64}[d] for d in args.dtypes.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    rng = np.random.default_rng(55)
    cpus = sorted(os.sched_getaffinity(0))
    spin = "told not to spin" if args.quiet_neighbours else "spinning as they do by default"
    print(
        f"fastmm {fastmm.__version__} ({fastmm.get_num_threads()} threads by default), "
        f"algo {args.algo}; "
        f"{len(cpus)} CPUs; neighbours {spin}; medians, ms\n"
    )
    results = {"quiet neighbours": args.quiet_neighbours, "rows": []}

    def operands(n, dtype):
        return rng.random((n, n)).astype(dtype), rng.random((n, n)).astype(dtype)

    if args.three_way:
        print(
            "| type | n | fastmm auto | fastmm packed | MKL | numpy | auto GFLOP/s | "
            "auto ÷ better of MKL and numpy | packed ÷ better | error: auto / MKL / numpy |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for dtype in dtypes:
            for n in sizes:
                a, b = operands(n, dtype)
                row = three_way(a, b, reps_for(n, args.reps, dtype))
                peers = [row[p] for p in ("mkl", "numpy") if p in row]
                best = min(peers)
                e = row["errors"]
                print(
                    f"| {np.dtype(dtype).name} | {n} | {row['auto']:.3f} | {row['packed']:.3f} | "
                    f"{row.get('mkl', float('nan')):.3f} | {row['numpy']:.3f} | "
                    f"{2 * n**3 / row['auto'] / 1e6:.0f} | {best / row['auto']:.2f} | "
                    f"{best / row['packed']:.2f} | "
                    f"{e['auto']:.1e} / {e.get('mkl', float('nan')):.1e} / {e['numpy']:.1e} |",
                    flush=True,
                )
                results["rows"].append(dict(row, table="three-way", n=n, dtype=np.dtype(dtype).name))
    else:
        names = args.neighbours.split(",")
        peers = [name for name in names if name != "busy"]
        if peers:
            print(
                "| neighbour | type | n | fastmm threads | standalone | after | interleaved | "
                "standalone ÷ after | standalone ÷ interleaved | neighbour standalone | "
                "neighbour interleaved | error |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name in peers:
            for dtype in dtypes:
                for n in sizes:
                    a, b = operands(n, dtype)
                    found = neighbour(name, a, b)
                    if found is None:
                        break
                    peer, label = found
                    for threads in thread_counts:
                        row = measure_neighbour(
                            a, b, peer, threads, reps_for(n, args.reps, dtype), args.algo
                        )
                        print(
                            f"| {label} | {np.dtype(dtype).name} | {n} | {threads} | "
                            f"{row['standalone']:.3f} | {row['after']:.3f} | {row['interleaved']:.3f} | "
                            f"{row['standalone'] / row['after']:.2f} | "
                            f"{row['standalone'] / row['interleaved']:.2f} | "
                            f"{row['peer standalone']:.3f} | {row['peer interleaved']:.3f} | "
                            f"{row['error']:.1e} |",
                            flush=True,
                        )
                        results["rows"].append(
                            dict(row, table="neighbour", neighbour=label, n=n,
                                 dtype=np.dtype(dtype).name, threads=threads)
                        )
        if "busy" in names:
            print(
                f"\n| busy process on CPU {cpus[0]} | type | n | fastmm one thread, alone | "
                "fastmm one thread | fastmm team | team ÷ one thread |"
            )
            print("|---|---|---|---|---|---|---|")
            for dtype in dtypes:
                for n in sizes:
                    a, b = operands(n, dtype)
                    row = measure_busy(a, b, reps_for(n, args.reps, dtype), cpus[0], args.algo)
                    print(
                        f"| busy | {np.dtype(dtype).name} | {n} | {row['one alone']:.3f} | "
                        f"{row['one busy']:.3f} | {row['team busy']:.3f} | "
                        f"{row['team busy'] / row['one busy']:.2f} |",
                        flush=True,
                    )
                    results["rows"].append(dict(row, table="busy", n=n, dtype=np.dtype(dtype).name))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
