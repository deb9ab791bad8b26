"""The down projection at few rows as the export runs it (a Triton kernel) against cuBLAS.

    python bench/bench_few_rows.py [--batches 8,64]           # on a GPU
    python bench/bench_few_rows.py --sweep [--batches 8,64]

pffn's forward ends in its down projection, `(h @ w_down + b_down).transpose(0, 1)`: h [E, B, H],
w_down [E, H, D], the result stored as [B, E, D]. A training build of `gate_up_down` runs it as one
cuBLASLt GEMM with the bias in its epilogue (`mirai::bmm_rows`), except at few rows (at most
mirai.export.fusions.few_rows.FEW_ROWS), where it runs `rows_kernel`, whose launch costs the host
less than a cuBLASLt call does.

Candidates, on identical inputs (E=8, D=256, H=1024, tf32, w_down as pffn stores it):

- the Triton kernel in the export's configuration (mirai.export.fusions.few_rows.config_for);
- the same under torch.compile (mode max-autotune-no-cudagraphs): a cuBLAS GEMM or a Triton
  template, and a kernel adding the bias and transposing;
- eager PyTorch (cuBLAS baddbmm, then a copy into the transposed layout).

`--sweep` times the kernel alone in every configuration of a grid and ranks them per batch against
the export's. Timing as in the other benches (mirai.gpu.timing: rounds, medians, CUDA graphs for GPU
time). Results go on top of bench/RESULTS-few-rows.md (and $OUT when set). The kernel's numbers are
checked on the CPU, through Triton's interpreter, by tests/test_bench_few_rows.py and
tests/export/test_fusions.py.
"""

from __future__ import annotations

import sys
from datetime import date
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from mirai.export.fusions.few_rows import config_for, launch  # noqa: E402
from results import candidates_report, kernel_bench, ranked_configs, ranked_table  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS-few-rows.md"
TITLE = "# few_rows benchmark"
E, D, H = 8, 256, 1024


def reference(h, w_down, b_down):
    """The same in PyTorch: pffn's down projection with its bias, back in rows."""
    return (h @ w_down + b_down).transpose(0, 1).contiguous()


def inputs(batch: int, generator):
    import torch

    h = torch.randn(E, batch, H, device="cuda", generator=generator)
    w_down = torch.randn(E, H, D, device="cuda", generator=generator) * H**-0.5
    b_down = torch.randn(E, 1, D, device="cuda", generator=generator) * 0.1
    return h, w_down, b_down


def kernel(args, config=None):
    return lambda: launch(*args, precision="tf32", config=config)


def measure(batch: int, rounds: int) -> dict:
    import torch

    from mirai.gpu.timing import timed_side_by_side

    args = inputs(batch, torch.Generator(device="cuda").manual_seed(0))
    torch._dynamo.reset()
    compiled = torch.compile(reference, mode="max-autotune-no-cudagraphs", dynamic=False)
    expect = reference(*(a.double() for a in args))
    candidates = {
        "Triton (export)": kernel(args),
        "GEMM + bias and transpose (torch.compile)": lambda: compiled(*args),
        "eager": lambda: reference(*args),
    }
    errors = {
        name: float((fn().double() - expect).norm() / expect.norm())
        for name, fn in candidates.items()
    }
    return {
        "errors": errors,
        "ms": timed_side_by_side(candidates, rounds),
        "gpu_ms": timed_side_by_side(candidates, rounds, graphs=True),
    }


def configurations(batch: int) -> list[dict]:
    """The grid `--sweep` times at `batch` rows: block shapes (rows no larger than needed),
    K blocks and pipeline stages, 4 warps."""
    rows = [bm for bm in (16, 32, 64) if bm == 16 or bm <= batch]
    return [
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": stages}
        for bm in rows
        for bn in (16, 32, 64)
        for bk in (64, 128)
        for stages in (1, 3)
    ]


def label(config: dict) -> str:
    return "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} w{num_warps} s{num_stages}".format(**config)


def sweep(batches: list[int], rounds: int, top: int = 5) -> dict:
    """{batch: [(label, GPU ms), ...] best first} (results.ranked_configs)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    found = {}
    for batch in batches:
        args = inputs(batch, g)
        grid = configurations(batch)
        export = label(config_for(batch))
        print(f"B={batch}:", flush=True)
        found[batch] = ranked_configs(grid, label, partial(kernel, args), export, rounds, top)
    return found


def _flops(batch: int) -> int:
    return 2 * E * batch * D * H


def render_sweep(found: dict, versions: str) -> str:
    sizes = ", ".join(f"{len(configurations(b))} at B = {b}" for b in found)
    lines = [
        TITLE,
        "",
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Configuration sweep of "
        f"the down projection's Triton kernel (`--sweep`): {sizes} configurations of block sizes "
        "and stages, timed once each as CUDA graphs (GPU time), then the five best and the "
        "export's own side by side in rounds (medians).",
        "",
        *ranked_table(found, _flops),
    ]
    return "\n".join(lines) + "\n"


def render(rows: dict, versions: str) -> str:
    return candidates_report(
        TITLE,
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Milliseconds per call of "
        "pffn's down projection with its bias, stored as [B, E, D], per call / GPU time alone "
        "(CUDA graphs); vs peer: the peer's GPU time / this GPU time; TFLOP/s of the GEMM in GPU "
        "time; relative error against float64.",
        rows,
        "GEMM + bias and transpose (torch.compile)",
        _flops,
        lambda b: label(config_for(b)),
    )


def main(argv=None) -> int:
    return kernel_bench(argv, sys.modules[__name__], default_batches="8,64")


if __name__ == "__main__":
    sys.exit(main())
