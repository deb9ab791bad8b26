"""`mirai::bmm_rows` for few rows as a Triton kernel: the down projection of a small batch.

`bmm_rows` (mirai.export.fusions.rows) is one cuBLASLt GEMM writing [M, E, N] with the bias in its
epilogue. At a few rows per expert the GEMM takes a few microseconds of GPU time, and the cuBLASLt
call around it costs the host more than a Triton launch does: pffn's training forward at B = 8,
one Triton launch and one cuBLASLt call, took 12.3 us of host time on the H200 (2.66x the two
launches' floor) and 19.0 us on an H100, where with this kernel instead it took 7.5 us (1.09x;
bench/RESULTS-pffn.md). `rows_kernel` computes the same thing, a [E, M, K] @ [E, K, N] GEMM plus a
[E, 1, N] bias stored through any output strides ([M, E, N] here), in one launch.

Where it runs instead of cuBLASLt is decided when an op is traced, by the rows of the sample (a
bucket's, in a bucketed build), as the gate/up kernel's configuration is: at most FEW_ROWS.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mirai.export.fusions import gate_up
from mirai.export.fusions.gate_up import rows_dot, size_hint, tile_origin

# The most rows per expert for which the down projection runs as this kernel rather than cuBLASLt:
# the largest M swept (below); past it cuBLASLt, as measured before this kernel existed.
FEW_ROWS = 64
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


def config_for(m: int) -> dict:
    """The kernel's configuration for M rows (see CONFIGS)."""
    return gate_up.config_for(m, CONFIGS)


@triton.jit
def rows_kernel(
    a_ptr, b_ptr, bias_ptr, out_ptr,
    M, N, K,
    sa_e, sa_m, sa_k,
    sb_e, sb_k, sb_n,
    sc_e, sc_n,
    so_e, so_m, so_n,
    PRECISION: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """out[e] = a[e] @ b[e] (+ bias[e]) for a [E, M, K], b [E, K, N], bias [E, 1, N] (its strides
    sc_e, sc_n) through the output's strides. One program per BLOCK_M x BLOCK_N tile (numbered as
    gate_up.tile_origin does)."""
    e, tm, n0 = tile_origin(tl.program_id(0), M, N, BLOCK_M, BLOCK_N)
    m0 = tm * BLOCK_M
    rm = m0 + tl.arange(0, BLOCK_M)
    rn = n0 + tl.arange(0, BLOCK_N)
    n_ok = rn < N
    acc = rows_dot(
        a_ptr, b_ptr, e, rm, rn, M, N, K, sa_e, sa_m, sa_k, sb_e, sb_k, sb_n,
        PRECISION, BLOCK_M, BLOCK_N, BLOCK_K,
    )  # fmt: skip
    if HAS_BIAS:
        acc += tl.load(bias_ptr + e * sc_e + rn * sc_n, mask=n_ok, other=0.0)[None, :]
    out = out_ptr + e * so_e + rm[:, None] * so_m + rn[None, :] * so_n
    tl.store(out, acc, mask=(rm[:, None] < M) & n_ok[None, :])


def launch(a, b, bias, *, precision: str, config=None, run=None):
    """a [E, M, K] @ b [E, K, N] (+ bias, broadcastable to [E, 1, N]) as a new [M, E, N] tensor,
    as `mirai::bmm_rows(a, b, bias, None)` returns it. `run` and `config` as in
    mirai.export.fusions.gate_up.launch."""
    import torch

    e, m, k = a.shape
    n = b.shape[2]
    cfg = config_for(size_hint(m)) if config is None else dict(config)
    blocks = {key: value for key, value in cfg.items() if key.startswith("BLOCK_")}
    options = {key: value for key, value in cfg.items() if key in ("num_warps", "num_stages")}
    has_bias = bias is not None
    if has_bias:
        bias = bias.expand(e, 1, n)
        bias_strides = (bias.stride(0), bias.stride(2))
    else:
        bias, bias_strides = a, (0, 0)  # never read
    out = torch.empty((m, e, n), device=a.device, dtype=torch.float32)
    rows = out.transpose(0, 1)  # [E, M, N] view of it
    grid = (e * triton.cdiv(m, blocks["BLOCK_M"]) * triton.cdiv(n, blocks["BLOCK_N"]),)
    kernel = rows_kernel if run is None else run(rows_kernel)
    kernel[grid](
        a, b, bias, out, m, n, k,
        *a.stride(), *b.stride(), *bias_strides, *rows.stride(),
        PRECISION=precision, HAS_BIAS=has_bias, **blocks, **options,
    )  # fmt: skip
    return out
