"""Graph-level fusions: rewrites of the traced graph, before Inductor, into operators of our own kernels.

Inductor fuses pointwise work into its kernels but leaves every GEMM alone. A fusion here replaces a
pattern around GEMMs with one `torch.library.triton_op` whose Triton kernel Inductor then emits like
any other, or with `mirai::bmm_rows`, a GEMM the capture records as one cuBLASLt call. FUSIONS names
them; a build picks them by name (`mirai build --fuse NAME`), and `apply` runs the picked ones over a
graph.

By default (`default`) an inference build applies the fusions measured faster than what they replace
(`Fusion.default`) and a training build none: on the H200 the fused gate/up kernel made pffn's
inference forward 1.18x-1.24x faster in GPU time from B = 512 to 8000, and left a training forward
(which must also write both GEMMs' results for its backward) within 5% of the unfused one, slower at
B = 64 (bench/RESULTS-pffn.md). `gate_up_linear` runs the same kernel over dense layers and nn.Linear
weights; it has no GPU measurement yet (bench/bench_swiglu.py is the one to make), so a build applies
it only when named. `gate_up_down` takes pffn's down projection in too, for its backward's sake:
there the down GEMM's input gradient, SiLU's gradient and the biases' sums run as one kernel; its
training builds are checked on the GPU (tests/gpu/results/check_pffn_gate_up_down.md), the kernel
measured 1.06x-1.09x torch.compile's code for that part at B = 512 to 8000 in its first
configuration (bench/RESULTS-silu-grad.md); the whole training op has been timed only in a
defective build (bench/RESULTS-pffn.md), so it too is applied only when named; it also takes the
down projection's bias and the transpose back to [M, E, D] when they follow. `bmm_rows` writes
such a transposed GEMM result ([E, M, N] -> [M, E, N], pffn's output) from the GEMM itself, the
bias in cuBLASLt's epilogue, instead of a kernel after it; on an H100 it sped up gate_up's
inference forward 1.06x-1.07x from B = 512 to 8000 but slowed an unfused training forward
(bench/RESULTS-pffn.md), so it too is applied only when named. The gate/up operators' backward
writes the input's gradient the same way where the input is such a transposed view (two GEMMs,
the second adding the first's result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mirai.errors import MiraiError


@dataclass(frozen=True)
class Fusion:
    name: str
    rewrite: Callable  # (graph module, example inputs) -> number of rewrites
    help: str
    default: bool  # applied to inference builds that name no fusions (measured faster)


def _gate_up(kinds, down: bool = False):
    def rewrite(gm, example_inputs) -> int:
        from mirai.export.fusions.match import rewrite

        return rewrite(gm, example_inputs, kinds, down=down)

    return rewrite


def _rows(gm, example_inputs) -> int:
    from mirai.export.fusions.rows import rewrite

    return rewrite(gm, example_inputs)


FUSIONS = {  # in the order `apply` runs them: one that takes in another's pattern goes first
    f.name: f
    for f in (
        Fusion(
            "gate_up_down",
            _gate_up({"bmm"}, down=True),
            "what gate_up fuses, and in a training build the down projection the product feeds: its "
            "backward computes the down GEMM's input gradient with SiLU's gradient and the "
            "biases' sums in one Triton kernel",
            default=False,
        ),
        Fusion(
            "gate_up",
            _gate_up({"bmm"}),
            "silu(x @ w_gate + b_gate) * (x @ w_up + b_up) over float32 [E, M, K] x [E, K, N] "
            "(per expert) as one Triton kernel (both GEMMs, bias, SiLU and product)",
            default=True,
        ),
        Fusion(
            "bmm_rows",
            _rows,
            "(torch.bmm(p, w) + bias).transpose(0, 1) over float32 [E, M, K] x [E, K, N] as one "
            "cuBLASLt GEMM writing the [M, E, N] result directly, the bias in its epilogue (no "
            "kernel transposes it afterwards)",
            default=False,
        ),
        Fusion(
            "gate_up_linear",
            _gate_up({"matmul", "linear"}),
            "the same over dense layers: float32 x [..., K] @ w [K, N] + b [N], or F.linear "
            "with nn.Linear's [N, K] weights (a LLaMA-style SwiGLU block)",
            default=False,
        ),
    )
}


def default(op) -> tuple[str, ...]:
    """The fusions a build of `op` (a mirai.export.decorator.Op) gets when it names none: those
    measured faster (`Fusion.default`) for an op with nothing to differentiate (an inference
    build), none otherwise."""
    inference = set(op.param_names) <= set(op.no_grad)
    return tuple(f.name for f in FUSIONS.values() if f.default) if inference else ()


def parse(text: str) -> tuple[str, ...]:
    """A command line's comma list of fusion names ("gate_up"; "" or "none" for none); an unknown
    name is argparse's usage error."""
    import argparse

    try:
        return check(n for n in text.split(",") if n and n != "none")
    except MiraiError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_option(parser, default: str) -> None:
    """The commands' `--fuse NAME,...` option; `default` says what none given means."""
    parser.add_argument(
        "--fuse",
        default=None,
        metavar="NAME,...",
        type=parse,
        help="graph-level fusions to apply before Inductor, a comma list: "
        + "; ".join(f"{f.name}: {f.help}" for f in FUSIONS.values())
        + f" (default: {default}; 'none' for none)",
    )


def check(names) -> tuple[str, ...]:
    """`names` as a tuple, each a known fusion."""
    names = tuple(names or ())
    unknown = [n for n in names if n not in FUSIONS]
    if unknown:
        raise MiraiError(f"unknown fusion {', '.join(unknown)}; choose from {', '.join(FUSIONS)}")
    return names


def apply(gm, example_inputs, names) -> dict[str, int]:
    """Run the named fusions over `gm` in place, in FUSIONS' order; return how many rewrites each
    made."""
    names = set(check(names))
    return {n: f.rewrite(gm, example_inputs) for n, f in FUSIONS.items() if n in names}


def fuse(trace, names):
    """The stage between trace and capture: `trace` (mirai.export.capture.trace.Trace) with the named
    fusions applied to its graph. Returns (new trace, {fusion: rewrites}); the trace is unchanged
    (the same object) when nothing matched."""
    import dataclasses
    import pickle

    from mirai.export.capture.core import Symbols, fake_inputs

    names = check(names)
    if not names:
        return trace, {}
    gm = pickle.loads(trace.graph_module)
    symbols = Symbols(trace)
    inputs = fake_inputs(trace, symbols, device="cpu")
    counts = apply(gm, inputs, names)
    if not any(counts.values()):
        return trace, counts
    return dataclasses.replace(trace, graph_module=pickle.dumps(gm)), counts
