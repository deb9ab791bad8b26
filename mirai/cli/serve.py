"""`mirai serve`: run the explorer's HTTP service.

mirai serve --host 127.0.0.1 --port 8000 --workers 2 --allow-user-tool cat
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--log-level", default="info")
    parser.set_defaults(func=serve)


SETTING_ARGS = (
    "workers",
    "queue_size",
    "request_timeout_s",
    "tool_timeout_s",
    "memory_limit_mb",
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
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0
