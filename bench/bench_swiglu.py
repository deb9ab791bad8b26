"""A LLaMA-style SwiGLU block (examples/swiglu_mlp.py) exported with and without the gate/up fusion,
against torch.compile and eager PyTorch on the same GPU.

    python bench/bench_swiglu.py --prepare DIR [--batches 2,4,16]     # on any machine (GPU-less)
    python bench/bench_swiglu.py DIR [--batches 2,4,16] [--peer-mode default]   # on a GPU

`--prepare` makes four GPU-less dynamic builds, bucketed at the batches: DIR/inference and
DIR/fused-inference (the forward alone, `inference=True`, without and with `fuse=("gate_up_linear",)`),
DIR/training and DIR/fused (forward and backward ops, without and with the fusion). On the GPU the
forwards are timed under torch.no_grad against the inference builds, forward+backward against the
training builds, per call (do_bench) and as CUDA graphs (GPU time alone), side by side in rounds
(mirai.gpu.timing). The generated ops run through their C interface (the launch code the
TensorFlow ops wrap), since TensorFlow cannot be installed on the GPU machine. Every build is first
checked against float64 PyTorch: its output, and a training build's every gradient. Results go on top of bench/RESULTS-swiglu.md (and $OUT).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

RESULTS = ROOT / "bench" / "RESULTS-swiglu.md"
BUILDS = {  # folder -> (inference, fuse)
    "inference": (True, ()),
    "fused-inference": (True, ("gate_up_linear",)),
    "training": (False, ()),
    "fused": (False, ("gate_up_linear",)),
}


def prepare(out: Path, batches: list[int]) -> None:
    import mirai
    from swiglu_mlp import sample_inputs, swiglu_mlp

    for folder, (inference, fuse) in BUILDS.items():
        mirai.build(
            swiglu_mlp, sample_inputs(batches[-1]), output_dir=out / folder, dynamic=True,
            buckets=batches, inference=inference, fuse=fuse, gpu=False,
        )  # fmt: skip


def measure(builds: Path, batch: int, rounds: int, peer_mode: str) -> dict:
    import torch

    from mirai.export.launch import GeneratedFunction
    from mirai.gpu.timing import capturable, timed_side_by_side
    from results import without_grad
    from swiglu_mlp import sample_inputs, swiglu_mlp

    torch.set_float32_matmul_precision("high")
    plain = sample_inputs(batch, device="cuda")
    leaves = [t.clone().requires_grad_(True) for t in plain]
    grad = torch.randn_like(plain[0])
    torch._dynamo.reset()
    compiled = torch.compile(swiglu_mlp.fn, mode=peer_mode, dynamic=False)
    ops = {name: GeneratedFunction(builds / name) for name in BUILDS}
    x64 = [t.double().requires_grad_(True) for t in plain]
    expect = swiglu_mlp.fn(*x64)
    expect_grads = torch.autograd.grad(expect, x64, grad.double())

    def rel(got, want) -> float:
        return float((got.double() - want).norm() / want.norm())

    errors = {}  # the worst relative error of the output (and, for training builds, every gradient)
    for name, fn in ops.items():
        if fn.backward is None:
            errors[name] = rel(fn(plain)[0], expect.detach())
        else:
            outputs, grads = fn.forward_backward(plain, [grad])
            errors[name] = max(
                [rel(outputs[0], expect.detach())]
                + [rel(g, w) for g, w in zip(grads, expect_grads)]
            )

    def autograd(fn):
        return lambda: torch.autograd.grad(fn(*leaves), leaves, grad)

    forward = {
        "generated": without_grad(lambda: ops["inference"](plain)),
        "generated fused": without_grad(lambda: ops["fused-inference"](plain)),
        "torch.compile": without_grad(lambda: compiled(*plain)),
        "eager": without_grad(lambda: swiglu_mlp.fn(*plain)),
    }
    both = {
        "generated": lambda: ops["training"].forward_backward(plain, [grad]),
        "generated fused": lambda: ops["fused"].forward_backward(plain, [grad]),
        "torch.compile": autograd(compiled),
        "eager": autograd(swiglu_mlp.fn),
    }
    return {
        "errors": errors,
        "fwd": timed_side_by_side(forward, rounds),
        "fwd graphs": timed_side_by_side(capturable(forward), rounds, graphs=True),
        "fwd+bwd": timed_side_by_side(both, rounds),
        "fwd+bwd graphs": timed_side_by_side(capturable(both), rounds, graphs=True),
    }


def render(rows: dict, versions: str, peer_mode: str) -> str:
    from swiglu_mlp import D, H, S

    names = ["generated", "generated fused", "torch.compile", "eager"]
    lines = [
        "# SwiGLU benchmark",
        "",
        f"{date.today().isoformat()}: {versions}; examples/swiglu_mlp.py, x [B, {S}, {D}], "
        f"hidden {H}, nn.Linear weights, tf32. Milliseconds; in brackets torch.compile / this "
        "(above 1: faster than torch.compile). generated: the GPU-less dynamic builds without "
        "fusions (the inference build for the forward, the training build's two ops for "
        "forward+backward); generated fused: the same with fuse=('gate_up_linear',). torch.compile: mode "
        f"{peer_mode}, dynamic=False, compiled afresh per batch. TFLOP/s: the best forward's "
        "three GEMMs in GPU time.",
    ]
    for part, title in (
        ("fwd", "Forward, per call"),
        ("fwd graphs", "Forward, GPU time alone (CUDA graphs)"),
        ("fwd+bwd", "Forward + backward, per call"),
        ("fwd+bwd graphs", "Forward + backward, GPU time alone (CUDA graphs)"),
    ):
        lines += ["", f"{title}:", "", "| B | rows | " + " | ".join(names) + " |"]
        lines.append("|---|---|" + "---|" * len(names))
        for batch, row in rows.items():
            t = row[part]
            peer = t.get("torch.compile")
            cells = [f"{t[n]:.3f} ({peer / t[n]:.2f}x)" if n in t and peer else "-" for n in names]
            lines.append(f"| {batch} | {batch * S} | " + " | ".join(cells) + " |")
    lines += ["", "| B | best forward TFLOP/s | " + " | ".join(f"error {n}" for n in BUILDS) + " |"]
    lines.append("|---|---|" + "---|" * len(BUILDS))
    for batch, row in rows.items():
        flops = 2 * 3 * batch * S * D * H
        best = min(row["fwd graphs"].values())
        errs = " | ".join(f"{row['errors'][n]:.1e}" for n in BUILDS)
        lines.append(f"| {batch} | {flops / best / 1e9:.0f} | {errs} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="?", type=Path, help="the folder --prepare wrote")
    parser.add_argument("--prepare", type=Path, help="make the GPU-less builds into this folder")
    parser.add_argument("--batches", default="2,4,16")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--peer-mode", default="max-autotune-no-cudagraphs")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    if args.prepare:
        prepare(args.prepare, batches)
        return 0
    if args.builds is None:
        parser.error("give the builds' folder (or --prepare DIR)")
    missing = [n for n in BUILDS if not (args.builds / n / "manifest.json").exists()]
    if missing:
        parser.error(f"{args.builds} lacks the builds {', '.join(missing)}: run --prepare on it")
    import torch
    import triton

    from mirai.export.launch import build_interfaces
    from results import record

    build_interfaces([args.builds / name for name in BUILDS])
    rows = {}
    for batch in batches:
        rows[batch] = measure(args.builds, batch, args.rounds, args.peer_mode)
        print(batch, rows[batch], flush=True)
    versions = (
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}"
    )
    text = render(rows, versions, args.peer_mode)
    print(text)
    record(RESULTS, text, "# SwiGLU benchmark")
    return 0


if __name__ == "__main__":
    sys.exit(main())
