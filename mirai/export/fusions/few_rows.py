"""pffn's GEMMs at few rows as one Triton kernel, `rows_kernel`: launches the host pays less for.

`bmm_rows` (mirai.export.fusions.rows) is one cuBLASLt GEMM writing [M, E, N] with the bias in its
epilogue. At a few rows per expert the GEMM takes a few microseconds of GPU time, and the cuBLASLt
call around it costs the host more than a Triton launch does: pffn's training forward at B = 8,
one Triton launch and one cuBLASLt call, took 12.3 us of host time on the H200 (2.66x the two
launches' floor) and 19.0 us on an H100, where with this kernel instead it took 7.5 us (1.09x;
bench/RESULTS-pffn.md). `rows_kernel` computes a [E, M, K] @ [E, K, N] GEMM, plus optionally a
second one of the same shapes and a [E, 1, N] bias, stored through any output strides, and
optionally the column sums of its second operand. Three forms:

- `launch`: the forward's down projection as bmm_rows computes it, stored [M, E, N];
- `launch(..., second=...)`: x's gradient in the backward, `d_gate @ w_gate^T + d_up @ w_up^T`,
  one launch where bmm_rows took two GEMMs;
- `weight_grad`: a weight's gradient x^T @ d with its bias's (d's column sums) in one launch,
  where cuBLASLt took a GEMM and Inductor a summing kernel.

Where they run instead of cuBLASLt is decided when an op is traced, by the rows of the sample (a
bucket's, in a bucketed build), as the gate/up kernel's configuration is: at most FEW_ROWS rows for
the forward, FEW_ROWS_BACKWARD for the backward.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mirai.export.fusions import gate_up
from mirai.export.fusions.gate_up import rows_dot, size_hint, tile_origin

# The most rows per expert for which the down projection runs as this kernel rather than cuBLASLt:
# the largest M swept (below); past it cuBLASLt, as measured before this kernel existed.
FEW_ROWS = 64
# The same for the backward's GEMMs (mirai.export.fusions.ops): x's gradient in one launch and
# each weight's with its bias's in one, five cuBLASLt GEMMs and three summing kernels becoming four
# launches. Measured in pffn's op (bench/RESULTS-pffn.md, GPU time of forward+backward as CUDA
# graphs): at B = 64 on an H200, 0.069 ms against 0.070 with cuBLASLt, host time of the backward
# 23 us (1.21x its launches' floor) where cuBLASLt's took 57-69 us on an H100 (1.52x-2.06x); at
# B = 8 on an H100, 0.060-0.064 against 0.070 ms. At 64 rows the weights' gradients need their
# own tiles (WEIGHT_CONFIGS): in those chosen at 8 rows the backward took 0.095 ms.
FEW_ROWS_BACKWARD = 64
# Configurations by rows, as gate_up.CONFIGS: the fastest of a sweep on an H100 at pffn's E = 8,
# K = 1024, N = 256 (bench/RESULTS-few-rows.md; GPU time of the kernel as a CUDA graph): 6.0 us at
# M = 8 and 6.2 us at M = 64, where torch's cuBLAS bmm took 10.4 and 9.4 us and baddbmm (with the
# bias) 12.6 and 11.8. Blocks of 16 rows by 16 columns at M = 8 and of 32 by 32 at M = 64 both give
# 128 programs, about one per multiprocessor (an H100 has 132), without splitting K. Pipelined
# loads (3 stages) of K blocks of 128 ran 2.3x faster than the one stage of 64 first used in the
# op (14.2 and 14.4 us).
CONFIGS = (
    (16, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}),
    (None, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}),
)


# weight_grad's configurations by rows (its K is the rows, at most FEW_ROWS_BACKWARD in the
# export): tiles of a weight's gradient, the sum over rows short. The fastest of sweeps on an H100
# at pffn's shapes (bench/RESULTS-few-rows.md: the gate/up weights' [8, 256, 1024] and the down
# weight's [8, 1024, 256] gradients with their biases', operands cold in L2). At M = 8: 4.7-4.8 us
# for 128x32 tiles over K blocks of 16 in one stage (one load round). At M = 64 that configuration
# takes 17 us, four serial rounds of loads per tile with nothing in flight; 32x64 tiles over K
# blocks of 32 in 3 stages take 8.1-9.3 us (32x128x64 in one stage 8.8-9.1), against 9-11 us for
# cuBLAS with the bias's summing kernel. x^T's rows load 16 bytes at a time (rows_dot's MASK_ROWS,
# tests/test_bench_few_rows.py).
WEIGHT_CONFIGS = (
    (16, {"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4, "num_stages": 1}),
    (None, {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}),
)


def config_for(m: int) -> dict:
    """The kernel's configuration for a product over M rows (see CONFIGS)."""
    return gate_up.config_for(m, CONFIGS)


