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

# The backward's forms: two products in one launch, stored in rows (the gradient of x), and a
# weight's gradient x^T @ d with d's column sums, in both layouts a weight may have.
CHILD_BACKWARD = r"""
import json
import torch
from mirai.export.fusions.few_rows import launch, weight_grad

g = torch.Generator().manual_seed(1)
e, m, k, n = 3, 21, 40, 72
config = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "num_warps": 4, "num_stages": 1}
def rel(got, expect):
    return float((got.double() - expect).norm() / expect.norm())
dg, du = (torch.randn(m, e, k, generator=g).transpose(0, 1) for _ in range(2))
wg, wu = (torch.randn(e, n, k, generator=g).transpose(1, 2) for _ in range(2))  # [E, K, N] views
got = launch(dg, wg, None, second=(du, wu), precision="ieee", config=config)
expect = (dg.double() @ wg.double() + du.double() @ wu.double()).transpose(0, 1)
report = {"two products": rel(got, expect), "rows shape": list(got.shape)}
x = torch.randn(m, e, k, generator=g).transpose(0, 1)  # [E, M, K] seen in rows, as pffn's x
d = torch.randn(e, m, n, generator=g)
for name, like in {"row-major": torch.empty(e, k, n),
                   "K-major": torch.empty(e, n, k).transpose(1, 2)}.items():
    k_major = name == "K-major"
    grad, sums = weight_grad(x, d, k_major=k_major, sums=True, precision="ieee", config=config)
    report[name] = rel(grad, x.double().transpose(1, 2) @ d.double())
    report[name + " strides"] = [list(grad.stride()), list(like.stride())]
    report[name + " sums"] = rel(sums, d.double().sum(1, keepdim=True))
grad, sums = weight_grad(x, d, k_major=True, sums=False, precision="ieee", config=config)
report["no sums"] = [sums is None, rel(grad, x.double().transpose(1, 2) @ d.double())]
print(json.dumps(report))
"""


def test_the_few_rows_kernel_computes_the_down_projection_in_rows():
    report = interpreted(CHILD)
    assert report["shape"] == [21, 3, 72] and report["strides"] == [216, 72, 1], report
    # fp32 products of 40 terms: a few ulps of the result
    for name in ("bias", "shared bias", "no bias"):
        assert report[name] < 1e-6, report


def test_the_backward_forms_of_the_kernel():
    report = interpreted(CHILD_BACKWARD)
    assert report["rows shape"] == [21, 3, 72], report
    # fp32 sums of 40 (products) and 21 (weight gradients, column sums) terms
    for name in ("two products", "row-major", "K-major", "row-major sums", "K-major sums"):
        assert report[name] < 1e-6, report
    for name in ("row-major", "K-major"):  # the gradient laid out as its weight
        assert report[name + " strides"][0] == report[name + " strides"][1], report
    assert report["no sums"][0] and report["no sums"][1] < 1e-6, report


def test_the_sweep_grid_and_table():
    sys.path.insert(0, "bench")
    from bench_few_rows import FORMS, configurations, render, render_sweep

    # blocks of rows no larger than the rows need, beyond the smallest
    assert {c["BLOCK_M"] for c in configurations("down", 8)} == {16}
    assert {c["BLOCK_M"] for c in configurations("dx", 64)} == {16, 32, 64}
    # a weight's gradient sums over the rows: K blocks no larger than they need
    assert {c["BLOCK_K"] for c in configurations("dw_gate", 8)} == {16}
    assert {c["BLOCK_K"] for c in configurations("dw_down", 64)} == {16, 32, 64}
    text = render_sweep(
        {
            ("down", 64): [("32x32x128 w4 s3", 0.0062), ("64x32x64 w4 s1 (export)", 0.0144)],
            ("dx", 64): [("32x32x128 w4 s3 (export)", 0.0100)],
        },
        "GPU, versions",
    )
    assert "| form | B | configuration | GPU ms | TFLOP/s | vs export |" in text, text
    assert "| down | 64 | 32x32x128 w4 s3 | 0.0062 | 43 | 2.32x |" in text, text
    assert "| down | 64 | 64x32x64 w4 s1 (export) | 0.0144 | 19 | 1.00x |" in text, text
    assert "| dx | 64 | 32x32x128 w4 s3 (export) | 0.0100 | 54 | 1.00x |" in text, text  # 2 GEMMs
    assert "36 for down at B = 64" in text, text
    row = {
        "errors": {"Triton (export)": 1e-4, "cuBLAS + bias, transpose, sums (torch.compile)": 2e-4},
        "ms": {"Triton (export)": 0.02, "cuBLAS + bias, transpose, sums (torch.compile)": 0.03},
        "gpu_ms": {
            "Triton (export)": 0.005,
            "cuBLAS + bias, transpose, sums (torch.compile)": 0.01,
        },
    }
    text = render({8: {form: row for form in FORMS}}, "GPU, versions")
    assert "| form | B | candidate |" in text, text
    assert "| dw_down | 8 | Triton (export) | 0.020 | 0.005 | 2.00x | 7 | 1.0e-04 |" in text, text
    assert "dw_gate 8: 128x32x16 w4 s1" in text, text


