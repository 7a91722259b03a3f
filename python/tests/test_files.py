"""load, save and multiply_files, in core and out of core."""

import os

import numpy as np
import pytest

import fastmm
from conftest import assert_product, random


def test_load_and_save_round_trip(tmp_path, rng):
    for dtype in (np.float32, np.float64, np.int32, np.int64):
        x = random((13, 7), dtype, rng)
        for ext in ("npy", "csv", "txt", "mtx"):
            path = tmp_path / f"x_{np.dtype(dtype).name}.{ext}"
            fastmm.save(path, x)
            y = fastmm.load(path)
            if ext == "npy":
                assert y.dtype == x.dtype
            np.testing.assert_array_equal(y.astype(x.dtype), x)
    v = np.arange(5.0)
    fastmm.save(tmp_path / "v.npy", v)
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), v)
    assert fastmm.load(tmp_path / "v.npy").shape == (5,)
    np.savetxt(tmp_path / "numpy.txt", random((4, 3), np.float64, rng))
    assert fastmm.load(tmp_path / "numpy.txt").shape == (4, 3)


def test_save_refuses_three_dimensions(tmp_path):
    with pytest.raises(ValueError, match="2 dimensions"):
        fastmm.save(tmp_path / "x.npy", np.zeros((2, 2, 2)))
    assert not os.listdir(tmp_path)


def test_load_errors(tmp_path):
    with pytest.raises(OSError):
        fastmm.load(tmp_path / "missing.npy")
    (tmp_path / "bad.csv").write_text("1,2\n3,x\n")
    with pytest.raises(OSError, match="bad.csv"):
        fastmm.load(tmp_path / "bad.csv")


def test_multiply_files_in_core(tmp_path, rng):
    a, b = random((40, 30), np.float64, rng), random((30, 20), np.float32, rng)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    report = fastmm.multiply_files(tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.npy", check=True)
    assert report["ok"] and not report["out_of_core"] and report["dtype"] == "float64"
    assert_product(np.load(tmp_path / "c.npy"), a, b.astype(np.float64))
    np.savetxt(tmp_path / "a.csv", a, delimiter=",")
    fastmm.multiply_files(tmp_path / "a.csv", tmp_path / "b.npy", tmp_path / "c.csv")
    np.testing.assert_allclose(np.loadtxt(tmp_path / "c.csv", delimiter=","), a @ b, rtol=1e-12)
    v = random((30,), np.int64, rng)
    np.save(tmp_path / "v.npy", v)
    ai = random((40, 30), np.int64, rng)
    np.save(tmp_path / "ai.npy", ai)
    fastmm.multiply_files(tmp_path / "ai.npy", tmp_path / "v.npy", tmp_path / "cv.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "cv.npy"), ai @ v)


def test_multiply_files_out_of_core(tmp_path, rng):
    a, b = random((300, 200), np.float64, rng), random((200, 250), np.float64, rng)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b.astype(np.float32))
    report = fastmm.multiply_files(
        tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.npy", max_memory="256K", check=True
    )
    assert report["out_of_core"] and report["blocks"] > 1 and report["ok"]
    assert_product(np.load(tmp_path / "c.npy"), a, b.astype(np.float32).astype(np.float64))
    leftovers = [p for p in os.listdir(tmp_path) if p not in {"a.npy", "b.npy", "c.npy"}]
    assert leftovers == []
    with pytest.raises(ValueError, match="512M"):
        fastmm.multiply_files(tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.npy", max_memory="lots")


def test_multiply_files_refuses_mismatched_shapes(tmp_path, rng):
    np.save(tmp_path / "a.npy", random((4, 5), np.float64, rng))
    np.save(tmp_path / "b.npy", random((6, 7), np.float64, rng))
    with pytest.raises(ValueError, match="5 columns"):
        fastmm.multiply_files(tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.npy")
    assert not (tmp_path / "c.npy").exists()


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_load_save_and_multiply_files(tmp_path, rng, dtype):
    x = (random((6, 5), np.float64, rng) + 1j * random((6, 5), np.float64, rng)).astype(dtype)
    for ext in ("npy", "txt", "csv", "mtx"):
        path = tmp_path / f"x.{ext}"
        fastmm.save(path, x)
        y = fastmm.load(path, dtype="f32" if dtype == np.complex64 else None)
        assert np.iscomplexobj(y)
        np.testing.assert_array_equal(y.astype(dtype), x)
    np.savetxt(tmp_path / "numpy.txt", x)
    np.testing.assert_array_equal(fastmm.load(tmp_path / "numpy.txt").astype(dtype), x)
    fastmm.save(tmp_path / "v.npy", x[0])
    assert fastmm.load(tmp_path / "v.npy").shape == (5,)
    # Gaussian integers: exact at both levels.
    a = rng.integers(-50, 50, (23, 31)) + 1j * rng.integers(-50, 50, (23, 31))
    b = rng.integers(-50, 50, (31, 9)) + 1j * rng.integers(-50, 50, (31, 9))
    np.save(tmp_path / "a.npy", a.astype(dtype))
    np.savetxt(tmp_path / "b.txt", b)
    for accuracy in ("native", "bound"):
        report = fastmm.multiply_files(
            tmp_path / "a.npy", tmp_path / "b.txt", tmp_path / "c.npy", check=True,
            accuracy=accuracy, max_memory=1,
        )
        assert report["ok"]
        np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), a @ b)
