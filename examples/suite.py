"""A suite of functions that exercise the export face beyond pffn.

Each entry: a @mirai.op function, a function of the batch size giving sample inputs, and the output
shapes expected for that batch. Together they cover reductions (layernorm, softmax, RMS norm),
broadcasting, several inputs and outputs, transposes and views with storage offsets, integer inputs
and integer scalar arguments, an input that gets no gradient, a non-contiguous sample input, plain
matmuls, and a function with no backward at all. The CPU tests build every one static and dynamic;
`mirai verify` runs them on a GPU.
"""

from __future__ import annotations

import torch

import mirai

B = 40


@mirai.op(name="LayerNorm")
def layer_norm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


@mirai.op(name="Softmax")
def softmax(x):
    return torch.softmax(x * 0.5, dim=-1)


@mirai.op(name="BiasGelu")
def bias_gelu(x, bias):
    return torch.nn.functional.gelu(x + bias, approximate="tanh")


@mirai.op(name="SumAndProduct")
def sum_and_product(x, y):
    return (x * y).sum(dim=-1), torch.tanh(x + y)


@mirai.op(name="ShiftedTranspose")
def shifted_transpose(x):
    # a transpose, then views that start past the beginning of their storage
    t = x.transpose(0, 1)
    return t[1:, :] * 2.0 + t[:-1, :]


@mirai.op(name="GatherScale")
def gather_scale(x, index):
    # an integer input (no gradient) used as indices
    return x[:, :4] * torch.gather(x, 1, index).sigmoid()


@mirai.op(name="Masked", no_grad=("mask",))
def masked(x, mask):
    return torch.where(mask > 0.5, x * x, -x)


@mirai.op(name="Mlp")
def mlp(x, w1, b1, w2):
    return torch.relu(x @ w1 + b1) @ w2


@mirai.op(name="RmsNormResidual")
def rms_norm_residual(x, residual, weight):
    h = x + residual
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


@mirai.op(name="RollAdd")
def roll_add(x):
    # torch.roll with a shift: integer scalar arguments in the kernel's indexing
    return torch.roll(x, shifts=3, dims=1) + x


@mirai.op(name="IntOnly")
def int_only(a, b):
    # integers only: nothing to differentiate, so there is no backward op
    return (a + b) * 3 - (a >> 1)


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


SUITE = {
    "layer_norm": (
        layer_norm,
        lambda b: [torch.randn(b, 64, generator=_g()), torch.randn(64), torch.randn(64)],
        lambda b: [(b, 64)],
    ),
    "softmax": (softmax, lambda b: [torch.randn(b, 100, generator=_g())], lambda b: [(b, 100)]),
    "bias_gelu": (
        bias_gelu,
        lambda b: [torch.randn(b, 32, generator=_g()), torch.randn(32)],
        lambda b: [(b, 32)],
    ),
    "sum_and_product": (
        sum_and_product,
        lambda b: [torch.randn(b, 16, generator=_g()), torch.randn(b, 16, generator=_g(1))],
        lambda b: [(b,), (b, 16)],
    ),
    "shifted_transpose": (
        shifted_transpose,
        lambda b: [torch.randn(b, 24, generator=_g())],
        lambda b: [(23, b)],
    ),
    "gather_scale": (
        gather_scale,
        lambda b: [
            torch.randn(b, 16, generator=_g()),
            torch.randint(0, 16, (b, 4), generator=_g(1)),
        ],
        lambda b: [(b, 4)],
    ),
    "masked": (
        masked,
        # a non-contiguous sample input: mirai exports the dense layout TensorFlow passes
        lambda b: [torch.randn(32, b, generator=_g()).t(), torch.rand(b, 32, generator=_g(1))],
        lambda b: [(b, 32)],
    ),
    "mlp": (
        mlp,
        lambda b: [
            torch.randn(b, 64, generator=_g()),
            torch.randn(64, 128, generator=_g(1)) * 0.1,
            torch.randn(128, generator=_g(2)),
            torch.randn(128, 32, generator=_g(3)) * 0.1,
        ],
        lambda b: [(b, 32)],
    ),
    "rms_norm_residual": (
        rms_norm_residual,
        lambda b: [
            torch.randn(b, 48, generator=_g()),
            torch.randn(b, 48, generator=_g(1)),
            torch.randn(48, generator=_g(2)),
        ],
        lambda b: [(b, 48)],
    ),
    "roll_add": (roll_add, lambda b: [torch.randn(b, 20, generator=_g())], lambda b: [(b, 20)]),
    "int_only": (
        int_only,
        lambda b: [
            torch.randint(0, 100, (b, 8), dtype=torch.int32, generator=_g()),
            torch.randint(0, 100, (b, 8), dtype=torch.int32, generator=_g(1)),
        ],
        lambda b: [(b, 8)],
    ),
}
