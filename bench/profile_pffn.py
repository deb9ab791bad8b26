"""Per-kernel GPU times of the exported pffn beside torch.compile's, in one process (torch.profiler).

    python bench/profile_pffn.py DIR [DIR ...] [--batch 8000] [--calls 10] [--no-peer]

Each DIR is a build of examples/pffn.py that serves --batch: a static one at it (as
`tests/gpu/check_pffn.py --prepare` makes them: <prepared>/B8000) or a dynamic one
(<prepared>/bucketed, <prepared>/fused). It compiles the static-shape peer (torch.compile, mode
max-autotune-no-cudagraphs, dynamic=False; `--no-peer` leaves it out, which saves its minutes of
autotuning when only builds are compared), warms every candidate up, then profiles --calls
forward+backward calls of each and prints torch.profiler's table of CUDA kernels, by total time. The generated ops run
through their C interface; CUPTI sees their kernels and cuBLASLt's like any other.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
