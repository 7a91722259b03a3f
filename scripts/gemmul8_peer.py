#!/usr/bin/env python3
"""fastmm's emulated product beside GEMMul8 and cuBLAS, in one process.

Every product of a row gets the same torch CUDA tensors; each is timed
between CUDA events on torch's current stream (median of --reps after a
warm-up) and judged by the same errors, over --rows sampled rows of C
against a reference exact to about 2^-106 (Dot2 on the GPU, from the peer
library):

  max_scaled   the largest |C^ - C|_ij / (|A||B|)_ij
  rel_fro      ||C^ - C||_F / ||C||_F over the sampled rows

Products: cuBLAS (torch.matmul, TF32 off: dgemm or sgemm), fastmm's
`emulated` at `native` (its route and phases from matmul_timed), and
GEMMul8 in accurate and fast mode at each count of moduli asked for.
Each row also says whether it meets the native product's errors (both
measures at most cuBLAS's), and its speed over cuBLAS's.

  python3 scripts/gemmul8_peer.py --lib libgemmul8_peer.so \\
      --sizes 8192,16384 --dtypes f64,f32 --reps 5 --json out.jsonl

Input classes (--classes) follow fastmm's accuracy audit: uniform,
wide (+-10^x, x in [-3, 3)), scaled (rows and columns by 2^-12..2^12),
cancellation (A = [U U], B = [V; -V + E/1024]).
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

import torch

import fastmm

DTYPES = {"f64": torch.float64, "f32": torch.float32}
DEFAULT_MODULI = {"f64": "13,14,15,16", "f32": "6,7,8"}


def inputs(cls, n, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def uniform(rows, cols):
        return torch.rand(rows, cols, device="cuda", dtype=torch.float64, generator=g) * 2 - 1

    if cls == "uniform":
        a, b = uniform(n, n), uniform(n, n)
    elif cls == "wide":

        def wide(rows, cols):
            x = 10.0 ** (torch.rand(rows, cols, device="cuda", dtype=torch.float64, generator=g) * 6 - 3)
            sign = torch.where(torch.rand(rows, cols, device="cuda", generator=g) < 0.5, -1.0, 1.0)
            return x * sign

        a, b = wide(n, n), wide(n, n)
    elif cls == "scaled":

        def powers(length):
            e = torch.randint(-12, 13, (length,), device="cuda", generator=g).to(torch.float64)
            return torch.exp2(e)

        a = uniform(n, n) * powers(n)[:, None] * powers(n)[None, :]
        b = uniform(n, n) * powers(n)[:, None] * powers(n)[None, :]
    elif cls == "cancellation":
        h = n // 2
        u, v, e = uniform(n, h), uniform(h, n), uniform(h, n)
        tail = (-v + e / 1024.0).to(dtype).to(torch.float64)
        a = torch.cat([u, u], dim=1)
        b = torch.cat([v, tail], dim=0)
    else:
        raise SystemExit(f"unknown class {cls}")
    return a.to(dtype).contiguous(), b.to(dtype).contiguous()


def timed(fn, reps):
    """Median ms of `reps` calls between CUDA events, after one warm-up."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), times


