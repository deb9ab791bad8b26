"""Trace a @mirai.op function with Dynamo into an FX graph, on whatever device the samples live.

The graph is device-independent torch IR; with its placeholder specs (dtypes, symbolic sizes, which
inputs need gradients) it is all that compilation for a CUDA target needs, so it can be pickled to a
GPU-less capture worker. Outputs are made contiguous inside the traced function: a TensorFlow tensor is
always dense row-major, and Inductor then writes that layout directly.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from mirai.export.decorator import Op
from mirai.errors import CaptureError, MiraiError, UnsupportedError
from mirai.export.graph import TensorSpec
from mirai.export.symbolic import expr_str

SUPPORTED_DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "bool")


@dataclass(frozen=True)
class PlaceholderSpec:
    kind: str  # "tensor" or "symint"
    dtype: str = ""
    sizes: tuple[str, ...] = ()
    strides: tuple[str, ...] = ()
    requires_grad: bool = False
    symbol: str = ""
    hint: int = 0


@dataclass(frozen=True)
class Trace:
    graph_module: bytes  # pickled torch.fx.GraphModule
    placeholders: tuple[PlaceholderSpec, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    grad_inputs: tuple[int, ...]
    symbols: dict  # symbol -> (input index, dim)
    hints: dict  # symbol -> sample value
    input_order: tuple[int, ...] = ()  # graph tensor k -> parameter index


class _Traced(Exception):
    pass


def dynamic_dims(samples, dynamic) -> dict[int, tuple[int, ...]]:
    """Which (input, dims) are dynamic. `True`: the leading (batch) dimension of every input whose
    leading dimension equals the first input's; a dict {input index: dims} names them explicitly."""
    if not dynamic:
        return {}
    if dynamic is True:
        batch = samples[0].shape[0] if samples[0].dim() else None
        return {i: (0,) for i, t in enumerate(samples) if t.dim() and batch and t.shape[0] == batch}
    if isinstance(dynamic, dict):
        return {int(i): tuple(int(d) for d in dims) for i, dims in dynamic.items()}
    raise MiraiError("dynamic must be False, True or a dict {input index: [dims]}")


def _validate(op, samples):
    import torch

    if not isinstance(op, Op):
        raise MiraiError(
            f"mirai.build needs a function decorated with @mirai.op(name=...); got {op!r}"
        )
    if not isinstance(samples, (list, tuple)) or not samples:
        raise MiraiError("sample_inputs must be a non-empty list of tensors")
    params = op.param_names
    if len(samples) != len(params):
        raise MiraiError(
            f"{op.name} takes {len(params)} inputs ({', '.join(params)}), "
            f"sample_inputs has {len(samples)}"
        )
    for name, sample in zip(params, samples):
        if not isinstance(sample, torch.Tensor):
            raise MiraiError(
                f"sample input {name!r} is a {type(sample).__name__}, not a torch.Tensor; every "
                "input of an exported op is a tensor (pass scalars as 0-d tensors)"
            )
        dtype = str(sample.dtype).replace("torch.", "")
        if dtype not in SUPPORTED_DTYPES:
            raise UnsupportedError(f"sample input {name!r} has unsupported dtype {dtype}")


