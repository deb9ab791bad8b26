"""JAX: an XLA FFI handler per generated op (jax_ffi.cc.j2, the typed FFI API of
`xla/ffi/api/ffi.h`), build_jax.sh (g++ and jaxlib's headers only), and a Python API that registers
the handlers and joins the forward and backward ops with jax.custom_vjp (jax_api.py.j2).

    generated/PffnFwd_jax.cc PffnBwd_jax.cc build_jax.sh pffn_jax.py

The handlers adapt the same launch code as the TensorFlow ops: XLA's stream, XLA's scratch allocator,
`mirai_rt::Status` as `ffi::Error`. Output shapes are computed in Python, when the function is
traced, from the plan's size expressions (printed as Python by mirai.export.symbolic.to_python), and
the launch code checks the shapes again when it runs.

`build` runs a folder's build_jax.sh and `load` imports its JAX module, for mirai's own checks:

    >>> api = load(build("generated"))  # doctest: +SKIP
    >>> y = jax.jit(api.pffn)(inputs, w_gate, b_gate, w_up, b_up, w_down, b_down)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from mirai import process
from mirai.errors import MiraiError
from mirai.export.frameworks import api_fields
from mirai.export.plan import py_op_name
from mirai.export.symbolic import to_python

# XLA FFI's DataType of each dtype a generated op may take or give (xla/ffi/api/ffi.h)
FFI_TYPE = {
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "float64": "F64",
    "int64": "S64",
    "int32": "S32",
    "int16": "S16",
    "int8": "S8",
    "uint8": "U8",
    "bool": "PRED",
}


def module_name(name: str) -> str:
    """The generated JAX module of an export: `pffn_jax` for Pffn."""
    return f"{py_op_name(name)}_jax"


def _py_tuple(items) -> str:
    """A Python tuple display of expressions: "(s0, 2, 32)", "(2048,)", "()"."""
    items = list(items)
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _op(op) -> dict:
    """What the Python API knows of one op: names, dtypes, ranks, and each tensor's shape as a Python
    expression over the size symbols (and as captured, for messages)."""
    return {
        "op_name": op.op_name,
        "py_name": op.py_name,
        "names": repr(tuple(t.tf_name for t in op.inputs)),
        "ranks": _py_tuple(str(t.rank) for t in op.inputs),
        "bindings": op.bindings,
        "input_shapes": [_py_tuple(to_python(s) for s in t.shape) for t in op.inputs],
        "captured": repr(tuple(tuple(t.shape) for t in op.inputs)),
        "outputs": [(_py_tuple(to_python(s) for s in t.shape), t.tf_name) for t in op.outputs],
        "input_specs": repr([(t.tf_name, t.dtype) for t in op.inputs]),
        "output_dtypes": repr([t.dtype for t in op.outputs]),
    }


def files(env, common: dict, export) -> dict[str, str]:
    out = {}
    for op in export.ops:
        out[f"{op.op_name}_jax.cc"] = env.get_template("jax_ffi.cc.j2").render(
            **common,
            **op.template_fields(),
            input_types=[FFI_TYPE[t.dtype] for t in op.inputs],
            output_types=[FFI_TYPE[t.dtype] for t in op.outputs],
        )
    out["build_jax.sh"] = env.get_template("build_jax.sh.j2").render(
        **common, name=export.name, ops=[op.op_name for op in export.ops]
    )
    fields = api_fields(export)
    module = module_name(export.name)
    n_user = fields["num_outputs"]
    out[f"{module}.py"] = env.get_template("jax_api.py.j2").render(
        **common,
        **fields,
        module=module,
        function=py_op_name(export.name),
        ops=[_op(op) for op in export.ops],
        input_specs=repr(
            tuple((i.tf_name, i.dtype, tuple(i.shape)) for i in export.forward.inputs)
        ),
        output_specs=repr(
            tuple((o.tf_name, o.dtype, tuple(o.shape)) for o in export.forward.outputs[:n_user])
        ),
    )
    return out


def build(directory, timeout: float = 600) -> Path:
    """Build the folder's handlers with its build_jax.sh, with this Python's jax (skipped when every
    library is newer than what it is built from); return the folder."""
    directory = Path(directory)
    script = directory / "build_jax.sh"
    if not script.exists():
        raise MiraiError(
            f"{directory} has no build_jax.sh: build it with frameworks=('tf', 'jax') "
            "(CLI: --framework tf,jax)"
        )
    ops = json.loads((directory / "manifest.json").read_text())["ops"]
    sources = [directory / "mirai_runtime.h", script]
    sources += [
        directory / f"{op}_{part}" for op in ops for part in ("jax.cc", "launch.h", "kernels.h")
    ]
    newest = max(p.stat().st_mtime for p in sources if p.exists())
    libraries = [directory / f"{op}_jax.so" for op in ops]
    if all(lib.exists() and lib.stat().st_mtime >= newest for lib in libraries):
        return directory
    env = dict(os.environ, PYTHON=sys.executable)
    process.run(
        ["bash", str(script)],
        stage=f"build the JAX handlers in {directory}",
        env=env,
        timeout=timeout,
    )
    return directory


def load(directory):
    """Import the folder's generated JAX module (which registers its handlers for CUDA)."""
    directory = Path(directory).resolve()
    name = module_name(json.loads((directory / "manifest.json").read_text())["name"])
    path = directory / f"{name}.py"
    if not path.exists():
        raise MiraiError(f"{directory} has no {path.name}: build it with frameworks=('tf', 'jax')")
    # a name of its own per folder: two builds of one function can be loaded side by side
    key = f"_mirai_jax_{abs(hash(str(directory))):x}_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[key] = module
    return module
