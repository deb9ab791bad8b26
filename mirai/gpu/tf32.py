"""TF32 emulation: PyTorch's matmuls computed on operands cut to TF32, the way a TF32 kernel reads them.

A TF32 build is checked against PyTorch computing the same function (mirai.export.verify): its
error may be a few times PyTorch's own. PyTorch's `float32_matmul_precision("high")` only allows
cuBLAS to use TF32, and for small products cuBLAS often picks a full-FP32 kernel, so the peer's
error can be far below what any TF32 kernel computes. Where a matmul feeds a threshold (a ReLU,
a comparison) the difference is large: an element whose sign the rounding flips passes or blocks
its whole gradient: examples/suite.py's mlp at B = 1024 has an input gradient 1e-2 to 2e-2 off
float64 with TF32 operands (emulated here), and PyTorch asked for TF32 was 3.6e-3 off on an H200.

`tf32_matmuls()` makes every matrix product (aten.mm, bmm, addmm, baddbmm, addbmm, forward and
backward) take its two matrix operands cut to TF32 and multiply them in full FP32, whatever cuBLAS
would pick. The cut keeps 10 of FP32's 23 mantissa bits and drops the rest (round toward zero):
Triton's TF32 dot (Inductor's GEMM templates) feeds FP32 bits to the tensor cores, which ignore the
low 13 (triton-lang/triton#4574 reports Triton's TF32 less accurate than PyTorch's); a kernel that
rounds to nearest instead is never farther off. Bias operands are added in FP32, as the kernels'
epilogues do.

    >>> import torch
    >>> to_tf32(torch.tensor([1.0 + 2.0**-10, 1.0 + 2.0**-11, -3.0])).tolist()
    [1.0009765625, 1.0, -3.0]
"""

from __future__ import annotations

import contextlib

# which arguments of each aten matrix product are its matrices (the rest are added in FP32)
_MATRICES = {"mm": (0, 1), "bmm": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2), "addbmm": (1, 2)}
_DROPPED_BITS = 13  # FP32 has 23 mantissa bits, TF32 keeps 10


def to_tf32(t):
    """`t` (float32) with the low 13 mantissa bits of every finite element cleared."""
    import torch

    if t.dtype != torch.float32:
        return t
    cut = (t.contiguous().view(torch.int32) & ~((1 << _DROPPED_BITS) - 1)).view(torch.float32)
    return torch.where(torch.isfinite(t), cut.view(t.shape), t)


@contextlib.contextmanager
def tf32_matmuls():
    """Within it, PyTorch's matrix products take TF32 operands and multiply them in FP32."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Tf32(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            matrices = _MATRICES.get(func.overloadpacket.__name__, ())
            if matrices:
                args = tuple(to_tf32(a) if i in matrices else a for i, a in enumerate(args))
            return func(*args, **(kwargs or {}))

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with _Tf32():
            yield
    finally:
        torch.set_float32_matmul_precision(previous)
