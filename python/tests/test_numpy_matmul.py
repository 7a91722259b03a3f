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


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("accuracy", ["native", "bound"])
@pytest.mark.parametrize(
    "shapes",
    [((1, 1), (1, 1)), ((5, 7), (7, 3)), ((7,), (7, 3)), ((5, 7), (7,)), ((7,), (7,)),
     ((3, 33, 17), (17, 65)), ((2, 1, 9, 8), (3, 8, 4)), ((0, 4), (4, 3)), ((4, 0), (0, 3))],
    ids=str,
)
def test_complex_gaussian_integers_are_exact(dtype, accuracy, shapes):
    # Small Gaussian integers: every real product and sum is exact in both
    # types, so both forms (4M at native, 3M relaxed) must equal numpy.
    rng = np.random.default_rng(len(str(shapes)))
    a_shape, b_shape = shapes
    a = (rng.integers(-8, 9, a_shape) + 1j * rng.integers(-8, 9, a_shape)).astype(dtype)
    b = (rng.integers(-8, 9, b_shape) + 1j * rng.integers(-8, 9, b_shape)).astype(dtype)
    mine, numpys = fastmm.matmul(a, b, accuracy=accuracy), np.matmul(a, b)
    assert mine.dtype == numpys.dtype and type(mine) is type(numpys)
    np.testing.assert_array_equal(mine, numpys)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_floats_within_the_complex_bound(dtype):
    # The classical form's promise: each part within γ·(|Ar||Br| + |Ai||Bi|)
    # (resp. |Ar||Bi| + |Ai||Br|), as for numpy's own zgemm.
    rng = np.random.default_rng(9)
    m, k, n = 40, 300, 30
    a = (rng.standard_normal((m, k)) + 1j * rng.standard_normal((m, k))).astype(dtype)
    b = (rng.standard_normal((k, n)) + 1j * rng.standard_normal((k, n))).astype(dtype)
    a[:, ::2] *= 1e6  # wide exponents across the depth
    c = fastmm.matmul(a, b)
    A, B = a.astype(np.complex256), b.astype(np.complex256)
    exact = A @ B
    u = np.finfo(np.dtype(dtype).char.lower() == "f" and np.float32 or np.float64).eps / 2
    ar, ai, br, bi = (np.abs(x).astype(np.float64) for x in (A.real, A.imag, B.real, B.imag))
    bound_re = (k + 2) * u * (ar @ br + ai @ bi)
    bound_im = (k + 2) * u * (ar @ bi + ai @ br)
    assert np.all(np.abs(c.real - exact.real) <= bound_re)
    assert np.all(np.abs(c.imag - exact.imag) <= bound_im)


def test_complex_views_and_out():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((20, 30)) + 1j * rng.standard_normal((20, 30))
    b = rng.standard_normal((30, 10)) + 1j * rng.standard_normal((30, 10))
    for x, y in [(a.T[:, :20].T, b), (a[::2], b[:, ::3]), (np.asfortranarray(a), b.conj())]:
        np.testing.assert_allclose(fastmm.matmul(x, y), np.matmul(x, y), rtol=1e-12, atol=1e-12)
    out = np.zeros((20, 10), np.complex128)
    assert fastmm.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12, atol=1e-12)
    with pytest.raises(TypeError, match="Cannot cast"):
        fastmm.matmul(a, b, out=np.zeros((20, 10)))
    mixed = fastmm.matmul(a.real.copy(), b)
    assert mixed.dtype == np.complex128
    np.testing.assert_allclose(mixed, a.real @ b, rtol=1e-12, atol=1e-12)


def test_gauss_form_is_relaxed_only_nearly_real_inputs_show_why():
    # Nearly real operands (imaginary parts 1e-8 of the real ones): Ci is
    # small, and so is the classical form's componentwise bound on it,
    # γ·(|Ar||Bi| + |Ai||Br|); Gauss's Ci = P3 - P1 - P2 subtracts products
    # of size |Ar||Br| and carries their rounding, far beyond that bound.
    # So the classical form runs at `native`, 3M only at a relaxed level.
    rng = np.random.default_rng(17)
    m, k, n = 24, 200, 16
    a = rng.standard_normal((m, k)) + 1e-8j * rng.standard_normal((m, k))
    b = rng.standard_normal((k, n)) + 1e-8j * rng.standard_normal((k, n))
    A, B = a.astype(np.complex256), b.astype(np.complex256)
    exact = A @ B
    u = np.finfo(np.float64).eps / 2
    abs_ = lambda x: np.abs(x).astype(np.float64)  # noqa: E731
    bound_im = (k + 2) * u * (abs_(A.real) @ abs_(B.imag) + abs_(A.imag) @ abs_(B.real))
    native = fastmm.matmul(a, b)
    assert np.all(np.abs(native.imag - exact.imag).astype(np.float64) <= bound_im)
    gauss = fastmm.matmul(a, b, accuracy="bound")
    ratio = np.max(np.abs(gauss.imag - exact.imag).astype(np.float64) / bound_im)
    assert ratio > 1e3, ratio
    # Normwise it is still a good product.
    scale = np.linalg.norm(abs_(A) @ abs_(B))
    assert np.linalg.norm((gauss - exact).astype(np.complex128)) <= 4 * (k + 2) * u * scale
