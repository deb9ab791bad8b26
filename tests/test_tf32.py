"""The TF32 emulation behind a TF32 build's peer error (mirai.gpu.tf32), on the CPU."""

from __future__ import annotations

import contextlib

import torch

from mirai.gpu.tf32 import tf32_matmuls, to_tf32


def test_to_tf32_keeps_ten_mantissa_bits_and_leaves_non_finite_values():
    x = torch.tensor([1.0 + 2.0**-10, 1.0 + 2.0**-11 + 2.0**-12, -(2.0 - 2.0**-23), 1e-40])
    cut = to_tf32(x)
    assert cut.tolist() == [1.0 + 2.0**-10, 1.0, -(2.0 - 2.0**-10), to_tf32(torch.tensor(1e-40))]
    special = torch.tensor([float("inf"), float("-inf"), float("nan")])
    got = to_tf32(special)
    assert got[0] == float("inf") and got[1] == float("-inf") and torch.isnan(got[2])
    half = torch.tensor([1.5], dtype=torch.float16)
    assert to_tf32(half) is half  # only float32 is cut


def test_products_forward_and_backward_take_tf32_operands_and_bias_stays_fp32():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 16, generator=g, requires_grad=True)
    b = torch.randn(16, 4, generator=g, requires_grad=True)
    bias = torch.randn(4, generator=g) * 1e-3 + 1.0
    grad = torch.randn(8, 4, generator=g)
    before = torch.get_float32_matmul_precision()
    with tf32_matmuls():
        out = torch.addmm(bias, a, b)
        out.backward(grad)
    exact = lambda t: t.detach().double()  # noqa: E731
    cut = lambda t: to_tf32(t.detach()).double()  # noqa: E731
    torch.testing.assert_close(out.double(), exact(bias) + cut(a) @ cut(b), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(a.grad.double(), cut(grad) @ cut(b).T, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(b.grad.double(), cut(a).T @ cut(grad), rtol=1e-6, atol=1e-6)
    # outside the context, products are FP32 again and the precision setting is restored
    assert torch.get_float32_matmul_precision() == before
    plain = a.detach() @ b.detach()
    assert not torch.equal(plain.double(), cut(a) @ cut(b))


def test_a_relu_after_a_tf32_product_moves_its_gradient_by_about_a_percent():
    # why a TF32 build of examples/suite.py's mlp is checked against this emulation, not against
    # cuBLAS asked for TF32: the mask flips alone move the input gradient by ~1e-2
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 64, generator=g)
    w1 = torch.randn(64, 128, generator=g) * 0.1
    b1, w2 = torch.randn(128, generator=g), torch.randn(128, 32, generator=g) * 0.1
    tangent = torch.randn(1024, 32, generator=g)

    def input_grad(dtype, emulate):
        xs = x.to(dtype, copy=True).requires_grad_(True)
        with tf32_matmuls() if emulate else contextlib.nullcontext():
            (torch.relu(xs @ w1.to(dtype) + b1.to(dtype)) @ w2.to(dtype)).backward(
                tangent.to(dtype)
            )
        return xs.grad.double()

    ref = input_grad(torch.float64, False)
    rel = lambda t: float((t - ref).norm() / ref.norm())  # noqa: E731
    assert rel(input_grad(torch.float32, False)) < 1e-5
    assert 5e-3 < rel(input_grad(torch.float32, True)) < 5e-2
