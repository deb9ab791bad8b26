"""Graph-level fusions (mirai.export.fusions): which graphs the gate/up rewrite matches, and that a fused
build computes what the function computes, forward and every gradient, on the CPU driver."""

from __future__ import annotations

import json
import pickle
import re
import sys
from types import SimpleNamespace

import pytest
import torch

import mirai
from mirai.errors import CaptureError, MiraiError
from mirai.export import fusions
from mirai.export.capture.core import saved_positions
from mirai.export.capture.trace import trace
from mirai.export.verify import table, verify
from tests.export.conftest import EXAMPLES

sys.path.insert(0, str(EXAMPLES))
from pffn import pffn, sample_inputs  # noqa: E402
from swiglu_mlp import sample_inputs as swiglu_inputs  # noqa: E402
from swiglu_mlp import swiglu_mlp  # noqa: E402

SMALL = {"experts": 2, "d_model": 32, "hidden": 64}


def small(batch):
    return sample_inputs(batch, **SMALL)


def fused_calls(op, samples, names=("gate_up", "gate_up_linear")) -> tuple[dict, list[str]]:
    """The fusion counts and the operators the fused graph calls."""
    traced, counts = fusions.fuse(trace(op, samples), names)
    gm = pickle.loads(traced.graph_module)
    targets = [str(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    return counts, targets


def test_pffn_gate_and_up_become_one_training_operator():
    counts, targets = fused_calls(pffn, small(8))
    assert counts == {"gate_up": 1, "gate_up_linear": 0}
    assert "mirai.gate_up_silu_train.default" in targets
    # the down projection is still a plain bmm; the two projections and the silu are gone
    assert sum("bmm" in t for t in targets) == 1
    assert not any("silu" in t for t in targets if "mirai" not in t), targets


def test_an_inference_graph_gets_the_operator_without_residuals():
    counts, targets = fused_calls(pffn.for_inference(), small(8))
    assert counts == {"gate_up": 1, "gate_up_linear": 0}
    assert "mirai.gate_up_silu.default" in targets
    assert "mirai.gate_up_silu_train.default" not in targets


def test_gate_up_down_takes_the_down_projection_into_a_training_operator():
    counts, targets = fused_calls(pffn, small(8), names=("gate_up", "gate_up_down"))
    # it runs first, whatever order names it, and leaves gate_up nothing
    assert counts == {"gate_up_down": 1, "gate_up": 0}
    assert "mirai.gate_up_down_train.default" in targets
    assert "mirai.gate_up_silu_train.default" not in targets
    assert not any("bmm" in t for t in targets), targets  # all three projections are in it


def test_gate_up_down_takes_the_down_bias_and_the_transpose_back_to_rows():
    """pffn returns (bmm(...) + b_down).transpose(0, 1): the operator writes that itself
    (mirai::bmm_rows inside), so the graph keeps only the input's transpose."""
    _, targets = fused_calls(pffn, small(8), names=("gate_up_down",))
    assert targets.count("transpose") == 1, targets
    assert not any(t in ("add", "<built-in function add>") for t in targets), targets


def test_bmm_rows_takes_pffns_down_projection_with_its_bias():
    counts, targets = fused_calls(pffn, small(8), names=("bmm_rows",))
    assert counts == {"bmm_rows": 1}
    assert "mirai.rows_gemm.default" in targets
    assert sum("bmm" in t for t in targets) == 2  # the gate and up GEMMs
    assert targets.count("transpose") == 1, targets  # the input's; the output's is gone


def test_bmm_rows_after_gate_up_takes_what_gate_up_leaves():
    counts, targets = fused_calls(pffn, small(8), names=("gate_up", "bmm_rows"))
    assert counts == {"gate_up": 1, "bmm_rows": 1}
    assert {"mirai.gate_up_silu_train.default", "mirai.rows_gemm.default"} <= set(targets)


@mirai.op(name="RowsCases")
def rows_cases(x, w, b):
    p = x.transpose(0, 1)  # [E, M, K] from the batch-first x [M, E, K]
    plain = torch.transpose(torch.bmm(p, w), 1, 0)  # matched, no bias
    biased = (b + p.bmm(w)).permute(1, 0, 2)  # matched: a [N] bias, on the left
    shared = torch.bmm(p, w)
    twice = shared.transpose(0, 1) * shared.sum()  # not: the GEMM's result has another use
    scalar = (torch.bmm(p, w) + 1.0).transpose(0, 1)  # not: a number is no bias vector
    return plain + biased + twice + scalar


def rows_inputs(batch):
    g = torch.Generator().manual_seed(batch)
    return [
        torch.randn(batch, 3, 8, generator=g),
        torch.randn(3, 8, 5, generator=g),
        torch.randn(5, generator=g),
    ]


def test_bmm_rows_spellings_and_refusals():
    counts, targets = fused_calls(rows_cases, rows_inputs(4), names=("bmm_rows",))
    assert counts == {"bmm_rows": 2}
    assert targets.count("mirai.rows_gemm.default") == 2, targets


def test_the_bmm_rows_operator_computes_and_differentiates_as_its_definition():
    """Eager, in float64: the values, and gradcheck of the registered backward (which reads the
    result's gradient as [E, M, N] strides) for a bias and for an addend."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(3, 5, 2, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(3, 1, 2, dtype=torch.float64, generator=g, requires_grad=True)
    acc = torch.randn(4, 3, 2, dtype=torch.float64, generator=g, requires_grad=True)
    rows = torch.ops.mirai.bmm_rows
    got = rows(a, b, bias, None)
    assert got.shape == (4, 3, 2) and got.is_contiguous()
    torch.testing.assert_close(got, (torch.bmm(a, b) + bias).transpose(0, 1))
    torch.testing.assert_close(rows(a, b, None, acc), torch.bmm(a, b).transpose(0, 1) + acc)
    assert torch.autograd.gradcheck(lambda a, b, c: rows(a, b, c, None), (a, b, bias))
    assert torch.autograd.gradcheck(lambda a, b, c: rows(a, b, None, c), (a, b, acc))
    with pytest.raises(ValueError, match="a bias or an addend, not both"):
        rows(a, b, bias, acc)
    with pytest.raises(ValueError, match=r"bias of shape \(3, 2\), not \(3, 1, 2\)"):
        rows(a, b, bias[:, 0], None)
    with pytest.raises(ValueError, match="shapes"):
        rows(a, b.transpose(1, 2), None, None)


def test_the_rows_gemm_operator_past_few_rows_is_bmm_rows():
    """Fusion bmm_rows' operator, eager in float64 past FEW_ROWS rows (fewer run the few_rows
    Triton kernel, float32 on a GPU, which the builds below check): bmm_rows' values and its
    backward, gradcheck'd."""
    from mirai.export.fusions.few_rows import FEW_ROWS

    g = torch.Generator().manual_seed(1)
    a = torch.randn(2, FEW_ROWS + 1, 3, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(2, 3, 2, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(2, 1, 2, dtype=torch.float64, generator=g, requires_grad=True)
    rows = torch.ops.mirai.rows_gemm
    torch.testing.assert_close(rows(a, b, bias), (torch.bmm(a, b) + bias).transpose(0, 1))
    assert torch.autograd.gradcheck(rows, (a, b, bias))
    assert torch.autograd.gradcheck(lambda a, b: rows(a, b, None), (a, b))
    with pytest.raises(ValueError, match=r"bias of shape \(2, 2\), not \(2, 1, 2\)"):
        rows(a, b, bias[:, 0])


def test_gate_up_down_leaves_an_inference_graph_as_gate_up_does():
    counts, targets = fused_calls(pffn.for_inference(), small(8), names=("gate_up_down",))
    assert counts == {"gate_up_down": 1}
    assert "mirai.gate_up_silu.default" in targets
    assert sum("bmm" in t for t in targets) == 1  # the down projection stays a GEMM


@mirai.op(name="SwapNoBias")
def swapped_without_bias(x, w_gate, w_up):
    return (x @ w_up) * torch.nn.functional.silu(x @ w_gate)


ACTIVATION = torch.nn.SiLU()


@mirai.op(name="SiluModule")
def silu_module(x, w_gate, w_up):
    return ACTIVATION(torch.matmul(x, w_gate)) * x.bmm(w_up)


@pytest.mark.parametrize("op", [swapped_without_bias, silu_module])
def test_other_spellings_match(op):
    x, wg, wu = torch.randn(2, 5, 8), torch.randn(2, 8, 16), torch.randn(2, 8, 16)
    counts, targets = fused_calls(op, [x, wg, wu])
    assert counts == {"gate_up": 1, "gate_up_linear": 0}, targets


@mirai.op(name="DenseWithBias")
def dense_with_bias(x, w_gate, b_gate, w_up, b_up):
    return torch.nn.functional.silu(x @ w_gate + b_gate) * (x @ w_up + b_up)


@mirai.op(name="LinearWithBias")
def linear_with_bias(x, w_gate, b_gate, w_up, b_up):
    F = torch.nn.functional
    return F.linear(x, w_up, bias=b_up) * F.silu(F.linear(x, w_gate, b_gate))


def test_nn_linear_and_dense_spellings_match():
    """2-D weights: nn.Linear's [N, K] through F.linear and [K, N] through @, x of any rank."""
    x = torch.randn(3, 5, 8)
    samples = [x, torch.randn(16, 8), torch.randn(16, 8), torch.randn(8, 16)]
    counts, targets = fused_calls(swiglu_mlp, samples)
    assert counts == {"gate_up": 0, "gate_up_linear": 1}, targets
    assert sum("linear" in t for t in targets) == 1, targets  # the down projection stays
    assert not any("silu" in t for t in targets if "mirai" not in t), targets
    for op, weight in ((dense_with_bias, (8, 16)), (linear_with_bias, (16, 8))):
        args = [torch.randn(*weight), torch.randn(16)]
        counts, targets = fused_calls(op, [x.reshape(15, 8), *args, *args])
        assert counts == {"gate_up": 0, "gate_up_linear": 1}, (op.name, targets)
    # the per-expert fusion alone leaves them
    assert fused_calls(swiglu_mlp, samples, ("gate_up",))[0] == {"gate_up": 0}


def test_defaults_follow_the_kind_of_build():
    """A build that names no fusions gets those measured faster for its kind (bench/RESULTS-pffn.md,
    RESULTS-swiglu.md): gate_up_down for training; gate_up, bmm_rows and gate_up_linear for
    inference (gate_up_linear slowed swiglu's training op, so training builds never get it)."""
    assert fusions.default(pffn) == ("gate_up_down",)
    assert fusions.default(swiglu_mlp) == ("gate_up_down",)
    inference = ("gate_up", "bmm_rows", "gate_up_linear")
    assert fusions.default(pffn.for_inference()) == inference
    assert fusions.default(swiglu_mlp.for_inference()) == inference
    with pytest.raises(MiraiError, match="unknown kind of build 'serving'"):
        fusions.defaults("serving")


def test_mixed_projections_are_not_fused():
    """A gate through F.linear and an up through @ are no one projection; nor is a bias that is not
    a vector of N."""

    @mirai.op(name="Mixed")
    def mixed(x, w_gate, w_up):
        F = torch.nn.functional
        return F.silu(F.linear(x, w_gate)) * (x @ w_up)

    x = torch.randn(5, 8)
    counts, _ = fused_calls(mixed, [x, torch.randn(16, 8), torch.randn(8, 16)])
    assert not any(counts.values())
    counts, _ = fused_calls(
        dense_with_bias, [x, torch.randn(8, 16), torch.randn(5, 16), torch.randn(8, 16),
                          torch.randn(5, 16)]
    )  # fmt: skip
    assert not any(counts.values())


@mirai.op(name="GateUsedTwice")
def gate_used_twice(x, w_gate, w_up):
    gate = torch.bmm(x, w_gate)
    return torch.nn.functional.silu(gate) * torch.bmm(x, w_up) + gate


@mirai.op(name="Relu")
def relu_gated(x, w_gate, w_up):
    return torch.relu(torch.bmm(x, w_gate)) * torch.bmm(x, w_up)


@mirai.op(name="TwoInputs")
def two_inputs(x, y, w_gate, w_up):
    return torch.nn.functional.silu(torch.bmm(x, w_gate)) * torch.bmm(y, w_up)


@pytest.mark.parametrize(
    "op, dtype",
    [
        (gate_used_twice, torch.float32),  # the rewrite would drop a value still needed
        (relu_gated, torch.float32),  # another activation
        (swapped_without_bias, torch.float64),  # a dtype the kernel was not measured with
    ],
)
def test_what_the_rewrite_must_not_touch(op, dtype):
    x, wg, wu = (torch.randn(2, 5, 8), torch.randn(2, 8, 16), torch.randn(2, 8, 16))
    counts, _ = fused_calls(op, [t.to(dtype) for t in (x, wg, wu)])
    assert not any(counts.values())


def test_two_different_inputs_do_not_share_a_kernel():
    x, y = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    counts, _ = fused_calls(two_inputs, [x, y, torch.randn(2, 8, 16), torch.randn(2, 8, 16)])
    assert not any(counts.values())


def test_an_unknown_fusion_is_refused_by_name(tmp_path):
    with pytest.raises(
        MiraiError,
        match=r"unknown fusion nope; choose from gate_up_down, gate_up, bmm_rows, gate_up_linear",
    ):
        mirai.build(pffn, small(8), output_dir=tmp_path, fuse=("nope",), progress=False)


def test_saved_tensors_are_matched_by_position_and_checked_by_name():
    def graph_input(name, kind="tensor"):
        return SimpleNamespace(name=name, kind=kind)

    fwd = SimpleNamespace(output_names=("out", "keep", "empty_1", "s0"))
    bwd = SimpleNamespace(
        inputs=[graph_input("s0", "symint"), graph_input("keep"), graph_input("getitem_1"),
                graph_input("tangents_1")]
    )  # fmt: skip
    assert saved_positions(fwd, bwd, 1) == {"s0": 3, "keep": 1, "getitem_1": 2}
    swapped = SimpleNamespace(inputs=[graph_input("empty_1"), graph_input("keep")])
    with pytest.raises(CaptureError, match="cannot be matched"):
        saved_positions(fwd, swapped, 1)


@pytest.fixture(scope="module")
def fused_builds(tmp_path_factory) -> dict[str, object]:
    builds = {}
    for mode, how in {"training": {}, "inference": {"inference": True}}.items():
        out = tmp_path_factory.mktemp(f"pffn-fused-{mode}")
        # bucket 16 runs the kernel for few rows; bucket 300 copies the weights K-major first
        mirai.build(
            pffn, small(16), output_dir=out, dynamic=True, fuse=("gate_up",), buckets=(16, 300),
            progress=False, **how,
        )  # fmt: skip
        builds[mode] = out
    return builds


@pytest.mark.parametrize("mode", ["training", "inference"])
def test_a_fused_build_computes_right_on_the_cpu(fused_builds, host, mode):
    directory = fused_builds[mode]
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["fused"] == {"gate_up": 1}
    forward = next(op for op in manifest["ops"] if op.endswith("Fwd"))
    variants = {v["sample"]: v["launches"] for v in manifest["ops"][forward]["variants"]}
    # the launches before the fused kernel: the weights' K-major copies
    copies = {
        b: [k.startswith("gate_up_kernel") for k in ks].index(True) for b, ks in variants.items()
    }
    # a small bucket's kernel reads the weights as stored, in a training op too: its backward op
    # takes what the forward saved in the same order at every bucket (mirai.export.plan)
    assert copies == {16: 0, 300: 2}, variants
    fn = pffn if mode == "training" else pffn.for_inference()
    rows = verify(fn, small, directory, batches=[3, 17, 400], device="cpu", runner=host)
    expected = ["output0"] + ([f"grad {p}" for p in pffn.param_names] if mode == "training" else [])
    assert sorted({r.name for r in rows}) == sorted(expected), table(rows)
    assert {r.batch for r in rows} == {3, 17, 400}
    assert all(r.ok for r in rows), table(rows)


def test_a_gate_up_down_build_computes_right_on_the_cpu(tmp_path, host):
    """Training, bucketed: the backward's first kernel is the fused one (the down GEMM's input
    gradient, SiLU's gradient and the biases' partial sums); output and every gradient match
    float64 PyTorch at batches below, between and past the buckets (the partial sums' buffer has a
    row per 64 rows of the batch: its size is symbolic). Buckets 16 and 48 run the backward's
    GEMMs in the few_rows kernel, each in its own weight-gradient configuration (48 rows: K blocks
    of 32, the last one masked)."""
    mirai.build(
        pffn, small(16), output_dir=tmp_path, dynamic=True, fuse=("gate_up_down",),
        buckets=(16, 48, 300), progress=False,
    )  # fmt: skip
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["fused"] == {"gate_up_down": 1}
    backward_op = next(op for op in manifest["ops"] if op.endswith("Bwd"))
    for variant in manifest["ops"][backward_op]["variants"]:
        assert sum(k.startswith("silu_grad_kernel") for k in variant["launches"]) == 1, variant
    # the down GEMM writes the result itself: a Triton kernel at few rows (bucket 16), cuBLASLt
    # past them (bucket 300, after the gate/up kernel)
    forward = variants(tmp_path, "Fwd")
    last = {b: (v["launches"][-1].rsplit("_b", 1)[0], len(v["gemms"])) for b, v in forward.items()}
    assert last == {16: ("rows_kernel", 0), 48: ("rows_kernel", 0), 300: ("gate_up_kernel", 1)}
    # the backward at few rows: after silu_grad, x's gradient in one launch and each weight's with
    # its bias's in one (the few_rows kernel; its two specializations named apart), no cuBLASLt
    # GEMM and no kernel summing for the biases; past them five GEMMs
    backward = {b: ([k.rsplit("_b", 1)[0] for k in v["launches"]], len(v["gemms"]))
                for b, v in variants(tmp_path, "Bwd").items()}  # fmt: skip
    few = ["silu_grad_kernel", "rows_kernel"] + ["rows_kernel_1"] * 3
    assert backward[16] == (few, 0), backward
    assert backward[48] == (few, 0), backward
    # the weights' gradients: one stage over K blocks of 16 at 16 rows, three over 32 at 48
    header = (tmp_path / f"{backward_op}_kernels.h").read_text()
    for bucket, stages in ((16, 1), (48, 3)):
        config = re.search(rf"// rows_kernel_1_b{bucket}: config (.*)", header).group(1)
        assert json.loads(config)["num_stages"] == stages, config
    assert backward[300][1] == 5, backward
    rows = verify(pffn, small, tmp_path, batches=[3, 17, 40, 400], device="cpu", runner=host)
    expected = ["output0"] + [f"grad {p}" for p in pffn.param_names]
    assert sorted({r.name for r in rows}) == sorted(expected), table(rows)
    assert all(r.ok for r in rows), table(rows)


def variants(directory, suffix: str) -> dict:
    """{bucket: variant} of the build's op whose name ends in `suffix` (its manifest entry)."""
    manifest = json.loads((directory / "manifest.json").read_text())
    op = next(o for o in manifest["ops"] if o.endswith(suffix))
    return {v["sample"]: v for v in manifest["ops"][op]["variants"]}


def launches(directory, suffix: str) -> dict:
    """{bucket: kernel launches} of that op."""
    return {b: v["launches"] for b, v in variants(directory, suffix).items()}


def gemm_ops(directory, suffix: str) -> dict:
    """{bucket: [(GEMM's op, its bias: none, vector or matrix)]} of that op, in order."""
    return {
        b: [(g["op"], g["bias"]) for g in v["gemms"]]
        for b, v in variants(directory, suffix).items()
    }


def test_a_bmm_rows_build_computes_right_on_the_cpu(tmp_path, host):
    """pffn with gate_up and bmm_rows, training, bucketed: past few rows (bucket 300) the forward
    ends with the gate/up kernel (the down GEMM writes [B, E, D] with its bias in the epilogue),
    at few rows (bucket 16) with the few_rows kernel writing the same; in the backward past few rows
    the input's gradient is two GEMMs writing the input's layout, the second adding the first's
    result as its C matrix (no kernel adds and transposes them), at few rows (bucket 16) one
    launch of the few_rows kernel; output and every gradient match float64 PyTorch."""
    mirai.build(
        pffn, small(16), output_dir=tmp_path, dynamic=True, fuse=("gate_up", "bmm_rows"),
        buckets=(16, 300), progress=False,
    )  # fmt: skip
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["fused"] == {"gate_up": 1, "bmm_rows": 1}
    last = {16: ["gate_up_kernel_b16", "rows_kernel_b16"], 300: ["gate_up_kernel_b300"]}
    for bucket, kernels in launches(tmp_path, "Fwd").items():  # after the weights' K-major copies
        assert kernels[-len(last[bucket]) :] == last[bucket], (bucket, kernels)
    expected = {
        "Fwd": {16: [], 300: [("bmm_rows", "vector")]},
        "Bwd": {16: [], 300: [("bmm_rows", "none"), ("bmm_rows", "matrix")]},
    }
    for suffix, by_bucket in expected.items():
        for bucket, gemms in gemm_ops(tmp_path, suffix).items():
            rows = [g for g in gemms if g[0] == "bmm_rows"]
            assert rows == by_bucket[bucket], (suffix, bucket, gemms)
    assert launches(tmp_path, "Bwd")[16].count("rows_kernel_b16") == 1
    rows = verify(pffn, small, tmp_path, batches=[3, 17, 400], device="cpu", runner=host)
    expected = ["output0"] + [f"grad {p}" for p in pffn.param_names]
    assert sorted({r.name for r in rows}) == sorted(expected), table(rows)
    assert all(r.ok for r in rows), table(rows)


@pytest.mark.parametrize("batch, mode", [(16, "inference"), (16, "training"), (80, "training")])
def test_bmm_rows_takes_its_operand_where_the_kernel_before_wrote_it(tmp_path, batch, mode):
    """The operator accepts any layout (its capture reads the strides), so Inductor hands it the
    product the SiLU kernel wrote, which the backward saves as well. Under torch's default for
    custom operators (exact strides) Inductor gave it a copy instead: the same kernel stored every
    value twice, 262 MB more per forward at pffn's B = 8000. Past few rows (80) that is one cuBLASLt
    GEMM; at few rows (16) the few_rows kernel, a user-defined Triton kernel, to which Inductor
    gives operands in the strides traced: where the product is also saved for the backward, the
    SiLU kernel then stores it twice (one store more than 80 rows need, at most 64 rows' worth);
    where it is not (inference), once."""
    fn = pffn if mode == "training" else pffn.for_inference()
    mirai.build(fn, small(batch), output_dir=tmp_path, fuse=("bmm_rows",), progress=False)
    suffix = "Fwd" if mode == "training" else "InferenceFwd"
    (folder,) = (tmp_path / "tf32").glob(f"*{suffix}")
    sources = sorted(folder.glob("*.py"))
    few = batch <= 64
    assert [p.name for p in sources if p.name == "rows_kernel.py"] == (["rows_kernel.py"] * few)
    sources = [p for p in sources if p.name != "rows_kernel.py"]
    assert len(sources) == 1, sources  # gate and up biases, SiLU and product: one kernel
    assert "bmm_rows" not in sources[0].name, sources[0].name  # no copy for the operator
    stores = 2 if few and mode == "training" else 1
    assert sources[0].read_text().count("tl.store(") == stores
    gemms = [("bmm", "none"), ("bmm", "none")] + ([] if few else [("bmm_rows", "vector")])
    assert list(gemm_ops(tmp_path, suffix).values()) == [gemms]


@pytest.mark.parametrize("batch", [6, 70])
def test_bmm_rows_spellings_compute_right_on_the_cpu(tmp_path, host, batch):
    """A bias broadcast from [N] (stride 0 between the experts' bias vectors), none, and the GEMMs
    the fusion leaves alone, in one dynamic build (whose backward sums to one value: a reduction
    kernel with xnumel = 1, which Triton takes as a constant and the wrapper still passes); traced
    at few rows (6: the few_rows kernel) and past them (70: cuBLASLt)."""
    mirai.build(
        rows_cases, rows_inputs(batch), output_dir=tmp_path, dynamic=True, fuse=("bmm_rows",),
        progress=False,
    )  # fmt: skip
    rows_gemms = [g for g in next(iter(gemm_ops(tmp_path, "Fwd").values())) if g[0] == "bmm_rows"]
    assert len(rows_gemms) == (0 if batch <= 64 else 2), rows_gemms
    rows = verify(
        rows_cases, rows_inputs, tmp_path, batches=[2, 6, 29, 71], device="cpu", runner=host
    )
    assert {r.name for r in rows} == {"output0", "grad x", "grad w", "grad b"}, table(rows)
    assert all(r.ok for r in rows), table(rows)


SWIGLU_SMALL = {"seq": 3, "dim": 32, "hidden": 48}


def swiglu_small(batch):
    return swiglu_inputs(batch, **SWIGLU_SMALL)


@pytest.mark.parametrize("mode", ["training", "inference"])
def test_a_fused_llama_style_block_computes_right_on_the_cpu(tmp_path, host, mode):
    """examples/swiglu_mlp.py: nn.Linear weights, x [batch, seq, dim], bucketed over the batch. The
    kernel reads the weights as stored (no K-major copy before it), and the op's output and every
    gradient match PyTorch in float64 at batches below, between and past the buckets."""
    fn = swiglu_mlp if mode == "training" else swiglu_mlp.for_inference()
    mirai.build(
        fn, swiglu_small(4), output_dir=tmp_path, dynamic=True, fuse=("gate_up_linear",),
        buckets=(4, 40),
        progress=False,
    )  # fmt: skip
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["fused"] == {"gate_up_linear": 1}
    forward = next(op for op in manifest["ops"] if op.endswith("Fwd"))
    for variant in manifest["ops"][forward]["variants"]:
        # one launch, no weight copies (bucketed kernels' names end in _b<bucket>)
        assert [k.rsplit("_b", 1)[0] for k in variant["launches"]] == ["gate_up_kernel"], variant
    if mode == "training":
        backward = {
            b: ([k.rsplit("_b", 1)[0] for k in v["launches"]], len(v["gemms"]))
            for b, v in variants(tmp_path, "Bwd").items()
        }
        # past few rows (bucket 40: 120 rows), GEMMs aside, the SiLU product's gradient and the
        # sum of dx's halves (weight gradients come out K-major, uncopied): two launches, six
        # GEMMs; at few rows (12) dx's two GEMMs and the weights' gradients are three launches of
        # the few_rows kernel, the down projection's two GEMMs left
        assert backward[40][0][1:] == ["triton_poi_fused_add_bmm_1"], backward
        assert len(backward[40][0]) == 2 and backward[40][1] == 6, backward
        assert backward[4][0][1:] == ["rows_kernel", "rows_kernel_1", "rows_kernel_1"], backward
        assert backward[4][1] == 2, backward
    rows = verify(fn, swiglu_small, tmp_path, batches=[2, 9, 41], device="cpu", runner=host)
    expected = ["output0"] + (
        [f"grad {p}" for p in swiglu_mlp.param_names] if mode == "training" else []
    )
    assert sorted({r.name for r in rows}) == sorted(expected), table(rows)
    assert all(r.ok for r in rows), table(rows)


def dense_samples(batch):
    g = torch.Generator().manual_seed(batch)
    w = [torch.randn(24, 40, generator=g) * 0.2 for _ in "gu"]
    b = [torch.randn(40, generator=g) * 0.1 for _ in "gu"]
    return [torch.randn(batch, 24, generator=g), w[0], b[0], w[1], b[1]]


def test_a_fused_dense_layer_with_biases_computes_right_on_the_cpu(tmp_path, host):
    """x [M, K] @ w [K, N] + b [N]: the weights are N-contiguous, so the op copies them K-major, and
    the biases reach the kernel as [1, 1, N]; output and every gradient match float64 PyTorch."""
    mirai.build(dense_with_bias, dense_samples(37), output_dir=tmp_path, fuse=("gate_up_linear",),
                progress=False)  # fmt: skip
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["fused"] == {"gate_up_linear": 1}
    rows = verify(dense_with_bias, dense_samples, tmp_path, device="cpu", runner=host)
    expected = ["output0"] + [f"grad {p}" for p in dense_with_bias.param_names]
    assert sorted({r.name for r in rows}) == sorted(expected), table(rows)
    assert all(r.ok for r in rows), table(rows)