def trace(op: Op, samples, dynamic=False) -> Trace:
    """Trace `op` on `samples` (any device) and describe its graph for capture."""
    import torch

    _validate(op, samples)
    params = op.param_names
    samples = [s.detach().contiguous() for s in samples]
    grad_inputs = tuple(
        i
        for i, (name, s) in enumerate(zip(params, samples))
        if s.is_floating_point() and name not in op.no_grad
    )
    dims = dynamic_dims(samples, dynamic)
    for index, ds in dims.items():
        for d in ds:
            torch._dynamo.mark_dynamic(samples[index], d)

    def contiguous_outputs(*args):
        out = op.fn(*args)
        single = isinstance(out, torch.Tensor)
        outs = (out,) if single else tuple(out)
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            raise UnsupportedError(f"{op.name} must return a tensor or a tuple of tensors")
        return tuple(o.contiguous() for o in outs)

    captured = {}

    def backend(gm, example_inputs):
        captured["gm"] = gm
        # Dynamo drops the placeholders' sources once compilation ends: read them now.
        captured["params"] = {
            node.name: _param_index(node, params)
            for node in gm.graph.nodes
            if node.op == "placeholder"
            and not isinstance(node.meta.get("example_value"), torch.SymInt)
        }
        raise _Traced()

    torch._dynamo.reset()
    try:
        torch.compile(contiguous_outputs, backend=backend, fullgraph=True, dynamic=False)(*samples)
    except Exception as err:  # Dynamo wraps the backend's exception
        if "gm" not in captured:
            raise CaptureError(f"torch.compile could not trace {op.name}: {err}") from err
    finally:
        torch._dynamo.reset()
    gm = captured["gm"]
    _refuse_input_mutation(op, gm, captured["params"], samples)

    placeholders, names = [], {}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        if isinstance(value, torch.SymInt):
            expr = value.node.expr
            names.setdefault(str(expr), f"s{len(names)}")
            placeholders.append(("symint", value, None))
        else:
            for s in list(value.shape) + list(value.stride()):
                if isinstance(s, torch.SymInt):
                    for sym in sorted(s.node.expr.free_symbols, key=str):
                        names.setdefault(str(sym), f"s{len(names)}")
            placeholders.append(("tensor", value, captured["params"][node.name]))

    def canon(value) -> str:
        if isinstance(value, torch.SymInt):
            expr = value.node.expr.xreplace(
                {sym: _sym(names[str(sym)]) for sym in value.node.expr.free_symbols}
            )
            return expr_str(expr)
        return str(int(value))

    specs, order = [], []
    hints = {}
    for kind, value, param in placeholders:
        if kind == "symint":
            symbol = canon(value)
            hint = int(value.node.hint) if value.node.hint is not None else 0
            hints[symbol] = hint
            specs.append(PlaceholderSpec(kind="symint", symbol=symbol, hint=hint))
        else:
            specs.append(
                PlaceholderSpec(
                    kind="tensor",
                    dtype=str(value.dtype).replace("torch.", ""),
                    sizes=tuple(canon(s) for s in value.shape),
                    strides=tuple(canon(s) for s in value.stride()),
                    requires_grad=param in grad_inputs,
                )
            )
            order.append(param)

    if sorted(order) != list(range(len(params))):
        unused = [params[i] for i in range(len(params)) if i not in order]
        raise UnsupportedError(
            f"{op.name} does not use its input(s) {', '.join(unused)}; remove them from the signature"
        )
    # The graph takes its tensors in the order the function first touched them; the ops take the
    # function's parameters in order. `input_order[k]` is the parameter of graph tensor k.
    tensor_specs = {param: s for param, s in zip(order, (s for s in specs if s.kind == "tensor"))}
    inputs = tuple(
        TensorSpec(name=params[i], dtype=tensor_specs[i].dtype, sizes=tensor_specs[i].sizes)
        for i in range(len(params))
    )
    symbols = {}
    for index in range(len(params)):
        for dim, size in enumerate(tensor_specs[index].sizes):
            if size.startswith("s") and size[1:].isdigit() and size not in symbols:
                symbols[size] = (index, dim)
                hints.setdefault(size, int(samples[index].shape[dim]))
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    outputs = []
    for k, node in enumerate(output_node.args[0]):
        value = node.meta.get("example_value")
        outputs.append(
            TensorSpec(
                name=f"output{k}" if len(output_node.args[0]) > 1 else "output",
                dtype=str(value.dtype).replace("torch.", ""),
                sizes=tuple(canon(s) for s in value.shape),
            )
        )
    return Trace(
        graph_module=pickle.dumps(gm),
        placeholders=tuple(specs),
        inputs=inputs,
        outputs=tuple(outputs),
        grad_inputs=grad_inputs,
        symbols=symbols,
        hints=hints,
        input_order=tuple(order),
    )


def _refuse_input_mutation(op: Op, gm, params: dict, samples) -> None:
    """A TensorFlow op cannot change its inputs: refuse a function that writes into an argument.

    The traced graph runs once on fake copies of the samples (no data, no device): a write into a
    tensor, through any view of it, bumps its version counter. (The versions of Dynamo's own example
    values are no guide: tracing torch.func.functional_call bumps those of the tensors it swaps in,
    with no write in the graph.)"""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    args, tensors = [], {}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        if isinstance(value, torch.SymInt):
            args.append(int(value.node.hint))
        else:
            sample = samples[params[node.name]]
            blank = torch.empty_strided(
                sample.shape, sample.stride(), dtype=sample.dtype, device=sample.device
            )
            fake = mode.from_tensor(blank)
            tensors[params[node.name]] = fake
            args.append(fake)
    before = {k: t._version for k, t in tensors.items()}
    try:
        with mode:
            gm(*args)
    except Exception:  # noqa: BLE001 - a graph fake tensors cannot run: the plan checks writes too
        return
    for k, t in tensors.items():
        if t._version != before[k]:
            raise UnsupportedError(
                f"{op.name} changes its argument {op.param_names[k]!r} in place; a TensorFlow op "
                "cannot modify its inputs: compute a new tensor (e.g. x = x + 1 instead of "
                "x.add_(1)) and return it"
            )


def _param_index(node, params: list[str]) -> int:
    """Which parameter of the function a Dynamo placeholder stands for (by its source)."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    # contiguous_outputs(*args): the sources are args[i]
    index = getattr(source, "index", None)
    if (
        isinstance(index, int)
        and getattr(getattr(source, "base", None), "local_name", "") == "args"
    ):
        return index
    name = getattr(source, "local_name", None)
    if name in params:
        return params.index(name)
    raise CaptureError(f"cannot tell which input the graph argument {node.name} ({source}) is")


def _sym(name: str):
    import sympy

    return sympy.Symbol(name, integer=True, positive=True)
