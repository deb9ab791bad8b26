"""`mirai verify FILE --generated DIR`: run generated ops on this GPU against PyTorch eager.

FILE is the file the ops were built from: it defines MIRAI_BUILD = {"op", "sample_inputs"}, or a
SUITE of entries {name: (op, sample_inputs(batch), ...)} of which --function picks one. For a dynamic
build every --batches size is checked; a static build is checked at its own shapes. Prints a table
of relative errors (forward outputs and every gradient); exit status 1 if one exceeds the tolerance.

    mirai verify examples/pffn_dynamic.py --generated generated --batches 64,2000,8000
"""

from __future__ import annotations

import argparse

from mirai.commands import load_user_module
from mirai.errors import MiraiError


def register(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="check generated ops against PyTorch eager on a GPU",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="the Python file the ops were built from")
    p.add_argument("--generated", "-g", default="generated", help="the generated folder")
    p.add_argument("--function", help="entry of the file's SUITE to verify")
    p.add_argument("--batches", default="", help="batch sizes for a dynamic build, e.g. 64,2000")
    p.set_defaults(func=run)


def run(args) -> int:
    import torch

    from mirai.verify import table, verify

    if not torch.cuda.is_available():
        raise MiraiError("mirai verify needs a CUDA GPU (the generated kernels run there)")
    module = load_user_module(args.file)
    if args.function:
        suite = getattr(module, "SUITE", {})
        if args.function not in suite:
            raise MiraiError(f"{args.file} has no SUITE entry {args.function!r}")
        op, samples = suite[args.function][:2]
    else:
        spec = getattr(module, "MIRAI_BUILD", None)
        if not isinstance(spec, dict):
            raise MiraiError(
                f"{args.file} defines no MIRAI_BUILD; name a SUITE entry with --function"
            )
        op, samples = spec["op"], spec["sample_inputs"]
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    rows = verify(op, samples, args.generated, batches)
    print(table(rows))
    return 0 if all(r.ok for r in rows) else 1
