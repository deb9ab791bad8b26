"""Run Inductor (through AOTAutograd) on a traced graph and record what it generates for each graph.

`compile_graphs` hands a Dynamo-traced FX graph to `torch._inductor.compile_fx` with an inner compiler
that records, for the forward and the backward graph, the generated wrapper module's source, its globals
(the kernels, on a real GPU) and the FX names of its arguments and outputs, which tie the forward's
saved tensors to the backward's inputs.

Settings: max-autotune, with the GEMM backends the `gemm` policy allows (GEMM_POLICIES): Triton
templates, cuBLAS (which the generated code calls through cuBLASLt), or both, timed against each
other on a GPU; the backward graph is compiled eagerly with the forward (AOTAutograd would otherwise
compile it at the first backward call); caches are off, so the sources are always fresh.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field

from mirai.errors import CaptureError


@dataclass
class GraphRecord:
    kind: str  # "forward" or "backward"
    source: str
    placeholders: list[str]
    output_names: list[str]
    example_inputs: list = field(default_factory=list, repr=False)
    module_globals: dict = field(default_factory=dict, repr=False)
    # each GEMM's choice and why: measured (GPU builds), a tuning table or the GPU-less default
    gemm_timings: list = field(default_factory=list)


@dataclass(frozen=True)
class GemmPolicy:
    """Which kinds of GEMM a build may use: Inductor's GEMM backends, and what that means."""

    name: str
    backends: str  # inductor's max_autotune_gemm_backends
    help: str


GEMM_POLICIES = {
    p.name: p
    for p in (
        GemmPolicy(
            "auto",
            "ATEN,TRITON",
            "on a GPU, each GEMM is timed as cuBLAS and as Triton templates and the faster is "
            "kept; GPU-less, cuBLAS",
        ),
        GemmPolicy("cublas", "ATEN", "every GEMM runs in cuBLAS (through cuBLASLt)"),
        GemmPolicy("triton", "TRITON", "every GEMM is a Triton template"),
    )
}
DEFAULT_GEMM = "auto"


def gemm_policy(name: str) -> GemmPolicy:
    from mirai.errors import MiraiError

    try:
        return GEMM_POLICIES[name]
    except KeyError:
        raise MiraiError(
            f"unknown GEMM policy {name!r}; choose one of {', '.join(GEMM_POLICIES)}"
        ) from None


def inductor_settings(gpu: bool, gemm: str = DEFAULT_GEMM) -> dict:
    settings = {
        "max_autotune": True,
        "max_autotune_gemm": True,
        "max_autotune_gemm_backends": gemm_policy(gemm).backends,
        "force_disable_caches": True,
        "fx_graph_cache": False,
        "freezing": False,
        "triton.cudagraphs": False,
        "autotune_fallback_to_aten": False,
        # Split-K "decompose_k" candidates (a GEMM whose K dwarfs M and N, such as a weight
        # gradient summed over a large batch) run as a subgraph calling aten's bmm_dtype, which
        # the export has no kernel for: a GPU build that timed one fastest could not be exported.
        "triton.num_decompose_k_splits": 0,
    }
    if not gpu:
        settings.update(
            {
                "compile_threads": 1,
                "joint_graph_constant_folding": False,
                "max_autotune_pointwise": False,
                "triton.autotune_pointwise": False,
                # Whether to pad a GEMM's shapes is decided by timing both on the device.
                "shape_padding": False,
            }
        )
    return settings


@contextlib.contextmanager
def _matmul_precision(precision: str):
    """torch's float32 matmul precision for the mode while compiling (mirai.gpu.precision)."""
    import torch

    from mirai.gpu.precision import get

    mode = get(precision)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(mode.matmul)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


