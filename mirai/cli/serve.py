"""`mirai serve`: run the explorer's HTTP service.

mirai serve --host 127.0.0.1 --port 8000 --workers 2 --allow-user-tool cat
mirai serve --broker redis://127.0.0.1:6379/0      # a replica; `mirai worker` runs the requests
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the explorer (HTTP API + web page)",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    add_pool_arguments(parser)
    parser.add_argument(
        "--queue-size",
        type=int,
        help="requests that may wait for a worker (default 16; one client at most half)",
    )
    parser.add_argument(
        "--max-body-mb", type=float, help="largest request body in MiB (default 4); more is a 413"
    )
    parser.add_argument("--cache-entries", type=int, help="results kept in the result cache")
    parser.add_argument(
        "--static-dir", type=Path, help="the built web page (default: the package's)"
    )
    parser.add_argument(
        "--queue-wait",
        type=float,
        dest="queue_wait_s",
        help="broker mode: a job no worker has taken by then fails (default 600 s)",
    )
    parser.set_defaults(func=serve)


def add_pool_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a worker pool and of the broker, shared by `mirai serve` and `mirai worker`."""
    parser.add_argument(
        "--broker",
        metavar="URL",
        help="redis://HOST:PORT/N: jobs, results and permalinks in Redis, run by `mirai worker`",
    )
    parser.add_argument("--workers", type=int, help="pre-warmed worker processes (default 2)")
    parser.add_argument(
        "--timeout", type=float, dest="request_timeout_s", help="seconds per request (default 20)"
    )
    parser.add_argument(
        "--tool-timeout",
        type=float,
        dest="tool_timeout_s",
        help="seconds per tool (default 20, at most --timeout)",
    )
    parser.add_argument("--memory-limit-mb", type=int, help="memory a request may add to a worker")
    parser.add_argument(
        "--max-worker-requests", type=int, help="requests a worker serves before it is replaced"
    )
    parser.add_argument(
        "--max-tries",
        type=int,
        help="broker mode: runs of a job whose worker was lost, before it fails (default 2)",
    )
    parser.add_argument("--cache-dir", type=Path, help="root of the Triton caches and worker logs")
    parser.add_argument(
        "--allow-user-tool",
        action="append",
        dest="allowed_user_tools",
        metavar="NAME",
        help="allow `user_tool` to run this executable (repeatable)",
    )
    parser.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_const",
        const=False,
        help="run workers without bubblewrap: only for one user on their own machine",
    )
    parser.add_argument(
        "--allow-user-tools",
        dest="any_user_tool",
        action="store_const",
        const=True,
        help="`user_tool` may run any executable, by name or path (one user on their own machine; "
        "still sandboxed unless --no-sandbox)",
    )
    parser.add_argument("--max-processes", type=int, help="processes one request may run (64)")
    parser.add_argument("--scratch-mb", type=int, help="a sandbox's writable tmpfs in MiB (1024)")
    parser.add_argument("--log-level", default="info")


SETTING_ARGS = (
    "workers",
    "queue_size",
    "request_timeout_s",
    "tool_timeout_s",
    "memory_limit_mb",
    "max_body_mb",
    "sandbox",
    "any_user_tool",
    "max_processes",
    "scratch_mb",
    "cache_entries",
    "max_worker_requests",
    "cache_dir",
    "allowed_user_tools",
    "static_dir",
    "broker",
    "max_tries",
    "queue_wait_s",
)


def settings_of(args: argparse.Namespace):
    """The settings: env vars, then the flags this command has."""
    from mirai.explorer.settings import Settings

    given = {name: getattr(args, name) for name in SETTING_ARGS if hasattr(args, name)}
    return Settings.from_env(**given)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from mirai.explorer.app import create_app

    settings = settings_of(args)
    # A replica runs no user code (its workers do, sandboxed); the embedded server does.
    ready = broker_ready(settings) if settings.broker else sandbox_ready(settings)
    if not ready:
        return 2
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def broker_ready(settings) -> bool:
    """Say which Redis this replica uses and whether it keeps permalinks across a restart."""
    from mirai.explorer.broker.connection import check_url, durability, sync_client
    from mirai.explorer.errors import ExplorerError

    try:
        client = sync_client(check_url(settings.broker))
    except ExplorerError as err:
        print(f"mirai serve: {err.message} ({err.detail})", file=sys.stderr)
        return False
    warning = durability(client).warning()
    client.close()
    print(
        f"mirai serve: broker {settings.broker}: requests run on `mirai worker` hosts",
        file=sys.stderr,
    )
    if warning:
        print(f"mirai serve: WARNING: {warning}", file=sys.stderr)
    return True


def sandbox_ready(settings, command: str = "serve") -> bool:
    """Refuse to serve without a working sandbox unless told --no-sandbox; say which it is."""
    from mirai.explorer import sandbox
    from mirai.explorer.errors import ExplorerError

    if not settings.sandbox:
        print(
            f"mirai {command}: WARNING: the sandbox is off (--no-sandbox): user code and tools run "
            "with this server's rights; use this only on a machine you alone use"
            + (
                "; it answers requests from this machine's loopback only (Host and Origin checked)"
                if command == "serve"
                else ""
            ),
            file=sys.stderr,
        )
        return True
    try:
        sandbox.check_works()
    except ExplorerError as err:
        print(f"mirai {command}: {err.message}\n{err.detail}", file=sys.stderr)
        return False
    print(
        f"mirai {command}: {sandbox.describe(True)}: every request runs in bubblewrap",
        file=sys.stderr,
    )
    return True
