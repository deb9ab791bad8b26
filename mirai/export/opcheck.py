"""The whole-op check of autotuning's GEMM choices, on a GPU: time the op with them and without.

Inductor's autotuner times each GEMM alone, a Triton template against torch's cuBLAS `bmm`. Inside
the generated op the template runs with its fused epilogue among the op's other kernels, and the
op's cuBLAS GEMMs run through cuBLASLt: a template that won alone can lose in place (pffn at
B = 512 on the H200: 0.085 ms forward with the templates, 0.074 without; bench/RESULTS-pffn.md).
So `mirai tune` builds the op a second time with every GEMM in cuBLAS, times the forward and the
backward op of both builds side by side through their C interface (`op_times`, in rounds), and
keeps a graph's templates only where its op ran faster with them in every round than without them
in any (`TuningTable.op_checked`, `tuning.templates_won`): at B = 512 the backward's verdict flipped
between two runs on a 1-3% difference of medians, and cuBLAS is what a build takes without a table,
so a template must win beyond the noise.

The ops are timed as CUDA graphs of their calls (mirai.gpu.timing, graphs=True): GPU time alone.
Timed call by call through ctypes, an op of this size is bound by the host (pffn at B = 64 on the
H200: 0.076 ms a forward call in the tuning process, against 0.037 ms in the bench), and the
choice is about kernels, which a framework launches without Python in the loop.
"""

from __future__ import annotations

from pathlib import Path


def op_times(builds: dict, inputs, rounds: int = 5, graphs: bool = True) -> dict:
    """{graph: {build name: [ms of each round]}}: the forward op and the backward op of each of
    `builds` ({name: build folder}, builds of one function) on `inputs`, timed side by side in
    rounds (mirai.gpu.timing; GPU time, as CUDA graphs, with `graphs`). Every build's backward
    gets its own forward's results and one set of random output gradients."""
    import torch

    from mirai.export.launch import GeneratedFunction
    from mirai.gpu.timing import rounds_side_by_side

    args = [t.detach().cuda().contiguous() if isinstance(t, torch.Tensor) else t for t in inputs]
    fns = {name: GeneratedFunction(Path(folder)) for name, folder in builds.items()}
    times = {
        "forward": rounds_side_by_side(
            {name: (lambda f=f: f.forward(args)) for name, f in fns.items()}, rounds, graphs
        )
    }
    if any(f.backward is None for f in fns.values()):
        return times
    generator = torch.Generator(device="cuda").manual_seed(0)
    first = next(iter(fns.values()))(args)  # user outputs: their shapes and dtypes
    tangents = [
        (
            torch.randn(o.shape, generator=generator, device="cuda", dtype=o.dtype)
            if o.is_floating_point()
            else torch.zeros_like(o)
        )
        for o in first
    ]
    backward = {}
    for name, f in fns.items():
        _, call = f.forward_for_backward(args, tangents)
        backward[name] = lambda f=f, call=call: f.backward(call)
    times["backward"] = rounds_side_by_side(backward, rounds, graphs)
    return times


def graph_gemm_keys(capture) -> dict:
    """{graph: the tuning keys of the GEMMs autotuning measured in it}."""
    return {
        graph: {e["key"] for e in entries if e.get("source") == "measured" and "key" in e}
        for graph, entries in capture.gemm_timings.items()
    }


def by_graph(times: dict, ours: str, theirs: str) -> dict:
    """{graph: {"table": [ms], "cublas": [ms]}} from op_times' {graph: {build: [ms]}}."""
    return {g: {"table": list(t[ours]), "cublas": list(t[theirs])} for g, t in times.items()}
