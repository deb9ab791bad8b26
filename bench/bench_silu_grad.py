"""The backward kernel of `mirai build --fuse gate_up_down` against what it replaces.

    python bench/bench_silu_grad.py [--batches 512,2000,8000]           # on a GPU
    python bench/bench_silu_grad.py --sweep [--batches 512,2000,8000]

pffn's backward starts at its down projection, `y = h @ w_down` with `h = silu(gate) * up`: it
computes `d_h = d_y @ w_down^T`, then `d_gate` and `d_up` from `d_h`, `gate` and `up`, then both
summed over the rows for the biases' gradients. Unfused, that is a cuBLAS GEMM writing `d_h` [E, B, H],
a pointwise kernel reading it, and reductions reading `d_gate` and `d_up` again (torch.compile fuses
the pointwise work and the sums as far as it can). The fused kernel
(mirai.export.fusions.silu_grad) keeps `d_h` in registers and writes per-tile partial sums.

Candidates, on identical inputs (E=8, D=256, H=1024, tf32, w_down as pffn stores it, [E, H, D]):

- the fused kernel in the export's configuration (mirai.export.fusions.silu_grad.config_for);
- the unfused computation under torch.compile (mode max-autotune-no-cudagraphs);
- eager PyTorch.

`--sweep` times the fused kernel alone in every configuration of a grid that fits the chip and ranks
them per batch against the export's; at few rows (FEW_ROWS or less) its blocks are 16 to 64 rows
tall. Timing as in the other benches (mirai.gpu.timing: rounds, medians, CUDA graphs for GPU
time), every candidate going round operand sets that fill twice the L2 cache (results.rotated), as
inside an op, where the kernel's operands come from other kernels. Results go on top of
bench/RESULTS-silu-grad.md (and $OUT when set). The kernel's numbers are checked on the CPU,
through Triton's interpreter, by tests/export/test_fusions.py.
"""

from __future__ import annotations

import sys
from datetime import date
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
# FEW_ROWS: the export's bound for few rows, where the sweep's grid also has blocks shorter than the
# kernel's first configuration (64 rows): pffn's backward at B = 8 spends a sixth of its GPU time
# in this kernel.
from mirai.export.fusions.few_rows import FEW_ROWS  # noqa: E402
from mirai.export.fusions.silu_grad import config_for, launch  # noqa: E402
from results import (  # noqa: E402
    candidates_report,
    kernel_bench,
    operand_sets,
    ranked_configs,
    rotated,
    sweep_report,
)

RESULTS = ROOT / "bench" / "RESULTS-silu-grad.md"
TITLE = "# silu_grad benchmark"
E, D, H = 8, 256, 1024
# Shared memory per block on Hopper and a register budget for the one fp32 accumulator (the epilogue
# also holds a tile of gate and of up), which the grid's configurations must fit.
SMEM_BYTES = 227 * 1024
ACCUMULATOR_REGISTERS = 128


def reference(d_y, w_down, gate, up):
    """The same in PyTorch: what autograd computes for pffn's down projection and SiLU product."""
    import torch

    d_h = torch.bmm(d_y, w_down.transpose(1, 2))
    sig = torch.sigmoid(gate)
    d_gate = d_h * up * sig * (1 + gate * (1 - sig))
    d_up = d_h * gate * sig
    return d_gate, d_up, d_gate.sum(1), d_up.sum(1)


def inputs(batch: int, generator):
    import torch

    d_y = torch.randn(E, batch, D, device="cuda", generator=generator)
    w_down = torch.randn(E, H, D, device="cuda", generator=generator) * H**-0.5
    gate = torch.randn(E, batch, H, device="cuda", generator=generator)
    up = torch.randn(E, batch, H, device="cuda", generator=generator)
    return d_y, w_down, gate, up


def fused(args, config=None):
    return lambda: launch(*args, precision="tf32", config=config)


def sets_for(batch: int, generator) -> list[tuple]:
    """Operand sets at `batch` for timing (results.operand_sets: twice the L2 cache's worth)."""
    return operand_sets(lambda: inputs(batch, generator), lambda args: fused(args)())


