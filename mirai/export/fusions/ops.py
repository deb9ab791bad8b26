"""The fusions' kernels as PyTorch operators that torch.compile traces into: `torch.library.triton_op`s.

Inductor inlines a triton_op's body, so its Triton kernel reaches the generated wrapper as a user-defined
kernel, which the capture records like any other. Registered on import (once per process):

- `mirai::gate_up_silu(x, w_gate, b_gate, w_up, b_up)` -> silu(x @ w_gate + b_gate) * (x @ w_up + b_up);
- `mirai::gate_up_silu_train(...)` -> (that product, the gate sum, the up sum), differentiable: its
  backward is written in PyTorch operators (two pointwise products, four GEMMs, two bias sums);
- `mirai::gate_up_down_train(x, w_gate, b_gate, w_up, b_up, w_down, b_down, rows)` -> (that product
  @ w_down, the product, the gate sum, the up sum), differentiable: where only its first result is
  used (the rewrite's case), its backward starts with `mirai::silu_grad`; with `rows`, the first
  result comes with b_down added, as [M, E, D] (`mirai::bmm_rows`; at few rows, FEW_ROWS or less,
  the Triton kernel of mirai.export.fusions.few_rows, whose launch costs the host less);
- `mirai::silu_grad(d_y, w_down, gate, up)` -> (d_gate, d_up, their sums over rows): d_y @ w_down^T
  with SiLU's gradient in the epilogue (mirai.export.fusions.silu_grad);
- `mirai::rows_pair(a, b, a2, b2)` -> a @ b + a2 @ b2 as [M, E, N], and `mirai::weight_grad(x, d,
  k_major)` -> (x^T @ d, d's column sums): the backward's GEMMs at few rows (FEW_ROWS_BACKWARD or
  less), as launches of the few_rows kernel rather than cuBLASLt calls;
- `mirai::rows_gemm(a, b, bias)` -> (a @ b + bias).transpose(0, 1), stored [M, E, N]: fusion
  bmm_rows' operator, `mirai::bmm_rows` below or, at few rows (FEW_ROWS or less), the few_rows
  kernel, as gate_up_down_train's down projection decides;
- `mirai::bmm_rows(a, b, bias, acc)` -> (a @ b + bias).transpose(0, 1) + acc, stored [M, E, N]: a
  batched GEMM whose result comes out with the batch inside the rows, as a layer over [M, E, K]
  inputs returns it. Not a Triton kernel: a plain operator that Inductor leaves to its own
  implementation, and that the capture records as one cuBLASLt GEMM writing those strides, with
  cuBLASLt's bias epilogue or `acc` as its C matrix (mirai.export.capture.wrapper), so no kernel
  transposes the result or adds the bias after it.

Weights are made K-major in the call (mirai.export.fusions.gate_up.k_major), except where the sample
has few rows (SMALL_M there); the kernel's configuration also follows the rows
(gate_up.config_for). Both follow the size the op is traced at, so a bucketed build decides per
bucket. The dot precision is torch's float32 matmul precision when the op is traced: "highest" ->
IEEE fp32, otherwise TF32.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torch.library import custom_op, triton_op, wrap_triton

from mirai.export.fusions import few_rows
from mirai.export.fusions.few_rows import FEW_ROWS
from mirai.export.fusions.gate_up import SMALL_M, k_major, launch, size_hint
from mirai.export.fusions.silu_grad import launch as silu_grad_launch


def dot_precision() -> str:
    return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def _run(x, w_gate, b_gate, w_up, b_up, residuals: bool):
    small = size_hint(x.shape[1]) <= SMALL_M  # the sample's rows: a bucket's, in a bucketed build
    # With a backward, a bucket without the copies saves the same tensors for it in another order;
    # the backward op takes them in one order all the same (mirai.export.plan), so each bucket of
    # a build may decide for itself.
    if not small:
        w_gate, w_up = k_major(w_gate), k_major(w_up)
    return launch(
        x, w_gate, b_gate, w_up, b_up,
        residuals=residuals, precision=dot_precision(), run=wrap_triton,
    )  # fmt: skip


@triton_op("mirai::gate_up_silu", mutates_args=())
def gate_up_silu(
    x: Tensor, w_gate: Tensor, b_gate: Optional[Tensor], w_up: Tensor, b_up: Optional[Tensor]
) -> Tensor:
    return _run(x, w_gate, b_gate, w_up, b_up, residuals=False)[0]


@triton_op("mirai::gate_up_silu_train", mutates_args=())
def gate_up_silu_train(
    x: Tensor, w_gate: Tensor, b_gate: Optional[Tensor], w_up: Tensor, b_up: Optional[Tensor]
) -> tuple[Tensor, Tensor, Tensor]:
    out, gate, up = _run(x, w_gate, b_gate, w_up, b_up, residuals=True)
    return out, gate, up


def _setup_context(ctx, inputs, output):
    x, w_gate, b_gate, w_up, b_up = inputs
    _, gate, up = output
    ctx.save_for_backward(x, w_gate, w_up, gate, up)
    ctx.bias_shapes = (
        None if b_gate is None else b_gate.shape,
        None if b_up is None else b_up.shape,
    )


def _k_major(weight) -> bool:
    """Whether `weight` [E, K, N] is K-major (nn.Linear's [N, K] seen as [1, K, N])."""
    return weight.stride(1) == 1 and weight.stride(2) != 1


def _weight_grad(x, d, weight):
    """x^T @ d ([E, K, N]) laid out as `weight` is: a K-major weight (nn.Linear's [N, K] seen as
    [1, K, N]) gets its gradient K-major too, computed as (d^T @ x)^T, so that no copy turns it
    around before it reaches the weight."""
    if _k_major(weight):
        return torch.bmm(d.transpose(1, 2), x).transpose(1, 2)
    return torch.bmm(x.transpose(1, 2), d)


def _weight_grad_few(x, d, weight):
    """(_weight_grad(x, d, weight), d's column sums [E, 1, N]) in one Triton launch."""
    return torch.ops.mirai.weight_grad(x, d, _k_major(weight))


def _silu_mul_grad(d_out, gate, up):
    """The gradients of silu(gate) * up for the product's gradient `d_out`."""
    sig = torch.sigmoid(gate)
    return d_out * up * sig * (1 + gate * (1 - sig)), d_out * gate * sig


def _added(grad, more):
    return grad if more is None else grad + more


def _few(x: Tensor) -> bool:
    """Whether x [E, M, K] has few rows for the backward (FEW_ROWS_BACKWARD or less, by the size
    traced): its GEMMs then run as the few_rows kernel, whose launches cost the host less than
    cuBLASLt's."""
    return size_hint(x.shape[1]) <= few_rows.FEW_ROWS_BACKWARD


def _through_projections(ctx, dg, du, sums=None):
    """The gradients of the gate/up projections' inputs (x, w_gate, b_gate, w_up, b_up) for those of
    their results, `dg` and `du` [E, M, N]; `sums` gives the biases' gradients as [E, N] column sums
    of both, where they were computed with them. At few rows, three Triton launches
    (mirai::rows_pair for x's gradient, mirai::weight_grad for each weight's with its bias's) take
    the place of four cuBLASLt GEMMs."""
    x, w_gate, w_up = ctx.saved_tensors[:3]
    need = ctx.needs_input_grad
    few = _few(x)
    dx = dwg = dbg = dwu = dbu = None
    if need[0] and few:  # written [M, E, K]: x's own layout where it is rows-major
        dx = torch.ops.mirai.rows_pair(dg, w_gate.transpose(1, 2), du, w_up.transpose(1, 2))
        dx = dx.transpose(0, 1)
    elif need[0] and rows_major(x):  # in x's layout, the second GEMM adding the first's result
        first = torch.ops.mirai.bmm_rows(dg, w_gate.transpose(1, 2), None, None)
        dx = torch.ops.mirai.bmm_rows(du, w_up.transpose(1, 2), None, first).transpose(0, 1)
    elif need[0]:
        dx = torch.bmm(dg, w_gate.transpose(1, 2)) + torch.bmm(du, w_up.transpose(1, 2))
    shape_g, shape_u = ctx.bias_shapes
    sum_g, sum_u = (dg, du) if sums is None else (s.unsqueeze(1) for s in sums)
    if need[1] and few:
        dwg, sum_g = _weight_grad_few(x, dg, w_gate)
    elif need[1]:
        dwg = _weight_grad(x, dg, w_gate)
    if need[3] and few:
        dwu, sum_u = _weight_grad_few(x, du, w_up)
    elif need[3]:
        dwu = _weight_grad(x, du, w_up)
    if need[2] and shape_g is not None:
        dbg = sum_g.sum_to_size(shape_g)
    if need[4] and shape_u is not None:
        dbu = sum_u.sum_to_size(shape_u)
    return dx, dwg, dbg, dwu, dbu


def _backward(ctx, d_out, d_gate, d_up):
    gate, up = ctx.saved_tensors[3:5]
    dg, du = _silu_mul_grad(d_out, gate, up)
    return _through_projections(ctx, _added(dg, d_gate), _added(du, d_up))


gate_up_silu_train.register_autograd(_backward, setup_context=_setup_context)


@triton_op("mirai::silu_grad", mutates_args=())
def silu_grad(
    d_y: Tensor, w_down: Tensor, gate: Tensor, up: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return silu_grad_launch(d_y, w_down, gate, up, precision=dot_precision(), run=wrap_triton)


@triton_op("mirai::gate_up_down_train", mutates_args=())
def gate_up_down_train(
    x: Tensor,
    w_gate: Tensor,
    b_gate: Optional[Tensor],
    w_up: Tensor,
    b_up: Optional[Tensor],
    w_down: Tensor,
    b_down: Optional[Tensor],
    rows: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The down projection's result is `product @ w_down` [E, M, D]; with `rows`, that plus
    `b_down` [E, 1, D] stored as [M, E, D] (`_product_rows`: the few_rows kernel or
    `mirai::bmm_rows`)."""
    out, gate, up = _run(x, w_gate, b_gate, w_up, b_up, residuals=True)
    if rows:
        return _product_rows(out, w_down, b_down), out, gate, up
    return torch.bmm(out, w_down), out, gate, up


def _setup_context_down(ctx, inputs, output):
    x, w_gate, b_gate, w_up, b_up, w_down, b_down, rows = inputs
    _, out, gate, up = output
    ctx.save_for_backward(x, w_gate, w_up, gate, up, w_down, out)
    ctx.bias_shapes = (
        None if b_gate is None else b_gate.shape,
        None if b_up is None else b_up.shape,
    )
    ctx.rows = rows
    ctx.set_materialize_grads(False)


def _backward_down(ctx, d_y, d_out, d_gate, d_up):
    gate, up, w_down, out = ctx.saved_tensors[3:]
    if d_y is None:  # nothing reached the result: only the other outputs' gradients count
        d_y = out.new_zeros(*out.shape[:2], w_down.shape[2])
    elif ctx.rows:  # [M, E, D] as [E, M, D], read in place
        d_y = d_y.transpose(0, 1)
    if d_out is None and d_gate is None and d_up is None:  # the rewrite's case: y alone is used
        dg, du, sum_g, sum_u = torch.ops.mirai.silu_grad(d_y, w_down, gate, up)
        grads = _through_projections(ctx, dg, du, (sum_g, sum_u))
    else:
        d_h = _added(torch.bmm(d_y, w_down.transpose(1, 2)), d_out)
        dg, du = _silu_mul_grad(d_h, gate, up)
        grads = _through_projections(ctx, _added(dg, d_gate), _added(du, d_up))
    need = ctx.needs_input_grad
    d_w_down = d_b_down = None
    if need[5] and _few(out):  # with the bias's gradient from the same launch
        d_w_down, sums = _weight_grad_few(out, d_y, w_down)
        d_b_down = sums if need[6] else None
    elif need[5]:
        d_w_down = torch.bmm(out.transpose(1, 2), d_y)
    if need[6] and d_b_down is None:
        d_b_down = d_y.sum(1, keepdim=True)
    return (*grads, d_w_down, d_b_down, None)


gate_up_down_train.register_autograd(_backward_down, setup_context=_setup_context_down)


@triton_op("mirai::rows_pair", mutates_args=())
def rows_pair(a: Tensor, b: Tensor, a2: Tensor, b2: Tensor) -> Tensor:
    """a @ b + a2 @ b2 (all [E, M, K] @ [E, K, N]) as [M, E, N], in one launch of the few_rows
    kernel: at few rows, what `bmm_rows(a2, b2, None, bmm_rows(a, b, None, None))` computes in
    two cuBLASLt GEMMs."""
    return few_rows.launch(a, b, None, second=(a2, b2), precision=dot_precision(), run=wrap_triton)


@triton_op("mirai::weight_grad", mutates_args=())
def weight_grad(x: Tensor, d: Tensor, k_major: bool) -> tuple[Tensor, Tensor]:
    """(x^T @ d [E, K, N], K-major with `k_major`; d's column sums [E, 1, N]) for x [E, M, K] and
    d [E, M, N] at few rows M, in one launch of the few_rows kernel."""
    return few_rows.weight_grad(
        x, d, k_major=k_major, sums=True, precision=dot_precision(), run=wrap_triton
    )


def _product_rows(a: Tensor, b: Tensor, bias: Optional[Tensor]) -> Tensor:
    """a [E, M, K] @ b [E, K, N] (+ bias [E, 1, N]) as [M, E, N]: at few rows (FEW_ROWS or less,
    by the size traced) one launch of the few_rows kernel, whose launch costs the host less than a
    cuBLASLt call; else one cuBLASLt GEMM (`mirai::bmm_rows`)."""
    if size_hint(a.shape[1]) <= FEW_ROWS:
        return few_rows.launch(a, b, bias, precision=dot_precision(), run=wrap_triton)
    return torch.ops.mirai.bmm_rows(a, b, bias, None)


@triton_op("mirai::rows_gemm", mutates_args=())
def rows_gemm(a: Tensor, b: Tensor, bias: Optional[Tensor]) -> Tensor:
    """Fusion bmm_rows' operator: a [E, M, K] @ b [E, K, N] (+ bias [E, 1, N]) as [M, E, N], as
    `mirai::bmm_rows(a, b, bias, None)` computes it, run as the few_rows kernel at few rows
    (`_product_rows`). Differentiable as bmm_rows is."""
    _check_rows(a, b, bias, None)
    return _product_rows(a, b, bias)


# flexible_layout: the operator takes its operands in any layout (eager torch.bmm does; the capture
# reads their strides), so Inductor passes the buffer a kernel wrote. Under torch's default for
# custom operators (exact strides) it copied an operand not yet written, in the producing kernel.
@custom_op("mirai::bmm_rows", mutates_args=(), tags=(torch.Tag.flexible_layout,))
def bmm_rows(a: Tensor, b: Tensor, bias: Optional[Tensor], acc: Optional[Tensor]) -> Tensor:
    """a [E, M, K] @ b [E, K, N] (+ bias [E, 1, N]) as [M, E, N] (+ acc [M, E, N]); bias and acc
    are not both given (one GEMM takes one of them)."""
    _check_rows(a, b, bias, acc)
    product = torch.bmm(a, b) if bias is None else torch.baddbmm(bias, a, b)
    out = torch.empty(a.shape[1], a.shape[0], b.shape[2], dtype=a.dtype, device=a.device)
    out.transpose(0, 1).copy_(product)
    return out if acc is None else out.add_(acc)


@bmm_rows.register_fake
def _bmm_rows_fake(a, b, bias, acc):
    _check_rows(a, b, bias, acc)
    return a.new_empty(a.shape[1], a.shape[0], b.shape[2])


def _check_rows(a, b, bias, acc) -> None:
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"mirai::bmm_rows: shapes {tuple(a.shape)} and {tuple(b.shape)}")
    e, m, n = a.shape[0], a.shape[1], b.shape[2]
    if bias is not None and acc is not None:
        raise ValueError("mirai::bmm_rows takes a bias or an addend, not both")
    if bias is not None and tuple(bias.shape) != (e, 1, n):
        raise ValueError(f"mirai::bmm_rows: bias of shape {tuple(bias.shape)}, not {(e, 1, n)}")
    if acc is not None and tuple(acc.shape) != (m, e, n):
        raise ValueError(f"mirai::bmm_rows: addend of shape {tuple(acc.shape)}, not {(m, e, n)}")


def _setup_context_rows(ctx, inputs, output):
    a, b = inputs[:2]  # bmm_rows' (a, b, bias, acc) or rows_gemm's (a, b, bias)
    ctx.save_for_backward(a, b)


def _backward_rows(ctx, d_out):
    a, b = ctx.saved_tensors
    g = d_out.transpose(0, 1)  # [E, M, N], read in place: cuBLASLt takes its row stride
    need = ctx.needs_input_grad
    d_a = torch.bmm(g, b.transpose(1, 2)) if need[0] else None
    d_b = torch.bmm(a.transpose(1, 2), g) if need[1] else None
    d_bias = g.sum(1, keepdim=True) if need[2] else None
    if len(need) == 3:  # rows_gemm: no addend
        return d_a, d_b, d_bias
    return d_a, d_b, d_bias, d_out if need[3] else None


bmm_rows.register_autograd(_backward_rows, setup_context=_setup_context_rows)
rows_gemm.register_autograd(_backward_rows, setup_context=_setup_context_rows)


def rows_major(x: Tensor) -> bool:
    """Whether x [E, M, K] is a transposed view of an [M, E, K] tensor (E > 1): its gradient is
    then best written as bmm_rows writes it, in that tensor's layout."""
    if x.dim() != 3 or x.shape[0] == 1:
        return False
    strides = x.stride()
    if not all(isinstance(s, int) for s in strides):  # a symbolic stride: a [E, M, K] tensor's
        return False
    return strides[2] == 1 and strides[0] < strides[1]