@contextlib.contextmanager
def _gemm_choice(num_sms: int, shared_memory: int, tuning, sink: list):
    """Without a GPU nothing can be benchmarked: take what the tuning table (if any) says for the
    GEMM, else cuBLAS where the policy offers it, else one template config by a roofline heuristic.
    A table's template that would not fit the target's `shared_memory` (bytes per block) at a
    dynamic reduction size is not taken (`fits_dynamic_k`). Each choice, and where it came from,
    goes to `sink`."""
    from torch._inductor.select_algorithm import get_algorithm_selector_cache

    cache = get_algorithm_selector_cache()

    def chooser(choices):
        if not choices:
            return choices
        key = _gemm_key(choices[0].input_nodes, choices[0].layout)
        kept, source = None, "GPU-less default"
        entry = tuning.gemm_entry(key) if tuning is not None else None
        if entry is not None:
            kept = choose_gemm_tuned(choices, entry)
            source = tuning.origin if kept else "GPU-less default (the table's choice not offered)"
            if kept and entry.kind == "triton":
                need = fits_dynamic_k(choices[0], entry.config, shared_memory)
                if need:
                    kept, source = [], (
                        f"GPU-less default (the table's template would need {need} bytes of "
                        f"shared memory at a dynamic reduction size; the target has {shared_memory})"
                    )
        if not kept:
            kept = choose_gemm_gpuless(choices, num_sms)
        sink.append(_choice_record(key, kept[0], source))
        return kept

    cache.add_preprocessing_fn(chooser)
    try:
        with _template_tf32_as_measured(tuning):
            yield
    finally:
        cache.preprocessing_fns.remove(chooser)


@contextlib.contextmanager
def _template_tf32_as_measured(tuning):
    """With a tuning table, a GEMM template uses TF32 whenever the precision asks for it, as it did
    where the table was measured (torch 2.11, and this torch on a GPU where sizes allow): torch 2.13's
    Inductor turns TF32 off in a template unless min(N, K) >= 512, which would make the template
    the table names a slower IEEE kernel than the one that was timed."""
    import torch

    try:
        from torch._inductor.template_heuristics.triton import MMTemplateConfigMixin
    except ImportError:  # torch 2.11: no such rule
        MMTemplateConfigMixin = None
    original = getattr(MMTemplateConfigMixin, "get_extra_kwargs", None)
    if tuning is None or tuning.precision != "tf32" or original is None:
        yield
        return

    def get_extra_kwargs(self, kernel_inputs, op_name):
        kwargs = original(self, kernel_inputs, op_name)
        if "ALLOW_TF32" in kwargs:
            kwargs["ALLOW_TF32"] = torch.backends.cuda.matmul.fp32_precision == "tf32"
        return kwargs

    MMTemplateConfigMixin.get_extra_kwargs = get_extra_kwargs
    try:
        yield
    finally:
        MMTemplateConfigMixin.get_extra_kwargs = original


def _gemm_key(input_nodes, layout) -> str:
    """mirai.export.tuning.gemm_key of a GEMM as Inductor lowers it (sizes and strides at their
    hints)."""
    from torch._inductor.virtualized import V

    from mirai.export.tuning import gemm_key

    def strides(node):
        try:
            return [_hint(V, s) for s in node.get_stride()]
        except (AttributeError, NotImplementedError, TypeError):
            return None  # a layout not decided yet

    return gemm_key(
        layout.dtype,
        [([_hint(V, s) for s in node.get_size()], strides(node)) for node in input_nodes],
        [_hint(V, s) for s in layout.size],
    )


def _choice_kind(choice) -> str:
    from torch._inductor.select_algorithm import ExternKernelCaller

    return "cublas" if isinstance(choice, ExternKernelCaller) else "triton"


def _choice_record(key: str, choice, source: str, ms: dict | None = None) -> dict:
    kind = _choice_kind(choice)
    record = {"key": key, "chosen": kind, "source": source}
    if kind == "triton":
        record["config"] = _choice_config(choice) or {}
        record["template"] = getattr(choice, "description", "") or str(choice)
    if ms is not None:
        record["ms"] = ms
    return record


