"""Type stubs of fastmm's Python API."""

import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
ALGORITHMS: str

_Path = Union[str, "os.PathLike[str]"]
_DType = Union[str, type, np.dtype[Any], None]

class GpuArray:
    """A product fastmm computed in GPU memory (a matrix, or a batch of
    them); pass it to torch.from_dlpack or cupy.from_dlpack."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

def matmul(
    a: Any,
    b: Any,
    out: Optional[Any] = None,
    *,
    algo: str = "auto",
    device: Optional[str] = None,
    threads: Optional[int] = None,
    accuracy: str = "native",
    stream: Optional[int] = None,
) -> Any:
    """The matrix product a @ b, with numpy's matmul shapes, types and out= casting."""

def matmul_timed(
    a: Any,
    b: Any,
    *,
    algo: str = "auto",
    device: Optional[str] = None,
    threads: Optional[int] = None,
    accuracy: str = "native",
) -> Tuple[Any, Dict[str, Any]]:
    """matmul, and where its time went: compute_ms, upload_ms, download_ms, end_to_end_ms, host_copies."""

def gemm(
    alpha: Union[int, float],
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    beta: Union[int, float],
    c: npt.NDArray[Any],
    *,
    algo: str = "auto",
    device: str = "cpu",
    threads: Optional[int] = None,
    accuracy: str = "native",
) -> None:
    """c <- alpha * (a @ b) + beta * c, in place."""

def plan(
    a: Union[npt.ArrayLike, Tuple[int, ...]],
    b: Union[npt.ArrayLike, Tuple[int, ...]],
    *,
    algo: str = "auto",
    device: str = "cpu",
    threads: Optional[int] = None,
    dtype: _DType = None,
    accuracy: str = "native",
) -> Dict[str, Any]:
    """What matmul(a, b, ...) would run, without running it."""

def info() -> Dict[str, Any]:
    """The machine and what fastmm runs on it."""

def get_num_threads() -> int:
    """CPU threads of a product that names none: set_num_threads's count,
    else FASTMM_NUM_THREADS, else OMP_NUM_THREADS, else every hardware
    thread."""

def set_num_threads(threads: Optional[int]) -> None:
    """Sets the CPU threads of every later product that names none, for the
    whole process; None returns to the environment's choice. threadpoolctl's
    threadpool_limits sets it too."""

def verify(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    c: npt.ArrayLike,
    *,
    growth: float = 1.0,
) -> Dict[str, Any]:
    """Whether c is a @ b within the componentwise rounding bound."""

def load(
    path: _Path,
    *,
    dtype: Optional[str] = None,
    format: Optional[str] = None,
    shape: Optional[Tuple[int, int]] = None,
    delimiter: Optional[str] = None,
) -> npt.NDArray[Any]:
    """A matrix file as a numpy array."""

def save(path: _Path, array: npt.ArrayLike, *, format: Optional[str] = None) -> None:
    """Writes an array of at most 2 dimensions to a matrix file, whole or not at all."""

def multiply_files(
    a_path: _Path,
    b_path: _Path,
    out_path: _Path,
    *,
    algo: str = "auto",
    device: str = "cpu",
    threads: Optional[int] = None,
    dtype: Optional[str] = None,
    check: bool = False,
    max_memory: Union[int, str, None] = None,
    format: Optional[str] = None,
    out_format: Optional[str] = None,
    accuracy: str = "native",
) -> Dict[str, Any]:
    """C = A·B from matrix files into a matrix file, out of core when large."""

def blas_status() -> Dict[str, Any]:
    """Whether this process's BLAS matrix products run on fastmm (libfastmm_blas preloaded or linked)."""
