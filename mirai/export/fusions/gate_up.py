"""The gate/up fusion: `silu(x @ w_gate + b_gate) * (x @ w_up + b_up)` as one Triton kernel.

A gated feed-forward layer (SwiGLU) runs two GEMMs over the same `x` and multiplies their SiLU-gated
results. Inductor gives each GEMM to cuBLAS, writes both [E, M, N] results to memory and reads them back
in a pointwise kernel. `gate_up_kernel` keeps two accumulators over one tile of `x` and applies bias, SiLU
and product in its epilogue, so `x` is read once and only the product is written (a training forward
also writes the two pre-activations, which the backward reads).

On Hopper, TF32 tensor-core instructions read both operands K-major from shared memory, and Triton ran
N-contiguous weights (the usual [K, N] layout) at half cuBLAS's speed; the op therefore makes a K-major
copy of both weights in the call (bench/RESULTS-gate-up.md measured both layouts) unless they are
K-major already, as nn.Linear's [N, K] weights are.

Two ops, both `torch.library.triton_op`s, so that Inductor sees the kernel and emits it into the wrapper
the capture reads:
- `mirai::gate_up_silu` -> the product (inference);
- `mirai::gate_up_silu_train` -> (product, gate, up), with an autograd formula in PyTorch ops that
  Inductor compiles into the backward graph as usual.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Configurations by the rows M the kernel runs over (a bucket's sample in a bucketed build): the
# first entry whose bound is at least M. 128 rows of x by 64 columns of both weights, two fp32
# accumulators, was the fastest of 42 configurations and of persistent grids on the H200 at
# B = 8000, for an inference op and for a training forward alike (bench/RESULTS-gate-up.md). Few
# rows read the weights as stored (below) in 64x32 tiles over K blocks of 64 with one pipeline
# stage: Triton then loads the N-contiguous weights with 16-byte loads into registers, where with
# more stages it copies them 4 bytes at a time into the K-major tiles TF32 wgmma reads; 1.65x-1.69x
# faster than 64x64x32 in 3 stages at B = 64 on an H100, the best of 64 configurations there.
SMALL_M = 256
CONFIGS = (
    (SMALL_M, {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1}),
    (None, {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}),
)
# Few rows (M <= SMALL_M): reading the weights dominates, so the op reads them as stored instead
# of copying them K-major first (which reads and writes them once more): at pffn's B = 64 the two
# copies took 12 of a training forward's 32 us on an H100 (bench/RESULTS-pffn.md).


def config_for(m: int, configs=CONFIGS) -> dict:
    """The configuration for M rows from `configs` ((bound, config) pairs, the last bound None):
    the first whose bound is at least M. By default this kernel's CONFIGS; the fusions' other
    kernels pass their own."""
    return next(dict(c) for bound, c in configs if bound is None or m <= bound)


def size_hint(size) -> int:
    """An int for a size, or the sample value of a symbolic one (without guarding on it)."""
    node = getattr(size, "node", None)
    if node is None:
        return int(size)
    hint = getattr(node, "hint", None)
    return int(hint) if hint is not None else 1 << 30


@triton.jit
def tile_origin(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(expert, row of tiles, first column) of tile number `tile` over [E, M, N] in BLOCK_M x
    BLOCK_N tiles, numbered expert-major, then by rows of tiles (the fusions' kernels all number
    them so: neighbouring programs share their rows of the first operand)."""
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_e = tl.cdiv(M, BLOCK_M) * tiles_n
    return tile // tiles_e, (tile % tiles_e) // tiles_n, (tile % tiles_n) * BLOCK_N


