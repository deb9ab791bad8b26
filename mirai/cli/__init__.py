"""The `mirai` command line: each subcommand lives in a module of this package, listed in SUBCOMMANDS.

mirai build examples/pffn.py --target sm_80,sm_90
mirai tune examples/pffn.py --batches 64,8000 -o tuning.json   (on a GPU)
mirai inspect generated --arch sm_86
mirai serve --port 8000
mirai worker --broker redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import sys

from mirai.cli import build, inspect, serve, tune, verify, worker

# Each module's `register(subparsers)` adds its subcommand, whose parser sets `func`; a new
# subcommand is one module and one entry here.
SUBCOMMANDS = (build, tune, verify, inspect, serve, worker)


def make_parser() -> argparse.ArgumentParser:
    from mirai import __version__

    parser = argparse.ArgumentParser(
        prog="mirai",
        description="Export PyTorch functions as framework ops built from Triton kernels, and explore every IR on the way.",
    )
    parser.add_argument("--version", action="version", version=f"mirai {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    from mirai.errors import MiraiError

    try:
        return int(args.func(args) or 0)
    except MiraiError as err:
        print(f"mirai {args.command}: error: {err}", file=sys.stderr)
        return 2
