"""gemm, plan, info, verify, the errors, the GIL and Ctrl-C."""

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import fastmm
from conftest import DTYPES, assert_product, random


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_gemm(dtype, rng):
    a, b = random((31, 17), dtype, rng), random((17, 23), dtype, rng)
    c0 = random((31, 23), dtype, rng)
    for alpha, beta in [(1, 0), (2, 1), (-3, 2), (0, 5), (1, 1)]:
        c = c0.copy()
        fastmm.gemm(alpha, a, b, beta, c)
        expected = alpha * np.matmul(a, b) + beta * c0
        if np.issubdtype(dtype, np.integer):
            np.testing.assert_array_equal(c, expected.astype(dtype))
        else:
            scale = np.abs(alpha) * (np.abs(a) @ np.abs(b)) + np.abs(beta * c0)
            assert np.all(np.abs(c - expected) <= 20 * np.finfo(dtype).eps * (scale + 1))


def test_stream_is_for_gpu_operands_only(rng):
    # stream= orders a GPU product before a caller's stream; host arrays
    # have no stream to order, and are refused with the reason.
    a = random((4, 5), np.float64, rng)
    out = np.empty((4, 4))
    with pytest.raises(ValueError, match="GPU operands"):
        fastmm.matmul(a, a.T, out, stream=0)
    with pytest.raises(ValueError, match="GPU operands"):
        fastmm.matmul(a, a.T, stream=7)


def test_gemm_beta_zero_never_reads_c(rng):
    a, b = random((20, 10), np.float64, rng), random((10, 30), np.float64, rng)
    c = np.full((20, 30), np.nan)
    fastmm.gemm(1.0, a, b, 0.0, c)
    assert_product(c, a, b)


def test_gemm_strided_and_overlapping_c(rng):
    a, b = random((16, 16), np.float64, rng), random((16, 16), np.float64, rng)
    big = np.zeros((32, 48))
    c = big[::2, ::3]
    c[...] = 1.0
    fastmm.gemm(1.0, a, b, 2.0, c)
    np.testing.assert_allclose(c, a @ b + 2.0, rtol=1e-12, atol=1e-12)
    assert np.all(big[1::2] == 0)
    expected = 0.5 * (a @ b) + a
    fastmm.gemm(0.5, a, b, 1.0, a)  # c is a: computed as if into a temporary
    np.testing.assert_allclose(a, expected, rtol=1e-12, atol=1e-12)


def test_gemm_scalar_types(rng):
    a, b = random((4, 4), np.int32, rng), random((4, 4), np.int32, rng)
    c = np.zeros((4, 4), np.int32)
    with pytest.raises(TypeError, match="alpha must be an integer"):
        fastmm.gemm(1.5, a, b, 0, c)
    with pytest.raises(ValueError, match="does not fit"):
        fastmm.gemm(1 << 40, a, b, 0, c)
    with pytest.raises(TypeError, match="real number"):
        fastmm.gemm("x", a.astype(float), b.astype(float), 0.0, c.astype(float))


def test_errors(rng):
    a, b = random((3, 4), np.float64, rng), random((5, 6), np.float64, rng)
    with pytest.raises(ValueError, match="A has 4 columns but B has 5 rows"):
        fastmm.matmul(a, b)
    with pytest.raises(ValueError, match="scalar"):
        fastmm.matmul(np.float64(2.0), a)
    with pytest.raises(ValueError, match="do not broadcast"):
        fastmm.matmul(np.zeros((2, 3, 4)), np.zeros((3, 4, 5)))
    b = random((4, 6), np.float64, rng)
    with pytest.raises(ValueError, match="shape"):
        fastmm.matmul(a, b, out=np.zeros((3, 5)))
    # out= follows numpy's "same_kind" casting: float64 into float32 is
    # written, into int32 refused with numpy's TypeError.
    narrow = np.zeros((3, 6), np.float32)
    assert fastmm.matmul(a, b, out=narrow) is narrow
    np.testing.assert_array_equal(narrow, (a @ b).astype(np.float32))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'matmul' output"):
        fastmm.matmul(a, b, out=np.zeros((3, 6), np.int32))
    with pytest.raises(TypeError, match="numpy array"):
        fastmm.matmul(a, b, out=[[0.0] * 6] * 3)
    read_only = np.zeros((3, 6))
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastmm.matmul(a, b, out=read_only)
    # Every type numpy's matmul takes gives numpy's result.
    for other in [np.complex128, np.bool_, np.float16, np.uint8, object]:
        mine, numpys = fastmm.matmul(a.astype(other), b), np.matmul(a.astype(other), b)
        assert mine.dtype == numpys.dtype
        np.testing.assert_allclose(mine.astype(np.complex128), numpys.astype(np.complex128), rtol=1e-12)
    with pytest.raises(TypeError, match="do not apply"):
        fastmm.matmul(a.astype(np.float16), b.astype(np.float16), algo="winograd")
    with pytest.raises(ValueError, match="unknown algorithm"):
        fastmm.matmul(a, b, algo="fastest")
    with pytest.raises(ValueError, match="device"):
        fastmm.matmul(a, b, device="tpu")
    with pytest.raises(ValueError, match="at least 1"):
        fastmm.matmul(a, b, threads=0)
    with pytest.raises(ValueError, match="hardware threads"):
        fastmm.matmul(a, b, threads=100000)
    with pytest.raises(TypeError, match="does not support"):
        fastmm.matmul(a, b, algo="cublas")


