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

import atexit
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
    matmul,
    matmul_timed,
    multiply_mapped as _multiply_mapped,
    plan,
    save,
    set_num_threads,
    verify,
)
from ._native import close_machines as _close_machines
from . import _threadpool

# Teams and the MPI job (device="mpi") close at exit, on the main thread:
# a rank that leaves without ending MPI fails the whole mpirun.
atexit.register(_close_machines)

# threadpoolctl's limits apply to fastmm where threadpoolctl is installed.
_threadpool.register()

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


def _verify_complex(a: Any, b: Any, c: Any, **how: Any) -> Dict[str, Any]:
    """``verify`` of a complex product through its real embedding,
    [Aᵣ −Aᵢ; Aᵢ Aᵣ]·[Bᵣ; Bᵢ] = [Cᵣ; Cᵢ], within the classical complex bound
    (four times it at the relaxed levels, whose 3M imaginary part is
    bounded by (|Aᵣ|+|Aᵢ|)(|Bᵣ|+|Bᵢ|): Higham §23.2.4), as ``fastmm
    multiply --check``."""
    a2 = np.atleast_2d(a)
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    part = np.result_type(a2.real, b2.real)
    ar, ai = a2.real.astype(part), np.imag(a2).astype(part)
    br, bi = b2.real.astype(part), np.imag(b2).astype(part)
    c2 = c.reshape(ar.shape[0], br.shape[1])
    embedded_a = np.block([[ar, -ai], [ai, ar]])
    embedded_b = np.vstack([br, bi])
    embedded_c = np.vstack([c2.real, c2.imag]).astype(part)
    growth = plan(ar, br, **how)["error_growth"]
    if how.get("accuracy", "native") != "native":
        growth *= 4
    return verify(embedded_a, embedded_b, embedded_c, growth=growth)


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
        # Complex matrices are read whole: the products by parts take real ones.
        real = not (np.iscomplexobj(a_map) or np.iscomplexobj(b_map) or np.dtype(dtype or "f8").kind == "c")
        if real and a_map.ndim == 2 and b_map.ndim == 2 and out_path.endswith(".npy"):
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
        if np.iscomplexobj(c):
            verdict = _verify_complex(a, b, c, algo=algo, device=device, threads=threads, accuracy=accuracy)
        else:
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


def _mapped(name: str) -> Optional[str]:
    """The path of the first object mapped into this process whose file
    name is ``name``, or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if path.endswith("/" + name):
                    return path
    except OSError:
        pass
    return None


def _counts(name: str, counters) -> Optional[tuple]:
    """The path of the library ``name`` among this process's mappings
    (preloaded, linked, or loaded as the system's libblas.so.3 by an
    extension module, whose libraries stay out of the global scope: it is
    opened by path, and an open of a loaded library returns that library)
    and the values of its C counters ``counters``; None where it is not
    loaded or lacks them."""
    import ctypes

    library = _mapped(name)
    if library is None:
        return None
    try:
        loaded = ctypes.CDLL(library)
        functions = [getattr(loaded, counter) for counter in counters]
    except (AttributeError, OSError):
        return None
    values = []
    for function in functions:
        # size_t and uint64_t alike on the platforms the libraries build for.
        function.restype = ctypes.c_uint64
        values.append(int(function()))
    return library, tuple(values)


def cublas_status() -> Dict[str, Any]:
    """Whether this process's cuBLAS matrix products run on fastmm.

    They do where ``libfastmm_cublas`` is preloaded (``fastmm exec --cublas
    -- python script.py``, or ``LD_PRELOAD``): torch's and CuPy's GEMM
    calls then reach it, and it runs each on fastmm where fastmm's plan is
    faster at the accuracy level (``FASTMM_ACCURACY``, default ``native``),
    else hands it to cuBLAS unchanged. Returns ``{"interposed": bool,
    "library": path or None, "taken": int, "declined": int}`` — the GEMM
    calls of this process that fastmm ran, and those that went to cuBLAS
    (``FASTMM_CUBLAS_LOG=1`` says why, call by call).
    """
    counts = _counts("libfastmm_cublas.so", ("fastmm_cublas_taken", "fastmm_cublas_declined"))
    if counts is None:
        return {"interposed": False, "library": None, "taken": 0, "declined": 0}
    library, (taken, declined) = counts
    return {"interposed": True, "library": library, "taken": taken, "declined": declined}


def blas_status() -> Dict[str, Any]:
    """Whether this process's BLAS matrix products run on fastmm.

    They do when ``libfastmm_blas`` is preloaded (``fastmm exec -- python
    script.py``, or ``LD_PRELOAD``) or linked: numpy's ``a @ b`` then calls
    it instead of numpy's own OpenBLAS. Returns ``{"numpy": bool,
    "library": path or None, "products": int, "forwarded": int}`` —
    ``products`` counts the products the library has run in this process,
    ``forwarded`` the other BLAS routines it hands to the BLAS it stands in
    for (each is resolved at its first call; asking finds them all, which
    opens that BLAS if no call has). torch's CPU products
    use the MKL or OpenBLAS built into torch's own libraries and are not
    reached this way; ``fastmm.torch`` is the way there.
    """
    counts = _counts("libfastmm_blas.so", ("fastmm_blas_products", "fastmm_blas_forwarded"))
    if counts is None:
        return {"numpy": False, "library": None, "products": 0, "forwarded": 0}
    library, (products, forwarded) = counts
    return {"numpy": True, "library": library, "products": products, "forwarded": forwarded}
