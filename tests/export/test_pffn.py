"""The seed's pffn from PyTorch to TensorFlow ops, GPU-less: capture, compile, render, build, load."""

from __future__ import annotations

import pytest

import json
import subprocess
import sys

from tests.export.conftest import EXAMPLES, ROOT, only_variant, tf_check

E, D, H = 8, 256, 1024
PARAMS = ["inputs", "w_gate", "b_gate", "w_up", "b_up", "w_down", "b_down"]
INPUT_SHAPES = [[None, E, D], [E, D, H], [E, H], [E, D, H], [E, H], [E, H, D], [E, D]]


def test_generated_folder_matches_the_contract(pffn_static):
    names = {p.name for p in pffn_static.iterdir()}
    for required in [
        "PffnFwd.cc",
        "PffnBwd.cc",
        "build.sh",
        "pffn_api.py",
        "manifest.json",
        "PffnFwd.so",
        "PffnBwd.so",
        "mirai_runtime.h",
        "PffnFwd_launch.h",
    ]:
        assert required in names, required
    manifest = json.loads((pffn_static / "manifest.json").read_text())
    assert manifest["targets"] == ["sm_90"] and manifest["precision"] == "tf32"
    assert manifest["capture_target"] == "sm_90" and manifest["origin"] == "gpuless:sm_90"
    assert manifest["versions"]["torch"].startswith("2.13")
    for op in ("PffnFwd", "PffnBwd"):
        kernels = manifest["ops"][op]["kernels"]
        assert kernels, op
        for name in kernels:
            assert list(kernels[name]["binaries"]) == ["sm_90"]
            assert "@triton.jit" in (pffn_static / "tf32" / op / f"{name}.py").read_text()
            folder = pffn_static / "tf32" / op / "sm_90"
            ptx = (folder / f"{name}.ptx").read_text()
            assert ".target sm_90a" in ptx and f".entry {kernels[name]['function']}" in ptx
            assert (folder / f"{name}.cubin").read_bytes()[:4] == b"\x7fELF"
            meta = json.loads((folder / f"{name}.json").read_text())
            assert {"global_scratch_size", "profile_scratch_size", "shared", "num_warps"} <= set(
                meta
            )


def test_every_matmul_runs_in_cublaslt_or_the_fused_kernels(pffn_static):
    # the default build of a training op (fusions.default: gate_up_down), GPU-less with the default
    # gemm policy: the gate and up projections run in the fused gate_up kernel, the down projection
    # in one cuBLASLt GEMM writing pffn's [B, E, D] rows with its bias (bmm_rows); the backward runs
    # the down GEMM's input gradient with SiLU's in the silu_grad kernel, and five cuBLASLt GEMMs
    # (the input's gradient as two bmm_rows, the three weights'); none is a Triton GEMM template
    manifest = json.loads((pffn_static / "manifest.json").read_text())
    assert manifest["gemm"] == "auto" and manifest["fused"] == {"gate_up_down": 1}
    for op, gemms, fused_kernel in (
        ("PffnFwd", ["bmm_rows"], "gate_up_kernel"),
        ("PffnBwd", ["bmm_rows"] * 2 + ["bmm"] * 3, "silu_grad_kernel"),
    ):
        spec = only_variant(manifest["ops"][op])
        assert sorted(g["op"] for g in spec["gemms"]) == sorted(gemms), op
        assert all(g["dots"] == ["tf32"] and g["library"] == "cublaslt" for g in spec["gemms"])
        assert fused_kernel in spec["launches"], op
        assert not any(k.startswith("triton_tem") for k in spec["launches"]), op
        launch = (pffn_static / f"{op}_launch.h").read_text()
        assert launch.count("mirai_rt::RunGemm(") == len(gemms)
        assert "extern" not in launch.replace('extern "C"', "")
    runtime = (pffn_static / "mirai_runtime.h").read_text()
    assert 'getenv("MIRAI_CUBLASLT")' in runtime and '"libcublasLt.so.13"' in runtime


def test_launch_code_is_framework_neutral_and_loads_libcuda_at_run_time(pffn_static):
    runtime = (pffn_static / "mirai_runtime.h").read_text()
    launch = (pffn_static / "PffnFwd_launch.h").read_text()
    assert '#include "tensorflow' not in runtime + launch
    assert "tensorflow::" not in runtime + launch
    assert 'dlopen("libcuda.so.1"' in runtime
    for forbidden in (
        "abort(",
        "exit(",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cudaDeviceSynchronize",
    ):
        assert forbidden not in runtime + launch, forbidden
    op_cc = (pffn_static / "PffnFwd.cc").read_text()
    assert 'REGISTER_KERNEL_BUILDER(Name("PffnFwd").Device(::tensorflow::DEVICE_GPU)' in op_cc
    assert "#include <cuda" not in op_cc and "cuda_runtime" not in op_cc


