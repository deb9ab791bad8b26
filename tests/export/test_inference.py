"""Inference builds (`mirai.build(..., inference=True)`, `mirai build --inference`): the forward alone,
writing the function's outputs and no residuals, computing what the function computes, and
loadable in one TensorFlow process beside the training build of the same function."""

from __future__ import annotations

import json
import sys

import pytest

import mirai
from mirai.export.verify import table as row_table
from mirai.export.verify import verify
from tests.export.conftest import EXAMPLES, run, without_cuda_env
from tests.export.test_numerics import DYNAMIC_BATCHES, pffn_small

sys.path.insert(0, str(EXAMPLES))
from pffn import pffn  # noqa: E402


def outputs_by_op(directory) -> dict:
    manifest = json.loads((directory / "manifest.json").read_text())
    return {name: [o["kind"] for o in op["outputs"]] for name, op in manifest["ops"].items()}


def test_an_inference_build_writes_outputs_alone_and_computes_right(tmp_path, host):
    training = mirai.build(pffn, pffn_small(5), tmp_path / "train", gpu=False, progress=False)
    serving = mirai.build(
        pffn, pffn_small(5), tmp_path / "serve", dynamic=True, inference=True, gpu=False,
        progress=False,
    )  # fmt: skip
    assert sorted(training.ops) == ["PffnBwd", "PffnFwd"]
    assert "residual" in outputs_by_op(tmp_path / "train")["PffnFwd"]
    assert outputs_by_op(tmp_path / "serve") == {"PffnInferenceFwd": ["output"]}
    assert serving.capture.backward is None

    rows = verify(
        pffn.for_inference(), pffn_small, tmp_path / "serve", batches=DYNAMIC_BATCHES,
        device="cpu", runner=host,
    )  # fmt: skip
    assert {(r.batch, r.name) for r in rows} == {(b, "output0") for b in DYNAMIC_BATCHES}
    assert all(r.ok for r in rows), row_table(rows)


@pytest.mark.tf
def test_the_cli_inference_build_loads_beside_the_training_build(pffn_static, tmp_path):
    out = tmp_path / "serving"
    run(
        [sys.executable, "-m", "mirai.cli", "build", EXAMPLES / "pffn.py", "--inference",
         "--output-dir", out, "--gpuless", "-q"],
    )  # fmt: skip
    run(["bash", "build.sh"], cwd=out, env=without_cuda_env())
    checks = EXAMPLES.parent / "tests" / "export" / "tf_checks.py"
    both = [sys.executable, checks, "forward-many", "8000", out, pffn_static]
    seen = json.loads(run(both).stdout.strip().splitlines()[-1])
    serving, training = seen[str(out)], seen[str(pffn_static)]
    assert serving["fwd_ops"] == ["PffnInferenceFwd"], seen
    assert serving["bwd_ops"] == []
    assert serving["fwd_output_shapes"] == [[8000, 8, 256]]  # the output, nothing else
    assert serving["output_shape"] == [8000, 8, 256]
    assert training["fwd_ops"] == ["PffnFwd"]  # both builds' ops registered in one process
    assert len(training["fwd_output_shapes"]) > 1  # the training forward's residuals

    # Differentiating through the inference op is refused, naming it (it has no gradient).
    seen = json.loads(run([sys.executable, checks, "trace-many", "8000", out]).stdout.strip())
    assert "PffnInferenceFwd" in seen[str(out)]["error"], seen


def test_cli_verify_finds_the_op_of_an_inference_build(tmp_path):
    # `mirai verify DIR` reads the op's name from the manifest and looks it up in the file the build
    # came from, whose MIRAI_BUILD names the training op: PffnInference is its inference build
    import argparse

    from mirai.cli.verify import _reference

    manifest = {"name": "PffnInference", "source": {"file": str(EXAMPLES / "pffn.py")}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    args = argparse.Namespace(file=str(tmp_path), generated=None, function=None)
    directory, op, _ = _reference(args)
    assert directory == tmp_path
    assert op.name == "PffnInference" and op.no_grad == tuple(pffn.param_names)
