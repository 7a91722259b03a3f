"""fastmm: fast, verified matrix multiplication on CPUs and NVIDIA GPUs.

numpy arrays in and out, with numpy's ``matmul`` shapes and types::

    import numpy as np, fastmm
    a, b = np.random.rand(2000, 3000), np.random.rand(3000, 1000)
    c = fastmm.matmul(a, b)               # a @ b
    fastmm.gemm(2.0, a, b, 0.5, c)        # c <- 2 a@b + 0.5 c, in place
    fastmm.plan(a, b)["kernel"]           # what runs, without running it
    fastmm.verify(a, b, c)["ok"]          # a check of any product
    fastmm.set_num_threads(1)             # CPU threads of later products

Every product runs with the GIL released, and Ctrl-C stops a long one.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional, Union

import numpy as np

from ._native import (
    ALGORITHMS,
    GpuArray,
    __version__,
    gemm,
    get_num_threads,
    info,
    load,
    matmul as _native_matmul,
    matmul_timed,
    multiply_mapped as _multiply_mapped,
    plan,
    save,
    set_num_threads,
    verify,
)
from . import _threadpool

# threadpoolctl's limits apply to fastmm where threadpoolctl is installed.
_threadpool.register()

# The native product's types (float32, float64, int32, int64), by character: numpy's long long ("q") equals int64 ("l") but is a type of
# its own, whose scalars numpy's matmul returns as long long.
_NATIVE_CHARS = frozenset("fdil")


def matmul(a, b, out=None, *, algo="auto", device=None, threads=None, accuracy="native"):
    return _native_matmul(
        a, b, out=out, algo=algo, device=device, threads=threads, accuracy=accuracy
    ) if _takes(a, b, out) else _other_types(a, b, out, algo, device, threads, accuracy)


matmul.__doc__ = _native_matmul.__doc__


def _takes(a, b, out) -> bool:
    """Whether the native product takes these operands as they are: its
    four types (or anything that is not a numpy array: GPU tensors,
    sequences, which it converts or refuses itself) and an `out` of the
    result's type."""
    a_type = getattr(a, "dtype", None)
    b_type = getattr(b, "dtype", None)
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        if not (isinstance(a_type, np.dtype) and isinstance(b_type, np.dtype)):
            return True
    if a_type.char not in _NATIVE_CHARS or b_type.char not in _NATIVE_CHARS:
        return False
    return out is None or getattr(out, "dtype", None) == np.result_type(a_type, b_type)


def _integer_route(result: np.dtype):
    """The native type whose wrapping arithmetic gives `result`'s bits, and
    whether operands are reinterpreted (the same width: unsigned as signed)
    rather than widened: integer products are exact modulo 2^bits, so a
    wider or same-width signed product, cast back, is numpy's wrapped
    result."""
    route = np.dtype(np.int64) if result.itemsize == 8 else np.dtype(np.int32)
    return route, route.itemsize == result.itemsize


def _other_types(a, b, out, algo, device, threads, accuracy):
    """numpy's matmul for the types the native product does not take:
    bool and the narrower or unsigned integers through its integer
    products (the same bits as numpy's wrapping arithmetic), results cast
    into `out` by numpy's "same_kind" rule; the types it does not
    accelerate (float16, long double, complex, object) by numpy itself,
    which computes them or raises numpy's exception."""
    if out is not None and not isinstance(out, np.ndarray):
        raise TypeError("out must be a numpy array (it is written in place)")
    a, b = np.asanyarray(a), np.asanyarray(b)
    try:
        result = np.result_type(a, b)
    except TypeError:
        result = np.dtype(object)  # no common type: numpy's matmul raises its own error
    if result.kind in "biu":
        if result.kind == "b":
            route, view = np.dtype(np.int64), False
        else:
            route, view = _integer_route(result)
        def as_route(x):
            x = x.astype(result, copy=False)
            return x.view(route) if view else x.astype(route)
        c = _native_matmul(
            as_route(a), as_route(b), algo=algo, device=device, threads=threads,
            accuracy=accuracy,
        )
        c = np.asarray(c)
        c = (c != 0) if result.kind == "b" else (c.view(result) if view else c.astype(result))
        c = c[()] if c.ndim == 0 else c
    elif result.char in _NATIVE_CHARS:
        c = _native_matmul(
            a.astype(result, copy=False), b.astype(result, copy=False), algo=algo,
            device=device, threads=threads, accuracy=accuracy,
        )
    else:
        if algo != "auto" or device not in (None, "cpu"):
            raise TypeError(
                f"fastmm computes {result} products with numpy's matmul, on the CPU: "
                f"algo={algo!r} and device={device!r} do not apply (fastmm accelerates "
                "float32, float64, int32 and int64, and the narrower integers and bool)"
            )
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if out is None:
        return c
    if not np.can_cast(result, out.dtype, casting="same_kind"):
        raise TypeError(
            f"Cannot cast ufunc 'matmul' output from {result!r} to {out.dtype!r} "
            "with casting rule 'same_kind'"
        )
    if np.shape(c) != out.shape:
        raise ValueError(
            f"non-broadcastable output operand with shape {out.shape} doesn't match "
            f"the broadcast shape {np.shape(c)}"
        )
    np.copyto(out, c, casting="same_kind")
    return out


