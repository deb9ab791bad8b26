"""The fused gate/up kernel of `mirai build --fuse gate_up` against what it replaces, by weight layout.

    python bench/bench_gate_up.py [--batches 2000,8000]        # on a GPU
    python bench/bench_gate_up.py --sweep [--batches 64,512,2000,8000]

pffn's forward computes `silu(x @ w_gate + b_gate) * (x @ w_up + b_up)` per expert. The generated op
runs it as two cuBLAS GEMMs, each writing an [E, B, H] intermediate, and one Inductor kernel that reads
both and writes their product: at B = 8000 (E=8, D=256, H=1024, fp32) that is 262 MB written twice
and read twice besides the product, about 0.16 ms of the forward's 0.63 on an H200 (bench/RESULTS-
pffn.md). `gate_up` below launches the export's kernel (mirai.export.fusions.gate_up, in its own
configuration): two accumulators over the same tile of x and the SiLU product in its epilogue, so it
writes the product alone. The export makes the K-major copy in the call, the third candidate here.

What it may cost: on Hopper, TF32 tensor-core instructions (wgmma) read both operands K-major from
shared memory. pffn stores its weights [E, D, H], N-contiguous, and Inductor's Triton templates ran
such GEMMs 2.8x-3.7x slower than cuBLAS at B = 8000, against 1.1x-1.2x with K-contiguous weights
(the H200 tuning table). So the kernel is timed with the weights as pffn stores them and with a
K-major copy ([E, H, D] contiguous, made once per call: 8 MB each), against:

- what the generated op runs for this part: torch's cuBLAS `bmm` twice and one fused pointwise kernel
  (torch.compile, mode max-autotune-no-cudagraphs, which picks cuBLAS for these GEMMs);
- eager PyTorch.

`--sweep` times the kernel alone (GPU time; the weights as the export reads them: as stored for at
most SMALL_M rows, K-major copies above) in every configuration of a grid that fits the chip
(`configurations`: block sizes, warps, pipeline stages; the best also as persistent grids), for an
inference op (the product alone) and a training forward (which also writes the two sums), and ranks
them per batch against the configuration the export runs (mirai.export.fusions.gate_up.config_for).

Timing as in the other benches: every candidate in turn, in rounds, the median (mirai.gpu.timing),
and also as CUDA graphs (GPU time alone). Results go on top of bench/RESULTS-gate-up.md (and $OUT when
set). The kernel's numbers are checked on the CPU, through Triton's interpreter, by
tests/test_bench_gate_up.py.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from mirai.export.fusions.gate_up import SMALL_M, config_for, launch  # noqa: E402
from results import candidates_report, kernel_bench, sweep_report  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS-gate-up.md"
TITLE = "# gate/up benchmark"
E, D, H = 8, 256, 1024


def gate_up(x, w_gate, b_gate, w_up, b_up, *, precision="tf32", config=None):
    """silu(x @ w_gate + b_gate[:, None]) * (x @ w_up + b_up[:, None]) for x [E, M, K], weights
    [E, K, N] of any strides (the same for both), biases [E, N]: one launch of the export's kernel
    (mirai.export.fusions.gate_up), in its configuration unless `config` (BLOCK_M/N/K, num_warps,
    num_stages) is given. `precision`: tl.dot's input precision ("tf32" or "ieee")."""
    b_gate, b_up = b_gate.unsqueeze(1), b_up.unsqueeze(1)  # [E, 1, N], as launch reads them
    return launch(
        x, w_gate, b_gate, w_up, b_up, residuals=False, precision=precision, config=config
    )[0]


def reference(x, w_gate, b_gate, w_up, b_up):
    """The same in PyTorch: what pffn writes."""
    import torch

    gates = torch.nn.functional.silu(torch.bmm(x, w_gate) + b_gate.unsqueeze(1))
    return gates * (torch.bmm(x, w_up) + b_up.unsqueeze(1))


