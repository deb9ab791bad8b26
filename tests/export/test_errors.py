"""Bad input to the export face gives a clear error that says what is wrong and what to do."""

from __future__ import annotations

import pytest
import torch

import mirai
from mirai.gpu import versions
from mirai.errors import MiraiError, UnsupportedError, VersionError


@mirai.op(name="Scale")
def scale(x, w):
    return x * w


def test_undecorated_function(tmp_path):
    def plain(x):
        return x * 2

    with pytest.raises(MiraiError, match=r"decorated with @mirai.op"):
        mirai.build(plain, [torch.ones(4)], output_dir=tmp_path, progress=False)


def test_non_tensor_sample_input(tmp_path):
    with pytest.raises(MiraiError, match=r"sample input 'w' is a float, not a torch.Tensor"):
        mirai.build(scale, [torch.ones(4), 2.0], output_dir=tmp_path, progress=False)


def test_wrong_number_of_sample_inputs(tmp_path):
    with pytest.raises(MiraiError, match=r"Scale takes 2 inputs \(x, w\), sample_inputs has 1"):
        mirai.build(scale, [torch.ones(4)], output_dir=tmp_path, progress=False)


def test_unsupported_op_is_named(tmp_path):
    @mirai.op(name="Spectrum")
    def spectrum(x):
        return torch.fft.rfft(x, dim=-1).abs()

    with pytest.raises(UnsupportedError, match=r"torch\.ops\.aten\._fft_r2c"):
        mirai.build(spectrum, [torch.randn(4, 64)], output_dir=tmp_path, progress=False)
    assert not (tmp_path / "SpectrumFwd.cc").exists()


def test_output_dir_not_writable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(MiraiError, match=r"is not writable"):
        mirai.build(
            scale, [torch.ones(4), torch.ones(4)], output_dir=blocker / "out", progress=False
        )


def test_invalid_op_name():
    with pytest.raises(MiraiError, match=r"not a valid TensorFlow op name"):
        mirai.op(name="bad name")(lambda x: x)


def test_unknown_target(tmp_path):
    with pytest.raises(MiraiError, match=r"unknown target 'sm_12'.*sm_90"):
        mirai.build(
            scale,
            [torch.ones(4), torch.ones(4)],
            output_dir=tmp_path,
            target="sm_12",
            progress=False,
        )


def test_unknown_versions_fail_clearly(monkeypatch):
    monkeypatch.setattr(versions, "installed", lambda: {"torch": "2.9.1", "triton": "3.5.0"})
    with pytest.raises(VersionError, match=r"torch 2.13 \+ triton 3.7.*found torch 2.9.1"):
        versions.check()


