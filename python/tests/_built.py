"""The drop-in libraries the preload tests put under unchanged programs."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def built(name, variable, package):
    """The built library ``name``: the path in the environment's
    ``variable`` (set by the CI script, which builds it), else the release
    build in this checkout; the test is skipped where neither exists."""
    named = os.environ.get(variable)
    if named:
        assert pathlib.Path(named).is_file(), f"{variable}={named} does not exist"
        return named
    path = ROOT / "target" / "release" / name
    if not path.is_file():
        pytest.skip(f"{name} is not built (cargo build --release -p {package})")
    return str(path)