@triton.jit
def rows_dot(
    a_ptr, b_ptr, e, rm, rn, M, N, K, sa_e, sa_m, sa_k, sb_e, sb_k, sb_n,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    MASK_ROWS: tl.constexpr = False,
):  # fmt: skip
    """a[e][rm] @ b[e][:, rn] for a [E, M, K] and b [E, K, N] (their strides given), in fp32: one
    tile of a batched GEMM. Rows past M read row M - 1 again rather than being masked (their results
    are the caller's to leave unstored), so the loads do not depend on what Triton knows of M; with
    MASK_ROWS they are masked instead, for an `a` whose rows are its contiguous dimension (x^T in a
    weight's gradient): there the clamp hides that contiguity from Triton, which then loads `a` 4
    bytes at a time (16 scalar loads per thread for a 128x16 tile, against 4 of 16 bytes masked,
    in the PTX for sm_90)."""
    rk = tl.arange(0, BLOCK_K)
    if MASK_ROWS:
        rows = rm
    else:
        rows = tl.minimum(rm, M - 1)
    a = a_ptr + e * sa_e + rows[:, None] * sa_m + rk[None, :] * sa_k
    b = b_ptr + e * sb_e + rk[:, None] * sb_k + rn[None, :] * sb_n
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + rk) < K
        if MASK_ROWS:
            x = tl.load(a, mask=(rows[:, None] < M) & k_ok[None, :], other=0.0)
        else:
            x = tl.load(a, mask=k_ok[None, :], other=0.0)
        w = tl.load(b, mask=k_ok[:, None] & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, w, acc, input_precision=PRECISION)
        a += BLOCK_K * sa_k
        b += BLOCK_K * sb_k
    return acc


@triton.jit
def gate_up_tile(
    tile, x_ptr, wg_ptr, wu_ptr, bg_ptr, bu_ptr, out_ptr, gate_ptr, up_ptr,
    M, N, K,
    sx_e, sx_m, sx_k,
    sw_e, sw_k, sw_n,
    sb_e, sb_n,
    so_e, so_m, so_n,
    PRECISION: tl.constexpr, HAS_BIAS: tl.constexpr, RESIDUALS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """One BLOCK_M x BLOCK_N tile of the outputs (numbered as tile_origin does)."""
    e, tm, n0 = tile_origin(tile, M, N, BLOCK_M, BLOCK_N)
    m0 = tm * BLOCK_M
    rm = m0 + tl.arange(0, BLOCK_M)
    rn = n0 + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x = x_ptr + e * sx_e + rm[:, None] * sx_m + rk[None, :] * sx_k
    w_offsets = e * sw_e + rk[:, None] * sw_k + rn[None, :] * sw_n
    gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + rk) < K
        a = tl.load(x, mask=(rm[:, None] < M) & k_ok[None, :], other=0.0)
        w_mask = k_ok[:, None] & (rn[None, :] < N)
        wg = tl.load(wg_ptr + w_offsets, mask=w_mask, other=0.0)
        wu = tl.load(wu_ptr + w_offsets, mask=w_mask, other=0.0)
        gate = tl.dot(a, wg, gate, input_precision=PRECISION)
        up = tl.dot(a, wu, up, input_precision=PRECISION)
        x += BLOCK_K * sx_k
        w_offsets += BLOCK_K * sw_k
    n_ok = rn < N
    if HAS_BIAS:
        gate += tl.load(bg_ptr + e * sb_e + rn * sb_n, mask=n_ok, other=0.0)[None, :]
        up += tl.load(bu_ptr + e * sb_e + rn * sb_n, mask=n_ok, other=0.0)[None, :]
    offsets = e * so_e + rm[:, None] * so_m + rn[None, :] * so_n
    mask = (rm[:, None] < M) & n_ok[None, :]
    tl.store(out_ptr + offsets, gate * tl.sigmoid(gate) * up, mask=mask)
    if RESIDUALS:
        tl.store(gate_ptr + offsets, gate, mask=mask)
        tl.store(up_ptr + offsets, up, mask=mask)


