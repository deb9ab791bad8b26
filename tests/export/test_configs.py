"""The launch configuration of kernels captured GPU-less (mirai.export.capture.configs).

Without a GPU nothing can be timed, so each kernel gets the configuration Inductor's heuristics pick
when it does not search: for a reduction, blocks made for its layout. A sum over the batch (a bias
gradient) reduces across contiguous memory; the first entry of max-autotune's search list, made for
rows along it, ran pffn's bias-gradient reduction 4x slower on an H200 (bench/RESULTS-pffn.md). The
numbers these configurations compute are checked on the CPU by tests/export/test_numerics.py.
"""

from __future__ import annotations

import torch

import mirai
from mirai.export.capture import capture


@mirai.op(name="ColumnSum")
def column_sum(x):
    return x.sum(0) * 2.0


@mirai.op(name="RowSum")
def row_sum(x):
    return x.sum(1) * 2.0


def reductions(op, sample):
    cap = capture(op, [sample])
    kernels = {k: v for graph in cap.kernels.values() for k, v in graph.items()}
    found = {k: v for k, v in kernels.items() if k.startswith("triton_red_")}
    assert found, sorted(kernels)
    return found


def blocks(config: dict) -> dict:
    return {k: v for k, v in config["kwargs"].items() if k.endswith("BLOCK")}


def test_an_outer_reduction_gets_wide_blocks_along_contiguous_memory():
    # the first entry of the search list gave it XBLOCK 1 or 2 with long row blocks
    for name, kernel in reductions(column_sum, torch.randn(4096, 256)).items():
        assert kernel.config_origin == "Inductor's heuristic configuration (no GPU to tune on)"
        assert "ReductionHint.OUTER" in kernel.source, name
        assert kernel.config["kwargs"]["XBLOCK"] >= 16, (name, kernel.config)


def test_an_inner_reduction_gets_long_row_blocks():
    for name, kernel in reductions(row_sum, torch.randn(64, 65536)).items():
        assert kernel.config_origin == "Inductor's heuristic configuration (no GPU to tune on)"
        config = blocks(kernel.config)
        assert config["R0_BLOCK"] > config["XBLOCK"], (name, config)


@mirai.op(name="ShortRows")
def short_rows(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_a_reduction_over_short_rows_takes_several_rows_per_program():
    # rows of 48: Inductor offers 1, 8 or 32 rows per program; at 4096 rows on an sm_90 target
    # (132 SMs) 32 rows per program still make 128 programs, at least half a program per SM
    cap = capture(short_rows, [torch.randn(4096, 48)])
    kernels = {k: v for graph in cap.kernels.values() for k, v in graph.items()}
    persistent = {k: v for k, v in kernels.items() if k.startswith("triton_per_")}
    assert persistent, sorted(kernels)
    for name, kernel in persistent.items():
        if kernel.config_origin.startswith("Inductor's heuristic candidates"):
            assert kernel.config["kwargs"]["XBLOCK"] == 32, (name, kernel.config)
            break
    else:
        raise AssertionError({k: v.config_origin for k, v in persistent.items()})
