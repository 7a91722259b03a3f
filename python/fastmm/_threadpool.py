"""fastmm's thread team under threadpoolctl.

``threadpoolctl.threadpool_limits(1)`` limits OpenBLAS, MKL and OpenMP
at once; registering this controller makes it limit fastmm too, so that
code written for numpy's BLAS (scikit-learn's nested parallelism, a
benchmark's ``threadpool_limits``) treats fastmm the same way. fastmm
reports itself as ``user_api="blas"``, ``internal_api="fastmm"``.

threadpoolctl finds a library by the shared objects loaded in the
process: the native module, and ``libfastmm_blas`` where it is loaded
(preloaded, linked, or as the system's ``libblas.so.3``), each recognised
by the two C symbols it exports (``fastmm_get_num_threads``,
``fastmm_set_num_threads``); each is listed, and a limit reaches both.
"""

from __future__ import annotations

import ctypes

from ._native import __version__


def register() -> bool:
    """Registers the controller with threadpoolctl; False when threadpoolctl
    is not installed, or too old to take controllers (before 3.5)."""
    try:
        import threadpoolctl
    except ImportError:
        return False
    if not hasattr(threadpoolctl, "register") or not hasattr(threadpoolctl, "LibController"):
        return False
    if any(
        getattr(c, "internal_api", None) == "fastmm"
        for c in getattr(threadpoolctl, "_ALL_CONTROLLERS", ())
    ):
        return True

    class FastmmController(threadpoolctl.LibController):
        user_api = "blas"
        internal_api = "fastmm"
        filename_prefixes = ("_native", "libfastmm_blas", "libblas")
        check_symbols = ("fastmm_get_num_threads", "fastmm_set_num_threads")

        def get_num_threads(self):
            get = getattr(self.dynlib, "fastmm_get_num_threads", None)
            if get is None:
                return None
            get.restype = ctypes.c_int
            return get()

        def set_num_threads(self, num_threads):
            set_ = getattr(self.dynlib, "fastmm_set_num_threads", None)
            if set_ is None:
                return None
            set_.argtypes = [ctypes.c_int]
            set_.restype = ctypes.c_int
            return set_(int(num_threads))

        def get_version(self):
            return __version__

    threadpoolctl.register(FastmmController)
    return True
