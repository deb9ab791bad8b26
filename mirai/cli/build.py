"""`mirai build FILE`: export the op that a Python file defines.

The file either calls `mirai.build` itself when run as a script, or defines `MIRAI_BUILD = {"op": fn,
"sample_inputs": list or callable}`; options on the command line override the file's.

    mirai build examples/pffn.py --target sm_90 --output-dir generated
    mirai build examples/pffn_dynamic.py --buckets 64,512,2000,8000 --tuning bench/tuning/pffn-h200-tf32.json
    mirai build examples/pffn.py --inference --output-dir serving   # the forward alone, for serving
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mirai.cli.usermodule import load_user_module
from mirai.errors import MiraiError
from mirai.export.frameworks import FRAMEWORKS
from mirai.export.capture.inductor import DEFAULT_GEMM, GEMM_POLICIES
from mirai.export import fusions
from mirai.gpu import precision


def register(sub) -> None:
    p = sub.add_parser(
        "build",
        help="export a @mirai.op function to TensorFlow ops",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="Python file defining MIRAI_BUILD (or calling mirai.build)")
    p.add_argument(
        "--output-dir", "-o", default="generated", help="where to write (default: generated)"
    )
    p.add_argument(
        "--target",
        default=None,
        help="GPU architectures, e.g. sm_90 or sm_80,sm_90: a cubin for each (default: sm_90)",
    )
    p.add_argument(
        "--precision",
        default=None,
        choices=precision.names(),
        help="; ".join(f"{p.name}: {p.help}" for p in precision.PRECISIONS.values())
        + f" (default: {precision.DEFAULT})",
    )
    p.add_argument(
        "--gemm",
        default=None,
        choices=tuple(GEMM_POLICIES),
        help="; ".join(f"{g.name}: {g.help}" for g in GEMM_POLICIES.values())
        + f" (default: {DEFAULT_GEMM})",
    )
    fusions.add_option(
        p,
        f"{','.join(fusions.defaults('inference'))} with --inference, "
        f"{','.join(fusions.defaults('training'))} otherwise",
    )
    p.add_argument("--dynamic", action="store_true", default=None, help="dynamic batch dimension")
    p.add_argument(
        "--buckets",
        default=None,
        metavar="B,B,...",
        help="with --dynamic: batch sizes to capture at, e.g. 64,512,2000,8000; the op runs the "
        "kernels of the bucket nearest its batch (with --tuning, each bucket takes the table's "
        "choices at its batch)",
    )
    p.add_argument(
        "--inference",
        action="store_true",
        default=None,
        help="export the forward alone, for serving: one op, <Name>InferenceFwd, writing only the "
        "outputs (a training build's forward also writes what its backward reads)",
    )
    p.add_argument(
        "--framework",
        dest="frameworks",
        action="append",
        default=None,
        metavar="NAME",
        help="a front end to generate, repeatable or a comma list: "
        + "; ".join(f"{f.name}: {f.help}" for f in FRAMEWORKS.values())
        + " (default: tf)",
    )
    p.add_argument(
        "--gpuless", action="store_true", help="capture GPU-less even if a GPU is present"
    )
    p.add_argument(
        "--tuning",
        default=None,
        metavar="FILE",
        help="a tuning table written by mirai tune on a GPU: build GPU-less with its choices",
    )
    p.add_argument("--ptxas", default=None, help="path of the ptxas to use (default: Triton's)")
    p.add_argument("--ptx-version", type=int, default=None, help="PTX ISA version, e.g. 80")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    p.set_defaults(func=run)


def run(args) -> int:
    import mirai

    path = Path(args.file)
    if not path.is_file():
        raise MiraiError(f"no such file: {path}")
    spec = getattr(load_user_module(path), "MIRAI_BUILD", None)
    if not isinstance(spec, dict) or "op" not in spec:
        raise MiraiError(
            f"{path} defines no MIRAI_BUILD = {{'op': fn, 'sample_inputs': [...]}}; add one, or run "
            "the file with python if it calls mirai.build itself"
        )
    samples = spec.get("sample_inputs")
    if callable(samples):
        samples = samples()
    keys = ("target", "precision", "dynamic", "gemm", "fuse", "frameworks", "buckets", "inference")
    options = {k: spec[k] for k in keys if k in spec}
    for key in keys:
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    result = mirai.build(
        spec["op"],
        sample_inputs=samples,
        output_dir=args.output_dir,
        gpu=False if args.gpuless else None,
        ptxas=args.ptxas,
        ptx_version=args.ptx_version,
        tuning=args.tuning,
        progress=not args.quiet,
        **options,
    )
    print(f"{', '.join(result.ops)}: {len(result.files)} files in {result.output_dir}/")
    return 0
