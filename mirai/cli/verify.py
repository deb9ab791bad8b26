"""`mirai verify`: run generated ops against PyTorch eager, on this GPU or on the CPU driver.

    mirai verify examples/pffn_dynamic.py --generated generated --batches 64,2000,8000
    mirai verify --cpu generated --batches 3,17

FILE is the file the ops were built from: it defines MIRAI_BUILD = {"op", "sample_inputs"}, or a
SUITE of entries {name: (op, sample_inputs(batch), ...)} of which --function picks one. Given the
generated folder instead, the file is the one its manifest names and the entry is the one whose op
has the build's name. For a dynamic build every --batches size is checked; a static build is checked
at its own shapes. Prints a table of relative errors (forward outputs and every gradient) against the
function in float64; exit status 1 if one exceeds the tolerance.

--cpu runs the generated launch code unchanged on a CPU stand-in for the CUDA driver, which runs
each launched kernel's Triton source in Triton's interpreter: slow, so use small batches.

--jax runs the ops through the folder's JAX API (its XLA FFI handlers, built with --framework jax)
under jax.jit and jax.vjp, instead of through their C interface; with --cpu, on XLA's CPU platform
over the same stand-in.

    mirai verify --cpu --jax generated --batches 3,17
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mirai.cli.usermodule import load_user_module
from mirai.errors import MiraiError


def register(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="check generated ops against PyTorch eager (on a GPU, or --cpu)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="the Python file the ops were built from, or the generated folder")
    p.add_argument("--generated", "-g", help="the generated folder (default: generated)")
    p.add_argument("--function", help="entry of the file's SUITE to verify")
    p.add_argument("--batches", default="", help="batch sizes for a dynamic build, e.g. 64,2000")
    p.add_argument(
        "--cpu", action="store_true", help="run on the CPU driver (Triton's interpreter), no GPU"
    )
    p.add_argument(
        "--jax",
        action="store_true",
        help="through the folder's JAX API (XLA FFI handlers, jax.jit) instead of its C interface",
    )
    p.set_defaults(func=run)


def _reference(args):
    """The build's folder, its @mirai.op function and sample inputs."""
    target = Path(args.file)
    if not target.exists():
        raise MiraiError(f"no such file or folder: {target}")
    if target.is_dir():
        if args.generated:
            raise MiraiError("give the generated folder once: as FILE or as --generated")
        directory = target
        source = _manifest(directory).get("source") or {}
        if not source.get("file"):
            raise MiraiError(
                f"{directory}/manifest.json does not say which file the build came from: "
                "run `mirai verify FILE --generated DIR`"
            )
        target = Path(source["file"])
    else:
        directory = Path(args.generated or "generated")
    name = _manifest(directory)["name"]
    module = load_user_module(target)
    suite = getattr(module, "SUITE", {})
    if args.function:
        if args.function not in suite:
            raise MiraiError(f"{target} has no SUITE entry {args.function!r}")
        return directory, suite[args.function][0], suite[args.function][1]
    spec = getattr(module, "MIRAI_BUILD", None)
    candidates = [(spec["op"], spec["sample_inputs"])] if isinstance(spec, dict) else []
    candidates += [(entry[0], entry[1]) for entry in suite.values()]
    for op, samples in candidates:
        for built in (op, op.for_inference()):  # a build of the op, or its inference build
            if built.name == name:
                return directory, built, samples
    raise MiraiError(
        f"{target} has no MIRAI_BUILD or SUITE entry for the op {name!r} built in {directory}; "
        "name a SUITE entry with --function"
    )


def _manifest(directory: Path) -> dict:
    path = directory / "manifest.json"
    if not path.is_file():
        raise MiraiError(f"{directory} is not a generated folder (it has no manifest.json)")
    return json.loads(path.read_text())


def run(args) -> int:
    from mirai.export.verify import table, verify

    directory, op, samples = _reference(args)
    try:
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
    except ValueError:
        raise MiraiError(f"--batches takes integers, e.g. 3,17; got {args.batches!r}") from None
    runner = None
    if args.jax:
        if args.cpu:
            from mirai.export.frameworks.jax_cpu import JaxHostRunner

            runner = JaxHostRunner()
        else:
            from mirai.export.frameworks.jax_run import JaxGpuRunner

            runner = JaxGpuRunner()
    try:
        device = "cpu" if args.cpu else "cuda"
        rows = verify(op, samples, directory, batches, device=device, runner=runner)
    finally:
        if runner is not None:
            runner.close()
    where = "the CPU driver (Triton's interpreter)" if args.cpu else "this GPU"
    where += ", through JAX" if args.jax else ""
    print(f"{op.name} from {directory}, on {where}:")
    print(table(rows))
    return 0 if all(r.ok for r in rows) else 1