def fits_dynamic_k(choice, config: dict, shared_memory: int) -> int:
    """0 if a template with `config`'s blocks fits in `shared_memory` bytes for `choice`'s GEMM,
    else the bytes it would need. A table measures templates at static sizes, where Triton's
    pipeline keeps no more stages than the K loop has iterations; with a dynamic K it keeps all
    `num_stages` buffers of an A and a B tile, which may not fit (the compile would refuse it)."""
    import sympy

    a = choice.input_nodes[0]
    k = a.get_size()[-1]
    if not isinstance(k, sympy.Expr) or not k.free_symbols:
        return 0
    tile = config["BLOCK_M"] * config["BLOCK_K"] + config["BLOCK_K"] * config["BLOCK_N"]
    need = config["num_stages"] * tile * a.get_dtype().itemsize
    return need if need > shared_memory else 0


def choose_gemm_tuned(choices: list, entry) -> list:
    """The choice a tuning table's entry names, if this compile offers it: the extern (cuBLAS)
    one, or the template with exactly the entry's blocks; else nothing."""
    if entry.kind == "cublas":
        return [c for c in choices if _choice_kind(c) == "cublas"][:1]
    return [
        c for c in choices if _choice_kind(c) == "triton" and _choice_config(c) == entry.config
    ][:1]


_CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")


def _choice_config(choice) -> dict[str, int] | None:
    text = getattr(choice, "description", "") or ""
    found = {}
    for key in _CONFIG_KEYS:
        match = re.search(rf"\b{key}=(\d+)", text)
        if match:
            found[key] = int(match.group(1))
    return found if len(found) == len(_CONFIG_KEYS) else None


def _hint(V, expr) -> int:
    sizevars = V.graph.sizevars
    # torch 2.13 names it optimization_hint; torch 2.11 size_hint
    hint = getattr(sizevars, "optimization_hint", None) or sizevars.size_hint
    return int(hint(expr, fallback=64))


def choose_gemm_gpuless(choices: list, num_sms: int) -> list:
    """The one choice a GPU-less build makes: the extern (cuBLAS) one where offered, since cuBLAS
    beats Inductor's templates at the sizes that matter (bench/RESULTS-pffn.md); else a template."""
    import torch
    from torch._inductor.select_algorithm import ExternKernelCaller

    extern = [c for c in choices if isinstance(c, ExternKernelCaller)]
    # the dtypes the generated code's cuBLASLt GEMMs take (mirai.export.plan.GEMM_DATA_TYPE)
    if extern and extern[0].layout.dtype in (torch.float32, torch.float16, torch.bfloat16):
        return extern[:1]
    templates = [c for c in choices if not isinstance(c, ExternKernelCaller)]
    if templates:
        return choose_gemm_config(templates, num_sms)
    return choose_gemm_config(choices, num_sms)


def choose_gemm_config(choices: list, num_sms: int) -> list:
    """Keep the one template choice with the lowest estimated time.

    Time is modelled as waves of output tiles (tiles / SMs, rounded up) times the work of one tile,
    with tiles smaller than 128x128 running proportionally below peak. Ties go to fewer pipeline stages
    and fewer warps (less shared memory and registers).
    """
    from torch._inductor.virtualized import V

    if len(choices) <= 1:
        return choices
    scored = []
    for index, choice in enumerate(choices):
        cfg = _choice_config(choice)
        if cfg is None:
            continue
        size = [_hint(V, s) for s in choice.layout.size]
        batch = math.prod(size[:-2]) if len(size) > 2 else 1
        m, n = size[-2], size[-1]
        k = _hint(V, choice.input_nodes[0].get_size()[-1])
        tiles = batch * math.ceil(m / cfg["BLOCK_M"]) * math.ceil(n / cfg["BLOCK_N"])
        area = cfg["BLOCK_M"] * cfg["BLOCK_N"]
        waste = (math.ceil(m / cfg["BLOCK_M"]) * cfg["BLOCK_M"] / m) * (
            math.ceil(n / cfg["BLOCK_N"]) * cfg["BLOCK_N"] / n
        )
        cost = math.ceil(tiles / num_sms) * area * k / min(area, 128 * 128)
        cost *= 1.0 if k % cfg["BLOCK_K"] == 0 else 1.1
        scored.append(((cost * waste, cfg["num_stages"], cfg["num_warps"], index), choice))
    if not scored:
        return choices[:1]
    return [min(scored, key=lambda item: item[0])[1]]


