"""Run Inductor (through AOTAutograd) on a traced graph and record what it generates for each graph.

`compile_graphs` hands a Dynamo-traced FX graph to `torch._inductor.compile_fx` with an inner compiler
that records, for the forward and the backward graph, the generated wrapper module's source, its globals
(the kernels, on a real GPU) and the FX names of its arguments and outputs, which tie the forward's
saved tensors to the backward's inputs.

Settings: every matmul becomes a Triton template (max-autotune with the TRITON GEMM backend, so a graph
never calls cuBLAS); the backward graph is compiled eagerly with the forward (AOTAutograd would
otherwise compile it at the first backward call); caches are off, so the sources are always fresh.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field


@dataclass
class GraphRecord:
    kind: str  # "forward" or "backward"
    source: str
    placeholders: list[str]
    output_names: list[str]
    example_inputs: list = field(default_factory=list, repr=False)
    module_globals: dict = field(default_factory=dict, repr=False)


def inductor_settings(gpu: bool) -> dict:
    settings = {
        "max_autotune": True,
        "max_autotune_gemm": True,
        "max_autotune_gemm_backends": "TRITON",
        "force_disable_caches": True,
        "fx_graph_cache": False,
        "freezing": False,
        "triton.cudagraphs": False,
        "autotune_fallback_to_aten": False,
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
def _gemm_choice(num_sms: int):
    """Without a GPU nothing can be benchmarked: pick one GEMM template config by a roofline heuristic."""
    from torch._inductor.select_algorithm import get_algorithm_selector_cache

    cache = get_algorithm_selector_cache()
    chooser = lambda choices: choose_gemm_config(choices, num_sms)  # noqa: E731
    cache.add_preprocessing_fn(chooser)
    try:
        yield
    finally:
        cache.preprocessing_fns.remove(chooser)


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


def compile_graphs(
    gm, example_inputs, *, gpu: bool, precision: str, num_user_outputs: int, num_sms: int = 132
):
    """Compile `gm` for CUDA with Inductor; return the GraphRecords of the forward and backward graphs."""
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    records: list[GraphRecord] = []

    def recording_inner_compile(graph, inputs, **kwargs):
        backward = bool(kwargs.get("is_backward"))
        _make_outputs_dense(graph, None if backward else range(num_user_outputs))
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
                module_globals=getattr(fn, "__globals__", {}) if gpu else {},
            )
        )
        return compiled

    stack = contextlib.ExitStack()
    with stack:
        stack.enter_context(inductor_config.patch(inductor_settings(gpu)))
        stack.enter_context(functorch_config.patch(force_non_lazy_backward_lowering=True))
        stack.enter_context(_matmul_precision(precision))
        if not gpu:
            stack.enter_context(_gemm_choice(num_sms))
        torch._dynamo.reset()
        compiled = compile_fx(gm, example_inputs, inner_compile=recording_inner_compile)
    return records, compiled
