"""Graph-level fusions: rewrites of the traced graph, before Inductor, into operators of our own kernels.

Inductor fuses pointwise work into its kernels but leaves every GEMM alone. A fusion here replaces a
pattern around GEMMs with one `torch.library.triton_op` whose Triton kernel Inductor then emits like
any other, or with `mirai::bmm_rows`, a GEMM the capture records as one cuBLASLt call. FUSIONS names
them; a build picks them by name (`mirai build --fuse NAME`), and `apply` runs the picked ones over a
graph.

By default (`default`) a build applies the fusions measured faster than what they replace for its
kind of build (`Fusion.default_for`: "inference", an op with nothing to differentiate, or
"training"). On an H100 against torch.compile max-autotune (bench/RESULTS-pffn.md, 2026-12-05):
`gate_up_down` made pffn's fastest training op at every batch measured (forward+backward in GPU
time 2.305 against 2.437 ms unfused at B = 8000, 0.636 against 0.693 at 2000, 0.085 against 0.087
at 64); `gate_up` with `bmm_rows` its fastest inference forward at every batch (0.561 against
0.606 ms for `gate_up` alone at B = 8000, 0.026 against 0.027 at 64). `gate_up_linear` made
examples/swiglu_mlp.py's inference forward 1.04x-1.05x torch.compile where the unfused build was
0.99x-1.01x, and its training op slower (bench/RESULTS-swiglu.md), so it is an inference default
only. `bmm_rows` alone on a training build was timed faster than the unfused build at one batch
only (B = 2000), so training builds get it only where `gate_up_down` takes it in.

What each does: `gate_up` computes both of a gated layer's GEMMs, the biases, SiLU and the
product in one Triton kernel; `gate_up_linear` runs the same kernel over dense layers and
nn.Linear weights. `gate_up_down` takes pffn's down projection in too, for its backward's sake:
there the down GEMM's input gradient, SiLU's gradient and the biases' sums run as one kernel; it
also takes the down projection's bias and the transpose back to [M, E, D] when they follow,
running that GEMM in cuBLASLt or, at few rows, as a Triton kernel (mirai.export.fusions.few_rows).
`bmm_rows` writes such a transposed GEMM result ([E, M, N] -> [M, E, N], pffn's output) from the
GEMM itself, the bias in cuBLASLt's epilogue, instead of a kernel after it (at few rows from the
few_rows Triton kernel, as gate_up_down's forward does). The gate/up
operators' backward writes the input's gradient the same way where the input is such a transposed
view (two GEMMs, the second adding the first's result). Every default was checked on the GPU
(tests/gpu/results/check_pffn_defaults.md, check_pffn_gate_up_down.md, check_pffn_bmm_rows.md;
bench_swiglu checks its builds against float64).
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
    default_for: frozenset[str]  # the build kinds (KINDS) that apply it when they name no fusions


KINDS = ("inference", "training")


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
            default_for=frozenset({"training"}),
        ),
        Fusion(
            "gate_up",
            _gate_up({"bmm"}),
            "silu(x @ w_gate + b_gate) * (x @ w_up + b_up) over float32 [E, M, K] x [E, K, N] "
            "(per expert) as one Triton kernel (both GEMMs, bias, SiLU and product)",
            default_for=frozenset({"inference"}),
        ),
        Fusion(
            "bmm_rows",
            _rows,
            "(torch.bmm(p, w) + bias).transpose(0, 1) over float32 [E, M, K] x [E, K, N] as one "
            "cuBLASLt GEMM writing the [M, E, N] result directly, the bias in its epilogue (no "
            "kernel transposes it afterwards); at few rows per expert (few_rows.FEW_ROWS), one Triton "
            "kernel writing the same, whose launch costs the host less",
            default_for=frozenset({"inference"}),
        ),
        Fusion(
            "gate_up_linear",
            _gate_up({"matmul", "linear"}),
            "the same over dense layers: float32 x [..., K] @ w [K, N] + b [N], or F.linear "
            "with nn.Linear's [N, K] weights (a LLaMA-style SwiGLU block)",
            default_for=frozenset({"inference"}),
        ),
    )
}


def kind(op) -> str:
    """ "inference" for an op (a mirai.export.decorator.Op) with nothing to differentiate, else
    "training"."""
    return "inference" if set(op.param_names) <= set(op.no_grad) else "training"


def default(op) -> tuple[str, ...]:
    """The fusions a build of `op` gets when it names none: those measured faster for its kind."""
    return defaults(kind(op))


def defaults(build_kind: str) -> tuple[str, ...]:
    """The default fusions of a kind of build (one of KINDS), in FUSIONS' order."""
    if build_kind not in KINDS:
        raise MiraiError(f"unknown kind of build {build_kind!r}; choose from {', '.join(KINDS)}")
    return tuple(f.name for f in FUSIONS.values() if build_kind in f.default_for)


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
