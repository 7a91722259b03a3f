"""numpy's matmul shape rules as the torch operator allocates its result
by them (fastmm._shapes, no torch needed): against numpy itself."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fastmm._shapes import result_shape

dims = st.integers(min_value=0, max_value=4)


@st.composite
def operand_shapes(draw):
    """Two shapes of 1 to 4 dimensions, batches often broadcastable."""
    k = draw(dims)
    rank_a, rank_b = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = draw(st.lists(st.integers(0, 3), min_size=2, max_size=2))
    def shape(rank, last_two):
        if rank == 1:
            return [k]
        lead = [draw(st.sampled_from([1, batch[i % 2]])) for i in range(rank - 2)]
        return lead + last_two
    a = shape(rank_a, [draw(dims), k])
    b = shape(rank_b, [k, draw(dims)])
    if draw(st.booleans()) and len(b) > 1:
        b[-2] = draw(dims)  # inner dimensions that may not match
    return a, b


@settings(max_examples=300, deadline=None)
@given(shapes=operand_shapes())
def test_result_shape_is_numpys(shapes):
    a, b = shapes
    try:
        expected = np.matmul(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        with pytest.raises(RuntimeError):
            result_shape(a, b)
        return
    assert tuple(result_shape(a, b)) == expected


def test_scalars_are_refused():
    with pytest.raises(RuntimeError, match="scalar"):
        result_shape([], [3])
