"""Plan: a Capture and its compiled kernels -> one flat, fully resolved dict per generated op.

Templates receive only what this module computes: names, C++ expressions, byte arrays. Decisions live
here, not in the templates:

- which storage each pointer comes from (an op input, an op output, a temporary allocation);
- how the forward op hands saved tensors to the backward op (as the original input, as a forward
  output, or as a residual: a flat output holding a buffer the backward reads);
- how each size symbol is bound from input shapes, and what is checked at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirai.errors import UnsupportedError
from mirai.graph import Capture, KernelGraph, View
from mirai.symbolic import parse, to_cpp

ELEMENT_SIZE = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
TF_TYPE = {
    "float32": ("float", "DT_FLOAT"),
    "float16": ("half", "DT_HALF"),
    "bfloat16": ("bfloat16", "DT_BFLOAT16"),
    "float64": ("double", "DT_DOUBLE"),
    "int32": ("int32", "DT_INT32"),
    "int64": ("int64", "DT_INT64"),
    "bool": ("bool", "DT_BOOL"),
    "uint8": ("uint8", "DT_UINT8"),
    "int8": ("int8", "DT_INT8"),
}
SCALAR_CTYPE = {
    "i1": "int32_t",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u1": "uint32_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    "fp16": "uint16_t",
    "bf16": "uint16_t",
    "fp32": "float",
    "fp64": "double",
}


def tf_arg_name(name: str) -> str:
    """TensorFlow argument names are lower_snake_case starting with a letter."""
    snake = re.sub(r"[^a-z0-9_]", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower())
    return snake if re.match(r"^[a-z]", snake) else f"x_{snake}"


@dataclass(frozen=True)
class Source:
    """Where a backward-op input comes from in the TensorFlow API."""

    kind: str  # "input" (forward input), "output" (forward output), "residual", "tangent"
    index: int


def _is_dense(view: View, sizes) -> bool:
    expected = "1"
    strides = []
    for size in reversed(sizes):
        strides.append(expected)
        expected = f"({expected})*({size})"
    strides.reverse()
    return (
        all(parse(a) == parse(b) or parse(s) == 1 for a, b, s in zip(view.strides, strides, sizes))
        and parse(view.offset) == 0
    )


def _numel(sizes) -> str:
    return "*".join(f"({s})" for s in sizes) or "1"


class _OpBuilder:
    """Collects one op's inputs, outputs, storages and steps as template-ready dicts."""

    def __init__(self, capture: Capture, op_name: str, graph: KernelGraph, compiled: dict):
        self.capture = capture
        self.op_name = op_name
        self.graph = graph
        self.compiled = compiled
        self.inputs: list[dict] = []  # op inputs
        self.outputs: list[dict] = []  # op outputs
        self.storage: dict[str, dict] = {}  # graph storage name -> pointer source
        self.copies: list[dict] = []

    # -- op interface ----------------------------------------------------------------------------
    def add_input(self, name: str, dtype: str, sizes, kind: str, aligned: bool = False) -> int:
        self.inputs.append(
            {
                "index": len(self.inputs),
                "name": name,
                "tf_name": tf_arg_name(name),
                "dtype": dtype,
                "tf_type": TF_TYPE[dtype][0],
                "sizes": [to_cpp(s) for s in sizes],
                "shape_sizes": list(sizes),
                "rank": len(sizes),
                "kind": kind,
                "aligned": aligned,
            }
        )
        return len(self.inputs) - 1

    def add_output(self, name: str, dtype: str, sizes, kind: str) -> int:
        self.outputs.append(
            {
                "name": name,
                "tf_name": tf_arg_name(name),
                "dtype": dtype,
                "tf_type": TF_TYPE[dtype][0],
                "tf_enum": TF_TYPE[dtype][1],
                "sizes": [to_cpp(s) for s in sizes],
                "shape_sizes": list(sizes),
                "rank": len(sizes),
                "kind": kind,
            }
        )
        return len(self.outputs) - 1

    # -- dict for the template --------------------------------------------------------------------
    def symbols_used(self) -> list[str]:
        return sorted(self.capture.symbols, key=lambda s: int(s[1:]))

    def bindings(self) -> list[dict]:
        out = []
        for symbol in self.symbols_used():
            for i, inp in enumerate(self.inputs):
                if symbol in inp["shape_sizes"]:
                    dim = inp["shape_sizes"].index(symbol)
                    lo = self.capture.symbol_ranges.get(symbol, (1, None))[0]
                    out.append({"symbol": symbol, "input": i, "dim": dim, "min": int(lo)})
                    break
            else:
                raise UnsupportedError(
                    f"{self.op_name}: no input of the op has a dimension equal to size symbol {symbol}"
                )
        return out

    def render_dict(self) -> dict:
        steps = []
        kernels = {}
        for step in self.graph.steps:
            kernel = self.compiled[step.kernel]
            _check_launchable(kernel)
            kernels[step.kernel] = kernel
            args = {a.name: a for a in step.args}
            params = []
            for name, ctype in kernel.params:
                if name not in args:
                    raise UnsupportedError(f"kernel {step.kernel}: no value for parameter {name}")
                arg = args[name]
                if arg.kind == "ptr":
                    params.append({"kind": "ptr", "expr": self.pointer(arg.view)})
                else:
                    cty = SCALAR_CTYPE.get(ctype)
                    if cty is None:
                        raise UnsupportedError(f"kernel {step.kernel}: parameter type {ctype}")
                    expr = to_cpp(arg.value) if arg.kind == "int" else arg.value
                    params.append(
                        {
                            "kind": "scalar",
                            "ctype": cty,
                            "expr": expr,
                            "check_i32": ctype == "i32" and arg.kind == "int",
                            "name": name,
                        }
                    )
            steps.append(
                {
                    "kind": "launch",
                    "kernel": step.kernel,
                    "kernel_index": sorted(self.compiled).index(step.kernel),
                    "grid": [to_cpp(g) for g in step.grid],
                    "params": params,
                }
            )
        temps = [
            {"var": s["var"], "bytes": self.buffer_bytes(name)}
            for name, s in self.storage.items()
            if s["kind"] == "temp"
        ]
        return {
            "op_name": self.op_name,
            "namespace": "mirai_" + tf_arg_name(self.op_name),
            "inputs": self.inputs,
            "outputs": self.outputs,
            "symbols": self.symbols_used(),
            "bindings": self.bindings(),
            "storages": [
                {
                    "var": s["var"],
                    "kind": s["kind"],
                    "index": s.get("index", 0),
                    "offset_bytes": s.get("offset_bytes", "0"),
                }
                for s in self.storage.values()
                if s["kind"] != "temp"
            ],
            "temps": temps,
            "steps": steps,
            "copies": self.copies,
            "kernel_names": sorted(self.compiled),
            "uses_kernels": sorted(kernels),
        }

    def storage_var(self, name: str) -> str:
        return self.storage[name]["var"]

    def buffer_bytes(self, name: str) -> str:
        buf = self.graph.buffer(name)
        return to_cpp(parse(f"({buf.numel})*{ELEMENT_SIZE[buf.dtype]}"))

    def pointer(self, view: View) -> str:
        base = self.storage_var(view.base)
        offset = parse(view.offset)
        if offset == 0:
            return base
        return f"{base} + ({to_cpp(offset)}) * {ELEMENT_SIZE[view.dtype]}"


