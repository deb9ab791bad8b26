"""`mirai serve`: run the explorer's HTTP service.

mirai serve --host 127.0.0.1 --port 8000 --workers 2 --allow-user-tool cat
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
    parser.add_argument("--workers", type=int, help="pre-warmed worker processes (default 2)")
    parser.add_argument(
        "--queue-size",
        type=int,
        help="requests that may wait for a worker (default 16; one client at most half)",
    )
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
        "--max-body-mb", type=float, help="largest request body in MiB (default 4); more is a 413"
    )
    parser.add_argument("--cache-entries", type=int, help="results kept in the result cache")
    parser.add_argument(
        "--max-worker-requests", type=int, help="requests a worker serves before it is replaced"
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
        "--static-dir", type=Path, help="the built web page (default: the package's)"
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
    parser.set_defaults(func=serve)


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
)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from mirai.explorer.app import create_app
    from mirai.explorer.settings import Settings

    settings = Settings.from_env(**{name: getattr(args, name) for name in SETTING_ARGS})
    if not _sandbox_ready(settings):
        return 2
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _sandbox_ready(settings) -> bool:
    """Refuse to serve without a working sandbox unless told --no-sandbox; say which it is."""
    from mirai.explorer import sandbox
    from mirai.explorer.errors import ExplorerError

    if not settings.sandbox:
        print(
            "mirai serve: WARNING: the sandbox is off (--no-sandbox): user code and tools run "
            "with this server's rights; use this only on a machine you alone use",
            file=sys.stderr,
        )
        return True
    try:
        sandbox.check_works()
    except ExplorerError as err:
        print(f"mirai serve: {err.message}\n{err.detail}", file=sys.stderr)
        return False
    print(
        f"mirai serve: {sandbox.describe(True)}: every request runs in bubblewrap", file=sys.stderr
    )
    return True
