"""numpy's `a @ b` on its own OpenBLAS and on libfastmm_blas (preloaded),
each in a fresh process, alternating, median of the runs: the drop-in
library's speed as a numpy user sees it (docs/results.md), and the
largest error of each over its runs (first 16 rows against long double,
in units of |A||B|).

    python3 scripts/blas_preload.py [--lib target/release/libfastmm_blas.so]
        [--sizes 1024,2048,4096] [--trials 3]
        [--dtypes float64,float32]    (complex128 and complex64 as well)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = """
import json, sys, time, numpy as np
# numpy's OpenBLAS starts its threads when it loads and they spin for
# about 50 ms before they sleep, preloaded or not; a product timed in that
# window shares a CPU with them. Both runs wait it out.
time.sleep(0.2)
out = {}
for n in %(sizes)r:
    for dtype in %(dtypes)r:
        rng = np.random.default_rng(n)
        draw = lambda: rng.standard_normal((n, n)) + (
            1j * rng.standard_normal((n, n)) if dtype.startswith("complex") else 0)
        a = draw().astype(dtype)
        b = draw().astype(dtype)
        a @ b
        times = []
        for _ in range(%(reps)d):
            t = time.perf_counter(); a @ b; times.append(time.perf_counter() - t)
        times.sort()
        # The error of the product's first rows against the same rows in
        # long double (numpy's own loop, not the BLAS under test), in
        # units of (|A||B|)_ij: max |C - ref| / (|A||B|).
        rows = min(n, 16)
        wide = np.clongdouble if dtype.startswith("complex") else np.longdouble
        c = (a @ b)[:rows]
        ref = a[:rows].astype(wide) @ b.astype(wide)
        scale = np.abs(a[:rows]).astype(np.longdouble) @ np.abs(b).astype(np.longdouble)
        err = float(np.max(np.abs(c.astype(wide) - ref) / np.maximum(scale, np.finfo(np.longdouble).tiny)))
        out[f"{n} {dtype}"] = [times[len(times) // 2], err]
print(json.dumps(out))
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", default="target/release/libfastmm_blas.so")
    p.add_argument("--sizes", default="1024,2048,4096")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--dtypes", default="float64,float32")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    code = CHILD % {"sizes": sizes, "reps": args.reps, "dtypes": args.dtypes.split(",")}
    runs = {"numpy": [], "fastmm": []}
    for trial in range(args.trials):
        order = ["numpy", "fastmm"] if trial % 2 == 0 else ["fastmm", "numpy"]
        for who in order:
            env = dict(os.environ)
            if who == "fastmm":
                env["LD_PRELOAD"] = os.path.abspath(args.lib)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            runs[who].append(json.loads(out.stdout))
    print("size dtype      numpy µs  fastmm µs  fastmm/numpy speed  error numpy / fastmm")
    for key in runs["numpy"][0]:
        mine = statistics.median(r[key][0] for r in runs["fastmm"]) * 1e6
        theirs = statistics.median(r[key][0] for r in runs["numpy"]) * 1e6
        e_mine = max(r[key][1] for r in runs["fastmm"])
        e_theirs = max(r[key][1] for r in runs["numpy"])
        print(f"{key:16} {theirs:9.3f} {mine:10.3f}  {theirs / mine:6.3f}x  {e_theirs:.1e} / {e_mine:.1e}")


if __name__ == "__main__":
    main()
