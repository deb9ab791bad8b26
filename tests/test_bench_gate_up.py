"""bench/bench_gate_up.py's fused gate/up kernel computes what pffn's first half computes: run on the
CPU through Triton's interpreter (TRITON_INTERPRET=1, in a child process, as the CPU driver of the
export runs kernels) for pffn's weight layout and a K-major copy, with sizes that leave partial tiles
in every dimension, against float64 PyTorch; and in a persistent grid."""

from __future__ import annotations

from tests.export.conftest import interpreted

CHILD = r"""
import json, sys
import torch
sys.path.insert(0, "bench")
from bench_gate_up import gate_up, reference

g = torch.Generator().manual_seed(0)
e, m, k, n = 2, 37, 40, 72   # partial tiles along M, K and N for 16x32x16 blocks
inputs = torch.randn(m, e, k, generator=g)
x = inputs.transpose(0, 1)   # [E, M, K] with pffn's strides: the op reads its input this way
w_gate = torch.randn(e, k, n, generator=g) * k**-0.5
w_up = torch.randn(e, k, n, generator=g) * k**-0.5
b_gate = torch.randn(e, n, generator=g) * 0.1
b_up = torch.randn(e, n, generator=g) * 0.1
expect = reference(*(t.double() for t in (x, w_gate, b_gate, w_up, b_up)))
k_major = lambda w: w.transpose(1, 2).contiguous().transpose(1, 2)
config = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}
errors = {}
for layout, (wg, wu) in {"stored": (w_gate, w_up), "k_major": (k_major(w_gate), k_major(w_up))}.items():
    got = gate_up(x, wg, b_gate, wu, b_up, precision="ieee", config=config)
    assert got.shape == (e, m, n), got.shape
    errors[layout] = float((got.double() - expect).norm() / expect.norm())
# a persistent grid: 3 programs for 2 x 3 x 3 tiles, each taking every third tile
got = gate_up(x, w_gate, b_gate, w_up, b_up, precision="ieee", config={**config, "programs": 3})
errors["persistent"] = float((got.double() - expect).norm() / expect.norm())
try:
    gate_up(x, w_gate, b_gate, k_major(w_up), b_up, config=config)
    errors["mixed"] = "accepted"
except ValueError as err:
    errors["mixed"] = str(err)
print(json.dumps(errors))
"""


def test_the_fused_gate_up_kernel_computes_pffns_first_half():
    errors = interpreted(CHILD)
    # fp32 products of 40 terms, accumulated in fp32: a few ulps of the result
    assert errors["stored"] < 1e-6 and errors["k_major"] < 1e-6, errors
    assert errors["persistent"] < 1e-6, errors
    assert "same shape and strides" in errors["mixed"]


def test_the_sweep_grid_fits_the_chip_and_follows_the_rows():
    import sys

    sys.path.insert(0, "bench")
    from bench_gate_up import ACCUMULATOR_REGISTERS, SMEM_BYTES, configurations

    from mirai.export.fusions.gate_up import SMALL_M, config_for

    for rows in (64, SMALL_M, SMALL_M + 1, 8000):
        grid = configurations(rows)
        assert grid and config_for(rows) in grid, rows  # the export's own is among them
        for c in grid:
            bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
            assert c["num_stages"] * (bm * bk + 2 * bk * bn) * 4 <= SMEM_BYTES, c
            assert 2 * bm * bn // (32 * c["num_warps"]) <= ACCUMULATOR_REGISTERS, c
    # few rows: 64-row tiles only, and deeper K blocks than the grid for many rows
    small, large = configurations(64), configurations(8000)
    assert {c["BLOCK_M"] for c in small} == {64}
    assert max(c["BLOCK_K"] for c in small) > max(c["BLOCK_K"] for c in large)
