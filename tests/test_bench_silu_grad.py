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
