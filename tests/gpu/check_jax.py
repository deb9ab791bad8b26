"""GPU check of the JAX front end: pffn and examples/suite.py through their XLA FFI handlers.

On a machine without a GPU, make GPU-less builds with the JAX front end to carry over:

    python tests/gpu/check_jax.py --prepare jax-builds/

On the CUDA machine (jax with its CUDA plugin, torch, g++; from the repository root):

    python tests/gpu/check_jax.py --builds jax-builds/   # check the carried builds
    python tests/gpu/check_jax.py                        # or build on this GPU first, then check

Each folder's handlers are compiled there with its build_jax.sh (g++ and jax.ffi.include_dir()
only), its <name>_jax.py is imported and registered for CUDA, and the function runs under jax.jit:
forward, and forward with jax.vjp. Outputs and every gradient are compared with the function in
float64 PyTorch by mirai.export.verify (relative error by norm, the tolerance of what the matmuls
compute; inputs checked unchanged after every call): static builds at their own batch, dynamic
builds at every batch. pffn (E=8, D=256, H=1024) is built static at each of --pffn-batches and
dynamic once; every suite function static at B=40 and dynamic. Wrong inputs must be refused:
at trace time by the Python API (TypeError, ValueError), and past it, in the handler, as XLA's
INVALID_ARGUMENT. Results go to tests/gpu/results/check_jax.{json,md} (and $OUT); exit status 1
if anything fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# before jax is imported: torch shares the GPU, and some suite functions take int64 inputs
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("JAX_ENABLE_X64", "1")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from mirai.gpu import precision  # noqa: E402

PFFN_BATCHES = "64,512,2000,8000"
SUITE_BATCHES = "3,40,1037"
SUITE_BUILD_BATCH = 40


@dataclass(frozen=True)
class Build:
    """One build to make or check: its folder (relative), function, samples and batches."""

    folder: str
    function: str  # "pffn" or a key of examples/suite.py's SUITE
    batch: int  # what it is built at
    dynamic: bool
    check_at: tuple[int, ...]

    @property
    def kind(self) -> str:
        return "dynamic" if self.dynamic else "static"


def plan(pffn_batches, suite_batches, functions) -> list[Build]:
    builds = [Build(f"pffn/static-B{b}", "pffn", b, False, (b,)) for b in pffn_batches]
    if pffn_batches:
        last = pffn_batches[-1]
        builds.append(Build("pffn/dynamic", "pffn", last, True, tuple(pffn_batches)))
    for name in functions:
        builds.append(Build(f"{name}/static", name, SUITE_BUILD_BATCH, False, (SUITE_BUILD_BATCH,)))
        builds.append(Build(f"{name}/dynamic", name, SUITE_BUILD_BATCH, True, tuple(suite_batches)))
    return builds


def function_of(name: str):
    """(the @mirai.op function, samples of a batch size)."""
    if name == "pffn":
        import pffn as example

        return example.pffn, example.sample_inputs
    from suite import SUITE

    fn, samples, _ = SUITE[name]
    return fn, samples


def make_builds(root: Path, builds: list[Build], precision_mode: str, gpu: bool) -> None:
    import mirai

    for b in builds:
        fn, samples = function_of(b.function)
        t = time.perf_counter()
        mirai.build(
            fn,
            samples(b.batch),
            output_dir=root / b.folder,
            dynamic=b.dynamic,
            precision=precision_mode,
            gpu=gpu,
            progress=False,
            frameworks=("tf", "jax"),
        )
        print(f"built {b.folder} in {time.perf_counter() - t:.1f}s", flush=True)


def compile_handlers(root: Path, builds: list[Build]) -> None:
    """Every folder's build_jax.sh (g++ with jaxlib's headers), several at once."""
    from mirai.export.frameworks import jax_ffi

    folders = [root / b.folder for b in builds if (root / b.folder / "manifest.json").exists()]
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 2)) as pool:
        list(pool.map(jax_ffi.build, folders))
    print(
        f"compiled the XLA FFI handlers of {len(folders)} builds in {time.perf_counter() - t:.1f}s"
    )


def refusals(directory: Path, build: Build) -> dict:
    """Wrong inputs: at trace time (the Python API) and in the handler (XLA's INVALID_ARGUMENT)."""
    import jax
    import torch

    from mirai.export.frameworks import jax_ffi
    from mirai.export.frameworks.jax_run import to_jax
    from mirai.export.plan import py_op_name

    _, samples = function_of(build.function)
    api = jax_ffi.load(directory)
    function = getattr(
        api, py_op_name(json.loads((directory / "manifest.json").read_text())["name"])
    )
    good = [t.contiguous() for t in samples(build.batch)]
    specs = [jax.ShapeDtypeStruct(tuple(t.shape), str(t.dtype).split(".")[-1]) for t in good]
    first = specs[0]
    cases = {
        "wrong inner dim": [
            jax.ShapeDtypeStruct(first.shape[:-1] + (first.shape[-1] + 1,), first.dtype)
        ]
        + specs[1:],
        "wrong rank": [jax.ShapeDtypeStruct(first.shape[1:], first.dtype)] + specs[1:],
        "wrong dtype": [
            jax.ShapeDtypeStruct(
                first.shape, "int32" if first.dtype != jax.numpy.int32 else "float32"
            )
        ]
        + specs[1:],
    }
    seen = {}
    for case, args in cases.items():
        try:
            jax.eval_shape(function, *args)
            seen[f"trace: {case}"] = "accepted"
        except (TypeError, ValueError) as err:
            seen[f"trace: {case}"] = f"{type(err).__name__}: {err}"
    # past the Python checks: the handler's own check of a wrong inner dimension
    results = [
        jax.ShapeDtypeStruct(s.shape, s.dtype)
        for s in jax.eval_shape(lambda *a: api._FWD(*a), *specs)
    ]
    bad = torch.cat([good[0], good[0][..., :1]], dim=-1)
    args = [to_jax(bad)] + [to_jax(t) for t in good[1:]]
    try:
        jax.block_until_ready(jax.ffi.ffi_call(api._FWD.target, results)(*args))
        seen["handler: wrong inner dim"] = "accepted"
    except RuntimeError as err:  # jax.errors.JaxRuntimeError, raised from XLA
        seen["handler: wrong inner dim"] = str(err).splitlines()[0]
    return seen


def refused_well(seen: dict) -> bool:
    return all(
        (
            v.startswith(("TypeError", "ValueError"))
            if k.startswith("trace")
            else v.startswith("INVALID_ARGUMENT")
        )
        for k, v in seen.items()
    )


def check(root: Path, builds: list[Build]) -> dict:
    import jax
    import torch

    from mirai.export.frameworks.jax_run import JaxGpuRunner
    from mirai.export.verify import verify

    from bench_jax import use_cublaslt  # bench/bench_jax.py

    compile_handlers(root, builds)
    use_cublaslt()
    runner = JaxGpuRunner()
    results = []
    for b in builds:
        directory = root / b.folder
        if not (directory / "manifest.json").exists():
            continue
        fn, samples = function_of(b.function)
        t = time.perf_counter()
        rows = verify(
            fn,
            samples,
            directory,
            batches=list(b.check_at) if b.dynamic else None,
            device="cuda",
            runner=runner,
        )
        manifest = json.loads((directory / "manifest.json").read_text())
        result = {
            "function": b.function,
            "build": b.kind,
            "folder": b.folder,
            "origin": manifest["origin"],
            "precision": manifest["precision"],
            "rows": [
                {"batch": r.batch, "tensor": r.name, "error": r.error, "tolerance": r.tolerance}
                for r in rows
            ],
            "ok": bool(rows) and all(r.ok for r in rows),
            "seconds": round(time.perf_counter() - t, 2),
        }
        if b.function == "pffn" or b.batch == SUITE_BUILD_BATCH:
            result["refusals"] = refusals(directory, b)
            result["ok"] = result["ok"] and refused_well(result["refusals"])
        results.append(result)
        worst = max(rows, key=lambda r: r.error / r.tolerance, default=None)
        print(
            f"{'ok ' if result['ok'] else 'BAD'} {b.folder:30} "
            + (f"max rel err {worst.error:.2e} (tol {worst.tolerance:g})" if worst else "no rows"),
            flush=True,
        )
    return {
        "device": torch.cuda.get_device_name(),
        "jax_device": str(jax.devices()[0].device_kind),
        "jax": jax.__version__,
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "python": platform.python_version(),
        "results": results,
    }


def markdown(report: dict) -> str:
    lines = [
        "# GPU check: pffn and examples/suite.py through the JAX front end (XLA FFI)",
        "",
        f"{report['device']} (jax: {report['jax_device']}), jax {report['jax']}, torch "
        f"{report['torch']}, triton {report['triton']}, Python {report['python']}. Command: "
        "`python tests/gpu/check_jax.py --builds <builds>`.",
        "",
        "jax.jit of the function and of jax.vjp, through the generated XLA FFI handlers; relative "
        "error by norm against the function in float64 PyTorch (mirai.export.verify), the worst "
        "tensor of each build.",
        "",
        "Builds captured "
        + "; ".join(sorted({f"{r['origin']} ({r['precision']})" for r in report["results"]}))
        + ".",
        "",
        "| function | build | batches | tensors | max rel err | tolerance | s | ok |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        batches = sorted({row["batch"] for row in r["rows"]})
        tensors = len({row["tensor"] for row in r["rows"]})
        row = max(r["rows"], key=lambda x: x["error"] / x["tolerance"], default=None)
        lines.append(
            f"| {r['function']} | {r['build']} | {', '.join(map(str, batches))} | {tensors} | "
            f"{row['error'] if row else 0:.2e} | {row['tolerance'] if row else 0:.3g} | "
            f"{r['seconds']} | {'yes' if r['ok'] else 'NO'} |"
        )
    refused = [r for r in report["results"] if "refusals" in r]
    if refused:
        lines += [
            "",
            "Wrong inputs (trace: TypeError/ValueError from the Python API; handler: XLA's "
            "INVALID_ARGUMENT from the launch code's check):",
            "",
            "| function | build | case | result |",
            "|---|---|---|---|",
        ]
        for r in refused:
            for case, text in r["refusals"].items():
                lines.append(f"| {r['function']} | {r['build']} | {case} | {text} |")
    passed = sum(r["ok"] for r in report["results"])
    lines += ["", f"{passed} of {len(report['results'])} builds pass.", ""]
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(b) for b in text.split(",") if b.strip()] if text != "none" else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pffn-batches", default=PFFN_BATCHES, help="pffn's static builds")
    parser.add_argument("--batches", default=SUITE_BATCHES, help="suite dynamic builds' batches")
    parser.add_argument("--functions", default="", help="suite entries (default: all; 'none')")
    parser.add_argument("--precision", default=precision.DEFAULT, choices=precision.names())
    parser.add_argument("--prepare", type=Path, help="only make GPU-less builds into this folder")
    parser.add_argument("--builds", type=Path, help="check the builds in this folder")
    parser.add_argument("--work", type=Path, default=Path("/tmp/mirai-jax-check"))
    parser.add_argument("--results", type=Path, default=ROOT / "tests" / "gpu" / "results")
    args = parser.parse_args(argv)
    from suite import SUITE

    if args.functions == "none":
        functions = []
    else:
        functions = [f.strip() for f in args.functions.split(",") if f.strip()] or list(SUITE)
    unknown = set(functions) - set(SUITE)
    if unknown:
        parser.error(f"not in examples/suite.py: {', '.join(sorted(unknown))}")
    builds = plan(_ints(args.pffn_batches), _ints(args.batches), functions)
    if args.prepare:
        make_builds(args.prepare, builds, args.precision, gpu=False)
        return 0

    import torch

    if not torch.cuda.is_available():
        print("check_jax: no CUDA device; use --prepare without a GPU", file=sys.stderr)
        return 2
    import jax

    if jax.default_backend() != "gpu":
        print(f"check_jax: jax runs on {jax.default_backend()}, not a GPU", file=sys.stderr)
        return 2
    root = args.builds
    if root is None:
        root = args.work
        make_builds(root, builds, args.precision, gpu=True)
    report = check(root, builds)
    args.results.mkdir(parents=True, exist_ok=True)
    text = markdown(report)
    (args.results / "check_jax.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.results / "check_jax.md").write_text(text)
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "check_jax.md").write_text(text)
        (Path(os.environ["OUT"]) / "check_jax.json").write_text(json.dumps(report, indent=2) + "\n")
    print(text)
    return 0 if report["results"] and all(r["ok"] for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
