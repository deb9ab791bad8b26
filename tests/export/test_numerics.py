"""Numbers in CI: every generated op computed on the CPU through its own launch code, and checked.

The generated `_launch.h` runs unchanged against mirai's CPU stand-in for the CUDA driver, which
interprets each launched kernel's Triton source (mirai.export.hostdriver). Every function of
examples/suite.py and the seed's pffn (at small sizes) is compared, forward and every gradient, with
the function in float64: static builds at their own batch, and dynamic builds at two batches from one
binary. The break tests show that the check catches a wrong plan.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mirai
from mirai.errors import MiraiError
from mirai.export.launch import OpError
from mirai.gpu.precision import ARITHMETIC_TOLERANCE as TOLERANCE
from mirai.export.verify import table, tolerance, verify
from tests.export.conftest import EXAMPLES, SUITE_BATCH, only_variant

sys.path.insert(0, str(EXAMPLES))
from pffn import pffn, sample_inputs  # noqa: E402
from suite import SUITE  # noqa: E402

DYNAMIC_BATCHES = [3, 17]
PFFN_SIZES = {"experts": 2, "d_model": 32, "hidden": 64}


def pffn_small(batch):
    return sample_inputs(batch, **PFFN_SIZES)


def every_row_passes(rows, batches, expected_tensors):
    assert {r.batch for r in rows} == set(batches), table(rows)
    for batch in batches:
        names = sorted(r.name for r in rows if r.batch == batch)
        assert names == sorted(expected_tensors), (batch, names)
    assert all(r.ok for r in rows), table(rows)


def expected_tensors(fn, samples, batch: int = SUITE_BATCH) -> list[str]:
    """output<k> for every output, `grad <p>` for every floating input that gets a gradient."""
    raw = samples(batch)
    outputs = fn(*raw)
    n = 1 if not isinstance(outputs, (tuple, list)) else len(outputs)
    grads = [
        f"grad {p}"
        for p, t in zip(fn.param_names, raw)
        if t.is_floating_point() and p not in fn.no_grad
    ]
    return [f"output{k}" for k in range(n)] + grads


def launched_every_kernel(host, directory):
    manifest = json.loads((Path(directory) / "manifest.json").read_text())
    order = sorted(manifest["ops"], key=lambda op: not op.endswith("Fwd"))  # forward, then backward
    expected = [(op, k) for op in order for k in only_variant(manifest["ops"][op])["launches"]]
    assert [(op, k) for op, k, _grid in host.launches] == expected


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_function_computes_right_on_the_cpu(suite_builds, host, name):
    fn, samples, _ = SUITE[name]
    tensors = expected_tensors(fn, samples)
    static = suite_builds[(name, "static")]
    rows = verify(fn, samples, static, device="cpu", runner=host)
    every_row_passes(rows, [SUITE_BATCH], tensors)
    launched_every_kernel(host, static)
    dynamic = suite_builds[(name, "dynamic")]
    rows = verify(fn, samples, dynamic, batches=DYNAMIC_BATCHES, device="cpu", runner=host)
    every_row_passes(rows, DYNAMIC_BATCHES, tensors)
    launched_every_kernel(host, dynamic)


@pytest.fixture(scope="module")
def pffn_builds(tmp_path_factory) -> dict[str, Path]:
    builds = {}
    for mode in ("static", "dynamic"):
        out = tmp_path_factory.mktemp(f"pffn-small-{mode}")
        mirai.build(pffn, pffn_small(16), output_dir=out, dynamic=mode == "dynamic", progress=False)
        builds[mode] = out
    return builds


def test_pffn_computes_right_on_the_cpu(pffn_builds, host):
    tensors = ["output0"] + [f"grad {p}" for p in pffn.param_names]
    rows = verify(pffn, pffn_small, pffn_builds["static"], device="cpu", runner=host)
    every_row_passes(rows, [16], tensors)
    rows = verify(
        pffn, pffn_small, pffn_builds["dynamic"], batches=DYNAMIC_BATCHES, device="cpu", runner=host
    )
    every_row_passes(rows, DYNAMIC_BATCHES, tensors)


def test_the_backward_leaves_its_inputs_as_they_were(pffn_builds, host):
    # TensorFlow may hand the same saved tensors to the backward op more than once (two gradient
    # computations of one forward): the op must not write into them. The worker compares every
    # input before and after each call; here the same backward runs twice on the same tensors
    # and must give the same gradients, bit for bit.
    import torch

    from mirai.export.plan import Wiring

    directory = pffn_builds["dynamic"]
    manifest = json.loads((directory / "manifest.json").read_text())
    wiring = Wiring.from_json(manifest["wiring"])
    inputs = [t.contiguous() for t in pffn_small(5)]
    results = host.run(directory, "PffnFwd", inputs)
    n = wiring.num_outputs
    tangents = [
        torch.randn(o.shape, generator=torch.Generator().manual_seed(1)) for o in results[:n]
    ]
    args = wiring.backward_args(inputs, results[:n], results[n:], tangents)
    kept = [a.clone() for a in args]
    first = host.run(directory, "PffnBwd", args)
    second = host.run(directory, "PffnBwd", args)
    assert all(torch.equal(a, b) for a, b in zip(args, kept))
    assert len(first) == len(second) == len(pffn.param_names)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_cli_verify_cpu_takes_the_generated_folder(suite_builds):
    # the manifest names the file the build came from (examples/suite.py), whose SUITE entry for
    # the build's op gives the reference and the samples; exit status 0 when every row passes
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirai.cli",
            "verify",
            "--cpu",
            str(suite_builds[("mlp", "dynamic")]),
        ]
        + ["--batches", "5"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Mlp from " in result.stdout and "on the CPU driver" in result.stdout
    assert re.search(r"\| 5 \| grad w2 \| \S+ \| 0\.0001 \| yes \|", result.stdout), result.stdout


# ---- the check can fail: break a correct folder in the ways a wrong plan would ----------------------


def split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments (grid expressions call mirai_floordiv(a, b))."""
    args, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            args.append(text[start:i])
            start = i + 1
    return args + [text[start:]]