def _check_launchable(kernel) -> None:
    for b in kernel.binaries:
        if b.num_ctas != 1 or tuple(b.cluster_dims) not in ((1, 1, 1), (0, 0, 0)):
            raise UnsupportedError(f"kernel {b.name} uses thread-block clusters on {b.target}")
        if b.launch_cooperative_grid or b.launch_pdl:
            raise UnsupportedError(
                f"kernel {b.name} needs a cooperative or PDL launch on {b.target}"
            )


def _output_buffers(graph: KernelGraph, views, builder: _OpBuilder, first_output: int):
    """Let each dense output own its buffer (the kernels write the TF output in place); copy the rest."""
    owned = set()
    for j, view in enumerate(views):
        out_index = first_output + j
        sizes = builder.outputs[out_index]["shape_sizes"]
        buf = next((b for b in graph.buffers if b.name == view.base), None)
        if (
            buf is not None
            and view.base not in owned
            and _is_dense(view, sizes)
            and parse(buf.numel) == parse(_numel(sizes))
        ):
            owned.add(view.base)
            builder.storage[view.base] = {
                "var": f"p_{view.base}",
                "kind": "output",
                "index": out_index,
            }
        else:
            if not _is_dense(View(view.base, view.dtype, view.sizes, view.strides, "0"), sizes):
                raise UnsupportedError(
                    f"{builder.op_name}: output {j} is a strided view of another tensor; "
                    "return a fresh tensor (e.g. .contiguous() or .clone())"
                )
            builder.copies.append(
                {
                    "output": out_index,
                    "bytes": to_cpp(parse(f"({_numel(sizes)})*" f"{ELEMENT_SIZE[view.dtype]}")),
                    "src": view,
                }
            )
    return owned


def _finish(builder: _OpBuilder, graph: KernelGraph) -> dict:
    """Every buffer not yet an input or output is a temporary; resolve the copies; render."""
    for buf in graph.buffers:
        if buf.name not in builder.storage:
            builder.storage[buf.name] = {"var": f"p_{buf.name}", "kind": "temp"}
    for copy in builder.copies:
        if isinstance(copy["src"], View):
            copy["src"] = builder.pointer(copy["src"])
    return builder.render_dict()


def _input_order(capture: Capture, tensor_inputs) -> list[int]:
    """Parameter index of each tensor input of the forward graph (Dynamo orders them by first use)."""
    order = list(capture.input_order) or list(range(len(tensor_inputs)))
    if len(order) != len(tensor_inputs) or sorted(order) != list(range(len(capture.inputs))):
        raise UnsupportedError(
            f"{capture.name}: the forward graph takes {len(tensor_inputs)} tensors for "
            f"{len(capture.inputs)} inputs (unused or duplicated inputs are not supported)"
        )
    return order


