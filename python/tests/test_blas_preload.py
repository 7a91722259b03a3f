"""numpy's own products on libfastmm_blas, preloaded: numpy's wheels call
their vendored OpenBLAS through prefixed CBLAS names, which the library
defines, so `a @ b` runs on fastmm unchanged. Checked in a child process
started with LD_PRELOAD: the library counts the products it ran, the
results are numpy's within the native bound, and numpy's own TestMatmul
passes under the preload."""

import os
import pathlib
import subprocess
import sys

import pytest
from _built import built

def library():
    return built("libfastmm_blas.so", "FASTMM_BLAS_LIB", "fastmm-blas")


def preloaded(code_or_args, **env):
    args = code_or_args if isinstance(code_or_args, list) else ["-c", code_or_args]
    return subprocess.run(
        [sys.executable, *args],
        env={**os.environ, "LD_PRELOAD": library(), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


CHECK = """
import ctypes, numpy as np
count = ctypes.CDLL(None).fastmm_blas_products
count.restype = ctypes.c_uint64
rng = np.random.default_rng(7)
before = count()
for dtype in (np.float32, np.float64, np.complex64, np.complex128):
    for (m, k, n) in ((1, 1, 1), (7, 5, 3), (130, 67, 129)):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        if np.iscomplexobj(a):
            a = a + 1j * rng.standard_normal((m, k)).astype(dtype)
            b = b + 1j * rng.standard_normal((k, n)).astype(dtype)
        for x, y in ((a, b), (b.T.copy().T, a.T.copy().T) if m == n else (a, b), (a[:, ::-1], b[::-1, :])):
            c = x @ y
            ref = np.einsum("ij,jk->ik", x.astype(np.clongdouble), y.astype(np.clongdouble), optimize=False)
            mag = np.einsum("ij,jk->ik", abs(x).astype(np.longdouble), abs(y).astype(np.longdouble), optimize=False)
            u = np.finfo(dtype).eps
            assert (abs(c - ref) <= 4 * (k + 2) * u * mag).all(), (dtype, m, k, n)
print(count() - before)
"""


def test_numpy_products_run_on_fastmm_under_the_preload():
    out = preloaded(CHECK)
    assert out.returncode == 0, out.stderr
    ran = int(out.stdout.split()[-1])
    # numpy hands 2-D products of more than one element to its BLAS.
    assert ran >= 20, out.stdout


def test_blas_status_tells_whether_numpy_runs_on_fastmm():
    code = (
        "import json, numpy as np, fastmm; a, b = np.ones((40, 30)), np.ones((30, 20)); "
        "before = fastmm.blas_status(); a @ b; print(json.dumps([before, fastmm.blas_status()]))"
    )
    out = preloaded(code)
    assert out.returncode == 0, out.stderr
    before, after = __import__("json").loads(out.stdout.split("\n")[-2])
    assert before["numpy"] and after["library"].endswith("libfastmm_blas.so")
    assert after["products"] == before["products"] + 1
    # numpy's wheel vendors its BLAS under prefixed names: nothing of the
    # standard names to forward to unless a system BLAS is installed.
    assert after["forwarded"] >= 0
    plain = subprocess.run(
        [sys.executable, "-c", "import fastmm; print(fastmm.blas_status())"],
        capture_output=True, text=True, timeout=120,
    )
    assert plain.returncode == 0, plain.stderr
    assert "'numpy': False" in plain.stdout


def test_numpys_own_matmul_tests_pass_under_the_preload():
    pytest.importorskip("numpy._core.tests.test_multiarray", reason="this numpy ships without its tests")
    out = preloaded(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
         "numpy._core.tests.test_multiarray", "-k", "TestMatmul"],
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout


def test_debians_numpy_runs_on_the_library_as_its_libblas(tmp_path):
    """Debian's python3-numpy links the system's libblas.so.3: with the
    library in its place (what the alternative does, here through a
    directory on LD_LIBRARY_PATH), numpy's products run on fastmm and its
    other BLAS calls (a dot product) on the reference BLAS the library
    forwards them to; both exact to the native bound."""
    system = pathlib.Path("/usr/bin/python3")
    # The system interpreter with its own packages: not the numpy a
    # PYTHONPATH of this run points at.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "LD_PRELOAD")}
    probe = "import numpy.core._multiarray_umath as m; print(m.__file__)"
    found = (
        subprocess.run([str(system), "-c", probe], capture_output=True, text=True, env=clean)
        if system.exists() else None
    )
    if found is None or found.returncode != 0:
        pytest.skip("no Debian python3-numpy (apt-get install python3-numpy)")
    linked = subprocess.run(["ldd", found.stdout.strip()], capture_output=True, text=True).stdout
    if "libblas.so.3" not in linked:
        pytest.skip("this numpy does not link libblas.so.3")
    (tmp_path / "libblas.so.3").symlink_to(library())
    code = (
        "import ctypes, json, numpy as np;"
        "rng = np.random.default_rng(3); a = rng.random((130, 70)); b = rng.random((70, 90));"
        "c = a @ b; d = a[0] @ a[1];"
        "want = np.einsum('ik,kj->ij', a, b);"
        "lib = ctypes.CDLL('libblas.so.3'); lib.fastmm_blas_forwarded.restype = ctypes.c_size_t;"
        "bound = 70 * np.finfo(float).eps * (np.abs(a) @ np.abs(b)).max();"
        "print(json.dumps([lib.fastmm_blas_products(), lib.fastmm_blas_forwarded(),"
        " float(abs(c - want).max() / bound), float(abs(d - (a[0] * a[1]).sum()))]))"
    )
    env = dict(clean, LD_LIBRARY_PATH=str(tmp_path))
    out = subprocess.run([str(system), "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    products, forwarded, scaled, dot_error = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert products >= 1 and forwarded > 100, out.stdout
    assert scaled <= 1.0 and dot_error < 1e-12


def test_numpy_and_fastmm_share_one_team_under_the_preload():
    """The preloaded library offers its team to the package's own copy of
    fastmm: after products of both, each team size has one set of helper
    threads (two copies would each start a `fastmm-team-1`)."""
    code = (
        "import glob, numpy as np, fastmm; a = np.ones((512, 512));"
        "[(a @ a, fastmm.matmul(a, a, threads=2)) for _ in range(3)];"
        "names = [open(t + '/comm').read().strip() for t in glob.glob('/proc/self/task/*')];"
        "print(sorted(n for n in names if n.startswith('fastmm-team')))"
    )
    out = preloaded(code)
    assert out.returncode == 0, out.stderr
    names = __import__("ast").literal_eval(out.stdout.strip().splitlines()[-1])
    assert names and len(names) == len(set(names)), names


def test_threadpoolctl_sees_and_limits_the_library():
    """With the package imported, threadpoolctl lists the preloaded
    library beside the package's module, and its limits reach both."""
    pytest.importorskip("threadpoolctl")
    code = (
        "import ctypes, json, fastmm, threadpoolctl;"
        "names = [i['filepath'].split('/')[-1] for i in threadpoolctl.threadpool_info()"
        " if i['internal_api'] == 'fastmm'];"
        "blas = ctypes.CDLL(fastmm.blas_status()['library']);"
        "before = blas.fastmm_get_num_threads();"
        "limits = threadpoolctl.threadpool_limits(1); inside = blas.fastmm_get_num_threads();"
        "limits.restore_original_limits();"
        "print(json.dumps([names, before, inside, blas.fastmm_get_num_threads()]))"
    )
    out = preloaded(code)
    assert out.returncode == 0, out.stderr
    names, before, inside, after = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert "libfastmm_blas.so" in names, names
    assert inside == 1 and after == before, (before, inside, after)
