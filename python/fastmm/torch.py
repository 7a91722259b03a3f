"""fastmm inside PyTorch models: the operator ``fastmm::matmul``.

Importable where torch is installed (torch is not a dependency of the
package)::

    import torch, fastmm.torch
    c = fastmm.torch.matmul(a, b)              # a @ b, a torch.Tensor
    layer = fastmm.torch.Linear(8192, 8192)     # torch.nn.Linear's drop-in

The operator is registered with ``torch.library`` as ``fastmm::matmul``:

* **Shapes** as ``torch.matmul``'s (numpy's): 1-D operands, broadcast batch
  dimensions. CPU and CUDA tensors of float32, float64, complex64 and
  complex128 (gradients), and int32 and int64 (forward only). Complex
  products are real products of the parts: four at ``native`` (the
  complex product's own bound), three (3M) at the relaxed levels; on a
  GPU the parts are split on the device, and ``auto`` there runs
  cuBLAS's own complex product (cgemm/zgemm, as fast as its real ones)
  where its real products would be cuBLAS's anyway. With
  ``algo="cublas"``, CUDA tensors run cuBLAS's complex products on the
  interleaved tensors (cgemm/zgemm at ``native``, cgemm3m/zgemm3m at the
  relaxed levels).
* **Strides** as torch makes them: CPU views are read in place; on a GPU a
  matrix whose rows or columns are contiguous (a row slice, a batch slice,
  a transposed view such as ``w.mT``) is read in place by cuBLAS and the
  emulated product (the other GPU algorithms copy a transposed view once
  on the device), and a view strided both ways is copied once.
* **Autograd**: dA = dC·Bᴴ and dB = Aᴴ·dC, fastmm products at the same
  accuracy level, each computed only where ``needs_input_grad`` asks;
  broadcast batch dimensions are summed as torch sums them.
* **torch.compile**: a fake (meta) implementation propagates shapes,
  dtypes and devices, so ``torch.compile(fullgraph=True)`` traces a model
  that calls the operator without a graph break.
* **Streams**: the operands are exported through DLPack on fastmm's
  stream, so the work queued before the call on torch's current stream
  (a side stream inside ``torch.cuda.stream(s)`` included) is ordered
  before the product, and the current stream is made to wait for the
  product through an event. The call returns once the product is queued,
  as torch's own operators do (the emulated product, which reads its
  certificate midway, returns complete). Tensors follow torch's usual
  rule: used on another stream than the one they were made on, they need
  ``record_stream``. There is no device-wide synchronisation.
* **Errors** as torch raises them: ``RuntimeError`` for operands on two
  devices, of two dtypes, or of shapes that do not multiply, with fastmm's
  message.
* **Accuracy**: ``accuracy="native"`` (the default) gives the digits of the
  device's own product (cuBLAS sgemm/dgemm, or the CPU's); see
  ``fastmm.matmul`` for the relaxed levels.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import torch

from . import _native
from ._shapes import result_shape

__all__ = ["Linear", "matmul", "result_shape"]

_FLOATS = (torch.float32, torch.float64)
_INTEGERS = (torch.int32, torch.int64)
_COMPLEX = (torch.complex64, torch.complex128)


def _check(a: torch.Tensor, b: torch.Tensor) -> List[int]:
    """The result's shape, after torch's checks of devices and dtypes."""
    if a.device != b.device:
        raise RuntimeError(
            f"fastmm.torch.matmul: a is on {a.device} and b on {b.device}; "
            "both operands must be on one device"
        )
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"fastmm.torch.matmul: a is {a.dtype} and b is {b.dtype}; "
            "both operands must have one dtype"
        )
    if a.dtype not in _FLOATS + _INTEGERS + _COMPLEX:
        raise RuntimeError(
            f"fastmm.torch.matmul: fastmm multiplies float32, float64, int32, int64, "
            f"complex64 and complex128 tensors, not {a.dtype}"
        )
    if a.device.type not in ("cpu", "cuda"):
        raise RuntimeError(
            f"fastmm.torch.matmul: fastmm runs on CPU and CUDA tensors, not {a.device}"
        )
    return result_shape(a.shape, b.shape)


def _queue(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, algo: str, accuracy: str) -> None:
    """The product of CUDA tensors into ``out``, ordered before the current stream."""
    stream = torch.cuda.current_stream().cuda_stream
    _native.matmul(
        a.detach(), b.detach(), out=out, algo=algo, accuracy=accuracy, stream=stream
    )


@torch.library.custom_op("fastmm::matmul", mutates_args=())
def _matmul(a: torch.Tensor, b: torch.Tensor, algo: str, accuracy: str) -> torch.Tensor:
    shape = _check(a, b)
    # A lazily conjugated view (``x.mH``) becomes its values: neither
    # DLPack nor numpy takes the conjugate bit.
    a, b = a.resolve_conj(), b.resolve_conj()
    out = torch.empty(shape, dtype=a.dtype, device=a.device)
    k = a.shape[-1]
    if out.numel() == 0:
        return out
    if k == 0:
        return out.zero_()
    if a.device.type == "cuda":
        # (Complex operands come here too: split into real planes on the
        # device for fastmm's real products, or cuBLAS's own complex
        # products on the interleaved tensors in place.)
        # The operands and out through DLPack on fastmm's stream: torch
        # orders its current stream's pending work (out's allocation
        # included) before the product, and the current stream waits for
        # the product in turn, so that the call returns without waiting,
        # as torch's own operators do.
        # DLPack orders the work of the current stream of the current
        # device: make that the operands' device.
        if a.device.index == torch.cuda.current_device():
            _queue(a, b, out, algo, accuracy)
        else:
            with torch.cuda.device(a.device):
                _queue(a, b, out, algo, accuracy)
        return out
    # CPU tensors as numpy views of their memory, strides and all.
    _native.matmul(
        a.detach().numpy(), b.detach().numpy(), out=out.numpy(), algo=algo,
        accuracy=accuracy,
    )
    return out


@_matmul.register_fake
def _matmul_fake(a: torch.Tensor, b: torch.Tensor, algo: str, accuracy: str) -> torch.Tensor:
    return a.new_empty(_check(a, b))


def _as_matrices(
    a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """a, b and the result's gradient with numpy's 1-D operands made
    matrices: a row (1×k) and a column (k×1), their dimension put back
    into the gradient."""
    if a.dim() == 1:
        a = a.unsqueeze(0)
        grad = grad.unsqueeze(-2 if b.dim() > 1 else -1)
    if b.dim() == 1:
        b = b.unsqueeze(-1)
        grad = grad.unsqueeze(-1)
    return a, b, grad


def _setup_context(ctx, inputs, output) -> None:
    a, b, algo, accuracy = inputs
    ctx.algo, ctx.accuracy = algo, accuracy
    # Each gradient needs the other operand only.
    ctx.save_for_backward(
        a if ctx.needs_input_grad[1] else None,
        b if ctx.needs_input_grad[0] else None,
    )
    ctx.shapes = (a.shape, b.shape)


def _backward(ctx, grad: torch.Tensor):
    a, b = ctx.saved_tensors
    a_shape, b_shape = ctx.shapes
    product = lambda x, y: torch.ops.fastmm.matmul(x, y, ctx.algo, ctx.accuracy)  # noqa: E731
    # Stand-ins of the right shape where an operand was not saved.
    a_full = a if a is not None else grad.new_empty(a_shape)
    b_full = b if b is not None else grad.new_empty(b_shape)
    a2, b2, g2 = _as_matrices(a_full, b_full, grad)
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        if b2.dim() == 2 and a2.dim() > 2 and g2.shape[:-2] == a2.shape[:-2]:
            # One product over the whole batch: its rows are a's rows.
            grad_a = product(g2.reshape(-1, g2.shape[-1]), b2.mH).reshape(a2.shape)
        else:
            grad_a = product(g2, b2.mH)
        grad_a = grad_a.sum_to_size(a2.shape)
        grad_a = grad_a.reshape(a_shape)
    if ctx.needs_input_grad[1]:
        if b2.dim() == 2 and a2.dim() > 2:
            # B is shared by the batch: dB = Σ Aᵢᵀ·dCᵢ is one product of
            # the batch's rows stacked.
            k = a2.shape[-1]
            stacked_a = a2.expand(*g2.shape[:-2], *a2.shape[-2:]).reshape(-1, k)
            grad_b = product(stacked_a.mH, g2.reshape(-1, g2.shape[-1]))
        else:
            grad_b = product(a2.mH, g2)
        grad_b = grad_b.sum_to_size(b2.shape)
        grad_b = grad_b.reshape(b_shape)
    return grad_a, grad_b, None, None


_matmul.register_autograd(_backward, setup_context=_setup_context)


def matmul(
    a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto", accuracy: str = "native"
) -> torch.Tensor:
    """``a @ b`` with fastmm, as the operator ``torch.ops.fastmm.matmul``.

    Tensors as ``torch.matmul`` takes them (CPU or CUDA; float32, float64,
    int32, int64; 1-D operands and broadcast batches; any strides); the
    result is a ``torch.Tensor`` on the operands' device. Gradients flow to
    float operands. ``algo`` and ``accuracy`` are ``fastmm.matmul``'s:
    ``"auto"`` at ``"native"`` runs the fastest product that gives the
    device's own digits.
    """
    return torch.ops.fastmm.matmul(a, b, algo, accuracy)


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` whose product is fastmm's: y = x·Wᵀ + b.

    The same parameters, initialisation and ``state_dict`` keys (``weight``
    of shape (out_features, in_features), ``bias``) as ``torch.nn.Linear``,
    so either loads the other's weights; ``algo`` and ``accuracy`` choose
    the product, as for :func:`matmul`.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
        *,
        algo: str = "auto",
        accuracy: str = "native",
    ) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.algo = algo
        self.accuracy = accuracy

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.fastmm.matmul(x, self.weight.mT, self.algo, self.accuracy)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, algo={self.algo!r}, accuracy={self.accuracy!r}"

