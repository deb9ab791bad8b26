"""GPU check of the export: the seed's pffn, built and run through the generated launch code.

On a CUDA machine (one command, from the repository root):

    python tests/gpu/check_pffn.py                      # build on this GPU, check B = 64, 2000, 8000
    python tests/gpu/check_pffn.py --gpuless gpuless/   # also check builds made GPU-less elsewhere

On a machine without a GPU, prepare GPU-less builds to carry over:

    python tests/gpu/check_pffn.py --prepare gpuless/

For every batch size it runs the generated forward and backward launch code (the code the TensorFlow
ops wrap) on fresh random inputs and compares the output and all seven gradients with a float64
PyTorch reference: relative error by norm, ||got - ref|| / ||ref||. The GPU-less preparation also
makes an inference build (DIR/inference: the forward alone, bucketed), whose output is checked. The
builds take the default fusions of their kind (mirai.export.fusions.default); `--fuse NAMES` adds a
training and an inference build with those instead (`--fuse none`: DIR/unfused and
DIR/unfused-inference, the baseline the fusions are measured against). Results are printed as a
table and written as JSON and Markdown (--results). Exit status 1 if any error exceeds the
tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from mirai.export import fusions  # noqa: E402
from mirai.gpu import precision  # noqa: E402

# pffn's float32 modes (its inputs stay float32)
PRECISIONS = tuple(p for p in precision.names() if precision.get(p).dtype is None)
NAMES = ["output", "inputs", "w_gate", "b_gate", "w_up", "b_up", "w_down", "b_down"]


def dir_tolerance(directory: Path) -> float:
    """What the build's kernels compute decides its tolerance (mirai.export.verify.tolerance)."""
    from mirai.export.verify import tolerance

    return tolerance(json.loads((Path(directory) / "manifest.json").read_text()))


def rel_err(got, ref) -> float:
    import torch

    ref = ref.double()
    return float(torch.linalg.vector_norm(got.double() - ref) / torch.linalg.vector_norm(ref))


def reference(fn, inputs, grad_output):
    import torch

    x64 = [t.detach().double().requires_grad_(True) for t in inputs]
    y = fn(*x64)
    y.backward(grad_output.double())
    return [y.detach()] + [t.grad for t in x64]


