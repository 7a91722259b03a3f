"""The cuBLAS interposer, preloaded into a Python process: `fastmm.cublas_status()`
says whether the process's cuBLAS GEMM calls reach fastmm, and how many it
ran or handed to cuBLAS. Where torch has a GPU, an unchanged torch script's
products run under the interposer within the native product's bound."""

import json
import os
import subprocess
import sys

import pytest
from _built import built

def library():
    return built("libfastmm_cublas.so", "FASTMM_CUBLAS_LIB", "fastmm-cublas")


def run(code, preload=True, **env):
    extra = {"LD_PRELOAD": library()} if preload else {}
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FASTMM_CUBLAS_LOG")}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **extra, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


STATUS = "import json, fastmm; print(json.dumps(fastmm.cublas_status()))"


def test_cublas_status_tells_whether_the_interposer_is_loaded():
    plain = run(STATUS, preload=False)
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout) == {"interposed": False, "library": None, "taken": 0, "declined": 0}
    loaded = run(STATUS)
    assert loaded.returncode == 0, loaded.stderr
    status = json.loads(loaded.stdout)
    assert status["interposed"] and status["library"].endswith("/libfastmm_cublas.so")
    assert (status["taken"], status["declined"]) == (0, 0)


TORCH = """
import json, torch, fastmm
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(1)
out = {}
for dtype in (torch.float32, torch.float64, torch.complex128):
    for (m, k, n) in ((7, 5, 3), (300, 257, 129), (2048, 2048, 2048)):
        a = torch.randn(m, k, dtype=dtype, device="cuda", generator=g)
        b = torch.randn(k, n, dtype=dtype, device="cuda", generator=g)
        for x, y in ((a, b), (a.mT.contiguous().mT, b), (a, b.mT.contiguous().mT)):
            c = (x @ y).cpu().to(torch.complex128)
            ref = x.cpu().to(torch.complex128) @ y.cpu().to(torch.complex128)
            mag = x.cpu().abs().double() @ y.cpu().abs().double()
            u = torch.finfo(torch.float32 if dtype in (torch.float32,) else torch.float64).eps / 2
            bound = (2 if dtype.is_complex else 1) * (k + 2) * u * mag
            assert bool(((c - ref).abs() <= bound + 1e-300).all()), (dtype, m, k, n)
x = torch.randn(8, 300, 200, device="cuda", generator=g)
y = torch.randn(8, 200, 100, device="cuda", generator=g)
c = torch.bmm(x, y).cpu().double()
ref = x.cpu().double() @ y.cpu().double()
assert bool(((c - ref).abs() <= 202 * 2**-24 * (x.cpu().abs().double() @ y.cpu().abs().double())).all())
print(json.dumps(fastmm.cublas_status()))
"""


def test_an_unchanged_torch_script_under_the_interposer():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU for torch")
    ran = run(TORCH, FASTMM_CUBLAS_LOG="stderr")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    status = json.loads(ran.stdout.strip().splitlines()[-1])
    assert status["interposed"] and status["taken"] + status["declined"] > 0
    assert "summary:" in ran.stderr