def swap_first_two_launches(text: str) -> str:
    # every step (a kernel launch or a GEMM) is a block opened by a comment naming it
    blocks = list(re.finditer(r"  \{  // [^\n]+\n.*?\n  \}\n", text, re.DOTALL))
    a, b = blocks[0], blocks[1]
    return text[: a.start()] + b.group() + a.group() + text[b.end() :]


def shrink_first_grid(text: str) -> str:
    call = re.search(r"mirai_rt::Launch\((.*)\);", text)
    args = split_args(call.group(1))
    args[4] = f" ({args[4].strip()}) - 1"  # grid x: one program fewer
    return text[: call.start(1)] + ",".join(args) + text[call.end(1) :]


def swap_first_two_inputs(text: str) -> str:
    text = text.replace("(inputs[0]))", "(inputs[@]))", 1)
    text = text.replace("(inputs[1]))", "(inputs[0]))", 1)
    return text.replace("(inputs[@]))", "(inputs[1]))", 1)


def gemm_operand_transposed(text: str) -> str:
    """The first GEMM reads its second operand with rows and columns swapped."""
    m = re.search(r"g\.b = mirai_rt::GemmMatrix\{([^,]+), ([^,]+), ([^,]+), ([^}]+)\};", text)
    ptr, batch, rows, cols = m.groups()
    return (
        text[: m.start()]
        + f"g.b = mirai_rt::GemmMatrix{{{ptr}, {batch}, {cols}, {rows}}};"
        + text[m.end() :]
    )


def gemm_inner_size_short(text: str) -> str:
    """The first GEMM sums over one element too few."""
    return re.sub(r"g\.k = (.+);", r"g.k = (\1) - 1;", text, count=1)


def size_off_by_one(text: str) -> str:
    return text.replace("static_cast<int32_t>(s0)", "static_cast<int32_t>(s0 - 1)", 1)


