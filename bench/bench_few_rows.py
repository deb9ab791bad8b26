"""pffn's GEMMs at few rows as the export runs them (the few_rows Triton kernel) against cuBLAS.

    python bench/bench_few_rows.py [--batches 8,64]           # on a GPU
    python bench/bench_few_rows.py --sweep [--batches 8,64]

A training build of `gate_up_down` runs pffn's GEMMs outside the fused kernels in cuBLASLt, except
at few rows (at most mirai.export.fusions.few_rows.FEW_ROWS), where it runs them as `rows_kernel`,
whose launch costs the host less than a cuBLASLt call does. Four forms, on pffn's shapes (E=8,
D=256, H=1024, tf32, weights as pffn stores them, [E, D, H] and [E, H, D]):

- `down`: the forward's down projection, `(h @ w_down + b_down).transpose(0, 1)` stored as [B, E, D];
- `dx`: the backward's input gradient, `(d_gate @ w_gate^T + d_up @ w_up^T)` stored as [B, E, D]
  (two products in one launch);
- `dw_gate`: a gate/up weight's gradient `x^T @ d_gate` [E, D, H] with the bias's, d_gate's column
  sums (the same kernel, the same launch);
- `dw_down`: the down weight's `h^T @ d_y` [E, H, D] with its bias's.

Candidates, on identical inputs: the Triton kernel in the export's configuration
(few_rows.config_for / weight_config_for); the same computation under torch.compile (mode
max-autotune-no-cudagraphs: cuBLAS GEMMs or Triton templates, and kernels for the bias, the
transpose, the sums); eager PyTorch (cuBLAS).

`--sweep` times the kernel alone in every configuration of a grid, per form and batch, and ranks
them against the export's. Timing as in the other benches (mirai.gpu.timing: rounds, medians, CUDA
graphs for GPU time), over a ring of operand sets that with their results fill twice the L2 cache
(results.rotated): the weights' gradients ran 3x faster with one set, resident in L2, than inside
pffn's op. Results go on top of bench/RESULTS-few-rows.md (and $OUT when set). The
kernel's numbers are checked on the CPU, through Triton's interpreter, by
tests/test_bench_few_rows.py and tests/export/test_fusions.py.
"""

from __future__ import annotations

import sys
from datetime import date
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from mirai.export.fusions.few_rows import (  # noqa: E402
    config_for,
    launch,
    weight_config_for,
    weight_grad,
)
import results  # noqa: E402
from results import (  # noqa: E402
    candidates_report,
    kernel_bench,
    ranked_configs,
    sweep_report,
    rotated,
)

RESULTS = ROOT / "bench" / "RESULTS-few-rows.md"
TITLE = "# few_rows benchmark"
E, D, H = 8, 256, 1024
PEER = "cuBLAS + bias, transpose, sums (torch.compile)"


FORMS = ("down", "dx", "dw_gate", "dw_down")


def reference(h, w_down, b_down):
    """The `down` form in PyTorch: pffn's down projection with its bias, back in rows."""
    return (h @ w_down + b_down).transpose(0, 1).contiguous()


def weight_reference(x, d):
    """The weight forms in PyTorch: a weight's gradient and its bias's."""
    return x.transpose(1, 2) @ d, d.sum(1, keepdim=True)


def references():
    """{form: what it computes, in PyTorch}."""
    return {
        "down": reference,
        "dx": lambda dg, wg, du, wu: (dg @ wg.transpose(1, 2) + du @ wu.transpose(1, 2))
        .transpose(0, 1)
        .contiguous(),
        "dw_gate": weight_reference,
        "dw_down": weight_reference,
    }


def inputs(form: str, batch: int, generator) -> tuple:
    """The form's operands at `batch` rows, laid out as pffn's op has them."""
    import torch

    def rand(*shape, scale=1.0):
        return torch.randn(*shape, device="cuda", generator=generator) * scale

    if form == "down":
        return rand(E, batch, H), rand(E, H, D, scale=H**-0.5), rand(E, 1, D, scale=0.1)
    if form == "dx":  # silu_grad's outputs, [E, B, H]; the weights as stored
        return (
            rand(E, batch, H),
            rand(E, D, H, scale=D**-0.5),
            rand(E, batch, H),
            rand(E, D, H, scale=D**-0.5),
        )
    if form == "dw_gate":  # x, pffn's input seen as [E, B, D]; d_gate
        return rand(batch, E, D).transpose(0, 1), rand(E, batch, H)
    return rand(E, batch, H), rand(batch, E, D).transpose(0, 1)  # h; d_y, the result's gradient


def kernel(form: str, args, config=None):
    """What the export launches for the form, in `config` (None: the export's)."""
    if form == "down":
        return lambda: launch(*args, precision="tf32", config=config)
    if form == "dx":
        dg, wg, du, wu = args
        second = (du, wu.transpose(1, 2))
        return lambda: launch(
            dg, wg.transpose(1, 2), None, second=second, precision="tf32", config=config
        )
    return lambda: weight_grad(*args, k_major=False, sums=True, precision="tf32", config=config)