def test_cli_reports_errors_without_a_traceback(tmp_path, capsys):
    from mirai.cli import main

    bad = tmp_path / "nothing.py"
    bad.write_text("x = 1\n")
    assert main(["build", str(bad), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "defines no MIRAI_BUILD" in err and "Traceback" not in err


def test_ptx_version_and_ptxas_options(tmp_path):
    import glob

    import triton

    @mirai.op(name="Twice")
    def twice(x):
        return x * 2

    ptxas = glob.glob(f"{triton.__path__[0]}/backends/nvidia/bin/ptxas")[0]
    mirai.build(
        twice, [torch.ones(64)], output_dir=tmp_path, ptx_version=80, ptxas=ptxas, progress=False
    )
    ptx = next((tmp_path / "tf32" / "TwiceFwd" / "sm_90").glob("*.ptx")).read_text()
    assert ".version 8.0" in ptx
    with pytest.raises(MiraiError, match=r"ptxas '/nonexistent/ptxas' is not an executable file"):
        mirai.build(
            twice, [torch.ones(64)], output_dir=tmp_path, ptxas="/nonexistent/ptxas", progress=False
        )


def test_precision_must_be_known(tmp_path):
    with pytest.raises(MiraiError, match=r"unknown precision 'fp8'"):
        mirai.build(
            scale,
            [torch.ones(4), torch.ones(4)],
            output_dir=tmp_path,
            precision="fp8",
            progress=False,
        )


def test_cpu_driver_refuses_an_unknown_triton(monkeypatch):
    import triton

    monkeypatch.setattr(triton, "__version__", "3.6.0")
    with pytest.raises(VersionError, match=r"written for triton 3.7; found triton 3.6.0"):
        versions.check_host_driver()


@pytest.mark.parametrize(
    "args, message",
    [
        (["/no/such/path"], "no such file or folder: /no/such/path"),
        (["{tmp}"], "is not a generated folder (it has no manifest.json)"),
        (["{tmp}/nosource"], "does not say which file the build came from"),
        (["{tmp}/mlp", "--batches", "3,x"], "--batches takes integers, e.g. 3,17; got '3,x'"),
    ],
)
def test_cli_verify_cpu_says_what_is_wrong(tmp_path, capsys, args, message):
    import json
    from pathlib import Path

    from mirai.cli import main

    suite = Path(__file__).resolve().parents[2] / "examples" / "suite.py"
    for name, source in (("nosource", None), ("mlp", {"file": str(suite), "function": "mlp"})):
        (tmp_path / name).mkdir()
        manifest = {"name": "Mlp", "source": source}
        (tmp_path / name / "manifest.json").write_text(json.dumps(manifest))
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["verify", "--cpu", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_capture_and_build_refuse_a_hip_target(tmp_path):
    from mirai.export.capture import capture

    with pytest.raises(MiraiError, match="capture generates CUDA kernels; gfx942 is a hip target"):
        capture(scale, [torch.ones(4), torch.ones(4)], target="hip:gfx942")
    with pytest.raises(MiraiError, match="gfx942 is a hip target"):
        mirai.build(scale, [torch.ones(4), torch.ones(4)], tmp_path, target="gfx942")


def test_unknown_gemm_policy(tmp_path):
    with pytest.raises(
        MiraiError, match=r"unknown GEMM policy 'cudnn'; choose one of auto, cublas"
    ):
        mirai.build(
            scale, [torch.ones(4), torch.ones(4)], output_dir=tmp_path, gemm="cudnn", progress=False
        )
    assert not (tmp_path / "manifest.json").exists()


def test_a_float64_matmul_is_refused_clearly(tmp_path):
    # Inductor has no Triton template for a float64 matmul and leaves it to cuBLAS; the generated
    # code runs cuBLAS GEMMs in fp32, fp16 and bf16 only
    @mirai.op(name="Mm64")
    def mm64(a, b):
        return a @ b

    samples = [torch.randn(8, 16, dtype=torch.float64), torch.randn(16, 4, dtype=torch.float64)]
    with pytest.raises(UnsupportedError, match=r"a float64 matmul \(mm\).*float32, float16"):
        mirai.build(mm64, samples, output_dir=tmp_path, progress=False)
    assert not (tmp_path / "manifest.json").exists()


def test_a_function_that_changes_an_argument_in_place_is_refused(tmp_path):
    @mirai.op(name="Bump")
    def bump(x, w):
        x[:, 0].add_(1.0)  # through a view: the argument's storage changes all the same
        return x * w

    with pytest.raises(UnsupportedError, match=r"Bump changes its argument 'x' in place"):
        mirai.build(bump, [torch.ones(4, 3), torch.ones(4, 3)], tmp_path, progress=False)
    assert not (tmp_path / "manifest.json").exists()


def test_a_module_through_functional_call_is_not_taken_for_a_change_in_place(tmp_path):
    # tracing torch.func.functional_call bumps the version counters of the tensors it swaps into
    # the module, with no write in the graph (the explorer exports models this way)
    linear = torch.nn.Linear(8, 4)

    @mirai.op(name="Lin")
    def lin(x, w, b):
        return torch.func.functional_call(linear, {"weight": w, "bias": b}, (x,))

    samples = [torch.randn(2, 8), linear.weight.detach(), linear.bias.detach()]
    mirai.build(lin, samples, output_dir=tmp_path, progress=False)
    assert (tmp_path / "manifest.json").exists()


def test_the_plan_refuses_a_step_that_writes_an_input():
    # The backward graph may not reuse a saved tensor's memory (capture turns AOTAutograd's buffer
    # donation off); should a kernel still write into an op input, the plan refuses it rather than
    # generate an op that changes its inputs. Here the forward kernel's output is redirected to x.
    import dataclasses

    from mirai.export.capture import capture
    from mirai.export.graph import Launch
    from mirai.export.plan import _plan_forward

    cap = capture(scale, [torch.ones(4, 3), torch.ones(4, 3)])
    graph = cap.forward
    x = next(i.name for i in graph.inputs if i.kind == "tensor")
    launch = graph.launches[0]
    written = [a for a in launch.args if a.name.startswith("out_ptr")]
    assert written, launch.args
    args = tuple(
        dataclasses.replace(a, view=dataclasses.replace(a.view, base=x)) if a in written else a
        for a in launch.args
    )
    steps = tuple(dataclasses.replace(launch, args=args) if s is launch else s for s in graph.steps)
    broken = dataclasses.replace(cap, forward=dataclasses.replace(graph, steps=steps))

    builder, _, _ = _plan_forward(cap, {})
    builder.check_inputs_kept()  # the real capture writes only its own buffers
    builder, _, _ = _plan_forward(broken, {})
    with pytest.raises(UnsupportedError, match=r"ScaleFwd: triton_\w+ writes into the op's input"):
        builder.check_inputs_kept()


BLIND_CAPTURE = r"""
import json, pickle, sys
sys.path.insert(0, "tests/export")
from mirai.export.capture import gpuless
from mirai.gpu.targets import get_target
target = get_target("sm_90")
gpuless.activate(target)   # as the capture worker does, before torch
import blind_kernel  # registers the operator the traced graph calls
from mirai.errors import CaptureError
from mirai.export.capture.core import capture_graphs
with open(sys.argv[1], "rb") as f:
    traced = pickle.load(f)
try:
    capture_graphs(traced, target, "tf32", gpu=False, name="BlindKernel")
    print(json.dumps({"error": None}))
except CaptureError as err:
    print(json.dumps({"error": str(err)}))
"""


def test_a_kernel_inductor_cannot_analyse_is_refused(tmp_path):
    """A user-defined Triton kernel whose call leaves a constexpr without a value: Inductor cannot
    compile it to see what it writes, warns, and would copy every tensor it takes before each
    launch (a fused backward once ran that way, copying 500 MB per call). The capture refuses it,
    naming the cause, rather than export a silently slower op. Captured in a child process with
    the GPU-less shim, as the capture worker does, with the operator registered there."""
    import pickle
    import sys

    from mirai.export.capture.trace import trace
    from tests.export.conftest import interpreted

    sys.path.insert(0, "tests/export")
    import blind_kernel

    traced = tmp_path / "trace.pkl"
    traced.write_bytes(pickle.dumps(trace(blind_kernel.blind, [torch.randn(100)])))
    error = interpreted(BLIND_CAPTURE, traced, drop=("TRITON_INTERPRET",))["error"]
    assert error is not None and "could not tell which tensors" in error, error
    assert "expected ['x_ptr', 'y_ptr', 'n', 'BLOCK', 'TWICE']" in error, error


@pytest.mark.parametrize(
    "op, advice",
    [("bmm", r"gemm='triton'"), ("bmm_rows", r"without the bmm_rows and gate_up_down fusions")],
)
def test_a_gemm_cublaslt_cannot_read_says_what_to_build_instead(op, advice):
    # a fusion's GEMM runs in cuBLASLt only: gemm='triton' would not change it
    from mirai.export.graph import Gemm, View
    from mirai.export.plan import _OpBuilder

    dense = View("a", "float32", ("8", "64", "256"), ("16384", "256", "1"))
    strided = View("b", "float32", ("8", "256", "1024"), ("524288", "2048", "2"))
    gemm = Gemm(op=op, a=dense, b=strided, out=dense)
    with pytest.raises(
        UnsupportedError, match=rf"second operand of {op} .*cannot read; .*{advice}"
    ):
        _OpBuilder(None, "Pffn", None, {}).gemm(gemm)
