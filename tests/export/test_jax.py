"""The JAX front end: the same generated kernels as an XLA FFI op, checked on the CPU.

Builds with frameworks=("tf", "jax") of the seed's pffn (small sizes, static and dynamic) and of
functions of examples/suite.py; compiles their XLA FFI handlers with g++ and jaxlib's headers;
traces them with jax (shapes, dtypes, the custom_vjp wiring of forward to backward, errors at trace
time and at run time); then runs them through jax.jit and jax.vjp on XLA's CPU platform, with
mirai's CPU stand-in for the CUDA driver under the launch code, against the function in float64.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import mirai  # noqa: E402
from mirai.errors import MiraiError  # noqa: E402
from mirai.export.frameworks import jax_ffi, parse  # noqa: E402
from mirai.export.frameworks.jax_cpu import JaxHostRunner  # noqa: E402
from mirai.export.plan import Wiring, py_op_name  # noqa: E402
from mirai.export.verify import table, verify  # noqa: E402
from tests.export.conftest import EXAMPLES, only_variant, run, without_cuda_env  # noqa: E402
from tests.export.test_numerics import expected_tensors  # noqa: E402

sys.path.insert(0, str(EXAMPLES))
from pffn import pffn, sample_inputs  # noqa: E402
from suite import SUITE  # noqa: E402

pytestmark = pytest.mark.jax

PFFN_SIZES = {"experts": 2, "d_model": 32, "hidden": 64}
E, D, H = 2, 32, 64
PFFN_SHAPES = [(E, D, H), (E, H), (E, D, H), (E, H), (E, H, D), (E, D)]  # after `inputs`
BUILDS = {
    # name: (function, samples of a batch, batch, dynamic)
    "pffn static": (pffn, lambda b: sample_inputs(b, **PFFN_SIZES), 16, False),
    "pffn dynamic": (pffn, lambda b: sample_inputs(b, **PFFN_SIZES), 16, True),
    "sum_and_product static": (*SUITE["sum_and_product"][:2], 40, False),
    "masked dynamic": (*SUITE["masked"][:2], 40, True),
}


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    """Every build of BUILDS, its JAX handlers compiled by its build_jax.sh (no CUDA toolkit)."""
    root = tmp_path_factory.mktemp("jax")
    out = {}
    for name, (fn, samples, batch, dynamic) in BUILDS.items():
        folder = root / name.replace(" ", "-")
        mirai.build(
            fn,
            samples(batch),
            output_dir=folder,
            dynamic=dynamic,
            gpu=False,
            progress=False,
            frameworks=("tf", "jax"),
        )
        run(["bash", "build_jax.sh"], cwd=folder, env=without_cuda_env())
        out[name] = folder
    return out


@pytest.fixture(scope="module")
def cpu():
    with JaxHostRunner() as runner:
        yield runner


def shapes_of(*shapes, dtype="float32"):
    import jax

    return [jax.ShapeDtypeStruct(s, dtype) for s in shapes]


def pffn_args(batch):
    return shapes_of((batch, E, D), *PFFN_SHAPES)


# ---- the generated folder ---------------------------------------------------------------------


def test_the_folder_holds_both_front_ends_over_one_launch_code(builds):
    folder = builds["pffn static"]
    names = {p.name for p in folder.iterdir()}
    for required in ("PffnFwd.cc", "build.sh", "pffn_api.py", "PffnFwd_launch.h"):
        assert required in names, required
    for required in ("PffnFwd_jax.cc", "PffnBwd_jax.cc", "build_jax.sh", "pffn_jax.py"):
        assert required in names, required
    assert {"PffnFwd_jax.so", "PffnBwd_jax.so"} <= names
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["frameworks"] == ["tf", "jax"]
    handler = (folder / "PffnFwd_jax.cc").read_text()
    assert '#include "PffnFwd_launch.h"' in handler and '#include "xla/ffi/api/ffi.h"' in handler
    assert ".Ctx<ffi::PlatformStream<mirai_rt::CUstream>>()" in handler
    assert ".Ctx<ffi::ScratchAllocator>()" in handler
    assert handler.count(".Arg<ffi::AnyBuffer>()") == 2 * 7  # the CUDA and the CPU binding
    assert '#include "tensorflow' not in handler and "tensorflow::" not in handler
    assert "#include <cuda" not in handler
    script = (folder / "build_jax.sh").read_text()
    assert "jax.ffi.include_dir()" in script and "tensorflow" not in script
    symbols = run(["nm", "-D", "--defined-only", folder / "PffnFwd_jax.so"]).stdout
    assert "mirai_PffnFwd_cuda" in symbols and "mirai_PffnFwd_cpu" in symbols
    linked = run(["ldd", folder / "PffnFwd_jax.so"]).stdout
    assert "libcuda" not in linked and "cudart" not in linked and "tensorflow" not in linked


def test_the_default_stays_tensorflow_only_and_names_are_checked():
    assert parse(None) == ("tf",)
    assert parse("jax, tf") == ("tf", "jax")
    with pytest.raises(MiraiError, match=r"unknown framework 'torch': choose from tf, jax"):
        parse(["tf", "torch"])


def test_jax_alone_and_the_cli_flag(tmp_path):
    module = tmp_path / "scaled.py"
    module.write_text(
        "import torch\nimport mirai\n\n"
        "@mirai.op(name='Scaled')\n"
        "def scaled(x, w):\n    return torch.tanh(x * w)\n\n"
        "MIRAI_BUILD = {'op': scaled, 'sample_inputs': lambda: [torch.randn(8, 4), torch.randn(4)]}\n"
    )
    out = tmp_path / "out"
    result = run(
        [sys.executable, "-m", "mirai.cli", "build", module, "-o", out, "--framework", "jax", "-q"]
    )
    assert "ScaledBwd, ScaledFwd" in result.stdout
    names = {p.name for p in out.iterdir()}
    assert {"ScaledFwd_jax.cc", "build_jax.sh", "scaled_jax.py"} <= names
    assert not names & {"ScaledFwd.cc", "build.sh", "scaled_api.py"}
    both = tmp_path / "both"
    run(
        [sys.executable, "-m", "mirai.cli", "build", module, "-o", both, "--framework=tf,jax", "-q"]
    )
    assert {"ScaledFwd.cc", "ScaledFwd_jax.cc"} <= {p.name for p in both.iterdir()}
    bad = subprocess.run(
        [sys.executable, "-m", "mirai.cli", "build", module, "-o", out, "--framework", "mxnet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "unknown framework 'mxnet'" in bad.stderr


# ---- traced with jax ---------------------------------------------------------------------------


def test_shapes_and_dtypes_at_trace_time(builds):
    import jax
    import numpy as np

    static = jax_ffi.load(builds["pffn static"])
    out = jax.eval_shape(static.pffn, *pffn_args(16))
    assert out.shape == (16, E, D) and out.dtype == np.float32
    dynamic = jax_ffi.load(builds["pffn dynamic"])
    for batch in (2, 3, 17, 1000):
        assert jax.eval_shape(dynamic.pffn, *pffn_args(batch)).shape == (batch, E, D)
    grads = jax.eval_shape(
        jax.grad(lambda *a: dynamic.pffn(*a).sum(), argnums=tuple(range(7))), *pffn_args(5)
    )
    assert [g.shape for g in grads] == [(5, E, D)] + PFFN_SHAPES
    two = jax_ffi.load(builds["sum_and_product static"])
    assert [
        (o.shape, o.dtype) for o in jax.eval_shape(two.sum_and_product, *shapes_of((40, 16)) * 2)
    ] == [
        ((40,), np.float32),
        ((40, 16), np.float32),
    ]


def test_a_function_without_a_backward_op_loads_and_traces(tmp_path):
    # integers only: the build has a forward op and no backward; its module registers the one
    # handler it has at import (a one-op tuple once lacked its comma and failed to import)
    import jax
    import numpy as np

    fn, samples, _ = SUITE["int_only"]
    mirai.build(fn, samples(12), tmp_path, gpu=False, progress=False, frameworks=("jax",))
    run(["bash", "build_jax.sh"], cwd=tmp_path, env=without_cuda_env())
    assert not list(tmp_path.glob("*Bwd_jax.cc"))
    api = jax_ffi.load(tmp_path)
    api.register("cpu")
    out = jax.eval_shape(api.int_only, *shapes_of((12, 8), (12, 8), dtype="int32"))
    assert out.shape == (12, 8) and out.dtype == np.int32


def _ffi_calls(jaxpr):
    """The ffi_call equations of a jaxpr, inner jaxprs (custom_vjp, pjit) included."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "ffi_call":
            found.append(eqn)
        for param in eqn.params.values():
            inner = getattr(param, "jaxpr", param)
            if hasattr(inner, "eqns"):
                found += _ffi_calls(inner)
    return found


