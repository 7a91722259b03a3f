"""Shared helpers: the reference product and its tolerance."""

import numpy as np
import pytest

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def random(shape, dtype, rng, low=-50, high=50):
    """Random operands: integers small enough that float results are
    comparable, and spread enough that a wrong element shows."""
    if np.issubdtype(dtype, np.integer):
        return rng.integers(low, high, size=shape, dtype=dtype)
    return (rng.standard_normal(shape)).astype(dtype)


def assert_product(c, a, b, growth=1.0):
    """c == a @ b: exactly for integers (numpy wraps as fastmm does),
    within the componentwise bound k·u·|a||b| (times `growth`) for floats."""
    a, b = np.asarray(a), np.asarray(b)
    ref = np.matmul(a, b)
    c = np.asarray(c)
    assert c.shape == ref.shape, (c.shape, ref.shape)
    assert c.dtype == ref.dtype, (c.dtype, ref.dtype)
    if np.issubdtype(ref.dtype, np.integer):
        np.testing.assert_array_equal(c, ref)
        return
    k = a.shape[-1]
    u = np.finfo(ref.dtype).eps / 2
    bound = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    tolerance = growth * (k + 2) * u * bound + np.finfo(ref.dtype).tiny
    error = np.abs(c.astype(np.float64) - ref.astype(np.float64))
    assert np.all(error <= tolerance), f"worst error {np.max(error / tolerance)} of the bound"


@pytest.fixture
def rng():
    return np.random.default_rng(20261126)