def measure(batch: int, rounds: int) -> dict:
    import torch

    from mirai.gpu.timing import timed_side_by_side

    g = torch.Generator(device="cuda").manual_seed(0)
    inputs = torch.randn(batch, E, D, device="cuda", generator=g)
    x = inputs.transpose(0, 1)  # [E, B, D] with pffn's strides, as the op reads it
    w_gate = torch.randn(E, D, H, device="cuda", generator=g) * D**-0.5
    w_up = torch.randn(E, D, H, device="cuda", generator=g) * D**-0.5
    b_gate = torch.randn(E, H, device="cuda", generator=g) * 0.1
    b_up = torch.randn(E, H, device="cuda", generator=g) * 0.1
    torch.backends.cuda.matmul.allow_tf32 = True

    def k_major(w):  # [E, K, N] values in [E, N, K] memory: K contiguous
        return w.transpose(1, 2).contiguous().transpose(1, 2)

    wg_k, wu_k = k_major(w_gate), k_major(w_up)
    torch._dynamo.reset()
    compiled = torch.compile(reference, mode="max-autotune-no-cudagraphs", dynamic=False)
    expect = reference(x.double(), w_gate.double(), b_gate.double(), w_up.double(), b_up.double())
    candidates = {
        "fused, weights as stored": lambda: gate_up(x, w_gate, b_gate, w_up, b_up),
        "fused, K-major weights": lambda: gate_up(x, wg_k, b_gate, wu_k, b_up),
        "fused, K-major copy made in the call": lambda: gate_up(
            x, k_major(w_gate), b_gate, k_major(w_up), b_up
        ),
        "cuBLAS x2 + fused pointwise (torch.compile)": lambda: compiled(
            x, w_gate, b_gate, w_up, b_up
        ),
        "eager": lambda: reference(x, w_gate, b_gate, w_up, b_up),
    }
    errors = {}
    for name, fn in candidates.items():
        got = fn().double()
        errors[name] = float((got - expect).norm() / expect.norm())
    row = {"errors": errors}
    row["ms"] = timed_side_by_side(candidates, rounds)
    row["gpu_ms"] = timed_side_by_side(candidates, rounds, graphs=True)
    return row


# Shared memory per block on Hopper (227 KB) and a register budget for the two fp32 accumulators
# (at most 128 of a thread's 255 registers), which the grid's configurations must fit.
SMEM_BYTES = 227 * 1024
ACCUMULATOR_REGISTERS = 128


def configurations(rows: int = SMALL_M + 1) -> list[dict]:
    """The grid `--sweep` times at `rows` rows: every block shape, warp count and stage count whose
    pipeline buffers (a tile of x and one of each weight per stage, fp32) fit in shared memory and
    whose two accumulators fit the register budget. Few rows (at most SMALL_M, where reading the
    weights dominates) get 64-row tiles and a wider range of K blocks and stages, the loads in
    flight being what such a call waits on; one stage among them, where Triton loads the weights
    into registers (16-byte loads) instead of its pipeline's 4-byte copies into a K-major tile."""
    if rows <= SMALL_M:
        shapes = [(64, bn, bk) for bn in (32, 64, 128) for bk in (32, 64, 128)]
        stage_counts = (1, 2, 3, 4, 5)
    else:
        shapes = [(bm, bn, bk) for bm in (64, 128, 256) for bn in (32, 64, 128) for bk in (32, 64)]
        stage_counts = (3, 4)
    grid = []
    for bm, bn, bk in shapes:
        for warps in (4, 8):
            for stages in stage_counts:
                smem = stages * (bm * bk + 2 * bk * bn) * 4
                registers = 2 * bm * bn // (32 * warps)
                if smem <= SMEM_BYTES and registers <= ACCUMULATOR_REGISTERS:
                    grid.append(
                        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                         "num_warps": warps, "num_stages": stages}
                    )  # fmt: skip
    return grid


def label(config: dict) -> str:
    text = "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} w{num_warps} s{num_stages}".format(**config)
    return text + (f" persistent {config['programs']}" if config.get("programs") else "")


