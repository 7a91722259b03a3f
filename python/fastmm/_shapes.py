"""numpy's matmul shape rules, for front ends that allocate the result
before the product (the torch operator): no torch and no numpy needed."""

from __future__ import annotations

from typing import List, Sequence


def result_shape(a: Sequence[int], b: Sequence[int]) -> List[int]:
    """The shape of ``a @ b`` for operands of shapes ``a`` and ``b`` by
    numpy's (and torch's) matmul rules: a 1-D ``a`` is a row and a 1-D
    ``b`` a column, the dimension each adds dropped from the result;
    dimensions before the last two are a batch, broadcast. Raises
    RuntimeError, with fastmm's message, where they do not multiply."""
    a, b = list(a), list(b)
    if not a or not b:
        raise RuntimeError("matmul: both operands need at least one dimension, not a scalar")
    m, k = (1, a[0]) if len(a) == 1 else (a[-2], a[-1])
    k2, n = (b[0], 1) if len(b) == 1 else (b[-2], b[-1])
    if k != k2:
        raise RuntimeError(
            f"matmul: a is {m}×{k} and b is {k2}×{n}; a's columns must equal b's rows"
        )
    a_batch, b_batch = a[:-2], b[:-2]
    rank = max(len(a_batch), len(b_batch))
    padded_a = [1] * (rank - len(a_batch)) + a_batch
    padded_b = [1] * (rank - len(b_batch)) + b_batch
    shape = []
    for x, y in zip(padded_a, padded_b):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(
                f"matmul: the batch dimensions {a_batch} of a and {b_batch} of b do not broadcast"
            )
        shape.append(y if x == 1 else x)
    if len(a) > 1:
        shape.append(m)
    if len(b) > 1:
        shape.append(n)
    return shape