def weight_config_for(m: int) -> dict:
    """The kernel's configuration for a weight's gradient over M rows (see WEIGHT_CONFIGS)."""
    return gate_up.config_for(m, WEIGHT_CONFIGS)


@triton.jit
def rows_kernel(
    a_ptr, b_ptr, a2_ptr, b2_ptr, bias_ptr, out_ptr, sum_ptr,
    M, N, K,
    sa_e, sa_m, sa_k,
    sb_e, sb_k, sb_n,
    sa2_e, sa2_m, sa2_k,
    sb2_e, sb2_k, sb2_n,
    sc_e, sc_n,
    so_e, so_m, so_n,
    ss_e, ss_n,
    PRECISION: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_SECOND: tl.constexpr,
    HAS_SUM: tl.constexpr, MASK_ROWS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """out[e] = a[e] @ b[e] (+ a2[e] @ b2[e]) (+ bias[e]) for a, a2 [E, M, K], b, b2 [E, K, N],
    bias [E, 1, N] (its strides sc_e, sc_n), through the output's strides; with HAS_SUM, also
    sum[e, n] = the sum of b[e][:, n] over K (strides ss_e, ss_n), written by the programs of the
    first row of tiles. One program per BLOCK_M x BLOCK_N tile (numbered as gate_up.tile_origin
    does); MASK_ROWS as gate_up.rows_dot takes it (for an `a` whose rows are contiguous)."""
    e, tm, n0 = tile_origin(tl.program_id(0), M, N, BLOCK_M, BLOCK_N)
    m0 = tm * BLOCK_M
    rm = m0 + tl.arange(0, BLOCK_M)
    rn = n0 + tl.arange(0, BLOCK_N)
    n_ok = rn < N
    acc = rows_dot(
        a_ptr, b_ptr, e, rm, rn, M, N, K, sa_e, sa_m, sa_k, sb_e, sb_k, sb_n,
        PRECISION, BLOCK_M, BLOCK_N, BLOCK_K, MASK_ROWS,
    )  # fmt: skip
    if HAS_SECOND:
        acc += rows_dot(
            a2_ptr, b2_ptr, e, rm, rn, M, N, K, sa2_e, sa2_m, sa2_k, sb2_e, sb2_k, sb2_n,
            PRECISION, BLOCK_M, BLOCK_N, BLOCK_K, MASK_ROWS,
        )  # fmt: skip
    if HAS_BIAS:
        acc += tl.load(bias_ptr + e * sc_e + rn * sc_n, mask=n_ok, other=0.0)[None, :]
    out = out_ptr + e * so_e + rm[:, None] * so_m + rn[None, :] * so_n
    tl.store(out, acc, mask=(rm[:, None] < M) & n_ok[None, :])
    if HAS_SUM:
        if tm == 0:
            rk = tl.arange(0, BLOCK_K)
            total = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                k_ok = (k0 + rk) < K
                b = b_ptr + e * sb_e + (k0 + rk)[:, None] * sb_k + rn[None, :] * sb_n
                total += tl.sum(tl.load(b, mask=k_ok[:, None] & n_ok[None, :], other=0.0), 0)
            tl.store(sum_ptr + e * ss_e + rn * ss_n, total, mask=n_ok)


def _blocks(cfg: dict) -> tuple[dict, dict]:
    blocks = {key: value for key, value in cfg.items() if key.startswith("BLOCK_")}
    options = {key: value for key, value in cfg.items() if key in ("num_warps", "num_stages")}
    return blocks, options


def _check(what: str, a, b, second=None) -> None:
    """A clear error for operands that do not make a batched GEMM [E, M, K] @ [E, K, N] (and, with
    `second`, a second one of the same shapes), before any kernel reads them."""
    pairs = [(a, b)] + ([] if second is None else [tuple(second)])
    for x, y in pairs:
        if x.dim() != 3 or y.dim() != 3 or x.shape[0] != y.shape[0] or x.shape[2] != y.shape[1]:
            raise ValueError(f"few_rows.{what}: shapes {tuple(x.shape)} and {tuple(y.shape)}")
    if second is not None and (pairs[1][0].shape != a.shape or pairs[1][1].shape != b.shape):
        raise ValueError(
            f"few_rows.{what}: the second product's shapes {tuple(pairs[1][0].shape)} and "
            f"{tuple(pairs[1][1].shape)} differ from the first's {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )


def _launch(a, b, out, *, second=None, bias=None, sums=None, cfg: dict, precision: str, run):
    """rows_kernel over `out` [E, M, N] (a view through any strides): out = a @ b (+ second's
    product) (+ bias); `sums` [E, 1, N], where given, gets b's column sums."""
    e, m, k = a.shape
    n = b.shape[2]
    blocks, options = _blocks(cfg)
    has_bias = bias is not None
    if has_bias:
        bias = bias.expand(e, 1, n)
        bias_strides = (bias.stride(0), bias.stride(2))
    else:
        bias, bias_strides = out, (0, 0)  # never read
    # Unused pointers get `out`, never `a`: Inductor stores an operand computed by a kernel of its
    # own into a buffer for each argument that names it, so `a` passed again was `a` stored again.
    a2, b2 = (out, out) if second is None else second
    second_strides = (0,) * 6 if second is None else (*a2.stride(), *b2.stride())
    sum_strides = (0, 0) if sums is None else (sums.stride(0), sums.stride(2))
    grid = (e * triton.cdiv(m, blocks["BLOCK_M"]) * triton.cdiv(n, blocks["BLOCK_N"]),)
    # a's rows contiguous (x^T in weight_grad): masked, not clamped, so that they load as vectors
    mask_rows = isinstance(a.stride(1), int) and a.stride(1) == 1
    kernel = rows_kernel if run is None else run(rows_kernel)
    kernel[grid](
        a, b, a2, b2, bias, out, out if sums is None else sums, m, n, k,
        *a.stride(), *b.stride(), *second_strides, *bias_strides, *out.stride(),
        *sum_strides,
        PRECISION=precision, HAS_BIAS=has_bias,
        HAS_SECOND=second is not None, HAS_SUM=sums is not None, MASK_ROWS=mask_rows,
        **blocks, **options,
    )  # fmt: skip


def launch(a, b, bias, *, second=None, precision: str, config=None, run=None):
    """a [E, M, K] @ b [E, K, N] (+ bias, broadcastable to [E, 1, N]) as a new [M, E, N] tensor,
    as `mirai::bmm_rows(a, b, bias, None)` returns it; `second`, a pair (a2, b2) of a's and b's
    shapes, adds a2 @ b2 in the same kernel (as bmm_rows with an addend, `acc`, adds a second
    GEMM's result). `run` and `config` as in mirai.export.fusions.gate_up.launch."""
    import torch

    _check("launch", a, b, second)
    e, m, _ = a.shape
    n = b.shape[2]
    cfg = config_for(size_hint(m)) if config is None else dict(config)
    out = torch.empty((m, e, n), device=a.device, dtype=torch.float32)
    _launch(
        a, b, out.transpose(0, 1), second=second, bias=bias, cfg=cfg, precision=precision, run=run
    )
    return out


def weight_grad(x, d, *, k_major: bool, sums: bool, precision: str, config=None, run=None):
    """x^T @ d for x [E, M, K] and d [E, M, N]: a weight's gradient [E, K, N] at few rows M, in one
    launch; K-major with `k_major` (as the gradient of a K-major weight, such as nn.Linear's [N, K]
    seen as [1, K, N], is best laid out), else row-major; with `sums`, also d's column sums
    [E, 1, N] (the gradient of the bias added after that weight), from the same kernel. Returns
    (gradient, sums or None)."""
    import torch

    _check("weight_grad", x.transpose(1, 2) if x.dim() == 3 else x, d)
    e, m, k = x.shape
    n = d.shape[2]
    cfg = weight_config_for(size_hint(m)) if config is None else dict(config)
    if k_major:
        grad = torch.empty((e, n, k), device=x.device, dtype=torch.float32).transpose(1, 2)
    else:
        grad = torch.empty((e, k, n), device=x.device, dtype=torch.float32)
    total = torch.empty((e, 1, n), device=x.device, dtype=torch.float32) if sums else None
    _launch(x.transpose(1, 2), d, grad, sums=total, cfg=cfg, precision=precision, run=run)
    return grad, total
