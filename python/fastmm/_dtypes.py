"""numpy's matmul rules for the arrays the native product does not take
as they are: other dtypes, and an `out` of another dtype. The native
`fastmm.matmul` calls `other_types` for them (and only for them), so the
common call pays nothing for it."""

from __future__ import annotations

import numpy as np

from . import _native
from ._shapes import result_shape

# The native product's types (float32, float64, int32, int64), by
# character: numpy's long long ("q") equals int64 ("l") but is a type of
# its own, whose scalars numpy's matmul returns as long long.
_NATIVE_CHARS = frozenset("fdil")


def _integer_route(result: np.dtype):
    """The native type whose wrapping arithmetic gives `result`'s bits, and
    whether operands are reinterpreted (the same width: unsigned as signed)
    rather than widened: integer products are exact modulo 2^bits, so a
    wider or same-width signed product, cast back, is numpy's wrapped
    result."""
    route = np.dtype(np.int64) if result.itemsize == 8 else np.dtype(np.int32)
    return route, route.itemsize == result.itemsize


def _complex(a, b, result, algo, device, threads, accuracy):
    """A complex64 or complex128 product by fastmm's complex products
    (`fastmm.complex` in the library): the classical form, four real
    products, at `native`; Gauss's three at a relaxed level."""
    try:
        shape = result_shape(a.shape, b.shape)
    except RuntimeError as error:
        raise ValueError(str(error)) from None

    def ready(x):
        x = x.astype(result, copy=False)
        if x.flags.aligned and all(s >= 0 and s % x.itemsize == 0 for s in x.strides):
            return x
        return np.ascontiguousarray(x)

    c = np.empty(shape, dtype=result)
    form = _native.complex_matmul(
        ready(a), ready(b), c, algo=algo, device=device or "cpu", threads=threads,
        accuracy=accuracy,
    )
    if form is None:
        return None  # an MPI job's other ranks: the product is rank 0's
    return c[()] if c.ndim == 0 else c


def other_types(a, b, out, algo, device, threads, accuracy):
    """numpy's matmul for the types the native product does not take:
    bool and the narrower or unsigned integers through its integer
    products (the same bits as numpy's wrapping arithmetic), complex64 and
    complex128 through its complex products, results cast into `out` by
    numpy's "same_kind" rule; the types it does not accelerate (float16,
    long double, complex long double, object) by numpy itself, which
    computes them or raises numpy's exception."""
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
        c = _native.matmul(
            as_route(a), as_route(b), algo=algo, device=device, threads=threads,
            accuracy=accuracy,
        )
        if c is None:
            return None  # an MPI job's other ranks: the product is rank 0's
        c = np.asarray(c)
        c = (c != 0) if result.kind == "b" else (c.view(result) if view else c.astype(result))
        c = c[()] if c.ndim == 0 else c
    elif result.char in "FD":
        c = _complex(a, b, result, algo, device, threads, accuracy)
    elif result.char in _NATIVE_CHARS:
        c = _native.matmul(
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
    if out is None or c is None:
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