@pytest.mark.parametrize("name", ["pffn dynamic", "sum_and_product static", "masked dynamic"])
def test_custom_vjp_wires_the_forward_op_into_the_backward_op(builds, name):
    import jax

    folder = builds[name]
    manifest = json.loads((folder / "manifest.json").read_text())
    wiring = Wiring.from_json(manifest["wiring"])
    api = jax_ffi.load(folder)
    _, samples, batch, dynamic = BUILDS[name]
    args = [
        jax.ShapeDtypeStruct(tuple(t.shape), str(t.dtype).split(".")[-1])
        for t in samples(7 if dynamic else batch)
    ]
    function = getattr(api, py_op_name(manifest["name"]))
    n = wiring.num_outputs

    def loss(*a):
        out = function(*a)
        return sum(o.sum() for o in (out if n > 1 else [out]))

    floating = tuple(k for k, g in enumerate(wiring.gradients) if g is not None)
    closed = jax.make_jaxpr(jax.grad(loss, argnums=floating))(*args)
    calls = _ffi_calls(closed.jaxpr)
    fwd = [c for c in calls if c.params["target_name"] == api._FWD.target]
    bwd = [c for c in calls if c.params["target_name"] == api._BWD.target]
    assert len(fwd) == 1 and len(bwd) == 1, [c.params["target_name"] for c in calls]
    fwd, bwd = fwd[0], bwd[0]
    # every backward input is what the wiring says: a forward input (the very argument), a forward
    # output or residual (the forward call's result), or the upstream gradient
    inputs = list(closed.jaxpr.invars)
    for source, var in zip(wiring.backward_inputs, bwd.invars):
        if source.kind == "input":
            assert var is inputs[source.index], source
        elif source.kind == "output":
            assert var is fwd.outvars[source.index], source
        elif source.kind == "residual":
            assert var is fwd.outvars[n + source.index], source
        else:
            assert var not in fwd.outvars and var not in inputs, source
    # each gradient is the backward output the wiring names
    grads = closed.jaxpr.outvars
    for k, index in zip(floating, grads):
        assert index is bwd.outvars[wiring.gradients[k]]
    # and it lowers: the StableHLO holds both custom calls, the forward first
    lowered = jax.jit(jax.grad(loss, argnums=floating)).lower(*args).as_text()
    assert lowered.index(api._FWD.target) < lowered.index(api._BWD.target)


