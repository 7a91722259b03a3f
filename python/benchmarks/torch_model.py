"""fastmm.torch in a model, against torch on the same GPU in one process.

    python python/benchmarks/torch_model.py [--width 8192] [--batch 8192]
        [--steps 100] [--timed 10] [--bmm 64x2048] [--rounds 10] [--queue 8]
        [--algo auto]

Two targets of the torch operator, float32 with TF32 off in torch (IEEE
float32 products, as fastmm's `native` level gives):

* **A training step**: an MLP of 4 Linear layers (width × width, ReLU
  between), batch × width inputs, MSE loss, SGD. The same initial weights
  in `torch.nn.Linear` and `fastmm.torch.Linear` (accuracy `native`); the
  step (forward, backward, update) timed to a synchronize, the two models'
  steps interleaved; the speedup is torch's median over fastmm's. Then
  each model trains `--steps` steps from the same start, and so does a
  float64 torch copy: the loss curves of the two float32 models are
  compared with each other and with the float64 one, whose distance from
  torch's float32 curve is the float32 noise.
* **Batched products**: `fastmm.torch.matmul` on a batch of float32
  products against `torch.bmm`, interleaved rounds, CUDA events around
  one call on an idle GPU (its launch latency counted) and around
  `--queue` calls queued back to back, as a model issues them (the host's
  work hidden behind the GPU's); the result checked against a float64
  product within the componentwise bound. `--algo` forces fastmm's
  algorithm for them (`auto` by default).
"""

import argparse
import copy
import statistics
import time

import torch

import fastmm
import fastmm.torch as ft


def mlp(width, layers, linear):
    modules = []
    for i in range(layers):
        modules.append(linear(width, width))
        if i + 1 < layers:
            modules.append(torch.nn.ReLU())
    return torch.nn.Sequential(*modules)


def as_fastmm(model):
    """The same model with fastmm.torch.Linear layers holding the same weights."""
    layers = []
    for module in model:
        if isinstance(module, torch.nn.Linear):
            ours = ft.Linear(module.in_features, module.out_features,
                             device=module.weight.device, dtype=module.weight.dtype)
            ours.load_state_dict(module.state_dict())
            layers.append(ours)
        else:
            layers.append(module)
    return torch.nn.Sequential(*layers)


def trainer(model, x, y, lr):
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def timed(step):
    torch.cuda.synchronize()
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def training(args):
    torch.manual_seed(0)
    width, batch = args.width, args.batch
    base = mlp(width, 4, torch.nn.Linear).cuda()
    x = torch.randn(batch, width, device="cuda")
    y = torch.randn(batch, width, device="cuda") * 0.1
    models = {"torch": copy.deepcopy(base), "fastmm": as_fastmm(copy.deepcopy(base))}
    steps = {name: trainer(model, x, y, args.lr) for name, model in models.items()}
    for step in steps.values():  # warm-up: kernels, workspaces, allocator
        for _ in range(2):
            step()
    times = {name: [] for name in steps}
    for _ in range(args.timed):
        for name, step in steps.items():
            times[name].append(timed(step))
    medians = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    print(f"training step, MLP 4×{width}, batch {batch}, float32, median of {args.timed} interleaved steps:")
    for name, ms in medians.items():
        print(f"  {name:7s} {ms:8.2f} ms  (runs {min(times[name]) * 1e3:.2f}–{max(times[name]) * 1e3:.2f})")
    print(f"  speedup {medians['torch'] / medians['fastmm']:.3f}×")

    # Loss curves from one start: float32 torch, float32 fastmm, float64 torch.
    curves = {}
    for name, model in [("torch", copy.deepcopy(base)),
                        ("fastmm", as_fastmm(copy.deepcopy(base))),
                        ("torch-f64", copy.deepcopy(base).double())]:
        xs, ys = (x.double(), y.double()) if name == "torch-f64" else (x, y)
        step = trainer(model, xs, ys, args.lr)
        curves[name] = torch.stack([step() for _ in range(args.steps)]).double().cpu()
        del model, step
    exact = curves["torch-f64"]
    rel = lambda c: float(((c - exact).abs() / exact.abs()).max())  # noqa: E731
    between = float(((curves["fastmm"] - curves["torch"]).abs() / curves["torch"].abs()).max())
    print(f"loss over {args.steps} steps: start {exact[0]:.6f}, end {exact[-1]:.6f} (float64)")
    print(f"  largest relative distance from float64: torch float32 {rel(curves['torch']):.2e}, "
          f"fastmm {rel(curves['fastmm']):.2e}; fastmm from torch float32 {between:.2e}")
    for i in (0, args.steps // 2, args.steps - 1):
        print(f"  step {i:3d}: torch {curves['torch'][i]:.7f}  fastmm {curves['fastmm'][i]:.7f}  "
              f"float64 {exact[i]:.7f}")


def batched(args):
    count, n = (int(v) for v in args.bmm.split("x"))
    g = torch.Generator(device="cuda").manual_seed(2)
    a = torch.randn(count, n, n, device="cuda", generator=g)
    b = torch.randn(count, n, n, device="cuda", generator=g)
    runs = {"torch.bmm": lambda: torch.bmm(a, b), "fastmm": lambda: ft.matmul(a, b, algo=args.algo)}
    for run in runs.values():
        run()
    times = {(name, q): [] for name in runs for q in (1, args.queue)}
    for _ in range(args.rounds):
        for name, run in runs.items():
            for q in (1, args.queue):
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(q):
                    run()
                end.record()
                end.synchronize()
                times[(name, q)].append(start.elapsed_time(end) / q)
    c = ft.matmul(a, b, algo=args.algo)
    sample = slice(0, count, max(1, count // 8))
    exact = a[sample].double() @ b[sample].double()
    bound = a[sample].double().abs() @ b[sample].double().abs()
    u = torch.finfo(torch.float32).eps / 2
    worst = float(((c[sample].double() - exact).abs() / ((n + 2) * u * bound)).max())
    # The batch's plan: a GPU batch runs as one strided batch.
    plan = fastmm.plan(tuple(a.shape), tuple(b.shape), device="cuda", dtype="float32",
                       algo=args.algo)
    medians = {key: statistics.median(t) for key, t in times.items()}
    tflops = lambda ms: 2 * count * n**3 / ms / 1e9  # noqa: E731
    print(f"batched: {count} float32 products of {n}³, median of {args.rounds} interleaved rounds "
          f"(fastmm runs {plan['algorithm']}: {plan['kernel']}):")
    for q in (1, args.queue):
        how = "one call, idle GPU" if q == 1 else f"{q} calls queued, per call"
        for name in runs:
            ms = medians[(name, q)]
            print(f"  {how:26s} {name:9s} {ms:8.3f} ms  {tflops(ms):6.1f} TFLOPS")
        print(f"  {how:26s} speedup {medians[('torch.bmm', q)] / medians[('fastmm', q)]:.4f}×")
    print(f"  worst error {worst:.2e} of the componentwise bound (every {max(1, count // 8)}th product)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--timed", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--bmm", default="64x2048")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--queue", type=int, default=8)
    parser.add_argument("--algo", default="auto", help="fastmm's algorithm for the batched products")
    parser.add_argument("--only", choices=["training", "batched"])
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, fastmm {fastmm.__version__}; TF32 off")
    if args.only in (None, "batched"):
        batched(args)
    if args.only in (None, "training"):
        training(args)


if __name__ == "__main__":
    main()