def test_memory_error_before_allocating():
    # 2^21 × 2^21 float64 is 32 TiB: refused before any allocation.
    a = np.broadcast_to(np.float64(1.0), (1 << 21, 1))
    b = np.broadcast_to(np.float64(1.0), (1, 1 << 21))
    with pytest.raises(MemoryError, match="out of memory"):
        fastmm.matmul(a, b)


def gpu_count():
    try:
        return len(fastmm.info()["gpus"])
    except Exception:
        return 0


@pytest.mark.skipif(gpu_count() > 0, reason="this machine has a GPU")
def test_missing_gpu_is_a_runtime_error(rng):
    a = random((4, 4), np.float32, rng)
    with pytest.raises(RuntimeError, match="CUDA"):
        fastmm.matmul(a, a, device="cuda:7")


def test_device_lists_are_checked(rng):
    a = random((4, 4), np.float32, rng)
    for bad in ["cuda:0,0", "cuda:1,x", "gpu:all"]:
        with pytest.raises(ValueError, match="device"):
            fastmm.matmul(a, a, device=bad)


@pytest.mark.skipif(gpu_count() > 0, reason="this machine has a GPU")
def test_a_team_without_gpus_is_a_runtime_error(rng):
    a = random((4, 4), np.float32, rng)
    for team in ["cuda:all", "cuda:0,1"]:
        with pytest.raises(RuntimeError, match="CUDA"):
            fastmm.matmul(a, a, device=team)


def test_plan_and_info(rng):
    p = fastmm.plan((4096, 4096), (4096, 4096), algo="winograd", dtype="float64")
    assert p["algorithm"] == "winograd" and p["shape"] == (4096, 4096, 4096)
    assert p["fast"]["levels"] >= 1 and p["fast"]["workspace_bytes"] > 0
    assert p["error_growth"] > 1
    small = fastmm.plan(random((50, 40), np.float32, rng), random((40, 3), np.float32, rng), algo="strassen")
    assert small["falls_back_to"] == "packed" and small["dtype"] == "float32"
    assert fastmm.plan((7,), (3, 7, 2))["result_shape"] == (3, 2)
    report = fastmm.info()
    assert report["version"] == fastmm.__version__
    assert "packed" in report and "cpu" in report


def test_accuracy_levels(rng):
    # The default is native: on the CPU, packed at every size; a relaxed
    # level lets auto take Winograd's levels where they are faster.
    native = fastmm.plan((8192, 8192), (8192, 8192), dtype="float64")
    assert native["algorithm"] == "packed"
    assert native["accuracy"] == native["accuracy_asked"] == "native"
    relaxed = fastmm.plan((8192, 8192), (8192, 8192), dtype="float64", accuracy="bound")
    assert relaxed["algorithm"] == "winograd" and relaxed["accuracy"] == "bound"
    # An algorithm named runs as asked and says what it gives.
    naive = fastmm.plan((64, 64), (64, 64), algo="naive")
    assert naive["accuracy"] == "bound" and naive["accuracy_asked"] == "native"
    # bits:N is the emulated product's precision.
    a, b = random((30, 70), np.float64, rng), random((70, 20), np.float64, rng)
    c, timing = fastmm.matmul_timed(a, b, accuracy="bits:30")
    assert timing["emulation"]["bits"] == 30
    assert_product(c, a, b, growth=2.0**23)
    for level in ["native", "bound", "tf32", "bf16"]:
        assert_product(fastmm.matmul(a, b, accuracy=level), a, b)
    with pytest.raises(ValueError, match="accuracy"):
        fastmm.matmul(a, b, accuracy="exact")


