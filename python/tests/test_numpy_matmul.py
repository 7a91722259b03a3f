"""numpy's own tests of matmul (MatmulCommon and TestMatmul, from the
installed numpy's test module) run against fastmm.matmul, with numpy's
types string: every type numpy's matmul takes."""

import numpy as np
import pytest

import fastmm

multiarray = pytest.importorskip(
    "numpy._core.tests.test_multiarray", reason="this numpy ships without its tests"
)


class TestFastmmMatmul(multiarray.TestMatmul):
    matmul = staticmethod(fastmm.matmul)


INTEGER_TYPES = [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64, np.longlong]


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (17, 64, 9), (2, 3, 33, 4)], ids=str)
def test_narrow_and_unsigned_integers_wrap_as_numpys(dtype, shape):
    # Values at the type's extremes, so that every product and sum wraps:
    # the native route computes them modulo 2^32 or 2^64, whose low bits
    # are numpy's.
    rng = np.random.default_rng(sum(shape))
    info = np.iinfo(dtype)
    *batch, m, k, n = shape if len(shape) == 4 else (*shape[:0], *shape)
    a = rng.integers(info.min, info.max, size=(*batch, m, k), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, size=(k, n), dtype=dtype, endpoint=True)
    mine, numpys = fastmm.matmul(a, b), np.matmul(a, b)
    assert mine.dtype == numpys.dtype and type(mine) is type(numpys)
    np.testing.assert_array_equal(mine, numpys)
    out = np.full(numpys.shape, 7, dtype=dtype)
    assert fastmm.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, numpys)


@pytest.mark.parametrize("k", [0, 1, 7, 300])
def test_bool_is_or_of_ands(k):
    rng = np.random.default_rng(k)
    a, b = rng.random((6, k)) < 0.1, rng.random((k, 5)) < 0.1
    np.testing.assert_array_equal(fastmm.matmul(a, b), np.matmul(a, b))
    assert fastmm.matmul(a, b).dtype == np.bool_
    v = a[0]
    assert type(fastmm.matmul(v, v)) is np.bool_ and fastmm.matmul(v, v) == np.matmul(v, v)


def test_mixed_types_promote_as_numpy():
    rng = np.random.default_rng(5)
    a = rng.integers(-100, 100, (4, 6)).astype(np.int8)
    for other in [np.float32, np.float64, np.uint8, np.int16, np.uint64, np.float16]:
        b = rng.integers(0, 100, (6, 3)).astype(other)
        mine, numpys = fastmm.matmul(a, b), np.matmul(a, b)
        assert mine.dtype == numpys.dtype, other
        np.testing.assert_array_equal(mine, numpys)
