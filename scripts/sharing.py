#!/usr/bin/env python3
"""fastmm's CPU products beside the libraries and processes a Python user
runs them with (docs/results.md, "Sharing the machine").

For each neighbour and size, in one process and one run:

  alone         fastmm.matmul with nothing else run for a while
  peer alone    the neighbour's own product (numpy, MKL, torch), alone
  after         fastmm.matmul right after one call of the neighbour
  interleaved   neighbour, fastmm, neighbour, fastmm, ...: each one's time

Neighbours: numpy (its OpenBLAS, whose idle workers spin after a call),
mkl (MKL's cblas_sgemm/dgemm through ctypes, from the `mkl` pip wheel;
its OpenMP workers keep their default spin time), torch (torch.mm on CPU
tensors, where torch is installed) and busy (another process spinning,
pinned to one core, for the whole measurement).

  python3 scripts/sharing.py [--sizes 128,256,512,1024] [--dtype f32]
                             [--neighbours numpy,mkl,torch,busy]
                             [--reps 21] [--json FILE]

Times are medians in ms; "× peer" is the peer's median over fastmm's in
the same case (above 1: fastmm faster). "error" is each product's
relative Frobenius error against numpy's float64 product of the same
inputs, fastmm's / the peer's.
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

import numpy as np

import fastmm


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def timed(f):
    start = time.perf_counter()
    f()
    return (time.perf_counter() - start) * 1e3


def idle(seconds=0.6):
    """Long enough that every library's idle workers have gone to sleep
    (OpenBLAS and Intel OpenMP spin for up to 200 ms by default)."""
    time.sleep(seconds)


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


def spin_pinned(cpu, stop):
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        pass


def neighbour(name, a, b):
    """The neighbour's product as a call, and its label; None when absent."""
    if name == "numpy":
        config = np.show_config(mode="dicts") if hasattr(np, "show_config") else {}
        try:
            blas = config["Build Dependencies"]["blas"]
            label = f"numpy {np.__version__} ({blas['name']} {blas['version']})"
        except (KeyError, TypeError):
            label = f"numpy {np.__version__}"
        return (lambda: a @ b), label
    if name == "mkl":
        try:
            mkl = Mkl()
        except OSError as e:
            print(f"skipping mkl: {e}", file=sys.stderr)
            return None
        c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
        return (lambda: mkl.matmul(a, b, c)), mkl.version
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


def measure(a, b, peer, reps):
    fast = lambda: fastmm.matmul(a, b)  # noqa: E731
    for _ in range(3):
        fast()
        if peer is not None:
            peer()
    idle()
    row = {"alone": median([timed(fast) for _ in range(reps)])}
    row["error"] = relative_error(fastmm.matmul(a, b), a, b)
    if peer is None:
        return row
    row["peer error"] = relative_error(peer(), a, b)
    idle()
    row["peer alone"] = median([timed(peer) for _ in range(reps)])
    after = []
    for _ in range(reps):
        idle(0.05)
        peer()
        after.append(timed(fast))
    row["after"] = median(after)
    mine, theirs = [], []
    for _ in range(reps):
        theirs.append(timed(peer))
        mine.append(timed(fast))
    row["interleaved"] = median(mine)
    row["peer interleaved"] = median(theirs)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="128,256,512,1024")
    parser.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    parser.add_argument("--neighbours", default="numpy,mkl,torch,busy")
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--json")
    args = parser.parse_args()
    dtype = np.float32 if args.dtype == "f32" else np.float64
    rng = np.random.default_rng(55)
    cpus = sorted(os.sched_getaffinity(0))
    print(
        f"fastmm {fastmm.__version__}, {fastmm.get_num_threads()} threads; "
        f"{len(cpus)} CPUs; {args.dtype}; medians of {args.reps}, ms"
    )
    print(
        "| neighbour | n | fastmm alone | peer alone | fastmm after peer | "
        "fastmm interleaved | peer interleaved | × peer (alone) | × peer (interleaved) | error |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for name in args.neighbours.split(","):
        for n in [int(s) for s in args.sizes.split(",")]:
            a = rng.random((n, n)).astype(dtype)
            b = rng.random((n, n)).astype(dtype)
            if name == "busy":
                # A process spinning on the first CPU, and numpy beside.
                stop = multiprocessing.Event()
                spinner = multiprocessing.Process(target=spin_pinned, args=(cpus[0], stop))
                spinner.start()
                try:
                    time.sleep(0.2)
                    peer, label = neighbour("numpy", a, b)
                    row = measure(a, b, peer, args.reps)
                finally:
                    stop.set()
                    spinner.join(5)
                    if spinner.is_alive():
                        spinner.terminate()
                label = f"busy process on CPU {cpus[0]}; peer {label}"
            else:
                found = neighbour(name, a, b)
                if found is None:
                    break
                peer, label = found
                row = measure(a, b, peer, args.reps)
            row.update(neighbour=label, n=n, dtype=args.dtype)
            results.append(row)
            print(
                f"| {label} | {n} | {row['alone']:.3f} | {row['peer alone']:.3f} | "
                f"{row['after']:.3f} | {row['interleaved']:.3f} | {row['peer interleaved']:.3f} | "
                f"{row['peer alone'] / row['alone']:.2f} | "
                f"{row['peer interleaved'] / row['interleaved']:.2f} | "
                f"{row['error']:.1e} / {row['peer error']:.1e} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
