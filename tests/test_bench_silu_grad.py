"""The fused backward kernel of `gate_up_down` (mirai.export.fusions.silu_grad) computes what
bench/bench_silu_grad.py's reference computes, the start of pffn's backward: run on the CPU through
Triton's interpreter (in a child process, as the CPU driver of the export runs kernels), with sizes
that leave partial tiles in every dimension, against float64 PyTorch."""

from __future__ import annotations

from tests.export.conftest import interpreted

CHILD = r"""
import json, sys
import torch
sys.path.insert(0, "bench")
from bench_silu_grad import reference
from mirai.export.fusions.silu_grad import launch

g = torch.Generator().manual_seed(0)
e, m, k, n = 2, 37, 40, 72   # partial tiles along M, K and N for 16x32x16 blocks
d_y = torch.randn(e, m, k, generator=g)
w_down = torch.randn(e, n, k, generator=g) * n**-0.5   # [E, H, D] as pffn stores it
gate = torch.randn(m, e, n, generator=g).transpose(0, 1)   # not contiguous: strides are read
up = torch.randn(m, e, n, generator=g).transpose(0, 1)
expect = reference(*(t.double() for t in (d_y, w_down, gate, up)))
names = ["d_gate", "d_up", "sum_gate", "sum_up"]
report = {}
for early in (False, True):   # the epilogue's loads after the GEMM, and before it
    got = launch(d_y, w_down, gate, up, precision="ieee", config={
        "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4, "num_stages": 1, "EARLY": early})
    report["shapes"] = [list(t.shape) for t in got]
    report.update({f"{name} {early}": float((a.double() - b).norm() / b.norm())
                   for name, a, b in zip(names, got, expect)})
try:
    launch(d_y, w_down, gate, up.contiguous(), precision="ieee")
    report["mixed"] = "accepted"
except ValueError as err:
    report["mixed"] = str(err)
print(json.dumps(report))
"""


def test_the_fused_silu_grad_kernel_computes_the_start_of_pffns_backward():
    report = interpreted(CHILD)
    assert report["shapes"] == [[2, 37, 72], [2, 37, 72], [2, 72], [2, 72]], report
    # fp32 products of 40 terms, then a fp32 sum over 37 rows: a few ulps of the result
    for name in ("d_gate", "d_up", "sum_gate", "sum_up"):
        assert report[f"{name} False"] < 1e-6 and report[f"{name} True"] < 1e-6, report
    assert "same strides" in report["mixed"]


def test_the_sweep_table_ranks_against_the_export_configuration():
    import sys

    sys.path.insert(0, "bench")
    from bench_silu_grad import render_sweep

    text = render_sweep(
        {8000: [("64x64x64 w4 s3", 0.5), ("128x128x32 w8 s3 (export)", 0.6)]}, "GPU, versions"
    )
    assert "| 8000 | 64x64x64 w4 s3 | 0.5000 | 67 | 1.20x |" in text, text
    assert "| 8000 | 128x128x32 w8 s3 (export) | 0.6000 | 56 | 1.00x |" in text, text
    assert "84 at B = 8000 configurations" in text and "twice the L2 cache" in text, text


def test_the_sweep_grid_has_short_blocks_at_few_rows_only():
    """At few rows the grid has blocks of 16 rows (and of 32 and 64 where the batch has that many),
    each fitting the chip; past FEW_ROWS the blocks start at 64 rows."""
    import sys

    sys.path.insert(0, "bench")
    from bench_silu_grad import ACCUMULATOR_REGISTERS, FEW_ROWS, SMEM_BYTES, configurations

    def heights(batch):
        return sorted({c["BLOCK_M"] for c in configurations(batch)})

    assert heights(8) == [16] and heights(32) == [16, 32] and heights(FEW_ROWS) == [16, 32, 64]
    assert heights(FEW_ROWS + 1) == [64, 128, 256]
    for batch in (8, FEW_ROWS, 8000):
        for c in configurations(batch):
            smem = c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 4
            assert smem <= SMEM_BYTES, c
            assert c["BLOCK_M"] * c["BLOCK_N"] // (32 * c["num_warps"]) <= ACCUMULATOR_REGISTERS
    one_stage = [c for c in configurations(8) if c["num_stages"] == 1]
    assert one_stage and {c["EARLY"] for c in one_stage} == {False, True}


def test_the_comparison_table_rates_candidates_against_the_peer_and_names_the_configuration():
    import sys

    sys.path.insert(0, "bench")
    from bench_silu_grad import render

    peer = "cuBLAS + fused pointwise and sums (torch.compile)"
    row = {
        "ms": {"fused (export)": 0.7, peer: 0.8},
        "gpu_ms": {"fused (export)": 0.5, peer: 0.6},
        "errors": {"fused (export)": 1.6e-3, peer: 5.4e-4},
    }
    text = render({8000: row}, "GPU, versions")
    assert "| 8000 | fused (export) | 0.700 | 0.500 | 1.20x | 67 | 1.6e-03 |" in text, text
    assert f"| 8000 | {peer} | 0.800 | 0.600 | 1.00x | 56 | 5.4e-04 |" in text, text
    assert text.rstrip().endswith("for each batch (8000: 64x64x64 w4 s3)."), text