def plan_forward(capture: Capture, compiled: dict) -> tuple[dict, list[dict]]:
    """The forward op, and the residuals it outputs for the backward op."""
    graph = capture.forward
    b = _OpBuilder(capture, f"{capture.name}Fwd", graph, compiled)
    tensor_inputs = [i for i in graph.inputs if i.kind == "tensor"]
    order = _input_order(capture, tensor_inputs)
    for spec in capture.inputs:
        b.add_input(spec.name, spec.dtype, spec.sizes, "input")
    for gi, param in zip(tensor_inputs, order):
        b.storage[gi.name] = {"var": f"p_{gi.name}", "kind": "input", "index": param}
        b.inputs[param]["aligned"] = gi.aligned
    n_user = len(capture.outputs)
    for spec in capture.outputs:
        b.add_output(spec.name, spec.dtype, spec.sizes, "output")
    _output_buffers(graph, graph.outputs[:n_user], b, 0)

    # Saved tensors: name -> how the backward op gets them.
    residuals: list[dict] = []
    saved_sources = {}
    input_index = {gi.name: param for gi, param in zip(tensor_inputs, order)}
    for name, index in capture.saved.items():
        view = graph.outputs[index]
        if not isinstance(view, View):
            continue  # a saved size symbol: the backward binds it from shapes
        if view.base in input_index:
            saved_sources[name] = (Source("input", input_index[view.base]), view)
        elif b.storage.get(view.base, {}).get("kind") == "output":
            saved_sources[name] = (Source("output", b.storage[view.base]["index"]), view)
        else:
            existing = next((r for r in residuals if r["buffer"] == view.base), None)
            if existing is None:
                buf = graph.buffer(view.base)
                existing = {
                    "buffer": view.base,
                    "index": len(residuals),
                    "dtype": buf.dtype,
                    "numel": buf.numel,
                }
                residuals.append(existing)
                out = b.add_output(
                    f"residual_{existing['index']}", buf.dtype, (buf.numel,), "residual"
                )
                b.storage[view.base] = {"var": f"p_{view.base}", "kind": "output", "index": out}
            saved_sources[name] = (Source("residual", existing["index"]), view)
    data = _finish(b, graph)
    data["saved_sources"] = saved_sources
    data["num_user_outputs"] = n_user
    return data, residuals


def plan_backward(capture: Capture, compiled: dict, saved_sources: dict, residuals) -> dict:
    graph = capture.backward
    b = _OpBuilder(capture, f"{capture.name}Bwd", graph, compiled)
    sources: dict[Source, int] = {}

    def source_input(source: Source) -> int:
        if source in sources:
            return sources[source]
        if source.kind == "input":
            spec = capture.inputs[source.index]
            index = b.add_input(spec.name, spec.dtype, spec.sizes, "input")
        elif source.kind == "output":
            spec = capture.outputs[source.index]
            index = b.add_input(f"fwd_{spec.name}", spec.dtype, spec.sizes, "output")
        elif source.kind == "residual":
            r = residuals[source.index]
            index = b.add_input(f"residual_{r['index']}", r["dtype"], (r["numel"],), "residual")
        else:
            spec = capture.outputs[source.index]
            index = b.add_input(f"grad_{spec.name}", spec.dtype, spec.sizes, "tangent")
        b.inputs[index]["source"] = {"kind": source.kind, "index": source.index}
        sources[source] = index
        return index

    for gi in graph.inputs:
        if gi.kind != "tensor":
            continue
        tangent = re.fullmatch(r"tangents_(\d+)", gi.name)
        if tangent:
            index = source_input(Source("tangent", int(tangent.group(1)) - 1))
            b.storage[gi.name] = {"var": f"p_{gi.name}", "kind": "input", "index": index}
        elif gi.name in saved_sources:
            source, view = saved_sources[gi.name]
            index = source_input(source)
            offset = parse(view.offset)
            b.storage[gi.name] = {
                "var": f"p_{gi.name}",
                "kind": "input",
                "index": index,
                "offset_bytes": to_cpp(offset * ELEMENT_SIZE[view.dtype]),
            }
        else:
            raise UnsupportedError(
                f"{b.op_name}: cannot tell where backward input {gi.name} comes from"
            )
    # Every size symbol needs an input to be read from.
    for symbol, (k, _dim) in sorted(capture.symbols.items()):
        if not any(symbol in i["shape_sizes"] for i in b.inputs):
            source_input(Source("input", k))
    # Gradients: one per tensor input of the forward graph, None where there is none.
    tensor_positions = [p for p, i in enumerate(capture.forward.inputs) if i.kind == "tensor"]
    order = _input_order(capture, tensor_positions)
    position_of = {param: p for p, param in zip(tensor_positions, order)}
    grads, grad_views = [], []
    for k, spec in enumerate(capture.inputs):
        p = position_of[k]
        view = graph.outputs[p] if p < len(graph.outputs) else None
        if isinstance(view, View):
            b.add_output(f"grad_{spec.name}", spec.dtype, spec.sizes, "grad")
            grads.append(k)
            grad_views.append(view)
    _output_buffers(graph, grad_views, b, 0)
    data = _finish(b, graph)
    data["grad_inputs"] = grads
    return data
