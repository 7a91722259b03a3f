"""Complex products on a GPU: fastmm.torch against cuBLAS, in one process.

    python python/benchmarks/complex_gpu.py [--n 16384] [--rounds 5]
        [--types c64,c128] [--sample-rows 2]

For each type, on CUDA tensors with uniform parts in [−1, 1):

* **cuBLAS** `cgemm`/`zgemm` (as `torch.matmul` calls them, TF32 off) and
  `cgemm3m`/`zgemm3m` (Gauss's three real products inside cuBLAS, called
  through ctypes on torch's stream);
* **fastmm** `native` (the parts split on the device and, where the
  emulated product serves at this size, multiplied by Karatsuba on their
  residues: three INT8 products per modulus) and `bound` (3M: three real
  products at the `bound` level); and `algo="cublas"`, cuBLAS's own
  complex products through fastmm (the same kernels as the peers' rows, to
  show what the operator's call costs beside them).

Times are CUDA events around one call, the median of `--rounds`
interleaved rounds; the speedup is cuBLAS's `cgemm`/`zgemm` median over
each row's. Errors are relative Frobenius errors against a reference: for
complex64 the complex128 product of the same inputs (zgemm), for
complex128 `--sample-rows` rows of C computed on the host in long double
(numpy's 80-bit extended precision).
"""

import argparse
import ctypes
import statistics

import numpy as np
import torch

import fastmm.torch as ft


class _Complex64(ctypes.Structure):
    _fields_ = [("re", ctypes.c_float), ("im", ctypes.c_float)]


class _Complex128(ctypes.Structure):
    _fields_ = [("re", ctypes.c_double), ("im", ctypes.c_double)]


class Gemm3m:
    """cuBLAS's cgemm3m and zgemm3m on torch's current stream."""

    def __init__(self):
        for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise OSError("libcublas not found")
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed with status {status}")

    def __call__(self, a, b):
        (m, k), n = a.shape, b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(self.lib.cublasSetStream_v2(self.handle, stream), "cublasSetStream")
        scalar, call = {
            torch.complex64: (_Complex64, self.lib.cublasCgemm3m),
            torch.complex128: (_Complex128, self.lib.cublasZgemm3m),
        }[a.dtype]
        one, zero = scalar(1, 0), scalar(0, 0)
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
        # Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first, n × m.
        self._check(
            call(self.handle, 0, 0, n, m, k, ctypes.byref(one), ptr(b), n, ptr(a), k,
                 ctypes.byref(zero), ptr(c), n),
            call.__name__,
        )
        return c


def error_against(c, reference, rows=None):
    c = c[rows] if rows is not None else c
    diff = (c.to(reference.dtype) - reference)
    return float(torch.linalg.norm(diff) / torch.linalg.norm(reference))


def long_double_rows(a, b, rows):
    """Rows of A·B in numpy's long double, from the parts."""
    ar = a[rows].real.cpu().numpy().astype(np.longdouble)
    ai = a[rows].imag.cpu().numpy().astype(np.longdouble)
    br = b.real.cpu().numpy().astype(np.longdouble)
    bi = b.imag.cpu().numpy().astype(np.longdouble)
    re = ar @ br - ai @ bi
    im = ar @ bi + ai @ br
    return re, im


def long_double_error(c, reference, rows):
    re, im = reference
    cr = c[rows].real.cpu().numpy().astype(np.longdouble)
    ci = c[rows].imag.cpu().numpy().astype(np.longdouble)
    num = np.sqrt(np.sum((cr - re) ** 2 + (ci - im) ** 2))
    den = np.sqrt(np.sum(re ** 2 + im ** 2))
    return float(num / den)


def run(dtype, n, rounds, sample_rows, gemm3m):
    gen = torch.Generator(device="cuda").manual_seed(3)
    part = torch.float32 if dtype == torch.complex64 else torch.float64
    uniform = lambda: torch.rand(n, n, dtype=part, device="cuda", generator=gen) * 2 - 1  # noqa: E731
    a = torch.complex(uniform(), uniform())
    b = torch.complex(uniform(), uniform())
    name = {torch.complex64: ("c64", "cgemm"), torch.complex128: ("c128", "zgemm")}[dtype]
    runs = {
        f"cuBLAS {name[1]}": lambda: torch.matmul(a, b),
        f"cuBLAS {name[1]}3m": lambda: gemm3m(a, b),
        "fastmm native (Karatsuba)": lambda: ft.matmul(a, b),
        "fastmm bound (3M)": lambda: ft.matmul(a, b, accuracy="bound"),
        f"fastmm cublas native ({name[1]})": lambda: ft.matmul(a, b, algo="cublas"),
        f"fastmm cublas bound ({name[1]}3m)": lambda: ft.matmul(a, b, algo="cublas", accuracy="bound"),
    }
    results = {}
    for label, f in runs.items():
        results[label] = f()
    torch.cuda.synchronize()
    if dtype == torch.complex64:
        reference = torch.matmul(a.to(torch.complex128), b.to(torch.complex128))
        errors = {label: error_against(c, reference) for label, c in results.items()}
        del reference
    else:
        rows = torch.linspace(0, n - 1, sample_rows).long()
        reference = long_double_rows(a, b, rows)
        errors = {label: long_double_error(c, reference, rows) for label, c in results.items()}
    del results
    times = {label: [] for label in runs}
    for _ in range(rounds):
        for label, f in runs.items():
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            c = f()
            end.record()
            end.synchronize()
            times[label].append(start.elapsed_time(end))
            del c
    medians = {label: statistics.median(t) for label, t in times.items()}
    peer = medians[f"cuBLAS {name[1]}"]
    flops = 8 * n ** 3
    print(f"\n{name[0]}, n = {n}, median of {rounds} rounds; error: relative Frobenius "
          f"({'against complex128' if dtype == torch.complex64 else f'{sample_rows} rows against long double'})")
    print(f"| product | ms | TFLOPS (8n³) | vs {name[1]} | error |")
    print("|---|---|---|---|---|")
    for label, ms in medians.items():
        print(f"| {label} | {ms:.1f} | {flops / ms / 1e9:.1f} | {peer / ms:.3f}× | {errors[label]:.2e} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--types", default="c64,c128")
    parser.add_argument("--sample-rows", type=int, default=2)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; TF32 off")
    gemm3m = Gemm3m()
    for t in args.types.split(","):
        dtype = {"c64": torch.complex64, "c128": torch.complex128}[t.strip()]
        run(dtype, args.n, args.rounds, args.sample_rows, gemm3m)


if __name__ == "__main__":
    main()