class Peer:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.peer_gemmul8_work.restype = ctypes.c_size_t
        self.lib.peer_gemmul8_work.argtypes = [ctypes.c_int] + [ctypes.c_size_t] * 3 + [ctypes.c_uint]
        self.lib.peer_gemmul8.restype = ctypes.c_int
        self.lib.peer_gemmul8.argtypes = (
            [ctypes.c_int, ctypes.c_ulonglong]
            + [ctypes.c_size_t] * 3
            + [ctypes.c_void_p] * 3
            + [ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
        )
        self.lib.peer_reference_rows.restype = ctypes.c_int
        self.lib.peer_reference_rows.argtypes = (
            [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_size_t]
            + [ctypes.c_void_p] * 3
            + [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        )

    @staticmethod
    def stream():
        return torch.cuda.current_stream().cuda_stream

    def reference(self, a, b, rows):
        k, n = b.shape
        idx = torch.tensor(rows, dtype=torch.int64, device="cuda")
        ref = torch.empty(len(rows), n, dtype=torch.float64, device="cuda")
        mag = torch.empty_like(ref)
        f64 = int(a.dtype == torch.float64)
        code = self.lib.peer_reference_rows(
            f64, self.stream(), k, n, a.data_ptr(), b.data_ptr(), idx.data_ptr(), len(rows),
            ref.data_ptr(), mag.data_ptr(),
        )
        if code:
            raise SystemExit(f"reference rows failed ({code})")
        torch.cuda.synchronize()
        return ref, mag

    def gemm(self, a, b, c, moduli, fast, work):
        m, k = a.shape
        n = b.shape[1]
        f64 = int(a.dtype == torch.float64)
        code = self.lib.peer_gemmul8(
            f64, self.stream(), m, k, n, a.data_ptr(), b.data_ptr(), c.data_ptr(), moduli,
            int(fast), work.data_ptr(),
        )
        if code:
            raise SystemExit(f"GEMMul8 failed ({code})")

    def work(self, a, b, moduli):
        m, k = a.shape
        n = b.shape[1]
        size = self.lib.peer_gemmul8_work(int(a.dtype == torch.float64), m, k, n, moduli)
        return torch.empty(size + 256, dtype=torch.uint8, device="cuda")


def errors(c, rows, ref, mag):
    got = c[rows].to(torch.float64)
    diff = (got - ref).abs()
    scaled = torch.where(mag > 0, diff / mag, torch.where(diff > 0, torch.inf, 0.0))
    fro = torch.linalg.vector_norm(ref)
    rel = (torch.linalg.vector_norm(got - ref) / fro).item() if fro > 0 else 0.0
    return {"max_scaled": scaled.max().item(), "rel_fro": rel}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True, help="libgemmul8_peer.so")
    p.add_argument("--sizes", default="16384")
    p.add_argument("--dtypes", default="f64,f32")
    p.add_argument("--classes", default="uniform")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rows", type=int, default=8, help="sampled rows of C")
    p.add_argument("--moduli-f64", default=DEFAULT_MODULI["f64"])
    p.add_argument("--moduli-f32", default=DEFAULT_MODULI["f32"])
    p.add_argument("--modes", default="accurate,fast")
    p.add_argument("--no-fastmm", action="store_true")
    p.add_argument("--json", help="append one JSON record per product to this file")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    peer = Peer(args.lib)
    out = open(args.json, "a") if args.json else None
    card = torch.cuda.get_device_name()
    print(f"# {card}, torch {torch.__version__}, fastmm {getattr(fastmm, '__version__', '?')}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    header = f"{'type':4} {'n':>6} {'class':13} {'product':34} {'ms':>9} {'x native':>8} " \
             f"{'max_scaled':>10} {'rel_fro':>10} {'err x nat':>9} meets"
    for dtype_name in args.dtypes.split(","):
        dtype = DTYPES[dtype_name]
        moduli = [int(x) for x in getattr(args, f"moduli_{dtype_name}").split(",") if x]
        for n in [int(x) for x in args.sizes.split(",")]:
            for cls in args.classes.split(","):
                a, b = inputs(cls, n, dtype, args.seed)
                rows = sorted({(i * 2654435761 + args.seed) % n for i in range(args.rows)})
                ref, mag = peer.reference(a, b, rows)
                c = torch.empty(n, n, dtype=dtype, device="cuda")
                print(header)
                results = []

                def record(name, ms, times, extra=None):
                    e = errors(c, rows, ref, mag)
                    rec = {"type": dtype_name, "n": n, "class": cls, "product": name, "ms": ms,
                           "times": times, "card": card, **e, **(extra or {})}
                    results.append(rec)
                    return rec

                ms, ts = timed(lambda: torch.matmul(a, b, out=c), args.reps)
                native = record("cublas", ms, ts)
                if not args.no_fastmm:
                    ms, ts = timed(lambda: fastmm.matmul(a, b, out=c, algo="emulated"), args.reps)
                    _, timing = fastmm.matmul_timed(a, b, algo="emulated")
                    record("fastmm emulated native", ms, ts, {"fastmm": timing.get("emulation"),
                                                              "fastmm_compute_ms": timing.get("compute_ms")})
                for mode in args.modes.split(","):
                    for nm in moduli:
                        work = peer.work(a, b, nm)
                        ms, ts = timed(lambda: peer.gemm(a, b, c, nm, mode == "fast", work), args.reps)
                        record(f"GEMMul8 {mode} {nm} moduli", ms, ts, {"moduli": nm, "mode": mode})
                        del work
                for rec in results:
                    ratio = max(rec["max_scaled"] / native["max_scaled"] if native["max_scaled"] else 0.0,
                                rec["rel_fro"] / native["rel_fro"] if native["rel_fro"] else 0.0)
                    rec["speedup"] = native["ms"] / rec["ms"]
                    rec["error_ratio"] = ratio
                    rec["meets_native"] = ratio <= 1.0
                    route = ""
                    if rec.get("fastmm"):
                        route = f"  {json.dumps(rec['fastmm'])}"
                    print(f"{dtype_name:4} {n:6d} {cls:13} {rec['product']:34} {rec['ms']:9.2f} "
                          f"{rec['speedup']:8.3f} {rec['max_scaled']:10.3e} {rec['rel_fro']:10.3e} "
                          f"{ratio:9.3f} {'yes' if rec['meets_native'] else 'NO'}{route}")
                    if out:
                        out.write(json.dumps(rec) + "\n")
                sys.stdout.flush()
                del a, b, c, ref, mag
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
