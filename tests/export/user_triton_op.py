"""A function that calls an operator of its own: a torch.library.triton_op with its own Triton kernel
(tests/export/test_user_ops.py). Eager PyTorch on the CPU, where no Triton kernel can launch, runs
the operator's CPU kernel; the export runs the Triton one."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

import mirai


@triton.jit
def scaled_shift_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n)
    tl.store(y_ptr + i, x * scale + 0.5, mask=i < n)


@triton_op("mirai_test::scaled_shift", mutates_args=())
def scaled_shift(x: torch.Tensor, scale: float) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    wrap_triton(scaled_shift_kernel)[(triton.cdiv(n, 128),)](x, y, n, scale, BLOCK=128)
    return y


@scaled_shift.register_kernel("cpu")
def _(x, scale):
    return x * scale + 0.5


@mirai.op(name="UserShift", no_grad=("x",))
def user_shift(x):
    return torch.ops.mirai_test.scaled_shift(torch.tanh(x), 3.0) * x


def samples(batch):
    return [torch.randn(batch, 24, generator=torch.Generator().manual_seed(batch))]


MIRAI_BUILD = {"op": user_shift, "sample_inputs": lambda: samples(40)}  # for `mirai build FILE`
