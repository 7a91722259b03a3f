"""fastmm against torch.matmul on CUDA tensors, side by side in one process.

    python python/benchmarks/vs_torch.py [--n 16384] [--rounds 10]

float32 tensors on GPU 0, TF32 off for torch (IEEE float32, as fastmm's
products are). fastmm multiplies the tensors in place through DLPack and
returns when the product is complete; torch's time is taken to a
synchronize. Rounds are interleaved; the speedup is torch's median over
fastmm's. Each fastmm result is checked against a float64 product within
its algorithm's componentwise bound.
"""

import argparse
import statistics
import time

import torch

import fastmm


def timed(f):
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = f()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--algos", default="auto,cublas,strassen,winograd")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    n = args.n
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(n, n, device="cuda", generator=g)
    b = torch.randn(n, n, device="cuda", generator=g)
    algos = args.algos.split(",")
    reference = a.double() @ b.double()
    bound = a.abs().double() @ b.abs().double()
    u = torch.finfo(torch.float32).eps / 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, fastmm {fastmm.__version__}; "
          f"n = {n} float32, {args.rounds} interleaved rounds, TF32 off")
    for algo in algos:  # warm-up: kernels compiled or loaded, workspaces sized
        c = torch.from_dlpack(fastmm.matmul(a, b, algo=algo))
        plan = fastmm.plan((n, n), (n, n), algo=algo, device="cuda", dtype="float32")
        ratio = float(((c.double() - reference).abs() / (plan["error_growth"] * (n + 2) * u * bound)).max())
        print(f"  {algo}: {plan['algorithm']}, {plan['kernel']}; worst error {ratio:.3f} of its bound")
        assert ratio <= 1.0
        del c
    torch.matmul(a, b)
    times = {name: [] for name in ["torch"] + algos}
    for _ in range(args.rounds):
        times["torch"].append(timed(lambda: torch.matmul(a, b))[0])
        for algo in algos:
            times[algo].append(timed(lambda: fastmm.matmul(a, b, algo=algo))[0])
    flops = 2.0 * n ** 3
    base = statistics.median(times["torch"])
    print("| contestant | median ms | TFLOPS | speedup over torch.matmul |")
    print("|---|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        label = "torch.matmul (TF32 off)" if name == "torch" else f"fastmm algo={name}"
        print(f"| {label} | {median * 1e3:.1f} | {flops / median / 1e12:.1f} | {base / median:.3f}× |")


if __name__ == "__main__":
    main()
