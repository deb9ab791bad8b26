"""The down projection's Triton kernel for few rows (mirai.export.fusions.few_rows) computes what
bench/bench_few_rows.py's reference computes, pffn's down projection with its bias stored as
[B, E, D]: run on the CPU through Triton's interpreter (in a child process, as the CPU driver of the
export runs kernels), with sizes that leave partial tiles in every dimension, against float64
PyTorch; and the bench's tables."""

from __future__ import annotations

import sys

from tests.export.conftest import interpreted

CHILD = r"""
import json, sys
import torch
sys.path.insert(0, "bench")
from bench_few_rows import reference
from mirai.export.fusions.few_rows import launch

g = torch.Generator().manual_seed(0)
e, m, k, n = 3, 21, 40, 72   # partial tiles along M, K and N for 16x32x16 blocks
h = torch.randn(m, e, k, generator=g).transpose(0, 1)   # not contiguous: strides are read
w = torch.randn(e, k, n, generator=g) * k**-0.5
report = {}
biases = {"bias": torch.randn(e, 1, n, generator=g), "shared bias": torch.randn(n, generator=g),
          "no bias": None}
for name, bias in biases.items():
    got = launch(h, w, bias, precision="ieee", config={
        "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4, "num_stages": 1})
    expect = reference(h.double(), w.double(), 0.0 if bias is None else bias.double())
    report[name] = float((got.double() - expect).norm() / expect.norm())
    report["shape"], report["strides"] = list(got.shape), list(got.stride())
print(json.dumps(report))
"""


def test_the_few_rows_kernel_computes_the_down_projection_in_rows():
    report = interpreted(CHILD)
    assert report["shape"] == [21, 3, 72] and report["strides"] == [216, 72, 1], report
    # fp32 products of 40 terms: a few ulps of the result
    for name in ("bias", "shared bias", "no bias"):
        assert report[name] < 1e-6, report


def test_the_sweep_grid_and_table():
    sys.path.insert(0, "bench")
    from bench_few_rows import configurations, render_sweep

    # blocks of rows no larger than the rows need, beyond the smallest
    assert {c["BLOCK_M"] for c in configurations(8)} == {16}
    assert {c["BLOCK_M"] for c in configurations(64)} == {16, 32, 64}
    text = render_sweep(
        {64: [("32x32x128 w4 s3", 0.0062), ("64x32x64 w4 s1 (export)", 0.0144)]}, "GPU, versions"
    )
    assert "| 64 | 32x32x128 w4 s3 | 0.0062 | 43 | 2.32x |" in text, text
    assert "| 64 | 64x32x64 w4 s1 (export) | 0.0144 | 19 | 1.00x |" in text, text
    assert "12 at B = 64" not in text and "36 at B = 64" in text, text