def test_wrong_inputs_are_refused_at_trace_time(builds):
    import jax

    static = jax_ffi.load(builds["pffn static"])
    dynamic = jax_ffi.load(builds["pffn dynamic"])
    good = pffn_args(16)
    with pytest.raises(
        TypeError, match=r"PffnFwd: input 'w_gate' \(#1\) must be float32, got int32"
    ):
        jax.eval_shape(static.pffn, good[0], *shapes_of(PFFN_SHAPES[0], dtype="int32"), *good[2:])
    with pytest.raises(
        ValueError, match=r"PffnFwd: input 'inputs' \(#0\) dimension 0 is 15, expected 16"
    ):
        jax.eval_shape(static.pffn, *pffn_args(15))
    with pytest.raises(ValueError, match=r"input 'b_down' \(#6\) dimension 1 is 33, expected 32"):
        jax.eval_shape(dynamic.pffn, *good[:6], *shapes_of((E, D + 1)))
    with pytest.raises(
        ValueError, match=r"input 'inputs' \(#0\) must have rank 3, got shape \(16, 2\)"
    ):
        jax.eval_shape(dynamic.pffn, *shapes_of((16, E)), *good[1:])
    with pytest.raises(
        ValueError, match=r"dimension 0 is 1; the op was built for sizes >= 2 there"
    ):
        jax.eval_shape(dynamic.pffn, *pffn_args(1))
    with pytest.raises(TypeError, match=r"must be an array of float32, got list"):
        dynamic.pffn([1.0], *good[1:])
    masked = jax_ffi.load(builds["masked dynamic"])
    with pytest.raises(
        ValueError, match=r"input 'mask' \(#1\) dimension 0 is 6, expected 5 \(s0\)"
    ):
        jax.eval_shape(masked.masked, *shapes_of((5, 32), (6, 32)))