__all__ = [
    "ALGORITHMS",
    "GpuArray",
    "__version__",
    "gemm",
    "get_num_threads",
    "info",
    "load",
    "matmul",
    "matmul_timed",
    "multiply_files",
    "plan",
    "save",
    "set_num_threads",
    "verify",
]

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(size: Union[int, str]) -> int:
    """A byte count: an int, or text such as "512M" or "8G" (binary units)."""
    if isinstance(size, int):
        if size < 1:
            raise ValueError(f"max_memory={size}: a budget of at least 1 byte is needed")
        return size
    text = str(size).strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in _UNITS and text[-1:] else ""
    number = text[: len(text) - len(unit)]
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"max_memory={size!r} is not a size such as 512M or 8G") from None
    if value < 1:
        raise ValueError(f"max_memory={size!r}: a budget of at least 1 byte is needed")
    return int(value)


def _available_memory() -> Optional[int]:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def multiply_files(
    a_path: Union[str, "os.PathLike[str]"],
    b_path: Union[str, "os.PathLike[str]"],
    out_path: Union[str, "os.PathLike[str]"],
    *,
    algo: str = "auto",
    device: str = "cpu",
    threads: Optional[int] = None,
    dtype: Optional[str] = None,
    check: bool = False,
    max_memory: Union[int, str, None] = None,
    format: Optional[str] = None,
    out_format: Optional[str] = None,
    accuracy: str = "native",
) -> Dict[str, Any]:
    """C = A·B from matrix files into a matrix file, as ``fastmm multiply``.

    The inputs are .npy, Matrix Market, CSV/TSV/text or raw files (see
    :func:`load`); the output's extension (or ``out_format``) picks its
    format, and it is written whole or not at all. Two 2-D .npy inputs
    whose A, B and C exceed ``max_memory`` (default: the memory available)
    are multiplied out of core: mapped, with C computed block by block and
    written through a map. ``check`` verifies C (every block out of core)
    and writes nothing if it fails. Returns a report: the shape, type,
    seconds, and the check's outcome.
    """
    a_path, b_path, out_path = os.fspath(a_path), os.fspath(b_path), os.fspath(out_path)
    budget = _bytes(max_memory) if max_memory is not None else _available_memory()
    if a_path.endswith(".npy") and b_path.endswith(".npy") and format is None:
        a_map = np.load(a_path, mmap_mode="r")
        b_map = np.load(b_path, mmap_mode="r")
        if a_map.ndim == 2 and b_map.ndim == 2 and out_path.endswith(".npy"):
            (m, k), (_, n) = a_map.shape, b_map.shape
            item = np.dtype(dtype).itemsize if dtype else np.result_type(a_map, b_map).itemsize
            total = (m * k + k * n + m * n) * item
            del a_map, b_map
            if budget is not None and total > budget:
                return _multiply_mapped(
                    a_path, b_path, out_path, algo=algo, device=device,
                    threads=threads, dtype=dtype, check=check, budget=budget,
                    accuracy=accuracy,
                )
        else:
            del a_map, b_map
    start = time.perf_counter()
    a = load(a_path, format=format)
    b = load(b_path, format=format)
    if dtype is not None:
        a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    read = time.perf_counter() - start
    start = time.perf_counter()
    c = matmul(a, b, algo=algo, device=device, threads=threads, accuracy=accuracy)
    seconds = time.perf_counter() - start
    report: Dict[str, Any] = {
        "shape": (a.shape[0] if a.ndim == 2 else 1, a.shape[-1], b.shape[-1] if b.ndim == 2 else 1),
        "dtype": str(np.asarray(c).dtype),
        "out_of_core": False,
        "seconds": seconds,
        "read_seconds": read,
    }
    if check:
        growth = plan(
            a, b, algo=algo, device=device, threads=threads, accuracy=accuracy
        )["error_growth"]
        verdict = verify(a, b, c, growth=growth)
        report.update(verdict)
        if not verdict["ok"]:
            raise ArithmeticError(
                f"C failed verification ({verdict['method']} check, "
                f"{verdict['bound_ratio']:.2e} of the bound); {out_path} was not written"
            )
    save(out_path, c, format=out_format)
    return report
