"""device="mpi": products across the ranks of the MPI job the interpreter
runs in. Every rank calls with the same arrays; rank 0 gets the product
(numpy's within the native bound, integers exact), the others None; and
every rank ends MPI at exit, so that mpirun succeeds. A package built
without MPI says so."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fastmm

RANKS = 2

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import fastmm

    rng = np.random.default_rng(11)
    a = rng.standard_normal((97, 64))
    b = rng.standard_normal((64, 131))
    ai = rng.integers(-2**20, 2**20, (33, 70)).astype(np.int32)
    bi = rng.integers(-2**20, 2**20, (70, 45)).astype(np.int32)
    batch = rng.standard_normal((3, 40, 50)).astype(np.float32)
    z = a + 1j * a[::-1]
    results = {
        "f64": fastmm.matmul(a, b, device="mpi"),
        "i32": fastmm.matmul(ai, bi, device="mpi"),
        "f32 batch": fastmm.matmul(batch, batch.transpose(0, 2, 1), device="mpi"),
        "c128": fastmm.matmul(z, b.astype(np.complex128), device="mpi"),
        "transposed": fastmm.matmul(b.T, a.T, device="mpi"),
    }
    wanted = {
        "f64": a @ b,
        "i32": ai @ bi,
        "f32 batch": batch @ batch.transpose(0, 2, 1),
        "c128": z @ b.astype(np.complex128),
        "transposed": b.T @ a.T,
    }
    for name, got in results.items():
        if got is None:
            print(name, "none")
            continue
        want = wanted[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if want.dtype.kind == "i":
            assert (got == want).all(), name
        elif want.dtype.kind == "c":
            # Within the classical complex bound's order: k·u·(|A||B|).
            scale = (np.abs(z) @ np.abs(b)).max() * 64 * np.finfo(np.float64).eps
            assert np.abs(got - want).max() <= scale, name
        else:
            operands = {
                "f64": (a, b), "f32 batch": (batch, batch.transpose(0, 2, 1)),
                "transposed": (b.T, a.T),
            }[name]
            assert fastmm.verify(*operands, got)["ok"], name
        print(name, "ok")
    """
)


@pytest.mark.skipif(not fastmm._native.MPI, reason="package built without MPI")
def test_products_across_the_ranks_of_an_mpi_job(tmp_path):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun")
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(
        [mpirun, "-np", str(RANKS), "--oversubscribe", sys.executable, str(script)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.split()
    names = 5
    # Rank 0 checked every product; each other rank got None for each.
    assert lines.count("ok") == names, done.stdout
    assert lines.count("none") == names * (RANKS - 1), done.stdout


@pytest.mark.skipif(fastmm._native.MPI, reason="package built with MPI")
def test_without_mpi_the_device_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="built with MPI"):
        fastmm.matmul(np.ones((2, 2)), np.ones((2, 2)), device="mpi")
