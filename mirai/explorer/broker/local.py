"""A broker-mode cluster on this machine, in the foreground (`make cluster`): a redis-server with
append-only persistence in FOLDER, two API replicas on PORT and PORT+1, and N `mirai worker`
processes; the replicas' and workers' output goes to the terminal. Ctrl-C (or SIGTERM) stops them
all, and one that exits on its own stops the rest.

    python -m mirai.explorer.broker.local --workers 2 --port 8000 --redis-port 6379 --dir .cluster
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="`mirai worker` processes")
    parser.add_argument("--pool", type=int, default=1, help="sandboxed workers in each")
    parser.add_argument("--port", type=int, default=8000, help="first replica's port")
    parser.add_argument("--redis-port", type=int, default=6379)
    parser.add_argument("--dir", type=Path, default=Path(".cluster"), help="Redis's data")
    parser.add_argument("extra", nargs="*", help="more flags for replicas and workers (after --)")
    return parser.parse_args(argv)


def commands(args: argparse.Namespace) -> list[list[str]]:
    redis = shutil.which("redis-server")
    if not redis:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    args.dir.mkdir(parents=True, exist_ok=True)
    url = f"redis://127.0.0.1:{args.redis_port}/0"
    store = [redis, "--bind", "127.0.0.1", "--port", str(args.redis_port)]
    store += ["--dir", str(args.dir.resolve()), "--appendonly", "yes", "--save", ""]
    replicas = [
        [sys.executable, "-m", "mirai.explorer", "--broker", url, "--port", str(port), *args.extra]
        for port in (args.port, args.port + 1)
    ]
    workers = [
        [sys.executable, "-m", "mirai.cli", "worker", "--broker", url, "--name", f"local-{n}"]
        + ["--workers", str(args.pool), *args.extra]
        for n in range(args.workers)
    ]
    return [store, *replicas, *workers]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    procs: list[subprocess.Popen] = []
    stopping = False

    def stop(*_) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for command in commands(args):
            # Own sessions: Ctrl-C reaches this process only, which stops them in order.
            procs.append(subprocess.Popen(command, start_new_session=True))
            time.sleep(0.3 if len(procs) == 1 else 0)
        print(
            f"cluster: http://127.0.0.1:{args.port} and http://127.0.0.1:{args.port + 1},"
            f" {args.workers} workers, Redis on 127.0.0.1:{args.redis_port}; Ctrl-C stops it",
            file=sys.stderr,
        )
        while not stopping and all(proc.poll() is None for proc in procs):
            time.sleep(0.2)
    finally:
        for proc in reversed(procs):  # workers, replicas, then Redis (which saves its file)
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()  # then reaped: nothing of the cluster outlives this process
                proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
