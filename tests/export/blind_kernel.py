"""A user-defined Triton kernel that Inductor cannot analyse: its call leaves a constexpr without a
value, so Inductor cannot compile it to find what it writes (tests/export/test_errors.py)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

import mirai


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, TWICE: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n)
    if TWICE:
        x = x * 2
    tl.store(y_ptr + i, x, mask=i < n)


@triton_op("mirai_test::scale_without_twice", mutates_args=())
def scale_without_twice(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    wrap_triton(scale_kernel)[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)  # TWICE: no value
    return y


@mirai.op(name="BlindKernel", no_grad=("x",))  # forward only: no autograd formula
def blind(x):
    return torch.ops.mirai_test.scale_without_twice(x) + 1.0
