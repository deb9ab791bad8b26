"""Per-kernel GPU times of the exported pffn beside torch.compile's, in one process (torch.profiler).

    python bench/profile_pffn.py DIR [DIR ...] [--batch 8000] [--calls 10] [--no-peer]

Each DIR is a build of examples/pffn.py that serves --batch: a static one at it (as
`tests/gpu/check_pffn.py --prepare` makes them: <prepared>/B8000) or a dynamic one
(<prepared>/bucketed, <prepared>/fused). It compiles the static-shape peer (torch.compile, mode
max-autotune-no-cudagraphs, dynamic=False; `--no-peer` leaves it out, which saves its minutes of
autotuning when only builds are compared), warms every candidate up, then profiles --calls
forward+backward calls of each and prints torch.profiler's table of CUDA kernels, by total time,
and then one Markdown table of every kernel's GPU time per call with the candidates side by side
(`side_by_side`), which is what a comparison of builds reads. The generated ops run through their C
interface; CUPTI sees their kernels and cuBLASLt's like any other.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))


def kernel_times(prof) -> dict[str, tuple[float, int]]:
    """{kernel: (GPU microseconds in all, launches)} of a torch.profiler profile: the events that
    took time on the device (kernels, memsets, copies)."""
    found = {}
    for event in prof.key_averages():
        if event.self_device_time_total > 0:
            found[event.key] = (float(event.self_device_time_total), int(event.count))
    return found


def side_by_side(times: dict, calls: int, width: int = 70) -> list[str]:
    """Markdown rows: one per kernel (the slowest first, by its largest time in any candidate), one
    column per candidate of `times` ({candidate: kernel_times(...)}): microseconds per call and, in
    brackets, launches per call; a dash where a candidate ran no such kernel; a last row of all
    kernels together. Names longer than `width` are cut."""
    names = sorted(
        {name for found in times.values() for name in found},
        key=lambda name: (-max(found.get(name, (0.0, 0))[0] for found in times.values()), name),
    )

    def cell(found, name):
        if name not in found:
            return "-"
        us, count = found[name]
        return f"{us / calls:.1f} ({count / calls:g})"

    def short(name):
        return name if len(name) <= width else name[: width - 3] + "..."

    lines = [
        "| kernel | " + " | ".join(times) + " |",
        "|---|" + "---|" * len(times),
    ]
    lines += [
        f"| {short(name)} | " + " | ".join(cell(found, name) for found in times.values()) + " |"
        for name in names
    ]
    totals = (sum(us for us, _ in found.values()) / calls for found in times.values())
    lines.append("| all kernels | " + " | ".join(f"{us:.1f}" for us in totals) + " |")
    return lines


def main(argv=None) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    import pffn as example
    from mirai.export.launch import GeneratedFunction

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", type=Path, nargs="+", help="pffn builds serving --batch")
    parser.add_argument("--batch", type=int, default=8000)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--no-peer", action="store_true", help="profile the builds alone")
    args = parser.parse_args(argv)
    for directory in args.directories:
        if not (directory / "manifest.json").exists():
            parser.error(f"{directory} holds no mirai build (no manifest.json)")
    torch.set_float32_matmul_precision("high")
    inputs = [t.requires_grad_(True) for t in example.sample_inputs(args.batch, device="cuda")]
    plain = [t.detach() for t in inputs]
    grad = torch.randn(args.batch, example.E, example.D, device="cuda")
    candidates = {}
    if not args.no_peer:
        compiled = torch.compile(example.pffn.fn, mode="max-autotune-no-cudagraphs", dynamic=False)
        candidates["torch.compile"] = lambda: torch.autograd.grad(compiled(*inputs), inputs, grad)
    for directory in args.directories:
        generated = GeneratedFunction(directory)
        candidates[f"generated {directory}"] = lambda g=generated: g.forward_backward(plain, [grad])

    for fn in candidates.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    times = {}
    for name, fn in candidates.items():
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.calls):
                fn()
            torch.cuda.synchronize()
        print(f"## {name}, B={args.batch}: {args.calls} forward+backward calls\n")
        print(
            prof.key_averages().table(
                sort_by="cuda_time_total", row_limit=25, max_name_column_width=90
            )
        )
        times[name] = kernel_times(prof)
    print(
        f"## GPU time per forward+backward call, B={args.batch}, us (launches per call in "
        f"brackets), {torch.cuda.get_device_name()}, torch {torch.__version__}\n"
    )
    print("\n".join(side_by_side(times, args.calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