@triton.jit
def gate_up_kernel(
    x_ptr, wg_ptr, wu_ptr, bg_ptr, bu_ptr, out_ptr, gate_ptr, up_ptr,
    E, M, N, K,
    sx_e, sx_m, sx_k,
    sw_e, sw_k, sw_n,
    sb_e, sb_n,
    so_e, so_m, so_n,
    PRECISION: tl.constexpr, HAS_BIAS: tl.constexpr, RESIDUALS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PERSISTENT: tl.constexpr,
):  # fmt: skip
    """out[e] = silu(x[e] @ wg[e] + bg[e]) * (x[e] @ wu[e] + bu[e]); with RESIDUALS also gate[e] and
    up[e], the two sums before SiLU and product. Both weights share strides, as do both biases and
    the three outputs. One program per tile, or with PERSISTENT a fixed grid of programs each taking
    every num_programs-th tile (a loop Triton flattens, so the next tile's loads overlap this one's
    epilogue)."""
    args = (
        x_ptr, wg_ptr, wu_ptr, bg_ptr, bu_ptr, out_ptr, gate_ptr, up_ptr, M, N, K,
        sx_e, sx_m, sx_k, sw_e, sw_k, sw_n, sb_e, sb_n, so_e, so_m, so_n,
    )  # fmt: skip
    if PERSISTENT:
        tiles = E * tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=True):
            gate_up_tile(tile, *args, PRECISION, HAS_BIAS, RESIDUALS, BLOCK_M, BLOCK_N, BLOCK_K)
    else:
        gate_up_tile(
            tl.program_id(0), *args, PRECISION, HAS_BIAS, RESIDUALS, BLOCK_M, BLOCK_N, BLOCK_K
        )


def k_major(w):
    """`w` [E, K, N] with its K dimension contiguous (a copy unless it already is)."""
    return w if w.stride(1) == 1 else w.transpose(1, 2).contiguous().transpose(1, 2)


def launch(
    x, w_gate, b_gate, w_up, b_up, *, residuals: bool, precision: str, config=None, run=None
):
    """Run gate_up_kernel: x [E, M, K], weights [E, K, N] of the same strides, biases (or None)
    broadcastable to [E, 1, N]. Returns (product, gate, up), the last two None unless `residuals`.
    `run` wraps the kernel before launch (torch.library.wrap_triton inside an op); `config` overrides
    config_for(M) (the CPU tests use small blocks): BLOCK_M/N/K, num_warps, num_stages, and
    optionally `programs`, a persistent grid's size."""
    import torch

    e, m, k = x.shape
    cfg = config_for(size_hint(m)) if config is None else dict(config)
    n = w_gate.shape[2]
    if w_up.shape != w_gate.shape or w_up.stride() != w_gate.stride():
        raise ValueError("gate_up: both weights must have the same shape and strides")
    has_bias = b_gate is not None
    if has_bias != (b_up is not None):
        raise ValueError("gate_up: give both biases or neither")
    if has_bias:
        b_gate, b_up = b_gate.expand(e, 1, n), b_up.expand(e, 1, n)
        if b_gate.stride() != b_up.stride():
            b_gate, b_up = b_gate.contiguous(), b_up.contiguous()
        bias_strides = (b_gate.stride(0), b_gate.stride(2))
    else:
        b_gate = b_up = x  # never read
        bias_strides = (0, 0)
    out = torch.empty((e, m, n), device=x.device, dtype=torch.float32)
    gate = torch.empty_like(out) if residuals else out
    up = torch.empty_like(out) if residuals else out
    blocks = {key: value for key, value in cfg.items() if key.startswith("BLOCK_")}
    options = {key: value for key, value in cfg.items() if key in ("num_warps", "num_stages")}
    tiles = e * triton.cdiv(m, blocks["BLOCK_M"]) * triton.cdiv(n, blocks["BLOCK_N"])
    # a persistent grid of this many programs: for the sweep (bench_gate_up.py), which runs outside
    # a trace; the export's configurations keep one program per tile (min would guard on M there)
    programs = cfg.get("programs")
    grid = (tiles if programs is None else min(tiles, programs),)
    kernel = gate_up_kernel if run is None else run(gate_up_kernel)
    kernel[grid](
        x, w_gate, w_up, b_gate, b_up, out, gate, up, e, m, n, k,
        *x.stride(), *w_gate.stride(), *bias_strides, *out.stride(),
        PRECISION=precision, HAS_BIAS=has_bias, RESIDUALS=residuals, **blocks,
        PERSISTENT=programs is not None, **options,
    )  # fmt: skip
    return out, (gate if residuals else None), (up if residuals else None)