BREAKS = {
    # name: (suite function, build mode, op whose launch code is edited, edit)
    "two launches swapped": ("mlp", "static", "MlpFwd", swap_first_two_launches),
    "a grid dimension changed": ("mlp", "static", "MlpBwd", shrink_first_grid),
    "inputs in the wrong order": ("masked", "static", "MaskedFwd", swap_first_two_inputs),
    "a dynamic size off by one": ("layer_norm", "dynamic", "LayerNormFwd", size_off_by_one),
    "a GEMM operand read transposed": ("mlp", "dynamic", "MlpFwd", gemm_operand_transposed),
    "a GEMM one short in its inner size": ("mlp", "static", "MlpBwd", gemm_inner_size_short),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_folder_is_caught(suite_builds, host, tmp_path, name):
    function, mode, op, edit = BREAKS[name]
    fn, samples, _ = SUITE[function]
    broken = tmp_path / "broken"
    shutil.copytree(suite_builds[(function, mode)], broken)
    for stale in broken.glob("*_capi.so"):
        stale.unlink()
    launch = broken / f"{op}_launch.h"
    text = launch.read_text()
    changed = edit(text)
    assert changed != text, "the edit must change the launch code"
    launch.write_text(changed)
    batches = DYNAMIC_BATCHES if mode == "dynamic" else None
    try:
        rows = verify(fn, samples, broken, batches=batches, device="cpu", runner=host)
    except (OpError, MiraiError) as err:  # e.g. a kernel that reads past its buffer
        assert str(err)
        return
    bad = [r for r in rows if not r.ok]
    assert bad, f"{name} was not caught:\n{table(rows)}"


def test_tolerance_follows_what_the_matmuls_compute(suite_builds, host, tmp_path):
    import torch

    fn, samples, _ = SUITE["mlp"]
    # The default build runs mlp's GEMMs in cuBLAS: TF32 on the GPU in a "tf32" build, IEEE fp32 on
    # the CPU stand-in. The manifest records that per GEMM.
    manifest = json.loads((suite_builds[("mlp", "static")] / "manifest.json").read_text())
    gemms = [g for op in manifest["ops"].values() for g in only_variant(op)["gemms"]]
    assert manifest["gemm"] == "auto" and gemms and all(g["dots"] == ["tf32"] for g in gemms)
    assert tolerance(manifest, "cuda") == TOLERANCE["tf32"]
    assert tolerance(manifest, "cpu") == TOLERANCE["ieee"]
    # As Triton templates, torch 2.13 keeps these small GEMMs in IEEE fp32 even in a "tf32" build;
    # the TTIR says so, and so does the tolerance.
    mirai.build(fn, samples(40), output_dir=tmp_path / "small", gemm="triton", progress=False)
    manifest = json.loads((tmp_path / "small" / "manifest.json").read_text())
    dots = {
        tuple(b["dots"])
        for op in manifest["ops"].values()
        for k in op["kernels"].values()
        for b in k["binaries"].values()
    }
    assert manifest["precision"] == "tf32" and ("ieee",) in dots and ("tf32",) not in dots
    assert not any(only_variant(op)["gemms"] for op in manifest["ops"].values())
    assert tolerance(manifest, "cuda") == TOLERANCE["ieee"]
    # ... and computes right, templates interpreted
    every_row_passes(
        verify(fn, samples, tmp_path / "small", device="cpu", runner=host),
        [40],
        expected_tensors(fn, samples),
    )
    # a template GEMM with M >= 16 and min(N, K) >= 512 uses TF32 on the GPU
    big = [torch.randn(16, 512), torch.randn(512, 512), torch.randn(512), torch.randn(512, 512)]
    mirai.build(fn, big, output_dir=tmp_path / "big", gemm="triton", progress=False)
    manifest = json.loads((tmp_path / "big" / "manifest.json").read_text())
    assert tolerance(manifest, "cuda") == TOLERANCE["tf32"]
    assert tolerance(manifest, "cpu") == TOLERANCE["ieee"]
