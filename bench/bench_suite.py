"""Benchmark of every function of examples/suite.py exported, against torch.compile on the same GPU.

    python bench/bench_suite.py --builds DIR [--batches 1024,65536] [--functions a,b] [--graphs]

DIR holds GPU-less builds as `tests/gpu/check_suite.py --prepare DIR --dynamic-only` makes them
(DIR/<function>/dynamic): one dynamic build per function serves every batch. For each function and
batch it times, side by side in one process on identical inputs (triton.testing.do_bench), the
forward and the forward+backward of:

- the generated ops, through their C interface (the launch code the TensorFlow ops wrap; TensorFlow
  cannot be installed on the GPU machine);
- torch.compile(mode="max-autotune-no-cudagraphs", dynamic=False), compiled afresh for each batch:
  the static-shape peer a fixed production shape gets;
- eager PyTorch.

The suite's functions are small (16 to 128 features), so at the smaller batch host time dominates
every column: Python and the launch path, not kernels. Where DIR/<function>/inference holds an
inference build (`check_suite.py --prepare --inference`), its forward gets tables of its own: a
generated forward op also writes what its backward reads, while the peers' forwards run under
torch.no_grad. `--graphs` also times each candidate as a CUDA
graph of its calls (mirai.gpu.timing): GPU time alone, which compares the kernels. Prints a Markdown table of milliseconds and ratios (torch.compile / generated: above 1,
the generated op is faster) and records it in bench/RESULTS-suite.md above the earlier results (and in $OUT when set).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

RESULTS = ROOT / "bench" / "RESULTS-suite.md"

from results import (
    capturable,
    record,
    timed_side_by_side,
    without_grad,
)  # noqa: E402  (bench/results.py)


def measure(name: str, folder: Path, batch: int, graphs: bool = False) -> dict:
    """Milliseconds per call of the generated ops, torch.compile and eager for one function: "fwd"
    and "fwd+bwd", and with `graphs` their GPU times alone, "fwd graphs" and "fwd+bwd graphs"."""
    import torch

    from mirai.export.launch import GeneratedFunction
    from suite import SUITE

    op, samples, _ = SUITE[name]
    generated = GeneratedFunction(folder)
    dtypes = [getattr(torch, i["dtype"]) for i in generated.forward.spec["inputs"]]
    plain = [t.to("cuda", dtype).contiguous() for t, dtype in zip(samples(batch), dtypes)]
    grads = [t.is_floating_point() and p not in op.no_grad for t, p in zip(plain, op.param_names)]
    leaves = [t.clone().requires_grad_(g) for t, g in zip(plain, grads)]
    torch._dynamo.reset()
    compiled = torch.compile(op.fn, mode="max-autotune-no-cudagraphs", dynamic=False)
    with torch.no_grad():
        outs = compiled(*plain)
    outs = (outs,) if isinstance(outs, torch.Tensor) else tuple(outs)
    tangents = [torch.randn_like(o) if o.is_floating_point() else None for o in outs]
    row = {}

    forward = {
        "generated": without_grad(lambda: generated(plain)),
        "torch.compile": without_grad(lambda: compiled(*plain)),
        "eager": without_grad(lambda: op.fn(*plain)),
    }
    serving = folder.parent / "inference"  # check_suite --prepare --inference
    if (serving / "manifest.json").exists():
        inference = GeneratedFunction(serving)
        forward["inference"] = without_grad(lambda: inference(plain))
    row["fwd"] = timed_side_by_side(forward)
    if graphs:
        row["fwd graphs"] = timed_side_by_side(capturable(forward), graphs=True)
    if generated.backward is None or not any(grads):
        return row

    def backward_of(fn):
        def run():
            out = fn(*leaves)
            out = (out,) if isinstance(out, torch.Tensor) else tuple(out)
            pairs = [(o, t) for o, t in zip(out, tangents) if o.requires_grad]
            torch.autograd.grad(
                [o for o, _ in pairs],
                [x for x, g in zip(leaves, grads) if g],
                [t for _, t in pairs],
            )

        return run

    both = {
        "generated": lambda: generated.forward_backward(plain, tangents),
        "torch.compile": backward_of(compiled),
        "eager": backward_of(op.fn),
    }
    row["fwd+bwd"] = timed_side_by_side(both)
    if graphs:
        row["fwd+bwd graphs"] = timed_side_by_side(capturable(both), graphs=True)
    return row


TABLES = {
    "fwd": "Forward",
    "fwd inference": "Forward of the inference builds (`inference=True`: no residuals written)",
    "fwd+bwd": "Forward + backward",
    "fwd graphs": "Forward, GPU time alone (each candidate timed as a CUDA graph of its calls)",
    "fwd graphs inference": "Forward of the inference builds, GPU time alone (CUDA graphs)",
    "fwd+bwd graphs": "Forward + backward, GPU time alone (CUDA graphs)",
}


def with_inference(results: dict) -> dict:
    """`results` with a table of the inference builds' forwards ("generated" the inference build)
    after each forward table, where any function had one."""
    out = {}
    for name, by_batch in results.items():
        out[name] = {}
        for batch, parts in by_batch.items():
            row = {}
            for part, times in parts.items():
                row[part] = times
                if part in ("fwd", "fwd graphs") and "inference" in times:
                    row[f"{part} inference"] = {**times, "generated": times["inference"]}
            out[name][batch] = row
    return out


def render(results: dict, batches: list[int], header: str) -> str:
    """The Markdown tables: one row per function, a column group per batch."""
    results = with_inference(results)
    out = [header]
    for part, title in TABLES.items():
        if not any(part in by_batch.get(b, {}) for by_batch in results.values() for b in batches):
            continue
        cols = " | ".join(f"B={b} generated | B={b} torch.compile | B={b} ratio" for b in batches)
        out += [f"\n{title}:\n", f"| function | {cols} |", "|---|" + "---|---|---|" * len(batches)]
        for name, by_batch in results.items():
            cells = []
            for b in batches:
                t = by_batch.get(b, {}).get(part)
                if not t or "generated" not in t or "torch.compile" not in t:
                    cells.append("- | - | -")
                    continue
                gen, peer = t["generated"], t["torch.compile"]
                cells.append(f"{gen:.4f} | {peer:.4f} | {peer / gen:.2f}x")
            out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    import torch
    import triton

    from mirai.export.launch import build_interfaces
    from suite import SUITE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=Path, required=True, help="DIR/<function>/dynamic")
    parser.add_argument("--batches", default="1024,65536")
    parser.add_argument("--functions", default="", help="suite entries (default: all)")
    parser.add_argument(
        "--graphs", action="store_true", help="also GPU time alone: each candidate as a CUDA graph"
    )
    args = parser.parse_args(argv)
    torch.set_float32_matmul_precision("high")
    batches = [int(b) for b in args.batches.split(",")]
    names = [n for n in args.functions.split(",") if n] or list(SUITE)
    missing = [n for n in names if not (args.builds / n / "dynamic" / "manifest.json").exists()]
    if missing:
        parser.error(f"no dynamic build under {args.builds} for {', '.join(missing)}")
    build_interfaces([args.builds / n / "dynamic" for n in names])
    results = {}
    for name in names:
        results[name] = {}
        for batch in batches:
            results[name][batch] = measure(name, args.builds / name / "dynamic", batch, args.graphs)
            print(name, batch, results[name][batch], flush=True)
    manifest = (args.builds / names[0] / "dynamic" / "manifest.json").read_text()
    import json

    origin = json.loads(manifest).get("origin", "")
    header = (
        f"# examples/suite.py benchmark\n\n{date.today().isoformat()}: "
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}. "
        f"Milliseconds per call (triton do_bench); ratio = torch.compile / generated (above 1: "
        f"the generated op is faster). Generated: one dynamic build per function ({origin}), run "
        "through its C interface (the launch code the TensorFlow ops wrap; TensorFlow cannot be "
        "installed on the GPU machine). Peer: torch.compile(mode='max-autotune-no-cudagraphs', "
        "dynamic=False) compiled for each batch. `python bench/bench_suite.py --builds DIR "
        f"--batches {args.batches}{' --graphs' if args.graphs else ''}`."
    )
    text = render(results, batches, header)
    print(text)
    record(RESULTS, text, "# examples/suite.py benchmark")
    return 0


if __name__ == "__main__":
    sys.exit(main())
