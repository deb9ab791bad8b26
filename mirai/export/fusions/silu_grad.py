"""The down projection's input gradient with the SiLU product's gradient in its epilogue, as one Triton
kernel: the backward half of fusion `gate_up_down`.

A gated feed-forward layer ends in a down projection, `y = (silu(gate) * up) @ w_down`. Its backward
first computes `d_h = d_y @ w_down^T` (a GEMM), then the gradients of the product's two inputs,
`d_gate = d_h * up * silu'(gate)` and `d_up = d_h * silu(gate)` (a pointwise kernel), and then sums
both over the rows for the biases' gradients (a reduction). Inductor writes `d_h` to memory and reads
it back, and reads `d_gate` and `d_up` again for the sums: at pffn's B = 8000 each is a 262 MB tensor.
`silu_grad_kernel` keeps `d_h` in registers: each program computes one tile of it, reads the same
tile of `gate` and `up`, writes the tiles of `d_gate` and `d_up`, and also their column sums over
the tile's rows (one row of partial sums per row of tiles; the caller adds those up, in a
fixed order, so the result does not depend on the programs' timing as atomics would make it).
"""

from __future__ import annotations

import triton
import triton.language as tl

from mirai.export.fusions import gate_up
from mirai.export.fusions.gate_up import rows_dot, size_hint, tile_origin

# One configuration for every M: the fastest of 42 in a sweep on an H100 at B = 2000 and 8000, and
# within 1% of the fastest at B = 512 (bench/bench_silu_grad.py --sweep). 64 x 64 tiles hold one
# accumulator, and a tile of gate and of up in the epilogue, in 4 warps' registers.
CONFIGS = ((None, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3}),)


def config_for(m: int) -> dict:
    """The kernel's configuration for M rows (see CONFIGS)."""
    return gate_up.config_for(m, CONFIGS)


