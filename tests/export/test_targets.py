"""Several targets in one build: a cubin per architecture plus PTX, chosen by the GPU's compute
capability at run time. The choice is made by the generated launch code itself, asked through its C
interface for each architecture (no GPU needed); the TF ops build and load as for one target."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

import mirai
from mirai.export.compile import compile_all
from mirai.errors import CompileError, MiraiError
from mirai.export.launch import GeneratedOp
from mirai.gpu.targets import capture_target, get_target, parse_targets
from tests.export.conftest import EXAMPLES, run, tf_check, without_cuda_env

sys.path.insert(0, str(EXAMPLES))
from suite import B, SUITE  # noqa: E402


@pytest.fixture(scope="module")
def mlp_two_archs(tmp_path_factory):
    """The suite's mlp (matmul templates and a fused epilogue), dynamic, for sm_90 and sm_80."""
    out = tmp_path_factory.mktemp("mlp-sm80-sm90")
    fn, samples, _ = SUITE["mlp"]
    result = mirai.build(
        fn,
        samples(B),
        output_dir=out,
        dynamic=True,
        target="sm_90,sm_80",
        gpu=False,
        gemm="triton",
        progress=False,
    )
    run(["bash", "build.sh"], cwd=out, env=without_cuda_env())
    return result


def test_targets_are_ordered_and_captured_for_the_smallest_device():
    assert [t.name for t in parse_targets(["sm_90", "sm_80", "sm_90"])] == ["sm_80", "sm_90"]
    both = capture_target(parse_targets("sm_89,sm_80"))
    assert both.name == "sm_80" and both.cc == 80
    assert both.shared_memory_per_block_optin == get_target("sm_89").shared_memory_per_block_optin
    with pytest.raises(MiraiError, match=r"unknown target 'sm_7'"):
        parse_targets("sm_80,sm_7")
    with pytest.raises(MiraiError, match=r"no target named"):
        parse_targets([])


def test_each_kernel_has_a_binary_per_target(mlp_two_archs):
    out = mlp_two_archs.output_dir
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["targets"] == ["sm_80", "sm_90"]
    assert manifest["capture_target"] == "sm_80" and manifest["origin"] == "gpuless:sm_80"
    for op in ("MlpFwd", "MlpBwd"):
        kernels = manifest["ops"][op]["kernels"]
        assert any(name.startswith("triton_tem") for name in kernels), op
        header = (out / f"{op}_kernels.h").read_text()
        for name, spec in kernels.items():
            assert {t: b["arch"] for t, b in spec["binaries"].items()} == {
                "sm_80": "sm_80",
                "sm_90": "sm_90a",
            }
            for target, arch in (("sm_80", "sm_80"), ("sm_90", "sm_90a")):
                folder = out / "tf32" / op / target
                assert f".target {arch}\n" in (folder / f"{name}.ptx").read_text()
                assert (folder / f"{name}.cubin").read_bytes()[:4] == b"\x7fELF"
            assert f'{{"{spec["function"]}", kBinaries' in header
        assert header.count("{80, false, kCubin") == len(kernels)
        assert header.count("{90, true, kCubin") == len(kernels)


def test_the_launch_code_picks_the_binary_for_each_gpu(mlp_two_archs):
    out = mlp_two_archs.output_dir
    for op in ("MlpFwd", "MlpBwd"):
        generated = GeneratedOp(out, op)
        expected = {
            80: "cubin sm_80",
            86: "cubin sm_80",  # binary compatible within a major version
            89: "cubin sm_80",
            90: "cubin sm_90a",
            100: "PTX sm_80",  # compiled by the driver
            120: "PTX sm_80",
            75: None,  # older than every target
        }
        for cc, choice in expected.items():
            choices = generated.binaries(cc)
            assert choices and set(choices.values()) == {choice}, (op, cc, choices)


def test_a_single_arch_specific_target_has_no_fallback(pffn_static):
    generated = GeneratedOp(pffn_static, "PffnFwd")
    assert set(generated.binaries(90).values()) == {"cubin sm_90a"}
    assert set(generated.binaries(100).values()) == {None}  # sm_90a PTX runs on 9.0 only
    assert set(generated.binaries(80).values()) == {None}


def test_inspect_reports_each_architecture(mlp_two_archs):
    out = mlp_two_archs.output_dir
    cli = [sys.executable, "-m", "mirai.cli", "inspect", out]
    ok = subprocess.run(cli + ["--arch", "sm_86,9.0,100"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "Mlp: tf32, targets sm_80, sm_90, captured gpuless:sm_80" in ok.stdout
    assert "symbol s0: input 0 dimension 0" in ok.stdout
    assert "| cubin sm_80 | cubin sm_90a | PTX sm_80 |" in ok.stdout
    missing = subprocess.run(cli + ["--arch", "sm_75"], capture_output=True, text=True)
    assert missing.returncode == 1 and "| none |" in missing.stdout


@pytest.mark.tf
def test_two_arch_ops_load_and_propagate_shapes_in_tensorflow(mlp_two_archs):
    seen = tf_check(mlp_two_archs.output_dir, "trace", "none")
    assert seen["fwd_ops"] == ["MlpFwd"] and seen["bwd_ops"] == ["MlpBwd"]
    assert seen["output_shape"] == [None, 32]
    assert seen["grad_shapes"] == [[None, 64], [64, 128], [128], [128, 32]]


def test_a_kernel_too_big_for_a_target_is_refused(mlp_two_archs):
    tiny = dataclasses.replace(get_target("sm_80"), shared_memory_per_block_optin=1024)
    kernels = {"forward": mlp_two_archs.capture.kernels["forward"]}
    with pytest.raises(
        CompileError, match=r"needs \d+ bytes of shared memory on sm_80, which has 1024"
    ):
        compile_all(kernels, [tiny])


def test_a_new_architecture_is_one_registry_entry(monkeypatch, tmp_path, host):
    # sm_100 is not registered: one entry (here a test's, with sm_90's properties) lets mirai build
    # for it GPU-less, and the generated launch code picks its cubin and computes right on the CPU
    from mirai.gpu import targets
    from mirai.export.verify import verify

    sys.path.insert(0, str(EXAMPLES))
    from pffn import pffn, sample_inputs

    with pytest.raises(MiraiError, match="unknown target 'sm_100'"):
        parse_targets("sm_100")
    entry = dataclasses.replace(targets.TARGETS["sm_90"], name="sm_100", major=10, minor=0)
    monkeypatch.setitem(targets.TARGETS, "sm_100", entry)
    samples = lambda b: sample_inputs(b, experts=2, d_model=32, hidden=64)  # noqa: E731
    mirai.build(pffn, samples(8), output_dir=tmp_path, target="10.0", progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["targets"] == ["sm_100"]
    archs = {
        b["arch"]
        for op in manifest["ops"].values()
        for k in op["kernels"].values()
        for b in k["binaries"].values()
    }
    assert archs == {"sm_100a"}
    rows = verify(pffn, samples, tmp_path, device="cpu", runner=host)
    assert rows and all(r.ok for r in rows)
    assert {op for op, _kernel, _grid in host.launches} == {"PffnFwd", "PffnBwd"}