def test_matmul_timed(rng):
    a, b = random((200, 150), np.float64, rng), random((150, 100), np.float64, rng)
    c, timing = fastmm.matmul_timed(a, b)
    assert_product(c, a, b)
    assert timing["compute_ms"] > 0 and timing["end_to_end_ms"] == timing["compute_ms"]
    assert timing["upload_ms"] is None and timing["host_copies"] is False


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_emulated(dtype, rng):
    # The reference twin on the CPU: within the bound, its route reported.
    a, b = random((37, 211), dtype, rng), random((211, 19), dtype, rng)
    c, timing = fastmm.matmul_timed(a, b, algo="emulated")
    assert fastmm.verify(a, b, c)["ok"]
    assert_product(c, a, b, growth=2.0)
    route = timing["emulation"]
    assert route["emulated"] == 1 and route["native"] == 0
    assert route["moduli"] >= 2 and route["bits"] >= 1
    # Entries from 1e-30 to 1e30: no row/column scaling certifies them, so
    # the product runs natively, and says so.
    wide = lambda shape: (rng.choice([-1, 1], shape) * 10.0 ** rng.uniform(-30, 30, shape)).astype(dtype)
    a, b = wide((20, 30)), wide((30, 10))
    c, timing = fastmm.matmul_timed(a, b, algo="emulated")
    assert fastmm.verify(a, b, c)["ok"]
    assert timing["emulation"]["emulated"] + timing["emulation"]["native"] == 1


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["int32", "int64"])
def test_emulated_integers(dtype, rng):
    # Byte planes: exact, wrapping as numpy's integer matmul does.
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (23, 41), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (41, 17), dtype=dtype, endpoint=True)
    c, timing = fastmm.matmul_timed(a, b, algo="emulated")
    np.testing.assert_array_equal(c, a @ b)
    route = timing["emulation"]
    assert route["emulated"] == 1 and route["bits"] == 8 * np.dtype(dtype).itemsize


def test_verify(rng):
    a, b = random((60, 50), np.float64, rng), random((50, 40), np.float64, rng)
    c = fastmm.matmul(a, b)
    v = fastmm.verify(a, b, c)
    assert v["ok"] and v["method"] == "full" and v["bound_ratio"] <= 1
    c[3, 4] += 1e-6
    assert not fastmm.verify(a, b, c)["ok"]
    ai, bi = random((9, 9), np.int64, rng), random((9, 9), np.int64, rng)
    ci = fastmm.matmul(ai, bi)
    assert fastmm.verify(ai, bi, ci)["bound_ratio"] == 0
    ci[0, 0] += 1
    assert not fastmm.verify(ai, bi, ci)["ok"]
    with pytest.raises(ValueError, match="growth"):
        fastmm.verify(a, b, fastmm.matmul(a, b), growth=0.5)


def test_gil_is_released(rng):
    # Another Python thread keeps running while a product runs.
    n = 1536
    a, b = random((n, n), np.float64, rng), random((n, n), np.float64, rng)
    ticks = 0
    running = threading.Event()
    done = threading.Event()

    def product():
        running.set()
        for _ in range(3):
            fastmm.matmul(a, b, algo="packed")
        done.set()

    worker = threading.Thread(target=product)
    worker.start()
    running.wait()
    while not done.is_set():
        ticks += 1
    worker.join()
    assert ticks > 10000, ticks


def test_threads_share_safely(rng):
    pairs = [(random((90, 70), np.float64, rng), random((70, 80), np.float64, rng)) for _ in range(6)]
    results = [None] * len(pairs)

    def work(i):
        for _ in range(20):
            results[i] = fastmm.matmul(*pairs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(pairs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (a, b), c in zip(pairs, results):
        assert_product(c, a, b)


CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import numpy as np
    import fastmm
    # A shell that ignores SIGINT (a background job, nohup, some CI runners)
    # passes SIG_IGN on, and Python then installs no KeyboardInterrupt
    # handler: install it here so that the test never depends on the parent.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    n = 2048
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    out = np.empty((n, n))
    print("ready", flush=True)
    in_call = False
    try:
        while True:
            out[...] = np.nan
            in_call = True
            fastmm.matmul(a, b, algo="packed", out=out)
            in_call = False
    except KeyboardInterrupt:
        stopped = time.perf_counter()
        untouched = bool(np.isnan(out).all())
        # Ctrl-C in the product's last moments lets it finish: then out is
        # whole, and Python raises at the next bytecode.
        whole = not np.isnan(out).any() and np.allclose(out, a @ b)
        print(f"interrupted {in_call} {untouched} {whole} {stopped}", flush=True)
    """
)


def line_reader(stream):
    """A function giving the stream's next line, or failing the test after a
    timeout: a child that never answers fails the test instead of hanging it.
    A thread reads, so that buffered lines are never missed (select on a
    buffered text stream would not see them)."""
    lines = queue.Queue()

    def pump():
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()

    def next_line(timeout):
        try:
            return lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the child within {timeout} s") from None

    return next_line


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
def test_ctrl_c_stops_a_long_product_and_leaves_out_untouched():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    read_line = line_reader(child.stdout)
    try:
        assert read_line(120).strip() == "ready"
        time.sleep(0.5)
        sent = time.perf_counter()
        child.send_signal(signal.SIGINT)
        line = read_line(30).split()
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
    assert line and line[0] == "interrupted", line
    in_call, untouched, whole = (word == "True" for word in line[1:4])
    stopped = float(line[4])
    if in_call:
        assert untouched or whole, "an interrupted product wrote part of out"
    assert stopped - sent < 5.0
