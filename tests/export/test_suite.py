"""Breadth: every function of examples/suite.py, static and dynamic, captured GPU-less, built with
build.sh against tensorflow-cpu, loaded, and shape-checked in a tf.function trace; the launch code's
run-time checks refuse wrong shapes without a GPU (through its C interface)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mirai
from tests.export.conftest import EXAMPLES, SUITE_MODES, run

sys.path.insert(0, str(EXAMPLES))
from suite import B, SUITE  # noqa: E402

MODES = SUITE_MODES


def trace_all(builds, mode: str, batch: str) -> dict:
    dirs = [str(d) for (name, m), d in sorted(builds.items()) if m == mode]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = run(
        [sys.executable, Path(__file__).with_name("tf_checks.py"), "trace-many", batch, *dirs],
        env=env,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.tf
@pytest.mark.parametrize("mode", MODES)
def test_every_function_builds_loads_and_has_the_right_shapes(suite_builds, mode):
    # Static ops are traced at the sample batch; dynamic ones with an unknown batch and at 2 * B.
    batches = [str(B)] if mode == "static" else ["none", str(2 * B)]
    for batch in batches:
        seen = trace_all(suite_builds, mode, batch)
        for name, (fn, samples, shapes) in SUITE.items():
            got = seen[str(suite_builds[(name, mode)])]
            assert "error" not in got, (name, mode, got)
            size = None if batch == "none" else int(batch)
            expected = [[size if d == B else d for d in shape] for shape in shapes(B)]
            assert got["output_shapes"] == expected, (name, mode, batch, got["output_shapes"])
            params = fn.param_names
            manifest = json.loads((suite_builds[(name, mode)] / "manifest.json").read_text())
            inputs = manifest["inputs"]
            wants_grad = [
                i["dtype"].startswith(("float", "bfloat")) and p not in fn.no_grad
                for p, i in zip(params, inputs)
            ]
            if any(wants_grad):
                assert got["bwd_ops"] == [f"{fn.name}Bwd"], name
                for k, (g, want) in enumerate(zip(got["grad_shapes"], wants_grad)):
                    assert (g is not None) == want, (name, params[k], g)
                    if want:
                        assert g == got["input_shapes"][k], (name, params[k])
            else:
                assert got["bwd_ops"] == [] and f"{fn.name}Bwd" not in manifest["ops"], name


def test_dynamic_builds_bind_their_batch_symbol(suite_builds):
    for name, (fn, samples, _) in SUITE.items():
        manifest = json.loads((suite_builds[(name, "dynamic")] / "manifest.json").read_text())
        assert list(manifest["symbols"]) == ["s0"], name
        static = json.loads((suite_builds[(name, "static")] / "manifest.json").read_text())
        assert static["symbols"] == {}, name


def test_input_order_follows_the_signature_not_first_use(suite_builds):
    # masked() touches `mask` before `x`; the ops still take (x, mask), and only x gets a gradient.
    manifest = json.loads((suite_builds[("masked", "static")] / "manifest.json").read_text())
    assert [i["name"] for i in manifest["ops"]["MaskedFwd"]["inputs"]] == ["x", "mask"]
    assert manifest["ops"]["MaskedBwd"]["grad_inputs"] == [0]


def test_launch_code_refuses_wrong_shapes_without_a_gpu(suite_builds):
    from mirai.export.launch import GeneratedOp, OpError

    static = GeneratedOp(suite_builds[("gather_scale", "static")], "GatherScaleFwd")
    dynamic = GeneratedOp(suite_builds[("gather_scale", "dynamic")], "GatherScaleFwd")
    x, index = SUITE["gather_scale"][1](B)
    assert static.bind([x, index]) is not None and dynamic.bind([x, index]) is not None
    dynamic.bind([x[:7], index[:7]])  # any batch >= 2 for the dynamic op
    cases = [
        (static, [x[:7], index[:7]], "input 'x' (#0) dimension 0 is 7, expected 40"),
        (static, [x[0], index], "input 'x' (#0) must have rank 2, got rank 1"),
        (dynamic, [x[:7], index[:6]], "input 'index' (#1) dimension 0 is 6, expected 7"),
        (dynamic, [x[:, :8], index], "input 'x' (#0) dimension 1 is 8, expected 16"),
        (dynamic, [x[:1], index[:1]], "dimension 0 is 1; the op was built for sizes >= 2"),
    ]
    for op, inputs, message in cases:
        with pytest.raises(OpError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
            op.bind(inputs)
        assert err.value.code == 1  # InvalidArgument


def test_no_backward_function_has_only_a_forward_op(suite_builds):
    folder = suite_builds[("int_only", "static")]
    assert not (folder / "IntOnlyBwd.cc").exists()
    api = (folder / "int_only_api.py").read_text()
    assert "custom_gradient" not in api.split('"""', 2)[2]


def test_cli_verify_needs_a_gpu(suite_builds):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirai.cli",
            "verify",
            str(EXAMPLES / "suite.py"),
            "--function",
            "softmax",
            "--generated",
            str(suite_builds[("softmax", "dynamic")]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if torch.cuda.is_available():  # pragma: no cover - CI has no GPU
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 2
        assert "needs a CUDA GPU" in result.stderr


def test_a_matmul_at_an_unaligned_batch_builds_gpu_less(tmp_path):
    # Inductor decides whether to pad a GEMM's shapes by timing both on the device; GPU-less capture
    # has none, so it keeps the shapes (here M = 3).
    fn, samples, _ = SUITE["mlp"]
    result = mirai.build(fn, samples(3), output_dir=tmp_path, gpu=False, progress=False)
    assert result.ops == ["MlpBwd", "MlpFwd"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["outputs"][0]["sizes"] == ["3", "32"]


def test_the_wiring_is_one_record_read_by_the_api_and_the_launch_code(suite_builds, tmp_path):
    # masked(x, mask): the plan decides how MaskedBwd is fed and whose gradient it returns; the
    # manifest records that once, the generated TF API renders it, and mirai.export.launch reads it back.
    import dataclasses
    import shutil

    from mirai.errors import MiraiError
    from mirai.export.launch import GeneratedFunction
    from mirai.export.plan import Source, Wiring

    folder = suite_builds[("masked", "static")]
    manifest = json.loads((folder / "manifest.json").read_text())
    wiring = Wiring.from_json(manifest["wiring"])
    assert wiring.num_outputs == 1 and wiring.gradients == (0, None)
    bwd_inputs = manifest["ops"]["MaskedBwd"]["inputs"]
    assert [Source(i["source"]["kind"], i["source"]["index"]) for i in bwd_inputs] == list(
        wiring.backward_inputs
    )
    names = ["x", "mask"]
    expected = wiring.backward_args(names, ["outputs[0]"], ["residuals[0]"], ["grad_outputs[0]"])
    api = (folder / "masked_api.py").read_text()
    assert f"_bwd_lib.masked_bwd({', '.join(expected)})" in api
    assert "return [grads[0], None]" in api
    assert GeneratedFunction(folder).wiring == wiring
    with pytest.raises(dataclasses.FrozenInstanceError):
        wiring.num_outputs = 2  # the plan is frozen
    # A folder whose manifest lacks the wiring (made by an older mirai) is refused clearly.
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    del manifest["wiring"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(MiraiError, match="no wiring; rebuild"):
        GeneratedFunction(old)
    with pytest.raises(MiraiError, match="wiring is malformed"):
        Wiring.from_json({"num_outputs": 1, "backward_inputs": [["bogus", 0]], "gradients": []})
