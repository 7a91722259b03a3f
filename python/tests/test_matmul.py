"""fastmm.matmul against numpy.matmul over a matrix of shapes, types and
layouts, with out= and numpy's 1-D and batched shapes."""

import itertools

import numpy as np
import pytest

import fastmm
from conftest import DTYPES, assert_product, random

# 0, 1, around the microkernel's tiles (8, 24, 48), primes, rectangles.
SIZES = [0, 1, 2, 7, 8, 9, 23, 25, 31, 47, 49, 97]
SHAPES = sorted(
    set(itertools.product([0, 1, 9, 31, 97], [0, 1, 8, 25, 47], [1, 7, 23, 49]))
    | {(n, n, n) for n in SIZES}
    | {(64, 64, 64), (130, 257, 67), (300, 5, 300), (3, 1000, 3)}
)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes_and_types(shape, dtype, rng):
    m, k, n = shape
    a, b = random((m, k), dtype, rng), random((k, n), dtype, rng)
    assert_product(fastmm.matmul(a, b), a, b)


def layouts(x):
    """The same matrix in many layouts: (name, view) pairs."""
    m, n = x.shape
    yield "C", np.ascontiguousarray(x)
    yield "F", np.asfortranarray(x)
    big = np.zeros((2 * m + 1, 3 * n + 2), dtype=x.dtype)
    big[1::2, 2::3] = x
    yield "strided", big[1::2, 2::3]
    yield "transposed", np.ascontiguousarray(x.T).T
    flipped = np.ascontiguousarray(x[::-1, ::-1])
    yield "negative strides", flipped[::-1, ::-1]
    raw = np.zeros(x.size * x.itemsize + 1, dtype=np.uint8)
    unaligned = raw[1:].view(x.dtype).reshape(x.shape)
    unaligned[...] = x
    yield "unaligned", unaligned
    yield "byte-swapped", x.astype(x.dtype.newbyteorder(">"))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_layouts(dtype, rng):
    a, b = random((37, 29), dtype, rng), random((29, 41), dtype, rng)
    for (name_a, va), (name_b, vb) in itertools.product(list(layouts(a)), list(layouts(b))):
        c = fastmm.matmul(va, vb)
        assert_product(c, a, b), (name_a, name_b)


def test_broadcast_operands(rng):
    # Zero strides (numpy's broadcast_to) are read in place.
    row = random((1, 40), np.float64, rng)
    a = np.broadcast_to(row, (30, 40))
    b = random((40, 20), np.float64, rng)
    assert_product(fastmm.matmul(a, b), a, b)
    assert_product(fastmm.matmul(b.T, a.T), b.T, a.T)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_vectors(dtype, rng):
    a, b, v, w = (
        random((13, 17), dtype, rng),
        random((17, 5), dtype, rng),
        random((17,), dtype, rng),
        random((13,), dtype, rng),
    )
    assert_product(fastmm.matmul(v, b), v, b)  # (k,) @ (k, n) -> (n,)
    assert_product(fastmm.matmul(a, v), a, v)  # (m, k) @ (k,) -> (m,)
    assert_product(fastmm.matmul(w, a), w, a)
    scalar = fastmm.matmul(v, v)  # (k,) @ (k,) -> scalar
    assert np.ndim(scalar) == 0 and type(scalar) is type(np.matmul(v, v))
    assert_product(np.asarray(scalar), v, v)
    assert_product(fastmm.matmul(v[:0], b[:0]), v[:0], b[:0])


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [
        ((4, 5, 6), (4, 6, 3)),
        ((4, 5, 6), (6, 3)),
        ((5, 6), (2, 6, 3)),
        ((2, 1, 5, 6), (3, 6, 2)),
        ((3, 5, 6), (6,)),
        ((6,), (2, 6, 3)),
        ((0, 5, 6), (6, 3)),
        ((2, 0, 6), (2, 6, 3)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.int32], ids=lambda d: np.dtype(d).name)
def test_batches(a_shape, b_shape, dtype, rng):
    a, b = random(a_shape, dtype, rng), random(b_shape, dtype, rng)
    assert_product(fastmm.matmul(a, b), a, b)
    # Batches of strided views too.
    if a.ndim >= 2:
        a2 = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
        assert_product(fastmm.matmul(a2, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_out(dtype, rng):
    a, b = random((33, 21), dtype, rng), random((21, 19), dtype, rng)
    poison = np.nan if np.issubdtype(dtype, np.floating) else -7
    for out in [
        np.full((33, 19), poison, dtype=dtype),
        np.asfortranarray(np.full((33, 19), poison, dtype=dtype)),
        np.full((66, 57), poison, dtype=dtype)[::2, ::3],
        np.full((33, 19), poison, dtype=dtype)[::-1],
    ]:
        result = fastmm.matmul(a, b, out=out)
        assert result is out
        assert_product(out, a, b)
    assert_product(fastmm.matmul(a, b), a, b)


def test_out_overlapping_an_operand(rng):
    # numpy computes as if into a temporary; so does fastmm.
    a = random((24, 24), np.float64, rng)
    b = random((24, 24), np.float64, rng)
    expected = a @ b
    fastmm.matmul(a, b, out=a)
    np.testing.assert_allclose(a, expected, rtol=1e-12, atol=1e-12)
    c = random((24, 24), np.float64, rng)
    expected = c @ c.T
    fastmm.matmul(c, c.T, out=c)
    np.testing.assert_allclose(c, expected, rtol=1e-12, atol=1e-12)


def test_integers_wrap_as_numpy(rng):
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        a = rng.integers(info.min // 2, info.max // 2, size=(20, 30), dtype=dtype)
        b = rng.integers(info.min // 2, info.max // 2, size=(30, 10), dtype=dtype)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(fastmm.matmul(a, b), np.matmul(a, b))


@pytest.mark.parametrize(
    "ta,tb,expected",
    [
        (np.float32, np.float64, np.float64),
        (np.int32, np.int64, np.int64),
        (np.int32, np.float32, np.float64),
        (np.int64, np.float64, np.float64),
    ],
)
def test_promotion(ta, tb, expected, rng):
    a, b = random((9, 8), ta, rng), random((8, 7), tb, rng)
    c = fastmm.matmul(a, b)
    assert c.dtype == expected == np.matmul(a, b).dtype
    assert_product(c, a.astype(expected), b.astype(expected))


def test_array_likes():
    c = fastmm.matmul([[1, 2], [3, 4]], [[5], [6]])
    np.testing.assert_array_equal(c, [[17], [39]])
    assert c.dtype == np.int64


def test_nan_and_inf_propagate_as_numpy():
    a = np.array([[1.0, np.inf], [np.nan, 2.0]])
    b = np.array([[1.0, 0.0], [2.0, 1.0]])
    np.testing.assert_array_equal(fastmm.matmul(a, b), a @ b)


@pytest.mark.parametrize("algo", ["auto", "packed", "tiled", "ikj", "naive", "parallel", "strassen", "winograd"])
def test_algorithms(algo, rng):
    a, b = random((70, 50), np.float64, rng), random((50, 60), np.float64, rng)
    assert_product(fastmm.matmul(a, b, algo=algo, threads=1), a, b)


def test_fast_algorithms_at_scale(rng):
    # A residual check at a size where the recursion applies.
    n = 1100
    a, b = random((n, n), np.float64, rng), random((n, n), np.float64, rng)
    for algo in ["strassen", "winograd"]:
        plan = fastmm.plan(a, b, algo=algo)
        c = fastmm.matmul(a, b, algo=algo)
        assert fastmm.verify(a, b, c, growth=plan["error_growth"])["ok"]
