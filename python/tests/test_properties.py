"""Hypothesis: random shapes, strides, transposes and types against numpy."""

import numpy as np
from hypothesis import given, settings, strategies as st

import fastmm
from conftest import DTYPES, assert_product


@st.composite
def operand(draw, rows, cols, dtype):
    """A rows×cols matrix in a random layout: a strided slice (steps of
    either sign) of a larger array, possibly stored transposed."""
    row_step = draw(st.sampled_from([1, 2, 3, -1, -2]))
    col_step = draw(st.sampled_from([1, 2, -1, -3]))
    transposed = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    base_shape = (rows * abs(row_step) + 1, cols * abs(col_step) + 1)
    if np.issubdtype(dtype, np.integer):
        base = rng.integers(-1000, 1000, size=base_shape).astype(dtype)
    else:
        base = rng.standard_normal(base_shape).astype(dtype)
    if transposed:
        base = np.ascontiguousarray(base.T).T
    view = base[:: row_step, :: col_step][:rows, :cols]
    assert view.shape == (rows, cols)
    return view


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_views(data):
    m, k, n = (data.draw(st.integers(0, 40)) for _ in range(3))
    dtype = data.draw(st.sampled_from(DTYPES))
    a = data.draw(operand(m, k, dtype))
    b = data.draw(operand(k, n, dtype))
    assert_product(fastmm.matmul(a, b), a, b)
    out = np.full((n, m), 7, dtype=dtype).T
    assert fastmm.matmul(a, b, out=out) is out
    assert_product(out, a, b)


@settings(max_examples=60, deadline=None)
@given(
    batch_a=st.lists(st.integers(1, 3), max_size=2),
    batch_b=st.lists(st.integers(1, 3), max_size=2),
    m=st.integers(1, 9),
    k=st.integers(0, 9),
    n=st.integers(1, 9),
    seed=st.integers(0, 1000),
)
def test_random_batches(batch_a, batch_b, m, k, n, seed):
    # Lengths of 1 broadcast against anything; other lengths must agree.
    rank = max(len(batch_a), len(batch_b))
    padded_a = [1] * (rank - len(batch_a)) + batch_a
    padded_b = [1] * (rank - len(batch_b)) + batch_b
    batch_b = [y if x == 1 or y == 1 else x for x, y in zip(padded_a, padded_b)][rank - len(batch_b):]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((*batch_a, m, k))
    b = rng.standard_normal((*batch_b, k, n))
    assert_product(fastmm.matmul(a, b), a, b)
