"""Capture proper: compile a trace's graph for CUDA with Inductor and read both graphs as data.

Runs in whatever process has a CUDA device (real or GPU-less, see mirai.export.capture.gpuless). Inputs are
fake tensors with symbolic sizes for the dynamic dimensions, so one compilation serves every size. On a
real GPU the compiled function then runs once, forward and backward, on random data of the sample
shapes: that is when Inductor's autotuner picks each kernel's configuration, which capture records.
"""

from __future__ import annotations

import pickle

import sympy

from mirai.export.capture.configs import gpuless_config, tuned_config
from mirai.export.capture.inductor import DEFAULT_GEMM, GraphRecord, compile_graphs
from mirai.export.capture.trace import Trace
from mirai.export.capture.wrapper import interpret
from mirai.errors import CaptureError
from mirai.export.graph import Capture, GraphInput
from mirai.export.symbolic import expr_str
from mirai.export.tuning import table_graph
from mirai.gpu.targets import Target


class Symbols:
    """Fake inputs with symbolic sizes, and the way back from the ShapeEnv's symbols to ours."""

    def __init__(self, trace: Trace):
        from torch._dynamo.source import ConstantSource
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

        self.shape_env = ShapeEnv()
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env)
        self.symints = {}
        self.back = {}
        for name, hint in sorted(trace.hints.items()):
            source = ConstantSource(f"mirai_{name}")
            sym = self.shape_env.create_symbol(hint, source=source, dynamic_dim=DimDynamic.DYNAMIC)
            self.symints[name] = self.shape_env.create_symintnode(sym, hint=hint, source=source)
            self.back[sym] = sympy.Symbol(name, integer=True, positive=True)

    def value(self, text: str):
        return eval(text, {"__builtins__": {}}, dict(self.symints))  # noqa: S307 (our own strings)

    def ranges(self) -> dict:
        """What the compilation assumed of each symbol: (min, max or None)."""
        out = {}
        for sym, ours in self.back.items():
            value_range = self.shape_env.var_to_range.get(sym)
            lo = int(value_range.lower) if value_range is not None else 0
            upper = value_range.upper if value_range is not None else None
            hi = _finite(upper)
            out[str(ours)] = (lo, hi)
        return out

    def canon(self, value) -> str:
        import torch

        if isinstance(value, torch.SymInt):
            expr = value.node.expr
            return expr_str(expr.xreplace({s: self.back.get(s, s) for s in expr.free_symbols}))
        return str(int(value))


def _finite(value):
    """An int for a finite bound, None for infinity (sympy's oo or torch's int_oo)."""
    try:
        number = int(value)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
    return number if abs(number) < 2**62 else None


def fake_inputs(trace: Trace, symbols: Symbols, device: str = "cuda") -> list:
    import torch

    values = []
    with symbols.fake_mode:
        for spec in trace.placeholders:
            if spec.kind == "symint":
                values.append(symbols.symints[spec.symbol])
                continue
            t = torch.empty_strided(
                [symbols.value(s) for s in spec.sizes],
                [symbols.value(s) for s in spec.strides],
                dtype=getattr(torch, spec.dtype),
                device=device,
            )
            values.append(t.requires_grad_(spec.requires_grad))
    return values


def real_inputs(trace: Trace, seed: int = 0) -> list:
    import torch

    generator = torch.Generator(device="cuda").manual_seed(seed)
    values = []
    for spec in trace.placeholders:
        if spec.kind == "symint":
            values.append(trace.hints[spec.symbol])
            continue
        sizes = [_concrete(s, trace.hints) for s in spec.sizes]
        dtype = getattr(torch, spec.dtype)
        if dtype.is_floating_point:
            t = torch.randn(sizes, dtype=dtype, device="cuda", generator=generator)
        else:
            t = torch.randint(0, 8, sizes, dtype=dtype, device="cuda", generator=generator)
        values.append(t.requires_grad_(spec.requires_grad))
    return values


def _concrete(text: str, hints: dict) -> int:
    from mirai.export.symbolic import evaluate

    return evaluate(text, hints)


def _graph_inputs(record: GraphRecord, example_values, symbols: Symbols) -> list[GraphInput]:
    import torch

    out = []
    for name, value in zip(record.placeholders, example_values):
        if isinstance(value, torch.Tensor):
            out.append(
                GraphInput(
                    name=name,
                    kind="tensor",
                    dtype=str(value.dtype).replace("torch.", ""),
                    sizes=tuple(symbols.canon(s) for s in value.shape),
                    strides=tuple(symbols.canon(s) for s in value.stride()),
                )
            )
        else:
            out.append(GraphInput(name=name, kind="symint", symbol=symbols.canon(value)))
    return out


