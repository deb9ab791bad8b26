"""Benchmark of the exported pffn against PyTorch on the same GPU, in the same process.

    python bench/bench_pffn.py [--batches 64,512,2000,8000] [--builds DIR] [--gpuless DIR]

For each batch size (E=8, D=256, H=1024, tf32) it times, side by side on identical inputs with
triton.testing.do_bench in rounds (results.timed_side_by_side), the forward and forward+backward of:

- the generated ops of the builds found, run through their C interface (the launch code the
  TensorFlow ops wrap; TensorFlow itself cannot be installed on the GPU machine): "auto", built on
  this GPU with gemm="auto" (`--builds DIR`: DIR/gpu-B<batch>, as tests/gpu/check_pffn.py --work
  leaves them); "triton", built on this GPU with gemm="triton" (DIR/gpu-triton-B<batch>);
  "gpuless", static builds made on a machine without a GPU (`--gpuless DIR`: DIR/B<batch>, as
  check_pffn.py --prepare makes them); "dynamic", one GPU-less dynamic build (DIR/dynamic) serving
  every batch; "bucketed" (DIR/bucketed), one GPU-less dynamic build with a bucket at every
  batch (mirai.export.buckets); "inference" (DIR/inference), the forward alone as
  `mirai.build(..., inference=True)` makes it for serving, bucketed, with no residuals to write
  (forward tables only, like the peers' forwards, which run under torch.no_grad);
  these builds take the default fusions of their kind (mirai.export.fusions.default);
  "fused-NAMES" and "fused-NAMES-inference" (as check_pffn.py --prepare --fuse NAMES makes them),
  those two bucketed builds made with the graph-level fusions NAMES instead ("unfused" and
  "unfused-inference" with none: --fuse none); "tuned" and "tuned dynamic", the same made GPU-less with a tuning table that
  `mirai tune` wrote on this GPU (`--tuned DIR`, from check_pffn.py --prepare DIR --tuning FILE),
  and "tuned bucketed" (DIR/bucketed), one dynamic build with a bucket at every batch; and any
  build given as `--extra NAME=DIR`;
- torch.compile (max-autotune, no CUDA graphs: kernels against kernels; `--peer-mode` for another
  mode) and eager PyTorch.

Then the host time per call of the dynamic build at a tiny batch, where launch overhead dominates. Prints Markdown tables
and writes them to bench/RESULTS-pffn.md (and $OUT when set); earlier results kept in that file are
left below the new ones.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

RESULTS = ROOT / "bench" / "RESULTS-pffn.md"

from results import (
    capturable,
    record,
    timed_side_by_side,
    without_grad,
)  # noqa: E402  (bench/results.py)

from mirai.export import fusions  # noqa: E402
from tests.gpu.check_pffn import fused_builds  # noqa: E402  (the folders --prepare --fuse makes)


def host_time(fn, calls: int = 300) -> float:
    """Microseconds of host time per call: enqueue `calls` calls and measure before synchronizing."""
    import torch

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def variants(batch: int, args) -> dict[str, Path]:
    """The generated builds to time at `batch`, by name (those that exist)."""
    folders = {
        "auto": args.builds / f"gpu-B{batch}",
        "triton": args.builds / f"gpu-triton-B{batch}",
    }
    if args.gpuless is not None:
        folders["gpuless"] = args.gpuless / f"B{batch}"
        folders["dynamic"] = args.gpuless / "dynamic"
        folders["bucketed"] = args.gpuless / "bucketed"
        folders["inference"] = args.gpuless / "inference"  # forward alone: no backward op
        for folder in fused_builds(args.gpuless):  # bucketed, with mirai build --fuse NAMES
            folders[folder.name] = folder
    if args.tuned is not None:
        folders["tuned"] = args.tuned / f"B{batch}"
        folders["tuned dynamic"] = args.tuned / "dynamic"
        folders["tuned bucketed"] = args.tuned / "bucketed"
    for extra in args.extra:  # checked in main: NAME=DIR
        name, _, folder = extra.partition("=")
        folders[name] = Path(folder)
    return {n: f for n, f in folders.items() if (f / "manifest.json").exists()}


def autotune_table(args, batches) -> str:
    """What Inductor measured for each GEMM of the builds made on this GPU (their manifests)."""
    import json

    lines = []
    for batch in batches:
        folder = variants(batch, args).get("auto")
        if folder is None:
            continue
        manifest = json.loads((folder / "manifest.json").read_text())
        for op, spec in manifest["ops"].items():
            for t in (t for v in spec["variants"] for t in v["gemm_autotune"]):
                if t.get("source") != "measured":
                    continue
                ms = t["ms"]
                lines.append(
                    f"| {batch} | {op} | {t['name']} {t['key']} | "
                    f"{ms.get('cublas', float('nan')):.4f} | {ms.get('triton', float('nan')):.4f} | "
                    f"{t['chosen']} |"
                )
    if not lines:
        return ""
    return (
        "\nGEMMs of the builds made on this GPU, as Inductor's autotuner timed them (ms):\n\n"
        "| B | op | GEMM (input sizes) | cuBLAS | best Triton template | kept |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n"
    )


def cell(times: dict, name: str, peer: float) -> str:
    return f"{times[name]:.3f} ({peer / times[name]:.2f}x)" if name in times else "-"


def gpu_time_row(batch: int, names, forward: dict, both: dict, rounds: int) -> str:
    """One row of GPU times: forward and forward+backward of every candidate, as CUDA graphs. A
    candidate that cannot be captured (autograd's backward of a peer may not be) gets a dash."""
    fwd = timed_side_by_side(capturable(forward), rounds, graphs=True)
    fb = timed_side_by_side(capturable(both), rounds, graphs=True)

    def pair(name: str) -> str:
        cells, ratios = [], []
        for times in (fwd, fb):
            cells.append(f"{times[name]:.3f}" if name in times else "-")
            peer = times.get("torch.compile")
            ratios.append(f"{peer / times[name]:.2f}x" if peer and name in times else "-")
        return f"{cells[0]} / {cells[1]} ({ratios[0]} / {ratios[1]})"

    return (
        f"| {batch} | "
        + " | ".join(pair(n) for n in names)
        + f" | {pair('torch.compile')} | {pair('eager')} |"
    )


def main(argv=None) -> int:
    import torch

    import pffn as example
    from mirai.export.launch import GeneratedFunction, build_interfaces

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="64,512,2000,8000")
    parser.add_argument("--builds", type=Path, default=Path("/tmp/mirai-gpu-check"))
    parser.add_argument("--gpuless", type=Path, help="GPU-less builds: DIR/B<batch>, DIR/dynamic")
    parser.add_argument(
        "--tuned",
        type=Path,
        help="GPU-less builds made with a tuning table (mirai tune): DIR/B<batch>, DIR/dynamic",
    )
    parser.add_argument(
        "--no-host-time", action="store_true", help="skip the host time at a tiny batch"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds of side-by-side timing (median of them)"
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="another build to time beside the others, under this name (repeatable)",
    )
    parser.add_argument(
        "--peer-mode",
        default="max-autotune-no-cudagraphs",
        help="torch.compile's mode for the peer (default: the issue's; 'default' compiles in "
        "seconds and gives these GEMMs to cuBLAS as well)",
    )
    parser.add_argument(
        "--graphs",
        action="store_true",
        help="also time GPU time alone: each candidate as a CUDA graph of its calls",
    )
    args = parser.parse_args(argv)
    for extra in args.extra:
        name, _, folder = extra.partition("=")
        if not name or not (Path(folder) / "manifest.json").exists():
            parser.error(f"--extra {extra!r}: give NAME=DIR, DIR a build (with a manifest.json)")
    torch.set_float32_matmul_precision("high")

    def peer():  # static shapes per batch: what torch.compile gives a fixed production shape
        torch._dynamo.reset()
        return torch.compile(example.pffn.fn, mode=args.peer_mode, dynamic=False)

    batches = [int(b) for b in args.batches.split(",")]
    names = [  # once each: an --extra may reuse a built-in name
        n
        for n in dict.fromkeys(
            (
                "auto",
                "triton",
                "gpuless",
                "dynamic",
                "bucketed",
                "inference",
                *(f.name for f in (fused_builds(args.gpuless) if args.gpuless else ())),
                "tuned",
                "tuned dynamic",
                "tuned bucketed",
                *(extra.partition("=")[0] for extra in args.extra),
            )
        )
        if any(n in variants(b, args) for b in batches)
    ]
    build_interfaces({f for b in batches + [8] for f in variants(b, args).values()})
    fwd_rows, fb_rows, graph_rows = [], [], []
    for batch in batches:
        builds = variants(batch, args)
        compiled = peer()
        inputs = [t.requires_grad_(True) for t in example.sample_inputs(batch, device="cuda")]
        plain = [t.detach() for t in inputs]
        grad = torch.randn(batch, example.E, example.D, device="cuda")

        def eager_fb():
            y = example.pffn.fn(*inputs)
            torch.autograd.grad(y, inputs, grad)

        def compiled_fb():
            y = compiled(*inputs)
            torch.autograd.grad(y, inputs, grad)

        forward = {
            "torch.compile": without_grad(lambda: compiled(*plain)),
            "eager": without_grad(lambda: example.pffn.fn(*plain)),
        }
        both = {"torch.compile": compiled_fb, "eager": eager_fb}
        for name, folder in builds.items():
            fn = GeneratedFunction(folder)
            forward[name] = lambda fn=fn: fn(plain)
            if fn.backward is not None:
                both[name] = lambda fn=fn: fn.forward_backward(plain, [grad])
        gen_fwd = timed_side_by_side(forward, args.rounds)
        gen_fb = timed_side_by_side(both, args.rounds)
        t_comp, t_eager = gen_fwd.pop("torch.compile"), gen_fwd.pop("eager")
        t_comp_fb, t_eager_fb = gen_fb.pop("torch.compile"), gen_fb.pop("eager")
        flops = 2 * 3 * batch * example.E * example.D * example.H
        best = min(gen_fwd.values())
        fwd_rows.append(
            f"| {batch} | "
            + " | ".join(cell(gen_fwd, n, t_comp) for n in names)
            + f" | {t_comp:.3f} | {t_eager:.3f} | {flops / best / 1e9:.0f} |"
        )
        fb_rows.append(
            f"| {batch} | "
            + " | ".join(cell(gen_fb, n, t_comp_fb) for n in names)
            + f" | {t_comp_fb:.3f} | {t_eager_fb:.3f} |"
        )
        print(fwd_rows[-1], fb_rows[-1], sep="\n", flush=True)
        if args.graphs:
            graph_rows.append(gpu_time_row(batch, names, forward, both, args.rounds))
            print(graph_rows[-1], flush=True)

    tiny = 8
    host = ""
    if not args.no_host_time:
        dynamic = variants(tiny, args).get("dynamic")
        plain = example.sample_inputs(tiny, device="cuda")
        compiled = peer()
        with torch.no_grad():
            h_eager = host_time(lambda: example.pffn.fn(*plain))
            compiled(*plain)
            h_comp = host_time(lambda: compiled(*plain))
        gen = GeneratedFunction(dynamic) if dynamic else None
        h_gen = host_time(lambda: gen(plain)) if gen else float("nan")
        host = (
            f"Host time per forward call at B={tiny} (microseconds): generated (dynamic) through "
            f"ctypes {h_gen:.0f}, torch.compile {h_comp:.0f}, eager {h_eager:.0f}.\n"
        )
    head = " | ".join(f"generated {n}" for n in names)
    import triton

    text = (
        f"# pffn benchmark\n\n{date.today().isoformat()}: {torch.cuda.get_device_name()}, torch "
        f"{torch.__version__}, triton {triton.__version__}; E=8 D=256 H=1024, tf32. Milliseconds per "
        "call (triton do_bench); in brackets torch.compile / generated (above 1: generated is "
        "faster). The generated ops run through their C interface (the launch code the TensorFlow "
        "ops wrap), since TensorFlow cannot be installed on the GPU machine.\n\n"
        "Builds: auto = built on this GPU, Inductor timing cuBLAS against its Triton templates per "
        "GEMM; gpuless = built on a machine without a GPU (GEMMs in cuBLAS through cuBLASLt); "
        "dynamic = one GPU-less build for every batch; bucketed = one GPU-less dynamic build "
        "captured at every batch of this table, each batch running the kernels of its own bucket; triton = built on this GPU with every GEMM a "
        "Triton template; tuned = built on a machine without a GPU from the tuning table `mirai "
        "tune` wrote on this GPU (tuned dynamic: one such dynamic build, whose choices are those "
        "of the table's entries at its sample batch; tuned bucketed: one dynamic build captured at "
        "every batch of this table with the tuning table); fused-NAMES / fused-NAMES-inference = "
        "the bucketed and inference builds made with those fusions (mirai build --fuse NAMES; "
        "unfused: with none); the others take their kind's default fusions ("
        f"training: {', '.join(fusions.defaults('training')) or 'none'}; inference: "
        f"{', '.join(fusions.defaults('inference')) or 'none'}). "
        "Timing: "
        f"every candidate of a batch in turn, {args.rounds} rounds, the median of its rounds "
        f"(triton do_bench medians). torch.compile: mode {args.peer_mode}, compiled afresh for each "
        "batch with dynamic=False (the static-shape peer a fixed production shape gets).\n\n"
        f"Forward:\n\n| B | {head} | torch.compile | eager | best generated TFLOP/s |\n"
        f"|---|{'---|' * len(names)}---|---|---|\n" + "\n".join(fwd_rows) + "\n\n"
        f"Forward + backward:\n\n| B | {head} | torch.compile | eager |\n"
        f"|---|{'---|' * len(names)}---|---|\n" + "\n".join(fb_rows) + "\n\n" + host
    )
    if graph_rows:
        text += (
            "GPU time alone (each candidate timed as a CUDA graph of its calls, which takes the "
            "host out: Python, ctypes and launch overhead), forward / forward+backward, ms; "
            "in brackets torch.compile / generated for each (a dash where a candidate could not be "
            f"captured):\n\n| B | {head} | torch.compile | eager |\n"
            f"|---|{'---|' * len(names)}---|---|\n" + "\n".join(graph_rows) + "\n\n"
        )
    text += autotune_table(args, batches)
    print(text)
    record(RESULTS, text, "# pffn benchmark")
    return 0


if __name__ == "__main__":
    sys.exit(main())
