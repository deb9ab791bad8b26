"""The `mirai` command line: each subcommand lives in its own module and registers itself here.

mirai build examples/pffn.py --target sm_80,sm_90
mirai inspect generated --arch sm_86
mirai serve --port 8000
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand name -> module with `register(subparsers)`; the module's parser sets `func`.
SUBCOMMANDS = {
    "build": "mirai.commands.build",
    "verify": "mirai.commands.verify",
    "inspect": "mirai.commands.inspect",
    "serve": "mirai.explorer.cli",
}


def make_parser() -> argparse.ArgumentParser:
    from mirai import __version__

    parser = argparse.ArgumentParser(prog="mirai", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"mirai {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    from mirai.errors import MiraiError

    try:
        return int(args.func(args) or 0)
    except MiraiError as err:
        print(f"mirai {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