def _weight_grad_ptx(mask_rows: bool) -> str:
    """The PTX for sm_90 of rows_kernel as weight_grad launches it at pffn's shapes (a = x^T, whose
    rows are its contiguous dimension; strides of 1 constants, the others multiples of 16)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mirai.export.fusions.few_rows import WEIGHT_CONFIGS, rows_kernel

    config = WEIGHT_CONFIGS[0][1]
    flags = {"HAS_BIAS": False, "HAS_SECOND": False, "HAS_SUM": True, "MASK_ROWS": mask_rows}
    ones = {"sa_m", "sb_n", "sa2_m", "sb2_n", "so_n", "ss_n"}
    names = [p.name for p in rows_kernel.params]
    constants = {"PRECISION": "tf32", **flags, **{n: 1 for n in ones}}
    constants.update({k: v for k, v in config.items() if k.startswith("BLOCK_")})
    signature = {
        n: "constexpr" if n in constants else "*fp32" if n.endswith("_ptr") else "i32"
        for n in names
    }
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n not in constants}
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    source = ASTSource(rows_kernel, signature, constants, attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]


def test_a_weight_gradient_loads_x_transposed_as_vectors():
    """x^T's rows are contiguous: masked rather than clamped (gate_up.rows_dot's MASK_ROWS), they
    load 16 bytes at a time; clamped, Triton cannot see the contiguity and loads 4 bytes at a time.
    """
    import re

    def loads(ptx):
        return len(re.findall(r"ld\.global(?:\.\w+)*\.v4", ptx)), len(
            re.findall(r"ld\.global(?:\.[a-z]+)*\.b32 ", ptx)
        )

    (v4_masked, scalar_masked), (v4_clamped, scalar_clamped) = map(
        loads, (_weight_grad_ptx(True), _weight_grad_ptx(False))
    )
    assert scalar_masked == 0 and scalar_clamped > 0, (v4_masked, scalar_masked, scalar_clamped)
    assert v4_masked > v4_clamped


def test_operands_that_make_no_batched_gemm_are_refused_by_name():
    import pytest
    import torch

    from mirai.export.fusions.few_rows import launch, weight_grad

    a, b = torch.zeros(2, 5, 8), torch.zeros(2, 8, 3)
    with pytest.raises(ValueError, match=r"few_rows.launch: shapes \(2, 5, 8\) and \(2, 7, 3\)"):
        launch(a, torch.zeros(2, 7, 3), None, precision="ieee")
    with pytest.raises(ValueError, match="the second product's shapes"):
        launch(a, b, None, second=(torch.zeros(2, 4, 8), b), precision="ieee")
    with pytest.raises(ValueError, match=r"few_rows.weight_grad: shapes \(2, 8, 5\) and"):
        weight_grad(a, torch.zeros(2, 6, 3), k_major=False, sums=True, precision="ieee")
    with pytest.raises(ValueError, match=r"few_rows.weight_grad: shapes \(5, 8\) and"):
        weight_grad(torch.zeros(5, 8), b, k_major=False, sums=True, precision="ieee")


def test_the_bench_times_the_forms_it_is_given_and_refuses_others(capsys):
    """`--forms` picks some of the bench's forms (a sweep of one weight gradient fits a short GPU
    call); an unknown form is a usage error before anything runs."""
    import pytest

    sys.path.insert(0, "bench")
    import bench_few_rows

    with pytest.raises(SystemExit) as exit_:
        bench_few_rows.main(["--sweep", "--forms", "dw_gate,nope"])
    assert exit_.value.code == 2
    assert (
        "--forms 'dw_gate,nope': choose from down, dx, dw_gate, dw_down" in capsys.readouterr().err
    )
