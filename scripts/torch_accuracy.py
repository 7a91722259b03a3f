"""fastmm.matmul on torch GPU tensors beside torch.matmul: time and error.

    python3 scripts/torch_accuracy.py N [REPS]

Float32 tensors uniform in [-1, 1) on GPU 0. torch.matmul runs with TF32
off (IEEE f32, cuBLAS sgemm) and on; fastmm.matmul at its default level
(native) and at accuracy="tf32". Each time is the median of REPS calls,
each call synchronised (what a caller waits for), after a warm-up. Errors
are against the f64 product of the same inputs (exact to f32's scale):
the relative Frobenius error and max |C^ - C|/(|A||B|).
"""

import statistics
import sys
import time

import torch

import fastmm


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return out, statistics.median(times)


def main():
    n = int(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    g = torch.Generator(device="cuda").manual_seed(42)
    a = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
    b = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
    ref = a.double() @ b.double()
    scale = a.abs().double() @ b.abs().double()
    ref_norm = ref.norm().item()

    def errors(c):
        d = c.double() - ref
        rel = d.norm().item() / ref_norm
        worst = (d.abs() / scale).max().item()
        del d
        return rel, worst

    rows = []
    torch.backends.cuda.matmul.allow_tf32 = False
    c, ms = timed(lambda: torch.matmul(a, b), reps)
    rows.append(("torch.matmul (TF32 off)", ms, *errors(c)))
    base_rel, base_ms = rows[0][2], ms
    del c
    torch.backends.cuda.matmul.allow_tf32 = True
    c, ms = timed(lambda: torch.matmul(a, b), reps)
    rows.append(("torch.matmul (TF32 on)", ms, *errors(c)))
    del c
    torch.backends.cuda.matmul.allow_tf32 = False
    for label, kwargs in [
        ("fastmm.matmul (default: native)", {}),
        ('fastmm.matmul accuracy="tf32"', {"accuracy": "tf32"}),
    ]:
        c, ms = timed(lambda: torch.from_dlpack(fastmm.matmul(a, b, **kwargs)), reps)
        rows.append((label, ms, *errors(c)))
        del c
    plan = fastmm.plan((n, n), (n, n), device="cuda", dtype="float32")
    print(f"n = {n}, float32, GPU: {torch.cuda.get_device_name(0)}; fastmm's plan: "
          f"{plan['algorithm']} gives {plan['accuracy']} ({plan['precision']})")
    print(f"{'product':34} {'ms':>9} {'TFLOPS':>7} {'rel error':>10} {'max/(|A||B|)':>13} "
          f"{'× torch err':>11} {'speed × torch':>13}")
    for label, ms, rel, worst in rows:
        print(f"{label:34} {ms:9.2f} {2 * n**3 / ms / 1e9:7.1f} {rel:10.2e} {worst:13.2e} "
              f"{rel / base_rel:11.2f} {base_ms / ms:13.2f}")


if __name__ == "__main__":
    main()
