"""Times numpy's matmul (OpenBLAS) for the fastmm-peers harness.

Usage: numpy_gemm.py M K N DTYPE REPS THREADS
Prints one JSON object: the BLAS library threadpoolctl reports, and the
sorted timings in milliseconds after one warm-up.
"""
import json
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits


def main() -> None:
    m, k, n = (int(x) for x in sys.argv[1:4])
    dtype = {"f32": np.float32, "f64": np.float64}[sys.argv[4]]
    reps, threads = int(sys.argv[5]), int(sys.argv[6])
    rng = np.random.default_rng(42)
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, n)).astype(dtype)
    with threadpool_limits(limits=threads, user_api="blas"):
        blas = [
            {k: info.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for info in threadpool_info()
            if info.get("user_api") == "blas"
        ]
        a @ b
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            a @ b
            times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"blas": blas, "times_ms": sorted(times)}))


if __name__ == "__main__":
    main()
