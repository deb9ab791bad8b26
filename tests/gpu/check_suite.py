"""GPU check of the export breadth: every function of examples/suite.py, verified like `mirai verify`.

On a CUDA machine (one command, from the repository root):

    python tests/gpu/check_suite.py                     # build on this GPU, then verify
    python tests/gpu/check_suite.py --builds gpuless/   # verify builds made elsewhere (GPU-less)

On a machine without a GPU, make those builds to carry over:

    python tests/gpu/check_suite.py --prepare gpuless/

Tune once on the GPU, then build anywhere with what it measured (mirai.export.tuning):

    python tests/gpu/check_suite.py --tune TABLES --batches 1024,65536      # on the GPU
    python tests/gpu/check_suite.py --prepare gpuless/ --dynamic-only --buckets 1024,65536 \
        --tuning TABLES                                                    # anywhere

`--inference` adds DIR/<function>/inference, the forward alone (`mirai.build(..., inference=True)`,
dynamic, bucketed like the dynamic build), checked on its outputs. `--tune DIR` writes one tuning
table per function, DIR/<function>.json (kernel names repeat across
functions, so one table each); `--tuning DIR` builds each function with its own table where DIR
has one. `--buckets` makes the dynamic builds bucketed (mirai.export.buckets): captured once per
bucket, each batch running the kernels of its nearest bucket, instead of the choices of one sample.

Each function is built static at every batch size of --batches and dynamic once; a GPU-less
preparation also adds a dynamic build for --ptx-target alone, whose cubins do not fit a newer GPU, so
the driver compiles its PTX (the fallback path). Every build is run through the generated launch code
(forward and every gradient) against the function in float64 PyTorch (`mirai.export.verify`): static builds
at their own shapes, dynamic ones at every batch size. The table records which binary each build's
kernels loaded on this GPU. Wrong shapes are checked to come back as InvalidArgument. Results go to
--results as JSON and Markdown; exit status 1 if any error exceeds its precision's tolerance.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from mirai.gpu import precision  # noqa: E402
from mirai.export import launch  # noqa: E402
from mirai.export.verify import PEER_FACTOR  # noqa: E402


@dataclass
class Plan:
    """Which builds to make or verify."""

    batches: list[int]
    targets: str = "sm_80,sm_90"
    ptx_target: str | None = "sm_80"
    functions: list[str] | None = None  # default: the whole suite
    precision: str = precision.DEFAULT
    dynamic_only: bool = False
    buckets: list[int] | None = None  # dynamic builds bucketed at these batches
    tuning: Path | None = None  # DIR/<function>.json: tuning tables for GPU-less builds
    inference: bool = False  # also a dynamic inference build per function (the forward alone)

    def builds(self):
        """(function, kind, output folder name, batch, dynamic, target) for every build."""
        from suite import SUITE

        last = self.batches[-1]
        for name in self.functions or SUITE:
            if not self.dynamic_only:
                for batch in self.batches:
                    yield name, "static", f"{name}/static-B{batch}", batch, False, self.targets
            yield name, "dynamic", f"{name}/dynamic", last, True, self.targets
            if self.ptx_target:
                kind = f"dynamic, {self.ptx_target} only"
                yield name, kind, f"{name}/ptx", last, True, self.ptx_target
            if self.inference:
                yield name, "inference", f"{name}/inference", last, True, self.targets


def make_builds(out: Path, plan: Plan, gpu: bool) -> None:
    import mirai
    from suite import SUITE

    for name, kind, folder, batch, dynamic, target in plan.builds():
        fn, samples, _ = SUITE[name]
        table = plan.tuning / f"{name}.json" if plan.tuning else None
        t = time.perf_counter()
        mirai.build(
            fn,
            samples(batch),
            output_dir=out / folder,
            dynamic=dynamic,
            buckets=plan.buckets if dynamic else None,
            inference=kind == "inference",
            tuning=table if table is not None and table.exists() else None,
            target=target,
            precision=plan.precision,
            gpu=gpu,
            progress=False,
        )
        print(f"built {folder} ({kind}) in {time.perf_counter() - t:.1f}s", flush=True)


def tune_suite(out: Path, plan: Plan) -> None:
    """On this GPU: one tuning table per function, `out/<function>.json`, measured at every batch
    of the plan, for its inference build too with `plan.inference` (an existing table keeps its
    other entries)."""
    from mirai.export.tuning import TuningTable, tune
    from suite import SUITE

    out.mkdir(parents=True, exist_ok=True)
    for name in plan.functions or SUITE:
        fn, samples, _ = SUITE[name]
        t = time.perf_counter()
        table = None
        for op in (fn, fn.for_inference()) if plan.inference else (fn,):
            found = tune(
                op,
                {f"batch {b}": samples(b) for b in plan.batches},
                precision=plan.precision,
                progress=False,
            )
            table = found if table is None else table.merged(found)
        path = out / f"{name}.json"
        if path.exists():
            table = TuningTable.load(path).merged(table)
        table.save(path)
        print(
            f"tuned {name}: {len(table.kernels)} kernel configurations, {len(table.gemms)} GEMMs "
            f"in {time.perf_counter() - t:.1f}s",
            flush=True,
        )


def loaded_binaries(directory: Path, cc: int) -> str:
    """What this GPU loads for the build's kernels, e.g. "cubin sm_90a" or "PTX sm_80"."""
    from mirai.export.launch import GeneratedFunction

    fn = GeneratedFunction(directory)
    ops = [fn.forward] + ([fn.backward] if fn.backward is not None else [])
    choices = {c or "none" for op in ops for c in op.binaries(cc).values()}
    return ", ".join(sorted(choices))


