"""fastmm.matmul right after numpy's own products, in a loop, as a numpy
user's program runs them: fastmm's products back to back first
(standalone), then each right after one numpy product of other matrices.
Medians over the rounds; the ratio standalone ÷ after is 1.0 when a
numpy product just before costs fastmm nothing (issue 80's target: at
least 0.95). Run plain and with libfastmm_blas preloaded (numpy's
products then on fastmm, one team for both), each in a fresh process.

    python3 scripts/after_numpy.py [--sizes 256,512,1024] [--rounds 60]
        [--lib target/release/libfastmm_blas.so]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def child(sizes, rounds):
    import numpy as np
    import fastmm

    out = {}
    for n in sizes:
        for dtype in ("float64", "float32"):
            rng = np.random.default_rng(n)
            a, b, x, y = (rng.random((n, n)).astype(dtype) for _ in range(4))
            fm = lambda: fastmm.matmul(a, b)  # noqa: E731

            def timed(f):
                start = time.perf_counter()
                f()
                return (time.perf_counter() - start) * 1e3

            # Standalone first, before this size's numpy products, then
            # each fastmm product right after one of numpy's.
            fm()
            alone = [timed(fm) for _ in range(rounds)]
            after = []
            for _ in range(rounds):
                x @ y
                after.append(timed(fm))
            out[f"{n} {dtype}"] = [statistics.median(alone), statistics.median(after)]
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="256,512,1024")
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--lib", default="target/release/libfastmm_blas.so")
    p.add_argument("--child", action="store_true")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        child(sizes, args.rounds)
        return
    runs = {}
    for name, preload in (("plain", None), ("preloaded", os.path.abspath(args.lib))):
        env = dict(os.environ)
        if preload:
            env["LD_PRELOAD"] = preload + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--sizes", args.sizes, "--rounds", str(args.rounds)],
            capture_output=True, text=True, env=env, check=True,
        )
        runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
    print("| n | dtype | plain: standalone ms | after numpy ms | standalone ÷ after | preloaded: standalone ms | after numpy ms | standalone ÷ after |")
    print("|---|---|---|---|---|---|---|---|")
    for key in runs["plain"]:
        n, dtype = key.split()
        cells = [n, dtype]
        for name in ("plain", "preloaded"):
            alone, after = runs[name][key]
            cells += [f"{alone:.3f}", f"{after:.3f}", f"{alone / after:.2f}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