def test_the_launch_codes_checks_come_back_as_xla_errors(builds):
    # Past the Python checks (a call of the FFI target itself): the handler's Bind refuses a wrong
    # shape as InvalidArgument, a result type that disagrees with the launch code too, and a run
    # without a CUDA driver is an Internal error; none of them crashes the process.
    import jax
    import jax.numpy as jnp

    api = jax_ffi.load(builds["pffn dynamic"])
    api.register("cpu")
    target = api._FWD.target

    def call(result_types, *args):
        return jax.ffi.ffi_call(target, result_types)(*args)

    residual = (128 * 5,)
    results = [
        jax.ShapeDtypeStruct(s, jnp.float32) for s in [(5, E, D), residual, residual, residual]
    ]
    good = [jnp.ones(a.shape, jnp.float32) for a in pffn_args(5)]
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match=r"INVALID_ARGUMENT: PffnFwd: input 'w_up' \(#3\) dimension 2 is 65, expected 64",
    ):
        jax.block_until_ready(call(results, *good[:3], jnp.ones((E, D, H + 1)), *good[4:]))
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match=r"INVALID_ARGUMENT: PffnFwd: output 'residual_1' \(#2\) must be float32 of shape \(640\)",
    ):
        wrong = results[:2] + [jax.ShapeDtypeStruct((641,), jnp.float32)] + results[3:]
        jax.block_until_ready(call(wrong, *good))
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match=r"INVALID_ARGUMENT: PffnFwd: input 'b_gate' \(#2\) must be float32",
    ):
        jax.block_until_ready(call(results, *good[:2], good[2].astype(jnp.int32), *good[3:]))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"INTERNAL: .*CUDA driver"):
        jax.block_until_ready(call(results, *good))
    assert float(jnp.ones(3).sum()) == 3.0  # the process lives on


# ---- numbers: jax on XLA's CPU platform, the CPU stand-in driver under the launch code -------------


def launched(cpu, folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    order = sorted(manifest["ops"], key=lambda op: not op.endswith("Fwd"))  # forward, then backward
    return [(op, k) for op, k, _grid in cpu.launches] == [
        (op, k) for op in order for k in only_variant(manifest["ops"][op])["launches"]
    ]


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_jax_computes_right_on_the_cpu(builds, cpu, name):
    fn, samples, batch, dynamic = BUILDS[name]
    batches = [3, 17] if dynamic else [batch]
    rows = verify(fn, samples, builds[name], batches=batches, device="cpu", runner=cpu)
    assert {r.batch for r in rows} == set(batches), table(rows)
    for b in batches:
        assert sorted(r.name for r in rows if r.batch == b) == sorted(
            expected_tensors(fn, samples, b)
        )
    assert all(r.ok for r in rows), table(rows)
    assert launched(cpu, builds[name]), cpu.launches


def test_a_wrongly_wired_jax_api_is_caught(builds, cpu, tmp_path):
    # the check can fail: swap two gradients of the same shape in the generated custom_vjp (those
    # of w_gate and w_up), and the numbers say so
    broken = tmp_path / "broken"
    shutil.copytree(builds["pffn static"], broken)
    api = broken / "pffn_jax.py"
    text = api.read_text()
    line = "return (grads[0], grads[1], grads[2], grads[3],"
    assert text.count(line) == 1
    changed = text.replace(line, "return (grads[0], grads[3], grads[2], grads[1],")
    api.write_text(changed)
    fn, samples, _, _ = BUILDS["pffn static"]
    rows = verify(fn, samples, broken, device="cpu", runner=cpu)
    bad = {r.name for r in rows if not r.ok}
    assert {"grad w_gate", "grad w_up"} <= bad, table(rows)


def test_cli_verify_cpu_through_jax(builds):
    # the manifest names examples/suite.py; --jax runs the folder's JAX API on the CPU stand-in
    result = subprocess.run(
        [sys.executable, "-m", "mirai.cli", "verify", "--cpu", "--jax", builds["masked dynamic"]]
        + ["--batches", "5"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "on the CPU driver (Triton's interpreter), through JAX" in result.stdout
    assert re.search(r"\| 5 \| grad x \| \S+ \| 0\.0001 \| yes \|", result.stdout), result.stdout