def check_dir(directory: Path, batch: int, seed: int) -> dict:
    """Relative errors of the output and the seven gradients on fresh random inputs; of the output
    alone for a build without a backward op (an inference build)."""
    import torch

    import pffn as example
    from mirai.export.launch import GeneratedFunction

    fn = GeneratedFunction(directory, check_inputs=True)  # raises if an op writes an input
    inputs = example.sample_inputs(batch, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(seed)
    inputs = [torch.randn(t.shape, device="cuda", generator=g) * t.std() for t in inputs]
    if fn.backward is None:
        (output,) = fn(inputs)
        torch.cuda.synchronize()
        with torch.no_grad():
            ref = example.pffn.fn(*[t.double() for t in inputs])
        return {NAMES[0]: rel_err(output, ref)}
    grad_output = torch.randn(batch, example.E, example.D, device="cuda", generator=g)
    outputs, grads = fn.forward_backward(inputs, [grad_output])
    torch.cuda.synchronize()
    ref = reference(example.pffn.fn, inputs, grad_output)
    got = outputs + grads
    return {name: rel_err(a, b) for name, a, b in zip(NAMES, got, ref)}


def build_on_gpu(batch: int, out: Path, precision: str, dynamic: bool = False) -> float:
    import pffn as example

    import mirai

    t = time.perf_counter()
    mirai.build(
        example.pffn,
        sample_inputs=example.sample_inputs(batch, device="cuda"),
        output_dir=out,
        precision=precision,
        dynamic=dynamic,
        gpu=True,
    )
    return time.perf_counter() - t


def prepare(out: Path, batches, precision: str, tuning: Path | None = None, fuse=()) -> None:
    import pffn as example

    import mirai

    def build(folder: str, batch: int, **how) -> None:
        mirai.build(
            example.pffn,
            sample_inputs=example.sample_inputs(batch),
            output_dir=out / folder,
            precision=precision,
            gpu=False,
            tuning=tuning,
            **how,
        )

    for batch in batches:
        build(f"B{batch}", batch)
    build("dynamic", batches[-1], dynamic=True)
    buckets = batches if len(batches) > 1 else None
    if buckets:  # one dynamic build running, at each batch, what was captured for it
        build("bucketed", batches[-1], dynamic=True, buckets=buckets)
    # the forward alone, for serving (bucketed like the one above): no residuals to write
    build("inference", batches[-1], dynamic=True, buckets=buckets, inference=True)
    for names in fuse:  # the same two dynamic builds with other graph-level fusions
        folder = fused_folder(names)
        build(folder, batches[-1], dynamic=True, buckets=buckets, fuse=names)
        build(
            f"{folder}-inference",
            batches[-1],
            dynamic=True,
            buckets=buckets,
            inference=True,
            fuse=names,
        )


def fused_folder(names) -> str:
    """The folder of the training build with fusions `names`: fused-gate_up+bmm_rows, ...;
    "unfused" for none."""
    return "fused-" + "+".join(names) if names else "unfused"


def fused_builds(gpuless: Path) -> list[Path]:
    """The builds --prepare --fuse made in `gpuless` (DIR/fused-NAMES, DIR/unfused and their
    -inference builds), sorted by name."""
    return sorted(
        p
        for pattern in ("fused-*", "unfused*")
        for p in gpuless.glob(pattern)
        if (p / "manifest.json").exists()
    )


def dynamic_kinds(gpuless: Path) -> list[str]:
    """The dynamic GPU-less builds in `gpuless` to check at every batch: the default ones, then each
    of --prepare --fuse."""
    return ["dynamic", "bucketed", "inference", *(p.name for p in fused_builds(gpuless))]


def bad_inputs(directory: Path, batch: int, dynamic: bool) -> dict:
    """Wrong shapes must come back as InvalidArgument (code 1) naming the input, never a crash."""
    import torch

    import pffn as example
    from mirai.export.launch import GeneratedFunction
    from refusals import refusals

    fn = GeneratedFunction(directory)
    good = example.sample_inputs(batch, device="cuda")
    cases = {
        "wrong rank": [good[0][0]] + good[1:],
        "wrong inner dim": [torch.zeros(batch, example.E, example.D + 1, device="cuda")] + good[1:],
        "batch 1" if dynamic else "wrong batch": [good[0][:1] if dynamic else good[0][: batch // 2]]
        + good[1:],
    }
    return refusals(fn, cases)


def _batches(text: str) -> list[int]:
    return [] if text == "none" else [int(b) for b in text.split(",")]


def table(rows) -> str:
    header = ["build", "B", "max rel err"] + NAMES
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        errs = [row["errors"].get(n) for n in NAMES]  # an inference build has no gradients
        worst = max(e for e in errs if e is not None)
        lines.append(
            "| "
            + " | ".join(
                [row["build"], str(row["batch"]), f"{worst:.2e}"]
                + [f"{e:.1e}" if e is not None else "-" for e in errs]
            )
            + " |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="64,2000,8000")
    parser.add_argument(
        "--gpu-batches",
        help="batch sizes to also build on this GPU (default: all of --batches; 'none': none)",
    )
    parser.add_argument(
        "--no-gpu-dynamic", action="store_true", help="no dynamic build on this GPU"
    )
    parser.add_argument("--precision", default="tf32", choices=PRECISIONS)
    parser.add_argument(
        "--gpuless", type=Path, help="folder of GPU-less builds (B64/, B2000/, ...)"
    )
    parser.add_argument("--prepare", type=Path, help="only make GPU-less builds into this folder")
    parser.add_argument(
        "--tuning", type=Path, help="with --prepare: build with this table (mirai tune)"
    )
    parser.add_argument(
        "--fuse",
        action="append",
        default=[],
        type=fusions.parse,
        help="with --prepare: also make a training and an inference build with these fusions "
        "(a comma list, e.g. gate_up,bmm_rows: DIR/fused-gate_up+bmm_rows and "
        "DIR/fused-gate_up+bmm_rows-inference; none: DIR/unfused and DIR/unfused-inference); "
        "repeatable",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/mirai-gpu-check"))
    parser.add_argument("--results", type=Path, default=ROOT / "tests" / "gpu" / "results")
    args = parser.parse_args(argv)
    batches = _batches(args.batches)
    if args.tuning and not args.prepare:
        parser.error("--tuning is for --prepare (GPU-less builds); builds on a GPU measure")
    if args.prepare:
        prepare(args.prepare, batches, args.precision, args.tuning, tuple(args.fuse))
        return 0

    import torch

    if not torch.cuda.is_available():
        print(
            "check_pffn: no CUDA device; use --prepare on a machine without a GPU", file=sys.stderr
        )
        return 2
    rows = []
    gpu_batches = batches if args.gpu_batches is None else _batches(args.gpu_batches)
    for batch in batches:
        out = args.work / f"gpu-B{batch}"
        if batch in gpu_batches:
            seconds = build_on_gpu(batch, out, args.precision)
            rows.append(
                {
                    "build": "gpu",
                    "batch": batch,
                    "build_seconds": round(seconds, 1),
                    "errors": check_dir(out, batch, seed=100 + batch),
                    "tolerance": dir_tolerance(out),
                }
            )
            print(table(rows[-1:]), flush=True)
        if args.gpuless:
            gdir = args.gpuless / f"B{batch}"
            if gdir.exists():
                rows.append(
                    {
                        "build": "gpuless",
                        "batch": batch,
                        "errors": check_dir(gdir, batch, seed=100 + batch),
                        "tolerance": dir_tolerance(gdir),
                    }
                )
                print(table(rows[-1:]), flush=True)
    dynamic_dir = args.work / "gpu-dynamic"
    if not args.no_gpu_dynamic:
        build_on_gpu(batches[-1], dynamic_dir, args.precision, dynamic=True)
    for batch in batches:
        if not args.no_gpu_dynamic:
            rows.append(
                {
                    "build": "gpu dynamic",
                    "batch": batch,
                    "errors": check_dir(dynamic_dir, batch, seed=200 + batch),
                    "tolerance": dir_tolerance(dynamic_dir),
                }
            )
            print(table(rows[-1:]), flush=True)
        for kind in dynamic_kinds(args.gpuless) if args.gpuless else ():
            folder = args.gpuless / kind
            if folder.exists():
                rows.append(
                    {
                        "build": f"gpuless {kind}",
                        "batch": batch,
                        "errors": check_dir(folder, batch, seed=200 + batch),
                        "tolerance": dir_tolerance(folder),
                    }
                )
                print(table(rows[-1:]), flush=True)
    # wrong inputs, to a static and a dynamic build (made here, else the GPU-less ones)
    static_dir = args.work / f"gpu-B{gpu_batches[0]}" if gpu_batches else None
    static_batch = gpu_batches[0] if gpu_batches else batches[0]
    if static_dir is None and args.gpuless:
        static_dir = args.gpuless / f"B{static_batch}"
    if args.no_gpu_dynamic and args.gpuless:
        dynamic_dir = args.gpuless / "dynamic"
    refused = {
        "static": bad_inputs(static_dir, static_batch, dynamic=False),
        "dynamic": bad_inputs(dynamic_dir, batches[0], dynamic=True),
    }
    print(json.dumps(refused, indent=2))
    tol = max(r["tolerance"] for r in rows)
    ok = all(max(r["errors"].values()) <= r["tolerance"] for r in rows) and all(
        v.startswith("code 1:") for cases in refused.values() for v in cases.values()
    )
    report = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "precision": args.precision,
        "tolerance": tol,
        "passed": ok,
        "rows": rows,
        "bad_inputs": refused,
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "check_pffn.json").write_text(json.dumps(report, indent=2) + "\n")
    text = (
        f"# pffn GPU check\n\n{report['device']}, torch {report['torch']}, {args.precision}, "
        f"relative error by norm against float64 PyTorch; tolerance {tol:g}: "
        f"{'PASSED' if ok else 'FAILED'}\n\n{table(rows)}\n\n"
        "Wrong inputs to the generated launch code (each must be InvalidArgument, code 1):\n\n"
        + "\n".join(
            f"- {kind}, {case}: {result}"
            for kind, cases in refused.items()
            for case, result in cases.items()
        )
        + "\n"
    )
    (args.results / "check_pffn.md").write_text(text)
    print(text)
    out_dir = os.environ.get("OUT")
    if out_dir:
        (Path(out_dir) / "check_pffn.md").write_text(text)
        (Path(out_dir) / "check_pffn.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