@contextlib.contextmanager
def _gemm_timings(sink: list):
    """Record what Inductor's autotuner measured for each GEMM it chose a kernel for: the best
    cuBLAS and the best Triton template time, and which kind won (GPU builds only)."""
    from torch._inductor import select_algorithm

    def save(timings, name, input_nodes, *rest):
        best = {}
        for choice, ms in timings.items():
            kind = _choice_kind(choice)
            if ms == float("inf"):
                continue
            if kind not in best or ms < best[kind][0]:
                best[kind] = (float(ms), choice)
        if not best:
            return
        chosen = min(best, key=lambda kind: best[kind][0])
        # the best template's blocks even where cuBLAS won: what a table could switch to
        shown = best.get("triton", best[chosen])[1]
        record = _choice_record(
            _gemm_key(input_nodes, shown.layout),
            shown,
            "measured",
            {kind: round(ms, 5) for kind, (ms, _) in sorted(best.items())},
        )
        record.update(name=name, chosen=chosen)
        sink.append(record)

    if not hasattr(select_algorithm, "add_feedback_saver"):  # a torch without the hook
        yield
        return
    select_algorithm.add_feedback_saver(save)
    try:
        yield
    finally:
        select_algorithm.clear_feedback_savers()


def _make_outputs_dense(gm, indices) -> None:
    """Make the user-visible outputs of `gm` dense row-major, as TensorFlow tensors are.

    Inductor keeps the strides an output has in the graph; a gradient of a transposed input, say,
    would come back transposed. A contiguous clone there lets Inductor write the dense layout in the
    producing kernel instead.
    """
    import torch

    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    outputs = list(output_node.args[0])
    changed = False
    for i in range(len(outputs)) if indices is None else indices:
        node = outputs[i]
        value = getattr(node, "meta", {}).get("val")
        if not isinstance(value, torch.Tensor) or value.is_contiguous():
            continue
        with gm.graph.inserting_before(output_node):
            dense = gm.graph.call_function(
                torch.ops.aten.clone.default,
                (node,),
                {"memory_format": torch.contiguous_format},
            )
        dense.meta["val"] = value.clone(memory_format=torch.contiguous_format)
        outputs[i] = dense
        changed = True
    if changed:
        output_node.args = (tuple(outputs),) + tuple(output_node.args[1:])
        gm.recompile()


# Names the header of every Inductor wrapper module imports or defines (torch 2.11 and 2.13:
# torch/_inductor/codegen/wrapper.py); `async_compile` itself is deleted once kernels are loaded.
WRAPPER_HEADER_NAMES = frozenset({"AsyncCompile", "assert_size_stride", "reinterpret_tensor"})


def wrapper_globals(fn) -> dict:
    """The globals of the generated wrapper module behind a compiled graph's callable.

    Inductor may hand back the module's `call` wrapped in closures of its own (torch 2.11 and 2.13
    wrap it in `align_inputs_from_check_idxs`'s `run`, whose globals are torch._inductor.utils'), so
    this follows `__wrapped__` and closure cells to the function whose module has the names every
    wrapper module's header defines (WRAPPER_HEADER_NAMES). Empty if there is none: the capture then
    records heuristic configurations and says why."""
    pending, seen = [fn], set()
    while pending:
        current = pending.pop()
        if id(current) in seen or not callable(current):
            continue
        seen.add(id(current))
        found = getattr(current, "__globals__", None)
        if found is not None and WRAPPER_HEADER_NAMES <= found.keys():
            return found
        pending.extend(
            cell.cell_contents
            for cell in getattr(current, "__closure__", None) or ()
            if _filled(cell)
        )
        if hasattr(current, "__wrapped__"):
            pending.append(current.__wrapped__)
    return {}


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not yet assigned
        return False
    return True