def operand_sets(form: str, batch: int, generator) -> list[tuple]:
    """The form's operand sets for timing (results.operand_sets: twice the L2 cache's worth)."""
    return results.operand_sets(
        lambda: inputs(form, batch, generator), lambda args: kernel(form, args)()
    )


def export_config(form: str, batch: int) -> dict:
    return config_for(batch) if form in ("down", "dx") else weight_config_for(batch)


def _error(got, expect) -> float:
    if isinstance(expect, tuple):
        return max(_error(g, e) for g, e in zip(got, expect))
    return float((got.double() - expect).norm() / expect.norm())


def measure(batch: int, rounds: int, forms=FORMS) -> dict:
    """{form: row} at `batch` (results.candidates_table's rows), for each of `forms`."""
    import torch

    from mirai.gpu.timing import timed_side_by_side

    g = torch.Generator(device="cuda").manual_seed(0)
    found = {}
    for form, ref in references().items():
        if form not in forms:
            continue
        sets = operand_sets(form, batch, g)
        torch._dynamo.reset()
        compiled = torch.compile(ref, mode="max-autotune-no-cudagraphs", dynamic=False)
        expect = ref(*(a.double() for a in sets[0]))
        candidates = {
            "Triton (export)": [kernel(form, args) for args in sets],
            PEER: [partial(compiled, *args) for args in sets],
            "eager": [partial(ref, *args) for args in sets],
        }
        errors = {name: _error(calls[0](), expect) for name, calls in candidates.items()}
        timed = {name: rotated(calls) for name, calls in candidates.items()}
        found[form] = {
            "errors": errors,
            "ms": timed_side_by_side(timed, rounds),
            "gpu_ms": timed_side_by_side(timed, rounds, graphs=True),
        }
    return found


def configurations(form: str, batch: int) -> list[dict]:
    """The grid `--sweep` times for a form at `batch` rows, 4 warps. Products (`down`, `dx`): block
    rows no larger than needed, block columns, K blocks and pipeline stages. Weight gradients, whose
    K is the rows: tiles of the weight and K blocks no larger than needed."""
    if form in ("down", "dx"):
        rows = [bm for bm in (16, 32, 64) if bm == 16 or bm <= batch]
        return [
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": stages}
            for bm in rows
            for bn in (16, 32, 64)
            for bk in (64, 128)
            for stages in (1, 3)
        ]
    depth = [bk for bk in (16, 32, 64) if bk == 16 or bk <= batch]
    return [
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": stages}
        for bm in (32, 64, 128)
        for bn in (32, 64, 128)
        for bk in depth
        for stages in (1, 3)
    ]


def label(config: dict) -> str:
    return "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} w{num_warps} s{num_stages}".format(**config)


def sweep(batches: list[int], rounds: int, top: int = 5, forms=FORMS) -> dict:
    """{(form, batch): [(label, GPU ms), ...] best first} (results.ranked_configs), for each of
    `forms`."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    found = {}
    for form in forms:
        for batch in batches:
            sets = operand_sets(form, batch, g)
            grid = configurations(form, batch)
            export = label(export_config(form, batch))
            print(f"{form} B={batch}: {len(sets)} operand sets", flush=True)

            def call(config, sets=sets, form=form):
                return rotated([kernel(form, args, config) for args in sets])

            found[form, batch] = ranked_configs(grid, label, call, export, rounds, top)
    return found


def _flops(key) -> int:
    """The GEMM work of a form at a batch (`key`: (form, batch)): `dx` is two products."""
    form, batch = key
    return 2 * E * batch * D * H * (2 if form == "dx" else 1)


def render_sweep(found: dict, versions: str) -> str:
    sizes = ", ".join(f"{len(configurations(f, b))} for {f} at B = {b}" for f, b in found)
    return sweep_report(
        TITLE,
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Configuration sweep of "
        f"the few_rows kernel (`--sweep`): {sizes} configurations of block sizes "
        "and stages, timed once each as CUDA graphs (GPU time) going round operand sets that "
        "fill twice the L2 cache, then the five best and the export's own side by side in rounds "
        "(medians).",
        found,
        _flops,
        leading=("form", "B"),
    )


def render(rows: dict, versions: str) -> str:
    keyed = {(form, batch): row for batch, forms in rows.items() for form, row in forms.items()}
    return candidates_report(
        TITLE,
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Milliseconds per call of "
        "pffn's GEMMs at few rows (the forms of this bench's docstring), per call / GPU time alone "
        "(CUDA graphs), each candidate going round operand sets that fill twice the L2 cache; "
        "vs peer: the peer's GPU time / this GPU time; TFLOP/s of the GEMMs in GPU "
        "time; relative error against float64 (the largest of a form's results).",
        keyed,
        PEER,
        _flops,
        lambda key: label(export_config(*key)),
        leading=("form", "B"),
    )


def main(argv=None) -> int:
    return kernel_bench(argv, sys.modules[__name__], default_batches="8,64")


if __name__ == "__main__":
    sys.exit(main())
