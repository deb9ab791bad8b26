"""The fused gate/up kernel of `mirai build --fuse gate_up` against what it replaces, by weight layout.

    python bench/bench_gate_up.py [--batches 2000,8000]        # on a GPU

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

Timing as in the other benches: every candidate in turn, in rounds, the median (mirai.gpu.timing),
and also as CUDA graphs (GPU time alone). Results go on top of bench/RESULTS-gate-up.md (and $OUT when
set). The kernel's numbers are checked on the CPU, through Triton's interpreter, by
tests/test_bench_gate_up.py.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

import triton

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from mirai.export.fusions.gate_up import CONFIG, launch  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS-gate-up.md"
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


def render(rows: dict, versions: str) -> str:
    names = list(next(iter(rows.values()))["ms"])
    peer = "cuBLAS x2 + fused pointwise (torch.compile)"
    flops = lambda b: 2 * 2 * E * b * D * H  # noqa: E731  (two GEMMs)
    lines = [
        "# gate/up benchmark",
        "",
        f"{date.today().isoformat()}: {versions}; E={E} D={D} H={H}, tf32. Milliseconds per call of "
        "`silu(x @ w_gate + b_gate) * (x @ w_up + b_up)` (the first half of pffn's forward), per "
        "call / GPU time alone (CUDA graphs); vs peer: the peer's GPU time / this GPU time; "
        "TFLOP/s of the two GEMMs in GPU time; relative error against float64.",
        "",
        "| B | candidate | ms per call | GPU ms | vs peer | TFLOP/s | rel. error |",
        "|---|---|---|---|---|---|---|",
    ]
    for batch, row in rows.items():
        for name in names:
            gpu = row["gpu_ms"][name]
            lines.append(
                f"| {batch} | {name} | {row['ms'][name]:.3f} | {gpu:.3f} | "
                f"{row['gpu_ms'][peer] / gpu:.2f}x | {flops(batch) / gpu / 1e9:.0f} | "
                f"{row['errors'][name]:.1e} |"
            )
    lines.append("")
    lines.append(f"The fused kernel runs the export's configuration: {CONFIG}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="2000,8000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import torch

    from results import record  # bench/results.py

    rows = {int(b): measure(int(b), args.rounds) for b in args.batches.split(",")}
    versions = (
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}"
    )
    text = render(rows, versions)
    print(text)
    record(RESULTS, text, "# gate/up benchmark")
    return 0


if __name__ == "__main__":
    sys.exit(main())