def sweep(batches: list[int], rounds: int, top: int = 5) -> dict:
    """{(variant, batch): [(label, GPU ms), ...] best first, with the export's own configuration
    marked}: every configuration of the grid timed once as a CUDA graph, then the best `top` and the
    export's own timed side by side in `rounds` rounds."""
    import torch
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench_cudagraph

    from mirai.gpu.timing import timed_side_by_side

    g = torch.Generator(device="cuda").manual_seed(0)
    stored = [torch.randn(E, D, H, device="cuda", generator=g) * D**-0.5 for _ in "gu"]
    k_major = [w.transpose(1, 2).contiguous().transpose(1, 2) for w in stored]
    b = [torch.randn(E, 1, H, device="cuda", generator=g) * 0.1 for _ in "gu"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    found = {}
    for batch in batches:
        # the weights as the export reads them: as stored for few rows, else K-major copies
        w = stored if batch <= SMALL_M else k_major
        grid = configurations(batch)
        x = torch.randn(batch, E, D, device="cuda", generator=g).transpose(0, 1)
        for variant, residuals in (("inference", False), ("training", True)):

            def call(config, residuals=residuals, x=x):
                return lambda: launch(
                    x, w[0], b[0], w[1], b[1], residuals=residuals, precision="tf32", config=config
                )

            first = {}

            def time_each(configs):
                for config in configs:
                    try:
                        first[label(config)] = do_bench_cudagraph(call(config), rep=20)
                    except OutOfResources:
                        continue

            time_each(grid)
            # the best few again as persistent grids of 1, 2 and 3 programs per multiprocessor
            leaders = [c for c in grid if label(c) in sorted(first, key=first.get)[:3]]
            persistent = [{**c, "programs": sms * k} for c in leaders for k in (1, 2, 3)]
            time_each(persistent)
            ours = config_for(batch)
            best = sorted(first, key=first.get)[:top]
            chosen = {name: call(c) for c in grid + persistent if (name := label(c)) in best}
            chosen[label(ours) + " (export)"] = call(ours)
            timed = timed_side_by_side(chosen, rounds, graphs=True)
            found[(variant, batch)] = sorted(timed.items(), key=lambda item: item[1])
            print(f"{variant} B={batch}: {len(first)} configurations ran", flush=True)
            for name, ms in found[(variant, batch)]:
                print(f"    {name}: {ms:.4f} ms", flush=True)
    return found


def render_sweep(found: dict, versions: str) -> str:
    flops = lambda key: 2 * 2 * E * key[-1] * D * H  # noqa: E731  (two GEMMs; key: (variant, B))
    batches = sorted({batch for _, batch in found})
    sizes = ", ".join(f"{len(configurations(b))} configurations at B = {b}" for b in batches)
    return sweep_report(
        TITLE,
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32; the weights as the "
        f"export reads them: as stored ([E, D, H]) at B <= {SMALL_M}, K-major copies above. "
        f"Configuration sweep of the fused kernel (`--sweep`): {sizes} (block sizes, warps "
        "and stages), each timed once as a CUDA graph (GPU "
        "time), the best three again as persistent grids (1, 2 and 3 programs per "
        "multiprocessor), then the five best and the export's own configuration side by side in "
        "rounds (medians). inference: the product alone; training: the product and both sums.",
        found,
        flops,
        leading=("variant", "B"),
    )


def render(rows: dict, versions: str) -> str:
    return candidates_report(
        TITLE,
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Milliseconds per call of "
        "`silu(x @ w_gate + b_gate) * (x @ w_up + b_up)` (the first half of pffn's forward), per "
        "call / GPU time alone (CUDA graphs); vs peer: the peer's GPU time / this GPU time; "
        "TFLOP/s of the two GEMMs in GPU time; relative error against float64.",
        rows,
        "cuBLAS x2 + fused pointwise (torch.compile)",
        lambda b: 2 * 2 * E * b * D * H,  # two GEMMs
        lambda b: label(config_for(b)),
    )


def main(argv=None) -> int:
    return kernel_bench(argv, sys.modules[__name__], default_batches="2000,8000")


if __name__ == "__main__":
    sys.exit(main())
