"""An unchanged torch/CuPy script, for the cuBLAS interposer: torch.matmul f64
and f32 (TF32 off), complex128 at n/2, torch.bmm (a strided batch) and
CuPy's dot; kernel time (CUDA events on torch's stream, median of reps) and
error against long double on sampled rows, one JSON line per call.

    python3 scripts/cublas_script.py N REPS LABEL [CASES]

CASES is a comma list of f64, f32, c128, bmm, cupy and small (default:
all). "small" times 64³, 128³ and 256³ f32/f64 products as a program sees
them: the wall time of 200 back-to-back calls and one synchronisation,
per call, median of 7, so a preloaded library's per-call cost shows.

Run plainly and under LD_PRELOAD=libfastmm_cublas.so (or another
library's hook) by scripts/cublas-interposer.sh; nothing in it names
fastmm."""
import json, statistics, sys, time
import numpy as np
import torch

n, reps, label = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cases = set((sys.argv[4] if len(sys.argv) > 4 else "f64,f32,c128,bmm,cupy,small").split(","))
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
    """Largest |C - ref| / (|A||B|) and relative Frobenius, on rows, in long
    double (in double for single-precision operands, whose products are
    exact there and whose sums' error is far below theirs). Long double's
    matmul has no BLAS: B's columns go through it in bands on every core
    (numpy releases the GIL there), or a case's errors at 16384 would take
    minutes."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    wide = {True: (np.complex128, np.clongdouble), False: (np.float64, np.longdouble)}
    single = a.dtype in (torch.float32, torch.complex64)
    kind = wide[a.is_complex()][0 if single else 1]
    ar, cr = a[rows].cpu().numpy().astype(kind), c[rows].cpu().numpy().astype(kind)
    bh = b.cpu().numpy()
    bands = np.array_split(np.arange(bh.shape[1]), max(1, min(64, os.cpu_count() or 1)))
    def band(cols):
        bb = bh[:, cols[0]:cols[-1] + 1].astype(kind)
        return ar @ bb, np.abs(ar) @ np.abs(bb)
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        parts = list(pool.map(band, [x for x in bands if len(x)]))
    ref = np.concatenate([p[0] for p in parts], axis=1)
    scale = np.concatenate([p[1] for p in parts], axis=1)
    worst = float(np.max(np.abs(cr - ref) / scale))
    fro = float(np.sqrt(np.sum(np.abs(cr - ref) ** 2) / np.sum(np.abs(ref) ** 2)))
    return worst, fro

start = time.time()

def timed_note(case, ms):
    """The time at once, on stderr, with the seconds since the start: a
    process cut short while its long-double errors run still gives it."""
    print(f"# {label}: {case} {ms:.3f} ms ({time.time() - start:.0f} s in)", file=sys.stderr, flush=True)

def report(case, ms, err):
    print(json.dumps({"label": label, "case": case, "ms": round(ms, 5), "max_scaled": err[0], "rel_fro": err[1]}), flush=True)

rows = [0, n // 3, n - 1]
for dtype, name in [(torch.float64, "f64"), (torch.float32, "f32")]:
    if name not in cases:
        continue
    a = torch.rand(n, n, dtype=dtype, device="cuda", generator=gen) * 2 - 1
    b = torch.rand(n, n, dtype=dtype, device="cuda", generator=gen) * 2 - 1
    ms, c = timed(lambda: torch.matmul(a, b))
    timed_note(f"torch.matmul {name} {n}", ms)
    report(f"torch.matmul {name} {n}", ms, errors(a, b, c, rows))
    del a, b, c
if "c128" in cases:
    m = n // 2
    a = torch.complex(*(torch.rand(2, m, m, dtype=torch.float64, device="cuda", generator=gen) * 2 - 1))
    b = torch.complex(*(torch.rand(2, m, m, dtype=torch.float64, device="cuda", generator=gen) * 2 - 1))
    ms, c = timed(lambda: torch.matmul(a, b))
    timed_note(f"torch.matmul c128 {m}", ms)
    report(f"torch.matmul c128 {m}", ms, errors(a, b, c, rows[:2]))
    del a, b, c
if "bmm" in cases:
    a = torch.rand(64, 2048, 2048, device="cuda", generator=gen) * 2 - 1
    b = torch.rand(64, 2048, 2048, device="cuda", generator=gen) * 2 - 1
    ms, c = timed(lambda: torch.bmm(a, b))
    timed_note("torch.bmm f32 64x2048", ms)
    report("torch.bmm f32 64x2048", ms, errors(a[5], b[5], c[5], rows[:1]))
    del a, b, c
if "cupy" in cases:
    try:
        import cupy
        x = cupy.random.default_rng(3).random((n, n)) * 2 - 1
        y = cupy.random.default_rng(4).random((n, n)) * 2 - 1
        ms, z = timed(lambda: torch.as_tensor(cupy.dot(x, y), device="cuda"))
        timed_note(f"cupy.dot f64 {n}", ms)
        report(f"cupy.dot f64 {n}", ms, errors(torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda"), z, rows))
    except ImportError:
        print("no cupy")
if "small" in cases:
    for dtype, name in [(torch.float64, "f64"), (torch.float32, "f32")]:
        for s in (64, 128, 256):
            a = torch.rand(s, s, dtype=dtype, device="cuda", generator=gen) * 2 - 1
            b = torch.rand(s, s, dtype=dtype, device="cuda", generator=gen) * 2 - 1
            c = torch.matmul(a, b)
            torch.cuda.synchronize()
            per_call = []
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(200):
                    c = torch.matmul(a, b)
                torch.cuda.synchronize()
                per_call.append((time.perf_counter() - t0) / 200 * 1e3)
            report(f"small torch.matmul {name} {s} (wall per call)", statistics.median(per_call), errors(a, b, c, [0, s - 1]))