def capture_graphs(
    trace: Trace,
    target: Target,
    precision: str,
    gpu: bool,
    name: str,
    gemm: str = DEFAULT_GEMM,
    tuning=None,
) -> Capture:
    """Compile the trace's graph for `target` and return the whole Capture as data. A GPU-less
    capture takes the choices of `tuning` (a mirai.export.tuning.TuningTable) where it has them."""
    import torch

    import mirai.export.fusions.ops  # noqa: F401  (a fused graph calls them)

    gm = pickle.loads(trace.graph_module)
    symbols = Symbols(trace)
    inputs = fake_inputs(trace, symbols)
    records, compiled = compile_graphs(
        gm,
        inputs,
        gpu=gpu,
        precision=precision,
        num_user_outputs=len(trace.outputs),
        num_sms=target.multi_processor_count,
        shared_memory=target.shared_memory_per_block_optin,
        gemm=gemm,
        tuning=None if gpu else tuning,
    )
    forward = [r for r in records if r.kind == "forward"]
    backward = [r for r in records if r.kind == "backward"]
    if len(forward) != 1 or len(backward) > 1:
        raise CaptureError(
            f"expected one forward and at most one backward graph, Inductor produced "
            f"{len(forward)} and {len(backward)} (graph breaks or partitions are not supported)"
        )
    if gpu:
        _autotune(compiled, trace)
        device = torch.cuda.get_device_name()
        origin = f"gpu:{device}"
    else:
        device = None
        origin = f"gpuless:{target.name}"
        if tuning is not None:
            origin += f" with a {tuning.origin}"

    def chooser(graph: str):
        def choose_config(kernel_name, source, tuner, gpu_globals):
            real = gpu_globals.get(kernel_name)
            launchers = getattr(real, "launchers", None) or []
            if len(launchers) == 1:
                return launchers[0].config, f"autotuned on {device}"
            if tuning is not None and not gpu:
                tuned = tuned_config(tuning, graph, kernel_name, tuner)
                if tuned is not None:
                    return tuned
            why = "no GPU to tune on"
            if gpu:  # say why the run on the GPU left no single configuration to record
                why = f"not autotuned on {device}: " + (
                    f"{len(launchers)} launchers on it after the run"
                    if real is not None
                    else f"no such name among the module's {len(gpu_globals)} globals"
                )
            return gpuless_config(kernel_name, source, tuner, target.multi_processor_count, why)

        return choose_config

    graphs, kernels = {}, {}
    for record in forward + backward:
        example = record.example_inputs
        graph, graph_kernels = interpret(
            record.kind,
            record.source,
            _graph_inputs(record, example, symbols),
            record.output_names,
            chooser(table_graph(record.kind, has_backward=bool(backward))),
            record.module_globals,
        )
        graphs[record.kind] = graph
        kernels[record.kind] = graph_kernels

    fwd = graphs["forward"]
    bwd = graphs.get("backward")
    saved = saved_positions(fwd, bwd, len(trace.outputs)) if bwd is not None else {}
    return Capture(
        name=name,
        inputs=trace.inputs,
        outputs=trace.outputs,
        grad_inputs=trace.grad_inputs,
        input_order=tuple(trace.input_order),
        symbols=dict(trace.symbols),
        symbol_ranges=symbols.ranges(),
        forward=fwd,
        backward=bwd,
        saved=saved,
        kernels=kernels,
        target=target.name,
        precision=precision,
        gemm=gemm,
        gemm_timings={r.kind: list(r.gemm_timings) for r in forward + backward},
        origin=origin,
    )


def saved_positions(fwd, bwd, num_user_outputs: int) -> dict:
    """Backward input name -> the forward output it is. AOTAutograd's forward returns the user's
    outputs, then the saved tensors, then the saved sizes; its backward takes the saved sizes, then
    the saved tensors (in the same order), then the outputs' gradients. Names usually agree too, but
    not always: a user-defined Triton kernel's functional outputs are renamed in the forward graph
    (the buffers it writes), so tensors are matched by position, checked against the names."""
    position = {n: i for i, n in enumerate(fwd.output_names) if n}
    saved = {inp.name: position[inp.name] for inp in bwd.inputs if inp.name in position}
    tensors = [
        inp for inp in bwd.inputs if inp.kind == "tensor" and not inp.name.startswith("tangents")
    ]
    for k, inp in enumerate(tensors):
        expected = num_user_outputs + k
        if saved.setdefault(inp.name, expected) != expected:
            raise CaptureError(
                f"backward input {inp.name} is forward output {saved[inp.name]} by name but "
                f"{expected} by position: the saved tensors cannot be matched"
            )
    return saved


def _autotune(compiled, trace: Trace) -> None:
    """Run forward and backward once on the GPU so Inductor's autotuner settles every kernel."""
    import torch

    args = real_inputs(trace)
    outs = compiled(*args)
    outs = [o for o in (outs if isinstance(outs, (list, tuple)) else [outs]) if o.requires_grad]
    if outs:
        torch.autograd.backward(outs, [torch.randn_like(o) for o in outs])
    torch.cuda.synchronize()