def measure(batch: int, rounds: int) -> dict:
    import torch

    from mirai.gpu.timing import timed_side_by_side

    sets = sets_for(batch, torch.Generator(device="cuda").manual_seed(0))
    torch._dynamo.reset()
    compiled = torch.compile(reference, mode="max-autotune-no-cudagraphs", dynamic=False)
    expect = reference(*(a.double() for a in sets[0]))
    candidates = {
        "fused (export)": [fused(args) for args in sets],
        "cuBLAS + fused pointwise and sums (torch.compile)": [partial(compiled, *a) for a in sets],
        "eager": [partial(reference, *args) for args in sets],
    }
    errors = {}
    for name, calls in candidates.items():
        got = calls[0]()
        errors[name] = max(float((g.double() - r).norm() / r.norm()) for g, r in zip(got, expect))
    timed = {name: rotated(calls) for name, calls in candidates.items()}
    return {
        "errors": errors,
        "ms": timed_side_by_side(timed, rounds),
        "gpu_ms": timed_side_by_side(timed, rounds, graphs=True),
    }


def configurations(batch: int) -> list[dict]:
    """The grid `--sweep` times at `batch` rows: block shapes, warps and stages whose pipeline
    buffers (a tile of d_y and one of w_down per stage, fp32) fit in shared memory and whose
    accumulator fits the register budget, each with the epilogue's loads after the GEMM and before
    it (EARLY). At FEW_ROWS or less: blocks of 16 to 64 rows (none taller than needed, but 16),
    narrower column blocks and one stage as well, 4 warps."""
    if batch <= FEW_ROWS:
        rows, columns, stages_, warps_ = (16, 32, 64), (32, 64, 128), (1, 3), (4,)
        rows = tuple(bm for bm in rows if bm == 16 or bm <= batch)
    else:
        rows, columns, stages_, warps_ = (64, 128, 256), (64, 128, 256), (3, 4), (4, 8)
    grid = []
    for bm in rows:
        for bn in columns:
            for bk in (32, 64):
                for warps in warps_:
                    for stages in stages_:
                        smem = stages * (bm * bk + bk * bn) * 4
                        registers = bm * bn // (32 * warps)
                        if smem <= SMEM_BYTES and registers <= ACCUMULATOR_REGISTERS:
                            grid += [
                                {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                                 "num_warps": warps, "num_stages": stages, "EARLY": early}
                                for early in (False, True)
                            ]  # fmt: skip
    return grid


def label(config: dict) -> str:
    text = "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} w{num_warps} s{num_stages}".format(**config)
    return text + (" early" if config.get("EARLY") else "")


def sweep(batches: list[int], rounds: int, top: int = 5) -> dict:
    """{batch: [(label, GPU ms), ...] best first}: every configuration of the grid timed once as a
    CUDA graph, then the best `top` and the export's own side by side in `rounds` rounds."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    found = {}
    for batch in batches:
        sets = sets_for(batch, g)
        export = label(config_for(batch))
        print(f"B={batch}: {len(sets)} operand sets", flush=True)

        def call(config, sets=sets):
            return rotated([fused(args, config) for args in sets])

        found[batch] = ranked_configs(configurations(batch), label, call, export, rounds, top)
    return found


def _flops(batch: int) -> int:
    return 2 * E * batch * D * H


def render_sweep(found: dict, versions: str) -> str:
    sizes = ", ".join(f"{len(configurations(b))} at B = {b}" for b in found)
    return sweep_report(
        TITLE,
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Configuration sweep of "
        f"the fused kernel (`--sweep`): {sizes} configurations of block sizes, "
        'warps, stages and where the epilogue loads gate and up ("early": before the GEMM), '
        "timed once each as CUDA graphs (GPU time) going round operand sets that fill twice the "
        "L2 cache, then the five best and the export's own side by side in rounds (medians).",
        found,
        _flops,
    )


def render(rows: dict, versions: str) -> str:
    return candidates_report(
        TITLE,
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Milliseconds per call of "
        "the down projection's input gradient, SiLU product's gradients and their row sums (the "
        "start of pffn's backward), per call / GPU time alone (CUDA graphs), each candidate "
        "going round operand sets that fill twice the L2 cache; vs peer: the peer's "
        "GPU time / this GPU time; TFLOP/s of the GEMM in GPU time; the largest relative error of "
        "the four results against float64.",
        rows,
        "cuBLAS + fused pointwise and sums (torch.compile)",
        _flops,
        lambda b: label(config_for(b)),
    )


def main(argv=None) -> int:
    return kernel_bench(argv, sys.modules[__name__], default_batches="512,2000,8000")


if __name__ == "__main__":
    sys.exit(main())