def bad_inputs(directory: Path, samples, batch: int, dynamic: bool) -> dict:
    """Wrong rank and wrong sizes must come back as InvalidArgument (code 1), never a crash."""
    import torch

    from mirai.export.launch import GeneratedFunction
    from refusals import refusals

    fn = GeneratedFunction(directory)
    dtypes = [getattr(torch, i["dtype"]) for i in fn.forward.spec["inputs"]]
    good = [t.to("cuda", dtype) for t, dtype in zip(samples(batch), dtypes)]
    first = good[0]
    cases = {
        "wrong rank": [first[0]] + good[1:],
        "wrong inner dim": [torch.cat([first, first[:, :1]], dim=1)] + good[1:],
    }
    if dynamic:
        cases["batch 1 (built for >= 2)"] = [first[:1]] + good[1:]
    else:
        cases["wrong batch"] = [first[: batch // 2]] + good[1:]
    return refusals(fn, cases)


def verify_builds(root: Path, plan: Plan) -> dict:
    import torch

    from mirai.export.verify import verify
    from suite import SUITE

    major, minor = torch.cuda.get_device_capability()
    cc = major * 10 + minor
    builds = list(plan.builds())
    launch.build_interfaces([root / b[2] for b in builds if (root / b[2]).exists()])
    batches = plan.batches
    results = []
    for name, kind, folder, batch, dynamic, _ in builds:
        directory = root / folder
        if not directory.exists():
            continue
        fn, samples, _ = SUITE[name]
        t = time.perf_counter()
        checked = fn.for_inference() if kind == "inference" else fn
        rows = verify(checked, samples, directory, batches=batches if dynamic else None)
        manifest = json.loads((directory / "manifest.json").read_text())
        result = {
            "function": name,
            "build": kind,
            "targets": manifest["targets"],
            "origin": manifest["origin"],
            "built_with": ", ".join(f"{k} {v}" for k, v in sorted(manifest["versions"].items())),
            "precision": manifest["precision"],
            "loaded": loaded_binaries(directory, cc),
            "rows": [
                {"batch": r.batch, "tensor": r.name, "error": r.error, "tolerance": r.tolerance}
                for r in rows
            ],
            "ok": all(r.ok for r in rows),
            "seconds": round(time.perf_counter() - t, 2),
        }
        if kind in ("dynamic", "static") and batch == batches[-1]:
            result["bad_inputs"] = bad_inputs(directory, samples, batch, dynamic)
            result["ok"] = result["ok"] and all(
                v.startswith("code 1:") for v in result["bad_inputs"].values()
            )
        results.append(result)
        worst = max((r["error"] for r in result["rows"]), default=0.0)
        print(
            f"{'ok ' if result['ok'] else 'BAD'} {folder:32} {kind:22} {result['loaded']:28} "
            f"max rel err {worst:.2e}",
            flush=True,
        )
    return {
        "device": torch.cuda.get_device_name(),
        "compute_capability": f"{major}.{minor}",
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "python": platform.python_version(),
        "precision": plan.precision,
        "batches": batches,
        "results": results,
    }


def markdown(report: dict) -> str:
    lines = [
        f"# GPU check: examples/suite.py through the generated launch code "
        f"({report.get('precision', 'tf32')})",
        "",
        f"Device: {report['device']} (compute capability {report['compute_capability']}), "
        f"torch {report['torch']}, triton {report['triton']}. Command: "
        "`python tests/gpu/check_suite.py --builds <GPU-less builds>`.",
        "",
        "Relative error by norm against the function in float64 PyTorch, over the forward outputs "
        "and every gradient; static builds at their own batch, dynamic builds at every batch size. "
        "Each row shows the tensor nearest its tolerance. Tolerances follow what the matmuls "
        "compute (mirai.export.verify): 1e-4 for IEEE fp32; for TF32 GEMMs 1e-2, or "
        f"{PEER_FACTOR:g}x the error of PyTorch itself computing the function with TF32 matmuls on "
        "the same inputs where that is larger (their operands cut to TF32 as a TF32 kernel reads "
        "them: mirai.gpu.tf32).",
        "",
        "Builds captured "
        + "; ".join(sorted({f"{r['origin']} with {r['built_with']}" for r in report["results"]}))
        + ".",
        "",
        "| function | build | targets | loaded on this GPU | batches | tensors | max rel err "
        "| tolerance | ok |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        batches = sorted({row["batch"] for row in r["rows"]})
        tensors = len({row["tensor"] for row in r["rows"]})
        # the tensor closest to (or furthest past) its tolerance
        row = max(r["rows"], key=lambda x: x["error"] / x["tolerance"], default=None)
        worst = row["error"] if row else 0.0
        tol = f"{row['tolerance']:.3g}" if row else ""
        lines.append(
            f"| {r['function']} | {r['build']} | {', '.join(r['targets'])} | {r['loaded']} | "
            f"{', '.join(map(str, batches))} | {tensors} | {worst:.2e} | {tol} | "
            f"{'yes' if r['ok'] else 'NO'} |"
        )
    bad = [r for r in report["results"] if "bad_inputs" in r]
    if bad:
        lines += ["", "Wrong inputs (each must be InvalidArgument, code 1):", ""]
        lines += ["| function | build | case | result |", "|---|---|---|---|"]
        for r in bad:
            for case, text in r["bad_inputs"].items():
                lines.append(f"| {r['function']} | {r['build']} | {case} | {text} |")
    passed = sum(r["ok"] for r in report["results"])
    lines += ["", f"{passed} of {len(report['results'])} builds pass.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="3,40,1037", help="batch sizes (static and dynamic)")
    parser.add_argument("--targets", default="sm_80,sm_90", help="targets of GPU-less builds")
    parser.add_argument(
        "--ptx-target", default="sm_80", help="a target whose PTX this GPU must JIT ('' for none)"
    )
    parser.add_argument("--functions", default="", help="suite entries to check (default: all)")
    parser.add_argument("--precision", default=precision.DEFAULT, choices=precision.names())
    parser.add_argument("--dynamic-only", action="store_true", help="no static builds")
    parser.add_argument("--prepare", type=Path, help="only make GPU-less builds into this folder")
    parser.add_argument("--builds", type=Path, help="verify the builds in this folder")
    parser.add_argument("--buckets", default="", help="bucket the dynamic builds, e.g. 1024,65536")
    parser.add_argument("--tuning", type=Path, help="DIR/<function>.json tables for --prepare")
    parser.add_argument("--tune", type=Path, help="on a GPU: write DIR/<function>.json tables")
    parser.add_argument(
        "--inference", action="store_true", help="also an inference build per function"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/mirai-suite-check"))
    parser.add_argument(
        "--results",
        type=Path,
        help="results path without suffix (default: tests/gpu/results/"
        "check_suite, with _<precision> for other precisions than tf32)",
    )
    args = parser.parse_args(argv)
    try:
        buckets = [int(b) for b in args.buckets.split(",") if b.strip()] or None
    except ValueError:
        parser.error(f"--buckets takes batch sizes separated by commas, not {args.buckets!r}")
    plan = Plan(
        batches=[int(b) for b in args.batches.split(",")],
        targets=args.targets,
        ptx_target=args.ptx_target or None,
        functions=[f.strip() for f in args.functions.split(",") if f.strip()] or None,
        precision=args.precision,
        dynamic_only=args.dynamic_only,
        buckets=buckets,
        tuning=args.tuning,
        inference=args.inference,
    )
    unknown = set(plan.functions or []) - set(__import__("suite").SUITE)
    if unknown:
        parser.error(f"not in examples/suite.py: {', '.join(sorted(unknown))}")
    if args.tuning is not None and not args.tuning.is_dir():
        parser.error(f"--tuning {args.tuning}: no such folder of tables")
    if args.prepare:
        make_builds(args.prepare, plan, gpu=False)
        return 0

    import torch

    if not torch.cuda.is_available():
        print("check_suite: no CUDA device; use --prepare without a GPU", file=sys.stderr)
        return 2
    if args.tune:
        tune_suite(args.tune, plan)
        return 0
    if args.builds is None:
        major, minor = torch.cuda.get_device_capability()
        plan.targets, plan.ptx_target = f"sm_{major}{minor}", None
        make_builds(args.work, plan, gpu=True)
        args.builds = args.work
    report = verify_builds(args.builds, plan)
    suffix = "" if plan.precision == precision.DEFAULT else f"_{plan.precision}"
    results = args.results or ROOT / "tests" / "gpu" / "results" / f"check_suite{suffix}"
    results.parent.mkdir(parents=True, exist_ok=True)
    results.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    results.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0 if report["results"] and all(r["ok"] for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