@triton.jit
def _epilogue(
    dh, gate, up, gate_ptr, up_ptr, dg_ptr, du_ptr, sum_g_ptr, sum_u_ptr, saved, out, sums, mask,
    n_ok, EARLY: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    """d_gate, d_up and their column sums from one tile of d_h (gate and up loaded already if
    EARLY). MASKED: the tile reaches past M or N, so its loads and stores are masked by `mask`; a
    full tile's are not masked at all."""
    if not EARLY:
        if MASKED:
            gate = tl.load(gate_ptr + saved, mask=mask, other=0.0)
            up = tl.load(up_ptr + saved, mask=mask, other=0.0)
        else:
            gate = tl.load(gate_ptr + saved)
            up = tl.load(up_ptr + saved)
    sig = tl.sigmoid(gate)
    dg = dh * up * sig * (1 + gate * (1 - sig))
    du = dh * gate * sig
    if MASKED:  # rows past M add nothing to the sums (their d_h read row M - 1 again)
        dg = tl.where(mask, dg, 0.0)
        du = tl.where(mask, du, 0.0)
        tl.store(dg_ptr + out, dg, mask=mask)
        tl.store(du_ptr + out, du, mask=mask)
    else:
        tl.store(dg_ptr + out, dg)
        tl.store(du_ptr + out, du)
    tl.store(sum_g_ptr + sums, tl.sum(dg, axis=0), mask=n_ok)
    tl.store(sum_u_ptr + sums, tl.sum(du, axis=0), mask=n_ok)


@triton.jit
def silu_grad_kernel(
    dy_ptr, w_ptr, gate_ptr, up_ptr, dg_ptr, du_ptr, sum_g_ptr, sum_u_ptr,
    M, N, K,
    sd_e, sd_m, sd_k,
    sw_e, sw_n, sw_k,
    sg_e, sg_m, sg_n,
    so_e, so_m, so_n,
    ss_e, ss_t, ss_n,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EARLY: tl.constexpr,
):  # fmt: skip
    """d_h = dy[e] @ w[e]^T (dy [E, M, K], w [E, N, K]); d_gate = d_h * up * silu'(gate), d_up = d_h *
    silu(gate) ([E, M, N], gate and up of one set of strides, both outputs of another); and the
    column sums of both over this tile's rows, into row m // BLOCK_M of sum_g and sum_u
    [E, cdiv(M, BLOCK_M), N]. Tiles are numbered expert-major, then by rows of tiles. EARLY: load
    the tiles of gate and up before the GEMM rather than after it."""
    e, tm, n0 = tile_origin(tl.program_id(0), M, N, BLOCK_M, BLOCK_N)
    m0 = tm * BLOCK_M
    rm = m0 + tl.arange(0, BLOCK_M)
    rn = n0 + tl.arange(0, BLOCK_N)
    n_ok = rn < N
    mask = (rm[:, None] < M) & n_ok[None, :]
    saved = e * sg_e + rm[:, None] * sg_m + rn[None, :] * sg_n
    if EARLY:  # the epilogue's operands first, their loads overlapping the GEMM's
        gate = tl.load(gate_ptr + saved, mask=mask, other=0.0)
        up = tl.load(up_ptr + saved, mask=mask, other=0.0)
    # rows past M read row M - 1 again (gate_up.rows_dot), so the GEMM's loads do not depend on
    # what Triton knows of M either (see the epilogue below)
    dh = rows_dot(
        dy_ptr, w_ptr, e, rm, rn, M, N, K, sd_e, sd_m, sd_k, sw_e, sw_k, sw_n,
        PRECISION, BLOCK_M, BLOCK_N, BLOCK_K,
    )  # fmt: skip
    if not EARLY:  # loaded in the epilogue; dh stands in for them until then
        gate = dh
        up = dh
    out = e * so_e + rm[:, None] * so_m + rn[None, :] * so_n
    sums = e * ss_e + tm * ss_t + rn * ss_n
    # A full tile (all of it inside M and N) runs its epilogue without masks. Masked loads and stores
    # depend on what Triton knows of M, which a dynamic build cannot specialize as a static one does
    # (M divisible by 16): masked throughout, the kernel ran 17% slower there in the op at B = 8000
    # on an H100 (707 against 600 us); masking columns only was slower still.
    if (m0 + BLOCK_M <= M) & (n0 + BLOCK_N <= N):
        _epilogue(
            dh, gate, up, gate_ptr, up_ptr, dg_ptr, du_ptr, sum_g_ptr, sum_u_ptr, saved, out, sums,
            mask, n_ok, EARLY, False,
        )  # fmt: skip
    else:
        _epilogue(
            dh, gate, up, gate_ptr, up_ptr, dg_ptr, du_ptr, sum_g_ptr, sum_u_ptr, saved, out, sums,
            mask, n_ok, EARLY, True,
        )  # fmt: skip


def launch(dy, w_down, gate, up, *, precision: str, config=None, run=None):
    """Run silu_grad_kernel: dy [E, M, K], w_down [E, N, K] (the down projection's weight as
    `h @ w_down` reads it: [E, N, K] here is its [E, K_h, D] with N = hidden, K = D), gate and up
    [E, M, N] of the same strides. Returns (d_gate, d_up, sum_g, sum_u): the last two [E, N], the
    column sums of the first two over M (the biases' gradients). `run` and `config` as in
    mirai.export.fusions.gate_up.launch."""
    import torch

    e, m, k = dy.shape
    n = w_down.shape[1]
    if gate.stride() != up.stride():
        raise ValueError("silu_grad: gate and up must have the same strides")
    cfg = config_for(size_hint(m)) if config is None else dict(config)
    blocks = {key: value for key, value in cfg.items() if key.startswith("BLOCK_")}
    blocks["EARLY"] = bool(cfg.get("EARLY", False))
    options = {key: value for key, value in cfg.items() if key in ("num_warps", "num_stages")}
    d_gate = torch.empty((e, m, n), device=dy.device, dtype=torch.float32)
    d_up = torch.empty_like(d_gate)
    rows = triton.cdiv(m, blocks["BLOCK_M"])
    part_g = torch.empty((e, rows, n), device=dy.device, dtype=torch.float32)
    part_u = torch.empty_like(part_g)
    grid = (e * rows * triton.cdiv(n, blocks["BLOCK_N"]),)
    kernel = silu_grad_kernel if run is None else run(silu_grad_kernel)
    kernel[grid](
        dy, w_down, gate, up, d_gate, d_up, part_g, part_u, m, n, k,
        *dy.stride(), *w_down.stride(), *gate.stride(), *d_gate.stride(), *part_g.stride(),
        PRECISION=precision, **blocks, **options,
    )  # fmt: skip
    return d_gate, d_up, part_g.sum(1), part_u.sum(1)
