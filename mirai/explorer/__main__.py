"""`python -m mirai.explorer [serve options]`: the same as `mirai serve`, without the other commands."""

from __future__ import annotations

import argparse
import sys

from mirai.cli.serve import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirai.explorer")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
