"""`mirai worker`: run a pool of sandboxed, pre-warmed workers that take the explorer's requests from
a broker (Redis), for the `mirai serve --broker ...` replicas; on any number of hosts.

mirai worker --broker redis://10.0.0.5:6379/0 --workers 4
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from mirai.cli.serve import add_pool_arguments, sandbox_ready, settings_of


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="run explorer workers for `mirai serve --broker` replicas",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_pool_arguments(parser)
    parser.add_argument("--name", help="this worker's name in /health (default HOST:PID)")
    parser.set_defaults(func=work)


def work(args: argparse.Namespace) -> int:
    from mirai.explorer.broker.connection import check_url
    from mirai.explorer.broker.node import serve
    from mirai.explorer.errors import ExplorerError

    settings = settings_of(args)
    if not settings.broker:
        print("mirai worker: --broker redis://HOST:PORT/N is required", file=sys.stderr)
        return 2
    try:
        check_url(settings.broker)
    except ExplorerError as err:
        print(f"mirai worker: {err.message} ({err.detail})", file=sys.stderr)
        return 2
    if not sandbox_ready(settings, "worker"):
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        asyncio.run(serve(settings, args.name))
    except ExplorerError as err:
        print(f"mirai worker: {err.message}\n{err.detail}", file=sys.stderr)
        return 1
    return 0