def compile_graphs(
    gm,
    example_inputs,
    *,
    gpu: bool,
    precision: str,
    num_user_outputs: int,
    num_sms: int = 132,
    shared_memory: int = 232448,
    gemm: str = DEFAULT_GEMM,
    tuning=None,
):
    """Compile `gm` for CUDA with Inductor; return the GraphRecords of the forward and backward
    graphs. `tuning` (a mirai.export.tuning.TuningTable) guides a GPU-less compile's GEMMs."""
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    records: list[GraphRecord] = []
    timings: list[dict] = []

    def recording_inner_compile(graph, inputs, **kwargs):
        backward = bool(kwargs.get("is_backward"))
        _make_outputs_dense(graph, None if backward else range(num_user_outputs))
        measured = len(timings)
        compiled = compile_fx_inner(graph, inputs, **kwargs)
        placeholders = [n.name for n in graph.graph.nodes if n.op == "placeholder"]
        output_node = next(n for n in graph.graph.nodes if n.op == "output")
        outputs = [getattr(a, "name", None) for a in output_node.args[0]]
        fn = getattr(compiled, "current_callable", None)
        records.append(
            GraphRecord(
                kind="backward" if backward else "forward",
                source=compiled.source_code,
                placeholders=placeholders,
                output_names=outputs,
                example_inputs=list(inputs),
                module_globals=wrapper_globals(fn) if gpu else {},
                gemm_timings=timings[measured:],
            )
        )
        return compiled

    stack = contextlib.ExitStack()
    with stack:
        stack.enter_context(inductor_config.patch(inductor_settings(gpu, gemm)))
        # donated_buffer: AOTAutograd lets the backward graph reuse the memory of saved tensors it
        # no longer needs, writing into its own inputs; a TensorFlow op must not (its inputs are
        # the forward's outputs, which the graph may use again), so the capture turns that off.
        stack.enter_context(
            functorch_config.patch(force_non_lazy_backward_lowering=True, donated_buffer=False)
        )
        stack.enter_context(_matmul_precision(precision))
        if not gpu:
            stack.enter_context(_gemm_choice(num_sms, shared_memory, tuning, timings))
        else:
            stack.enter_context(_gemm_timings(timings))
        blind = stack.enter_context(_blind_kernel_analyses())
        torch._dynamo.reset()
        compiled = compile_fx(gm, example_inputs, inner_compile=recording_inner_compile)
    if blind:
        raise CaptureError(
            "Inductor could not tell which tensors a user-defined Triton kernel writes, so it "
            "would copy every tensor the kernel takes before each launch: "
            + "; ".join(dict.fromkeys(blind))
            + " (a triton_op's kernel must compile with the arguments its call passes: every "
            "constexpr given a value)"
        )
    return records, compiled


@contextlib.contextmanager
def _blind_kernel_analyses():
    """Collect Inductor's warnings that its analysis of a user-defined Triton kernel (a
    torch.library.triton_op's, as the fusions write) failed. Inductor then assumes the kernel
    writes every tensor it takes and copies them all before the launch: at pffn's sizes that is
    hundreds of MB per call, silently. Yields the list of what failed, filled on exit."""
    import logging

    found: list[str] = []

    class Handler(logging.Handler):
        def emit(self, record):
            if "assuming every input is mutated" in record.getMessage():
                exc = record.exc_info[1] if record.exc_info else None
                found.append(f"{type(exc).__name__}: {exc}" if exc else record.getMessage())

    # torch 2.11 and 2.13 warn through Dynamo's logger; the module's own is the fallback
    loggers = [logging.getLogger(n) for n in ("torch._dynamo", "torch._higher_order_ops")]
    handler = Handler(logging.WARNING)
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield found
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
