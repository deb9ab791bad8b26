"""`mirai tune FILE`: measure once, on a GPU, what GPU-less builds of FILE's op should choose.

Captures the op on this machine's GPU at each batch size asked for: torch.compile's max-autotune
times every GEMM as cuBLAS and as Triton templates, and each kernel's candidate configurations. Where
it kept templates, the op is built again with every GEMM in cuBLAS and both are timed whole, in
rounds: a graph keeps its templates only if its op ran faster with them in every round
(--no-op-check skips this). What won is written as a tuning table (mirai.export.tuning); `mirai build --tuning FILE`, on any machine,
then builds GPU-less with those choices.

    mirai tune examples/pffn.py --batches 64,512,2000,8000 --output pffn-tuning.json
    mirai build examples/pffn.py --tuning pffn-tuning.json --output-dir generated
    mirai tune examples/pffn.py --inference --batches 512,8000 --output pffn-tuning.json
    mirai build examples/pffn.py --inference --tuning pffn-tuning.json --output-dir serving
"""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

from mirai.cli.usermodule import load_user_module
from mirai.errors import MiraiError
from mirai.export import fusions
from mirai.export.capture.inductor import GEMM_POLICIES
from mirai.gpu import precision


def register(sub) -> None:
    p = sub.add_parser(
        "tune",
        help="autotune an op on a GPU and write a tuning table for GPU-less builds",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="Python file defining MIRAI_BUILD")
    p.add_argument(
        "--output",
        "-o",
        required=True,
        help="the tuning table to write (JSON); an existing one for the same target and "
        "precision keeps its entries, and gains these",
    )
    p.add_argument(
        "--batches",
        default=None,
        help="batch sizes to tune at, e.g. 64,512,8000; MIRAI_BUILD's sample_inputs must then be "
        "a function of the batch (default: its samples as they are)",
    )
    p.add_argument(
        "--builds",
        default=None,
        metavar="DIR",
        help="also write each GPU build: DIR/B<batch> (or DIR/samples), as mirai build would",
    )
    p.add_argument(
        "--inference",
        action="store_true",
        help="tune the op's inference build (mirai build --inference: the forward alone, which "
        "writes no residuals); its kernels get entries of their own beside the training op's",
    )
    fusions.add_option(p, "as mirai build's: tune what it will build")
    p.add_argument("--target", default="sm_90", help="the target builds will name (default: sm_90)")
    p.add_argument("--precision", default=None, choices=precision.names())
    p.add_argument("--gemm", default=None, choices=tuple(GEMM_POLICIES))
    p.add_argument(
        "--no-op-check",
        dest="op_check",
        action="store_false",
        help="keep every template autotuning chose, without timing the whole op against a "
        "cuBLAS-only build",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    p.set_defaults(func=run)


def samples_by_batch(samples, batches: str | None, path: Path) -> dict:
    """{label: sample inputs}: the module's samples called at each batch, or taken as they are."""
    if batches is None:
        return {"its samples": samples() if callable(samples) else samples}
    try:
        sizes = [int(b) for b in batches.split(",") if b.strip()]
    except ValueError:
        raise MiraiError(f"--batches takes integers separated by commas, not {batches!r}") from None
    if not sizes or min(sizes) < 1:
        raise MiraiError(f"--batches needs positive batch sizes, not {batches!r}")
    takes_batch = callable(samples) and any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        for p in inspect.signature(samples).parameters.values()
    )
    if not takes_batch:
        raise MiraiError(
            f"--batches needs {path}'s MIRAI_BUILD['sample_inputs'] to be a function of the batch "
            "size (like examples/pffn.py's sample_inputs)"
        )
    return {f"batch {b}": samples(b) for b in sizes}


def build_folders(samples: dict, builds: str | None) -> dict | None:
    """{label: DIR/B<batch>} ("batch 64" -> DIR/B64; the module's own samples -> DIR/samples)."""
    if builds is None:
        return None
    return {
        label: Path(builds) / (f"B{label.split()[-1]}" if label.startswith("batch ") else "samples")
        for label in samples
    }


def run(args) -> int:
    from mirai.export.tuning import TuningTable, tune

    path = Path(args.file)
    spec = getattr(load_user_module(path), "MIRAI_BUILD", None)
    if not isinstance(spec, dict) or "op" not in spec:
        raise MiraiError(f"{path} defines no MIRAI_BUILD = {{'op': fn, 'sample_inputs': ...}}")
    samples = samples_by_batch(spec.get("sample_inputs"), args.batches, path)
    table = tune(
        spec["op"].for_inference() if args.inference else spec["op"],
        samples,
        target=args.target,
        precision=args.precision or spec.get("precision"),
        gemm=args.gemm or spec.get("gemm"),
        fuse=args.fuse if args.fuse is not None else spec.get("fuse"),
        builds=build_folders(samples, args.builds),
        op_check=args.op_check,
        progress=not args.quiet,
    )
    if Path(args.output).exists():
        table = TuningTable.load(args.output).merged(table)
    out = table.save(args.output)
    print(f"{len(table.kernels)} kernel configurations and {len(table.gemms)} GEMMs in {out}")
    return 0
