"""The CPU thread count: fastmm's setting, the environment, threadpoolctl."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fastmm


def test_set_num_threads_applies_and_clears(rng):
    before = fastmm.get_num_threads()
    a = rng.random((300, 200))
    b = rng.random((200, 100))
    want = a @ b
    try:
        fastmm.set_num_threads(1)
        assert fastmm.get_num_threads() == 1
        assert fastmm.plan(a, b)["threads"] == 1
        np.testing.assert_allclose(fastmm.matmul(a, b), want, rtol=1e-12)
        fastmm.set_num_threads(3)
        assert fastmm.get_num_threads() == 3
        with pytest.raises(ValueError):
            fastmm.set_num_threads(0)
        assert fastmm.get_num_threads() == 3
        # An explicit argument wins over the setting.
        assert fastmm.plan(a, b, threads=1)["threads"] == 1
    finally:
        fastmm.set_num_threads(None)
    assert fastmm.get_num_threads() == before


def _in_a_fresh_process(code, **env):
    environment = {k: v for k, v in os.environ.items() if not k.endswith("NUM_THREADS")}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_environment_sets_the_count():
    code = "import fastmm; print(fastmm.get_num_threads())"
    assert _in_a_fresh_process(code, FASTMM_NUM_THREADS="3") == "3"
    assert _in_a_fresh_process(code, OMP_NUM_THREADS="5,2") == "5"
    assert _in_a_fresh_process(code, FASTMM_NUM_THREADS="2", OMP_NUM_THREADS="7") == "2"


def test_a_bad_count_in_the_environment_is_reported_by_a_product():
    out = _in_a_fresh_process(
        """
        import numpy as np, fastmm
        try:
            fastmm.matmul(np.ones((200, 200)), np.ones((200, 200)))
            print("ran")
        except ValueError as e:
            print("refused:", e)
        """,
        FASTMM_NUM_THREADS="none",
    )
    assert out.startswith("refused:") and "FASTMM_NUM_THREADS" in out


def test_threadpoolctl_limits_fastmm():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not hasattr(threadpoolctl, "register"):
        pytest.skip("threadpoolctl older than 3.5 takes no controllers")
    infos = [i for i in threadpoolctl.threadpool_info() if i["internal_api"] == "fastmm"]
    assert len(infos) == 1, threadpoolctl.threadpool_info()
    assert infos[0]["user_api"] == "blas"
    assert infos[0]["num_threads"] == fastmm.get_num_threads()
    assert infos[0]["version"] == fastmm.__version__
    before = fastmm.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=1):
        assert fastmm.get_num_threads() == 1
    assert fastmm.get_num_threads() == before
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert fastmm.get_num_threads() == 1
    assert fastmm.get_num_threads() == before
