"""numpy's matmul (OpenBLAS) as a peer of fastmm-peers and `fastmm bench`.

Usage: numpy_gemm.py M K N DTYPE THREADS  (the Rust side embeds this file
and runs it with `python -c`).
Prints one JSON line describing numpy and the BLAS library threadpoolctl
finds (an empty list without threadpoolctl; the parent then pins the
threads through OPENBLAS_NUM_THREADS), then for each line read from stdin
runs one untimed and one timed product and prints the time of the second
in milliseconds, so the caller can interleave numpy's runs with the other
contestants'.
"""
import contextlib
import json
import sys
import time

import numpy as np

try:
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # optional: the environment variables pin the threads
    threadpool_info = None


def main() -> None:
    m, k, n = (int(x) for x in sys.argv[1:4])
    dtype = {"f32": np.float32, "f64": np.float64}[sys.argv[4]]
    threads = int(sys.argv[5])
    rng = np.random.default_rng(42)
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(dtype)
    limits = (
        threadpool_limits(limits=threads, user_api="blas")
        if threadpool_info
        else contextlib.nullcontext()
    )
    with limits:
        blas = [
            {key: info.get(key) for key in ("internal_api", "version", "architecture", "num_threads")}
            for info in (threadpool_info() if threadpool_info else [])
            if info.get("user_api") == "blas"
        ]
        a @ b
        print(json.dumps({"numpy": np.__version__, "blas": blas}), flush=True)
        for _ in sys.stdin:
            a @ b  # untimed: wakes the cores, as the harness does for every contestant
            start = time.perf_counter()
            a @ b
            print((time.perf_counter() - start) * 1e3, flush=True)


if __name__ == "__main__":
    main()
