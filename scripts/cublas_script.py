"""An unchanged torch/CuPy script, for the cuBLAS interposer: torch.matmul f64
and f32 (TF32 off), complex128 at n/2, torch.bmm (a strided batch) and
CuPy's dot; kernel time (CUDA events on torch's stream, median of reps) and
error against long double on sampled rows, one JSON line per call.

    python3 scripts/cublas_script.py N REPS LABEL

Run plainly and under LD_PRELOAD=libfastmm_cublas.so by
scripts/cublas-interposer.sh; nothing in it names fastmm."""
import json, statistics, sys
import numpy as np
import torch

n, reps, label = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.backends.cuda.matmul.allow_tf32 = False
gen = torch.Generator(device="cuda").manual_seed(5)

def timed(f):
    out = f()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); c = f(); e.record(); e.synchronize()
        times.append(s.elapsed_time(e)); del c
    return statistics.median(times), out

def errors(a, b, c, rows):
    """Largest |C - ref| / (|A||B|) and relative Frobenius, on rows, in long double."""
    to = lambda x: x.cpu().numpy().astype(np.clongdouble if x.is_complex() else np.longdouble)
    ar, bb, cr = to(a[rows]), to(b), to(c[rows])
    ref = ar @ bb
    scale = np.abs(ar) @ np.abs(bb)
    worst = float(np.max(np.abs(cr - ref) / scale))
    fro = float(np.sqrt(np.sum(np.abs(cr - ref) ** 2) / np.sum(np.abs(ref) ** 2)))
    return worst, fro

def report(case, ms, err):
    print(json.dumps({"label": label, "case": case, "ms": round(ms, 3), "max_scaled": err[0], "rel_fro": err[1]}), flush=True)

rows = [0, n // 3, n - 1]
for dtype, name in [(torch.float64, "f64"), (torch.float32, "f32")]:
    a = torch.rand(n, n, dtype=dtype, device="cuda", generator=gen) * 2 - 1
    b = torch.rand(n, n, dtype=dtype, device="cuda", generator=gen) * 2 - 1
    ms, c = timed(lambda: torch.matmul(a, b))
    report(f"torch.matmul {name} {n}", ms, errors(a, b, c, rows))
    del a, b, c
m = n // 2
a = torch.complex(*(torch.rand(2, m, m, dtype=torch.float64, device="cuda", generator=gen) * 2 - 1))
b = torch.complex(*(torch.rand(2, m, m, dtype=torch.float64, device="cuda", generator=gen) * 2 - 1))
ms, c = timed(lambda: torch.matmul(a, b))
report(f"torch.matmul c128 {m}", ms, errors(a, b, c, rows[:2]))
del a, b, c
a = torch.rand(64, 2048, 2048, device="cuda", generator=gen) * 2 - 1
b = torch.rand(64, 2048, 2048, device="cuda", generator=gen) * 2 - 1
ms, c = timed(lambda: torch.bmm(a, b))
report("torch.bmm f32 64x2048", ms, errors(a[5], b[5], c[5], rows[:1]))
del a, b, c
try:
    import cupy
    x = cupy.random.default_rng(3).random((n, n)) * 2 - 1
    y = cupy.random.default_rng(4).random((n, n)) * 2 - 1
    ms, z = timed(lambda: torch.as_tensor(cupy.dot(x, y), device="cuda"))
    report(f"cupy.dot f64 {n}", ms, errors(torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda"), z, rows))
except ImportError:
    print("no cupy")