@pytest.mark.tf
def test_shape_functions_and_gradient_wiring_in_a_tf_function(pffn_static):
    seen = tf_check(pffn_static, "trace", "8000")
    assert seen["fwd_ops"] == ["PffnFwd"] and seen["bwd_ops"] == ["PffnBwd"]
    assert seen["output_shape"] == [8000, E, D]
    assert seen["grad_shapes"] == [[8000, E, D]] + INPUT_SHAPES[1:]
    # Each gradient is the matching output of PffnBwd.
    assert seen["grad_sources"] == [["PffnBwd", k] for k in range(7)]
    wiring = seen["bwd_wiring"]
    sources = {(w["op"], w["index"]) for w in wiring}
    # The residuals come from the forward op's outputs after the user output.
    assert {("PffnFwd", k) for k in range(1, len(seen["fwd_output_shapes"]))} <= sources
    # Forward inputs reach the backward op as the very placeholders the user passed.
    assert all(w["placeholder"] is not None for w in wiring if w["op"] == "Placeholder")
    assert any(w["op"] not in ("Placeholder", "PffnFwd") for w in wiring)  # the upstream gradient


@pytest.mark.tf
def test_static_op_refuses_a_wrong_dimension_at_trace_time(pffn_static):
    seen = tf_check(pffn_static, "bad-shape")
    assert seen["error"] is not None
    # b_down is (8, 256); the check gave it (8, 257)
    assert "Dimension must be 256 but is 257" in seen["message"], seen["message"]
    assert "[8,257]" in seen["message"]


@pytest.mark.tf
def test_running_without_a_gpu_kernel_is_a_clean_error(pffn_static):
    seen = tf_check(pffn_static, "run-cpu")
    assert seen["error"] == "NotFoundError"
    assert "PffnFwd" in seen["message"]


@pytest.mark.tf
def test_dynamic_batch_shapes_propagate(pffn_dynamic):
    seen = tf_check(pffn_dynamic, "trace", "none")
    assert seen["output_shape"] == [None, E, D]
    assert seen["grad_shapes"][0] == [None, E, D]
    assert seen["grad_shapes"][1:] == INPUT_SHAPES[1:]
    # Residuals are flat buffers whose size follows the batch: unknown while tracing.
    assert all(s == [None] for s in seen["fwd_output_shapes"][1:])
    at_2000 = tf_check(pffn_dynamic, "trace", "2000")
    assert at_2000["output_shape"] == [2000, E, D]
    assert all(s == [8192 * 2000] for s in at_2000["fwd_output_shapes"][1:])
    manifest = json.loads((pffn_dynamic / "manifest.json").read_text())
    # the default fusions' Triton kernels take the batch as a 32-bit argument: the compilation
    # assumed B <= 2**31 - 1, and the manifest says so
    assert manifest["symbols"] == {"s0": {"input": 0, "dim": 0, "range": [2, 2**31 - 1]}}


def test_two_builds_are_byte_identical(pffn_static, tmp_path):
    from tests.export.conftest import run

    out = tmp_path / "again"
    run(
        [
            sys.executable,
            "-m",
            "mirai.cli",
            "build",
            EXAMPLES / "pffn.py",
            "-o",
            out,
            "--gpuless",
            "-q",
        ]
    )
    generated = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert generated
    for rel in generated:
        assert (out / rel).read_bytes() == (pffn_static / rel).read_bytes(), rel


def test_demo_example_runs_as_a_script(tmp_path):
    """The example calls mirai.build itself when run (as the spec's quick start does)."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "pffn.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**__import__("os").environ, "MIRAI_GPULESS": "1", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "generated" / "PffnFwd.cc").exists()
    assert "capture Pffn for sm_90 GPU-less" in result.stderr


@pytest.mark.tf
def test_half_precision_build_registers_only_half(tmp_path):
    import mirai
    from tests.export.conftest import run, without_cuda_env

    sys.path.insert(0, str(EXAMPLES))
    from pffn import pffn, sample_inputs

    out = tmp_path / "fp16"
    mirai.build(
        pffn, sample_inputs(64), output_dir=out, precision="fp16", gpu=False, progress=False
    )
    assert (out / "fp16" / "PffnFwd").is_dir() and not (out / "tf32").exists()
    assert '.Input("inputs: half")' in (out / "PffnFwd.cc").read_text()
    run(["bash", "build.sh"], cwd=out, env=without_cuda_env())
    seen = tf_check(out, "trace", "64")
    assert seen["output_shape"] == [64, E, D] and len(seen["grad_shapes"]) == 7
    refused = tf_check(out, "wrong-dtype")
    assert refused["error"] is not None and "expected type of float16" in refused["message"]
